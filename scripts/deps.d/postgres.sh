# shellcheck shell=bash
# PostgreSQL for the service's tests and scripts/bench-ingest --db postgres:
# Debian's server binaries only. Nothing is started here and no cluster is
# made: the tests and the benchmark run their own throwaway server
# (scripts/lib/pg-temp.sh: initdb into a temporary folder as an unprivileged
# user, a free port, stopped at the end). Sourced by scripts/install-deps.
# shellcheck source=../lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt-install.sh"
if ! compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null; then
    # Debian's package would make and start a "main" cluster as a system
    # service; we want neither.
    mkdir -p /etc/postgresql-common
    if ! grep -qs '^create_main_cluster' /etc/postgresql-common/createcluster.conf; then
        echo "create_main_cluster = false" >>/etc/postgresql-common/createcluster.conf
    fi
    apt_install postgresql
fi
