//! `serve --auto`: the detector's background thread. Every tick it reads
//! the recent light runs, asks [`super::detector::find`] about each
//! (group, program), counts how many ticks in a row each cluster is found,
//! starts an [`Investigation`] once one is stable (and no fresh report
//! covers it), and concludes the investigations whose runs are in. Every
//! decision is logged on stderr (`edge-service: detector: ...`).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_core::DeviceId;

use super::detector::{find, LightRun, Thresholds};
use super::investigation::Investigation;
use crate::store::{RunFilter, Store, StoreOpener};

/// A cluster's identity: (group, program, trigger).
type Key = (String, String, &'static str);

/// The detector's state between ticks (in memory: run `--auto` on one
/// instance of a fleet's service).
#[derive(Debug)]
pub struct Detector {
    thresholds: Thresholds,
    /// Clusters found in the latest ticks: consecutive ticks, first seen.
    streaks: HashMap<Key, (u32, u64)>,
    /// Investigations under way.
    open: HashMap<Key, Investigation>,
    /// The fresh report each cluster was last held back by (logged once).
    held_back: HashMap<Key, i64>,
}

fn log(message: &str) {
    eprintln!("edge-service: detector: {message}");
}

fn short(device: &DeviceId) -> String {
    device.to_string()
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Detector {
    pub fn new(thresholds: Thresholds) -> Detector {
        Detector {
            thresholds,
            streaks: HashMap::new(),
            open: HashMap::new(),
            held_back: HashMap::new(),
        }
    }

    /// Investigations under way.
    pub fn open(&self) -> usize {
        self.open.len()
    }

    /// One look at the store at time `now`; returns the ids of the
    /// reports stored.
    pub fn tick(&mut self, store: &mut dyn Store, now: u64) -> anyhow::Result<Vec<i64>> {
        let t = self.thresholds.clone();
        let rows = store.runs(&RunFilter {
            kind: Some(agent_core::Kind::Light),
            since_unix_ns: Some(now.saturating_sub(ns(t.window))),
            ..RunFilter::default()
        })?;
        let mut by_program: BTreeMap<(String, String), Vec<LightRun>> = BTreeMap::new();
        for r in rows {
            // A run without a device id cannot be traced on its device.
            let Some(device) = r.device else { continue };
            by_program
                .entry((r.group, r.program))
                .or_default()
                .push(LightRun {
                    device,
                    duration_ns: r.duration_ns,
                    exit: r.exit,
                });
        }
        let mut seen: Vec<Key> = Vec::new();
        for ((group, program), runs) in &by_program {
            for finding in find(runs, &t) {
                let key: Key = (group.clone(), program.clone(), finding.trigger);
                seen.push(key.clone());
                if self.open.contains_key(&key) {
                    continue;
                }
                let fresh_after = now.saturating_sub(ns(t.fresh));
                let fresh = store.reports(Some(group))?.into_iter().find(|r| {
                    r.program == *program
                        && r.trigger == finding.trigger
                        && r.created_unix_ns >= fresh_after
                });
                if let Some(report) = fresh {
                    if self.held_back.insert(key.clone(), report.id) != Some(report.id) {
                        log(&format!(
                            "group {group}, program {program}: {} cluster still there ({}); report {} is fresh, not investigating again",
                            finding.trigger, finding.description, report.id
                        ));
                    }
                    self.streaks.remove(&key);
                    continue;
                }
                let streak = self.streaks.entry(key.clone()).or_insert((0, now));
                streak.0 += 1;
                let (ticks, first_seen) = *streak;
                log(&format!(
                    "group {group}, program {program}: {} cluster found ({}), {ticks} of {} tick(s) in a row",
                    finding.trigger, finding.description, t.stable_ticks
                ));
                if ticks < t.stable_ticks {
                    continue;
                }
                self.streaks.remove(&key);
                let inv =
                    Investigation::start(store, group, program, &finding, first_seen, now, &t)?;
                for (device, cluster, id) in &inv.devices {
                    log(&format!(
                        "group {group}, program {program}: directive {id}: trace the next {} run(s) of device {} ({cluster} cluster) fully",
                        t.runs,
                        short(device)
                    ));
                }
                self.open.insert(key, inv);
            }
        }
        self.streaks.retain(|key, _| {
            let still = seen.contains(key);
            if !still {
                log(&format!(
                    "group {}, program {}: {} cluster no longer found",
                    key.0, key.1, key.2
                ));
            }
            still
        });
        let mut stored = Vec::new();
        let keys: Vec<Key> = self.open.keys().cloned().collect();
        for key in keys {
            let Some(inv) = self.open.get(&key) else {
                continue;
            };
            let received = inv.received(store)?;
            if !inv.is_due(&received, t.runs, now) {
                continue;
            }
            let report = inv.conclude(store, now)?;
            let id = store.add_report(&report)?;
            log(&format!(
                "group {}, program {}: report {id} ({}, {} device(s), {:.1} s after the cluster was first found): {}",
                key.0,
                key.1,
                report.status,
                report.devices.len(),
                now.saturating_sub(report.detected_unix_ns) as f64 / 1e9,
                report.headline
            ));
            self.open.remove(&key);
            stored.push(id);
        }
        Ok(stored)
    }
}

fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Starts the detector on a thread of its own, with a store connection of
/// its own, for the life of the process.
pub fn start(open_store: StoreOpener, thresholds: Thresholds) -> anyhow::Result<()> {
    let mut store = open_store()?;
    log(&format!(
        "on: every {:?}, light runs of the last {:?}, clusters of at least {} run(s) and {}x slower, stable for {} tick(s); {} device(s) per side, {} full run(s) each, waiting {:?}; reports fresh for {:?}",
        thresholds.every,
        thresholds.window,
        thresholds.min_runs,
        thresholds.min_ratio,
        thresholds.stable_ticks,
        thresholds.devices,
        thresholds.runs,
        thresholds.wait,
        thresholds.fresh
    ));
    let every = thresholds.every;
    let mut detector = Detector::new(thresholds);
    std::thread::Builder::new()
        .name("detector".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            if let Err(e) = detector.tick(store.as_mut(), now_unix_ns()) {
                log(&format!("tick failed (trying again next tick): {e:#}"));
            }
        })?;
    Ok(())
}
