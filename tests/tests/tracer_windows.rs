//! `--window`: a trace cut into wall-clock-aligned windows. The windows of
//! a run add up exactly to `strace -f -c`'s counts, share one stream, are
//! numbered 1, 2, ... and follow each other without gaps; a call blocked
//! across windows is in flight in each with one start time; CPU time per
//! window adds up to the program's own.

mod tracer_support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use agent_core::{Exit, FdKind, Summary, SyscallId};
use tracer_support::*;

const SECOND: u64 = 1_000_000_000;

/// Every summary in `dir` (the `--out` file's windows and its last one),
/// in window order.
fn summaries_in(dir: &Path) -> Vec<Summary> {
    let mut all: Vec<Summary> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "summary").then_some(p)
        })
        .map(|p| Summary::decode(&std::fs::read(&p).unwrap()).expect("a summary"))
        .collect();
    all.sort_by_key(|s| s.run.window);
    all
}

/// Sums the per-syscall counts of several summaries.
fn summed_counts(summaries: &[Summary]) -> Counts {
    let mut sum = Counts::new();
    for s in summaries {
        for (name, (calls, errors)) in summary_counts(s) {
            let c = sum.entry(name).or_default();
            c.0 += calls;
            c.1 += errors;
        }
    }
    sum
}

/// Runs `cmd` with `edge-agent run --window 1s AGENT_ARGS --out
/// DIR/out/run.summary` (`agent_args`: `--backend ...`).
fn run_windowed_on(dir: &Path, agent_args: &[&str], cmd: &[&str]) -> Vec<Summary> {
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = output_timeout(
        Command::new(agent())
            .args(["run", "--window", "1s"])
            .args(agent_args)
            .arg("--out")
            .arg(out_dir.join("run.summary"))
            .arg("--")
            .args(cmd),
        120,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    summaries_in(&out_dir)
}

/// ~4.8 s of 48 writes, each followed by a 100 ms sleep.
const TICKER: &str = r#"
#include <fcntl.h>
#include <unistd.h>
int main(void) {
  int fd = open("/dev/null", O_WRONLY);
  for (int i = 0; i < 48; i++) { write(fd, "x", 1); usleep(100000); }
  return 0;
}
"#;

#[test]
fn windows_of_a_run_add_up_to_strace_and_follow_each_other() {
    windows_add_up_to_strace_and_follow_each_other(&["--backend", "ptrace"]);
}

#[test]
fn windows_under_ebpf_add_up_to_strace_and_follow_each_other() {
    if ebpf_available("windows_under_ebpf_add_up_to_strace_and_follow_each_other") {
        windows_add_up_to_strace_and_follow_each_other(&["--backend", "ebpf"]);
    }
}

fn windows_add_up_to_strace_and_follow_each_other(backend: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "ticker", TICKER);
    let cmd = [exe.to_str().unwrap()];
    let windows = run_windowed_on(dir.path(), backend, &cmd);
    let (st, strace) = strace_counts(dir.path(), &[], &cmd);
    assert!(st.success());

    assert!(
        (5..=6).contains(&windows.len()),
        "{} windows for ~4.8 s",
        windows.len()
    );
    let agent = summed_counts(&windows);
    assert_eq!(agent["write"].0, 48);
    assert_same_counts(&agent, &strace, &[]);

    let first = &windows[0];
    for (i, w) in windows.iter().enumerate() {
        assert_eq!(w.run.window, i as u32 + 1, "indices consecutive from 1");
        assert_eq!(w.origin.stream, first.origin.stream, "one stream");
        assert_ne!(w.origin.stream, [0; 16]);
        assert_eq!(w.origin.window_ns, SECOND);
        if i > 0 {
            assert_eq!(w.run.start_unix_ns % SECOND, 0, "window {} aligned", i + 1);
        }
        match windows.get(i + 1) {
            Some(next) => {
                assert_eq!(w.run.exit, Exit::Running);
                assert_eq!(
                    w.run.start_unix_ns + w.run.duration_ns,
                    next.run.start_unix_ns,
                    "window {} ends where the next starts",
                    i + 1
                );
                assert!(w.run.duration_ns <= SECOND);
            }
            None => assert_eq!(w.run.exit, Exit::Code(0)),
        }
        assert!(w.cpu.is_some());
        // Summaries all differ (each is one upload).
        assert!(windows[..i].iter().all(|o| o.id != w.id));
    }
    assert!(
        first.run.start_unix_ns % SECOND != 0 || first.run.duration_ns == SECOND,
        "the first window starts at the run's start"
    );
    assert_eq!(windows.last().unwrap().in_flight.count, 0);
}

