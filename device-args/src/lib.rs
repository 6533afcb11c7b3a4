//! The argument grammar of `edge-agent upload`, and only that.
//!
//! Why a crate of its own: libraries take typed options and return typed
//! results, and command lines stay in the front ends (issue 33), so the
//! uploader library knows `uploader::session::UploadOptions`, not clap. Yet
//! two front ends accept the very same argument list: the `edge-agent`
//! binary (`edge-agent upload ...`, agent-linux) and agent-android
//! (Java's `EdgeAgent.upload(String[])` and the C ABI's upload, which take
//! `edge-agent upload`'s arguments from the app). Both depend on this crate
//! instead of each writing the options, their help and their checks again.
//!
//! The rules on the values (batch size, tries, timeout) are the uploader's
//! own (`uploader::session::check_*`), applied here while parsing so a bad
//! value is refused like any other argument error, with the same words in
//! both front ends.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use uploader::session::{self, OptionsError, Schedule, UploadOptions};
use uploader::window::Window;

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
    #[arg(long, value_name = "SECS", default_value_t = defaults().once_wait.as_secs())]
    pub once_wait: u64,
    /// Summaries per request (1 to 256).
    #[arg(long, value_name = "N", default_value_t = defaults().batch, value_parser = batch)]
    pub batch: usize,
    /// Tries per batch before giving up this pass.
    #[arg(long, value_name = "N", default_value_t = defaults().tries, value_parser = tries)]
    pub tries: u32,
    /// First retry delay, ms (doubles per try, with jitter, up to 5 minutes).
    #[arg(long, value_name = "MS", default_value_t = millis(defaults().backoff))]
    pub backoff_ms: u64,
    /// Seconds to wait for the service's answer to a batch (at least 1).
    #[arg(long, value_name = "SECS", default_value_t = defaults().timeout.as_secs(),
          value_parser = timeout_secs)]
    pub timeout: u64,
    /// Daemon: seconds between passes.
    #[arg(long, value_name = "SECS", default_value_t = defaults().interval.as_secs())]
    pub interval: u64,
    /// Upload on battery power too (Linux normally waits for AC power).
    #[arg(long)]
    pub ignore_power: bool,
    /// Seconds to wait for another uploader that is sending from the same spool.
    #[arg(long, value_name = "SECS", default_value_t = defaults().lock_wait.as_secs())]
    pub lock_wait: u64,
    /// Do not wait a random delay inside the window (a single device; tests).
    #[arg(long)]
    pub no_spread: bool,
}

impl UploadArgs {
    /// The session's options, checked by the uploader's rules.
    pub fn into_options(self) -> Result<UploadOptions, OptionsError> {
        // `--window` and `--now` conflict on the command line; built by
        // hand, the window wins, as it always did.
        let schedule = match (self.window, self.now) {
            (Some(window), _) => Schedule::Window(window),
            (None, true) => Schedule::Now,
            (None, false) => Schedule::DirectiveWindow,
        };
        let options = UploadOptions {
            server: self.server,
            token_file: self.token_file,
            ca: self.ca,
            pins: self.pins,
            schedule,
            spool: self.spool,
            once: self.once,
            once_wait: Duration::from_secs(self.once_wait),
            batch: self.batch,
            tries: self.tries,
            backoff: Duration::from_millis(self.backoff_ms),
            timeout: Duration::from_secs(self.timeout),
            interval: Duration::from_secs(self.interval),
            ignore_power: self.ignore_power,
            lock_wait: Duration::from_secs(self.lock_wait),
            no_spread: self.no_spread,
        };
        options.check()?;
        Ok(options)
    }
}

/// `edge-agent upload`'s arguments as a list without the program name (what
/// Java's `EdgeAgent.upload(String[])` and the C ABI pass).
#[derive(Parser, Debug)]
#[command(name = "upload", no_binary_name = true)]
struct UploadList {
    #[command(flatten)]
    args: UploadArgs,
}

/// Parses `edge-agent upload`'s arguments given without the program name
/// (e.g. `--spool DIR --server URL --once --now`) into checked options.
/// The error renders as the command line's would (`clap::Error::render`).
pub fn parse_upload<I, T>(args: I) -> Result<UploadOptions, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let list = UploadList::try_parse_from(args)?;
    list.args
        .into_options()
        .map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n")))
}

