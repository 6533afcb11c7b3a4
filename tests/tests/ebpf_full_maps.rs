//! The eBPF backend with its kernel maps full (`AGG`, `TRANS` in
//! `agent-linux/bpf/syscalls.bpf.c`): what they cannot hold is counted as
//! lost, never half-counted. Every summary the agent writes still decodes,
//! its counts agree with each other (no transition from or to a call it
//! did not count, no peer figures of one), each run's summary says what
//! was left uncounted of it, and the observed program's exit status is
//! its own.
//!
//! The maps are filled on purpose, not by chance: AGG (4 096 keys, shared
//! by every run of a `watch`) by a dozen runs each calling 424 distinct
//! unassigned syscall numbers (each its own key, the id carrying the
//! number, failing with ENOSYS: harmless), one after another while they
//! all stay alive; TRANS (8 192 pairs per generation) by one run calling
//! every ordered pair of 100 such numbers. ERRNOS (4 096 keys) is not
//! filled: a failure's errno key is only made for a call AGG counted, and
//! no harmless call fails with many errnos per key (a seccomp filter's
//! chosen errno ends the call before the sys_enter tracepoint, so the
//! program never sees it); its loss is the errno
//! alone, which the collector counts as `errno_other`, and the decoder
//! checks the tallies add up to the errors.

mod tracer_support;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use agent_core::{Exit, FdKind, Key, Summary, SyscallId};
use tracer_support::*;

/// Unassigned syscall numbers on x86_64 and aarch64, far above the newest
/// (a kernel of the next years will not give them a call), and below the
/// BPF program's MAX_NR (1 024), so each is a key of its own (the id
/// carrying it). Checked against agent-core's tables below.
const FIRST_NR: u32 = 600;
const LAST_NR: u32 = 1024;

/// One program, three parts (argv[1]); the watch matches the tag in its
/// file name. Each waits for a byte on stdin before its calls (the test
/// sends it once the program is traced), says a byte on stdout when done,
/// then waits for stdin's end (so its keys stay in the kernel's maps) and
/// exits 7.
/// - `fill FIRST LAST`: the numbers FIRST..LAST, each once.
/// - `victim`: a TCP connection on loopback (one write on it) and getppid
///   three times (their keys made while there is room), says `a`, waits
///   for a second byte (the maps are full now), then getuid (no room for
///   its key: lost), getppid (its key is there: counted) and getpeername
///   on the connection (no room: lost, peer figures included), says `b`.
/// - `pairs FIRST N`: every ordered pair of the numbers FIRST..FIRST+N, no
///   waiting; exits 5.
const WORKLOAD: &str = r#"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
static void wait_byte(void) { char c; if (read(0, &c, 1) != 1) _exit(9); }
static void say(char c) { if (write(1, &c, 1) != 1) _exit(10); }
int main(int argc, char **argv) {
  if (argc < 2) return 2;
  if (!strcmp(argv[1], "pairs")) {
    long first = atol(argv[2]), n = atol(argv[3]);
    for (long i = 0; i < n; i++)
      for (long j = 0; j < n; j++) {
        syscall(first + i, -1L, 0L, 0L, 0L, 0L, 0L);
        syscall(first + j, -1L, 0L, 0L, 0L, 0L, 0L);
      }
    return 5;
  }
  wait_byte();
  if (!strcmp(argv[1], "fill")) {
    long first = atol(argv[2]), last = atol(argv[3]);
    for (long nr = first; nr < last; nr++)
      syscall(nr, -1L, 0L, 0L, 0L, 0L, 0L);
    say('d');
  } else if (!strcmp(argv[1], "victim")) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&a, &len))
      return 3;
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *)&a, sizeof a)) return 4;
    if (accept(l, 0, 0) < 0 || write(c, "p", 1) != 1) return 5;
    for (int i = 0; i < 3; i++) syscall(SYS_getppid);
    say('a');
    wait_byte();
    syscall(SYS_getuid);
    syscall(SYS_getppid);
    len = sizeof a;
    getpeername(c, (struct sockaddr *)&a, &len);
    say('b');
  } else {
    return 2;
  }
  char c;
  while (read(0, &c, 1) > 0) {}
  return 7;
}
"#;

