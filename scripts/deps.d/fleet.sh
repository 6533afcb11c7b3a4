# shellcheck shell=bash
# fleet: scripts/fleet-eval and scripts/test.d/60-fleet.sh run GlusterFS
# (Debian's glusterfs-server 10.3 and glusterfs-client) in network
# namespaces, shape links with tc (iproute2), drop packets with nftables
# (the pktloss faults), make the bricks' ext4 images (e2fsprogs), find
# processes (procps), read the store (sqlite3), wait for the service (curl)
# and score with python3. Sourced by scripts/install-deps and by
# scripts/fleet-eval itself.
# shellcheck source=../lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt-install.sh"
fleet_missing=()
for fleet_pkg in glusterfs-server glusterfs-client iproute2 nftables e2fsprogs procps util-linux sqlite3 curl python3; do
    dpkg -s "$fleet_pkg" >/dev/null 2>&1 || fleet_missing+=("$fleet_pkg")
done
if [ ${#fleet_missing[@]} -gt 0 ]; then
    apt_install --no-install-recommends "${fleet_missing[@]}"
fi
unset fleet_missing fleet_pkg
