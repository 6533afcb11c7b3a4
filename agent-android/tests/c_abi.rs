//! Compiles tests/c/smoke.c against include/edge_agent.h, links it with
//! this build's libagent_android.so and runs it: the header and the exports
//! agree, and errors come back as codes and messages.

mod common;

use std::process::Command;

#[test]
fn c_program_uses_the_header_and_library() {
    let library = common::cdylib();
    let lib_dir = library.parent().unwrap();
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = tempfile::tempdir().unwrap();
    let exe = work.path().join("smoke");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/smoke.c"))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(lib_dir)
        .arg("-lagent_android")
        .status()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(status.success(), "compiling smoke.c failed");
    let output = Command::new(&exe)
        .arg(work.path().join("spool"))
        .env("LD_LIBRARY_PATH", lib_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "smoke failed: {}", output.status);
    assert!(stdout.contains("smoke: ok"));
    // Summary files are named by id; the spool's lock files start with a dot.
    let spooled = std::fs::read_dir(work.path().join("spool"))
        .unwrap()
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert_eq!(spooled, 1, "one summary spooled");
}
