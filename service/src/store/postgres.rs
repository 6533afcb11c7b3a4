//! The PostgreSQL store: any number of stateless `edge-service` instances
//! on one database.
//!
//! The client is `tokio-postgres`, driven by one small runtime of this
//! module's own ([`driver`]) behind the synchronous [`Store`] trait: the
//! server already calls stores from threads of their own (the writer, the
//! blocking readers) and keeps its own pool of them ([`super::StoreOpener`]),
//! so a pool crate would add nothing.
//!
//! Idempotency across instances: a batch is inserted with
//! `INSERT ... ON CONFLICT (id) DO NOTHING RETURNING` in one transaction;
//! a concurrent transaction inserting the same id waits for ours and then
//! does nothing, and both find the stored row's group (repeat or id taken).
//! Rows are inserted in id order, then devices in key order, so two
//! instances' transactions lock in one order and cannot deadlock (a
//! deadlock or serialization failure is retried all the same). Durability:
//! every session sets `synchronous_commit = on`, so `COMMIT` returns after
//! the WAL is flushed, and the writer acknowledges only after it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use agent_core::{DeviceId, RunId};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, Row, Statement};

use super::columns::{
    device_directive_row, device_row, directive_row, exit_columns, incident_row, operator_row,
    report_row, run_row, Columns, DEVICE_COLUMNS, DIRECTIVE_COLUMNS, GROUP_DIRECTIVE_COLUMNS,
    INCIDENT_COLUMNS, REPORT_SUMMARY_COLUMNS, RUN_COLUMNS,
};
use super::redact::redact_passwords;
use super::{cause_columns, DeviceDirective, IncidentFilter, IncidentRow, Report};
use super::{
    DeviceFilter, DeviceRow, Inserted, NewRun, RunFilter, RunRow, Store, StoreError, StoredRun,
    SCHEMA_VERSION,
};
use crate::directive::Directive;
use crate::operators::{Credential, CredentialKind, OperatorRow};

/// Migrations by the version they bring a database to. PostgreSQL support
/// began at version 2: an empty database gets every step from there.
const MIGRATIONS: &[(i32, &str)] = &[
    (2, include_str!("../../migrations/postgres/0002_schema.sql")),
    (
        3,
        include_str!("../../migrations/postgres/0003_retention.sql"),
    ),
    (
        4,
        include_str!("../../migrations/postgres/0004_proactive.sql"),
    ),
    (5, include_str!("../../migrations/postgres/0005_webui.sql")),
    (
        6,
        include_str!("../../migrations/postgres/0006_directive_programs.sql"),
    ),
    (
        7,
        include_str!("../../migrations/postgres/0007_operators.sql"),
    ),
    (
        8,
        include_str!("../../migrations/postgres/0008_incidents.sql"),
    ),
];

/// Key of the advisory lock that serialises instances migrating at once.
const MIGRATION_LOCK: i64 = 0x6564_6765_5f73_7663;

/// The live peer analysis' advisory lock (two-key form, so that
/// `pg_locks` shows it as classid/objid): "edge", "onln".
const ONLINE_LOCK: (i32, i32) = (0x6564_6765, 0x6f6e_6c6e);

/// Attempts of a transaction that lost a deadlock or serialization check.
const TRANSACTION_ATTEMPTS: u32 = 5;

/// The runtime every PostgreSQL connection of this process runs on (its
/// connection tasks; callers block on their queries from their own threads).
fn driver() -> Result<&'static tokio::runtime::Runtime, StoreError> {
    static DRIVER: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("postgres-driver")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the PostgreSQL client's runtime: {e}"))
        })
        .as_ref()
        .map_err(|e| StoreError::Failed(e.clone()))
}

/// The pause before the first reconnect attempt after one failed; it
/// doubles with each failure up to [`MAX_RECONNECT_PAUSE`].
const FIRST_RECONNECT_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between two reconnect attempts: it bounds how long
/// ingest stays down after the database is back.
const MAX_RECONNECT_PAUSE: Duration = Duration::from_secs(2);
/// How long a connection attempt may take when the URL sets no
/// `connect_timeout`: a writer thread must not hang on an unreachable host.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection to a PostgreSQL store. It outlives its database's outages:
/// a lost connection is dropped with its prepared statements and reopened
/// at the next use, with back-off while the database stays unreachable.
pub struct PgStore {
    /// The open connection; `None` once it was lost.
    live: Option<Live>,
    config: Config,
    tls: Tls,
    reconnect: Reconnect,
    label: String,
}

/// An open connection and the statements prepared on it (a statement
/// belongs to the connection that prepared it: they go together).
struct Live {
    client: Client,
    /// Prepared statements by their text (the dynamic filters make a few).
    statements: HashMap<String, Statement>,
}

/// When the next reconnect may be tried, after failed ones.
#[derive(Debug, Default)]
struct Reconnect {
    /// Not before this; `None`: at once.
    not_before: Option<Instant>,
    /// The pause after the next failure.
    pause: Duration,
    /// Why the last attempt failed (for the 503's message).
    last_error: String,
}

/// How a connection uses TLS (`sslmode`).
#[derive(Clone)]
enum Tls {
    /// No `sslmode`, or `disable`: plain.
    Off,
    /// `require`, `verify-ca`, `verify-full`: TLS with the certificate
    /// checked, or no connection.
    Require(tokio_postgres_rustls::MakeRustlsConnect),
    /// `prefer` (libpq's meaning): TLS when the server offers it, else
    /// plain, with a warning naming the server.
    Prefer(tokio_postgres_rustls::MakeRustlsConnect),
}

