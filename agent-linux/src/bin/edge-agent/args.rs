//! `edge-agent`'s command line: every subcommand's options (clap), and
//! how a few of them read (`--window`, `--backend`, `--device-id-file`).

use std::ffi::OsString;
use std::path::PathBuf;

use agent_linux::device_id::{self, DeviceId};
use agent_linux::{ebpf, WaitPolicy};
use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "edge-agent",
    version,
    about = "Trace a program's syscalls into a small summary"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Run a command under the tracer; exit with its status.
    Run(RunArgs),
    /// Trace a running process (all its threads and future children).
    Attach(AttachArgs),
    /// Trace every process (running or new) whose command line contains a
    /// text, until SIGINT/SIGTERM: a daemon for servers.
    Watch(WatchArgs),
    /// Print summaries as a table, or as JSON.
    Show(ShowArgs),
    /// Send spooled summaries to the service.
    #[cfg(feature = "upload")]
    Upload(device_args::UploadArgs),
    /// Print this device's id (made on first use), or replace it.
    DeviceId(DeviceIdArgs),
    /// Wrappers that run chosen programs under the tracer from their first
    /// syscall, without privileges (a folder to put first in PATH).
    #[command(subcommand)]
    Shim(ShimCommand),
}

#[derive(Subcommand, Debug)]
pub(crate) enum ShimCommand {
    /// Write a wrapper for each PROGRAM and the folder's directive (what to
    /// trace); prints the line to add to the shell profile.
    Install(ShimInstallArgs),
    /// Delete the wrappers named (all of them when none is named).
    Remove(ShimRemoveArgs),
    /// List the wrappers, the program each runs, and the directive.
    List(ShimDirArgs),
    /// What a wrapper runs: the command, traced when its command line
    /// matches the folder's directive, else plainly.
    #[command(hide = true)]
    Exec(ShimExecArgs),
}

#[derive(Args, Debug)]
pub(crate) struct ShimDirArgs {
    /// The shim folder [default: $EDGE_AGENT_SHIM_DIR,
    /// $XDG_STATE_HOME/edge-agent/shims or ~/.local/state/edge-agent/shims].
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

impl ShimDirArgs {
    pub(crate) fn path(&self) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(agent_linux::shim::default_dir)
    }
}

#[derive(Args, Debug)]
pub(crate) struct ShimInstallArgs {
    #[command(flatten)]
    pub(crate) dir: ShimDirArgs,
    /// Trace a run only when its command line (name and arguments) contains
    /// this text [default: every run].
    #[arg(long = "match", value_name = "TEXT", default_value = "")]
    pub(crate) pattern: String,
    /// Trace only these syscalls (as `run --only`).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub(crate) only: Option<Vec<String>>,
    #[command(flatten)]
    pub(crate) facts: FactArgs,
    /// Spool directory for the summaries [default as for run].
    #[arg(long, value_name = "DIR", conflicts_with = "out_dir")]
    pub(crate) spool: Option<PathBuf>,
    /// Write each summary to DIR/<id>.summary instead of a spool.
    #[arg(long, value_name = "DIR")]
    pub(crate) out_dir: Option<PathBuf>,
    /// The programs (names looked up in PATH).
    #[arg(required = true, value_name = "PROGRAM")]
    pub(crate) programs: Vec<String>,
}

#[derive(Args, Debug)]
pub(crate) struct ShimRemoveArgs {
    #[command(flatten)]
    pub(crate) dir: ShimDirArgs,
    /// The programs whose wrappers go [default: all].
    #[arg(value_name = "PROGRAM")]
    pub(crate) programs: Vec<String>,
}

#[derive(Args, Debug)]
pub(crate) struct ShimExecArgs {
    /// The shim folder (its directive).
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// The name the program was called by.
    #[arg(long, value_name = "NAME")]
    pub(crate) name: OsString,
    /// The real program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub(crate) command: Vec<OsString>,
}

