//! Helpers for the workspace-level end-to-end tests in `tests/tests/`.
//!
//! The tests drive the real binaries (`edge-agent`, `edge-service`), which
//! [`binary`] builds (or finds up to date) with the test's own profile.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

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

/// Builds the workspace's libraries (cdylibs included), binaries and
/// examples once per test process, with the test's own profile.
///
/// `cargo test` builds neither another package's binaries nor a cdylib that
/// no test links, so one left from an earlier build could be stale. The
/// build selects the whole workspace and its examples so that cargo resolves
/// features as `cargo test --workspace` does (examples, like tests, bring in
/// the dev-dependencies' features): every library that run already compiled
/// is reused, and only the binaries and cdylibs are linked. A build of one
/// package (`-p agent-linux`) resolves its dependencies' features apart and
/// recompiled rustls, ring and the rest once per package, minutes of a fresh
/// CI run.
fn build_workspace() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = profile_dir();
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args([
            "build",
            "--quiet",
            "--workspace",
            "--lib",
            "--bins",
            "--examples",
        ]);
        if dir.file_name().is_some_and(|p| p == "release") {
            cmd.arg("--release");
        }
        if let Some(target) = dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        // What cargo set for this test binary, not for a build: left in,
        // CARGO_MANIFEST_DIR (this package's) made ring and what depends on
        // it rebuild here, and again at the next `cargo test`.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if cargo_set_for_tests(&key) {
                cmd.env_remove(&*key);
            }
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "building the workspace failed");
    });
}

/// Whether `key` is one of the variables cargo sets for a test binary it
/// runs (about the package under test), as opposed to the caller's own
/// settings (`CARGO_HOME`, `CARGO_BUILD_*`, ...).
fn cargo_set_for_tests(key: &str) -> bool {
    [
        "CARGO_MANIFEST_",
        "CARGO_PKG_",
        "CARGO_CRATE_",
        "CARGO_BIN_",
    ]
    .iter()
    .any(|p| key.starts_with(p))
        || matches!(key, "CARGO_PRIMARY_PACKAGE" | "CARGO_TARGET_TMPDIR")
}

/// Path of workspace binary `name` (`edge-agent`, `edge-service`,
/// `edge-demo`), up to date.
pub fn binary(name: &str) -> PathBuf {
    build_workspace();
    profile_dir().join(name)
}

/// Path of the workspace's shared library `file` (a cdylib, e.g.
/// `libagent_android.so`), up to date.
pub fn shared_library(file: &str) -> PathBuf {
    build_workspace();
    profile_dir().join(file)
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
