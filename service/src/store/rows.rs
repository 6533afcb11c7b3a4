//! The shapes runs take on their way into and out of a store.

use agent_core::{CpuTime, DeviceId, Exit, Kind, RunId, StreamId, Summary};
use serde_json::Value;

/// A decoded, validated summary ready to be written: the columns of its run
/// row, its per-(syscall, fd kind) rows and the raw bytes. Built on the
/// request's task so the writer thread only writes.
#[derive(Clone, Debug)]
pub struct NewRun {
    pub id: RunId,
    pub group: String,
    /// A full trace or a light record.
    pub kind: Kind,
    pub program: String,
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    pub exit: Exit,
    pub arch: &'static str,
    pub processes: u32,
    pub threads: u32,
    pub events: u64,
    pub window: u32,
    pub spool_dropped: u32,
    pub truncated: bool,
    /// The facts as JSON text, in `summary_view::to_json`'s shape.
    pub facts_json: String,
    pub received_unix_ns: u64,
    /// Exactly the bytes the device sent (`Summary::encode`'s output).
    pub raw: Vec<u8>,
    pub syscalls: Vec<SyscallRow>,
    /// The device's id; `None` when the summary carries none (all zero:
    /// format version 1).
    pub device: Option<DeviceId>,
    /// The stream its windows share; `None` when not known.
    pub stream: Option<StreamId>,
    /// The window length, ns (0: a whole run).
    pub window_ns: u64,
    pub cpu: Option<CpuTime>,
    /// Calls in flight at the cut.
    pub in_flight: u32,
    /// The peers with their own entry.
    pub peers: Vec<PeerRow>,
    /// How many peers the summary folded into its rest.
    pub peers_folded: u32,
    /// The per-device directive this full run was traced for (its
    /// `directive` fact); counted towards the directive's fulfilment.
    pub directive: Option<i64>,
}

/// One socket peer of a run, as the `peers` table holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerRow {
    /// `tcp` or `udp`.
    pub transport: &'static str,
    /// `192.0.2.1`, `2001:db8::1`.
    pub address: String,
    pub port: u16,
    pub calls: u64,
    pub bytes: u64,
    pub total_ns: u64,
    pub errors: u64,
    /// The most recent call: its syscall, raw result and end time.
    pub last_syscall: Option<String>,
    pub last_result: Option<i64>,
    pub last_end_unix_ns: Option<u64>,
}

/// One (syscall, fd kind) of a run, with the derived values operators query.
#[derive(Clone, Debug, PartialEq)]
pub struct SyscallRow {
    /// Canonical name (`read`, `<other>`, `#<id>` for ids newer than this build).
    pub syscall: String,
    pub fd_kind: &'static str,
    pub count: u64,
    pub errors: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    pub consecutive: u64,
    pub gap_mean_ns: f64,
    pub result_mean: f64,
    pub param_mean: Option<f64>,
}

impl NewRun {
    /// The rows of `summary`, received now for `group`.
    pub fn from_summary(
        summary: &Summary,
        raw: Vec<u8>,
        group: &str,
        received_unix_ns: u64,
    ) -> NewRun {
        let r = &summary.run;
        NewRun {
            id: summary.id,
            group: group.to_string(),
            kind: summary.kind,
            program: summary.facts.program.to_string(),
            start_unix_ns: r.start_unix_ns,
            duration_ns: r.duration_ns,
            exit: r.exit,
            arch: r.arch.name(),
            processes: r.processes,
            threads: r.threads,
            events: r.events,
            window: r.window,
            spool_dropped: r.spool_dropped,
            truncated: summary.truncated,
            facts_json: summary_view::facts_json(summary).to_string(),
            received_unix_ns,
            raw,
            syscalls: summary
                .syscalls
                .iter()
                .map(|s| SyscallRow {
                    syscall: s.key.id.to_string(),
                    fd_kind: s.key.fd_kind.name(),
                    count: s.count,
                    errors: s.errors(),
                    total_ns: s.total_ns,
                    min_ns: s.min_ns(),
                    max_ns: s.max_ns(),
                    mean_ns: s.mean_ns(),
                    consecutive: s.consecutive_count(),
                    gap_mean_ns: s.gap_mean_ns(),
                    result_mean: s.result_mean(),
                    param_mean: s.param_mean(),
                })
                .collect(),
            device: summary.origin.device.nonzero(),
            stream: summary.origin.stream.nonzero(),
            window_ns: summary.origin.window_ns,
            cpu: summary.cpu,
            in_flight: summary.in_flight.count,
            peers: summary
                .peers
                .list
                .iter()
                .map(|p| PeerRow {
                    transport: p.addr.transport.name(),
                    address: summary_view::observe::ip_text(p.addr.ip),
                    port: p.addr.port,
                    calls: p.calls,
                    bytes: p.bytes,
                    total_ns: p.total_ns,
                    errors: p.errors,
                    last_syscall: p.last.map(|l| l.id.to_string()),
                    last_result: p.last.map(|l| l.result),
                    last_end_unix_ns: p.last.map(|l| l.end_unix_ns),
                })
                .collect(),
            peers_folded: summary.peers.rest.peers,
            // Light records are never traced for a directive.
            directive: match summary.kind {
                Kind::Full => super::directive_of(&summary.facts),
                Kind::Light => None,
            },
        }
    }
}

