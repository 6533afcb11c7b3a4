//! Peer diagnosis of a fleet (`edge-service peers`, docs/peers.md): which
//! device, among devices doing the same work, is the culprit, judged from
//! their window summaries against each other rather than good runs against
//! bad ones.
//!
//! The flow: window summaries (from the store or files, read as a
//! [`request`] says) are reduced
//! as they are read into a time-aligned [`fleet::Fleet`] (sums per metric
//! and histograms per group, [`metrics`]); devices running the same program
//! form a peer set; [`median`] (the PVFS method) and [`histogram`] (the
//! Hadoop method) judge each set; [`link`] (slow network links, from both
//! ends' socket peer tables), [`errno`] and [`hang`] (the PVFS semantic
//! methods, over what [`trail`] keeps of each device) judge the whole
//! fleet, servers against clients; [`explain`] sets apart the clients'
//! symptoms of a flagged server; [`report`] prints the findings as text,
//! JSON or HTML.

pub mod errno;
pub mod explain;
pub mod fleet;
pub mod hang;
pub mod histogram;
pub mod kofn;
pub mod link;
pub mod median;
pub mod metrics;
pub mod phase;
pub mod report;
pub mod request;
pub mod semantic;
pub mod trail;
pub mod wait;

use std::collections::BTreeMap;

use agent_core::Source;
use anyhow::bail;

use errno::ErrnoParams;
use explain::Explained;
use fleet::{Device, Fleet, Tally, LINK_SLICE_WINDOWS};
use hang::HangParams;
use histogram::HistogramParams;
use link::LinkParams;
use median::{MedianParams, MIN_DEVICES};
use metrics::Cause;
use phase::Phase;
use semantic::SemanticParams;
use wait::WaitParams;

/// Which method found a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// The PVFS method ([`median`]).
    Median,
    /// The Hadoop method ([`histogram`]).
    Histogram,
    /// Slow network links ([`link`]).
    Link,
    /// Propagated errnos ([`errno`]).
    Errno,
    /// Crashes and hangs ([`hang`]).
    Hang,
    /// The Hadoop semantic method: out-of-range invocations scored per
    /// pair of nodes ([`semantic`]).
    Semantic,
    /// The server its clients wait on ([`wait`]).
    Wait,
}

impl Method {
    /// Its name in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Method::Median => "median",
            Method::Histogram => "histogram",
            Method::Link => "link",
            Method::Errno => "errno",
            Method::Hang => "hang",
            Method::Semantic => "semantic",
            Method::Wait => "wait",
        }
    }
}

/// A device flagged by a method.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Index into [`PeerDiagnosis::devices`].
    pub device: usize,
    /// The method.
    pub method: Method,
    /// What it blames.
    pub cause: Cause,
    /// The metric (median) or rule's syscall group (histogram).
    pub metric: String,
    /// Start of the first flagged window (median) or slice (histogram).
    pub first_window_unix_ns: u64,
    /// Start of the last one.
    pub last_window_unix_ns: u64,
    /// How far over: the mean ratio of deviation to threshold (median), of
    /// the device's total time to the admissible maximum (histogram).
    pub score: f64,
    /// The flagged windows' indices (window start = index × window length;
    /// histogram: the first window of each flagged slice).
    pub windows: Vec<u64>,
    /// One line a person can read.
    pub evidence: String,
}

/// Devices compared with each other: those tracing the same program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSet {
    /// The program (the `program` fact).
    pub program: String,
    /// How its devices' windows were observed: devices observed in-process
    /// (libc calls only) are not compared with devices the kernel observed,
    /// whose counts and times include calls theirs lack by construction.
    pub source: Source,
    /// Indices into the fleet's devices.
    pub devices: Vec<usize>,
}

/// One metric's diagnosis time series in one peer set (for plots).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The peer set's name ([`PeerSet::name`]: its program, marked
    /// ` in-process` when observed so).
    pub program: String,
    /// The metric.
    pub metric: String,
    /// Indices into the fleet's devices.
    pub devices: Vec<usize>,
    /// Window indices (judged windows: at least 3 devices with calls).
    pub windows: Vec<u64>,
    /// Per device, per window: its mean service time, ns (`None`: no calls).
    pub values: Vec<Vec<Option<f64>>>,
    /// Per window: the median over the devices, ns.
    pub median: Vec<f64>,
    /// Per device: its threshold above the median, ns (`None`: no training).
    pub thresholds: Vec<Option<f64>>,
}

