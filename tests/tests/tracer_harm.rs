//! `edge-agent run` never harms the program it started: after Ctrl-C,
//! SIGTERM or `kill -9` of the agent an `--only` program keeps working (its
//! filtered syscalls still run), any `--only` set starts, a job-control
//! stop does not lose the program's status, and a summary that cannot be
//! saved does not replace the program's status.

mod tracer_support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_core::{Exit, Summary};
use tracer_support::*;

/// The first child of `parent`, waited for up to 20 s.
fn first_child(parent: u32) -> Option<u32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(p) = children_of(parent).first() {
            return Some(*p);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Starts `edge-agent run ARGS -- sh -c SCRIPT` and waits until its program
/// is traced; returns the agent, the program's pid and the tracer's pid.
/// With `--only` the tracer is a child process of the agent and the program
/// its child (relay.rs); otherwise the agent is the tracer.
fn start_traced_by(agent_args: &[&str], script: &str) -> (Child, u32, u32) {
    let bin = agent();
    let mut agent = Command::new(bin)
        .arg("run")
        .args(agent_args)
        .args(["--", "sh", "-c", script])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let tracer = if agent_args.contains(&"--only") {
        first_child(agent.id())
    } else {
        Some(agent.id())
    };
    let Some(program) = tracer.and_then(first_child) else {
        let _ = agent.kill();
        panic!("the agent started no program");
    };
    let tracer = tracer.unwrap();
    assert_traced_by(program, tracer, 10);
    (agent, program, tracer)
}

/// [`start_traced_by`] without the tracer's pid.
fn start_traced(agent_args: &[&str], script: &str) -> (Child, u32) {
    let (agent, program, _) = start_traced_by(agent_args, script);
    (agent, program)
}

fn signal(child: &Child, sig: i32) {
    agent_linux::sys::kill(child.id() as i32, sig).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| format!("<{e}>"))
}

/// Item 1: after SIGINT the program's `--only` syscalls (write, and the
/// close/dup2 the fd cache adds) still work, and the agent exits with the
/// program's status once the program ends.
#[test]
fn only_program_keeps_working_after_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.summary");
    let target = dir.path().join("b.txt");
    let script = format!(
        "sleep 1; echo b > {t}; echo rc=$? >> {t}.rc; exit 4",
        t = target.display()
    );
    let (mut agent, _) = start_traced(
        &["--only", "write", "--out", out.to_str().unwrap()],
        &script,
    );
    std::thread::sleep(Duration::from_millis(200));
    signal(&agent, libc::SIGINT);
    let st = wait_timeout(&mut agent, 30);
    assert_eq!(read(&target), "b\n", "the program's write after Ctrl-C");
    assert_eq!(
        read(&dir.path().join("b.txt.rc")),
        "rc=0\n",
        "and its redirection (dup2, close)"
    );
    assert_eq!(
        st.code(),
        Some(4),
        "the agent exits with the program's status"
    );
    let summary = Summary::decode(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(summary.run.exit, Exit::Detached);
}

/// Item 1, `kill -9`: the agent's PID is a relay and the tracer a process
/// of its own, so SIGKILL of the agent leaves the program served to its end
/// (its filtered syscalls work) and the summary is still written.
#[test]
fn only_program_keeps_working_after_kill_9_of_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.summary");
    let target = dir.path().join("k.txt");
    let script = format!(
        "sleep 1; echo k > {t}; echo rc=$? >> {t}.rc; exit 4",
        t = target.display()
    );
    let (mut agent, program, tracer) = start_traced_by(
        &["--only", "write", "--out", out.to_str().unwrap()],
        &script,
    );
    assert_ne!(
        tracer,
        agent.id(),
        "the tracer is not the PID the user sees"
    );
    std::thread::sleep(Duration::from_millis(200));
    agent.kill().unwrap();
    let st = wait_timeout(&mut agent, 30);
    assert_eq!(st.code(), None, "the agent died of SIGKILL");
    // The program runs to its end, still traced by the tracer process.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::path::Path::new(&format!("/proc/{program}")).exists()
        && !read(&dir.path().join("k.txt.rc")).starts_with("rc=")
    {
        assert!(Instant::now() < deadline, "the program did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(read(&target), "k\n", "the program's write after kill -9");
    assert_eq!(read(&dir.path().join("k.txt.rc")), "rc=0\n");
    // The tracer writes the summary once the program has ended.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !out.exists() {
        assert!(Instant::now() < deadline, "no summary after kill -9");
        std::thread::sleep(Duration::from_millis(20));
    }
    let summary = Summary::decode(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(summary.run.exit, Exit::Code(4));
    assert!(summary_counts(&summary).contains_key("write"));
}

/// Item 1: the same for SIGTERM, with a child process forked after the
/// signal (it inherits the filter and must be served too).
#[test]
fn only_program_and_its_children_keep_working_after_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.summary");
    let target = dir.path().join("c.txt");
    let script = format!(
        "sleep 1; sh -c 'echo c > {t}; cat {t} > {t}.copy'; exit 3",
        t = target.display()
    );
    let (mut agent, _) = start_traced(
        &[
            "--only",
            "write,read,openat",
            "--out",
            out.to_str().unwrap(),
        ],
        &script,
    );
    std::thread::sleep(Duration::from_millis(200));
    signal(&agent, libc::SIGTERM);
    let st = wait_timeout(&mut agent, 30);
    assert_eq!(read(&target), "c\n");
    assert_eq!(read(&dir.path().join("c.txt.copy")), "c\n");
    assert_eq!(st.code(), Some(3));
}

/// Item 2: any `--only` set starts the program traced, including the
/// syscalls a start-up handshake would use (kill, getpid).
#[test]
fn any_only_set_starts_the_program_traced() {
    let dir = tempfile::tempdir().unwrap();
    for set in ["kill", "getpid", "kill,getpid,write,execve,exit_group"] {
        let (out, summary) = agent_run(
            dir.path(),
            &["--only", set],
            &["sh", "-c", "kill -0 $$; echo hi >/dev/null; exit 6"],
        );
        assert_eq!(
            out.status.code(),
            Some(6),
            "--only {set}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(summary.run.exit, Exit::Code(6));
        if set.contains("kill") {
            assert!(
                summary_counts(&summary).contains_key("kill"),
                "--only {set}: the program's kill is traced"
            );
        }
    }
}

/// Item 3: SIGINT while the program is in a job-control stop: the agent
/// detaches and still exits with the program's status when it ends.
#[test]
fn sigint_during_a_job_control_stop_keeps_the_status() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.summary");
    // ptrace's detach from a stopped program (TracerPid) is what is
    // checked.
    let (mut agent, program) = start_traced(
        &["--backend", "ptrace", "--out", out.to_str().unwrap()],
        "kill -STOP $$; sleep 1; exit 5",
    );
    // Wait for the stop.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{program}/stat")).unwrap();
        let state = stat.rsplit(')').next().unwrap().split_whitespace().next();
        if matches!(state, Some("T") | Some("t")) {
            break;
        }
        assert!(Instant::now() < deadline, "the program never stopped");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    signal(&agent, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        agent.try_wait().unwrap().is_none(),
        "the agent waits for the stopped program"
    );
    assert_eq!(tracer_of(program), Some(0), "detached while stopped");
    agent_linux::sys::kill(program as i32, libc::SIGCONT).unwrap();
    let st = wait_timeout(&mut agent, 30);
    assert_eq!(st.code(), Some(5), "the program's status, not the agent's");
}
