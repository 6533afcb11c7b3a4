//! The eBPF backend's loop: the kernel's per-CPU aggregates merged into
//! one [`Session`]'s collector (the same statistics and summary as the
//! ptrace engine's), and the ring buffer's task records (forks, exits)
//! into its process and thread counts. No stops: the traced program runs
//! untouched; the agent only reads. Between polls the caller may look at
//! (or take) the session's collector ([`Runner::poll`]).

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use agent_core::{CpuTime, InFlight, InFlightCall, Summary};
use anyhow::{anyhow, bail, Context};

use super::aggregate;
use super::events::{Pending, Record};
use super::loader::{Losses, Probe, ThreadStore};
use super::MAX_SLOTS;
use crate::backend::ptrace::read_cpu_time;
use crate::engine::rotate::note_in_flight;
use crate::engine::Session;
use crate::sys::{self, Tid, WaitStatus};
use crate::trace::{self, AttachOptions, TraceOptions};

/// How long one poll waits when the program wakes no one (it wakes the
/// reader at every fork and exit).
const POLL_MS: i32 = 20;

/// How long after a cut the agent waits before reading the generation it
/// ended: a BPF program that took its time stamp just before the cut runs
/// for microseconds at most (tracepoint programs do not sleep), so 1 ms
/// leaves none still adding to it.
const CUT_GRACE_NS: u64 = 1_000_000;

/// The eBPF backend's own counters, for `--stats` and the lost-record
/// warning.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunnerStats {
    /// Syscalls counted (merged from the kernel's aggregates).
    pub syscalls: u64,
    /// Records the kernel dropped because the ring buffer was full.
    pub lost: u64,
    /// Calls the kernel could not count (AGG full, or a new key refused).
    pub uncounted: u64,
    /// Calls counted without their transition, errno or peer figures.
    pub partial: u64,
    /// Records or aggregate entries that could not be read (object and
    /// reader disagree).
    pub unreadable: u64,
    /// Polls of the ring buffer.
    pub polls: u64,
    /// Whether the kernel keeps the threads' state in task storage (else
    /// in its hash of tids).
    pub task_storage: bool,
    /// Whether run slot 0's aggregates are in the dense array
    /// (else in the AGG hash).
    pub dense: bool,
    /// Whether the kernel remembers fd kinds per thread (else reads each
    /// from the file table).
    pub fd_memo: bool,
    /// Whether the program was relocated against the kernel BTF's cut
    /// (else against the whole of it: told so, or the cut failed).
    pub btf_cut: bool,
}

/// One run the kernel counts in a slot of its own: its session and where
/// its windows are.
#[derive(Debug)]
struct Run {
    session: Session,
    /// The generation the kernel fills until the run's next cut.
    generation: u8,
    /// The root process's last thread ended (its wait status, its time).
    root_end: Option<(i32, u64)>,
    /// The run's processes alive now (for the windows' process counts).
    live_processes: u32,
    /// Processes alive that joined the run at its start, forked before
    /// their parent was traced ([`Runner::join`]): a fork record of one
    /// is not counted again.
    joined: std::collections::HashSet<Tid>,
    /// The kernel's losses in the run's slot when the run took it (the
    /// run's own are the change since).
    losses_before: Losses,
}

/// A run that ended or was let go: its session (summarize it) and how
/// its root ended, if it did while traced.
#[derive(Debug)]
pub struct Finished {
    /// The run's session, its last windows cut.
    pub session: Session,
    /// The root's wait status and end (monotonic ns), if it ended.
    pub root_end: Option<(i32, u64)>,
    /// What the kernel could not keep of this run (its summary says so:
    /// [`add_loss_facts`]).
    pub losses: Losses,
}

