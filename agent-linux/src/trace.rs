//! Starting a command under the tracer, attaching to a running process, and
//! turning a finished session into a summary.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use agent_core::{Summary, SyscallId};
use anyhow::{anyhow, bail, Context};

use crate::arch::{Abi, Native};
use crate::coverage::TraceStart;
use crate::engine::window::{MAX_WINDOW, MIN_WINDOW};
use crate::engine::{Engine, Observer, Session};
use crate::facts::{self, PlatformFacts};
use crate::fd::FdRoles;
use crate::seccomp;
use crate::sys::{self, Tid};
use crate::wait::WaitPolicy;

/// What to trace and what to record (the library entry point's options).
///
/// Build with `TraceOptions { command, ..Default::default() }`.
#[derive(Clone, Debug, Default)]
pub struct TraceOptions {
    /// The command and its arguments (`argv`; `command[0]` is looked up in
    /// PATH unless it has a `/`).
    pub command: Vec<OsString>,
    /// Trace only these syscalls, through a seccomp prefilter; `None`: all.
    pub only: Option<Vec<SyscallId>>,
    /// Free facts, `(key, value)`, validated by `Facts::add`.
    pub facts: Vec<(String, String)>,
    /// The platform's facts; `None`: detected (`/etc/os-release`, uname,
    /// DMI/device tree). The Android shim passes its `ro.build.*` here.
    pub platform: Option<PlatformFacts>,
    /// How the tracer waits for stops ([`WaitPolicy::default`]: polls
    /// briefly before sleeping).
    pub wait: WaitPolicy,
    /// Cut the run into windows of this length ([`MIN_WINDOW`] to
    /// [`MAX_WINDOW`]), aligned to wall-clock multiples of it; `None`: one
    /// summary for the whole run.
    pub window: Option<Duration>,
    /// The device id every summary carries ([`crate::device_id`]; zero:
    /// none).
    pub device: crate::device_id::DeviceId,
}

/// A traced command's result.
#[derive(Debug)]
pub struct TraceOutcome {
    /// The run's summary (with `window`: its last window's).
    pub summary: Summary,
    /// The windows before the last, in order (empty without `window`).
    pub windows: Vec<Summary>,
    /// The command's exit status (as `wait` reported it).
    pub status: ExitStatus,
}

/// Runs `opts.command` under the tracer until it and all its descendants
/// end; returns the summary and the command's status.
///
/// If a stop is requested meanwhile (SIGINT/SIGTERM with
/// [`crate::signals::install`], or [`crate::signals::request_stop`]), the
/// tracer detaches, the program runs on, and this waits for it to end.
pub fn trace_command(opts: &TraceOptions) -> anyhow::Result<TraceOutcome> {
    let mut started = Started::start(opts)?;
    let mut windows = Vec::new();
    let summary = started.trace(&mut |w| windows.push(w))?;
    let status = started.wait()?;
    Ok(TraceOutcome {
        summary,
        windows,
        status,
    })
}

/// How often the loop's timer ticks when windows are cut: an idle
/// program's window is summarized within this long of its boundary.
const WINDOW_TICK_US: u64 = 100_000;

/// Checks a window length against the accepted range.
pub fn check_window(window: Option<Duration>) -> anyhow::Result<()> {
    match window {
        Some(w) if !(MIN_WINDOW..=MAX_WINDOW).contains(&w) => bail!(
            "the window must be between 1 s and 24 h (got {:.3} s)",
            w.as_secs_f64()
        ),
        _ => Ok(()),
    }
}

/// Collects ended sessions, and hands windows on.
struct Collect<'a> {
    done: Vec<Session>,
    on_window: &'a mut dyn FnMut(Summary),
}

impl Observer for Collect<'_> {
    fn window_done(&mut self, summary: Summary) {
        (self.on_window)(summary);
    }
    fn session_done(&mut self, session: Session) {
        self.done.push(session);
    }
}

/// A command started under the tracer (stopped before its exec).
#[derive(Debug)]
pub struct Started {
    engine: Engine,
    pid: Tid,
    error_fd: i32,
    /// The command as the user gave it, for errors.
    given: String,
    status: Option<sys::WaitStatus>,
    /// The run is cut into windows.
    windowed: bool,
}

