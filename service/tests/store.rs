//! The `Store` contract, run against SQLite and against a real PostgreSQL
//! (`common::pg`): outcomes of inserts, the SQL-queryable schema, filters,
//! devices, idempotency between connections inserting at once, and the
//! `diagnose` source; and each backend's schema migrations.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use agent_core::{DeviceId, RunId, StreamId};
use common::pg;
use diagnose::input::{RunFilter as DiagnoseFilter, SummarySource};
use fixtures::sample;
use service::source::StoreSource;
use service::store::{
    DeviceFilter, Inserted, Location, NewRun, PgStore, RunFilter, SqliteStore, Store,
};

/// One store of either backend, empty at first.
enum Backend {
    Sqlite {
        _dir: tempfile::TempDir,
        db: PathBuf,
    },
    Postgres {
        url: String,
    },
}

impl Backend {
    fn sqlite() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        Backend::Sqlite { _dir: dir, db }
    }

    fn postgres(test: &str) -> Option<Backend> {
        pg::database(test).map(|url| Backend::Postgres { url })
    }

    /// What `--db` says for it.
    fn db(&self) -> PathBuf {
        match self {
            Backend::Sqlite { db, .. } => db.clone(),
            Backend::Postgres { url } => PathBuf::from(url),
        }
    }

    /// A new connection, as the server opens them.
    fn open(&self) -> Box<dyn Store> {
        Location::parse(&self.db()).opener(Duration::from_secs(5))().unwrap()
    }

    /// The rows of `sql` (the same text on both backends), each as its
    /// columns joined by `|` (NULL: empty).
    fn rows(&self, sql: &str) -> Vec<String> {
        match self {
            Backend::Sqlite { db, .. } => {
                let conn = rusqlite::Connection::open(db).unwrap();
                let mut stmt = conn.prepare(sql).unwrap();
                let n = stmt.column_count();
                stmt.query_map([], |r| {
                    let mut cols = Vec::with_capacity(n);
                    for i in 0..n {
                        use rusqlite::types::ValueRef;
                        cols.push(match r.get_ref(i)? {
                            ValueRef::Null => String::new(),
                            ValueRef::Integer(v) => v.to_string(),
                            ValueRef::Real(v) => v.to_string(),
                            ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                            ValueRef::Blob(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
                        });
                    }
                    Ok(cols.join("|"))
                })
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
            }
            Backend::Postgres { url } => pg::psql(url, sql).lines().map(str::to_string).collect(),
        }
    }

    /// Runs `sql`, one or more statements returning nothing.
    fn exec(&self, sql: &str) {
        match self {
            Backend::Sqlite { db, .. } => rusqlite::Connection::open(db)
                .unwrap()
                .execute_batch(sql)
                .unwrap(),
            Backend::Postgres { url } => {
                pg::psql(url, sql);
            }
        }
    }

    /// The schema version the database records.
    fn schema_version(&self) -> String {
        match self {
            Backend::Sqlite { .. } => self.one("PRAGMA user_version"),
            Backend::Postgres { .. } => self.one("SELECT version FROM edge_service_schema"),
        }
    }

    fn one(&self, sql: &str) -> String {
        let rows = self.rows(sql);
        assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
        rows.into_iter().next().unwrap()
    }
}

/// Each case as two tests: `CASE::sqlite` and `CASE::postgres`.
macro_rules! on_both_backends {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            #[test]
            fn sqlite() {
                super::$case(&super::Backend::sqlite());
            }
            #[test]
            fn postgres() {
                if let Some(backend) = super::Backend::postgres(stringify!($case)) {
                    super::$case(&backend);
                }
            }
        }
    )*};
}

on_both_backends!(
    inserts_are_idempotent_per_group_and_queryable_with_sql,
    filters_and_the_diagnose_source_agree,
    whole_runs_leave_the_windows_out,
    origin_cpu_in_flight_peers_and_devices_are_stored,
    connections_inserting_the_same_ids_at_once_store_each_once,
    directives_are_set_replaced_and_cleared,
    a_version_5_store_keeps_its_directives_and_gains_programs,
    pruning_goes_in_batches_and_can_keep_the_raw_summaries,
    device_directives_count_their_runs_and_reports_are_kept,
    operators_and_their_credentials_are_kept_hashed_and_revoked,
    incidents_are_stored_updated_closed_and_listed,
    incidents_are_listed_a_page_at_a_time_by_state,
    one_connection_holds_the_online_lock,
);

/// Incidents (schema version 8): stored with every alert field and the
/// evidence, updated (last window, deviation, close), listed open (oldest
/// first) and recent (newest opened first), read by id.
fn incidents_are_stored_updated_closed_and_listed(backend: &Backend) {
    use service::store::IncidentRow;
    use wire::alert::IncidentCause;
    let mut store = backend.open();
    let disk = IncidentRow {
        id: 0,
        group: "fleet".into(),
        program: "glusterfsd".into(),
        device: DeviceId([7; 16]),
        cause: IncidentCause::Disk,
        metric: "dread".into(),
        deviation: 2.5,
        first_window_unix_ns: 1_763_700_080_000_000_000,
        last_window_unix_ns: 1_763_700_083_000_000_000,
        opened_unix_ns: 1_763_700_085_000_000_000,
        closed_unix_ns: None,
        evidence: serde_json::json!({"method": "median", "series": {"median_ns": [1.5, 2.0]}}),
    };
    let errno = IncidentRow {
        group: "other".into(),
        cause: IncidentCause::Errno {
            name: "ENOSPC".into(),
        },
        metric: "ENOSPC".into(),
        opened_unix_ns: disk.opened_unix_ns + 1,
        ..disk.clone()
    };
    let a = store.add_incident(&disk).unwrap();
    let b = store.add_incident(&errno).unwrap();
    assert!(b > a && a > 0);
    let disk = IncidentRow { id: a, ..disk };
    let errno = IncidentRow { id: b, ..errno };
    assert_eq!(store.incident(a).unwrap().as_ref(), Some(&disk));
    assert_eq!(store.incident(b).unwrap().as_ref(), Some(&errno));
    assert_eq!(store.incident(b + 1).unwrap(), None);
    assert_eq!(
        store.open_incidents(None).unwrap(),
        vec![disk.clone(), errno.clone()]
    );
    assert_eq!(
        store.open_incidents(Some("other")).unwrap(),
        vec![errno.clone()]
    );
    // Later windows, then closed.
    let later = IncidentRow {
        last_window_unix_ns: disk.last_window_unix_ns + 20_000_000_000,
        deviation: 3.25,
        metric: "dwrite".into(),
        evidence: serde_json::json!({"method": "histogram"}),
        ..disk.clone()
    };
    assert!(store.update_incident(&later).unwrap());
    assert_eq!(store.incident(a).unwrap().as_ref(), Some(&later));
    let closed = IncidentRow {
        closed_unix_ns: Some(later.last_window_unix_ns + 15_000_000_000),
        ..later
    };
    assert!(store.update_incident(&closed).unwrap());
    assert_eq!(store.open_incidents(None).unwrap(), vec![errno.clone()]);
    assert_eq!(
        store.recent_incidents(None, 10).unwrap(),
        vec![errno.clone(), closed.clone()]
    );
    assert_eq!(
        store.recent_incidents(None, 1).unwrap(),
        vec![errno.clone()]
    );
    assert_eq!(
        store.recent_incidents(Some("fleet"), 10).unwrap(),
        vec![closed]
    );
    assert!(!store
        .update_incident(&IncidentRow { id: b + 7, ..errno })
        .unwrap());
    // A second connection sees the same.
    assert_eq!(backend.open().open_incidents(None).unwrap().len(), 1);
}