/// Sessions fed by one BPF program, each in a slot of the kernel's
/// aggregates (`run` and `attach`: one, slot 0; `watch`: one per matched
/// run).
///
/// Windows ([`Session::set_window`]) are cut with the engine's own code
/// ([`Session::cut_windows`], [`Session::emit_windows`]). The kernel counts
/// a call in the window its exit time falls in: it keeps two generations
/// of each slot's aggregates and puts a call ending before the slot's next
/// cut (which the runner tells it) in one, later calls in the other. Once
/// the clock has passed the cut by [`CUT_GRACE_NS`], the runner merges the
/// ended generation into the window's collector, clears it, cuts, and
/// tells the kernel the cut after.
#[derive(Debug)]
pub struct Runner {
    probe: Probe,
    /// Per slot, the run counted there.
    runs: Vec<Option<Run>>,
    stats: RunnerStats,
    /// One drain's records, handled after it (kept for its memory).
    batch: Vec<Record>,
    /// Slots of runs given up (their process ended before it was traced,
    /// or was not the one matched): not handed out again until the ring
    /// was drained and their aggregates cleared, so nothing of what ran
    /// there meanwhile counts for a new run.
    quarantined: [bool; MAX_SLOTS as usize],
    /// Slots whose aggregates in the kernel may hold counts no run will
    /// read: of a run let go (its processes ran on). Cleared
    /// before the slot's next run; the others were emptied when their run
    /// finished, and clearing them again would cost a read of every map
    /// at every run's start (under an exec storm, the watch's bottleneck).
    leftovers: [bool; MAX_SLOTS as usize],
    ns_per_tick: u64,
}

impl Runner {
    /// Starts feeding `session` (with its windows set, if any) from
    /// `probe`, in slot 0; the caller adds the root process with
    /// [`Runner::trace`].
    pub fn new(probe: Probe, session: Session) -> anyhow::Result<Runner> {
        let mut runner = Runner::empty(probe);
        runner.add_run(0, session)?;
        Ok(runner)
    }

    /// A runner with no run yet ([`Runner::add_run`]).
    pub fn empty(probe: Probe) -> Runner {
        let stats = RunnerStats {
            task_storage: probe.thread_store() == ThreadStore::TaskStorage,
            dense: probe.dense(),
            fd_memo: probe.fd_memo(),
            btf_cut: probe.btf_cut(),
            ..RunnerStats::default()
        };
        Runner {
            probe,
            runs: (0..MAX_SLOTS).map(|_| None).collect(),
            stats,
            batch: Vec::with_capacity(256),
            quarantined: [false; MAX_SLOTS as usize],
            leftovers: [false; MAX_SLOTS as usize],
            ns_per_tick: sys::ns_per_clock_tick(),
        }
    }

    /// A slot no run holds, if one is left.
    pub fn free_slot(&self) -> Option<u8> {
        self.runs
            .iter()
            .zip(self.quarantined)
            .position(|(run, q)| run.is_none() && !q)
            .map(|i| i as u8)
    }

    /// Feeds `session` from slot `slot` (free: [`Runner::free_slot`]); the
    /// caller adds its root with [`Runner::trace_in`].
    pub fn add_run(&mut self, slot: u8, session: Session) -> anyhow::Result<()> {
        let Some(free @ None) = self.runs.get_mut(slot as usize) else {
            bail!("run slot {slot} is taken or not one");
        };
        // Whatever an earlier run of this slot left (nothing, unless it
        // was let go or given up) must not count for this one.
        if std::mem::take(&mut self.leftovers[slot as usize]) {
            let _ = self.probe.take_generation(slot, None);
        }
        self.probe.set_cut(slot, session.next_cut(), 0)?;
        *free = Some(Run {
            session,
            generation: 0,
            root_end: None,
            live_processes: 0,
            joined: Default::default(),
            losses_before: self.probe.losses_in(slot),
        });
        Ok(())
    }

    /// Traces process `tgid` (its threads `tids` now) and its future
    /// children in slot 0; `cpu_base`: the CPU time it had used so far (what
    /// the summary does not count).
    pub fn trace(&mut self, tgid: Tid, tids: &[Tid], cpu_base: CpuTime) -> anyhow::Result<()> {
        self.trace_in(0, tgid, None, tids, cpu_base)
    }

