//! The proactive loop's service side against a real `edge-service serve
//! --auto`: light records uploaded through the HTTP API (as
//! `edge-agent watch --light` sends them), the detector's per-device
//! directives fetched as a device fetches them, the full runs those
//! devices would trace uploaded with their `directive=<id>` fact, and the
//! stored report read back through `GET /v1/reports` — with no operator
//! command after `serve --auto` starts.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_core::{
    Arch, Collector, CpuTime, DeviceId, Exit, Facts, FdKind, IoBytes, Origin, RunId, RunRecord,
    StreamId, Summary, SyscallEvent, SyscallId,
};
use common::*;
use serde_json::Value;

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn encode(s: &mut Summary) -> Vec<u8> {
    let mut buf = [0u8; agent_core::MAX_ENCODED_LEN];
    s.encode(&mut buf).unwrap().to_vec()
}

fn facts(program: &str, extra: &[(&str, &str)]) -> Facts {
    let mut f = Facts::new();
    f.program = agent_core::facts::truncated(program);
    for (k, v) in extra {
        f.add(k, v).unwrap();
    }
    f
}

fn unique_id(device: u8, seed: u64, kind: u8) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[0] = device;
    id[1] = kind;
    id[8..].copy_from_slice(&seed.to_le_bytes());
    id
}

/// A light record of one run of `program` on `device`, as the agent's
/// light mode sends it.
fn light_run(device: u8, seed: u64, secs: f64, exit: Exit, extra: &[(&str, &str)]) -> Vec<u8> {
    let duration = (secs * 1e9) as u64;
    let mut s = Summary::light(
        RunId(unique_id(device, seed, 1)),
        RunRecord::new(
            now_ns() - duration - seed * 1000,
            duration,
            exit,
            Arch::X86_64,
        ),
        facts("wget", extra),
        Origin {
            device: DeviceId([device; 16]),
            stream: StreamId(unique_id(device, seed, 2)),
            window_ns: 0,
        },
        Some(CpuTime {
            user_ns: 1_000_000,
            system_ns: 2_000_000,
        }),
        Some(IoBytes {
            read: 16 << 20,
            written: 16 << 20,
        }),
    );
    encode(&mut s)
}

/// A fully traced run carrying `directive=<id>`: receives over TCP and
/// writes a file; `slow_receive` makes each receive ten times longer (the
/// small TCP buffer of the research's first case).
fn full_run(
    device: u8,
    seed: u64,
    slow_receive: bool,
    exit: Exit,
    extra: &[(&str, &str)],
) -> Vec<u8> {
    let mut collector: Box<Collector> = Box::new(Collector::new(0));
    let read = SyscallId::from_name("read")
        .unwrap()
        .to_raw(Arch::X86_64)
        .unwrap();
    let write = SyscallId::from_name("write")
        .unwrap()
        .to_raw(Arch::X86_64)
        .unwrap();
    let mut now = 1_000u64;
    for i in 0..400u64 {
        let jitter = (seed * 7 + i * 13) % 1000;
        let (nr, fd_kind, took) = if i % 2 == 0 {
            (
                read,
                FdKind::Tcp,
                if slow_receive { 400_000 } else { 40_000 } + jitter * 10,
            )
        } else {
            (write, FdKind::File, 5_000 + jitter)
        };
        let entry_ns = now + 2_000;
        collector.record(&SyscallEvent {
            tid: 100,
            arch: Arch::X86_64,
            nr,
            args: [3, 0, 65_536, 0, 0, 0],
            ret: 65_536,
            entry_ns,
            exit_ns: entry_ns + took,
            fd_kind,
            peer: None,
        });
        now = entry_ns + took;
    }
    let run = RunRecord::new(now_ns() - now, now, exit, Arch::X86_64);
    let mut s = collector.summarize(RunId(unique_id(device, seed, 3)), run, facts("wget", extra));
    s.origin = Origin {
        device: DeviceId([device; 16]),
        stream: StreamId(unique_id(device, seed, 4)),
        window_ns: 0,
    };
    encode(&mut s)
}

fn device_hex(device: u8) -> String {
    hex(&DeviceId([device; 16]))
}