impl Started {
    /// Validates the options, forks the command stopped before its exec,
    /// seizes it and lets it go.
    pub fn start(opts: &TraceOptions) -> anyhow::Result<Started> {
        let filter = match &opts.only {
            Some(ids) => {
                let mut all = ids.clone();
                // When a chosen syscall takes an fd, the fd cache must see
                // fds change even though these are not recorded. Otherwise
                // no fd is ever resolved: stop on nothing more.
                let roles = FdRoles::new();
                if ids.iter().any(|id| roles.get(*id).fd_arg().is_some()) {
                    all.extend(FdRoles::invalidating());
                }
                Some(
                    seccomp::build(Native::ABIS, &all)
                        .ok_or_else(|| anyhow!("--only lists too many syscalls"))?,
                )
            }
            None => None,
        };
        let StoppedCommand {
            pid,
            error_fd: read_fd,
            session,
            given,
        } = fork_stopped(opts, filter.as_deref(), &[])?;
        let mut engine = Engine::new(opts.only.as_deref(), opts.only.is_some());
        engine.set_wait_policy(opts.wait);
        let windowed = opts.window.is_some();
        let session = engine.add_session(session);
        if let Err(e) = engine.seize(session, pid, pid) {
            // It never ran the program: do not leave it stopped.
            let _ = sys::kill(pid, libc::SIGKILL);
            let _ = sys::wait_pid(pid, 0, true);
            sys::close(read_fd);
            return Err(anyhow!(
                "cannot trace the command: {}",
                explain_seize_error(pid, &e)
            ));
        }
        sys::kill(pid, libc::SIGCONT).context("cannot continue the command")?;
        Ok(Started {
            engine,
            pid,
            error_fd: read_fd,
            given,
            status: None,
            windowed,
        })
    }

    /// The command's pid.
    pub fn pid(&self) -> Tid {
        self.pid
    }

    /// Traces until the command and its descendants end, or a stop request
    /// detaches them; returns the summary (cut into windows: the last
    /// window's, the others go to `on_window` as they end).
    ///
    /// With `--only` the tracees cannot be let go (their filter needs a
    /// tracer): a stop request returns the summary at once, marked
    /// detached, and [`Started::wait`] keeps them running until they end.
    pub fn trace(&mut self, on_window: &mut dyn FnMut(Summary)) -> anyhow::Result<Summary> {
        let mut done = Collect {
            done: Vec::new(),
            on_window,
        };
        if self.windowed {
            crate::signals::tick_every(WINDOW_TICK_US);
        }
        let result = self.engine.run(&mut done);
        crate::signals::quiet();
        result.context("tracing failed")?;
        let mut done = done.done;
        if self.engine.is_serving() {
            // The command may not have exec'd yet: its error, if any, is
            // read once it has ended ([`Started::wait`]).
            let session = done
                .first()
                .or_else(|| self.engine.sessions().next())
                .ok_or_else(|| anyhow!("the traced session vanished"))?;
            return Ok(summarize(session));
        }
        done.extend(self.engine.take_sessions());
        let session = done
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("the traced session vanished"))?;
        if let Some(err) = child_error(self.error_fd) {
            return Err(err.context(format!("cannot run {}", self.given)));
        }
        self.status = session.root_status;
        Ok(summarize(&session))
    }

    /// Whether a stop request left the tracer serving the command (its
    /// `--only` filter needs a tracer) rather than detached.
    pub fn is_serving(&self) -> bool {
        self.engine.is_serving()
    }

    /// The engine's counters.
    pub fn engine_stats(&self) -> crate::engine::EngineStats {
        self.engine.stats()
    }

    /// The command's exit status; waits for it if the tracer detached, and
    /// serves it (and its descendants) until they end if the tracer could
    /// not detach (`--only`, see [`Started::trace`]).
    pub fn wait(&mut self) -> anyhow::Result<ExitStatus> {
        if self.engine.is_serving() && self.status.is_none() {
            // Serving cuts no windows.
            let mut done = Collect {
                done: Vec::new(),
                on_window: &mut |_| {},
            };
            self.engine
                .run(&mut done)
                .context("serving the command failed")?;
            let mut done = done.done;
            done.extend(self.engine.take_sessions());
            self.status = done.iter().find_map(|s| s.root_status);
            if let Some(err) = child_error(self.error_fd) {
                return Err(err.context(format!("cannot run {}", self.given)));
            }
        }
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
            // A stop report means the command is still traced (a detach
            // that did not take): let it go rather than leave it stopped,
            // with the signal it stopped for.
            let sig = match st.stopped() {
                Some(sig) if st.event() == 0 && sig != crate::stop::SYSCALL_TRAP => sig,
                _ => 0,
            };
            let _ = sys::detach(self.pid, sig);
        }
    }
}