    /// [`Runner::trace`] for the run in slot `slot`; `born`: the start
    /// time (clock ticks since boot, `/proc/PID/stat`) of the process
    /// meant, when the caller knows it: a process found alive with another
    /// start time took the pid of the one meant, which ended meanwhile.
    pub fn trace_in(
        &mut self,
        slot: u8,
        tgid: Tid,
        born: Option<u64>,
        tids: &[Tid],
        cpu_base: CpuTime,
    ) -> anyhow::Result<()> {
        let Some(Some(run)) = self.runs.get_mut(slot as usize) else {
            bail!("no run in slot {slot}");
        };
        self.probe.trace(tgid as u32, slot)?;
        // Gone before it joined the set: the kernel never saw it end, so
        // it would stay in the set for good. Its pid taken by another
        // process: that one (and any child it forked since it joined) is
        // not the run's. Checked after the insert: a process alive and
        // the one meant now was so at the insert, so the kernel takes the
        // entry out at its end.
        let liveness = liveness(tgid, born);
        if liveness != Liveness::Alive {
            // A process may have taken the pid since the look (and forked):
            // whatever holds the slot now is not the run's. What ran in
            // the slot meanwhile (its calls, its records) is dropped at the
            // next poll, before the slot holds another run.
            self.probe.untrace_slot(slot);
            self.quarantined[slot as usize] = true;
            let reused = liveness == Liveness::Reused;
            bail!(
                "process {tgid} ended before it was traced{}",
                if reused {
                    " (its pid now names another process, not traced)"
                } else {
                    ""
                }
            );
        }
        run.live_processes += 1;
        for &tid in tids {
            run.session.thread_added(tgid, tid == tgid, cpu_base);
        }
        Ok(())
    }

    /// Traces the running process `pid` (all its threads, its future
    /// children) as `session`, in the free slot `slot`: what it used
    /// before counts for nothing. `born`: as for [`Runner::trace_in`]. On
    /// an error the slot is free again.
    pub fn trace_running(
        &mut self,
        slot: u8,
        session: Session,
        pid: Tid,
        born: Option<u64>,
    ) -> anyhow::Result<()> {
        let tids = threads_of(pid);
        let base = read_cpu_time(pid, self.ns_per_tick).unwrap_or_default();
        self.add_run(slot, session)?;
        self.trace_in(slot, pid, born, &tids, base)
            .inspect_err(|_| {
                self.runs[slot as usize] = None;
            })
    }

    /// Adds to run `slot` the processes its root `pid` forked before it
    /// joined the set, and theirs (a shell that forked its first command
    /// while `watch` read its command line): the forks since join through
    /// the tracepoint, these would otherwise run untraced, or be taken for
    /// runs of their own. `attach` leaves them (it traces the process
    /// named, as strace -p does).
    pub fn join_children(&mut self, slot: u8, pid: Tid) {
        crate::light::procfs::walk_children(pid, |child| self.join(slot, child));
    }

    /// Adds the running process `tgid`, a child of a process of run
    /// `slot` forked before that one was traced, to the run; true when it
    /// was added by this call (not by the fork tracepoint, and alive).
    fn join(&mut self, slot: u8, tgid: Tid) -> bool {
        let Some(stat) = crate::light::procfs::read_stat(tgid).filter(|s| !s.zombie) else {
            return false;
        };
        let tids = threads_of(tgid);
        let base = read_cpu_time(tgid, self.ns_per_tick).unwrap_or_default();
        if !self.probe.join(tgid as u32, slot) {
            return false;
        }
        // As for the root: one gone before the insert would stay in the
        // set; one whose pid was taken since the read is not the run's.
        if liveness(tgid, Some(stat.start_ticks)) != Liveness::Alive {
            self.probe.untrace(tgid as u32);
            return false;
        }
        let Some(Some(run)) = self.runs.get_mut(slot as usize) else {
            return false;
        };
        run.live_processes += 1;
        // Its fork record may still come (the tracepoint ran after the
        // insert): it must not count the process twice.
        run.joined.insert(tgid);
        for &tid in &tids {
            run.session.thread_added(tgid, tid == tgid, base);
        }
        true
    }

    /// Whether any run is traced.
    pub fn traces_any(&self) -> bool {
        self.runs.iter().any(Option::is_some)
    }

    /// Whether process `tgid` is traced (by any run).
    pub fn is_traced(&self, tgid: Tid) -> bool {
        self.probe.is_traced(tgid as u32)
    }

    /// Waits up to `timeout_ms` for records, handles them, cuts the
    /// windows that ended and hands them to `on_window`.
    pub fn poll(
        &mut self,
        timeout_ms: i32,
        on_window: &mut dyn FnMut(Summary),
    ) -> anyhow::Result<()> {
        self.probe
            .wait(timeout_ms)
            .context("cannot wait for the ring buffer")?;
        self.stats.polls += 1;
        self.step(sys::monotonic_ns());
        self.clear_quarantined();
        self.emit(on_window);
        Ok(())
    }

