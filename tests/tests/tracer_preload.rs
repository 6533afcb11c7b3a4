//! `edge-agent run --backend preload`: the in-process wrappers under
//! `LD_PRELOAD`, against `strace -f` on the same dynamically linked
//! programs. The wrappers see the calls a program makes through libc's
//! functions from its `main` on, not the dynamic loader's before it nor
//! libc's own (stdio, malloc, pthread_create's stacks): each program marks
//! where its own calls begin with `getppid()` (not wrapped), and strace's
//! lines are counted from that mark on, per process (a fork inherits its
//! parent's state; an `execve` starts the new image unmarked). A process
//! may end its marked part with `getpgrp()`. Counted per syscall name and
//! fd kind: calls and errors.

mod tracer_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use agent_core::{FdKind, Summary};
use tracer_support::*;

const PRELOAD: &[&str] = &["--backend", "preload"];

/// This build's library (built first: `cargo test` builds no cdylib).
fn library() -> std::path::PathBuf {
    edge_tests::shared_library("libedge_preload.so")
}

/// `edge-agent run --backend preload`, with this build's library.
fn preload_run(dir: &Path, cmd: &[&str]) -> (std::process::Output, Summary) {
    let lib = library();
    agent_run_env(
        dir,
        &[("EDGE_AGENT_PRELOAD_LIB", lib.to_str().unwrap())],
        PRELOAD,
        cmd,
    )
}

/// `edge-agent ARGS` with this build's library.
fn agent_cmd() -> Command {
    let mut cmd = Command::new(agent());
    cmd.env("EDGE_AGENT_PRELOAD_LIB", library());
    cmd
}

/// The names the wrappers file calls under (see agent-inproc's `calls`).
const COVERED: &[&str] = &[
    "read",
    "write",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "preadv",
    "pwritev",
    "openat",
    "creat",
    "close",
    "dup",
    "dup2",
    "dup3",
    "fcntl",
    "newfstatat",
    "fsync",
    "fdatasync",
    "socket",
    "connect",
    "accept",
    "accept4",
    "bind",
    "listen",
    "shutdown",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "poll",
    "ppoll",
    "pselect6",
    "epoll_wait",
    "epoll_pwait",
    "clock_nanosleep",
    "mmap",
    "munmap",
    "madvise",
    "clone",
    "clone3",
    "vfork",
    "execve",
    "wait4",
];

/// Calls filed under their first argument's fd kind (as every backend
/// files them).
const BY_FD: &[&str] = &[
    "read",
    "write",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "preadv",
    "pwritev",
    "close",
    "dup",
    "dup2",
    "dup3",
    "fcntl",
    "fsync",
    "fdatasync",
    "connect",
    "accept",
    "accept4",
    "bind",
    "listen",
    "shutdown",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "epoll_wait",
    "epoll_pwait",
];

/// Per (syscall, fd kind): (calls, errors).
type Table = BTreeMap<(String, String), (u64, u64)>;

fn kind_name(kind: FdKind) -> &'static str {
    match kind {
        FdKind::None => "none",
        FdKind::File => "file",
        FdKind::Pipe => "pipe",
        FdKind::Tcp => "tcp",
        FdKind::Udp => "udp",
        FdKind::Unix => "unix",
        FdKind::Socket => "socket",
        FdKind::Other => "other",
    }
}

fn summary_table(s: &Summary) -> Table {
    let mut t = Table::new();
    for e in &s.syscalls {
        let c = t
            .entry((e.key.id.to_string(), kind_name(e.key.fd_kind).to_string()))
            .or_default();
        c.0 += e.count;
        c.1 += e.errors();
    }
    t
}

