# shellcheck shell=bash
# err-files (research: a server run with RLIMIT_NOFILE 50, EMFILE from its
# open carried to the client): the target server's brick process
# (glusterfsd) given, with prlimit, an open-file limit of the files it has
# open now plus FLEET_ERR_FILES_SPARE, so its next opens of brick files fail
# with EMFILE and GlusterFS returns that errno to the client's open. (Set on
# the running brick rather than by restarting it with the limit: the same
# limit, without a restart that would also change its pid and sockets.) The
# old limit comes back at the end.
FAULT_TARGET[err-files]=server
FAULT_CAUSE[err-files]=errno
FAULT_ERRNO[err-files]=EMFILE

FLEET_ERR_FILES_SPARE=${FLEET_ERR_FILES_SPARE:-0}

fault_err_files_start() { # node
    local node=$1 pid open
    pid=$(fleet_brick_pid "$node")
    [ -n "$pid" ] || return 0
    prlimit --pid "$pid" --nofile --raw --noheadings -o SOFT,HARD | tr -s ' ' >"$FLEET_WORK/$node/nofile.saved"
    open=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
    # The soft limit only: it is the one opens fail at, and root may lower
    # and raise it again without touching the hard limit.
    prlimit --pid "$pid" --nofile=$((open + FLEET_ERR_FILES_SPARE)):
}

fault_err_files_stop() { # node
    local node=$1 pid soft hard
    [ -s "$FLEET_WORK/$node/nofile.saved" ] || return 0
    read -r soft hard <"$FLEET_WORK/$node/nofile.saved"
    rm -f "$FLEET_WORK/$node/nofile.saved"
    pid=$(fleet_brick_pid "$node")
    [ -n "$pid" ] || return 0
    prlimit --pid "$pid" --nofile="$soft:" || echo "err-files: could not give $node back its open-file limit" >&2
}