/// Whether an operation may be run again after the connection was lost
/// under it (the server may or may not have done it).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Repeat {
    /// Reads, and writes whose second run changes nothing (the insert of
    /// runs: `ON CONFLICT (id) DO NOTHING`).
    Safe,
    /// Writes that would be done twice (a new directive, a report).
    Once,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("db", &self.label)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to `url` and brings its schema to [`SCHEMA_VERSION`].
    ///
    /// `sslmode=require` (or `verify-ca`, `verify-full`) connects over TLS
    /// with the server's certificate checked against the web's roots and
    /// the PEM file of `sslrootcert=FILE` if given, or not at all;
    /// `sslmode=prefer` tries TLS and, when the server does not offer it
    /// (or the handshake fails), connects without it and prints a warning;
    /// without `sslmode` (or `disable`) the connection is plain. The
    /// password may come from `$PGPASSWORD` instead of the URL; no message
    /// shows it.
    pub fn connect(url: &str) -> anyhow::Result<PgStore> {
        let label = redact_passwords(url);
        let secret = Secret::of(url);
        let hide = |e: anyhow::Error| anyhow::anyhow!("{}", secret.hide(&format!("{e:#}")));
        let (config, tls) = parse_url(url)
            .map_err(|e| e.context(format!("database {label}")))
            .map_err(hide)?;
        let mut client = open_client(driver()?, &config, &tls, &label)
            .map_err(|e| anyhow::anyhow!("cannot connect to database {label}: {}", pg_text(&e)))
            .map_err(hide)?;
        migrate(&mut client)
            .map_err(|e| e.context(format!("cannot create the schema in {label}")))
            .map_err(hide)?;
        Ok(PgStore {
            live: Some(Live {
                client,
                statements: HashMap::new(),
            }),
            config,
            tls,
            reconnect: Reconnect::default(),
            label,
        })
    }

    /// The schema version of the database.
    pub fn schema_version(&mut self) -> Result<i32, StoreError> {
        let row = self.query_one("SELECT version FROM edge_service_schema", &[])?;
        Ok(row.get(0))
    }

    /// The open connection, reopened first if it was lost (the database
    /// restarted). While reopening fails, the attempts are spaced by a
    /// doubling pause (up to [`MAX_RECONNECT_PAUSE`]) and a call between two
    /// attempts fails at once as busy: the caller answers 503.
    fn live(&mut self) -> Result<&mut Live, StoreError> {
        if self.live.as_ref().is_some_and(|l| l.client.is_closed()) {
            self.live = None;
        }
        if self.live.is_none() {
            let now = Instant::now();
            if let Some(at) = self.reconnect.not_before.filter(|at| *at > now) {
                return Err(StoreError::Busy(format!(
                    "database {} unreachable ({}); next attempt in {} ms",
                    self.label,
                    self.reconnect.last_error,
                    (at - now).as_millis()
                )));
            }
            match open_client(driver()?, &self.config, &self.tls, &self.label) {
                Ok(client) => {
                    self.reconnect = Reconnect::default();
                    self.live = Some(Live {
                        client,
                        statements: HashMap::new(),
                    });
                }
                Err(e) => {
                    let pause = self.reconnect.pause.max(FIRST_RECONNECT_PAUSE);
                    self.reconnect = Reconnect {
                        not_before: Some(now + pause),
                        pause: (pause * 2).min(MAX_RECONNECT_PAUSE),
                        last_error: pg_text(&e),
                    };
                    return Err(StoreError::Busy(format!(
                        "database {} unreachable: {}",
                        self.label, self.reconnect.last_error
                    )));
                }
            }
        }
        self.live
            .as_mut()
            .ok_or_else(|| StoreError::Busy("no connection".into()))
    }

    /// Runs `op` on the open connection. When the connection turns out to
    /// be lost under it, it is dropped (the next call reopens it) and, if
    /// `repeat` allows, `op` runs once more on a new one: the first request
    /// after the database came back succeeds.
    fn with_connection<T>(
        &mut self,
        repeat: Repeat,
        mut op: impl FnMut(&mut Live, &tokio::runtime::Runtime) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, StoreError> {
        let runtime = driver()?;
        let mut again = repeat == Repeat::Safe;
        loop {
            let live = self.live()?;
            match op(live, runtime) {
                Ok(value) => return Ok(value),
                Err(e) => {
                    if !connection_lost(&e, &live.client) {
                        return Err(pg_error(e));
                    }
                    self.live = None;
                    if !again {
                        return Err(pg_error(e));
                    }
                    again = false;
                }
            }
        }
    }

    fn query(&mut self, sql: &str, args: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, StoreError> {
        self.with_connection(Repeat::Safe, |live, runtime| {
            let statement = live.statement(runtime, sql)?;
            runtime.block_on(live.client.query(&statement, args))
        })
    }

    /// One row of a statement that writes (not run twice).
    fn query_one(&mut self, sql: &str, args: &[&(dyn ToSql + Sync)]) -> Result<Row, StoreError> {
        self.with_connection(Repeat::Once, |live, runtime| {
            let statement = live.statement(runtime, sql)?;
            runtime.block_on(live.client.query_one(&statement, args))
        })
    }

    fn execute(&mut self, sql: &str, args: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError> {
        self.with_connection(Repeat::Once, |live, runtime| {
            let statement = live.statement(runtime, sql)?;
            runtime.block_on(live.client.execute(&statement, args))
        })
    }

    fn select_runs(&mut self, columns: &str, filter: &RunFilter) -> Result<Vec<Row>, StoreError> {
        let mut sql = format!("SELECT {columns} FROM runs WHERE TRUE");
        let mut texts: Vec<String> = Vec::new();
        let mut ints: Vec<i64> = Vec::new();
        // Placeholders are numbered texts first, then integers.
        let mut text_conditions: Vec<String> = Vec::new();
        let mut int_conditions: Vec<(&str, i64)> = Vec::new();
        if let Some(g) = &filter.group {
            texts.push(g.clone());
            text_conditions.push("group_name".into());
        }
        if let Some(p) = &filter.program {
            texts.push(p.clone());
            text_conditions.push("program".into());
        }
        if let Some(kind) = filter.kind {
            texts.push(super::kind_name(kind).to_string());
            text_conditions.push("kind".into());
        }
        for (column, id) in filter.id_texts() {
            match id {
                // All zero: the runs that carry no such id (stored as NULL).
                Some(None) => sql.push_str(&format!(" AND {column} IS NULL")),
                Some(Some(id)) => {
                    texts.push(id);
                    text_conditions.push(column.into());
                }
                None => {}
            }
        }
        if filter.whole_runs {
            sql.push_str(" AND window_index = 0");
        }
        if let Some(t) = filter.since_unix_ns {
            int_conditions.push(("start_unix_ns >=", sql_int(t)));
        }
        if let Some(t) = filter.until_unix_ns {
            int_conditions.push(("start_unix_ns <", sql_int(t)));
        }
        for (n, column) in text_conditions.iter().enumerate() {
            sql.push_str(&format!(" AND {column} = ${}", n + 1));
        }
        for (n, (condition, value)) in int_conditions.iter().enumerate() {
            sql.push_str(&format!(" AND {condition} ${}", texts.len() + n + 1));
            ints.push(*value);
        }
        // A count has one row, and PostgreSQL refuses to order an
        // aggregate by a column.
        if columns != super::rows::COUNT_COLUMN {
            sql.push_str(if filter.newest_first {
                " ORDER BY start_unix_ns DESC, seq DESC"
            } else {
                " ORDER BY start_unix_ns, seq"
            });
        }
        if let Some(n) = filter.limit {
            ints.push(sql_int(n));
            sql.push_str(&format!(" LIMIT ${}", texts.len() + ints.len()));
        }
        let mut args: Vec<&(dyn ToSql + Sync)> = Vec::new();
        args.extend(texts.iter().map(|t| t as &(dyn ToSql + Sync)));
        args.extend(ints.iter().map(|i| i as &(dyn ToSql + Sync)));
        self.query(&sql, &args)
    }
}

impl Live {
    /// The statement of `sql`, prepared on this connection once.
    fn statement(
        &mut self,
        runtime: &tokio::runtime::Runtime,
        sql: &str,
    ) -> Result<Statement, tokio_postgres::Error> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let statement = runtime.block_on(self.client.prepare(sql))?;
        self.statements.insert(sql.to_string(), statement.clone());
        Ok(statement)
    }

    /// The statements of an insert transaction, prepared once per
    /// connection.
    fn insert_statements(
        &mut self,
        runtime: &tokio::runtime::Runtime,
    ) -> Result<InsertStatements, tokio_postgres::Error> {
        Ok(InsertStatements {
            runs: self.statement(runtime, INSERT_RUNS)?,
            groups: self.statement(
                runtime,
                "SELECT id, group_name FROM runs WHERE id = ANY($1::text[])",
            )?,
            syscalls: self.statement(runtime, INSERT_SYSCALLS)?,
            peers: self.statement(runtime, INSERT_PEERS)?,
            devices: self.statement(runtime, UPSERT_DEVICES)?,
            directives: self.statement(runtime, COUNT_DIRECTIVES)?,
        })
    }

    /// The rows of one insert transaction; see the module's comment. The
    /// syscall, peer and device rows go in one pipelined round trip.
    fn insert_once(
        &mut self,
        runtime: &tokio::runtime::Runtime,
        statements: &InsertStatements,
        runs: &[NewRun],
    ) -> Result<Vec<Inserted>, tokio_postgres::Error> {
        let batch = Batch::new(runs);
        let columns = RunColumns::of(runs, &batch.order);
        let client = &mut self.client;
        runtime.block_on(async {
            let tx = client.transaction().await?;
            let inserted = tx.query(&statements.runs, &columns.args()).await?;
            let seqs: HashMap<String, i64> = inserted
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
                .collect();
            let others: Vec<&str> = batch
                .ids
                .iter()
                .filter(|id| !seqs.contains_key(id.as_str()))
                .map(String::as_str)
                .collect();
            let rows = ChildRows::of(runs, &batch.order, &seqs);
            let devices = DeviceUpdates::of(runs, &batch.order, &seqs);
            let (syscall_args, peer_args, device_args) =
                (rows.syscall_args(), rows.peer_args(), devices.args());
            let (groups, _, _, _) = tokio::try_join!(
                async {
                    if others.is_empty() {
                        Ok(Vec::new())
                    } else {
                        tx.query(&statements.groups, &[&others]).await
                    }
                },
                async {
                    if rows.syscall_runs.is_empty() {
                        Ok(0)
                    } else {
                        tx.execute(&statements.syscalls, &syscall_args).await
                    }
                },
                async {
                    if rows.peer_runs.is_empty() {
                        Ok(0)
                    } else {
                        tx.execute(&statements.peers, &peer_args).await
                    }
                },
                async {
                    if devices.groups.is_empty() {
                        Ok(0)
                    } else {
                        tx.execute(&statements.devices, &device_args).await
                    }
                },
            )?;
            let groups: HashMap<String, String> =
                groups.iter().map(|r| (r.get(0), r.get(1))).collect();
            let counts = DirectiveCounts::of(runs, &batch.order, &seqs);
            if !counts.ids.is_empty() {
                tx.execute(&statements.directives, &counts.args()).await?;
            }
            tx.commit().await?;
            Ok(batch.outcomes(runs, &seqs, &groups))
        })
    }
}

/// The statements of [`Live::insert_once`].
struct InsertStatements {
    runs: Statement,
    groups: Statement,
    syscalls: Statement,
    peers: Statement,
    devices: Statement,
    directives: Statement,
}

/// A batch's runs, first copy of each id, in id order; the ids inserted
/// come back with their `seq`.
const INSERT_RUNS: &str = "INSERT INTO runs (id, group_name, program, start_unix_ns, \
    duration_ns, exit_kind, exit_value, arch, processes, threads, events, window_index, \
    spool_dropped, truncated, facts, received_unix_ns, raw, device, stream, window_ns, \
    cpu_user_ns, cpu_system_ns, in_flight, peers_folded, kind) \
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[], \
    $6::text[], $7::int4[], $8::text[], $9::int8[], $10::int8[], $11::int8[], $12::int8[], \
    $13::int8[], $14::bool[], $15::text[], $16::int8[], $17::bytea[], $18::text[], $19::text[], \
    $20::int8[], $21::int8[], $22::int8[], $23::int8[], $24::int8[], $25::text[]) \
    ON CONFLICT (id) DO NOTHING RETURNING id, seq";

/// A full run traced for a directive counts towards it (only the device it
/// was issued to, in its group, can fulfil it). The ids come in id order,
/// so two instances lock the directives' rows in one order.
const COUNT_DIRECTIVES: &str = "UPDATE device_directives d SET received = d.received + u.n \
    FROM (SELECT id, group_name, device, count(*) AS n FROM unnest($1::int8[], $2::text[], \
    $3::text[]) AS t (id, group_name, device) GROUP BY id, group_name, device ORDER BY id) u \
    WHERE d.id = u.id AND d.group_name = u.group_name AND d.device = u.device";

const INSERT_SYSCALLS: &str = "INSERT INTO syscalls (run, syscall, fd_kind, count, errors, \
    total_ns, min_ns, max_ns, mean_ns, consecutive, gap_mean_ns, result_mean, param_mean) \
    SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::int8[], $5::int8[], \
    $6::int8[], $7::int8[], $8::int8[], $9::float8[], $10::int8[], $11::float8[], \
    $12::float8[], $13::float8[])";

const INSERT_PEERS: &str = "INSERT INTO peers (run, transport, address, port, calls, bytes, \
    total_ns, errors, last_syscall, last_result, last_end_unix_ns) \
    SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::int4[], $5::int8[], \
    $6::int8[], $7::int8[], $8::int8[], $9::text[], $10::int8[], $11::int8[])";

/// The device's facts follow its most recent run (by start), so a spool
/// uploaded out of order does not roll them back.
const UPSERT_DEVICES: &str = "INSERT INTO devices (group_name, device, first_seen_unix_ns, \
    last_seen_unix_ns, last_start_unix_ns, last_program, facts, runs, windows) \
    SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[], \
    $6::text[], $7::text[], $8::int8[], $9::int8[]) \
    ON CONFLICT (group_name, device) DO UPDATE SET \
    first_seen_unix_ns = least(devices.first_seen_unix_ns, excluded.first_seen_unix_ns), \
    last_seen_unix_ns = greatest(devices.last_seen_unix_ns, excluded.last_seen_unix_ns), \
    last_program = CASE WHEN excluded.last_start_unix_ns >= devices.last_start_unix_ns \
        THEN excluded.last_program ELSE devices.last_program END, \
    facts = CASE WHEN excluded.last_start_unix_ns >= devices.last_start_unix_ns \
        THEN excluded.facts ELSE devices.facts END, \
    last_start_unix_ns = greatest(devices.last_start_unix_ns, excluded.last_start_unix_ns), \
    runs = devices.runs + excluded.runs, windows = devices.windows + excluded.windows";

/// Brings the database to [`SCHEMA_VERSION`] in one transaction, under an
/// advisory lock so that instances started at once migrate once.
fn migrate(client: &mut Client) -> anyhow::Result<()> {
    driver()?.block_on(async {
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS edge_service_schema (version INTEGER NOT NULL)",
        )
        .await?;
        let version: i32 = tx
            .query_opt("SELECT version FROM edge_service_schema", &[])
            .await?
            .map_or(0, |r| r.get(0));
        if i64::from(version) > SCHEMA_VERSION {
            anyhow::bail!(
                "schema version {version} is newer than this edge-service's ({SCHEMA_VERSION})"
            );
        }
        for (to, step) in MIGRATIONS {
            if version < *to {
                tx.batch_execute(step).await?;
            }
        }
        tx.execute("DELETE FROM edge_service_schema", &[]).await?;
        let current = i32::try_from(SCHEMA_VERSION).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO edge_service_schema (version) VALUES ($1)",
            &[&current],
        )
        .await?;
        tx.commit().await?;
        anyhow::Ok(())
    })
}

