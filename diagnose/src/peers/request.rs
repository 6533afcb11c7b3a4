//! One peer diagnosis asked for, as `edge-service peers` asks it: where
//! the windows come from (store or files), the group and program, the
//! training and diagnosis ranges, the methods and their settings; checked
//! ([`PeersRequest::check`]), read into a fleet and judged
//! ([`PeersRequest::run`]). No command line here: the binary turns its
//! arguments into a request and the [`PeerDiagnosis`] into output.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};

use super::errno::ErrnoParams;
use super::fleet::{Fleet, Range};
use super::hang::HangParams;
use super::median::MedianParams;
use super::{analyse, tally_text, Options, PeerDiagnosis};
use crate::input::{self, RunFilter, SummarySource};
use crate::time::{RangeTimes, Time};

/// The longest errno match window or hang time a request may give.
pub const MAX_SECONDS: Duration = Duration::from_secs(365 * 86_400);

/// Which peer methods to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Methods {
    /// The PVFS method: mean service time against the median of the peers.
    Median,
    /// The Hadoop method: latency histograms against training ranges.
    Histogram,
    /// Slow network links.
    Link,
    /// Propagated errors.
    Errno,
    /// Crashes and hangs.
    Hang,
    /// The Hadoop semantic method: out-of-range invocations per pair of
    /// nodes.
    Semantic,
    /// The server its clients wait on.
    Wait,
    /// All six.
    #[default]
    All,
}

impl Methods {
    /// Every choice by the name users type, `all` last.
    pub const NAMES: [(&'static str, Methods); 8] = [
        ("median", Methods::Median),
        ("histogram", Methods::Histogram),
        ("link", Methods::Link),
        ("errno", Methods::Errno),
        ("hang", Methods::Hang),
        ("semantic", Methods::Semantic),
        ("wait", Methods::Wait),
        ("all", Methods::All),
    ];

    /// Default options with only these methods on.
    pub fn options(self) -> Options {
        let on = |m: Methods| self == m || self == Methods::All;
        Options {
            median: on(Methods::Median),
            histogram: on(Methods::Histogram),
            link: on(Methods::Link),
            errno: on(Methods::Errno),
            hang: on(Methods::Hang),
            semantic: on(Methods::Semantic),
            wait: on(Methods::Wait),
            ..Options::default()
        }
    }
}

impl std::str::FromStr for Methods {
    type Err = anyhow::Error;

    /// A name of [`Methods::NAMES`]; empty means `all`.
    fn from_str(name: &str) -> anyhow::Result<Methods> {
        let name = name.trim();
        if name.is_empty() {
            return Ok(Methods::All);
        }
        match Methods::NAMES.iter().find(|(n, _)| *n == name) {
            Some((_, m)) => Ok(*m),
            None => {
                let names: Vec<&str> = Methods::NAMES.iter().map(|(n, _)| *n).collect();
                bail!("unknown method `{name}` (one of {})", names.join(", "))
            }
        }
    }
}

/// A peer diagnosis to run.
#[derive(Debug, Clone, PartialEq)]
pub struct PeersRequest {
    /// Summary files or folders of them.
    pub inputs: Vec<PathBuf>,
    /// The store to read too; `None`: no store.
    pub db: Option<PathBuf>,
    /// The devices' group.
    pub group: String,
    /// Only windows of this program (the `program` fact).
    pub program: Option<String>,
    /// The training range (fault-free) and the range to diagnose.
    pub times: RangeTimes,
    /// More fault-free ranges (since, until) to train on too
    /// (`--also-train`): every control run, not only the last.
    pub more_training: Vec<(Time, Time)>,
    /// Which method(s) to run.
    pub methods: Methods,
    /// median: a device is flagged when over its threshold in at least K
    /// of N consecutive judged windows (1 ≤ K ≤ N).
    pub k: usize,
    /// median: the N of K of N.
    pub n: usize,
    /// median: the quantile of the training's relative deviations a window
    /// must also pass ([`MedianParams::spread`]; 0 to 1, 0 leaves it out).
    pub spread: f64,
    /// median: a server's stretch whose mean deviation passes the
    /// training's highest needs only this many windows over
    /// ([`MedianParams::strong_k`]; `None`: K, as always).
    pub strong_k: Option<usize>,
    /// errno: a client's errno matches a server's within this either side
    /// (at most [`MAX_SECONDS`]).
    pub errno_window: Duration,
    /// hang: a client call in flight this long is a hang (more than 0, at
    /// most [`MAX_SECONDS`]).
    pub hang_after: Duration,
    /// histogram: windows per slice (at least 1).
    pub slice: u64,
    /// histogram and semantic: Khadke §4.2/§4.3 as written, without this
    /// project's departures (docs/peers.md).
    pub strict_paper: bool,
    /// Leave out files that are not summaries (each named in a note)
    /// instead of stopping at the first.
    pub skip_bad: bool,
}

impl PeersRequest {
    /// A request with the methods' default settings.
    pub fn new(group: &str, times: RangeTimes) -> PeersRequest {
        let median = MedianParams::default();
        PeersRequest {
            inputs: Vec::new(),
            db: None,
            group: group.to_string(),
            program: None,
            times,
            more_training: Vec::new(),
            methods: Methods::All,
            k: median.k,
            n: median.n,
            spread: median.spread,
            strong_k: median.strong_k,
            errno_window: Duration::from_nanos(ErrnoParams::default().window_ns),
            hang_after: Duration::from_nanos(HangParams::default().hang_after_ns),
            slice: 10,
            strict_paper: false,
            skip_bad: false,
        }
    }