    /// Frees the slots of runs given up, once the ring was drained (their
    /// records read, and dropped: no run holds the slot): what the kernel
    /// counted in them is taken and dropped, all in one read of the maps.
    fn clear_quarantined(&mut self) {
        if !self.quarantined.contains(&true) {
            return;
        }
        let mut wanted = [None; MAX_SLOTS as usize];
        for (w, &q) in wanted.iter_mut().zip(&self.quarantined) {
            if q {
                *w = Some(None);
            }
        }
        let _ = self.probe.take_slots(&wanted);
        self.quarantined = [false; MAX_SLOTS as usize];
    }

    /// The next cut of the run in `slot`, if one runs there.
    fn next_cut(&self, slot: u8) -> Option<u64> {
        Some(self.runs.get(slot as usize)?.as_ref()?.session.next_cut())
    }

    /// Handles the records in the ring and cuts the windows `now` passed.
    fn step(&mut self, now: u64) {
        let latest_passed = self
            .runs
            .iter()
            .flatten()
            .map(|r| r.session.next_cut())
            .filter(|&c| c <= now)
            .max();
        if let Some(cut) = latest_passed {
            // Let the calls that crossed the cut reach the ring first.
            wait_until(cut.saturating_add(CUT_GRACE_NS));
        }
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        self.stats.unreadable += self.probe.drain(|r| batch.push(r));
        for (i, record) in batch.iter().enumerate() {
            match *record {
                Record::Fork {
                    tgid,
                    process,
                    at_ns,
                    slot,
                    ..
                } => {
                    if self.next_cut(slot).is_some_and(|c| at_ns >= c) {
                        self.cut(slot, at_ns, &batch[i..]);
                    }
                    // A record of a run already finished: nobody's now.
                    let Some(Some(run)) = self.runs.get_mut(slot as usize) else {
                        continue;
                    };
                    // Joined already, with its threads (`Runner::join`).
                    if process && run.joined.contains(&(tgid as Tid)) {
                        continue;
                    }
                    // A new process starts at zero CPU time.
                    run.session
                        .thread_added(tgid as Tid, process, CpuTime::default());
                    run.live_processes += process as u32;
                }
                Record::Exit {
                    tid: _,
                    tgid,
                    process_ended,
                    status,
                    at_ns,
                    slot,
                } => {
                    if self.next_cut(slot).is_some_and(|c| at_ns >= c) {
                        self.cut(slot, at_ns, &batch[i..]);
                    }
                    let ns_per_tick = self.ns_per_tick;
                    let Some(Some(run)) = self.runs.get_mut(slot as usize) else {
                        continue;
                    };
                    // The process is whole (or a zombie not reaped yet):
                    // its last reading.
                    read_cpu(&mut run.session, tgid as Tid, ns_per_tick);
                    run.session.cpu_thread_removed(tgid as Tid);
                    let s = &mut run.session;
                    s.live = s.live.saturating_sub(1);
                    s.end_ns = s.end_ns.max(at_ns);
                    if process_ended {
                        run.joined.remove(&(tgid as Tid));
                        run.live_processes = run.live_processes.saturating_sub(1);
                        if tgid == s.root as u32 {
                            run.root_end = Some((status, at_ns));
                        }
                    }
                }
                // Read by the cut it crossed.
                Record::Crossed { .. } => {}
            }
        }
        for slot in 0..MAX_SLOTS {
            self.cut(slot, now, &batch);
        }
        self.batch = batch;
    }

    /// Merges `generation` (or every generation) of run `slot`'s
    /// aggregates in the kernel into its current window's collector.
    fn merge(&mut self, slot: u8, generation: Option<u8>) {
        let Some(Some(run)) = self.runs.get_mut(slot as usize) else {
            return;
        };
        let taken = self.probe.take_generation(slot, generation);
        let (calls, bad) = aggregate::merge(&taken, &mut run.session.collector);
        self.stats.syscalls += calls;
        self.stats.unreadable += bad;
        if let Some(first) = self.probe.first_call_ns(slot) {
            run.session.note_call(first);
        }
    }

