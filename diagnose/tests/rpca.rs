//! The unsupervised diagnosis (`--method rpca`): principal component pursuit
//! on synthetic matrices of known rank and known sparse support (and
//! against a plain numpy reference), then the whole diagnosis on stored
//! real runs (the research's TCP-memory case, and two programs mixed) and
//! on synthetic runs, the ranking across categories, and the command.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use agent_core::Summary;
use common::{download, facts};
use diagnose::input::{self, RunFilter, SummarySource};
use diagnose::request::{devices_of, DiagnoseRequest, Labels, Method, RpcaSettings};
use diagnose::rpca::analysis::{CategoryFinding, SyscallFinding};
use diagnose::rpca::pcp::{default_lambda, pcp, PcpParams};
use diagnose::rpca::{self, RpcaDiagnosis, RpcaOptions};
use faer::Mat;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A standard normal number (Box-Muller).
fn normal(rng: &mut StdRng) -> f64 {
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    let v: f64 = rng.random::<f64>();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// Lin, Chen and Ma's test problem: `L0 = U Vᵀ` with `U` (m × r) and `V`
/// (n × r) of standard normal entries, and `E0` with `share·m·n` entries at
/// random places, uniform in [−500, 500].
fn planted(m: usize, n: usize, r: usize, share: f64, seed: u64) -> (Mat<f64>, Mat<f64>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let u = Mat::from_fn(m, r, |_, _| normal(&mut rng));
    let v = Mat::from_fn(n, r, |_, _| normal(&mut rng));
    let low = &u * v.transpose();
    let mut sparse = Mat::<f64>::zeros(m, n);
    let count = (share * (m * n) as f64).round() as usize;
    let mut placed = 0;
    while placed < count {
        let (i, j) = (rng.random_range(0..m), rng.random_range(0..n));
        if sparse[(i, j)] == 0.0 {
            sparse[(i, j)] = rng.random_range(-500.0..500.0);
            placed += 1;
        }
    }
    (low, sparse)
}

fn frobenius_diff(a: &Mat<f64>, b: &Mat<f64>) -> f64 {
    (a - b).norm_l2()
}

/// Relative errors of the recovered parts stay below this (the solver's
/// tolerance is 1e-7; the worst case measured is in the test's output).
const RECOVERY_ERROR: f64 = 1e-5;

#[test]
fn pcp_recovers_planted_low_rank_and_sparse_parts() {
    // (rows, columns, rank, share of corrupted entries): tall like a
    // diagnosis, square like the paper's experiments, and a denser
    // corruption.
    for (m, n, r, share, seed) in [
        (300, 80, 4, 0.05, 1),
        (120, 120, 6, 0.05, 2),
        (200, 40, 2, 0.10, 3),
    ] {
        let (l0, e0) = planted(m, n, r, share, seed);
        let observed = &l0 + &e0;
        let d = pcp(&observed, &PcpParams::default()).unwrap();
        let l_err = frobenius_diff(&d.low_rank, &l0) / l0.norm_l2();
        let e_err = frobenius_diff(&d.sparse, &e0) / e0.norm_l2();
        println!(
            "{m}x{n} rank {r}, {:.0}% corrupted: rank {} in {} iterations, ‖L−L0‖/‖L0‖ {l_err:.2e}, ‖E−E0‖/‖E0‖ {e_err:.2e}",
            share * 100.0,
            d.rank,
            d.iterations
        );
        assert!(d.converged, "{m}x{n}: residual {}", d.residual);
        assert_eq!(d.rank, r, "{m}x{n}: rank");
        assert!(l_err < RECOVERY_ERROR, "{m}x{n}: L error {l_err:e}");
        assert!(e_err < RECOVERY_ERROR, "{m}x{n}: E error {e_err:e}");
        // The support of E is found exactly: every corrupted entry, and
        // nothing else above a thousandth of the smallest corruption's scale.
        for i in 0..m {
            for j in 0..n {
                let planted_here = e0[(i, j)] != 0.0;
                let found_here = d.sparse[(i, j)].abs() > 1e-3;
                assert_eq!(
                    planted_here,
                    found_here,
                    "{m}x{n}: entry ({i}, {j}): planted {} found {}",
                    e0[(i, j)],
                    d.sparse[(i, j)]
                );
            }
        }
    }
}

#[test]
fn plain_pca_would_not_recover_them() {
    // The reason for robust PCA (the paper's §V.B): the best rank-r
    // approximation of the observed matrix is pulled far from L0 by the
    // gross errors.
    let (m, n, r) = (300, 80, 4);
    let (l0, e0) = planted(m, n, r, 0.05, 1);
    let observed = &l0 + &e0;
    let svd = observed.thin_svd().unwrap();
    let s = svd.S().column_vector();
    let truncated = Mat::from_fn(m, n, |i, j| {
        (0..r)
            .map(|k| svd.U()[(i, k)] * s[k] * svd.V()[(j, k)])
            .sum::<f64>()
    });
    let err = frobenius_diff(&truncated, &l0) / l0.norm_l2();
    assert!(err > 1.0, "rank-{r} PCA error {err}");
}

/// The Python of the numpy venv scripts/deps.d/rpca.sh makes.
fn reference_python() -> PathBuf {
    let venv = std::env::var_os("EDGE_PY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .unwrap_or_else(|| PathBuf::from(".cache"))
                .join("edge-agent/py")
        });
    venv.join("bin/python")
}

