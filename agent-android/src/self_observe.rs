//! An app observes itself (issue 32, item 3): [`start_self`] routes the
//! libc calls of every library loaded in the process (and of those loaded
//! later) through agent-inproc's wrappers by GOT patching, recording into
//! one table for the process; [`snapshot_self`] cuts what was recorded
//! since the last snapshot into an encoded summary, ready for
//! `spool_put`; [`stop_self`] makes the wrappers pass straight through.
//!
//! Decisions, and why:
//! - One table for the process's life, made at the first start (boxed:
//!   the recorder is ~100 KiB, too much for a Java thread's stack) and
//!   never freed: the patched GOT entries outlive any stop, and a wrapper
//!   already past its check may still record into it.
//! - Stop is final: a start after a stop is refused. The GOT entries stay
//!   patched (undoing them would race with the calls running through
//!   them), so a resume would only re-activate the same table with its
//!   first `only`; an app that wants another set starts over in a new
//!   process.
//! - A forked child stops recording (`pthread_atfork` child handler:
//!   [`agent_inproc::deactivate`], one atomic store, safe in a child of a
//!   threaded process). An app forks to exec (`Runtime.exec`,
//!   `ProcessBuilder`), the child is not the process the app asked to
//!   observe, and giving it a fresh table would mean allocating 100 KiB
//!   between fork and exec, where only async-signal-safe calls are safe.
//!   A snapshot asked in the child is refused.
//! - With a window, the summaries are numbered by the wall-clock-aligned
//!   window the snapshot falls in, like the other backends' windows: snap
//!   once per window (e.g. from the app's periodic worker) to get one
//!   summary per window; two snapshots in one window are two summaries of
//!   that window's index, each with what was recorded since the one before.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use agent_core::{
    Coverage, Exit, Facts, Origin, RunRecord, Source, StreamId, Summary, SyscallId, MAX_ENCODED_LEN,
};
use agent_inproc::RunTable;
use agent_linux::arch::{Abi, Native};
use agent_linux::engine::window::{MAX_WINDOW, MIN_WINDOW};
use agent_linux::engine::{random_id, unix_now_ns};
use agent_linux::{facts, sys, PlatformFacts};

use crate::device::{self, Properties};
use crate::error::Error;
use crate::{self_hooks, stack};

/// Who installed the observation of this process: the two uses exclude
/// each other, so one's cuts never take the other's calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holder {
    /// The app's own `startSelf`: continuous, until `stopSelf`.
    App,
    /// Directed app runs (`app_runs`): on for each run a per-device
    /// directive took, off between them.
    Runs,
}

/// The observation of this process, once started.
struct Observation {
    table: &'static RunTable,
    holder: Holder,
    /// Recording now (the wrappers are active).
    active: bool,
    stopped: bool,
    facts: Facts,
    stream: StreamId,
    /// The window length, ns (0: none).
    window_ns: u64,
    /// The start, monotonic and wall-clock (the one offset every summary
    /// converts its times with).
    start_ns: u64,
    start_unix_ns: u64,
    /// Where the last snapshot cut (monotonic ns).
    cut_ns: u64,
    /// How long the process ran before the start (`None`: not measured).
    late_ns: Option<u64>,
    /// A summary cut for a buffer too small, handed out by the next
    /// snapshot: a cut is never lost.
    pending: Option<Vec<u8>>,
}

static STATE: Mutex<Option<Observation>> = Mutex::new(None);

/// The pid of the observed process (0: none yet): a forked child, whose
/// memory is a copy, sees another pid.
static OBSERVED_PID: AtomicU32 = AtomicU32::new(0);

