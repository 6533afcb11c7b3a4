//! Light runs: the processes `watch --light` noticed, grouped into runs (a
//! matching process and the processes born under it), sampled from `/proc`
//! at each scan, and turned into a light record ([`Summary::light`]) when
//! the run's last process is gone.
//!
//! Where each figure comes from, and what polling misses:
//! - start: the root's start time (`/proc/PID/stat`, clock ticks: 10 ms).
//! - end: when a process was first seen ended (a zombie) or gone, taken
//!   half-way between that scan and the scan before: within half a scan
//!   interval; exact when an exit event says when ([`LightRuns::ended`]).
//! - exit: the root's wait status, known when a scan catches it as a
//!   zombie (its parent had not reaped it yet) or an exit event reports it;
//!   otherwise `Exit::Detached` ("not known"), never a guess.
//! - I/O bytes: `rchar`/`wchar`. The kernel adds a reaped child's counts
//!   to its parent's, so a process gone while its parent (in the run) still
//!   lives is counted through the parent, re-read after the child is seen
//!   gone; any other process gone counts its last sample. The bytes a
//!   process moves after its last sample are missed when nobody in the run
//!   reaps it (the root's last scan interval).
//! - CPU time: each process's own user + system time, last sample (the
//!   last scan interval of each process is missed).
//!
//! The tracker is fed by whatever discovers processes (today `/proc`
//! polling in `watch.rs`; an exec/exit event source can call
//! [`LightRuns::ended`] with the exact exit).

use std::collections::HashMap;

use agent_core::{CpuTime, Exit, Facts, IoBytes, Origin, RunRecord, Summary};

use super::procfs::{self, Stat};
use crate::arch::{Abi, Native};
use crate::engine::session::random_id;
use crate::sys::Tid;

/// How long a run whose processes are all gone waits for its root's exit
/// event (the connector's reader thread may lag behind the scans on a
/// loaded machine).
const EXIT_EVENT_WAIT_NS: u64 = 2_000_000_000;

/// How far up from a new process its run's member is looked for.
const MAX_ADOPT_DEPTH: usize = 16;

/// One process of a run.
#[derive(Clone, Copy, Debug)]
struct Proc {
    ppid: Tid,
    /// Its start (ticks since boot): a pid reused by another process has
    /// another start.
    start_ticks: u64,
    /// Largest readings so far (each only grows).
    io: IoBytes,
    cpu: CpuTime,
    /// When it was first seen ended (ns since the Unix epoch).
    end_unix_ns: Option<u64>,
}

/// A run being watched.
#[derive(Debug)]
struct Run {
    root: Tid,
    facts: Facts,
    origin: Origin,
    start_unix_ns: u64,
    /// Processes still in /proc.
    procs: HashMap<Tid, Proc>,
    /// Processes ever part of it.
    processes: u32,
    /// Bytes and CPU time of processes gone that no process of the run
    /// absorbed.
    io_gone: IoBytes,
    cpu_gone: CpuTime,
    /// The root's exit, when known.
    exit: Option<Exit>,
    /// The latest end of a process seen so far.
    end_unix_ns: u64,
    /// When its last process was seen gone with its exit not known yet:
    /// it waits up to [`EXIT_EVENT_WAIT_NS`] for an exit event on its way.
    gone_unix_ns: Option<u64>,
}

/// The runs light monitoring follows.
#[derive(Debug)]
pub struct LightRuns {
    runs: Vec<Run>,
    /// Which run each tracked pid belongs to (index in `runs`).
    owner: HashMap<Tid, usize>,
    ns_per_tick: u64,
    /// The previous scan's time: a process gone now ended after it.
    last_scan_unix_ns: u64,
    /// Exit events come ([`LightRuns::ended`]): a run whose exit is not
    /// known when its last process is gone waits for it a little.
    exit_events: bool,
}

impl Default for LightRuns {
    fn default() -> Self {
        LightRuns::new()
    }
}

fn add_io(a: IoBytes, b: IoBytes) -> IoBytes {
    IoBytes {
        read: a.read.saturating_add(b.read),
        written: a.written.saturating_add(b.written),
    }
}

fn max_io(a: IoBytes, b: IoBytes) -> IoBytes {
    IoBytes {
        read: a.read.max(b.read),
        written: a.written.max(b.written),
    }
}

fn add_cpu(a: CpuTime, b: CpuTime) -> CpuTime {
    CpuTime {
        user_ns: a.user_ns.saturating_add(b.user_ns),
        system_ns: a.system_ns.saturating_add(b.system_ns),
    }
}

