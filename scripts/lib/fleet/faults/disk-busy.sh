# shellcheck shell=bash
# disk-busy (research: a RAID controller scanning for media defects keeps
# the disk busy): on the target server, small (4 KiB) random O_DIRECT reads
# of its brick's loop device and random 4 KiB O_DIRECT writes into a 64 MiB
# file on the brick, as fast as they go.
FAULT_TARGET[disk-busy]=server
FAULT_CAUSE[disk-busy]=disk

fault_disk_busy_start() { # node
    local node=$1 d=$FLEET_WORK/$1
    fleet_in "$node" python3 -c '
import mmap, os, random, sys
dev, path = sys.argv[1], sys.argv[2]
buf = mmap.mmap(-1, 4096)
r = os.open(dev, os.O_RDONLY | os.O_DIRECT)
w = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600)
os.posix_fallocate(w, 0, 64 << 20)
blocks = os.lseek(r, 0, os.SEEK_END) // 4096
rng = random.Random(1)
while True:
    os.preadv(r, [buf], rng.randrange(blocks) * 4096)
    os.pwritev(w, [buf], rng.randrange(16384) * 4096)
' "$(cat "$d/loop")" "$d/brick/busy" </dev/null >/dev/null 2>&1 &
    disown $!
    echo $! >"$d/fault-busy.pid"
}

fault_disk_busy_stop() { # node
    fleet_kill_pidfile "$FLEET_WORK/$1/fault-busy.pid"
    fleet_in "$1" rm -f "$FLEET_WORK/$1/brick/busy"
}
