//! The Incidents pages' work: the live peer analysis' incidents of the
//! session's group (`serve --peers-online`, `docs/peers.md` "Online"), a
//! bounded page of them (the open ones, then the closed ones a page at a
//! time), and one incident with its evidence: the metric's series drawn
//! again from what was stored (the plot `peers --html` draws) and a link
//! to the device's windows around it on the Runs page.

use diagnose::peers::report::series_plot;
use diagnose::peers::Series;
use serde::{Deserialize, Serialize};
use summary_view::observe::time_text;

use super::peers::PlotView;
use crate::store::{IncidentFilter, IncidentRow, Store, StoreError};

/// Open incidents the list shows (more is a fleet-wide fault: the page
/// says so rather than reading them all).
pub const OPEN_PAGE: u64 = 100;
/// Closed incidents per page.
pub const CLOSED_PAGE: u64 = 50;
/// How much before the first window and after the last one the windows
/// link shows: the device's normal windows on either side.
const AROUND_NS: u64 = 60_000_000_000;
/// The Runs page's most (`limit=`), asked for by the windows link so an
/// incident of a few minutes of 1 s windows shows whole.
const RUNS_LIMIT: u64 = 1000;

/// An incident as the pages show it.
#[derive(Debug, Clone, Serialize)]
pub struct IncidentView {
    pub id: i64,
    pub group: String,
    pub program: String,
    pub device: String,
    /// `disk`, `network`, `errno EIO`, ...
    pub cause: String,
    pub metric: String,
    /// Two decimals, as the peers report prints a score.
    pub deviation: String,
    pub first: String,
    pub last: String,
    pub opened: String,
    /// `None` while open.
    pub closed: Option<String>,
}

/// The list page: the open incidents, then a page of closed ones.
#[derive(Debug, Clone, Serialize)]
pub struct IncidentsView {
    pub open: Vec<IncidentView>,
    /// More than [`OPEN_PAGE`] are open: only the newest are listed.
    pub open_capped: bool,
    pub closed: Vec<IncidentView>,
    /// The `before` of the next page of closed ones, when there is one.
    pub older: Option<i64>,
    /// This page starts below this id (not the first page).
    pub before: Option<i64>,
    pub open_page: u64,
}

/// One incident's page.
#[derive(Debug, Clone, Serialize)]
pub struct IncidentPage {
    pub row: IncidentView,
    /// The method that found it (`median`, `errno`, ...).
    pub method: String,
    /// The finding's line of evidence.
    pub evidence: String,
    /// The flagged windows' starts (UTC), at most [`FLAGGED_SHOWN`].
    pub flagged: Vec<String>,
    pub flagged_total: usize,
    /// The metric's series in the device's peer set, as SVG.
    pub plot: Option<PlotView>,
    /// Why there is no plot.
    pub no_plot: Option<String>,
    /// The Runs page filtered to the device and program, from a minute
    /// before the first window to a minute after the last.
    pub windows_href: String,
}

/// Flagged windows listed by their start on the page.
const FLAGGED_SHOWN: usize = 50;

/// The evidence JSON as `online::incidents::evidence` writes it; every
/// field optional, since a row stored by another build may lack some.
#[derive(Debug, Default, Deserialize)]
struct Evidence {
    #[serde(default)]
    method: String,
    #[serde(default)]
    evidence: String,
    #[serde(default)]
    flagged_windows_unix_ns: Vec<u64>,
    #[serde(default)]
    window_ns: u64,
    #[serde(default)]
    series: Option<StoredSeries>,
}

/// A median finding's series in its peer set.
#[derive(Debug, Deserialize)]
struct StoredSeries {
    program: String,
    metric: String,
    devices: Vec<String>,
    windows_unix_ns: Vec<u64>,
    values_ns: Vec<Vec<Option<f64>>>,
    /// JSON has no NaN: a median that was not a number is `null`.
    median_ns: Vec<Option<f64>>,
    thresholds_ns: Vec<Option<f64>>,
}

fn view(row: &IncidentRow) -> IncidentView {
    IncidentView {
        id: row.id,
        group: row.group.clone(),
        program: row.program.clone(),
        device: row.device.to_string(),
        cause: row.cause.to_string(),
        metric: row.metric.clone(),
        deviation: format!("{:.2}", row.deviation),
        first: time_text(row.first_window_unix_ns),
        last: time_text(row.last_window_unix_ns),
        opened: time_text(row.opened_unix_ns),
        closed: row.closed_unix_ns.map(time_text),
    }
}

