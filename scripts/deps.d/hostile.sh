# shellcheck shell=bash
# hostile: tests/tests/hostile_local_user.rs creates an unprivileged user
# (`useradd`, Debian's passwd) and runs its programs as it; `mkfifo` and
# `ln` are coreutils. Sourced by scripts/install-deps.
# shellcheck source=../lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt-install.sh"
hostile_missing=()
for hostile_pkg in passwd coreutils; do
    dpkg -s "$hostile_pkg" >/dev/null 2>&1 || hostile_missing+=("$hostile_pkg")
done
if [ ${#hostile_missing[@]} -gt 0 ]; then
    apt_install --no-install-recommends "${hostile_missing[@]}"
fi
unset hostile_missing hostile_pkg
