# shellcheck shell=bash
# GlusterFS over the fleet: glusterd in every server namespace (its own
# /run, /var/lib/glusterd and /var/log/glusterfs in its mount namespace), one
# brick per server on its own ext4 loop image, a distributed volume over the
# servers' namespace addresses, FUSE mounts in the client namespaces.

FLEET_VOLUME=fleet

# Gives NODE's mount namespace its own GlusterFS state folders.
fleet_gluster_private_dirs() {
    local node=$1 d=$FLEET_WORK/$1
    mkdir -p "$d/glusterd" "$d/log" /var/lib/glusterd /var/log/glusterfs
    fleet_in "$node" mount -t tmpfs -o mode=0755 "fleet-run-$node" /run
    fleet_in "$node" mkdir -p /run/gluster /run/lock
    fleet_in "$node" mount --bind "$d/glusterd" /var/lib/glusterd
    fleet_in "$node" mount --bind "$d/log" /var/log/glusterfs
}

# The brick of server NODE: its own disk (fleet_disk_up: an ext4 image on a
# loop device), mounted in the server's mount namespace at
# $FLEET_WORK/NODE/brick.
fleet_brick_up() {
    local node=$1 d=$FLEET_WORK/$1
    fleet_disk_up "$node" "$FLEET_BRICK_MIB" "$d/brick"
    fleet_in "$node" mkdir -p "$d/brick/b"
}

fleet_gluster_up() { # servers clients
    local servers=$1 clients=$2 i node bricks=()
    for ((i = 1; i <= servers; i++)); do
        node=s$i
        fleet_gluster_private_dirs "$node"
        fleet_brick_up "$node"
        fleet_in "$node" glusterd -p /run/glusterd.pid
        bricks+=("$(fleet_ip "$node"):$FLEET_WORK/$node/brick/b")
    done
    for ((i = 1; i <= servers; i++)); do
        fleet_wait "glusterd on s$i" 30 fleet_in "s$i" gluster --mode=script pool list
    done
    for ((i = 2; i <= servers; i++)); do
        fleet_in s1 gluster --mode=script peer probe "$(fleet_ip "s$i")" >/dev/null
    done
    fleet_wait "all peers connected" 60 fleet_peers_connected "$servers"
    fleet_in s1 gluster --mode=script volume create "$FLEET_VOLUME" transport tcp "${bricks[@]}" force >/dev/null
    # O_DIRECT from the clients reaches the bricks (strict-o-direct, no
    # remote-dio), and no client-side caches: the workloads' reads and
    # writes reach the servers' disks, where the disk faults act. No
    # reserve: a brick whose disk is nearly full then gets ENOSPC from its
    # own write (err-space), rather than refusing the write itself with no
    # failed call to see.
    local opt
    for opt in storage.reserve=0 performance.strict-o-direct=on network.remote-dio=disable \
        performance.io-cache=off performance.read-ahead=off performance.quick-read=off \
        performance.write-behind=off performance.open-behind=off performance.stat-prefetch=off \
        performance.readdir-ahead=off performance.nl-cache=off; do
        fleet_in s1 gluster --mode=script volume set "$FLEET_VOLUME" "${opt%%=*}" "${opt#*=}" >/dev/null
    done
    fleet_in s1 gluster --mode=script volume start "$FLEET_VOLUME" >/dev/null
    fleet_wait "all bricks online" 60 fleet_bricks_online "$servers"
    # The FUSE client is started as mount.glusterfs starts it, but from a
    # copy of the binary named glusterfs: Debian's /usr/sbin/glusterfs is a
    # symlink to glusterfsd, so the agent (which names a program by its
    # executable) would give clients and bricks the same program, and
    # `peers` compares devices of one program. The copy keeps the name
    # GlusterFS itself needs for client mode (argv[0] "glusterfs").
    mkdir -p "$FLEET_WORK/bin"
    cp /usr/sbin/glusterfsd "$FLEET_WORK/bin/glusterfs"
    for ((i = 1; i <= clients; i++)); do
        node=c$i
        mkdir -p "$FLEET_WORK/$node/mnt" "$FLEET_WORK/$node/log"
        fleet_in "$node" mount --bind "$FLEET_WORK/$node/log" /var/log/glusterfs
        fleet_in "$node" "$FLEET_WORK/bin/glusterfs" --process-name fuse \
            --volfile-server="$(fleet_ip s1)" --volfile-id="/$FLEET_VOLUME" "$FLEET_WORK/$node/mnt"
        fleet_wait "the volume mounted on $node" 30 fleet_in "$node" mountpoint -q "$FLEET_WORK/$node/mnt"
    done
}

fleet_peers_connected() {
    [ "$(fleet_in s1 gluster --mode=script pool list | grep -c Connected)" -ge "$1" ]
}

fleet_bricks_online() {
    [ "$(fleet_in s1 gluster --mode=script volume status "$FLEET_VOLUME" detail | grep -c '^Online *: Y')" -ge "$1" ]
}

# The pid of server NODE's brick process (glusterfsd).
fleet_brick_pid() {
    pgrep -f "glusterfsd.* --brick-name $FLEET_WORK/$1/brick/b( |\$)" | head -1
}

# The pid of client NODE's FUSE process (glusterfs).
fleet_fuse_pid() {
    pgrep -f "glusterfs.*--volfile-id=/?$FLEET_VOLUME.*$FLEET_WORK/$1/mnt" | head -1
}

fleet_gluster_down() {
    local node pid
    for node in "${FLEET_NODES[@]}"; do
        case "$node" in
            c*) fleet_in "$node" umount -l "$FLEET_WORK/$node/mnt" 2>/dev/null || true ;;
        esac
    done
    # Every gluster process started inside this run's namespaces.
    for node in "${FLEET_NODES[@]}"; do
        for pid in $(fleet_node_pids "$node"); do kill -9 "$pid" 2>/dev/null || true; done
    done
    for node in "${FLEET_NODES[@]}"; do
        case "$node" in
            s*) fleet_disk_down "$node" "$FLEET_WORK/$node/brick" ;;
        esac
    done
}
