//! A matched process that forked before `watch` traced it: its child (a
//! subshell, which keeps its parent's command line, or any child met before
//! its exec) is part of the run, not a run of its own, and what the child
//! does once the run is traced is counted in it. With the ptrace backend
//! and, as root, the eBPF one.
//!
//! CI once saw a directive's two runs spent on one shell and the child it
//! forked for its first command while the agent read its command line.

mod tracer_support;

use std::process::{Command, Stdio};
use std::time::Duration;

use agent_core::Summary;
use tracer_support::*;

/// Starts `sh -c SCRIPT MARKER`, whose subshell waits for `flag`, then
/// runs two `cat`s; waits until the subshell exists; then watches with
/// `backend` and returns the summaries of the marker's runs once the
/// shell has ended.
fn watch_a_shell_that_forked_before(backend: &str) -> (Vec<Summary>, String) {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("edge-forked-before-{backend}-{}", std::process::id());
    let flag = dir.path().join("go");
    let script = format!(
        "( while [ ! -e {flag} ]; do sleep 0.02; done; \
           cat /proc/self/stat > /dev/null; cat /proc/self/stat > /dev/null ) & wait",
        flag = flag.display()
    );
    let mut shell = Command::new("sh")
        .args(["-c", &script, &marker])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let shell_pid = shell.id();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while children_of(shell_pid).is_empty() {
        assert!(std::time::Instant::now() < deadline, "no subshell");
        std::thread::sleep(Duration::from_millis(10));
    }

    let out = dir.path().join("out");
    let mut watch = Command::new(agent())
        .args(["watch", "--backend", backend, "--window", "whole"])
        .args(["--match", &marker, "--out-dir"])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Lines::collect(watch.stderr.take().unwrap());
    let watch = Killed(watch);
    lines.wait_for("edge-agent: watching for", 30);

    std::fs::write(&flag, "").unwrap();
    let st = wait_timeout(&mut shell, 30);
    assert!(st.success(), "the shell: {st:?}");
    // Its summary is written at its end; give the watch a moment.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::fs::read_dir(&out).map_or(0, |d| d.count()) == 0
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let summaries = stop_watch(watch, &lines, &out);
    (summaries, lines.text())
}

fn check(backend: &str) {
    let (summaries, log) = watch_a_shell_that_forked_before(backend);
    assert_eq!(summaries.len(), 1, "one run, the shell's: {log}");
    let counts = summary_counts(&summaries[0]);
    let execs = counts.get("execve").map_or(0, |c| c.0);
    // The two cats and the subshell's sleeps: all the subshell's children,
    // forked after the run began.
    assert!(
        execs >= 2,
        "the subshell's calls are the run's: {execs} execve; {counts:?}\n{log}"
    );
}

#[test]
fn a_child_forked_before_the_trace_is_the_runs_with_ptrace() {
    check("ptrace");
}

#[test]
fn a_child_forked_before_the_trace_is_the_runs_with_ebpf() {
    if !ebpf_available("a_child_forked_before_the_trace_is_the_runs_with_ebpf") {
        return;
    }
    check("ebpf");
}
