//! Where the store is: `--db` (or `$EDGE_SERVICE_DB`) names an SQLite file
//! (a path, or `sqlite:PATH`) or a PostgreSQL database (`postgres://...` or
//! `postgresql://...`), and this opens connections to it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::redact::redact_passwords;
use super::{PgStore, SqliteStore, Store, StoreError, StoreOpener};

/// Writer connections of a server on PostgreSQL: enough that a commit
/// waiting for its WAL flush does not hold up the next batch.
pub const POSTGRES_WRITERS: usize = 4;

/// A store named on the command line.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (its password, if any, is never printed).
    Postgres(String),
    /// libpq's other form, `host=... dbname=...`: refused when opened,
    /// with the URL form to use instead, rather than read as the name of
    /// a new SQLite file (and its `sslmode` left unread).
    Conninfo(String),
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // A key=value connection string given as `--db` is read as a
            // file name; its password is hidden all the same.
            Location::Sqlite(path) => f.write_str(&redact_passwords(&path.display().to_string())),
            Location::Postgres(url) | Location::Conninfo(url) => {
                f.write_str(&redact_passwords(url))
            }
        }
    }
}

impl Location {
    /// Reads `--db`: a `postgres://` or `postgresql://` URL; libpq's
    /// `key=value ...` form (refused when opened); else an SQLite path
    /// (with or without `sqlite:` before it: `sqlite:` makes any text a
    /// file name).
    pub fn parse(db: &Path) -> Location {
        let Some(text) = db.to_str() else {
            return Location::Sqlite(db.to_path_buf());
        };
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            Location::Postgres(text.to_string())
        } else if let Some(path) = text.strip_prefix("sqlite:") {
            Location::Sqlite(PathBuf::from(path.strip_prefix("//").unwrap_or(path)))
        } else if is_conninfo(text) {
            Location::Conninfo(text.to_string())
        } else {
            Location::Sqlite(db.to_path_buf())
        }
    }

    /// Opens connections for a server: SQLite's leave checkpoints mostly to
    /// the housekeeping thread; PostgreSQL's reconnect when the database
    /// comes back after an outage.
    pub fn opener(&self, busy_timeout: Duration) -> StoreOpener {
        match self.clone() {
            Location::Sqlite(db) => Arc::new(move || {
                SqliteStore::open(&db, busy_timeout)
                    .and_then(|s| s.defer_checkpoints().map(|()| s))
                    .map(|s| Box::new(s) as Box<dyn Store>)
                    .map_err(|e| StoreError::Failed(format!("{e:#}")))
            }),
            Location::Postgres(url) => Arc::new(move || {
                PgStore::connect(&url)
                    .map(|s| Box::new(s) as Box<dyn Store>)
                    .map_err(|e| StoreError::Busy(format!("{e:#}")))
            }),
            Location::Conninfo(text) => {
                let refusal = conninfo_refusal(&text);
                Arc::new(move || Err(StoreError::Failed(refusal.clone())))
            }
        }
    }

    /// How many writer threads (connections) a server runs: SQLite one (a
    /// second would wait for the file's lock); PostgreSQL
    /// [`POSTGRES_WRITERS`], whose commits overlap.
    pub fn writers(&self) -> usize {
        match self {
            Location::Sqlite(_) | Location::Conninfo(_) => 1,
            Location::Postgres(_) => POSTGRES_WRITERS,
        }
    }

    /// Opens a store that must already exist (the commands other than
    /// `serve`): a mistyped SQLite path must not create a new, empty file
    /// that the server never reads. (A PostgreSQL database always exists
    /// before edge-service meets it: the operator creates it.)
    pub fn open_existing(&self) -> anyhow::Result<Box<dyn Store>> {
        match self {
            Location::Sqlite(db) => {
                if !db.exists() {
                    anyhow::bail!(
                        "database {self} does not exist (edge-service serve creates it; check --db or EDGE_SERVICE_DB)"
                    );
                }
                Ok(Box::new(SqliteStore::open(db, Duration::from_secs(5))?))
            }
            Location::Postgres(url) => Ok(Box::new(PgStore::connect(url)?)),
            Location::Conninfo(text) => anyhow::bail!("{}", conninfo_refusal(text)),
        }
    }
}

/// libpq's connection parameters (`libpq` documentation, "Parameter Key
/// Words"): a `--db` made only of `KEY=VALUE` words with these keys is a
/// connection string, not a file name.
const CONNINFO_KEYS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "connect_timeout",
    "options",
    "application_name",
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "target_session_attrs",
    "service",
];

/// Whether `text` is libpq's `key=value ...` form.
fn is_conninfo(text: &str) -> bool {
    let mut words = text.split_whitespace().peekable();
    words.peek().is_some()
        && words.all(|w| {
            w.split_once('=')
                .is_some_and(|(key, _)| CONNINFO_KEYS.contains(&key))
        })
}

/// Why a key=value `--db` is refused, and what to give instead.
fn conninfo_refusal(text: &str) -> String {
    format!(
        "--db {} is a PostgreSQL key=value connection string; give it as a URL \
         (postgres://USER@HOST:PORT/DBNAME?sslmode=require), or sqlite:PATH for a file of that name",
        redact_passwords(text)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_select_postgres_and_paths_sqlite() {
        let pg = Location::parse(Path::new("postgres://edge@db.example/fleet"));
        assert_eq!(
            pg,
            Location::Postgres("postgres://edge@db.example/fleet".into())
        );
        assert!(matches!(
            Location::parse(Path::new("postgresql://h/d")),
            Location::Postgres(_)
        ));
        assert_eq!(
            Location::parse(Path::new("sqlite:/var/lib/e.db")),
            Location::Sqlite("/var/lib/e.db".into())
        );
        assert_eq!(
            Location::parse(Path::new("sqlite:rel.db")),
            Location::Sqlite("rel.db".into())
        );
        assert_eq!(
            Location::parse(Path::new("edge-service.db")),
            Location::Sqlite("edge-service.db".into())
        );
        assert_eq!(
            Location::parse(Path::new("./a=b.db")),
            Location::Sqlite("./a=b.db".into()),
            "an = in a file name"
        );
    }

    /// libpq's key=value form is not taken for a new SQLite file of that
    /// name: opening it is refused, naming the URL form, its password
    /// hidden.
    #[test]
    fn a_key_value_connection_string_is_refused_not_made_a_file() {
        let text = "host=db.example dbname=fleet user=edge password=s3cret sslmode=require";
        let location = Location::parse(Path::new(text));
        assert_eq!(location, Location::Conninfo(text.into()));
        let err = match location.opener(Duration::from_secs(1))() {
            Err(e) => e.to_string(),
            Ok(_) => panic!("opened"),
        };
        assert!(err.contains("postgres://USER@HOST"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
        let err = location.open_existing().err().unwrap().to_string();
        assert!(err.contains("key=value"), "{err}");
        assert!(!Path::new(text).exists(), "no file made");
        assert_eq!(
            Location::parse(Path::new(&format!("sqlite:{text}"))),
            Location::Sqlite(text.into())
        );
    }

    #[test]
    fn passwords_are_not_printed() {
        let url = "postgres://edge:s3cret@db:5432/fleet?sslmode=require";
        let shown = Location::parse(Path::new(url)).to_string();
        assert_eq!(shown, "postgres://edge:***@db:5432/fleet?sslmode=require");
        let key_value = Location::parse(Path::new("host=db password=s3cret")).to_string();
        assert_eq!(key_value, "host=db password=***");
    }
}