/// Runs filling AGG: 12 x 424 keys, beyond its 4 096.
const FILLERS: usize = 12;

fn native_arch() -> agent_core::Arch {
    if cfg!(target_arch = "aarch64") {
        agent_core::Arch::Aarch64
    } else {
        agent_core::Arch::X86_64
    }
}

/// The workload's numbers have no name here, and each keeps an id of its
/// own (what makes each a key in the kernel).
fn assert_numbers_unassigned(first: u32, last: u32) {
    for nr in first..last {
        let arch = native_arch();
        assert_eq!(SyscallId::from_raw(arch, nr), SyscallId::UNKNOWN, "{nr}");
        assert!(SyscallId::carrying_raw(nr).is_some(), "{nr}");
    }
}

/// Whether process `pid` is in a traced set of a loaded edge-agent BPF
/// program (its map TRACED, as bpftool dumps it).
fn in_a_traced_set(pid: u32) -> bool {
    let out = Command::new("bpftool")
        .args(["-j", "map", "dump", "name", "TRACED"])
        .output()
        .expect("run bpftool");
    let text = String::from_utf8_lossy(&out.stdout);
    fn has_key(v: &serde_json::Value, pid: u64) -> bool {
        match v {
            serde_json::Value::Array(a) => a.iter().any(|x| has_key(x, pid)),
            serde_json::Value::Object(o) => {
                o.get("formatted")
                    .and_then(|f| f.get("key"))
                    .and_then(|k| k.as_u64())
                    == Some(pid)
                    || o.values().any(|x| has_key(x, pid))
            }
            _ => false,
        }
    }
    serde_json::Deserializer::from_str(&text)
        .into_iter::<serde_json::Value>()
        .filter_map(Result::ok)
        .any(|v| has_key(&v, pid as u64))
}

/// The watch (`edge-agent watch --backend ebpf --window whole`), killed
/// if the test ends before it was stopped, and its runs.
struct Scene {
    watch: Child,
    err: std::path::PathBuf,
    runs: Vec<Run>,
}

struct Run {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
}

impl Drop for Scene {
    fn drop(&mut self) {
        for run in &mut self.runs {
            let _ = run.child.kill();
            let _ = run.child.wait();
        }
        let _ = self.watch.kill();
        let _ = self.watch.wait();
    }
}

