//! One seam for every backend: `run`, `attach` and `watch` choose a
//! backend once ([`Tracer::choose`]) and drive it through the same calls
//! ([`Tracer::start`], [`Tracer::attach`], [`Tracer::watch`]); neither
//! `edge-agent` nor the watch daemon branches on the backend. A backend is
//! a variant here (ptrace's engine, the eBPF runner, the in-process
//! wrappers under `LD_PRELOAD`), as ripgrep's matcher is chosen once and
//! used through one type.

use std::ffi::OsStr;
use std::fmt;
use std::process::ExitStatus;

use agent_core::Summary;

use crate::ebpf::runner::{EbpfStarted, RunnerStats};
use crate::ebpf::{self, Choice, Chosen, Probe};
use crate::preload::{self, PreloadStarted, PreloadStats};
use crate::sys;
use crate::trace::{self, AttachOptions, Started, TraceOptions};
use crate::watch::{WatchOptions, Watcher};

/// A backend, chosen and (for eBPF) loaded.
#[derive(Debug)]
pub enum Tracer {
    /// The ptrace engine: stops the program at each syscall; any user,
    /// every architecture, `--only`'s seccomp prefilter.
    Ptrace,
    /// The BPF program, loaded and attached: never stops the program.
    Ebpf(Box<Probe>),
    /// The in-process wrappers, put in the command's `LD_PRELOAD`: never
    /// stops the program, any user; sees libc's calls only.
    Preload,
}

impl Tracer {
    /// The backend the user's `choice` gives here (`auto`: eBPF when it
    /// loads, else ptrace, said on stderr); `needs_ptrace` says why this
    /// command needs ptrace whatever the kernel allows, if it does.
    pub fn choose(choice: ebpf::Choice, needs_ptrace: Option<&str>) -> anyhow::Result<Tracer> {
        Ok(match ebpf::choose(choice, needs_ptrace)? {
            Chosen::Ptrace => Tracer::Ptrace,
            Chosen::Ebpf(probe) => Tracer::Ebpf(probe),
        })
    }

    /// The backend for running `command` (`run`): as [`Tracer::choose`],
    /// and `preload` when asked and the command can take it; `auto`, when
    /// eBPF does not load, takes the in-process wrappers if the command
    /// can take them (dynamically linked, not set-ID), else ptrace, and
    /// says why on stderr.
    pub fn choose_for_command(
        choice: Choice,
        needs_ptrace: Option<&str>,
        command: &OsStr,
    ) -> anyhow::Result<Tracer> {
        let preload_ready = || {
            preload::check_command(command)?;
            preload::library().map(|_| ())
        };
        match (choice, needs_ptrace) {
            (Choice::Preload, _) => preload_ready().map(|()| Tracer::Preload),
            (Choice::Auto, None) => match ebpf::load() {
                Ok(probe) => {
                    eprintln!("edge-agent: backend ebpf (BPF programs load here)");
                    Ok(Tracer::Ebpf(Box::new(probe)))
                }
                Err(e) => match preload_ready() {
                    Ok(()) => {
                        eprintln!("edge-agent: backend preload (eBPF unavailable: {e:#})");
                        Ok(Tracer::Preload)
                    }
                    Err(why) => {
                        eprintln!("edge-agent: backend ptrace (eBPF unavailable: {e:#}; {why:#})");
                        Ok(Tracer::Ptrace)
                    }
                },
            },
            _ => Tracer::choose(choice, needs_ptrace),
        }
    }

    /// Starts `opts.command` traced.
    pub fn start(self, opts: &TraceOptions) -> anyhow::Result<Traced> {
        Ok(match self {
            Tracer::Ptrace => Traced::Ptrace(Box::new(Started::start(opts)?)),
            Tracer::Ebpf(probe) => Traced::Ebpf(Box::new(EbpfStarted::start(opts, *probe)?)),
            Tracer::Preload => Traced::Preload(Box::new(PreloadStarted::start(opts)?)),
        })
    }

    /// Traces the running process `opts.pid` (and its threads and
    /// children) until it ends, the duration is over or a stop is asked;
    /// windows go to `on_window`, the last summary is returned with the
    /// backend's counters.
    pub fn attach(
        self,
        opts: &AttachOptions,
        on_window: &mut dyn FnMut(Summary),
    ) -> anyhow::Result<(Summary, Stats)> {
        match self {
            Tracer::Ptrace => {
                let summary = trace::attach(opts, on_window)?;
                let syscalls = summary.run.events;
                Ok((summary, Stats::Ptrace { syscalls, stops: 0 }))
            }
            Tracer::Ebpf(probe) => {
                let (summary, stats) = ebpf::runner::attach(opts, *probe, on_window)?;
                Ok((summary, Stats::Ebpf(stats)))
            }
            Tracer::Preload => anyhow::bail!(
                "--backend preload cannot attach: the wrappers are loaded by a program the agent starts (`run`)"
            ),
        }
    }

    /// Traces the runs `watcher` matches, until a stop is requested: each
    /// backend's own loop (ptrace's engine seizes each run; the BPF program
    /// counts each in a slot of its own) over the same watcher.
    pub(crate) fn watch(self, watcher: Watcher<'_>, opts: &WatchOptions) -> anyhow::Result<()> {
        match self {
            Tracer::Ptrace => crate::watch::run_ptrace(watcher, opts),
            Tracer::Ebpf(probe) => crate::watch_ebpf::watch(watcher, *probe, opts),
            Tracer::Preload => anyhow::bail!(
                "--backend preload cannot watch: the wrappers are loaded by a program the agent starts (`run`)"
            ),
        }
    }
}