#[derive(Args, Debug)]
pub(crate) struct DeviceIdFileArgs {
    /// The file that keeps the device id [default: $EDGE_AGENT_DEVICE_ID_FILE,
    /// $XDG_STATE_HOME/edge-agent/device-id or ~/.local/state/edge-agent/device-id].
    #[arg(long, value_name = "FILE")]
    pub(crate) device_id_file: Option<PathBuf>,
}

impl DeviceIdFileArgs {
    pub(crate) fn path(&self) -> PathBuf {
        self.device_id_file
            .clone()
            .unwrap_or_else(device_id::default_path)
    }

    /// The id every summary carries, made on first use.
    pub(crate) fn load(&self) -> anyhow::Result<DeviceId> {
        device_id::load_or_create(&self.path())
    }
}

#[derive(Args, Debug)]
pub(crate) struct DeviceIdArgs {
    /// Replace the id with a new random one (also the way out of a corrupt
    /// file); summaries made before keep the old id.
    #[arg(long)]
    pub(crate) reset: bool,
    #[command(flatten)]
    pub(crate) file: DeviceIdFileArgs,
}

#[derive(Args, Debug)]
pub(crate) struct OutputArgs {
    /// Write the summary to this file (exactly the encoded bytes).
    #[arg(long, value_name = "FILE", conflicts_with = "spool")]
    pub(crate) out: Option<PathBuf>,
    /// Put the summary in this spool directory [default: $EDGE_AGENT_SPOOL,
    /// $XDG_STATE_HOME/edge-agent/spool or ~/.local/state/edge-agent/spool].
    #[arg(long, value_name = "DIR")]
    pub(crate) spool: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub(crate) struct FactArgs {
    /// A free fact for the summary (repeatable): KEY is 1-24 of
    /// [A-Za-z0-9._-], VALUE at most 40 bytes.
    #[arg(long = "fact", value_name = "KEY=VALUE")]
    pub(crate) facts: Vec<String>,
    /// Read more facts from FILE: KEY=VALUE lines, # comments.
    #[arg(long, value_name = "FILE")]
    pub(crate) facts_file: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub(crate) struct WaitArgs {
    /// Poll for each tracee stop for up to this many microseconds before
    /// sleeping (0: always sleep, as strace does). Spends up to that much
    /// of the agent's CPU per stop to spare the traced program idle-CPU
    /// wake-ups; 0 is faster for programs that start many short processes.
    #[arg(long, value_name = "MICROS", default_value_t = WaitPolicy::DEFAULT_SPIN_US)]
    pub(crate) spin_us: u64,
}

#[derive(Args, Debug)]
pub(crate) struct WindowArgs {
    /// Cut the trace into windows of this length (1s to 24h; a number with
    /// ms, s, m or h, bare: seconds), aligned to wall-clock multiples of
    /// it: one summary per window; `whole`: one summary for the whole trace
    /// [run: whole; attach and watch: 60s].
    #[arg(long, value_name = "DURATION", value_parser = parse_window)]
    pub(crate) window: Option<WindowChoice>,
}

/// What `--window` said.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WindowChoice {
    /// Windows of this length.
    Every(std::time::Duration),
    /// One summary for the whole trace.
    Whole,
}

impl WindowArgs {
    /// The windows of `attach` and `watch` (60 s unless told).
    pub(crate) fn live(&self) -> Option<std::time::Duration> {
        match self.window {
            None => Some(DEFAULT_LIVE_WINDOW),
            Some(WindowChoice::Every(d)) => Some(d),
            Some(WindowChoice::Whole) => None,
        }
    }

