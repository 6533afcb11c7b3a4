//! `edge-service diagnose` and `edge-service peers`: the arguments become
//! a request, the request runs on the store (`service::source`), its notes
//! go to stderr as they come, and the report to stdout (text or JSON) and
//! an HTML file.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use service::source::StoreSource;

use crate::analysis_args::{DiagnoseArgs, PeersArgs};

/// Runs `edge-service diagnose`.
pub fn diagnose(args: &DiagnoseArgs) -> anyhow::Result<ExitCode> {
    let request = args.request()?;
    let report = request.run(&StoreSource, &mut |note| eprintln!("diagnose: {note}"))?;
    let html = args.html.as_deref().map(|path| (path, report.html()));
    print(&report.text(), &report.json(), args.json, html)
}

/// Runs `edge-service peers`.
pub fn peers(args: &PeersArgs) -> anyhow::Result<ExitCode> {
    use diagnose::peers::report;
    let request = args.request()?;
    let diagnosis = request.run(&StoreSource, &mut |note| eprintln!("peers: {note}"))?;
    let html = args
        .html
        .as_deref()
        .map(|path| (path, report::html(&diagnosis)));
    print(
        &report::text(&diagnosis),
        &report::json(&diagnosis),
        args.json,
        html,
    )
}

/// Prints a report as text or JSON, and writes its HTML page (saying where,
/// after the text).
fn print(
    text: &str,
    json: &serde_json::Value,
    as_json: bool,
    html: Option<(&Path, String)>,
) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if as_json {
        writeln!(out, "{}", serde_json::to_string_pretty(json)?)?;
    } else {
        write!(out, "{text}")?;
    }
    if let Some((path, page)) = html {
        std::fs::write(path, page).with_context(|| format!("cannot write {}", path.display()))?;
        if !as_json {
            writeln!(out, "\nHTML report: {}", path.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