    /// Cuts run `slot`'s windows whose boundary `now` reached: merges the
    /// ended generation, notes the calls in flight at the boundary (those
    /// the kernel holds now that entered before it, and those among
    /// `records` that crossed it), cuts, and moves the kernel to the next
    /// cut.
    fn cut(&mut self, slot: u8, now: u64, records: &[Record]) {
        let Some(boundary) = self.next_cut(slot).filter(|&b| now >= b) else {
            return;
        };
        wait_until(boundary.saturating_add(CUT_GRACE_NS));
        let Some(generation) = self.runs[slot as usize].as_ref().map(|r| r.generation) else {
            return;
        };
        self.merge(slot, Some(generation));
        let mut pending: Vec<(u32, Pending)> = Vec::new();
        self.probe.in_flight(slot, |tid, p| {
            if p.entry_ns < boundary {
                pending.push((tid, p));
            }
        });
        for r in records {
            if let Record::Crossed {
                tid,
                call,
                cut_ns,
                slot: of,
            } = *r
            {
                if cut_ns == boundary && of == slot {
                    pending.push((tid, call));
                }
            }
        }
        // A call ending while the map was read may be in both.
        pending.sort_unstable_by_key(|&(tid, p)| (tid, p.entry_ns));
        pending.dedup_by_key(|&mut (tid, p)| (tid, p.entry_ns));
        let Some(run) = self.runs[slot as usize].as_mut() else {
            return;
        };
        let mut flying = InFlight::default();
        for (tid, p) in pending {
            note_in_flight(&mut flying, in_flight_call(&run.session, tid, p));
        }
        let live = (run.live_processes, run.session.live);
        run.session.cut_windows(now, flying, live);
        // The kernel now counts calls before the next cut in the other
        // generation (where it has been putting those after this one),
        // and later ones in this one, just cleared.
        run.generation ^= 1;
        let (next, generation) = (run.session.next_cut(), run.generation);
        if let Err(e) = self.probe.set_cut(slot, next, generation) {
            // The kernel keeps counting, all in one generation: the
            // windows after this one merge late, none is lost.
            eprintln!("edge-agent: {e:#}");
        }
    }

    /// Summarizes the windows cut and hands them to `on_window` (the CPU
    /// time of the live processes is read now).
    fn emit(&mut self, on_window: &mut dyn FnMut(Summary)) {
        let ns_per_tick = self.ns_per_tick;
        for run in self.runs.iter_mut().flatten() {
            run.session
                .emit_windows(|tgid| read_cpu_time(tgid, ns_per_tick), on_window);
        }
    }

    /// Whether a traced process is still alive.
    pub fn any_traced(&self) -> bool {
        self.probe.any_traced()
    }

    /// The slots of the runs whose processes have all ended (the kernel
    /// took the last one out of its traced set).
    pub fn ended_runs(&self) -> Vec<u8> {
        let live = self.probe.live_slots();
        (0..MAX_SLOTS)
            .filter(|&s| self.runs[s as usize].is_some() && !live[s as usize])
            .collect()
    }

    /// The slots runs hold now.
    pub fn runs(&self) -> Vec<u8> {
        (0..MAX_SLOTS)
            .filter(|&s| self.runs[s as usize].is_some())
            .collect()
    }

    /// Handles what is left, cuts run `slot`'s windows that ended before
    /// its end (`detached`: the agent lets go now; else the last thread's
    /// exit), merges what the kernel counted since, notes the calls in
    /// flight when the agent lets go, and frees the slot. `None`: no run
    /// there.
    pub fn finish_run(
        &mut self,
        slot: u8,
        detached: bool,
        on_window: &mut dyn FnMut(Summary),
    ) -> Option<Finished> {
        self.runs.get(slot as usize)?.as_ref()?;
        let now = sys::monotonic_ns();
        self.step(now);
        let end = if detached {
            now
        } else {
            self.runs[slot as usize].as_ref()?.session.end_ns
        };
        self.cut(slot, end, &[]);
        self.emit(on_window);
        if detached {
            // The programs run on until the probe is dropped: freeze
            // the current generation at `now` (later calls go to the
            // other, never read), so that its keys, errnos and
            // transitions are read as one consistent set.
            let generation = self.runs[slot as usize].as_ref()?.generation;
            if let Err(e) = self.probe.set_cut(slot, now, generation) {
                eprintln!("edge-agent: {e:#}");
            }
            wait_until(now.saturating_add(CUT_GRACE_NS));
            self.merge(slot, Some(generation));
        } else {
            // Every process of the run has ended: nothing writes any more.
            self.merge(slot, None);
        }
        let mut calls = Vec::new();
        if detached {
            self.probe.in_flight(slot, |tid, p| calls.push((tid, p)));
        }
        let ns_per_tick = self.ns_per_tick;
        let mut run = self.runs[slot as usize].take()?;
        // Let go, its processes count on in the generation not read.
        self.leftovers[slot as usize] |= detached;
        for tgid in run.session.cpu_live_processes() {
            read_cpu(&mut run.session, tgid, ns_per_tick);
        }
        if detached {
            let mut flying = InFlight::default();
            for (tid, p) in calls {
                note_in_flight(&mut flying, in_flight_call(&run.session, tid, p));
            }
            run.session.in_flight_at_end = flying;
        }
        self.note_losses();
        Some(Finished {
            session: run.session,
            root_end: run.root_end,
            losses: self.probe.losses_in(slot).since(run.losses_before),
        })
    }

