//! The eBPF backend's loop: ring-buffer records into one
//! [`Session`]'s collector, the same statistics and summary as the ptrace
//! engine's. No stops: the traced program runs untouched; the agent only
//! reads. Between polls the caller may look at (or take) the session's
//! collector ([`Runner::poll`], [`Runner::session_mut`]).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;

use agent_core::{Arch, Summary};
use anyhow::{anyhow, bail, Context};

use super::events::{syscall_event, Record};
use super::loader::{abis, Probe};
use crate::engine::Session;
use crate::facts::{self, PlatformFacts};
use crate::sys::{self, Tid, WaitStatus};
use crate::trace::{self, AttachOptions, TraceOptions};

/// How long one poll waits when the program wakes no one (it wakes the
/// reader when a quarter of the ring is full, and at every fork and exit).
const POLL_MS: i32 = 20;

/// The eBPF backend's own counters, for `--stats` and the lost-record
/// warning.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunnerStats {
    /// Syscalls recorded.
    pub syscalls: u64,
    /// Records the kernel dropped because the ring buffer was full.
    pub lost: u64,
    /// Records that could not be read (object and reader disagree).
    pub unreadable: u64,
    /// Polls of the ring buffer.
    pub polls: u64,
}

/// A session fed by the BPF program.
#[derive(Debug)]
pub struct Runner {
    probe: Probe,
    session: Session,
    abis: &'static [Arch],
    stats: RunnerStats,
    /// The root process's last thread ended (its wait status, its time).
    root_end: Option<(i32, u64)>,
}

impl Runner {
    /// Starts feeding `session` from `probe`; the caller adds the root
    /// process with [`Runner::trace`].
    pub fn new(probe: Probe, session: Session) -> Runner {
        Runner {
            probe,
            session,
            abis: abis(),
            stats: RunnerStats::default(),
            root_end: None,
        }
    }

    /// Traces process `tgid` and its future children.
    pub fn trace(&mut self, tgid: Tid) -> anyhow::Result<()> {
        self.probe.trace(tgid as u32)
    }

    /// The session (its collector may be taken or reset between polls).
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// Waits up to `timeout_ms` for records and records them all.
    pub fn poll(&mut self, timeout_ms: i32) -> anyhow::Result<()> {
        self.probe
            .wait(timeout_ms)
            .context("cannot wait for the ring buffer")?;
        self.stats.polls += 1;
        self.drain();
        Ok(())
    }

    fn drain(&mut self) {
        let Runner {
            probe,
            session,
            abis,
            stats,
            root_end,
        } = self;
        let root = session.root as u32;
        stats.unreadable += probe.drain(|record| match record {
            Record::Syscall { event, compat, .. } => {
                session
                    .collector
                    .record(&syscall_event(event, compat, abis));
                stats.syscalls += 1;
            }
            Record::Fork { process, .. } => {
                session.threads += 1;
                session.live += 1;
                session.processes += process as u32;
            }
            Record::Exit {
                tid,
                tgid,
                process_ended,
                status,
                at_ns,
            } => {
                session.collector.thread_exited(tid);
                session.live = session.live.saturating_sub(1);
                session.end_ns = session.end_ns.max(at_ns);
                if process_ended && tgid == root {
                    *root_end = Some((status, at_ns));
                }
            }
        });
    }

    /// Whether a traced process is still alive.
    pub fn any_traced(&self) -> bool {
        self.probe.any_traced()
    }

    /// Records what is left, detaches (drops the programs) and returns the
    /// session and the counters.
    pub fn finish(mut self) -> (Session, RunnerStats, Option<(i32, u64)>) {
        self.drain();
        self.stats.lost = self.probe.lost();
        (self.session, self.stats, self.root_end)
    }
}

/// A summary with the eBPF backend's mark: lost records, when any, as the
/// fact `ebpf.lost` (the summary format has no field for them; the
/// `overflow` record counts table overflows, which are still counted
/// events, while these are missing ones).
pub fn summarize(session: &Session, stats: &RunnerStats) -> Summary {
    let mut summary = trace::summarize(session);
    if stats.lost > 0 {
        let _ = summary.facts.add("ebpf.lost", &stats.lost.to_string());
        eprintln!(
            "edge-agent: {} syscall records lost (the BPF ring buffer was full); the summary misses them",
            stats.lost
        );
    }
    summary
}

/// A command started under the eBPF backend.
#[derive(Debug)]
pub struct EbpfStarted {
    runner: Option<Runner>,
    pid: Tid,
    error_fd: i32,
    given: String,
    status: Option<WaitStatus>,
    stats: RunnerStats,
}

