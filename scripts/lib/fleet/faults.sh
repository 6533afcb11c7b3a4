# shellcheck shell=bash
# The faults: one file per fault in faults/, each setting FAULT_TARGET[name]
# (server, client or none), FAULT_CAUSE[name] (the cause a right finding
# names: disk, network, errno, crash, hang, or none), for cause errno
# FAULT_ERRNO[name] (the errno a right finding names, e.g. ENOSPC),
# optionally FAULT_PHASE_SECS[name] (the shortest phase the fault needs,
# longer than --phase-secs), and defining fault_<name>_start NODE and
# fault_<name>_stop NODE (dashes in the name become underscores). A new fault
# is a new file there.

declare -A FAULT_TARGET FAULT_CAUSE FAULT_ERRNO FAULT_PHASE_SECS
for fleet_fault_file in "$(dirname "${BASH_SOURCE[0]}")"/faults/*.sh; do
    # shellcheck disable=SC1090
    source "$fleet_fault_file"
done
unset fleet_fault_file
FLEET_ALL_FAULTS=(disk-hog disk-busy network-hog slow-client-link receive-pktloss send-pktloss err-space err-files crash hang none)

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

# Packet loss shared by receive-pktloss and send-pktloss: FLEET_PKTLOSS
# percent (1-100, default 20) of the packets through HOOK (input: received,
# output: sent) of NODE's network namespace dropped at random, by an
# nftables table of its own (fleet_pktloss_<hook>), deleted by
# fleet_pktloss_off.
FLEET_PKTLOSS=${FLEET_PKTLOSS:-20}

fleet_pktloss_on() { # node input|output
    [[ $FLEET_PKTLOSS =~ ^[1-9][0-9]?$|^100$ ]] || { echo "fleet: FLEET_PKTLOSS must be a percentage 1-100 (got '$FLEET_PKTLOSS')" >&2; return 1; }
    local table=fleet_pktloss_$2
    fleet_in "$1" nft -f - <<NFT
table inet $table {
    chain drop_some {
        type filter hook $2 priority 0; policy accept;
        numgen random mod 100 < $FLEET_PKTLOSS drop
    }
}
NFT
}

fleet_pktloss_off() { # node input|output
    fleet_in "$1" nft delete table inet "fleet_pktloss_$2" 2>/dev/null || true
}

fault_fn() { # fault start|stop -> the function's name
    local name=${1//-/_}
    echo "fault_${name}_$2"
}

# Kills the process (and its children) whose pid is in FILE, then removes FILE.
fleet_kill_pidfile() {
    local file=$1 pid
    [ -s "$file" ] || return 0
    pid=$(cat "$file")
    # Stopped first, so a loop cannot start a new child in between.
    kill -STOP "$pid" 2>/dev/null || true
    pkill -9 -P "$pid" 2>/dev/null || true
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$file"
}
