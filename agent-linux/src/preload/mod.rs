//! The in-process backend under `LD_PRELOAD` (`run --backend preload`):
//! the command runs with `libedge_preload.so` (agent-preload, shipped next
//! to `edge-agent`) in its `LD_PRELOAD`, and every process of the run —
//! children that fork and images that exec inherit the variable — records
//! its libc calls into one run table the agent made in a private folder
//! and maps shared ([`crate::sys::RunTableFile`]). The agent never stops
//! the program: it waits for the run's processes to end (it is their
//! subreaper, so orphans come back to it), cuts the windows from the
//! table as they end, and summarizes the table at the end. A process
//! killed by SIGKILL leaves its counts in the table.
//!
//! What such a run sees is the program's calls of libc's exported
//! functions (agent-inproc's wrappers), not raw `syscall()`s nor the calls
//! libc makes itself (stdio's writes, malloc's mmaps, the loader's
//! opens): its summaries say so in their coverage.

mod command;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use agent_core::{Coverage, Exit, RunRecord, Summary, SyscallId};
use agent_inproc::RunTable;
use anyhow::{anyhow, bail, Context};

pub use command::NotPreloadable;

use crate::arch::{Abi, Native};
use crate::engine::{random_id, Session};
use crate::sys::{self, RunTableFile, Tid, WaitStatus};
use crate::trace::{self, TraceOptions};

/// The library's file name, next to `edge-agent`.
pub const LIBRARY: &str = "libedge_preload.so";

/// The variable that names another library file (a packaged layout).
pub const LIBRARY_VAR: &str = "EDGE_AGENT_PRELOAD_LIB";

/// The variable the library reads the run table's path from.
const TABLE_VAR: &str = "EDGE_AGENT_PRELOAD_TABLE";

/// How often the agent looks for ended processes and due windows.
const TICK: Duration = Duration::from_millis(5);

/// Ticks a detaching agent waits for the table's lock (1 s).
const LOCK_TRIES: u32 = 200;

/// Where the library is: `$EDGE_AGENT_PRELOAD_LIB`, else next to the
/// running executable.
pub fn library() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(LIBRARY_VAR).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!(
                "{LIBRARY_VAR} names {}, which is not a file",
                path.display()
            );
        }
        return Ok(path);
    }
    let exe = std::env::current_exe().context("cannot find the agent's own executable")?;
    let path = exe
        .parent()
        .map(|dir| dir.join(LIBRARY))
        .ok_or_else(|| anyhow!("the agent's executable has no folder"))?;
    if !path.is_file() {
        bail!(
            "{LIBRARY} is not next to {} (install it there, or name it in {LIBRARY_VAR})",
            exe.display()
        );
    }
    Ok(path)
}

/// Why `command` (as given: looked up in PATH) cannot run under the
/// preload backend, if it cannot.
pub fn check_command(command: &OsStr) -> anyhow::Result<()> {
    let path = trace::resolve_command(command)?;
    command::check(&path)
        .map_err(|why| anyhow!("--backend preload cannot observe {}: {why}", path.display()))
}

/// A command started under the preload backend.
#[derive(Debug)]
pub struct PreloadStarted {
    table: RunTableFile,
    /// The run's private folder (the table file in it); removed when the
    /// run's last process has ended (the agent may then end by the
    /// program's signal, without running destructors).
    folder: Option<tempfile::TempDir>,
    pid: Tid,
    error_fd: i32,
    given: String,
    session: Session,
    /// The current window's index and end (monotonic ns).
    window: Option<(u32, u64, u64)>,
    status: Option<WaitStatus>,
}