impl EbpfStarted {
    /// Forks the command stopped before its exec, adds it to the traced
    /// set and lets it go.
    pub fn start(opts: &TraceOptions, probe: Probe) -> anyhow::Result<EbpfStarted> {
        let Some(arg0) = opts.command.first() else {
            bail!("no command given");
        };
        if opts.only.is_some() {
            bail!("--only needs the ptrace backend (its seccomp prefilter)");
        }
        let program = facts::program_name(arg0);
        let platform = opts.platform.clone().unwrap_or_else(PlatformFacts::detect);
        let facts = facts::build(&platform, &program, &opts.facts)?;
        let path = trace::resolve_command(arg0)?;
        let cpath = CString::new(path.as_os_str().as_bytes())
            .context("the command's path contains a NUL byte")?;
        let cargs = opts
            .command
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()
            .context("an argument contains a NUL byte")?;
        let mut argv: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
        argv.push(std::ptr::null());
        let (read_fd, write_fd) = sys::cloexec_pipe().context("cannot create a pipe")?;
        let setup = sys::ChildSetup {
            path: &cpath,
            argv: &argv,
            filter: None,
            error_fd: write_fd,
        };
        let pid = sys::fork_stopped_exec(&setup).context("cannot fork")?;
        sys::close(write_fd);
        let st = sys::wait_pid(pid, libc::WUNTRACED, true)
            .context("cannot wait for the command")?
            .ok_or_else(|| anyhow!("interrupted"))?;
        if st.stopped().is_none() {
            let err = trace::child_error(read_fd);
            sys::close(read_fd);
            return Err(err.unwrap_or_else(|| anyhow!("the command ended before it started")));
        }
        let mut session = Session::new(pid, facts);
        (session.processes, session.threads, session.live) = (1, 1, 1);
        let mut runner = Runner::new(probe, session);
        if let Err(e) = runner.trace(pid) {
            let _ = sys::kill(pid, libc::SIGKILL);
            let _ = sys::wait_pid(pid, 0, true);
            sys::close(read_fd);
            return Err(e);
        }
        sys::kill(pid, libc::SIGCONT).context("cannot continue the command")?;
        Ok(EbpfStarted {
            runner: Some(runner),
            pid,
            error_fd: read_fd,
            given: arg0.to_string_lossy().into_owned(),
            status: None,
            stats: RunnerStats::default(),
        })
    }

    /// The command's pid.
    pub fn pid(&self) -> Tid {
        self.pid
    }

    /// Records until the command and its descendants end, or a stop is
    /// requested (then the programs are detached and the command runs on);
    /// returns the summary.
    pub fn trace(&mut self) -> anyhow::Result<Summary> {
        let mut runner = self
            .runner
            .take()
            .ok_or_else(|| anyhow!("the command was traced already"))?;
        let mut detached = false;
        while runner.any_traced() {
            if crate::signals::stop_requested().is_some() {
                detached = true;
                break;
            }
            runner.poll(POLL_MS)?;
        }
        crate::signals::quiet();
        let (mut session, stats, _) = runner.finish();
        self.stats = stats;
        if detached {
            session.detached = true;
        } else {
            // Every traced process has ended: the root is a zombie (or
            // reaped by nobody but us).
            let st = sys::wait_pid(self.pid, 0, true)
                .context("cannot wait for the command")?
                .ok_or_else(|| anyhow!("interrupted"))?;
            self.status = Some(st);
            session.root_status = Some(st);
            session.live = 0;
            if let Some(err) = trace::child_error(self.error_fd) {
                return Err(err.context(format!("cannot run {}", self.given)));
            }
        }
        Ok(summarize(&session, &self.stats))
    }

    /// The backend's counters (after [`EbpfStarted::trace`]).
    pub fn stats(&self) -> RunnerStats {
        self.stats
    }

    /// The command's exit status (waits for it after a detach).
    pub fn wait(&mut self) -> anyhow::Result<ExitStatus> {
        if let Some(st) = self.status {
            return Ok(ExitStatus::from_raw(st.0));
        }
        loop {
            let st = sys::wait_pid(self.pid, 0, true)
                .context("cannot wait for the command")?
                .ok_or_else(|| anyhow!("interrupted"))?;
            if st.exited().is_some() || st.signaled().is_some() {
                return Ok(ExitStatus::from_raw(st.0));
            }
        }
    }
}

impl Drop for EbpfStarted {
    fn drop(&mut self) {
        sys::close(self.error_fd);
    }
}

/// Traces the running process `opts.pid` (all its threads and future
/// children) until it ends, the duration passes or a stop is requested.
pub fn attach(opts: &AttachOptions, probe: Probe) -> anyhow::Result<(Summary, RunnerStats)> {
    let pid = opts.pid;
    if pid <= 0 || !Path::new(&format!("/proc/{pid}")).exists() {
        bail!("no process with PID {pid}");
    }
    if pid == sys::getpid() {
        bail!("cannot attach to the agent itself");
    }
    let platform = opts.platform.clone().unwrap_or_else(PlatformFacts::detect);
    let facts = facts::build(&platform, &trace::process_program(pid), &opts.facts)?;
    let mut session = Session::new(pid, facts);
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.count() as u32)
        .unwrap_or(1)
        .max(1);
    (session.processes, session.threads, session.live) = (1, threads, threads);
    let mut runner = Runner::new(probe, session);
    runner.trace(pid)?;
    let deadline = opts.duration.map(|d| std::time::Instant::now() + d);
    let mut detached = false;
    while runner.any_traced() {
        if crate::signals::stop_requested().is_some()
            || deadline.is_some_and(|at| std::time::Instant::now() >= at)
        {
            detached = true;
            break;
        }
        runner.poll(POLL_MS)?;
    }
    crate::signals::quiet();
    let (mut session, stats, root_end) = runner.finish();
    match root_end {
        Some((status, _)) if !detached => {
            session.root_status = Some(WaitStatus(status));
            session.live = 0;
        }
        _ => session.detached = true,
    }
    Ok((summarize(&session, &stats), stats))
}
