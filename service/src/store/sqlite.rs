//! The SQLite store: one file, WAL mode, `synchronous=FULL`.
//!
//! Durability: in WAL mode with `synchronous=FULL` the WAL is fsynced at
//! every commit, so a transaction that `COMMIT` returned for survives a
//! crash or power loss. (`NORMAL` would only survive a process crash, not a
//! power loss; the uploader deletes its copy on our acknowledgement, so we
//! pay one fsync per commit, and the writer's group commit spreads it over
//! every request that arrived meanwhile.)

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_core::{DeviceId, RunId};
use rusqlite::{params, Connection, ErrorCode, OptionalExtension, Row};

use super::columns::{
    device_directive_row, device_row, directive_row, exit_columns, incident_row, operator_row,
    report_row, run_row, Columns, DEVICE_COLUMNS, DIRECTIVE_COLUMNS, GROUP_DIRECTIVE_COLUMNS,
    INCIDENT_COLUMNS, REPORT_SUMMARY_COLUMNS, RUN_COLUMNS,
};
use super::{cause_columns, DeviceDirective, IncidentFilter, IncidentRow, Report};
use super::{
    DeviceFilter, DeviceRow, Inserted, NewRun, RunFilter, RunRow, Store, StoreError, StoredRun,
    SCHEMA_VERSION,
};
use crate::directive::Directive;
use crate::operators::{Credential, CredentialKind, OperatorRow};

/// WAL size beyond which housekeeping forces the WAL back to zero (only
/// reached when the writer's own checkpoints keep failing).
pub const WAL_TRUNCATE_LEN: u64 = 512 << 20;
/// WAL pages after which a server connection's commit checkpoints (64 MiB
/// of 4 KiB pages).
pub const WRITER_CHECKPOINT_PAGES: i64 = 16384;

/// Version 1: runs, their syscalls, directives. A new file gets it first,
/// then every migration, so that new and migrated files are alike. Each
/// step's SQL file says what it adds (PostgreSQL's are its own, from
/// version 2 on, `migrations/postgres/`).
const SCHEMA_1: &str = include_str!("../../migrations/sqlite/0001_schema.sql");

/// `MIGRATIONS[i]` takes a file from version `i + 1` to `i + 2`.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/sqlite/0002_devices_peers.sql"),
    include_str!("../../migrations/sqlite/0003_retention.sql"),
    include_str!("../../migrations/sqlite/0004_proactive.sql"),
    include_str!("../../migrations/sqlite/0005_webui.sql"),
    include_str!("../../migrations/sqlite/0006_directive_programs.sql"),
    include_str!("../../migrations/sqlite/0007_operators.sql"),
    include_str!("../../migrations/sqlite/0008_incidents.sql"),
];