/// A command forked and stopped before its exec, with the session that is
/// to record it: where both backends' `run` start.
pub(crate) struct StoppedCommand {
    /// The command's pid.
    pub(crate) pid: Tid,
    /// Read end of the close-on-exec pipe the child reports a failed exec
    /// (or seccomp install) on ([`child_error`]).
    pub(crate) error_fd: i32,
    /// Its facts, window length and device id set.
    pub(crate) session: Session,
    /// The command as the user gave it, for errors.
    pub(crate) given: String,
}

/// Checks `opts`, forks `opts.command` stopped before its exec (with the
/// seccomp `filter` installed, if any, and the variables of `env` set in
/// its environment) and waits for that stop.
pub(crate) fn fork_stopped(
    opts: &TraceOptions,
    filter: Option<&[sys::SockFilter]>,
    env: &[(&str, &std::ffi::OsStr)],
) -> anyhow::Result<StoppedCommand> {
    let Some(arg0) = opts.command.first() else {
        bail!("no command given");
    };
    check_window(opts.window)?;
    let program = facts::program_name(arg0);
    let platform = opts.platform.clone().unwrap_or_else(PlatformFacts::detect);
    let facts = facts::build(&platform, &program, &opts.facts)?;
    let path = resolve_command(arg0)?;
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
    let cenv = if env.is_empty() {
        None
    } else {
        let mut vars: Vec<CString> = std::env::vars_os()
            .filter(|(k, _)| !env.iter().any(|(name, _)| k.as_bytes() == name.as_bytes()))
            .chain(env.iter().map(|(k, v)| (k.into(), v.to_os_string())))
            .filter_map(|(k, v)| {
                let mut kv = k.into_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv).ok()
            })
            .collect();
        vars.shrink_to_fit();
        Some(vars)
    };
    let envp: Option<Vec<*const libc::c_char>> = cenv.as_ref().map(|vars| {
        vars.iter()
            .map(|c| c.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    });
    let (read_fd, write_fd) = sys::cloexec_pipe().context("cannot create a pipe")?;
    let setup = sys::ChildSetup {
        path: &cpath,
        argv: &argv,
        filter,
        envp: envp.as_deref(),
        error_fd: write_fd,
    };
    let pid = sys::fork_stopped_exec(&setup).context("cannot fork")?;
    sys::close(write_fd);
    let st = sys::wait_pid(pid, libc::WUNTRACED, true)
        .context("cannot wait for the command")?
        .ok_or_else(|| anyhow!("interrupted"))?;
    if st.stopped().is_none() {
        let err = child_error(read_fd);
        sys::close(read_fd);
        return Err(err.unwrap_or_else(|| anyhow!("the command ended before it started")));
    }
    let mut session = Session::new(pid, facts);
    // Stopped before its exec: the trace sees the program's every call.
    session.trace_start = TraceStart::FromStart;
    if let Some(w) = opts.window {
        session.set_window(w);
    }
    session.origin.device = opts.device;
    Ok(StoppedCommand {
        pid,
        error_fd: read_fd,
        session,
        given: arg0.to_string_lossy().into_owned(),
    })
}

/// Checks that `pid` is a process the agent may attach to, whatever the
/// backend: it exists, is not the agent, and has not exited (a zombie
/// would never end again for the eBPF backend, which waits for its exit).
/// The caller checks it before choosing a backend, so that these errors
/// are one line.
pub fn check_attach_target(pid: Tid) -> anyhow::Result<()> {
    if pid <= 0 || !Path::new(&format!("/proc/{pid}")).exists() {
        bail!("no process with PID {pid}");
    }
    if pid == sys::getpid() {
        bail!("cannot attach to the agent itself");
    }
    if status_field(pid, "State:").is_some_and(|s| s.starts_with('Z')) {
        bail!("process {pid} has already exited (a zombie its parent has not reaped)");
    }
    Ok(())
}