/// Parses a connection URL: our own `sslrootcert=FILE` is taken out (the
/// client does not know it), `sslmode` read here (see [`Tls`]),
/// `$PGPASSWORD` fills a missing password, and a URL without `sslmode`
/// connects without TLS.
fn parse_url(url: &str) -> anyhow::Result<(Config, Tls)> {
    use anyhow::Context;
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut root_cert = None;
    let mut mode = "disable";
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("sslrootcert", file)) => root_cert = Some(file.to_string()),
            Some(("sslmode", m)) => mode = m,
            _ => kept.push(pair),
        }
    }
    let rebuilt = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let mut config: Config = rebuilt
        .parse()
        .map_err(|e| anyhow::anyhow!("not a valid PostgreSQL URL: {e:#}"))?;
    if config.get_password().is_none() {
        if let Some(password) = std::env::var_os("PGPASSWORD") {
            config.password(password.as_encoded_bytes());
        }
    }
    config.application_name("edge-service");
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    let prefer = match mode {
        "disable" => return Ok((config, Tls::Off)),
        "prefer" => true,
        // Our `require` checks the certificate and the name: libpq's
        // verify-full.
        "require" | "verify-ca" | "verify-full" => false,
        other => anyhow::bail!(
            "sslmode={other} is not supported (disable, prefer, require, verify-ca or verify-full)"
        ),
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(file) = &root_cert {
        use rustls::pki_types::pem::PemObject;
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(file)
            .with_context(|| format!("cannot read sslrootcert {file}"))?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("sslrootcert {file} is not valid PEM"))?;
        if certs.is_empty() {
            anyhow::bail!("sslrootcert {file} holds no certificate");
        }
        for cert in certs {
            roots
                .add(cert)
                .with_context(|| format!("sslrootcert {file}: unusable CA certificate"))?;
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .context("TLS protocol versions")?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_postgres_rustls::MakeRustlsConnect::new(tls);
    Ok((
        config,
        if prefer {
            Tls::Prefer(connector)
        } else {
            Tls::Require(connector)
        },
    ))
}

/// Connects and starts the connection's task on the [`driver`]. With
/// `sslmode=prefer`, a server that does not take TLS gets a plain
/// connection, and standard error a warning naming it (`label`).
fn open_client(
    runtime: &tokio::runtime::Runtime,
    config: &Config,
    tls: &Tls,
    label: &str,
) -> Result<Client, tokio_postgres::Error> {
    use tokio_postgres::config::SslMode;
    let mut config = config.clone();
    let client = match tls {
        Tls::Off => {
            config.ssl_mode(SslMode::Disable);
            connect_plain(runtime, &config)?
        }
        Tls::Require(tls) => {
            config.ssl_mode(SslMode::Require);
            connect_tls(runtime, &config, tls)?
        }
        Tls::Prefer(tls) => {
            config.ssl_mode(SslMode::Require);
            match connect_tls(runtime, &config, tls) {
                Ok(client) => client,
                Err(e) if is_tls_failure(&e) => {
                    warn_plaintext(label, &e);
                    config.ssl_mode(SslMode::Disable);
                    connect_plain(runtime, &config)?
                }
                Err(e) => return Err(e),
            }
        }
    };
    // Acknowledged means on disk: whatever the server's default.
    runtime.block_on(client.batch_execute("SET synchronous_commit TO on"))?;
    Ok(client)
}

fn connect_plain(
    runtime: &tokio::runtime::Runtime,
    config: &Config,
) -> Result<Client, tokio_postgres::Error> {
    runtime.block_on(async {
        let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
        runtime.spawn(connection);
        Ok(client)
    })
}

fn connect_tls(
    runtime: &tokio::runtime::Runtime,
    config: &Config,
    tls: &tokio_postgres_rustls::MakeRustlsConnect,
) -> Result<Client, tokio_postgres::Error> {
    runtime.block_on(async {
        let (client, connection) = config.connect(tls.clone()).await?;
        runtime.spawn(connection);
        Ok(client)
    })
}

/// Tells, once per database and process (reconnects and each reader's
/// connection would repeat it), that `sslmode=prefer` fell back to a plain
/// connection.
fn warn_plaintext(label: &str, e: &tokio_postgres::Error) {
    static WARNED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut warned = WARNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if warned.iter().any(|w| w == label) {
        return;
    }
    warned.push(label.to_string());
    eprintln!(
        "edge-service: warning: database {label}: no TLS ({}); sslmode=prefer connects without it, in plaintext (sslmode=require refuses that)",
        pg_text(e)
    );
}

/// The server did not take TLS (it answered no to the request, or the
/// handshake failed): what `sslmode=prefer` falls back from. The client
/// tells it only in words.
fn is_tls_failure(e: &tokio_postgres::Error) -> bool {
    e.to_string().starts_with("error performing TLS handshake")
}

/// The password of a connection URL, to be hidden from messages that
/// might quote it in another form than the URL's (decoded, say).
struct Secret(Option<String>);

impl Secret {
    fn of(url: &str) -> Secret {
        let password = parse_url(url)
            .ok()
            .and_then(|(config, _)| config.get_password().map(<[u8]>::to_vec))
            .and_then(|p| String::from_utf8(p).ok())
            // Hiding a one- or two-letter password would garble every
            // word holding those letters; such a password is no secret.
            .filter(|p| p.len() >= 3);
        Secret(password)
    }

    fn hide(&self, text: &str) -> String {
        let text = redact_passwords(text);
        match &self.0 {
            Some(p) => text.replace(p.as_str(), "***"),
            None => text,
        }
    }
}

/// A batch's runs in insertion order: the first copy of each id, sorted by
/// id (later copies of an id in the same batch are repeats of it).
struct Batch {
    /// Indices into the runs, in insertion order.
    order: Vec<usize>,
    /// The hex id of every run, by its index.
    ids: Vec<String>,
}

impl Batch {
    fn new(runs: &[NewRun]) -> Batch {
        let ids: Vec<String> = runs.iter().map(|r| r.id.to_string()).collect();
        let mut order: Vec<usize> = (0..runs.len()).collect();
        order.sort_by(|a, b| ids[*a].cmp(&ids[*b]).then(a.cmp(b)));
        order.dedup_by(|later, first| ids[*later] == ids[*first]);
        Batch { order, ids }
    }

    /// One outcome per run, in the runs' order: stored when this very run
    /// was inserted; else a repeat when the id is stored for its group (by
    /// another transaction, or by an earlier copy in this batch), else the
    /// id is taken.
    fn outcomes(
        &self,
        runs: &[NewRun],
        seqs: &HashMap<String, i64>,
        groups: &HashMap<String, String>,
    ) -> Vec<Inserted> {
        let mut inserted_here = vec![false; runs.len()];
        let mut stored_group: HashMap<&str, &str> = HashMap::new();
        for &i in &self.order {
            if seqs.contains_key(&self.ids[i]) {
                inserted_here[i] = true;
                stored_group.insert(&self.ids[i], &runs[i].group);
            }
        }
        runs.iter()
            .enumerate()
            .map(|(i, run)| {
                if inserted_here[i] {
                    return Inserted::Stored;
                }
                let id = self.ids[i].as_str();
                let group = stored_group
                    .get(id)
                    .copied()
                    .or_else(|| groups.get(id).map(String::as_str));
                if group == Some(run.group.as_str()) {
                    Inserted::Repeat
                } else {
                    Inserted::IdTaken
                }
            })
            .collect()
    }
}

/// The `runs` columns of a batch, one array each (inserted with `unnest`).
#[derive(Default)]
struct RunColumns {
    id: Vec<String>,
    group: Vec<String>,
    program: Vec<String>,
    start: Vec<i64>,
    duration: Vec<i64>,
    exit_kind: Vec<&'static str>,
    exit_value: Vec<Option<i32>>,
    arch: Vec<&'static str>,
    processes: Vec<i64>,
    threads: Vec<i64>,
    events: Vec<i64>,
    window: Vec<i64>,
    spool_dropped: Vec<i64>,
    truncated: Vec<bool>,
    facts: Vec<String>,
    received: Vec<i64>,
    raw: Vec<Vec<u8>>,
    device: Vec<Option<String>>,
    stream: Vec<Option<String>>,
    window_ns: Vec<i64>,
    cpu_user: Vec<Option<i64>>,
    cpu_system: Vec<Option<i64>>,
    in_flight: Vec<i64>,
    peers_folded: Vec<i64>,
    kind: Vec<&'static str>,
}

impl RunColumns {
    fn of(runs: &[NewRun], order: &[usize]) -> RunColumns {
        let mut c = RunColumns::default();
        for run in order.iter().map(|&i| &runs[i]) {
            let (exit_kind, exit_value) = exit_columns(run.exit);
            c.id.push(run.id.to_string());
            c.group.push(run.group.clone());
            c.program.push(run.program.clone());
            c.start.push(sql_int(run.start_unix_ns));
            c.duration.push(sql_int(run.duration_ns));
            c.exit_kind.push(exit_kind);
            c.exit_value.push(exit_value);
            c.arch.push(run.arch);
            c.processes.push(i64::from(run.processes));
            c.threads.push(i64::from(run.threads));
            c.events.push(sql_int(run.events));
            c.window.push(i64::from(run.window));
            c.spool_dropped.push(i64::from(run.spool_dropped));
            c.truncated.push(run.truncated);
            c.facts.push(run.facts_json.clone());
            c.received.push(sql_int(run.received_unix_ns));
            c.raw.push(run.raw.clone());
            c.device.push(run.device.as_ref().map(ToString::to_string));
            c.stream.push(run.stream.as_ref().map(ToString::to_string));
            c.window_ns.push(sql_int(run.window_ns));
            c.cpu_user.push(run.cpu.map(|t| sql_int(t.user_ns)));
            c.cpu_system.push(run.cpu.map(|t| sql_int(t.system_ns)));
            c.in_flight.push(i64::from(run.in_flight));
            c.peers_folded.push(i64::from(run.peers_folded));
            c.kind.push(super::kind_name(run.kind));
        }
        c
    }

    fn args(&self) -> [&(dyn ToSql + Sync); 25] {
        [
            &self.id,
            &self.group,
            &self.program,
            &self.start,
            &self.duration,
            &self.exit_kind,
            &self.exit_value,
            &self.arch,
            &self.processes,
            &self.threads,
            &self.events,
            &self.window,
            &self.spool_dropped,
            &self.truncated,
            &self.facts,
            &self.received,
            &self.raw,
            &self.device,
            &self.stream,
            &self.window_ns,
            &self.cpu_user,
            &self.cpu_system,
            &self.in_flight,
            &self.peers_folded,
            &self.kind,
        ]
    }
}

/// The directives the runs inserted were traced for, one array per
/// column of [`COUNT_DIRECTIVES`].
#[derive(Default)]
struct DirectiveCounts {
    ids: Vec<i64>,
    groups: Vec<String>,
    devices: Vec<String>,
}

impl DirectiveCounts {
    fn of(runs: &[NewRun], order: &[usize], seqs: &HashMap<String, i64>) -> DirectiveCounts {
        let mut c = DirectiveCounts::default();
        for run in order.iter().map(|&i| &runs[i]) {
            if let (Some(id), Some(device)) = (run.directive, &run.device) {
                if seqs.contains_key(&run.id.to_string()) {
                    c.ids.push(id);
                    c.groups.push(run.group.clone());
                    c.devices.push(device.to_string());
                }
            }
        }
        c
    }

    fn args(&self) -> [&(dyn ToSql + Sync); 3] {
        [&self.ids, &self.groups, &self.devices]
    }
}

/// The `syscalls` and `peers` rows of the runs inserted, one array per
/// column.
#[derive(Default)]
struct ChildRows {
    syscall_runs: Vec<i64>,
    syscall: Vec<String>,
    fd_kind: Vec<&'static str>,
    count: Vec<i64>,
    errors: Vec<i64>,
    total_ns: Vec<i64>,
    min_ns: Vec<i64>,
    max_ns: Vec<i64>,
    mean_ns: Vec<f64>,
    consecutive: Vec<i64>,
    gap_mean_ns: Vec<f64>,
    result_mean: Vec<f64>,
    param_mean: Vec<Option<f64>>,
    peer_runs: Vec<i64>,
    transport: Vec<&'static str>,
    address: Vec<String>,
    port: Vec<i32>,
    calls: Vec<i64>,
    bytes: Vec<i64>,
    peer_total_ns: Vec<i64>,
    peer_errors: Vec<i64>,
    last_syscall: Vec<Option<String>>,
    last_result: Vec<Option<i64>>,
    last_end: Vec<Option<i64>>,
}

impl ChildRows {
    fn of(runs: &[NewRun], order: &[usize], seqs: &HashMap<String, i64>) -> ChildRows {
        let mut c = ChildRows::default();
        for run in order.iter().map(|&i| &runs[i]) {
            let Some(&seq) = seqs.get(&run.id.to_string()) else {
                continue;
            };
            for s in &run.syscalls {
                c.syscall_runs.push(seq);
                c.syscall.push(s.syscall.clone());
                c.fd_kind.push(s.fd_kind);
                c.count.push(sql_int(s.count));
                c.errors.push(sql_int(s.errors));
                c.total_ns.push(sql_int(s.total_ns));
                c.min_ns.push(sql_int(s.min_ns));
                c.max_ns.push(sql_int(s.max_ns));
                c.mean_ns.push(s.mean_ns);
                c.consecutive.push(sql_int(s.consecutive));
                c.gap_mean_ns.push(s.gap_mean_ns);
                c.result_mean.push(s.result_mean);
                c.param_mean.push(s.param_mean);
            }
            for p in &run.peers {
                c.peer_runs.push(seq);
                c.transport.push(p.transport);
                c.address.push(p.address.clone());
                c.port.push(i32::from(p.port));
                c.calls.push(sql_int(p.calls));
                c.bytes.push(sql_int(p.bytes));
                c.peer_total_ns.push(sql_int(p.total_ns));
                c.peer_errors.push(sql_int(p.errors));
                c.last_syscall.push(p.last_syscall.clone());
                c.last_result.push(p.last_result);
                c.last_end.push(p.last_end_unix_ns.map(sql_int));
            }
        }
        c
    }

    fn syscall_args(&self) -> [&(dyn ToSql + Sync); 13] {
        [
            &self.syscall_runs,
            &self.syscall,
            &self.fd_kind,
            &self.count,
            &self.errors,
            &self.total_ns,
            &self.min_ns,
            &self.max_ns,
            &self.mean_ns,
            &self.consecutive,
            &self.gap_mean_ns,
            &self.result_mean,
            &self.param_mean,
        ]
    }

    fn peer_args(&self) -> [&(dyn ToSql + Sync); 11] {
        [
            &self.peer_runs,
            &self.transport,
            &self.address,
            &self.port,
            &self.calls,
            &self.bytes,
            &self.peer_total_ns,
            &self.peer_errors,
            &self.last_syscall,
            &self.last_result,
            &self.last_end,
        ]
    }
}

/// One upsert row per (group, device) of the runs inserted, folded in the
/// runs' order as SQLite applies them one by one (an upsert may not touch a
/// row twice in one statement), sorted by key (the lock order).
#[derive(Default)]
struct DeviceUpdates {
    groups: Vec<String>,
    devices: Vec<String>,
    first_seen: Vec<i64>,
    last_seen: Vec<i64>,
    last_start: Vec<i64>,
    program: Vec<String>,
    facts: Vec<String>,
    runs: Vec<i64>,
    windows: Vec<i64>,
}

impl DeviceUpdates {
    fn of(runs: &[NewRun], order: &[usize], seqs: &HashMap<String, i64>) -> DeviceUpdates {
        let mut inserted: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| seqs.contains_key(&runs[i].id.to_string()))
            .collect();
        inserted.sort_unstable();
        let mut folded = std::collections::BTreeMap::<(String, String), Fold>::new();
        for i in inserted {
            let run = &runs[i];
            let Some(device) = &run.device else { continue };
            let whole = i64::from(run.window == 0);
            let received = sql_int(run.received_unix_ns);
            let start = sql_int(run.start_unix_ns);
            let f = folded
                .entry((run.group.clone(), device.to_string()))
                .or_insert(Fold {
                    first_seen: received,
                    last_seen: received,
                    last_start: start,
                    latest: i,
                    runs: 0,
                    windows: 0,
                });
            f.first_seen = f.first_seen.min(received);
            f.last_seen = f.last_seen.max(received);
            if start >= f.last_start {
                f.last_start = start;
                f.latest = i;
            }
            f.runs += whole;
            f.windows += 1 - whole;
        }
        let mut d = DeviceUpdates::default();
        for ((group, device), f) in folded {
            d.groups.push(group);
            d.devices.push(device);
            d.first_seen.push(f.first_seen);
            d.last_seen.push(f.last_seen);
            d.last_start.push(f.last_start);
            d.program.push(runs[f.latest].program.clone());
            d.facts.push(runs[f.latest].facts_json.clone());
            d.runs.push(f.runs);
            d.windows.push(f.windows);
        }
        d
    }

    fn args(&self) -> [&(dyn ToSql + Sync); 9] {
        [
            &self.groups,
            &self.devices,
            &self.first_seen,
            &self.last_seen,
            &self.last_start,
            &self.program,
            &self.facts,
            &self.runs,
            &self.windows,
        ]
    }
}

