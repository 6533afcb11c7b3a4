# shellcheck shell=bash
# The fleet's network: one namespace holding a bridge (FLEET_NS_BR), server
# namespaces s1..sN at 10.214.0.1..N and client namespaces c1..cM at
# 10.214.0.101..100+M, each joined to the bridge by a veth pair (eth0 inside,
# v<name> on the bridge side). 10.214.0.0/24 is never routed anywhere.
# Every server and client also gets a "holder" process in its own mount
# namespace (unshare -m, private propagation): GlusterFS's daemons use fixed
# paths (/var/lib/glusterd, /run/gluster, /var/log/glusterfs), so each server
# sees its own folders bind-mounted there; everything of a node runs with
# `fleet_in NODE CMD...` (nsenter into the holder's network and mount ns).
# Another fleet (scripts/mapreduce-eval) names its own nodes: it sets
# FLEET_NODES and each node's address in FLEET_IPS, calls
# fleet_topology_nodes_up, and uses its own FLEET_PREFIX, so both fleets
# can run at once. Shared by both: the namespaces, `fleet_in`, a node's
# own disk image (fleet_disk_up), fleet_wait and fleet_node_pids.

FLEET_NET=10.214.0
# node name -> address, for fleets whose names are not s<i>/c<i>.
declare -A FLEET_IPS=()

fleet_ip() { # node name -> address
    if [ -n "${FLEET_IPS[$1]:-}" ]; then
        echo "${FLEET_IPS[$1]}"
        return
    fi
    case "$1" in
        s*) echo "$FLEET_NET.${1#s}" ;;
        c*) echo "$FLEET_NET.$((100 + ${1#c}))" ;;
    esac
}

fleet_ns() { echo "${FLEET_PREFIX}$1"; }

# Runs a command inside NODE's network and mount namespaces.
fleet_in() {
    local node=$1
    shift
    nsenter -t "$(cat "$FLEET_WORK/$node/holder.pid")" -m -n -- "$@"
}

fleet_topology_up() { # servers clients
    local servers=$1 clients=$2 i
    FLEET_NODES=()
    for ((i = 1; i <= servers; i++)); do FLEET_NODES+=("s$i"); done
    for ((i = 1; i <= clients; i++)); do FLEET_NODES+=("c$i"); done
    fleet_topology_nodes_up
}

# The bridge and a namespace with a holder for every node of FLEET_NODES,
# at fleet_ip's address.
fleet_topology_nodes_up() {
    local node br
    br=$(fleet_ns br)
    ip netns add "$br"
    ip -n "$br" link set lo up
    ip -n "$br" link add br0 type bridge
    ip -n "$br" link set br0 up
    for node in "${FLEET_NODES[@]}"; do
        local ns
        ns=$(fleet_ns "$node")
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        ip link add eth0 netns "$ns" type veth peer name "v$node" netns "$br"
        ip -n "$br" link set "v$node" master br0
        ip -n "$br" link set "v$node" up
        ip -n "$ns" addr add "$(fleet_ip "$node")/24" dev eth0
        ip -n "$ns" link set eth0 up
        mkdir -p "$FLEET_WORK/$node"
        # The holder: a process sitting in the node's network namespace and
        # in a new private mount namespace, for nsenter to join.
        ip netns exec "$ns" unshare -m --propagation private \
            sh -c 'echo $$ > "$1"; exec sleep infinity' sh "$FLEET_WORK/$node/holder.pid" \
            </dev/null >/dev/null 2>&1 &
        disown $!
        for _ in $(seq 50); do [ -s "$FLEET_WORK/$node/holder.pid" ] && break; sleep 0.1; done
        [ -s "$FLEET_WORK/$node/holder.pid" ] || { echo "fleet: no holder for $node" >&2; return 1; }
    done
}

# Deletes the namespaces of this run (and stale ones of runs whose process is
# gone: the prefix carries the pid).
fleet_topology_down() {
    local node pid name
    for node in "${FLEET_NODES[@]}"; do
        pid=$(cat "$FLEET_WORK/$node/holder.pid" 2>/dev/null || true)
        [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    done
    for name in $(ip netns list | awk '{print $1}'); do
        case "$name" in
            "$FLEET_PREFIX"*) ip netns del "$name" 2>/dev/null || true ;;
        esac
    done
}

# A disk of NODE's own: an ext4 image of MIB MiB (sparse) in
# $FLEET_WORK/NODE/disk.img on a loop device (its path in
# $FLEET_WORK/NODE/loop), mounted at DIR inside the node's mount namespace
# only (DIR may be the same path on every node: each sees its own disk).
fleet_disk_up() { # node mib dir
    local node=$1 mib=$2 dir=$3 d=$FLEET_WORK/$1 loop
    truncate -s "${mib}M" "$d/disk.img"
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$d/disk.img"
    loop=$(losetup -f --show "$d/disk.img")
    echo "$loop" >"$d/loop"
    mkdir -p "$dir"
    fleet_in "$node" mount "$loop" "$dir"
}

# Unmounts NODE's disk from DIR (in its namespace) and frees its loop device.
fleet_disk_down() { # node dir
    fleet_in "$1" umount -l "$2" 2>/dev/null || true
    [ -s "$FLEET_WORK/$1/loop" ] && losetup -d "$(cat "$FLEET_WORK/$1/loop")" 2>/dev/null || true
}

# Pids of every process in NODE's network namespace but its holder.
fleet_node_pids() {
    local holder
    holder=$(cat "$FLEET_WORK/$1/holder.pid" 2>/dev/null) || return 0
    ip netns pids "$(fleet_ns "$1")" 2>/dev/null | grep -vx "$holder" || true
}

fleet_wait() { # what seconds cmd...
    local what=$1 secs=$2
    shift 2
    for ((t = 0; t < secs * 5; t++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "fleet: timed out after ${secs}s waiting for $what" >&2
    return 1
}