/// How to diagnose.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Run the median method.
    pub median: bool,
    /// Run the histogram method.
    pub histogram: bool,
    /// Run the link method.
    pub link: bool,
    /// Run the errno method.
    pub errno: bool,
    /// Run the crash/hang method.
    pub hang: bool,
    /// Run the Hadoop semantic method.
    pub semantic: bool,
    /// Run the wait method.
    pub wait: bool,
    /// The median method's settings.
    pub median_params: MedianParams,
    /// The histogram method's settings.
    pub histogram_params: HistogramParams,
    /// The link method's settings.
    pub link_params: LinkParams,
    /// The errno method's settings.
    pub errno_params: ErrnoParams,
    /// The crash/hang method's settings.
    pub hang_params: HangParams,
    /// The semantic method's settings.
    pub semantic_params: SemanticParams,
    /// The wait method's settings.
    pub wait_params: WaitParams,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            median: true,
            histogram: true,
            link: true,
            errno: true,
            hang: true,
            semantic: true,
            wait: true,
            median_params: MedianParams::default(),
            histogram_params: HistogramParams::default(),
            link_params: LinkParams::default(),
            errno_params: ErrnoParams::default(),
            hang_params: HangParams::default(),
            semantic_params: SemanticParams::default(),
            wait_params: WaitParams::default(),
        }
    }
}

impl Options {
    /// The same options with Khadke et al.'s methods (histogram,
    /// semantic) run as the paper writes them, or with our departures.
    pub fn strict_paper(mut self, on: bool) -> Options {
        self.histogram_params.strict_paper = on;
        self.semantic_params.strict_paper = on;
        self
    }
}

/// The diagnosis of a fleet.
#[derive(Debug, Clone)]
pub struct PeerDiagnosis {
    /// The peers read (a device and its program).
    pub devices: Vec<Device>,
    /// The peer sets judged.
    pub sets: Vec<PeerSet>,
    /// The flagged devices; empty: no culprit.
    pub findings: Vec<Finding>,
    /// Clients' findings explained by a flagged server ([`explain`]).
    pub explained: Vec<Explained>,
    /// The median method's time series.
    pub series: Vec<Series>,
    /// What could not be judged, and why.
    pub notes: Vec<String>,
    /// What was read and left out.
    pub tally: Tally,
    /// The window length, ns.
    pub window_ns: u64,
    /// Windows per histogram slice.
    pub slice_windows: u64,
    /// Windows a wait finding's share was counted over (its window and
    /// the ones before it).
    pub wait_span: u64,
}

impl PeerSet {
    /// The set's name in notes and reports: its program, followed by
    /// [`Self::source_suffix`] (`wget`, `wget in-process`).
    pub fn name(&self) -> String {
        format!("{}{}", self.program, self.source_suffix())
    }

    /// What follows the program's name when the devices were observed
    /// in-process (` in-process`); nothing for the kernel's view.
    pub fn source_suffix(&self) -> &'static str {
        match self.source {
            Source::Kernel => "",
            Source::InProcess => " in-process",
        }
    }
}

/// The devices of the fleet grouped by program and by how they were
/// observed (the kernel's view first), each group in order of first
/// appearance.
pub fn peer_sets(fleet: &Fleet) -> Vec<PeerSet> {
    let mut by_program: BTreeMap<(String, Source), Vec<usize>> = BTreeMap::new();
    for (i, d) in fleet.devices.iter().enumerate() {
        by_program
            .entry((d.program().to_string(), d.source))
            .or_default()
            .push(i);
    }
    by_program
        .into_iter()
        .map(|((program, source), devices)| PeerSet {
            program,
            source,
            devices,
        })
        .collect()
}

