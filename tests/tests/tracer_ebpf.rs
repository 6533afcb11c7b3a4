//! The eBPF backend (`edge-agent run|attach --backend ebpf`): it sees the
//! syscalls `strace -f -c` sees, it agrees with the ptrace backend on
//! everything but times, and it never stops the program: a `kill -9` of
//! the agent leaves the program running and no BPF program loaded.

mod tracer_support;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_core::{Exit, Summary};
use tracer_support::*;

const EBPF: &[&str] = &["--backend", "ebpf"];
const PTRACE: &[&str] = &["--backend", "ptrace"];

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

const CHAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
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

const EXEC_FROM_THREAD: &str = r#"
#include <pthread.h>
#include <unistd.h>
/* A non-leader thread execs: it takes over the leader's thread id. */
static void *run(void *arg) { execl("/bin/true", "true", (char *)0); return 0; }
int main(void) {
  pthread_t t;
  pthread_create(&t, 0, run, 0);
  for (;;) pause();
}
"#;

#[test]
fn ebpf_counts_match_strace_on_dd_threads_and_a_fork_exec_chain() {
    if !ebpf_available("ebpf_counts_match_strace_on_dd_threads_and_a_fork_exec_chain") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dd = ["dd", "if=/dev/zero", "of=/dev/null", "bs=64", "count=3000"];
    let (out, summary) = agent_run(dir.path(), EBPF, &dd);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, strace) = strace_counts(dir.path(), &[], &dd);
    let agent = summary_counts(&summary);
    assert_eq!(agent["read"].0, 3003);
    assert_same_counts(&agent, &strace, &[]);
    assert_eq!(summary.run.exit, Exit::Code(0));
    assert_eq!((summary.run.processes, summary.run.threads), (1, 1));

    let threads = compile_c(dir.path(), "threads", THREADS);
    let cmd = [threads.to_str().unwrap()];
    let (out, summary) = agent_run(dir.path(), EBPF, &cmd);
    assert!(out.status.success());
    let (_, strace) = strace_counts(dir.path(), &[], &cmd);
    let agent = summary_counts(&summary);
    assert_eq!(agent["write"].0, 2000);
    assert_same_counts(&agent, &strace, &["futex"]);
    assert_eq!((summary.run.processes, summary.run.threads), (1, 5));

    let chain = compile_c(dir.path(), "chain", CHAIN);
    let cmd = [chain.to_str().unwrap(), "4"];
    let (out, summary) = agent_run(dir.path(), EBPF, &cmd);
    assert_eq!(
        out.status.code(),
        Some(4),
        "the chain's exit code is the agent's"
    );
    let (_, strace) = strace_counts(dir.path(), &[], &cmd);
    let agent = summary_counts(&summary);
    assert_eq!(agent["execve"].0, 5);
    assert_same_counts(&agent, &strace, &[]);
    assert_eq!(summary.run.processes, 5);
    assert_eq!(summary.run.exit, Exit::Code(4));

    // A thread that execs takes the leader's tid: its execve still counts.
    let exe = compile_c(dir.path(), "threadexec", EXEC_FROM_THREAD);
    let cmd = [exe.to_str().unwrap()];
    let (out, summary) = agent_run(dir.path(), EBPF, &cmd);
    assert!(out.status.success(), "{out:?}");
    let (_, strace) = strace_counts(dir.path(), &[], &cmd);
    let agent = summary_counts(&summary);
    assert_eq!(agent["execve"].0, 2);
    // Open: in about half the runs one rt_sigprocmask of this program is
    // not seen by the eBPF backend (3 against strace's 4, on Linux 6.18;
    // the new thread's, racing the exec); the ptrace backend sees all 4
    // (tracer_counts.rs).
    assert_same_counts(&agent, &strace, &["futex", "rt_sigprocmask"]);
}

/// Linux 6.17's file_setattr (469), 6.18's listns (470), the later
/// rseq_slice_yield (471), and three unassigned numbers, each called a
/// different number of times (1 to 6), with arguments that make them fail.
const NEW_AND_UNKNOWN: &str = r#"
#include <unistd.h>
#include <sys/syscall.h>
int main(void) {
  long nrs[] = {469, 470, 471, 0x1f0, 0x1f1, 0x3ff};
  for (int i = 0; i < 6; i++)
    for (int k = 0; k <= i; k++)
      syscall(nrs[i], -1L, 0L, 0L, 0L, 0L, 0L);
  return 0;
}
"#;