/// The group's open incidents (newest first, at most [`OPEN_PAGE`]) and
/// the page of closed ones below `before` (newest first).
pub fn list(
    store: &mut dyn Store,
    group: &str,
    before: Option<i64>,
) -> Result<IncidentsView, StoreError> {
    let page = |store: &mut dyn Store, open: bool, before_id, limit: u64| {
        // One more than shown tells whether there is more.
        store.incidents(&IncidentFilter {
            group: Some(group.to_string()),
            open,
            before_id,
            limit: limit + 1,
        })
    };
    let mut open = page(store, true, None, OPEN_PAGE)?;
    let open_capped = open.len() as u64 > OPEN_PAGE;
    open.truncate(OPEN_PAGE as usize);
    let mut closed = page(store, false, before, CLOSED_PAGE)?;
    let more = closed.len() as u64 > CLOSED_PAGE;
    closed.truncate(CLOSED_PAGE as usize);
    let older = if more {
        closed.last().map(|r| r.id)
    } else {
        None
    };
    Ok(IncidentsView {
        open: open.iter().map(view).collect(),
        open_capped,
        closed: closed.iter().map(view).collect(),
        older,
        before,
        open_page: OPEN_PAGE,
    })
}

/// Incident `id` when it is the group's; another group's is `None`, as a
/// missing one (its existence is not confirmed).
pub fn one(
    store: &mut dyn Store,
    group: &str,
    id: i64,
) -> Result<Option<IncidentPage>, StoreError> {
    Ok(store
        .incident(id)?
        .filter(|row| row.group == group)
        .map(|row| page(&row)))
}

fn page(row: &IncidentRow) -> IncidentPage {
    // Evidence of another shape (another build's) shows what it can.
    let evidence: Evidence = serde_json::from_value(row.evidence.clone()).unwrap_or_default();
    let (plot, no_plot) = match plot(row, &evidence) {
        Ok(p) => (Some(p), None),
        Err(why) => (None, Some(why)),
    };
    IncidentPage {
        row: view(row),
        method: evidence.method.clone(),
        evidence: evidence.evidence.clone(),
        flagged: evidence
            .flagged_windows_unix_ns
            .iter()
            .take(FLAGGED_SHOWN)
            .map(|w| time_text(*w))
            .collect(),
        flagged_total: evidence.flagged_windows_unix_ns.len(),
        plot,
        no_plot,
        windows_href: windows_href(row, evidence.window_ns),
    }
}

/// The stored series drawn as `peers --html` draws it, this incident's
/// device the culprit; or why it cannot be.
fn plot(row: &IncidentRow, e: &Evidence) -> Result<PlotView, String> {
    let Some(s) = &e.series else {
        return Err(format!(
            "the {} method keeps no time series (only the median method's findings have one): \
             its windows are on the Runs page",
            if e.method.is_empty() {
                "finding's"
            } else {
                e.method.as_str()
            }
        ));
    };
    let n = s.windows_unix_ns.len();
    let shaped = e.window_ns > 0
        && s.values_ns.len() == s.devices.len()
        && s.thresholds_ns.len() == s.devices.len()
        && s.median_ns.len() == n
        && s.values_ns.iter().all(|v| v.len() == n);
    if !shaped {
        return Err("the stored series is not of the shape this build draws".into());
    }
    let device = row.device.to_string();
    let culprit = s.devices.iter().position(|d| *d == device);
    let index = |start: &u64| start / e.window_ns;
    let series = Series {
        program: s.program.clone(),
        metric: s.metric.clone(),
        devices: (0..s.devices.len()).collect(),
        windows: s.windows_unix_ns.iter().map(index).collect(),
        values: s.values_ns.clone(),
        median: s.median_ns.iter().map(|m| m.unwrap_or(f64::NAN)).collect(),
        thresholds: s.thresholds_ns.clone(),
    };
    let flagged: Vec<u64> = e.flagged_windows_unix_ns.iter().map(index).collect();
    let culprits: Vec<(usize, &[u64])> = culprit
        .map(|c| (c, flagged.as_slice()))
        .into_iter()
        .collect();
    Ok(PlotView {
        program: s.program.clone(),
        metric: s.metric.clone(),
        devices: s.devices.len(),
        svg: series_plot(&series, e.window_ns, &culprits),
    })
}

