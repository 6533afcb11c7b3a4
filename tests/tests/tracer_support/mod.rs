//! Shared helpers of the tracer's end-to-end tests (`tracer_*.rs`): run the
//! real `edge-agent` and `strace -f -c` on the same workload and compare.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::Summary;

/// A child process (an agent, a server) killed and reaped when dropped:
/// a failed test must not leave it behind.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Stops a `watch` with SIGTERM, checks it exited 0 (`lines`: its stderr,
/// said otherwise) and returns the summaries in `out`, by file name.
pub fn stop_watch(mut watch: Killed, lines: &Lines, out: &Path) -> Vec<Summary> {
    agent_linux::sys::kill(watch.0.id() as i32, libc::SIGTERM).unwrap();
    let st = wait_timeout(&mut watch.0, 30);
    assert!(st.success(), "{st:?}: {}", lines.text());
    read_summaries(out)
}

/// The summaries in folder `out` (none if it does not exist), by file
/// name.
pub fn read_summaries(out: &Path) -> Vec<Summary> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(out)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    paths.sort();
    paths
        .iter()
        .map(|p| Summary::decode(&std::fs::read(p).unwrap()).unwrap())
        .collect()
}

/// The built `edge-agent`.
pub fn agent() -> PathBuf {
    edge_tests::binary("edge-agent")
}

/// Compiles the C program `src` into `dir/name` with the system's cc (the
/// Rust toolchain's linker, so present wherever the tests build).
pub fn compile_c(dir: &Path, name: &str, src: &str) -> PathBuf {
    compile_c_linked(dir, name, src, &[])
}

/// [`compile_c`], linked statically (no dynamic loader: no `LD_PRELOAD`,
/// and no loader calls at the start).
pub fn compile_c_static(dir: &Path, name: &str, src: &str) -> PathBuf {
    compile_c_linked(dir, name, src, &["-static"])
}

fn compile_c_linked(dir: &Path, name: &str, src: &str, flags: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let out = Command::new("cc")
        .args(["-O1", "-pthread"])
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .output()
        .expect("run cc");
    assert!(
        out.status.success(),
        "cc {flags:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Waits for `child` at most `secs`; kills it (and fails) past that.
pub fn wait_timeout(child: &mut Child, secs: u64) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("timed out after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The `TracerPid` of `pid` from `/proc/PID/status` (0: not traced; `None`:
/// no such process).
pub fn tracer_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits up to `secs` until `pid` is traced by `tracer`, and fails the test
/// otherwise: a test of what happens to a traced program must not pass
/// because the attach never happened.
pub fn assert_traced_by(pid: u32, tracer: u32, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let seen = tracer_of(pid);
        if seen == Some(tracer) {
            return;
        }
        if Instant::now() > deadline {
            panic!("PID {pid} is not traced by the agent (PID {tracer}): TracerPid {seen:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The children of process `pid` (its main thread's), from /proc.
pub fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Runs `cmd` with a time limit, capturing its output.
pub fn output_timeout(cmd: &mut Command, secs: u64) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Drain the pipes on threads so a chatty child cannot block.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).ok();
        v
    });
    let t2 = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).ok();
        v
    });
    let status = wait_timeout(&mut child, secs);
    Output {
        status,
        stdout: t1.join().unwrap(),
        stderr: t2.join().unwrap(),
    }
}

/// Per syscall name: (calls, errors).
pub type Counts = BTreeMap<String, (u64, u64)>;

/// `strace -f -c` (plus `extra` options) on `cmd`: its status and counts.
pub fn strace_counts(dir: &Path, extra: &[&str], cmd: &[&str]) -> (ExitStatus, Counts) {
    let out_file = dir.join("strace.txt");
    let out = output_timeout(
        Command::new("strace")
            .args(["-f", "-c", "-o"])
            .arg(&out_file)
            .args(extra)
            .args(cmd),
        120,
    );
    let text = std::fs::read_to_string(&out_file).expect("strace output");
    (out.status, parse_strace(&text))
}

/// `strace` (no `-f`, no `-c`) on the one-process program `cmd`: calls and
/// errors per name, counted from the trace's lines (`name(args) = ret`).
/// For numbers an older strace leaves out of its `-c` table.
pub fn strace_trace_counts(dir: &Path, cmd: &[&str]) -> Counts {
    let out_file = dir.join("strace-trace.txt");
    output_timeout(
        Command::new("strace").arg("-o").arg(&out_file).args(cmd),
        120,
    );
    let text = std::fs::read_to_string(&out_file).expect("strace output");
    let mut counts = Counts::new();
    for line in text.lines() {
        if line.starts_with("+++") || line.starts_with("---") {
            continue; // exit and signal lines
        }
        let Some((name, _)) = line.split_once('(') else {
            continue;
        };
        // The result follows the last " = " (after padding spaces).
        let ret = line.rsplit_once(" = ").map_or("", |(_, r)| r);
        if ret == "?" {
            continue; // a call that never returned (exit_group): not in -c
        }
        let c = counts.entry(name.to_string()).or_default();
        c.0 += 1;
        c.1 += ret.starts_with("-1 ") as u64;
    }
    counts
}

