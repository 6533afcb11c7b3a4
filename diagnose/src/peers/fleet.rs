//! The fleet's windows, aligned by time, per peer (a device and the program
//! it traces): each window summary is reduced,
//! as it is read, to what the peer methods need (a few sums per window and
//! a histogram per group per slice of windows), so 360 000 summaries never
//! sit in memory at once.
//!
//! Windows are aligned across devices by their start rounded to the window
//! length: window `b` of every device covers `[b·len, (b+1)·len)` of Unix
//! time. A device with several traced streams in one window (two processes
//! of the same program) has their calls summed: the device's service time
//! is over all its calls.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use agent_core::{DeviceId, Facts, PeerIp, RunId, Source, Summary};

use super::metrics::{Calls, Classifier, Group, Service, RAW_METRICS};
use super::phase::Phase;
use super::trail::Trail;

/// A half-open time range `[since, until)`, ns since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// First instant in it.
    pub since: u64,
    /// First instant after it.
    pub until: u64,
}

impl Range {
    /// Whether `t` is in it.
    pub fn contains(&self, t: u64) -> bool {
        self.since <= t && t < self.until
    }
}

/// Windows per slice of the link method's traffic tables
/// ([`super::link`]): long enough that a client has moved data with most
/// servers in it (a client of a distributed file system works on one
/// server's file at a time), short enough to place a fault.
pub const LINK_SLICE_WINDOWS: u64 = 5;

/// Calls and bytes on the sockets to one peer address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Calls on its sockets.
    pub calls: u64,
    /// Bytes moved by the successful read/write-family calls among them.
    pub bytes: u64,
}

/// A socket peer's address as an `IpAddr`.
pub fn ip_of(ip: &PeerIp) -> IpAddr {
    match *ip {
        PeerIp::V4(b) => IpAddr::from(b),
        PeerIp::V6(b) => IpAddr::from(b),
    }
}

/// The `program` fact's type.
type ProgramName = heapless::String<40>;

/// One peer: a device and the program it traces (a device tracing two
/// programs, say a file system client and the workload using it, is two
/// peers, each compared with the devices tracing the same program), as
/// observed one way (the coverage's source: a device whose windows of one
/// program came from the kernel and, later, from in-process wrappers is
/// two peers too, each compared only with peers observed the same way).
#[derive(Debug, Clone)]
pub struct Device {
    /// Its id (`Summary::origin.device`).
    pub id: DeviceId,
    /// How its windows were observed.
    pub source: Source,
    /// The facts of its latest window (of this program).
    pub facts: Facts,
    /// Start of that window (which facts are kept).
    latest_start: u64,
    /// Whether any of its windows has `accept`/`accept4` calls.
    pub accepted: bool,
    /// Its windows read, per phase (training, diagnosis).
    pub windows: [usize; 2],
}

impl Device {
    /// The program its windows trace (the `program` fact; the same in
    /// every window of this peer).
    pub fn program(&self) -> &str {
        self.facts.program.as_str()
    }

    /// Whether its file calls cross the network: the free fact `role` says
    /// `client` (a client of a networked file system, whose reads and
    /// writes of files go to its servers), so a slow file call blames the
    /// network, not a disk. Inferred clients (no fact) keep their files
    /// local.
    pub fn files_over_network(&self) -> bool {
        self.facts
            .get("role")
            .is_some_and(|r| r.eq_ignore_ascii_case("client"))
    }

    /// Its network address: the free fact `addr` (how other devices' socket
    /// peers name it), if set and an IP address.
    pub fn addr(&self) -> Option<IpAddr> {
        self.facts
            .get("addr")
            .and_then(|a| a.trim().parse::<IpAddr>().ok())
    }

    /// Whether it serves: the free fact `role` says `server`, or (without
    /// that fact) it accepted connections in a window read.
    pub fn is_server(&self) -> bool {
        match self.facts.get("role") {
            Some(r) => r.eq_ignore_ascii_case("server"),
            None => self.accepted,
        }
    }
}

/// A slice of windows of one device: how many windows it has, and per
/// group their calls.
#[derive(Debug, Clone)]
pub struct Slice {
    /// Windows read in it (distinct window indices).
    pub windows: u64,
    /// Per group (index: [`Group::index`]).
    pub groups: [Calls; Group::COUNT],
}

/// What was read and what was left out, for the note.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Window summaries taken.
    pub windows: usize,
    /// Summaries without a device id (cannot be a peer).
    pub no_device: usize,
    /// Whole runs (not windows): the peer methods compare windows.
    pub whole_runs: usize,
    /// Windows of another length than the first window read.
    pub other_length: usize,
    /// Summaries read twice (same id): the repeat left out.
    pub repeats: usize,
    /// Summaries outside both time ranges (files only: the store is asked
    /// for the ranges).
    pub outside: usize,
}

