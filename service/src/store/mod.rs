//! Storage behind a small trait, with two backends: SQLite (one file, the
//! embedded default) and PostgreSQL (several stateless `edge-service`
//! instances on one database). [`Location`] picks one from `--db`.
//!
//! A store is used from one thread at a time (`&mut self`): the server keeps
//! one for the group-commit writer ([`crate::writer`]) and a small pool for
//! reads.

mod columns;
mod incident_rows;
mod location;
mod postgres;
mod proactive_rows;
mod redact;
mod rows;
mod sqlite;

pub use incident_rows::{cause_columns, cause_of, IncidentFilter, IncidentRow};
pub use location::Location;
pub use postgres::PgStore;
pub use proactive_rows::{directive_of, DeviceDirective, Report, ReportDevice, DIRECTIVE_FACT};
pub use redact::redact_passwords;
pub use rows::{
    kind_from_name, kind_name, DeviceFilter, DeviceRow, NewRun, PeerRow, RunFilter, RunRow,
    StoredRun, SyscallRow,
};
pub use sqlite::SqliteStore;

/// The schema version this build writes, the same on both backends: a
/// version names one set of tables and columns. A database of an older
/// version is brought up to it when opened (each backend's `MIGRATIONS`);
/// a newer one is refused.
pub const SCHEMA_VERSION: i64 = 8;

use agent_core::{DeviceId, RunId};

use crate::directive::Directive;
use crate::operators::{Credential, OperatorRow};

/// What became of one run handed to [`Store::insert_runs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    /// Newly stored.
    Stored,
    /// Already stored for the same group (a repeat): nothing written.
    Repeat,
    /// The id is already stored for another group: nothing written.
    IdTaken,
}

/// Why a store operation failed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    /// Temporarily unable (locked by another writer, ...): retry later.
    #[error("store busy: {0}")]
    Busy(String),
    /// Anything else (disk full, corrupt file, ...).
    #[error("store failed: {0}")]
    Failed(String),
}

