//! Views of what summary format version 3 adds: the kind (full trace or
//! light record), how late the trace began, and the run's I/O bytes, as JSON
//! (`docs/summary-json.md`) and as lines of `edge-agent show`.

use std::fmt::Write as _;

use agent_core::{Coverage, IoBytes, Kind, Summary};
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
    })
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
    }
    if let Some(io) = summary.io {
        let _ = writeln!(
            out,
            "io read {} bytes  written {} bytes",
            io.read, io.written
        );
    }
}
