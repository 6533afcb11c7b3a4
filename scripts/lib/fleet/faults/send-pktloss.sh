# shellcheck shell=bash
# send-pktloss (research: PVFS's send-pktloss, a server dropping a share of
# the packets it sends): an nftables table in the target server's network
# namespace whose output-hook chain drops FLEET_PKTLOSS percent (default
# 20) of the packets at random (`numgen random mod 100`; netem is not in
# this kernel). Stop removes the table.
FAULT_TARGET[send-pktloss]=server
FAULT_CAUSE[send-pktloss]=network

fault_send_pktloss_start() { fleet_pktloss_on "$1" output; }
fault_send_pktloss_stop() { fleet_pktloss_off "$1" output; }
