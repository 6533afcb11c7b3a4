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

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use agent_core::{DeviceId, Facts, PeerIp, RunId, Source, Summary};

use super::metrics::{Calls, Classifier, Group, Service, WindowCalls, RAW_METRICS};
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

/// Calls, bytes and time on the sockets to one peer address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Calls on its sockets.
    pub calls: u64,
    /// Bytes moved by the successful read/write-family calls among them.
    pub bytes: u64,
    /// Time in those calls, ns (the agent's `Peer::total_ns`; the
    /// semantic method's per-peer invocation time, [`super::semantic`]).
    pub total_ns: u64,
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
    /// How many of its windows have them (so that evicting windows
    /// ([`Fleet::evict_training`]) can clear `accepted`).
    accepting: usize,
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

impl Slice {
    fn empty() -> Slice {
        Slice {
            windows: 0,
            groups: [Calls::default(); Group::COUNT],
        }
    }
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
    /// More fault-free ranges whose windows are training too
    /// ([`Fleet::also_train`]), outside any overlay.
    more_training: Vec<Range>,
    /// (device id, program, source) → index into `devices`.
    index_of: HashMap<(DeviceId, ProgramName, Source), usize>,
    seen: HashSet<RunId>,
    classifier: Classifier,
    /// While diagnosis windows are laid over the training ones
    /// ([`Fleet::overlay`]): what takes them out again.
    overlay: Option<Box<Overlay>>,
    /// What the methods learnt from the training windows, kept for the
    /// next judging of this fleet with the training windows changed
    /// ([`Fleet::training_changes`]).
    pub(super) learnt: Learnt,
    /// The windows laid over at the last overlay, classified (a summary
    /// id names one summary: the service keeps the first of an id).
    classified: HashMap<RunId, Box<WindowCalls>>,
    /// Counts the training windows added: each one's count is its
    /// generation.
    training_generation: u64,
    /// Per training window index, the generation of its last change.
    training_changed: BTreeMap<u64, u64>,
    /// Changes when device indices stop meaning what they meant (devices
    /// reordered, or gone).
    devices_epoch: u64,
    /// Counts the evictions of training windows ([`Fleet::evict_training`]:
    /// they change what `training_changed` no longer shows).
    evictions: u64,
}

/// What the methods learnt from a fleet's training windows, to learn
/// again only from the windows that changed: the median method's training
/// tables (per peer set's devices and raw metric). Emptied when the fleet
/// is cloned.
#[derive(Default)]
pub(super) struct Learnt {
    pub(super) median: std::sync::Mutex<HashMap<(Vec<usize>, usize), super::median::Learnt>>,
    /// The histogram method's bounds of each device's older training
    /// slices, by device index.
    pub(super) histogram: std::sync::Mutex<HashMap<usize, super::histogram::Learnt>>,
}

impl Clone for Learnt {
    fn clone(&self) -> Learnt {
        Learnt::default()
    }
}

impl std::fmt::Debug for Learnt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Learnt")
    }
}

/// How the training windows changed ([`Fleet::training_changes`]).
pub(super) struct TrainingChanges<'a> {
    /// Device indices mean what they meant as long as this stays.
    pub(super) devices_epoch: u64,
    /// Training windows were evicted when this changed.
    pub(super) evictions: u64,
    /// The generation of the newest change.
    pub(super) generation: u64,
    /// Per training window index, the generation of its last change.
    pub(super) changed: &'a BTreeMap<u64, u64>,
}

/// What [`Fleet::overlay`] saved: the fleet as it was, but for the
/// per-window maps, whose diagnosis entries are told apart by their phase.
#[derive(Debug, Clone)]
struct Overlay {
    devices: Vec<Device>,
    tally: Tally,
    window_ns: u64,
    training: Range,
    diagnosis: Range,
    /// Ids of the summaries taken since.
    ids: Vec<RunId>,
}

/// A peer's key: the device, its program, how it was observed.
type PeerKey = (DeviceId, ProgramName, Source);

