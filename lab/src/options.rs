//! What `edge-demo` runs, as typed values: the options of the case study
//! ([`crate::demo`]) and its proactive variant ([`crate::proactive`]).
//! The command line that fills them is the binary's
//! (`src/bin/edge-demo/args.rs`).

use std::path::PathBuf;

/// The TCP-memory case study end to end (needs root).
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Client namespaces.
    pub clients: u32,
    /// How many of them get the too-small tcp_rmem.
    pub bad: u32,
    /// Fetches per client.
    pub runs: u32,
    /// Size of the fetched file, MiB.
    pub size_mib: u32,
    /// net.ipv4.tcp_rmem of the good clients (min default max, bytes).
    pub good_rmem: String,
    /// net.ipv4.tcp_rmem of the bad clients.
    pub bad_rmem: String,
    /// The edge-agent binary [default: next to this program, else on PATH].
    pub agent: Option<PathBuf>,
    /// The edge-service binary for serve and diagnose [default: next to this program, else on PATH].
    pub service: Option<PathBuf>,
    /// Diagnose the spooled summary files directly instead of uploading them
    /// to a local `edge-service serve` (when the service is not at hand).
    pub no_service: bool,
    /// Working folder (spools `spool-c*`, database `demo.db`, the service's
    /// log), kept afterwards; an earlier demo's spools and database in it are
    /// removed first. Default: a temporary folder, removed at the end.
    pub work: Option<PathBuf>,
    /// Print the diagnosis as JSON (the last thing printed).
    pub json: bool,
    /// Also write the diagnosis as an HTML page with plots.
    pub html: Option<PathBuf>,
    /// The proactive loop instead: every client light-monitored by
    /// `edge-agent watch --light`, and `serve --auto` finding the slow
    /// clients, tracing some of them and of the good ones, and storing the
    /// diagnosis by itself (docs/proactive.md). Fetches go on round after
    /// round (--runs is not used) until the report is stored.
    pub proactive: bool,
}