    /// Refuses a request that cannot be run (before anything is read).
    pub fn check(&self) -> Result<(), PeersRequestError> {
        if self.k == 0 || self.n == 0 || self.k > self.n {
            return Err(PeersRequestError::KOfN);
        }
        if self.strong_k.is_some_and(|s| s == 0 || s > self.k) {
            return Err(PeersRequestError::StrongK);
        }
        if !(0.0..=1.0).contains(&self.spread) {
            return Err(PeersRequestError::Spread);
        }
        if self.slice == 0 {
            return Err(PeersRequestError::NoSlice);
        }
        if self.errno_window > MAX_SECONDS {
            return Err(PeersRequestError::TooLong("--errno-window"));
        }
        if self.hang_after > MAX_SECONDS {
            return Err(PeersRequestError::TooLong("--hang-after"));
        }
        if self.hang_after.is_zero() {
            return Err(PeersRequestError::NoHangTime);
        }
        if self.db.is_none() && self.inputs.is_empty() {
            return Err(PeersRequestError::NothingToRead);
        }
        Ok(())
    }

    /// Reads the windows of both ranges (at `now`) from `store` (when
    /// [`Self::db`] names one) and the files, and judges the fleet. `note`
    /// is told of files left out as they are.
    pub fn run(
        &self,
        store: &dyn SummarySource,
        note: &mut dyn FnMut(String),
    ) -> anyhow::Result<PeerDiagnosis> {
        self.check()?;
        let now = crate::time::now_unix_ns();
        let (training, diagnosis) = self.times.ranges(now)?;
        let mut more = Vec::new();
        for (since, until) in &self.more_training {
            let r = Range {
                since: since.at(now),
                until: until.at(now),
            };
            if r.since >= r.until {
                bail!("an --also-train range is empty: it must start before it ends");
            }
            if r.since < diagnosis.until && diagnosis.since < r.until {
                bail!(
                    "an --also-train range overlaps the diagnosis range: training must be \
                     fault-free stretches of time apart from it"
                );
            }
            more.push(r);
        }
        let fleet = self.load(store, training, &more, diagnosis, note)?;
        let mut options = self.methods.options().strict_paper(self.strict_paper);
        options.median_params = MedianParams {
            k: self.k,
            n: self.n,
            spread: self.spread,
            strong_k: self.strong_k,
            ..MedianParams::default()
        };
        options.errno_params = ErrnoParams {
            window_ns: nanos(self.errno_window),
        };
        options.hang_params = HangParams {
            hang_after_ns: nanos(self.hang_after),
            ..HangParams::default()
        };
        analyse(&fleet, &options)
    }

