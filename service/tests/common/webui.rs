//! The web UI tests' data: the demo's case study uploaded through the real
//! ingest path for group `phones`, and runs of group `laptops` that no
//! `phones` page may show.

use std::time::{SystemTime, UNIX_EPOCH};

use agent_core::{DeviceId, Summary};
use fixtures::sample;

use super::{accepted, body, post, CONTENT_TYPE, OTHER_TOKEN, TOKEN};

/// Good and bad demo runs.
pub const GOOD: usize = 24;
pub const BAD: usize = 12;
/// Windows of the windowed run.
pub const WINDOWS: u32 = 12;

/// What was uploaded.
pub struct Uploaded {
    /// The id of the phones' windowed run's first window.
    pub windowed: String,
    /// A good and a bad demo run of phones.
    pub good_run: String,
    pub bad_run: String,
    /// The laptops' runs and device (never on a phones page).
    pub laptops_runs: Vec<String>,
    pub laptops_device: String,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Uploads `runs` with `token`, every one accepted.
pub fn upload(url: &str, token: &str, runs: &[Summary]) {
    let items: Vec<Vec<u8>> = runs.iter().map(sample::encode).collect();
    for chunk in items.chunks(50) {
        let (status, _, json) = post(
            url,
            Some(token),
            Some(CONTENT_TYPE),
            &body(chunk.iter().map(Vec::as_slice)),
        );
        assert_eq!(status, 200, "{json}");
        assert_eq!(accepted(&json).len(), chunk.len(), "{json}");
    }
}

/// Uploads the demo's runs for phones and a few runs for laptops.
pub fn upload_demo(url: &str) -> Uploaded {
    let now = now_ns();
    let hour = 3_600_000_000_000u64;
    let mut phones = Vec::new();
    let (mut good_run, mut bad_run) = (String::new(), String::new());
    for i in 0..(GOOD + BAD) as u64 {
        let bad = i % 3 == 2;
        let mut device = [0u8; 16];
        // Every device has good and bad runs (4 and 2): the `client` fact
        // (client<device>) must not separate the classes, or, facts being
        // attributes, the first rule is about the client, not num_read.
        device[0] = ((i / 3) % 6) as u8 + 1;
        device[15] = 0xde;
        let run = sample::demo_run(i, bad, DeviceId(device), now - hour + i * 60_000_000_000);
        let id = run.id.to_string();
        if bad {
            bad_run = id;
        } else {
            good_run = id;
        }
        phones.push(run);
    }
    let windows = sample::windowed_run(7, "wget", DeviceId([1; 16]), now - 2 * hour, WINDOWS);
    let windowed = windows[0].id.to_string();
    phones.extend(windows);
    upload(url, TOKEN, &phones);
    // Laptops: the same program, so a leak would show on phones' pages.
    let laptops_device = DeviceId([0x1a; 16]);
    let laptops: Vec<Summary> = (0..6u64)
        .map(|i| sample::demo_run(1000 + i, i % 2 == 0, laptops_device, now - hour / 2 + i))
        .collect();
    upload(url, OTHER_TOKEN, &laptops);
    Uploaded {
        windowed,
        good_run,
        bad_run,
        laptops_runs: laptops.iter().map(|s| s.id.to_string()).collect(),
        laptops_device: laptops_device.to_string(),
    }
}
