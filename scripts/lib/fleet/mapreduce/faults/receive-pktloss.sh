# shellcheck shell=bash
# receive-pktloss (Khadke et al. §5.2's network-hog: "drop 5%, 20% and 50%
# of the packets in a network stream"): FLEET_PKTLOSS percent (default 20)
# of the packets the target worker receives dropped at random, by an
# nftables input-hook chain in its network namespace (the fleet's shared
# fleet_pktloss_on: `numgen random mod 100 < N drop`).
FAULT_TARGET[receive-pktloss]=worker
FAULT_CAUSE[receive-pktloss]=network

fault_receive_pktloss_start() { fleet_pktloss_on "$1" input; }
fault_receive_pktloss_stop() { fleet_pktloss_off "$1" input; }
