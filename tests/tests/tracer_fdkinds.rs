//! Summaries from `edge-agent run` decode, carry the right fd kinds (a
//! file read vs a TCP, UDP or Unix socket read vs a pipe read), and the
//! command's errors are one clear line.

mod tracer_support;

use std::process::Command;

use agent_core::{FdKind, Key, SyscallId};
use tracer_support::*;

const FDS: &str = r#"
#include <fcntl.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
/* 3 file reads, 5 Unix-socket writes + reads, 7 pipe writes + reads,
   4 TCP writes + reads (read through a dup of the accepted socket),
   6 UDP writes + reads. */
int main(void) {
  char b[16];
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  int l = socket(AF_INET, SOCK_STREAM, 0);
  bind(l, (struct sockaddr *)&a, sizeof a);
  listen(l, 1);
  getsockname(l, (struct sockaddr *)&a, &al);
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(c, (struct sockaddr *)&a, sizeof a) != 0) return 2;
  int acc = accept(l, 0, 0);
  int d = dup(acc);
  for (int i = 0; i < 4; i++) { write(c, "x", 1); read(d, b, 1); }
  a.sin_port = 0;
  int u = socket(AF_INET, SOCK_DGRAM, 0);
  bind(u, (struct sockaddr *)&a, sizeof a);
  al = sizeof a;
  getsockname(u, (struct sockaddr *)&a, &al);
  connect(u, (struct sockaddr *)&a, sizeof a);
  for (int i = 0; i < 6; i++) { write(u, "x", 1); read(u, b, 1); }
  close(l); close(c); close(acc); close(d); close(u);
  int f = open("/proc/self/status", O_RDONLY);
  for (int i = 0; i < 3; i++) read(f, b, 1);
  int s[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, s);
  for (int i = 0; i < 5; i++) { write(s[0], "x", 1); read(s[1], b, 1); }
  int p[2];
  pipe(p);
  for (int i = 0; i < 7; i++) { write(p[1], "xy", 2); read(p[0], b, 2); }
  close(f); close(s[0]); close(s[1]); close(p[0]); close(p[1]);
  return 0;
}
"#;

fn key(name: &str, fd_kind: FdKind) -> Key {
    Key {
        id: SyscallId::from_name(name).unwrap(),
        fd_kind,
    }
}

#[test]
fn fd_kinds_are_right() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "fds", FDS);
    let (out, s) = agent_run(
        dir.path(),
        &["--fact", "net.adapter=bridged"],
        &[exe.to_str().unwrap()],
    );
    assert!(out.status.success());
    let count = |name, kind| s.get(key(name, kind)).map_or(0, |e| e.count);
    assert_eq!(
        count("read", FdKind::File),
        3 + 1,
        "3 reads + the loader's read of libc"
    );
    assert_eq!(count("read", FdKind::Unix), 5);
    assert_eq!(count("write", FdKind::Unix), 5);
    assert_eq!(count("read", FdKind::Tcp), 4);
    assert_eq!(count("write", FdKind::Tcp), 4);
    assert_eq!(count("read", FdKind::Udp), 6);
    assert_eq!(count("write", FdKind::Udp), 6);
    assert_eq!(count("read", FdKind::Socket), 0);
    assert_eq!(count("read", FdKind::Pipe), 7);
    assert_eq!(count("write", FdKind::Pipe), 7);
    assert_eq!(count("close", FdKind::Unix), 2);
    assert_eq!(count("close", FdKind::Tcp), 4);
    assert_eq!(count("close", FdKind::Udp), 1);
    assert_eq!(count("accept", FdKind::Tcp), 1);
    assert_eq!(count("connect", FdKind::Tcp), 1);
    assert_eq!(count("close", FdKind::Pipe), 2);
    let pipe_read = s.get(key("read", FdKind::Pipe)).unwrap();
    assert_eq!(pipe_read.param_mean(), Some(2.0), "requested size");
    assert_eq!(pipe_read.result_mean(), 2.0);
    assert_eq!(s.facts.get("net.adapter"), Some("bridged"));
    assert!(!s.facts.kernel.is_empty());
    assert!(!s.facts.agent_version.is_empty());
}

#[test]
fn show_prints_table_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _) = agent_run(
        dir.path(),
        &[],
        &["dd", "if=/dev/zero", "of=/dev/null", "bs=64", "count=100"],
    );
    let file = dir.path().join("run.summary");
    let out = output_timeout(Command::new(agent()).arg("show").arg(&file), 30);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("read") && text.contains("dd"), "{text}");
    let out = output_timeout(
        Command::new(agent())
            .args(["show", "--json"])
            .arg(&file)
            .arg(&file),
        30,
    );
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let objects: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objects.len(), 2, "one object per file");
    let reads: u64 = objects[0]["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "read")
        .map(|s| s["count"].as_u64().unwrap())
        .sum();
    assert_eq!(reads, 103);
    assert_eq!(objects[0]["facts"]["program"], "dd");

    // A file that is not a summary.
    let bad = dir.path().join("bad");
    std::fs::write(&bad, b"not a summary").unwrap();
    let out = output_timeout(Command::new(agent()).arg("show").arg(&bad), 30);
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

#[test]
fn usage_errors_are_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("x.summary");
    let cases: [(&[&str], &str); 5] = [
        (
            &["run", "--only", "read,nosuchcall", "--", "true"],
            "unknown syscall name \"nosuchcall\"",
        ),
        (&["run", "--fact", "bad key=1", "--", "true"], "bad fact"),
        (
            &["run", "--out", "/nonexistent-dir/x", "--", "true"],
            "cannot write /nonexistent-dir/x",
        ),
        (
            &[
                "run",
                "--out",
                out_file.to_str().unwrap(),
                "--",
                "no-such-command-xyz",
            ],
            "command not found",
        ),
        (
            &["run", "--spool", "/proc/version/spool", "--", "true"],
            "spool",
        ),
    ];
    for (args, want) in cases {
        let out = output_timeout(Command::new(agent()).args(args), 30);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        // Besides the line naming the backend `auto` chose, if it got
        // that far.
        assert_eq!(lines_but_backend(&err), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn library_trace_command() {
    let outcome = agent_linux::trace_command(&agent_linux::TraceOptions {
        command: vec!["sh".into(), "-c".into(), "exit 3".into()],
        facts: vec![("k".into(), "v".into())],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(outcome.status.code(), Some(3));
    assert_eq!(outcome.summary.run.exit, agent_core::Exit::Code(3));
    assert_eq!(outcome.summary.facts.get("k"), Some("v"));
    let execve = SyscallId::from_name("execve").unwrap();
    assert_eq!(
        outcome
            .summary
            .get(Key {
                id: execve,
                fd_kind: FdKind::None
            })
            .map(|e| e.count),
        Some(1)
    );
}