/// One device's runs of a batch, folded.
struct Fold {
    first_seen: i64,
    last_seen: i64,
    /// The latest start, and the index of the run that has it.
    last_start: i64,
    latest: usize,
    runs: i64,
    windows: i64,
}

/// Connection trouble, an overloaded or restarting server, a lost
/// deadlock: retry later (503). Everything else is a failure.
fn pg_error(e: tokio_postgres::Error) -> StoreError {
    let transient = e.is_closed()
        || e.code().is_none_or(|code| {
            let c = code.code();
            c.starts_with("08") || c.starts_with("53") || c.starts_with("57") || c.starts_with("40")
        });
    if transient {
        StoreError::Busy(pg_text(&e))
    } else {
        StoreError::Failed(pg_text(&e))
    }
}

/// An error of the client in words, passwords hidden.
fn pg_text(e: &tokio_postgres::Error) -> String {
    let text = match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => {
            // The client's words name the kind; its causes say what failed.
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                text.push_str(&format!(": {c}"));
                cause = c.source();
            }
            text
        }
    };
    redact_passwords(&text)
}

/// The connection `client` is gone, as `e` shows: closed, broken (an I/O
/// error), or ended by the server (shutting down: class 57P, or a
/// connection exception: class 08). It must be reopened.
fn connection_lost(e: &tokio_postgres::Error, client: &Client) -> bool {
    client.is_closed()
        || e.is_closed()
        || e.to_string()
            .starts_with("error communicating with the server")
        || e.code()
            .is_some_and(|c| c.code().starts_with("57P") || c.code().starts_with("08"))
}

