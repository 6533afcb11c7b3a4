# shellcheck shell=bash
# disk-hog (Khadke et al. §5.2: "write 2GB chunks continually to the disk
# and hog access to the disk"): on the target worker, a writer of a 2 GiB
# file on the worker's own disk (where its shuffle and spill files and its
# input copy are), 4 MiB blocks, synced at the end of each chunk, again and
# again, competing with the worker's JVMs for the disk. The writer loop runs
# in a session of its own, stopped as a whole (its process group, by id):
# killing the loop's shell alone left its running dd writing the rest of a
# 2 GiB chunk into the next phase (at the disk's 40 MiB/s, most of a
# fault-free phase: the hogged worker was flagged there too).
FAULT_TARGET[disk-hog]=worker
FAULT_CAUSE[disk-hog]=disk

fault_disk_hog_start() { # node
    local node=$1 d=$FLEET_WORK/$1
    rm -f "$d/fault-hog.pgid"
    # shellcheck disable=SC2016
    fleet_in "$node" setsid sh -c 'echo $$ >"$1"; while :; do dd if=/dev/zero of="$2" bs=4M count=512 conv=fsync 2>/dev/null; done' \
        sh "$d/fault-hog.pgid" "$MR_DISK/hog" </dev/null >/dev/null 2>&1 &
    disown $!
    fleet_wait "the disk hog on $node" 10 test -s "$d/fault-hog.pgid"
}

fault_disk_hog_stop() { # node
    local d=$FLEET_WORK/$1 pgid t
    if [ -s "$d/fault-hog.pgid" ]; then
        pgid=$(cat "$d/fault-hog.pgid")
        kill -9 -- "-$pgid" 2>/dev/null || true
        for ((t = 0; t < 50; t++)); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 0.1; done
        rm -f "$d/fault-hog.pgid"
    fi
    fleet_in "$1" rm -f "$MR_DISK/hog"
}