/// The newest syscalls have their names, and distinct unknown numbers
/// their own rows (`syscall_0x1f0`), on both backends; per raw number the
/// counts are strace's (Debian's strace, older than the kernel, may call
/// the newest ones `syscall_0x1d5`: compared by number, not name).
#[test]
fn new_and_unknown_syscalls_count_as_strace_counts_them_on_both_backends() {
    let arch = if cfg!(target_arch = "aarch64") {
        agent_core::Arch::Aarch64
    } else {
        agent_core::Arch::X86_64
    };
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "newunknown", NEW_AND_UNKNOWN);
    let cmd = [exe.to_str().unwrap()];
    // Debian's strace 6.1 leaves numbers it has no name for out of its
    // `-c` table (strace 7.2 lists them as `syscall_0x1f0`); its trace
    // shows every call, so the calls are counted from the trace (one
    // process, one line per call), and `-c`'s table checked as far as it
    // goes.
    let (_, table) = strace_counts(dir.path(), &[], &cmd);
    let table = counts_by_number(&table, arch);
    let strace = counts_by_number(&strace_trace_counts(dir.path(), &cmd), arch);
    for (nr, calls) in &table {
        assert_eq!(strace.get(nr), Some(calls), "strace's trace and -c, {nr}");
    }
    let mut backends = vec![PTRACE];
    if ebpf_available("new_and_unknown_syscalls_count_as_strace_counts_them_on_both_backends") {
        backends.push(EBPF);
    }
    for backend in backends {
        let (out, summary) = agent_run(dir.path(), backend, &cmd);
        assert!(out.status.success(), "{backend:?}: {out:?}");
        let names = summary_counts(&summary);
        for (name, calls) in [
            ("file_setattr", 1),
            ("listns", 2),
            ("rseq_slice_yield", 3),
            ("syscall_0x1f0", 4),
            ("syscall_0x1f1", 5),
            ("syscall_0x3ff", 6),
        ] {
            assert_eq!(
                names.get(name).map(|c| c.0),
                Some(calls),
                "{backend:?} {name}: {names:?}"
            );
        }
        assert!(!names.contains_key("<unknown>"), "{backend:?}: {names:?}");
        assert_eq!(
            counts_by_number(&names, arch),
            strace,
            "{backend:?}: edge-agent (left) and strace -f -c (right) disagree"
        );
    }
}

/// Files, a pipe, Unix, TCP and UDP sockets, an eventfd, failures, runs of
/// the same call: every fd kind the collector tells apart.
const MIXED: &str = r#"
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
int main(void) {
  char buf[256] = {0};
  int f = open("/etc/hostname", O_RDONLY);
  for (int i = 0; i < 3; i++) read(f, buf, sizeof buf);
  close(f);
  for (int i = 0; i < 5; i++) open("/nonexistent/x", O_RDONLY);
  int p[2]; pipe(p);
  for (int i = 0; i < 4; i++) write(p[1], "abcd", 4);
  read(p[0], buf, 16);
  int u[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, u);
  write(u[0], "hi", 2); read(u[1], buf, 2);
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a; memset(&a, 0, sizeof a);
  a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(l, (struct sockaddr *)&a, sizeof a); listen(l, 1);
  socklen_t len = sizeof a; getsockname(l, (struct sockaddr *)&a, &len);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  connect(c, (struct sockaddr *)&a, sizeof a);
  int s = accept(l, 0, 0);
  write(c, "ping", 4); read(s, buf, 4);
  int d = socket(AF_INET, SOCK_DGRAM, 0);
  sendto(d, "x", 1, 0, (struct sockaddr *)&a, sizeof a);
  int e = eventfd(0, 0);
  unsigned long long one = 1; write(e, &one, 8); read(e, &one, 8);
  read(-1, buf, 1);
  close(e); close(d); close(s); close(c); close(l);
  return 3;
}
"#;

type Stats = BTreeMap<(String, String), (u64, u64, u64, Option<u128>)>;