/// The state, also after a panic elsewhere held the lock (its data is
/// whole: every change is one assignment).
fn state() -> std::sync::MutexGuard<'static, Option<Observation>> {
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The syscalls of an `only` list (comma-separated names, e.g.
/// `"read,write"`); `None`: every one. Every unknown name is named.
fn parse_only(only: Option<&str>) -> Result<Option<Vec<SyscallId>>, Error> {
    let Some(list) = only else {
        return Ok(None);
    };
    let mut ids = Vec::new();
    let mut unknown = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match SyscallId::from_name(name) {
            Some(id) if id != SyscallId::OTHER && id != SyscallId::UNKNOWN => ids.push(id),
            _ => unknown.push(format!("{name:?}")),
        }
    }
    if !unknown.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "only: unknown syscall name{} {}",
            if unknown.len() > 1 { "s" } else { "" },
            unknown.join(", ")
        )));
    }
    if ids.is_empty() {
        return Err(Error::InvalidArgument(
            "only: no syscall name given (null observes every one)".into(),
        ));
    }
    Ok(Some(ids))
}

/// A window length the agent takes, in ns.
fn window_ns(window: Option<Duration>) -> Result<u64, Error> {
    match window {
        None => Ok(0),
        Some(w) if (MIN_WINDOW..=MAX_WINDOW).contains(&w) => Ok(w.as_nanos() as u64),
        Some(w) => Err(Error::InvalidArgument(format!(
            "window {} s: must be {} to {} s",
            w.as_secs_f64(),
            MIN_WINDOW.as_secs(),
            MAX_WINDOW.as_secs()
        ))),
    }
}

/// Begins observing this process: every thread's libc calls, in every
/// library loaded now or later, of the syscalls `only` names
/// (comma-separated; `None`: all), in windows of `window` if given. The
/// summaries carry the device's facts from `props`.
pub fn start_self(
    only: Option<&str>,
    window: Option<Duration>,
    props: &dyn Properties,
) -> Result<(), Error> {
    let only = parse_only(only)?;
    let window_ns = window_ns(window)?;
    // A fork of the observed process is refused before the lock (another
    // thread of the parent may have held it at the fork).
    if OBSERVED_PID.load(Ordering::Acquire) != 0 {
        check_observed_process()?;
    }
    let mut state = state();
    if let Some(observation) = state.as_ref() {
        return Err(Error::State(match observation.holder {
            Holder::App if observation.stopped => {
                "observing this process was stopped (stopSelf), and cannot start again in this process"
            }
            Holder::App => "already observing this process",
            Holder::Runs => {
                "this process is observed for directed runs (runBegin/runEnd); startSelf and directed runs exclude each other"
            }
        }
        .into()));
    }
    *state = Some(install(only.as_deref(), window_ns, Holder::App, props)?);
    Ok(())
}

/// Builds the table, patches the GOT and activates the wrappers: the
/// observation of this process, held by `holder`. Nothing stays installed
/// when it fails.
fn install(
    only: Option<&[SyscallId]>,
    window_ns: u64,
    holder: Holder,
    props: &dyn Properties,
) -> Result<Observation, Error> {
    let platform =
        device::platform(props, PlatformFacts::detect).unwrap_or_else(PlatformFacts::detect);
    let free = device::free_facts(props, &[]);
    let facts = facts::build(&platform, &process_program(), &free)
        .map_err(|e| Error::Internal(format!("the device's facts: {e:#}")))?;
    let start_ns = sys::monotonic_ns();
    let start_unix_ns = unix_now_ns();
    let late_ns = late_since_process_start(start_ns);
    // Made on a thread with a large stack: the table is built by value
    // before it is boxed.
    let table: &'static RunTable =
        stack::run(|| Ok(Box::leak(Box::new(RunTable::new(start_ns, only)))))?;
    agent_inproc::observe::process_joined(table);
    // Registered once for the process (a failure is final too: every
    // start then says why).
    static FORK_HANDLER: OnceLock<Result<(), i32>> = OnceLock::new();
    if let Err(errno) = *FORK_HANDLER.get_or_init(|| self_hooks::on_fork_child(forked_child)) {
        return Err(Error::Observe(format!(
            "pthread_atfork failed: {}",
            std::io::Error::from_raw_os_error(errno)
        )));
    }
    OBSERVED_PID.store(sys::getpid() as u32, Ordering::Release);
    if !agent_inproc::activate(table) {
        return Err(Error::State("already observing this process".into()));
    }
    if let Err(e) = agent_inproc::got::install(self_hooks::hooks()) {
        agent_inproc::deactivate();
        return Err(Error::Observe(e.to_string()));
    }
    Ok(Observation {
        table,
        holder,
        active: true,
        stopped: false,
        facts,
        stream: random_id(),
        window_ns,
        start_ns,
        start_unix_ns,
        cut_ns: start_ns,
        late_ns,
        pending: None,
    })
}