/// The kind strace's `-yy` decoration of an fd argument names.
fn strace_kind(arg: &str) -> &'static str {
    let Some((_, deco)) = arg.split_once('<') else {
        return "none";
    };
    if deco.starts_with("pipe:") {
        "pipe"
    } else if deco.starts_with("TCP") {
        "tcp"
    } else if deco.starts_with("UDP") {
        "udp"
    } else if deco.starts_with("UNIX") {
        "unix"
    } else if deco.starts_with("anon_inode:") || deco.starts_with("pidfd:") {
        "other"
    } else if deco.starts_with("NETLINK") || deco.starts_with("socket:") {
        "socket"
    } else {
        "file"
    }
}

/// `strace -f -yy` on `cmd`, counted from each process's mark on.
/// strace shows a call a signal interrupted as `= ? ERESTARTSYS` whatever
/// the handler's flags (the kernel decides after strace's stop): with
/// `restarted`, the kernel then restarted it (SA_RESTART), which the
/// program never sees; else the program saw it fail with EINTR.
fn strace_marked(dir: &Path, cmd: &[&str], restarted: bool) -> (std::process::Output, Table) {
    let log = dir.join("strace.log");
    let out = output_timeout(
        Command::new("strace")
            .args(["-f", "-yy", "-qq", "-s", "0", "-o"])
            .arg(&log)
            .args(cmd),
        120,
    );
    let text = std::fs::read_to_string(&log).expect("strace log");
    // Each new process or thread's parent, found first: strace may print
    // a new thread's calls before its creator's `clone3` returns.
    let mut parent_of: BTreeMap<u32, u32> = BTreeMap::new();
    for line in text.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let rest = rest.trim_start();
        let name = rest
            .strip_prefix("<... ")
            .and_then(|r| r.split_once(" resumed>"))
            .map_or_else(|| rest.split('(').next().unwrap_or(""), |(n, _)| n);
        if matches!(name, "clone" | "clone3" | "fork" | "vfork") {
            let ret = rest.rsplit_once(" = ").map_or("", |(_, r)| r.trim());
            if let Ok(child) = ret.split(' ').next().unwrap_or("").parse::<u32>() {
                parent_of.insert(child, pid);
            }
        }
    }
    let mut marked: BTreeMap<u32, bool> = BTreeMap::new();
    let mut pending: BTreeMap<u32, (String, &'static str)> = BTreeMap::new();
    let mut table = Table::new();
    for line in text.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let rest = rest.trim_start();
        if rest.starts_with("+++") || rest.starts_with("---") {
            continue;
        }
        // A new process or thread starts as its creator stood when it
        // called clone (its creator's mark cannot change meanwhile).
        if !marked.contains_key(&pid) {
            let inherited = parent_of
                .get(&pid)
                .and_then(|parent| marked.get(parent))
                .copied()
                .unwrap_or(false);
            marked.insert(pid, inherited);
        }
        // The call's name, its fd kind, and the line with its result.
        let (name, kind, result) = if let Some(resumed) = rest.strip_prefix("<... ") {
            let Some((name, tail)) = resumed.split_once(" resumed>") else {
                continue;
            };
            let Some((_, kind)) = pending.remove(&pid) else {
                continue;
            };
            (name.to_string(), kind, tail.to_string())
        } else {
            let Some((name, args)) = rest.split_once('(') else {
                continue;
            };
            let first = args.split([',', ')']).next().unwrap_or("");
            let kind = if BY_FD.contains(&name) {
                strace_kind(first)
            } else {
                "none"
            };
            if rest.ends_with("<unfinished ...>") {
                pending.insert(pid, (name.to_string(), kind));
                continue;
            }
            (name.to_string(), kind, rest.to_string())
        };
        let ret = result.rsplit_once(" = ").map_or("", |(_, r)| r.trim());
        let in_region = *marked.get(&pid).unwrap_or(&false);
        match name.as_str() {
            "getppid" => {
                marked.insert(pid, true);
                continue;
            }
            "getpgrp" => {
                marked.insert(pid, false);
                continue;
            }
            _ => {}
        }
        if name == "execve" && ret.starts_with('0') {
            // The new image starts unmarked; the call itself counts if
            // it was made from the marked part.
            marked.insert(pid, false);
        }
        let interrupted = ret.starts_with("? ERESTART");
        if (interrupted && restarted) || ret == "?" || !in_region {
            continue;
        }
        if !COVERED.contains(&name.as_str()) {
            continue;
        }
        let c = table.entry((name, kind.to_string())).or_default();
        c.0 += 1;
        c.1 += (ret.starts_with("-1 ") || interrupted) as u64;
    }
    (out, table)
}