fn key_of(s: &Summary) -> PeerKey {
    (s.origin.device, s.facts.program.clone(), s.coverage.source)
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
            more_training: Vec::new(),
            index_of: HashMap::new(),
            seen: HashSet::new(),
            classifier: Classifier::new(),
            overlay: None,
            learnt: Learnt::default(),
            classified: HashMap::new(),
            training_generation: 0,
            training_changed: BTreeMap::new(),
            devices_epoch: 0,
            evictions: 0,
        }
    }

    /// How the training windows changed: the generation of each window
    /// index's last change (indices evicted are gone from it).
    pub(super) fn training_changes(&self) -> TrainingChanges<'_> {
        TrainingChanges {
            devices_epoch: self.devices_epoch,
            evictions: self.evictions,
            generation: self.training_generation,
            changed: &self.training_changed,
        }
    }

    /// Lays diagnosis windows over a fleet of training windows: every
    /// window added from now on whose start is at or after `since` is
    /// taken as diagnosis (earlier ones are outside), until
    /// [`Fleet::end_overlay`] takes them out again and leaves the fleet as
    /// it was. The live analysis judges its newest windows this way
    /// against the baseline it keeps reduced, without copying the
    /// baseline at every tick. A fleet already holding diagnosis windows
    /// would lose them at the end: the overlay is for training-only fleets.
    pub fn overlay(&mut self, since: u64) {
        self.end_overlay();
        self.overlay = Some(Box::new(Overlay {
            devices: self.devices.clone(),
            tally: self.tally.clone(),
            window_ns: self.window_ns,
            training: self.training,
            diagnosis: self.diagnosis,
            ids: Vec::new(),
        }));
        self.training = Range { since: 0, until: 0 };
        self.diagnosis = Range {
            since,
            until: u64::MAX,
        };
    }

    /// Takes out the diagnosis windows laid over by [`Fleet::overlay`]
    /// (nothing without one).
    pub fn end_overlay(&mut self) {
        let Some(o) = self.overlay.take() else {
            return;
        };
        let Overlay {
            devices,
            tally,
            window_ns,
            training,
            diagnosis,
            ids,
        } = *o;
        let kept = devices.len();
        if kept < self.devices.len() {
            self.devices_epoch += 1;
        }
        let from = (Phase::Diagnosis, 0);
        for d in 0..kept {
            self.service[d].split_off(&from);
            self.slices[d].split_off(&from);
            self.links[d].split_off(&from);
            self.trails[d].clear_diagnosis();
        }
        self.service.truncate(kept);
        self.slices.truncate(kept);
        self.links.truncate(kept);
        self.trails.truncate(kept);
        self.index_of.retain(|_, d| *d < kept);
        self.devices = devices;
        self.tally = tally;
        self.window_ns = window_ns;
        self.training = training;
        self.diagnosis = diagnosis;
        for id in &ids {
            self.seen.remove(id);
        }
        // Only the windows of this overlay are kept classified.
        let ids: HashSet<RunId> = ids.into_iter().collect();
        self.classified.retain(|id, _| ids.contains(id));
    }

    /// Takes out the training windows of index below `before`, leaving the
    /// fleet as if only the later ones had been added, in order:
    /// `evicted` are the summaries taken out, `kept` every training
    /// summary left, in the order they were added (read only as far as
    /// needed: the slices `before` cuts, and until every device is met).
    /// The live analysis evicts its baseline's oldest windows this way
    /// instead of reducing the rest again. Not while laid over.
    pub fn evict_training(
        &mut self,
        before: u64,
        evicted: impl IntoIterator<Item = impl Borrow<Summary>>,
        kept: impl IntoIterator<Item = impl Borrow<Summary>>,
    ) {
        self.end_overlay();
        if self.window_ns == 0 {
            return;
        }
        self.evictions += 1;
        for s in evicted {
            let s = s.borrow();
            if !self.seen.remove(&s.id) {
                continue;
            }
            let Some(&d) = self.index_of.get(&key_of(s)) else {
                continue;
            };
            self.tally.windows = self.tally.windows.saturating_sub(1);
            let device = &mut self.devices[d];
            device.windows[Phase::Training as usize] =
                device.windows[Phase::Training as usize].saturating_sub(1);
            if self.classifier.accepts(s) {
                device.accepting = device.accepting.saturating_sub(1);
                device.accepted = device.accepting > 0;
            }
            self.trails[d].untrain(self.window_ns, s);
        }
        // Whole slices before the cut go; the slice it cuts is summed
        // again from its windows left.
        let cut = |every: u64| (before / every, before % every != 0);
        let (slice, cut_slice) = cut(self.slice_windows);
        let (link, cut_link) = cut(LINK_SLICE_WINDOWS);
        self.training_changed = self.training_changed.split_off(&before);
        for d in 0..self.devices.len() {
            self.service[d] = self.service[d].split_off(&(Phase::Training, before));
            self.slices[d] =
                self.slices[d].split_off(&(Phase::Training, slice + u64::from(cut_slice)));
            self.links[d] = self.links[d].split_off(&(Phase::Training, link + u64::from(cut_link)));
            self.trails[d].evict_latest(before);
        }
        let slice_end = if cut_slice {
            (slice + 1) * self.slice_windows
        } else {
            0
        };
        let link_end = if cut_link {
            (link + 1) * LINK_SLICE_WINDOWS
        } else {
            0
        };
        let left: Vec<bool> = self.devices.iter().map(|d| d.windows != [0, 0]).collect();
        let mut order: Vec<usize> = Vec::new();
        let mut met = vec![false; self.devices.len()];
        let wanted = left.iter().filter(|l| **l).count();
        let mut counted: HashSet<(usize, u64)> = HashSet::new();
        for s in kept {
            let s = s.borrow();
            let index = self.index(s);
            if order.len() == wanted && index >= slice_end && index >= link_end {
                break;
            }
            let Some(&d) = self.index_of.get(&key_of(s)) else {
                continue;
            };
            if !met[d] {
                met[d] = true;
                order.push(d);
            }
            if index < slice_end {
                let calls = self.classifier.window_calls(s);
                let entry = self.slices[d]
                    .entry((Phase::Training, index / self.slice_windows))
                    .or_insert_with(|| Box::new(Slice::empty()));
                entry.windows += u64::from(counted.insert((d, index)));
                for (sum, add) in entry.groups.iter_mut().zip(calls.groups.iter()) {
                    sum.merge(add);
                }
            }
            if index < link_end {
                self.add_links(d, Phase::Training, index, s);
            }
        }
        // A device with no window left is gone; the others in the order
        // their first window left was added, as a fleet of those would
        // have them.
        order.retain(|d| left[*d]);
        self.reorder(&order);
    }

    /// Keeps the devices `order` names (old indices), in that order.
    fn reorder(&mut self, order: &[usize]) {
        if order.iter().copied().eq(0..self.devices.len()) {
            return;
        }
        self.devices_epoch += 1;
        fn pick<T: Default>(v: &mut [T], order: &[usize]) -> Vec<T> {
            order.iter().map(|d| std::mem::take(&mut v[*d])).collect()
        }
        let devices = std::mem::take(&mut self.devices);
        let mut devices: Vec<Option<Device>> = devices.into_iter().map(Some).collect();
        self.devices = order.iter().filter_map(|d| devices[*d].take()).collect();
        self.service = pick(&mut self.service, order);
        self.slices = pick(&mut self.slices, order);
        self.trails = pick(&mut self.trails, order);
        self.links = pick(&mut self.links, order);
        self.index_of = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| ((d.id, d.facts.program.clone(), d.source), i))
            .collect();
    }

    /// A window's aligned index: its start rounded to the nearest window
    /// boundary (agents start their windows when tracing starts, not on
    /// the second).
    fn index(&self, s: &Summary) -> u64 {
        s.run.start_unix_ns.saturating_add(self.window_ns / 2) / self.window_ns.max(1)
    }

    /// Adds a window's socket peers to its link slice.
    fn add_links(&mut self, d: usize, phase: Phase, index: u64, s: &Summary) {
        if s.peers.list.is_empty() {
            return;
        }
        let table = self.links[d]
            .entry((phase, index / LINK_SLICE_WINDOWS))
            .or_default();
        for p in &s.peers.list {
            let t = table.entry(ip_of(&p.addr.ip)).or_default();
            t.calls = t.calls.saturating_add(p.calls);
            t.bytes = t.bytes.saturating_add(p.bytes);
            t.total_ns = t.total_ns.saturating_add(p.total_ns);
        }
    }

    /// The reduced windows as text, for comparing two fleets in tests
    /// (every field but the caches, in a fixed order).
    #[doc(hidden)]
    pub fn reduced_text(&self) -> String {
        let mut index_of: Vec<_> = self.index_of.iter().collect();
        index_of.sort();
        let mut seen: Vec<_> = self.seen.iter().collect();
        seen.sort();
        format!(
            "{} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            self.window_ns,
            self.slice_windows,
            self.devices,
            self.service,
            self.slices,
            self.trails,
            self.links,
            self.tally,
            self.training,
            self.diagnosis,
            index_of,
            seen
        )
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

    /// Takes the windows of one more fault-free range as training too
    /// (say every control run of an experiment, not only the last before
    /// the range diagnosed: a min..max learnt from a few slices is narrow).
    /// Windows in the diagnosis range stay diagnosis. Ignored while laid
    /// over ([`Fleet::overlay`]).
    pub fn also_train(&mut self, range: Range) {
        self.more_training.push(range);
    }

    /// The phase a window starting at `start` belongs to.
    pub fn phase_of(&self, start: u64) -> Option<Phase> {
        let more = self.overlay.is_none()
            && !self.diagnosis.contains(start)
            && self.more_training.iter().any(|r| r.contains(start));
        if self.training.contains(start) || more {
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
        if let Some(o) = &mut self.overlay {
            o.ids.push(s.id);
        }
        self.tally.windows += 1;
        let key = key_of(s);
        let d = match self.index_of.get(&key) {
            Some(d) => *d,
            None => {
                self.devices.push(Device {
                    id: s.origin.device,
                    source: s.coverage.source,
                    facts: s.facts.clone(),
                    latest_start: s.run.start_unix_ns,
                    accepted: false,
                    accepting: 0,
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
        // A window laid over at the last judging is likely laid over again
        // (the live analysis judges its recent windows at every tick):
        // classified once.
        let calls = self
            .classified
            .remove(&s.id)
            .unwrap_or_else(|| Box::new(self.classifier.window_calls(s)));
        let device = &mut self.devices[d];
        if s.run.start_unix_ns >= device.latest_start {
            device.latest_start = s.run.start_unix_ns;
            device.facts = s.facts.clone();
        }
        device.accepted |= calls.accepted;
        device.accepting += usize::from(calls.accepted);
        device.windows[phase as usize] += 1;
        let index = self.index(s);
        if phase == Phase::Training {
            self.training_generation += 1;
            self.training_changed
                .insert(index, self.training_generation);
        }
        self.trails[d].add(phase, index, self.window_ns, s, &calls);
        self.add_links(d, phase, index, s);
        let new_window = !self.service[d].contains_key(&(phase, index));
        let cell = self.service[d].entry((phase, index)).or_default();
        for (sum, add) in cell.iter_mut().zip(calls.service.iter()) {
            sum.count = sum.count.saturating_add(add.count);
            sum.total_ns = sum.total_ns.saturating_add(add.total_ns);
        }
        let slice = self.slices[d]
            .entry((phase, index / self.slice_windows))
            .or_insert_with(|| Box::new(Slice::empty()));
        slice.windows += u64::from(new_window);
        for (sum, add) in slice.groups.iter_mut().zip(calls.groups.iter()) {
            sum.merge(add);
        }
        if self.overlay.is_some() {
            self.classified.insert(s.id, calls);
        }
    }
}
