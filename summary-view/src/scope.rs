//! Views of what summary format versions 3 and 4 add: the kind (full trace
//! or light record), how late the trace began and how its calls were
//! observed (the coverage's source), and the run's I/O bytes, as JSON
//! (`docs/summary-json.md`) and as lines of `edge-agent show` (and the web
//! UI's run page, which shows the same table).

use std::fmt::Write as _;

use agent_core::{Coverage, IoBytes, Kind, Source, Summary};
use serde_json::{json, Value};

/// The `"kind"` of the JSON view.
pub fn kind_json(kind: Kind) -> Value {
    Value::from(match kind {
        Kind::Full => "full",
        Kind::Light => "light",
    })
}

/// The `"coverage"` object of the JSON view.
pub fn coverage_json(c: &Coverage) -> Value {
    json!({
        "late_ns": c.late_ns,
        "from_start": c.from_start,
        "began_late": c.began_late(),
        "source": c.source.name(),
    })
}

/// The line saying how the calls were observed, and so which calls the
/// summary can contain at all.
pub fn source_line(source: Source) -> String {
    match source {
        Source::Kernel => format!("calls seen: {}", source.description()),
        Source::InProcess => format!(
            "calls seen: {}: no raw syscall(), no calls libc or the dynamic loader make themselves",
            source.description()
        ),
    }
}

/// The `"io"` object of the JSON view (`null`: not measured).
pub fn io_json(io: Option<IoBytes>) -> Value {
    io.map_or(
        Value::Null,
        |io| json!({ "read": io.read, "written": io.written }),
    )
}

/// The lines saying what the summary is and how much of the run it saw.
pub fn scope_lines(out: &mut String, summary: &Summary) {
    if summary.kind == Kind::Light {
        let _ = writeln!(
            out,
            "light record: the run was noticed, not traced (no syscall statistics)"
        );
    }
    let c = &summary.coverage;
    let line = match (c.from_start, c.late_ns) {
        (true, _) => "trace began before the program's first syscall".to_string(),
        (false, Some(late)) => format!(
            "trace began {:.3} s after the process started: its first calls are missing",
            late as f64 / 1e9
        ),
        (false, None) => "trace start not known".to_string(),
    };
    if summary.kind == Kind::Full {
        let _ = writeln!(out, "{line}");
        let _ = writeln!(out, "{}", source_line(c.source));
    }
    if let Some(io) = summary.io {
        let _ = writeln!(
            out,
            "io read {} bytes  written {} bytes",
            io.read, io.written
        );
    }
}
