# shellcheck shell=bash
# Apache Spark in standalone mode over the MapReduce fleet
# (scripts/mapreduce-eval): a master (and the job's driver) in mr-master,
# a worker in each mr-w<i>, every node with its own disk (fleet_disk_up)
# mounted at the same path, MR_DISK, in its own mount namespace: the job's
# input (a copy on every node, as HDFS keeps blocks on the nodes' disks),
# and a worker's SPARK_LOCAL_DIRS (shuffle files, spills) and work folder.
# Spark is PyPI's pyspark (scripts/deps.d/mapreduce.sh), run by its own launcher
# (bin/spark-class) on Debian's OpenJDK 17; small heaps (daemons 256 MiB,
# executors and driver 512 MiB) and one core per worker, for a 2-core host.

MR_MASTER_PORT=7077
# A worker disk's dirty page budget (bytes): see mr_disk_up.
MR_DIRTY_BYTES=${MR_DIRTY_BYTES:-$((64 << 20))}
# A worker disk's bandwidth (bytes/s each way): see mr_disk_up.
MR_DISK_BPS=${MR_DISK_BPS:-$((40 << 20))}
MR_BLKIO=/sys/fs/cgroup/blkio

# NODE's disk (fleet_disk_up at MR_DISK), made to behave like the disk of a
# node with little memory to spare (the paper's had 4 GB): the loop device
# reads and writes its image with O_DIRECT (no second page cache in the
# host's), and its writeback budget is MR_DIRTY_BYTES with the kernel's
# strict limit (the device's own bdi settings: /sys/class/bdi/MAJ:MIN), so
# a writer of gigabytes (the disk hog) waits for the disk, and so does
# every other writer of that disk. Without this the host's 24 GiB absorb a
# 2 GiB chunk in its page cache and no traced call waits for the disk
# (file-call time x1.1 under the hog in the first runs). The old settings
# are put back by mr_disk_down: loop devices and their bdi are reused.
mr_disk_up() { # node mib
    local node=$1 d=$FLEET_WORK/$1 loop bdi
    fleet_disk_up "$node" "$2" "$MR_DISK"
    loop=$(cat "$d/loop")
    losetup --direct-io=on "$loop"
    bdi=/sys/class/bdi/$(lsblk -dno MAJ:MIN "$loop" | tr -d ' ')
    echo "$bdi $(cat "$bdi/max_ratio") $(cat "$bdi/strict_limit")" >"$d/bdi.saved"
    echo "$MR_DIRTY_BYTES" >"$bdi/max_bytes"
    echo 1 >"$bdi/strict_limit"
    # A disk of its own: every node's image is a file on the host's one
    # disk, so a hog on one slowed all four workers' reads alike (the hogged
    # one's file calls x0.91-1.9 of the others'). Each loop device gets the
    # bandwidth of a disk of the paper's time (40 MiB/s, MR_DISK_BPS)
    # through the block layer's throttle (cgroup v1 blkio rules for this
    # device alone, removed by mr_disk_down), far below what the host's disk
    # takes: a hog saturates its node's disk, not the host's.
    if [ -w "$MR_BLKIO/blkio.throttle.write_bps_device" ]; then
        echo "${bdi##*/} $MR_DISK_BPS" >"$MR_BLKIO/blkio.throttle.write_bps_device"
        echo "${bdi##*/} $MR_DISK_BPS" >"$MR_BLKIO/blkio.throttle.read_bps_device"
        echo "${bdi##*/}" >"$d/blkio.saved"
    fi
}

mr_disk_down() { # node
    local d=$FLEET_WORK/$1 bdi ratio strict
    if [ -s "$d/bdi.saved" ]; then
        read -r bdi ratio strict <"$d/bdi.saved"
        echo "$strict" >"$bdi/strict_limit" || true
        echo "$ratio" >"$bdi/max_ratio" || true
    fi
    if [ -s "$d/blkio.saved" ]; then
        # A limit of 0 removes the device's rule.
        echo "$(cat "$d/blkio.saved") 0" >"$MR_BLKIO/blkio.throttle.write_bps_device" || true
        echo "$(cat "$d/blkio.saved") 0" >"$MR_BLKIO/blkio.throttle.read_bps_device" || true
    fi
    fleet_disk_down "$1" "$MR_DISK"
}

# The environment of every Spark process of NODE.
mr_spark_env() { # node
    echo "JAVA_HOME=$MR_JAVA_HOME SPARK_HOME=$MR_SPARK_HOME SPARK_LOCAL_IP=$(fleet_ip "$1")" \
        "SPARK_LOCAL_DIRS=$MR_DISK/local SPARK_DAEMON_MEMORY=256m SPARK_LOG_DIR=$FLEET_WORK/$1/log" \
        "SPARK_CONF_DIR=$FLEET_WORK/conf PYSPARK_PYTHON=$MR_PYTHON"
}

# The text in worker NODE's command line that its `edge-agent watch` matches:
# a system property given to the worker's JVM alone (SPARK_WORKER_OPTS),
# so neither Spark's launcher JVM (which builds the command) nor another
# worker matches; the executors the worker starts are its children, traced
# with it from their first call.
mr_worker_mark() { echo "-Dedge.mapreduce.node=$1 "; }

mr_master_url() { echo "spark://$(fleet_ip mr-master):$MR_MASTER_PORT"; }

