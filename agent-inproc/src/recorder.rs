//! The process's statistics, recorded into from every thread.
//!
//! Why it is built this way: a wrapper runs on whatever thread called libc,
//! possibly inside a signal handler that interrupted that same thread while
//! it was itself recording. A mutex would deadlock there (the interrupted
//! holder never runs again until the handler returns), and an allocation
//! could re-enter a malloc the handler interrupted. So every lock here is
//! only ever *tried*, never waited for without a bound, and every buffer
//! has a fixed size:
//!
//! 1. The common case: the collector's lock is free, the call is recorded
//!    at once (one compare-and-swap in, one store out).
//! 2. The lock is held (another thread is recording, or this thread was
//!    interrupted while recording): the event goes to a small ring of its
//!    own thread's slot, claimed by compare-and-swap on the thread's key,
//!    and is folded into the collector by whichever recording next holds
//!    the lock ([`Recorder::record`] drains pending rings while it has it).
//! 3. No slot or ring can take it (every slot busy, or this thread's rings
//!    full and the collector still held): if another thread holds the
//!    lock, this one yields the CPU until it is free, for at most
//!    [`WAIT_NS`] — on a busy machine the holder may be descheduled in
//!    mid-recording for a few time slices while the other threads fill
//!    their rings. Else, or when the wait runs out, the call is counted as
//!    lost, and the summary says how many were. A holder that is this
//!    thread (a handler interrupted it) can never finish while we wait,
//!    and one a wait ran out on (a process killed inside a recording
//!    leaves the lock held for good) is not waited for again.
//!
//! A slot is given back when its ring is drained empty, so a program that
//! makes threads all the time does not run out of slots: only threads that
//! met a held lock, and only until the next drain, hold one.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use agent_core::{Collector, RunId, RunRecord, Summary, SyscallEvent};
use heapless::Vec;
use spin::Mutex;

use crate::sys;

/// Slots for threads that met a held collector lock at once.
pub const SLOTS: usize = 32;

/// Events one slot holds until the next drain.
pub const RING: usize = 16;

/// How many slots a recording tries before it waits or counts its event
/// lost.
const PROBES: usize = 8;

/// The longest a recording waits for another thread's recording to end
/// when its rings are full: a few scheduler time slices.
pub const WAIT_NS: u64 = 50_000_000;

/// A thread's events waiting for the collector, and whose they are.
struct Slot {
    /// The key of the thread that claimed it (0: free).
    owner: AtomicUsize,
    ring: Mutex<Vec<SyscallEvent, RING>>,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            owner: AtomicUsize::new(0),
            ring: Mutex::new(Vec::new()),
        }
    }
}

/// What the recorder counted about itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecorderStats {
    /// Events recorded at once, the collector's lock being free.
    pub direct: u64,
    /// Events that waited in a slot's ring first.
    pub deferred: u64,
    /// Events recorded after waiting for another thread's recording to
    /// end (their rings were full).
    pub waited: u64,
    /// Waits that ran out (the holder never let go).
    pub gave_up: u64,
    /// Events no slot could take: not in any statistic.
    pub lost: u64,
}

/// The statistics of one process's calls, recorded from any thread.
pub struct Recorder {
    collector: Mutex<Collector>,
    /// The key of the thread holding `collector`'s lock while it records
    /// (0: none, or not yet said). Lets the run's owner tell a lock left
    /// held by a process that was killed inside a recording (the table may
    /// be shared by the processes of a run: `agent-preload`).
    holder: AtomicUsize,
    slots: [Slot; SLOTS],
    /// Events waiting in rings (a hint: a recording that holds the lock
    /// drains only when it is not zero).
    pending: AtomicU64,
    /// The holder a wait ran out on (0: none): not waited for again until
    /// the lock is seen free.
    abandoned: AtomicUsize,
    direct: AtomicU64,
    deferred: AtomicU64,
    waited: AtomicU64,
    gave_up: AtomicU64,
    lost: AtomicU64,
    /// `lost` at the last cut (each summary says its window's).
    lost_at_cut: AtomicU64,
}

/// The fact a summary counts its window's lost calls in.
pub const LOST_FACT: &str = "inproc.lost_calls";