    /// [`Runner::finish_run`] for the runs in `slots` that ended (every
    /// process of theirs did), together: one drain, and one read of the
    /// kernel's maps for all of them rather than one each (under an exec
    /// storm runs end by the dozen, and each read costs two system calls
    /// per entry of every slot).
    pub fn finish_ended(
        &mut self,
        slots: &[u8],
        on_window: &mut dyn FnMut(Summary),
    ) -> Vec<(u8, Finished)> {
        let slots: Vec<u8> = slots
            .iter()
            .copied()
            .filter(|&s| matches!(self.runs.get(s as usize), Some(Some(_))))
            .collect();
        if slots.is_empty() {
            return Vec::new();
        }
        self.step(sys::monotonic_ns());
        for &slot in &slots {
            let Some(end) = self.runs[slot as usize].as_ref().map(|r| r.session.end_ns) else {
                continue;
            };
            self.cut(slot, end, &[]);
        }
        self.emit(on_window);
        // Every process of these runs has ended: nothing writes any more.
        let mut wanted = [None; MAX_SLOTS as usize];
        for &slot in &slots {
            wanted[slot as usize] = Some(None);
        }
        let taken = self.probe.take_slots(&wanted);
        let ns_per_tick = self.ns_per_tick;
        let mut done = Vec::with_capacity(slots.len());
        for slot in slots {
            let first = self.probe.first_call_ns(slot);
            let Some(mut run) = self.runs[slot as usize].take() else {
                continue;
            };
            let (calls, bad) = aggregate::merge(&taken[slot as usize], &mut run.session.collector);
            self.stats.syscalls += calls;
            self.stats.unreadable += bad;
            if let Some(first) = first {
                run.session.note_call(first);
            }
            for tgid in run.session.cpu_live_processes() {
                read_cpu(&mut run.session, tgid, ns_per_tick);
            }
            done.push((
                slot,
                Finished {
                    session: run.session,
                    root_end: run.root_end,
                    losses: self.probe.losses_in(slot).since(run.losses_before),
                },
            ));
        }
        self.note_losses();
        done
    }

    /// Copies the kernel's loss counters into the stats.
    fn note_losses(&mut self) {
        let losses = self.probe.losses();
        self.stats.lost = losses.lost;
        self.stats.uncounted = losses.uncounted;
        self.stats.partial = losses.partial;
    }

    /// The backend's counters so far (lost and uncounted as of the last
    /// run finished).
    pub fn stats(&self) -> RunnerStats {
        self.stats
    }

    /// [`Runner::finish_run`] for the run in slot 0, and the counters.
    pub fn finish(
        mut self,
        detached: bool,
        on_window: &mut dyn FnMut(Summary),
    ) -> anyhow::Result<(Finished, RunnerStats)> {
        let done = self
            .finish_run(0, detached, on_window)
            .ok_or_else(|| anyhow!("no run in slot 0"))?;
        Ok((done, self.stats))
    }
}

/// The threads of process `pid` now (itself at least).
fn threads_of(pid: Tid) -> Vec<Tid> {
    let mut tids: Vec<Tid> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    if !tids.contains(&pid) {
        tids.push(pid);
    }
    tids
}

/// What became of a process the agent meant to trace.
#[derive(Debug, PartialEq, Eq)]
enum Liveness {
    /// Running (and the one meant, when its start time was given).
    Alive,
    /// Gone or a zombie: its exit is past.
    Ended,
    /// Its pid names a process started at another time.
    Reused,
}

/// Whether process `pid` is alive and the one started at `born` (clock
/// ticks since boot), if given.
fn liveness(pid: Tid, born: Option<u64>) -> Liveness {
    match crate::light::procfs::read_stat(pid) {
        None => Liveness::Ended,
        Some(s) if s.zombie => Liveness::Ended,
        Some(s) if born.is_some_and(|b| b != s.start_ticks) => Liveness::Reused,
        Some(_) => Liveness::Alive,
    }
}

