//! `edge-agent upload`: arguments, the `--once` run for cron and the daemon
//! loop.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::conditions::{Conditions, Unconditional};
use crate::retry::Backoff;
use crate::spool::Spool;
use crate::tls::{parse_pin, TrustOptions};
use crate::transport::{Client, Endpoint, Timeouts};
use crate::upload::{run_pass, PassOptions, PassReport};
use crate::window::{spread_delay, Position, Window};

/// Arguments of `edge-agent upload`.
#[derive(clap::Args, Debug, Clone)]
pub struct UploadArgs {
    /// Service base URL: https://HOST[:PORT] (plain http:// only to a loopback address).
    #[arg(long, value_name = "URL")]
    pub server: String,
    /// File holding the Bearer token (first line).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// PEM file of the CA to trust instead of Mozilla's roots (a private service).
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// Accept only a server key with this SHA-256 of its SubjectPublicKeyInfo (base64; repeatable).
    #[arg(long = "pin-sha256", value_name = "BASE64")]
    pub pins: Vec<String>,
    /// Upload only between these local times (may wrap past midnight), starting at a random
    /// moment [default: the window of the service's directive, else any time].
    #[arg(long, value_name = "HH:MM-HH:MM", conflicts_with = "now")]
    pub window: Option<Window>,
    /// Upload now, whatever the time (ignores the directive's window too).
    #[arg(long)]
    pub now: bool,
    /// Spool directory [default: $EDGE_AGENT_SPOOL, $XDG_STATE_HOME/edge-agent/spool or ~/.local/state/edge-agent/spool].
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// One pass, then exit (for cron): 0 when everything due was sent or nothing was due.
    #[arg(long)]
    pub once: bool,
    /// With --once: most seconds to spend waiting between tries in total; a retry due later
    /// (a long Retry-After, say) ends the run at once, the rest stays in the spool.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub once_wait: u64,
    /// Summaries per request (1 to 256).
    #[arg(long, value_name = "N", default_value_t = 50,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub batch: u16,
    /// Tries per batch before giving up this pass.
    #[arg(long, value_name = "N", default_value_t = 6,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub tries: u32,
    /// First retry delay, ms (doubles per try, with jitter, up to 5 minutes).
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub backoff_ms: u64,
    /// Seconds to wait for the service's answer to a batch (at least 1).
    #[arg(long, value_name = "SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// Daemon: seconds between passes.
    #[arg(long, value_name = "SECS", default_value_t = 900)]
    pub interval: u64,
    /// Upload on battery power too (Linux normally waits for AC power).
    #[arg(long)]
    pub ignore_power: bool,
    /// Seconds to wait for another uploader that is sending from the same spool.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub lock_wait: u64,
    /// Do not wait a random delay inside the window (a single device; tests).
    #[arg(long)]
    pub no_spread: bool,
}

/// Most a retry waits.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// The default spool directory: `$EDGE_AGENT_SPOOL`, else
/// `$XDG_STATE_HOME/edge-agent/spool`, else `~/.local/state/edge-agent/spool`,
/// else (Android, no HOME) `/data/local/tmp/edge-agent/spool`.
pub fn default_spool_dir() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = env("EDGE_AGENT_SPOOL") {
        return dir.into();
    }
    if let Some(state) = env("XDG_STATE_HOME") {
        return PathBuf::from(state).join("edge-agent/spool");
    }
    if let Some(home) = env("HOME") {
        return PathBuf::from(home).join(".local/state/edge-agent/spool");
    }
    PathBuf::from("/data/local/tmp/edge-agent/spool")
}

/// How `upload --once` ended (the daemon only ends by an error): what the
/// caller reports, as its exit status (`edge-agent upload`) or return value
/// (the JNI's `upload`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Everything due was sent, or nothing was due (held back, outside the
    /// window).
    Done,
    /// Something due is still in the spool, or was refused or set aside
    /// (each said on stderr).
    Incomplete,
}

