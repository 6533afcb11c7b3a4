//! The proactive loop inside an app (issue 32's light mode, docs/proactive.md
//! "Inside an app"): the app brackets each operation worth comparing
//! across phones — a sync, a page load, a checkout — with [`run_begin`]
//! and [`run_end`], and gets one summary per run to spool:
//!
//! - a **light record** (`Summary::light`, like `watch --light`'s): the
//!   run's name as program, start, duration, the app's outcome as exit
//!   code, and the process's CPU time and I/O bytes (`/proc/self/stat`,
//!   `/proc/self/io`) over the run. It costs two small `/proc` reads at
//!   each end and nothing in between;
//! - or, when a per-device directive of the service (`GET
//!   /v1/directives?device=<id>`, given by [`set_directives`] or
//!   [`fetch_directives`]) takes the run, a **full summary** of the run by
//!   the in-process backend (agent-inproc's wrappers, GOT-patched as
//!   `startSelf` does), with the fact `directive=<id>` the service's
//!   investigation looks for.
//!
//! So the service's detector (`serve --auto`) clusters the apps' light runs
//! like any device's, and the directives it issues are carried out inside
//! the app, where ptrace cannot reach.
//!
//! Decisions, and why:
//! - Both records cover the **whole process** over the run, not only the
//!   calling thread: an app's operation hops threads (executors,
//!   callbacks), and the wrappers record every thread.
//! - One directed run at a time: two would share the process's calls. A
//!   run begun while another directed run is under way, or while the app
//!   observes itself with `startSelf`, stays light and its directive keeps
//!   the run for a later one.
//! - A directed run that cannot be observed (the GOT patcher refused)
//!   gives its run back to the directive and stays light; the reason is
//!   kept for [`last_refusal`].
//! - Open runs are bounded ([`MAX_OPEN_RUNS`]): a leaked handle cannot
//!   grow the table without end.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use agent_core::{CpuTime, Exit, Facts, IoBytes, Origin, RunRecord, Summary, MAX_ENCODED_LEN};
use agent_linux::arch::{Abi, Native};
use agent_linux::engine::{random_id, unix_now_ns};
use agent_linux::light::{procfs, DirectedRuns};
use agent_linux::{facts, sys, PlatformFacts};

use crate::device::{self, Properties};
use crate::error::Error;
use crate::{self_observe, stack};

/// Runs begun and not yet ended, at most.
pub const MAX_OPEN_RUNS: usize = 256;

/// One run between its begin and its end.
struct OpenRun {
    name: String,
    start_unix_ns: u64,
    start_ns: u64,
    cpu: Option<CpuTime>,
    io: Option<IoBytes>,
    /// The directive that took it, when it is observed in full.
    directive: Option<String>,
}

/// The runs, the directives and what they took.
#[derive(Default)]
struct Runs {
    open: HashMap<u64, OpenRun>,
    directed: DirectedRuns,
    last_refusal: Option<String>,
}

static RUNS: Mutex<Option<Runs>> = Mutex::new(None);
static NEXT_HANDLE: AtomicU64 = AtomicU64::new(1);

/// The runs' state, also after a panic elsewhere held the lock.
fn runs() -> MutexGuard<'static, Option<Runs>> {
    RUNS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Checks a run's name: it becomes the summary's program, which the