    /// Reads the windows of both ranges into a fleet.
    fn load(
        &self,
        store: &dyn SummarySource,
        training: Range,
        more_training: &[Range],
        diagnosis: Range,
        note: &mut dyn FnMut(String),
    ) -> anyhow::Result<Fleet> {
        let mut fleet = Fleet::new(training, diagnosis, self.slice);
        for r in more_training {
            fleet.also_train(*r);
        }
        let filter = |r: Range| RunFilter {
            group: Some(self.group.clone()),
            program: self.program.clone(),
            since_unix_ns: Some(r.since),
            until_unix_ns: Some(r.until),
        };
        if let Some(db) = &self.db {
            for r in std::iter::once(training)
                .chain(more_training.iter().copied())
                .chain([diagnosis])
            {
                store
                    .for_each(db, &filter(r), &mut |s| fleet.add(s))
                    .with_context(|| {
                        format!("cannot read windows from store {}", store.name(db))
                    })?;
            }
        }
        let no_times = RunFilter {
            group: Some(self.group.clone()),
            program: self.program.clone(),
            ..RunFilter::default()
        };
        let mut bad = 0usize;
        for path in &self.inputs {
            for file in input::summary_files(path)? {
                match input::read_summary(&file) {
                    Ok(s) => {
                        if input::passes(&s, &no_times) {
                            fleet.add(&s);
                        }
                    }
                    Err(b) if self.skip_bad => {
                        note(format!("skipped {b}"));
                        bad += 1;
                    }
                    Err(b) => {
                        bail!("{b}; use --skip-bad to leave out files that are not summaries")
                    }
                }
            }
        }
        if bad > 0 {
            note(format!("skipped {bad} file(s) that are not summaries"));
        }
        if fleet.devices.is_empty() {
            let mut from: Vec<String> = self.db.iter().map(|d| d.display().to_string()).collect();
            from.extend(self.inputs.iter().map(|p| p.display().to_string()));
            bail!(
                "no window summaries of group {:?}{} with a device id in the ranges, in {} ({})",
                self.group,
                self.program
                    .as_ref()
                    .map(|p| format!(" and program {p:?}"))
                    .unwrap_or_default(),
                from.join(", "),
                tally_text(&fleet.tally)
            );
        }
        Ok(fleet)
    }
}

/// `d` in ns (checked requests are at most [`MAX_SECONDS`]).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A number of seconds as a duration; an error naming `flag` when it is
/// not a finite number from 0 to [`MAX_SECONDS`].
pub fn seconds(secs: f64, flag: &'static str) -> Result<Duration, PeersRequestError> {
    let max = MAX_SECONDS.as_secs_f64();
    if !secs.is_finite() || !(0.0..=max).contains(&secs) {
        return Err(PeersRequestError::NotSeconds { flag, secs });
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A peers request that cannot be run as it is. The words name the
/// command line's options, the one way people write requests.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PeersRequestError {
    /// K of N out of order or zero.
    #[error("--k and --n must be at least 1, with --k at most --n")]
    KOfN,
    /// A strong K of 0 or over K.
    #[error("--strong-k must be at least 1 and at most --k")]
    StrongK,
    /// A spread quantile outside 0..=1 (or not a number).
    #[error("--spread must be a quantile from 0 to 1")]
    Spread,
    /// A slice of no windows.
    #[error("--slice must be at least 1 window")]
    NoSlice,
    /// A hang after no time.
    #[error("--hang-after must be more than 0 seconds")]
    NoHangTime,
    /// A duration over [`MAX_SECONDS`].
    #[error("{0} must be at most {max} seconds", max = MAX_SECONDS.as_secs_f64())]
    TooLong(&'static str),
    /// Not a number of seconds from 0 to [`MAX_SECONDS`].
    #[error("{flag} must be a number of seconds from 0 to {max} (got {secs})", max = MAX_SECONDS.as_secs_f64())]
    NotSeconds {
        /// The option.
        flag: &'static str,
        /// Its value.
        secs: f64,
    },
    /// Neither files nor a store.
    #[error("nothing to read: name summary files or folders, or a store (--db)")]
    NothingToRead,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Time;

    fn request() -> PeersRequest {
        let times = RangeTimes {
            train_since: Time::Unix(0),
            train_until: Time::Unix(10),
            since: Time::Unix(10),
            until: Some(Time::Unix(20)),
        };
        PeersRequest {
            db: Some("x.db".into()),
            ..PeersRequest::new("g", times)
        }
    }

    #[test]
    fn a_request_that_cannot_run_is_refused_by_name() {
        assert_eq!(request().check(), Ok(()));
        for (k, n) in [(0, 3), (3, 0), (4, 3)] {
            let r = PeersRequest { k, n, ..request() };
            assert_eq!(r.check(), Err(PeersRequestError::KOfN), "{k} of {n}");
        }
        for strong_k in [0, 5] {
            let r = PeersRequest {
                strong_k: Some(strong_k),
                ..request()
            };
            assert_eq!(r.check(), Err(PeersRequestError::StrongK), "{strong_k}");
        }
        for spread in [-0.1, 1.5, f64::NAN] {
            let r = PeersRequest {
                spread,
                ..request()
            };
            assert_eq!(r.check(), Err(PeersRequestError::Spread), "{spread}");
        }
        let r = PeersRequest {
            slice: 0,
            ..request()
        };
        assert_eq!(r.check(), Err(PeersRequestError::NoSlice));
        let r = PeersRequest {
            hang_after: Duration::ZERO,
            ..request()
        };
        assert_eq!(r.check(), Err(PeersRequestError::NoHangTime));
        let r = PeersRequest {
            errno_window: MAX_SECONDS + Duration::from_secs(1),
            ..request()
        };
        assert_eq!(r.check(), Err(PeersRequestError::TooLong("--errno-window")));
        let r = PeersRequest {
            db: None,
            ..request()
        };
        assert_eq!(r.check(), Err(PeersRequestError::NothingToRead));
    }

    #[test]
    fn seconds_are_finite_and_at_most_a_year() {
        assert_eq!(seconds(1.5, "--x"), Ok(Duration::from_millis(1500)));
        for bad in [f64::NAN, f64::INFINITY, -1.0, 365.0 * 86_400.0 + 1.0] {
            let err = seconds(bad, "--x").unwrap_err();
            assert!(err.to_string().starts_with("--x must be"), "{err}");
        }
    }
}
