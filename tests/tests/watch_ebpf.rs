//! `edge-agent watch --backend ebpf`: one BPF program for the whole watch
//! counts each matched run apart (a slot per run in the kernel), so runs
//! one after another and two at once each get their own summary, with the
//! counts `strace -f -c` gives for the calls made after discovery; the
//! watched program is never stopped nor ptraced, and a `kill -9` of the
//! watch leaves it running with no BPF program left loaded.

mod tracer_support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_core::{Exit, Summary};
use tracer_support::*;

/// Sleeps long enough for watch to find it (the connector says at once),
/// then works in itself and a forked child: `n` writes to /dev/null and `n`
/// getppid each; exits 3.
const WORK: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  struct timespec ts = {0, 500000000};
  nanosleep(&ts, 0);
  int fd = open("/dev/null", O_WRONLY);
  pid_t pid = fork();
  char c = 'x';
  for (int i = 0; i < n; i++) { write(fd, &c, 1); getppid(); }
  if (pid == 0) _exit(0);
  int st;
  waitpid(pid, &st, 0);
  return 3;
}
"#;

/// One test at a time: each runs busy loops of processes that slow the
/// other's watch on 2 CPUs. (Two at once also once saw the kernel refuse a
/// load with EAGAIN: the exec reader's SIGALRM during verification, which
/// `exec_storm_does_not_stop_the_programs_loading` now covers.)
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The calls made after the sleep, the ones compared.
const AFTER_DISCOVERY: [&str; 4] = ["write", "getppid", "clone", "wait4"];

/// `edge-agent watch --backend ebpf --match MARKER --out-dir OUT`, ready
/// once it says what it watches for; stderr in `err`.
fn start_watch(marker: &str, out: &Path, err: &Path) -> Child {
    let mut child = spawn_watch(marker, out, err);
    if let Err(why) = wait_until_watching(&mut child, err) {
        panic!("watch did not start: {why}");
    }
    child
}

/// `edge-agent watch --backend ebpf --match MARKER --out-dir OUT`, just
/// spawned; stderr in `err`.
fn spawn_watch(marker: &str, out: &Path, err: &Path) -> Child {
    std::fs::create_dir_all(out).unwrap();
    Command::new(agent())
        .args(["watch", "--backend", "ebpf", "--window", "whole"])
        .args(["--discover", "connector", "--match", marker])
        .arg("--out-dir")
        .arg(out)
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(err).unwrap())
        .spawn()
        .unwrap()
}

/// Waits until the watch says what it watches for (Ok), or it ended or
/// 30 s passed (Err: what it wrote on stderr).
fn wait_until_watching(child: &mut Child, err: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(err).unwrap_or_default();
        if text.contains("edge-agent: watching for") {
            return Ok(());
        }
        if child.try_wait().unwrap().is_some() || Instant::now() >= deadline {
            return Err(text);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn summaries(dir: &Path) -> Vec<Summary> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "summary"))
        .map(|f| Summary::decode(&std::fs::read(f).unwrap()).expect("decodes"))
        .collect()
}

fn picked(c: &Counts) -> Vec<(&'static str, u64)> {
    AFTER_DISCOVERY
        .iter()
        .map(|&k| (k, c.get(k).map_or(0, |v| v.0)))
        .collect()
}

