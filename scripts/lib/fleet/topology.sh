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

FLEET_NET=10.214.0

fleet_ip() { # node name -> address
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
    local servers=$1 clients=$2 node br
    br=$(fleet_ns br)
    ip netns add "$br"
    ip -n "$br" link set lo up
    ip -n "$br" link add br0 type bridge
    ip -n "$br" link set br0 up
    FLEET_NODES=()
    for ((i = 1; i <= servers; i++)); do FLEET_NODES+=("s$i"); done
    for ((i = 1; i <= clients; i++)); do FLEET_NODES+=("c$i"); done
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
