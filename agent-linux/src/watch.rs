//! `watch`: trace every process whose command line contains a text (the
//! provider's host or URL, a server's name), as the research's agent does,
//! and hand each one's summary over when it ends.
//!
//! Run as a daemon it must keep up with a server's life: processes already
//! running at start are traced as well as new ones, a restarted server is a
//! new matching process and is traced again, the text may change while it
//! runs (the service's directives, see `directives.rs`), and SIGTERM lets
//! every tracee go. Its memory is bounded by what is traced now, not by how
//! long it has run: the set of pids looked at is pruned as they vanish.
//!
//! How it finds new programs ([`Discover`]): as root, the kernel's
//! process-events connector tells it of every exec at once ([`crate::execs`])
//! and it attaches then, missing only the calls the program makes before
//! the seize; otherwise it scans /proc every `scan_interval`, and misses
//! runs shorter than that and up to that much of every run's start.
//!
//! With `light`, a matching process is not traced: its run is recorded
//! from `/proc` alone (`light/`; the connector's exit events give its exact
//! exit and end), and only the runs a per-device directive takes are
//! traced, fully, as one whole-run summary with the fact `directive=<id>`.
//!
//! The backend (`backend`) traces the runs: ptrace seizes each matched
//! process (the engine's loop drives the watch), or one BPF program,
//! loaded once, counts each matched run in a slot of its own in the
//! kernel and never stops it ([`crate::watch_ebpf`] drives the watch).
//! Discovery, matching, light runs and directives are the same for both:
//! they hand a run to a [`RunTracer`].

use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use agent_core::Summary;

use crate::coverage::TraceStart;
use crate::device_id::DeviceId;
use crate::directives::Update;
use crate::ebpf;
use crate::engine::{Engine, Observer, Session};
use crate::execs::ExecFeed;
use crate::facts::{self, PlatformFacts};
use crate::light::{procfs, DirectedRuns, LightRuns};
use crate::procevents::Ended;
use crate::sys::{self, Tid};
use crate::trace::{explain_seize_error, process_program, seize_all, seize_children, summarize};
use crate::tracee_file;
use crate::wait::WaitPolicy;
use crate::watch_shed::Shedding;

/// What `watch` needs.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// Text the command line must contain (arguments joined by spaces).
    pub pattern: String,
    /// Free facts for every summary.
    pub facts: Vec<(String, String)>,
    /// Platform facts (`None`: detected).
    pub platform: Option<PlatformFacts>,
    /// How often /proc is scanned for new processes.
    pub scan_interval: Duration,
    /// How the tracer waits for stops.
    pub wait: WaitPolicy,
    /// Cut each traced process's trace into windows of this length (as
    /// [`crate::TraceOptions::window`]); `None`: one summary per process.
    pub window: Option<Duration>,
    /// The device id every summary carries (zero: none).
    pub device: DeviceId,
    /// How new programs are found.
    pub discover: Discover,
    /// Record matching runs from /proc alone (light records) instead of
    /// tracing them; per-device directives still pick runs to trace.
    pub light: bool,
    /// The tracer of the runs traced (directed runs too, with `light`).
    pub backend: ebpf::Choice,
}

/// How `watch` finds new matching programs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Discover {
    /// The connector where the agent may subscribe (root), else the scan
    /// (one line on stderr says which and why).
    #[default]
    Auto,
    /// The process-events connector only (an error without CAP_NET_ADMIN).
    Connector,
    /// Scanning /proc every `scan_interval`.
    Scan,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            pattern: String::new(),
            facts: Vec::new(),
            platform: None,
            scan_interval: Duration::from_millis(100),
            wait: WaitPolicy::default(),
            window: None,
            device: DeviceId::default(),
            discover: Discover::Auto,
            light: false,
            backend: ebpf::Choice::Ptrace,
        }
    }
}

