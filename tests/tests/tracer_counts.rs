//! `edge-agent run` sees exactly the syscalls `strace -f -c` sees, on
//! deterministic workloads: counts and errors per syscall agree exactly.
//! Also: exit codes and deaths by signal are the agent's own status.

mod tracer_support;

use std::os::unix::process::ExitStatusExt;

use agent_core::Exit;
use tracer_support::*;

#[test]
fn dd_reads_and_writes_match_strace() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = ["dd", "if=/dev/zero", "of=/dev/null", "bs=64", "count=3000"];
    let (out, summary) = agent_run(dir.path(), &[], &cmd);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (st, strace) = strace_counts(dir.path(), &[], &cmd);
    assert!(st.success());
    let agent = summary_counts(&summary);
    assert_eq!(agent["read"].0, 3003, "dd's reads: 3000 blocks + its setup");
    assert_same_counts(&agent, &strace, &[]);
    assert_eq!(summary.run.exit, Exit::Code(0));
    assert_eq!((summary.run.processes, summary.run.threads), (1, 1));
    assert_eq!(summary.facts.program.as_str(), "dd");
    assert_eq!(summary.run.events, agent.values().map(|c| c.0).sum::<u64>());
}

const THREADS: &str = r#"
#include <pthread.h>
#include <fcntl.h>
#include <unistd.h>
static int fd;
static void *work(void *arg) { char c = 'x'; for (int i = 0; i < 500; i++) write(fd, &c, 1); return 0; }
int main(void) {
  fd = open("/dev/null", O_WRONLY);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, work, 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
  return 0;
}
"#;

#[test]
fn threads_match_strace() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "threads", THREADS);
    let cmd = [exe.to_str().unwrap()];
    let (out, summary) = agent_run(dir.path(), &[], &cmd);
    assert!(out.status.success());
    let (_, strace) = strace_counts(dir.path(), &[], &cmd);
    let agent = summary_counts(&summary);
    assert_eq!(agent["write"].0, 2000);
    // Whether pthread_join has to wait (futex) depends on timing.
    assert_same_counts(&agent, &strace, &["futex"]);
    assert_eq!((summary.run.processes, summary.run.threads), (1, 5));
}

const CHAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
/* chain N: forks a child that execs `chain N-1`, waits for it, exits N. */
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  if (n == 0) return 0;
  char next[16];
  snprintf(next, sizeof next, "%d", n - 1);
  pid_t pid = fork();
  if (pid == 0) { execl("/proc/self/exe", argv[0], next, (char *)0); _exit(99); }
  int st;
  waitpid(pid, &st, 0);
  return WEXITSTATUS(st) + 1;
}
"#;

#[test]
fn fork_exec_chain_matches_strace_and_keeps_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "chain", CHAIN);
    let cmd = [exe.to_str().unwrap(), "4"];
    let (out, summary) = agent_run(dir.path(), &[], &cmd);
    assert_eq!(
        out.status.code(),
        Some(4),
        "the chain's exit code is the agent's"
    );
    let (st, strace) = strace_counts(dir.path(), &[], &cmd);
    assert_eq!(st.code(), Some(4));
    let agent = summary_counts(&summary);
    assert_eq!(agent["execve"].0, 5);
    assert_same_counts(&agent, &strace, &[]);
    assert_eq!(summary.run.processes, 5);
    assert_eq!(summary.run.exit, Exit::Code(4));
}

/// The default wait polls for stops before sleeping; `--spin-us 0` always
/// sleeps in waitpid. Both must see the same syscalls.
#[test]
fn sleeping_wait_matches_strace_too() {
    let dir = tempfile::tempdir().unwrap();
    let threads = compile_c(dir.path(), "threads", THREADS);
    let chain = compile_c(dir.path(), "chain", CHAIN);
    for cmd in [
        vec![threads.to_str().unwrap()],
        vec![chain.to_str().unwrap(), "3"],
    ] {
        let (out, summary) = agent_run(dir.path(), &["--spin-us", "0"], &cmd);
        let (st, strace) = strace_counts(dir.path(), &[], &cmd);
        assert_eq!(out.status.code(), st.code());
        assert_same_counts(&summary_counts(&summary), &strace, &["futex"]);
    }
}

