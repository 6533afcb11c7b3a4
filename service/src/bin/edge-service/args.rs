//! The `edge-service` command line: its clap definitions (the only ones
//! of the service), and their conversion into the library's typed
//! options. `diagnose` and `peers` are in `analysis_args`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use service::online::OnlineOptions;
use service::proactive::detector::{Thresholds, ThresholdsError};
use service::serve::ServeOptions;
use service::store::Location;
use service::webui::WebLimits;

use crate::analysis_args::{DiagnoseArgs, PeersArgs};

/// Edge Agent's service: ingest summaries, store them, serve directives,
/// explain slow runs.
#[derive(Debug, Parser)]
#[command(name = "edge-service", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the HTTP(S) API.
    // Boxed: the largest by far (clippy's large_enum_variant).
    Serve(Box<ServeArgs>),
    /// Set or show what devices of a group should trace.
    #[command(subcommand)]
    Directive(DirectiveCommand),
    /// Explain with rules why some runs are slow (from the store or files).
    Diagnose(DiagnoseArgs),
    /// Find the culprit among peer devices from their window summaries
    /// (the PVFS median and the Hadoop histogram methods; docs/peers.md).
    Peers(PeersArgs),
    /// Make TLS certificates: a private CA and the server certificate it signs.
    #[command(subcommand)]
    Tls(TlsCommand),
    /// Operators: who logs into the web UI and reads fleet data (device
    /// tokens only upload and read directives).
    #[command(subcommand)]
    Operator(OperatorCommand),
    /// Delete the runs received before an age (with their rows), and the
    /// devices not seen since; with --keep-raw only the runs' syscall and
    /// peer rows.
    Prune(PruneArgs),
}

/// `edge-service operator ...`.
#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Add an operator of one group (the database is created if missing);
    /// the password comes from a prompt, or stdin with --password-stdin.
    Add {
        #[command(flatten)]
        db: DbArg,
        /// The operator's login name.
        name: String,
        /// The group whose data the operator sees and whose directives it sets.
        #[arg(long)]
        group: String,
        /// Read the password from stdin's first line instead of a prompt.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Remove an operator with its sessions and API tokens.
    Remove {
        #[command(flatten)]
        db: DbArg,
        name: String,
    },
    /// List the operators and their groups.
    List {
        #[command(flatten)]
        db: DbArg,
    },
    /// Mint an API token for an operator (`Authorization: Bearer`, fleet
    /// data); shown once, kept hashed, valid until `operator revoke`.
    Token {
        #[command(flatten)]
        db: DbArg,
        name: String,
    },
    /// Revoke an operator's API tokens (and with --sessions its web
    /// sessions).
    Revoke {
        #[command(flatten)]
        db: DbArg,
        name: String,
        /// Log its web sessions out too.
        #[arg(long)]
        sessions: bool,
    },
}

/// `edge-service prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Prune what was received longer ago than this: 30d, 12h, 90m, 45s.
    #[arg(long, value_name = "AGE", value_parser = service::retention::parse_age)]
    pub older_than: Duration,
    /// Keep the old runs and their raw summaries (GET /v1/runs/{id} and
    /// diagnose still read them); delete only their syscall and peer rows.
    #[arg(long)]
    pub keep_raw: bool,
}

/// `edge-service tls ...`.
#[derive(Debug, Subcommand)]
pub enum TlsCommand {
    /// Make a private CA (DIR/ca.pem, key DIR/ca.key) and a server certificate it signs
    /// (DIR/server.pem, key DIR/server.key); prints the `serve` options, the `--ca` file for
    /// devices and the server key's `--pin-sha256`.
    Init(TlsInitArgs),
    /// Make a new server certificate from the same CA (devices keep working; the server's key
    /// and so its pin are kept unless --new-key); restart `serve` to use it.
    Renew(TlsRenewArgs),
}

/// `edge-service tls init`.
#[derive(Debug, Args)]
pub struct TlsInitArgs {
    /// Directory for the four files (created, mode 0700, if missing).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// The names devices connect to: DNS names and IP addresses, comma-separated.
    #[arg(long, value_name = "HOST[,HOST|IP...]")]
    pub name: String,
    /// Days the server certificate is valid (the CA: 3650).
    #[arg(long, value_name = "N", default_value_t = 397)]
    pub days: u32,
    /// Replace an existing CA (every device then needs the new ca.pem).
    #[arg(long)]
    pub force: bool,
}

