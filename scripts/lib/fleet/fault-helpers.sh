# shellcheck shell=bash
# What every fleet's faults share (scripts/lib/fleet/faults.sh for the
# GlusterFS fleet, mapreduce/faults.sh for the MapReduce one): the name of
# a fault's start and stop functions, killing a fault's process by its pid
# file, and random packet loss in a node's network namespace.

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

# Packet loss shared by receive-pktloss and send-pktloss: PERCENT (1-100;
# default FLEET_PKTLOSS, itself default 20) of the packets through HOOK
# (input: received, output: sent) of NODE's network namespace dropped at
# random, by an nftables table of its own (fleet_pktloss_<hook>), deleted
# by fleet_pktloss_off.
FLEET_PKTLOSS=${FLEET_PKTLOSS:-20}

fleet_pktloss_on() { # node input|output [percent]
    local pct=${3:-$FLEET_PKTLOSS}
    [[ $pct =~ ^[1-9][0-9]?$|^100$ ]] || { echo "fleet: packet loss must be a percentage 1-100 (got '$pct')" >&2; return 1; }
    local table=fleet_pktloss_$2
    fleet_in "$1" nft -f - <<NFT
table inet $table {
    chain drop_some {
        type filter hook $2 priority 0; policy accept;
        numgen random mod 100 < $pct drop
    }
}
NFT
}

fleet_pktloss_off() { # node input|output
    fleet_in "$1" nft delete table inet "fleet_pktloss_$2" 2>/dev/null || true
}

# Sources every fault file of folder DIR (one fault each; FAULT_TARGET and
# the other tables must be declared global before).
fleet_source_faults() { # DIR
    local file
    for file in "$1"/*.sh; do
        # shellcheck disable=SC1090
        source "$file"
    done
}