/// A connection to an SQLite store file.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`; a writer that finds
    /// the file locked waits up to `busy_timeout` before giving up (busy).
    pub fn open(path: &Path, busy_timeout: Duration) -> anyhow::Result<SqliteStore> {
        use anyhow::Context;
        let mut conn = Connection::open(path)
            .with_context(|| format!("cannot open database {}", path.display()))?;
        conn.busy_timeout(busy_timeout)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .with_context(|| format!("cannot use database {}", path.display()))?;
        if !mode.eq_ignore_ascii_case("wal") {
            anyhow::bail!(
                "database {}: cannot switch to WAL mode (got {mode})",
                path.display()
            );
        }
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // 64 MiB of page cache: the indexes' hot pages stay in memory.
        conn.pragma_update(None, "cache_size", -65536)?;
        migrate(&mut conn)
            .with_context(|| format!("cannot create the schema in {}", path.display()))?;
        Ok(SqliteStore {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The schema version of the open file (`PRAGMA user_version`).
    pub fn schema_version(&self) -> anyhow::Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Raises this connection's automatic checkpoint threshold to
    /// [`WRITER_CHECKPOINT_PAGES`]: the server's housekeeping thread
    /// checkpoints passively in the background, so when a commit crosses the
    /// threshold nearly everything is already copied and the writer's own
    /// checkpoint is short. (The writer must checkpoint now and then: a
    /// passive checkpoint racing a busy writer never finishes, and the WAL
    /// only restarts from zero after a finished one.)
    pub fn defer_checkpoints(&self) -> anyhow::Result<()> {
        self.conn
            .pragma_update(None, "wal_autocheckpoint", WRITER_CHECKPOINT_PAGES)?;
        Ok(())
    }

    /// Copies committed WAL frames into the database file without blocking
    /// the writer (`PASSIVE`); with `truncate`, waits for the writer and
    /// resets the WAL to zero bytes.
    pub fn checkpoint(&self, truncate: bool) -> Result<(), StoreError> {
        let mode = if truncate { "TRUNCATE" } else { "PASSIVE" };
        self.conn
            .query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(()))
            .map_err(store_error)
    }

    /// Size of the WAL file, bytes (0 when absent).
    pub fn wal_len(&self) -> u64 {
        let mut wal = self.path.as_os_str().to_owned();
        wal.push("-wal");
        std::fs::metadata(wal).map_or(0, |m| m.len())
    }

    fn insert_all(&mut self, runs: &[NewRun]) -> rusqlite::Result<Vec<Inserted>> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut outcomes = Vec::with_capacity(runs.len());
        {
            let mut insert_run = tx.prepare_cached(
                "INSERT INTO runs (id, group_name, program, start_unix_ns, duration_ns, exit_kind, \
                 exit_value, arch, processes, threads, events, window_index, spool_dropped, \
                 truncated, facts, received_unix_ns, raw, device, stream, window_ns, \
                 cpu_user_ns, cpu_system_ns, in_flight, peers_folded, kind) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, \
                 ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25) \
                 ON CONFLICT (id) DO NOTHING",
            )?;
            let mut insert_peer = tx.prepare_cached(
                "INSERT INTO peers (run, transport, address, port, calls, bytes, total_ns, errors, \
                 last_syscall, last_result, last_end_unix_ns) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?;
            // The device's facts follow its most recent run (by start), so a
            // spool uploaded out of order does not roll them back.
            let mut upsert_device = tx.prepare_cached(
                "INSERT INTO devices (group_name, device, first_seen_unix_ns, last_seen_unix_ns, \
                 last_start_unix_ns, last_program, facts, runs, windows) \
                 VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6, ?7, ?8) \
                 ON CONFLICT (group_name, device) DO UPDATE SET \
                 first_seen_unix_ns = min(first_seen_unix_ns, excluded.first_seen_unix_ns), \
                 last_seen_unix_ns = max(last_seen_unix_ns, excluded.last_seen_unix_ns), \
                 last_program = CASE WHEN excluded.last_start_unix_ns >= last_start_unix_ns \
                     THEN excluded.last_program ELSE last_program END, \
                 facts = CASE WHEN excluded.last_start_unix_ns >= last_start_unix_ns \
                     THEN excluded.facts ELSE facts END, \
                 last_start_unix_ns = max(last_start_unix_ns, excluded.last_start_unix_ns), \
                 runs = runs + excluded.runs, windows = windows + excluded.windows",
            )?;
            let mut group_of = tx.prepare_cached("SELECT group_name FROM runs WHERE id = ?1")?;
            // A full run traced for a directive counts towards it (only the
            // device it was issued to, in its group, can fulfil it).
            let mut count_directive = tx.prepare_cached(
                "UPDATE device_directives SET received = received + 1 \
                 WHERE id = ?1 AND group_name = ?2 AND device = ?3",
            )?;
            let mut insert_syscall = tx.prepare_cached(
                "INSERT INTO syscalls (run, syscall, fd_kind, count, errors, total_ns, min_ns, \
                 max_ns, mean_ns, consecutive, gap_mean_ns, result_mean, param_mean) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            )?;
            for run in runs {
                let id = run.id.to_string();
                let (exit_kind, exit_value) = exit_columns(run.exit);
                let changed = insert_run.execute(params![
                    id,
                    run.group,
                    run.program,
                    sql_int(run.start_unix_ns),
                    sql_int(run.duration_ns),
                    exit_kind,
                    exit_value,
                    run.arch,
                    run.processes,
                    run.threads,
                    sql_int(run.events),
                    run.window,
                    run.spool_dropped,
                    run.truncated,
                    run.facts_json,
                    sql_int(run.received_unix_ns),
                    run.raw,
                    run.device.as_ref().map(ToString::to_string),
                    run.stream.as_ref().map(ToString::to_string),
                    sql_int(run.window_ns),
                    run.cpu.map(|c| sql_int(c.user_ns)),
                    run.cpu.map(|c| sql_int(c.system_ns)),
                    run.in_flight,
                    run.peers_folded,
                    super::kind_name(run.kind),
                ])?;
                if changed == 0 {
                    let group: String = group_of.query_row([&id], |r| r.get(0))?;
                    outcomes.push(if group == run.group {
                        Inserted::Repeat
                    } else {
                        Inserted::IdTaken
                    });
                    continue;
                }
                let seq = tx.last_insert_rowid();
                for s in &run.syscalls {
                    insert_syscall.execute(params![
                        seq,
                        s.syscall,
                        s.fd_kind,
                        sql_int(s.count),
                        sql_int(s.errors),
                        sql_int(s.total_ns),
                        sql_int(s.min_ns),
                        sql_int(s.max_ns),
                        s.mean_ns,
                        sql_int(s.consecutive),
                        s.gap_mean_ns,
                        s.result_mean,
                        s.param_mean,
                    ])?;
                }
                for p in &run.peers {
                    insert_peer.execute(params![
                        seq,
                        p.transport,
                        p.address,
                        p.port,
                        sql_int(p.calls),
                        sql_int(p.bytes),
                        sql_int(p.total_ns),
                        sql_int(p.errors),
                        p.last_syscall,
                        p.last_result,
                        p.last_end_unix_ns.map(sql_int),
                    ])?;
                }
                if let (Some(directive), Some(device)) = (run.directive, &run.device) {
                    count_directive.execute(params![directive, run.group, device.to_string()])?;
                }
                if let Some(device) = &run.device {
                    let whole = i64::from(run.window == 0);
                    upsert_device.execute(params![
                        run.group,
                        device.to_string(),
                        sql_int(run.received_unix_ns),
                        sql_int(run.start_unix_ns),
                        run.program,
                        run.facts_json,
                        whole,
                        1 - whole,
                    ])?;
                }
                outcomes.push(Inserted::Stored);
            }
        }
        tx.commit()?;
        Ok(outcomes)
    }

    fn prune_once(
        &mut self,
        before_unix_ns: u64,
        keep_raw: bool,
        batch: u32,
    ) -> rusqlite::Result<u64> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let seqs: Vec<i64> = {
            // With keep_raw the runs stay: look among the oldest runs that
            // still have rows (run order follows the received time).
            let sql = if keep_raw {
                "SELECT seq FROM runs WHERE received_unix_ns < ?1 AND seq IN \
                 (SELECT DISTINCT run FROM syscalls ORDER BY run LIMIT ?2)"
            } else {
                "SELECT seq FROM runs WHERE received_unix_ns < ?1 \
                 ORDER BY received_unix_ns LIMIT ?2"
            };
            let mut stmt = tx.prepare_cached(sql)?;
            let rows = stmt.query_map(params![sql_int(before_unix_ns), batch], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        if !seqs.is_empty() {
            // Integers read from the database: safe to write into the SQL.
            let list = seqs
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(",");
            tx.execute(&format!("DELETE FROM syscalls WHERE run IN ({list})"), [])?;
            tx.execute(&format!("DELETE FROM peers WHERE run IN ({list})"), [])?;
            if !keep_raw {
                tx.execute(&format!("DELETE FROM runs WHERE seq IN ({list})"), [])?;
            }
        }
        tx.commit()?;
        Ok(seqs.len() as u64)
    }

    fn select_runs<T>(
        &mut self,
        columns: &str,
        filter: &RunFilter,
        map: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<Vec<T>> {
        let mut sql = format!("SELECT {columns} FROM runs WHERE 1 = 1");
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        if let Some(g) = &filter.group {
            args.push(g.clone().into());
            // With a device or stream, their index finds the few rows: the
            // unary `+` keeps SQLite from walking the whole group's index
            // instead (it has no statistics to tell which is narrower).
            let column = if filter.device.is_some() || filter.stream.is_some() {
                "+group_name"
            } else {
                "group_name"
            };
            sql.push_str(&format!(" AND {column} = ?{}", args.len()));
        }
        if let Some(p) = &filter.program {
            args.push(p.clone().into());
            sql.push_str(&format!(" AND program = ?{}", args.len()));
        }
        if let Some(t) = filter.since_unix_ns {
            args.push(sql_int(t).into());
            sql.push_str(&format!(" AND start_unix_ns >= ?{}", args.len()));
        }
        if let Some(t) = filter.until_unix_ns {
            args.push(sql_int(t).into());
            sql.push_str(&format!(" AND start_unix_ns < ?{}", args.len()));
        }
        for (column, id) in filter.id_texts() {
            match id {
                // All zero: the runs that carry no such id (stored as NULL).
                Some(None) => sql.push_str(&format!(" AND {column} IS NULL")),
                Some(Some(id)) => {
                    args.push(id.into());
                    sql.push_str(&format!(" AND {column} = ?{}", args.len()));
                }
                None => {}
            }
        }
        if let Some(kind) = filter.kind {
            args.push(super::kind_name(kind).to_string().into());
            sql.push_str(&format!(" AND kind = ?{}", args.len()));
        }
        if filter.whole_runs {
            sql.push_str(" AND window_index = 0");
        }
        // A count has one row: nothing to order.
        if columns != super::rows::COUNT_COLUMN {
            sql.push_str(if filter.newest_first {
                " ORDER BY start_unix_ns DESC, seq DESC"
            } else {
                " ORDER BY start_unix_ns, seq"
            });
        }
        if let Some(n) = filter.limit {
            args.push(sql_int(n).into());
            sql.push_str(&format!(" LIMIT ?{}", args.len()));
        }
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args), map)?;
        rows.collect()
    }
}

/// Brings the file to [`SCHEMA_VERSION`] in one transaction (a new file
/// gets version 1, then every migration). The version is read inside the
/// transaction, so connections opened at once migrate only once.
fn migrate(conn: &mut Connection) -> anyhow::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        anyhow::bail!(
            "schema version {version} is newer than this edge-service's ({SCHEMA_VERSION})"
        );
    }
    if version < 1 {
        // IF NOT EXISTS: files made before the version was recorded.
        tx.execute_batch(SCHEMA_1)?;
    }
    for (from, step) in (1..).zip(MIGRATIONS) {
        if version <= from {
            tx.execute_batch(step)?;
        }
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}

/// SQLite integers are signed 64-bit: larger values (never produced by a
/// real device, but a summary may claim them) are stored as `i64::MAX`. The
/// raw blob keeps the exact value.
fn sql_int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// SQLite's rows as the shared mappers read them (`columns.rs`).
impl Columns for Row<'_> {
    type Error = rusqlite::Error;

    fn int(&self, i: usize) -> rusqlite::Result<i64> {
        self.get(i)
    }

    fn opt_int(&self, i: usize) -> rusqlite::Result<Option<i64>> {
        self.get(i)
    }

    fn opt_i32(&self, i: usize) -> rusqlite::Result<Option<i32>> {
        self.get(i)
    }

    fn float(&self, i: usize) -> rusqlite::Result<f64> {
        self.get(i)
    }

    fn text(&self, i: usize) -> rusqlite::Result<String> {
        self.get(i)
    }

    fn opt_text(&self, i: usize) -> rusqlite::Result<Option<String>> {
        self.get(i)
    }

    fn boolean(&self, i: usize) -> rusqlite::Result<bool> {
        self.get(i)
    }

    fn bad_cause(i: usize, text: &str) -> rusqlite::Error {
        rusqlite::Error::FromSqlConversionFailure(
            i,
            rusqlite::types::Type::Text,
            format!("incident cause `{text}` is not one this edge-service knows").into(),
        )
    }

    fn bad_id(i: usize, text: &str) -> rusqlite::Error {
        rusqlite::Error::FromSqlConversionFailure(
            i,
            rusqlite::types::Type::Text,
            format!("id `{text}` is not 32 hex digits").into(),
        )
    }
}

