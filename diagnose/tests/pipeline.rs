//! From summaries (made by agent-core's Collector from synthetic events) to
//! rules: attributes and their names, the mapping, the intersection, labels,
//! the categorical case, the command and its outputs.

mod common;

use std::path::{Path, PathBuf};

use agent_core::{FdKind, Summary};
use common::{download, facts, RunBuilder};
use diagnose::analysis::{diagnose, Options};
use diagnose::dataset::Column;
use diagnose::input::{RunFilter, SummarySource};
use diagnose::label::{self, ClusterBy, Labelling};
use diagnose::mapping::Mapping;
use diagnose::report;
use diagnose::request::{DiagnoseRequest, Labels, Method, RulesSettings};
use diagnose::time::Time;

fn given(labels: &[u32]) -> Labelling {
    Labelling {
        method: "given".into(),
        classes: vec!["good".into(), "bad".into()],
        labels: labels.to_vec(),
        clusters: None,
    }
}

/// The research's TCP-memory case in miniature: good runs read 8 KiB per
/// call, bad runs 1 KiB (and wait longer), for the same 4 MiB.
fn tcp_memory_runs() -> Vec<Summary> {
    let mut runs = Vec::new();
    for i in 0..6u8 {
        let bad = i >= 4;
        let (chunk, read_ns) = if bad { (1024, 90_000) } else { (8192, 20_000) };
        // Small differences between runs, as on real machines.
        let total = 4 * 1024 * 1024 + i as u64 * 4096;
        runs.push(download(
            i,
            total,
            chunk,
            read_ns + i as u64 * 100,
            facts("wget", &[]),
        ));
    }
    runs
}

#[test]
fn attributes_have_their_fixed_names() {
    let runs = tcp_memory_runs();
    let labels = label::by_cluster(&runs, ClusterBy::Duration).unwrap();
    let d = diagnose(&runs, labels, &Options::default()).unwrap();
    let names: Vec<&str> = d
        .dataset
        .attributes
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    for expected in [
        "num_read",
        "time_read",
        "result_read",
        "param_read",
        "num_read@socket",
        "result_read@socket",
        "num_select",
        "time_select",
        "num_write",
        "gap_read->write",
        "gap_select->read",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    // pselect6 is counted as `select` (the shipped mapping).
    assert!(!names.iter().any(|n| n.contains("pselect6")), "{names:?}");
    // Constant attributes (every run made one openat) are left out.
    assert!(!names.contains(&"num_openat"));
    // write@file equals write in every run: only the plain one is kept.
    assert!(!names.contains(&"num_write@file"), "{names:?}");
    let num_read = d.dataset.attribute_index("num_read").unwrap();
    let Column::Numeric(v) = &d.dataset.attributes[num_read].column else {
        panic!("numeric");
    };
    // 512 socket reads of 8 KiB plus one file read, for run 0.
    assert_eq!(v[0], 513.0);
}

#[test]
fn tcp_memory_case_first_rules_name_reads_with_full_accuracy() {
    let runs = tcp_memory_runs();
    let labels = label::by_cluster(&runs, ClusterBy::Duration).unwrap();
    assert_eq!(labels.labels, vec![0, 0, 0, 0, 1, 1]);
    let clusters = labels.clusters.clone().unwrap();
    assert!(clusters.good.1 < clusters.boundary && clusters.boundary < clusters.bad.0);
    let d = diagnose(&runs, labels, &Options::default()).unwrap();
    assert!(!d.rules.is_empty());
    for r in &d.rules[..3] {
        assert_eq!(r.accuracy, 1.0, "{}", r.text);
    }
    let reads = [
        "num_read",
        "num_read@socket",
        "result_read",
        "result_read@socket",
    ];
    let first_read_rule = d
        .rules
        .iter()
        .position(|r| {
            r.attributes
                .iter()
                .all(|a| reads.contains(&d.dataset.attributes[*a].name.as_str()))
        })
        .expect("a rule on read counts or sizes");
    assert!(
        first_read_rule < 3,
        "{:#?}",
        d.rules.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    // Each rule's root attribute (and its fd-kind twins) is gone from the
    // later trees.
    let roots: Vec<&str> = d
        .rules
        .iter()
        .map(|r| d.dataset.attributes[r.attributes[0]].name.as_str())
        .collect();
    let mut unique = roots.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), roots.len(), "{roots:?}");
    assert!(d.rules.len() <= 10);
}