fn max_cpu(a: CpuTime, b: CpuTime) -> CpuTime {
    CpuTime {
        user_ns: a.user_ns.max(b.user_ns),
        system_ns: a.system_ns.max(b.system_ns),
    }
}

/// A wait status as the summary's exit.
pub fn exit_of_wait_status(status: u32) -> Exit {
    match status & 0x7f {
        0 => Exit::Code(((status >> 8) & 0xff) as i32),
        sig => Exit::Signal(sig as i32),
    }
}

impl LightRuns {
    /// No runs yet.
    pub fn new() -> LightRuns {
        LightRuns {
            runs: Vec::new(),
            owner: HashMap::new(),
            ns_per_tick: procfs::ns_per_tick(),
            last_scan_unix_ns: crate::engine::unix_now_ns(),
            exit_events: false,
        }
    }

    /// Says that exit events will come (the process-events connector).
    pub fn expect_exit_events(&mut self) {
        self.exit_events = true;
    }

    /// Whether `pid` is part of a run.
    pub fn contains(&self, pid: Tid) -> bool {
        self.owner.contains_key(&pid)
    }

    /// Runs still open.
    pub fn open(&self) -> usize {
        self.runs.len()
    }

    /// Starts a run at `pid` (a process that matched), with its facts and
    /// origin (the device id; the stream id is made here). False when the
    /// process is gone already or part of a run.
    pub fn start(&mut self, pid: Tid, facts: Facts, mut origin: Origin) -> bool {
        if self.contains(pid) {
            return false;
        }
        let Some(stat) = procfs::read_stat(pid) else {
            return false;
        };
        let now = crate::engine::unix_now_ns();
        origin.stream = random_id();
        origin.window_ns = 0;
        let run = Run {
            root: pid,
            facts,
            origin,
            start_unix_ns: procfs::start_unix_ns(stat.start_ticks, self.ns_per_tick, now),
            procs: HashMap::new(),
            processes: 0,
            io_gone: IoBytes::default(),
            cpu_gone: CpuTime::default(),
            exit: None,
            end_unix_ns: now,
            gone_unix_ns: None,
        };
        self.runs.push(run);
        let index = self.runs.len() - 1;
        self.add(index, pid, &stat, now);
        true
    }

    /// Takes `pid` into the run of its nearest ancestor in one (a process
    /// born under a run is part of it), with the ancestors between them
    /// (forks never seen: the exec events name only the processes that
    /// exec); true when it did.
    pub fn adopt(&mut self, pid: Tid) -> bool {
        if self.contains(pid) {
            return true;
        }
        let mut chain = Vec::new();
        let mut next = pid;
        let index = loop {
            if chain.len() >= MAX_ADOPT_DEPTH {
                return false;
            }
            let Some(stat) = procfs::read_stat(next) else {
                return false;
            };
            chain.push((next, stat));
            if let Some(&index) = self.owner.get(&stat.ppid) {
                break index;
            }
            if stat.ppid <= 1 {
                return false;
            }
            next = stat.ppid;
        };
        let now = crate::engine::unix_now_ns();
        // Parents first.
        for (p, stat) in chain.iter().rev() {
            self.add(index, *p, stat, now);
        }
        true
    }

    fn add(&mut self, index: usize, pid: Tid, stat: &Stat, now: u64) {
        let run = &mut self.runs[index];
        let mut proc = Proc {
            ppid: stat.ppid,
            start_ticks: stat.start_ticks,
            io: procfs::read_io(pid).unwrap_or_default(),
            cpu: stat.cpu(self.ns_per_tick),
            end_unix_ns: None,
        };
        if stat.zombie {
            proc.end_unix_ns = Some(now);
            if pid == run.root {
                run.exit = stat.exit_status.map(exit_of_wait_status);
            }
        }
        run.procs.insert(pid, proc);
        run.processes = run.processes.saturating_add(1);
        self.owner.insert(pid, index);
    }

    /// An exit event's news: process `pid` ended with `exit` at
    /// `at_unix_ns` (exact, unlike what a scan finds).
    pub fn ended(&mut self, pid: Tid, exit: Exit, at_unix_ns: u64) {
        let index = match self.owner.get(&pid) {
            Some(&index) => index,
            // A root already gone, its run waiting for this news.
            None => match self
                .runs
                .iter()
                .position(|r| r.root == pid && r.procs.is_empty())
            {
                Some(index) => index,
                None => return,
            },
        };
        let run = &mut self.runs[index];
        match run.procs.get_mut(&pid) {
            Some(p) => p.end_unix_ns = Some(at_unix_ns),
            None => run.end_unix_ns = run.end_unix_ns.max(at_unix_ns),
        }
        if pid == run.root {
            run.exit = Some(exit);
        }
    }