#[test]
fn each_run_one_by_one_or_two_at_once_counts_what_strace_counts() {
    let _alone = alone();
    if !ebpf_available("each_run_one_by_one_or_two_at_once_counts_what_strace_counts") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("slotwork{}", std::process::id());
    let work = compile_c(dir.path(), &marker, WORK);
    let out = dir.path().join("out");
    let err = dir.path().join("watch.err");
    let mut watch = start_watch(&marker, &out, &err);
    let run = |n: u32| {
        Command::new(&work)
            .arg(n.to_string())
            .stdin(Stdio::null())
            .spawn()
            .unwrap()
    };
    // Two one after another, then two at once (their calls interleave in
    // the kernel: only the slots keep them apart).
    for n in [100, 200] {
        assert_eq!(wait_timeout(&mut run(n), 30).code(), Some(3));
    }
    let (mut a, mut b) = (run(300), run(700));
    let sampled = [a.id(), b.id()];
    // Never stopped, never ptraced, while discovered and traced.
    for _ in 0..20 {
        for pid in sampled {
            if let Some(tracer) = tracer_of(pid) {
                assert_eq!(tracer, 0, "process {pid} has a tracer");
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(wait_timeout(&mut a, 30).code(), Some(3));
    assert_eq!(wait_timeout(&mut b, 30).code(), Some(3));
    // Each run's summary is written when its last process ends.
    let deadline = Instant::now() + Duration::from_secs(10);
    while summaries(&out).len() < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    agent_linux::sys::kill(watch.id() as i32, libc::SIGINT).unwrap();
    assert!(wait_timeout(&mut watch, 30).success());
    let said = std::fs::read_to_string(&err).unwrap_or_default();
    let got = summaries(&out);
    assert_eq!(got.len(), 4, "one summary per run; watch said: {said}");
    let mut by_n: Vec<(u64, Summary)> = got
        .into_iter()
        .map(|s| (summary_counts(&s).get("write").map_or(0, |v| v.0) / 2, s))
        .collect();
    by_n.sort_by_key(|(n, _)| *n);
    assert_eq!(
        by_n.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        [100, 200, 300, 700],
        "each run's writes (two processes of n each), apart; watch said: {said}"
    );
    for (n, s) in &by_n {
        let (_, strace) = strace_counts(dir.path(), &[], &[work.to_str().unwrap(), &n.to_string()]);
        let counts = summary_counts(s);
        assert_eq!(picked(&counts), picked(&strace), "run of n = {n}");
        assert_eq!(s.run.exit, Exit::Code(3), "run of n = {n}");
        assert_eq!(s.run.processes, 2, "run of n = {n}");
    }
}

#[test]
fn a_watched_run_is_never_stopped_and_outlives_a_killed_watch() {
    let _alone = alone();
    if !ebpf_available("a_watched_run_is_never_stopped_and_outlives_a_killed_watch") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("looper{}", std::process::id());
    let out = dir.path().join("out");
    let err = dir.path().join("watch.err");
    let mut watch = start_watch(&marker, &out, &err);
    let mut program = Command::new("sh")
        .args([
            "-c",
            "while :; do echo x >/dev/null; sleep 0.01; done",
            &marker,
        ])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = program.id();
    // Sampled while watched: never stopped (T/t), never ptraced.
    for _ in 0..50 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
                .unwrap()
        };
        assert_eq!(field("TracerPid:"), "0", "the program has a tracer");
        let state = field("State:");
        assert!(
            !state.starts_with('T') && !state.starts_with('t'),
            "stopped: {state}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    watch.kill().unwrap(); // SIGKILL
    watch.wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        program.try_wait().unwrap().is_none(),
        "the program ended with the watch"
    );
    assert_eq!(tracer_of(pid), Some(0));
    // (That the watch counts such a run is the test above; this one fails
    // with ptrace, whose tracee shows its tracer.)
    program.kill().unwrap();
    program.wait().unwrap();
}

/// The verifier gives up with EAGAIN when a signal is pending, and the
/// watch's exec reader sends the watch SIGALRM at every exec on the
/// machine: while loading, the agent holds its signals. Without that, a
/// host that starts processes all the time (here a shell starting `true`
/// in a loop, hundreds per second) never got the eBPF backend: 5 starts in
/// 5 failed.
#[test]
fn exec_storm_does_not_stop_the_programs_loading() {
    let _alone = alone();
    if !ebpf_available("exec_storm_does_not_stop_the_programs_loading") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut storm = Command::new("sh")
        .args(["-c", "while :; do /bin/true; done"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut outcome = Ok(());
    for attempt in 0..3 {
        let err = dir.path().join(format!("watch{attempt}.err"));
        let mut watch = spawn_watch("no-such-program-storm", &dir.path().join("out"), &err);
        let started = wait_until_watching(&mut watch, &err);
        let _ = watch.kill();
        watch.wait().unwrap();
        if let Err(why) = started {
            outcome = Err(format!("start {attempt}: {why}"));
            break;
        }
    }
    storm.kill().unwrap();
    storm.wait().unwrap();
    if let Err(e) = outcome {
        panic!("watch --backend ebpf did not start during an exec storm: {e}");
    }
}
