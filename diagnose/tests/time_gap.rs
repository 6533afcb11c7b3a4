//! "Where the time went": the syscall entries ranked by the extra time the
//! bad runs spend in them, on a constructed case with known values and on
//! the demo's real TCP-buffer runs.

mod common;

use std::path::PathBuf;

use agent_core::{FdKind, Summary};
use common::{facts, RunBuilder};
use diagnose::analysis::{diagnose, Options};
use diagnose::input;
use diagnose::label::{self, ClusterBy, Labelling};
use diagnose::report;

fn given(labels: &[u32]) -> Labelling {
    Labelling {
        method: "given".into(),
        classes: vec!["good".into(), "bad".into()],
        labels: labels.to_vec(),
        clusters: None,
    }
}

/// The tracer's cost per call in the constructed runs: each run's fastest
/// call, a `getpid`, takes this long.
const FLOOR_NS: u64 = 10_000;
const FLOOR_S: f64 = FLOOR_NS as f64 / 1e9;

/// One run: a `getpid` of [`FLOOR_NS`], 10 rounds of pselect6 (`select_ns`
/// each), a socket read (`read_ns`) and a file write (`write_ns`), then
/// `sleep_ns` of nanosleep when not 0; lasting `duration_ns`.
fn run(
    seed: u8,
    select_ns: u64,
    read_ns: u64,
    write_ns: u64,
    sleep_ns: u64,
    duration_ns: u64,
) -> Summary {
    let mut b = RunBuilder::default();
    b.call("getpid", FdKind::None, [0; 6], 1, FLOOR_NS, 100);
    for _ in 0..10 {
        b.call(
            "pselect6",
            FdKind::None,
            [5, 0, 0, 0, 0, 0],
            1,
            select_ns,
            100,
        );
        b.call(
            "read",
            FdKind::Tcp,
            [4, 0, 8192, 0, 0, 0],
            4096,
            read_ns,
            100,
        );
        b.call(
            "write",
            FdKind::File,
            [5, 0, 4096, 0, 0, 0],
            4096,
            write_ns,
            100,
        );
    }
    if sleep_ns > 0 {
        b.call("nanosleep", FdKind::None, [0; 6], 0, sleep_ns, 100);
    }
    b.finish(seed, duration_ns, facts("wget", &[]))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn time_gap_ranks_entries_by_extra_time_with_means_and_shares() {
    // Good runs: 0.1 s and 0.3 s long (mean 0.2 s); select 1 ms a call,
    // read 0.1 ms, write 0.05 ms. Bad runs: 1.2 s and 1.0 s (mean 1.1 s);
    // select 10 ms, read 0.2 ms, write 0.06 ms, and one of them sleeps 0.1 s.
    // Every call counts its time beyond the run's floor (its getpid's
    // 10 us, which is then left with nothing and not ranked).
    let runs = vec![
        run(1, 1_000_000, 100_000, 50_000, 0, 100_000_000),
        run(2, 1_000_000, 100_000, 50_000, 0, 300_000_000),
        run(3, 10_000_000, 200_000, 60_000, 100_000_000, 1_200_000_000),
        run(4, 10_000_000, 200_000, 60_000, 0, 1_000_000_000),
    ];
    let d = diagnose(&runs, given(&[0, 0, 1, 1]), &Options::default()).unwrap();
    let tg = d.time_gap.as_ref().expect("two classes");
    assert!(close(tg.good_duration_s, 0.2) && close(tg.bad_duration_s, 1.1));
    let names: Vec<&str> = tg.entries.iter().map(|e| e.syscall.as_str()).collect();
    // pselect6 is ranked as `select` (the mapping); nanosleep, made by one
    // bad run only, is ranked too; ties (the plain name and its one fd
    // kind) go by name.
    assert_eq!(
        names,
        vec![
            "select",
            "nanosleep",
            "read",
            "read@tcp",
            "write",
            "write@file"
        ]
    );
    let gap_s = 1.1 - 0.2;
    let ten = 10.0 * FLOOR_S;
    let expect = [
        ("select", 0.01 - ten, 0.1 - ten),
        ("nanosleep", 0.0, (0.1 - FLOOR_S) / 2.0),
        ("read", 0.001 - ten, 0.002 - ten),
        ("read@tcp", 0.001 - ten, 0.002 - ten),
        ("write", 0.0005 - ten, 0.0006 - ten),
        ("write@file", 0.0005 - ten, 0.0006 - ten),
    ];
    for (e, (name, good, bad)) in tg.entries.iter().zip(expect) {
        assert_eq!(e.syscall, name);
        assert!(close(e.good_mean_s, good), "{e:?}");
        assert!(close(e.bad_mean_s, bad), "{e:?}");
        assert!(close(e.share.unwrap(), (bad - good) / gap_s), "{e:?}");
    }

    // JSON: the same list, largest difference first.
    let json = report::json(&d);
    let list = json["time_gap"].as_array().unwrap();
    assert_eq!(list.len(), 6);
    assert_eq!(list[0]["syscall"], "select");
    assert!(close(list[0]["good_mean_s"].as_f64().unwrap(), 0.01 - ten));
    assert!(close(list[0]["bad_mean_s"].as_f64().unwrap(), 0.1 - ten));
    assert!(close(list[0]["share"].as_f64().unwrap(), 0.09 / gap_s));
    assert_eq!(list[1]["syscall"], "nanosleep");
    assert!(close(json["mean_duration"]["bad_s"].as_f64().unwrap(), 1.1));

    // Text and HTML show it.
    let text = report::text(&d);
    let at = text.find("Where the time went").expect("section");
    let first_row = text[at..].lines().nth(2).unwrap();
    assert!(first_row.trim_start().starts_with("select"), "{text}");
    assert!(first_row.contains("0.0999"), "{first_row}");
    let page = report::html(&d);
    assert!(page.contains("<h2>Where the time went</h2>"));
    assert!(page.contains("<td>nanosleep</td>"));
}

#[test]
fn time_gap_has_no_share_when_mean_durations_are_equal() {
    let runs = vec![
        run(1, 1_000_000, 100_000, 50_000, 0, 500_000_000),
        run(2, 3_000_000, 100_000, 50_000, 0, 500_000_000),
    ];
    let d = diagnose(&runs, given(&[0, 1]), &Options::default()).unwrap();
    let tg = d.time_gap.as_ref().unwrap();
    assert_eq!(tg.entries[0].syscall, "select");
    assert!(close(tg.entries[0].difference_s(), 0.02));
    assert!(tg.entries.iter().all(|e| e.share.is_none()));
    assert!(report::json(&d)["time_gap"][0]["share"].is_null());
}

/// A traced call's time holds the tracer's stops, the same tens of
/// microseconds in every call: bad runs that make many more quick calls
/// (the demo's small writes) must not outrank the calls they wait in.
#[test]
fn the_tracers_cost_per_call_is_not_where_the_time_went() {
    // A debug-build tracer's 40 us in every call. Good runs: 100 rounds of
    // a select waiting 900 us, a read and three writes; bad runs: 800
    // rounds of a select waiting 150 us, a read and three writes. Beyond
    // the stops the bad runs spend 30 ms more in select, 10.5 ms more in
    // the writes (5 us each). Counted whole, the writes' 2 100 extra stops
    // (84 ms) would put them first (94.5 ms against select's 58 ms).
    let floor_ns = 40_000;
    let runs: Vec<Summary> = [
        (1u8, 100u64, 900_000u64, 0u32),
        (2, 100, 900_000, 0),
        (3, 800, 150_000, 1),
        (4, 800, 150_000, 1),
    ]
    .iter()
    .map(|&(seed, rounds, wait_ns, _)| {
        let mut b = RunBuilder::default();
        b.call("getpid", FdKind::None, [0; 6], 1, floor_ns, 100);
        for _ in 0..rounds {
            b.call(
                "pselect6",
                FdKind::None,
                [5, 0, 0, 0, 0, 0],
                1,
                floor_ns + wait_ns,
                100,
            );
            b.call(
                "read",
                FdKind::Tcp,
                [4, 0, 8192, 0, 0, 0],
                512,
                floor_ns + 10_000,
                100,
            );
            for _ in 0..3 {
                b.call(
                    "write",
                    FdKind::File,
                    [5, 0, 170, 0, 0, 0],
                    170,
                    floor_ns + 5_000,
                    100,
                );
            }
        }
        let round_ns = wait_ns + 10_000 + 3 * 5_000 + 5 * floor_ns;
        b.finish(seed, rounds * round_ns, facts("wget", &[]))
    })
    .collect();
    let d = diagnose(&runs, given(&[0, 0, 1, 1]), &Options::default()).unwrap();
    let tg = d.time_gap.as_ref().unwrap();
    let entry = |name: &str| tg.entries.iter().find(|e| e.syscall == name).unwrap();
    assert_eq!(tg.entries[0].syscall, "select", "{:#?}", tg.entries);
    assert!(close(entry("select").good_mean_s, 100.0 * 900e-6));
    assert!(close(entry("select").bad_mean_s, 800.0 * 150e-6));
    // The writes keep what they do beyond the stops: 5 us a call.
    assert!(close(entry("write").good_mean_s, 300.0 * 5e-6));
    assert!(close(entry("write").bad_mean_s, 2400.0 * 5e-6));
    assert!(
        tg.entries.iter().all(|e| e.syscall != "getpid"),
        "nothing beyond the floor"
    );
}

/// The demo's stored runs (diagnose/tests/data/rpca/wget-tcp-rmem: c5 and
/// c6 had the too-small tcp_rmem): the bad runs' extra time is in the
/// receive path, not in the writes to the output file.
#[test]
fn demo_tcp_buffer_case_time_goes_to_the_receive_path() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/rpca/wget-tcp-rmem");
    let mut runs = Vec::new();
    let mut labels = Vec::new();
    for client in ["c1", "c2", "c3", "c4", "c5", "c6"] {
        let (found, bad) = input::read_all(&[root.join(client)]).unwrap();
        assert!(bad.is_empty() && !found.is_empty(), "{client}");
        labels.extend(std::iter::repeat_n(
            u32::from(client == "c5" || client == "c6"),
            found.len(),
        ));
        runs.extend(found);
    }
    // Labelled by client configuration, and as the demo labels them (by
    // clustering durations): the same top.
    let clustered = label::by_cluster(&runs, ClusterBy::Duration).unwrap();
    let d = diagnose(&runs, clustered, &Options::default()).unwrap();
    let top = &d.time_gap.as_ref().unwrap().entries[0];
    assert!(
        top.syscall.starts_with("read"),
        "clustered by duration: {top:?}"
    );
    let d = diagnose(&runs, given(&labels), &Options::default()).unwrap();
    let tg = d.time_gap.as_ref().unwrap();
    let top = &tg.entries[0];
    let plain = top.syscall.split('@').next().unwrap();
    assert!(
        ["read", "recvfrom", "recvmsg", "select", "poll"].contains(&plain),
        "top of the ranking: {:#?}",
        &tg.entries[..5]
    );
    // The receive path (reads and the waits before them) holds at least
    // twice the extra time the writes do. (The calls hold about half of the
    // bad runs' extra duration, the rest being between calls; and the time
    // of a call includes the tracer's stops, so the writes, 8 times as many
    // in a bad run, take more time too.)
    let share = |name: &str| {
        tg.entries
            .iter()
            .find(|e| e.syscall == name)
            .and_then(|e| e.share)
            .unwrap_or(0.0)
    };
    assert!(top.share.unwrap() > 0.0, "{top:?}");
    assert!(
        share("read") + share("select") > 2.0 * share("write"),
        "{}",
        report::text(&d)
    );
    // Writes (to the output file) are not where the time went.
    let rank_of_write = tg
        .entries
        .iter()
        .position(|e| e.syscall.starts_with("write"))
        .unwrap_or(usize::MAX);
    assert!(rank_of_write > 1, "{:#?}", &tg.entries[..5]);
}