fn read_cpu(session: &mut Session, tgid: Tid, ns_per_tick: u64) {
    if let Some(t) = read_cpu_time(tgid, ns_per_tick) {
        session.cpu_read(tgid, t);
    }
}

fn in_flight_call(session: &Session, tid: u32, p: Pending) -> InFlightCall {
    InFlightCall {
        tid,
        id: p.id,
        fd_kind: p.fd_kind,
        peer: p.peer,
        start_unix_ns: session.to_unix_ns(p.entry_ns),
    }
}

/// Sleeps until the monotonic clock reaches `at_ns` (at once if it has).
fn wait_until(at_ns: u64) {
    let now = sys::monotonic_ns();
    if at_ns > now {
        std::thread::sleep(std::time::Duration::from_nanos(at_ns - now));
    }
}

/// A summary with the eBPF backend's mark: what the kernel lost of the
/// run ([`add_loss_facts`]), also said on stderr.
pub fn summarize(session: &Session, losses: Losses) -> Summary {
    let mut summary = trace::summarize(session);
    add_loss_facts(&mut summary, losses);
    if losses.lost > 0 {
        eprintln!(
            "edge-agent: {} task records lost (the BPF ring buffer was full); the summary's process and thread counts miss them",
            losses.lost
        );
    }
    if let Some(said) = uncounted_said(losses) {
        eprintln!("edge-agent: {said}; the summary misses what was not counted");
    }
    summary
}

