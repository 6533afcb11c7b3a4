//! One upload session: the options of `edge-agent upload` as typed values
//! (whatever front end read them: the `edge-agent` command line, Android's
//! JNI or C ABI, a Rust caller), their checks, the `--once` run for cron
//! and the daemon loop. No command-line parsing here: the grammar is the
//! `device-args` crate's.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::conditions::{Conditions, Unconditional};
use crate::retry::Backoff;
use crate::spool::{Spool, SpoolError};
use crate::tls::{parse_pin, TrustOptions};
use crate::transport::{Client, Endpoint, Timeouts, MAX_BATCH};
use crate::upload::{run_pass, PassOptions, PassReport};
use crate::window::{spread_delay, Position, Window};

/// The shortest wait for the service's answer to a batch (`--timeout`).
pub const MIN_TIMEOUT: Duration = Duration::from_secs(1);

/// When a session may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schedule {
    /// In the window of the service's directive stored by the last upload,
    /// else any time (neither `--window` nor `--now`).
    #[default]
    DirectiveWindow,
    /// Any time, whatever the directive says (`--now`).
    Now,
    /// Only in this window, whatever the directive says (`--window`).
    Window(Window),
}

/// How an upload session runs: `edge-agent upload`'s options as values.
/// [`UploadOptions::new`] gives the command line's defaults; [`run`]
/// checks the options ([`UploadOptions::check`]) before anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadOptions {
    /// Service base URL: `https://HOST[:PORT]` (plain `http://` only to a
    /// loopback address).
    pub server: String,
    /// File holding the Bearer token (first line).
    pub token_file: Option<PathBuf>,
    /// PEM file of the CA to trust instead of Mozilla's roots.
    pub ca: Option<PathBuf>,
    /// SHA-256 pins of the server key's SubjectPublicKeyInfo (base64, as
    /// given; read when the session starts).
    pub pins: Vec<String>,
    /// When to send.
    pub schedule: Schedule,
    /// Spool directory; `None`: [`default_spool_dir`]. A folder named here
    /// must exist.
    pub spool: Option<PathBuf>,
    /// One pass, then return (cron); else the daemon loop, which never
    /// returns but by an error.
    pub once: bool,
    /// With `once`: most time to spend waiting between tries in total.
    pub once_wait: Duration,
    /// Summaries per request, 1 to [`MAX_BATCH`].
    pub batch: usize,
    /// Tries per batch before giving up this pass, at least 1.
    pub tries: u32,
    /// First retry delay (doubles per try, with jitter, up to 5 minutes).
    pub backoff: Duration,
    /// Wait for the service's answer to a batch, at least [`MIN_TIMEOUT`].
    pub timeout: Duration,
    /// Daemon: time between passes (at least 1 s is waited).
    pub interval: Duration,
    /// Upload on battery power too (Linux normally waits for AC power).
    pub ignore_power: bool,
    /// Wait for another uploader that is sending from the same spool.
    pub lock_wait: Duration,
    /// Do not wait a random delay inside the window (a single device; tests).
    pub no_spread: bool,
}

impl UploadOptions {
    /// The options of `edge-agent upload --server SERVER` and nothing else:
    /// the daemon, on the directive's window, with the default spool.
    pub fn new(server: impl Into<String>) -> UploadOptions {
        UploadOptions {
            server: server.into(),
            token_file: None,
            ca: None,
            pins: Vec::new(),
            schedule: Schedule::default(),
            spool: None,
            once: false,
            once_wait: Duration::from_secs(120),
            batch: 50,
            tries: 6,
            backoff: Duration::from_millis(2000),
            timeout: Duration::from_secs(60),
            interval: Duration::from_secs(900),
            ignore_power: false,
            lock_wait: Duration::from_secs(600),
            no_spread: false,
        }
    }

    /// Refuses options no session can run with (a batch of 0 or above
    /// [`MAX_BATCH`], no tries, a timeout under [`MIN_TIMEOUT`]); the
    /// checks each front end's grammar applies to its values too.
    pub fn check(&self) -> Result<(), OptionsError> {
        check_batch(self.batch)?;
        check_tries(self.tries)?;
        check_timeout(self.timeout)?;
        Ok(())
    }
}

/// Options refused by [`UploadOptions::check`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    /// The batch size is outside 1..=[`MAX_BATCH`].
    #[error("{0} summaries per request: must be 1 to {MAX_BATCH}")]
    Batch(usize),
    /// No tries.
    #[error("0 tries: a batch needs at least one")]
    NoTries,
    /// The response timeout is under [`MIN_TIMEOUT`].
    #[error("a timeout of {} s: must be at least 1 s", .0.as_secs_f64())]
    Timeout(Duration),
}

