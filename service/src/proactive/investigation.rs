//! One investigation: from a cluster the detector found to a stored
//! report. It issues per-device directives to the devices picked on each
//! side, waits until every directive is fulfilled (or the wait is over),
//! then diagnoses the full runs the directives brought, and stores the
//! report.

use std::time::Duration;

use agent_core::{DeviceId, Summary};
use anyhow::{bail, Context};
use diagnose::analysis::{self, LabelBy, Options};
use diagnose::label::ClusterBy;
use diagnose::report;

use super::detector::{Finding, Thresholds};
use super::directives::{directive_of, DeviceDirective, DIRECTIVE_FACT};
use super::reports::{Report, ReportDevice, STATUS_DIAGNOSED, STATUS_FAILED, TRIGGER_FAILING};
use crate::store::{RunFilter, Store};

/// The directives' issuer name.
pub const ISSUER: &str = "detector";

/// An investigation under way.
#[derive(Clone, Debug, PartialEq)]
pub struct Investigation {
    pub group: String,
    pub program: String,
    pub trigger: &'static str,
    pub description: String,
    /// When the cluster was first found.
    pub detected_unix_ns: u64,
    /// When the directives' runs are no longer waited for.
    pub deadline_unix_ns: u64,
    /// Each device traced: (device, its cluster's name, its directive).
    pub devices: Vec<(DeviceId, &'static str, i64)>,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Investigation {
    /// Issues a directive to every device of `finding` (its runs of
    /// `program`, `t.runs` of them, standing `t.wait`).
    pub fn start(
        store: &mut dyn Store,
        group: &str,
        program: &str,
        finding: &Finding,
        detected_unix_ns: u64,
        now_unix_ns: u64,
        t: &Thresholds,
    ) -> anyhow::Result<Investigation> {
        let deadline = now_unix_ns.saturating_add(ns(t.wait));
        let mut devices = Vec::new();
        let sides = [(finding.trigger, &finding.bad), ("good", &finding.good)];
        for (cluster, list) in sides {
            for device in list {
                let d = DeviceDirective::new(
                    group,
                    *device,
                    Some(program),
                    None,
                    t.runs,
                    now_unix_ns,
                    deadline,
                    ISSUER,
                )?;
                let id = store
                    .add_device_directive(&d)
                    .context("cannot store a directive")?;
                devices.push((*device, cluster, id));
            }
        }
        Ok(Investigation {
            group: group.to_string(),
            program: program.to_string(),
            trigger: finding.trigger,
            description: finding.description.clone(),
            detected_unix_ns,
            deadline_unix_ns: deadline,
            devices,
        })
    }

    /// Full runs received so far, per device (in [`Self::devices`] order).
    pub fn received(&self, store: &mut dyn Store) -> anyhow::Result<Vec<u32>> {
        let stored = store.device_directives(Some(&self.group), None)?;
        Ok(self
            .devices
            .iter()
            .map(|(_, _, id)| {
                stored
                    .iter()
                    .find(|d| d.id == *id)
                    .map_or(0, |d| d.received)
            })
            .collect())
    }

    /// Whether to diagnose now: every directive fulfilled, or the wait is
    /// over.
    pub fn is_due(&self, received: &[u32], runs_each: u32, now_unix_ns: u64) -> bool {
        now_unix_ns >= self.deadline_unix_ns || received.iter().all(|n| *n >= runs_each)
    }

    /// Diagnoses the runs the directives brought and makes the report (not
    /// yet stored): `diagnosed`, or `failed` with the reason as its text.
    pub fn conclude(&self, store: &mut dyn Store, now_unix_ns: u64) -> anyhow::Result<Report> {
        let received = self.received(store)?;
        let devices: Vec<ReportDevice> = self
            .devices
            .iter()
            .zip(&received)
            .map(|((device, cluster, id), runs)| ReportDevice {
                device: *device,
                cluster: (*cluster).to_string(),
                directive: *id,
                runs: *runs,
            })
            .collect();
        let mut report = Report {
            id: 0,
            group: self.group.clone(),
            program: self.program.clone(),
            trigger: self.trigger.to_string(),
            status: STATUS_DIAGNOSED.to_string(),
            detected_unix_ns: self.detected_unix_ns,
            created_unix_ns: now_unix_ns,
            cluster: self.description.clone(),
            devices,
            headline: String::new(),
            text: String::new(),
            json: serde_json::Value::Null,
            html: String::new(),
        };
        let diagnosis = self
            .directed_runs(store)
            .and_then(|runs| diagnose_runs(runs, self.trigger));
        match diagnosis {
            Ok(d) => {
                report.headline = d.rules.first().map_or_else(
                    || "no rule separates the classes".to_string(),
                    |r| format!("{} (accuracy {:.2})", r.text, r.accuracy),
                );
                report.text = report::text(&d);
                report.json = report::json(&d);
                report.html = report::html(&d);
            }
            Err(e) => {
                report.status = STATUS_FAILED.to_string();
                report.headline = format!("{e:#}");
                report.text = format!("no diagnosis: {e:#}\n");
            }
        }
        Ok(report)
    }

    /// The full runs each device traced for its directive.
    fn directed_runs(&self, store: &mut dyn Store) -> anyhow::Result<Vec<Summary>> {
        let mut runs = Vec::new();
        for (device, _, id) in &self.devices {
            // No time filter: a device's clock may be off; the directive
            // fact names exactly the runs traced for it.
            let filter = RunFilter {
                group: Some(self.group.clone()),
                device: Some(*device),
                kind: Some(agent_core::Kind::Full),
                ..RunFilter::default()
            };
            for stored in store.load(&filter)? {
                let summary = Summary::decode(&stored.raw)
                    .map_err(|e| anyhow::anyhow!("a stored run no longer decodes: {e}"))?;
                if directive_of(&summary.facts) == Some(*id) {
                    runs.push(summary);
                }
            }
        }
        Ok(runs)
    }
}

/// The diagnosis of the directed runs: labelled by duration clusters for a
/// slow cluster, by outcome for a failing one (diagnose's own labels, as
/// `edge-service diagnose --cluster duration|outcome` makes them).
fn diagnose_runs(runs: Vec<Summary>, trigger: &str) -> anyhow::Result<analysis::Diagnosis> {
    if runs.len() < 2 {
        bail!(
            "{} full run(s) came back for the directives: at least one per side is needed",
            runs.len()
        );
    }
    let by = if trigger == TRIGGER_FAILING {
        ClusterBy::Outcome
    } else {
        ClusterBy::Duration
    };
    let options = Options {
        // The directive fact differs per device: it would separate the
        // devices, not explain them.
        skip_fact: Some(DIRECTIVE_FACT.to_string()),
        // A directed run is traced by `watch` attaching as it notices the
        // run, so every one began a little late, on both sides alike;
        // leaving them out would leave nothing to diagnose.
        include_late: true,
        ..Options::default()
    };
    analysis::diagnose_runs(runs, &LabelBy::Cluster(by), &options)
}
