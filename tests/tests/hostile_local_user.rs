//! A hostile local user against a root agent, end to end with the real
//! binaries (run as root; skipped otherwise). The user, `edge-hostile`, is
//! made by the test when missing (an unprivileged system user, no home)
//! and left in place; its programs run with its uid and gid and no
//! supplementary groups.
//!
//! - A FIFO named like `watch --backend ptrace --match NAME`'s text in the
//!   user's current folder, and `cat NAME` blocked on it: the watch looks
//!   for a shim script at the process's first argument, and once opened
//!   the FIFO, froze (and every tracee with it). It must go on tracing
//!   another matching program and end promptly on SIGTERM.
//! - A shim folder the user may write, with its symbolic links planted at
//!   the agent's temporary names: root's `shim install` (and `watch
//!   --shim-dir`) must refuse the folder, the link's target untouched;
//!   and in a safe folder a link left at those names must not redirect the
//!   agent's writes.

mod tracer_support;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tracer_support::*;

const USER: &str = "edge-hostile";

fn is_root() -> bool {
    agent_linux::sys::geteuid() == 0
}

/// The uid and gid of `edge-hostile`, made first if missing (tests run in
/// parallel in one process: one makes it, the others wait; another test
/// process that made it meanwhile is fine too).
fn hostile_user() -> (u32, u32) {
    static MADE: std::sync::Mutex<Option<(u32, u32)>> = std::sync::Mutex::new(None);
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(ids) = *made {
        return ids;
    }
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, USER]).output().ok()?;
        out.status.success().then_some(())?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    if id("-u").is_none() {
        let out = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ])
            .output()
            .expect("useradd (package passwd) runs");
        // 9: it exists (made by another test process meanwhile).
        assert!(
            out.status.success() || out.status.code() == Some(9),
            "useradd {USER}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let ids = (id("-u").expect("uid"), id("-g").expect("gid"));
    assert_ne!(ids.0, 0, "{USER} must not be root");
    *made = Some(ids);
    ids
}

/// `cmd` to run as the hostile user (its uid and gid, no other groups:
/// std drops them when it changes the uid).
fn as_hostile(cmd: &mut Command) -> &mut Command {
    let (uid, gid) = hostile_user();
    cmd.uid(uid).gid(gid)
}

/// A fresh folder any user may enter (not write): the test's own.
fn base_dir() -> tempfile::TempDir {
    let base = tempfile::tempdir().unwrap();
    chmod(base.path(), 0o755);
    base
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown_to_hostile(p: &Path) {
    let (uid, gid) = hostile_user();
    std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
}

/// A text no other process on the machine has in its command line.
fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{what}-{}-{nanos}", std::process::id())
}