/// Begins observing this process for one directed run: installs the
/// observation at the first directed run (every syscall, no windows), or
/// turns the wrappers back on and drops what was recorded since the last
/// run. `Ok(false)`: not now, the run stays light — the app observes
/// itself with `startSelf`, another directed run is under way (a run's
/// summary holds the whole process's calls, so two at once would share
/// them), or this process is a fork of the observed one.
pub(crate) fn begin_run_observation(props: &dyn Properties) -> Result<bool, Error> {
    let observed = OBSERVED_PID.load(Ordering::Acquire);
    if observed != 0 && observed != sys::getpid() as u32 {
        return Ok(false);
    }
    let mut state = state();
    match state.as_mut() {
        None => {
            *state = Some(install(None, 0, Holder::Runs, props)?);
            Ok(true)
        }
        Some(o) if o.holder == Holder::App || o.active => Ok(false),
        Some(o) => {
            // Calls recorded by wrappers that were past their check when
            // the last run turned them off belong to no run.
            let now = sys::monotonic_ns();
            let _ = stack::run(|| Ok(cut_summary(o, now, run_record(o, now))))?;
            o.pending = None;
            if !agent_inproc::activate(o.table) {
                return Err(Error::State("already observing this process".into()));
            }
            o.active = true;
            Ok(true)
        }
    }
}

/// Ends the directed run begun by [`begin_run_observation`]: the wrappers
/// pass through again, and the encoded full summary of what the process
/// did since the begin is returned, with `run` (the app's duration and
/// status) and `facts` (the run's name as program, `directive=<id>`).
pub(crate) fn end_run_observation(mut run: RunRecord, facts: Facts) -> Result<Vec<u8>, Error> {
    let mut state = state();
    let Some(o) = state
        .as_mut()
        .filter(|o| o.holder == Holder::Runs && o.active)
    else {
        return Err(Error::State("no directed run is being observed".into()));
    };
    agent_inproc::deactivate();
    o.active = false;
    let now = sys::monotonic_ns();
    let (_, threads) = o.table.population();
    run.threads = threads.max(1);
    stack::run(|| {
        let mut summary = cut_summary(o, now, run);
        summary.facts = facts;
        summary.coverage = Coverage::in_process_from_start();
        encode(&mut summary)
    })
}

/// In a forked child: record nothing (see the module's doc).
extern "C" fn forked_child() {
    agent_inproc::deactivate();
}

/// Writes the encoded summary of what was observed since the last
/// snapshot (or the start) into `buf` and returns its length (at most
/// [`MAX_ENCODED_LEN`]). A buffer too small gets
/// [`Error::BufferTooSmall`] with the length needed, and the summary
/// waits for the next call.
pub fn snapshot_self(buf: &mut [u8]) -> Result<usize, Error> {
    let summary = take_summary(buf.len())?;
    buf[..summary.len()].copy_from_slice(&summary);
    Ok(summary.len())
}

/// [`snapshot_self`], as a new vector.
pub fn snapshot_self_vec() -> Result<Vec<u8>, Error> {
    take_summary(MAX_ENCODED_LEN)
}

