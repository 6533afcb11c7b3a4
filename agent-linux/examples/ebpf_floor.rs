//! The floor of the eBPF backend: runs a command with a BPF program that
//! only counts the traced processes' syscalls in the kernel (per-CPU
//! counters), behind the same traced-set filter as the backend, with no
//! per-call state, no ring-buffer record and no user-space consumer.
//! `scripts/bench-tracer` compiles the program (`bpf/count_floor.bpf.c`)
//! and compares `edge-agent run --backend ebpf` against this.
//!
//! Usage: `ebpf_floor OBJECT [--exit] [--cost] CMD [ARGS...]`: counts at
//! `sys_enter`, and with `--exit` at `sys_exit` too (the backend uses
//! both); `--cost` as in `ebpf_stages` (the programs' mean in-kernel run
//! time, BPF statistics on for the run). Prints the counts on stderr; exits with the command's status.
//! Needs root (or CAP_BPF and CAP_PERFMON). x86_64 and aarch64 Linux only.

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn main() {
    if let Err(e) = floor::main() {
        eprintln!("ebpf_floor: {e:#}");
        std::process::exit(2);
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn main() {
    eprintln!("ebpf_floor: x86_64 and aarch64 Linux only");
    std::process::exit(2);
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod floor {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    use agent_linux::sys;
    use agent_linux::trace::resolve_command;
    use anyhow::{anyhow, bail, Context};
    use aya::maps::{HashMap, PerCpuArray};
    use aya::programs::RawTracePoint;
    use aya::EbpfLoader;

    pub fn main() -> anyhow::Result<()> {
        let mut args: Vec<_> = std::env::args_os().skip(1).collect();
        if args.len() < 2 {
            bail!("usage: ebpf_floor OBJECT [--exit] CMD [ARGS...]");
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
        let at_exit = flag("--exit");
        let cost = flag("--cost");
        let _stats = cost
            .then(|| aya::sys::enable_stats(aya::sys::Stats::RunTime))
            .transpose()
            .context("cannot turn the BPF run-time statistics on")?;
        let Some(arg0) = args.first() else {
            bail!("no command given");
        };
        let mut ebpf = EbpfLoader::new()
            .load(&object)
            .context("the kernel refused the BPF object")?;
        let mut attach = vec![
            ("floor_enter", "sys_enter"),
            ("floor_fork", "sched_process_fork"),
            ("floor_exit_task", "sched_process_exit"),
        ];
        if at_exit {
            attach.push(("floor_exit", "sys_exit"));
        }
        for (prog, tracepoint) in attach {
            let p: &mut RawTracePoint = ebpf
                .program_mut(prog)
                .ok_or_else(|| anyhow!("no program {prog}"))?
                .try_into()?;
            p.load().with_context(|| format!("cannot load {prog}"))?;
            p.attach(tracepoint)
                .with_context(|| format!("cannot attach {prog}"))?;
        }
        let mut traced: HashMap<_, u32, u8> = HashMap::try_from(
            ebpf.map_mut("TRACED")
                .ok_or_else(|| anyhow!("no map TRACED"))?,
        )?;

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
        traced.insert(pid as u32, 1, 0)?;
        sys::kill(pid, libc::SIGCONT).context("continue")?;
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
        let count: PerCpuArray<_, u64> =
            PerCpuArray::try_from(ebpf.map("COUNT").ok_or_else(|| anyhow!("no map COUNT"))?)?;
        let sum = |slot: u32| {
            count
                .get(&slot, 0)
                .map(|v| v.iter().sum::<u64>())
                .unwrap_or(0)
        };
        eprintln!("ebpf_floor: sys_enter={} sys_exit={}", sum(0), sum(1));
        if cost {
            for name in ["floor_enter", "floor_exit"] {
                if let Some(info) = ebpf.program(name).and_then(|p| p.info().ok()) {
                    let mean = info.run_time().as_nanos() as f64 / info.run_count().max(1) as f64;
                    eprintln!(
                        "ebpf_floor: {name} runs={} mean_ns={mean:.0}",
                        info.run_count()
                    );
                }
            }
        }
        std::process::exit(code);
    }
}