/// Waits until `pid`'s command line is `argv` (its exec is done).
fn wait_for_cmdline(pid: u32, argv: &[&str]) {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default() != want {
        assert!(Instant::now() < deadline, "PID {pid} never ran {argv:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_fifo_named_like_the_match_does_not_freeze_a_root_watch() {
    if !is_root() {
        eprintln!("skipped: needs root (a root watch against another user)");
        return;
    }
    let base = base_dir();
    let name = unique("hostile-fifo");
    // The user's own folder, and its FIFO named like the match text.
    let home = base.path().join("home");
    std::fs::create_dir(&home).unwrap();
    chown_to_hostile(&home);
    let made = as_hostile(Command::new("mkfifo").arg(&name).current_dir(&home))
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo as {USER}");

    let out = base.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let mut watch = Command::new(agent());
    watch
        .args([
            "watch",
            "--backend",
            "ptrace",
            "--window",
            "whole",
            "--match",
        ])
        .arg(&name)
        .arg("--out-dir")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut watch = Killed(watch.spawn().unwrap());
    let said = Lines::collect(watch.0.stderr.take().unwrap());
    said.wait_for("edge-agent: watching for", 60);

    // `cat NAME` in the user's folder: blocked in open(2) on the FIFO, and
    // its first argument is what the watch looks at for a shim's marker.
    let cat = as_hostile(Command::new("cat").arg(&name).current_dir(&home))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let cat = Killed(cat);
    wait_for_cmdline(cat.0.id(), &["cat", &name]);

    // Another matching program (the user's too) is still traced.
    let mut other = as_hostile(Command::new("sh").args(["-c", "read line", &name]))
        .current_dir(&home)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    assert_traced_by(other.id(), watch.0.id(), 60);

    // SIGTERM ends the watch promptly, and lets its tracee go on.
    let asked = Instant::now();
    agent_linux::sys::kill(watch.0.id() as i32, libc::SIGTERM).unwrap();
    let st = wait_timeout(&mut watch.0, 30);
    println!("watch ended {:?} after SIGTERM", asked.elapsed());
    assert!(st.success(), "watch ended with {st:?}:\n{}", said.text());
    assert_eq!(tracer_of(other.id()), Some(0), "released");
    other.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(wait_timeout(&mut other, 30).success());
    // The FIFO's reader, a plain matching program, was let go too.
    assert_eq!(tracer_of(cat.0.id()), Some(0), "released");
}

/// Runs `edge-agent shim install --dir SHIMS sh` as root, with symbolic
/// links to `victim` planted (by `plant`) at the temporary names the
/// agent's pid would give, between the agent's start and its writes: the
/// process is a shell that waits for a line, then becomes the agent (same
/// pid).
fn install_with_planted_links(
    shims: &Path,
    out: &Path,
    victim: &Path,
    plant: impl Fn(&Path, &Path) -> bool,
) -> (std::process::Output, usize) {
    let mut install = Command::new("sh");
    install
        .args(["-c", r#"read go; exec "$0" "$@""#])
        .arg(agent())
        .args(["shim", "install", "--match", "x", "--dir"])
        .arg(shims)
        .arg("--out-dir")
        .arg(out)
        .arg("sh")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = install.spawn().unwrap();
    let pid = child.id();
    let planted = ["directive.json", "sh"]
        .iter()
        .filter(|name| plant(victim, &shims.join(format!(".{name}.tmp-{pid}"))))
        .count();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let st = wait_timeout(&mut child, 60);
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    std::io::Read::read_to_end(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    std::io::Read::read_to_end(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (
        std::process::Output {
            status: st,
            stdout,
            stderr,
        },
        planted,
    )
}

/// A file of root's that no one else may write.
fn victim_file(base: &Path) -> PathBuf {
    let victim = base.join("victim");
    std::fs::write(&victim, b"root's own\n").unwrap();
    chmod(&victim, 0o600);
    victim
}

fn assert_untouched(victim: &Path) {
    let text = std::fs::read(victim).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&text),
        "root's own\n",
        "root's file rewritten through a planted link"
    );
    let mode = std::fs::metadata(victim).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o600, "its mode changed");
}

#[test]
fn a_shim_folder_others_can_write_is_refused() {
    if !is_root() {
        eprintln!("skipped: needs root (a root agent against another user)");
        return;
    }
    let base = base_dir();
    let victim = victim_file(base.path());
    let out = base.path().join("out");
    // The user's folder, which a root agent is told to use as its shims'.
    let shims = base.path().join("shims");
    std::fs::create_dir(&shims).unwrap();
    chown_to_hostile(&shims);
    let plant_as_hostile = |victim: &Path, link: &Path| {
        as_hostile(Command::new("ln").arg("-s").arg(victim).arg(link))
            .status()
            .unwrap()
            .success()
    };
    let (install, planted) = install_with_planted_links(&shims, &out, &victim, plant_as_hostile);
    assert_eq!(planted, 2, "the user could plant its links");
    let err = String::from_utf8_lossy(&install.stderr);
    assert!(
        !install.status.success(),
        "installed into the user's folder"
    );
    assert!(
        err.contains(&format!("shim folder {} refused", shims.display()))
            && err.contains("owned by uid"),
        "{err}"
    );
    assert_untouched(&victim);
    assert!(!shims.join("sh").exists());

    // The same folder, root's but writable by all: refused too.
    std::fs::remove_dir_all(&shims).unwrap();
    std::fs::create_dir(&shims).unwrap();
    chmod(&shims, 0o777);
    let (install, planted) = install_with_planted_links(&shims, &out, &victim, plant_as_hostile);
    assert_eq!(planted, 2);
    let err = String::from_utf8_lossy(&install.stderr);
    assert!(
        !install.status.success(),
        "installed into a folder all may write"
    );
    assert!(err.contains("writable by others or by a group"), "{err}");
    assert_untouched(&victim);

    // `watch --shim-dir` refuses it at its start, before any directive.
    let watch = output_timeout(
        Command::new(agent())
            .args(["watch", "--backend", "ptrace", "--match"])
            .arg(unique("hostile-none"))
            .args(["--server", "https://127.0.0.1:9", "--shim-dir"])
            .arg(&shims)
            .arg("--out-dir")
            .arg(&out),
        60,
    );
    let err = String::from_utf8_lossy(&watch.stderr);
    assert!(!watch.status.success(), "{err}");
    assert!(
        err.contains(&format!("shim folder {} refused", shims.display())),
        "{err}"
    );
}

#[test]
fn links_left_in_a_safe_shim_folder_do_not_redirect_writes() {
    if !is_root() {
        eprintln!("skipped: needs root (a root agent against another user)");
        return;
    }
    let base = base_dir();
    let victim = victim_file(base.path());
    let out = base.path().join("out");
    let shims = base.path().join("shims");
    std::fs::create_dir(&shims).unwrap();
    chmod(&shims, 0o755);
    // The user cannot plant anything there...
    let tried = as_hostile(
        Command::new("ln")
            .arg("-s")
            .arg(&victim)
            .arg(shims.join(".sh.tmp-1")),
    )
    .stderr(Stdio::null())
    .status()
    .unwrap();
    assert!(!tried.success(), "{USER} wrote into root's 0755 folder");
    // ...and links left there (say, from when it was not safe) at the
    // agent's pid-named temporary names are neither followed nor reused.
    let plant_as_root =
        |victim: &Path, link: &Path| std::os::unix::fs::symlink(victim, link).is_ok();
    let (install, planted) = install_with_planted_links(&shims, &out, &victim, plant_as_root);
    assert_eq!(planted, 2);
    assert!(
        install.status.success(),
        "{}",
        String::from_utf8_lossy(&install.stderr)
    );
    assert_untouched(&victim);
    let script = shims.join("sh");
    let m = std::fs::symlink_metadata(&script).unwrap();
    assert!(m.file_type().is_file(), "the shim is a file of its own");
    assert_eq!(m.permissions().mode() & 0o777, 0o755);
    assert!(std::fs::read_to_string(&script)
        .unwrap()
        .contains("# edge-agent shim v1"));
    assert!(std::fs::symlink_metadata(shims.join("directive.json"))
        .unwrap()
        .file_type()
        .is_file());
}
