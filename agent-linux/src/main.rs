//! `edge-agent`: trace a program's syscalls into a summary of at most 2 KiB
//! (`run`, `attach`, `watch`), look at summaries (`show`), send the
//! spooled ones to the service (`upload`), and show or replace the device
//! id every summary carries (`device-id`). See docs/edge-agent.md.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agent_core::{Summary, SyscallId, MAX_ENCODED_LEN};
use agent_linux::device_id::{self, DeviceId};
use agent_linux::{
    ebpf, facts, relay, signals, AttachOptions, TraceOptions, Tracer, WaitPolicy, WatchOptions,
};
use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "edge-agent",
    version,
    about = "Trace a program's syscalls into a small summary"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
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
    Upload(uploader::cli::UploadArgs),
    /// Print this device's id (made on first use), or replace it.
    DeviceId(DeviceIdArgs),
    /// Wrappers that run chosen programs under the tracer from their first
    /// syscall, without privileges (a folder to put first in PATH).
    #[command(subcommand)]
    Shim(ShimCommand),
}

#[derive(Subcommand, Debug)]
enum ShimCommand {
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
struct ShimDirArgs {
    /// The shim folder [default: $EDGE_AGENT_SHIM_DIR,
    /// $XDG_STATE_HOME/edge-agent/shims or ~/.local/state/edge-agent/shims].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

impl ShimDirArgs {
    fn path(&self) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(agent_linux::shim::default_dir)
    }
}

#[derive(Args, Debug)]
struct ShimInstallArgs {
    #[command(flatten)]
    dir: ShimDirArgs,
    /// Trace a run only when its command line (name and arguments) contains
    /// this text [default: every run].
    #[arg(long = "match", value_name = "TEXT", default_value = "")]
    pattern: String,
    /// Trace only these syscalls (as `run --only`).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    only: Option<Vec<String>>,
    #[command(flatten)]
    facts: FactArgs,
    /// Spool directory for the summaries [default as for run].
    #[arg(long, value_name = "DIR", conflicts_with = "out_dir")]
    spool: Option<PathBuf>,
    /// Write each summary to DIR/<id>.summary instead of a spool.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// The programs (names looked up in PATH).
    #[arg(required = true, value_name = "PROGRAM")]
    programs: Vec<String>,
}

#[derive(Args, Debug)]
struct ShimRemoveArgs {
    #[command(flatten)]
    dir: ShimDirArgs,
    /// The programs whose wrappers go [default: all].
    #[arg(value_name = "PROGRAM")]
    programs: Vec<String>,
}

#[derive(Args, Debug)]
struct ShimExecArgs {
    /// The shim folder (its directive).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The name the program was called by.
    #[arg(long, value_name = "NAME")]
    name: OsString,
    /// The real program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

#[derive(Args, Debug)]
struct DeviceIdFileArgs {
    /// The file that keeps the device id [default: $EDGE_AGENT_DEVICE_ID_FILE,
    /// $XDG_STATE_HOME/edge-agent/device-id or ~/.local/state/edge-agent/device-id].
    #[arg(long, value_name = "FILE")]
    device_id_file: Option<PathBuf>,
}

impl DeviceIdFileArgs {
    fn path(&self) -> PathBuf {
        self.device_id_file
            .clone()
            .unwrap_or_else(device_id::default_path)
    }