/// Count, errors, consecutive count and the sum of the size arguments
/// (read/write family, on files: what goes to the stderr pipe carries
/// timings) per (syscall, fd kind).
fn per_key(s: &Summary) -> Stats {
    s.syscalls
        .iter()
        .map(|e| {
            (
                (
                    e.key.id.name().unwrap_or("?").to_string(),
                    e.key.fd_kind.name().to_string(),
                ),
                (
                    e.count,
                    e.failures.as_ref().map_or(0, |f| f.errors),
                    e.consecutive.map_or(0, |c| c.count),
                    e.param_sum.filter(|_| e.key.fd_kind.name() == "file"),
                ),
            )
        })
        .collect()
}

fn transitions(s: &Summary) -> BTreeMap<(String, String), u64> {
    s.transitions
        .iter()
        .map(|t| {
            (
                (
                    t.from.name().unwrap_or("?").to_string(),
                    t.to.name().unwrap_or("?").to_string(),
                ),
                t.count,
            )
        })
        .collect()
}

#[test]
fn both_backends_agree_on_counts_errors_fd_kinds_runs_and_transitions() {
    if !ebpf_available("both_backends_agree_on_counts_errors_fd_kinds_runs_and_transitions") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mixed = compile_c(dir.path(), "mixed", MIXED);
    let chain = compile_c(dir.path(), "chain", CHAIN);
    let threads = compile_c(dir.path(), "threads", THREADS);
    for cmd in [
        vec![mixed.to_str().unwrap()],
        vec![chain.to_str().unwrap(), "2"],
        vec!["dd", "if=/dev/zero", "of=/dev/null", "bs=64", "count=500"],
    ] {
        let (pout, p) = agent_run(dir.path(), PTRACE, &cmd);
        // Every key in the hash (the fallback, forced: kernels before 6.1
        // and a failed array take it), whatever the environment the tests
        // run in says; then run slot 0's aggregates in the dense array
        // (the default), where its memory fits (105 possible CPUs; a
        // machine of a few CPUs has not that many possible ones). Each
        // relocated against the kernel BTF's cut (the default), and the
        // dense one also against the whole BTF.
        let few_cpus = std::thread::available_parallelism().is_ok_and(|n| n.get() <= 8);
        for (aggregates, btf, sure) in [
            ("hash", "cut", true),
            ("dense", "cut", few_cpus),
            ("dense", "whole", few_cpus),
        ] {
            let (eout, e) = agent_run_env(
                dir.path(),
                &[
                    ("EDGE_AGENT_EBPF_AGG", aggregates),
                    ("EDGE_AGENT_EBPF_BTF", btf),
                ],
                &["--backend", "ebpf", "--stats"],
                &cmd,
            );
            let stderr = String::from_utf8_lossy(&eout.stderr);
            assert!(
                !sure || stderr.contains(&format!("aggregates={aggregates} btf={btf}")),
                "{cmd:?}: {stderr}"
            );
            assert_eq!(pout.status.code(), eout.status.code(), "{cmd:?}");
            assert_eq!(p.run.exit, e.run.exit, "{cmd:?}");
            assert_eq!(
                per_key(&p),
                per_key(&e),
                "{cmd:?}, {aggregates}: (count, errors, consecutive, size sum) per key"
            );
            assert_eq!(
                transitions(&p),
                transitions(&e),
                "{cmd:?}, {aggregates}: transitions"
            );
            assert_eq!(
                (p.run.processes, p.run.threads, p.run.events),
                (e.run.processes, e.run.threads, e.run.events),
                "{cmd:?}, {aggregates}"
            );
        }
    }
    // Four threads writing at once (the kernel's per-thread state and
    // per-CPU sums): whether pthread_join waits on a futex depends on
    // timing, so futex calls (and the transitions around them) are left
    // out.
    let cmd = [threads.to_str().unwrap()];
    let (_, p) = agent_run(dir.path(), PTRACE, &cmd);
    let (_, e) = agent_run(dir.path(), EBPF, &cmd);
    let no_futex = |s: &Summary| {
        let mut k = per_key(s);
        k.retain(|(name, _), _| name != "futex");
        k
    };
    assert_eq!(no_futex(&p), no_futex(&e), "threads: per key, futex aside");
    assert_eq!(no_futex(&e)[&("write".into(), "file".into())].0, 2000);
    assert_eq!(
        (p.run.processes, p.run.threads),
        (e.run.processes, e.run.threads)
    );
    // The mixed program did reach every kind it meant to.
    let (_, e) = agent_run(dir.path(), EBPF, &[mixed.to_str().unwrap()]);
    let kinds: std::collections::BTreeSet<String> =
        per_key(&e).keys().map(|(_, k)| k.clone()).collect();
    for kind in ["file", "pipe", "unix", "tcp", "udp", "other"] {
        assert!(kinds.contains(kind), "no {kind} call in {kinds:?}");
    }
}

