//! `edge-agent watch` under an exec storm (issue 36, items 4 and 5): a
//! shell that runs a matching and a non-matching program hundreds of times
//! a second. Under each backend every summary is one matching run alone
//! (no other process counted in it), the agent's memory stays bounded
//! (the store's queue sheds and counts rather than grows), and SIGTERM
//! ends the watch promptly while the storm runs on. With the eBPF backend,
//! runs matched while every slot is taken are counted in a summary fact.
//!
//! The storms are short and bounded in count (a few seconds on the shared
//! 2-core VM); the bounds on memory and exit time are generous (a loaded
//! VM must not fail them) yet far below what the unbounded queues did.
//! `scripts/soak-watch` measures the same for minutes.
//!
//! On the VM's disk the store keeps up with the debug build's tracer, so
//! the storms on the spool pass with the old unbounded queue too; the
//! storm on a slow store (a FUSE filesystem whose fsyncs take 100 ms,
//! `slow_fs`) is the one where the store falls behind for real, and the
//! one the unbounded queue fails (it exited 72 s after SIGTERM, storing
//! its backlog; VmHWM up 25 MiB in 8 s).

mod slow_fs;
mod tracer_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_core::{RunId, Summary};
use tracer_support::*;

/// One storm at a time: two would slow each other on 2 CPUs.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The storm (bash: it counts SECONDS): for at most `$1` seconds and `$2` turns, a matching run
/// (`/bin/true TAG`, the tag from the environment so that the shell's own
/// command line does not match) and a non-matching one (`/bin/echo`).
const STORM: &str = r#"
end=$((SECONDS + $1)); n=0
while [ $SECONDS -lt $end ] && [ $n -lt $2 ]; do
  /bin/true "$STORM_TAG"; /bin/echo other >/dev/null
  n=$((n + 1))
done
echo "$n" >"$3"
"#;

/// How much the agent's resident memory may grow over the storm: a
/// generous bound (the bounded queues hold a few MiB; the unbounded ones
/// grew by tens of MiB in seconds).
const RSS_GROWTH_KIB: u64 = 8 * 1024;
/// How long the watch may take to exit after SIGTERM: generous for a
/// loaded VM (it stores what is queued for at most 1 s, then exits; the
/// unbounded writer took as long as its backlog of fsyncs).
const EXIT_WITHIN: Duration = Duration::from_secs(5);

/// Storm loops at once.
const LOOPS: usize = 3;

fn is_root() -> bool {
    agent_linux::sys::geteuid() == 0
}

/// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