/// The web UI's Incidents page lists open or closed incidents of a group,
/// newest first, a page at a time (`before_id`): never more than the
/// limit.
fn incidents_are_listed_a_page_at_a_time_by_state(backend: &Backend) {
    use service::store::{IncidentFilter, IncidentRow};
    use wire::alert::IncidentCause;
    let mut store = backend.open();
    let row = |group: &str, n: u64, closed: bool| IncidentRow {
        id: 0,
        group: group.into(),
        program: "glusterfsd".into(),
        device: DeviceId([n as u8; 16]),
        cause: IncidentCause::Disk,
        metric: "dread".into(),
        deviation: 2.0,
        first_window_unix_ns: 1_763_700_000_000_000_000 + n,
        last_window_unix_ns: 1_763_700_010_000_000_000 + n,
        opened_unix_ns: 1_763_700_020_000_000_000 + n,
        closed_unix_ns: closed.then_some(1_763_700_090_000_000_000 + n),
        evidence: serde_json::json!({}),
    };
    // Fleet: 1 open, 2 closed, 3 open, 4 closed, 5 closed; other: 6 open.
    let mut ids = Vec::new();
    for (n, closed) in [(1, false), (2, true), (3, false), (4, true), (5, true)] {
        ids.push(store.add_incident(&row("fleet", n, closed)).unwrap());
    }
    store.add_incident(&row("other", 6, false)).unwrap();
    let list = |store: &mut Box<dyn service::store::Store>, open, before_id, limit| {
        store
            .incidents(&IncidentFilter {
                group: Some("fleet".into()),
                open,
                before_id,
                limit,
            })
            .unwrap()
            .iter()
            .map(|i| i.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(list(&mut store, true, None, 10), vec![ids[2], ids[0]]);
    assert_eq!(
        list(&mut store, false, None, 10),
        vec![ids[4], ids[3], ids[1]]
    );
    assert_eq!(list(&mut store, false, None, 2), vec![ids[4], ids[3]]);
    assert_eq!(list(&mut store, false, Some(ids[3]), 2), vec![ids[1]]);
    assert_eq!(list(&mut store, true, Some(ids[0]), 2), Vec::<i64>::new());
    let every_group = store
        .incidents(&IncidentFilter {
            group: None,
            open: true,
            before_id: None,
            limit: 10,
        })
        .unwrap();
    assert_eq!(every_group.len(), 3);
    assert_eq!(every_group[0].group, "other");
}

/// Of two connections to one PostgreSQL database only the first holds the
/// live analysis' lock, again and again, until it goes; then the other
/// takes it. SQLite: one process, always held.
fn one_connection_holds_the_online_lock(backend: &Backend) {
    let mut first = backend.open();
    let mut second = backend.open();
    assert!(first.hold_online_lock().unwrap());
    assert!(first.hold_online_lock().unwrap());
    match backend {
        Backend::Sqlite { .. } => assert!(second.hold_online_lock().unwrap()),
        Backend::Postgres { .. } => {
            assert!(!second.hold_online_lock().unwrap());
            assert!(first.hold_online_lock().unwrap());
            drop(first);
            // The server releases a session's locks when it ends: wait
            // for that, not for a fixed time.
            let mut held = false;
            for _ in 0..600 {
                if second.hold_online_lock().unwrap() {
                    held = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            assert!(held, "the lock was not released when its connection ended");
            assert!(second.hold_online_lock().unwrap());
        }
    }
}

/// Operators (schema version 7): one per name; a credential is found by
/// the hash of its secret until it expires or is removed; removing an
/// operator removes its credentials.
fn operators_and_their_credentials_are_kept_hashed_and_revoked(backend: &Backend) {
    use service::operators::{secret_hash, Credential, CredentialKind, OperatorRow};
    let mut store = backend.open();
    let ann = OperatorRow {
        name: "ann".into(),
        group: "phones".into(),
        password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaA".into(),
        created_unix_ns: 5,
    };
    assert!(store.add_operator(&ann).unwrap());
    let mut taken = ann.clone();
    taken.group = "laptops".into();
    assert!(!store.add_operator(&taken).unwrap(), "the name is taken");
    let bob = OperatorRow {
        name: "bob".into(),
        group: "laptops".into(),
        ..ann.clone()
    };
    assert!(store.add_operator(&bob).unwrap());
    assert_eq!(store.operator("ann").unwrap(), Some(ann.clone()));
    assert_eq!(store.operator("carl").unwrap(), None);
    let names: Vec<String> = store
        .operators()
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .collect();
    assert_eq!(names, ["ann", "bob"]);

    let credential = |secret: &str, operator: &str, kind, expires| Credential {
        hash: secret_hash(secret),
        operator: operator.into(),
        group: "phones".into(),
        kind,
        created_unix_ns: 10,
        expires_unix_ns: expires,
    };
    let session = credential("s1", "ann", CredentialKind::Session, Some(100));
    let api = credential("a1", "ann", CredentialKind::Api, None);
    let bobs = credential("b1", "bob", CredentialKind::Session, Some(100));
    for c in [&session, &api, &bobs] {
        store.add_credential(c).unwrap();
    }
    assert_eq!(
        store.credential(&secret_hash("s1"), 50).unwrap(),
        Some(session.clone())
    );
    assert_eq!(
        store.credential(&secret_hash("s1"), 100).unwrap(),
        None,
        "expired"
    );
    assert_eq!(
        store.credential(&secret_hash("a1"), u64::MAX >> 2).unwrap(),
        Some(api)
    );
    assert_eq!(store.credential(&secret_hash("nope"), 50).unwrap(), None);
    // Only the hash is stored, never the secret.
    let stored = backend.rows("SELECT operator FROM operator_credentials ORDER BY operator");
    assert_eq!(stored, ["ann", "ann", "bob"]);

    // Logout, revoke, prune, remove.
    assert!(store.remove_credential(&secret_hash("s1")).unwrap());
    assert!(!store.remove_credential(&secret_hash("s1")).unwrap());
    assert_eq!(store.revoke_credentials("ann", false).unwrap(), 1);
    assert_eq!(store.credential(&secret_hash("a1"), 50).unwrap(), None);
    assert_eq!(store.prune_credentials(50).unwrap(), 0);
    assert_eq!(
        store.prune_credentials(100).unwrap(),
        1,
        "bob's session expired"
    );
    store
        .add_credential(&credential("b2", "bob", CredentialKind::Api, None))
        .unwrap();
    assert!(store.remove_operator("bob").unwrap());
    assert!(!store.remove_operator("bob").unwrap());
    assert_eq!(store.credential(&secret_hash("b2"), 50).unwrap(), None);
    assert_eq!(store.operator("bob").unwrap(), None);
}

fn new_run(seed: u64, group: &str) -> (agent_core::Summary, NewRun) {
    let raw = sample::encoded(seed, 500, None);
    let summary = agent_core::Summary::decode(&raw).unwrap();
    let run = NewRun::from_summary(&summary, raw, group, 7);
    (summary, run)
}

fn inserts_are_idempotent_per_group_and_queryable_with_sql(backend: &Backend) {
    let mut store = backend.open();
    let (a, run_a) = new_run(1, "phones");
    let (_, run_b) = new_run(2, "phones");
    let mut same_id_other_group = run_a.clone();
    same_id_other_group.group = "laptops".into();
    let outcomes = store
        .insert_runs(&[
            run_a.clone(),
            run_b.clone(),
            run_a.clone(),
            same_id_other_group,
        ])
        .unwrap();
    assert_eq!(
        outcomes,
        vec![
            Inserted::Stored,
            Inserted::Stored,
            Inserted::Repeat,
            Inserted::IdTaken
        ]
    );
    // Again in a later transaction: a repeat and a taken id, nothing written.
    let mut other_group = run_b.clone();
    other_group.group = "laptops".into();
    assert_eq!(
        store.insert_runs(&[run_a.clone(), other_group]).unwrap(),
        vec![Inserted::Repeat, Inserted::IdTaken]
    );
    assert_eq!(backend.one("SELECT count(*) FROM runs"), "2");

    // One row per (run, syscall, fd kind), with the summary's numbers.
    let id = a.id.to_string();
    let rows = backend.one(&format!(
        "SELECT count(*) FROM run_syscalls WHERE id = '{id}'"
    ));
    assert_eq!(rows, a.syscalls.len().to_string());
    let read = a
        .syscalls
        .iter()
        .find(|s| s.key.id.name() == Some("read") && s.key.fd_kind == agent_core::FdKind::Tcp)
        .unwrap();
    assert_eq!(
        backend.one(&format!(
            "SELECT count, errors, total_ns FROM run_syscalls \
             WHERE id = '{id}' AND syscall = 'read' AND fd_kind = 'tcp'"
        )),
        format!("{}|{}|{}", read.count, read.errors(), read.total_ns)
    );
    let row = backend.one(&format!(
        "SELECT group_name, program, facts FROM runs WHERE id = '{id}'"
    ));
    let mut cols = row.splitn(3, '|');
    assert_eq!(cols.next(), Some("phones"));
    assert_eq!(cols.next(), Some(a.facts.program.as_str()));
    let facts: serde_json::Value = serde_json::from_str(cols.next().unwrap()).unwrap();
    assert_eq!(facts, summary_view::to_json(&a)["facts"]);

    // The raw bytes come back exactly.
    assert_eq!(store.run(&a.id).unwrap().unwrap().raw, run_a.raw);
    assert_eq!(store.run(&RunId([9; 16])).unwrap(), None);
}

fn filters_and_the_diagnose_source_agree(backend: &Backend) {
    let mut store = backend.open();
    let runs: Vec<(agent_core::Summary, NewRun)> = (10..30)
        .map(|seed| new_run(seed, if seed % 2 == 0 { "phones" } else { "laptops" }))
        .collect();
    let batch: Vec<NewRun> = runs.iter().map(|(_, r)| r.clone()).collect();
    store.insert_runs(&batch).unwrap();

    let phones = RunFilter {
        group: Some("phones".into()),
        ..RunFilter::default()
    };
    assert_eq!(store.runs(&phones).unwrap().len(), 10);
    let start = runs[5].0.run.start_unix_ns;
    let window = RunFilter {
        since_unix_ns: Some(start),
        until_unix_ns: Some(start + 1),
        ..RunFilter::default()
    };
    let listed = store.runs(&window).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, runs[5].0.id);
    let limited = RunFilter {
        limit: Some(3),
        ..RunFilter::default()
    };
    let three = store.runs(&limited).unwrap();
    assert_eq!(three.len(), 3);
    // Oldest start first.
    let mut starts: Vec<u64> = runs.iter().map(|(s, _)| s.run.start_unix_ns).collect();
    starts.sort_unstable();
    assert_eq!(
        three.iter().map(|r| r.start_unix_ns).collect::<Vec<_>>(),
        starts[..3]
    );
    let group_and_limit = RunFilter {
        group: Some("laptops".into()),
        since_unix_ns: Some(0),
        limit: Some(4),
        ..RunFilter::default()
    };
    let four = store.runs(&group_and_limit).unwrap();
    assert_eq!(four.len(), 4);
    assert!(four.iter().all(|r| r.group == "laptops"));

    let program = runs[0].0.facts.program.to_string();
    let loaded = StoreSource
        .load(
            &backend.db(),
            &DiagnoseFilter {
                group: Some("phones".into()),
                program: Some(program.clone()),
                ..DiagnoseFilter::default()
            },
        )
        .unwrap();
    let expected: Vec<&agent_core::Summary> = runs
        .iter()
        .filter(|(s, r)| r.group == "phones" && s.facts.program.as_str() == program)
        .map(|(s, _)| s)
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(loaded.iter().collect::<Vec<_>>(), expected);
}

#[test]
fn the_diagnose_source_refuses_a_missing_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = StoreSource.load(&dir.path().join("nope.db"), &DiagnoseFilter::default());
    assert!(missing.unwrap_err().to_string().contains("does not exist"));
}

/// Two connections (as two `edge-service` instances) insert the same
/// summaries at once, in opposite orders, many times over: each id is
/// stored once, with its rows once, and every run is acknowledged on both
/// (stored on one, a repeat on the other).
fn connections_inserting_the_same_ids_at_once_store_each_once(backend: &Backend) {
    const ROUNDS: u64 = 20;
    const PER_ROUND: u64 = 8;
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|side| {
            let mut store = backend.open();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut outcomes = Vec::new();
                for round in 0..ROUNDS {
                    let mut batch: Vec<NewRun> = (0..PER_ROUND)
                        .map(|i| windowed_run(1000 + round * PER_ROUND + i, i as u8 + 1, 1).1)
                        .collect();
                    if side == 1 {
                        batch.reverse();
                    }
                    barrier.wait();
                    let got = store.insert_runs(&batch).unwrap();
                    outcomes.extend(batch.iter().map(|r| r.id).zip(got));
                }
                outcomes
            })
        })
        .collect();
    let mut stored = std::collections::HashMap::<RunId, u32>::new();
    for h in handles {
        for (id, outcome) in h.join().unwrap() {
            assert_ne!(outcome, Inserted::IdTaken);
            *stored.entry(id).or_default() += u32::from(outcome == Inserted::Stored);
        }
    }
    assert_eq!(stored.len() as u64, ROUNDS * PER_ROUND);
    assert!(stored.values().all(|&n| n == 1), "{stored:?}");
    assert_eq!(
        backend.one("SELECT count(*), count(DISTINCT id) FROM runs"),
        format!("{0}|{0}", ROUNDS * PER_ROUND)
    );
    // Syscall and peer rows once per run; each device counted once per window.
    let one = windowed_run(1000, 0, 1).0;
    assert_eq!(
        backend.one("SELECT count(*) FROM peers"),
        (ROUNDS * PER_ROUND * one.peers.list.len() as u64).to_string()
    );
    assert_eq!(
        backend.one("SELECT count(*), sum(windows) FROM devices"),
        format!("{PER_ROUND}|{}", ROUNDS * PER_ROUND)
    );
}

