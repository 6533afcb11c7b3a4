# shellcheck shell=bash
# hang (research: a server hanging, client calls that never return): the
# target server's brick process (glusterfsd) stopped with SIGSTOP for the
# whole phase, at least FAULT_PHASE_SECS[hang] seconds so client calls stay
# in flight past `peers --hang-after` (30 s); SIGCONT at the end (and by the
# cleanup of any exit).
FAULT_TARGET[hang]=server
FAULT_CAUSE[hang]=hang
FAULT_PHASE_SECS[hang]=45

fault_hang_start() { # node
    local pid
    pid=$(fleet_brick_pid "$1")
    [ -n "$pid" ] || return 0
    echo "$pid" >"$FLEET_WORK/$1/stopped.pid"
    kill -STOP "$pid"
}

fault_hang_stop() { # node
    [ -s "$FLEET_WORK/$1/stopped.pid" ] || return 0
    kill -CONT "$(cat "$FLEET_WORK/$1/stopped.pid")" 2>/dev/null || true
    rm -f "$FLEET_WORK/$1/stopped.pid"
}
