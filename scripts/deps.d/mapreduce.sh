# shellcheck shell=bash
# mapreduce: scripts/mapreduce-eval runs Apache Spark in standalone mode
# (PyPI's pyspark, whose wheel carries Spark's jars and launch scripts) on
# Debian's OpenJDK 17, in a venv of its own at $EDGE_SPARK_VENV (default
# ~/.cache/edge-agent/spark), outside the work tree and the system's Python;
# besides what deps.d/fleet.sh installs (namespaces, loop images, nftables,
# sqlite3, curl). Sourced by scripts/install-deps (scripts/test.d/62-mapreduce.sh
# runs the reduced fleet) and by scripts/mapreduce-eval itself. Idempotent: a
# second run only checks.
# shellcheck source=../lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt-install.sh"
mapreduce_deps() {
    local venv=${EDGE_SPARK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/edge-agent/spark}
    local need=() pkg
    for pkg in openjdk-17-jre-headless python3-venv; do
        dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
    done
    if [ ${#need[@]} -gt 0 ]; then
        apt_install --no-install-recommends "${need[@]}"
    fi
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import pyspark' 2>/dev/null; then
        return 0
    fi
    echo "== creating the pyspark venv for scripts/mapreduce-eval in $venv"
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check 'pyspark>=3.5,<4'
    "$venv/bin/python" -c 'import pyspark'
}
mapreduce_deps
unset -f mapreduce_deps
