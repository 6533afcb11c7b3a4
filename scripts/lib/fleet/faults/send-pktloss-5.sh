# shellcheck shell=bash
# send-pktloss-5: send-pktloss at 5 % whatever FLEET_PKTLOSS says (issue 34
# asks 5 % and 20 % on this fleet, as PVFS's and Khadke's levels), so one
# run can hold both levels.
FAULT_TARGET[send-pktloss-5]=server
FAULT_CAUSE[send-pktloss-5]=network

fault_send_pktloss_5_start() { fleet_pktloss_on "$1" output 5; }
fault_send_pktloss_5_stop() { fleet_pktloss_off "$1" output; }