/// The standing per-device directives `device` fetches.
fn directives_of(url: &str, device: u8) -> Vec<Value> {
    let (status, json) = get(
        url,
        &format!("/v1/directives?device={}", device_hex(device)),
        Some(TOKEN),
    );
    assert_eq!(status, 200, "{json}");
    json["device_directives"].as_array().unwrap().clone()
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn reports(url: &str, token: &str) -> Vec<Value> {
    let (status, json) = get(url, "/v1/reports", Some(token));
    assert_eq!(status, 200, "{json}");
    json["reports"].as_array().unwrap().clone()
}

const AUTO: &[&str] = &[
    "--auto",
    "--auto-every",
    "1s",
    "--auto-stable",
    "2",
    "--auto-devices",
    "2",
    "--auto-runs",
    "2",
    "--auto-min-runs",
    "3",
];

/// Posts the directed devices' full runs and returns the directive of each.
fn directed(url: &str, devices: impl IntoIterator<Item = u8>) -> Vec<(u8, Value)> {
    let mut out = Vec::new();
    for d in devices {
        let list = directives_of(url, d);
        assert!(list.len() <= 1, "device {d}: {list:?}");
        if let Some(one) = list.into_iter().next() {
            out.push((d, one));
        }
    }
    out
}

#[test]
fn the_detector_traces_the_slow_cluster_and_stores_a_report_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), AUTO);
    // Six devices, three light runs each; devices 5 and 6 ten times slower.
    let mut light = Vec::new();
    for d in 1..=6u8 {
        for k in 0..3u32 {
            let secs = if d >= 5 { 2.0 } else { 0.2 } + 0.01 * f64::from(k);
            light.push(light_run(d, u64::from(k), secs, Exit::Code(0), &[]));
        }
    }
    let (status, json) = post_items(&server.url, &light);
    assert_eq!(status, 200, "{json}");
    assert_eq!(accepted(&json).len(), 18);
    let (_, runs) = get(&server.url, "/v1/runs?kind=light", Some(&server.op(TOKEN)));
    let runs = runs["runs"].as_array().unwrap().clone();
    assert_eq!(runs.len(), 18);
    assert!(runs.iter().all(|r| r["kind"] == "light"));
    let (_, full) = get(&server.url, "/v1/runs?kind=full", Some(&server.op(TOKEN)));
    assert_eq!(full["runs"].as_array().unwrap().len(), 0);

    // The detector issues directives by itself: both slow devices and two
    // good ones, the next 2 runs of wget each.
    let chosen = wait_for("the detector's directives", Duration::from_secs(30), || {
        let found = directed(&server.url, 1..=6);
        (found.len() == 4).then_some(found)
    });
    let devices: Vec<u8> = chosen.iter().map(|(d, _)| *d).collect();
    assert!(devices.contains(&5) && devices.contains(&6), "{devices:?}");
    for (_, d) in &chosen {
        assert_eq!(d["program"], "wget");
        assert_eq!(d["runs"], 2);
        assert_eq!(d["match"], Value::Null);
        assert!(d["expires_unix_ns"].as_u64().unwrap() > now_ns());
    }
    let unchosen: Vec<u8> = (1..=6).filter(|d| !devices.contains(d)).collect();
    let id_of = |device: u8| {
        chosen.iter().find(|(d, _)| *d == device).unwrap().1["id"]
            .as_str()
            .unwrap()
            .to_string()
    };

    // A run from another device carrying device 5's directive does not
    // count for it; nor does a light record carrying it.
    let stray = full_run(
        unchosen[0],
        90,
        false,
        Exit::Code(0),
        &[("directive", &id_of(5))],
    );
    let stray_light = light_run(5, 91, 2.0, Exit::Code(0), &[("directive", &id_of(5))]);
    assert_eq!(post_items(&server.url, &[stray, stray_light]).0, 200);
    // The devices trace their next runs for the directives.
    for (seed, (device, d)) in chosen.iter().enumerate() {
        let id = d["id"].as_str().unwrap();
        let slow = *device >= 5;
        let first = full_run(
            *device,
            seed as u64 * 2,
            slow,
            Exit::Code(0),
            &[("directive", id)],
        );
        assert_eq!(post_items(&server.url, &[first]).0, 200);
        // One of two received: still standing.
        assert_eq!(directives_of(&server.url, *device).len(), 1);
        let second = full_run(
            *device,
            seed as u64 * 2 + 1,
            slow,
            Exit::Code(0),
            &[("directive", id)],
        );
        assert_eq!(post_items(&server.url, &[second]).0, 200);
        assert!(
            directives_of(&server.url, *device).is_empty(),
            "device {device}: fulfilled directives are no longer listed"
        );
    }

    let listed = wait_for("the report", Duration::from_secs(30), || {
        let r = reports(&server.url, &server.op(TOKEN));
        (!r.is_empty()).then_some(r)
    });
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed[0].get("html").is_none(),
        "the list carries no bodies"
    );
    let id = listed[0]["id"].as_str().unwrap();
    let (status, report) = get(
        &server.url,
        &format!("/v1/reports/{id}"),
        Some(&server.op(TOKEN)),
    );
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["status"], "diagnosed", "{}", report["text"]);
    assert_eq!(report["trigger"], "slow");
    assert_eq!(report["program"], "wget");
    let rules = report["json"]["rules"].as_array().unwrap();
    assert_eq!(rules[0]["accuracy"], 1.0, "{}", report["text"]);
    // Exactly the 8 directed runs are diagnosed (not the stray run nor the
    // light records), the slow devices' runs labelled bad.
    assert_eq!(report["json"]["runs"], 8, "{}", report["text"]);
    let labels = report["json"]["labels"]["runs"].as_object().unwrap();
    assert_eq!(labels.len(), 8);
    for (run, class) in labels {
        let device = u8::from_str_radix(&run[..2], 16).unwrap();
        assert!(devices.contains(&device), "{run}");
        let expected = if device >= 5 { "bad" } else { "good" };
        assert_eq!(class, expected, "{run}");
    }
    let mut used: Vec<String> = report["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            assert_eq!(d["runs"], 2, "{d}");
            d["device"].as_str().unwrap().to_string()
        })
        .collect();
    used.sort();
    let mut expected: Vec<String> = devices.iter().map(|d| device_hex(*d)).collect();
    expected.sort();
    assert_eq!(used, expected);
    // Where the time went: the receive path first.
    let gap = &report["json"]["time_gap"][0];
    assert!(
        gap["syscall"].as_str().unwrap().starts_with("read"),
        "{}",
        report["text"]
    );
    let first_rule = rules[0]["text"].as_str().unwrap();
    assert!(report["text"].as_str().unwrap().contains(first_rule));
    assert!(report["headline"].as_str().unwrap().starts_with(first_rule));
    assert!(report["html"]
        .as_str()
        .unwrap()
        .starts_with("<!DOCTYPE html>"));
    assert!(report["created_unix_ns"].as_u64() >= report["detected_unix_ns"].as_u64());

    // The slow cluster is still in the light runs, but the report is
    // fresh: no new investigation, no new directives.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(reports(&server.url, &server.op(TOKEN)).len(), 1);
    assert!(directed(&server.url, 1..=6).is_empty());

    // Reports are group scoped.
    assert!(reports(&server.url, &server.op(OTHER_TOKEN)).is_empty());
    let (status, _) = get(
        &server.url,
        &format!("/v1/reports/{id}"),
        Some(&server.op(OTHER_TOKEN)),
    );
    assert_eq!(status, 404);
    let (status, _) = get(&server.url, "/v1/reports/abc", Some(&server.op(TOKEN)));
    assert_eq!(status, 400);
}