/// `edge-service tls renew`.
#[derive(Debug, Args)]
pub struct TlsRenewArgs {
    /// Directory of `tls init`.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// The names, comma-separated [default: those of the current DIR/server.pem].
    #[arg(long, value_name = "HOST[,HOST|IP...]")]
    pub name: Option<String>,
    /// Days the new server certificate is valid.
    #[arg(long, value_name = "N", default_value_t = 397)]
    pub days: u32,
    /// The CA's key, if kept elsewhere [default: DIR/ca.key].
    #[arg(long, value_name = "FILE")]
    pub ca_key: Option<PathBuf>,
    /// Make a new server key too (devices pinning the old key then need the new pin).
    #[arg(long)]
    pub new_key: bool,
}

/// The store.
#[derive(Debug, Args)]
pub struct DbArg {
    /// SQLite database file (`serve` creates it if missing; the other
    /// commands refuse a file that does not exist; `sqlite:PATH` also
    /// works), or a PostgreSQL database: `postgres://USER@HOST[:PORT]/DB`
    /// (`?sslmode=require` for TLS, `&sslrootcert=CA.pem` for a private CA;
    /// `sslmode=prefer` falls back to plaintext with a warning; the
    /// password from the URL or $PGPASSWORD, never printed).
    // hide_env_values: `--help` would show $EDGE_SERVICE_DB's password.
    #[arg(
        long,
        env = "EDGE_SERVICE_DB",
        hide_env_values = true,
        default_value = "edge-service.db"
    )]
    pub db: PathBuf,
}

impl DbArg {
    /// Which backend and where.
    pub fn location(&self) -> Location {
        Location::parse(&self.db)
    }
}

/// `edge-service serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub db: DbArg,
    /// Tokens file: one `GROUP TOKEN` pair per line, `#` comments.
    #[arg(long)]
    pub tokens: Option<PathBuf>,
    /// Accept requests without a token (loopback addresses only; each
    /// summary's group is its `group` fact, or `default`).
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// TLS certificate chain (PEM); serves HTTPS with --tls-key.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// How long a write waits for a database locked by another process
    /// before the request is answered 503.
    #[arg(long, default_value_t = 5000)]
    pub busy_timeout_ms: u64,
    /// A request's head (and a TLS handshake) must arrive within this many
    /// ms of its first byte (of accept); else the connection is closed.
    #[arg(long, default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// A request's body must arrive within this many ms of its head.
    #[arg(long, default_value_t = 60_000)]
    pub body_timeout_ms: u64,
    /// A connection waiting this many ms for its next request (or not
    /// reading its response) is closed.
    #[arg(long, default_value_t = 30_000)]
    pub idle_timeout_ms: u64,
    /// Connections open at once; beyond, the idle one waiting longest is
    /// closed to make room, or the new one is refused (503 + Connection:
    /// close; TLS: closed).
    #[arg(long, default_value_t = 1000)]
    pub max_connections: u32,
    /// After SIGINT/SIGTERM, requests in flight have this many ms to finish;
    /// then the remaining connections are closed and the server exits.
    #[arg(long, default_value_t = 10_000)]
    pub shutdown_timeout_ms: u64,
    /// Prune every hour what was received longer ago than this (30d, 12h,
    /// ...), as `edge-service prune --older-than AGE` does.
    #[arg(long, value_name = "AGE", value_parser = service::retention::parse_age)]
    pub retain: Option<Duration>,
    /// With --retain: keep old runs' raw summaries, prune only their rows.
    #[arg(long, requires = "retain")]
    pub keep_raw: bool,
    /// With --retain: prune this often instead of hourly (tests).
    #[arg(long, hide = true, default_value_t = 3_600_000)]
    pub retain_every_ms: u64,
    /// Trust this request header (set by an authenticating reverse proxy in
    /// front of the server) to name the web UI's group, instead of the login
    /// form's operator. Off by default: the proxy must strip the header
    /// from what clients send (docs/webui.md).
    #[arg(long, value_name = "HEADER")]
    pub web_proxy_header: Option<String>,
    /// Failed web UI logins (per client address, and per operator name)
    /// before further attempts are refused for --login-lockout-ms.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub login_max_failures: u32,
    /// The first lock-out after --login-max-failures failures; each
    /// further failure doubles it (at most 15 minutes).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub login_lockout_ms: u64,
    /// How long a web UI session lasts after its login.
    #[arg(long, value_name = "H", default_value_t = 12)]
    pub session_hours: u64,
    /// Ingest quota per client address: upload requests at once (0: no
    /// quota); over it the upload is refused with 429 and Retry-After.
    #[arg(long, value_name = "N", default_value_t = 600.0)]
    pub quota_address_burst: f64,
    /// Upload requests per second an address's quota refills by.
    #[arg(long, value_name = "N", default_value_t = 20.0)]
    pub quota_address_per_sec: f64,
    /// Ingest quota per device id: summaries at once (0: no quota).
    #[arg(long, value_name = "N", default_value_t = 5000.0)]
    pub quota_device_burst: f64,
    /// Summaries per second a device's quota refills by.
    #[arg(long, value_name = "N", default_value_t = 50.0)]
    pub quota_device_per_sec: f64,
    /// How often (at most) a request makes the server look whether the
    /// tokens file changed (tests).
    #[arg(long, hide = true, default_value_t = 2000)]
    pub tokens_recheck_ms: u64,
    /// The web UI's Diagnosis page reads at most this many runs, the
    /// newest (and says so on the page); `edge-service diagnose` has no
    /// limit.
    #[arg(long, value_name = "N", default_value_t = WebLimits::default().max_runs)]
    pub web_max_runs: usize,
    /// The web UI's Peers page reads at most this many window summaries,
    /// else it refuses with a message naming the limit.
    #[arg(long, value_name = "N", default_value_t = WebLimits::default().max_windows)]
    pub web_max_windows: u64,
    /// The longest the web UI's Peers page reads: its training and
    /// diagnosis ranges together (e.g. 7d, 36h).
    #[arg(long, value_name = "AGE", default_value = "7d", value_parser = service::retention::parse_age)]
    pub web_max_span: Duration,
    /// Web UI analyses (Diagnosis, Peers) running at once; the next is
    /// answered 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = WebLimits::default().analyses)]
    pub web_analyses: usize,
    /// Web UI analyses one group runs at once.
    #[arg(long, value_name = "N", default_value_t = WebLimits::default().analyses_per_group)]
    pub web_analyses_per_group: usize,
    #[command(flatten)]
    pub auto: AutoArgs,
    #[command(flatten)]
    pub online: OnlineArgs,
    #[command(flatten)]
    pub alerts: AlertArgs,
}