/// Runs `cmd` plainly, under strace and under the preload backend: the
/// same output and status each time, and the same counts as strace's.
fn compare(dir: &Path, cmd: &[&str], skip: &[&str]) -> Summary {
    compare_restarting(dir, cmd, skip, false)
}

/// [`compare`], saying whether an interrupted call is restarted.
fn compare_restarting(dir: &Path, cmd: &[&str], skip: &[&str], restarted: bool) -> Summary {
    let plain = output_timeout(Command::new(cmd[0]).args(&cmd[1..]), 60);
    let (traced, strace) = strace_marked(dir, cmd, restarted);
    let (out, summary) = preload_run(dir, cmd);
    assert_eq!(
        out.stdout, plain.stdout,
        "stdout differs from the plain run's"
    );
    assert_eq!(out.status.code(), plain.status.code(), "{out:?}");
    assert_eq!(traced.status.code(), plain.status.code());
    let drop = |t: Table| -> Table {
        t.into_iter()
            .filter(|((name, _), _)| !skip.contains(&name.as_str()))
            .collect()
    };
    let (ours, theirs) = (drop(summary_table(&summary)), drop(strace));
    assert!(!ours.is_empty(), "nothing recorded");
    assert_eq!(
        ours,
        theirs,
        "preload (left) and strace -f, from the marks on (right), disagree; \
         calls the recorder lost: {:?}",
        summary.facts.get(agent_inproc::LOST_FACT)
    );
    summary
}

const DD: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  getppid();
  int n = atoi(argv[1]);
  char b[64];
  int in = open("/dev/zero", O_RDONLY), out = open("/dev/null", O_WRONLY);
  for (int i = 0; i < n; i++) { read(in, b, 64); write(out, b, 64); }
  pread(in, b, 8, 0);
  struct iovec v = { b, 8 };
  readv(in, &v, 1);
  writev(out, &v, 1);
  /* Failures keep their errno. */
  errno = 0;
  if (read(-1, b, 1) != -1 || errno != EBADF) return 90;
  if (open("/nonexistent/x", O_RDONLY) != -1 || errno != ENOENT) return 91;
  struct stat st;
  stat("/", &st);
  stat("/nonexistent", &st);
  fstat(in, &st);
  int p[2];
  pipe(p);
  write(p[1], "x", 1);
  read(p[0], b, 1);
  close(p[0]);
  close(p[1]);
  int d = dup(in);
  dup2(in, 40);
  close(d);
  close(40);
  close(in);
  close(out);
  void *m = mmap(0, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  madvise(m, 8192, MADV_DONTNEED);
  munmap(m, 8192);
  struct timespec t = { 0, 1000 };
  nanosleep(&t, 0);
  fsync(1);
  write(1, "ok\n", 3);
  return 7;
}
"#;

/// A dd-like loop and the other file calls, one process.
#[test]
fn preload_counts_match_strace_on_a_dd_loop_and_file_calls() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "dd", DD);
    let s = compare(dir.path(), &[exe.to_str().unwrap(), "500"], &[]);
    assert_eq!(s.run.processes, 1);
}

const THREADS: &str = r#"
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
static int fd;
static void *work(void *arg) { char c = 'x'; for (int i = 0; i < 300; i++) write(fd, &c, 1); return 0; }
int main(void) {
  getppid();
  fd = open("/dev/null", O_WRONLY);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, work, 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
  return 0;
}
"#;