/// The next summary, if it fits `room` bytes (else kept for the next
/// call).
fn take_summary(room: usize) -> Result<Vec<u8>, Error> {
    check_observed_process()?;
    let mut state = state();
    let Some(observation) = state.as_mut().filter(|o| o.holder == Holder::App) else {
        return Err(not_started());
    };
    let bytes = match observation.pending.take() {
        Some(bytes) => bytes,
        None => stack::run(|| cut(observation))?,
    };
    if bytes.len() > room {
        let needed = bytes.len();
        observation.pending = Some(bytes);
        return Err(Error::BufferTooSmall { needed });
    }
    Ok(bytes)
}

/// Ends observing: the wrappers pass straight through from now on (one
/// indirect call and one atomic load each: the GOT entries stay patched).
/// What was recorded before can still be snapshot. Stopping twice is fine.
pub fn stop_self() -> Result<(), Error> {
    check_observed_process()?;
    let mut state = state();
    let Some(observation) = state.as_mut().filter(|o| o.holder == Holder::App) else {
        return Err(not_started());
    };
    agent_inproc::deactivate();
    observation.active = false;
    observation.stopped = true;
    Ok(())
}

fn not_started() -> Error {
    Error::State("not observing this process: call startSelf first".into())
}

/// Refuses the calls of a forked child of the observed process.
fn check_observed_process() -> Result<(), Error> {
    match OBSERVED_PID.load(Ordering::Acquire) {
        0 => Err(not_started()),
        pid if pid != sys::getpid() as u32 => Err(Error::State(
            "this process is a fork of the observed one and is not observed".into(),
        )),
        _ => Ok(()),
    }
}

/// Cuts the table into the encoded summary of the time since the last cut.
fn cut(observation: &mut Observation) -> Result<Vec<u8>, Error> {
    let now = sys::monotonic_ns();
    let run = run_record(observation, now);
    let mut summary = cut_summary(observation, now, run);
    summary.coverage = match observation.late_ns {
        Some(late) => Coverage::in_process_attached(late),
        None => Coverage {
            late_ns: None,
            from_start: false,
            source: Source::InProcess,
        },
    };
    encode(&mut summary)
}

/// The run record of a snapshot at `now` (monotonic ns): the time since
/// the last cut, still running, in the window `now` falls in.
fn run_record(observation: &Observation, now: u64) -> RunRecord {
    let window = window_index(
        observation.start_unix_ns,
        observation.to_unix(now),
        observation.window_ns,
    );
    let (_, threads) = observation.table.population();
    RunRecord {
        processes: 1,
        threads: threads.max(1),
        window,
        ..RunRecord::new(
            observation.to_unix(observation.cut_ns),
            now.saturating_sub(observation.cut_ns),
            Exit::Running,
            Native::NATIVE,
        )
    }
}

/// Cuts what the table recorded since the last cut into a summary with
/// `run` as its record, and moves the cut to `now`.
fn cut_summary(observation: &mut Observation, now: u64, run: RunRecord) -> Summary {
    let mut summary =
        observation
            .table
            .recorder
            .cut(random_id(), run, observation.facts.clone(), now);
    observation.cut_ns = now;
    summary.origin = Origin {
        stream: observation.stream,
        window_ns: observation.window_ns,
        ..Origin::default()
    };
    summary
}

fn encode(summary: &mut Summary) -> Result<Vec<u8>, Error> {
    let mut buf = [0u8; MAX_ENCODED_LEN];
    let bytes = summary
        .encode(&mut buf)
        .map_err(|e| Error::Internal(format!("encoding the summary: {e}")))?;
    Ok(bytes.to_vec())
}

impl Observation {
    /// A monotonic time as wall-clock time (the one offset of the start).
    fn to_unix(&self, mono: u64) -> u64 {
        let unix = self.start_unix_ns as i128 + (mono as i128 - self.start_ns as i128);
        unix.clamp(0, u64::MAX as i128) as u64
    }
}

