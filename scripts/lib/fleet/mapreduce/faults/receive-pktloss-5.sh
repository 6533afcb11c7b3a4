# shellcheck shell=bash
# receive-pktloss-5: receive-pktloss at 5 % whatever FLEET_PKTLOSS says
# (Khadke et al. §5.2's levels are 5, 20 and 50 %), so one run can hold
# every level.
FAULT_TARGET[receive-pktloss-5]=worker
FAULT_CAUSE[receive-pktloss-5]=network

fault_receive_pktloss_5_start() { fleet_pktloss_on "$1" input 5; }
fault_receive_pktloss_5_stop() { fleet_pktloss_off "$1" input; }
