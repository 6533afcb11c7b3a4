# shellcheck shell=bash
# crash (research: a server crashing, client calls failing with a
# connection error): the target server's brick process (glusterfsd) killed
# with SIGKILL. At the end the brick is started again (`volume start
# force`, which starts only the bricks that are down), the agent attached to
# the new process (same device), and the clients given time to reconnect.
FAULT_TARGET[crash]=server
FAULT_CAUSE[crash]=crash

fault_crash_start() { # node
    local pid
    pid=$(fleet_brick_pid "$1")
    [ -n "$pid" ] || return 0
    kill -9 "$pid"
    echo "$pid" >"$FLEET_WORK/$1/crashed.pid"
}

fault_crash_stop() { # node
    local node=$1 pid
    [ -s "$FLEET_WORK/$node/crashed.pid" ] || return 0
    rm -f "$FLEET_WORK/$node/crashed.pid"
    fleet_in s1 gluster --mode=script volume start "$FLEET_VOLUME" force >/dev/null
    fleet_wait "the brick of $node back" 60 fleet_brick_pid "$node"
    pid=$(fleet_brick_pid "$node")
    fleet_attach "$node" "$pid"
    fleet_wait "all bricks online" 60 fleet_bricks_online "${#SERVER_NODES[@]}"
    # The clients retry a lost brick every 3 s.
    sleep 4
}
