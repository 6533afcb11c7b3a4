# shellcheck shell=bash
# The product around the fleet: one `edge-service serve` on a SQLite store,
# `edge-agent attach` on every brick server (glusterfsd) and every client's
# FUSE process (glusterfs) for the whole evaluation, `edge-agent run` around
# every client workload, all with 1 s windows, each node with its spool,
# uploaded by an `edge-agent upload` daemon per node. Each node is a device
# (its own --device-id-file); a client's workload is a second device of its
# node ("<node>w"), because `peers` compares devices running the same
# program and takes a device's program from its latest window: one device
# holding both the FUSE client and the workload would change sides.
# Another fleet (scripts/mapreduce-eval) sets FLEET_ROLES (node -> role
# fact), FLEET_DEVICE_NODES (the nodes that are devices, when not all are)
# and traces its programs with fleet_watch.

FLEET_GROUP=fleet
FLEET_TOKEN=fleet-eval-token-0123456789abcdef

# Extra options of `serve` (the live analysis' and the webhook's, for
# --online) and the uploaders' interval in seconds.
FLEET_SERVE_OPTS=()
FLEET_UPLOAD_INTERVAL=${FLEET_UPLOAD_INTERVAL:-5}
declare -A FLEET_ROLES=()
FLEET_DEVICE_NODES=()

# NODE's role fact: FLEET_ROLES's, else server for s<i>, client otherwise.
fleet_role() {
    if [ -n "${FLEET_ROLES[$1]:-}" ]; then
        echo "${FLEET_ROLES[$1]}"
        return
    fi
    case "$1" in s*) echo server ;; *) echo client ;; esac
}

fleet_service_up() {
    printf '%s %s\n' "$FLEET_GROUP" "$FLEET_TOKEN" >"$FLEET_WORK/tokens"
    printf '%s\n' "$FLEET_TOKEN" >"$FLEET_WORK/token"
    FLEET_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    FLEET_URL=http://127.0.0.1:$FLEET_PORT
    # The whole fleet uploads from this host's one address: no per-address quota.
    "$FLEET_SERVICE" serve --listen "127.0.0.1:$FLEET_PORT" --db "$FLEET_DB" --tokens "$FLEET_WORK/tokens" \
        --quota-address-burst 0 ${FLEET_SERVE_OPTS[@]+"${FLEET_SERVE_OPTS[@]}"} </dev/null >"$FLEET_WORK/serve.log" 2>&1 &
    disown $!
    echo $! >"$FLEET_WORK/serve.pid"
    fleet_wait "edge-service serve on $FLEET_URL" 30 curl -fsS "$FLEET_URL/healthz"
}

# The agent's common options for DEVICE (a node, or "<client>w" for a
# client's workload).
fleet_agent_opts() {
    local device=$1 node=${1%w} role
    role=$(fleet_role "$node")
    # addr: the node's address, which its peers' socket tables name (the
    # crash and hang methods map a silent server socket to its device).
    echo "--window 1s --spin-us 0 --spool $FLEET_WORK/$node/spool --device-id-file $FLEET_WORK/$node/device-id-$device" \
        "--fact group=$FLEET_GROUP --fact role=$role --fact node=$node --fact addr=$(fleet_ip "$node")"
}