#[test]
fn failing_runs_are_investigated_by_outcome_and_the_rule_names_the_fact() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), AUTO);
    // Devices 3 and 4 (NAT adapter) fail most of their downloads.
    let adapter = |d: u8| if d >= 3 { "nat" } else { "bridged" };
    let mut light = Vec::new();
    for d in 1..=4u8 {
        for k in 0..3u64 {
            let exit = if d >= 3 { Exit::Code(4) } else { Exit::Code(0) };
            light.push(light_run(d, k, 0.5, exit, &[("adapter", adapter(d))]));
        }
    }
    assert_eq!(post_items(&server.url, &light).0, 200);
    let chosen = wait_for("the detector's directives", Duration::from_secs(30), || {
        let found = directed(&server.url, 1..=4);
        (found.len() == 4).then_some(found)
    });
    for (seed, (device, d)) in chosen.iter().enumerate() {
        let id = d["id"].as_str().unwrap();
        let exit = if *device >= 3 {
            Exit::Code(4)
        } else {
            Exit::Code(0)
        };
        let items: Vec<Vec<u8>> = (0..2)
            .map(|k| {
                full_run(
                    *device,
                    seed as u64 * 2 + k,
                    false,
                    exit,
                    &[("directive", id), ("adapter", adapter(*device))],
                )
            })
            .collect();
        assert_eq!(post_items(&server.url, &items).0, 200);
    }
    let listed = wait_for("the report", Duration::from_secs(30), || {
        let r = reports(&server.url, &server.op(TOKEN));
        (!r.is_empty()).then_some(r)
    });
    let id = listed[0]["id"].as_str().unwrap();
    let (_, report) = get(
        &server.url,
        &format!("/v1/reports/{id}"),
        Some(&server.op(TOKEN)),
    );
    assert_eq!(report["trigger"], "failing", "{report}");
    assert_eq!(report["status"], "diagnosed", "{}", report["text"]);
    let text = report["text"].as_str().unwrap();
    assert!(text.contains("by outcome"), "{text}");
    let first = &report["json"]["rules"][0];
    assert_eq!(first["accuracy"], 1.0, "{text}");
    assert!(
        first["text"]
            .as_str()
            .unwrap()
            .starts_with("if fact.adapter = bridged then good"),
        "the rule names the categorical fact, as the research's VirtualBox case: {text}"
    );
}

