//! What both stores read back, written once: the column lists of their
//! SELECTs and the mapping of a result row to the store's types. Each
//! backend only says how to read one column of its own row type
//! ([`Columns`]: SQLite's `rusqlite::Row`, PostgreSQL's
//! `tokio_postgres::Row`), in its own error type, so a mapper is used as
//! each driver expects.

use std::str::FromStr;

use agent_core::Exit;

use super::{DeviceDirective, DeviceRow, IncidentRow, Report, RunRow};
use crate::directive::Directive;
use crate::operators::OperatorRow;

/// A run's columns, in the order [`run_row`] reads them.
pub const RUN_COLUMNS: &str = "id, group_name, program, start_unix_ns, duration_ns, exit_kind, \
    exit_value, arch, processes, threads, events, window_index, spool_dropped, truncated, \
    facts, received_unix_ns, device, stream, window_ns, cpu_user_ns, cpu_system_ns, in_flight, \
    kind";

/// A per-device directive's columns, in the order [`device_directive_row`]
/// reads them.
pub const DIRECTIVE_COLUMNS: &str = "id, group_name, device, program, match_text, runs, received, \
    created_unix_ns, expires_unix_ns, issuer";

/// A group directive's columns, in the order [`directive_row`] reads them.
pub const GROUP_DIRECTIVE_COLUMNS: &str =
    "group_name, match_text, only_list, time_window, programs";

/// A report's columns without its bodies, in the order [`report_row`]
/// reads them.
pub const REPORT_SUMMARY_COLUMNS: &str = "id, group_name, program, trigger_kind, status, \
    detected_unix_ns, created_unix_ns, cluster, devices, headline";

/// A device's columns, in the order [`device_row`] reads them.
pub const DEVICE_COLUMNS: &str = "device, group_name, first_seen_unix_ns, last_seen_unix_ns, \
    last_start_unix_ns, last_program, facts, runs, windows";

/// One result row of a backend, read by column index.
pub trait Columns {
    /// The backend's error.
    type Error;
    /// A 64-bit integer column.
    fn int(&self, i: usize) -> Result<i64, Self::Error>;
    /// A 64-bit integer column that may be NULL.
    fn opt_int(&self, i: usize) -> Result<Option<i64>, Self::Error>;
    /// A 32-bit integer column that may be NULL (PostgreSQL's `INTEGER`).
    fn opt_i32(&self, i: usize) -> Result<Option<i32>, Self::Error>;
    /// A floating-point column.
    fn float(&self, i: usize) -> Result<f64, Self::Error>;
    /// A text column.
    fn text(&self, i: usize) -> Result<String, Self::Error>;
    /// A text column that may be NULL.
    fn opt_text(&self, i: usize) -> Result<Option<String>, Self::Error>;
    /// A boolean column (SQLite's 0 or 1).
    fn boolean(&self, i: usize) -> Result<bool, Self::Error>;
    /// The error for column `i` holding an incident cause this build does
    /// not know.
    fn bad_cause(i: usize, text: &str) -> Self::Error;
    /// The error for column `i` holding an id that is not 32 hex digits.
    fn bad_id(i: usize, text: &str) -> Self::Error;
}

/// Stored integers are signed: a negative one (never written) reads as 0.
fn unsigned(v: i64) -> u64 {
    v.max(0) as u64
}

/// A count column as `u32`, clamped.
fn small(v: i64) -> u32 {
    u32::try_from(v.max(0)).unwrap_or(u32::MAX)
}

/// How a run ended, as its two exit columns store it.
pub fn exit_columns(exit: Exit) -> (&'static str, Option<i32>) {
    match exit {
        Exit::Code(c) => ("code", Some(c)),
        Exit::Signal(s) => ("signal", Some(s)),
        Exit::Running => ("running", None),
        Exit::Detached => ("detached", None),
    }
}

fn exit_from_columns(kind: &str, value: Option<i32>) -> Exit {
    match (kind, value) {
        ("code", Some(c)) => Exit::Code(c),
        ("signal", Some(s)) => Exit::Signal(s),
        ("running", _) => Exit::Running,
        _ => Exit::Detached,
    }
}

/// An id column (32 hex digits: a run, device or stream id).
fn id_column<R: Columns, Id: FromStr>(row: &R, i: usize) -> Result<Id, R::Error> {
    let text = row.text(i)?;
    text.parse().map_err(|_| R::bad_id(i, &text))
}

fn optional_id_column<R: Columns, Id: FromStr>(row: &R, i: usize) -> Result<Option<Id>, R::Error> {
    match row.opt_text(i)? {
        None => Ok(None),
        Some(text) => text.parse().map(Some).map_err(|_| R::bad_id(i, &text)),
    }
}

/// JSON text as stored (facts, a report's devices); `Null` when it does
/// not parse (the store only holds what it wrote).
fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or(serde_json::Value::Null)
}