# Every device's name: the nodes, and "<client>w" for each client.
fleet_device_names() {
    local node nodes=("${FLEET_NODES[@]}")
    [ ${#FLEET_DEVICE_NODES[@]} -gt 0 ] && nodes=("${FLEET_DEVICE_NODES[@]}")
    for node in "${nodes[@]}"; do
        echo "$node"
        case "$node" in c*) echo "${node}w" ;; esac
    done
}

# Creates every device's id and every node's spool; prints nothing.
fleet_devices_up() {
    local node device
    for node in "${FLEET_NODES[@]}"; do
        mkdir -p "$FLEET_WORK/$node/spool"
        chmod 700 "$FLEET_WORK/$node/spool"
    done
    for device in $(fleet_device_names); do
        "$FLEET_AGENT" device-id --device-id-file "$FLEET_WORK/${device%w}/device-id-$device" \
            >"$FLEET_WORK/${device%w}/device-$device"
    done
}

fleet_device() { cat "$FLEET_WORK/${1%w}/device-$1"; }

# Attaches the agent to PID inside NODE's namespaces until the end.
fleet_attach() { # node pid
    local node=$1 pid=$2
    # shellcheck disable=SC2046
    fleet_in "$node" "$FLEET_AGENT" attach "$pid" $(fleet_agent_opts "$node") \
        </dev/null >>"$FLEET_WORK/$node/agent.log" 2>&1 &
    disown $!
    echo $! >>"$FLEET_WORK/agents.pids"
}

# Traces, until the end, every process whose command line contains TEXT
# (started later: from its exec; children with it) as device NODE:
# `edge-agent watch` in the host's namespaces (the kernel's process-events
# connector is only in the first network namespace), the processes in
# NODE's, extra facts after the text.
fleet_watch() { # node text [--fact K=V]...
    local node=$1 text=$2
    shift 2
    # shellcheck disable=SC2046
    # --match=TEXT: a text that starts with "-" is not an option.
    "$FLEET_AGENT" watch --match="$text" $(fleet_agent_opts "$node") "$@" \
        </dev/null >>"$FLEET_WORK/$node/agent.log" 2>&1 &
    disown $!
    echo $! >>"$FLEET_WORK/agents.pids"
}

fleet_attach_all() {
    local node pid
    for node in "${FLEET_NODES[@]}"; do
        case "$node" in
            s*) pid=$(fleet_brick_pid "$node") ;;
            c*) pid=$(fleet_fuse_pid "$node") ;;
        esac
        [ -n "$pid" ] || { echo "fleet: no gluster process found on $node" >&2; return 1; }
        fleet_attach "$node" "$pid"
    done
}

# Runs a traced workload on client NODE: workload.py MODE for SECS seconds.
fleet_traced_workload() { # node mode secs
    local node=$1
    # shellcheck disable=SC2046
    fleet_in "$node" "$FLEET_AGENT" run $(fleet_agent_opts "${node}w") --fact "workload=$2" -- \
        python3 "$FLEET_LIB/workload.py" "$2" "$FLEET_WORK/$node/mnt/$node" "$3" \
        </dev/null >>"$FLEET_WORK/$node/workload.log" 2>&1
}

fleet_uploaders_up() {
    local node
    for node in "${FLEET_NODES[@]}"; do
        "$FLEET_AGENT" upload --server "$FLEET_URL" --token-file "$FLEET_WORK/token" \
            --spool "$FLEET_WORK/$node/spool" --now --no-spread --ignore-power --interval "$FLEET_UPLOAD_INTERVAL" \
            </dev/null >>"$FLEET_WORK/$node/upload.log" 2>&1 &
        disown $!
        echo $! >>"$FLEET_WORK/uploaders.pids"
    done
}

# One more pass per spool, so everything written so far is in the store.
fleet_upload_now() {
    local node
    for node in "${FLEET_NODES[@]}"; do
        "$FLEET_AGENT" upload --server "$FLEET_URL" --token-file "$FLEET_WORK/token" \
            --spool "$FLEET_WORK/$node/spool" --now --no-spread --ignore-power --once \
            </dev/null >>"$FLEET_WORK/$node/upload.log" 2>&1
    done
}

# Windows stored per device (sqlite3): "DEVICE COUNT" lines.
fleet_stored_windows() {
    sqlite3 "$FLEET_DB" "SELECT device, count(*) FROM runs GROUP BY device"
}

fleet_product_down() {
    local pid
    # The attached agents first (SIGTERM: they detach and write their last
    # window), then the uploaders and the service.
    for pid in $(cat "$FLEET_WORK/agents.pids" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in $(cat "$FLEET_WORK/agents.pids" 2>/dev/null); do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    for pid in $(cat "$FLEET_WORK/uploaders.pids" 2>/dev/null) $(cat "$FLEET_WORK/serve.pid" 2>/dev/null); do
        kill -TERM "$pid" 2>/dev/null || true
    done
    rm -f "$FLEET_WORK/agents.pids" "$FLEET_WORK/uploaders.pids" "$FLEET_WORK/serve.pid"
}
