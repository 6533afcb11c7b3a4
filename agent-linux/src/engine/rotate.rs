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
use crate::backend::Backend;
use crate::sys::Tid;

/// The calls in flight in `session`'s threads (oldest first, times made
/// wall-clock with `to_unix`), and its traced (processes, threads).
pub(super) fn in_flight(
    threads: &HashMap<Tid, Thread>,
    session: usize,
    to_unix: impl Fn(u64) -> u64,
) -> (InFlight, (u32, u32)) {
    use agent_core::summary::MAX_IN_FLIGHT;
    let mut out = InFlight::default();
    let (mut procs, mut thr) = (0u32, 0u32);
    for (&tid, t) in threads.iter().filter(|(_, t)| t.session == session) {
        thr = thr.saturating_add(1);
        if tid == t.tgid {
            procs = procs.saturating_add(1);
        }
        let Some(c) = t.call else { continue };
        out.count = out.count.saturating_add(1);
        let call = InFlightCall {
            tid: tid as u32,
            id: c.id,
            fd_kind: c.fd_kind,
            peer: c.peer,
            start_unix_ns: to_unix(c.entry_ns),
        };
        // Oldest first; ties: lower tid first.
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
    (out, (procs, thr))
}

impl<B: Backend> Engine<B> {
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

    /// Cuts session `i`'s windows whose boundary `now` reached: the first
    /// with what was recorded, any further ones (nothing stopped the
    /// tracees meanwhile) empty.
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
        let (start_ns, start_unix_ns) = (s.start_ns, s.start_unix_ns);
        let to_unix = |mono: u64| {
            let unix = start_unix_ns as i128 + (mono as i128 - start_ns as i128);
            unix.clamp(0, u64::MAX as i128) as u64
        };
        let (flying, live) = in_flight(threads, i, to_unix);
        let Some(w) = s.windows.as_mut() else {
            return;
        };
        let mut fresh = w.spare.pop().unwrap_or_else(|| Box::new(Collector::new(0)));
        fresh.follow(&s.collector, w.end_ns);
        let full = std::mem::replace(&mut s.collector, fresh);
        w.advance(Some(full), flying.clone(), live);
        while now >= w.end_ns {
            w.advance(None, flying.clone(), live);
            // After an empty window no peer is carried over any more.
            s.collector.reset_window(w.start_ns);
        }
        self.windows_pending = true;
    }

    /// Summarizes the windows cut since the last call and hands them to the
    /// observer (the loop calls it after resuming the stopped tracee). The
    /// CPU time read now goes to the first window of each batch.
    pub(super) fn emit_windows(&mut self, observer: &mut dyn Observer<B>) {
        if !std::mem::take(&mut self.windows_pending) {
            return;
        }
        for i in 0..self.sessions.len() {
            let Some(Some(s)) = self.sessions.get_mut(i) else {
                continue;
            };
            let Some(w) = s.windows.as_mut() else {
                continue;
            };
            if w.ended.is_empty() {
                continue;
            }
            let ended = std::mem::take(&mut w.ended);
            let cpu = self.window_cpu(i);
            let Some(Some(s)) = self.sessions.get_mut(i) else {
                continue;
            };
            let mut cpu = Some(cpu);
            // An empty window follows the last full one before it.
            let mut scratch: Option<Box<Collector>> = None;
            let mut prev: Option<&Collector> = None;
            for e in &ended {
                let summary = match &e.collector {
                    Some(c) => {
                        prev = Some(c);
                        s.window_summary(e, c, cpu.take().unwrap_or_default())
                    }
                    None => {
                        let c = scratch.get_or_insert_with(|| Box::new(Collector::new(0)));
                        match prev.take() {
                            Some(p) => c.follow(p, e.start_ns),
                            None => c.reset_window(e.start_ns),
                        }
                        s.window_summary(e, c, cpu.take().unwrap_or_default())
                    }
                };
                observer.window_done(summary);
            }
            // Keep the ended list's memory and up to two spare collectors.
            let Some(w) = s.windows.as_mut() else {
                continue;
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
    }

    /// Session `i`'s CPU time since the last window: its live processes are
    /// read now.
    fn window_cpu(&mut self, i: usize) -> CpuTime {
        let Engine {
            sessions, backend, ..
        } = self;
        let Some(Some(s)) = sessions.get_mut(i) else {
            return CpuTime::default();
        };
        let live: Vec<Tid> = s.cpu.live_processes().collect();
        for tgid in live {
            if let Some(t) = backend.cpu_time(tgid) {
                s.cpu.sample(tgid, t);
            }
        }
        s.cpu.take()
    }
}