/// What the calls lost of `losses` were, and why, for a person (None
/// when no call was lost whole or in part).
pub fn uncounted_said(losses: Losses) -> Option<String> {
    let said: Vec<String> = [
        (
            losses.uncounted.saturating_sub(losses.refused),
            "syscalls not counted (the BPF aggregate map was full)",
        ),
        (
            losses.refused,
            "syscalls not counted (the kernel refused a new key with room left: no per-CPU memory ready, or the map busy)",
        ),
        (
            losses.partial,
            "syscalls counted without their transition, errno or peer figures (a full BPF map, or no per-CPU memory ready)",
        ),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    (!said.is_empty()).then(|| said.join("; "))
}

/// Adds what the kernel lost of a run to its summary, when anything: the
/// facts `ebpf.lost` (task records), `ebpf.uncounted` (calls not counted
/// at all), `ebpf.uncounted_refused` (of those, the ones whose new key the
/// kernel refused with room left) and `ebpf.partial` (calls counted
/// without their transition, errno or peer figures). The summary format
/// has no field for them: its `overflow` record counts table overflows,
/// which are still counted events, while these are missing ones.
pub fn add_loss_facts(summary: &mut Summary, losses: Losses) {
    for (fact, n) in [
        ("ebpf.lost", losses.lost),
        ("ebpf.uncounted", losses.uncounted),
        ("ebpf.uncounted_refused", losses.refused),
        ("ebpf.partial", losses.partial),
    ] {
        if n > 0 {
            let _ = summary.facts.add(fact, &n.to_string());
        }
    }
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
        if opts.only.is_some() {
            bail!("--only needs the ptrace backend (its seccomp prefilter)");
        }
        let trace::StoppedCommand {
            pid,
            error_fd: read_fd,
            session,
            given,
        } = trace::fork_stopped(opts, None, &[])?;
        let started = Runner::new(probe, session).and_then(|mut runner| {
            runner
                .trace(pid, &[pid], CpuTime::default())
                .map(|_| runner)
        });
        let runner = match started {
            Ok(runner) => runner,
            Err(e) => {
                let _ = sys::kill(pid, libc::SIGKILL);
                let _ = sys::wait_pid(pid, 0, true);
                sys::close(read_fd);
                return Err(e);
            }
        };
        sys::kill(pid, libc::SIGCONT).context("cannot continue the command")?;
        Ok(EbpfStarted {
            runner: Some(runner),
            pid,
            error_fd: read_fd,
            given,
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
    /// returns the summary (cut into windows: the last window's; the
    /// others go to `on_window` as they end).
    pub fn trace(&mut self, on_window: &mut dyn FnMut(Summary)) -> anyhow::Result<Summary> {
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
            runner.poll(POLL_MS, on_window)?;
        }
        crate::signals::quiet();
        let (
            Finished {
                mut session,
                losses,
                ..
            },
            stats,
        ) = runner.finish(detached, on_window)?;
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
        Ok(summarize(&session, losses))
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
/// children) until it ends, the duration passes or a stop is requested;
/// returns the summary (cut into windows: the last window's; the others go
/// to `on_window` as they end). A call the process was in when the agent
/// came is not seen (the program only sees calls enter).
pub fn attach(
    opts: &AttachOptions,
    probe: Probe,
    on_window: &mut dyn FnMut(Summary),
) -> anyhow::Result<(Summary, RunnerStats)> {
    let pid = opts.pid;
    let session = trace::attach_session(opts)?;
    let mut runner = Runner::empty(probe);
    // What the process used before the agent came does not count.
    runner.trace_running(0, session, pid, None)?;
    let deadline = opts.duration.map(|d| std::time::Instant::now() + d);
    let mut detached = false;
    while runner.any_traced() {
        if crate::signals::stop_requested().is_some()
            || deadline.is_some_and(|at| std::time::Instant::now() >= at)
        {
            detached = true;
            break;
        }
        runner.poll(POLL_MS, on_window)?;
    }
    crate::signals::quiet();
    let (
        Finished {
            mut session,
            root_end,
            losses,
        },
        stats,
    ) = runner.finish(detached, on_window)?;
    match root_end {
        Some((status, _)) if !detached => {
            session.root_status = Some(WaitStatus(status));
            session.live = 0;
        }
        _ => session.detached = true,
    }
    Ok((summarize(&session, losses), stats))
}

#[cfg(test)]
mod tests {
    use super::{add_loss_facts, liveness, uncounted_said, Liveness, Runner};
    use crate::ebpf::loader::{Losses, Probe};
    use crate::engine::Session;
    use crate::sys::Tid;

    /// Calls lost to a full map and those refused with room left are told
    /// apart, in the words and in the summary's facts; no loss, no words.
    #[test]
    fn losses_say_why_calls_went_uncounted() {
        assert_eq!(uncounted_said(Losses::default()), None);
        let losses = Losses {
            lost: 0,
            uncounted: 5,
            refused: 3,
            partial: 7,
        };
        let said = uncounted_said(losses).unwrap();
        assert!(said.starts_with("2 syscalls not counted (the BPF aggregate map was full); 3 syscalls not counted (the kernel refused"), "{said}");
        assert!(said.ends_with("; 7 syscalls counted without their transition, errno or peer figures (a full BPF map, or no per-CPU memory ready)"), "{said}");
        let mut summary = crate::trace::summarize(&Session::new(1, agent_core::Facts::default()));
        add_loss_facts(&mut summary, losses);
        let facts: Vec<(&str, &str)> = [
            "ebpf.lost",
            "ebpf.uncounted",
            "ebpf.uncounted_refused",
            "ebpf.partial",
        ]
        .iter()
        .filter_map(|k| Some((*k, summary.facts.get(k)?)))
        .collect();
        assert_eq!(
            facts,
            [
                ("ebpf.uncounted", "5"),
                ("ebpf.uncounted_refused", "3"),
                ("ebpf.partial", "7")
            ]
        );
    }

    /// A process whose start time is not the one matched took the pid of
    /// the process matched (it ended meanwhile; an exec storm reuses pids
    /// within a minute): it is not traced, and the slot waits for the
    /// next drain before it holds another run. The process meant is.
    #[test]
    fn a_process_that_took_the_pid_of_the_one_matched_is_not_traced() {
        let Some(_turn) = crate::ebpf::probe_test_turn() else {
            return;
        };
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as Tid;
        let born = crate::light::procfs::read_stat(pid).unwrap().start_ticks;
        assert_eq!(liveness(pid, Some(born)), Liveness::Alive);
        assert_eq!(liveness(pid, Some(born + 1)), Liveness::Reused);
        let mut runner = Runner::empty(Probe::load(1 << 16).unwrap());
        let session = || Session::new(pid, agent_core::Facts::default());
        let err = runner
            .trace_running(0, session(), pid, Some(born + 1))
            .unwrap_err();
        assert!(format!("{err:#}").contains("another process"), "{err:#}");
        assert!(!runner.is_traced(pid));
        assert!(runner.runs().is_empty());
        assert_ne!(runner.free_slot(), Some(0), "handed out before a drain");
        runner.poll(0, &mut |_| {}).unwrap();
        assert_eq!(runner.free_slot(), Some(0));
        runner.trace_running(0, session(), pid, Some(born)).unwrap();
        assert!(runner.is_traced(pid));
        let _ = child.kill();
        let _ = child.wait();
    }
}