impl Recorder {
    /// A recorder whose statistics start at `start_ns` (the events'
    /// monotonic clock).
    pub fn new(start_ns: u64) -> Recorder {
        Recorder {
            collector: Mutex::new(Collector::new(start_ns)),
            holder: AtomicUsize::new(0),
            slots: [const { Slot::new() }; SLOTS],
            pending: AtomicU64::new(0),
            abandoned: AtomicUsize::new(0),
            direct: AtomicU64::new(0),
            deferred: AtomicU64::new(0),
            waited: AtomicU64::new(0),
            gave_up: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            lost_at_cut: AtomicU64::new(0),
        }
    }

    /// Records one completed call made by the thread whose key is `thread`
    /// (any value unique among the process's live threads and not 0, e.g.
    /// its `pthread_self()`). Never allocates and never waits unbounded
    /// (at most [`WAIT_NS`], and never for itself): safe from a signal
    /// handler, including one that interrupted a recording.
    pub fn record(&self, thread: usize, ev: &SyscallEvent) {
        let thread = thread.max(1);
        if let Some(mut collector) = self.collector.try_lock() {
            self.record_locked(thread, &mut collector, ev);
            self.direct.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.defer(thread, ev) {
            return;
        }
        if let Some(mut collector) = self.wait_for_other(thread) {
            self.record_locked(thread, &mut collector, ev);
            self.waited.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.lost.fetch_add(1, Ordering::Relaxed);
    }

    fn record_locked(&self, thread: usize, collector: &mut Collector, ev: &SyscallEvent) {
        self.holder.store(thread, Ordering::Relaxed);
        if self.abandoned.load(Ordering::Relaxed) != 0 {
            // The lock was let go after all: its holder may be waited for
            // again.
            self.abandoned.store(0, Ordering::Relaxed);
        }
        collector.record(ev);
        if self.pending.load(Ordering::Acquire) > 0 {
            self.drain_into(collector);
        }
        self.holder.store(0, Ordering::Relaxed);
    }

    /// The collector's lock once another thread's recording lets it go,
    /// yielding the CPU meanwhile (the holder may be waiting for one), or
    /// `None` at once when the holder is unknown, is this thread, or was
    /// given up on, and after [`WAIT_NS`] otherwise.
    fn wait_for_other(&self, thread: usize) -> Option<spin::MutexGuard<'_, Collector>> {
        let holder = self.holder.load(Ordering::Relaxed);
        if holder == 0 || holder == thread || holder == self.abandoned.load(Ordering::Relaxed) {
            return None;
        }
        let deadline = sys::monotonic_ns().saturating_add(WAIT_NS);
        loop {
            sys::yield_now();
            if let Some(collector) = self.collector.try_lock() {
                return Some(collector);
            }
            if sys::monotonic_ns() > deadline {
                self.abandoned.store(holder, Ordering::Relaxed);
                self.gave_up.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        }
    }

    /// Puts `ev` in a ring of a slot this thread holds or can claim.
    /// A slot changes hands only under its ring's lock (claimed here,
    /// given back by a drain), so no event lands in a slot no one owns.
    fn defer(&self, thread: usize, ev: &SyscallEvent) -> bool {
        let start = spread(thread) % SLOTS;
        for probe in 0..PROBES {
            let slot = &self.slots[(start + probe) % SLOTS];
            let owner = slot.owner.load(Ordering::Acquire);
            if owner != thread && owner != 0 {
                continue;
            }
            // Held by this thread's interrupted recording or by a drain:
            // try the next slot rather than wait.
            let Some(mut ring) = slot.ring.try_lock() else {
                continue;
            };
            let claimed = slot.owner.load(Ordering::Acquire) == thread
                || slot
                    .owner
                    .compare_exchange(0, thread, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
            if claimed && ring.push(*ev).is_ok() {
                self.pending.fetch_add(1, Ordering::AcqRel);
                return true;
            }
        }
        false
    }

    /// Folds every ring that is not being written into `collector`, and
    /// frees the slots left empty.
    fn drain_into(&self, collector: &mut Collector) {
        for slot in &self.slots {
            if slot.owner.load(Ordering::Acquire) == 0 {
                continue;
            }
            let Some(mut ring) = slot.ring.try_lock() else {
                continue;
            };
            let taken = ring.len() as u64;
            for ev in ring.iter() {
                collector.record(ev);
            }
            ring.clear();
            // Given back while its ring lock is held: the owner's next
            // deferral claims it again (or another slot) afresh.
            slot.owner.store(0, Ordering::Release);
            drop(ring);
            if taken > 0 {
                self.deferred.fetch_add(taken, Ordering::Relaxed);
                self.pending.fetch_sub(taken, Ordering::AcqRel);
            }
        }
    }

    /// The summary of everything recorded since the last cut (or the
    /// start), and a new window starting at `now_ns`. Waits for the
    /// collector's lock: call it from a thread, never from a signal
    /// handler. Events still in a ring being written at this moment go to
    /// the next window. Calls lost in the window are counted in the fact
    /// [`LOST_FACT`] when there were any.
    pub fn cut(&self, id: RunId, run: RunRecord, facts: agent_core::Facts, now_ns: u64) -> Summary {
        let mut collector = loop {
            if let Some(c) = self.collector.try_lock() {
                break c;
            }
            core::hint::spin_loop();
        };
        self.cut_locked(&mut collector, id, run, facts, now_ns)
    }

    /// [`Recorder::cut`] if the collector's lock is free now, else `None`
    /// (a recording holds it; or a process that shared the recorder died
    /// holding it: see [`Recorder::holder`]).
    pub fn try_cut(
        &self,
        id: RunId,
        run: RunRecord,
        facts: agent_core::Facts,
        now_ns: u64,
    ) -> Option<Summary> {
        let mut collector = self.collector.try_lock()?;
        Some(self.cut_locked(&mut collector, id, run, facts, now_ns))
    }

    /// [`Recorder::cut`] by the recorder's only user: whatever state its
    /// lock was left in by a recording that never finished (its process
    /// was killed), the statistics are read as they are.
    pub fn cut_exclusive(
        &mut self,
        id: RunId,
        run: RunRecord,
        facts: agent_core::Facts,
        now_ns: u64,
    ) -> Summary {
        let mut collector = core::mem::replace(self.collector.get_mut(), Collector::new(0));
        let summary = self.cut_locked(&mut collector, id, run, facts, now_ns);
        *self.collector.get_mut() = collector;
        summary
    }

    /// The key of the thread recording now, if one said so.
    pub fn holder(&self) -> Option<usize> {
        match self.holder.load(Ordering::Relaxed) {
            0 => None,
            key => Some(key),
        }
    }

    fn cut_locked(
        &self,
        collector: &mut Collector,
        id: RunId,
        run: RunRecord,
        mut facts: agent_core::Facts,
        now_ns: u64,
    ) -> Summary {
        self.drain_into(collector);
        let lost = self.lost.load(Ordering::Relaxed);
        let lost_here = lost - self.lost_at_cut.swap(lost, Ordering::Relaxed);
        if lost_here > 0 {
            // A full fact table is the only way this is not said; the
            // recorder's own stats still count it.
            let _ = facts.add(LOST_FACT, &lost_here.to_string());
        }
        let summary = collector.summarize(id, run, facts);
        collector.reset_window(now_ns);
        summary
    }

    /// What the recorder counted about itself so far.
    pub fn stats(&self) -> RecorderStats {
        RecorderStats {
            direct: self.direct.load(Ordering::Relaxed),
            deferred: self.deferred.load(Ordering::Relaxed),
            waited: self.waited.load(Ordering::Relaxed),
            gave_up: self.gave_up.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
        }
    }

    /// Runs `f` while holding the collector's lock, as a recording on
    /// another thread (or an interrupted one on this thread) would.
    #[cfg(test)]
    fn while_recording(&self, f: impl FnOnce()) {
        let guard = self.collector.lock();
        f();
        drop(guard);
    }
}

/// The recorder's own counts (the statistics are read by [`Recorder::cut`]).
impl core::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Recorder")
            .field("stats", &self.stats())
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Spreads thread keys (often aligned pointers) over the slots.
fn spread(key: usize) -> usize {
    (key as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_right(29) as usize
}

#[cfg(test)]
mod tests;