#[test]
fn categorical_fact_virtualbox_case() {
    // Three runs that differ only in the network adapter, as in the
    // research's VirtualBox case: bridged succeeded, NAT failed twice.
    let run = |seed: u8, adapter: &str| {
        let mut b = RunBuilder::default();
        for _ in 0..10 {
            b.call(
                "read",
                FdKind::Socket,
                [3, 0, 4096, 0, 0, 0],
                4096,
                1_000,
                1_000,
            );
        }
        b.finish(seed, 1_000_000, facts("repo", &[("adapter", adapter)]))
    };
    let runs = vec![run(1, "bridged"), run(2, "nat"), run(3, "nat")];
    let d = diagnose(&runs, given(&[0, 1, 1]), &Options::default()).unwrap();
    // The syscall statistics are equal: the fact is the only attribute.
    assert_eq!(d.dataset.attributes.len(), 1);
    assert_eq!(d.dataset.attributes[0].name, "fact.adapter");
    assert_eq!(d.rules.len(), 1);
    assert_eq!(
        d.rules[0].text,
        "if fact.adapter = bridged then good else bad"
    );
    assert_eq!(d.rules[0].accuracy, 1.0);
}

#[test]
fn syscalls_outside_the_intersection_are_reported_per_class() {
    let mut runs = tcp_memory_runs();
    // The bad runs also sleep: nanosleep is outside the intersection.
    for (i, r) in runs.iter_mut().enumerate().skip(4) {
        let mut b = RunBuilder::default();
        b.call("nanosleep", FdKind::None, [0; 6], 0, 5_000_000, 100);
        let extra = b.finish(i as u8, 1, facts("wget", &[]));
        let mut merged = r.syscalls.clone();
        for s in extra.syscalls.iter() {
            let _ = merged.push(s.clone());
        }
        merged.sort_by_key(|s| s.key);
        r.syscalls = merged;
    }
    let labels = label::by_cluster(&runs, ClusterBy::Duration).unwrap();
    let d = diagnose(&runs, labels, &Options::default()).unwrap();
    assert!(!d
        .dataset
        .attributes
        .iter()
        .any(|a| a.name.contains("nanosleep")));
    let e = d
        .outside
        .iter()
        .find(|e| e.name == "nanosleep")
        .expect("reported");
    assert_eq!((e.per_class[0].runs_with, e.per_class[0].runs), (0, 4));
    assert_eq!((e.per_class[1].runs_with, e.per_class[1].runs), (2, 2));
    let num = e.per_class[1]
        .means
        .iter()
        .find(|(k, _)| *k == "num")
        .unwrap()
        .1;
    let time = e.per_class[1]
        .means
        .iter()
        .find(|(k, _)| *k == "time")
        .unwrap()
        .1;
    assert_eq!(num, 1.0);
    assert!((time - 0.005).abs() < 1e-12);
    // Most uneven first.
    assert_eq!(d.outside[0].name, "nanosleep");
    let json = report::json(&d);
    assert_eq!(json["outside_intersection"][0]["name"], "nanosleep");
    assert_eq!(
        json["outside_intersection"][0]["classes"]["bad"]["runs_with"],
        2
    );
}

#[test]
fn a_custom_mapping_merges_reads() {
    let mut b = RunBuilder::default();
    b.call("read", FdKind::Socket, [3, 0, 100, 0, 0, 0], 100, 1_000, 0);
    b.call(
        "recvfrom",
        FdKind::Socket,
        [3, 0, 100, 0, 0, 0],
        50,
        1_000,
        0,
    );
    let s = b.finish(1, 1, facts("x", &[]));
    let default = diagnose::attributes::profile(&s, &Mapping::default_map(), None);
    assert_eq!(default.entries["read"].count, 1);
    assert_eq!(default.entries["recvfrom"].count, 1);
    let merged =
        Mapping::from_toml("[merge]\nread = [\"read\", \"recvfrom\", \"recvmsg\"]\n").unwrap();
    let p = diagnose::attributes::profile(&s, &merged, None);
    assert_eq!(p.entries["read"].count, 2);
    assert_eq!(p.entries["read@socket"].result_mean(), 75.0);
    assert!(!p.entries.contains_key("recvfrom"));
}

#[test]
fn facts_become_categorical_attributes_with_fixed_names() {
    let s = download(
        1,
        8192,
        8192,
        1000,
        facts("wget", &[("net.adapter", "nat"), ("os", "shadow")]),
    );
    let p = diagnose::attributes::profile(&s, &Mapping::default_map(), Some("outcome"));
    assert_eq!(p.facts["fact.program"], "wget");
    assert_eq!(p.facts["fact.os"], "Debian GNU/Linux");
    assert_eq!(p.facts["fact.arch"], "x86_64");
    assert_eq!(p.facts["fact.net.adapter"], "nat");
    // A free fact cannot hide a fixed one.
    assert_eq!(p.facts["fact.free.os"], "shadow");
}

