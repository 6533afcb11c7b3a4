# shellcheck shell=bash
# The MapReduce fleet's faults: one file per fault in this folder, each
# setting FAULT_TARGET[name] (worker or none), FAULT_CAUSE[name] (the cause a
# right finding names) and defining fault_<name>_start NODE and
# fault_<name>_stop NODE, as scripts/lib/fleet/faults.sh's, with the same
# helpers (fault-helpers.sh).
# shellcheck source=../fault-helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/../fault-helpers.sh"
declare -A FAULT_TARGET FAULT_CAUSE FAULT_ERRNO FAULT_PHASE_SECS
fleet_source_faults "$(dirname "${BASH_SOURCE[0]}")/faults"
MR_ALL_FAULTS=(disk-hog receive-pktloss-5 receive-pktloss receive-pktloss-50 send-pktloss-5 send-pktloss send-pktloss-50 none)
