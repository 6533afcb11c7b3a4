//! Cutting sessions into windows, on the stop path, and emitting the
//! windows' summaries, off it (see `window.rs` for where boundaries fall).
//!
//! A syscall counts in the window where it completes: at an exit stop at or
//! past the boundary the engine cuts first, then records. The loop's timer
//! tick cuts too, so an idle program still gets its windows (within a tick
//! of the boundary). The cut itself, on the stop path, is bounded: it swaps
//! in a fresh collector that carries the thread state and peers over
//! ([`agent_core::Collector::follow`]), notes the calls in flight (one pass
//! over the threads) and keeps the ended collector. The summary is built
//! later by the loop, after the tracee was resumed
//! ([`Engine::emit_windows`]), and handed to [`super::Observer::window_done`].

use std::collections::HashMap;

use agent_core::{Collector, CpuTime, InFlight, InFlightCall};

use super::session::Session;
use super::thread::Thread;
use super::{Engine, Observer};
use crate::backend::StopBackend;
use crate::sys::Tid;

/// The calls in flight in `session`'s threads (oldest first, times made
/// wall-clock with `to_unix`), and its traced (processes, threads).
pub(super) fn in_flight(
    threads: &HashMap<Tid, Thread>,
    session: usize,
    to_unix: impl Fn(u64) -> u64,
) -> (InFlight, (u32, u32)) {
    let mut out = InFlight::default();
    let (mut procs, mut thr) = (0u32, 0u32);
    for (&tid, t) in threads.iter().filter(|(_, t)| t.session == session) {
        thr = thr.saturating_add(1);
        if tid == t.tgid {
            procs = procs.saturating_add(1);
        }
        let Some(c) = t.call else { continue };
        note_in_flight(
            &mut out,
            InFlightCall {
                tid: tid as u32,
                id: c.id,
                fd_kind: c.fd_kind,
                peer: c.peer,
                start_unix_ns: to_unix(c.entry_ns),
            },
        );
    }
    (out, (procs, thr))
}

/// Counts one more call in flight, keeping the oldest
/// [`agent_core::summary::MAX_IN_FLIGHT`] (oldest first; ties: lower tid
/// first).
pub(crate) fn note_in_flight(out: &mut InFlight, call: InFlightCall) {
    use agent_core::summary::MAX_IN_FLIGHT;
    out.count = out.count.saturating_add(1);
    let key = (call.start_unix_ns, call.tid);
    let pos = out
        .oldest
        .iter()
        .position(|o| key < (o.start_unix_ns, o.tid))
        .unwrap_or(out.oldest.len());
    if pos < MAX_IN_FLIGHT {
        if out.oldest.is_full() {
            out.oldest.pop();
        }
        // Cannot fail: room was made above.
        let _ = out.oldest.insert(pos, call);
    }
}

impl<B: StopBackend> Engine<B> {
    /// Cuts every session whose window boundary `now` reached. On the hot
    /// path only the comparison runs.
    #[inline]
    pub(super) fn cut_if_due(&mut self, now: u64) {
        if now >= self.next_cut {
            self.cut_due(now);
        }
    }

    #[cold]
    fn cut_due(&mut self, now: u64) {
        for i in 0..self.sessions.len() {
            self.cut_session(i, now);
        }
        self.refresh_next_cut();
    }

    /// When the next window of any session ends.
    pub(super) fn refresh_next_cut(&mut self) {
        self.next_cut = if self.mode == super::Mode::Tracing {
            self.sessions()
                .map(Session::next_cut)
                .min()
                .unwrap_or(u64::MAX)
        } else {
            u64::MAX
        };
    }

    /// Cuts session `i`'s windows whose boundary `now` reached (see
    /// [`Session::cut_windows`]).
    pub(super) fn cut_session(&mut self, i: usize, now: u64) {
        let Engine {
            sessions, threads, ..
        } = self;
        let Some(Some(s)) = sessions.get_mut(i) else {
            return;
        };
        if now < s.next_cut() {
            return;
        }
        let (flying, live) = in_flight(threads, i, |m| s.to_unix_ns(m));
        if s.cut_windows(now, flying, live) {
            self.windows_pending = true;
        }
    }