/// service groups runs by and directives name.
fn check_name(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.len() > wire::directive::MAX_PROGRAM_NAME_LEN {
        return Err(Error::InvalidArgument(format!(
            "run name {name:?}: must be 1 to {} bytes",
            wire::directive::MAX_PROGRAM_NAME_LEN
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::InvalidArgument(format!(
            "run name {name:?}: control characters are not allowed"
        )));
    }
    Ok(())
}

/// Begins a run named `name` (e.g. `"checkout"`); returns its handle for
/// [`run_end`]. If a directive takes it, the process's calls are observed
/// in full until the end.
pub fn run_begin(name: &str, props: &dyn Properties) -> Result<u64, Error> {
    check_name(name)?;
    let start_unix_ns = unix_now_ns();
    let mut guard = runs();
    let state = guard.get_or_insert_with(Runs::default);
    if state.open.len() >= MAX_OPEN_RUNS {
        return Err(Error::State(format!(
            "{MAX_OPEN_RUNS} runs are open already: end them (runEnd) before beginning more"
        )));
    }
    let mut directive = None;
    let nobody_directed = state.open.values().all(|r| r.directive.is_none());
    if nobody_directed
        && state
            .directed
            .would_claim(name, name.as_bytes(), start_unix_ns)
    {
        match self_observe::begin_run_observation(props) {
            Ok(true) => directive = state.directed.claim(name, name.as_bytes(), start_unix_ns),
            Ok(false) => {}
            Err(e) => state.last_refusal = Some(e.to_string()),
        }
    }
    // A directed run's summary has the table's figures: no counters.
    let (cpu, io) = match directive {
        Some(_) => (None, None),
        None => process_counters(),
    };
    let handle = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
    state.open.insert(
        handle,
        OpenRun {
            name: name.to_string(),
            start_unix_ns,
            start_ns: sys::monotonic_ns(),
            cpu,
            io,
            directive,
        },
    );
    Ok(handle)
}

/// Ends run `handle` with the app's outcome `status` (0: it succeeded;
/// any other value: it failed, as a program's exit code) and returns its
/// encoded summary (at most [`MAX_ENCODED_LEN`] bytes), ready for
/// `spool_put`.
pub fn run_end(handle: u64, status: i32, props: &dyn Properties) -> Result<Vec<u8>, Error> {
    let end_ns = sys::monotonic_ns();
    let mut guard = runs();
    let Some(run) = guard.as_mut().and_then(|s| s.open.remove(&handle)) else {
        return Err(Error::InvalidArgument(format!(
            "run handle {handle}: no such open run (never begun, or ended already)"
        )));
    };
    let record = RunRecord {
        processes: 1,
        threads: 1,
        ..RunRecord::new(
            run.start_unix_ns,
            end_ns.saturating_sub(run.start_ns),
            Exit::Code(status),
            Native::NATIVE,
        )
    };
    let mut free = Vec::new();
    if let Some(id) = &run.directive {
        free.push(("directive".to_string(), id.clone()));
    }
    let facts = run_facts(&run.name, &free, props)?;
    if run.directive.is_some() {
        return self_observe::end_run_observation(record, facts);
    }
    let (cpu, io) = process_counters();
    let cpu = cpu.zip(run.cpu).map(|(now, then)| CpuTime {
        user_ns: now.user_ns.saturating_sub(then.user_ns),
        system_ns: now.system_ns.saturating_sub(then.system_ns),
    });
    let io = io.zip(run.io).map(|(now, then)| IoBytes {
        read: now.read.saturating_sub(then.read),
        written: now.written.saturating_sub(then.written),
    });
    let origin = Origin {
        stream: random_id(),
        ..Origin::default()
    };
    stack::run(|| {
        let mut summary = Summary::light(random_id(), record, facts, origin, cpu, io);
        let mut buf = [0u8; MAX_ENCODED_LEN];
        let bytes = summary
            .encode(&mut buf)
            .map_err(|e| Error::Internal(format!("encoding the summary: {e}")))?;
        Ok(bytes.to_vec())
    })
}

/// The facts of a run's summary: the device's, the run's name as program.
fn run_facts(
    name: &str,
    free: &[(String, String)],
    props: &dyn Properties,
) -> Result<Facts, Error> {
    // Read once per process: the platform does not change under a running
    // app, and a light run should cost its two /proc reads, not a uname
    // and os-release per run.
    static PLATFORM: OnceLock<PlatformFacts> = OnceLock::new();
    let platform = PLATFORM.get_or_init(|| {
        device::platform(props, PlatformFacts::detect).unwrap_or_else(PlatformFacts::detect)
    });
    let free = device::free_facts(props, free);
    facts::build(platform, name, &free)
        .map_err(|e| Error::Internal(format!("the device's facts: {e:#}")))
}

/// This process's CPU time and I/O bytes now (`None` each when `/proc`
/// cannot tell).
fn process_counters() -> (Option<CpuTime>, Option<IoBytes>) {
    let pid = sys::getpid();
    let cpu = procfs::read_stat(pid).map(|s| s.cpu(procfs::ns_per_tick()));
    (cpu, procfs::read_io(pid))
}

/// Takes the body of `GET /v1/directives?device=<id>` (fetched by the app
/// itself): its per-device directives replace the ones known (the runs
/// each took are kept per id). Returns how many are in force. A body
/// that is not valid is refused whole, naming what was wrong, and the
/// directives known stay.
pub fn set_directives(body: &[u8]) -> Result<usize, Error> {
    let directive = agent_linux::directives::parse(body)
        .map_err(|e| Error::InvalidArgument(format!("the directives: {e}")))?;
    let count = directive.device.len();
    let mut guard = runs();
    guard
        .get_or_insert_with(Runs::default)
        .directed
        .set(directive.device);
    Ok(count)
}

/// Where to fetch the directives from.
#[derive(Debug, Clone, Default)]
pub struct DirectiveSource {
    /// The app's spool folder: its device id is kept beside it.
    pub spool_dir: PathBuf,
    /// The service's base URL (`https://...`).
    pub server: String,
    /// A file holding the upload token, if the service wants one.
    pub token_file: Option<PathBuf>,
    /// A CA certificate file the service's certificate chains to, if not a
    /// public one.
    pub ca: Option<PathBuf>,
}

/// Fetches this device's directives from the service and takes them as
/// [`set_directives`] does. Blocks for the request (up to a minute): call
/// it from the app's periodic worker, not the UI thread.
pub fn fetch_directives(source: &DirectiveSource) -> Result<usize, Error> {
    uploader::transport::check_url(&source.server)
        .map_err(|e| Error::InvalidArgument(format!("server {:?}: {e:#}", source.server)))?;
    let device = crate::api::device_id(&source.spool_dir, false)?;
    let body = stack::run(|| {
        let endpoint = uploader::session::server_endpoint(
            &source.server,
            source.token_file.as_deref(),
            source.ca.clone(),
            &[],
            std::time::Duration::from_secs(60),
        )
        .map_err(|e| Error::InvalidArgument(format!("{e:#}")))?;
        let client = uploader::transport::Client::new(endpoint)
            .map_err(|e| Error::Upload(format!("{e:#}")))?;
        client
            .fetch_directives_for(Some(&device.into()))
            .map_err(|e| Error::Upload(format!("fetching the directives: {e}")))
    })?;
    set_directives(&body)
}

/// Why the last run a directive wanted could not be observed in full
/// (`None`: none was refused).
pub fn last_refusal() -> Option<String> {
    runs().as_ref().and_then(|s| s.last_refusal.clone())
}
