//! `watch` on the eBPF backend: one BPF program, loaded once for the whole
//! watch, counts every matched run in a slot of its own in the kernel (the
//! process joins the traced set with the run's slot, its children inherit
//! it), so several runs at once each get their own summary and windows. A
//! run is never stopped; it ends when the kernel has taken its last
//! process out of the set.
//!
//! The kernel tells [`MAX_SLOTS`] runs apart: a run matched while every
//! slot is taken is not traced (said on stderr, with the count so far, and
//! counted in the next summary's fact `watch.skipped_runs`), as a run
//! ptrace could not seize is not. Runs that ended since the last look are
//! finished together (one read of the kernel's maps for all of them), so
//! slots are free again as fast as an exec storm ends its runs.

use std::time::{Duration, Instant};

use crate::ebpf::Probe;
use crate::watch::{say_ready, WatchOptions, Watcher};

/// The longest the loop waits for news (an exec, the ring): how late a
/// run's end and a window's cut may be seen.
const POLL: Duration = Duration::from_millis(20);

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod slots {
    use std::rc::Rc;

    use agent_core::Summary;

    use crate::ebpf::runner::{add_loss_facts, Finished, Runner};
    use crate::ebpf::MAX_SLOTS;
    use crate::sys::{Tid, WaitStatus};
    use crate::watch::{Matched, RunTracer, SessionMaker};
    use crate::watch_shed::Shedding;

    /// The runner as a [`RunTracer`]: a matched run takes a free slot.
    pub struct Slots {
        pub runner: Runner,
        /// Runs not traced because every slot was taken.
        pub skipped: u64,
        /// Where each skipped run is counted for the next summary.
        shedding: Rc<Shedding>,
        /// Records lost, calls not counted and calls counted in part, as last said.
        said: (u64, u64, u64),
    }

    impl Slots {
        pub fn new(runner: Runner, shedding: Rc<Shedding>) -> Slots {
            Slots {
                runner,
                skipped: 0,
                shedding,
                said: (0, 0, 0),
            }
        }

        /// Run `slot`'s summary, ended (or let go: `detached`), with what
        /// the kernel lost of it in its facts; says on stderr when the
        /// kernel lost records or calls since the last one (the program's
        /// counters, over all runs).
        pub fn finish(
            &mut self,
            slot: u8,
            detached: bool,
            on_window: &mut dyn FnMut(Summary),
        ) -> Option<Summary> {
            let finished = self.runner.finish_run(slot, detached, on_window)?;
            Some(self.summarize(finished, detached))
        }

        /// The summaries of the runs that ended (all their processes did),
        /// finished together ([`Runner::finish_ended`]).
        pub fn finish_ended(&mut self, on_window: &mut dyn FnMut(Summary)) -> Vec<Summary> {
            let ended = self.runner.ended_runs();
            self.runner
                .finish_ended(&ended, on_window)
                .into_iter()
                .map(|(_, finished)| self.summarize(finished, false))
                .collect()
        }

        fn summarize(&mut self, finished: Finished, detached: bool) -> Summary {
            let Finished {
                mut session,
                root_end,
                losses,
            } = finished;
            match root_end {
                Some((status, _)) if !detached => {
                    session.root_status = Some(WaitStatus(status));
                    session.live = 0;
                }
                _ => session.detached = true,
            }
            let stats = self.runner.stats();
            let said = (stats.lost, stats.uncounted, stats.partial);
            if said != self.said {
                eprintln!(
                    "edge-agent: the BPF program lost {} task records, left {} calls uncounted so far and {} counted without their transition, errno or peer figures (a full ring or map, or no per-CPU memory ready); the runs traced meanwhile miss them",
                    stats.lost, stats.uncounted, stats.partial
                );
                self.said = said;
            }
            let mut summary = crate::trace::summarize(&session);
            add_loss_facts(&mut summary, losses);
            summary
        }
    }

    impl RunTracer for Slots {
        fn is_traced(&self, pid: Tid) -> bool {
            self.runner.is_traced(pid)
        }
        fn traces_any(&self) -> bool {
            self.runner.traces_any()
        }
        fn start(
            &mut self,
            make: SessionMaker<'_>,
            pid: Tid,
            matched: &Matched,
        ) -> anyhow::Result<()> {
            let Some(born) = matched.born(pid) else {
                anyhow::bail!("process {pid} ended before it was traced");
            };
            let Some(slot) = self.runner.free_slot() else {
                self.skipped += 1;
                self.shedding.skipped_run();
                anyhow::bail!(
                    "all {MAX_SLOTS} eBPF run slots are taken ({} runs skipped so far)",
                    self.skipped
                );
            };
            self.runner.trace_running(slot, make(), pid, Some(born))?;
            self.runner.join_children(slot, pid);
            Ok(())
        }
    }
}

/// Watches with `probe` until a stop is requested: each run's summary (and
/// windows) to the watcher's `on_summary`; those still running at the stop
/// are let go (they run on) and summarized.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub(crate) fn watch(
    mut watcher: Watcher<'_>,
    probe: Probe,
    opts: &WatchOptions,
) -> anyhow::Result<()> {
    use crate::ebpf::runner::Runner;
    let mut slots = slots::Slots::new(Runner::empty(probe), std::rc::Rc::clone(&watcher.shedding));
    watcher.first_scan(&mut slots);
    say_ready(opts);
    let wait = POLL.min(watcher.idle_wait);
    let mut next_tick = Instant::now() + opts.scan_interval;
    let mut result = Ok(());
    while crate::signals::stop_requested().is_none() {
        if Instant::now() >= next_tick {
            watcher.tick(&mut slots);
            next_tick = Instant::now() + opts.scan_interval;
        }
        watcher.wait_for_execs(&mut slots, wait);
        let on_summary = &mut *watcher.on_summary;
        if let Err(e) = slots.runner.poll(0, on_summary) {
            result = Err(e);
            break;
        }
        for summary in slots.finish_ended(on_summary) {
            on_summary(summary);
        }
    }
    for slot in slots.runner.runs() {
        let on_summary = &mut *watcher.on_summary;
        if let Some(summary) = slots.finish(slot, true, on_summary) {
            on_summary(summary);
        }
    }
    if slots.skipped > 0 {
        eprintln!(
            "edge-agent: {} matched runs were not traced (every eBPF run slot was taken)",
            slots.skipped
        );
    }
    watcher.finish_light();
    result
}

/// No eBPF backend on this target: `ebpf::choose` never gives a probe.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
pub(crate) fn watch(
    _watcher: Watcher<'_>,
    probe: Probe,
    _opts: &WatchOptions,
) -> anyhow::Result<()> {
    let _ = (POLL, Instant::now(), say_ready);
    match probe {}
}
