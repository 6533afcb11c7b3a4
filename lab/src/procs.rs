//! Child processes of a testbed: commands run to completion, a service
//! killed on drop, and finding the `edge-agent` binary.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// Whether this process runs with effective uid 0.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// Runs a command to completion; fails with its stderr.
pub fn sh(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Adds operator `GROUP-op` of `group` to the service's store `db` (a
/// random password: the demo logs in with its API token only; kept if it
/// is there already) and returns a new API token of it (`edge-service
/// operator add`, `operator token`).
pub fn operator_token(service: &Path, db: &Path, group: &str) -> anyhow::Result<String> {
    let name = format!("{group}-op");
    let mut password = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut password))
        .context("cannot read /dev/urandom")?;
    let mut add = Command::new(service)
        .args([
            "operator",
            "add",
            &name,
            "--group",
            group,
            "--password-stdin",
            "--db",
        ])
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {} operator add", service.display()))?;
    if let Some(mut stdin) = add.stdin.take() {
        writeln!(stdin, "{}", hex::encode(password))?;
    }
    let added = add.wait_with_output()?;
    // A service restarted on its store finds the operator there.
    let exists = String::from_utf8_lossy(&added.stderr).contains("already exists");
    if !added.status.success() && !exists {
        bail!(
            "{} operator add failed: {}",
            service.display(),
            String::from_utf8_lossy(&added.stderr).trim()
        );
    }
    let minted = Command::new(service)
        .args(["operator", "token", &name, "--db"])
        .arg(db)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {} operator token", service.display()))?;
    if !minted.status.success() {
        bail!(
            "{} operator token failed: {}",
            service.display(),
            String::from_utf8_lossy(&minted.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&minted.stdout).trim().to_string())
}

/// A child process killed on drop.
#[derive(Debug)]
pub struct Service(pub Child);

impl Service {
    /// Starts `SERVICE serve --listen ADDR --db DB --tokens TOKENS EXTRA...`
    /// with its output in `log`, and waits until it answers `/healthz`
    /// (at most 15 s); fails with its log if it exits first.
    pub fn start(
        service: &Path,
        addr: SocketAddr,
        db: &Path,
        tokens: &Path,
        extra: &[&str],
        log: &Path,
    ) -> anyhow::Result<Service> {
        let file = std::fs::File::create(log)?;
        let child = Command::new(service)
            .arg("serve")
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--db")
            .arg(db)
            .arg("--tokens")
            .arg(tokens)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("cannot start {} serve", service.display()))?;
        let mut serve = Service(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        while !healthy(addr) {
            if let Ok(Some(status)) = serve.0.try_wait() {
                bail!(
                    "{} serve exited ({status}); its log: {}",
                    service.display(),
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "{} serve did not answer /healthz within 15 s",
                    service.display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(serve)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether `GET /healthz` on `addr` answers 200.
pub fn healthy(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

/// The edge-agent binary to use: the one given, else the one next to this
/// program, else the one on PATH.
pub fn find_agent(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    find_binary("edge-agent", "--agent", "agent-linux", given)
}

/// The edge-service binary to use: the one given, else the one next to
/// this program, else the one on PATH.
pub fn find_service(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    find_binary("edge-service", "--service", "service", given)
}

/// The workspace binary `name` of `package`: `given` (its option `flag`),
/// else next to this program, else on PATH.
fn find_binary(
    name: &str,
    flag: &str,
    package: &str,
    given: Option<&Path>,
) -> anyhow::Result<PathBuf> {
    if let Some(p) = given {
        if !p.is_file() {
            bail!("{flag} {}: no such file", p.display());
        }
        return Ok(p.to_path_buf());
    }
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(name)));
    let on_path = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    sibling
        .into_iter()
        .chain(on_path)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{name} not found next to this program or on PATH: build it \
                 (cargo build --release -p {package}) or give {flag} PATH"
            )
        })
}