/// Seven runs received long ago and three recently: pruning takes the old
/// ones in batches of the size asked; with keep_raw they stay readable
/// without their rows, else they go, and devices not seen since with them.
fn pruning_goes_in_batches_and_can_keep_the_raw_summaries(backend: &Backend) {
    let mut store = backend.open();
    let mut old = Vec::new();
    let mut batch = Vec::new();
    for i in 0..10u64 {
        // Old: devices 1 and 2; new: device 3.
        let device = if i < 7 { 1 + (i % 2) as u8 } else { 3 };
        let (summary, mut run) = windowed_run(2000 + i, device, 1 + i as u32);
        run.received_unix_ns = if i < 7 { 1_000 + i } else { 10_000 + i };
        if i < 7 {
            old.push(summary.id);
        }
        batch.push(run);
    }
    // As a server receives them: the old ones first (the order of the runs
    // by storage follows the received time, which keep_raw relies on).
    store.insert_runs(&batch[..7]).unwrap();
    store.insert_runs(&batch[7..]).unwrap();
    let syscalls_of_old = || {
        backend.one(
            "SELECT count(*) FROM syscalls s JOIN runs r ON r.seq = s.run \
             WHERE r.received_unix_ns < 5000",
        )
    };
    assert_ne!(syscalls_of_old(), "0");
    let total_syscalls: usize = batch[7..].iter().map(|r| r.syscalls.len()).sum();

    // keep_raw: rows go, runs and raw summaries stay.
    let passes: Vec<u64> = (0..4)
        .map(|_| store.prune_batch(5000, true, 3).unwrap())
        .collect();
    assert_eq!(passes, vec![3, 3, 1, 0]);
    assert_eq!(syscalls_of_old(), "0");
    assert_eq!(
        backend.one("SELECT count(*) FROM syscalls"),
        total_syscalls.to_string()
    );
    assert_eq!(
        backend.one("SELECT count(*) FROM peers p JOIN runs r ON r.seq = p.run WHERE r.received_unix_ns < 5000"),
        "0"
    );
    assert_eq!(store.runs(&RunFilter::default()).unwrap().len(), 10);
    assert_eq!(store.run(&old[0]).unwrap().unwrap().raw, batch[0].raw);

    // Without: the old runs go, in batches.
    let passes: Vec<u64> = (0..4)
        .map(|_| store.prune_batch(5000, false, 3).unwrap())
        .collect();
    assert_eq!(passes, vec![3, 3, 1, 0]);
    let left: Vec<RunId> = store
        .runs(&RunFilter::default())
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(left, batch[7..].iter().map(|r| r.id).collect::<Vec<_>>());
    assert_eq!(store.run(&old[0]).unwrap(), None);
    assert_eq!(
        backend.one("SELECT count(*) FROM syscalls"),
        total_syscalls.to_string()
    );
    assert_eq!(
        backend.one("SELECT count(*) FROM peers"),
        (3 * batch[7].peers.len()).to_string()
    );
    // Devices last seen before the cutoff go too.
    assert_eq!(store.prune_devices(5000).unwrap(), 2);
    let devices: Vec<DeviceId> = store
        .devices(&DeviceFilter::default())
        .unwrap()
        .iter()
        .map(|d| d.device)
        .collect();
    assert_eq!(devices, vec![[3; 16]]);
    // The whole pass as `prune` and `serve --retain` run it.
    let pruned =
        service::retention::prune(store.as_mut(), Duration::from_nanos(0), false, 20_000).unwrap();
    assert_eq!((pruned.runs, pruned.devices), (3, 1));
    assert_eq!(backend.one("SELECT count(*) FROM syscalls"), "0");
}

