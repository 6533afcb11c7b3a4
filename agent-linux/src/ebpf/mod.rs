//! The eBPF backend: a BPF program in the kernel (`bpf/syscalls.bpf.c`)
//! aggregates the traced processes' syscalls in per-CPU maps; [`runner`]
//! merges them into the same `agent_core::Collector` and
//! `trace::summarize` as the ptrace engine. The program is never
//! stopped. Linux on x86_64 and aarch64 only: armv7, i686 and Android keep
//! ptrace (this module then only says so).
//!
//! - `aggregate`: the kernel's aggregates, read from bytes and merged.
//! - `events`: the ring-buffer records, read from bytes.
//! - `loader`: loading and attaching the program (aya), its maps.
//! - `runner`: the loop, `run` and `attach` on this backend.
//! - here: choosing the backend (`--backend ptrace|ebpf|auto`).

pub mod aggregate;
pub mod events;

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod loader;
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub mod runner;

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub use loader::Probe;

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
mod unsupported;
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
pub use unsupported::{runner, Probe};

/// The ring buffer's size: 8 MiB, about 170,000 records; only forks,
/// exits and calls crossing a window cut go there (the syscalls are
/// aggregated in the kernel).
pub const RING_BYTES: u32 = 8 << 20;

/// Runs the kernel tells apart (`MAX_SLOTS` in `bpf/syscalls.bpf.c`; its
/// key layouts hold 6 bits of slot). `run` and `attach` use slot 0;
/// `watch` one per matched run, and skips runs beyond these.
pub const MAX_SLOTS: u8 = 64;

/// What the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Always ptrace.
    Ptrace,
    /// eBPF, or an error saying why not.
    Ebpf,
    /// eBPF when it loads here, else ptrace, with one line saying why.
    Auto,
}

/// The backend to use.
#[derive(Debug)]
pub enum Chosen {
    /// The ptrace engine.
    Ptrace,
    /// The loaded, attached BPF program.
    Ebpf(Box<Probe>),
}

/// Chooses and, for eBPF, loads the backend. `needs_ptrace`: why this
/// command needs ptrace whatever the kernel allows (`--only`), if it does.
pub fn choose(choice: Choice, needs_ptrace: Option<&str>) -> anyhow::Result<Chosen> {
    match (choice, needs_ptrace) {
        (Choice::Ptrace, _) => Ok(Chosen::Ptrace),
        (Choice::Ebpf, Some(why)) => anyhow::bail!("--backend ebpf: {why}"),
        (Choice::Auto, Some(why)) => {
            eprintln!("edge-agent: backend ptrace ({why})");
            Ok(Chosen::Ptrace)
        }
        (Choice::Ebpf, None) => Probe::load(RING_BYTES)
            .map(|p| Chosen::Ebpf(Box::new(p)))
            .map_err(|e| e.context("--backend ebpf is unavailable")),
        (Choice::Auto, None) => match Probe::load(RING_BYTES) {
            Ok(p) => {
                eprintln!("edge-agent: backend ebpf (BPF programs load here)");
                Ok(Chosen::Ebpf(Box::new(p)))
            }
            Err(e) => {
                eprintln!("edge-agent: backend ptrace (eBPF unavailable: {e:#})");
                Ok(Chosen::Ptrace)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    /// The committed object was built from the committed source, header
    /// and flags: `scripts/build-bpf` records their sha256 beside it.
    #[test]
    fn the_committed_bpf_object_is_current() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let script = std::fs::read_to_string(format!("{root}/scripts/build-bpf")).unwrap();
        let flags = script
            .lines()
            .find_map(|l| l.strip_prefix("FLAGS=\""))
            .and_then(|l| l.strip_suffix('"'))
            .expect("scripts/build-bpf sets FLAGS=\"...\" on one line");
        let bpf = format!("{root}/agent-linux/bpf");
        let mut input = format!("flags: {flags}\n").into_bytes();
        for file in ["syscalls.bpf.c", "vmlinux.h"] {
            input.extend(std::fs::read(format!("{bpf}/{file}")).unwrap());
        }
        let digest = ring::digest::digest(&ring::digest::SHA256, &input);
        let recorded = std::fs::read_to_string(format!("{bpf}/syscalls.bpf.sha256")).unwrap();
        assert_eq!(
            hex(digest.as_ref()),
            recorded.trim(),
            "agent-linux/bpf/syscalls*.bpf.o are stale: run scripts/build-bpf and commit the objects"
        );
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}
