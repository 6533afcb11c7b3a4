//! Compiles tests/c/smoke.c against include/edge_agent.h, links it with
//! this build's libagent_android.so and runs it: the header and the exports
//! agree, and errors come back as codes and messages. And
//! tests/c/self_observe.c: a native program that loads the library with
//! dlopen and observes its own reads.

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

/// A C program observes itself: exactly its reads of a file (size/4096
/// full reads and the one that finds the end), each refusal its code.
#[test]
fn c_program_observes_its_own_reads() {
    let library = common::cdylib();
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = tempfile::tempdir().unwrap();
    let exe = work.path().join("self_observe");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=gnu11", "-O0", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/self_observe.c"))
        .arg("-o")
        .arg(&exe)
        .arg("-ldl")
        .status()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(status.success(), "compiling self_observe.c failed");
    const SIZE: usize = 37 * 4096;
    let file = work.path().join("data");
    std::fs::write(&file, vec![7u8; SIZE]).unwrap();
    let out = work.path().join("summary");
    let output = Command::new(&exe)
        .arg(&library)
        .arg(&file)
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "self_observe failed: {}",
        output.status
    );
    assert!(stdout.contains("self: ok"));
    let json: serde_json::Value =
        serde_json::from_str(&agent_android::summary_json(&std::fs::read(&out).unwrap()).unwrap())
            .unwrap();
    let count = |name: &str, kind: &str| -> u64 {
        json["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["name"] == name && s["fd_kind"] == kind)
            .map(|s| s["count"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(count("read", "file"), (SIZE / 4096 + 1) as u64, "{json:#}");
    assert_eq!(
        json["coverage"]["source"], "in-process",
        "{}",
        json["coverage"]
    );
    assert_eq!(json["run"]["exit"], "running");
}
