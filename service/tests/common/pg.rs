//! A throwaway PostgreSQL server for this test binary
//! (`scripts/lib/pg-temp.sh run`: initdb into a temporary folder as an
//! unprivileged user, a free port), and a fresh database per test on it.
//!
//! The server lives as long as the test binary: the script waits on its
//! standard input, a pipe this process holds until it exits (however it
//! exits), then stops the server. Without PostgreSQL installed the tests
//! skip, and fail under CI (`CI=1`), like `edge_tests::skip`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

struct Server {
    /// Kept so that its standard input stays open until the process exits.
    _script: Mutex<TempServer>,
    url: String,
}

/// A server of its own (`launch`): stopped when dropped.
pub struct TempServer {
    script: Child,
    /// `postgres://postgres@127.0.0.1:PORT/postgres`
    pub url: String,
}

impl Drop for TempServer {
    fn drop(&mut self) {
        // Closing its standard input tells the script to stop the server.
        drop(self.script.stdin.take());
        let _ = self.script.wait();
    }
}

/// Starts a server in `dir` (`scripts/lib/pg-temp.sh run`), with the
/// server options `opts` (`$PG_TEMP_OPTS`).
pub fn launch(dir: &Path, opts: &str) -> Result<TempServer, String> {
    run_script(dir, opts, &[])
}

fn run_script(dir: &Path, opts: &str, flags: &[&str]) -> Result<TempServer, String> {
    let mut script = Command::new("bash")
        .arg(repo().join("scripts/lib/pg-temp.sh"))
        .arg("run")
        .arg(dir)
        .args(flags)
        .env("PG_TEMP_OPTS", opts)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run scripts/lib/pg-temp.sh: {e}"))?;
    let mut line = String::new();
    let stdout = script.stdout.take().ok_or("no stdout")?;
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let Some(url) = line.strip_prefix("ready ") else {
        drop(script.stdin.take());
        let output = script.wait_with_output().map_err(|e| e.to_string())?;
        return Err(format!(
            "scripts/lib/pg-temp.sh failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    };
    Ok(TempServer {
        url: url.trim().to_string(),
        script,
    })
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Reports a test that cannot run: a panic under CI (a missing dependency
/// must not pass there), a note otherwise.
pub fn skip(test: &str, why: &str) {
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{test} cannot run under CI: {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
}

fn start() -> Result<Server, String> {
    // The server lives in a static, which is never dropped: a `TempDir`
    // held here would leave its folder (some 220 MB of cluster) behind at
    // every run of the test binary. The script deletes it once it has
    // stopped the server (`--remove`), after this process has exited.
    let dir = tempfile::Builder::new()
        .prefix("edge-test-pg-")
        .tempdir()
        .map_err(|e| e.to_string())?
        .keep();
    let server = run_script(&dir, "", &["--remove"]).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&dir);
    })?;
    Ok(Server {
        url: server.url.clone(),
        _script: Mutex::new(server),
    })
}

fn server() -> Result<&'static Server, String> {
    static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();
    SERVER.get_or_init(start).as_ref().map_err(Clone::clone)
}

/// The psql of the installed server (Debian keeps it beside `postgres`).
fn psql_bin() -> PathBuf {
    let mut found = PathBuf::from("psql");
    if let Ok(dirs) = std::fs::read_dir("/usr/lib/postgresql") {
        for d in dirs.flatten() {
            let candidate = d.path().join("bin/psql");
            if candidate.exists() {
                found = candidate;
            }
        }
    }
    found
}

/// Runs `sql` on `url` with psql; its rows as lines, columns joined by `|`.
pub fn psql(url: &str, sql: &str) -> String {
    let out = Command::new(psql_bin())
        .args(["-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A new, empty database for `test` on the shared server, or `None`
/// (skipped; a failure under CI) when no PostgreSQL server can be run.
pub fn database(test: &str) -> Option<String> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let server = match server() {
        Ok(s) => s,
        Err(why) => {
            skip(test, &why);
            return None;
        }
    };
    let name = format!(
        "t{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        test.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    )
    .to_ascii_lowercase();
    let name: String = name.chars().take(60).collect();
    psql(&server.url, &format!("CREATE DATABASE {name}"));
    let base = server.url.rsplit_once('/').unwrap().0;
    Some(format!("{base}/{name}"))
}

/// Stops the server made in `dir` with `pg_ctl -m MODE` (`fast`,
/// `immediate`), keeping its data (`scripts/lib/pg-temp.sh halt`).
pub fn halt(dir: &Path, mode: &str) {
    let out = Command::new("bash")
        .arg(repo().join("scripts/lib/pg-temp.sh"))
        .args(["halt"])
        .arg(dir)
        .arg(mode)
        .stdin(Stdio::null())
        .output()
        .expect("pg-temp.sh runs");
    assert!(
        out.status.success(),
        "pg-temp.sh halt {mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts a halted server of `dir` again, on its port; returns once it
/// accepts connections (`scripts/lib/pg-temp.sh resume`).
pub fn resume(dir: &Path) {
    let out = Command::new("bash")
        .arg(repo().join("scripts/lib/pg-temp.sh"))
        .arg("resume")
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .expect("pg-temp.sh runs");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).starts_with("ready "),
        "pg-temp.sh resume: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