/// The detector's ticks one by one on a store, with a clock of the test's
/// own: a cluster is investigated only on its second tick in a row, the
/// report waits for every directive, and a fresh report holds back the
/// next investigation until it is stale.
#[test]
fn ticks_wait_for_stability_and_fulfilment_and_respect_freshness() {
    use service::proactive::detector::Thresholds;
    use service::proactive::task::Detector;
    use service::store::{NewRun, SqliteStore, Store};

    let dir = tempfile::tempdir().unwrap();
    let mut store: Box<dyn Store> =
        Box::new(SqliteStore::open(&dir.path().join("t.db"), Duration::from_secs(5)).unwrap());
    let stored = |store: &mut Box<dyn Store>, items: &[Vec<u8>]| {
        let runs: Vec<NewRun> = items
            .iter()
            .map(|raw| {
                NewRun::from_summary(&Summary::decode(raw).unwrap(), raw.clone(), "phones", 1)
            })
            .collect();
        store.insert_runs(&runs).unwrap();
    };
    let mut light = Vec::new();
    for d in 1..=6u8 {
        for k in 0..3u32 {
            let secs = if d >= 5 { 2.0 } else { 0.2 } + 0.01 * f64::from(k);
            light.push(light_run(d, u64::from(k), secs, Exit::Code(0), &[]));
        }
    }
    stored(&mut store, &light);
    let thresholds = Thresholds {
        fresh: Duration::from_secs(60),
        ..Thresholds::default()
    };
    let mut detector = Detector::new(thresholds);
    let mut now = now_ns();
    let sec = 1_000_000_000u64;
    assert!(detector.tick(store.as_mut(), now).unwrap().is_empty());
    assert!(
        store.device_directives(None, None).unwrap().is_empty(),
        "one tick is not stable"
    );
    now += sec;
    assert!(detector.tick(store.as_mut(), now).unwrap().is_empty());
    let directives = store.device_directives(None, None).unwrap();
    assert_eq!(directives.len(), 4, "{directives:?}");
    assert_eq!(detector.open(), 1);
    // Half the runs come back: no report yet.
    for (seed, d) in directives.iter().enumerate() {
        let id = d.id.to_string();
        let slow = d.device.0[0] >= 5;
        stored(
            &mut store,
            &[full_run(
                d.device.0[0],
                seed as u64 * 2,
                slow,
                Exit::Code(0),
                &[("directive", &id)],
            )],
        );
    }
    now += sec;
    assert!(detector.tick(store.as_mut(), now).unwrap().is_empty());
    for (seed, d) in directives.iter().enumerate() {
        let id = d.id.to_string();
        let slow = d.device.0[0] >= 5;
        stored(
            &mut store,
            &[full_run(
                d.device.0[0],
                seed as u64 * 2 + 1,
                slow,
                Exit::Code(0),
                &[("directive", &id)],
            )],
        );
    }
    now += sec;
    let reports = detector.tick(store.as_mut(), now).unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(detector.open(), 0);
    // Fresh for 60 s: the cluster is still there, nothing new.
    for _ in 0..5 {
        now += sec;
        assert!(detector.tick(store.as_mut(), now).unwrap().is_empty());
    }
    assert_eq!(store.device_directives(None, None).unwrap().len(), 4);
    // Stale: found again, and after two ticks investigated again.
    now += 61 * sec;
    detector.tick(store.as_mut(), now).unwrap();
    assert_eq!(store.device_directives(None, None).unwrap().len(), 4);
    now += sec;
    detector.tick(store.as_mut(), now).unwrap();
    assert_eq!(store.device_directives(None, None).unwrap().len(), 8);
}
