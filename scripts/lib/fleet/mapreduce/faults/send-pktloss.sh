# shellcheck shell=bash
# send-pktloss: as receive-pktloss, on the packets the target worker sends
# (the output hook).
FAULT_TARGET[send-pktloss]=worker
FAULT_CAUSE[send-pktloss]=network

fault_send_pktloss_start() { fleet_pktloss_on "$1" output; }
fault_send_pktloss_stop() { fleet_pktloss_off "$1" output; }