/// Threads: each thread's calls (pthread_create's own stack mapping and
/// its `clone3` are libc's, not seen: left out).
#[test]
fn preload_counts_match_strace_on_threads() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "threads", THREADS);
    let s = compare(
        dir.path(),
        &[exe.to_str().unwrap()],
        &["mmap", "munmap", "madvise", "clone3"],
    );
    assert_eq!(s.run.threads, 5, "{:?}", s.run);
}

const CHAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
int main(int argc, char **argv) {
  getppid();
  int n = atoi(argv[1]);
  write(1, "x", 1);
  if (n == 0) return 0;
  char next[16];
  snprintf(next, sizeof next, "%d", n - 1);
  pid_t pid = fork();
  if (pid == 0) {
    char *args[] = { argv[0], next, 0 };
    execve("/proc/self/exe", args, environ);
    _exit(99);
  }
  /* A failed exec counts as a failure. */
  char *none[] = { "none", 0 };
  execve("/nonexistent", none, environ);
  int st;
  waitpid(pid, &st, 0);
  return WEXITSTATUS(st) + 1;
}
"#;

/// A fork and exec chain: every process of the run in one summary, each
/// exec counted once (by the image it starts), a failed one as a failure.
#[test]
fn preload_counts_match_strace_on_a_fork_exec_chain() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "chain", CHAIN);
    let s = compare(dir.path(), &[exe.to_str().unwrap(), "3"], &[]);
    assert_eq!(s.run.processes, 4, "{:?}", s.run);
    assert_eq!(
        s.run.threads, 4,
        "an exec'd image is the same thread: {:?}",
        s.run
    );
}

const SIGNALS: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
static int out;
static void on_usr1(int sig) { (void)sig; write(out, "h", 1); }
/* The child waits (with raw calls no backend's count includes: after
   getpgrp, strace's lines are not counted; raw syscall() is not wrapped)
   until the parent blocks in read, then signals it and feeds the pipe. */
static void child(pid_t parent, int w) {
  getpgrp();
  char path[64], buf[64];
  snprintf(path, sizeof path, "/proc/%d/syscall", parent);
  for (;;) {
    int fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    syscall(SYS_close, fd);
    /* "running" (not in a call) would read as 0, read's number. */
    if (n > 0 && buf[0] >= '0' && buf[0] <= '9') { buf[n] = 0; if (atoi(buf) == SYS_read) break; }
    struct timespec t = { 0, 1000000 };
    syscall(SYS_nanosleep, &t, 0);
  }
  syscall(SYS_kill, parent, SIGUSR1);
  struct timespec t = { 0, 20000000 };
  syscall(SYS_nanosleep, &t, 0);
  syscall(SYS_write, w, "d", 1);
  syscall(SYS_exit_group, 0);
}
int main(int argc, char **argv) {
  getppid();
  int restart = atoi(argv[1]);
  out = open("/dev/null", O_WRONLY);
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_handler = on_usr1;
  a.sa_flags = restart ? SA_RESTART : 0;
  sigaction(SIGUSR1, &a, 0);
  int p[2];
  pipe(p);
  pid_t pid = fork();
  if (pid == 0) child(getppid(), p[1]);
  char c;
  int eintr = 0;
  ssize_t n;
  while ((n = read(p[0], &c, 1)) == -1 && errno == EINTR) eintr++;
  int st;
  waitpid(pid, &st, 0);
  /* Not printf: stdio's own calls are libc's (not seen in-process). */
  char line[64];
  int len = snprintf(line, sizeof line, "read %zd eintr %d\n", n, eintr);
  write(1, line, len);
  return 0;
}
"#;

/// A blocking read interrupted by a signal whose handler does I/O:
/// without SA_RESTART the read fails with EINTR (counted so) and the
/// program reads again; with it the kernel restarts the read, which the
/// program sees as one call.
#[test]
fn preload_counts_match_strace_on_an_interrupted_read() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "signals", SIGNALS);
    for restart in ["0", "1"] {
        let s = compare_restarting(
            dir.path(),
            &[exe.to_str().unwrap(), restart],
            &[],
            restart == "1",
        );
        let eintr = s
            .syscalls
            .iter()
            .filter(|e| e.key.id.to_string() == "read")
            .map(|e| e.errors())
            .sum::<u64>();
        assert_eq!(eintr, u64::from(restart == "0"), "restart {restart}");
    }
}

