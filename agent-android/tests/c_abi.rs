//! Compiles tests/c/smoke.c against include/edge_agent.h, links it with
//! this build's libagent_android.so and runs it: the header and the exports
//! agree, and errors come back as codes and messages. And
//! tests/c/self_observe.c: a native program that loads the library with
//! dlopen and observes its own reads. And tests/c/app_runs.c: an app's
//! runs, light or taken by a per-device directive.

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
    let work = tempfile::tempdir().unwrap();
    let exe = compile_dlopen_program("self_observe", work.path());
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

/// Compiles `tests/c/NAME.c` (dlopen'ing the library) into `dir`.
fn compile_dlopen_program(name: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=gnu11", "-O0", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join(format!("tests/c/{name}.c")))
        .arg("-o")
        .arg(&exe)
        .arg("-ldl")
        .status()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(status.success(), "compiling {name}.c failed");
    exe
}

/// An app's runs (the proactive loop's light mode inside an app): a
/// directive for 2 runs of "sync" takes exactly the first 2 that begin
/// while no other directed run is under way, each a full in-process
/// summary holding exactly its reads and the fact `directive=d1`; the
/// others are light records with the run's name, outcome and I/O bytes.
#[test]
fn c_program_runs_light_and_directed() {
    let library = common::cdylib();
    let work = tempfile::tempdir().unwrap();
    let exe = compile_dlopen_program("app_runs", work.path());
    const SIZE: usize = 23 * 4096;
    let file = work.path().join("data");
    std::fs::write(&file, vec![7u8; SIZE]).unwrap();
    let out = work.path().join("out");
    std::fs::create_dir(&out).unwrap();
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
        "app_runs failed: {}",
        output.status
    );
    assert!(stdout.contains("runs: ok"));
    let json = |n: u32| -> serde_json::Value {
        let bytes = std::fs::read(out.join(format!("{n}.summary"))).unwrap();
        serde_json::from_str(&agent_android::summary_json(&bytes).unwrap()).unwrap()
    };
    let reads_on_files = |j: &serde_json::Value| -> u64 {
        j["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["name"] == "read" && s["fd_kind"] == "file")
            .map(|s| s["count"].as_u64().unwrap())
            .sum()
    };
    let fact = |j: &serde_json::Value, key: &str| -> Option<String> {
        j["facts"]["extra"][key].as_str().map(str::to_string)
    };
    for n in [1, 2] {
        let j = json(n);
        assert_eq!(j["kind"], "full", "run {n}: {j:#}");
        assert_eq!(j["facts"]["program"], "sync", "run {n}");
        assert_eq!(
            fact(&j, "directive").as_deref(),
            Some("d1"),
            "run {n}: {j:#}"
        );
        assert_eq!(j["coverage"]["source"], "in-process", "run {n}");
        assert_eq!(j["run"]["exit"], serde_json::json!({"code": 0}), "run {n}");
        // Run 1 read the file once; run 2 once while light run 3 was open.
        assert_eq!(
            reads_on_files(&j),
            (SIZE / 4096 + 1) as u64,
            "run {n}: {j:#}"
        );
    }
    for (n, program, code) in [(3, "sync", 3), (4, "sync", 0), (5, "other", 0)] {
        let j = json(n);
        assert_eq!(j["kind"], "light", "run {n}: {j:#}");
        assert_eq!(j["facts"]["program"], program, "run {n}");
        assert_eq!(fact(&j, "directive"), None, "run {n}");
        assert_eq!(
            j["run"]["exit"],
            serde_json::json!({"code": code}),
            "run {n}"
        );
        assert!(
            j["syscalls"].as_array().is_none_or(|a| a.is_empty()),
            "run {n}"
        );
        let read = j["io"]["read"].as_u64().unwrap_or(0);
        assert!(
            read >= SIZE as u64,
            "run {n}: {read} bytes read, want >= {SIZE}: {j:#}"
        );
    }
}