const STOPPED: &str = r#"
#include <signal.h>
#include <unistd.h>
#include <time.h>
#include <sys/wait.h>
/* The child stops its parent (blocked reading a pipe), continues it, then
   writes to the pipe. */
int main(void) {
  int p[2];
  char c;
  pipe(p);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    struct timespec t = {0, 150000000};
    nanosleep(&t, 0);
    kill(parent, SIGSTOP);
    nanosleep(&t, 0);
    kill(parent, SIGCONT);
    write(p[1], "x", 1);
    _exit(0);
  }
  read(p[0], &c, 1);
  waitpid(pid, 0, 0);
  return 0;
}
"#;

#[test]
fn stopped_and_continued_program_matches_strace() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "stopped", STOPPED);
    let cmd = [exe.to_str().unwrap()];
    let (out, summary) = agent_run(dir.path(), &[], &cmd);
    assert!(
        out.status.success(),
        "the program was continued and ended normally"
    );
    // The stop interrupted the parent's pipe read, which then restarted.
    let pipe_read = summary
        .get(agent_core::Key {
            id: agent_core::SyscallId::from_name("read").unwrap(),
            fd_kind: agent_core::FdKind::Pipe,
        })
        .expect("pipe reads");
    assert_eq!((pipe_read.count, pipe_read.errors()), (2, 1));
    let (_, strace) = strace_counts(dir.path(), &[], &cmd);
    assert_same_counts(&summary_counts(&summary), &strace, &[]);
}

#[test]
fn death_by_signal_is_the_agents_own() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = ["sh", "-c", "kill -USR1 $$"];
    let (out, summary) = agent_run(dir.path(), &[], &cmd);
    assert_eq!(out.status.signal(), Some(libc::SIGUSR1), "{out:?}");
    assert_eq!(summary.run.exit, Exit::Signal(libc::SIGUSR1));
    let (_, strace) = strace_counts(dir.path(), &[], &cmd);
    assert_same_counts(&summary_counts(&summary), &strace, &[]);

    let (out, summary) = agent_run(dir.path(), &[], &["sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(summary.run.exit, Exit::Code(7));
}

const EXEC_FROM_THREAD: &str = r#"
#include <pthread.h>
#include <unistd.h>
/* A non-leader thread execs: it takes over the leader's thread id. It waits
   (spinning, so with no syscall of its own) until pthread_create has
   returned in the main thread: an exec that came earlier could end the main
   thread's clone3 or its signal-mask restore before their exits, so either
   tracer would count them or not by chance. */
static int created;
static void *run(void *arg) {
  while (!__atomic_load_n(&created, __ATOMIC_ACQUIRE)) {}
  execl("/bin/true", "true", (char *)0);
  return 0;
}
int main(void) {
  pthread_t t;
  pthread_create(&t, 0, run, 0);
  __atomic_store_n(&created, 1, __ATOMIC_RELEASE);
  for (;;) pause();
}
"#;

#[test]
fn exec_from_a_thread_changes_the_leader() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "threadexec", EXEC_FROM_THREAD);
    let cmd = [exe.to_str().unwrap()];
    let (out, summary) = agent_run(dir.path(), &[], &cmd);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(summary.run.exit, Exit::Code(0));
    let (_, strace) = strace_counts(dir.path(), &[], &cmd);
    let agent = summary_counts(&summary);
    assert_eq!(agent["execve"].0, 2);
    assert_eq!(agent["clone3"].0, 1);
    assert_same_counts(&agent, &strace, &[]);
}

#[test]
fn only_matches_strace_seccomp_bpf() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = ["dd", "if=/dev/zero", "of=/dev/null", "bs=64", "count=2000"];
    let (out, summary) = agent_run(dir.path(), &["--only", "read,write,openat"], &cmd);
    assert!(out.status.success());
    let (_, strace) = strace_counts(
        dir.path(),
        &["--seccomp-bpf", "-e", "trace=read,write,openat"],
        &cmd,
    );
    let agent = summary_counts(&summary);
    assert_eq!(
        agent.keys().map(String::as_str).collect::<Vec<_>>(),
        ["openat", "read", "write"]
    );
    assert_same_counts(&agent, &strace, &[]);
}