/// Where the watch hands a matched run to be traced: the ptrace engine
/// or the eBPF runner.
pub(crate) trait RunTracer {
    /// Whether process `pid` is traced already (as a run or a child of
    /// one).
    fn is_traced(&self, pid: Tid) -> bool;
    /// Whether any process is traced at all.
    fn traces_any(&self) -> bool;
    /// Traces process `pid` (its threads, its future children) as the
    /// session `make` builds; on an error nothing is left of the session.
    /// `matched`: the process whose command line matched: a process that
    /// took its pid since (it ended) is not traced. The session is built
    /// once the tracer holds the process (ptrace: after the seize and the
    /// interrupt), so that its cost does not add to the calls missed.
    fn start(&mut self, make: SessionMaker<'_>, pid: Tid, matched: &Matched) -> anyhow::Result<()>;
    /// Whether a match should be pinned with a pidfd rather than read
    /// from `/proc/PID/stat` ([`Matched::of`]).
    fn pins(&self) -> bool {
        false
    }
}

/// The process a pid named when its command line was read, so that the
/// one traced is that one (an exec storm reuses pids within a minute).
pub(crate) enum Matched {
    /// A pidfd, taken before the command line is read: while its process
    /// is not reaped no other takes the pid, and checking that costs one
    /// syscall. For ptrace, where a program found at its exec runs
    /// untraced until the interrupt: a `/proc/PID/stat` read and parse
    /// before the command line and another before the seize took the
    /// tracer 40-120 us under load, a third of its way to the seize.
    Pinned(OwnedFd),
    /// Its start time (clock ticks since boot, `/proc/PID/stat`): where
    /// pidfds are missing (Linux before 5.3), and for the eBPF runner and
    /// light runs, which take the start time.
    Born(u64),
}

impl Matched {
    /// `pid`'s process now, pinned if `pin` and the kernel can; `None`
    /// when it is gone (or, by its start time, a zombie).
    fn of(pid: Tid, pin: bool) -> Option<Matched> {
        if pin {
            if let Ok(fd) = sys::pidfd_open(pid) {
                return Some(Matched::Pinned(fd));
            }
        }
        procfs::read_stat(pid)
            .filter(|s| !s.zombie)
            .map(|s| Matched::Born(s.start_ticks))
    }

    /// Whether `pid` still names the process matched (and, by its start
    /// time, not as a zombie: a pinned zombie is refused by the seize).
    fn still(&self, pid: Tid) -> bool {
        match self {
            Matched::Pinned(fd) => sys::pidfd_alive(fd),
            Matched::Born(born) => {
                procfs::read_stat(pid).is_some_and(|s| !s.zombie && s.start_ticks == *born)
            }
        }
    }

    /// The start time of the process matched (clock ticks since boot), if
    /// `pid` still names it and it is not a zombie.
    #[cfg_attr(
        not(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )),
        allow(dead_code)
    )]
    pub(crate) fn born(&self, pid: Tid) -> Option<u64> {
        match self {
            Matched::Born(born) => Some(*born),
            Matched::Pinned(fd) => {
                // Read first, then checked: the stat read was the pinned
                // process's if it is still there.
                let stat = procfs::read_stat(pid).filter(|s| !s.zombie)?;
                sys::pidfd_alive(fd).then_some(stat.start_ticks)
            }
        }
    }
}

/// What [`RunTracer::start`] calls for the session of the run it starts.
pub(crate) type SessionMaker<'a> = Box<dyn FnOnce() -> Session + 'a>;

/// The ptrace engine as a [`RunTracer`]: it seizes every thread.
struct Seizer<'e>(&'e mut Engine);

impl RunTracer for Seizer<'_> {
    fn is_traced(&self, pid: Tid) -> bool {
        self.0.is_traced(pid)
    }
    fn traces_any(&self) -> bool {
        self.0.traces_any()
    }
    fn start(&mut self, make: SessionMaker<'_>, pid: Tid, matched: &Matched) -> anyhow::Result<()> {
        // Checked just before the seize (with a start time: a pid reused
        // within those microseconds is the one case left).
        if !matched.still(pid) {
            anyhow::bail!("process {pid} ended before it was traced");
        }
        // The leader first, stopped at once (a refusal explains itself);
        // the session is only built then.
        let session = self.0.seize_stopped(pid, make).map_err(|e| {
            if procfs::read_stat(pid).is_none_or(|s| s.zombie) {
                anyhow::anyhow!("process {pid} ended before it was traced")
            } else {
                anyhow::anyhow!("cannot attach: {}", explain_seize_error(pid, &e))
            }
        })?;
        // Its other threads, if it has any yet (the leader is skipped, and
        // a process gone meanwhile reports its exits to the loop: the
        // session ends then).
        let _ = seize_all(self.0, session, pid);
        seize_children(self.0, session, pid);
        Ok(())
    }
    fn pins(&self) -> bool {
        true
    }
}

