# shellcheck shell=bash
# The faults: one file per fault in faults/, each setting FAULT_TARGET[name]
# (server, client or none), FAULT_CAUSE[name] (the cause a right finding
# names: disk, network, errno, crash, hang, or none), for cause errno
# FAULT_ERRNO[name] (the errno a right finding names, e.g. ENOSPC),
# optionally FAULT_PHASE_SECS[name] (the shortest phase the fault needs,
# longer than --phase-secs), and defining fault_<name>_start NODE and
# fault_<name>_stop NODE (dashes in the name become underscores). A new fault
# is a new file there.

# shellcheck source=fault-helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/fault-helpers.sh"
declare -A FAULT_TARGET FAULT_CAUSE FAULT_ERRNO FAULT_PHASE_SECS
fleet_source_faults "$(dirname "${BASH_SOURCE[0]}")/faults"
FLEET_ALL_FAULTS=(disk-hog disk-busy network-hog slow-client-link receive-pktloss send-pktloss receive-pktloss-5 send-pktloss-5 err-space err-files crash hang none)

# Link shaping shared by network-hog and slow-client-link.
FLEET_SHAPE_RATE=${FLEET_SHAPE_RATE:-20mbit}

fleet_shape_link() { # node
    fleet_in "$1" tc qdisc replace dev eth0 root tbf rate "$FLEET_SHAPE_RATE" burst 32kb latency 400ms
    ip netns exec "$(fleet_ns br)" tc qdisc replace dev "v$1" root tbf rate "$FLEET_SHAPE_RATE" burst 32kb latency 400ms
}

fleet_unshape_link() { # node
    fleet_in "$1" tc qdisc del dev eth0 root 2>/dev/null || true
    ip netns exec "$(fleet_ns br)" tc qdisc del dev "v$1" root 2>/dev/null || true
}
