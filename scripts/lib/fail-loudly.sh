# shellcheck shell=bash
# Sourced right after `set -euo pipefail` by the project's scripts: a command
# that stops a script under `set -e` prints one line naming the file, the
# line and the command, so that no install or test step fails silently.
# `set -E` carries the trap into functions and sourced files.
set -E
trap 'fail_loudly_rc=$?; echo "${0##*/}: failed (exit $fail_loudly_rc) at ${BASH_SOURCE[0]:-$0}:$LINENO: $BASH_COMMAND" >&2' ERR