# Starts the master and every worker; returns when all workers are alive.
mr_spark_up() { # workers...
    local node
    mkdir -p "$FLEET_WORK/conf"
    # Spark's own logging at WARN, to the process's stderr (the node's log).
    cat >"$FLEET_WORK/conf/log4j2.properties" <<'LOG'
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n
LOG
    mkdir -p "$FLEET_WORK/mr-master/log"
    # shellcheck disable=SC2046
    fleet_in mr-master env $(mr_spark_env mr-master) "$MR_SPARK_HOME/bin/spark-class" \
        org.apache.spark.deploy.master.Master --host "$(fleet_ip mr-master)" --port "$MR_MASTER_PORT" \
        --webui-port 8080 </dev/null >>"$FLEET_WORK/mr-master/spark.log" 2>&1 &
    disown $!
    fleet_wait "the Spark master" 90 mr_master_up
    for node in "$@"; do
        mkdir -p "$FLEET_WORK/$node/log"
        fleet_in "$node" mkdir -p "$MR_DISK/local" "$MR_DISK/work"
        # The mark in the environment, not on a command line: only the
        # worker's JVM has it in its arguments.
        # shellcheck disable=SC2046
        SPARK_WORKER_OPTS=$(mr_worker_mark "$node") fleet_in "$node" env $(mr_spark_env "$node") \
            "$MR_SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
            --host "$(fleet_ip "$node")" --cores 1 --memory 768m --work-dir "$MR_DISK/work" \
            --webui-port 8081 "$(mr_master_url)" </dev/null >>"$FLEET_WORK/$node/spark.log" 2>&1 &
        disown $!
    done
    fleet_wait "$# Spark workers alive" 180 mr_workers_alive "$#"
}

mr_master_json() {
    fleet_in mr-master curl -fsS "http://$(fleet_ip mr-master):8080/json/"
}

mr_master_up() { mr_master_json >/dev/null; }

mr_workers_alive() { # count
    [ "$(mr_master_json | python3 -c 'import json,sys; print(json.load(sys.stdin)["aliveworkers"])')" -ge "$1" ]
}

# Whether worker NODE's JVM is traced: its agent wrote a window of it.
mr_worker_traced() {
    grep -q '^edge-agent: java (' "$FLEET_WORK/$1/agent.log"
}

# The pid of worker NODE's daemon JVM. The pattern is not the mark itself:
# pgrep's own command line would match the watch's text and be traced.
mr_worker_pid() {
    local mark
    mark=$(mr_worker_mark "$1")
    pgrep -f -- "${mark//./[.]}" | head -1
}

# Starts the driver (one application for the whole run, in mr-master):
# job.py driver, reading jobs from $FLEET_WORK/jobs.fifo (held open for
# open on fd 7 by the caller) and appending results to
# $FLEET_WORK/jobs.jsonl; returns when its executors are registered.
mr_driver_up() { # executors
    : >"$FLEET_WORK/jobs.jsonl"
    mkfifo "$FLEET_WORK/jobs.fifo"
    fleet_in mr-master mkdir -p "$MR_DISK/local"
    # shellcheck disable=SC2046
    fleet_in mr-master env $(mr_spark_env mr-master) "$MR_PYTHON" "$FLEET_LIB/mapreduce/job.py" driver \
        "$(mr_master_url)" "$(fleet_ip mr-master)" "$MR_DISK/input" "$1" \
        "$FLEET_WORK/jobs.fifo" "$FLEET_WORK/jobs.jsonl" </dev/null >>"$FLEET_WORK/mr-master/driver.log" 2>&1 &
    disown $!
    echo $! >"$FLEET_WORK/driver.pid"
}

# Drops the input's pages from the page cache on every worker (coreutils
# dd's nocache), so a job's map stage reads its splits from the worker's
# disk as on a node whose memory cannot hold its data, not from the host's
# 24 GiB of cache (where a disk hog touches none of its reads). The same
# for every worker, before every job.
mr_drop_input_cache() { # workers...
    local node
    for node in "$@"; do
        fleet_in "$node" sh -c 'for f in "$1"/*; do dd if="$f" iflag=nocache count=0 status=none; done' \
            sh "$MR_DISK/input"
    done
}

# Runs JOB (wc or sort) on the cluster and waits for its result line;
# prints it. Fails when the driver died or the job took over MR_JOB_TIMEOUT s.
mr_job() { # job
    local before t
    before=$(wc -l <"$FLEET_WORK/jobs.jsonl")
    echo "$1" >&7
    for ((t = 0; t < MR_JOB_TIMEOUT * 5; t++)); do
        if [ "$(wc -l <"$FLEET_WORK/jobs.jsonl")" -gt "$before" ]; then
            tail -1 "$FLEET_WORK/jobs.jsonl"
            return 0
        fi
        kill -0 "$(cat "$FLEET_WORK/driver.pid")" 2>/dev/null || { echo "mapreduce: the driver died (see driver.log)" >&2; return 1; }
        sleep 0.2
    done
    echo "mapreduce: job $1 took over ${MR_JOB_TIMEOUT}s" >&2
    return 1
}

mr_spark_down() {
    local node pid
    # Every process started inside the fleet's namespaces (the JVMs, the
    # driver, a fault's writer), then the disks.
    for node in "${FLEET_NODES[@]}"; do
        for pid in $(fleet_node_pids "$node"); do kill -9 "$pid" 2>/dev/null || true; done
    done
    for node in "${FLEET_NODES[@]}"; do
        mr_disk_down "$node"
    done
}