fn directives_are_set_replaced_and_cleared(backend: &Backend) {
    use service::directive::{Directive, DirectiveText, FromWords};
    let mut store = backend.open();
    assert_eq!(store.directive("phones").unwrap(), None);
    let d = Directive::parse(
        "phones",
        DirectiveText {
            match_text: Some("curl"),
            only: Some("read,write"),
            window: Some("22:00-06:00"),
            programs: Some("md5sum,curl"),
        },
    )
    .unwrap();
    store.set_directive(&d).unwrap();
    assert_eq!(backend.open().directive("phones").unwrap(), Some(d.clone()));
    let replaced = Directive::parse(
        "phones",
        DirectiveText {
            only: Some("connect"),
            ..DirectiveText::default()
        },
    )
    .unwrap();
    store.set_directive(&replaced).unwrap();
    let other = Directive::parse(
        "laptops",
        DirectiveText {
            match_text: Some("wget"),
            programs: Some("wget"),
            ..DirectiveText::default()
        },
    )
    .unwrap();
    store.set_directive(&other).unwrap();
    // Seen from another connection; replacing drops the programs too.
    let mut reader = backend.open();
    assert_eq!(reader.directive("phones").unwrap(), Some(replaced.clone()));
    assert_eq!(reader.directive("phones").unwrap().unwrap().programs, None);
    assert_eq!(
        reader.directive("laptops").unwrap().unwrap().programs,
        Some(vec!["wget".to_string()])
    );
    assert_eq!(reader.directives().unwrap(), vec![other, replaced]);
    // Stored as a JSON array of names, like `only_list`.
    assert_eq!(
        backend.one("SELECT programs FROM directives WHERE group_name = 'laptops'"),
        r#"["wget"]"#
    );
    assert!(store.clear_directive("phones").unwrap());
    assert!(!store.clear_directive("phones").unwrap());
    assert_eq!(reader.directive("phones").unwrap(), None);
}

