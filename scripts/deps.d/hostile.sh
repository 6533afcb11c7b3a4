# shellcheck shell=bash
# hostile: tests/tests/hostile_local_user.rs creates an unprivileged user
# (`useradd`, Debian's passwd) and runs its programs as it; `mkfifo` and
# `ln` are coreutils. Sourced by scripts/install-deps.
hostile_missing=()
for hostile_pkg in passwd coreutils; do
    dpkg -s "$hostile_pkg" >/dev/null 2>&1 || hostile_missing+=("$hostile_pkg")
done
if [ ${#hostile_missing[@]} -gt 0 ]; then
    apt-get update -q
    # Other installs may hold dpkg's lock for a while: wait for it.
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${hostile_missing[@]}"
fi
unset hostile_missing hostile_pkg