/// The session's defaults, the help's `[default: ...]`.
fn defaults() -> UploadOptions {
    UploadOptions::new(String::new())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn batch(text: &str) -> Result<usize, String> {
    let n: usize = text.parse().map_err(|e| format!("{e}"))?;
    session::check_batch(n).map_err(|e| e.to_string())
}

fn tries(text: &str) -> Result<u32, String> {
    let n: u32 = text.parse().map_err(|e| format!("{e}"))?;
    session::check_tries(n).map_err(|e| e.to_string())
}

fn timeout_secs(text: &str) -> Result<u64, String> {
    let secs: u64 = text.parse().map_err(|e| format!("{e}"))?;
    session::check_timeout(Duration::from_secs(secs))
        .map(|_| secs)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<UploadOptions, clap::Error> {
        let mut argv = vec!["--server", "https://edge.example"];
        argv.extend_from_slice(extra);
        parse_upload(argv)
    }

    fn refusal(extra: &[&str]) -> String {
        parse(extra).unwrap_err().to_string()
    }

    #[test]
    fn no_options_are_the_sessions_defaults() {
        assert_eq!(
            parse(&[]).unwrap(),
            UploadOptions::new("https://edge.example")
        );
    }

    #[test]
    fn every_option_reaches_its_typed_value() {
        let o = parse(&[
            "--token-file",
            "/t",
            "--ca",
            "/ca.pem",
            "--pin-sha256",
            "a",
            "--pin-sha256",
            "b",
            "--window",
            "01:00-04:00",
            "--spool",
            "/s",
            "--once",
            "--once-wait",
            "7",
            "--batch",
            "256",
            "--tries",
            "1",
            "--backoff-ms",
            "20",
            "--timeout",
            "1",
            "--interval",
            "3",
            "--ignore-power",
            "--lock-wait",
            "4",
            "--no-spread",
        ])
        .unwrap();
        assert_eq!(o.token_file, Some(PathBuf::from("/t")));
        assert_eq!(o.ca, Some(PathBuf::from("/ca.pem")));
        assert_eq!(o.pins, ["a", "b"]);
        assert_eq!(o.schedule, Schedule::Window("01:00-04:00".parse().unwrap()));
        assert_eq!(o.spool, Some(PathBuf::from("/s")));
        assert!(o.once && o.ignore_power && o.no_spread);
        assert_eq!(o.once_wait, Duration::from_secs(7));
        assert_eq!((o.batch, o.tries), (256, 1));
        assert_eq!(o.backoff, Duration::from_millis(20));
        assert_eq!(o.timeout, Duration::from_secs(1));
        assert_eq!(o.interval, Duration::from_secs(3));
        assert_eq!(o.lock_wait, Duration::from_secs(4));
        assert_eq!(parse(&["--now"]).unwrap().schedule, Schedule::Now);
    }

    #[test]
    fn window_and_now_conflict_and_values_are_bounded() {
        assert!(parse(&["--now", "--window", "01:00-02:00"]).is_err());
        assert!(parse(&["--window", "1-2"]).is_err());
        assert!(parse(&["--no-such-flag"]).is_err());
        // The uploader's own rules, in its own words.
        let batch = refusal(&["--batch", "0"]);
        assert!(batch.contains("'--batch <N>'"), "{batch}");
        assert!(
            batch.contains(&OptionsError::Batch(0).to_string()),
            "{batch}"
        );
        assert!(refusal(&["--batch", "257"]).contains("must be 1 to 256"));
        assert!(refusal(&["--batch", "x"]).contains("'--batch <N>'"));
        let tries = refusal(&["--tries", "0"]);
        assert!(
            tries.contains(&OptionsError::NoTries.to_string()),
            "{tries}"
        );
        let timeout = refusal(&["--timeout", "0"]);
        assert!(timeout.contains("at least 1 s"), "{timeout}");
        assert!(parse(&["--timeout", "1"]).is_ok());
    }

    #[test]
    fn hand_built_arguments_are_checked_too() {
        let list = UploadList::try_parse_from(["--server", "https://edge.example"]).unwrap();
        let mut args = list.args;
        args.batch = 0;
        assert_eq!(args.into_options(), Err(OptionsError::Batch(0)));
    }
}