    /// Samples every tracked process; returns the light records of the runs
    /// whose last process is gone.
    pub fn sample(&mut self) -> Vec<Summary> {
        let now = crate::engine::unix_now_ns();
        let ended_at = self.last_scan_unix_ns + now.saturating_sub(self.last_scan_unix_ns) / 2;
        self.last_scan_unix_ns = now;
        let ns_per_tick = self.ns_per_tick;
        let mut finished = Vec::new();
        for (index, run) in self.runs.iter_mut().enumerate() {
            let mut gone = Vec::new();
            for (&pid, p) in run.procs.iter_mut() {
                match procfs::read_stat(pid).filter(|s| s.start_ticks == p.start_ticks) {
                    Some(stat) => {
                        p.ppid = stat.ppid;
                        p.cpu = max_cpu(p.cpu, stat.cpu(ns_per_tick));
                        if let Some(io) = procfs::read_io(pid) {
                            p.io = max_io(p.io, io);
                        }
                        if stat.zombie && p.end_unix_ns.is_none() {
                            p.end_unix_ns = Some(ended_at);
                        }
                        if stat.zombie && pid == run.root && run.exit.is_none() {
                            run.exit = stat.exit_status.map(exit_of_wait_status);
                        }
                    }
                    None => gone.push(pid),
                }
            }
            for pid in gone {
                let Some(p) = run.procs.remove(&pid) else {
                    continue;
                };
                self.owner.remove(&pid);
                run.end_unix_ns = run.end_unix_ns.max(p.end_unix_ns.unwrap_or(ended_at));
                run.cpu_gone = add_cpu(run.cpu_gone, p.cpu);
                // Reaped by a parent of the run that is still here: the
                // kernel added its bytes to the parent's, which a read now
                // shows (this read comes after the child left /proc).
                let absorbed =
                    run.procs.get_mut(&p.ppid).is_some_and(|parent| {
                        match procfs::read_io(p.ppid) {
                            Some(io) => {
                                parent.io = max_io(parent.io, io);
                                true
                            }
                            None => false,
                        }
                    });
                if !absorbed {
                    run.io_gone = add_io(run.io_gone, p.io);
                }
            }
            if run.procs.is_empty() {
                let gone = *run.gone_unix_ns.get_or_insert(now);
                let waiting = now.saturating_sub(gone) < EXIT_EVENT_WAIT_NS;
                if !(run.exit.is_none() && self.exit_events && waiting) {
                    finished.push(index);
                }
            }
        }
        // Later indexes first, so the earlier ones stay valid.
        let mut out = Vec::new();
        for index in finished.into_iter().rev() {
            let run = self.runs.swap_remove(index);
            out.push(record(&run));
            // The run moved into `index` changes its owner entries.
            if index < self.runs.len() {
                for pid in self.runs[index].procs.keys() {
                    self.owner.insert(*pid, index);
                }
            }
        }
        out
    }

    /// The records of the runs still open, as they stand (the agent is
    /// stopping): their exit is `Detached`.
    pub fn take_open(&mut self) -> Vec<Summary> {
        let now = crate::engine::unix_now_ns();
        self.owner.clear();
        std::mem::take(&mut self.runs)
            .into_iter()
            .map(|mut run| {
                run.end_unix_ns = run.end_unix_ns.max(now);
                for p in std::mem::take(&mut run.procs).into_values() {
                    run.io_gone = add_io(run.io_gone, p.io);
                    run.cpu_gone = add_cpu(run.cpu_gone, p.cpu);
                }
                run.exit = Some(run.exit.unwrap_or(Exit::Detached));
                record(&run)
            })
            .collect()
    }

    /// Sets the program fact of the run rooted at `pid` (the root may have
    /// exec'd since it was noticed).
    pub fn set_program(&mut self, pid: Tid, program: &str) {
        if let Some(run) = self
            .owner
            .get(&pid)
            .and_then(|&i| self.runs.get_mut(i))
            .filter(|r| r.root == pid)
        {
            if !program.is_empty() {
                run.facts.program = agent_core::facts::truncated(program);
            }
        }
    }