/// A pid a scan looked at: when, and (a hash of) its command line then.
#[derive(Clone, Copy, Debug)]
struct Seen {
    first: Instant,
    cmdline: Option<u64>,
}

/// How long after a scan first met a process it still looks whether its
/// command line changed (an exec): a process met between fork and exec (a
/// `posix_spawn` child on a loaded machine, a shell that forks and execs
/// later) shows its parent's command line, not the one it execs into.
/// Without the connector nothing else says it exec'd.
const EXEC_RECHECK: Duration = Duration::from_secs(2);

impl Seen {
    /// Met by a scan: its command line now, to compare at the next.
    fn scanned(pid: Tid) -> Seen {
        Seen {
            first: Instant::now(),
            cmdline: cmdline_hash(pid),
        }
    }

    /// Reported by the connector at its exec: nothing read here, so the
    /// path from the exec to the seize stays as short as it was (a later
    /// exec is reported too).
    fn exec_reported() -> Seen {
        Seen {
            first: Instant::now(),
            cmdline: None,
        }
    }
}

/// `pid`'s command line, NUL-separated, up to its budget; `None` when it
/// cannot be read.
fn cmdline_of(pid: Tid) -> Option<Vec<u8>> {
    tracee_file::read_proc_within(pid, "cmdline", tracee_file::CMDLINE_BUDGET).ok()
}

/// A hash of `pid`'s command line; `None` when it cannot be read.
fn cmdline_hash(pid: Tid) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let cmdline = cmdline_of(pid)?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    cmdline.hash(&mut h);
    Some(h.finish())
}

pub(crate) struct Watcher<'a> {
    pattern: Vec<u8>,
    extra: &'a [(String, String)],
    platform: PlatformFacts,
    device: DeviceId,
    /// Pids already looked at (matching or not), pruned when they vanish,
    /// with what a scan needs to look again after an exec.
    seen: HashMap<Tid, Seen>,
    window: Option<Duration>,
    /// The agent and the processes that started it (a shell, sudo, a test
    /// harness): their command lines often name the text, and tracing
    /// them would trace the agent's own supervisor.
    excluded: HashSet<Tid>,
    /// The agent's own binary (device, inode): another process running it
    /// (`edge-agent shim exec`, `edge-agent run`) traces its program
    /// itself, and its command line holds the program's. Traced by watch,
    /// its child would be watch's and the shim's tracer refused; so are the
    /// shim scripts that start it.
    own_binary: Option<(u64, u64)>,
    /// The binary `/bin/sh` runs (device, inode): what the kernel runs a
    /// shim script with (its `#!/bin/sh`), so the one program whose first
    /// argument may be a shim (see [`Watcher::has_own_tracer`]).
    shell_binary: Option<(u64, u64)>,
    changes: &'a mut dyn FnMut() -> Update,
    /// Where summaries go, each stamped with what was shed since the last
    /// ([`Shedding::stamp`]).
    pub(crate) on_summary: Box<dyn FnMut(Summary) + 'a>,
    /// What was shed and not yet said in a summary.
    pub(crate) shedding: Rc<Shedding>,
    /// `--light`: runs not taken by a directive get light records.
    light_mode: bool,
    light: LightRuns,
    directed: DirectedRuns,
    /// The connector's execs (`None`: /proc is scanned at each tick).
    pub(crate) execs: Option<ExecFeed>,
    /// How long to wait for news when nothing is traced.
    pub(crate) idle_wait: Duration,
}

/// The (device, inode) of the file process `pid` runs; `None` when it is
/// gone or not ours to look at.
fn binary_of(pid: Tid) -> Option<(u64, u64)> {
    file_id(Path::new(&format!("/proc/{pid}/exe")))
}

/// The (device, inode) of the file `path` names, links followed.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}

