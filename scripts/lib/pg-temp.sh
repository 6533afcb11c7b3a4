#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests and benchmarks: nothing of the
# system's (no service, no /var/lib/postgresql, no /var/run/postgresql).
#
#   pg-temp.sh run DIR [--durable] [--remove]
#                                     start, print the ready line, stay until
#                                     standard input closes, then stop (and
#                                     with --remove delete DIR)
#   pg-temp.sh start DIR [--durable]  start, print the ready line, return
#   pg-temp.sh stop DIR               stop a server `start` left running
#   pg-temp.sh halt DIR fast|immediate  stop the server with `pg_ctl -m MODE`
#                                     (a restart's first half: its data stays)
#   pg-temp.sh resume DIR             start a halted server again on its port
#                                     and options, print the ready line, return
#
# `initdb` writes the cluster into DIR/data as an unprivileged user (`nobody`
# when run as root, through setpriv: initdb and postgres refuse to run as
# root; DIR is given to that user), `postgres` listens on a free port of
# 127.0.0.1 and on a
# Unix socket in DIR, and logs to DIR/postgres.log. The ready line is
#   ready postgres://postgres@127.0.0.1:PORT/postgres
# (superuser `postgres`, trust authentication: the port is loopback only).
# Without --durable, fsync is off (tests: faster, and a crash of the server
# is not what they test); benchmarks pass --durable. $PG_TEMP_OPTS adds
# server options (`-c ssl=on -c ssl_cert_file=...`); files it names inside
# DIR are given to the server's user with DIR.
#
# `halt` and `resume` restart a server `run` or `start` made (the tests of
# reconnection: service/tests/pg_restart.rs); `run` still stops it at its
# end, whichever process it is by then (it reads DIR/data/postmaster.pid).
#
# `run` ties the server to its caller: when the caller exits, for whatever
# reason, its end of the pipe closes and the server is stopped. The tests
# (service/tests/common/pg.rs) use it that way. The folders above DIR must
# let that user through (a `mktemp -d` folder is 0700: chmod 711 it).
set -euo pipefail

usage() {
    echo "usage: $0 run DIR [--durable] [--remove] | start DIR [--durable] | stop DIR | halt DIR fast|immediate | resume DIR" >&2
    exit 2
}
[ $# -ge 2 ] || usage
mode=$1 dir=$2
durable=false remove=false
if [ "$mode" = run ] || [ "$mode" = start ]; then
    for opt in "${@:3}"; do
        case $opt in
            --durable) durable=true ;;
            # Only `run` outlives its caller's use of DIR: a caller that
            # never drops its own handle on DIR (a server shared by a whole
            # test binary, held in a static) leaves the deletion to us.
            --remove) [ "$mode" = run ] || usage; remove=true ;;
            *) usage ;;
        esac
    done
fi

pg_bin=${PG_BIN:-}
if [ -z "$pg_bin" ]; then
    for candidate in /usr/lib/postgresql/*/bin; do
        [ -x "$candidate/postgres" ] && pg_bin=$candidate
    done
fi
if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/postgres" ]; then
    echo "pg-temp: no PostgreSQL server found (/usr/lib/postgresql/*/bin/postgres); run scripts/install-deps (scripts/deps.d/postgres.sh installs Debian's postgresql)" >&2
    exit 3
fi

as_user=()
if [ "$(id -u)" = 0 ]; then
    as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
fi

stop_server() {
    local pidfile=$dir/data/postmaster.pid pid
    [ -f "$pidfile" ] || return 0
    pid=$(head -n 1 "$pidfile")
    # SIGINT: fast shutdown (ends sessions, writes a checkpoint).
    kill -INT "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 300); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

# Starts postgres on port $1 in the background ($pid), its output
# appended to the log; its options are the ones saved at the first start.
launch_postgres() {
    "${as_user[@]}" "$pg_bin/postgres" -D "$dir/data" -p "$1" -k "$dir" \
        -c listen_addresses=127.0.0.1 -c fsync=$fsync -c max_connections=200 \
        -c shared_buffers=256MB -c logging_collector=off ${PG_TEMP_OPTS:-} \
        </dev/null >>"$dir/postgres.log" 2>&1 &
    pid=$!
}

# Waits until the server of $pid accepts connections on port $1 (true), or
# it died or 30 s passed (false).
wait_ready() {
    for _ in $(seq 1 300); do
        kill -0 "$pid" 2>/dev/null || return 1
        "$pg_bin/pg_isready" -q -h "$dir" -p "$1" && return 0
        sleep 0.1
    done
    return 1
}

case $mode in
    stop)
        stop_server
        exit 0
        ;;
    halt)
        how=${3:-fast}
        case $how in fast | smart | immediate) ;; *) usage ;; esac
        "${as_user[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -m "$how" -w -t 60 stop >/dev/null
        exit 0
        ;;
    resume)
        [ -f "$dir/server.conf" ] || {
            echo "pg-temp: no server was started in $dir" >&2
            exit 1
        }
        # shellcheck disable=SC1091
        . "$dir/server.conf"
        launch_postgres "$port"
        wait_ready "$port" || {
            echo "pg-temp: postgres did not start again:" >&2
            tail -n 20 "$dir/postgres.log" >&2
            exit 1
        }
        echo "ready postgres://postgres@127.0.0.1:$port/postgres"
        exit 0
        ;;
    run | start) ;;
    *) usage ;;
esac

mkdir -p "$dir"
[ ${#as_user[@]} -gt 0 ] && chown -R nobody:nogroup "$dir"
"${as_user[@]}" "$pg_bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C \
    >"$dir/initdb.log" 2>&1 || {
    echo "pg-temp: initdb failed:" >&2
    cat "$dir/initdb.log" >&2
    exit 1
}

# A port nothing listens on now (ss, from iproute2); postgres may still
# lose it to a race, which the loop below retries.
free_port() {
    local port
    for _ in $(seq 1 50); do
        port=$(( 20000 + RANDOM % 30000 ))
        ss -Htln "sport = :$port" 2>/dev/null | grep -q . || { echo "$port"; return; }
    done
    echo "$port"
}

fsync=off
$durable && fsync=on
port=
for _ in 1 2 3 4 5; do
    port=$(free_port)
    launch_postgres "$port"
    ready=false
    wait_ready "$port" && ready=true
    $ready && break
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    # The port may have been taken between the check and the bind: retry.
    grep -q "could not bind\|Address already in use" "$dir/postgres.log" || {
        echo "pg-temp: postgres did not start:" >&2
        tail -n 20 "$dir/postgres.log" >&2
        exit 1
    }
done
$ready || {
    echo "pg-temp: postgres did not start:" >&2
    tail -n 20 "$dir/postgres.log" >&2
    exit 1
}
# What `resume` needs to start the same server again.
printf 'port=%q fsync=%q PG_TEMP_OPTS=%q\n' "$port" "$fsync" "${PG_TEMP_OPTS:-}" >"$dir/server.conf"
echo "ready postgres://postgres@127.0.0.1:$port/postgres"

if [ "$mode" = run ]; then
    # Until the caller closes our standard input (it exited or is done).
    cat >/dev/null || true
    stop_server
    wait "$pid" 2>/dev/null || true
    if $remove; then rm -rf -- "$dir"; fi
fi