/// A store of schema version 5 (directives without `programs`) is brought
/// to version 6 when opened: its directives stay, naming no programs, and
/// programs can be set from then on.
fn a_version_5_store_keeps_its_directives_and_gains_programs(backend: &Backend) {
    use service::directive::{Directive, DirectiveText, FromWords};
    drop(backend.open());
    // Back to version 5 as that build left it: the directives table of
    // version 1, holding one group's directive, and no operators
    // (version 7).
    let set_version = match backend {
        Backend::Sqlite { .. } => "PRAGMA user_version = 5;",
        Backend::Postgres { .. } => "UPDATE edge_service_schema SET version = 5;",
    };
    backend.exec(&format!(
        "DROP TABLE incidents; DROP TABLE operator_credentials; DROP TABLE operators; \
         ALTER TABLE directives DROP COLUMN programs; \
         INSERT INTO directives (group_name, match_text, only_list, time_window) \
         VALUES ('phones', 'curl', '[\"read\"]', '22:00-06:00'); {set_version}"
    ));
    assert_eq!(backend.schema_version(), "5");

    let mut store = backend.open();
    assert_eq!(
        backend.schema_version(),
        service::store::SCHEMA_VERSION.to_string()
    );
    let kept = Directive::parse(
        "phones",
        DirectiveText {
            match_text: Some("curl"),
            only: Some("read"),
            window: Some("22:00-06:00"),
            programs: None,
        },
    )
    .unwrap();
    assert_eq!(store.directive("phones").unwrap(), Some(kept));
    let with_programs = Directive::parse(
        "phones",
        DirectiveText {
            match_text: Some("curl"),
            programs: Some("curl"),
            ..DirectiveText::default()
        },
    )
    .unwrap();
    store.set_directive(&with_programs).unwrap();
    assert_eq!(
        backend.open().directive("phones").unwrap(),
        Some(with_programs)
    );
}

/// A run with a device, a stream, CPU time, a call in flight and two peers.
/// `whole_runs` keeps the runs a diagnosis uses (window 0) and leaves
/// windows out, in the count and under a limit alike.
fn whole_runs_leave_the_windows_out(backend: &Backend) {
    let mut store = backend.open();
    let mut batch: Vec<NewRun> = (50..53).map(|seed| new_run(seed, "g").1).collect();
    for (i, seed) in (60..66).enumerate() {
        let (_, mut w) = windowed_run(seed, 0xab, 1 + i as u32);
        w.group = "g".into();
        batch.push(w);
    }
    store.insert_runs(&batch).unwrap();
    let all = RunFilter {
        group: Some("g".into()),
        ..RunFilter::default()
    };
    assert_eq!(store.count_runs(&all).unwrap(), 9);
    let whole = RunFilter {
        whole_runs: true,
        ..all.clone()
    };
    assert_eq!(store.count_runs(&whole).unwrap(), 3);
    let newest_two = RunFilter {
        limit: Some(2),
        newest_first: true,
        ..whole.clone()
    };
    let listed = store.load(&newest_two).unwrap();
    assert_eq!(listed.len(), 2);
    for run in &listed {
        let s = agent_core::Summary::decode(&run.raw).unwrap();
        assert_eq!(s.run.window, 0, "a window was read as a run");
    }
}

fn windowed_run(seed: u64, device: u8, window: u32) -> (agent_core::Summary, NewRun) {
    use agent_core::{CpuTime, FdKind, InFlightCall, LastCall, Peer, PeerAddr, PeerIp, SyscallId};
    let mut s = sample::summary(seed, 300, None);
    s.run.window = window;
    s.run.exit = agent_core::Exit::Running;
    s.origin = agent_core::Origin {
        device: DeviceId([device; 16]),
        stream: StreamId([device ^ 0xff; 16]),
        window_ns: 1_000_000_000,
    };
    s.cpu = Some(CpuTime {
        user_ns: 7_000,
        system_ns: 3_000,
    });
    s.in_flight.count = 1;
    s.in_flight
        .oldest
        .push(InFlightCall {
            tid: 9,
            id: SyscallId::from_name("read").unwrap(),
            fd_kind: FdKind::Tcp,
            peer: None,
            start_unix_ns: s.run.start_unix_ns,
        })
        .unwrap();
    let peer = |ip: PeerIp, port, calls| Peer {
        addr: PeerAddr {
            transport: FdKind::Tcp,
            ip,
            port,
        },
        calls,
        bytes: calls * 100,
        total_ns: calls * 1_000,
        errors: 1,
        last: Some(LastCall {
            id: SyscallId::from_name("read").unwrap(),
            result: -104,
            end_unix_ns: s.run.start_unix_ns + 5,
        }),
    };
    s.peers
        .list
        .push(peer(PeerIp::V4([192, 0, 2, 1]), 80, 9))
        .unwrap();
    let mut v6 = [0u8; 16];
    v6[15] = 1;
    s.peers.list.push(peer(PeerIp::V6(v6), 443, 4)).unwrap();
    s.peers.rest = agent_core::PeerRest {
        peers: 3,
        calls: 6,
        bytes: 0,
        total_ns: 60,
        errors: 0,
    };
    let mut buf = [0u8; agent_core::MAX_ENCODED_LEN];
    let raw = s.encode(&mut buf).unwrap().to_vec();
    let s = agent_core::Summary::decode(&raw).unwrap();
    let run = NewRun::from_summary(&s, raw, "phones", 100 + seed);
    (s, run)
}

