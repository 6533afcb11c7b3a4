//! Labels by outcome (`--cluster outcome`), categorical facts in rules
//! with only three runs (the research's VirtualBox case), and the runs a
//! diagnosis leaves out (light records, late traces, runs of another
//! source than the majority's, unknown outcomes).

mod common;

use agent_core::{
    Arch, Coverage, Exit, FdKind, IoBytes, Origin, Overflow, RunId, RunRecord, Source, Summary,
};
use common::{download, facts, RunBuilder};
use diagnose::analysis::{diagnose, diagnose_runs, LabelBy, Options};
use diagnose::input::{RunFilter, SummarySource};
use diagnose::label::{self, ClusterBy, Labelling};
use diagnose::report;
use diagnose::request::{DiagnoseRequest, Labels};

fn with_exit(mut s: Summary, exit: Exit) -> Summary {
    s.run.exit = exit;
    s
}

/// A small download made by the Collector; `seed` makes the id and small
/// differences.
fn run(seed: u8) -> Summary {
    download(
        seed,
        64 * 1024 + seed as u64 * 1024,
        8192,
        20_000 + seed as u64 * 10,
        facts("wget", &[]),
    )
}

fn given(labels: &[u32]) -> Labelling {
    Labelling {
        method: "given".into(),
        classes: vec!["good".into(), "bad".into()],
        labels: labels.to_vec(),
        clusters: None,
    }
}

#[test]
fn outcome_labels_exit_zero_good_failures_bad_unknown_left_out() {
    let runs = vec![
        with_exit(run(1), Exit::Code(0)),
        with_exit(run(2), Exit::Code(1)),
        with_exit(run(3), Exit::Signal(9)),
        with_exit(run(4), Exit::Detached),
        with_exit(run(5), Exit::Running),
        with_exit(run(6), Exit::Code(0)),
        with_exit(run(7), Exit::Code(-1)),
    ];
    let (labelling, keep, left_out) = label::by_outcome(&runs).unwrap();
    assert_eq!(labelling.classes, vec!["good", "bad"]);
    assert_eq!(labelling.labels, vec![0, 1, 1, 0, 1]);
    assert_eq!(keep, vec![true, true, true, false, false, true, true]);
    assert_eq!(left_out.unknown_outcome, 2);
    assert!(labelling.method.contains("outcome"), "{}", labelling.method);
    assert!(labelling.clusters.is_none());

    // by_cluster(Outcome) refuses runs it cannot label, and labels the rest.
    let err = label::by_cluster(&runs, ClusterBy::Outcome).unwrap_err();
    assert!(format!("{err:#}").contains("2 run(s) have no known outcome"));
    let known: Vec<Summary> = runs
        .iter()
        .filter(|s| label::outcome_class(s.run.exit).is_some())
        .cloned()
        .collect();
    let l = label::by_cluster(&known, ClusterBy::Outcome).unwrap();
    assert_eq!(l.labels, vec![0, 1, 1, 0, 1]);

    // Through the library entry point: the unknown ones are counted.
    let d = diagnose_runs(
        runs.clone(),
        &LabelBy::Cluster(ClusterBy::Outcome),
        &Options::default(),
    )
    .unwrap();
    assert_eq!(d.dataset.rows(), 5);
    assert_eq!(d.dataset.class_counts(), vec![2, 3]);
    assert_eq!(d.left_out.unknown_outcome, 2);
    let text = report::text(&d);
    assert!(
        text.contains("2 run(s) whose outcome is unknown (detached or still running)"),
        "{text}"
    );
    assert_eq!(report::json(&d)["left_out"]["unknown_outcome"], 2);

    // Only successes (or only failures): a clear error, not a diagnosis.
    let all_good = vec![run(1), run(2)];
    let err = label::by_outcome(&all_good).unwrap_err();
    assert!(
        format!("{err:#}").contains("2 exited 0, 0 exited non-zero"),
        "{err:#}"
    );
}

