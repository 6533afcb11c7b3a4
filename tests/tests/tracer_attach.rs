//! `edge-agent attach` never harms the traced program: Ctrl-C (SIGINT)
//! detaches and the program finishes its work; `kill -9` of the agent lets
//! it run on; threads are all followed.

mod tracer_support;

use std::process::{Command, Stdio};
use std::time::Duration;

use agent_core::{Exit, Summary};
use tracer_support::*;

/// A program that works for about a second (forking `sleep`s), then exits 0
/// having written `done` to its stdout.
fn spawn_worker() -> std::process::Child {
    Command::new("sh")
        .args([
            "-c",
            "i=0; while [ $i -lt 12 ]; do sleep 0.1; i=$((i+1)); done; echo done",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(worker: std::process::Child) {
    let mut worker = worker;
    let st = wait_timeout(&mut worker, 30);
    let mut out = String::new();
    std::io::Read::read_to_string(worker.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(st.success(), "the traced program must end normally: {st:?}");
    assert_eq!(out.trim(), "done", "and finish its work");
}

#[test]
fn sigint_detaches_and_the_program_finishes() {
    // Built before the target starts: a first build can outlast it.
    let bin = agent();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("attach.summary");
    let worker = spawn_worker();
    std::thread::sleep(Duration::from_millis(100));
    // ptrace's stop and detach (TracerPid) are what is checked.
    let mut agent = Command::new(&bin)
        .arg("attach")
        .args(["--backend", "ptrace", "--window", "whole"])
        .arg(worker.id().to_string())
        .arg("--out")
        .arg(&file)
        .spawn()
        .unwrap();
    assert_traced_by(worker.id(), agent.id(), 10);
    std::thread::sleep(Duration::from_millis(400));
    agent_linux::sys::kill(agent.id() as i32, libc::SIGINT).unwrap();
    let st = wait_timeout(&mut agent, 30);
    assert!(st.success(), "agent: {st:?}");
    assert_eq!(tracer_of(worker.id()), Some(0), "detached on SIGINT");
    finish(worker);
    let summary = Summary::decode(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(summary.run.exit, Exit::Detached);
    assert!(summary.run.events > 0);
    assert!(
        summary.run.processes >= 2,
        "the sleeps it forked are followed"
    );
    let program = summary.facts.program.as_str();
    assert!(["sh", "dash", "bash"].contains(&program), "{program}");
}

#[test]
fn kill_9_of_the_agent_lets_the_program_run_on() {
    // Built before the target starts: a first build can outlast it.
    let bin = agent();
    let dir = tempfile::tempdir().unwrap();
    let worker = spawn_worker();
    std::thread::sleep(Duration::from_millis(100));
    // ptrace's stop and detach (TracerPid) are what is checked.
    let mut agent = Command::new(&bin)
        .arg("attach")
        .args(["--backend", "ptrace", "--window", "whole"])
        .arg(worker.id().to_string())
        .arg("--out")
        .arg(dir.path().join("x.summary"))
        .spawn()
        .unwrap();
    // Without this the test would pass if the attach never happened.
    assert_traced_by(worker.id(), agent.id(), 10);
    std::thread::sleep(Duration::from_millis(400));
    agent.kill().unwrap();
    agent.wait().unwrap();
    finish(worker);
}

const THREADS_LONG: &str = r#"
#include <pthread.h>
#include <time.h>
static void *work(void *arg) {
  struct timespec t = {0, 20000000};
  for (int i = 0; i < 60; i++) nanosleep(&t, 0);
  return 0;
}
int main(void) {
  pthread_t t[3];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], 0, work, 0);
  for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
  return 5;
}
"#;

#[test]
fn attach_follows_every_thread_and_sees_the_exit() {
    // Built before the target starts: a first build can outlast it.
    let bin = agent();
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "threads_long", THREADS_LONG);
    let mut prog = Command::new(&exe).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let file = dir.path().join("t.summary");
    let out = output_timeout(
        Command::new(&bin)
            .arg("attach")
            .args(["--window", "whole"])
            .arg(prog.id().to_string())
            .arg("--out")
            .arg(&file),
        60,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(wait_timeout(&mut prog, 30).code(), Some(5));
    let summary = Summary::decode(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        summary.run.exit,
        Exit::Code(5),
        "the program ended while traced"
    );
    assert_eq!(summary.run.threads, 4);
    let counts = summary_counts(&summary);
    assert!(counts["clock_nanosleep"].0 > 20, "{counts:?}");
}

#[test]
fn attach_errors_are_one_clear_line() {
    // Built before the target starts: a first build can outlast it.
    let bin = agent();
    let out = output_timeout(Command::new(&bin).args(["attach", "999999999"]), 30);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no process with PID 999999999"), "{err}");

    // A process that has exited but is not reaped yet.
    let mut zombie = Command::new("true").spawn().unwrap();
    let zpid = zombie.id();
    for _ in 0..500 {
        let status = std::fs::read_to_string(format!("/proc/{zpid}/status")).unwrap_or_default();
        if status.contains("State:\tZ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = output_timeout(Command::new(&bin).args(["attach", &zpid.to_string()]), 30);
    let _ = zombie.wait();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("has already exited"), "{err}");

    // A process that already has a tracer.
    let mut traced = Command::new("strace")
        .args(["-o", "/dev/null", "sleep", "5"])
        .spawn()
        .unwrap();
    let mut pid = None;
    for _ in 0..500 {
        std::thread::sleep(Duration::from_millis(10));
        // strace forks short-lived probes at startup: wait for the traced
        // `sleep` itself.
        pid = children_of(traced.id()).into_iter().find(|p| {
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
            comm.trim() == "sleep" && !status.contains("TracerPid:\t0\n")
        });
        if pid.is_some() {
            break;
        }
    }
    let pid = pid.expect("strace started sleep");
    // A second tracer is ptrace's refusal (eBPF attaches beside one).
    let out = output_timeout(
        Command::new(&bin).args(["attach", "--backend", "ptrace", &pid.to_string()]),
        30,
    );
    let _ = traced.kill();
    let _ = traced.wait();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("already traced by PID"), "{err}");
}

#[test]
fn watch_traces_new_matching_processes() {
    // Built before the target starts: a first build can outlast it.
    let bin = agent();
    let dir = tempfile::tempdir().unwrap();
    let text = format!("edge-watch-test-{}", std::process::id());
    let mut agent = Command::new(&bin)
        .args(["watch", "--window", "whole", "--match", &text, "--out-dir"])
        .arg(dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // Lives long enough for a scan to find it, then forks and exits 0.
    let st = Command::new("sh")
        .args([
            "-c",
            &format!("sleep 0.6; echo {text} >/dev/null; /bin/true"),
        ])
        .status()
        .unwrap();
    assert!(st.success());
    std::thread::sleep(Duration::from_millis(300));
    agent_linux::sys::kill(agent.id() as i32, libc::SIGINT).unwrap();
    assert!(wait_timeout(&mut agent, 30).success());
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        files.len(),
        1,
        "one summary for the one matching process: {files:?}"
    );
    let summary = Summary::decode(&std::fs::read(&files[0]).unwrap()).unwrap();
    assert_eq!(summary.run.exit, Exit::Code(0));
    assert!(summary.run.processes >= 2, "its children are followed");
    let counts = summary_counts(&summary);
    assert!(counts.contains_key("execve"), "{counts:?}");
}

#[test]
fn sigint_during_run_detaches_and_still_reports_the_programs_status() {
    // Built before the target starts: a first build can outlast it.
    let bin = agent();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.summary");
    let mut agent = Command::new(&bin)
        .arg("run")
        .arg("--out")
        .arg(&file)
        .args(["--", "sh", "-c", "sleep 0.8; exit 4"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    agent_linux::sys::kill(agent.id() as i32, libc::SIGINT).unwrap();
    // The summary is written at once; the agent then waits for the program,
    // which runs on untraced and ends normally.
    let st = wait_timeout(&mut agent, 30);
    assert_eq!(st.code(), Some(4), "the program's own exit code");
    let summary = Summary::decode(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(summary.run.exit, Exit::Detached);
    let mut err = String::new();
    std::io::Read::read_to_string(agent.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("detached"), "{err}");
}

#[test]
fn sigint_while_the_program_forks_leaves_nothing_behind() {
    // Built before the target starts: a first build can outlast it.
    let bin = agent();
    let dir = tempfile::tempdir().unwrap();
    for delay_ms in [150, 300, 450] {
        let mut agent = Command::new(&bin)
            .arg("run")
            .arg("--out")
            .arg(dir.path().join("f.summary"))
            .args([
                "--",
                "sh",
                "-c",
                "for i in $(seq 400); do /bin/true; done; exit 6",
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = agent_linux::sys::kill(agent.id() as i32, libc::SIGINT);
        // Children born while detaching are let go too: the loop finishes.
        assert_eq!(wait_timeout(&mut agent, 60).code(), Some(6));
    }
}