/// Busy and locked mean "try again later"; everything else is a failure.
fn store_error(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StoreError::Busy(e.to_string())
        }
        _ => StoreError::Failed(e.to_string()),
    }
}

impl Store for SqliteStore {
    fn insert_runs(&mut self, runs: &[NewRun]) -> Result<Vec<Inserted>, StoreError> {
        self.insert_all(runs).map_err(store_error)
    }

    fn runs(&mut self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        self.select_runs(RUN_COLUMNS, filter, |r| run_row(r))
            .map_err(store_error)
    }

    fn devices(&mut self, filter: &DeviceFilter) -> Result<Vec<DeviceRow>, StoreError> {
        let mut sql = format!("SELECT {DEVICE_COLUMNS} FROM devices WHERE 1 = 1");
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        if let Some(g) = &filter.group {
            args.push(g.clone().into());
            sql.push_str(&format!(" AND group_name = ?{}", args.len()));
        }
        sql.push_str(" ORDER BY last_seen_unix_ns DESC, device, group_name");
        if let Some(n) = filter.limit {
            args.push(sql_int(n).into());
            sql.push_str(&format!(" LIMIT ?{}", args.len()));
        }
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(rusqlite::params_from_iter(args), |r| device_row(r))?
                    .collect()
            })
            .map_err(store_error)
    }

    fn count_runs(&mut self, filter: &RunFilter) -> Result<u64, StoreError> {
        let all = RunFilter {
            limit: None,
            ..filter.clone()
        };
        let counts = self
            .select_runs(super::rows::COUNT_COLUMN, &all, |r| r.get::<_, i64>(0))
            .map_err(store_error)?;
        Ok(counts.first().map_or(0, |n| (*n).max(0) as u64))
    }

    fn load(&mut self, filter: &RunFilter) -> Result<Vec<StoredRun>, StoreError> {
        self.select_runs("group_name, raw", filter, |r| {
            Ok(StoredRun {
                group: r.get(0)?,
                raw: r.get(1)?,
            })
        })
        .map_err(store_error)
    }

    fn run(&mut self, id: &RunId) -> Result<Option<StoredRun>, StoreError> {
        self.conn
            .prepare_cached("SELECT group_name, raw FROM runs WHERE id = ?1")
            .and_then(|mut s| {
                s.query_row([id.to_string()], |r| {
                    Ok(StoredRun {
                        group: r.get(0)?,
                        raw: r.get(1)?,
                    })
                })
                .optional()
            })
            .map_err(store_error)
    }

    fn directive(&mut self, group: &str) -> Result<Option<Directive>, StoreError> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {GROUP_DIRECTIVE_COLUMNS} FROM directives WHERE group_name = ?1"
            ))
            .and_then(|mut s| s.query_row([group], |r| directive_row(r)).optional())
            .map_err(store_error)
    }

    fn directives(&mut self) -> Result<Vec<Directive>, StoreError> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {GROUP_DIRECTIVE_COLUMNS} FROM directives ORDER BY group_name"
            ))
            .and_then(|mut s| s.query_map([], |r| directive_row(r))?.collect())
            .map_err(store_error)
    }

    fn set_directive(&mut self, d: &Directive) -> Result<(), StoreError> {
        let only = d
            .only
            .as_ref()
            .map(|o| serde_json::to_string(o).unwrap_or_default());
        let programs = d
            .programs
            .as_ref()
            .map(|p| serde_json::to_string(p).unwrap_or_default());
        self.conn
            .execute(
                "INSERT INTO directives (group_name, match_text, only_list, time_window, programs) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (group_name) DO UPDATE SET \
                 match_text = excluded.match_text, only_list = excluded.only_list, \
                 time_window = excluded.time_window, programs = excluded.programs",
                params![d.group, d.match_text, only, d.window, programs],
            )
            .map(|_| ())
            .map_err(store_error)
    }

    /// A passive checkpoint; when the WAL has still grown past
    /// [`WAL_TRUNCATE_LEN`] (the writer never paused long enough for a
    /// passive one to finish), a truncating one, which makes the writer wait
    /// for it once.
    fn housekeeping(&mut self) -> Result<(), StoreError> {
        self.checkpoint(false)?;
        if self.wal_len() > WAL_TRUNCATE_LEN {
            self.checkpoint(true)?;
        }
        Ok(())
    }

    fn add_operator(&mut self, op: &OperatorRow) -> Result<bool, StoreError> {
        self.conn
            .execute(
                "INSERT INTO operators (name, group_name, password_hash, created_unix_ns) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name) DO NOTHING",
                params![
                    op.name,
                    op.group,
                    op.password_hash,
                    sql_int(op.created_unix_ns)
                ],
            )
            .map(|n| n > 0)
            .map_err(store_error)
    }

    fn operator(&mut self, name: &str) -> Result<Option<OperatorRow>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT name, group_name, password_hash, created_unix_ns FROM operators \
                 WHERE name = ?1",
            )
            .and_then(|mut s| s.query_row([name], |r| operator_row(r)).optional())
            .map_err(store_error)
    }

    fn operators(&mut self) -> Result<Vec<OperatorRow>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT name, group_name, password_hash, created_unix_ns FROM operators \
                 ORDER BY name",
            )
            .and_then(|mut s| s.query_map([], |r| operator_row(r))?.collect())
            .map_err(store_error)
    }

    fn remove_operator(&mut self, name: &str) -> Result<bool, StoreError> {
        let tx = self.conn.transaction().map_err(store_error)?;
        tx.execute(
            "DELETE FROM operator_credentials WHERE operator = ?1",
            [name],
        )
        .map_err(store_error)?;
        let n = tx
            .execute("DELETE FROM operators WHERE name = ?1", [name])
            .map_err(store_error)?;
        tx.commit().map_err(store_error)?;
        Ok(n > 0)
    }

    fn add_credential(&mut self, c: &Credential) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO operator_credentials (hash, operator, group_name, kind, \
                 created_unix_ns, expires_unix_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    c.hash.as_slice(),
                    c.operator,
                    c.group,
                    c.kind.name(),
                    sql_int(c.created_unix_ns),
                    c.expires_unix_ns.map(sql_int)
                ],
            )
            .map(|_| ())
            .map_err(store_error)
    }

    fn credential(
        &mut self,
        hash: &[u8; 32],
        now_unix_ns: u64,
    ) -> Result<Option<Credential>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT hash, operator, group_name, kind, created_unix_ns, expires_unix_ns \
                 FROM operator_credentials WHERE hash = ?1 \
                 AND (expires_unix_ns IS NULL OR expires_unix_ns > ?2)",
            )
            .and_then(|mut s| {
                s.query_row(params![hash.as_slice(), sql_int(now_unix_ns)], |r| {
                    let stored: Vec<u8> = r.get(0)?;
                    let mut hash = [0u8; 32];
                    if stored.len() == 32 {
                        hash.copy_from_slice(&stored);
                    }
                    let kind: String = r.get(3)?;
                    Ok(Credential {
                        hash,
                        operator: r.get(1)?,
                        group: r.get(2)?,
                        kind: CredentialKind::from_name(&kind),
                        created_unix_ns: r.get::<_, i64>(4)?.max(0) as u64,
                        expires_unix_ns: r.get::<_, Option<i64>>(5)?.map(|v| v.max(0) as u64),
                    })
                })
                .optional()
            })
            .map_err(store_error)
    }

    fn remove_credential(&mut self, hash: &[u8; 32]) -> Result<bool, StoreError> {
        self.conn
            .execute(
                "DELETE FROM operator_credentials WHERE hash = ?1",
                [hash.as_slice()],
            )
            .map(|n| n > 0)
            .map_err(store_error)
    }

    fn revoke_credentials(&mut self, operator: &str, sessions: bool) -> Result<u64, StoreError> {
        let sql = if sessions {
            "DELETE FROM operator_credentials WHERE operator = ?1"
        } else {
            "DELETE FROM operator_credentials WHERE operator = ?1 AND kind = 'api'"
        };
        self.conn
            .execute(sql, [operator])
            .map(|n| n as u64)
            .map_err(store_error)
    }

    fn prune_credentials(&mut self, now_unix_ns: u64) -> Result<u64, StoreError> {
        self.conn
            .execute(
                "DELETE FROM operator_credentials WHERE expires_unix_ns <= ?1",
                [sql_int(now_unix_ns)],
            )
            .map(|n| n as u64)
            .map_err(store_error)
    }

    fn clear_directive(&mut self, group: &str) -> Result<bool, StoreError> {
        self.conn
            .execute("DELETE FROM directives WHERE group_name = ?1", [group])
            .map(|n| n > 0)
            .map_err(store_error)
    }

    fn prune_batch(
        &mut self,
        before_unix_ns: u64,
        keep_raw: bool,
        batch: u32,
    ) -> Result<u64, StoreError> {
        self.prune_once(before_unix_ns, keep_raw, batch)
            .map_err(store_error)
    }

    fn prune_devices(&mut self, before_unix_ns: u64) -> Result<u64, StoreError> {
        self.conn
            .execute(
                "DELETE FROM devices WHERE last_seen_unix_ns < ?1",
                [sql_int(before_unix_ns)],
            )
            .map(|n| n as u64)
            .map_err(store_error)
    }

    fn add_device_directive(&mut self, d: &DeviceDirective) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "INSERT INTO device_directives (group_name, device, program, match_text, runs, \
                 created_unix_ns, expires_unix_ns, issuer) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    d.group,
                    d.device.to_string(),
                    d.program,
                    d.match_text,
                    d.runs,
                    sql_int(d.created_unix_ns),
                    sql_int(d.expires_unix_ns),
                    d.issuer,
                ],
            )
            .map(|_| self.conn.last_insert_rowid())
            .map_err(store_error)
    }

    fn device_directives(
        &mut self,
        group: Option<&str>,
        device: Option<&DeviceId>,
    ) -> Result<Vec<DeviceDirective>, StoreError> {
        let mut sql = format!("SELECT {DIRECTIVE_COLUMNS} FROM device_directives WHERE 1 = 1");
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        if let Some(g) = group {
            args.push(g.to_string().into());
            sql.push_str(&format!(" AND group_name = ?{}", args.len()));
        }
        if let Some(d) = device {
            args.push(d.to_string().into());
            sql.push_str(&format!(" AND device = ?{}", args.len()));
        }
        sql.push_str(" ORDER BY id");
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(rusqlite::params_from_iter(args), |r| {
                    device_directive_row(r)
                })?
                .collect()
            })
            .map_err(store_error)
    }

    fn clear_device_directives(
        &mut self,
        group: &str,
        device: Option<&DeviceId>,
        id: Option<i64>,
    ) -> Result<u64, StoreError> {
        let mut sql = "DELETE FROM device_directives WHERE group_name = ?1".to_string();
        let mut args: Vec<rusqlite::types::Value> = vec![group.to_string().into()];
        if let Some(d) = device {
            args.push(d.to_string().into());
            sql.push_str(&format!(" AND device = ?{}", args.len()));
        }
        if let Some(id) = id {
            args.push(id.into());
            sql.push_str(&format!(" AND id = ?{}", args.len()));
        }
        self.conn
            .execute(&sql, rusqlite::params_from_iter(args))
            .map(|n| n as u64)
            .map_err(store_error)
    }

    fn add_report(&mut self, r: &Report) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "INSERT INTO reports (group_name, program, trigger_kind, status, \
                 detected_unix_ns, created_unix_ns, cluster, devices, headline, text_body, \
                 json_body, html_body) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    r.group,
                    r.program,
                    r.trigger,
                    r.status,
                    sql_int(r.detected_unix_ns),
                    sql_int(r.created_unix_ns),
                    r.cluster,
                    r.devices_json().to_string(),
                    r.headline,
                    r.text,
                    r.json.to_string(),
                    r.html,
                ],
            )
            .map(|_| self.conn.last_insert_rowid())
            .map_err(store_error)
    }

    fn reports(&mut self, group: Option<&str>) -> Result<Vec<Report>, StoreError> {
        let (sql, args): (String, Vec<String>) = match group {
            Some(g) => (
                format!(
                    "SELECT {REPORT_SUMMARY_COLUMNS} FROM reports WHERE group_name = ?1 \
                     ORDER BY id DESC"
                ),
                vec![g.to_string()],
            ),
            None => (
                format!("SELECT {REPORT_SUMMARY_COLUMNS} FROM reports ORDER BY id DESC"),
                Vec::new(),
            ),
        };
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(rusqlite::params_from_iter(args), |r| report_row(r))?
                    .collect()
            })
            .map_err(store_error)
    }

    fn report(&mut self, id: i64) -> Result<Option<Report>, StoreError> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {REPORT_SUMMARY_COLUMNS}, text_body, json_body, html_body \
                 FROM reports WHERE id = ?1"
            ))
            .and_then(|mut s| {
                s.query_row([id], |row| {
                    let json: String = row.get(11)?;
                    Ok(Report {
                        text: row.get(10)?,
                        json: serde_json::from_str(&json).unwrap_or(serde_json::Value::Null),
                        html: row.get(12)?,
                        ..report_row(row)?
                    })
                })
                .optional()
            })
            .map_err(store_error)
    }
    fn add_incident(&mut self, i: &IncidentRow) -> Result<i64, StoreError> {
        let (cause, errno) = cause_columns(&i.cause);
        self.conn
            .execute(
                "INSERT INTO incidents (group_name, program, device, cause, errno, metric, \
                 deviation, first_window_unix_ns, last_window_unix_ns, opened_unix_ns, \
                 closed_unix_ns, evidence) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    i.group,
                    i.program,
                    i.device.to_string(),
                    cause,
                    errno,
                    i.metric,
                    i.deviation,
                    sql_int(i.first_window_unix_ns),
                    sql_int(i.last_window_unix_ns),
                    sql_int(i.opened_unix_ns),
                    i.closed_unix_ns.map(sql_int),
                    i.evidence.to_string(),
                ],
            )
            .map(|_| self.conn.last_insert_rowid())
            .map_err(store_error)
    }

    fn update_incident(&mut self, i: &IncidentRow) -> Result<bool, StoreError> {
        self.conn
            .execute(
                "UPDATE incidents SET metric = ?2, deviation = ?3, last_window_unix_ns = ?4, \
                 closed_unix_ns = ?5, evidence = ?6 WHERE id = ?1",
                params![
                    i.id,
                    i.metric,
                    i.deviation,
                    sql_int(i.last_window_unix_ns),
                    i.closed_unix_ns.map(sql_int),
                    i.evidence.to_string(),
                ],
            )
            .map(|n| n > 0)
            .map_err(store_error)
    }

    fn open_incidents(&mut self, group: Option<&str>) -> Result<Vec<IncidentRow>, StoreError> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE closed_unix_ns IS NULL \
                 AND (?1 IS NULL OR group_name = ?1) ORDER BY id"
            ))
            .and_then(|mut stmt| stmt.query_map([group], |r| incident_row(r))?.collect())
            .map_err(store_error)
    }

    fn recent_incidents(
        &mut self,
        group: Option<&str>,
        limit: u64,
    ) -> Result<Vec<IncidentRow>, StoreError> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE (?1 IS NULL OR group_name = ?1) \
                 ORDER BY opened_unix_ns DESC, id DESC LIMIT ?2"
            ))
            .and_then(|mut stmt| {
                stmt.query_map(params![group, sql_int(limit)], |r| incident_row(r))?
                    .collect()
            })
            .map_err(store_error)
    }

    fn incident(&mut self, id: i64) -> Result<Option<IncidentRow>, StoreError> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE id = ?1"
            ))
            .and_then(|mut s| s.query_row([id], |r| incident_row(r)).optional())
            .map_err(store_error)
    }

    fn incidents(&mut self, f: &IncidentFilter) -> Result<Vec<IncidentRow>, StoreError> {
        // Two statements rather than a parameter, so each state's
        // condition is plain SQL the `incidents_open` index serves.
        let state = if f.open { "IS NULL" } else { "IS NOT NULL" };
        self.conn
            .prepare_cached(&format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE closed_unix_ns {state} \
                 AND (?1 IS NULL OR group_name = ?1) AND (?2 IS NULL OR id < ?2) \
                 ORDER BY id DESC LIMIT ?3"
            ))
            .and_then(|mut stmt| {
                stmt.query_map(params![f.group, f.before_id, sql_int(f.limit)], |r| {
                    incident_row(r)
                })?
                .collect()
            })
            .map_err(store_error)
    }
}

#[cfg(test)]
mod migration_files {
    use super::{MIGRATIONS, SCHEMA_1, SCHEMA_VERSION};

    /// Every file of `migrations/sqlite/` is embedded, in order, and the
    /// last brings a file to [`SCHEMA_VERSION`]: a step added as a file but
    /// not listed here (or the version not raised) fails.
    #[test]
    fn the_embedded_steps_are_the_folder_s_files() {
        let embedded: Vec<&str> = std::iter::once(SCHEMA_1)
            .chain(MIGRATIONS.iter().copied())
            .collect();
        let files = crate::store::migration_files("sqlite");
        assert_eq!(files.len(), embedded.len());
        for (i, ((version, text), step)) in files.iter().zip(&embedded).enumerate() {
            assert_eq!(*version, i as i64 + 1, "file numbers run from 1");
            assert_eq!(text, step, "step {version}");
        }
        assert_eq!(files.last().map(|f| f.0), Some(SCHEMA_VERSION));
    }
}