fn write_matrix(path: &Path, m: &Mat<f64>) {
    let mut text = String::new();
    for i in 0..m.nrows() {
        let row: Vec<String> = (0..m.ncols()).map(|j| format!("{:e}", m[(i, j)])).collect();
        text.push_str(&row.join(" "));
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

fn read_matrix(path: &Path, rows: usize, cols: usize) -> Mat<f64> {
    let text = std::fs::read_to_string(path).unwrap();
    let values: Vec<f64> = text
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(values.len(), rows * cols, "{}", path.display());
    Mat::from_fn(rows, cols, |i, j| values[i * cols + j])
}

fn max_abs_diff(a: &Mat<f64>, b: &Mat<f64>) -> f64 {
    let mut worst = 0.0f64;
    for i in 0..a.nrows() {
        for j in 0..a.ncols() {
            worst = worst.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    worst
}

#[test]
fn pcp_matches_a_plain_numpy_reference() {
    let python = reference_python();
    let has_numpy = Command::new(&python)
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_numpy {
        edge_tests::skip(
            "pcp_matches_a_plain_numpy_reference",
            &format!(
                "no numpy at {} (scripts/install-deps makes it: scripts/deps.d/rpca.sh)",
                python.display()
            ),
        );
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/rpca_reference.py");
    let dir = tempfile::tempdir().unwrap();
    // An exactly planted problem, and one with dense noise besides (not
    // exactly low rank plus sparse: both solvers must take the same path).
    let (l0, e0) = planted(150, 40, 3, 0.05, 7);
    let mut rng = StdRng::seed_from_u64(8);
    let noise = Mat::from_fn(150, 40, |_, _| 0.05 * normal(&mut rng));
    let cases = [("planted", &l0 + &e0), ("noisy", &(&l0 + &e0) + &noise)];
    for (name, m) in cases {
        let params = PcpParams::default();
        let ours = pcp(&m, &params).unwrap();
        let input = dir.path().join(format!("{name}.txt"));
        let (l_path, e_path) = (
            dir.path().join(format!("{name}-L.txt")),
            dir.path().join(format!("{name}-E.txt")),
        );
        write_matrix(&input, &m);
        let out = Command::new(&python)
            .arg(&script)
            .arg(&input)
            .arg(format!("{:e}", default_lambda(m.nrows(), m.ncols())))
            .arg(format!("{:e}", params.tolerance))
            .arg(params.max_iterations.to_string())
            .arg(params.rho.to_string())
            .arg(&l_path)
            .arg(&e_path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "reference failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stdout);
        let mut said = said.split_whitespace().map(|v| v.parse::<usize>().unwrap());
        let (rank, iterations) = (said.next().unwrap(), said.next().unwrap());
        let (l, e) = (
            read_matrix(&l_path, m.nrows(), m.ncols()),
            read_matrix(&e_path, m.nrows(), m.ncols()),
        );
        let scale = m.norm_max();
        let (dl, de) = (
            max_abs_diff(&ours.low_rank, &l) / scale,
            max_abs_diff(&ours.sparse, &e) / scale,
        );
        println!(
            "{name}: numpy rank {rank} in {iterations} iterations, ours rank {} in {}; largest difference / max|M|: L {dl:.1e}, E {de:.1e}",
            ours.rank, ours.iterations
        );
        assert_eq!(ours.rank, rank, "{name}: rank");
        assert!(
            ours.iterations.abs_diff(iterations) <= 1,
            "{name}: iterations {} vs {iterations}",
            ours.iterations
        );
        assert!(dl < 1e-6, "{name}: L differs by {dl:e} of max|M|");
        assert!(de < 1e-6, "{name}: E differs by {de:e} of max|M|");
    }
}

/// The runs under `root`, one folder per device; each run's device is its
/// folder's name.
fn runs_by_folder(root: &Path) -> (Vec<Summary>, Vec<String>) {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    let mut runs = Vec::new();
    let mut devices = Vec::new();
    for f in folders {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        for file in input::summary_files(&f).unwrap() {
            runs.push(input::read_summary(&file).unwrap());
            devices.push(name.clone());
        }
    }
    (runs, devices)
}

fn stored(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/rpca")
        .join(name)
}

fn category<'a>(d: &'a RpcaDiagnosis, program: &str) -> &'a CategoryFinding {
    d.categories
        .iter()
        .find(|c| c.category.program == program)
        .unwrap_or_else(|| panic!("no category of {program}"))
}

fn syscall<'a>(c: &'a CategoryFinding, name: &str) -> &'a SyscallFinding {
    c.syscalls
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{name} not in the category"))
}

/// Runs of `device` with a large entry in the syscall's column of E.
fn flagged(s: &SyscallFinding, device: &str) -> usize {
    s.devices
        .iter()
        .find(|d| d.device == device)
        .map_or(0, |d| d.runs.len())
}

/// The TCP-memory case as the demo recorded it: without labels, the reads
/// on TCP sockets are anomalous and their slow runs are exactly those of
/// the misconfigured clients c5 and c6 (all five runs of each); a good
/// client has at most a stray slow run (c1's third fetch took 0.83 s).
fn check_tcp_memory(d: &RpcaDiagnosis) {
    let wget = category(d, "wget");
    assert!(wget.anomalous, "CV {}", wget.category.cv);
    assert_eq!(wget.category.runs.len(), 30);
    let reads = syscall(wget, "read@tcp");
    assert!(reads.anomalous, "read@tcp cos θ {}", reads.cos_theta);
    for bad in ["c5", "c6"] {
        assert_eq!(flagged(reads, bad), 5, "{bad}: {:?}", reads.devices);
    }
    for good in ["c1", "c2", "c3", "c4"] {
        assert!(flagged(reads, good) <= 2, "{good}: {:?}", reads.devices);
    }
    // Among the clients' suspects, every (syscall, device) flagged in all
    // of a device's runs is on c5 or c6.
    for s in d.suspects.iter().filter(|s| s.device.starts_with('c')) {
        if s.runs == 5 {
            assert!(["c5", "c6"].contains(&s.device.as_str()), "{s:?}");
        }
    }
}

#[test]
fn tcp_memory_demo_runs_flag_tcp_reads_on_the_misconfigured_clients() {
    let (runs, devices) = runs_by_folder(&stored("wget-tcp-rmem"));
    assert_eq!(runs.len(), 30);
    let d = rpca::analyse(&runs, &devices, "folders", &RpcaOptions::default()).unwrap();
    print!("{}", rpca::report::text(&d));
    assert_eq!(d.categories.len(), 1, "one program, one signature");
    check_tcp_memory(&d);
    let top: Vec<(&str, &str)> = d
        .suspects
        .iter()
        .take(2)
        .map(|s| (s.syscall.as_str(), s.device.as_str()))
        .collect();
    assert_eq!(top, [("read@tcp", "c6"), ("read@tcp", "c5")], "{d:#?}");
}

#[test]
fn two_programs_mixed_each_category_names_its_own_cause() {
    let (mut runs, mut devices) = runs_by_folder(&stored("wget-tcp-rmem"));
    let (dd_runs, dd_devices) = runs_by_folder(&stored("dd-dsync"));
    runs.extend(dd_runs);
    devices.extend(dd_devices);
    let d = rpca::analyse(&runs, &devices, "folders", &RpcaOptions::default()).unwrap();
    print!("{}", rpca::report::text(&d));
    assert_eq!(d.categories.len(), 2);
    check_tcp_memory(&d);
    // dd: the file writes of d5 (oflag=dsync) and of no other device.
    let dd = category(&d, "dd");
    assert!(dd.anomalous);
    let writes = syscall(dd, "write@file");
    assert!(writes.anomalous, "write@file cos θ {}", writes.cos_theta);
    assert_eq!(writes.devices.len(), 1, "{:?}", writes.devices);
    assert_eq!(flagged(writes, "d5"), 5);
    // No syscall of dd flags d5 more often than its writes, and no other
    // dd device is flagged in every run.
    for s in dd.syscalls.iter().filter(|s| s.anomalous) {
        for dev in &s.devices {
            assert!(dev.runs.len() < 5 || dev.device == "d5", "{s:?}");
        }
    }
    assert!(d
        .suspects
        .iter()
        .any(|s| (s.syscall.as_str(), s.device.as_str(), s.runs) == ("write@file", "d5", 5)));
}

/// Synthetic downloads: `devices` of `per_device` runs each; the devices
/// in `slow` take 8 times as long in each socket read.
fn synthetic(program: &str, devices: &[&str], slow: &[&str], seed0: u8) -> Vec<Summary> {
    let mut out = Vec::new();
    for (k, dev) in devices.iter().enumerate() {
        for rep in 0..3u8 {
            let seed = seed0 + k as u8 * 3 + rep;
            let read_ns = if slow.contains(dev) { 160_000 } else { 20_000 };
            out.push(download(
                seed,
                1024 * 1024 + rep as u64 * 8192,
                8192,
                read_ns + seed as u64 * 50,
                facts(program, &[("device", dev)]),
            ));
        }
    }
    out
}

#[test]
fn a_syscall_slow_on_one_device_in_two_programs_ranks_first() {
    let devs = ["d1", "d2", "d3", "d4", "d5", "d6", "d7"];
    let mut runs = synthetic("wget", &devs, &["d7"], 0);
    runs.extend(synthetic("curl", &devs, &["d7", "d3"], 100));
    let (devices, source) = devices_of(&runs, "device");
    assert_eq!(source, "the `device` fact");
    let d = rpca::analyse(&runs, &devices, &source, &RpcaOptions::default()).unwrap();
    print!("{}", rpca::report::text(&d));
    assert_eq!(d.categories.len(), 2);
    assert!(d.categories.iter().all(|c| c.anomalous));
    let first = &d.suspects[0];
    assert_eq!(
        (
            first.syscall.as_str(),
            first.device.as_str(),
            first.categories
        ),
        ("read@socket", "d7", 2),
        "{:?}",
        d.suspects
    );
    // d3 is slow only in curl: one category.
    let d3 = d
        .suspects
        .iter()
        .find(|s| s.syscall == "read@socket" && s.device == "d3")
        .expect("d3 found in curl");
    assert_eq!(d3.categories, 1);
    assert_eq!(d3.runs, 3);
    // No other device is named for the socket reads.
    for s in &d.suspects {
        if s.syscall == "read@socket" {
            assert!(["d3", "d7"].contains(&s.device.as_str()), "{s:?}");
        }
    }
}

#[test]
fn categories_under_the_cv_threshold_are_normal() {
    // Every device alike: nothing is over-dispersed, nothing is analysed.
    let runs = synthetic("wget", &["d1", "d2", "d3", "d4"], &[], 0);
    let (devices, source) = devices_of(&runs, "device");
    let d = rpca::analyse(&runs, &devices, &source, &RpcaOptions::default()).unwrap();
    assert_eq!(d.categories.len(), 1);
    assert!(
        !d.categories[0].anomalous,
        "CV {}",
        d.categories[0].category.cv
    );
    assert!(d.categories[0].pcp.is_none());
    assert!(d.suspects.is_empty());
    // With α = 0 the same category is analysed, and (the runs differing
    // only a little) no syscall is found.
    let options = RpcaOptions {
        cv_threshold: 0.0,
        ..RpcaOptions::default()
    };
    let d = rpca::analyse(&runs, &devices, &source, &options).unwrap();
    assert!(d.categories[0].anomalous);
    assert!(d.suspects.is_empty(), "{:?}", d.suspects);
}

#[test]
fn json_report_has_the_documented_shape() {
    let devs = ["d1", "d2", "d3", "d4", "d5", "d6"];
    let runs = synthetic("wget", &devs, &["d6"], 0);
    let (devices, source) = devices_of(&runs, "device");
    let d = rpca::analyse(&runs, &devices, &source, &RpcaOptions::default()).unwrap();
    let j = rpca::report::json(&d);
    assert_eq!(j["method"], "rpca");
    assert_eq!(j["runs"], 18);
    let c = &j["categories"][0];
    assert_eq!(c["program"], "wget");
    assert_eq!(c["runs"], 18);
    assert_eq!(c["anomalous"], true);
    assert!(c["cv"].as_f64().unwrap() > 0.25);
    assert!(c["signature"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s == "read@socket"));
    let first = &c["syscalls"][0];
    assert_eq!(first["name"], "read@socket");
    assert!(first["cos_theta"].as_f64().unwrap() < 0.95);
    assert_eq!(first["devices"][0]["device"], "d6");
    assert_eq!(first["devices"][0]["runs"].as_array().unwrap().len(), 3);
    assert_eq!(j["suspects"][0]["syscall"], "read@socket");
    assert_eq!(j["suspects"][0]["device"], "d6");
    let page = rpca::report::html(&d);
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("<svg") && page.contains("read@socket"));
}

/// An rpca request for the runs of these folders.
fn rpca_of(folders: &[String]) -> DiagnoseRequest {
    DiagnoseRequest {
        inputs: folders.iter().map(PathBuf::from).collect(),
        method: Method::Rpca(RpcaSettings::default()),
        ..DiagnoseRequest::default()
    }
}

/// A store that must not be read (files are given).
struct NoStore;

impl SummarySource for NoStore {
    fn load(&self, _db: &Path, _filter: &RunFilter) -> anyhow::Result<Vec<Summary>> {
        panic!("the store was read");
    }
}

#[test]
fn command_runs_rpca_on_files_and_refuses_labels() {
    let dir = tempfile::tempdir().unwrap();
    let root = stored("wget-tcp-rmem");
    let folders: Vec<String> = (1..=6)
        .map(|i| root.join(format!("c{i}")).to_string_lossy().to_string())
        .collect();
    let html = dir.path().join("rpca.html");
    let report = rpca_of(&folders).run(&NoStore, &mut |_| {}).unwrap();
    assert!(serde_json::to_string_pretty(&report.json()).is_ok());
    std::fs::write(&html, report.html()).unwrap();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("read@tcp"), "{page}");

    let labelled = DiagnoseRequest {
        labels: Some(Labels::Fact("outcome".into())),
        ..rpca_of(&folders[..1])
    };
    let err = labelled.run(&NoStore, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("uses no labels"), "{err}");
    let bad_cos = DiagnoseRequest {
        method: Method::Rpca(RpcaSettings {
            cos_threshold: 1.5,
            ..RpcaSettings::default()
        }),
        ..rpca_of(&folders[..1])
    };
    let err = bad_cos.run(&NoStore, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("cos θ threshold"), "{err}");
}

#[test]
fn devices_come_from_the_fact_else_the_device_id_else_the_run_id() {
    let mut runs = synthetic("wget", &["d1"], &[], 0);
    let (names, source) = devices_of(&runs, "device");
    assert_eq!(names, ["d1", "d1", "d1"]);
    assert_eq!(source, "the `device` fact");
    let (names, source) = devices_of(&runs, "host");
    assert_eq!(names[0], format!("run {}", hex::encode(&runs[0].id.0[..6])));
    assert!(source.contains("the run id (3 runs"), "{source}");
    runs[1].origin.device = agent_core::DeviceId([0xab; 16]);
    let (names, source) = devices_of(&runs, "host");
    assert_eq!(names[1], "device abababababab");
    assert!(source.contains("the device id (1 runs)"), "{source}");
}
