//! Helpers for the workspace-level end-to-end tests in `tests/tests/`.
//!
//! The tests drive the real binaries (`edge-agent`, `edge-service`), which
//! [`binary`] builds (or finds up to date) with the test's own profile.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Which package builds which binary.
const PACKAGES: &[(&str, &str)] = &[
    ("edge-agent", "agent-linux"),
    ("edge-service", "service"),
    ("edge-demo", "lab"),
];

/// The target directory's profile folder the test binary runs from
/// (`target/debug` or `target/release`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test-binary>
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// Path of workspace binary `name`, (re)built first, once per test process.
///
/// `cargo test` does not rebuild another package's binaries, so a binary
/// left from an earlier build could be stale; `cargo build` of an up-to-date
/// binary is a quick no-op.
pub fn binary(name: &str) -> PathBuf {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let dir = profile_dir();
    let path = dir.join(name);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        let package = PACKAGES
            .iter()
            .find(|(bin, _)| *bin == name)
            .map(|(_, p)| *p)
            .unwrap_or_else(|| panic!("unknown workspace binary {name}"));
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args(["build", "--quiet", "-p", package, "--bin", name]);
        if dir.file_name().is_some_and(|p| p == "release") {
            cmd.arg("--release");
        }
        if let Some(target) = dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "building {name} failed");
        built.push(name.to_string());
    }
    path
}

/// Path of the workspace's shared library `file` of `package` (a cdylib:
/// `cargo test` builds none), (re)built first, once per test process.
pub fn shared_library(package: &str, file: &str) -> PathBuf {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let dir = profile_dir();
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == package) {
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args(["build", "--quiet", "-p", package, "--lib"]);
        if dir.file_name().is_some_and(|p| p == "release") {
            cmd.arg("--release");
        }
        if let Some(target) = dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "building {package} failed");
        built.push(package.to_string());
    }
    dir.join(file)
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

/// Reports that a test cannot run here and returns, so that the caller can
/// `return`; under CI (`CI` set, as `.ci/run` is run) it fails instead: CI's
/// machine is root and has everything the tests need, so a skip there would
/// be a test that passed without checking anything.
pub fn skip(test: &str, why: &str) {
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{test} cannot run under CI: {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
}