/// A place to keep runs and directives.
pub trait Store: Send {
    /// Stores `runs` in one transaction: when this returns `Ok` every run is
    /// durable; on `Err` none was stored. The result has one entry per run,
    /// in order.
    fn insert_runs(&mut self, runs: &[NewRun]) -> Result<Vec<Inserted>, StoreError>;
    /// Metadata of the runs matching `filter`, oldest start first.
    fn runs(&mut self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError>;
    /// How many runs match `filter` (its `limit` and order ignored): the
    /// web UI's diagnosis tells how many it left out.
    fn count_runs(&mut self, filter: &RunFilter) -> Result<u64, StoreError>;
    /// The stored bytes of the runs matching `filter`, oldest start first.
    fn load(&mut self, filter: &RunFilter) -> Result<Vec<StoredRun>, StoreError>;
    /// The devices of `filter`'s group (every group's when `None`), most
    /// recently seen first.
    fn devices(&mut self, filter: &DeviceFilter) -> Result<Vec<DeviceRow>, StoreError>;
    /// One run by id.
    fn run(&mut self, id: &RunId) -> Result<Option<StoredRun>, StoreError>;
    /// The directive of `group`, if one was set.
    fn directive(&mut self, group: &str) -> Result<Option<Directive>, StoreError>;
    /// Every directive, by group.
    fn directives(&mut self) -> Result<Vec<Directive>, StoreError>;
    /// Sets (replaces) the directive of its group.
    fn set_directive(&mut self, directive: &Directive) -> Result<(), StoreError>;
    /// Removes the directive of `group`; false when there was none.
    fn clear_directive(&mut self, group: &str) -> Result<bool, StoreError>;
    /// Stores a per-device directive (its `id` and `received` are
    /// ignored); returns its new id.
    fn add_device_directive(&mut self, directive: &DeviceDirective) -> Result<i64, StoreError>;
    /// The per-device directives of `group` (every group's when `None`),
    /// of `device` when given, expired and fulfilled ones included, oldest
    /// first.
    fn device_directives(
        &mut self,
        group: Option<&str>,
        device: Option<&DeviceId>,
    ) -> Result<Vec<DeviceDirective>, StoreError>;
    /// Deletes the per-device directives of `group`, only `device`'s when
    /// given, only directive `id` when given; returns how many.
    fn clear_device_directives(
        &mut self,
        group: &str,
        device: Option<&DeviceId>,
        id: Option<i64>,
    ) -> Result<u64, StoreError>;
    /// Stores a detector report (its `id` is ignored); returns its new id.
    fn add_report(&mut self, report: &Report) -> Result<i64, StoreError>;
    /// The reports of `group` (every group's when `None`), newest first,
    /// without their bodies (`text`, `json`, `html` empty).
    fn reports(&mut self, group: Option<&str>) -> Result<Vec<Report>, StoreError>;
    /// One report with its bodies.
    fn report(&mut self, id: i64) -> Result<Option<Report>, StoreError>;
    /// Prunes one batch of at most `batch` runs received before
    /// `before_unix_ns`, in one short transaction (so that a writer waits
    /// for one batch at most): deletes them with their syscall and peer
    /// rows; with `keep_raw`, deletes only those rows, and the run row with
    /// its raw summary stays (`GET /v1/runs/{id}` and `diagnose` still read
    /// it). Returns the number of runs pruned; 0 when none is left.
    fn prune_batch(
        &mut self,
        before_unix_ns: u64,
        keep_raw: bool,
        batch: u32,
    ) -> Result<u64, StoreError>;
    /// Deletes the devices last seen before `before_unix_ns`; returns how
    /// many.
    fn prune_devices(&mut self, before_unix_ns: u64) -> Result<u64, StoreError>;
    /// Adds an operator; false (nothing written) when the name is taken.
    fn add_operator(&mut self, operator: &OperatorRow) -> Result<bool, StoreError>;
    /// One operator by name.
    fn operator(&mut self, name: &str) -> Result<Option<OperatorRow>, StoreError>;
    /// Every operator, by name.
    fn operators(&mut self) -> Result<Vec<OperatorRow>, StoreError>;
    /// Removes an operator with its sessions and API tokens; false when
    /// there was none.
    fn remove_operator(&mut self, name: &str) -> Result<bool, StoreError>;
    /// Stores a session or API token (by the hash of its secret).
    fn add_credential(&mut self, credential: &Credential) -> Result<(), StoreError>;
    /// The credential whose secret hashes to `hash`, unless it expired
    /// before `now_unix_ns`.
    fn credential(
        &mut self,
        hash: &[u8; 32],
        now_unix_ns: u64,
    ) -> Result<Option<Credential>, StoreError>;
    /// Deletes one credential (logout); false when there was none.
    fn remove_credential(&mut self, hash: &[u8; 32]) -> Result<bool, StoreError>;
    /// Deletes `operator`'s API tokens (`operator revoke`) and, with
    /// `sessions`, its sessions too; returns how many.
    fn revoke_credentials(&mut self, operator: &str, sessions: bool) -> Result<u64, StoreError>;
    /// Deletes the sessions expired before `now_unix_ns`; returns how many.
    fn prune_credentials(&mut self, now_unix_ns: u64) -> Result<u64, StoreError>;
    /// Stores an incident of the live peer analysis (its `id` is
    /// ignored); returns its new id.
    fn add_incident(&mut self, incident: &IncidentRow) -> Result<i64, StoreError>;
    /// Writes what changes of an incident (by its `id`): metric,
    /// deviation, last window, close time, evidence. False when there is
    /// no such incident (pruned).
    fn update_incident(&mut self, incident: &IncidentRow) -> Result<bool, StoreError>;
    /// The open incidents of `group` (every group's when `None`), oldest
    /// first.
    fn open_incidents(&mut self, group: Option<&str>) -> Result<Vec<IncidentRow>, StoreError>;
    /// The `limit` most recently opened incidents of `group` (every
    /// group's when `None`), open or closed, newest first.
    fn recent_incidents(
        &mut self,
        group: Option<&str>,
        limit: u64,
    ) -> Result<Vec<IncidentRow>, StoreError>;
    /// One incident by id.
    fn incident(&mut self, id: i64) -> Result<Option<IncidentRow>, StoreError>;
    /// A page of incidents ([`IncidentFilter`]): never more than its
    /// limit, so a list of them is bounded however many are stored.
    fn incidents(&mut self, filter: &IncidentFilter) -> Result<Vec<IncidentRow>, StoreError>;
    /// Whether this connection holds (now takes, or already held) the live
    /// peer analysis' lock: of several instances on one database only one
    /// runs it. PostgreSQL: a session advisory lock, released when the
    /// connection ends; SQLite: one process, always true.
    fn hold_online_lock(&mut self) -> Result<bool, StoreError> {
        Ok(true)
    }
    /// Periodic upkeep the server runs on a connection of its own, off the
    /// writer's path (SQLite: checkpoints).
    fn housekeeping(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Opens new connections to one store (the writer's and the readers').
pub type StoreOpener = std::sync::Arc<dyn Fn() -> Result<Box<dyn Store>, StoreError> + Send + Sync>;

/// The SQL files of `migrations/<backend>/` in order, with the version
/// each brings a database to (the number its name starts with).
#[cfg(test)]
fn migration_files(backend: &str) -> Vec<(i64, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    let mut files: Vec<(i64, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let version = name.split('_').next().unwrap().parse().unwrap();
            (version, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    files.sort_by_key(|f| f.0);
    files
}