#[test]
fn two_means_finds_the_natural_break() {
    let v = [1.0, 1.1, 1.2, 5.0, 5.5, 6.0];
    assert_eq!(label::two_means(&v), Some(3));
    assert_eq!(label::two_means(&[2.0, 2.0]), None);
    assert_eq!(label::two_means(&[2.0]), None);
    // Brute force agrees on a less obvious case.
    let v = [0.1, 0.4, 0.5, 0.9, 1.0, 1.6, 2.2, 2.3];
    let sse = |s: &[f64]| {
        let m = s.iter().sum::<f64>() / s.len() as f64;
        s.iter().map(|x| (x - m) * (x - m)).sum::<f64>()
    };
    let best = (1..v.len())
        .min_by(|&a, &b| (sse(&v[..a]) + sse(&v[a..])).total_cmp(&(sse(&v[..b]) + sse(&v[b..]))))
        .unwrap();
    assert_eq!(label::two_means(&v), Some(best));
}

#[test]
fn labels_from_a_fact() {
    let runs: Vec<Summary> = [("bad", 1u8), ("good", 2), ("good", 3)]
        .iter()
        .map(|(o, i)| download(*i, 8192, 4096, 1000, facts("wget", &[("outcome", o)])))
        .chain(std::iter::once(download(
            9,
            8192,
            4096,
            1000,
            facts("wget", &[]),
        )))
        .collect();
    let (l, keep) = label::by_fact(&runs, "outcome").unwrap();
    assert_eq!(l.classes, vec!["good", "bad"]);
    assert_eq!(l.labels, vec![1, 0, 0]);
    assert_eq!(keep, vec![true, true, true, false]);
    let err = label::by_fact(&runs[1..3], "outcome").unwrap_err();
    assert!(err.to_string().contains("at least two values"), "{err}");
}

#[test]
fn one_class_only_is_a_clear_error() {
    let runs = tcp_memory_runs();
    let err = diagnose(&runs, given(&[0; 6]), &Options::default()).unwrap_err();
    assert!(err.to_string().contains("same label"), "{err}");
}

/// A request for the runs of these files and folders.
fn files(paths: &[&str]) -> DiagnoseRequest {
    DiagnoseRequest {
        inputs: paths.iter().map(PathBuf::from).collect(),
        ..DiagnoseRequest::default()
    }
}

/// Runs a request, its notes dropped.
fn run(request: &DiagnoseRequest, store: &FakeStore) -> anyhow::Result<diagnose::request::Report> {
    request.run(store, &mut |_| {})
}

/// A store holding fixed runs, checking the filter it is given.
struct FakeStore(Vec<Summary>);

impl SummarySource for FakeStore {
    fn load(&self, db: &Path, filter: &RunFilter) -> anyhow::Result<Vec<Summary>> {
        assert_eq!(db, Path::new("/stores/x.db"));
        assert_eq!(filter.program.as_deref(), Some("wget"));
        assert_eq!(filter.since_unix_ns, Some(1_000_000_000));
        Ok(self.0.clone())
    }
}

fn write_runs(dir: &Path, runs: &[Summary]) {
    for (i, s) in runs.iter().enumerate() {
        let mut buf = [0u8; agent_core::MAX_ENCODED_LEN];
        let mut s = s.clone();
        let bytes = s.encode(&mut buf).unwrap().to_vec();
        std::fs::write(dir.join(format!("run{i}.summary")), bytes).unwrap();
    }
}

#[test]
fn command_reads_files_and_folders_and_writes_json_and_html() {
    let dir = tempfile::tempdir().unwrap();
    let runs = tcp_memory_runs();
    write_runs(dir.path(), &runs);
    // Hidden files (a spool's writes in progress) are skipped.
    std::fs::write(dir.path().join(".tmp-123"), b"junk").unwrap();
    let html = dir.path().join("report.html");
    let report = run(&files(&[dir.path().to_str().unwrap()]), &FakeStore(vec![])).unwrap();
    assert!(serde_json::to_string_pretty(&report.json()).is_ok());
    std::fs::write(&html, report.html()).unwrap();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("<svg"), "plots");
    assert!(page.contains("accuracy 1.000"));

    // Good and bad folders.
    let good = dir.path().join("good");
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&good).unwrap();
    std::fs::create_dir_all(&bad).unwrap();
    write_runs(&good, &runs[..4]);
    write_runs(&bad, &runs[4..]);
    let a = DiagnoseRequest {
        labels: Some(Labels::Given { good, bad }),
        ..DiagnoseRequest::default()
    };
    run(&a, &FakeStore(vec![])).unwrap();
}