/// Parses `strace -c`'s table.
pub fn parse_strace(text: &str) -> Counts {
    let mut counts = Counts::new();
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 5 || !cols[0].starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let name = cols[cols.len() - 1];
        if name == "total" {
            continue;
        }
        let calls: u64 = cols[3].parse().expect("calls column");
        let errors: u64 = if cols.len() == 6 {
            cols[4].parse().expect("errors column")
        } else {
            0
        };
        counts.insert(name.to_string(), (calls, errors));
    }
    counts
}

/// The counts of a summary, summed over fd kinds (an unknown number kept
/// apart named as strace names it, `syscall_0x1f0`).
pub fn summary_counts(s: &Summary) -> Counts {
    let mut counts = Counts::new();
    for e in &s.syscalls {
        let name = e.key.id.to_string();
        let c = counts.entry(name).or_default();
        c.0 += e.count;
        c.1 += e.errors();
    }
    counts
}

/// `edge-agent run --out FILE [agent_args] -- cmd`: its output and the
/// decoded summary.
pub fn agent_run(dir: &Path, agent_args: &[&str], cmd: &[&str]) -> (Output, Summary) {
    agent_run_env(dir, &[], agent_args, cmd)
}

/// [`agent_run`] with extra environment variables for the agent.
pub fn agent_run_env(
    dir: &Path,
    env: &[(&str, &str)],
    agent_args: &[&str],
    cmd: &[&str],
) -> (Output, Summary) {
    let file = dir.join("run.summary");
    let _ = std::fs::remove_file(&file);
    let out = output_timeout(
        Command::new(agent())
            .envs(env.iter().copied())
            .arg("run")
            .arg("--out")
            .arg(&file)
            .args(agent_args)
            .arg("--")
            .args(cmd),
        120,
    );
    let bytes = std::fs::read(&file).unwrap_or_else(|e| {
        panic!(
            "no summary ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let summary = Summary::decode(&bytes).expect("summary decodes");
    (out, summary)
}

/// A table of counts keyed by raw syscall number in `arch` instead of name
/// (strace releases older than the kernel call its newest syscalls
/// `syscall_0x1d6`, where the agent has their names). Panics on a name
/// that is neither a syscall of this build nor `syscall_0x<hex>`.
pub fn counts_by_number(counts: &Counts, arch: agent_core::Arch) -> BTreeMap<u32, (u64, u64)> {
    let mut out = BTreeMap::new();
    for (name, c) in counts {
        let nr = match name.strip_prefix("syscall_0x") {
            Some(hex) => u32::from_str_radix(hex, 16).expect("strace's hex number"),
            None => agent_core::SyscallId::from_name(name)
                .and_then(|id| id.to_raw(arch))
                .unwrap_or_else(|| panic!("{name}: no number in {arch:?}")),
        };
        let e: &mut (u64, u64) = out.entry(nr).or_default();
        e.0 += c.0;
        e.1 += c.1;
    }
    out
}

/// Asserts the two tables are equal, ignoring `skip` (names whose count
/// depends on timing, e.g. futex under contention).
pub fn assert_same_counts(agent: &Counts, strace: &Counts, skip: &[&str]) {
    let filter = |c: &Counts| -> Counts {
        c.iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    let (a, s) = (filter(agent), filter(strace));
    assert!(!a.is_empty(), "no syscalls recorded");
    assert_eq!(a, s, "edge-agent (left) and strace -f -c (right) disagree");
}

/// Whether this machine lets the agent load its BPF program; reports the
/// skip (a failure under CI) when not.
pub fn ebpf_available(test: &str) -> bool {
    let out = output_timeout(
        Command::new(agent()).args([
            "run",
            "--backend",
            "ebpf",
            "--out",
            "/dev/null",
            "--",
            "true",
        ]),
        60,
    );
    if out.status.success() {
        return true;
    }
    edge_tests::skip(
        test,
        &format!(
            "the eBPF backend cannot load here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    );
    false
}

/// Lines of the agent's stderr `err` other than the one saying which
/// backend `--backend auto` (the default) chose and why.
pub fn lines_but_backend(err: &str) -> usize {
    err.lines()
        .filter(|l| !l.starts_with("edge-agent: backend "))
        .count()
}

/// A process's stderr lines (the agent's), gathered by a thread.
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    pub fn collect(from: impl Read + Send + 'static) -> Lines {
        let lines = Lines::default();
        let shared = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(from).lines().map_while(Result::ok) {
                shared.0.lock().unwrap().push(line);
            }
        });
        lines
    }

    pub fn text(&self) -> String {
        self.0.lock().unwrap().join("\n")
    }

    /// Waits until a line contains `what`.
    pub fn wait_for(&self, what: &str, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while !self.0.lock().unwrap().iter().any(|l| l.contains(what)) {
            assert!(
                Instant::now() < deadline,
                "no {what:?} from the agent:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
