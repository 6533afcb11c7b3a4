//! `watch`: trace every new process whose command line contains a text
//! (the provider's host or URL), as the research's agent does, and hand
//! each one's summary over when it ends.

use std::collections::HashSet;
use std::time::Duration;

use agent_core::Summary;

use crate::engine::{Engine, Observer, Session};
use crate::facts::{self, PlatformFacts};
use crate::sys::{self, Tid};
use crate::trace::{process_program, seize_all, summarize};
use crate::wait::WaitPolicy;

/// What `watch` needs.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// Text the command line must contain (arguments joined by spaces).
    pub pattern: String,
    /// Free facts for every summary.
    pub facts: Vec<(String, String)>,
    /// Platform facts (`None`: detected).
    pub platform: Option<PlatformFacts>,
    /// How often /proc is scanned for new processes.
    pub scan_interval: Duration,
    /// How the tracer waits for stops.
    pub wait: WaitPolicy,
    /// Cut each traced process's trace into windows of this length (as
    /// [`crate::TraceOptions::window`]); `None`: one summary per process.
    pub window: Option<Duration>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            pattern: String::new(),
            facts: Vec::new(),
            platform: None,
            scan_interval: Duration::from_millis(100),
            wait: WaitPolicy::default(),
            window: None,
        }
    }
}

struct Watcher<'a> {
    pattern: Vec<u8>,
    extra: &'a [(String, String)],
    platform: PlatformFacts,
    /// Pids already looked at (matching or not), pruned when they vanish.
    seen: HashSet<Tid>,
    me: Tid,
    window: Option<Duration>,
    on_summary: &'a mut dyn FnMut(Summary),
}

/// The pids in /proc.
fn list_pids() -> Vec<Tid> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `haystack` contains `needle`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

impl Watcher<'_> {
    fn scan(&mut self, engine: &mut Engine) {
        let pids = list_pids();
        let now: HashSet<Tid> = pids.iter().copied().collect();
        self.seen.retain(|p| now.contains(p));
        for pid in pids {
            if !self.seen.insert(pid) || pid == self.me || engine.is_traced(pid) {
                continue;
            }
            let Ok(mut cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            for b in &mut cmdline {
                if *b == 0 {
                    *b = b' ';
                }
            }
            if !contains(&cmdline, &self.pattern) {
                continue;
            }
            let program = process_program(pid);
            let facts = match facts::build(&self.platform, &program, self.extra) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("edge-agent: {e:#}");
                    continue;
                }
            };
            let mut session = Session::new(pid, facts);
            session.program_from_exec = true;
            if let Some(w) = self.window {
                session.set_window(w);
            }
            let session = engine.add_session(session);
            if let Err(e) = seize_all(engine, session, pid) {
                eprintln!("edge-agent: not watching PID {pid} ({program}): {e:#}");
            }
        }
    }
}

impl Observer for Watcher<'_> {
    fn tick(&mut self, engine: &mut Engine) {
        self.scan(engine);
    }
    fn keep_alive(&self) -> bool {
        true
    }
    fn window_done(&mut self, summary: Summary) {
        (self.on_summary)(summary);
    }
    fn session_done(&mut self, session: Session) {
        (self.on_summary)(summarize(&session));
    }
}

/// Watches until a stop is requested (SIGINT/SIGTERM with
/// [`crate::signals::install`]); each traced process's summary goes to
/// `on_summary` when it ends (or, for those still running at the stop, when
/// the agent detaches from them).
pub fn watch(opts: &WatchOptions, on_summary: &mut dyn FnMut(Summary)) -> anyhow::Result<()> {
    if opts.pattern.is_empty() {
        anyhow::bail!("--match needs a non-empty text");
    }
    crate::trace::check_window(opts.window)?;
    // Validate the facts before the first process shows up.
    let platform = opts.platform.clone().unwrap_or_else(PlatformFacts::detect);
    facts::build(&platform, "", &opts.facts)?;
    let mut watcher = Watcher {
        pattern: opts.pattern.as_bytes().to_vec(),
        extra: &opts.facts,
        platform,
        // Processes already running are not new.
        seen: list_pids().into_iter().collect(),
        me: sys::getpid(),
        window: opts.window,
        on_summary,
    };
    let mut engine = Engine::new(None, false);
    engine.set_wait_policy(opts.wait);
    crate::signals::tick_every(opts.scan_interval.as_micros().max(1) as u64);
    let result = engine.run(&mut watcher);
    crate::signals::quiet();
    for s in engine.take_sessions() {
        if s.threads > 0 {
            (watcher.on_summary)(summarize(&s));
        }
    }
    result.map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::contains;

    #[test]
    fn substring() {
        assert!(contains(b"wget http://example.test/x", b"example.test"));
        assert!(!contains(b"wget", b"example"));
    }
}
