# shellcheck shell=bash
# disk-hog (research: a rogue dd reading 256 MB blocks from the server's
# disk): on the target server, a reader of its brick's loop device and a
# writer of a file on the brick, both with large O_DIRECT blocks, competing
# with glusterfsd for the same disk.
FAULT_TARGET[disk-hog]=server
FAULT_CAUSE[disk-hog]=disk

fault_disk_hog_start() { # node
    local node=$1 d=$FLEET_WORK/$1
    fleet_in "$node" sh -c 'while :; do dd if="$1" of=/dev/null bs=4M count=64 iflag=direct 2>/dev/null; done' \
        sh "$(cat "$d/loop")" </dev/null >/dev/null 2>&1 &
    disown $!
    echo $! >"$d/fault-hog-reader.pid"
    fleet_in "$node" sh -c 'while :; do dd if=/dev/zero of="$1" bs=4M count=32 oflag=direct conv=notrunc 2>/dev/null; done' \
        sh "$d/brick/hog" </dev/null >/dev/null 2>&1 &
    disown $!
    echo $! >"$d/fault-hog-writer.pid"
}

fault_disk_hog_stop() { # node
    fleet_kill_pidfile "$FLEET_WORK/$1/fault-hog-reader.pid"
    fleet_kill_pidfile "$FLEET_WORK/$1/fault-hog-writer.pid"
    fleet_in "$1" rm -f "$FLEET_WORK/$1/brick/hog"
}