const KILLED: &str = r#"
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
  pid_t pid = fork();
  if (pid == 0) {
    char b[64];
    int fd = open("/dev/zero", O_RDONLY);
    for (int i = 0; i < 700; i++) read(fd, b, 64);
    kill(getpid(), SIGKILL);
  }
  int st;
  waitpid(pid, &st, 0);
  return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : 1;
}
"#;

/// A process of the run killed by SIGKILL keeps its counts: they are in
/// the table the agent reads, not in the process.
#[test]
fn a_process_killed_by_sigkill_keeps_its_counts() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "killed", KILLED);
    let (out, s) = preload_run(dir.path(), &[exe.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let reads: u64 = s
        .syscalls
        .iter()
        .filter(|e| e.key.id.to_string() == "read" && e.key.fd_kind == FdKind::File)
        .map(|e| e.count)
        .sum();
    assert_eq!(reads, 700);
    assert_eq!(s.run.processes, 2);
}

/// A statically linked command is refused with the reason, before it
/// runs; `auto` never picks preload for it.
#[test]
fn a_static_command_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c_static(dir.path(), "static", "int main(void) { return 0; }\n");
    let out = output_timeout(
        agent_cmd()
            .args(["run", "--backend", "preload", "--out"])
            .arg(dir.path().join("s"))
            .arg("--")
            .arg(&exe),
        60,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("statically linked"), "{err}");
    assert!(!dir.path().join("s").exists());
}

/// A shell's children, started with `vfork` (dash) and exec'd: each a
/// process of the run, counted once, its exec by the image it starts.
#[test]
fn vfork_children_are_processes_of_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let (out, s) = preload_run(dir.path(), &["sh", "-c", "/bin/true; /bin/true; /bin/true"]);
    assert!(out.status.success(), "{out:?}");
    let execs: u64 = s
        .syscalls
        .iter()
        .filter(|e| e.key.id.to_string() == "execve")
        .map(|e| e.count)
        .sum();
    assert_eq!((s.run.processes, execs), (4, 3), "{:?}", s.run);
}

const SPAWNS: &str = r#"
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
int main(void) {
  /* A PATH whose first entry has `true`: one execve per search. */
  setenv("PATH", "/usr/bin", 1);
  getppid();
  pid_t pid;
  int st, failed = 0;
  char *t[] = { "true", 0 };
  failed |= posix_spawn(&pid, "/usr/bin/true", 0, 0, t, environ) != 0;
  waitpid(pid, &st, 0);
  failed |= posix_spawnp(&pid, "true", 0, 0, t, environ) != 0;
  waitpid(pid, &st, 0);
  /* An exec that fails: posix_spawn says so, libc reaps the child. */
  failed |= posix_spawn(&pid, "/nonexistent", 0, 0, t, environ) != ENOENT;
  int sys = system("exec /usr/bin/true");
  FILE *f = popen("exec /usr/bin/true", "r");
  int closed = f ? pclose(f) : -2;
  /* vfork: a child that execs, one that execs by PATH, one that exits. */
  pid = vfork();
  if (pid == 0) { execv("/usr/bin/true", t); _exit(97); }
  waitpid(pid, &st, 0);
  failed |= st != 0;
  pid = vfork();
  if (pid == 0) { execvp("true", t); _exit(98); }
  waitpid(pid, &st, 0);
  failed |= st != 0;
  pid = vfork();
  if (pid == 0) _exit(5);
  waitpid(pid, &st, 0);
  failed |= WEXITSTATUS(st) != 5;
  char line[64];
  int len = snprintf(line, sizeof line, "failed %d system %d pclose %d\n", failed, sys, closed);
  write(1, line, len);
  return 0;
}
"#;