/// The register-decoding path (kernels without PTRACE_GET_SYSCALL_INFO),
/// forced on this kernel: the same exact counts, threads and fd kinds.
#[test]
fn register_path_matches_strace_too() {
    let dir = tempfile::tempdir().unwrap();
    let force = [("EDGE_AGENT_FORCE_REGS", "1")];
    let cmd = ["dd", "if=/dev/zero", "of=/dev/null", "bs=64", "count=1000"];
    let (out, summary) = agent_run_env(dir.path(), &force, &[], &cmd);
    assert!(out.status.success());
    let (_, strace) = strace_counts(dir.path(), &[], &cmd);
    assert_same_counts(&summary_counts(&summary), &strace, &[]);
    // Same keys, fd kinds, arguments and results as the syscall-info path
    // (for calls whose results do not depend on address randomisation).
    let (_, by_info) = agent_run(dir.path(), &[], &cmd);
    let facts = |s: &agent_core::Summary| {
        s.syscalls
            .iter()
            .filter(|e| {
                let name = e.key.id.name().unwrap_or("");
                // dd's report on stderr (a pipe) holds its timing, whose
                // length varies from run to run.
                ["read", "write", "openat", "close", "dup2", "lseek"].contains(&name)
                    && e.key.fd_kind != agent_core::FdKind::Pipe
            })
            .map(|e| (e.key, e.count, e.errors(), e.result_sum, e.param_sum))
            .collect::<Vec<_>>()
    };
    assert_eq!(facts(&summary), facts(&by_info));

    let exe = compile_c(dir.path(), "chain", CHAIN);
    let cmd = [exe.to_str().unwrap(), "2"];
    let (out, summary) = agent_run_env(dir.path(), &force, &[], &cmd);
    assert_eq!(out.status.code(), Some(2));
    let (_, strace) = strace_counts(dir.path(), &[], &cmd);
    assert_same_counts(&summary_counts(&summary), &strace, &[]);

    let cmd = ["dd", "if=/dev/zero", "of=/dev/null", "bs=64", "count=500"];
    let (_, summary) = agent_run_env(dir.path(), &force, &["--only", "read,write"], &cmd);
    let (_, strace) = strace_counts(
        dir.path(),
        &["--seccomp-bpf", "-e", "trace=read,write"],
        &cmd,
    );
    assert_same_counts(&summary_counts(&summary), &strace, &[]);
}

const REPORTS_SIGINT: &str = r#"
#include <signal.h>
int main(void) {
  struct sigaction a;
  sigaction(SIGINT, 0, &a);
  return a.sa_handler == SIG_IGN ? 7 : 0;
}
"#;

/// A program started with SIGINT ignored (a background job of a
/// non-interactive shell, nohup-like launchers) must still find it ignored
/// under the agent, which handles SIGINT itself; and one started with the
/// default action must find the default.
#[test]
// `pre_exec` is unsafe by nature; setting a disposition in the child is the
// point of the test.
#[allow(unsafe_code)]
fn inherited_signal_dispositions_reach_the_program() {
    use std::os::unix::process::CommandExt;

    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "reports_sigint", REPORTS_SIGINT);
    let out = dir.path().join("s.summary");
    for (disposition, want) in [(libc::SIG_IGN, 7), (libc::SIG_DFL, 0)] {
        let mut cmd = std::process::Command::new(agent());
        cmd.arg("run").arg("--out").arg(&out).arg("--").arg(&exe);
        // SAFETY: signal() is async-signal-safe; it sets the disposition the
        // agent starts with, whatever this test process had.
        unsafe {
            cmd.pre_exec(move || {
                libc::signal(libc::SIGINT, disposition);
                Ok(())
            });
        }
        let status = cmd.status().unwrap();
        assert_eq!(
            status.code(),
            Some(want),
            "agent started with SIGINT {disposition}"
        );
    }
}