impl PreloadStarted {
    /// Makes the run's table, forks the command with the library in its
    /// `LD_PRELOAD` and lets it run.
    pub fn start(opts: &TraceOptions) -> anyhow::Result<PreloadStarted> {
        let Some(arg0) = opts.command.first() else {
            bail!("no command given");
        };
        check_command(arg0)?;
        let library = library()?;
        // Orphans of the run come back to the agent, which reaps them and
        // so knows when the run's last process ended.
        sys::become_subreaper().context("cannot make the agent the run's subreaper")?;
        let folder = tempfile::Builder::new()
            .prefix("edge-agent-run.")
            .tempdir()
            .context("cannot make the run's private folder")?;
        let path = folder.path().join("table");
        let only: Option<Vec<SyscallId>> = opts.only.clone();
        let table =
            RunTableFile::create(&path, RunTable::new(sys::monotonic_ns(), only.as_deref()))
                .with_context(|| format!("cannot make the run table {}", path.display()))?;
        let preload = preload_list(&library);
        let env = [
            ("LD_PRELOAD", preload.as_os_str()),
            (TABLE_VAR, path.as_os_str()),
        ];
        let trace::StoppedCommand {
            pid,
            error_fd,
            mut session,
            given,
        } = trace::fork_stopped(opts, None, &env)?;
        session.trace_start = crate::coverage::TraceStart::FromStart;
        let window = session.windows().map(|w| {
            let (index, end) = first_window(&session, w.len_ns());
            (index, end, w.len_ns())
        });
        sys::kill(pid, libc::SIGCONT).context("cannot continue the command")?;
        Ok(PreloadStarted {
            table,
            folder: Some(folder),
            pid,
            error_fd,
            given,
            session,
            window,
            status: None,
        })
    }

    /// The command's pid.
    pub fn pid(&self) -> Tid {
        self.pid
    }

    /// Waits for the run's every process to end (or a stop request),
    /// handing each ended window to `on_window`; returns the last summary.
    pub fn trace(&mut self, on_window: &mut dyn FnMut(Summary)) -> anyhow::Result<Summary> {
        let mut detached = false;
        loop {
            if crate::signals::stop_requested().is_some() {
                detached = true;
                break;
            }
            match sys::try_wait_any() {
                Ok(Some((pid, st))) => {
                    if pid == self.pid {
                        self.status = Some(st);
                    }
                    continue;
                }
                Ok(None) => {}
                // No child left: the run is over.
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => break,
                Err(e) => return Err(e).context("cannot wait for the run's processes"),
            }
            self.cut_due_windows(on_window);
            std::thread::sleep(TICK);
        }
        crate::signals::quiet();
        self.session.end_ns = sys::monotonic_ns();
        let (start_ns, index) = match self.window {
            Some((index, end, len)) => (end - len, index),
            None => (self.session.start_ns, 0),
        };
        let exit = if detached {
            // The program runs on, recording nothing from now on.
            self.table.table().stop_recording();
            Exit::Detached
        } else {
            match self.status {
                Some(st) => match (st.exited(), st.signaled()) {
                    (Some(code), _) => Exit::Code(code),
                    (_, Some(sig)) => Exit::Signal(sig),
                    _ => Exit::Detached,
                },
                None => Exit::Detached,
            }
        };
        let run = self.record(start_ns, self.session.end_ns, exit, index);
        let facts = self.session.facts.clone();
        let now = self.session.end_ns;
        let mut summary = if detached {
            // Processes of the run live on: the table is shared still, and
            // a recording holds its lock for a moment at most; one that
            // stays held was left so by a process killed while recording.
            let table = self.table.table();
            let mut tries = 0;
            loop {
                if let Some(s) = table.recorder.try_cut(random_id(), run, facts.clone(), now) {
                    break s;
                }
                tries += 1;
                if tries > LOCK_TRIES {
                    bail!("the run table stayed locked (a process of the run was killed while recording): no summary");
                }
                std::thread::sleep(TICK);
            }
        } else {
            self.table
                .table_alone()
                .recorder
                .cut_exclusive(random_id(), run, facts, now)
        };
        self.finish(&mut summary);
        if !detached {
            // Nothing of the run will open the table again.
            if let Some(folder) = self.folder.take() {
                let _ = folder.close();
            }
            if let Some(err) = trace::child_error(self.error_fd) {
                return Err(err.context(format!("cannot run {}", self.given)));
            }
            if self.table.table().population().0 == 0 {
                eprintln!(
                    "edge-agent: {} never loaded {LIBRARY} (it cleared LD_PRELOAD, or its loader ignored it): nothing was recorded",
                    self.given
                );
            }
        }
        Ok(summary)
    }

