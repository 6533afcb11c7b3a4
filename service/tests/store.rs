//! The SQLite store on its own: outcomes of inserts, the SQL-queryable
//! schema, filters, and the `diagnose` source.

use std::time::Duration;

use diagnose::input::{RunFilter as DiagnoseFilter, SummarySource};
use service::sample;
use service::source::SqliteSource;
use service::store::{Inserted, NewRun, RunFilter, SqliteStore, Store};

fn new_run(seed: u64, group: &str) -> (agent_core::Summary, NewRun) {
    let raw = sample::encoded(seed, 500, None);
    let summary = agent_core::Summary::decode(&raw).unwrap();
    let run = NewRun::from_summary(&summary, raw, group, 7);
    (summary, run)
}

#[test]
fn inserts_are_idempotent_per_group_and_queryable_with_sql() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let mut store = SqliteStore::open(&db, Duration::from_secs(1)).unwrap();
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

    // One row per (run, syscall, fd kind), with the summary's numbers.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let id = summary_view::id_hex(&a.id);
    let rows: i64 = conn
        .query_row(
            "SELECT count(*) FROM run_syscalls WHERE id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows as usize, a.syscalls.len());
    let read = a
        .syscalls
        .iter()
        .find(|s| s.key.id.name() == Some("read") && s.key.fd_kind == agent_core::FdKind::Tcp)
        .unwrap();
    let (count, errors, total): (i64, i64, i64) = conn
        .query_row(
            "SELECT count, errors, total_ns FROM run_syscalls WHERE id = ?1 AND syscall = 'read' AND fd_kind = 'tcp'",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        (count as u64, errors as u64, total as u64),
        (read.count, read.errors(), read.total_ns)
    );
    let (group, program, facts): (String, String, String) = conn
        .query_row(
            "SELECT group_name, program, facts FROM runs WHERE id = ?1",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(group, "phones");
    assert_eq!(program, a.facts.program.as_str());
    let facts: serde_json::Value = serde_json::from_str(&facts).unwrap();
    assert_eq!(facts, summary_view::to_json(&a)["facts"]);

    // The raw bytes come back exactly.
    assert_eq!(store.run(&a.id).unwrap().unwrap().raw, run_a.raw);
}

#[test]
fn filters_and_the_diagnose_source_agree() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let mut store = SqliteStore::open(&db, Duration::from_secs(1)).unwrap();
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
    assert_eq!(store.runs(&limited).unwrap().len(), 3);

    let program = runs[0].0.facts.program.to_string();
    let loaded = SqliteSource
        .load(
            &db,
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

    let missing = SqliteSource.load(&dir.path().join("nope.db"), &DiagnoseFilter::default());
    assert!(missing.unwrap_err().to_string().contains("does not exist"));
}