/// `State:` and `TracerPid:` of a process.
fn state_and_tracer(pid: u32) -> Option<(String, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    Some((field("State:")?, field("TracerPid:")?.parse().ok()?))
}

/// The ids of loaded BPF programs with this name (`bpftool prog list`).
fn loaded_programs(name: &str) -> Vec<String> {
    // bpftool gives up when a program it lists is unloaded meanwhile
    // (other tests' agents come and go): ask again.
    let mut tries = 0;
    let out = loop {
        let out = Command::new("bpftool")
            .args(["prog", "list"])
            .output()
            .expect("bpftool (scripts/deps.d/ebpf.sh installs it)");
        tries += 1;
        if out.status.success() || tries == 20 {
            break out;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&format!("name {name} ")))
        .map(|l| l.split(':').next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn a_program_under_ebpf_is_never_stopped_and_outlives_a_killed_agent() {
    if !ebpf_available("a_program_under_ebpf_is_never_stopped_and_outlives_a_killed_agent") {
        return;
    }
    let before = loaded_programs("on_sys_enter");
    let mut agent_proc = Command::new(agent())
        .args(["run", "--backend", "ebpf", "--out", "/dev/null", "--"])
        .args([
            "sh",
            "-c",
            "while :; do echo x >/dev/null; sleep 0.01; done",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let agent_pid = agent_proc.id();
    // The shell is the agent's only child.
    let deadline = Instant::now() + Duration::from_secs(10);
    let shell = loop {
        if let Some(&pid) = children_of(agent_pid).first() {
            break pid;
        }
        assert!(Instant::now() < deadline, "the agent started no program");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut loaded = loaded_programs("on_sys_enter");
    loaded.retain(|id| !before.contains(id));
    assert!(!loaded.is_empty(), "the agent's BPF program is not loaded");
    // The agent forks the command stopped before its exec and lets it go
    // once it is in the traced set: sample from the exec on (on a loaded
    // machine the first look can come before the SIGCONT).
    let exec_deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read(format!("/proc/{shell}/cmdline")).map_or(true, |c| !c.starts_with(b"sh\0"))
    {
        assert!(Instant::now() < exec_deadline, "the program never ran sh");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Sampled for a while: never stopped (T/t), never traced.
    for _ in 0..50 {
        let (state, tracer) = state_and_tracer(shell).expect("the program runs");
        assert_eq!(tracer, 0, "the program has a tracer");
        assert!(
            !state.starts_with('T') && !state.starts_with('t'),
            "stopped: {state}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    agent_proc.kill().unwrap(); // SIGKILL
    agent_proc.wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (state, tracer) = state_and_tracer(shell).expect("the program outlives the agent");
    assert_eq!(tracer, 0);
    assert!(
        !state.starts_with('T') && !state.starts_with('Z'),
        "{state}"
    );
    // Its fds closed with it: the kernel unloaded the agent's programs.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<String> = loaded_programs("on_sys_enter")
            .into_iter()
            .filter(|id| loaded.contains(id))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "BPF programs {left:?} still loaded"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = Command::new("kill")
        .arg("-9")
        .arg(shell.to_string())
        .status();
}

#[test]
fn attach_under_ebpf_counts_a_running_process_and_leaves_it_running() {
    if !ebpf_available("attach_under_ebpf_counts_a_running_process_and_leaves_it_running") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut target = Command::new("sh")
        .args(["-c", "while :; do echo x >/dev/null; sleep 0.01; done"])
        .spawn()
        .unwrap();
    let file = dir.path().join("attach.summary");
    let out = output_timeout(
        Command::new(agent())
            .args([
                "attach",
                "--window",
                "whole",
                "--backend",
                "ebpf",
                "--for",
                "0.5",
                "--out",
            ])
            .arg(&file)
            .arg(target.id().to_string()),
        60,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = Summary::decode(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(summary.run.exit, Exit::Detached);
    let counts = summary_counts(&summary);
    assert!(counts.get("wait4").map_or(0, |c| c.0) >= 5, "{counts:?}");
    assert!(
        summary.run.processes >= 5,
        "the sleeps' processes: {}",
        summary.run.processes
    );
    assert!(target.try_wait().unwrap().is_none(), "the process ended");
    let (_, tracer) = state_and_tracer(target.id()).unwrap();
    assert_eq!(tracer, 0);
    target.kill().unwrap();
    target.wait().unwrap();
}

/// Summaries made by the eBPF backend carry the device id, as the ptrace
/// backend's do (both start from the same session setup).
#[test]
fn ebpf_summaries_carry_the_device_id() {
    if !ebpf_available("ebpf_summaries_carry_the_device_id") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let id_file = dir.path().join("device-id");
    let id_arg = id_file.to_str().unwrap();
    let (out, summary) = agent_run(
        dir.path(),
        &["--backend", "ebpf", "--device-id-file", id_arg],
        &["true"],
    );
    assert!(out.status.success(), "{out:?}");
    let hex = std::fs::read_to_string(&id_file).unwrap();
    assert_eq!(hex::encode(summary.origin.device), hex.trim());
}

/// A SIGUSR1 handler run 20 times (20 kill, 20 rt_sigreturn), then a child
/// that kills itself with SIGTERM (the same workload as
/// `scripts/cross-workloads/signals.c`, which the arm64 guest runs).
const SIGNALS: &str = r#"
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static volatile sig_atomic_t got;
static void on_usr1(int sig) { (void)sig; got++; }
int main(void) {
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_handler = on_usr1;
  sigaction(SIGUSR1, &a, 0);
  for (int i = 0; i < 20; i++) kill(getpid(), SIGUSR1);
  pid_t pid = fork();
  if (pid == 0) { kill(getpid(), SIGTERM); _exit(2); }
  int st;
  waitpid(pid, &st, 0);
  return got == 20 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM ? 0 : 1;
}
"#;

/// Signals: the child's fatal `kill(getpid(), SIGTERM)` returns before the
/// signal kills it under strace (a traced process's fatal signal is not
/// turned into SIGKILL at once); the eBPF backend, whose program is not
/// traced, counts it too, and both backends agree on everything else.
#[test]
fn ebpf_counts_match_strace_on_signals() {
    if !ebpf_available("ebpf_counts_match_strace_on_signals") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "signals", SIGNALS);
    let cmd = [exe.to_str().unwrap()];
    let (out, summary) = agent_run(dir.path(), EBPF, &cmd);
    assert!(out.status.success(), "{out:?}");
    let (_, strace) = strace_counts(dir.path(), &[], &cmd);
    let agent = summary_counts(&summary);
    assert_eq!(agent["kill"].0, 21, "20 to itself, 1 fatal to the child");
    assert_eq!(agent["rt_sigreturn"].0, 20);
    assert_same_counts(&agent, &strace, &[]);
    assert_eq!(summary.run.processes, 2);
    let (_, p) = agent_run(dir.path(), PTRACE, &cmd);
    assert_eq!(per_key(&p), per_key(&summary), "per key, both backends");
    assert_eq!(transitions(&p), transitions(&summary), "transitions");
}

/// A client of the test's servers: TCP over IPv4 to 127.0.0.1:argv[1]
/// (write 100 bytes, read the 200-byte answer, a write on a dup of the
/// socket, close both), the same over IPv6 to [::1]:argv[2], a dual-stack
/// IPv6 socket to ::ffff:127.0.0.1:argv[1] (the IPv4 server again), a
/// connected UDP socket to 127.0.0.1:argv[3] (3 rounds of 50 bytes out,
/// 60 in), one datagram from an unconnected UDP socket, a refused TCP
/// connect to 127.0.0.1:argv[4], and a Unix socket pair (no peer).
const PEER_CLIENT: &str = r#"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
static char b[256];
static int talk(int s) {
  if (write(s, b, 100) != 100) return 1;
  for (int got = 0; got < 200;) {
    int k = read(s, b, 200 - got);
    if (k <= 0) return 1;
    got += k;
  }
  int d = dup(s);
  if (write(d, b, 1) != 1) return 1;
  close(d);
  return close(s);
}
int main(int argc, char **argv) {
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(atoi(argv[1]));
  int t = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(t, (struct sockaddr *)&a, sizeof a) || talk(t)) return 2;
  struct sockaddr_in6 a6 = {0};
  a6.sin6_family = AF_INET6;
  a6.sin6_addr = in6addr_loopback;
  a6.sin6_port = htons(atoi(argv[2]));
  int t6 = socket(AF_INET6, SOCK_STREAM, 0);
  if (connect(t6, (struct sockaddr *)&a6, sizeof a6) || talk(t6)) return 3;
  inet_pton(AF_INET6, "::ffff:127.0.0.1", &a6.sin6_addr);
  a6.sin6_port = a.sin_port;
  int m = socket(AF_INET6, SOCK_STREAM, 0);
  if (connect(m, (struct sockaddr *)&a6, sizeof a6) || talk(m)) return 4;
  a.sin_port = htons(atoi(argv[3]));
  int u = socket(AF_INET, SOCK_DGRAM, 0);
  if (connect(u, (struct sockaddr *)&a, sizeof a)) return 5;
  for (int i = 0; i < 3; i++) {
    if (send(u, b, 50, 0) != 50) return 6;
    if (recv(u, b, sizeof b, 0) != 60) return 7;
  }
  close(u);
  int v = socket(AF_INET, SOCK_DGRAM, 0);
  if (sendto(v, b, 10, 0, (struct sockaddr *)&a, sizeof a) != 10) return 8;
  close(v);
  a.sin_port = htons(atoi(argv[4]));
  int r = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(r, (struct sockaddr *)&a, sizeof a) == 0) return 9;
  close(r);
  int p[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, p);
  write(p[0], b, 5);
  read(p[1], b, 5);
  return 0;
}
"#;

/// Serves each connection of `listener` (read 100 bytes, write 200, then
/// until the client closes), forever.
fn serve_tcp(listener: std::net::TcpListener) {
    use std::io::{Read, Write};
    std::thread::spawn(move || {
        for c in listener.incoming() {
            let Ok(mut c) = c else { return };
            let mut request = [0u8; 100];
            if c.read_exact(&mut request).is_ok() && c.write_all(&[1u8; 200]).is_ok() {
                let _ = std::io::copy(&mut c, &mut std::io::sink());
            }
        }
    });
}

/// A peer's figures but its time: (address, calls, bytes, errors, the
/// last call's syscall and result).
type PeerRow = (
    agent_core::PeerAddr,
    u64,
    u64,
    u64,
    Option<(agent_core::SyscallId, i64)>,
);

fn peer_rows(s: &Summary) -> Vec<PeerRow> {
    s.peers
        .list
        .iter()
        .map(|p| {
            (
                p.addr,
                p.calls,
                p.bytes,
                p.errors,
                p.last.map(|l| (l.id, l.result)),
            )
        })
        .collect()
}

#[test]
fn both_backends_agree_on_socket_peers() {
    use agent_core::{FdKind, PeerAddr, PeerIp};
    if !ebpf_available("both_backends_agree_on_socket_peers") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "peer_client", PEER_CLIENT);
    // The same servers for both runs: the same peers.
    let tcp4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp6 = std::net::TcpListener::bind("[::1]:0").unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let ports = [
        tcp4.local_addr().unwrap().port(),
        tcp6.local_addr().unwrap().port(),
        udp.local_addr().unwrap().port(),
        refused.local_addr().unwrap().port(),
    ];
    drop(refused);
    serve_tcp(tcp4);
    serve_tcp(tcp6);
    std::thread::spawn(move || {
        let mut b = [0u8; 256];
        while let Ok((_, from)) = udp.recv_from(&mut b) {
            let _ = udp.send_to(&[2u8; 60], from);
        }
    });
    let args: Vec<String> = ports.iter().map(|p| p.to_string()).collect();
    let mut cmd = vec![exe.to_str().unwrap()];
    cmd.extend(args.iter().map(|a| a.as_str()));
    let (pout, p) = agent_run(dir.path(), PTRACE, &cmd);
    let (eout, e) = agent_run(dir.path(), EBPF, &cmd);
    for out in [&pout, &eout] {
        assert!(
            out.status.success(),
            "{out:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(peer_rows(&p), peer_rows(&e), "peers: ptrace, then eBPF");
    assert_eq!(p.peers.rest, e.peers.rest);

    // What both hold, stated on its own: the IPv4 server (twice: once
    // through the IPv4-mapped address), the IPv6 one, the connected UDP
    // one, the refused one; nothing for the unconnected UDP socket nor
    // the Unix pair.
    let v4 = |transport, port| PeerAddr {
        transport,
        ip: PeerIp::V4([127, 0, 0, 1]),
        port,
    };
    let mut v6 = [0u8; 16];
    v6[15] = 1;
    let close = agent_core::SyscallId::from_name("close").unwrap();
    let connect = agent_core::SyscallId::from_name("connect").unwrap();
    let rows = peer_rows(&e);
    let row = |addr: PeerAddr| {
        *rows
            .iter()
            .find(|r| r.0 == addr)
            .unwrap_or_else(|| panic!("{addr:?} not among {rows:?}"))
    };
    assert_eq!(rows.len(), 4, "{rows:?}");
    // Per connection: connect, write, read(s), dup, write, close, close.
    let (_, calls, bytes, errors, last) = row(v4(FdKind::Tcp, ports[0]));
    assert!(calls >= 2 * 7, "{calls}");
    assert_eq!((bytes, errors, last), (2 * 301, 0, Some((close, 0))));
    let (_, calls, bytes, errors, _) = row(PeerAddr {
        transport: FdKind::Tcp,
        ip: PeerIp::V6(v6),
        port: ports[1],
    });
    assert!(calls >= 7, "{calls}");
    assert_eq!((bytes, errors), (301, 0));
    let (_, calls, bytes, errors, _) = row(v4(FdKind::Udp, ports[2]));
    assert_eq!((calls, bytes, errors), (8, 3 * 110, 0));
    let refused = -(libc::ECONNREFUSED as i64);
    assert_eq!(
        row(v4(FdKind::Tcp, ports[3])),
        (v4(FdKind::Tcp, ports[3]), 1, 0, 1, Some((connect, refused)))
    );
}

/// `run` without `--backend` is `auto`: one stderr line names the backend
/// and why, eBPF where it loads (as `--backend ebpf` shows), else ptrace
/// with the reason; `--only` makes it ptrace.
#[test]
fn the_default_backend_is_auto_and_says_which() {
    let run = |args: &[&str]| {
        output_timeout(
            Command::new(agent())
                .args(["run", "--out", "/dev/null"])
                .args(args)
                .args(["--", "true"]),
            60,
        )
    };
    let loads = run(EBPF).status.success();
    let out = run(&[]);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    let want = if loads {
        "edge-agent: backend ebpf (BPF programs load here)"
    } else {
        "edge-agent: backend ptrace (eBPF unavailable: "
    };
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with(want), "{err}");
    let out = run(&["--only", "read"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "edge-agent: backend ptrace (--only needs ptrace's seccomp prefilter)"
    );
}

/// fd 3 names one file after another, each read with `read`: a file, then
/// (closed) a Unix socket, then (dup2 onto it) a pipe, then a second
/// thread's reads before and after the main thread puts a Unix socket
/// there, then a file opened O_CLOEXEC, and after the exec that closes it
/// a Unix socket again. A UDP socket connected to one port, then another,
/// writes to each. Reads on fd 3 by kind: file 3 + 2 + 1, Unix 5 + 4 +
/// 11, pipe 7; UDP writes: 3 to the first port, 5 to the second. Static:
/// no loader reads. Exits 3 when an fd is not where it should be.
const FD_REUSE: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
static char b[8];
static pthread_barrier_t bar;
static void must(int ok) { if (!ok) _exit(3); }
static void unix_reads(int n) {
  int s[2];
  must(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0 && s[0] == 3);
  for (int i = 0; i < n; i++) { write(s[1], "x", 1); read(3, b, 1); }
  close(s[1]);
}
static void *reader(void *arg) {
  for (int i = 0; i < 2; i++) read(3, b, 1);
  pthread_barrier_wait(&bar);
  pthread_barrier_wait(&bar);
  for (int i = 0; i < 4; i++) read(3, b, 1);
  return 0;
}
static int udp_to(void) {
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  int u = socket(AF_INET, SOCK_DGRAM, 0);
  bind(u, (struct sockaddr *)&a, sizeof a);
  getsockname(u, (struct sockaddr *)&a, &al);
  return ntohs(a.sin_port);
}
int main(int argc, char **argv) {
  if (argc > 1) {
    unix_reads(11);
    close(3);
  /* UDP: the peer changes under one fd, its kind does not. */
  int port_a = udp_to(), port_b = udp_to();
  int u = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port_a);
  connect(u, (struct sockaddr *)&a, sizeof a);
  for (int i = 0; i < 3; i++) write(u, "x", 1);
  a.sin_port = htons(port_b);
  connect(u, (struct sockaddr *)&a, sizeof a);
  for (int i = 0; i < 5; i++) write(u, "x", 1);
  dprintf(2, "%d %d\n", port_a, port_b);
    return 0;
  }
  must(open("/proc/self/exe", O_RDONLY) == 3);
  for (int i = 0; i < 3; i++) read(3, b, 1);
  close(3);
  unix_reads(5);
  int p[2];
  must(pipe(p) == 0);
  must(dup2(p[0], 3) == 3);
  for (int i = 0; i < 7; i++) { write(p[1], "x", 1); read(3, b, 1); }
  close(3); close(p[0]); close(p[1]);
  must(open("/proc/self/exe", O_RDONLY) == 3);
  pthread_t t;
  pthread_barrier_init(&bar, 0, 2);
  pthread_create(&t, 0, reader, 0);
  pthread_barrier_wait(&bar);
  close(3);
  int s[2];
  must(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0 && s[0] == 3);
  write(s[1], "xxxx", 4);
  pthread_barrier_wait(&bar);
  pthread_join(t, 0);
  close(3); close(s[1]);
  must(open("/proc/self/exe", O_RDONLY | O_CLOEXEC) == 3);
  read(3, b, 1);
  execl("/proc/self/exe", argv[0], "after", (char *)0);
  return 4;
}
"#;

/// The kernel remembers each thread's fd kinds (the fd-kind memo,
/// `EDGE_AGENT_EBPF_FD_MEMO=memo`, the default) and must never file a call
/// under the kind of a file the fd named before: a new file on the same
/// number after close, dup2 onto it, another thread's change, an exec's
/// O_CLOEXEC close; nor under an old peer of a UDP socket. The same
/// figures with every kind read from the file table (`table`).
#[test]
fn ebpf_fd_kinds_follow_a_reused_fd_number() {
    if !ebpf_available("ebpf_fd_kinds_follow_a_reused_fd_number") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c_static(dir.path(), "fd_reuse", FD_REUSE);
    for mode in ["memo", "table"] {
        let (out, s) = agent_run_env(
            dir.path(),
            &[("EDGE_AGENT_EBPF_FD_MEMO", mode)],
            &["--backend", "ebpf", "--stats"],
            &[exe.to_str().unwrap()],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}: {err}");
        assert!(err.contains(&format!("fd_kinds={mode}")), "{mode}: {err}");
        let count = |kind| {
            s.get(agent_core::Key {
                id: agent_core::SyscallId::from_name("read").unwrap(),
                fd_kind: kind,
            })
            .map_or(0, |e| e.count)
        };
        use agent_core::FdKind;
        assert_eq!(
            [FdKind::File, FdKind::Unix, FdKind::Pipe].map(count),
            [3 + 2 + 1, 5 + 4 + 11, 7],
            "{mode}: reads on fd 3 of a file, a Unix socket, a pipe"
        );
        let ports: Vec<u16> = err
            .lines()
            .find_map(|l| {
                let v: Vec<u16> = l.split(' ').filter_map(|w| w.parse().ok()).collect();
                (v.len() == 2).then_some(v)
            })
            .unwrap_or_else(|| panic!("{mode}: no ports printed: {err}"));
        for (port, writes) in [(ports[0], 3), (ports[1], 5)] {
            let addr = agent_core::PeerAddr {
                transport: FdKind::Udp,
                ip: agent_core::PeerIp::V4([127, 0, 0, 1]),
                port,
            };
            let peer = s.peers.list.iter().find(|p| p.addr == addr);
            assert_eq!(
                peer.map(|p| p.bytes),
                Some(writes),
                "{mode}: bytes written to port {port}: {:?}",
                s.peers
            );
        }
    }
}
