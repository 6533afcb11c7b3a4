# Sourced by scripts/install-deps (and by scripts/cross-test): what the ARM,
# i686 and Android suite needs. Idempotent: a second run only checks.
#
# - Debian's cross gcc packages, used as linkers for the static Linux device
#   builds (.cargo/config.toml) and as the C compiler of ring's build script
#   when type-checking the Android targets;
# - qemu-system-arm (boots real arm64 and armv7 kernels: qemu-user has no
#   ptrace, so only full-system emulation proves the tracer), cpio for the
#   initramfs, jq to read the agent's JSON, a JDK for agent-android's JNI test;
# - the rustup targets;
# - the ARM guest: Debian's arm64 and armmp kernels (only vmlinuz is kept)
#   and static busybox for arm64, armhf and i386, fetched with
#   `apt-get download` through a private package list (no dpkg multiarch: the
#   machine's own apt state is not touched). Cached in $EDGE_ARM_CACHE
#   (default ~/.cache/edge-agent/arm), outside the work tree.
# shellcheck source=../lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt-install.sh"

# Everything lives in functions so that sourcing leaks no variables.
cross_deps_apt() {
    local need=() pkg
    for pkg in gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf gcc-i686-linux-gnu \
        libc6-dev-arm64-cross libc6-dev-armhf-cross libc6-dev-i386-cross \
        qemu-system-arm cpio jq; do
        dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
    done
    command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
    if [ ${#need[@]} -gt 0 ]; then
        apt_install --no-install-recommends "${need[@]}"
    fi
}

cross_deps_rustup() {
    local installed target missing=()
    installed=$(rustup target list --installed)
    for target in aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf i686-unknown-linux-gnu \
        aarch64-linux-android armv7-linux-androideabi i686-linux-android x86_64-linux-android; do
        grep -qx "$target" <<<"$installed" || missing+=("$target")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        rustup target add "${missing[@]}"
    fi
}

# Runs apt-get or apt-cache ($2) against a private list of Debian's arm64,
# armhf and i386 packages kept under the cache ($1).
cross_deps_guest_apt() {
    local cache=$1 tool=$2
    shift 2
    "$tool" -q \
        -o APT::Architectures::=arm64 -o APT::Architectures::=armhf -o APT::Architectures::=i386 \
        -o Dir::State::Lists="$cache/apt/lists" \
        -o Dir::Cache::Archives="$cache/apt/archives" \
        -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
        -o Dir::Etc::SourceList=/dev/null \
        -o Dir::Etc::SourceParts="$cache/apt/sources.list.d" \
        -o Acquire::Languages=none -o APT::Sandbox::User=root \
        -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false \
        -o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false \
        -o Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false \
        "$@"
}

# The first main-archive mirror of the machine's apt sources: deb822 files
# (sources.list.d/*.sources) first, then the one-line format (sources.list and
# sources.list.d/*.list); security suites are skipped. Any of these files may
# be missing (a fresh Debian 12 machine has only the .sources files): a
# missing file is skipped, never an error, and no match prints nothing.
cross_deps_mirror() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk '
            /^URIs:/ {u = $2}
            /^Suites:/ {s = $0}
            /^[[:space:]]*$/ {if (u != "" && s !~ /security/) print u; u = ""; s = ""}
            END {if (u != "" && s !~ /security/) print u}' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        awk '$1 == "deb" && $2 !~ /^\[/ && $3 !~ /security/ {print $2}' "$f"
    done
}

cross_deps_guest() {
    local cache=${EDGE_ARM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edge-agent/arm}
    if [ -s "$cache/vmlinuz-arm64" ] && [ -s "$cache/vmlinuz-armmp" ] &&
        [ -x "$cache/busybox-arm64" ] && [ -x "$cache/busybox-armhf" ] && [ -x "$cache/busybox-i386" ]; then
        return 0
    fi
    echo "== fetching the ARM guest kernels and static busybox into $cache"
    mkdir -p "$cache/apt/lists/partial" "$cache/apt/archives/partial" "$cache/apt/sources.list.d" "$cache/debs"
    # The same Debian mirror and release the machine's own apt uses.
    local mirror suite
    mirror=$(cross_deps_mirror | sed -n 1p)
    suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    if [ -z "$mirror" ] || [ -z "$suite" ]; then
        echo "cross.sh: cannot find the machine's Debian mirror in /etc/apt" >&2
        return 1
    fi
    cat >"$cache/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite
Components: main
Architectures: arm64 armhf i386
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    cross_deps_guest_apt "$cache" apt-get update >/dev/null
    # The metapackages name the current kernel ABI (linux-image-6.1.0-N-*).
    local k64 k32
    k64=$(cross_deps_guest_apt "$cache" apt-cache depends linux-image-arm64:arm64 |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^:]*-arm64\).*/\1/p' | head -n1)
    k32=$(cross_deps_guest_apt "$cache" apt-cache depends linux-image-armmp:armhf |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^:]*-armmp\).*/\1/p' | head -n1)
    if [ -z "$k64" ] || [ -z "$k32" ]; then
        echo "cross.sh: cannot resolve Debian's arm64/armmp kernel packages" >&2
        return 1
    fi
    rm -f "$cache"/debs/*.deb
    (cd "$cache/debs" && cross_deps_guest_apt "$cache" apt-get download \
        "$k64:arm64" "$k32:armhf" busybox-static:arm64 busybox-static:armhf busybox-static:i386)
    local deb arch tmp
    tmp=$(mktemp -d)
    for deb in "$cache"/debs/linux-image-*.deb; do
        dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*' './boot/config-*'
    done
    mv "$tmp"/boot/vmlinuz-*-arm64 "$cache/vmlinuz-arm64"
    mv "$tmp"/boot/vmlinuz-*-armmp "$cache/vmlinuz-armmp"
    mv "$tmp"/boot/config-*-arm64 "$cache/config-arm64"
    mv "$tmp"/boot/config-*-armmp "$cache/config-armmp"
    for arch in arm64 armhf i386; do
        dpkg-deb --fsys-tarfile "$cache"/debs/busybox-static_*_"$arch".deb | tar -x -C "$tmp" ./bin/busybox
        mv "$tmp/bin/busybox" "$cache/busybox-$arch"
    done
    rm -rf "$tmp" "$cache/debs" "$cache/apt"
}

cross_deps_apt
cross_deps_rustup
cross_deps_guest
unset -f cross_deps_apt cross_deps_rustup cross_deps_guest_apt cross_deps_guest
