# shellcheck shell=bash
# send-pktloss-5: send-pktloss at 5 % whatever FLEET_PKTLOSS says
# (Khadke et al. §5.2's levels are 5, 20 and 50 %), so one run can hold
# every level.
FAULT_TARGET[send-pktloss-5]=worker
FAULT_CAUSE[send-pktloss-5]=network

fault_send_pktloss_5_start() { fleet_pktloss_on "$1" output 5; }
fault_send_pktloss_5_stop() { fleet_pktloss_off "$1" output; }
