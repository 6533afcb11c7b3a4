# Sourced by scripts/install-deps. The uploader's tests (tests/tests/upload_*.rs)
# need `mount`/`umount` for the spool-disk-full test (a tiny tmpfs; run as
# root, else that one test reports SKIPPED). Everything else they need is a
# Rust dependency. (scripts/measure-upload installs its own cross linker.)
# shellcheck source=../lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt-install.sh"
if ! command -v mount >/dev/null 2>&1; then
    apt_install mount
fi