fn v1_fixture() -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../agent-core/tests/fixtures/v1-wget.bin"),
    )
    .unwrap()
}

/// The schema of edge-service before summary format 2 (schema version 1),
/// exactly as that build created it.
const SCHEMA_1: &str = "
CREATE TABLE runs (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, group_name TEXT NOT NULL,
    program TEXT NOT NULL, start_unix_ns INTEGER NOT NULL, duration_ns INTEGER NOT NULL,
    exit_kind TEXT NOT NULL, exit_value INTEGER, arch TEXT NOT NULL,
    processes INTEGER NOT NULL, threads INTEGER NOT NULL, events INTEGER NOT NULL,
    window_index INTEGER NOT NULL, spool_dropped INTEGER NOT NULL, truncated INTEGER NOT NULL,
    facts TEXT NOT NULL, received_unix_ns INTEGER NOT NULL, raw BLOB NOT NULL
);
CREATE INDEX runs_by_group_start ON runs (group_name, start_unix_ns);
CREATE TABLE syscalls (
    run INTEGER NOT NULL REFERENCES runs (seq), syscall TEXT NOT NULL, fd_kind TEXT NOT NULL,
    count INTEGER NOT NULL, errors INTEGER NOT NULL, total_ns INTEGER NOT NULL,
    min_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL, mean_ns REAL NOT NULL,
    consecutive INTEGER NOT NULL, gap_mean_ns REAL NOT NULL, result_mean REAL NOT NULL,
    param_mean REAL, PRIMARY KEY (run, syscall, fd_kind)
) WITHOUT ROWID;
CREATE VIEW run_syscalls AS
    SELECT r.id, r.group_name, r.program, r.start_unix_ns, s.*
    FROM syscalls s JOIN runs r ON r.seq = s.run;
CREATE TABLE directives (
    group_name TEXT PRIMARY KEY, match_text TEXT, only_list TEXT, time_window TEXT
);
PRAGMA user_version = 1;
";

#[test]
fn sqlite_a_schema_1_file_is_migrated_and_keeps_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.db");
    // A file the previous build made, holding one version 1 run.
    let v1 = v1_fixture();
    let old = agent_core::Summary::decode(&v1).unwrap();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(SCHEMA_1).unwrap();
        conn.execute(
            "INSERT INTO runs (id, group_name, program, start_unix_ns, duration_ns, exit_kind, \
             exit_value, arch, processes, threads, events, window_index, spool_dropped, truncated, \
             facts, received_unix_ns, raw) VALUES (?1, 'phones', 'wget', ?2, ?3, 'code', 0, \
             'x86_64', 1, 1, ?4, 0, 0, 0, '{}', 5, ?5)",
            rusqlite::params![
                old.id.to_string(),
                old.run.start_unix_ns as i64,
                old.run.duration_ns as i64,
                old.run.events as i64,
                v1,
            ],
        )
        .unwrap();
    }

    let mut store = SqliteStore::open(&db, Duration::from_secs(1)).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        service::store::SCHEMA_VERSION
    );
    let listed = store.runs(&RunFilter::default()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, old.id);
    assert_eq!(
        (listed[0].device, listed[0].stream, listed[0].window_ns),
        (None, None, 0)
    );
    assert_eq!((listed[0].cpu_user_ns, listed[0].in_flight), (None, 0));
    assert_eq!(store.run(&old.id).unwrap().unwrap().raw, v1);

    // New runs go in beside it, with their device; the old one is the run
    // without a device.
    let (new, run) = windowed_run(3, 0xd1, 2);
    assert_eq!(store.insert_runs(&[run]).unwrap(), vec![Inserted::Stored]);
    let no_device = RunFilter {
        device: Some(DeviceId([0; 16])),
        ..RunFilter::default()
    };
    let ids: Vec<RunId> = store
        .runs(&no_device)
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, vec![old.id]);
    let device = RunFilter {
        device: Some(DeviceId([0xd1; 16])),
        ..RunFilter::default()
    };
    let ids: Vec<RunId> = store.runs(&device).unwrap().iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![new.id]);
    drop(store);

    // Opening again (or from several connections) migrates nothing twice.
    let mut again = SqliteStore::open(&db, Duration::from_secs(1)).unwrap();
    assert_eq!(again.runs(&RunFilter::default()).unwrap().len(), 2);
    // A file from a newer build is refused, naming both versions.
    rusqlite::Connection::open(&db)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let err = SqliteStore::open(&db, Duration::from_secs(1))
        .unwrap_err()
        .to_string();
    let cause = format!(
        "{:#}",
        SqliteStore::open(&db, Duration::from_secs(1)).unwrap_err()
    );
    assert!(err.contains("old.db"), "{err}");
    assert!(cause.contains("schema version 99 is newer"), "{cause}");
}

#[test]
fn postgres_schema_is_made_once_and_a_newer_one_is_refused() {
    let Some(url) = pg::database("postgres_schema") else {
        return;
    };
    // Instances starting at once: one makes the schema, the others wait
    // for it (the advisory lock) and find it made.
    let opened: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || PgStore::connect(&url).map(|_| ()))
        })
        .collect();
    for o in opened {
        o.join().unwrap().unwrap();
    }
    let mut store = PgStore::connect(&url).unwrap();
    assert_eq!(
        i64::from(store.schema_version().unwrap()),
        service::store::SCHEMA_VERSION
    );
    // Every version's step was applied (version 3's index included).
    assert_eq!(
        pg::psql(
            &url,
            "SELECT count(*) FROM pg_indexes WHERE indexname IN ('runs_by_received', 'runs_by_kind')"
        ),
        "2"
    );
    assert_eq!(
        pg::psql(&url, "SELECT count(*) FROM edge_service_schema"),
        "1"
    );
    let (_, run) = new_run(5, "phones");
    assert_eq!(store.insert_runs(&[run]).unwrap(), vec![Inserted::Stored]);
    drop(store);
    // Opening again keeps the runs.
    let mut again = PgStore::connect(&url).unwrap();
    assert_eq!(again.runs(&RunFilter::default()).unwrap().len(), 1);
    // A database from a newer build is refused, naming both versions.
    pg::psql(&url, "UPDATE edge_service_schema SET version = 99");
    let err = format!("{:#}", PgStore::connect(&url).unwrap_err());
    assert!(err.contains("schema version 99 is newer"), "{err}");
}

