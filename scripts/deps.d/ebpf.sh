# Sourced by scripts/install-deps. The eBPF backend's program
# (agent-linux/bpf/syscalls.bpf.c) is compiled by `scripts/build-bpf` with
# Debian's clang (`-target bpf`) against libbpf's headers (libbpf-dev), and
# bpftool writes the kernel's vmlinux.h and lists loaded programs in the
# tests; bindgen generates the Rust side of bpf/syscalls.h. The committed object means a plain `cargo build` (and every static
# or cross build) needs none of them; only rebuilding the object does.
# shellcheck source=../lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt-install.sh"
ebpf_need=()
command -v clang >/dev/null 2>&1 || ebpf_need+=(clang)
command -v llvm-strip >/dev/null 2>&1 || ebpf_need+=(llvm)
dpkg -s libbpf-dev >/dev/null 2>&1 || ebpf_need+=(libbpf-dev)
command -v bpftool >/dev/null 2>&1 || ebpf_need+=(bpftool)
command -v bindgen >/dev/null 2>&1 || ebpf_need+=(bindgen)
# tests/tests/ebpf_full_maps.rs links its workload statically (libc.a).
dpkg -s libc6-dev >/dev/null 2>&1 || ebpf_need+=(libc6-dev)
if [ ${#ebpf_need[@]} -gt 0 ]; then
    apt_install --no-install-recommends "${ebpf_need[@]}"
fi
unset ebpf_need
