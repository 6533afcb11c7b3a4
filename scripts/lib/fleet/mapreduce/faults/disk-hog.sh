# shellcheck shell=bash
# disk-hog (Khadke et al. §5.2: "write 2GB chunks continually to the disk
# and hog access to the disk"): on the target worker, a writer of a 2 GiB
# file on the worker's own disk (where its shuffle and spill files and its
# input copy are), 4 MiB blocks, synced at the end of each chunk, again and
# again, competing with the worker's JVMs for the disk.
FAULT_TARGET[disk-hog]=worker
FAULT_CAUSE[disk-hog]=disk

fault_disk_hog_start() { # node
    local node=$1 d=$FLEET_WORK/$1
    fleet_in "$node" sh -c 'while :; do dd if=/dev/zero of="$1" bs=4M count=512 conv=fsync 2>/dev/null; done' \
        sh "$MR_DISK/hog" </dev/null >/dev/null 2>&1 &
    disown $!
    echo $! >"$d/fault-hog-writer.pid"
}

fault_disk_hog_stop() { # node
    fleet_kill_pidfile "$FLEET_WORK/$1/fault-hog-writer.pid"
    fleet_in "$1" rm -f "$MR_DISK/hog"
}