/// A lost deadlock or serialization check: the transaction may simply be
/// run again.
fn retryable(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
    })
}

/// PostgreSQL integers are signed 64-bit, like SQLite's: larger values are
/// stored as `i64::MAX`; the raw blob keeps the exact value.
fn sql_int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// PostgreSQL's rows as the shared mappers read them (`columns.rs`).
impl Columns for Row {
    type Error = StoreError;

    fn int(&self, i: usize) -> Result<i64, StoreError> {
        self.try_get(i).map_err(pg_error)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        self.try_get(i).map_err(pg_error)
    }

    fn opt_i32(&self, i: usize) -> Result<Option<i32>, StoreError> {
        self.try_get(i).map_err(pg_error)
    }

    fn float(&self, i: usize) -> Result<f64, StoreError> {
        self.try_get(i).map_err(pg_error)
    }

    fn text(&self, i: usize) -> Result<String, StoreError> {
        self.try_get(i).map_err(pg_error)
    }

    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        self.try_get(i).map_err(pg_error)
    }

    fn boolean(&self, i: usize) -> Result<bool, StoreError> {
        self.try_get(i).map_err(pg_error)
    }

    fn bad_cause(_: usize, text: &str) -> StoreError {
        StoreError::Failed(format!(
            "stored incident cause `{text}` is not one this edge-service knows"
        ))
    }

    fn bad_id(_: usize, text: &str) -> StoreError {
        StoreError::Failed(format!("stored id `{text}` is not 32 hex digits"))
    }
}

