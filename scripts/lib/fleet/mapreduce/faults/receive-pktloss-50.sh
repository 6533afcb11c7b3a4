# shellcheck shell=bash
# receive-pktloss-50: receive-pktloss at 50 % whatever FLEET_PKTLOSS says
# (Khadke et al. §5.2's levels are 5, 20 and 50 %), so one run can hold
# every level.
FAULT_TARGET[receive-pktloss-50]=worker
FAULT_CAUSE[receive-pktloss-50]=network

fault_receive_pktloss_50_start() { fleet_pktloss_on "$1" input 50; }
fault_receive_pktloss_50_stop() { fleet_pktloss_off "$1" input; }