/// `serve --peers-online`: the live peer analysis (docs/peers.md, "Online").
#[derive(Debug, Args)]
pub struct OnlineArgs {
    /// Judge the groups' window summaries as they arrive against a baseline
    /// of fault-free windows and open incidents (stored; GET nothing yet:
    /// the store's incidents table). On by default: it does nothing until
    /// windows arrive. `--peers-online=false` turns it off. Of several
    /// instances on one PostgreSQL database one runs it.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub peers_online: bool,
    /// How often the new windows are judged.
    #[arg(long, value_name = "AGE", default_value = "5s", value_parser = service::retention::parse_age)]
    pub peers_online_tick: Duration,
    /// Fault-free time the baseline holds per group; judging starts once
    /// it holds this much.
    #[arg(long, value_name = "AGE", default_value = "10m", value_parser = service::retention::parse_age)]
    pub peers_online_baseline: Duration,
    /// An incident closes once its device has not been flagged for this
    /// long (window time).
    #[arg(long, value_name = "AGE", default_value = "60s", value_parser = service::retention::parse_age)]
    pub peers_online_close_after: Duration,
    /// Over-threshold windows needed (median method's k of n) ...
    #[arg(long, value_name = "K", default_value_t = 4)]
    pub peers_online_k: usize,
    /// ... among this many consecutive judged windows.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub peers_online_n: usize,
    /// ... or this many when the stretch's mean deviation is over the
    /// threshold too (k to turn it off).
    #[arg(long, value_name = "K", default_value_t = 3)]
    pub peers_online_strong_k: usize,
    /// A client call in flight this long is a hang.
    #[arg(long, value_name = "AGE", default_value = "30s", value_parser = service::retention::parse_age)]
    pub peers_online_hang_after: Duration,
}

impl OnlineArgs {
    /// The live analysis' options, when on (checked when `serve` starts).
    pub fn options(&self) -> Option<OnlineOptions> {
        self.peers_online.then_some(OnlineOptions {
            tick: self.peers_online_tick,
            baseline: self.peers_online_baseline,
            close_after: self.peers_online_close_after,
            k: self.peers_online_k,
            n: self.peers_online_n,
            strong_k: self.peers_online_strong_k,
            hang_after: self.peers_online_hang_after,
        })
    }
}

