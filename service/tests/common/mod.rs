//! Starts `edge-service serve` as a child process and talks to it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

pub mod pg;
pub mod webui;

pub const TOKEN: &str = "phones-token-0123456789";
pub const OTHER_TOKEN: &str = "laptops-token-0123456789";
/// The group of the shipped version 1 fixture (its `group` fact is `lab`).
pub const LAB_TOKEN: &str = "lab-token-0123456789abcd";
pub const CONTENT_TYPE: &str = "application/vnd.edge-agent.summaries";

/// The password of the test operators.
pub const OPERATOR_PASSWORD: &str = "operator-password-0123";

/// A running server; killed when dropped.
pub struct Server {
    pub child: Child,
    pub url: String,
    pub db: PathBuf,
    /// API tokens of the operators made so far, by group.
    operators: Mutex<HashMap<String, String>>,
}

/// The group a test device token names.
pub fn group_of(device_token: &str) -> &'static str {
    match device_token {
        TOKEN => "phones",
        OTHER_TOKEN => "laptops",
        LAB_TOKEN => "lab",
        other => panic!("no group for token {other}"),
    }
}

/// Adds operator `name` of `group` (password [`OPERATOR_PASSWORD`]) to the
/// store `db`, unless it is there already.
pub fn add_operator(db: &Path, name: &str, group: &str) {
    let mut child = Command::new(bin())
        .args([
            "operator",
            "add",
            name,
            "--group",
            group,
            "--password-stdin",
            "--db",
        ])
        .arg(db)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{OPERATOR_PASSWORD}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A server restarted on the same store finds its operators there.
    assert!(
        out.status.success() || stderr.contains("already exists"),
        "operator add: {stderr}"
    );
}

/// Mints an API token of operator `name` in the store `db`.
pub fn operator_token(db: &Path, name: &str) -> String {
    let out = Command::new(bin())
        .args(["operator", "token", name, "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "operator token: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

impl Server {
    /// An API token of an operator of the group of `device_token` (the
    /// operator `GROUP-op` is made at the first call).
    pub fn op(&self, device_token: &str) -> String {
        let group = group_of(device_token);
        let mut ops = self.operators.lock().unwrap();
        ops.entry(group.to_string())
            .or_insert_with(|| {
                let name = format!("{group}-op");
                add_operator(&self.db, &name, group);
                operator_token(&self.db, &name)
            })
            .clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn write_tokens(dir: &Path) -> PathBuf {
    let path = dir.join("tokens");
    std::fs::write(
        &path,
        format!("# test fleet\nphones {TOKEN}\nlaptops {OTHER_TOKEN}\nlab {LAB_TOKEN}\n"),
    )
    .unwrap();
    path
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_edge-service")
}

/// Starts a server on a free loopback port with the given extra arguments
/// and waits for its "listening on" line.
pub fn start(dir: &Path, extra: &[&str]) -> Server {
    start_on(dir, &dir.join("service.db"), extra)
}

/// Starts a server on the store `db` (an SQLite path or a `postgres://`
/// URL), its tokens file in `dir`.
pub fn start_on(dir: &Path, db: &Path, extra: &[&str]) -> Server {
    let db = db.to_path_buf();
    let tokens = write_tokens(dir);
    let mut args = vec![
        "serve".to_string(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--db".into(),
        db.display().to_string(),
    ];
    if !extra.contains(&"--insecure-no-auth") {
        args.push("--tokens".into());
        args.push(tokens.display().to_string());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut child = Command::new(bin())
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://") || w.starts_with("https://"))
        .unwrap_or_else(|| panic!("no listening line, got {line:?}"))
        .to_string();
    Server {
        child,
        url,
        db,
        operators: Mutex::new(HashMap::new()),
    }
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// Status, Retry-After and JSON body of a POST /v1/summaries.
pub fn post(
    url: &str,
    token: Option<&str>,
    content_type: Option<&str>,
    body: &[u8],
) -> (u16, Option<String>, serde_json::Value) {
    let mut req = agent().post(format!("{url}/v1/summaries"));
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    if let Some(ct) = content_type {
        req = req.header("Content-Type", ct);
    }
    let mut resp = req.send(body).unwrap();
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let text = resp.body_mut().read_to_string().unwrap();
    let json =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
    (status, retry, json)
}

/// An upload body holding `items` (`agent_core::framing`).
pub fn body<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut body = Vec::new();
    agent_core::framing::write_body(&mut body, items);
    body
}

pub fn post_items(url: &str, items: &[Vec<u8>]) -> (u16, serde_json::Value) {
    let body = body(items.iter().map(Vec::as_slice));
    let (status, _, json) = post(url, Some(TOKEN), Some(CONTENT_TYPE), &body);
    (status, json)
}

/// Status and JSON body of a GET sending `cookie` (`name=value`).
pub fn get_with_cookie(url: &str, path: &str, cookie: &str) -> (u16, serde_json::Value) {
    let mut resp = agent()
        .get(format!("{url}{path}"))
        .header("Cookie", cookie)
        .call()
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or_default())
}

pub fn get(url: &str, path: &str, token: Option<&str>) -> (u16, serde_json::Value) {
    let mut req = agent().get(format!("{url}{path}"));
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let mut resp = req.call().unwrap();
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

/// An id's 32 hex digits.
pub fn hex(id: &impl std::fmt::Display) -> String {
    id.to_string()
}

pub fn id_of(encoded: &[u8]) -> String {
    hex(&agent_core::Summary::decode(encoded).unwrap().id)
}

pub fn accepted(json: &serde_json::Value) -> Vec<String> {
    json["accepted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// Number of runs stored, read from the database file directly.
pub fn stored_ids(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn.prepare("SELECT id FROM runs ORDER BY id").unwrap();
    let ids = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    ids
}
