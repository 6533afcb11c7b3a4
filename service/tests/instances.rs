//! Stateless instances: several `edge-service serve` on one PostgreSQL
//! database. The same summaries sent to two instances at once are stored
//! once and acknowledged by both; `kill -9` of one instance under load
//! loses nothing any instance acknowledged.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use agent_core::{DeviceId, StreamId};
use common::*;
use fixtures::sample;

/// `items` with fresh ids: tag, request number, index.
fn fresh(pool: &[agent_core::Summary], tag: u8, request: u32) -> Vec<Vec<u8>> {
    pool.iter()
        .enumerate()
        .map(|(i, s)| {
            let mut s = s.clone();
            s.id.0[0] = tag;
            s.id.0[1..5].copy_from_slice(&request.to_be_bytes());
            s.id.0[5] = i as u8;
            let mut buf = [0u8; agent_core::MAX_ENCODED_LEN];
            s.encode(&mut buf).unwrap().to_vec()
        })
        .collect()
}

#[test]
fn the_same_summaries_sent_to_two_instances_at_once_are_stored_once() {
    let Some(url) = pg::database("two_instances_same_ids") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = PathBuf::from(&url);
    let a = start_on(dir.path(), &db, &[]);
    let b = start_on(dir.path(), &db, &[]);
    let pool: Vec<agent_core::Summary> = (0..25)
        .map(|s| sample::summary(300 + s, 300, None))
        .collect();
    const ROUNDS: u32 = 15;
    let barrier = Arc::new(Barrier::new(2));
    let senders: Vec<_> = [a.url.clone(), b.url.clone()]
        .into_iter()
        .enumerate()
        .map(|(side, url)| {
            let (pool, barrier) = (pool.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut acknowledged = Vec::new();
                for round in 0..ROUNDS {
                    let mut items = fresh(&pool, 0xee, round);
                    // Opposite orders: the instances' transactions meet
                    // each other's ids in every order.
                    if side == 1 {
                        items.reverse();
                    }
                    barrier.wait();
                    let (status, json) = post_items(&url, &items);
                    assert_eq!(status, 200, "{json}");
                    assert_eq!(json["rejected"], serde_json::json!([]), "{json}");
                    let mut ids = accepted(&json);
                    let mut sent: Vec<String> = items.iter().map(|i| id_of(i)).collect();
                    ids.sort();
                    sent.sort();
                    assert_eq!(ids, sent, "every item acknowledged");
                    acknowledged.extend(ids);
                }
                acknowledged
            })
        })
        .collect();
    for s in senders {
        assert_eq!(s.join().unwrap().len(), pool.len() * ROUNDS as usize);
    }
    let expected = pool.len() * ROUNDS as usize;
    assert_eq!(
        pg::psql(&url, "SELECT count(*), count(DISTINCT id) FROM runs"),
        format!("{expected}|{expected}")
    );
    let syscalls: usize = pool.iter().map(|s| s.syscalls.len()).sum::<usize>() * ROUNDS as usize;
    assert_eq!(
        pg::psql(&url, "SELECT count(*) FROM syscalls"),
        syscalls.to_string()
    );
    // Both instances counted: stored once in all, the rest repeats.
    let metric = |server: &Server, name: &str| -> u64 {
        let (_, text) = get(&server.url, "/metrics", None);
        let text = text.as_str().unwrap().to_string();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
    };
    let stored = metric(&a, "edge_service_summaries_accepted_total")
        + metric(&b, "edge_service_summaries_accepted_total");
    let repeated = metric(&a, "edge_service_summaries_repeated_total")
        + metric(&b, "edge_service_summaries_repeated_total");
    assert_eq!((stored, repeated), (expected as u64, expected as u64));
    // Either instance serves every run.
    let (status, runs) = get(&b.url, "/v1/runs?limit=100000", Some(&b.op(TOKEN)));
    assert_eq!(status, 200);
    assert_eq!(runs["runs"].as_array().unwrap().len(), expected);
}