    /// The windows of `run` (the whole run unless told).
    pub(crate) fn run(&self) -> Option<std::time::Duration> {
        match self.window {
            Some(WindowChoice::Every(d)) => Some(d),
            None | Some(WindowChoice::Whole) => None,
        }
    }
}

/// A `--window` length: `10s`, `500ms`, `2m`, `1h`, `1.5s`, or a bare
/// number of seconds, 1 s to 24 h; or `whole`.
pub(crate) fn parse_window(text: &str) -> Result<WindowChoice, String> {
    if text.trim() == "whole" {
        return Ok(WindowChoice::Whole);
    }
    parse_window_length(text).map(WindowChoice::Every)
}

pub(crate) fn parse_window_length(text: &str) -> Result<std::time::Duration, String> {
    let length = agent_core::duration::parse(text, agent_core::duration::Bare::Seconds)
        .map_err(|e| format!("{:?} {e}", text.trim()))?;
    if !(1.0..=24.0 * 3600.0).contains(&length.as_secs_f64()) {
        return Err(format!("{text:?} is outside 1s to 24h"));
    }
    Ok(length)
}

/// The window attach and watch cut into when not told.
pub(crate) const DEFAULT_LIVE_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

impl WaitArgs {
    pub(crate) fn policy(&self) -> WaitPolicy {
        WaitPolicy::spin_us(self.spin_us)
    }
}

/// Which tracer records the syscalls.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BackendName {
    /// Stops the program at each syscall (works everywhere).
    Ptrace,
    /// A BPF program in the kernel: no stops (root, a kernel with BTF).
    Ebpf,
    /// eBPF when it loads here, else ptrace (one line on stderr says which).
    Auto,
    /// Wrappers of libc's functions inside the program, through
    /// LD_PRELOAD (`run` only; any user; a dynamically linked command).
    Preload,
}

#[derive(Args, Debug)]
pub(crate) struct BackendArgs {
    /// The tracer: ptrace, ebpf, preload, or auto (eBPF when the agent may
    /// load BPF programs and the kernel has BTF; for `run`, else preload
    /// when the command is dynamically linked and not set-ID; else ptrace;
    /// `--only` makes it ptrace). preload (`run` only) puts wrappers of
    /// libc's functions in the command's LD_PRELOAD: no stops, any user,
    /// but it sees only the calls made through libc's functions. One line
    /// on stderr says which auto chose and why.
    #[arg(long, value_enum, default_value_t = BackendName::Auto)]
    pub(crate) backend: BackendName,
}