/// A command started by a [`Tracer`].
pub enum Traced {
    /// Under the ptrace engine.
    Ptrace(Box<Started>),
    /// Under the BPF program.
    Ebpf(Box<EbpfStarted>),
    /// With the in-process wrappers.
    Preload(Box<PreloadStarted>),
}

/// The backend and the command's pid (the engine and the runner hold
/// kernel handles, not worth printing).
impl fmt::Debug for Traced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (backend, pid) = match self {
            Traced::Ptrace(started) => ("ptrace", started.pid()),
            Traced::Ebpf(started) => ("ebpf", started.pid()),
            Traced::Preload(started) => ("preload", started.pid()),
        };
        f.debug_struct("Traced")
            .field("backend", &backend)
            .field("pid", &pid)
            .finish()
    }
}

impl Traced {
    /// Traces until the command and its descendants end, or a stop request
    /// detaches them; windows go to `on_window`, the last summary is
    /// returned.
    pub fn trace(&mut self, on_window: &mut dyn FnMut(Summary)) -> anyhow::Result<Summary> {
        match self {
            Traced::Ptrace(started) => started.trace(on_window),
            Traced::Ebpf(started) => started.trace(on_window),
            Traced::Preload(started) => started.trace(on_window),
        }
    }

    /// Whether a stop request left the tracer serving the command (ptrace
    /// with `--only`: its filter needs a tracer) rather than detached.
    pub fn is_serving(&self) -> bool {
        match self {
            Traced::Ptrace(started) => started.is_serving(),
            Traced::Ebpf(_) | Traced::Preload(_) => false,
        }
    }

    /// The backend's counters so far.
    pub fn stats(&self) -> Stats {
        match self {
            Traced::Ptrace(started) => {
                let s = started.engine_stats();
                Stats::Ptrace {
                    syscalls: s.syscalls,
                    stops: s.stops,
                }
            }
            Traced::Ebpf(started) => Stats::Ebpf(started.stats()),
            Traced::Preload(started) => Stats::Preload(started.stats()),
        }
    }

    /// The command's exit status, once it has ended (served until then
    /// when the tracer could not detach).
    pub fn wait(&mut self) -> anyhow::Result<ExitStatus> {
        match self {
            Traced::Ptrace(started) => started.wait(),
            Traced::Ebpf(started) => started.wait(),
            Traced::Preload(started) => started.wait(),
        }
    }
}

/// What a backend counted (`--stats`).
#[derive(Clone, Debug)]
pub enum Stats {
    /// Syscalls seen and stops served.
    Ptrace {
        /// Syscalls recorded.
        syscalls: u64,
        /// Stops served.
        stops: u64,
    },
    /// The BPF program's and the runner's counters.
    Ebpf(RunnerStats),
    /// The run table's counters.
    Preload(PreloadStats),
}

/// The `--stats` line: the backend's counters with the agent's own memory
/// and CPU time (and, for ptrace, its requests per syscall).
impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stats::Ptrace { syscalls, stops } => {
                use std::sync::atomic::Ordering::Relaxed;
                let ptrace = sys::COUNTERS.ptrace.load(Relaxed);
                let waits = sys::COUNTERS.waits.load(Relaxed);
                let proc_reads = sys::COUNTERS.proc_reads.load(Relaxed);
                let per = |n: u64| {
                    if *syscalls == 0 {
                        0.0
                    } else {
                        n as f64 / *syscalls as f64
                    }
                };
                write!(
                    f,
                    "edge-agent stats: syscalls={syscalls} stops={stops} ptrace={ptrace} ({:.2}/syscall) waits={waits} ({:.2}/syscall) proc_reads={proc_reads} max_rss_kib={} cpu_ms={}",
                    per(ptrace),
                    per(waits),
                    sys::max_rss_kib(),
                    sys::self_cpu_us() / 1000
                )
            }
            Stats::Ebpf(s) => write!(
                f,
                "edge-agent stats: backend=ebpf syscalls={} lost={} uncounted={} partial={} unreadable={} polls={} max_rss_kib={} cpu_ms={} threads={} fd_kinds={} aggregates={} btf={}",
                s.syscalls,
                s.lost,
                s.uncounted,
                s.partial,
                s.unreadable,
                s.polls,
                sys::max_rss_kib(),
                sys::self_cpu_us() / 1000,
                if s.task_storage { "task_storage" } else { "hash" },
                if s.fd_memo { "memo" } else { "table" },
                if s.dense { "dense" } else { "hash" },
                if s.btf_cut { "cut" } else { "whole" },
            ),
            Stats::Preload(s) => write!(
                f,
                "edge-agent stats: backend=preload processes={} threads={} direct={} deferred={} lost={} max_rss_kib={} cpu_ms={}",
                s.processes,
                s.threads,
                s.direct,
                s.deferred,
                s.lost,
                sys::max_rss_kib(),
                sys::self_cpu_us() / 1000
            ),
        }
    }
}