    /// The command's exit status, once it has ended.
    pub fn wait(&mut self) -> anyhow::Result<ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        if let Some(st) = self.status {
            return Ok(ExitStatus::from_raw(st.0));
        }
        let st = sys::wait_pid(self.pid, 0, true)
            .context("cannot wait for the command")?
            .ok_or_else(|| anyhow!("interrupted"))?;
        self.status = Some(st);
        Ok(ExitStatus::from_raw(st.0))
    }

    /// The table's and the recorder's counts (`--stats`).
    pub fn stats(&self) -> PreloadStats {
        let table = self.table.table();
        let (processes, threads) = table.population();
        let r = table.recorder.stats();
        PreloadStats {
            processes,
            threads,
            direct: r.direct,
            deferred: r.deferred,
            lost: r.lost,
        }
    }

    /// The run's private folder (its table file), until the run ended.
    pub fn folder(&self) -> Option<&Path> {
        self.folder.as_ref().map(|f| f.path())
    }

    /// Cuts the windows that ended by now.
    fn cut_due_windows(&mut self, on_window: &mut dyn FnMut(Summary)) {
        let Some((index, end, len)) = self.window else {
            return;
        };
        let now = sys::monotonic_ns();
        if now < end {
            return;
        }
        let run = self.record(end - len, end, Exit::Running, index);
        let table = self.table.table();
        // A recording holds the lock for a moment: the next tick tries
        // again (a process killed while recording leaves it held: that
        // window is then summarized at the end, with the rest).
        let Some(mut summary) =
            table
                .recorder
                .try_cut(random_id(), run, self.session.facts.clone(), end)
        else {
            return;
        };
        self.finish(&mut summary);
        on_window(summary);
        // A window with no call in it is still a window: aligned times.
        let skipped = (now - end) / len;
        self.window = Some((index + 1 + skipped as u32, end + len * (1 + skipped), len));
    }

    /// The run record of a summary from `start_ns` to `end_ns`.
    fn record(&self, start_ns: u64, end_ns: u64, exit: Exit, window: u32) -> RunRecord {
        let (processes, threads) = self.table.table().population();
        RunRecord {
            processes: processes.max(1),
            threads: threads.max(1),
            window,
            ..RunRecord::new(
                self.session.to_unix_ns(start_ns),
                end_ns.saturating_sub(start_ns),
                exit,
                Native::NATIVE,
            )
        }
    }

    /// What every summary of the run carries besides the table's counts.
    fn finish(&self, summary: &mut Summary) {
        summary.origin = self.session.origin;
        summary.coverage = Coverage::in_process_from_start();
    }
}

/// The command's `LD_PRELOAD`: the library, then what the agent's own
/// environment had (the program's other preloads keep working).
fn preload_list(library: &Path) -> std::ffi::OsString {
    let mut list = library.as_os_str().to_os_string();
    if let Some(theirs) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        list.push(" ");
        list.push(theirs);
    }
    list
}

/// The first window's index and end: windows are aligned to wall-clock
/// multiples of their length, as the other backends cut them.
fn first_window(session: &Session, len_ns: u64) -> (u32, u64) {
    let start_unix = session.to_unix_ns(session.start_ns);
    let end_unix = (start_unix / len_ns + 1) * len_ns;
    (0, session.start_ns + (end_unix - start_unix))
}

/// What the preload backend counted (`--stats`).
#[derive(Clone, Copy, Debug)]
pub struct PreloadStats {
    /// Processes that joined the run (loaded the library).
    pub processes: u32,
    /// Threads that recorded a call.
    pub threads: u32,
    /// Calls recorded at once.
    pub direct: u64,
    /// Calls that waited in a thread's ring first.
    pub deferred: u64,
    /// Calls no ring could take.
    pub lost: u64,
}