impl Outcome {
    /// The exit status that says it: 0 done, 1 incomplete.
    pub fn exit_status(self) -> u8 {
        match self {
            Outcome::Done => 0,
            Outcome::Incomplete => 1,
        }
    }
}

/// Runs `edge-agent upload`.
pub fn run(args: UploadArgs) -> anyhow::Result<Outcome> {
    let conditions: Box<dyn Conditions> = if args.ignore_power {
        Box::new(Unconditional)
    } else {
        crate::conditions::platform()
    };
    run_with(args, conditions.as_ref())
}

/// Runs `edge-agent upload` with the platform's conditions (Android passes
/// its charging / unmetered-network check here).
pub fn run_with(args: UploadArgs, conditions: &dyn Conditions) -> anyhow::Result<Outcome> {
    let client = Client::new(endpoint(&args)?)?;
    if let Some(dir) = &args.spool {
        // A folder named on the command line that does not exist is a
        // mistake (a typo, an unmounted disk): nothing there to send.
        if !dir.is_dir() {
            if dir.exists() {
                bail!("--spool {}: not a folder", dir.display());
            }
            bail!("--spool {}: the folder does not exist", dir.display());
        }
    }
    let spool_dir = args.spool.clone().unwrap_or_else(default_spool_dir);
    let spool = Spool::open(&spool_dir)?;
    let mut pass = PassOptions {
        batch: usize::from(args.batch),
        attempts: args.tries,
        backoff: Backoff {
            base: Duration::from_millis(args.backoff_ms),
            max: MAX_BACKOFF,
        },
        deadline: None,
        lock_wait: Duration::from_secs(args.lock_wait),
        wait_limit: args.once.then(|| Duration::from_secs(args.once_wait)),
    };
    if args.once {
        return once(&args, &spool, &client, &mut pass, conditions);
    }
    daemon(&args, &spool, &client, &mut pass, conditions)
}

/// `--window`, else (without `--now`) the window of the service's
/// directive stored by the last upload, else none.
fn effective_window(args: &UploadArgs, spool: &Spool) -> Option<Window> {
    match (args.window, args.now) {
        (Some(w), _) => Some(w),
        (None, true) => None,
        (None, false) => directive_window(spool),
    }
}

/// The `window` of the directives stored by the last upload, if valid:
/// the file is read up to the directive cap (`wire::directive`), and one
/// beyond the caps is ignored, as the fetch refuses it.
fn directive_window(spool: &Spool) -> Option<Window> {
    use std::io::Read;
    let path = spool.dir().join(crate::spool::DIRECTIVES_FILE);
    let cap = wire::directive::MAX_BODY_BYTES;
    let mut text = Vec::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(cap as u64 + 1).read_to_end(&mut text))
        .ok()?;
    if text.len() > cap {
        eprintln!(
            "upload: ignoring the directives in {}: larger than {cap} bytes",
            path.display()
        );
        return None;
    }
    let directives = match wire::directive::read(&text) {
        Ok(directives) => directives,
        Err(why) => {
            eprintln!(
                "upload: ignoring the directives in {}: {why}",
                path.display()
            );
            return None;
        }
    };
    match directives.daily_window()? {
        Ok(w) => Some(Window::from(w)),
        Err(e) => {
            eprintln!(
                "upload: ignoring the directive's window in {}: {e}",
                path.display()
            );
            None
        }
    }
}

fn endpoint(args: &UploadArgs) -> anyhow::Result<Endpoint> {
    server_endpoint(
        &args.server,
        args.token_file.as_deref(),
        args.ca.clone(),
        &args.pins,
        Duration::from_secs(args.timeout),
    )
}