/// Accepts a loopback TCP connection from itself, says `ready`, and blocks
/// reading the accepted socket: the client never sends.
const BLOCKED_READ: &str = r#"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
int main(void) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t len = sizeof a;
  if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1)) return 1;
  getsockname(l, (struct sockaddr *)&a, &len);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(c, (struct sockaddr *)&a, sizeof a)) return 2;
  int s = accept(l, 0, 0);
  printf("ready\n");
  fflush(stdout);
  char b;
  return read(s, &b, 1) == 0 ? 0 : 3;
}
"#;

#[test]
fn a_blocked_socket_read_is_in_flight_in_every_window_with_one_start() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "blocked", BLOCKED_READ);
    let mut server = Command::new(&exe).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    let out_dir = dir.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = output_timeout(
        Command::new(agent())
            .args(["attach", &server.id().to_string(), "--window", "1s"])
            // ptrace sees the read the server was in when the agent came
            // (it restarts); eBPF only sees calls enter (see
            // ebpf_windows_carry_the_call_in_flight_at_each_cut).
            .args(["--backend", "ptrace"])
            .args(["--for", "3.5", "--out"])
            .arg(out_dir.join("attach.summary")),
        60,
    );
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let windows = summaries_in(&out_dir);
    assert!(
        (4..=5).contains(&windows.len()),
        "{} windows for 3.5 s",
        windows.len()
    );
    let read = SyscallId::from_name("read").unwrap();
    let mut starts = Vec::new();
    for w in &windows {
        let call = w
            .in_flight
            .oldest
            .iter()
            .find(|c| c.id == read)
            .unwrap_or_else(|| {
                panic!(
                    "window {}: no read in flight: {:?}",
                    w.run.window, w.in_flight
                )
            });
        assert_eq!(w.in_flight.count, 1);
        assert_eq!(call.fd_kind, FdKind::Tcp);
        assert_eq!(call.tid, server.id());
        starts.push(call.start_unix_ns);
    }
    assert!(
        starts.iter().all(|s| *s == starts[0]),
        "one start time: {starts:?}"
    );
    // It started when the agent saw it (the read restarts after the
    // attach), inside the first window.
    let first = &windows[0].run;
    assert!(
        starts[0] >= first.start_unix_ns && starts[0] <= first.start_unix_ns + first.duration_ns
    );
    assert_eq!(windows.last().unwrap().run.exit, Exit::Detached);
}

/// Spins on the CPU for `argv[1]` ms of its own CPU time (no syscalls in
/// the loop), then prints the user and system CPU time it used, in µs.
const BUSY: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
int main(int argc, char **argv) {
  long want_ms = atol(argv[1]);
  volatile unsigned long x = 0;
  for (;;) {
    for (int i = 0; i < 1000000; i++) x += i;
    if (clock() * 1000 / CLOCKS_PER_SEC >= want_ms) break;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("%ld %ld\n", ru.ru_utime.tv_sec * 1000000L + ru.ru_utime.tv_usec,
         ru.ru_stime.tv_sec * 1000000L + ru.ru_stime.tv_usec);
  return 0;
}
"#;

/// The summed CPU time of the windows, (user, system) ns.
fn summed_cpu(windows: &[Summary]) -> (u64, u64) {
    windows
        .iter()
        .map(|w| w.cpu.expect("cpu time measured"))
        .fold((0, 0), |(u, s), c| (u + c.user_ns, s + c.system_ns))
}

#[test]
fn window_cpu_times_add_up_to_the_programs_own() {
    window_cpu_times_add_up(&["--backend", "ptrace"]);
}

#[test]
fn window_cpu_times_under_ebpf_add_up_to_the_programs_own() {
    if ebpf_available("window_cpu_times_under_ebpf_add_up_to_the_programs_own") {
        window_cpu_times_add_up(&["--backend", "ebpf"]);
    }
}

fn window_cpu_times_add_up(backend: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c(dir.path(), "busy", BUSY);
    let out_dir = dir.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = output_timeout(
        Command::new(agent())
            .args(["run", "--window", "1s"])
            .args(backend)
            .arg("--out")
            .arg(out_dir.join("run.summary"))
            .arg("--")
            .arg(&exe)
            .arg("2500"),
        120,
    );
    assert!(out.status.success());
    let own: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|v| v.parse::<u64>().unwrap() * 1000)
        .collect();
    let windows = summaries_in(&out_dir);
    assert!(windows.len() >= 3, "{} windows", windows.len());
    let (user, system) = summed_cpu(&windows);
    let own_total = own[0] + own[1];
    // /proc counts in clock ticks (10 ms): a few ticks either way, plus
    // what the program spent after its own reading (printing, exiting).
    let tick = 10_000_000;
    assert!(
        user + system + 3 * tick >= own_total && user + system <= own_total + 5 * tick,
        "windows {user}+{system} ns, the program's own {own:?} ns"
    );
    assert!(
        user > 10 * system.max(tick),
        "user {user} ns, system {system} ns"
    );
    // More than one window got CPU time: it is cut per window.
    assert!(
        windows
            .iter()
            .filter(|w| w.cpu.unwrap().user_ns > 0)
            .count()
            >= 2
    );

    // A sleeping program uses next to none.
    // (A folder of its own: the busy run's windows are not its.)
    let sleepy = run_windowed_on(&dir.path().join("sleepy"), backend, &["sleep", "1.5"]);
    let (user, system) = summed_cpu(&sleepy);
    assert!(user + system <= 5 * tick, "sleep used {user}+{system} ns");
}