/// Checks `opts` (see [`check_attach_target`]) and makes the session of
/// an attach to it: where both backends' `attach` start.
pub(crate) fn attach_session(opts: &AttachOptions) -> anyhow::Result<Session> {
    check_window(opts.window)?;
    let pid = opts.pid;
    check_attach_target(pid)?;
    let platform = opts.platform.clone().unwrap_or_else(PlatformFacts::detect);
    let facts = facts::build(&platform, &process_program(pid), &opts.facts)?;
    let mut session = Session::new(pid, facts);
    session.program_from_exec = true;
    session.trace_start = TraceStart::attached_to(pid);
    if let Some(w) = opts.window {
        session.set_window(w);
    }
    session.origin.device = opts.device;
    Ok(session)
}

impl Drop for Started {
    fn drop(&mut self) {
        sys::close(self.error_fd);
    }
}

/// The error the child reported through the pipe, if any.
pub(crate) fn child_error(fd: i32) -> Option<anyhow::Error> {
    let mut msg = [0u8; 5];
    let n = sys::read_fd(fd, &mut msg).ok()?;
    if n != 5 {
        return None;
    }
    let errno = i32::from_ne_bytes([msg[1], msg[2], msg[3], msg[4]]);
    let os = std::io::Error::from_raw_os_error(errno);
    Some(match msg[0] {
        b's' => anyhow!("cannot install the seccomp prefilter: {os}"),
        _ => anyhow!("exec failed: {os}"),
    })
}

/// `name` as a path: as given when it has a `/`, else the first executable
/// file of that name in PATH.
pub fn resolve_command(name: &std::ffi::OsStr) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if name.as_bytes().contains(&b'/') {
        let p = PathBuf::from(name);
        let meta = match p.metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("cannot run {}: no such file", p.display())
            }
            Err(e) => bail!("cannot run {}: {e}", p.display()),
        };
        if meta.is_dir() {
            bail!("cannot run {}: it is a folder", p.display());
        }
        if !executable(&p) {
            bail!(
                "cannot run {}: not executable (permission denied: no execute permission)",
                p.display()
            );
        }
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(name);
        if executable(&candidate) {
            return Ok(candidate);
        }
    }
    bail!("{}: command not found", name.to_string_lossy())
}

/// A finished (or detached) session's summary (its whole run, or its last
/// window), with a fresh random id and the session's origin
/// ([`Session::summary`]).
pub fn summarize(session: &Session) -> Summary {
    session.summary()
}

/// A one-line reason why ptrace refused `pid`.
pub fn explain_seize_error(pid: Tid, err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ESRCH) => format!("no process with PID {pid}"),
        Some(libc::EPERM) => explain_eperm(pid),
        _ => format!("process {pid}: {err}"),
    }
}

fn status_field(pid: Tid, field: &str) -> Option<String> {
    let text = crate::tracee_file::read_proc_text(pid, "status")?;
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| v.trim().to_string())
}

/// A capability set from /proc/PID/status (`CapEff:`, `CapPrm:`, ...).
pub(crate) fn caps_of(pid: Tid, field: &str) -> Option<u64> {
    status_field(pid, field).and_then(|v| u64::from_str_radix(&v, 16).ok())
}

fn has_cap_sys_ptrace() -> bool {
    const CAP_SYS_PTRACE: u32 = 19;
    caps_of(sys::getpid(), "CapEff:").is_some_and(|caps| caps & (1 << CAP_SYS_PTRACE) != 0)
}

/// Capability names by number (capability.h), for messages.
const CAP_NAMES: [&str; 41] = [
    "chown",
    "dac_override",
    "dac_read_search",
    "fowner",
    "fsetid",
    "kill",
    "setgid",
    "setuid",
    "setpcap",
    "linux_immutable",
    "net_bind_service",
    "net_broadcast",
    "net_admin",
    "net_raw",
    "ipc_lock",
    "ipc_owner",
    "sys_module",
    "sys_rawio",
    "sys_chroot",
    "sys_ptrace",
    "sys_pacct",
    "sys_admin",
    "sys_boot",
    "sys_nice",
    "sys_resource",
    "sys_time",
    "sys_tty_config",
    "mknod",
    "lease",
    "audit_write",
    "audit_control",
    "setfcap",
    "mac_override",
    "mac_admin",
    "syslog",
    "wake_alarm",
    "block_suspend",
    "audit_read",
    "perfmon",
    "bpf",
    "checkpoint_restore",
];