impl BackendArgs {
    pub(crate) fn choice(&self) -> ebpf::Choice {
        match self.backend {
            BackendName::Ptrace => ebpf::Choice::Ptrace,
            BackendName::Ebpf => ebpf::Choice::Ebpf,
            BackendName::Auto => ebpf::Choice::Auto,
            BackendName::Preload => ebpf::Choice::Preload,
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) output: OutputArgs,
    /// Trace only these syscalls (comma-separated names), through a seccomp
    /// prefilter: the others run at full speed. The filter needs a tracer
    /// for as long as the program lives: on Ctrl-C/SIGTERM the agent stops
    /// recording but stays until the program ends, and the tracer is a
    /// child process of the agent, so kill -9 of the agent's PID leaves it
    /// serving the program. kill -9 of that tracer process (or of the
    /// whole process group) makes these syscalls (and
    /// close/dup2/dup3/close_range) fail with ENOSYS in the program from
    /// then on.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub(crate) only: Option<Vec<String>>,
    #[command(flatten)]
    pub(crate) facts: FactArgs,
    #[command(flatten)]
    pub(crate) device: DeviceIdFileArgs,
    #[command(flatten)]
    pub(crate) wait: WaitArgs,
    #[command(flatten)]
    pub(crate) window: WindowArgs,
    #[command(flatten)]
    pub(crate) backend: BackendArgs,
    /// Print the tracer's own counters (ptrace calls per syscall) on stderr.
    #[arg(long, hide = true)]
    pub(crate) stats: bool,
    /// The command and its arguments: after `--`, or from the first word
    /// that is not an option (an unknown option before it is an error, not
    /// the command).
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub(crate) command: Vec<OsString>,
}

#[derive(Args, Debug)]
pub(crate) struct AttachArgs {
    /// The process id.
    pub(crate) pid: i32,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
    /// Detach after this many seconds (default: when the process ends or on
    /// Ctrl-C).
    #[arg(long = "for", value_name = "SECONDS")]
    pub(crate) duration: Option<f64>,
    #[command(flatten)]
    pub(crate) facts: FactArgs,
    #[command(flatten)]
    pub(crate) device: DeviceIdFileArgs,
    #[command(flatten)]
    pub(crate) wait: WaitArgs,
    #[command(flatten)]
    pub(crate) window: WindowArgs,
    #[command(flatten)]
    pub(crate) backend: BackendArgs,
    #[arg(long, hide = true)]
    pub(crate) stats: bool,
}

#[derive(Args, Debug)]
pub(crate) struct WatchArgs {
    /// Text the command line must contain (e.g. the provider's host).
    #[arg(long = "match", value_name = "TEXT")]
    pub(crate) pattern: String,
    /// Light monitoring: record each matching run from /proc alone (start,
    /// duration, exit, CPU time, bytes read and written), with no ptrace
    /// and no stops; only the runs a per-device directive asks for are
    /// traced fully.
    #[arg(long)]
    pub(crate) light: bool,
    /// Spool directory for the summaries [default as for run].
    #[arg(long, value_name = "DIR", conflicts_with = "out_dir")]
    pub(crate) spool: Option<PathBuf>,
    /// Write each summary to DIR/<id>.summary instead of a spool.
    #[arg(long, value_name = "DIR")]
    pub(crate) out_dir: Option<PathBuf>,
    #[cfg(feature = "upload")]
    #[command(flatten)]
    pub(crate) directives: DirectiveArgs,
    #[command(flatten)]
    pub(crate) facts: FactArgs,
    #[command(flatten)]
    pub(crate) device: DeviceIdFileArgs,
    #[command(flatten)]
    pub(crate) wait: WaitArgs,
    #[command(flatten)]
    pub(crate) window: WindowArgs,
    /// How new programs are found: `connector` (the kernel tells of every
    /// exec at once; root), `scan` (/proc every 100 ms: short runs are
    /// missed, the others' first calls too), or `auto` (the connector
    /// where it may be used, else the scan).
    #[arg(long, value_enum, default_value_t = DiscoverName::Auto)]
    pub(crate) discover: DiscoverName,
    /// With ebpf, one BPF program counts every matched run in the kernel
    /// (never stopped); the same options as run and attach.
    #[command(flatten)]
    pub(crate) backend: BackendArgs,
}

/// `watch --discover`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DiscoverName {
    Auto,
    Connector,
    Scan,
}

/// `watch --server`: the service whose directives steer the watch.
#[cfg(feature = "upload")]
#[derive(Args, Debug)]
pub(crate) struct DirectiveArgs {
    /// Read the service's directives (`GET /v1/directives`) at start and
    /// every --directives-every; their `match` replaces --match while set.
    #[arg(long, value_name = "URL")]
    pub(crate) server: Option<String>,
    /// File holding the Bearer token (first line), as for upload.
    #[arg(long, value_name = "FILE", requires = "server")]
    pub(crate) token_file: Option<PathBuf>,
    /// PEM file of the CA to trust instead of Mozilla's roots.
    #[arg(long, value_name = "FILE", requires = "server")]
    pub(crate) ca: Option<PathBuf>,
    /// Accept only a server key with this SHA-256 of its SubjectPublicKeyInfo (base64; repeatable).
    #[arg(long = "pin-sha256", value_name = "BASE64", requires = "server")]
    pub(crate) pins: Vec<String>,
    /// Opt-in: let the service's directives steer the shims of DIR (its
    /// `match` and `only` go to DIR's directive; each program its
    /// `programs` list names gets a shim). Without it, directives never
    /// install shims.
    #[arg(long, value_name = "DIR", requires = "server")]
    pub(crate) shim_dir: Option<PathBuf>,
    /// Seconds between two reads of the directives (1 to 86400).
    #[arg(long, value_name = "SECS", default_value_t = 300, requires = "server",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) directives_every: u64,
}

#[derive(Args, Debug)]
pub(crate) struct ShowArgs {
    /// One JSON object per file, one per line.
    #[arg(long)]
    pub(crate) json: bool,
    /// Summary files.
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
}