/// `serve --alert-webhook URL`: incident events as JSON POSTs (docs/peers.md,
/// "Online: alerting").
#[derive(Debug, Args)]
pub struct AlertArgs {
    /// POST each incident event (opened, closed) as JSON to this URL
    /// (http:// or https://); repeat for several receivers, each gets
    /// every event in order. Retried with back-off on connection errors,
    /// 5xx and 429; never delays ingest.
    #[arg(long, value_name = "URL")]
    pub alert_webhook: Vec<String>,
    /// The longest one webhook request may take, connecting included.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub alert_webhook_timeout_ms: u64,
    /// PEM file of the CA(s) to trust for https webhooks instead of
    /// Mozilla's roots (a private CA).
    #[arg(long, value_name = "FILE")]
    pub alert_webhook_ca: Option<PathBuf>,
    /// The web UI's address as operators reach it
    /// (https://edge.example.com): each webhook body's `url` is then the
    /// incident's page there, URL/incidents/ID (else null).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
}

impl AlertArgs {
    /// The webhooks' options.
    pub fn options(self) -> service::alerts::WebhookOptions {
        service::alerts::WebhookOptions {
            urls: self.alert_webhook,
            timeout: Duration::from_millis(self.alert_webhook_timeout_ms),
            ca_file: self.alert_webhook_ca,
            public_url: self.public_url,
            ..service::alerts::WebhookOptions::default()
        }
    }
}

/// `serve --auto`: the anomaly detector (docs/proactive.md).
#[derive(Debug, Args)]
pub struct AutoArgs {
    /// Run the anomaly detector: watch the light runs, and when a slow or
    /// failing cluster appears, trace devices of it and of the good one
    /// (per-device directives), diagnose their runs and store a report
    /// (GET /v1/reports). Off by default.
    #[arg(long)]
    pub auto: bool,
    /// How often the detector looks (e.g. 30s, 5m).
    #[arg(long, value_name = "AGE", default_value = "30s", requires = "auto", value_parser = service::retention::parse_age)]
    pub auto_every: Duration,
    /// It looks at light runs that started at most this long ago.
    #[arg(long, value_name = "AGE", default_value = "1h", requires = "auto", value_parser = service::retention::parse_age)]
    pub auto_window: Duration,
    /// Fewest runs in the slow or failing cluster, and in the good one.
    #[arg(long, value_name = "N", default_value_t = 3, requires = "auto")]
    pub auto_min_runs: usize,
    /// Slow only when the slow cluster's median duration is at least this
    /// many times the good cluster's.
    #[arg(long, value_name = "X", default_value_t = 2.0, requires = "auto")]
    pub auto_min_ratio: f64,
    /// Devices traced on each side, at most.
    #[arg(long, value_name = "N", default_value_t = 2, requires = "auto")]
    pub auto_devices: usize,
    /// Consecutive looks a cluster must be found in before it is investigated.
    #[arg(long, value_name = "N", default_value_t = 2, requires = "auto")]
    pub auto_stable: u32,
    /// Full runs asked of each device traced.
    #[arg(long, value_name = "N", default_value_t = 2, requires = "auto")]
    pub auto_runs: u32,
    /// How long the directives stand and their runs are waited for.
    #[arg(long, value_name = "AGE", default_value = "30m", requires = "auto", value_parser = service::retention::parse_age)]
    pub auto_wait: Duration,
    /// No new investigation of a (group, program, slow|failing) while its
    /// latest report is younger than this.
    #[arg(long, value_name = "AGE", default_value = "1h", requires = "auto", value_parser = service::retention::parse_age)]
    pub auto_fresh: Duration,
}

impl AutoArgs {
    /// The detector's thresholds, when `--auto` is on; refuses values that
    /// would make it useless.
    pub fn thresholds(&self) -> Result<Option<Thresholds>, ThresholdsError> {
        if !self.auto {
            return Ok(None);
        }
        let thresholds = Thresholds {
            every: self.auto_every,
            window: self.auto_window,
            min_runs: self.auto_min_runs,
            min_ratio: self.auto_min_ratio,
            devices: self.auto_devices,
            stable_ticks: self.auto_stable,
            runs: self.auto_runs,
            wait: self.auto_wait,
            fresh: self.auto_fresh,
        };
        thresholds.check()?;
        Ok(Some(thresholds))
    }
}