/// The fleet's windows, reduced.
#[derive(Debug, Clone)]
pub struct Fleet {
    /// The window length, ns (of the first window read; 0 before).
    pub window_ns: u64,
    /// Windows per histogram slice.
    pub slice_windows: u64,
    /// The devices, in order of first appearance.
    pub devices: Vec<Device>,
    /// Per device: (phase, window index) → file reads, file writes,
    /// socket reads.
    pub service: Vec<BTreeMap<(Phase, u64), [Service; RAW_METRICS]>>,
    /// Per device: (phase, slice index) → the groups' calls.
    pub slices: Vec<BTreeMap<(Phase, u64), Box<Slice>>>,
    /// Per device: what the semantic methods keep (failures, calls in
    /// flight, socket peers).
    pub trails: Vec<Trail>,
    /// Per device: (phase, link slice) → per socket peer address, the
    /// traffic on its sockets (slices of [`LINK_SLICE_WINDOWS`] windows).
    pub links: Vec<BTreeMap<(Phase, u64), BTreeMap<IpAddr, Traffic>>>,
    /// What was left out.
    pub tally: Tally,
    training: Range,
    diagnosis: Range,
    /// (device id, program, source) → index into `devices`.
    index_of: HashMap<(DeviceId, ProgramName, Source), usize>,
    seen: HashSet<RunId>,
    classifier: Classifier,
}

impl Fleet {
    /// An empty fleet for these ranges, with histogram slices of
    /// `slice_windows` windows (at least 1).
    pub fn new(training: Range, diagnosis: Range, slice_windows: u64) -> Fleet {
        Fleet {
            window_ns: 0,
            slice_windows: slice_windows.max(1),
            devices: Vec::new(),
            service: Vec::new(),
            slices: Vec::new(),
            trails: Vec::new(),
            links: Vec::new(),
            tally: Tally::default(),
            training,
            diagnosis,
            index_of: HashMap::new(),
            seen: HashSet::new(),
            classifier: Classifier::new(),
        }
    }

    /// Moves the ranges: windows added from now on take their phase from
    /// these; those already added keep theirs. The live analysis keeps a
    /// fleet of its baseline (all training) and adds the newest windows to
    /// a copy as the range to diagnose, rather than reading the baseline
    /// again at every tick.
    pub fn set_ranges(&mut self, training: Range, diagnosis: Range) {
        self.training = training;
        self.diagnosis = diagnosis;
    }

    /// The phase a window starting at `start` belongs to.
    pub fn phase_of(&self, start: u64) -> Option<Phase> {
        if self.training.contains(start) {
            Some(Phase::Training)
        } else if self.diagnosis.contains(start) {
            Some(Phase::Diagnosis)
        } else {
            None
        }
    }

    /// The Unix time (ns) window `index` starts at.
    pub fn window_start(&self, index: u64) -> u64 {
        index.saturating_mul(self.window_ns)
    }

    /// Takes one summary (or counts why not).
    pub fn add(&mut self, s: &Summary) {
        if s.origin.device == [0; 16] {
            self.tally.no_device += 1;
            return;
        }
        if s.run.window == 0 || s.origin.window_ns == 0 {
            self.tally.whole_runs += 1;
            return;
        }
        let Some(phase) = self.phase_of(s.run.start_unix_ns) else {
            self.tally.outside += 1;
            return;
        };
        if self.window_ns == 0 {
            self.window_ns = s.origin.window_ns;
        } else if s.origin.window_ns != self.window_ns {
            self.tally.other_length += 1;
            return;
        }
        if !self.seen.insert(s.id) {
            self.tally.repeats += 1;
            return;
        }
        self.tally.windows += 1;
        let key = (s.origin.device, s.facts.program.clone(), s.coverage.source);
        let d = match self.index_of.get(&key) {
            Some(d) => *d,
            None => {
                self.devices.push(Device {
                    id: s.origin.device,
                    source: s.coverage.source,
                    facts: s.facts.clone(),
                    latest_start: s.run.start_unix_ns,
                    accepted: false,
                    windows: [0; 2],
                });
                self.service.push(BTreeMap::new());
                self.slices.push(BTreeMap::new());
                self.trails.push(Trail::default());
                self.links.push(BTreeMap::new());
                self.index_of.insert(key, self.devices.len() - 1);
                self.devices.len() - 1
            }
        };
        let calls = self.classifier.window_calls(s);
        let device = &mut self.devices[d];
        if s.run.start_unix_ns >= device.latest_start {
            device.latest_start = s.run.start_unix_ns;
            device.facts = s.facts.clone();
        }
        device.accepted |= calls.accepted;
        device.windows[phase as usize] += 1;
        // Rounded to the nearest window boundary: agents start their windows
        // when tracing starts, not on the second.
        let index = s.run.start_unix_ns.saturating_add(self.window_ns / 2) / self.window_ns;
        self.trails[d].add(phase, index, self.window_ns, s);
        if !s.peers.list.is_empty() {
            let table = self.links[d]
                .entry((phase, index / LINK_SLICE_WINDOWS))
                .or_default();
            for p in &s.peers.list {
                let t = table.entry(ip_of(&p.addr.ip)).or_default();
                t.calls = t.calls.saturating_add(p.calls);
                t.bytes = t.bytes.saturating_add(p.bytes);
            }
        }
        let new_window = !self.service[d].contains_key(&(phase, index));
        let cell = self.service[d].entry((phase, index)).or_default();
        for (sum, add) in cell.iter_mut().zip(calls.service.iter()) {
            sum.count = sum.count.saturating_add(add.count);
            sum.total_ns = sum.total_ns.saturating_add(add.total_ns);
        }
        let slice = self.slices[d]
            .entry((phase, index / self.slice_windows))
            .or_insert_with(|| {
                Box::new(Slice {
                    windows: 0,
                    groups: [Calls::default(); Group::COUNT],
                })
            });
        slice.windows += u64::from(new_window);
        for (sum, add) in slice.groups.iter_mut().zip(calls.groups.iter()) {
            sum.merge(add);
        }
    }
}