fn stored_run(row: &Row) -> Result<StoredRun, StoreError> {
    Ok(StoredRun {
        group: row.try_get(0).map_err(pg_error)?,
        raw: row.try_get(1).map_err(pg_error)?,
    })
}

impl Store for PgStore {
    fn insert_runs(&mut self, runs: &[NewRun]) -> Result<Vec<Inserted>, StoreError> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        // Run again after a lost connection, the insert stores nothing
        // twice: the runs a lost commit did store come back as repeats.
        self.with_connection(Repeat::Safe, |live, runtime| {
            let statements = live.insert_statements(runtime)?;
            let mut attempt = 1;
            loop {
                match live.insert_once(runtime, &statements, runs) {
                    Err(e) if retryable(&e) && attempt < TRANSACTION_ATTEMPTS => attempt += 1,
                    outcome => return outcome,
                }
            }
        })
    }

    fn runs(&mut self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        self.select_runs(RUN_COLUMNS, filter)?
            .iter()
            .map(run_row)
            .collect()
    }

    fn count_runs(&mut self, filter: &RunFilter) -> Result<u64, StoreError> {
        let all = RunFilter {
            limit: None,
            ..filter.clone()
        };
        let rows = self.select_runs(super::rows::COUNT_COLUMN, &all)?;
        let count: i64 = match rows.first() {
            Some(row) => row.try_get(0).map_err(pg_error)?,
            None => 0,
        };
        Ok(count.max(0) as u64)
    }

    fn load(&mut self, filter: &RunFilter) -> Result<Vec<StoredRun>, StoreError> {
        self.select_runs("group_name, raw", filter)?
            .iter()
            .map(stored_run)
            .collect()
    }

    fn devices(&mut self, filter: &DeviceFilter) -> Result<Vec<DeviceRow>, StoreError> {
        let limit = filter.limit.map_or(i64::MAX, sql_int);
        let order = "ORDER BY last_seen_unix_ns DESC, device, group_name LIMIT";
        let rows = match &filter.group {
            Some(g) => self.query(
                &format!("SELECT {DEVICE_COLUMNS} FROM devices WHERE group_name = $1 {order} $2"),
                &[g, &limit],
            )?,
            None => self.query(
                &format!("SELECT {DEVICE_COLUMNS} FROM devices {order} $1"),
                &[&limit],
            )?,
        };
        rows.iter().map(device_row).collect()
    }

    fn run(&mut self, id: &RunId) -> Result<Option<StoredRun>, StoreError> {
        self.query(
            "SELECT group_name, raw FROM runs WHERE id = $1",
            &[&id.to_string()],
        )?
        .first()
        .map(stored_run)
        .transpose()
    }

    fn directive(&mut self, group: &str) -> Result<Option<Directive>, StoreError> {
        self.query(
            &format!("SELECT {GROUP_DIRECTIVE_COLUMNS} FROM directives WHERE group_name = $1"),
            &[&group],
        )?
        .first()
        .map(directive_row)
        .transpose()
    }

    fn directives(&mut self) -> Result<Vec<Directive>, StoreError> {
        self.query(
            &format!("SELECT {GROUP_DIRECTIVE_COLUMNS} FROM directives ORDER BY group_name"),
            &[],
        )?
        .iter()
        .map(directive_row)
        .collect()
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
        self.execute(
            "INSERT INTO directives (group_name, match_text, only_list, time_window, programs) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (group_name) DO UPDATE SET \
             match_text = excluded.match_text, only_list = excluded.only_list, \
             time_window = excluded.time_window, programs = excluded.programs",
            &[&d.group, &d.match_text, &only, &d.window, &programs],
        )
        .map(|_| ())
    }

    fn add_operator(&mut self, op: &OperatorRow) -> Result<bool, StoreError> {
        self.execute(
            "INSERT INTO operators (name, group_name, password_hash, created_unix_ns) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
            &[
                &op.name,
                &op.group,
                &op.password_hash,
                &sql_int(op.created_unix_ns),
            ],
        )
        .map(|n| n > 0)
    }

    fn operator(&mut self, name: &str) -> Result<Option<OperatorRow>, StoreError> {
        self.query(
            "SELECT name, group_name, password_hash, created_unix_ns FROM operators \
             WHERE name = $1",
            &[&name],
        )?
        .first()
        .map(operator_row)
        .transpose()
    }

    fn operators(&mut self) -> Result<Vec<OperatorRow>, StoreError> {
        self.query(
            "SELECT name, group_name, password_hash, created_unix_ns FROM operators \
             ORDER BY name",
            &[],
        )?
        .iter()
        .map(operator_row)
        .collect()
    }

    fn remove_operator(&mut self, name: &str) -> Result<bool, StoreError> {
        // Run once: after a lost connection the caller sees the error and
        // may ask again (a second removal finds nothing and says so).
        self.with_connection(Repeat::Once, |live, runtime| {
            runtime.block_on(async {
                let tx = live.client.transaction().await?;
                tx.execute(
                    "DELETE FROM operator_credentials WHERE operator = $1",
                    &[&name],
                )
                .await?;
                let n = tx
                    .execute("DELETE FROM operators WHERE name = $1", &[&name])
                    .await?;
                tx.commit().await?;
                Ok(n > 0)
            })
        })
    }

    fn add_credential(&mut self, c: &Credential) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO operator_credentials (hash, operator, group_name, kind, \
             created_unix_ns, expires_unix_ns) VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &c.hash.as_slice(),
                &c.operator,
                &c.group,
                &c.kind.name(),
                &sql_int(c.created_unix_ns),
                &c.expires_unix_ns.map(sql_int),
            ],
        )
        .map(|_| ())
    }

    fn credential(
        &mut self,
        hash: &[u8; 32],
        now_unix_ns: u64,
    ) -> Result<Option<Credential>, StoreError> {
        Ok(self
            .query(
                "SELECT operator, group_name, kind, created_unix_ns, expires_unix_ns \
                 FROM operator_credentials WHERE hash = $1 \
                 AND (expires_unix_ns IS NULL OR expires_unix_ns > $2)",
                &[&hash.as_slice(), &sql_int(now_unix_ns)],
            )?
            .first()
            .map(|r| Credential {
                hash: *hash,
                operator: r.get(0),
                group: r.get(1),
                kind: CredentialKind::from_name(r.get(2)),
                created_unix_ns: r.get::<_, i64>(3).max(0) as u64,
                expires_unix_ns: r.get::<_, Option<i64>>(4).map(|v| v.max(0) as u64),
            }))
    }

    fn remove_credential(&mut self, hash: &[u8; 32]) -> Result<bool, StoreError> {
        self.execute(
            "DELETE FROM operator_credentials WHERE hash = $1",
            &[&hash.as_slice()],
        )
        .map(|n| n > 0)
    }

    fn revoke_credentials(&mut self, operator: &str, sessions: bool) -> Result<u64, StoreError> {
        let sql = if sessions {
            "DELETE FROM operator_credentials WHERE operator = $1"
        } else {
            "DELETE FROM operator_credentials WHERE operator = $1 AND kind = 'api'"
        };
        self.execute(sql, &[&operator])
    }

    fn prune_credentials(&mut self, now_unix_ns: u64) -> Result<u64, StoreError> {
        self.execute(
            "DELETE FROM operator_credentials WHERE expires_unix_ns <= $1",
            &[&sql_int(now_unix_ns)],
        )
    }

    fn clear_directive(&mut self, group: &str) -> Result<bool, StoreError> {
        self.execute("DELETE FROM directives WHERE group_name = $1", &[&group])
            .map(|n| n > 0)
    }

    fn prune_batch(
        &mut self,
        before_unix_ns: u64,
        keep_raw: bool,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let before = sql_int(before_unix_ns);
        let limit = i64::from(batch);
        // Pruning again what a lost commit pruned finds other runs or none.
        self.with_connection(Repeat::Safe, |live, runtime| {
            let client = &mut live.client;
            runtime.block_on(async {
                let tx = client.transaction().await?;
                // With keep_raw the runs stay: look among the oldest runs
                // that still have rows (run order follows the received time).
                let sql = if keep_raw {
                    "SELECT seq FROM runs WHERE received_unix_ns < $1 AND seq IN \
                     (SELECT DISTINCT run FROM syscalls ORDER BY run LIMIT $2)"
                } else {
                    "SELECT seq FROM runs WHERE received_unix_ns < $1 \
                     ORDER BY received_unix_ns LIMIT $2"
                };
                let seqs: Vec<i64> = tx
                    .query(sql, &[&before, &limit])
                    .await?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                if !seqs.is_empty() {
                    tx.execute("DELETE FROM syscalls WHERE run = ANY($1)", &[&seqs])
                        .await?;
                    tx.execute("DELETE FROM peers WHERE run = ANY($1)", &[&seqs])
                        .await?;
                    if !keep_raw {
                        tx.execute("DELETE FROM runs WHERE seq = ANY($1)", &[&seqs])
                            .await?;
                    }
                }
                tx.commit().await?;
                Ok(seqs.len() as u64)
            })
        })
    }

    fn prune_devices(&mut self, before_unix_ns: u64) -> Result<u64, StoreError> {
        self.execute(
            "DELETE FROM devices WHERE last_seen_unix_ns < $1",
            &[&sql_int(before_unix_ns)],
        )
    }

    fn add_device_directive(&mut self, d: &DeviceDirective) -> Result<i64, StoreError> {
        let row = self.query_one(
            "INSERT INTO device_directives (group_name, device, program, match_text, runs, \
             created_unix_ns, expires_unix_ns, issuer) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            &[
                &d.group,
                &d.device.to_string(),
                &d.program,
                &d.match_text,
                &i64::from(d.runs),
                &sql_int(d.created_unix_ns),
                &sql_int(d.expires_unix_ns),
                &d.issuer,
            ],
        )?;
        row.try_get(0).map_err(pg_error)
    }

    fn device_directives(
        &mut self,
        group: Option<&str>,
        device: Option<&DeviceId>,
    ) -> Result<Vec<DeviceDirective>, StoreError> {
        let device = device.map(ToString::to_string);
        // A NULL parameter matches every row of its column.
        self.query(
            &format!(
                "SELECT {DIRECTIVE_COLUMNS} FROM device_directives \
                 WHERE ($1::text IS NULL OR group_name = $1) \
                 AND ($2::text IS NULL OR device = $2) ORDER BY id"
            ),
            &[&group, &device],
        )?
        .iter()
        .map(device_directive_row)
        .collect()
    }

    fn clear_device_directives(
        &mut self,
        group: &str,
        device: Option<&DeviceId>,
        id: Option<i64>,
    ) -> Result<u64, StoreError> {
        let device = device.map(ToString::to_string);
        self.execute(
            "DELETE FROM device_directives WHERE group_name = $1 \
             AND ($2::text IS NULL OR device = $2) AND ($3::int8 IS NULL OR id = $3)",
            &[&group, &device, &id],
        )
    }

    fn add_report(&mut self, r: &Report) -> Result<i64, StoreError> {
        let row = self.query_one(
            "INSERT INTO reports (group_name, program, trigger_kind, status, \
             detected_unix_ns, created_unix_ns, cluster, devices, headline, text_body, \
             json_body, html_body) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id",
            &[
                &r.group,
                &r.program,
                &r.trigger,
                &r.status,
                &sql_int(r.detected_unix_ns),
                &sql_int(r.created_unix_ns),
                &r.cluster,
                &r.devices_json().to_string(),
                &r.headline,
                &r.text,
                &r.json.to_string(),
                &r.html,
            ],
        )?;
        row.try_get(0).map_err(pg_error)
    }

    fn reports(&mut self, group: Option<&str>) -> Result<Vec<Report>, StoreError> {
        self.query(
            &format!(
                "SELECT {REPORT_SUMMARY_COLUMNS} FROM reports \
                 WHERE ($1::text IS NULL OR group_name = $1) ORDER BY id DESC"
            ),
            &[&group],
        )?
        .iter()
        .map(report_row)
        .collect()
    }

    fn report(&mut self, id: i64) -> Result<Option<Report>, StoreError> {
        self.query(
            &format!(
                "SELECT {REPORT_SUMMARY_COLUMNS}, text_body, json_body, html_body \
                 FROM reports WHERE id = $1"
            ),
            &[&id],
        )?
        .first()
        .map(|row| {
            let text = |i: usize| row.try_get::<_, String>(i).map_err(pg_error);
            Ok(Report {
                text: text(10)?,
                json: serde_json::from_str(&text(11)?).unwrap_or(serde_json::Value::Null),
                html: text(12)?,
                ..report_row(row)?
            })
        })
        .transpose()
    }
    fn add_incident(&mut self, i: &IncidentRow) -> Result<i64, StoreError> {
        let (cause, errno) = cause_columns(&i.cause);
        let row = self.query_one(
            "INSERT INTO incidents (group_name, program, device, cause, errno, metric, \
             deviation, first_window_unix_ns, last_window_unix_ns, opened_unix_ns, \
             closed_unix_ns, evidence) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id",
            &[
                &i.group,
                &i.program,
                &i.device.to_string(),
                &cause,
                &errno,
                &i.metric,
                &i.deviation,
                &sql_int(i.first_window_unix_ns),
                &sql_int(i.last_window_unix_ns),
                &sql_int(i.opened_unix_ns),
                &i.closed_unix_ns.map(sql_int),
                &i.evidence.to_string(),
            ],
        )?;
        row.try_get(0).map_err(pg_error)
    }

    fn update_incident(&mut self, i: &IncidentRow) -> Result<bool, StoreError> {
        self.execute(
            "UPDATE incidents SET metric = $2, deviation = $3, last_window_unix_ns = $4, \
             closed_unix_ns = $5, evidence = $6 WHERE id = $1",
            &[
                &i.id,
                &i.metric,
                &i.deviation,
                &sql_int(i.last_window_unix_ns),
                &i.closed_unix_ns.map(sql_int),
                &i.evidence.to_string(),
            ],
        )
        .map(|n| n > 0)
    }

    fn open_incidents(&mut self, group: Option<&str>) -> Result<Vec<IncidentRow>, StoreError> {
        self.query(
            &format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE closed_unix_ns IS NULL \
                 AND ($1::text IS NULL OR group_name = $1) ORDER BY id"
            ),
            &[&group],
        )?
        .iter()
        .map(incident_row)
        .collect()
    }

    fn recent_incidents(
        &mut self,
        group: Option<&str>,
        limit: u64,
    ) -> Result<Vec<IncidentRow>, StoreError> {
        self.query(
            &format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents \
                 WHERE ($1::text IS NULL OR group_name = $1) \
                 ORDER BY opened_unix_ns DESC, id DESC LIMIT $2"
            ),
            &[&group, &sql_int(limit)],
        )?
        .iter()
        .map(incident_row)
        .collect()
    }

    fn incident(&mut self, id: i64) -> Result<Option<IncidentRow>, StoreError> {
        self.query(
            &format!("SELECT {INCIDENT_COLUMNS} FROM incidents WHERE id = $1"),
            &[&id],
        )?
        .first()
        .map(incident_row)
        .transpose()
    }

    fn incidents(&mut self, f: &IncidentFilter) -> Result<Vec<IncidentRow>, StoreError> {
        // Two statements rather than a parameter, so each state's
        // condition is plain SQL the `incidents_open` index serves.
        let state = if f.open { "IS NULL" } else { "IS NOT NULL" };
        self.query(
            &format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE closed_unix_ns {state} \
                 AND ($1::text IS NULL OR group_name = $1) AND ($2::bigint IS NULL OR id < $2) \
                 ORDER BY id DESC LIMIT $3"
            ),
            &[&f.group, &f.before_id, &sql_int(f.limit)],
        )?
        .iter()
        .map(incident_row)
        .collect()
    }

    /// Held when this session already holds it (a reconnection loses it:
    /// then taken again if no other instance took it meanwhile).
    fn hold_online_lock(&mut self) -> Result<bool, StoreError> {
        let row = self.query(
            "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
             AND pid = pg_backend_pid() AND granted AND objsubid = 2 \
             AND classid = $1::int::oid AND objid = $2::int::oid) \
             THEN true ELSE pg_try_advisory_lock($1, $2) END",
            &[&ONLINE_LOCK.0, &ONLINE_LOCK.1],
        )?;
        match row.first() {
            Some(r) => r.try_get(0).map_err(pg_error),
            None => Ok(false),
        }
    }
}

#[cfg(test)]
mod migration_files {
    use super::{MIGRATIONS, SCHEMA_VERSION};

    /// Every file of `migrations/postgres/` is embedded under its number,
    /// and the last brings a database to [`SCHEMA_VERSION`], the version
    /// SQLite's steps reach too.
    #[test]
    fn the_embedded_steps_are_the_folder_s_files() {
        let files = crate::store::migration_files("postgres");
        assert_eq!(files.len(), MIGRATIONS.len());
        for ((version, text), (step_version, step)) in files.iter().zip(MIGRATIONS) {
            assert_eq!(*version, i64::from(*step_version));
            assert_eq!(text, step, "step {version}");
        }
        assert_eq!(files.last().map(|f| f.0), Some(SCHEMA_VERSION));
    }
}