/// Processes libc makes itself (`posix_spawn`, `posix_spawnp`, `system`,
/// `popen`: a `clone3` and the child's `execve` that no wrapper sees, and
/// the `wait4`s inside `system`, `pclose` and a failed spawn) and `vfork`
/// children (their parent's `vfork` counted by the child, at its exec or
/// `_exit`): the same counts as strace's; the program's output unchanged.
/// A spawn's file actions and popen's pipe ends (`dup2`, `close`,
/// `fcntl` in libc) and the child's stack libc maps for a spawn (`mmap`,
/// `munmap`) are libc's own calls, not seen.
#[test]
fn preload_counts_match_strace_on_spawns_and_vforks() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "spawns", SPAWNS);
    let s = compare(
        dir.path(),
        &[exe.to_str().unwrap()],
        &["close", "dup2", "fcntl", "mmap", "munmap"],
    );
    let count = |name: &str| -> u64 {
        s.syscalls
            .iter()
            .filter(|e| e.key.id.to_string() == name)
            .map(|e| e.count)
            .sum()
    };
    assert_eq!(
        (count("clone3"), count("vfork"), count("execve")),
        (5, 3, 9),
        "{:?}",
        s.syscalls
    );
}

const DUPS: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
/* Each kind of fd copied every way; each copy then asked its flags
   (fcntl F_GETFD, filed under the copy's kind), and closed. */
int main(void) {
  getppid();
  int p[2], s[2];
  pipe(p);
  socketpair(AF_UNIX, SOCK_STREAM, 0, s);
  int tcp = socket(AF_INET, SOCK_STREAM, 0);
  int file = open("/dev/null", O_RDONLY);
  int fds[] = { p[0], s[0], tcp, file };
  for (int i = 0; i < 4; i++) {
    int copies[4];
    copies[0] = dup(fds[i]);
    copies[1] = dup2(fds[i], 50);
    copies[2] = dup3(fds[i], 51, O_CLOEXEC);
    copies[3] = fcntl(fds[i], F_DUPFD, 60);
    for (int k = 0; k < 4; k++) { fcntl(copies[k], F_GETFD); close(copies[k]); }
  }
  /* A copy onto a number in use replaces what it was. */
  dup2(p[0], 52);
  dup2(tcp, 52);
  fcntl(52, F_GETFD);
  return 0;
}
"#;

/// `--only` naming the fd-copying calls: each copy's kind (the kind of
/// the fd it copies, kept when the copy is recorded, asked again when it
/// is not) is strace -yy's, whether the copying calls are recorded or not.
#[test]
fn fd_copies_keep_their_kind_under_only() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "dups", DUPS);
    let cmd = [exe.to_str().unwrap()];
    let (_, strace) = strace_marked(dir.path(), &cmd, false);
    for only in ["dup,dup2,dup3,fcntl", "fcntl"] {
        let names: Vec<&str> = only.split(',').collect();
        let lib = library();
        let mut args = PRELOAD.to_vec();
        args.extend(["--only", only]);
        let (out, s) = agent_run_env(
            dir.path(),
            &[("EDGE_AGENT_PRELOAD_LIB", lib.to_str().unwrap())],
            &args,
            &cmd,
        );
        assert!(out.status.success(), "{out:?}");
        let theirs: Table = strace
            .clone()
            .into_iter()
            .filter(|((name, _), _)| names.contains(&name.as_str()))
            .collect();
        assert_eq!(
            summary_table(&s),
            theirs,
            "--only {only}: preload (left), strace -yy (right)"
        );
    }
}