    /// Summarizes the windows cut since the last call and hands them to the
    /// observer (the loop calls it after resuming the stopped tracee).
    pub(super) fn emit_windows(&mut self, observer: &mut dyn Observer<B>) {
        if !std::mem::take(&mut self.windows_pending) {
            return;
        }
        let Engine {
            sessions, backend, ..
        } = self;
        for s in sessions.iter_mut().flatten() {
            s.emit_windows(|tgid| backend.cpu_time(tgid), &mut |w| {
                observer.window_done(w)
            });
        }
    }
}

impl Session {
    /// Cuts the windows whose boundary `now` reached: the first with what
    /// was recorded, any further ones (nothing was recorded meanwhile)
    /// empty. `flying`: the calls in flight at the cut; `live`: the
    /// (processes, threads) traced then. Bounded work (no summary): it
    /// swaps in a collector that carries the thread state and peers over.
    /// Returns whether it cut. Both backends cut through here.
    pub(crate) fn cut_windows(&mut self, now: u64, flying: InFlight, live: (u32, u32)) -> bool {
        let Session {
            windows, collector, ..
        } = self;
        let Some(w) = windows.as_mut() else {
            return false;
        };
        if now < w.end_ns {
            return false;
        }
        let mut fresh = w.spare.pop().unwrap_or_else(|| Box::new(Collector::new(0)));
        fresh.follow(collector, w.end_ns);
        let full = std::mem::replace(collector, fresh);
        w.advance(Some(full), flying.clone(), live);
        while now >= w.end_ns {
            w.advance(None, flying.clone(), live);
            // After an empty window no peer is carried over any more.
            collector.reset_window(w.start_ns);
        }
        true
    }

    /// Summarizes the windows cut since the last call, in order, and hands
    /// each to `out`. The CPU time of the session's live processes is read
    /// now with `cpu_time` (/proc/TGID/stat) and goes to the first window
    /// of the batch.
    pub(crate) fn emit_windows(
        &mut self,
        cpu_time: impl FnMut(Tid) -> Option<CpuTime>,
        out: &mut dyn FnMut(agent_core::Summary),
    ) {
        let Some(w) = self.windows.as_mut() else {
            return;
        };
        if w.ended.is_empty() {
            return;
        }
        let ended = std::mem::take(&mut w.ended);
        let mut cpu = Some(self.window_cpu(cpu_time));
        // An empty window follows the last full one before it.
        let mut scratch: Option<Box<Collector>> = None;
        let mut prev: Option<&Collector> = None;
        for e in &ended {
            let summary = match &e.collector {
                Some(c) => {
                    prev = Some(c);
                    self.window_summary(e, c, cpu.take().unwrap_or_default())
                }
                None => {
                    let c = scratch.get_or_insert_with(|| Box::new(Collector::new(0)));
                    match prev.take() {
                        Some(p) => c.follow(p, e.start_ns),
                        None => c.reset_window(e.start_ns),
                    }
                    self.window_summary(e, c, cpu.take().unwrap_or_default())
                }
            };
            out(summary);
        }
        // Keep the ended list's memory and up to two spare collectors.
        let Some(w) = self.windows.as_mut() else {
            return;
        };
        let mut ended = ended;
        for e in ended.drain(..) {
            if let Some(c) = e.collector {
                if w.spare.len() < 2 {
                    w.spare.push(c);
                }
            }
        }
        if w.ended.is_empty() {
            w.ended = ended;
        }
    }

    /// The CPU time since the last window: the live processes are read now
    /// with `cpu_time`.
    fn window_cpu(&mut self, mut cpu_time: impl FnMut(Tid) -> Option<CpuTime>) -> CpuTime {
        for tgid in self.cpu_live_processes() {
            if let Some(t) = cpu_time(tgid) {
                self.cpu_read(tgid, t);
            }
        }
        self.cpu.take()
    }
}
