# shellcheck shell=bash
# Sourced by scripts/install-deps. The robust PCA test
# (diagnose/tests/rpca.rs) checks the Rust solver against a plain numpy
# reference run on the same matrices: numpy from PyPI, in a project-local
# venv at $EDGE_PY_VENV (default ~/.cache/edge-agent/py), outside the work
# tree and the system's Python. Idempotent: a second run only checks.
# shellcheck source=../lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt-install.sh"
rpca_deps() {
    local venv=${EDGE_PY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/edge-agent/py}
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import numpy' 2>/dev/null; then
        return 0
    fi
    local need=()
    command -v python3 >/dev/null 2>&1 || need+=(python3)
    # Debian's python3 has no ensurepip (hence no venv) without python3-venv.
    if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
        need+=(python3-venv)
    fi
    if [ ${#need[@]} -gt 0 ]; then
        apt_install "${need[@]}"
    fi
    echo "== creating the numpy venv for the robust PCA test in $venv"
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check 'numpy>=1.24,<3'
    "$venv/bin/python" -c 'import numpy'
}
rpca_deps
unset -f rpca_deps