/// A run ([`RUN_COLUMNS`]).
pub fn run_row<R: Columns>(row: &R) -> Result<RunRow, R::Error> {
    Ok(RunRow {
        id: id_column(row, 0)?,
        group: row.text(1)?,
        program: row.text(2)?,
        start_unix_ns: unsigned(row.int(3)?),
        duration_ns: unsigned(row.int(4)?),
        exit: exit_from_columns(&row.text(5)?, row.opt_i32(6)?),
        arch: row.text(7)?,
        processes: small(row.int(8)?),
        threads: small(row.int(9)?),
        events: unsigned(row.int(10)?),
        window: small(row.int(11)?),
        spool_dropped: small(row.int(12)?),
        truncated: row.boolean(13)?,
        facts: json(&row.text(14)?),
        received_unix_ns: unsigned(row.int(15)?),
        device: optional_id_column(row, 16)?,
        stream: optional_id_column(row, 17)?,
        window_ns: unsigned(row.int(18)?),
        cpu_user_ns: row.opt_int(19)?.map(unsigned),
        cpu_system_ns: row.opt_int(20)?.map(unsigned),
        in_flight: small(row.int(21)?),
        kind: super::kind_from_name(&row.text(22)?),
    })
}

/// A per-device directive ([`DIRECTIVE_COLUMNS`]).
pub fn device_directive_row<R: Columns>(row: &R) -> Result<DeviceDirective, R::Error> {
    Ok(DeviceDirective {
        id: row.int(0)?,
        group: row.text(1)?,
        device: id_column(row, 2)?,
        program: row.opt_text(3)?,
        match_text: row.opt_text(4)?,
        runs: small(row.int(5)?),
        received: small(row.int(6)?),
        created_unix_ns: unsigned(row.int(7)?),
        expires_unix_ns: unsigned(row.int(8)?),
        issuer: row.text(9)?,
    })
}

/// A report without its bodies ([`REPORT_SUMMARY_COLUMNS`]).
pub fn report_row<R: Columns>(row: &R) -> Result<Report, R::Error> {
    Ok(Report {
        id: row.int(0)?,
        group: row.text(1)?,
        program: row.text(2)?,
        trigger: row.text(3)?,
        status: row.text(4)?,
        detected_unix_ns: unsigned(row.int(5)?),
        created_unix_ns: unsigned(row.int(6)?),
        cluster: row.text(7)?,
        devices: Report::devices_from_json(&json(&row.text(8)?)),
        headline: row.text(9)?,
        text: String::new(),
        json: serde_json::Value::Null,
        html: String::new(),
    })
}

/// The columns of an incident, in [`incident_row`]'s order.
pub const INCIDENT_COLUMNS: &str = "id, group_name, program, device, cause, errno, metric, \
     deviation, first_window_unix_ns, last_window_unix_ns, opened_unix_ns, closed_unix_ns, evidence";

/// An incident ([`INCIDENT_COLUMNS`]). A cause this build does not know
/// (a newer build wrote it) is an error naming it.
pub fn incident_row<R: Columns>(row: &R) -> Result<IncidentRow, R::Error> {
    let kind = row.text(4)?;
    let cause = super::cause_of(&kind, row.opt_text(5)?).ok_or_else(|| R::bad_cause(4, &kind))?;
    Ok(IncidentRow {
        id: row.int(0)?,
        group: row.text(1)?,
        program: row.text(2)?,
        device: id_column(row, 3)?,
        cause,
        metric: row.text(6)?,
        deviation: row.float(7)?,
        first_window_unix_ns: unsigned(row.int(8)?),
        last_window_unix_ns: unsigned(row.int(9)?),
        opened_unix_ns: unsigned(row.int(10)?),
        closed_unix_ns: row.opt_int(11)?.map(unsigned),
        evidence: json(&row.text(12)?),
    })
}

/// A device ([`DEVICE_COLUMNS`]).
pub fn device_row<R: Columns>(row: &R) -> Result<DeviceRow, R::Error> {
    Ok(DeviceRow {
        device: id_column(row, 0)?,
        group: row.text(1)?,
        first_seen_unix_ns: unsigned(row.int(2)?),
        last_seen_unix_ns: unsigned(row.int(3)?),
        last_start_unix_ns: unsigned(row.int(4)?),
        last_program: row.text(5)?,
        facts: json(&row.text(6)?),
        runs: unsigned(row.int(7)?),
        windows: unsigned(row.int(8)?),
    })
}

/// An operator (name, group, password hash, created).
pub fn operator_row<R: Columns>(row: &R) -> Result<OperatorRow, R::Error> {
    Ok(OperatorRow {
        name: row.text(0)?,
        group: row.text(1)?,
        password_hash: row.text(2)?,
        created_unix_ns: unsigned(row.int(3)?),
    })
}

/// A group directive ([`GROUP_DIRECTIVE_COLUMNS`]); lists are JSON text.
pub fn directive_row<R: Columns>(row: &R) -> Result<Directive, R::Error> {
    Ok(Directive {
        group: row.text(0)?,
        match_text: row.opt_text(1)?,
        only: row.opt_text(2)?.and_then(|o| serde_json::from_str(&o).ok()),
        window: row.opt_text(3)?,
        programs: row.opt_text(4)?.and_then(|p| serde_json::from_str(&p).ok()),
    })
}