impl ServeArgs {
    /// What `serve` runs with.
    pub fn options(self) -> Result<ServeOptions, ThresholdsError> {
        Ok(ServeOptions {
            listen: self.listen,
            db: self.db.location(),
            auto: self.auto.thresholds()?,
            online: self.online.options(),
            online_sink: None,
            tokens: self.tokens,
            insecure_no_auth: self.insecure_no_auth,
            tls: self.tls_cert.zip(self.tls_key),
            busy_timeout: Duration::from_millis(self.busy_timeout_ms),
            limits: service::conn::Limits {
                header_timeout: Duration::from_millis(self.header_timeout_ms),
                body_timeout: Duration::from_millis(self.body_timeout_ms),
                idle_timeout: Duration::from_millis(self.idle_timeout_ms),
                max_connections: self.max_connections,
                shutdown_timeout: Duration::from_millis(self.shutdown_timeout_ms),
            },
            retain: self.retain.map(|age| service::serve::Retain {
                older_than: age,
                keep_raw: self.keep_raw,
                every: Duration::from_millis(self.retain_every_ms.max(1)),
            }),
            web_proxy_header: self.web_proxy_header,
            login_limits: service::login_limit::LoginLimits {
                max_failures: self.login_max_failures,
                lockout: Duration::from_millis(self.login_lockout_ms),
            },
            session_ttl: Duration::from_secs(self.session_hours.clamp(1, 24 * 365) * 3600),
            tokens_recheck: Duration::from_millis(self.tokens_recheck_ms),
            quotas: service::quota::QuotaConfig {
                address: service::quota::Rate {
                    burst: self.quota_address_burst,
                    per_sec: self.quota_address_per_sec,
                },
                device: service::quota::Rate {
                    burst: self.quota_device_burst,
                    per_sec: self.quota_device_per_sec,
                },
            },
            web_limits: WebLimits {
                max_runs: self.web_max_runs,
                max_windows: self.web_max_windows,
                max_span: self.web_max_span,
                analyses: self.web_analyses,
                analyses_per_group: self.web_analyses_per_group,
            },
            alerts: self.alerts.options(),
        })
    }
}

/// `edge-service directive ...`.
#[derive(Debug, Subcommand)]
pub enum DirectiveCommand {
    /// Set (replace) the directive of a group.
    Set(DirectiveSetArgs),
    /// Show every directive (or one group's).
    Show {
        #[command(flatten)]
        db: DbArg,
        /// Only this group.
        #[arg(long)]
        group: Option<String>,
    },
    /// Remove the directive of a group.
    Clear {
        #[command(flatten)]
        db: DbArg,
        #[arg(long)]
        group: String,
    },
    /// Trace the next N runs of a program on one device fully (the device
    /// fetches it with GET /v1/directives?device=).
    Device(DeviceDirectiveArgs),
    /// List the per-device directives (expired and fulfilled ones too).
    DeviceList {
        #[command(flatten)]
        db: DbArg,
        /// Only this group.
        #[arg(long)]
        group: Option<String>,
        /// Only this device (32 hex digits).
        #[arg(long, value_name = "HEX")]
        device: Option<String>,
    },
    /// Delete per-device directives of a group (all, one device's, or one).
    DeviceClear {
        #[command(flatten)]
        db: DbArg,
        #[arg(long)]
        group: String,
        /// Only this device's (32 hex digits).
        #[arg(long, value_name = "HEX")]
        device: Option<String>,
        /// Only this directive.
        #[arg(long)]
        id: Option<i64>,
    },
}

/// `edge-service directive device`.
#[derive(Debug, Args)]
pub struct DeviceDirectiveArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The device's group.
    #[arg(long)]
    pub group: String,
    /// The device id (32 hex digits, as GET /v1/devices lists it).
    #[arg(long, value_name = "HEX")]
    pub device: String,
    /// Only runs of this program (its name, e.g. wget).
    #[arg(long)]
    pub program: Option<String>,
    /// Only runs whose command line contains this text.
    #[arg(long = "match")]
    pub match_text: Option<String>,
    /// How many runs to trace fully.
    #[arg(long)]
    pub runs: u32,
    /// The directive stands this long (30d, 12h, 90m, 45s).
    #[arg(long, value_name = "AGE", default_value = "1h", value_parser = service::retention::parse_age)]
    pub expires: Duration,
}

/// `edge-service directive set`.
#[derive(Debug, Args)]
pub struct DirectiveSetArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The device group.
    #[arg(long)]
    pub group: String,
    /// Trace only programs whose command line contains this text.
    #[arg(long = "match")]
    pub match_text: Option<String>,
    /// Trace only these syscalls, comma-separated (`read,write,openat`).
    #[arg(long)]
    pub only: Option<String>,
    /// Upload only in this daily window, `HH:MM-HH:MM`.
    #[arg(long)]
    pub window: Option<String>,
    /// Shim these programs, comma-separated (`md5sum,curl`), on devices
    /// that opted in (`edge-agent watch --server URL --shim-dir DIR`).
    #[arg(long, value_name = "NAMES")]
    pub programs: Option<String>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        // clap's own checks: names, conflicts and requirements that exist.
        Cli::command().debug_assert();
    }
}