    /// Drops the run rooted at `pid` when it holds that process alone (no
    /// child has joined it yet), without a record: the process is to be
    /// traced fully instead (it exec'd into a program a directive asks
    /// for). False when `pid` roots no such run.
    pub fn give_up_root(&mut self, pid: Tid) -> bool {
        let Some(index) = self
            .runs
            .iter()
            .position(|r| r.root == pid && r.procs.len() == 1 && r.procs.contains_key(&pid))
        else {
            return false;
        };
        self.runs.swap_remove(index);
        self.owner.remove(&pid);
        // The run moved into `index` changes its owner entries.
        if index < self.runs.len() {
            for p in self.runs[index].procs.keys() {
                self.owner.insert(*p, index);
            }
        }
        true
    }

    /// The roots of the open runs.
    pub fn roots(&self) -> Vec<Tid> {
        self.runs.iter().map(|r| r.root).collect()
    }
}

/// A finished run's light record.
fn record(run: &Run) -> Summary {
    let mut io = run.io_gone;
    let mut cpu = run.cpu_gone;
    for p in run.procs.values() {
        io = add_io(io, p.io);
        cpu = add_cpu(cpu, p.cpu);
    }
    let record = RunRecord {
        processes: run.processes,
        threads: run.processes,
        ..RunRecord::new(
            run.start_unix_ns,
            run.end_unix_ns.saturating_sub(run.start_unix_ns),
            run.exit.unwrap_or(Exit::Detached),
            Native::NATIVE,
        )
    };
    Summary::light(
        random_id(),
        record,
        run.facts.clone(),
        run.origin,
        Some(cpu),
        Some(io),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::Duration;

    #[test]
    fn wait_statuses() {
        assert_eq!(exit_of_wait_status(0), Exit::Code(0));
        assert_eq!(exit_of_wait_status(3 << 8), Exit::Code(3));
        assert_eq!(exit_of_wait_status(9), Exit::Signal(9));
        assert_eq!(
            exit_of_wait_status(0x80 | 11),
            Exit::Signal(11),
            "core dumped"
        );
    }

    /// A run given up at its root leaves no record and no owner entry;
    /// another run that moved into its slot keeps its processes.
    #[test]
    fn a_run_given_up_at_its_root_leaves_nothing() {
        let mut a = Command::new("sleep").arg("5").spawn().unwrap();
        let mut b = Command::new("sleep").arg("5").spawn().unwrap();
        let (pa, pb) = (a.id() as Tid, b.id() as Tid);
        let mut runs = LightRuns::new();
        assert!(runs.start(pa, Facts::new(), Origin::default()));
        assert!(runs.start(pb, Facts::new(), Origin::default()));
        assert!(!runs.give_up_root(pb + 100_000), "no such root");
        assert!(runs.give_up_root(pa));
        assert!(!runs.contains(pa));
        assert_eq!(runs.roots(), vec![pb]);
        assert!(runs.contains(pb));
        a.kill().unwrap();
        b.kill().unwrap();
        let _ = (a.wait(), b.wait());
        let records = runs.take_open();
        assert_eq!(records.len(), 1, "only b's run is left");
    }

    /// A child that exits with 3 and is reaped late: a scan sees its
    /// zombie, so its exit and its bytes are known.
    #[test]
    fn a_zombie_root_gives_its_exit_and_bytes() {
        let mut child = Command::new("sh")
            .args([
                "-c",
                "head -c 300000 /dev/zero > /dev/null; sleep 0.3; exit 3",
            ])
            .spawn()
            .unwrap();
        let mut runs = LightRuns::new();
        assert!(runs.start(child.id() as Tid, Facts::new(), Origin::default()));
        let mut records = Vec::new();
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(20));
            records.extend(runs.sample());
            if std::fs::read(format!("/proc/{}/stat", child.id()))
                .ok()
                .and_then(|s| procfs::parse_stat(&s))
                .is_some_and(|s| s.zombie)
            {
                records.extend(runs.sample());
                break;
            }
        }
        assert!(child.wait().unwrap().code() == Some(3));
        records.extend(runs.sample());
        assert_eq!(records.len(), 1, "one run");
        let r = &records[0];
        assert_eq!(r.run.exit, Exit::Code(3));
        let io = r.io.unwrap();
        assert!(io.written >= 300_000, "head's bytes through sh: {io:?}");
        let secs = r.run.duration_ns as f64 / 1e9;
        assert!((0.25..3.0).contains(&secs), "{secs}");
        assert_eq!(runs.open(), 0);
    }
}