    /// The id every summary carries, made on first use.
    fn load(&self) -> anyhow::Result<DeviceId> {
        device_id::load_or_create(&self.path())
    }
}

#[derive(Args, Debug)]
struct DeviceIdArgs {
    /// Replace the id with a new random one (also the way out of a corrupt
    /// file); summaries made before keep the old id.
    #[arg(long)]
    reset: bool,
    #[command(flatten)]
    file: DeviceIdFileArgs,
}

#[derive(Args, Debug)]
struct OutputArgs {
    /// Write the summary to this file (exactly the encoded bytes).
    #[arg(long, value_name = "FILE", conflicts_with = "spool")]
    out: Option<PathBuf>,
    /// Put the summary in this spool directory [default: $EDGE_AGENT_SPOOL,
    /// $XDG_STATE_HOME/edge-agent/spool or ~/.local/state/edge-agent/spool].
    #[arg(long, value_name = "DIR")]
    spool: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct FactArgs {
    /// A free fact for the summary (repeatable): KEY is 1-24 of
    /// [A-Za-z0-9._-], VALUE at most 40 bytes.
    #[arg(long = "fact", value_name = "KEY=VALUE")]
    facts: Vec<String>,
    /// Read more facts from FILE: KEY=VALUE lines, # comments.
    #[arg(long, value_name = "FILE")]
    facts_file: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct WaitArgs {
    /// Poll for each tracee stop for up to this many microseconds before
    /// sleeping (0: always sleep, as strace does). Spends up to that much
    /// of the agent's CPU per stop to spare the traced program idle-CPU
    /// wake-ups; 0 is faster for programs that start many short processes.
    #[arg(long, value_name = "MICROS", default_value_t = WaitPolicy::DEFAULT_SPIN_US)]
    spin_us: u64,
}

#[derive(Args, Debug)]
struct WindowArgs {
    /// Cut the trace into windows of this length (1s to 24h; a number with
    /// ms, s, m or h, bare: seconds), aligned to wall-clock multiples of
    /// it: one summary per window; `whole`: one summary for the whole trace
    /// [run: whole; attach and watch: 60s].
    #[arg(long, value_name = "DURATION", value_parser = parse_window)]
    window: Option<WindowChoice>,
}

/// What `--window` said.
#[derive(Clone, Copy, Debug)]
enum WindowChoice {
    /// Windows of this length.
    Every(std::time::Duration),
    /// One summary for the whole trace.
    Whole,
}

impl WindowArgs {
    /// The windows of `attach` and `watch` (60 s unless told).
    fn live(&self) -> Option<std::time::Duration> {
        match self.window {
            None => Some(DEFAULT_LIVE_WINDOW),
            Some(WindowChoice::Every(d)) => Some(d),
            Some(WindowChoice::Whole) => None,
        }
    }

    /// The windows of `run` (the whole run unless told).
    fn run(&self) -> Option<std::time::Duration> {
        match self.window {
            Some(WindowChoice::Every(d)) => Some(d),
            None | Some(WindowChoice::Whole) => None,
        }
    }
}

/// A `--window` length: `10s`, `500ms`, `2m`, `1h`, `1.5s`, or a bare
/// number of seconds, 1 s to 24 h; or `whole`.
fn parse_window(text: &str) -> Result<WindowChoice, String> {
    if text.trim() == "whole" {
        return Ok(WindowChoice::Whole);
    }
    parse_window_length(text).map(WindowChoice::Every)
}

fn parse_window_length(text: &str) -> Result<std::time::Duration, String> {
    let length = agent_core::duration::parse(text, agent_core::duration::Bare::Seconds)
        .map_err(|e| format!("{:?} {e}", text.trim()))?;
    if !(1.0..=24.0 * 3600.0).contains(&length.as_secs_f64()) {
        return Err(format!("{text:?} is outside 1s to 24h"));
    }
    Ok(length)
}

/// The window attach and watch cut into when not told.
const DEFAULT_LIVE_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

impl WaitArgs {
    fn policy(&self) -> WaitPolicy {
        WaitPolicy::spin_us(self.spin_us)
    }
}

/// Which tracer records the syscalls.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BackendName {
    /// Stops the program at each syscall (works everywhere).
    Ptrace,
    /// A BPF program in the kernel: no stops (root, a kernel with BTF).
    Ebpf,
    /// eBPF when it loads here, else ptrace (one line on stderr says which).
    Auto,
}

#[derive(Args, Debug)]
struct BackendArgs {
    /// The tracer: ptrace, ebpf, or auto (eBPF when the agent may load BPF
    /// programs and the kernel has BTF, else ptrace; `--only` makes it
    /// ptrace). One line on stderr says which auto chose and why.
    #[arg(long, value_enum, default_value_t = BackendName::Auto)]
    backend: BackendName,
}

impl BackendArgs {
    fn choice(&self) -> ebpf::Choice {
        match self.backend {
            BackendName::Ptrace => ebpf::Choice::Ptrace,
            BackendName::Ebpf => ebpf::Choice::Ebpf,
            BackendName::Auto => ebpf::Choice::Auto,
        }
    }
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    output: OutputArgs,
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
    only: Option<Vec<String>>,
    #[command(flatten)]
    facts: FactArgs,
    #[command(flatten)]
    device: DeviceIdFileArgs,
    #[command(flatten)]
    wait: WaitArgs,
    #[command(flatten)]
    window: WindowArgs,
    #[command(flatten)]
    backend: BackendArgs,
    /// Print the tracer's own counters (ptrace calls per syscall) on stderr.
    #[arg(long, hide = true)]
    stats: bool,
    /// The command and its arguments: after `--`, or from the first word
    /// that is not an option (an unknown option before it is an error, not
    /// the command).
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    command: Vec<OsString>,
}

#[derive(Args, Debug)]
struct AttachArgs {
    /// The process id.
    pid: i32,
    #[command(flatten)]
    output: OutputArgs,
    /// Detach after this many seconds (default: when the process ends or on
    /// Ctrl-C).
    #[arg(long = "for", value_name = "SECONDS")]
    duration: Option<f64>,
    #[command(flatten)]
    facts: FactArgs,
    #[command(flatten)]
    device: DeviceIdFileArgs,
    #[command(flatten)]
    wait: WaitArgs,
    #[command(flatten)]
    window: WindowArgs,
    #[command(flatten)]
    backend: BackendArgs,
    #[arg(long, hide = true)]
    stats: bool,
}

#[derive(Args, Debug)]
struct WatchArgs {
    /// Text the command line must contain (e.g. the provider's host).
    #[arg(long = "match", value_name = "TEXT")]
    pattern: String,
    /// Light monitoring: record each matching run from /proc alone (start,
    /// duration, exit, CPU time, bytes read and written), with no ptrace
    /// and no stops; only the runs a per-device directive asks for are
    /// traced fully.
    #[arg(long)]
    light: bool,
    /// Spool directory for the summaries [default as for run].
    #[arg(long, value_name = "DIR", conflicts_with = "out_dir")]
    spool: Option<PathBuf>,
    /// Write each summary to DIR/<id>.summary instead of a spool.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    #[cfg(feature = "upload")]
    #[command(flatten)]
    directives: DirectiveArgs,
    #[command(flatten)]
    facts: FactArgs,
    #[command(flatten)]
    device: DeviceIdFileArgs,
    #[command(flatten)]
    wait: WaitArgs,
    #[command(flatten)]
    window: WindowArgs,
    /// How new programs are found: `connector` (the kernel tells of every
    /// exec at once; root), `scan` (/proc every 100 ms: short runs are
    /// missed, the others' first calls too), or `auto` (the connector
    /// where it may be used, else the scan).
    #[arg(long, value_enum, default_value_t = DiscoverName::Auto)]
    discover: DiscoverName,
    /// With ebpf, one BPF program counts every matched run in the kernel
    /// (never stopped); the same options as run and attach.
    #[command(flatten)]
    backend: BackendArgs,
}

/// `watch --discover`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum DiscoverName {
    Auto,
    Connector,
    Scan,
}

/// `watch --server`: the service whose directives steer the watch.
#[cfg(feature = "upload")]
#[derive(Args, Debug)]
struct DirectiveArgs {
    /// Read the service's directives (`GET /v1/directives`) at start and
    /// every --directives-every; their `match` replaces --match while set.
    #[arg(long, value_name = "URL")]
    server: Option<String>,
    /// File holding the Bearer token (first line), as for upload.
    #[arg(long, value_name = "FILE", requires = "server")]
    token_file: Option<PathBuf>,
    /// PEM file of the CA to trust instead of Mozilla's roots.
    #[arg(long, value_name = "FILE", requires = "server")]
    ca: Option<PathBuf>,
    /// Accept only a server key with this SHA-256 of its SubjectPublicKeyInfo (base64; repeatable).
    #[arg(long = "pin-sha256", value_name = "BASE64", requires = "server")]
    pins: Vec<String>,
    /// Opt-in: let the service's directives steer the shims of DIR (its
    /// `match` and `only` go to DIR's directive; each program its
    /// `programs` list names gets a shim). Without it, directives never
    /// install shims.
    #[arg(long, value_name = "DIR", requires = "server")]
    shim_dir: Option<PathBuf>,
    /// Seconds between two reads of the directives (1 to 86400).
    #[arg(long, value_name = "SECS", default_value_t = 300, requires = "server",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    directives_every: u64,
}

#[derive(Args, Debug)]
struct ShowArgs {
    /// One JSON object per file, one per line.
    #[arg(long)]
    json: bool,
    /// Summary files.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    exit_code(dispatch(cli.command))
}

/// A command's exit: its own code, or 1 after its error on one line.
fn exit_code(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("edge-agent: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(a) => run(a),
        Command::Attach(a) => attach(a),
        Command::Watch(a) => watch(a),
        Command::Show(a) => show(a),
        #[cfg(feature = "upload")]
        Command::Upload(a) => uploader::cli::run(a).map(|o| ExitCode::from(o.exit_status())),
        Command::DeviceId(a) => show_device_id(a),
        Command::Shim(c) => shim(c),
    }
}

/// `shim install | remove | list | exec`.
fn shim(command: ShimCommand) -> anyhow::Result<ExitCode> {
    use agent_linux::shim::{self, ShimDirective};
    match command {
        ShimCommand::Install(a) => {
            let facts = collect_facts(&a.facts)?;
            if let Some(names) = &a.only {
                parse_only(names)?;
            }
            let directive = ShimDirective {
                match_text: a.pattern,
                only: a.only,
                facts,
                spool: a.spool,
                out_dir: a.out_dir,
            };
            let agent = std::env::current_exe()
                .and_then(std::fs::canonicalize)
                .context("cannot tell where the edge-agent binary is")?;
            let dir = a.dir.path();
            for script in shim::install(&dir, &agent, &a.programs, &directive)? {
                println!("{}", script.display());
            }
            let dir = script_dir(&dir);
            eprintln!(
                "edge-agent: add this line to your shell profile (~/.profile) so the shims come first:\nexport PATH={}:\"$PATH\"",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        ShimCommand::Remove(a) => {
            for name in shim::remove(&a.dir.path(), &a.programs)? {
                println!("removed {name}");
            }
            Ok(ExitCode::SUCCESS)
        }
        ShimCommand::List(a) => {
            let dir = a.path();
            let path_var = std::env::var_os("PATH").unwrap_or_default();
            for name in shim::list(&dir)? {
                match shim::real_program(&dir, &name, &path_var) {
                    Some(real) => println!("{name}\t{}", real.display()),
                    None => println!("{name}\t(no real program on PATH)"),
                }
            }
            match ShimDirective::load(&dir) {
                Ok(d) => println!(
                    "match {:?}  only {}",
                    d.match_text,
                    d.only.map_or("all".to_string(), |o| o.join(","))
                ),
                Err(e) => println!("no directive: {e:#}"),
            }
            Ok(ExitCode::SUCCESS)
        }
        ShimCommand::Exec(a) => Ok(shim_exec(a)),
    }
}

/// The shim folder as the scripts name it (absolute).
fn script_dir(dir: &Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// `shim exec`: the command traced as `run` would trace it when its command
/// line matches the folder's directive, else (or when anything on the
/// agent's side fails before the program starts) the command itself. The
/// exit status is always the program's.
fn shim_exec(a: ShimExecArgs) -> ExitCode {
    use agent_linux::shim::{exec_plainly, ShimDirective};
    let untraced = |why: anyhow::Error| {
        eprintln!(
            "edge-agent shim: {why:#}; running {} untraced",
            a.name.to_string_lossy()
        );
        exec_plainly(&a.command, &a.name)
    };
    let directive = match ShimDirective::load(&a.dir) {
        Ok(d) => d,
        Err(e) => return untraced(e),
    };
    if !directive.matches(&a.name, a.command.get(1..).unwrap_or_default()) {
        return exec_plainly(&a.command, &a.name);
    }
    let prepared = (|| -> anyhow::Result<(TraceOptions, Sink)> {
        let only = directive.only.as_deref().map(parse_only).transpose()?;
        facts::build(&Default::default(), "", &directive.facts)?;
        let sink = Sink::open(None, directive.spool.clone(), directive.out_dir.clone())?;
        let opts = TraceOptions {
            command: a.command.clone(),
            only,
            facts: directive.facts.clone(),
            platform: None,
            wait: WaitPolicy::default(),
            window: None,
            device: DeviceIdFileArgs {
                device_id_file: None,
            }
            .load()?,
        };
        Ok((opts, sink))
    })();
    let (opts, sink) = match prepared {
        Ok(p) => p,
        Err(e) => return untraced(e),
    };
    let traced = |opts: &TraceOptions, sink: Sink| -> ExitCode {
        match trace_and_save(Tracer::Ptrace, opts, sink, false, true) {
            Ok(code) => code,
            Err(e) => untraced(e),
        }
    };
    if opts.only.is_some() {
        return match relay::run_in_tracer_process(|| traced(&opts, sink)) {
            Ok(code) => code,
            Err(e) => untraced(e),
        };
    }
    traced(&opts, sink)
}

/// `device-id [--reset]`: the id in hex, on stdout.
fn show_device_id(a: DeviceIdArgs) -> anyhow::Result<ExitCode> {
    let path = a.file.path();
    let id = if a.reset {
        device_id::reset(&path)?
    } else {
        device_id::load_or_create(&path)?
    };
    println!("{}", device_id::to_hex(&id));
    Ok(ExitCode::SUCCESS)
}

/// Where summaries go.
enum Sink {
    /// A regular file, written whole or not at all (temporary + rename).
    File(PathBuf),
    /// A device or FIFO given as `--out`, written in place.
    Stream(PathBuf),
    Dir(PathBuf),
    #[cfg(feature = "upload")]
    Spool(uploader::spool::Spool),
}

impl Sink {
    /// Opens the destination, failing now (before any tracing) if it cannot
    /// be written.
    fn open(
        out: Option<PathBuf>,
        spool: Option<PathBuf>,
        out_dir: Option<PathBuf>,
    ) -> anyhow::Result<Sink> {
        if let Some(path) = out {
            return match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => bail!("--out {}: is a folder", path.display()),
                // A device or FIFO (/dev/stdout, a pipe) is written in place.
                Ok(m) if !m.is_file() => {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    Ok(Sink::Stream(path))
                }
                // A file is replaced by a rename once the summary is
                // complete: its folder must take new files. Through a
                // symlink, the file it points to is replaced, not the link.
                _ => {
                    let target = match std::fs::symlink_metadata(&path) {
                        Ok(m) if m.file_type().is_symlink() => {
                            std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone())
                        }
                        _ => path.clone(),
                    };
                    probe(parent_dir(&target))
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    Ok(Sink::File(target))
                }
            };
        }
        if let Some(dir) = out_dir {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            probe_writable(&dir)?;
            return Ok(Sink::Dir(dir));
        }
        open_spool(spool)
    }

    /// Stores a summary. `last`: the trace's last one (the run's end),
    /// which a `--out` file takes; the windows before it go to the file's
    /// name with their index before the extension (`run.summary` ->
    /// `run.3.summary`). A stream takes each in turn.
    fn put(&self, summary: &mut Summary, last: bool) -> anyhow::Result<PathBuf> {
        match self {
            Sink::File(path) => {
                let path = if last {
                    path.clone()
                } else {
                    window_path(path, summary.run.window)
                };
                write_summary(&path, summary)?;
                Ok(path)
            }
            Sink::Stream(path) => {
                let bytes = encode(summary)?;
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .and_then(|mut f| f.write_all(&bytes))
                    .with_context(|| format!("cannot write {}", path.display()))?;
                Ok(path.clone())
            }
            Sink::Dir(dir) => {
                let path = dir.join(format!("{}.summary", summary_view::id_hex(&summary.id)));
                write_summary(&path, summary)?;
                Ok(path)
            }
            #[cfg(feature = "upload")]
            Sink::Spool(spool) => Ok(spool.put(summary)?),
        }
    }
}

/// Where window `index` of a trace given `--out FILE` goes: FILE with the
/// index before its extension (`run.summary` -> `run.3.summary`, `run` ->
/// `run.3`).
fn window_path(path: &Path, index: u32) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let named = match name.rfind('.') {
        Some(dot) if dot > 0 => format!("{}.{index}{}", &name[..dot], &name[dot..]),
        _ => format!("{name}.{index}"),
    };
    path.with_file_name(named)
}

#[cfg(feature = "upload")]
fn open_spool(spool: Option<PathBuf>) -> anyhow::Result<Sink> {
    let dir = spool.unwrap_or_else(uploader::cli::default_spool_dir);
    let s = uploader::spool::Spool::open(&dir)?;
    probe_writable(&dir)?;
    Ok(Sink::Spool(s))
}

#[cfg(not(feature = "upload"))]
fn open_spool(spool: Option<PathBuf>) -> anyhow::Result<Sink> {
    match spool {
        Some(_) => bail!("this build has no spool support (feature `upload`); use --out FILE"),
        None => bail!("give --out FILE"),
    }
}

/// Fails with the OS reason when `dir` cannot take a new file.
fn probe_writable(dir: &Path) -> anyhow::Result<()> {
    probe(dir).with_context(|| format!("cannot write to {}", dir.display()))
}

/// Creates and removes a hidden file in `dir`.
fn probe(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".edge-agent-probe-{}", std::process::id()));
    std::fs::File::create(&probe)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The folder a file path lives in (`.` for a bare name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn encode(summary: &mut Summary) -> anyhow::Result<Vec<u8>> {
    let mut buf = [0u8; MAX_ENCODED_LEN];
    let bytes = summary
        .encode(&mut buf)
        .map_err(|e| anyhow::anyhow!("cannot encode the summary: {e}"))?;
    Ok(bytes.to_vec())
}

/// Writes the summary to a hidden temporary file in `path`'s folder, syncs
/// it and renames it to `path`: `path` is either the whole summary or
/// untouched (never an empty or partial file after a failure).
fn write_summary(path: &Path, summary: &mut Summary) -> anyhow::Result<()> {
    let bytes = encode(summary)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = parent_dir(path).join(format!(
        ".{}.tmp-{}",
        name.unwrap_or_default(),
        std::process::id()
    ));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(&bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.with_context(|| format!("cannot write {}", path.display()))
}

fn collect_facts(args: &FactArgs) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if let Some(file) = &args.facts_file {
        out.extend(facts::read_facts_file(file)?);
    }
    for f in &args.facts {
        out.push(facts::parse_fact(f)?);
    }
    // Validate now: a bad fact is an error before anything runs.
    facts::build(&Default::default(), "", &out)?;
    Ok(out)
}

/// The `--only` names (repeated options and comma-separated lists alike),
/// checked by the rule the service's directives share
/// (`agent_core::validate_only_list`).
fn parse_only(names: &[String]) -> anyhow::Result<Vec<SyscallId>> {
    let list = names.join(",");
    agent_core::validate_only_list(&list).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(agent_core::only_list_ids(&list).collect())
}

/// With `--stats`: a summary's encoded size, per window.
fn print_size(summary: &Summary) {
    let mut copy = summary.clone();
    match encode(&mut copy) {
        Ok(bytes) => eprintln!(
            "edge-agent stats: window={} events={} encoded_bytes={}",
            summary.run.window,
            summary.run.events,
            bytes.len()
        ),
        Err(e) => eprintln!("edge-agent stats: window={}: {e:#}", summary.run.window),
    }
}

fn want_stats(flag: bool) -> bool {
    flag || std::env::var_os("EDGE_AGENT_STATS").is_some_and(|v| !v.is_empty() && v != "0")
}

fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let facts = collect_facts(&a.facts)?;
    let only = a.only.as_deref().map(parse_only).transpose()?;
    let device = a.device.load()?;
    let sink = Sink::open(a.output.out, a.output.spool, None)?;
    let stats = want_stats(a.stats);
    let opts = TraceOptions {
        command: a.command,
        only,
        facts,
        platform: None,
        wait: a.wait.policy(),
        window: a.window.run(),
        device,
    };
    let needs_ptrace = opts
        .only
        .as_ref()
        .map(|_| "--only needs ptrace's seccomp prefilter");
    if needs_ptrace.is_none() && !matches!(a.backend.choice(), ebpf::Choice::Ptrace) {
        // A stop asked while the BPF programs load (tens of ms; more in a
        // debug build) detaches as soon as the command runs, rather than
        // killing the agent with the default action.
        signals::install().context("cannot install signal handlers")?;
    }
    let tracer = Tracer::choose(a.backend.choice(), needs_ptrace)?;
    if opts.only.is_some() {
        // A seccomp-filtered program needs its tracer until it ends: the
        // tracer runs in a process of its own, out of reach of a `kill -9`
        // of the PID the user sees (relay.rs).
        return relay::run_in_tracer_process(|| {
            exit_code(trace_and_save(tracer, &opts, sink, stats, false))
        });
    }
    trace_and_save(tracer, &opts, sink, stats, false)
}

/// Traces the command on `tracer`, saves its summaries, and ends as the
/// program ended. With `plain_on_failure` (a shim), a tracer that cannot
/// start (ptrace refused, no seccomp) runs the command untraced instead of
/// failing.
fn trace_and_save(
    tracer: Tracer,
    opts: &TraceOptions,
    sink: Sink,
    stats: bool,
    plain_on_failure: bool,
) -> anyhow::Result<ExitCode> {
    signals::install().context("cannot install signal handlers")?;
    let mut traced = match tracer.start(opts) {
        Ok(t) => t,
        Err(e) if plain_on_failure => {
            eprintln!("edge-agent shim: {e:#}; running the program untraced");
            let name = opts.command.first().cloned().unwrap_or_default();
            return Ok(agent_linux::shim::exec_plainly(&opts.command, &name));
        }
        Err(e) => return Err(e),
    };
    let mut summary = traced.trace(&mut |mut w| save_run_summary(&sink, stats, &mut w, false))?;
    if stats {
        eprintln!("{}", traced.stats());
    }
    save_run_summary(&sink, stats, &mut summary, true);
    if signals::stop_requested().is_some() {
        if traced.is_serving() {
            eprintln!(
                "edge-agent: stopped recording; serving the program's --only syscalls until it ends (without a tracer they would fail)"
            );
        } else {
            eprintln!("edge-agent: detached; the program runs on");
        }
    }
    let status = traced.wait()?;
    Ok(relay::end_as(status))
}

/// Saves one of a run's summaries (`last`: the run's end, else a window).
/// The program's status always wins: a summary that cannot be saved is one
/// line on stderr, not the agent's exit status.
fn save_run_summary(sink: &Sink, stats: bool, summary: &mut Summary, last: bool) {
    if stats {
        print_size(summary);
    }
    if let Err(e) = sink.put(summary, last) {
        eprintln!("edge-agent: the summary was not saved: {e:#}");
    }
}

fn attach(a: AttachArgs) -> anyhow::Result<ExitCode> {
    let facts = collect_facts(&a.facts)?;
    let duration = match a.duration {
        Some(s) if !(s > 0.0 && s.is_finite()) => bail!("--for needs a positive number of seconds"),
        Some(s) => Some(std::time::Duration::from_secs_f64(s)),
        None => None,
    };
    let device = a.device.load()?;
    let sink = Sink::open(a.output.out, a.output.spool, None)?;
    signals::install().context("cannot install signal handlers")?;
    let stats = want_stats(a.stats);
    let opts = AttachOptions {
        pid: a.pid,
        facts,
        platform: None,
        duration,
        wait: a.wait.policy(),
        window: a.window.live(),
        device,
    };
    let mut failures = 0u32;
    let mut on_window = |mut w: Summary| {
        if stats {
            print_size(&w);
        }
        if let Err(e) = sink.put(&mut w, false) {
            failures += 1;
            eprintln!("edge-agent: window {} was not saved: {e:#}", w.run.window);
        }
    };
    // The target's own errors first: one line, with no backend chosen.
    agent_linux::trace::check_attach_target(opts.pid)?;
    let tracer = Tracer::choose(a.backend.choice(), None)?;
    let (mut summary, counted) = tracer.attach(&opts, &mut on_window)?;
    if stats {
        print_size(&summary);
        eprintln!("{counted}");
    }
    sink.put(&mut summary, true)?;
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn watch(a: WatchArgs) -> anyhow::Result<ExitCode> {
    let facts = collect_facts(&a.facts)?;
    let device = a.device.load()?;
    let sink = Sink::open(None, a.spool, a.out_dir)?;
    #[cfg(feature = "upload")]
    let mut changes = directive_changes(&a.directives, &a.pattern, &device)?;
    #[cfg(not(feature = "upload"))]
    let mut changes = agent_linux::directives::Update::default;
    signals::install().context("cannot install signal handlers")?;
    // Summaries are stored by a thread of their own, through a bounded
    // queue: a storm of runs sheds (and counts) what the store cannot keep
    // up with, rather than growing the agent (`store_queue`).
    let mut queue = agent_linux::store_queue::StoreQueue::start(move |s| {
        let path = sink.put(s, true)?;
        if s.kind == agent_core::Kind::Light {
            eprintln!(
                "edge-agent: {} (light record: {:?}, {} ms) -> {}",
                s.facts.program,
                s.run.exit,
                s.run.duration_ns / 1_000_000,
                path.display()
            );
        } else {
            eprintln!(
                "edge-agent: {} ({} syscalls) -> {}",
                s.facts.program,
                s.run.events,
                path.display()
            );
        }
        Ok(())
    })
    .context("cannot start the thread that stores summaries")?;
    let mut on_summary = |s: Summary| queue.put(s);
    let watched = agent_linux::watch_steered(
        &WatchOptions {
            pattern: a.pattern,
            facts,
            wait: a.wait.policy(),
            window: a.window.live(),
            device,
            light: a.light,
            backend: a.backend.choice(),
            discover: match a.discover {
                DiscoverName::Auto => agent_linux::Discover::Auto,
                DiscoverName::Connector => agent_linux::Discover::Connector,
                DiscoverName::Scan => agent_linux::Discover::Scan,
            },
            ..Default::default()
        },
        &mut changes,
        &mut on_summary,
    );
    let stored = queue.finish()?;
    watched?;
    Ok(if stored.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// With `--server`, the changes the service's directives make (the text
/// to match, the per-device directives; fetched with this device's id by
/// a thread of their own, taken here without waiting); without, none.
#[cfg(feature = "upload")]
fn directive_changes(
    a: &DirectiveArgs,
    pattern: &str,
    device: &DeviceId,
) -> anyhow::Result<Box<dyn FnMut() -> agent_linux::directives::Update>> {
    let Some(server) = &a.server else {
        return Ok(Box::new(agent_linux::directives::Update::default));
    };
    let endpoint = uploader::cli::server_endpoint(
        server,
        a.token_file.as_deref(),
        a.ca.clone(),
        &a.pins,
        std::time::Duration::from_secs(60),
    )?;
    let client = uploader::transport::Client::new(endpoint)?;
    let every = std::time::Duration::from_secs(a.directives_every);
    let shims = match &a.shim_dir {
        // Refused at the start when others could write it: the agent
        // writes it (as root, often) with each directive.
        Some(dir) => Some((
            {
                let dir = script_dir(dir);
                agent_linux::shim_folder::check_existing_part(&dir)?;
                dir
            },
            std::env::current_exe()
                .and_then(std::fs::canonicalize)
                .context("cannot tell where the edge-agent binary is")?,
        )),
        None => None,
    };
    // The shims are steered on the fetcher thread: writing a folder of
    // scripts is no work for the tracer thread.
    let steer_shims = move |json: &[u8]| {
        if let Some((dir, agent)) = &shims {
            match agent_linux::shim::steer(dir, agent, json) {
                Ok(Some(what)) => eprintln!("edge-agent: shims in {}: {what}", dir.display()),
                Ok(None) => {}
                Err(e) => eprintln!("edge-agent: shims not steered: {e:#}"),
            }
        }
    };
    let directives = agent_linux::directives::spawn_fetcher(
        client,
        every,
        Some(device_id::to_hex(device)),
        Box::new(steer_shims),
    )
    .context("cannot start the directives thread")?;
    let mut steering = agent_linux::directives::WatchSteering::new(pattern);
    Ok(Box::new(move || {
        // Only the latest directive matters; several may have queued up.
        // They arrive parsed: nothing here is in proportion to a body.
        let mut change = agent_linux::directives::Update::default();
        while let Ok(directive) = directives.try_recv() {
            let update = steering.apply_parsed(directive);
            change.pattern = update.pattern.or(change.pattern);
            change.device = update.device.or(change.device);
        }
        change
    }))
}

fn show(a: ShowArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    for (i, path) in a.files.iter().enumerate() {
        // Reads at most the summary cap (plus one byte to tell a bigger
        // file), whatever the path points to.
        let summary = summary_view::file::read_summary(path)?;
        if a.json {
            writeln!(out, "{}", summary_view::to_json(&summary))?;
        } else {
            if a.files.len() > 1 {
                if i > 0 {
                    writeln!(out)?;
                }
                writeln!(out, "== {}", path.display())?;
            }
            write!(out, "{}", summary_view::table(&summary))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