/// Judges the fleet. Errors: no device, no training or diagnosis window,
/// no program with at least [`MIN_DEVICES`] devices when only the
/// median and histogram methods run (link, errno and hang judge the whole
/// fleet, not peers of one program).
pub fn analyse(fleet: &Fleet, options: &Options) -> anyhow::Result<PeerDiagnosis> {
    if fleet.devices.is_empty() {
        bail!(
            "no window summaries with a device id: {}",
            tally_text(&fleet.tally)
        );
    }
    let phase_windows = |p: Phase| {
        fleet
            .devices
            .iter()
            .map(|d| d.windows[p as usize])
            .sum::<usize>()
    };
    if phase_windows(Phase::Training) == 0 {
        bail!("no training windows in the training range (--train-since/--train-until)");
    }
    if phase_windows(Phase::Diagnosis) == 0 {
        bail!("no windows to diagnose in the diagnosis range (--since/--until)");
    }
    let all_sets = peer_sets(fleet);
    let (sets, small): (Vec<PeerSet>, Vec<PeerSet>) = all_sets
        .into_iter()
        .partition(|s| s.devices.len() >= MIN_DEVICES);
    let fleet_wide =
        options.errno || options.hang || options.link || options.semantic || options.wait;
    if sets.is_empty() && !fleet_wide {
        let what: Vec<String> = small
            .iter()
            .map(|s| {
                format!(
                    "{} device(s) tracing {:?}{}",
                    s.devices.len(),
                    s.program,
                    s.source_suffix()
                )
            })
            .collect();
        bail!(
            "fewer than {MIN_DEVICES} devices to compare ({}): a peer method needs at least \
             {MIN_DEVICES} devices running the same program (the median of two says nothing)",
            what.join(", ")
        );
    }
    let statistical = options.median || options.histogram;
    let mut notes: Vec<String> = small
        .iter()
        .filter(|_| statistical)
        .map(|s| {
            format!(
                "{} device(s) tracing {:?}{}: fewer than {MIN_DEVICES} devices, not judged by median and histogram",
                s.devices.len(),
                s.program,
                s.source_suffix()
            )
        })
        .collect();
    let mut findings = Vec::new();
    let mut series = Vec::new();
    for set in sets.iter().filter(|_| statistical) {
        if options.median {
            let r = median::median(fleet, set, &options.median_params);
            findings.extend(r.findings);
            series.extend(r.series);
            notes.extend(r.notes);
        }
        if options.histogram {
            let r = histogram::histogram(fleet, set, &options.histogram_params);
            findings.extend(r.findings);
            notes.extend(r.notes);
        }
    }
    if options.link {
        let (found, link_notes) = link::link(fleet, &options.link_params);
        findings.extend(found);
        notes.extend(link_notes);
    }
    if options.semantic {
        let (found, semantic_notes) = semantic::semantic(fleet, &options.semantic_params);
        findings.extend(found);
        notes.extend(semantic_notes);
    }
    if options.errno {
        let (found, errno_notes) = errno::errno(fleet, &options.errno_params);
        findings.extend(found);
        notes.extend(errno_notes);
    }
    if options.hang {
        let (found, hang_notes) = hang::hang(fleet, &options.hang_params);
        findings.extend(found);
        notes.extend(hang_notes);
    }
    if options.wait {
        let (found, wait_notes) = wait::wait(fleet, &options.wait_params);
        findings.extend(found);
        notes.extend(wait_notes);
    }
    let pad_ns = fleet.window_ns.saturating_mul(LINK_SLICE_WINDOWS);
    wait::drop_explained_by_disk(&mut findings, fleet.window_ns, pad_ns);
    let (mut findings, explained) = explain::explain(findings, &fleet.devices, pad_ns);
    findings.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.device.cmp(&b.device))
            .then(a.metric.cmp(&b.metric))
    });
    Ok(PeerDiagnosis {
        devices: fleet.devices.clone(),
        sets,
        findings,
        explained,
        series,
        notes,
        tally: fleet.tally.clone(),
        window_ns: fleet.window_ns,
        slice_windows: fleet.slice_windows,
        wait_span: options.wait_params.rule_for(fleet).span,
    })
}

/// What was read and left out, in words.
pub fn tally_text(t: &Tally) -> String {
    let mut parts = vec![format!("{} window summaries taken", t.windows)];
    if t.no_device > 0 {
        parts.push(format!(
            "{} skipped without a device id (all zero: cannot be a peer)",
            t.no_device
        ));
    }
    if t.whole_runs > 0 {
        parts.push(format!(
            "{} whole runs skipped (the peer methods compare windows)",
            t.whole_runs
        ));
    }
    if t.other_length > 0 {
        parts.push(format!(
            "{} windows of another length skipped",
            t.other_length
        ));
    }
    if t.repeats > 0 {
        parts.push(format!("{} repeated summaries skipped", t.repeats));
    }
    if t.outside > 0 {
        parts.push(format!(
            "{} summaries outside both time ranges skipped",
            t.outside
        ));
    }
    parts.join("; ")
}