/// A program killed by a signal: the agent ends by the same signal, with
/// the summary saved and the run's private folder (its table) removed.
#[test]
fn a_signalled_run_leaves_no_table_behind() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = output_timeout(
        agent_cmd()
            .env("TMPDIR", &tmp)
            .args(["run", "--backend", "preload", "--out"])
            .arg(dir.path().join("s"))
            .args(["--", "sh", "-c", "kill -TERM $$"]),
        60,
    );
    assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{out:?}");
    let s = Summary::decode(&std::fs::read(dir.path().join("s")).unwrap()).unwrap();
    assert_eq!(s.run.exit, agent_core::Exit::Signal(libc::SIGTERM));
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

const PEER_CLIENT: &str = r#"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
/* Each port in turn on the same fd number: connect, send, read the reply, close. */
int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[i])) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) return 2;
    char b[64];
    for (int k = 0; k < 10; k++) { if (write(fd, "q", 1) != 1 || read(fd, b, 1) != 1) return 3; }
    close(fd);
  }
  return 0;
}
"#;

/// Each socket call is filed under its socket's peer: remembered per fd,
/// and forgotten when the fd number is reused for another connection.
#[test]
fn socket_calls_are_filed_under_their_peer() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "peers", PEER_CLIENT);
    let servers: Vec<std::net::TcpListener> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let ports: Vec<u16> = servers
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    for listener in servers {
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut conn, _) = listener.accept().unwrap();
            let mut b = [0u8; 1];
            while conn.read_exact(&mut b).is_ok() {
                if conn.write_all(b"r").is_err() {
                    break;
                }
            }
        });
    }
    let args: Vec<String> = ports.iter().map(u16::to_string).collect();
    let mut cmd = vec![exe.to_str().unwrap()];
    cmd.extend(args.iter().map(String::as_str));
    let (out, s) = preload_run(dir.path(), &cmd);
    assert!(out.status.success(), "{out:?}");
    let mut seen: Vec<(u16, u64)> = s
        .peers
        .list
        .iter()
        .map(|p| {
            assert_eq!(p.addr.transport, FdKind::Tcp);
            assert_eq!(p.addr.ip, agent_core::PeerIp::V4([127, 0, 0, 1]));
            (p.addr.port, p.calls)
        })
        .collect();
    seen.sort();
    let mut want: Vec<(u16, u64)> = ports.iter().map(|p| (*p, 22)).collect();
    want.sort();
    // connect, 10 writes, 10 reads and close on each: 22 calls per peer.
    assert_eq!(seen, want, "{:?}", s.peers);
}

/// `--backend preload` is `run`'s only.
#[test]
fn attach_with_preload_is_refused() {
    let out = output_timeout(
        Command::new(agent()).args(["attach", "--backend", "preload", "1"]),
        30,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("preload"), "{err}");
}

/// Windows are cut from the shared table while the program runs; their
/// counts add up to the calls made.
#[test]
fn windows_add_up_to_the_calls_made() {
    let dir = tempfile::tempdir().unwrap();
    let src = r#"
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
int main(void) {
  char b[64];
  int fd = open("/dev/zero", O_RDONLY);
  struct timespec t = { 0, 10000000 };
  for (int i = 0; i < 250; i++) { read(fd, b, 64); nanosleep(&t, 0); }
  return 0;
}
"#;
    let exe = compile_c(dir.path(), "slow", src);
    let spool = dir.path().join("spool");
    let out = output_timeout(
        agent_cmd()
            .args(["run", "--backend", "preload", "--window", "1s", "--spool"])
            .arg(&spool)
            .arg("--")
            .arg(&exe),
        60,
    );
    assert!(out.status.success(), "{out:?}");
    let mut reads = 0;
    let mut windows = 0;
    for entry in std::fs::read_dir(&spool).unwrap() {
        let path = entry.unwrap().path();
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(s) = Summary::decode(&bytes) else {
            continue;
        };
        windows += 1;
        reads += s
            .syscalls
            .iter()
            .filter(|e| e.key.id.to_string() == "read")
            .map(|e| e.count)
            .sum::<u64>();
    }
    assert!(windows >= 2, "{windows} summaries");
    assert_eq!(reads, 250);
}
