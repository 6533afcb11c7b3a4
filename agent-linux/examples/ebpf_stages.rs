//! Where the eBPF backend's time goes: runs a command under one build of
//! `bpf/syscalls.bpf.c` cut at a stage (`-DSTAGE=N`, see the source: 0
//! empty programs, 1 + the traced-set filter, 2 + the per-thread call
//! state, 3 + arguments and fd kinds, 4 + the kernel's per-call work in
//! full). `scripts/bench-tracer` builds the stages and runs each beside
//! `edge-agent run --backend ebpf` (the same with the agent's consumer).
//!
//! Usage: `ebpf_stages OBJECT [--drain] [--cost] CMD [ARGS...]`. With
//! `--drain` the ring buffer is read as the agent reads it (same poll
//! timeout) and its records only counted. With `--cost` the kernel's BPF
//! run-time statistics are on for the run (BPF_ENABLE_STATS, off again
//! when this exits) and the syscall programs' runs and mean run time are
//! printed: their in-kernel cost, free of the wall clock's noise, with
//! the instructions the verifier checked in each. Prints
//! what it read on stderr; exits with the command's status. Needs root (or CAP_BPF and CAP_PERFMON). x86_64 and
//! aarch64 Linux only.

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn main() {
    if let Err(e) = stages::main() {
        eprintln!("ebpf_stages: {e:#}");
        std::process::exit(2);
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn main() {
    eprintln!("ebpf_stages: x86_64 and aarch64 Linux only");
    std::process::exit(2);
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod stages {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    use agent_linux::ebpf::{Probe, RING_BYTES};
    use agent_linux::sys;
    use agent_linux::trace::resolve_command;
    use anyhow::{bail, Context};

    /// The agent's poll timeout (`ebpf::runner`).
    const POLL_MS: i32 = 20;

    pub fn main() -> anyhow::Result<()> {
        let mut args: Vec<_> = std::env::args_os().skip(1).collect();
        if args.len() < 2 {
            bail!("usage: ebpf_stages OBJECT [--drain] CMD [ARGS...]");
        }
        let object = std::fs::read(&args[0])
            .with_context(|| format!("cannot read {}", args[0].to_string_lossy()))?;
        args.remove(0);
        let mut flag = |name: &str| {
            let given = args.first().is_some_and(|a| a == name);
            if given {
                args.remove(0);
            }
            given
        };
        let drain = flag("--drain");
        let cost = flag("--cost");
        let _stats = cost
            .then(|| aya::sys::enable_stats(aya::sys::Stats::RunTime))
            .transpose()
            .context("cannot turn the BPF run-time statistics on")?;
        let Some(arg0) = args.first() else {
            bail!("no command given");
        };
        let mut probe = Probe::load_object(&object, RING_BYTES)?;

        let path = resolve_command(arg0)?;
        let cpath = CString::new(path.as_os_str().as_bytes())?;
        let cargs = args
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut argv: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
        argv.push(std::ptr::null());
        let (_read_fd, write_fd) = sys::cloexec_pipe().context("pipe")?;
        let setup = sys::ChildSetup {
            path: &cpath,
            argv: &argv,
            filter: None,
            envp: None,
            error_fd: write_fd,
        };
        let pid = sys::fork_stopped_exec(&setup).context("fork")?;
        sys::close(write_fd);
        sys::wait_pid(pid, libc::WUNTRACED, true).context("wait")?;
        probe.trace(pid as u32, 0)?;
        sys::kill(pid, libc::SIGCONT).context("continue")?;
        let mut records = 0u64;
        if drain {
            // The kernel empties the traced set when the last traced
            // thread ends, as the agent's loop sees it.
            while probe.any_traced() {
                probe.wait(POLL_MS).context("poll")?;
                probe.drain(|_| records += 1);
            }
            probe.drain(|_| records += 1);
        }
        let code = loop {
            let Some(st) = sys::wait_pid(pid, 0, true).context("wait")? else {
                continue;
            };
            if let Some(c) = st.exited() {
                break c;
            }
            if let Some(s) = st.signaled() {
                break 128 + s;
            }
        };
        eprintln!(
            "ebpf_stages: records={records} lost={}",
            probe.losses().lost
        );
        if cost {
            for (name, runs, time, verified) in probe.run_stats() {
                let mean = time.as_nanos() as f64 / runs.max(1) as f64;
                eprintln!(
                    "ebpf_stages: {name} runs={runs} mean_ns={mean:.0} verified_insns={verified} aggregates={}",
                    if probe.dense() { "dense" } else { "hash" }
                );
            }
        }
        std::process::exit(code);
    }
}
