//! What `watch` sheds under a storm, counted and never silent: matched
//! runs not traced because the backend had no room (every eBPF run slot
//! taken), and execs the connector's full queue dropped. Each count rides
//! on the next summary the watch hands out, as a fact
//! ([`SKIPPED_RUNS_FACT`], [`SHED_EXECS_FACT`]) holding how many since the
//! previous summary that carried it, so the counts of a watch's summaries
//! add up to its total.

use std::cell::Cell;
use std::rc::Rc;

use agent_core::Summary;

/// Matched runs not traced (no room in the backend) since the last
/// summary that said so.
pub const SKIPPED_RUNS_FACT: &str = "watch.skipped_runs";
/// Execs the connector reported that a full queue dropped (a /proc scan
/// followed) since the last summary that said so.
pub const SHED_EXECS_FACT: &str = "watch.shed_execs";

/// The counts not yet carried by a summary; shared (the watcher and the
/// backend's run tracer count, the watch's summary hand-out takes).
#[derive(Debug, Default)]
pub(crate) struct Shedding {
    skipped_runs: Cell<u64>,
    shed_execs: Cell<u64>,
}

impl Shedding {
    pub(crate) fn new() -> Rc<Shedding> {
        Rc::new(Shedding::default())
    }

    /// A matched run was not traced (eBPF's slots were all taken: builds
    /// without eBPF, such as Android's, never skip one).
    #[cfg_attr(
        not(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )),
        allow(dead_code)
    )]
    pub(crate) fn skipped_run(&self) {
        self.skipped_runs.set(self.skipped_runs.get() + 1);
    }

    /// `n` execs were shed.
    pub(crate) fn shed_execs(&self, n: u64) {
        self.shed_execs.set(self.shed_execs.get() + n);
    }

    /// Adds the counts pending to `summary` as facts (those that do not
    /// fit stay pending for the next).
    pub(crate) fn stamp(&self, summary: &mut Summary) {
        for (key, count) in [
            (SKIPPED_RUNS_FACT, &self.skipped_runs),
            (SHED_EXECS_FACT, &self.shed_execs),
        ] {
            let n = count.get();
            if n > 0 && summary.facts.add(key, &n.to_string()).is_ok() {
                count.set(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_ride_on_the_next_summary_once() {
        let shed = Shedding::new();
        let mut quiet = Summary::empty();
        shed.stamp(&mut quiet);
        assert_eq!(quiet.facts.get(SKIPPED_RUNS_FACT), None);
        shed.skipped_run();
        shed.skipped_run();
        shed.shed_execs(5);
        let mut first = Summary::empty();
        shed.stamp(&mut first);
        assert_eq!(first.facts.get(SKIPPED_RUNS_FACT), Some("2"));
        assert_eq!(first.facts.get(SHED_EXECS_FACT), Some("5"));
        let mut second = Summary::empty();
        shed.stamp(&mut second);
        assert_eq!(second.facts.get(SKIPPED_RUNS_FACT), None);
    }
}