/// The batch size rule: 1 to [`MAX_BATCH`] summaries per request.
pub fn check_batch(batch: usize) -> Result<usize, OptionsError> {
    match batch {
        1..=MAX_BATCH => Ok(batch),
        _ => Err(OptionsError::Batch(batch)),
    }
}

/// The tries rule: at least one.
pub fn check_tries(tries: u32) -> Result<u32, OptionsError> {
    match tries {
        0 => Err(OptionsError::NoTries),
        _ => Ok(tries),
    }
}

/// The timeout rule: at least [`MIN_TIMEOUT`].
pub fn check_timeout(timeout: Duration) -> Result<Duration, OptionsError> {
    if timeout < MIN_TIMEOUT {
        return Err(OptionsError::Timeout(timeout));
    }
    Ok(timeout)
}

/// Why a session could not run (what a pass could not send is not an
/// error: it is in the [`Outcome`] and on stderr).
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The options were refused.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// The spool folder named in the options is missing or not a folder.
    #[error("--spool {}: {problem}", path.display())]
    SpoolFolder {
        /// The folder named.
        path: PathBuf,
        /// "the folder does not exist", "not a folder".
        problem: &'static str,
    },
    /// The service cannot be reached as configured: its URL, the token
    /// file, a pin, the CA file.
    #[error(transparent)]
    Endpoint(anyhow::Error),
    /// The spool itself failed (unreadable folder, cannot delete).
    #[error(transparent)]
    Spool(#[from] SpoolError),
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

/// Runs an upload session (`edge-agent upload`) with the platform's
/// conditions ([`crate::conditions::platform`]), or none with
/// `ignore_power`.
pub fn run(options: UploadOptions) -> Result<Outcome, UploadError> {
    let conditions: Box<dyn Conditions> = if options.ignore_power {
        Box::new(Unconditional)
    } else {
        crate::conditions::platform()
    };
    run_with(options, conditions.as_ref())
}

/// Runs an upload session with these conditions (Android passes its
/// charging / unmetered-network check here). The options are checked
/// first; nothing is read or sent when they are refused.
pub fn run_with(
    options: UploadOptions,
    conditions: &dyn Conditions,
) -> Result<Outcome, UploadError> {
    options.check()?;
    let client = Client::new(endpoint(&options)?).map_err(UploadError::Endpoint)?;
    if let Some(dir) = &options.spool {
        // A folder named in the options that does not exist is a
        // mistake (a typo, an unmounted disk): nothing there to send.
        if !dir.is_dir() {
            let problem = if dir.exists() {
                "not a folder"
            } else {
                "the folder does not exist"
            };
            return Err(UploadError::SpoolFolder {
                path: dir.clone(),
                problem,
            });
        }
    }
    let spool_dir = options.spool.clone().unwrap_or_else(default_spool_dir);
    let spool = Spool::open(&spool_dir)?;
    let mut pass = PassOptions {
        batch: options.batch,
        attempts: options.tries,
        backoff: Backoff {
            base: options.backoff,
            max: MAX_BACKOFF,
        },
        deadline: None,
        lock_wait: options.lock_wait,
        wait_limit: options.once.then_some(options.once_wait),
    };
    if options.once {
        return once(&options, &spool, &client, &mut pass, conditions);
    }
    daemon(&options, &spool, &client, &mut pass, conditions)
}

/// The schedule's window: `--window`'s, none with `--now`, else the
/// window of the service's directive stored by the last upload, if any.
fn effective_window(options: &UploadOptions, spool: &Spool) -> Option<Window> {
    match options.schedule {
        Schedule::Window(w) => Some(w),
        Schedule::Now => None,
        Schedule::DirectiveWindow => directive_window(spool),
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

fn endpoint(options: &UploadOptions) -> Result<Endpoint, UploadError> {
    server_endpoint(
        &options.server,
        options.token_file.as_deref(),
        options.ca.clone(),
        &options.pins,
        options.timeout,
    )
    .map_err(UploadError::Endpoint)
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
fn due_now(
    options: &UploadOptions,
    spool: &Spool,
    spread: bool,
) -> Result<Option<Instant>, String> {
    let Some(window) = effective_window(options, spool) else {
        return Ok(None);
    };
    match window.position_now() {
        Position::Closed { opens_in } => Err(format!(
            "outside the upload window {window} (opens in {})",
            human(opens_in)
        )),
        Position::Open { remaining } => {
            let end = Instant::now() + remaining;
            if spread && !options.no_spread {
                let delay = spread_delay(remaining);
                eprintln!("upload: window {window} open; starting in {}", human(delay));
                std::thread::sleep(delay);
            }
            Ok(Some(end))
        }
    }
}

fn once(
    options: &UploadOptions,
    spool: &Spool,
    client: &Client,
    pass: &mut PassOptions,
    conditions: &dyn Conditions,
) -> Result<Outcome, UploadError> {
    match due_now(options, spool, true) {
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
    options: &UploadOptions,
    spool: &Spool,
    client: &Client,
    pass: &mut PassOptions,
    conditions: &dyn Conditions,
) -> Result<Outcome, UploadError> {
    let interval = options.interval.max(Duration::from_secs(1));
    // Spread only when the window opens (or at start-up inside it), not
    // before every pass.
    let mut spread = true;
    loop {
        match due_now(options, spool, spread) {
            Err(why) => {
                let wait = match effective_window(options, spool).map(|w| w.position_now()) {
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

    fn options() -> UploadOptions {
        UploadOptions::new("https://edge.example")
    }

    fn scheduled(schedule: Schedule) -> UploadOptions {
        UploadOptions {
            schedule,
            ..options()
        }
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
        assert_eq!(effective_window(&options(), &spool), None);
        spool
            .store_directives(br#"{"group": "g", "window": "01:00-04:00"}"#)
            .unwrap();
        let directive: Window = "01:00-04:00".parse().unwrap();
        assert_eq!(effective_window(&options(), &spool), Some(directive));
        assert_eq!(effective_window(&scheduled(Schedule::Now), &spool), None);
        let own: Window = "22:00-23:00".parse().unwrap();
        assert_eq!(
            effective_window(&scheduled(Schedule::Window(own)), &spool),
            Some(own)
        );
        spool
            .store_directives(br#"{"group": "g", "window": "25:00-04:00"}"#)
            .unwrap();
        assert_eq!(
            effective_window(&options(), &spool),
            None,
            "invalid: ignored"
        );
    }

    #[test]
    fn the_defaults_are_the_command_lines() {
        let o = options();
        assert_eq!(o.schedule, Schedule::DirectiveWindow);
        assert!(!o.once && !o.ignore_power && !o.no_spread);
        assert_eq!((o.batch, o.tries), (50, 6));
        assert_eq!(o.once_wait, Duration::from_secs(120));
        assert_eq!(o.backoff, Duration::from_millis(2000));
        assert_eq!(o.timeout, Duration::from_secs(60));
        assert_eq!(o.interval, Duration::from_secs(900));
        assert_eq!(o.lock_wait, Duration::from_secs(600));
        assert_eq!(o.check(), Ok(()));
    }

    #[test]
    fn batch_tries_and_timeout_are_bounded() {
        let with = |change: fn(&mut UploadOptions)| {
            let mut o = options();
            change(&mut o);
            o.check()
        };
        assert_eq!(with(|o| o.batch = 0), Err(OptionsError::Batch(0)));
        assert_eq!(with(|o| o.batch = 257), Err(OptionsError::Batch(257)));
        assert_eq!(with(|o| o.batch = 1), Ok(()));
        assert_eq!(with(|o| o.batch = 256), Ok(()));
        assert_eq!(with(|o| o.tries = 0), Err(OptionsError::NoTries));
        assert_eq!(with(|o| o.tries = 1), Ok(()));
        let short = Duration::from_millis(999);
        assert_eq!(
            with(|o| o.timeout = Duration::from_millis(999)),
            Err(OptionsError::Timeout(short))
        );
        assert!(with(|o| o.timeout = Duration::ZERO).is_err());
        assert_eq!(with(|o| o.timeout = Duration::from_secs(1)), Ok(()));
    }

    #[test]
    fn refused_options_end_the_session_before_anything_is_read() {
        // A batch of 0 against a spool folder that does not exist: the
        // options are refused first, as the command line refuses them.
        let dir = tempfile::tempdir().unwrap();
        let mut o = options();
        o.server = "http://127.0.0.1:9".into();
        o.spool = Some(dir.path().join("nope"));
        o.once = true;
        o.batch = 0;
        let err = run_with(o, &Unconditional).unwrap_err();
        assert!(
            matches!(err, UploadError::Options(OptionsError::Batch(0))),
            "{err}"
        );
        assert!(err.to_string().contains("must be 1 to 256"), "{err}");
    }

    #[test]
    fn a_missing_spool_folder_is_an_error_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let mut o = scheduled(Schedule::Now);
        o.once = true;
        o.server = "http://127.0.0.1:9".into();
        o.spool = Some(missing.clone());
        let err = run_with(o, &Unconditional).unwrap_err().to_string();
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
        let mut o = scheduled(Schedule::Now);
        o.once = true;
        o.server = "http://192.0.2.1:8080".into();
        o.spool = Some(dir.path().join("spool"));
        let err = run_with(o, &Unconditional).unwrap_err().to_string();
        assert!(err.contains("only allowed to a loopback"), "{err}");
    }
}