/// How to reach `server` with `upload`'s token and trust options
/// (`--token-file`, `--ca`, `--pin-sha256`); `watch --server` fetches its
/// directives through the same.
pub fn server_endpoint(
    server: &str,
    token_file: Option<&std::path::Path>,
    ca: Option<PathBuf>,
    pins: &[String],
    response_timeout: Duration,
) -> anyhow::Result<Endpoint> {
    let token = match token_file {
        Some(path) => Some(read_token(path)?),
        None => None,
    };
    let pins = pins
        .iter()
        .map(|p| parse_pin(p).context("--pin-sha256"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Endpoint {
        base: server.to_string(),
        token,
        trust: TrustOptions { ca_file: ca, pins },
        timeouts: Timeouts::with_response(response_timeout),
    })
}

fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--token-file {}: cannot read", path.display()))?;
    let token = text.lines().next().unwrap_or("").trim();
    if token.is_empty() {
        bail!("--token-file {}: the file is empty", path.display());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "--token-file {}: the token has spaces or control characters",
            path.display()
        );
    }
    Ok(token.to_string())
}

/// Whether to send now: `Ok(deadline)` to go (the window's end, if any),
/// `Err(why)` when nothing is due now.
fn due_now(args: &UploadArgs, spool: &Spool, spread: bool) -> Result<Option<Instant>, String> {
    let Some(window) = effective_window(args, spool) else {
        return Ok(None);
    };
    match window.position_now() {
        Position::Closed { opens_in } => Err(format!(
            "outside the upload window {window} (opens in {})",
            human(opens_in)
        )),
        Position::Open { remaining } => {
            let end = Instant::now() + remaining;
            if spread && !args.no_spread {
                let delay = spread_delay(remaining);
                eprintln!("upload: window {window} open; starting in {}", human(delay));
                std::thread::sleep(delay);
            }
            Ok(Some(end))
        }
    }
}

fn once(
    args: &UploadArgs,
    spool: &Spool,
    client: &Client,
    pass: &mut PassOptions,
    conditions: &dyn Conditions,
) -> anyhow::Result<Outcome> {
    match due_now(args, spool, true) {
        Err(why) => {
            eprintln!("upload: nothing due: {why}");
            return Ok(Outcome::Done);
        }
        Ok(deadline) => pass.deadline = deadline,
    }
    if let Some(why) = conditions.hold_back() {
        eprintln!("upload: nothing due: held back: {why}");
        return Ok(Outcome::Done);
    }
    let report = run_pass(spool, client, pass)?;
    Ok(if print_report(&report) {
        Outcome::Done
    } else {
        Outcome::Incomplete
    })
}

fn daemon(
    args: &UploadArgs,
    spool: &Spool,
    client: &Client,
    pass: &mut PassOptions,
    conditions: &dyn Conditions,
) -> anyhow::Result<Outcome> {
    let interval = Duration::from_secs(args.interval.max(1));
    // Spread only when the window opens (or at start-up inside it), not
    // before every pass.
    let mut spread = true;
    loop {
        match due_now(args, spool, spread) {
            Err(why) => {
                let wait = match effective_window(args, spool).map(|w| w.position_now()) {
                    Some(Position::Closed { opens_in }) => opens_in,
                    _ => interval,
                };
                eprintln!("upload: {why}; sleeping {}", human(wait));
                std::thread::sleep(wait);
                spread = true;
                continue;
            }
            Ok(deadline) => pass.deadline = deadline,
        }
        spread = false;
        if let Some(why) = conditions.hold_back() {
            eprintln!(
                "upload: held back: {why}; checking again in {}",
                human(interval)
            );
        } else {
            let report = run_pass(spool, client, pass)?;
            print_report(&report);
        }
        std::thread::sleep(interval);
    }
}