/// `/runs` filtered to the incident's device and program, from
/// [`AROUND_NS`] before its first window to as long after its last one
/// ended.
fn windows_href(row: &IncidentRow, window_ns: u64) -> String {
    let since = row.first_window_unix_ns.saturating_sub(AROUND_NS);
    let until = row
        .last_window_unix_ns
        .saturating_add(window_ns)
        .saturating_add(AROUND_NS);
    format!(
        "/runs?program={}&device={}&since={}&until={}&limit={RUNS_LIMIT}",
        query_value(&row.program),
        row.device,
        query_value(&time_text(since)),
        query_value(&time_text(until)),
    )
}

/// `text` percent-encoded as one query value: every byte but the
/// unreserved ones (RFC 3986), so a program's name cannot end the value
/// or add a parameter.
fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::DeviceId;
    use serde_json::json;
    use wire::alert::IncidentCause;

    fn row(evidence: serde_json::Value) -> IncidentRow {
        IncidentRow {
            id: 3,
            group: "fleet".into(),
            program: "a&b=c d".into(),
            device: DeviceId([0xab; 16]),
            cause: IncidentCause::Errno { name: "EIO".into() },
            metric: "EIO".into(),
            deviation: 4.126,
            first_window_unix_ns: 1_763_700_080_000_000_000,
            last_window_unix_ns: 1_763_700_083_000_000_000,
            opened_unix_ns: 1_763_700_085_000_000_000,
            closed_unix_ns: None,
            evidence,
        }
    }

    #[test]
    fn a_program_name_cannot_break_out_of_its_query_value() {
        assert_eq!(query_value("a&b=c d/é"), "a%26b%3Dc%20d%2F%C3%A9");
        let href = windows_href(&row(json!({})), 1_000_000_000);
        assert_eq!(
            href,
            format!(
                "/runs?program=a%26b%3Dc%20d&device={}&since=2025-11-21T04%3A40%3A20.000000Z\
                 &until=2025-11-21T04%3A42%3A24.000000Z&limit=1000",
                "ab".repeat(16)
            )
        );
    }

    #[test]
    fn evidence_of_any_shape_gives_a_page_without_a_plot() {
        for evidence in [
            json!(null),
            json!({"method": 7}),
            json!({"method": "errno", "evidence": "EIO on 9 of 10 calls"}),
            json!({"method": "median", "window_ns": 1000, "series": {"program": "p",
                   "metric": "m", "devices": ["x"], "windows_unix_ns": [1000, 2000],
                   "values_ns": [[1.0]], "median_ns": [1.0, 2.0], "thresholds_ns": [null]}}),
        ] {
            let p = page(&row(evidence.clone()));
            assert!(p.plot.is_none() && p.no_plot.is_some(), "{evidence}");
            assert_eq!(p.row.cause, "errno EIO");
            assert_eq!(p.row.deviation, "4.13");
        }
    }

    #[test]
    fn a_median_series_is_drawn_with_the_device_as_culprit() {
        let device = "ab".repeat(16);
        let p = page(&row(json!({
            "method": "median",
            "evidence": "dread 3x its peers'",
            "flagged_windows_unix_ns": [2_000_000_000u64],
            "window_ns": 1_000_000_000u64,
            "series": {
                "program": "glusterfsd", "metric": "dread",
                "devices": ["00".repeat(16), device, "01".repeat(16)],
                "windows_unix_ns": [1_000_000_000u64, 2_000_000_000u64],
                "values_ns": [[1e6, 1e6], [1e6, 3e6], [1e6, null]],
                "median_ns": [1e6, null],
                "thresholds_ns": [5e5, 5e5, null],
            },
        })));
        let plot = p.plot.expect("a plot");
        assert_eq!((plot.devices, plot.metric.as_str()), (3, "dread"));
        assert_eq!(plot.svg.matches("<rect").count(), 1, "{}", plot.svg);
        assert!(plot.svg.contains("#d73027") && !plot.svg.contains("NaN"));
        assert_eq!(p.flagged, vec![time_text(2_000_000_000)]);
    }
}