#[test]
fn kill_9_of_one_instance_loses_nothing_acknowledged() {
    let Some(url) = pg::database("two_instances_kill_9") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = PathBuf::from(&url);
    let mut doomed = start_on(dir.path(), &db, &[]);
    let survivor = start_on(dir.path(), &db, &[]);
    let pool: Vec<agent_core::Summary> = (0..20)
        .map(|s| sample::summary(400 + s, 300, None))
        .collect();
    let acknowledged = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    // Two clients per instance, each sending fresh ids until told to stop
    // (or until its instance dies under it).
    let clients: Vec<_> = (0..4u8)
        .map(|client| {
            let url = if client < 2 {
                doomed.url.clone()
            } else {
                survivor.url.clone()
            };
            let (pool, acknowledged, stop) = (pool.clone(), acknowledged.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut request = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    request += 1;
                    let items = fresh(&pool, client, request);
                    let body = common::body(items.iter().map(Vec::as_slice));
                    let resp = agent()
                        .post(format!("{url}/v1/summaries"))
                        .header("Authorization", format!("Bearer {TOKEN}"))
                        .header("Content-Type", CONTENT_TYPE)
                        .send(&body[..]);
                    let Ok(mut resp) = resp else { break };
                    let Ok(text) = resp.body_mut().read_to_string() else {
                        break;
                    };
                    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
                    let mut acked = acknowledged.lock().unwrap();
                    for id in accepted(&json) {
                        acked.insert(id, usize::from(client));
                    }
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while acknowledged.lock().unwrap().len() < 2000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    doomed.child.kill().unwrap(); // SIGKILL
    doomed.child.wait().unwrap();
    // The other instance goes on taking uploads.
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    let by_doomed = acknowledged.values().filter(|&&c| c < 2).count();
    assert!(by_doomed >= 100, "load too small: {by_doomed}");
    assert!(
        acknowledged.len() > by_doomed,
        "the survivor acknowledged nothing"
    );

    let stored: HashSet<String> = pg::psql(&url, "SELECT id FROM runs")
        .lines()
        .map(str::to_string)
        .collect();
    let missing: Vec<&String> = acknowledged
        .keys()
        .filter(|id| !stored.contains(*id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged summaries lost, e.g. {:?}",
        missing.len(),
        missing.first()
    );
    // Each stored run has its syscall rows (they commit together).
    assert_eq!(
        pg::psql(
            &url,
            "SELECT count(*) FROM runs r WHERE NOT EXISTS (SELECT 1 FROM syscalls s WHERE s.run = r.seq)"
        ),
        "0"
    );
    // The survivor serves the dead instance's runs.
    let some = acknowledged.iter().find(|(_, &c)| c < 2).unwrap().0;
    let (status, _) = get(
        &survivor.url,
        &format!("/v1/runs/{some}"),
        Some(&survivor.op(TOKEN)),
    );
    assert_eq!(status, 200);
}

/// The commands and the read API on PostgreSQL, through the binary:
/// `directive set --db URL` is served by an instance, a device's runs and
/// its entry are listed, and `diagnose --db URL` reads the runs.
#[test]
fn commands_and_reads_work_on_postgres() {
    let Some(url) = pg::database("commands_and_reads") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = start_on(dir.path(), &PathBuf::from(&url), &[]);
    let out = std::process::Command::new(bin())
        .args([
            "directive",
            "set",
            "--group",
            "phones",
            "--only",
            "read,write",
            "--db",
            &url,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, directive) = get(&server.url, "/v1/directives", Some(TOKEN));
    assert_eq!(status, 200);
    assert_eq!(directive["only"], serde_json::json!(["read", "write"]));

    // Windows of one device's stream.
    let items: Vec<Vec<u8>> = (0..6u32)
        .map(|w| {
            let mut s = sample::summary(900 + u64::from(w), 300, None);
            s.run.window = w + 1;
            s.origin = agent_core::Origin {
                device: DeviceId([0x42; 16]),
                stream: StreamId([0x24; 16]),
                window_ns: 1_000_000_000,
            };
            let mut buf = [0u8; agent_core::MAX_ENCODED_LEN];
            s.encode(&mut buf).unwrap().to_vec()
        })
        .collect();
    let (status, json) = post_items(&server.url, &items);
    assert_eq!(status, 200);
    assert_eq!(accepted(&json).len(), 6);
    let device = hex(&DeviceId([0x42; 16]));
    let (status, runs) = get(
        &server.url,
        &format!("/v1/runs?device={device}"),
        Some(&server.op(TOKEN)),
    );
    assert_eq!(status, 200);
    let windows: Vec<u64> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["window"].as_u64().unwrap())
        .collect();
    let mut sorted = windows.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, vec![1, 2, 3, 4, 5, 6]);
    let (status, devices) = get(&server.url, "/v1/devices", Some(&server.op(TOKEN)));
    assert_eq!(status, 200);
    assert_eq!(devices["devices"][0]["device"], device.as_str());
    assert_eq!(devices["devices"][0]["windows"], 6);

    let out = std::process::Command::new(bin())
        .args([
            "diagnose",
            "--db",
            &url,
            "--group",
            "phones",
            "--merge-windows",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // It read the six windows from PostgreSQL (too few runs to cluster, so
    // no rules; that is diagnose's own verdict, not a store error).
    assert!(!stderr.contains("cannot read runs"), "{stdout}{stderr}");
    assert!(
        stderr.contains("merged 6 window summaries"),
        "{stdout}{stderr}"
    );
}