/// Prints what a pass did; true when everything due was sent.
fn print_report(report: &PassReport) -> bool {
    for s in &report.set_aside {
        // The reason names what is wrong ("not a valid summary: ...",
        // "file name ... is not ...").
        eprintln!("upload: set aside {} ({})", s.path.display(), s.reason);
    }
    for (id, reason) in &report.rejected {
        eprintln!(
            "upload: the service refused summary {} for good: {reason} (moved to rejected/)",
            hex::encode(id)
        );
    }
    if report.lock_busy {
        eprintln!("upload: another uploader is still sending from this spool; nothing sent");
        return false;
    }
    if let Some(warning) = &report.directives_warning {
        eprintln!("upload: warning: directives not updated: {warning}");
    }
    match &report.failure {
        Some(failure) => {
            eprintln!(
                "upload: sent {}, {} left in the spool: {failure}",
                report.sent, report.unsent
            );
            false
        }
        None => {
            eprintln!(
                "upload: sent {} summaries in {} requests",
                report.sent, report.requests
            );
            report.rejected.is_empty() && report.set_aside.is_empty()
        }
    }
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}.{:01}s", s, d.subsec_millis() / 100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cmd {
        #[command(flatten)]
        args: UploadArgs,
    }

    fn args(extra: &[&str]) -> UploadArgs {
        let mut argv = vec!["upload", "--server", "https://edge.example"];
        argv.extend_from_slice(extra);
        Cmd::try_parse_from(argv).unwrap().args
    }

    #[test]
    fn outcomes_are_exit_statuses() {
        assert_eq!(Outcome::Done.exit_status(), 0);
        assert_eq!(Outcome::Incomplete.exit_status(), 1);
    }

    #[test]
    fn directive_window_applies_unless_overridden() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(dir.path()).unwrap();
        assert_eq!(effective_window(&args(&[]), &spool), None);
        spool
            .store_directives(br#"{"group": "g", "window": "01:00-04:00"}"#)
            .unwrap();
        let directive: Window = "01:00-04:00".parse().unwrap();
        assert_eq!(effective_window(&args(&[]), &spool), Some(directive));
        assert_eq!(effective_window(&args(&["--now"]), &spool), None);
        let own: Window = "22:00-23:00".parse().unwrap();
        assert_eq!(
            effective_window(&args(&["--window", "22:00-23:00"]), &spool),
            Some(own)
        );
        spool
            .store_directives(br#"{"group": "g", "window": "25:00-04:00"}"#)
            .unwrap();
        assert_eq!(
            effective_window(&args(&[]), &spool),
            None,
            "invalid: ignored"
        );
    }

    #[test]
    fn window_and_now_conflict_and_batch_is_bounded() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["upload", "--server", "https://edge.example"];
            argv.extend_from_slice(extra);
            Cmd::try_parse_from(argv)
        };
        assert!(parse(&["--now", "--window", "01:00-02:00"]).is_err());
        assert!(parse(&["--batch", "0"]).is_err());
        assert!(parse(&["--batch", "257"]).is_err());
        assert!(parse(&["--window", "1-2"]).is_err());
        assert!(
            parse(&["--timeout", "0"]).is_err(),
            "--timeout 0 is an error"
        );
        assert!(parse(&["--timeout", "1"]).is_ok());
    }

    #[test]
    fn a_missing_spool_folder_is_an_error_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let mut a = args(&["--once", "--now"]);
        a.server = "http://127.0.0.1:9".into();
        a.spool = Some(missing.clone());
        let err = run_with(a, &Unconditional).unwrap_err().to_string();
        assert!(err.contains("does not exist"), "{err}");
        assert!(!missing.exists(), "not created");
    }

    #[test]
    fn token_file_checks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "abc123\n# comment\n").unwrap();
        assert_eq!(read_token(&path).unwrap(), "abc123");
        std::fs::write(&path, "\n").unwrap();
        assert!(read_token(&path).unwrap_err().to_string().contains("empty"));
        std::fs::write(&path, "ab c\n").unwrap();
        assert!(read_token(&path).is_err());
        let missing = dir.path().join("missing");
        assert!(read_token(&missing)
            .unwrap_err()
            .to_string()
            .contains("missing"));
    }

    #[test]
    fn plain_http_elsewhere_is_refused_before_anything_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = args(&["--once", "--now"]);
        a.server = "http://192.0.2.1:8080".into();
        a.spool = Some(dir.path().join("spool"));
        let err = run_with(a, &Unconditional).unwrap_err().to_string();
        assert!(err.contains("only allowed to a loopback"), "{err}");
    }
}
