//! The Reports pages' work: the proactive loop's stored reports of the
//! session's group (`Store::reports`/`Store::report`), as rows of the list
//! and as one report with its text and its stored HTML body.

use serde::Serialize;
use summary_view::observe::time_text;

use crate::proactive::reports::Report;
use crate::store::{Store, StoreError};

/// One report in the list.
#[derive(Debug, Clone, Serialize)]
pub struct ReportRow {
    pub id: i64,
    /// When it was stored (UTC).
    pub time: String,
    /// When the detector first saw the cluster (UTC).
    pub detected: String,
    pub program: String,
    /// `slow` or `failing`.
    pub trigger: String,
    /// `diagnosed` or `failed`.
    pub status: String,
    /// The devices traced, each as "id (cluster, runs)".
    pub devices: Vec<String>,
    pub headline: String,
    pub cluster: String,
}

/// One report's page.
#[derive(Debug, Clone, Serialize)]
pub struct ReportView {
    pub row: ReportRow,
    /// The diagnosis as `edge-service diagnose` prints it.
    pub text: String,
    /// The inside of the stored HTML report's `<body>`, embedded as it is:
    /// it is `diagnose --html`'s own output, every value escaped when it
    /// was written, and the page's CSP forbids script anyway. Its
    /// `<style>` is in its `<head>` and left out (the CSP would drop it);
    /// the web UI's stylesheet styles its tables. `None` when there is no
    /// body (a failed investigation) or it is not the shape expected.
    pub html_body: Option<String>,
}

fn row(r: &Report) -> ReportRow {
    ReportRow {
        id: r.id,
        time: time_text(r.created_unix_ns),
        detected: time_text(r.detected_unix_ns),
        program: r.program.clone(),
        trigger: r.trigger.clone(),
        status: r.status.clone(),
        devices: r
            .devices
            .iter()
            .map(|d| format!("{} ({}, {} run(s))", d.device, d.cluster, d.runs))
            .collect(),
        headline: r.headline.clone(),
        cluster: r.cluster.clone(),
    }
}

/// The group's reports, newest first.
pub fn list(store: &mut dyn Store, group: &str) -> Result<Vec<ReportRow>, StoreError> {
    Ok(store.reports(Some(group))?.iter().map(row).collect())
}

/// Report `id` when it is the group's; another group's is `None`, as a
/// missing one (its existence is not confirmed).
pub fn one(store: &mut dyn Store, group: &str, id: i64) -> Result<Option<ReportView>, StoreError> {
    let Some(r) = store.report(id)? else {
        return Ok(None);
    };
    if r.group != group {
        return Ok(None);
    }
    Ok(Some(ReportView {
        row: row(&r),
        text: r.text.clone(),
        html_body: body_of(&r.html),
    }))
}

/// What is between `<body…>` and `</body>` of a whole HTML page; `None`
/// when there is none, or when it holds a `<script` (never written by
/// `diagnose --html`: such a body is not embedded at all).
fn body_of(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let open = lower.find("<body")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = lower.rfind("</body>")?;
    if end < start {
        return None;
    }
    let inner = &lower[start..end];
    if inner.contains("<script") || inner.trim().is_empty() {
        return None;
    }
    Some(html[start..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::body_of;

    #[test]
    fn the_body_is_cut_out_and_a_script_refused() {
        let page = "<!doctype html><html><head><style>b{}</style></head>\
                    <BODY class=x><h1>Diagnosis</h1><svg></svg></body></html>";
        assert_eq!(body_of(page).unwrap(), "<h1>Diagnosis</h1><svg></svg>");
        assert_eq!(body_of(""), None);
        assert_eq!(body_of("<body></body>"), None);
        assert_eq!(
            body_of("<body><p>x</p><SCRIPT>alert(1)</script></body>"),
            None
        );
        assert_eq!(body_of("</body><body>"), None);
    }
}
