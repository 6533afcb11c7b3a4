# shellcheck shell=bash
# send-pktloss-50: send-pktloss at 50 % whatever FLEET_PKTLOSS says
# (Khadke et al. §5.2's levels are 5, 20 and 50 %), so one run can hold
# every level.
FAULT_TARGET[send-pktloss-50]=worker
FAULT_CAUSE[send-pktloss-50]=network

fault_send_pktloss_50_start() { fleet_pktloss_on "$1" output 50; }
fault_send_pktloss_50_stop() { fleet_pktloss_off "$1" output; }
