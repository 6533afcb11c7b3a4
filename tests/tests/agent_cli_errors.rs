//! Bad input to `edge-agent` is one clear error line, never a harm: a
//! summary that cannot be saved does not replace the program's status,
//! `--out` is never left empty, reads are capped, a mistyped option is not
//! run as the command, and mistakes are named.

mod tracer_support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use tracer_support::*;

fn edge_agent(args: &[&str]) -> Output {
    output_timeout(Command::new(agent()).args(args), 60)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Item 5: the summary's folder vanishes while the program runs: the agent
/// still exits with the program's status, and says on one line that the
/// summary was not saved.
#[test]
fn an_unsaved_summary_does_not_replace_the_programs_status() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    for option in ["--out", "--spool"] {
        std::fs::create_dir_all(&sub).unwrap();
        let target = match option {
            "--out" => sub.join("o.summary"),
            _ => sub.clone(),
        };
        let script = format!("rm -rf {}; exit 7", sub.display());
        let out = edge_agent(&["run", option, p(&target), "--", "sh", "-c", &script]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(7), "{option}: {err}");
        assert!(err.contains("the summary was not saved"), "{option}: {err}");
        // Besides the line naming the backend `auto` chose.
        assert_eq!(lines_but_backend(&err), 1, "{option}: {err}");
    }
}

/// Item 6: `--out FILE` is never left empty or partial: a failed run leaves
/// no file (or the old one untouched), and a killed agent leaves none.
#[test]
fn out_is_whole_or_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("o.summary");
    let out = edge_agent(&["run", "--out", p(&file), "--", "no-such-command-here"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!file.exists(), "command not found leaves no file");
    let out = edge_agent(&["attach", "999999999", "--out", p(&file)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!file.exists(), "a failed attach leaves no file");
    std::fs::write(&file, b"old").unwrap();
    let out = edge_agent(&["run", "--out", p(&file), "--", "no-such-command-here"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read(&file).unwrap(), b"old", "left untouched");
    std::fs::remove_file(&file).unwrap();

    let mut agent = Command::new(agent())
        .args(["run", "--out", p(&file), "--", "sleep", "5"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    agent.kill().unwrap();
    agent.wait().unwrap();
    assert!(!file.exists(), "a killed agent leaves no file");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.is_empty(), "no leftovers: {names:?}");

    // A successful run writes it whole.
    let out = edge_agent(&["run", "--out", p(&file), "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    agent_core::Summary::decode(&std::fs::read(&file).unwrap()).unwrap();

    // Through a symlink the file it points to is replaced, not the link.
    let link = dir.path().join("link.summary");
    std::os::unix::fs::symlink("o.summary", &link).unwrap();
    let out = edge_agent(&["run", "--out", p(&link), "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
}

/// Item 6: a corrupt summary is described in the decoder's own words.
#[test]
fn a_corrupt_summary_is_named_in_the_decoders_words() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.summary");
    let mut bytes = vec![1u8];
    bytes.extend_from_slice(&[7u8; 16]);
    bytes.extend_from_slice(&[0xffu8; 12]);
    std::fs::write(&file, &bytes).unwrap();
    let out = edge_agent(&["show", p(&file)]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("malformed summary: a number"), "{err}");
    assert!(!err.contains("varint"), "{err}");
    assert_eq!(err.matches("not a valid summary").count(), 1, "{err}");
}

/// Item 7: `show` reads at most the summary cap (plus one byte) of any
/// input and says it is too large.
#[test]
fn show_reads_at_most_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    // Sparse: 1 GiB that takes no disk and, read whole, 1 GiB of memory.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let start = Instant::now();
    let out = edge_agent(&["show", p(&big)]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("larger than 2048 bytes"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(30));
}

/// Item 8: an unknown option before `--` is an error with a hint, not the
/// command; the command starts at `--` or at the first non-option word.
#[test]
fn an_unknown_option_is_not_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("o.summary");
    let out = edge_agent(&["run", "--bogus", "--out", p(&file), "--", "true"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unexpected argument '--bogus'"), "{err}");
    assert!(err.contains("tip:"), "{err}");
    assert!(!err.contains("command not found"), "{err}");
    // The first non-option word starts the command; options after it are
    // the command's.
    let out = edge_agent(&["run", "--out", p(&file), "sh", "-c", "exit 3", "--bogus"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
}

/// Item 9: mistakes accepted silently before are clear errors.
#[test]
fn mistakes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("o.summary");

    let out = edge_agent(&["run", "--only", "", "--out", p(&file), "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--only needs at least one syscall name"),
        "{}",
        stderr(&out)
    );

    let out = edge_agent(&["run", "--out", p(&file), "--", "/etc/passwd"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("cannot run /etc/passwd"), "{err}");
    assert!(err.contains("not executable"), "{err}");

    let fact = format!("k={}", "v".repeat(10_000));
    let out = edge_agent(&["run", "--fact", &fact, "--out", p(&file), "--", "true"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("bad fact"), "{err}");
    assert!(
        err.len() < 300,
        "the value is not echoed whole: {} bytes",
        err.len()
    );
}

/// Item 9: EPERM on attach names the likely cause: here, the agent lacks
/// CAP_SYS_PTRACE and the target holds capabilities the agent does not
/// (ptrace's rule: the eBPF backend needs no ptrace access).
#[test]
fn attach_eperm_names_the_missing_capability() {
    let capsh = Path::new("/usr/sbin/capsh");
    if agent_linux::sys::geteuid() != 0 || !capsh.exists() {
        eprintln!("skipped: needs root and capsh");
        return;
    }
    let bin = agent();
    let mut target = Command::new("sleep").arg("30").spawn().unwrap();
    let script = format!(
        "exec {} attach --backend ptrace {} --for 1 --out /dev/null",
        bin.display(),
        target.id()
    );
    let out = output_timeout(
        Command::new(capsh).args(["--drop=cap_sys_ptrace,cap_chown", "--", "-c", &script]),
        60,
    );
    let _ = target.kill();
    let _ = target.wait();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cap_chown"), "{err}");
    assert!(err.contains("needs CAP_SYS_PTRACE"), "{err}");
    assert!(!err.contains("security module"), "{err}");
}

/// A loopback HTTP server answering every request with 503 and
/// `Retry-After: 86400`; returns its port.
fn always_busy_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Read the headers and the body (Content-Length).
                loop {
                    let Ok(n) = conn.read(&mut chunk) else { return };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_ascii_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let _ = conn.write_all(
                    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 86400\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            });
        }
    });
    port
}

/// Item 9: `upload --once` against a service that says "come back in a
/// day" ends promptly instead of sleeping between its tries, and the
/// spool keeps the summary. A spool file that is not a summary is named
/// once as such ("not a valid summary" not doubled).
#[test]
fn upload_once_caps_its_total_wait() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let out = edge_agent(&["run", "--spool", p(&spool), "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(
        spool.join("0123456789abcdef0123456789abcdef.summary"),
        b"garbage",
    )
    .unwrap();
    let port = always_busy_server();
    let server = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    let out = output_timeout(
        Command::new(agent()).args([
            "upload",
            "--once",
            "--now",
            "--ignore-power",
            "--no-spread",
            "--server",
            &server,
            "--spool",
            p(&spool),
        ]),
        100,
    );
    let err = stderr(&out);
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "took {:?}: {err}",
        start.elapsed()
    );
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--once-wait"), "{err}");
    assert_eq!(err.matches("not a valid summary").count(), 1, "{err}");
    let left = std::fs::read_dir(&spool)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".summary")
        })
        .count();
    assert_eq!(left, 1, "the summary stays in the spool");
}