/// The index of the window of `len_ns` (0: no windows) that wall-clock
/// time `now_unix_ns` falls in, windows being aligned to multiples of
/// their length and counted from the one the observation started in.
fn window_index(start_unix_ns: u64, now_unix_ns: u64, len_ns: u64) -> u32 {
    if len_ns == 0 {
        return 0;
    }
    let index = (now_unix_ns / len_ns).saturating_sub(start_unix_ns / len_ns);
    u32::try_from(index).unwrap_or(u32::MAX)
}

/// The program's name for the summary: the file name of the process's
/// `argv[0]` (an Android app's is its package name, set by the zygote).
fn process_program() -> String {
    let from_cmdline = std::fs::read("/proc/self/cmdline").ok().and_then(|bytes| {
        let first = bytes.split(|b| *b == 0).next()?;
        (!first.is_empty()).then(|| {
            use std::os::unix::ffi::OsStrExt;
            facts::program_name(std::ffi::OsStr::from_bytes(first))
        })
    });
    from_cmdline
        .or_else(|| {
            std::env::current_exe()
                .ok()
                .map(|exe| facts::program_name(exe.as_os_str()))
        })
        .unwrap_or_else(|| "app".into())
}

/// How long this process ran before `now_ns` (CLOCK_MONOTONIC): its start
/// time (`/proc/self/stat` field 22, clock ticks since boot on
/// CLOCK_BOOTTIME, carried over to the monotonic clock), as the ptrace
/// backend measures an attach.
fn late_since_process_start(now_ns: u64) -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let start_ticks = start_ticks(&stat)?;
    let start_boot = start_ticks.saturating_mul(sys::ns_per_clock_tick());
    let suspended = sys::boottime_ns().saturating_sub(sys::monotonic_ns());
    Some(now_ns.saturating_sub(start_boot.saturating_sub(suspended)))
}

/// Field 22 of a `/proc/PID/stat` line (counted after the command name's
/// last `)`: the name may hold spaces and parentheses).
fn start_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lists_name_every_unknown_call() {
        assert_eq!(parse_only(None).unwrap(), None);
        let read = SyscallId::from_name("read").unwrap();
        assert_eq!(parse_only(Some(" read, ")).unwrap(), Some(vec![read]));
        let Err(Error::InvalidArgument(m)) = parse_only(Some("read,nope,zilch")) else {
            panic!("unknown names accepted");
        };
        assert!(m.contains("\"nope\"") && m.contains("\"zilch\""), "{m}");
        assert!(matches!(
            parse_only(Some(" , ")),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            parse_only(Some("<other>")),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn windows_are_one_second_to_a_day() {
        assert_eq!(window_ns(None).unwrap(), 0);
        assert_eq!(
            window_ns(Some(Duration::from_secs(60))).unwrap(),
            60_000_000_000
        );
        for bad in [0, 86_401] {
            let Err(Error::InvalidArgument(m)) = window_ns(Some(Duration::from_secs(bad))) else {
                panic!("window {bad} accepted");
            };
            assert!(m.contains("1 to 86400"), "{m}");
        }
    }

    #[test]
    fn windows_are_aligned_to_their_length() {
        let s = 1_000_000_000;
        assert_eq!(window_index(10 * s + 5, 50 * s, 0), 0, "no windows");
        // Started 0.5 s into a 60 s window: that window is 0, the next 1.
        assert_eq!(window_index(60 * s + s / 2, 119 * s, 60 * s), 0);
        assert_eq!(window_index(60 * s + s / 2, 120 * s, 60 * s), 1);
        assert_eq!(window_index(60 * s + s / 2, 600 * s, 60 * s), 9);
        assert_eq!(window_index(60 * s, 59 * s, 60 * s), 0, "a clock set back");
    }

    #[test]
    fn our_own_start_is_before_now() {
        let now = sys::monotonic_ns();
        let late = late_since_process_start(now).expect("/proc/self/stat");
        assert!(late > 0 && late < now.max(1) + 1, "{late}");
        assert_eq!(
            start_ticks("1 (a) b) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 x"),
            Some(777)
        );
    }
}