/// The capabilities `pid` may use (its permitted set) that the agent has
/// not got, by name; empty when /proc does not tell.
fn caps_beyond_ours(pid: Tid) -> Vec<String> {
    let (Some(theirs), Some(ours)) = (caps_of(pid, "CapPrm:"), caps_of(sys::getpid(), "CapPrm:"))
    else {
        return Vec::new();
    };
    let extra = theirs & !ours;
    (0..64)
        .filter(|bit| extra & (1u64 << bit) != 0)
        .map(|bit| match CAP_NAMES.get(bit) {
            Some(name) => format!("cap_{name}"),
            None => format!("capability {bit}"),
        })
        .collect()
}

fn explain_eperm(pid: Tid) -> String {
    // A process that has exited but not been reaped yet refuses tracing
    // with EPERM too.
    if status_field(pid, "State:").is_some_and(|s| s.starts_with('Z')) {
        return format!("process {pid} has already exited (a zombie its parent has not reaped)");
    }
    let tracer = status_field(pid, "TracerPid:").and_then(|v| v.parse::<Tid>().ok());
    if let Some(t) = tracer.filter(|t| *t != 0) {
        let comm = crate::tracee_file::read_proc_text(t, "comm").unwrap_or_default();
        return format!(
            "permission denied: process {pid} is already traced by PID {t} ({}); only one tracer at a time",
            comm.trim()
        );
    }
    let cap = has_cap_sys_ptrace();
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok());
    match yama {
        Some(3) => {
            return "permission denied: Yama ptrace_scope=3 disables attaching for everyone (until reboot)".into()
        }
        Some(2) if !cap => {
            return "permission denied: Yama ptrace_scope=2 allows attaching only with CAP_SYS_PTRACE (run as root)".into()
        }
        Some(1) if !cap => {
            return format!("permission denied: Yama ptrace_scope=1 allows attaching only to descendants; run as root, or set kernel.yama.ptrace_scope=0, or start the program with `edge-agent run` (process {pid})")
        }
        _ => {}
    }
    let owner = status_field(pid, "Uid:").and_then(|v| {
        v.split_whitespace()
            .nth(1)
            .and_then(|u| u.parse::<u32>().ok())
    });
    match owner {
        Some(uid) if uid != sys::geteuid() && !cap => format!(
            "permission denied: process {pid} belongs to uid {uid}; tracing another user's process needs CAP_SYS_PTRACE (run as root)"
        ),
        _ => {
            let extra = caps_beyond_ours(pid);
            match (cap, extra.is_empty()) {
                // The kernel's rule: tracing a process that holds
                // capabilities the tracer lacks needs CAP_SYS_PTRACE.
                (false, false) => format!(
                    "permission denied: process {pid} holds capabilities the agent lacks ({}); tracing a more privileged process needs CAP_SYS_PTRACE",
                    extra.join(", ")
                ),
                (false, true) => format!(
                    "permission denied: process {pid} is not dumpable or changed credentials; tracing it needs CAP_SYS_PTRACE"
                ),
                // With CAP_SYS_PTRACE, the same uid and no Yama rule, the
                // kernel's own checks pass: what refused is a policy on top.
                // A target holding capabilities the agent's set lacks says
                // the agent runs in a reduced sandbox or container.
                (true, false) => format!(
                    "permission denied: process {pid} holds capabilities the agent lacks ({}), so the agent runs in a reduced sandbox or container whose policy (a security module, a namespace) refused, though the agent has CAP_SYS_PTRACE; run the agent outside it",
                    extra.join(", ")
                ),
                (true, true) => format!(
                    "permission denied: a security module (SELinux, AppArmor, Landlock, ...) refused to let us trace process {pid}: the agent has CAP_SYS_PTRACE and the same uid, and Yama allows it"
                ),
            }
        }
    }
}

/// What `attach` needs.
#[derive(Clone, Debug, Default)]
pub struct AttachOptions {
    /// The process.
    pub pid: Tid,
    /// Free facts.
    pub facts: Vec<(String, String)>,
    /// Platform facts (`None`: detected).
    pub platform: Option<PlatformFacts>,
    /// Detach after this long (`None`: until the process ends or a stop is
    /// requested).
    pub duration: Option<std::time::Duration>,
    /// How the tracer waits for stops.
    pub wait: WaitPolicy,
    /// Cut the trace into windows of this length (as
    /// [`TraceOptions::window`]); `None`: one summary.
    pub window: Option<Duration>,
    /// The device id the summary carries (zero: none).
    pub device: crate::device_id::DeviceId,
}

