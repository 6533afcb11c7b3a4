# Sourced by scripts/install-deps. The diagnosis end-to-end test
# (tests/tests/diagnose_demo.rs, i.e. `edge-demo`) needs `ip`
# (iproute2: network namespaces, veth, bridge), `sysctl` (procps) and `wget`.
# It runs as root; without root it reports SKIPPED.
# shellcheck source=../lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt-install.sh"
diagnose_need=()
command -v ip >/dev/null 2>&1 || diagnose_need+=(iproute2)
command -v sysctl >/dev/null 2>&1 || diagnose_need+=(procps)
command -v wget >/dev/null 2>&1 || diagnose_need+=(wget)
if [ ${#diagnose_need[@]} -gt 0 ]; then
    apt_install "${diagnose_need[@]}"
fi
unset diagnose_need