fn origin_cpu_in_flight_peers_and_devices_are_stored(backend: &Backend) {
    let mut store = backend.open();
    let (w1, run1) = windowed_run(40, 0xaa, 1);
    let (w2, run2) = windowed_run(41, 0xaa, 2);
    let (other, run3) = windowed_run(42, 0xbb, 0);
    let mut foreign = windowed_run(43, 0xaa, 0).1;
    foreign.group = "laptops".into();
    let v1 = v1_fixture();
    let old = NewRun::from_summary(&agent_core::Summary::decode(&v1).unwrap(), v1, "phones", 1);
    store
        .insert_runs(&[run2.clone(), run1, run3, foreign, old, run2])
        .unwrap();

    let rows = store
        .runs(&RunFilter {
            stream: Some(StreamId([0xaa ^ 0xff; 16])),
            ..RunFilter::default()
        })
        .unwrap();
    let ids: Vec<RunId> = rows.iter().map(|r| r.id).collect();
    // Both windows of the phones stream and the laptops run of the same
    // device and stream, oldest start first.
    assert_eq!(ids.len(), 3, "{rows:?}");
    assert_eq!(&ids[..2], &[w1.id, w2.id]);
    let r = &rows[0];
    assert_eq!(r.device, Some(DeviceId([0xaa; 16])));
    assert_eq!(r.window, 1);
    assert_eq!(r.window_ns, 1_000_000_000);
    assert_eq!((r.cpu_user_ns, r.cpu_system_ns), (Some(7_000), Some(3_000)));
    assert_eq!(r.in_flight, 1);

    let w1_id = w1.id.to_string();
    let peers = backend.rows(&format!(
        "SELECT transport, address, port, calls, bytes, last_syscall, last_result \
         FROM run_peers WHERE id = '{w1_id}' ORDER BY calls DESC"
    ));
    assert_eq!(
        peers,
        vec![
            "tcp|192.0.2.1|80|9|900|read|-104",
            "tcp|::1|443|4|400|read|-104"
        ]
    );
    assert_eq!(
        backend.one(&format!(
            "SELECT peers_folded FROM runs WHERE id = '{w1_id}'"
        )),
        "3"
    );

    // Devices: per group; counts of whole runs and windows (the repeat not
    // counted again); the v1 run has no device and is not listed.
    let phones = store
        .devices(&DeviceFilter {
            group: Some("phones".into()),
            limit: None,
        })
        .unwrap();
    let listed: Vec<(DeviceId, u64, u64)> = phones
        .iter()
        .map(|d| (d.device, d.runs, d.windows))
        .collect();
    assert_eq!(listed.len(), 2, "{phones:?}");
    assert!(listed.contains(&(DeviceId([0xaa; 16]), 0, 2)), "{listed:?}");
    assert!(listed.contains(&(DeviceId([0xbb; 16]), 1, 0)), "{listed:?}");
    let aa = phones.iter().find(|d| d.device == [0xaa; 16]).unwrap();
    // Facts and program of the most recent window (by start), although
    // window 2 was stored first.
    assert_eq!(aa.last_start_unix_ns, w2.run.start_unix_ns);
    assert_eq!(aa.last_program, w2.facts.program.as_str());
    assert_eq!(aa.facts, summary_view::to_json(&w2)["facts"]);
    assert_eq!((aa.first_seen_unix_ns, aa.last_seen_unix_ns), (140, 141));
    let bb = phones.iter().find(|d| d.device == [0xbb; 16]).unwrap();
    assert_eq!(bb.facts["kernel"], other.facts.kernel.as_str());
    let all = store.devices(&DeviceFilter::default()).unwrap();
    assert_eq!(all.len(), 3);
    assert!(all
        .iter()
        .any(|d| d.group == "laptops" && d.device == [0xaa; 16] && d.runs == 1));
}

/// `sslmode=require` connects over TLS, checking the server's certificate
/// (here against the private CA of `sslrootcert`); without the CA the
/// certificate is refused; without `sslmode` the connection is plain.
#[test]
fn postgres_tls_is_used_when_asked_and_the_certificate_is_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let tls = tmp.path().join("tls");
    service::tls_admin::init(&service::tls_admin::InitOptions {
        dir: tls.clone(),
        names: "localhost,127.0.0.1".into(),
        days: 30,
        force: false,
    })
    .unwrap();
    let pg_dir = tmp.path().join("pg");
    std::fs::create_dir(&pg_dir).unwrap();
    for f in ["server.pem", "server.key"] {
        std::fs::copy(tls.join(f), pg_dir.join(f)).unwrap();
    }
    let opts = format!(
        "-c ssl=on -c ssl_cert_file={0}/server.pem -c ssl_key_file={0}/server.key",
        pg_dir.display()
    );
    let server = match pg::launch(&pg_dir, &opts) {
        Ok(s) => s,
        Err(why) => return pg::skip("postgres_tls", &why),
    };
    let ssl_sessions = |ssl: bool| {
        pg::psql(
            &server.url,
            &format!(
                "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
                 WHERE a.application_name = 'edge-service' AND s.ssl = {ssl}"
            ),
        )
    };
    let ca = tls.join("ca.pem");
    let secure = format!(
        "{}?sslmode=require&sslrootcert={}",
        server.url,
        ca.display()
    );
    let mut store = PgStore::connect(&secure).unwrap();
    assert_eq!(store.directives().unwrap(), vec![]);
    assert_eq!(ssl_sessions(true), "1");
    assert_eq!(ssl_sessions(false), "0");
    drop(store);

    let unknown_ca = format!("{}?sslmode=require", server.url);
    let err = format!("{:#}", PgStore::connect(&unknown_ca).unwrap_err());
    assert!(err.contains("certificate"), "{err}");

    let _plain = PgStore::connect(&server.url).unwrap();
    assert_eq!(ssl_sessions(false), "1");
}