/// Seizes every thread of `pid` into `session`, including threads born
/// while the task list is walked: the walk repeats until a pass finds no
/// new thread. Each seized thread is interrupted so the engine can start
/// it on syscall stops.
pub fn seize_all(engine: &mut Engine, session: usize, pid: Tid) -> anyhow::Result<()> {
    let task_dir = format!("/proc/{pid}/task");
    let mut first = true;
    loop {
        let entries = match std::fs::read_dir(&task_dir) {
            Ok(e) => e,
            Err(_) if first => bail!("no process with PID {pid}"),
            Err(_) => return Ok(()), // it ended meanwhile; its exits follow
        };
        let mut new = 0;
        let mut tids: Vec<Tid> = entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        // The leader first: its refusal explains everything.
        tids.sort_by_key(|t| (*t != pid, *t));
        for tid in tids {
            if engine.is_traced(tid) {
                continue;
            }
            match engine.seize(session, tid, pid) {
                Ok(()) => {
                    let _ = engine.interrupt(tid);
                    new += 1;
                }
                Err(e) if first && tid == pid => {
                    bail!("cannot attach: {}", explain_seize_error(pid, &e))
                }
                // Exited, or auto-attached already (its clone event follows).
                Err(_) => {}
            }
        }
        first = false;
        if new == 0 {
            return Ok(());
        }
    }
}

/// Seizes into `session` the processes `pid` (seized) forked before its
/// seize, and theirs: the forks since are auto-attached, these are not.
/// For `watch`, whose run is the matched process and what it starts: met
/// before its exec with its parent's command line, such a child would be
/// taken for a run of its own. (`attach PID` traces the process named,
/// as strace -p does.) One that ended, or that the fork event attached
/// already, is skipped.
pub fn seize_children(engine: &mut Engine, session: usize, pid: Tid) {
    crate::light::procfs::walk_children(pid, |child| {
        !engine.is_traced(child) && seize_all(engine, session, child).is_ok()
    });
}

/// The program name of a running process (its executable's base name, or
/// its comm).
pub fn process_program(pid: Tid) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .or_else(|| crate::tracee_file::read_proc_text(pid, "comm").map(|c| c.trim().to_string()))
        .unwrap_or_default()
}

struct Deadline<'a> {
    at: Option<std::time::Instant>,
    done: Vec<Session>,
    on_window: &'a mut dyn FnMut(Summary),
}

impl Observer for Deadline<'_> {
    fn window_done(&mut self, summary: Summary) {
        (self.on_window)(summary);
    }
    fn tick(&mut self, _engine: &mut Engine) {
        if self.at.is_some_and(|at| std::time::Instant::now() >= at) {
            crate::signals::request_stop();
        }
    }
    fn session_done(&mut self, session: Session) {
        self.done.push(session);
    }
}

/// Attaches to `opts.pid` and all its threads, traces until it ends, the
/// duration passes, or a stop is requested, then detaches; returns the
/// summary (cut into windows: the last window's; the others go to
/// `on_window` as they end). The process is never killed or left stopped.
pub fn attach(opts: &AttachOptions, on_window: &mut dyn FnMut(Summary)) -> anyhow::Result<Summary> {
    let session = attach_session(opts)?;
    let pid = opts.pid;
    let mut engine = Engine::new(None, false);
    engine.set_wait_policy(opts.wait);
    let session = engine.add_session(session);
    seize_all(&mut engine, session, pid)?;
    let mut obs = Deadline {
        at: opts.duration.map(|d| std::time::Instant::now() + d),
        done: Vec::new(),
        on_window,
    };
    if opts.duration.is_some() || opts.window.is_some() {
        crate::signals::tick_every(WINDOW_TICK_US);
    }
    let result = engine.run(&mut obs);
    crate::signals::quiet();
    result.context("tracing failed")?;
    obs.done.extend(engine.take_sessions());
    let session = obs
        .done
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("the traced session vanished"))?;
    Ok(summarize(&session))
}
