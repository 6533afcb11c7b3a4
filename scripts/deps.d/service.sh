# shellcheck shell=bash
# service: scripts/bench-ingest drives `edge-service serve` with wrk and
# checks the store with sqlite3 and the metrics with curl. (The service's
# tests need nothing beyond cargo.) Sourced by scripts/install-deps.
# shellcheck source=../lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt-install.sh"
service_missing=()
for service_pkg in wrk sqlite3 curl; do
    dpkg -s "$service_pkg" >/dev/null 2>&1 || service_missing+=("$service_pkg")
done
if [ ${#service_missing[@]} -gt 0 ]; then
    apt_install "${service_missing[@]}"
fi
unset service_missing service_pkg