/// `sslmode=prefer` means libpq's: TLS when the server offers it, else a
/// plain connection, with a warning naming the server (the test server has
/// no TLS); `require` refuses that server; a mode the client does not know
/// is refused by name.
#[test]
fn postgres_sslmode_prefer_warns_when_it_falls_back_to_plaintext() {
    let Some(url) = pg::database("sslmode_prefer") else {
        return;
    };
    let show = |db: &str| {
        let out = std::process::Command::new(common::bin())
            .args(["directive", "show", "--db", db])
            .env_remove("EDGE_SERVICE_DB")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let server = url
        .strip_prefix("postgres://postgres@")
        .and_then(|rest| rest.split_once('/'))
        .map(|(host, _)| host.to_string())
        .unwrap();

    let (ok, err) = show(&format!("{url}?sslmode=prefer"));
    assert!(ok, "{err}");
    let warning: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warning.len(), 1, "one warning line: {err}");
    assert!(
        warning[0].contains(&server) && warning[0].contains("plaintext"),
        "{err}"
    );

    let (ok, err) = show(&format!("{url}?sslmode=require"));
    assert!(!ok && err.contains("TLS"), "{err}");
    let (ok, err) = show(&url);
    assert!(ok && !err.contains("warning"), "{err}");
    let (ok, err) = show(&format!("{url}?sslmode=allow"));
    assert!(
        !ok && err.contains("sslmode=allow is not supported"),
        "{err}"
    );
}

/// A run of device `device` in `group`, full (with `directive=<id>` when
/// given) or light.
fn directed_run(seed: u64, device: u8, group: &str, directive: Option<i64>, light: bool) -> NewRun {
    let mut s = sample::summary(seed, 200, None);
    if let Some(id) = directive {
        s.facts.add("directive", &id.to_string()).unwrap();
    }
    s.origin = agent_core::Origin {
        device: DeviceId([device; 16]),
        stream: StreamId([seed as u8; 16]),
        window_ns: 0,
    };
    if light {
        s = agent_core::Summary::light(
            s.id,
            agent_core::RunRecord { events: 0, ..s.run },
            s.facts.clone(),
            s.origin,
            None,
            None,
        );
    }
    let mut buf = [0u8; agent_core::MAX_ENCODED_LEN];
    let raw = s.encode(&mut buf).unwrap().to_vec();
    NewRun::from_summary(&agent_core::Summary::decode(&raw).unwrap(), raw, group, 9)
}

fn device_directives_count_their_runs_and_reports_are_kept(backend: &Backend) {
    use service::proactive::directives::DeviceDirective;
    use service::proactive::reports::{Report, ReportDevice};
    let mut store = backend.open();
    let new = |device: u8| {
        DeviceDirective::new(
            "phones",
            DeviceId([device; 16]),
            Some("wget"),
            None,
            2,
            10,
            20,
            "operator",
        )
        .unwrap()
    };
    let a = store.add_device_directive(&new(0xa)).unwrap();
    let b = store.add_device_directive(&new(0xb)).unwrap();
    assert!(b > a && a > 0);
    let received = |store: &mut Box<dyn Store>, id: i64| {
        store
            .device_directives(Some("phones"), None)
            .unwrap()
            .into_iter()
            .find(|d| d.id == id)
            .unwrap()
            .received
    };
    let first = directed_run(1, 0xa, "phones", Some(a), false);
    assert_eq!(
        store.insert_runs(std::slice::from_ref(&first)).unwrap(),
        vec![Inserted::Stored]
    );
    assert_eq!(received(&mut store, a), 1);
    // A repeat, another device's run, another group's run and a light
    // record naming the directive do not count.
    store
        .insert_runs(&[
            first,
            directed_run(2, 0xb, "phones", Some(a), false),
            directed_run(3, 0xa, "laptops", Some(a), false),
            directed_run(4, 0xa, "phones", Some(a), true),
        ])
        .unwrap();
    assert_eq!(received(&mut store, a), 1);
    assert_eq!(received(&mut store, b), 0);
    store
        .insert_runs(&[directed_run(5, 0xa, "phones", Some(a), false)])
        .unwrap();
    let listed = backend
        .open()
        .device_directives(None, Some(&DeviceId([0xa; 16])))
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].received, 2);
    assert!(listed[0].is_fulfilled());
    assert_eq!(listed[0].program.as_deref(), Some("wget"));

    // Light records are stored like runs, told apart by kind; the
    // diagnosis reads full runs only.
    let light = RunFilter {
        kind: Some(agent_core::Kind::Light),
        ..RunFilter::default()
    };
    let rows = store.runs(&light).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].kind, agent_core::Kind::Light);
    assert_eq!(rows[0].view().kind, "light");
    assert_eq!(store.runs(&RunFilter::default()).unwrap().len(), 5);
    let full = StoreSource
        .load(&backend.db(), &DiagnoseFilter::default())
        .unwrap();
    assert_eq!(full.len(), 4);
    assert!(full.iter().all(|s| s.kind == agent_core::Kind::Full));

    assert_eq!(
        store
            .clear_device_directives("phones", None, Some(a))
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .clear_device_directives("laptops", None, None)
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .clear_device_directives("phones", Some(&DeviceId([0xb; 16])), None)
            .unwrap(),
        1
    );
    assert!(store.device_directives(None, None).unwrap().is_empty());

    let report = Report {
        id: 0,
        group: "phones".into(),
        program: "wget".into(),
        trigger: "slow".into(),
        status: "diagnosed".into(),
        detected_unix_ns: 1,
        created_unix_ns: 2,
        cluster: "2 slow".into(),
        devices: vec![ReportDevice {
            device: DeviceId([0xa; 16]),
            cluster: "slow".into(),
            directive: a,
            runs: 2,
        }],
        headline: "if x then good else bad (accuracy 1.00)".into(),
        text: "text body".into(),
        json: serde_json::json!({"rules": []}),
        html: "<!DOCTYPE html>".into(),
    };
    let id = store.add_report(&report).unwrap();
    let second = store.add_report(&report).unwrap();
    assert!(second > id);
    let listed = backend.open().reports(Some("phones")).unwrap();
    assert_eq!(
        listed.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![second, id]
    );
    assert_eq!(listed[0].devices, report.devices);
    assert!(
        listed[0].text.is_empty() && listed[0].html.is_empty(),
        "no bodies in the list"
    );
    assert!(store.reports(Some("laptops")).unwrap().is_empty());
    let read = store.report(id).unwrap().unwrap();
    assert_eq!(read, Report { id, ..report });
    assert_eq!(store.report(999).unwrap(), None);
}
