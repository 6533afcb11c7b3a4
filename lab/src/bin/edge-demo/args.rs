//! `edge-demo`'s command line: clap's definitions of [`lab::DemoOptions`]
//! (the library takes typed options, not a command line).

use std::path::PathBuf;

use lab::DemoOptions;

/// `edge-demo`: the TCP-memory case study end to end (needs root).
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Client namespaces.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(2..=50))]
    pub clients: u32,
    /// How many of them get the too-small tcp_rmem.
    #[arg(long, default_value_t = 2)]
    pub bad: u32,
    /// Fetches per client.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Size of the fetched file, MiB.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub size_mib: u32,
    /// net.ipv4.tcp_rmem of the good clients (min default max, bytes).
    #[arg(long, default_value = "4096 131072 6291456")]
    pub good_rmem: String,
    /// net.ipv4.tcp_rmem of the bad clients. The default is the smallest
    /// Linux 6.18 accepts (each field at least 4096; older kernels took
    /// "2048 2048 2048").
    #[arg(long, default_value = "4096 4096 4096")]
    pub bad_rmem: String,
    /// The edge-agent binary [default: next to this program, else on PATH].
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,
    /// The edge-service binary for serve and diagnose [default: next to this program, else on PATH].
    #[arg(long, value_name = "PATH")]
    pub service: Option<PathBuf>,
    /// Diagnose the spooled summary files directly instead of uploading them
    /// to a local `edge-service serve` (when the service is not at hand).
    #[arg(long)]
    pub no_service: bool,
    /// Working folder (spools `spool-c*`, database `demo.db`, the service's
    /// log), kept afterwards; an earlier demo's spools and database in it are
    /// removed first. Default: a temporary folder, removed at the end.
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// Print the diagnosis as JSON (the last thing printed).
    #[arg(long)]
    pub json: bool,
    /// Also write the diagnosis as an HTML page with plots.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// The proactive loop instead: every client light-monitored by
    /// `edge-agent watch --light`, and `serve --auto` finding the slow
    /// clients, tracing some of them and of the good ones, and storing the
    /// diagnosis by itself (docs/proactive.md). Fetches go on round after
    /// round (--runs is not used) until the report is stored.
    #[arg(long, conflicts_with_all = ["no_service", "json", "html"])]
    pub proactive: bool,
}

impl From<DemoArgs> for DemoOptions {
    fn from(a: DemoArgs) -> DemoOptions {
        DemoOptions {
            clients: a.clients,
            bad: a.bad,
            runs: a.runs,
            size_mib: a.size_mib,
            good_rmem: a.good_rmem,
            bad_rmem: a.bad_rmem,
            agent: a.agent,
            service: a.service,
            no_service: a.no_service,
            work: a.work,
            json: a.json,
            html: a.html,
            proactive: a.proactive,
        }
    }
}