impl Scene {
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Starts `exe args`, waits until the watch traces it, and returns
    /// its index.
    fn start(&mut self, exe: &Path, args: &[&str]) -> usize {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take().unwrap());
        let pid = child.id();
        self.runs.push(Run {
            child,
            stdin,
            stdout,
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while !in_a_traced_set(pid) {
            assert!(
                Instant::now() < deadline,
                "the watch did not trace {pid} in 30 s:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.runs.len() - 1
    }

    /// Sends run `i` a byte and waits for the one it says back.
    fn step(&mut self, i: usize, expect: u8) {
        let run = &mut self.runs[i];
        run.stdin.as_mut().unwrap().write_all(b"g").unwrap();
        let mut said = [0u8];
        run.stdout.read_exact(&mut said).unwrap();
        assert_eq!(said[0], expect, "run {i}");
    }
}

fn summaries(dir: &Path) -> Vec<(String, Result<Summary, String>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "summary"))
        .map(|f| {
            let decoded =
                Summary::decode(&std::fs::read(&f).unwrap()).map_err(|e| format!("{e:?}"));
            (f.display().to_string(), decoded)
        })
        .collect()
}

/// The calls of `id` the summary counts, over fd kinds.
fn calls_of(s: &Summary, id: SyscallId) -> u64 {
    s.syscalls
        .iter()
        .filter(|e| e.key.id == id)
        .map(|e| e.count)
        .sum()
}

/// The summary's count fact `name` (0 when absent).
fn fact_count(s: &Summary, name: &str) -> u64 {
    s.facts
        .get(name)
        .map(|v| v.parse().expect("a count"))
        .unwrap_or(0)
}

/// The summary's fact `ebpf.uncounted`: calls not counted at all.
fn uncounted(s: &Summary) -> u64 {
    fact_count(s, "ebpf.uncounted")
}

/// The rules tying a whole run's summary's counts together that the
/// decoder cannot see per syscall: no syscall is the end (or the start)
/// of more transitions than it has calls, beyond what the summary folded
/// into its "other" entry; every failure is a call; a peer's last call
/// is a call the summary counts, and its calls are among those on TCP and
/// UDP sockets.
fn assert_consistent(s: &Summary, what: &str) {
    let folded = calls_of(s, SyscallId::OTHER);
    let mut ids: Vec<SyscallId> = s
        .transitions
        .iter()
        .flat_map(|t| [t.from, t.to])
        .filter(|&id| id != SyscallId::OTHER)
        .collect();
    ids.sort();
    ids.dedup();
    for id in ids {
        let calls = calls_of(s, id);
        let into: u64 = s
            .transitions
            .iter()
            .filter(|t| t.to == id)
            .map(|t| t.count)
            .sum();
        let from: u64 = s
            .transitions
            .iter()
            .filter(|t| t.from == id)
            .map(|t| t.count)
            .sum();
        assert!(
            into <= calls + folded,
            "{what}: {into} transitions to {id} but {calls} calls of it ({folded} folded): {s:#?}"
        );
        assert!(
            from <= calls + folded,
            "{what}: {from} transitions from {id} but {calls} calls of it ({folded} folded): {s:#?}"
        );
    }
    for e in &s.syscalls {
        assert!(e.errors() <= e.count, "{what}: {e:?}");
    }
    let transitions: u64 = s.transitions.iter().map(|t| t.count).sum();
    assert!(transitions <= s.run.events, "{what}: {s:#?}");
    let on_sockets: u64 = s
        .syscalls
        .iter()
        .filter(|e| matches!(e.key.fd_kind, FdKind::Tcp | FdKind::Udp) || e.key == Key::OTHER)
        .map(|e| e.count)
        .sum();
    let peer_calls: u64 = s.peers.list.iter().map(|p| p.calls).sum::<u64>() + s.peers.rest.calls;
    assert!(peer_calls <= on_sockets, "{what}: {s:#?}");
    for p in &s.peers.list {
        if let Some(last) = p.last {
            assert!(
                calls_of(s, last.id) + folded > 0,
                "{what}: the last call on {:?} is {} the summary does not count: {s:#?}",
                p.addr,
                last.id
            );
        }
    }
}

/// AGG full: a dozen runs of one watch, each alive and each
/// with some 424 keys of its own, one after another (the victim, second,
/// among them); then a run whose key exists makes calls with no room for
/// a new key. Every run's summary
/// is written and decodes (with a full AGG the kernel once counted the
/// calls it lost as transitions, and the decoder refused the run), no
/// transition starts or ends at a call not counted, no peer's figures
/// hold one, the runs counted last miss calls (the map was full) and
/// their summaries say so, and each run's exit status is its own.
#[test]
fn full_agg_loses_calls_whole_and_every_run_is_summarized() {
    let test = "full_agg_loses_calls_whole_and_every_run_is_summarized";
    if agent_linux::sys::geteuid() != 0 {
        edge_tests::skip(test, "the process-events connector needs root");
        return;
    }
    if !ebpf_available(test) {
        return;
    }
    assert_numbers_unassigned(FIRST_NR, LAST_NR);
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for aggregates in AGGREGATES {
        full_agg_with(aggregates);
    }
}

/// The aggregate stores the full-map tests run the agent with
/// (`EDGE_AGENT_EBPF_AGG`), whatever the environment says.
const AGGREGATES: [&str; 2] = ["dense", "hash"];

/// One full-map test at a time. The fillers' bursts of new keys drain
/// the kernel's populated per-CPU pages faster than it populates more,
/// and the per-CPU hashes' new values come from atomic allocations that
/// can only use those: meanwhile any agent's new AGG keys fail with
/// ENOMEM (trace event `percpu:percpu_alloc_percpu_fail`, size 312,
/// is_atomic=1) and their calls are lost whole (counted as uncounted).
/// Right for the fillers, whose losses the test expects; the full-TRANS
/// run, which checks that every call is counted, then lost some (15 of
/// 20 000) when it ran beside them.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// [`full_agg_loses_calls_whole_and_every_run_is_summarized`] with the
/// agent's aggregates in `aggregates`.
fn full_agg_with(aggregates: &str) {
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("fullmaps{}{aggregates}", std::process::id());
    // Linked statically: no dynamic loader at the start, so a run's
    // summary is small enough to keep every entry (a transition folded
    // into "other" would escape the checks).
    let exe = compile_c_static(dir.path(), &tag, WORKLOAD);
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let err = dir.path().join("watch.err");
    let watch = Command::new(agent())
        .env("EDGE_AGENT_EBPF_AGG", aggregates)
        .args(["watch", "--backend", "ebpf", "--window", "whole"])
        .args(["--discover", "connector", "--match", &tag])
        .arg("--out-dir")
        .arg(&out)
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let mut scene = Scene {
        watch,
        err,
        runs: Vec::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !scene.stderr().contains("edge-agent: watching for") {
        assert!(
            scene.watch.try_wait().unwrap().is_none() && Instant::now() < deadline,
            "watch did not start:\n{}",
            scene.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The victim must not be the watch's first run: run slot 0's named
    // calls may be counted in the dense array (EDGE_AGENT_EBPF_AGG=dense),
    // which has room for every key, so its getuid would be counted; a
    // filler takes slot 0 first (its numbers go to AGG whatever the
    // slot), the victim the next, whose keys all compete for AGG's room.
    let (first, last) = (FIRST_NR.to_string(), LAST_NR.to_string());
    let i = scene.start(&exe, &["fill", &first, &last]);
    scene.step(i, b'd');
    let victim = scene.start(&exe, &["victim"]);
    scene.step(victim, b'a');
    for _ in 1..FILLERS {
        let i = scene.start(&exe, &["fill", &first, &last]);
        scene.step(i, b'd');
    }
    scene.step(victim, b'b');
    for run in &mut scene.runs {
        drop(run.stdin.take());
    }
    for (i, run) in scene.runs.iter_mut().enumerate() {
        assert_eq!(wait_timeout(&mut run.child, 30).code(), Some(7), "run {i}");
    }
    let runs = scene.runs.len();
    let deadline = Instant::now() + Duration::from_secs(30);
    while summaries(&out).len() < runs && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    agent_linux::sys::kill(scene.watch.id() as i32, libc::SIGINT).unwrap();
    assert!(wait_timeout(&mut scene.watch, 30).success());
    let said = scene.stderr();

    let got = summaries(&out);
    assert_eq!(got.len(), runs, "one summary per run; watch said:\n{said}");
    let mut decoded = Vec::new();
    for (file, s) in got {
        match s {
            Ok(s) => decoded.push(s),
            Err(e) => panic!("{file} does not decode: {e}; watch said:\n{said}"),
        }
    }
    for s in &decoded {
        assert_eq!(s.run.exit, Exit::Code(7), "{s:#?}");
        assert_consistent(s, "a run of the full maps");
    }
    // The fillers' calls: 424 each made, fewer counted (the maps were
    // full), and the loss said.
    let getppid = SyscallId::from_name("getppid").unwrap();
    let (victims, fillers): (Vec<&Summary>, Vec<&Summary>) =
        decoded.iter().partition(|s| calls_of(s, getppid) > 0);
    assert_eq!((victims.len(), fillers.len()), (1, FILLERS), "{said}");
    // Each run's summary says what the kernel lost of it.
    let made = (LAST_NR - FIRST_NR) as u64;
    let mut lost_whole = 0;
    for s in &fillers {
        let counted: u64 = s
            .syscalls
            .iter()
            .filter(|e| e.key.id == SyscallId::UNKNOWN || e.key.id.carried_raw().is_some())
            .map(|e| e.count)
            .sum();
        assert!(counted <= made, "{s:#?}");
        lost_whole += made - counted;
        assert!(
            uncounted(s) >= made - counted,
            "{} of {made} calls counted, {} said uncounted: {s:#?}",
            counted,
            uncounted(s)
        );
    }
    assert!(
        lost_whole > 0,
        "the maps were never full: every filler's {made} calls counted"
    );
    assert!(said.contains("calls uncounted so far"), "{said}");
    // The victim's getppid had its key: all four counted; its getuid had
    // none: not counted, and no transition names it.
    let v = victims[0];
    // Whole: a transition folded into "other" would escape the checks.
    assert_eq!(calls_of(v, SyscallId::OTHER), 0, "{v:#?}");
    assert!(
        !v.transitions.iter().any(|t| t.from == SyscallId::OTHER),
        "{v:#?}"
    );
    assert_eq!(calls_of(v, getppid), 4, "{v:#?}");
    // Lost to the full AGG, not to a refusal with room left.
    assert!(
        uncounted(v) > fact_count(v, "ebpf.uncounted_refused"),
        "{v:#?}"
    );
    let getuid = SyscallId::from_name("getuid").unwrap();
    assert_eq!(calls_of(v, getuid), 0, "{v:#?}");
    assert!(
        !v.transitions
            .iter()
            .any(|t| t.from == getuid || t.to == getuid),
        "{v:#?}"
    );
    // Its connection's last call counted is the write (getpeername had no
    // room).
    let write = SyscallId::from_name("write").unwrap();
    let lasts: Vec<_> = v.peers.list.iter().filter_map(|p| p.last).collect();
    assert!(
        !lasts.is_empty() && lasts.iter().all(|l| l.id == write),
        "{v:#?}"
    );
}

/// TRANS full: one run calls every ordered pair of 100 numbers (10 000
/// distinct transitions, beyond the map's 8 192). Every call is still
/// counted, or said refused by the kernel's per-CPU memory allocator (the
/// burst of new TRANS keys can outrun its refill; none is refused for a
/// full AGG: it has room), the transitions that found no room are not
/// counted and said so, the summary decodes, and the run's exit status is
/// the program's.
#[test]
fn full_trans_loses_transitions_only_and_the_summary_says_so() {
    let test = "full_trans_loses_transitions_only_and_the_summary_says_so";
    if !ebpf_available(test) {
        return;
    }
    const N: u32 = 100;
    assert_numbers_unassigned(FIRST_NR, FIRST_NR + N);
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_c_static(dir.path(), "pairs", WORKLOAD);
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for aggregates in AGGREGATES {
        full_trans_with(dir.path(), &exe, aggregates);
    }
}

/// [`full_trans_loses_transitions_only_and_the_summary_says_so`] with the
/// agent's aggregates in `aggregates`.
fn full_trans_with(dir: &Path, exe: &Path, aggregates: &str) {
    const N: u32 = 100;
    let (first, n) = (FIRST_NR.to_string(), N.to_string());
    let (out, summary) = agent_run_env(
        dir,
        &[("EDGE_AGENT_EBPF_AGG", aggregates)],
        &["--backend", "ebpf"],
        &[exe.to_str().unwrap(), "pairs", &first, &n],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{aggregates}: {err}");
    assert_eq!(summary.run.exit, Exit::Code(5));
    assert_consistent(&summary, "the run of every pair");
    let counted: u64 = summary
        .syscalls
        .iter()
        .filter(|e| e.key.id == SyscallId::UNKNOWN || e.key.id.carried_raw().is_some())
        .map(|e| e.count)
        .sum();
    let (made, not_counted, refused) = (
        2 * (N * N) as u64,
        uncounted(&summary),
        fact_count(&summary, "ebpf.uncounted_refused"),
    );
    assert_eq!(
        not_counted, refused,
        "{aggregates}: no call lost to a full AGG: {summary:#?}\n{err}"
    );
    assert!(
        counted <= made && counted + refused >= made,
        "{aggregates}: every call counted or said refused: {counted} counted, {refused} refused of {made}: {summary:#?}\n{err}"
    );
    // At least the pairs beyond the map's room.
    let partial = fact_count(&summary, "ebpf.partial");
    assert!(
        partial >= (N * N - 8192) as u64,
        "{aggregates}: {partial}: {summary:#?}\n{err}"
    );
}