struct Watch {
    child: Child,
    err: PathBuf,
    /// Where its summaries go (`--spool` or `--out-dir`).
    store: PathBuf,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `edge-agent watch --match TAG --spool DIR/spool` on `backend` (extra
/// args after), ready once it says what it watches for.
fn start_watch(dir: &Path, tag: &str, backend: &str, extra: &[&str]) -> Watch {
    start_watch_storing(dir, tag, backend, ("--spool", &dir.join("spool")), extra)
}

/// [`start_watch`] storing with `store`: `("--spool", DIR)` or
/// `("--out-dir", DIR)`.
fn start_watch_storing(
    dir: &Path,
    tag: &str,
    backend: &str,
    store: (&str, &Path),
    extra: &[&str],
) -> Watch {
    let err = dir.join("agent.err");
    let child = Command::new(agent())
        .args(["watch", "--backend", backend, "--window", "whole"])
        .args(["--discover", "connector", "--match", tag])
        .arg(store.0)
        .arg(store.1)
        .arg("--device-id-file")
        .arg(dir.join("device-id"))
        .args(extra)
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let mut watch = Watch {
        child,
        err,
        store: store.1.to_path_buf(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = watch.stderr();
        if text.contains("edge-agent: watching for") {
            return watch;
        }
        assert!(
            watch.child.try_wait().unwrap().is_none() && Instant::now() < deadline,
            "watch did not start:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Watch {
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// SIGTERM, then how long until it exited (panics past `EXIT_WITHIN`
    /// twice over) and whether it exited well.
    fn terminate(&mut self) -> (Duration, bool) {
        self.terminate_within(2 * EXIT_WITHIN).unwrap_or_else(|| {
            panic!(
                "the watch had not exited {:?} after SIGTERM",
                2 * EXIT_WITHIN
            )
        })
    }

    /// SIGTERM, then how long until it exited and whether it exited well;
    /// `None` if it had not exited within `limit` (it is killed when the
    /// `Watch` is dropped).
    fn terminate_within(&mut self, limit: Duration) -> Option<(Duration, bool)> {
        let asked = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some((asked.elapsed(), status.success()));
            }
            if asked.elapsed() >= limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn summaries(&self) -> Vec<Summary> {
        let Ok(dir) = std::fs::read_dir(&self.store) else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "summary"))
            .map(|f| Summary::decode(&std::fs::read(f).unwrap()).expect("decodes"))
            // The spool's filling (no program) is not the watch's.
            .filter(|s| !s.facts.program.is_empty())
            .collect()
    }
}

/// Fills the spool `dir` to its 1000-summary cap, as on a device that has
/// been offline a while (the steady state of a daemon's spool): each new
/// summary then also evicts the oldest, and the store is at its slowest.
fn fill_spool(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut buf = [0u8; agent_core::MAX_ENCODED_LEN];
    for i in 0..1000u128 {
        let mut s = Summary::empty();
        s.id = RunId(i.to_be_bytes());
        let bytes = s.encode(&mut buf).unwrap();
        std::fs::write(dir.join(format!("{i:032x}.summary")), bytes).unwrap();
    }
}

/// The sum of fact `key` over `summaries`.
fn fact_sum(summaries: &[Summary], key: &str) -> u64 {
    summaries
        .iter()
        .filter_map(|s| s.facts.get(key)?.parse::<u64>().ok())
        .sum()
}

/// [`LOOPS`] storm loops at once, each for at most `seconds`: more runs
/// end than the store keeps up with. Each writes its count of turns to the
/// file paired with it.
fn start_storms(dir: &Path, tag: &str, seconds: u64) -> Vec<(Child, PathBuf)> {
    (0..LOOPS)
        .map(|i| {
            let turns_file = dir.join(format!("turns{i}"));
            let storm = Command::new("bash")
                .args(["-c", STORM, "storm", &seconds.to_string(), "20000"])
                .arg(&turns_file)
                .env("STORM_TAG", tag)
                .spawn()
                .unwrap();
            (storm, turns_file)
        })
        .collect()
}

/// Waits `for_at_most` unless a storm loop ends first; whether every
/// loop still runs.
fn storm_on(storms: &mut [(Child, PathBuf)], for_at_most: Duration) -> bool {
    let started = Instant::now();
    loop {
        let all_run = storms
            .iter_mut()
            .all(|(s, _)| s.try_wait().unwrap().is_none());
        if !all_run || started.elapsed() >= for_at_most {
            return all_run;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the storm loops to end: whether one was still running when
/// called, and their matching runs in all.
fn end_storms(storms: &mut [(Child, PathBuf)]) -> (bool, u64) {
    let mut ran_on = false;
    let mut turns = 0u64;
    for (storm, turns_file) in storms {
        ran_on |= storm.try_wait().unwrap().is_none();
        let _ = wait_timeout(storm, 30);
        turns += std::fs::read_to_string(&*turns_file)
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap();
    }
    (ran_on, turns)
}

/// Each summary is one matching run alone: no other program, no other
/// process counted in it.
fn assert_attributed_exactly(summaries: &[Summary]) {
    for s in summaries {
        assert_eq!(s.facts.program, "true", "a non-matching program: {s:?}");
        assert!(
            s.run.processes <= 1,
            "{} processes counted in one run of true",
            s.run.processes
        );
    }
}

/// Runs the storm under a watch on `backend`: SIGTERM while it still runs;
/// checks attribution, memory and exit.
fn storm(test: &str, backend: &str) {
    if !is_root() {
        edge_tests::skip(test, "the process-events connector needs root");
        return;
    }
    if backend == "ebpf" && !ebpf_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("stormtag{}{backend}", std::process::id());
    fill_spool(&dir.path().join("spool"));
    let mut watch = start_watch(dir.path(), &tag, backend, &[]);
    let agent_pid = watch.child.id();
    let rss_ready = status_kib(agent_pid, "VmRSS");
    let mut storms = start_storms(dir.path(), &tag, 14);
    // SIGTERM while the storm runs, after 10 s of it.
    let _ = storm_on(&mut storms, Duration::from_secs(10));
    let hwm = status_kib(agent_pid, "VmHWM");
    let (took, ok) = watch.terminate();
    let (storm_ran_on, turns) = end_storms(&mut storms);
    let err = watch.stderr();
    let summaries = watch.summaries();
    eprintln!(
        "{backend}: {turns} matching runs, {} summaries, VmRSS {rss_ready} KiB ready, VmHWM {hwm} KiB, exit {took:?}",
        summaries.len()
    );
    assert!(ok, "the watch failed:\n{err}");
    assert!(storm_ran_on, "the storm ended before SIGTERM");
    assert!(!summaries.is_empty(), "nothing stored:\n{err}");
    assert_attributed_exactly(&summaries);
    assert!(
        hwm <= rss_ready + RSS_GROWTH_KIB,
        "memory grew from {rss_ready} to {hwm} KiB over the storm"
    );
    assert!(
        took <= EXIT_WITHIN,
        "the watch took {took:?} to exit after SIGTERM"
    );
}

#[test]
fn ptrace_storm_is_attributed_exactly_in_bounded_memory_and_sigterm_is_prompt() {
    let _alone = alone();
    storm(
        "ptrace_storm_is_attributed_exactly_in_bounded_memory_and_sigterm_is_prompt",
        "ptrace",
    );
}

/// How long each fsync of the slow store takes: at most 10 summaries a
/// second are stored, a fraction of what the debug build's tracer hands
/// over under the storm (80-140 a second on the 2-core VM).
const SLOW_FSYNC: Duration = Duration::from_millis(100);
/// How long the storm runs on the slow store before SIGTERM: the store
/// falls hundreds of summaries behind (the old unbounded queue then took
/// a minute to store them all before it exited).
const SLOW_STORM: Duration = Duration::from_secs(8);
/// How long the test waits for an exit after SIGTERM before it gives up
/// (it then kills the watch): far past [`EXIT_WITHIN`], short enough to
/// keep the test under a minute.
const GIVE_UP_AFTER: Duration = Duration::from_secs(20);

/// What the watch said at its end about the summaries it shed: how many,
/// and how many of those no stored summary counts in its fact.
fn shed_said(err: &str) -> Option<(u64, u64)> {
    let line = err
        .lines()
        .find(|l| l.contains("summaries were shed while the store was behind"))?;
    let mut numbers = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u64>().ok());
    Some((numbers.next()?, numbers.next()?))
}

/// Issue 36 item 5 as on a device whose storage is slow (a worn SD card):
/// the store (`--out-dir` on a filesystem whose fsyncs take
/// [`SLOW_FSYNC`]) falls behind an exec storm for real, which the VM's
/// disk under the debug build never does (the storm test above passes
/// with the unbounded queue too). The queue sheds and counts what it
/// cannot hold, memory stays bounded, and SIGTERM is obeyed within
/// [`EXIT_WITHIN`] while the unstored backlog is counted, not stored.
#[test]
fn ptrace_storm_on_a_slow_store_sheds_counted_and_sigterm_is_prompt() {
    let _alone = alone();
    let test = "ptrace_storm_on_a_slow_store_sheds_counted_and_sigterm_is_prompt";
    if !is_root() {
        edge_tests::skip(
            test,
            "the process-events connector and a FUSE mount need root",
        );
        return;
    }
    if !Path::new("/dev/fuse").exists() {
        edge_tests::skip(test, "no /dev/fuse: the slow store is a FUSE filesystem");
        return;
    }
    // Declared before the watch: unmounted after the watch is gone.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("slow");
    std::fs::create_dir(&store).unwrap();
    let slow = slow_fs::mount(&store, SLOW_FSYNC).expect("mount the slow filesystem");
    let tag = format!("slowtag{}", std::process::id());
    let mut watch = start_watch_storing(dir.path(), &tag, "ptrace", ("--out-dir", &store), &[]);
    let agent_pid = watch.child.id();
    let rss_ready = status_kib(agent_pid, "VmRSS");
    // The loops outlast the SIGTERM by a few seconds, not more: the test
    // waits for them.
    let mut storms = start_storms(dir.path(), &tag, SLOW_STORM.as_secs() + 3);
    let storm_ran_on = storm_on(&mut storms, SLOW_STORM);
    let hwm = status_kib(agent_pid, "VmHWM");
    let fsyncs_at_stop = slow.fsyncs();
    let exited = watch.terminate_within(GIVE_UP_AFTER);
    if exited.is_none() {
        // Killed before the test reads the store: the one thread serving
        // the filesystem would otherwise serve the test's reads only
        // between the watch's slow fsyncs.
        let _ = watch.child.kill();
        let _ = watch.child.wait();
    }
    let (_, turns) = end_storms(&mut storms);
    let err = watch.stderr();
    let summaries = watch.summaries();
    let counted_in_facts = fact_sum(&summaries, agent_linux::store_queue::SHED_FACT);
    let shed = shed_said(&err);
    let unstored_at_stop = err
        .lines()
        .find(|l| l.contains("summaries queued at the stop were not stored"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok());
    eprintln!(
        "slow store: {turns} matching runs, {fsyncs_at_stop} fsyncs before SIGTERM, \
         {} summaries stored, shed (said, of them in no fact) {shed:?}, {counted_in_facts} \
         counted in facts, {unstored_at_stop:?} queued at the stop not stored, \
         VmRSS {rss_ready} KiB ready, VmHWM {hwm} KiB, exit after SIGTERM {:?}",
        summaries.len(),
        exited.map(|(took, _)| took)
    );
    assert!(storm_ran_on, "the storm ended before SIGTERM");
    // Each of issue 36 item 5's three claims checked, all failures said.
    let mut failures = Vec::new();
    match exited {
        None => failures.push(format!(
            "the watch had not exited {GIVE_UP_AFTER:?} after SIGTERM (it was storing its backlog)"
        )),
        Some((took, _)) if took > EXIT_WITHIN => {
            failures.push(format!("the watch took {took:?} to exit after SIGTERM"))
        }
        Some(_) => {}
    }
    if hwm > rss_ready + RSS_GROWTH_KIB {
        failures.push(format!(
            "memory grew from {rss_ready} to {hwm} KiB over the storm"
        ));
    }
    // The store was behind (else this test checks nothing), and what the
    // queue could not hold is counted: in the fact of the summaries stored
    // after it, the rest (shed after the last one stored) on stderr.
    match shed {
        Some((shed, in_no_fact)) if shed > 0 => {
            if counted_in_facts + in_no_fact != shed {
                failures.push(format!(
                    "{shed} summaries shed, {counted_in_facts} counted in facts and \
                     {in_no_fact} in none"
                ));
            }
        }
        _ => failures.push("no summary was shed while the store was behind".into()),
    }
    // Its stderr's end: a line for each summary stored comes before.
    let tail: Vec<&str> = err.lines().rev().take(20).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    assert!(
        failures.is_empty(),
        "{}\nthe watch's stderr ends:\n{}",
        failures.join("\n"),
        tail.join("\n")
    );
    assert!(exited.is_some_and(|(_, ok)| ok), "the watch failed:\n{err}");
    assert!(!summaries.is_empty(), "nothing stored:\n{err}");
    assert_attributed_exactly(&summaries);
}

#[test]
fn ebpf_storm_is_attributed_exactly_in_bounded_memory_and_sigterm_is_prompt() {
    let _alone = alone();
    storm(
        "ebpf_storm_is_attributed_exactly_in_bounded_memory_and_sigterm_is_prompt",
        "ebpf",
    );
}

/// More matching runs at once than the kernel has slots: those matched
/// while every slot is taken are not traced, said on stderr, and counted
/// in the fact `watch.skipped_runs` of the summaries that follow.
#[test]
fn ebpf_runs_beyond_the_slots_are_counted_in_a_fact() {
    let _alone = alone();
    let test = "ebpf_runs_beyond_the_slots_are_counted_in_a_fact";
    if !is_root() {
        edge_tests::skip(test, "the process-events connector needs root");
        return;
    }
    if !ebpf_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("slotstag{}", std::process::id());
    let mut watch = start_watch(dir.path(), &tag, "ebpf", &[]);
    const RUNS: usize = 80;
    // Each lives until the test lets it go (its stdin closes).
    let mut runs: Vec<Child> = (0..RUNS)
        .map(|_| {
            Command::new("sh")
                .args(["-c", "read -r x", &tag])
                .stdin(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Wait until every run was looked at: traced or skipped.
    let said = |text: &str| text.matches("eBPF run slots are taken").count();
    let deadline = Instant::now() + Duration::from_secs(20);
    while said(&watch.stderr()) < RUNS - 64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for run in &mut runs {
        drop(run.stdin.take());
    }
    for run in &mut runs {
        let _ = wait_timeout(run, 30);
    }
    // Every traced run's summary stored (64 runs at most).
    let deadline = Instant::now() + Duration::from_secs(20);
    let traced = RUNS - said(&watch.stderr());
    while watch.summaries().len() < traced && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, ok) = watch.terminate();
    let err = watch.stderr();
    assert!(ok, "{err}");
    let skipped = said(&err) as u64;
    assert!(skipped >= (RUNS - 64) as u64, "{err}");
    let summaries = watch.summaries();
    assert_eq!(
        fact_sum(&summaries, "watch.skipped_runs"),
        skipped,
        "the skipped runs said on stderr are not all counted in the summaries' facts:\n{err}"
    );
}
