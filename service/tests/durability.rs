//! Nothing acknowledged is ever lost: across a clean restart, and across a
//! `kill -9` in the middle of a load run.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use fixtures::sample;

#[test]
fn a_restart_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<Vec<u8>> = (100..110).map(|s| sample::encoded(s, 300, None)).collect();
    let before = {
        let server = start(dir.path(), &[]);
        let (status, json) = post_items(&server.url, &items);
        assert_eq!(status, 200);
        assert_eq!(accepted(&json).len(), 10);
        let (_, runs) = get(&server.url, "/v1/runs", Some(&server.op(TOKEN)));
        // A clean stop (SIGTERM) finishes in flight and exits 0.
        let pid = nix::unistd::Pid::from_raw(server.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let mut server = server;
        let status = server.child.wait().unwrap();
        assert!(status.success(), "{status}");
        runs
    };
    let server = start(dir.path(), &[]);
    let (_, after) = get(&server.url, "/v1/runs", Some(&server.op(TOKEN)));
    assert_eq!(after, before);
    assert_eq!(after["runs"].as_array().unwrap().len(), 10);
    for item in &items {
        let id = id_of(item);
        let (status, run) = get(
            &server.url,
            &format!("/v1/runs/{id}"),
            Some(&server.op(TOKEN)),
        );
        assert_eq!(status, 200);
        let mut expected = summary_view::to_json(&agent_core::Summary::decode(item).unwrap());
        expected["group"] = "phones".into();
        let expected: serde_json::Value = serde_json::from_str(&expected.to_string()).unwrap();
        assert_eq!(run, expected);
    }
    // Repeats after the restart are still recognised.
    let (status, json) = post_items(&server.url, &items);
    assert_eq!(status, 200);
    assert_eq!(accepted(&json).len(), 10);
    assert_eq!(stored_ids(&server.db).len(), 10);
}

#[test]
fn kill_9_under_load_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path(), &[]);
    // A pool of prebuilt summaries; each request gives them fresh ids.
    let pool: Vec<agent_core::Summary> = (0..20)
        .map(|s| sample::summary(200 + s, 300, None))
        .collect();
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let sent = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4u8)
        .map(|client| {
            let (url, pool, acknowledged, sent, stop) = (
                server.url.clone(),
                pool.clone(),
                acknowledged.clone(),
                sent.clone(),
                stop.clone(),
            );
            std::thread::spawn(move || {
                let mut request = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    request += 1;
                    let items: Vec<Vec<u8>> = pool
                        .iter()
                        .enumerate()
                        .map(|(i, s)| {
                            let mut s = s.clone();
                            s.id.0[0] = client;
                            s.id.0[1..5].copy_from_slice(&request.to_be_bytes());
                            s.id.0[5] = i as u8;
                            let mut buf = [0u8; 2048];
                            s.encode(&mut buf).unwrap().to_vec()
                        })
                        .collect();
                    let body = common::body(items.iter().map(Vec::as_slice));
                    sent.fetch_add(items.len() as u64, Ordering::Relaxed);
                    let resp = agent()
                        .post(format!("{url}/v1/summaries"))
                        .header("Authorization", format!("Bearer {TOKEN}"))
                        .header("Content-Type", CONTENT_TYPE)
                        .send(&body[..]);
                    // The server died mid-request: no answer, nothing acknowledged.
                    let Ok(mut resp) = resp else { break };
                    let Ok(text) = resp.body_mut().read_to_string() else {
                        break;
                    };
                    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
                    acknowledged.lock().unwrap().extend(accepted(&json));
                }
            })
        })
        .collect();
    // Let the load run until a good number of commits happened (or, on a
    // very slow machine, 20 s), then kill.
    let deadline = Instant::now() + Duration::from_secs(20);
    while acknowledged.lock().unwrap().len() < 2000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() >= 100,
        "load too small: {}",
        acknowledged.len()
    );
    // Some requests were in flight when the server died.
    assert!(sent.load(Ordering::Relaxed) > acknowledged.len() as u64);

    // Restart on the same database: every acknowledged summary is there.
    let server = start(dir.path(), &[]);
    let stored: std::collections::HashSet<String> = stored_ids(&server.db).into_iter().collect();
    let missing: Vec<&String> = acknowledged
        .iter()
        .filter(|id| !stored.contains(*id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged summaries lost, e.g. {:?}",
        missing.len(),
        missing.first()
    );
    let conn = rusqlite::Connection::open(&server.db).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    // Each stored run has its syscall rows (they commit together).
    let orphans: i64 = conn
        .query_row("SELECT count(*) FROM runs r WHERE NOT EXISTS (SELECT 1 FROM syscalls s WHERE s.run = r.seq)", [], |r| r.get(0))
        .unwrap();
    assert_eq!(orphans, 0);
    // And the service still answers for them.
    let (status, _) = get(
        &server.url,
        &format!("/v1/runs/{}", acknowledged[0]),
        Some(&server.op(TOKEN)),
    );
    assert_eq!(status, 200);
}
