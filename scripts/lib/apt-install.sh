# shellcheck shell=bash
# apt_install [apt-get install options...] PACKAGE...: installs Debian's
# packages. The package lists are updated once per shell (the first
# install), not once per scripts/deps.d file: on a fresh machine each
# update took 3-4 s, and install-deps sources a dozen of them.
apt_install() {
    if [ -z "${EDGE_APT_LISTS_UPDATED:-}" ]; then
        apt-get update -q
        EDGE_APT_LISTS_UPDATED=1
    fi
    # Other installs may hold dpkg's lock for a while: wait for it.
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q "$@"
}
