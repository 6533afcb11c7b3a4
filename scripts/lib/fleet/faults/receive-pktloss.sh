# shellcheck shell=bash
# receive-pktloss (research: PVFS's receive-pktloss, a server dropping a
# share of the packets it receives): an nftables table in the target
# server's network namespace whose input-hook chain drops FLEET_PKTLOSS
# percent (default 20) of the packets at random (`numgen random mod 100`;
# netem is not in this kernel). Stop removes the table.
FAULT_TARGET[receive-pktloss]=server
FAULT_CAUSE[receive-pktloss]=network

fault_receive_pktloss_start() { fleet_pktloss_on "$1" input; }
fault_receive_pktloss_stop() { fleet_pktloss_off "$1" input; }