/// The column list of `Store::count_runs`' query (each backend leaves the
/// order out for it).
pub(crate) const COUNT_COLUMN: &str = "COUNT(*)";

/// Which runs to list or load. Times are the runs' start, ns since the Unix
/// epoch: `since` inclusive, `until` exclusive.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFilter {
    pub group: Option<String>,
    pub program: Option<String>,
    pub since_unix_ns: Option<u64>,
    pub until_unix_ns: Option<u64>,
    /// Only this device's runs; all zero: only runs without a device id.
    pub device: Option<DeviceId>,
    /// Only this stream's windows; all zero: only runs without a stream id.
    pub stream: Option<StreamId>,
    /// Only full traces or only light records; `None`: both.
    pub kind: Option<Kind>,
    /// Only whole runs (window 0), not the windows of a windowed trace:
    /// what a diagnosis that leaves windows out reads, so that a limit
    /// counts runs it can use.
    pub whole_runs: bool,
    /// At most this many (the oldest first, or the newest with
    /// `newest_first`); `None`: all.
    pub limit: Option<u64>,
    /// Newest start first (the web UI's run list) instead of oldest.
    pub newest_first: bool,
}

impl RunFilter {
    /// The id conditions as the `device` and `stream` columns hold them:
    /// `None`, no condition; `Some(None)`, the runs without such an id
    /// (all zero; stored as NULL); `Some(Some(hex))`, that id's runs.
    pub fn id_texts(&self) -> [(&'static str, Option<Option<String>>); 2] {
        [
            (
                "device",
                self.device.map(|d| d.nonzero().map(|d| d.to_string())),
            ),
            (
                "stream",
                self.stream.map(|s| s.nonzero().map(|s| s.to_string())),
            ),
        ]
    }
}

/// The `kind` column's text.
pub fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Full => "full",
        Kind::Light => "light",
    }
}

/// The kind a `kind` column's text names (anything else: full, the only
/// kind before schema version 4).
pub fn kind_from_name(text: &str) -> Kind {
    if text == "light" {
        Kind::Light
    } else {
        Kind::Full
    }
}

/// Which devices `GET /v1/devices` lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceFilter {
    pub group: Option<String>,
    /// At most this many (the most recently seen first); `None`: all.
    pub limit: Option<u64>,
}

/// A device as the `devices` table holds it: kept up to date by every
/// stored run that carries a device id.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceRow {
    pub device: DeviceId,
    pub group: String,
    pub first_seen_unix_ns: u64,
    pub last_seen_unix_ns: u64,
    pub last_start_unix_ns: u64,
    pub last_program: String,
    pub facts: Value,
    pub runs: u64,
    pub windows: u64,
}

impl DeviceRow {
    /// One entry of `GET /v1/devices`.
    pub fn view(&self) -> wire::DeviceView {
        wire::DeviceView {
            device: self.device,
            group: self.group.clone(),
            first_seen_unix_ns: self.first_seen_unix_ns,
            last_seen_unix_ns: self.last_seen_unix_ns,
            last_start_unix_ns: self.last_start_unix_ns,
            last_program: self.last_program.clone(),
            facts: self.facts.clone(),
            runs: self.runs,
            windows: self.windows,
        }
    }
}

/// A run as listed by `GET /v1/runs`.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRow {
    pub id: RunId,
    pub group: String,
    pub kind: Kind,
    pub program: String,
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    pub exit: Exit,
    pub arch: String,
    pub processes: u32,
    pub threads: u32,
    pub events: u64,
    pub window: u32,
    pub spool_dropped: u32,
    pub truncated: bool,
    pub facts: Value,
    pub received_unix_ns: u64,
    pub device: Option<DeviceId>,
    pub stream: Option<StreamId>,
    pub window_ns: u64,
    pub cpu_user_ns: Option<u64>,
    pub cpu_system_ns: Option<u64>,
    pub in_flight: u32,
}

impl RunRow {
    /// One entry of `GET /v1/runs`.
    pub fn view(&self) -> wire::RunView {
        wire::RunView {
            id: self.id,
            group: self.group.clone(),
            kind: kind_name(self.kind).to_string(),
            program: self.program.clone(),
            start_unix_ns: self.start_unix_ns,
            duration_ns: self.duration_ns,
            exit: summary_view::exit_json(self.exit),
            arch: self.arch.clone(),
            processes: self.processes,
            threads: self.threads,
            events: self.events,
            window: self.window,
            device: self.device,
            stream: self.stream,
            window_ns: self.window_ns,
            cpu_user_ns: self.cpu_user_ns,
            cpu_system_ns: self.cpu_system_ns,
            in_flight: self.in_flight,
            spool_dropped: self.spool_dropped,
            truncated: self.truncated,
            facts: self.facts.clone(),
            received_unix_ns: self.received_unix_ns,
        }
    }
}

/// A stored run: its group and the bytes the device sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRun {
    pub group: String,
    pub raw: Vec<u8>,
}