#[test]
fn ebpf_windows_carry_the_call_in_flight_at_each_cut() {
    if !ebpf_available("ebpf_windows_carry_the_call_in_flight_at_each_cut") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let windows = run_windowed_on(dir.path(), &["--backend", "ebpf"], &["sleep", "2.5"]);
    assert!(
        (3..=4).contains(&windows.len()),
        "{} windows for 2.5 s",
        windows.len()
    );
    let sleep = SyscallId::from_name("clock_nanosleep").unwrap();
    let (last, cut) = windows.split_last().unwrap();
    // The 2.5 s sleep is in flight at every cut made before it ends. When
    // the program started late in the first window (a loaded machine), the
    // sleep can end just before a later cut while the exit comes after it:
    // that window is cut with nothing in flight, and is not judged here.
    let first = &windows[0];
    assert_eq!(first.in_flight.count, 1, "window 0: {:?}", first.in_flight);
    let sleep_start = first.in_flight.oldest[0].start_unix_ns;
    assert!(
        sleep_start >= first.run.start_unix_ns
            && sleep_start < first.run.start_unix_ns + first.run.duration_ns,
        "the sleep started in the first window"
    );
    let sleep_end = sleep_start + 2_500_000_000;
    let mut judged = 0;
    for w in cut {
        let cut_at = w.run.start_unix_ns + w.run.duration_ns;
        if cut_at + 100_000_000 > sleep_end {
            continue;
        }
        judged += 1;
        assert_eq!(
            w.in_flight.count, 1,
            "window {}: {:?}",
            w.run.window, w.in_flight
        );
        let call = &w.in_flight.oldest[0];
        assert_eq!(call.id, sleep);
        assert_eq!(call.fd_kind, FdKind::None);
        assert_eq!(call.start_unix_ns, sleep_start, "one start");
    }
    // The first two cuts come at most 2 s after the sleep started.
    assert!(judged >= 2, "{judged} windows cut during the sleep");
    assert_eq!(last.in_flight.count, 0, "nothing in flight at the end");
    assert_eq!(last.run.exit, Exit::Code(0));
    assert_eq!(summed_counts(&windows)["clock_nanosleep"].0, 1);
}

#[test]
fn window_lengths_outside_1s_to_24h_are_refused() {
    for bad in ["0.5s", "25h", "10x", "", "-1"] {
        let out = output_timeout(
            Command::new(agent()).args(["run", &format!("--window={bad}"), "--", "true"]),
            30,
        );
        assert!(!out.status.success(), "--window {bad:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--window"), "{bad:?}: {err}");
    }
}

/// `attach` cuts 60 s windows unless told; `--window whole` gives one
/// summary of the whole trace (window 0, no window length).
#[test]
fn attach_defaults_to_60s_windows_and_whole_turns_them_off() {
    let dir = tempfile::tempdir().unwrap();
    // Outlives both attaches however long a loaded machine makes them (each
    // is bounded by 30 s below); killed at the end. A 30 s sleeper ended
    // under them at load averages near 17.
    let mut sleeper = Command::new("sleep").arg("600").spawn().unwrap();
    let pid = sleeper.id().to_string();
    for (extra, window_ns) in [(None, 60_000_000_000u64), (Some("whole"), 0)] {
        let out_dir = dir.path().join(extra.unwrap_or("default"));
        std::fs::create_dir(&out_dir).unwrap();
        let mut cmd = Command::new(agent());
        cmd.args(["attach", &pid, "--for", "0.3", "--out"])
            .arg(out_dir.join("a.summary"));
        if let Some(w) = extra {
            cmd.args(["--window", w]);
        }
        let out = output_timeout(&mut cmd, 30);
        assert!(out.status.success(), "{out:?}");
        let summaries = summaries_in(&out_dir);
        let last = summaries.iter().max_by_key(|s| s.run.window).unwrap();
        assert_eq!(last.origin.window_ns, window_ns, "{extra:?}");
        assert_eq!(last.run.exit, Exit::Detached);
        if window_ns == 0 {
            assert_eq!(summaries.len(), 1);
            assert_eq!(last.run.window, 0);
        } else {
            assert!(last.run.window >= 1);
        }
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}