/// The pids in /proc.
fn list_pids() -> Vec<Tid> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The parent of `pid` (from `/proc/PID/stat`, whose fourth field follows
/// the command name in parentheses, which may itself hold `)` and spaces).
fn parent_of(pid: Tid) -> Option<Tid> {
    let stat = tracee_file::read_proc(pid, "stat")?;
    let after = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(stat.get(after + 1..)?).ok()?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `pid` and its ancestors, up to (not including) pid 0.
fn self_and_ancestors(pid: Tid) -> HashSet<Tid> {
    let mut out = HashSet::new();
    let mut next = Some(pid);
    while let Some(p) = next.filter(|p| *p > 0 && out.insert(*p)) {
        next = parent_of(p);
    }
    out
}

/// Whether `haystack` contains `needle`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

impl Watcher<'_> {
    /// Takes a new text to match, if one came: every process running is
    /// looked at again (those traced already stay traced until they end).
    /// Returns whether it changed.
    fn take_change(&mut self) -> bool {
        let update = (self.changes)();
        if let Some(device) = update.device {
            if self.directed.set(device) {
                eprintln!(
                    "edge-agent: per-device directives: {}",
                    self.directed.describe()
                );
            }
        }
        if let Some(pattern) = update.pattern {
            if !pattern.is_empty() && pattern.as_bytes() != self.pattern {
                eprintln!("edge-agent: now watching for {pattern:?}");
                self.pattern = pattern.into_bytes();
                self.seen.clear();
                return true;
            }
        }
        false
    }

    /// Takes the connector's exits (exact exit status and time) into the
    /// light runs, samples the runs, and hands on the records of those
    /// that ended.
    pub(crate) fn sample_light(&mut self) {
        if let Some(feed) = &self.execs {
            let now_mono = sys::monotonic_ns();
            let now_unix = crate::engine::unix_now_ns();
            for (pid, ended, at_mono_ns) in feed.take_exits() {
                let exit = match ended {
                    Ended::Code(c) => agent_core::Exit::Code(c),
                    Ended::Signal(s) => agent_core::Exit::Signal(s),
                };
                let at_unix = now_unix.saturating_sub(now_mono.saturating_sub(at_mono_ns));
                self.light.ended(pid, exit, at_unix);
            }
        }
        if self.light.open() == 0 {
            return;
        }
        for root in self.light.roots() {
            if let Some(program) = procfs::read_program(root) {
                self.light.set_program(root, &program);
            }
        }
        for record in self.light.sample() {
            (self.on_summary)(record);
        }
    }

    /// The execs the connector reported: each process is looked at again
    /// (its command line changed with the exec), a lost burst of events
    /// means a scan.
    pub(crate) fn take_execs(&mut self, engine: &mut dyn RunTracer) {
        let Some(feed) = &self.execs else {
            return;
        };
        let lost = feed.take_lost();
        let shed = feed.take_shed();
        if shed > 0 {
            self.shedding.shed_execs(shed);
        }
        let pids = feed.take();
        if lost {
            self.scan(engine);
        }
        for pid in pids {
            self.seen.insert(pid, Seen::exec_reported());
            self.consider(engine, pid);
        }
    }

    /// Looks at the processes not looked at yet, and again at those met
    /// lately that have exec'd since (see [`EXEC_RECHECK`]).
    fn scan(&mut self, engine: &mut dyn RunTracer) {
        let pids = list_pids();
        let now: HashSet<Tid> = pids.iter().copied().collect();
        self.seen.retain(|p, _| now.contains(p));
        for pid in pids {
            match self.seen.get_mut(&pid) {
                None => {
                    self.seen.insert(pid, Seen::scanned(pid));
                    self.consider(engine, pid);
                }
                Some(seen) if seen.first.elapsed() < EXEC_RECHECK => {
                    let cmdline = cmdline_hash(pid);
                    if cmdline != seen.cmdline {
                        seen.cmdline = cmdline;
                        self.consider(engine, pid);
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// Whether `pid` is another edge-agent (`shim exec`, `run`), or a shim
    /// script about to become one (`/bin/sh SHIM ARGS`, `first_arg` the
    /// script): those trace their program from its first call, and their
    /// command lines hold the program's.
    fn has_own_tracer(&self, pid: Tid, argv0: &[u8], first_arg: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let binary = binary_of(pid);
        if self.own_binary.is_some() && binary == self.own_binary {
            return true;
        }
        // Only a shell runs a script: `/bin/sh` as the kernel starts a
        // shim (`#!/bin/sh`), or a shell named by hand (`bash SHIM`).
        // Any other program's first argument is not read: this runs
        // between the exec and the seize, and the 4 to 6 calls of that
        // read are the program's calls missed (md5sum's data file was
        // read on each of its runs).
        let named_shell = Path::new(std::ffi::OsStr::from_bytes(argv0))
            .file_name()
            .is_some_and(|n| n.as_bytes().ends_with(b"sh"));
        let runs_shell = self.shell_binary.is_some() && binary == self.shell_binary;
        if first_arg.is_empty() || !(runs_shell || named_shell) {
            return false;
        }
        // A relative script path is the process's, not ours: looked up
        // from its current folder, which it controls, so only a regular
        // file is read (`is_shim`: a FIFO named like the match text must
        // not block this thread, which serves every tracee's stops).
        let script = Path::new(std::ffi::OsStr::from_bytes(first_arg));
        crate::shim::is_shim(&Path::new(&format!("/proc/{pid}/cwd")).join(script))
    }

    /// Traces `pid` if its command line matches (and it is not the agent,
    /// an ancestor, another agent or a shim, or traced already).
    pub(crate) fn consider(&mut self, engine: &mut dyn RunTracer, pid: Tid) {
        if self.excluded.contains(&pid) || engine.is_traced(pid) {
            return;
        }
        // Which process this is, before its command line: the tracer
        // checks that the process it attaches to is this one, not a later
        // process that took the pid. Light runs keep the start time (and
        // skip zombies) as they always did.
        let Some(matched) = Matched::of(pid, engine.pins() && !self.light_mode) else {
            return;
        };
        let Some(mut cmdline) = cmdline_of(pid) else {
            return;
        };
        let mut args = cmdline.split(|b| *b == 0);
        let argv0: Vec<u8> = args.next().unwrap_or_default().to_vec();
        let first_arg: Vec<u8> = args.next().unwrap_or_default().to_vec();
        for b in &mut cmdline {
            if *b == 0 {
                *b = b' ';
            }
        }
        // Born under a light run: part of it (whatever its command line);
        // but a run's root that exec'd into a program a directive asks for
        // (`ip netns exec ... wget`: the exec event names the same process
        // the run began with) leaves its light run to be traced fully.
        if self.light.open() > 0 && self.light.adopt(pid) {
            let program = process_program(pid);
            // A root's exec names the program the run is of now: a
            // 40 ms `wget` behind `ip netns exec` ends before the next
            // sample, and its record would say `ip` (another program's
            // runs to the service's detector).
            self.light.set_program(pid, &program);
            if !(self
                .directed
                .would_claim(&program, &cmdline, crate::engine::unix_now_ns())
                && self.light.give_up_root(pid))
            {
                return;
            }
        }
        if !contains(&cmdline, &self.pattern) {
            return;
        }
        // A child of a traced process is its run's: forked before the run
        // began and not taken in with it (a kernel without
        // `/proc/PID/task/TID/children`), or its fork not handled yet.
        // Met before its exec it shows its parent's command line; it is
        // no run of its own.
        // (Nothing traced, no parent is: the stat read is skipped, as it
        // would delay the seize.)
        if engine.traces_any() && parent_of(pid).is_some_and(|parent| engine.is_traced(parent)) {
            return;
        }
        if self.has_own_tracer(pid, &argv0, &first_arg) {
            return;
        }
        let program = process_program(pid);
        let directive = self
            .directed
            .claim(&program, &cmdline, crate::engine::unix_now_ns());
        // The facts now where a directive or a light run needs them;
        // otherwise with the session, once the process is held.
        let mut facts = None;
        if directive.is_some() || self.light_mode {
            match facts::build(&self.platform, &program, self.extra) {
                Ok(f) => facts = Some(f),
                Err(e) => {
                    eprintln!("edge-agent: {e:#}");
                    if let Some(id) = &directive {
                        self.directed.unclaim(id);
                    }
                    return;
                }
            }
        }
        let directive = directive.filter(|id| {
            let Some(facts) = facts.as_mut() else {
                return false;
            };
            match facts.add("directive", id) {
                Ok(()) => true,
                Err(e) => {
                    eprintln!(
                        "edge-agent: directive {id} not applied to PID {pid} ({program}): no room for its fact ({e:?})"
                    );
                    self.directed.unclaim(id);
                    false
                }
            }
        });
        if directive.is_none() && self.light_mode {
            let origin = agent_core::Origin {
                device: self.device,
                ..Default::default()
            };
            // Built above for light mode.
            self.light.start(pid, facts.unwrap_or_default(), origin);
            return;
        }
        // Built once the process is held: until then it runs untraced.
        let window = self.window.filter(|_| directive.is_none());
        let device = self.device;
        let (platform, extra, name) = (&self.platform, self.extra, program.as_str());
        let make = Box::new(move || {
            // Cannot fail here: the free facts were checked at the start
            // and the program name is cut to fit, never refused.
            let facts = facts
                .or_else(|| facts::build(platform, name, extra).ok())
                .unwrap_or_default();
            let mut session = Session::new(pid, facts);
            session.program_from_exec = true;
            session.trace_start = TraceStart::attached_to(pid);
            // A directed run is one whole-run summary, whatever the windows.
            if let Some(w) = window {
                session.set_window(w);
            }
            session.origin.device = device;
            session
        });
        match engine.start(make, pid, &matched) {
            Ok(()) => {
                if let Some(id) = &directive {
                    eprintln!(
                        "edge-agent: tracing PID {pid} ({program}) fully for directive {id} (run {} of its)",
                        self.directed.taken(id)
                    );
                }
            }
            Err(e) => {
                eprintln!("edge-agent: not watching PID {pid} ({program}): {e:#}");
                if let Some(id) = &directive {
                    self.directed.unclaim(id);
                }
            }
        }
    }
}

impl Watcher<'_> {
    /// What each scan interval does: a dead connector's last execs, then
    /// /proc scans; the directives' changes; the execs; the light runs.
    pub(crate) fn tick(&mut self, engine: &mut dyn RunTracer) {
        if self.execs.as_ref().is_some_and(ExecFeed::is_dead) {
            // Its last execs are taken, then /proc is scanned for good.
            self.take_execs(engine);
            self.execs = None;
        }
        let changed = self.take_change();
        if self.execs.is_none() || changed {
            self.scan(engine);
        }
        self.take_execs(engine);
        self.sample_light();
    }

    /// Waits up to `wait` for an exec (sleeps without the connector) and
    /// looks at the processes that exec'd.
    pub(crate) fn wait_for_execs(&mut self, engine: &mut dyn RunTracer, wait: Duration) {
        let Some(feed) = &self.execs else {
            std::thread::sleep(wait);
            return;
        };
        if let Some(pid) = feed.wait(wait) {
            self.seen.insert(pid, Seen::exec_reported());
            self.consider(engine, pid);
            self.take_execs(engine);
        }
    }
}

impl Observer for Watcher<'_> {
    fn tick(&mut self, engine: &mut Engine) {
        Watcher::tick(self, &mut Seizer(engine));
    }
    fn keep_alive(&self) -> bool {
        true
    }
    fn idle(&mut self, engine: &mut Engine) {
        let wait = self.idle_wait;
        self.wait_for_execs(&mut Seizer(engine), wait);
    }
    fn window_done(&mut self, summary: Summary) {
        (self.on_summary)(summary);
    }
    fn session_done(&mut self, session: Session) {
        (self.on_summary)(summarize(&session));
    }
}

/// The watcher of `opts` (checked), subscribed to the execs, with the
/// first directives taken: what both backends' loops run
/// ([`crate::watching`] chooses the backend).
pub(crate) fn new_watcher<'a>(
    opts: &'a WatchOptions,
    changes: &'a mut dyn FnMut() -> Update,
    on_summary: &'a mut dyn FnMut(Summary),
) -> anyhow::Result<Watcher<'a>> {
    if opts.pattern.is_empty() {
        anyhow::bail!("--match needs a non-empty text");
    }
    crate::trace::check_window(opts.window)?;
    // Validate the facts before the first process shows up.
    let platform = opts.platform.clone().unwrap_or_else(PlatformFacts::detect);
    facts::build(&platform, "", &opts.facts)?;
    let execs = match opts.discover {
        Discover::Scan => None,
        Discover::Connector => Some(ExecFeed::start(opts.light)?),
        Discover::Auto => match ExecFeed::start(opts.light) {
            Ok(feed) => Some(feed),
            Err(e) => {
                eprintln!(
                    "edge-agent: scanning /proc every {} ms for new programs (runs shorter than that are missed, the others' first calls too): {e:#}",
                    opts.scan_interval.as_millis()
                );
                None
            }
        },
    };
    let shedding = Shedding::new();
    let mut watcher = Watcher {
        execs,
        idle_wait: opts.scan_interval.min(Duration::from_millis(50)),
        pattern: opts.pattern.as_bytes().to_vec(),
        extra: &opts.facts,
        platform,
        window: opts.window,
        device: opts.device,
        seen: HashMap::new(),
        excluded: self_and_ancestors(sys::getpid()),
        own_binary: binary_of(sys::getpid()),
        shell_binary: file_id(Path::new("/bin/sh")),
        changes,
        on_summary: Box::new({
            let shedding = Rc::clone(&shedding);
            move |mut s: Summary| {
                shedding.stamp(&mut s);
                on_summary(s)
            }
        }),
        shedding,
        light_mode: opts.light,
        light: LightRuns::new(),
        directed: DirectedRuns::default(),
    };
    if watcher.execs.is_some() {
        watcher.light.expect_exit_events();
    }
    // The first directives, if already fetched, before the first scan.
    watcher.take_change();
    Ok(watcher)
}

/// `watch` on the ptrace backend: each matching process seized, until a
/// stop is requested.
pub(crate) fn run_ptrace(mut watcher: Watcher<'_>, opts: &WatchOptions) -> anyhow::Result<()> {
    let mut engine = Engine::new(None, false);
    engine.set_wait_policy(opts.wait);
    // The processes running now, at once rather than after the first tick.
    watcher.scan(&mut Seizer(&mut engine));
    say_ready(opts);
    crate::signals::tick_every(opts.scan_interval.as_micros().max(1) as u64);
    let result = engine.run(&mut watcher);
    crate::signals::quiet();
    for s in engine.take_sessions() {
        if s.threads > 0 {
            (watcher.on_summary)(summarize(&s));
        }
    }
    watcher.finish_light();
    result.map_err(Into::into)
}

/// Said once ready: subscribed to the execs and past the first scan (a
/// run that starts from here on is not missed for the start-up).
pub(crate) fn say_ready(opts: &WatchOptions) {
    eprintln!(
        "edge-agent: watching for {:?}{}",
        opts.pattern,
        if opts.light {
            " (light records; full traces for per-device directives)"
        } else {
            ""
        }
    );
}

impl Watcher<'_> {
    /// The first scan: the matching processes running now, at once rather
    /// than after the first tick. (Only the eBPF loop calls it, which
    /// builds without eBPF do not have.)
    #[cfg_attr(
        not(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )),
        allow(dead_code)
    )]
    pub(crate) fn first_scan(&mut self, engine: &mut dyn RunTracer) {
        self.scan(engine);
    }

    /// At the stop: the light runs' last samples, and the records of
    /// those still open.
    pub(crate) fn finish_light(&mut self) {
        self.sample_light();
        for record in self.light.take_open() {
            (self.on_summary)(record);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{contains, parent_of, self_and_ancestors};

    #[test]
    fn ancestors_include_self_and_parent() {
        let me = crate::sys::getpid();
        let parent = parent_of(me).expect("a parent");
        assert_eq!(parent as u32, std::os::unix::process::parent_id());
        let all = self_and_ancestors(me);
        assert!(all.contains(&me) && all.contains(&parent), "{all:?}");
        assert!(!all.contains(&0));
    }

    #[test]
    fn substring() {
        assert!(contains(b"wget http://example.test/x", b"example.test"));
        assert!(!contains(b"wget", b"example"));
    }
}