#[test]
fn command_reads_the_store_with_the_filter() {
    let a = DiagnoseRequest {
        db: Some(PathBuf::from("/stores/x.db")),
        program: Some("wget".into()),
        since: Some(Time::Unix(1_000_000_000)),
        method: Method::Rules(RulesSettings {
            top: 2,
            ..RulesSettings::default()
        }),
        ..DiagnoseRequest::default()
    };
    run(&a, &FakeStore(tcp_memory_runs())).unwrap();
    let a = DiagnoseRequest {
        method: Method::default(),
        ..a
    };
    let err = run(&a, &FakeStore(vec![])).unwrap_err();
    assert!(format!("{err:#}").contains("no runs found"), "{err:#}");
}

#[test]
fn bad_files_are_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    write_runs(dir.path(), &tcp_memory_runs());
    let bad = dir.path().join("broken.summary");
    std::fs::write(&bad, [1u8, 2, 3]).unwrap();
    let a = files(&[dir.path().to_str().unwrap()]);
    let err = run(&a, &FakeStore(vec![])).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("broken.summary") && msg.contains("not a valid summary"),
        "{msg}"
    );
    let big = dir.path().join("big");
    std::fs::write(&big, vec![0u8; 5000]).unwrap();
    let err = diagnose::input::read_summary(&big).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}: larger than 2048 bytes: not a summary", big.display())
    );
    let map = dir.path().join("map.toml");
    std::fs::write(&map, "[merge]\nx = 3\n").unwrap();
    let a = DiagnoseRequest {
        map: Some(map),
        ..files(&[dir.path().to_str().unwrap()])
    };
    let err = run(&a, &FakeStore(vec![])).unwrap_err();
    assert!(format!("{err:#}").contains("map.toml"), "{err:#}");
}

#[test]
fn bad_files_stop_the_diagnosis_unless_skipped() {
    let dir = tempfile::tempdir().unwrap();
    write_runs(dir.path(), &tcp_memory_runs());
    // A 0-byte file (a spool's write cut short), a corrupt one, one too big.
    std::fs::write(dir.path().join("a-empty.summary"), b"").unwrap();
    let mut buf = [0u8; agent_core::MAX_ENCODED_LEN];
    let mut corrupt = tcp_memory_runs()[0].encode(&mut buf).unwrap().to_vec();
    corrupt.truncate(corrupt.len() / 2);
    std::fs::write(dir.path().join("b-corrupt.summary"), &corrupt).unwrap();
    std::fs::write(dir.path().join("c-big.summary"), vec![7u8; 3000]).unwrap();
    let folder = dir.path().to_str().unwrap();

    let err = run(&files(&[folder]), &FakeStore(vec![])).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("a-empty.summary: empty file (0 bytes): not a summary")
            && msg.contains("2 more bad files")
            && msg.contains("--skip-bad"),
        "{msg}"
    );

    // Each is named with what is wrong; the corrupt one in the decoder's words.
    let (runs, bad) = diagnose::input::read_all(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(runs.len(), tcp_memory_runs().len());
    let decoder_words = Summary::decode(&corrupt).unwrap_err().to_string();
    let reasons: Vec<String> = bad.iter().map(ToString::to_string).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0].ends_with("a-empty.summary: empty file (0 bytes): not a summary"));
    assert!(
        reasons[1].ends_with(&format!(
            "b-corrupt.summary: not a valid summary ({} bytes): {decoder_words}",
            corrupt.len()
        )),
        "{reasons:?}"
    );
    assert!(reasons[2].ends_with("c-big.summary: larger than 2048 bytes: not a summary"));

    let skipping = DiagnoseRequest {
        skip_bad: true,
        ..files(&[folder])
    };
    let mut notes = Vec::new();
    skipping
        .run(&FakeStore(vec![]), &mut |n| notes.push(n))
        .unwrap();
    assert_eq!(notes.len(), 4, "each bad file, then the count: {notes:?}");
    assert!(
        notes[0].starts_with("skipped ")
            && notes[0].ends_with("a-empty.summary: empty file (0 bytes): not a summary"),
        "{notes:?}"
    );
    assert_eq!(
        notes[3],
        format!(
            "skipped 3 file(s) that are not summaries; {} read",
            tcp_memory_runs().len()
        )
    );
}

#[test]
fn reads_are_capped() {
    // A device without end is refused after cap + 1 bytes, at once.
    let zero = Path::new("/dev/zero");
    let err = diagnose::input::read_summary(zero).unwrap_err();
    assert_eq!(err.reason, "larger than 2048 bytes: not a summary");
}