/// The research's VirtualBox case, labelled by outcome: three runs of a
/// download, two over a NAT adapter that failed after fewer reads, one
/// bridged that completed. Every statistic that differs separates the
/// three runs as well as the adapter does; the rule must name the adapter.
#[test]
fn three_runs_by_outcome_give_the_adapter_rule() {
    let sync = |seed: u8, fact: (&str, &str), reads: u64, exit: Exit| {
        let mut b = RunBuilder::default();
        b.call("openat", FdKind::None, [0; 6], 3, 2_000, 1_000);
        for i in 0..reads {
            b.call(
                "read",
                FdKind::Tcp,
                [4, 0, 65536, 0, 0, 0],
                65536,
                30_000 + seed as u64 * 100 + i,
                500,
            );
            b.call(
                "write",
                FdKind::File,
                [5, 0, 65536, 0, 0, 0],
                65536,
                8_000,
                200,
            );
        }
        with_exit(
            b.finish(seed, 50_000_000 + reads * 100_000, facts("repo", &[fact])),
            exit,
        )
    };
    // NAT first, so the adapter's first level is `nat`.
    let runs = vec![
        sync(1, ("adapter", "nat"), 40, Exit::Code(1)),
        sync(2, ("adapter", "bridged"), 200, Exit::Code(0)),
        sync(3, ("adapter", "nat"), 55, Exit::Code(1)),
    ];
    let d = diagnose_runs(
        runs,
        &LabelBy::Cluster(ClusterBy::Outcome),
        &Options::default(),
    )
    .unwrap();
    assert_eq!(d.dataset.labels, vec![1, 0, 1]);
    // Many attributes split the three runs perfectly...
    assert!(d.rules.len() > 3, "{:?}", d.rules.len());
    assert!(d.rules.iter().all(|r| r.accuracy == 1.0));
    // ...and the first rule names the fact, good first.
    assert_eq!(
        d.rules[0].text,
        "if fact.adapter = bridged then good else bad",
        "{:#?}",
        d.rules.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    let json = report::json(&d);
    assert_eq!(json["rules"][0]["attributes"][0], "fact.adapter");

    // A fact naming each client separates them as perfectly, in three
    // branches: no simpler than a threshold, so it gets no preference and
    // the rules start from a statistic.
    let named = vec![
        sync(1, ("client", "client1"), 40, Exit::Code(1)),
        sync(2, ("client", "client2"), 200, Exit::Code(0)),
        sync(3, ("client", "client3"), 55, Exit::Code(1)),
    ];
    let d = diagnose_runs(
        named,
        &LabelBy::Cluster(ClusterBy::Outcome),
        &Options::default(),
    )
    .unwrap();
    assert!(
        !d.rules[0].text.contains("fact.client"),
        "{:#?}",
        d.rules.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
}

/// A light record: a run noticed without tracing it.
fn light(seed: u8, duration_ns: u64, exit: Exit) -> Summary {
    let mut id = [0u8; 16];
    id[0] = seed;
    id[15] = 0x11;
    let run = RunRecord {
        start_unix_ns: 1_763_700_000_000_000_000,
        duration_ns,
        exit,
        arch: Arch::X86_64,
        processes: 1,
        threads: 1,
        events: 0,
        overflow: Overflow::default(),
        window: 0,
        spool_dropped: 0,
    };
    Summary::light(
        RunId(id),
        run,
        facts("wget", &[]),
        Origin::default(),
        None,
        Some(IoBytes {
            read: 1 << 20,
            written: 1 << 20,
        }),
    )
}

fn late(mut s: Summary) -> Summary {
    s.coverage = Coverage::attached(40_000_000);
    s
}

fn from_start(mut s: Summary) -> Summary {
    s.coverage = Coverage::FROM_START;
    s
}

/// Two good and two bad downloads (the bad ones read 1 KiB a call and
/// wait longer), traced from the start.
fn good_and_bad() -> Vec<Summary> {
    (0..4u8)
        .map(|i| {
            let bad = i >= 2;
            let (chunk, read_ns) = if bad { (1024, 90_000) } else { (8192, 20_000) };
            from_start(download(
                i,
                1024 * 1024 + i as u64 * 4096,
                chunk,
                read_ns,
                facts("wget", &[]),
            ))
        })
        .collect()
}

#[test]
fn light_and_late_runs_are_left_out_and_counted() {
    let mut runs = good_and_bad();
    // A late trace (attached to a running process) of a slow run, a light
    // record far slower than any, and a run of an old summary (coverage
    // unknown), which is kept.
    runs.push(late(download(
        10,
        1024 * 1024,
        1024,
        90_000,
        facts("wget", &[]),
    )));
    runs.push(light(11, 100_000_000_000, Exit::Code(0)));
    runs.push(download(12, 1024 * 1024, 8192, 20_000, facts("wget", &[])));
    assert_eq!(runs[6].coverage.began_late(), None);

    // Labels given for every run: the light and the late ones go with
    // theirs.
    let d = diagnose(&runs, given(&[0, 0, 1, 1, 1, 1, 0]), &Options::default()).unwrap();
    assert_eq!(d.dataset.rows(), 5);
    assert_eq!((d.left_out.light, d.left_out.late), (1, 1));
    assert_eq!(d.dataset.class_counts(), vec![3, 2]);
    let ids: Vec<u8> = d
        .run_ids
        .iter()
        .map(|h| u8::from_str_radix(&h[..2], 16).unwrap())
        .collect();
    assert_eq!(ids, vec![0, 1, 2, 3, 12]);
    let text = report::text(&d);
    assert!(text.contains("Left out: 1 light record(s)"), "{text}");
    assert!(text.contains("1 run(s) whose trace began after"), "{text}");
    let json = report::json(&d);
    assert_eq!(json["left_out"]["light"], 1);
    assert_eq!(json["left_out"]["late"], 1);
    assert!(report::html(&d).contains("Left out: 1 light record(s)"));

    // --include-late keeps the late run; the light record stays out.
    let options = Options {
        include_late: true,
        ..Options::default()
    };
    let d = diagnose(&runs, given(&[0, 0, 1, 1, 1, 1, 0]), &options).unwrap();
    assert_eq!(d.dataset.rows(), 6);
    assert_eq!((d.left_out.light, d.left_out.late), (1, 0));

    // Clustered by duration: the light record (100 s) would be a cluster
    // of its own; left out first, the clusters are the downloads'.
    let d = diagnose_runs(
        runs.clone(),
        &LabelBy::Cluster(ClusterBy::Duration),
        &Options::default(),
    )
    .unwrap();
    assert_eq!((d.left_out.light, d.left_out.late), (1, 1));
    assert_eq!(d.dataset.labels, vec![0, 0, 1, 1, 0]);

    // Nothing left to explain: an error naming why.
    let only_light = vec![
        light(1, 1_000_000, Exit::Code(0)),
        light(2, 9_000_000, Exit::Code(1)),
    ];
    let err = diagnose_runs(
        only_light,
        &LabelBy::Cluster(ClusterBy::Outcome),
        &Options::default(),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("2 light record(s)"), "{err:#}");
}

fn in_process(mut s: Summary) -> Summary {
    s.coverage = Coverage::in_process_from_start();
    s
}

fn all_in_process_of(runs: &[Summary]) -> Vec<Summary> {
    runs.iter().cloned().map(in_process).collect()
}

fn row_ids(d: &diagnose::analysis::Diagnosis) -> Vec<u8> {
    d.run_ids
        .iter()
        .map(|h| u8::from_str_radix(&h[..2], 16).unwrap())
        .collect()
}

/// Runs observed in-process (libc calls only) are not compared with runs
/// the kernel observed: the majority's source is kept, the others are
/// left out and counted with their source named; a tie keeps the kernel's.
#[test]
fn runs_of_another_source_than_the_majoritys_are_left_out_and_counted() {
    // Four kernel-observed runs (two good, two bad) and one in-process run,
    // far slower: compared as if alike it would be a bad run of its own.
    let mut runs = good_and_bad();
    runs.push(in_process(download(
        20,
        1024 * 1024,
        1024,
        400_000,
        facts("wget", &[]),
    )));
    let d = diagnose(&runs, given(&[0, 0, 1, 1, 1]), &Options::default()).unwrap();
    assert_eq!(row_ids(&d), vec![0, 1, 2, 3]);
    assert_eq!(d.left_out.other_source, 1);
    assert_eq!(d.left_out.kept_source, Source::Kernel);
    let text = report::text(&d);
    assert!(
        text.contains("1 run(s) observed in-process (libc calls), not comparable"),
        "{text}"
    );
    assert!(
        text.contains("observed by the kernel (every syscall) (their counts"),
        "{text}"
    );
    let json = report::json(&d);
    assert_eq!(json["left_out"]["other_source"], 1);
    assert_eq!(json["left_out"]["kept_source"], "kernel");
    let d = diagnose_runs(
        runs.clone(),
        &LabelBy::Cluster(ClusterBy::Duration),
        &Options::default(),
    )
    .unwrap();
    assert_eq!(d.left_out.other_source, 1);
    assert_eq!(d.dataset.labels, vec![0, 0, 1, 1]);

    // Most runs in-process: they are diagnosed, the kernel's run is left
    // out (light and late runs do not count towards the majority).
    let mut mostly: Vec<Summary> = good_and_bad().into_iter().map(in_process).collect();
    mostly.push(download(21, 1024 * 1024, 8192, 20_000, facts("wget", &[])));
    mostly.push(light(22, 1_000_000, Exit::Code(0)));
    mostly.push(late(download(
        23,
        1024 * 1024,
        8192,
        20_000,
        facts("wget", &[]),
    )));
    let d = diagnose(&mostly, given(&[0, 0, 1, 1, 0, 0, 0]), &Options::default()).unwrap();
    assert_eq!(row_ids(&d), vec![0, 1, 2, 3]);
    assert_eq!(
        (d.left_out.other_source, d.left_out.light, d.left_out.late),
        (1, 1, 1)
    );
    assert_eq!(d.left_out.kept_source, Source::InProcess);
    assert!(
        report::text(&d)
            .contains("1 run(s) observed by the kernel (every syscall), not comparable"),
        "{}",
        report::text(&d)
    );

    // A tie keeps the kernel's runs; with only one class left, the error
    // says which runs were left out and why.
    let mut tie = good_and_bad();
    tie[2] = in_process(tie[2].clone());
    tie[3] = in_process(tie[3].clone());
    let err = diagnose(&tie, given(&[0, 0, 1, 1]), &Options::default()).unwrap_err();
    let err = format!("{err:#}");
    assert!(err.contains("every run has the same label"), "{err}");
    assert!(
        err.contains("2 run(s) observed in-process (libc calls)"),
        "{err}"
    );

    // A source named keeps that one, even when fewer runs have it.
    let kernel_only = Options {
        source: Some(Source::Kernel),
        ..Options::default()
    };
    let d = diagnose(&mostly, given(&[0, 0, 1, 1, 0, 0, 0]), &kernel_only).unwrap_err();
    assert!(
        format!("{d:#}").contains("4 run(s) observed in-process (libc calls)"),
        "{d:#}"
    );
    let in_process_only = Options {
        source: Some(Source::InProcess),
        ..Options::default()
    };
    let d = diagnose(&runs, given(&[0, 0, 1, 1, 1]), &in_process_only).unwrap_err();
    assert!(
        format!("{d:#}").contains("4 run(s) observed by the kernel (every syscall)"),
        "{d:#}"
    );
    let d = diagnose(
        &all_in_process_of(&tie),
        given(&[0, 0, 1, 1]),
        &in_process_only,
    )
    .unwrap();
    assert_eq!(d.left_out.total(), 0);

    // One source only: nothing left out.
    let all_in_process: Vec<Summary> = good_and_bad().into_iter().map(in_process).collect();
    let d = diagnose(&all_in_process, given(&[0, 0, 1, 1]), &Options::default()).unwrap();
    assert_eq!(d.left_out.total(), 0);
}

struct FakeStore(Vec<Summary>);

impl SummarySource for FakeStore {
    fn load(&self, _db: &std::path::Path, _filter: &RunFilter) -> anyhow::Result<Vec<Summary>> {
        Ok(self.0.clone())
    }
}

/// A request for the store's runs labelled by outcome.
fn by_outcome(include_late: bool) -> DiagnoseRequest {
    DiagnoseRequest {
        db: Some("/x.db".into()),
        labels: Some(Labels::Cluster(ClusterBy::Outcome)),
        include_late,
        ..DiagnoseRequest::default()
    }
}

#[test]
fn command_takes_cluster_outcome_and_include_late() {
    let mut runs = good_and_bad();
    runs[2].run.exit = Exit::Code(4);
    runs[3].run.exit = Exit::Signal(15);
    let a = by_outcome(true);
    a.run(&FakeStore(runs.clone()), &mut |_| {}).unwrap();
    // Every run exited 0: outcome labels have nothing to explain.
    let a = by_outcome(false);
    let err = a.run(&FakeStore(good_and_bad()), &mut |_| {}).unwrap_err();
    assert!(
        format!("{err:#}")
            .contains("labels by outcome need runs that exited 0 and runs that failed"),
        "{err:#}"
    );
}
