# shellcheck shell=bash
# err-space (research: a server's storage partition too small, ENOSPC from
# its write): the target server's brick kept full by a filler that, every
# 50 ms, preallocates whatever space is free (root's reserved blocks too:
# glusterfsd runs as root), so the brick's writes fail with ENOSPC, which
# GlusterFS carries to the client's write. A one-off fill is not enough:
# ddw truncates and rewrites its files, giving back the space it needs.
# Seen under ddw (it rewrites files on every brick); ddr writes nothing.
FAULT_TARGET[err-space]=server
FAULT_CAUSE[err-space]=errno
FAULT_ERRNO[err-space]=ENOSPC

fault_err_space_start() { # node
    local node=$1 brick=$FLEET_WORK/$1/brick
    fleet_in "$node" sh -c '
        i=0
        while :; do
            free=$(stat -f -c "%f %S" "$1" | awk "{print \$1 * \$2}")
            if [ "$free" -gt 0 ]; then
                fallocate -l "$free" "$1/fill-$i" 2>/dev/null || rm -f "$1/fill-$i"
                i=$((i + 1))
            fi
            sleep 0.05
        done' sh "$brick" </dev/null >/dev/null 2>&1 &
    disown $!
    echo $! >"$FLEET_WORK/$node/fault-filler.pid"
}

fault_err_space_stop() { # node
    fleet_kill_pidfile "$FLEET_WORK/$1/fault-filler.pid"
    fleet_in "$1" sh -c 'rm -f "$1"/fill-*' sh "$FLEET_WORK/$1/brick"
}
