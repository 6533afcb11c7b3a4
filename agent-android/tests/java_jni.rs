//! Runs the Java wrapper's host test (tests/java/) against this build's
//! libagent_android.so: javac compiles the wrapper (java/) and the test, and
//! a real JVM loads the library and drives it through JNI.

mod common;

use std::process::Command;

#[test]
fn java_wrapper_drives_the_library() {
    let library = common::cdylib();
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = tempfile::tempdir().unwrap();
    let classes = work.path().join("classes");
    let sources = [
        "java/dev/edgeagent/EdgeAgent.java",
        "java/dev/edgeagent/EdgeAgentException.java",
        "tests/java/dev/edgeagent/EdgeAgentTest.java",
    ];
    let javac = Command::new("javac")
        .arg("-Xlint:all")
        .arg("-Werror")
        .arg("-d")
        .arg(&classes)
        .args(sources.iter().map(|s| crate_dir.join(s)))
        .status()
        .expect("javac not found: scripts/install-deps installs a JDK");
    assert!(javac.success(), "javac failed");
    let output = Command::new("java")
        .arg("-Xcheck:jni")
        .arg("-cp")
        .arg(&classes)
        .arg("dev.edgeagent.EdgeAgentTest")
        .arg(&library)
        .arg(work.path())
        .output()
        .expect("java not found: scripts/install-deps installs a JDK");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "the Java test failed: {}",
        output.status
    );
    assert!(stdout.contains(" passed, 0 failed"), "no result line");
    assert!(!stdout.contains("FAIL"), "a Java test failed");
}

/// The WorkManager worker (android/) needs androidx, which the host lacks:
/// type-check it against compile-only stand-ins (tests/android-stubs/).
#[test]
fn upload_worker_compiles_against_the_android_api_shape() {
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = Vec::new();
    let mut dirs = vec![crate_dir.join("tests/android-stubs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "java") {
                sources.push(path);
            }
        }
    }
    sources.push(crate_dir.join("java/dev/edgeagent/EdgeAgent.java"));
    sources.push(crate_dir.join("java/dev/edgeagent/EdgeAgentException.java"));
    sources.push(crate_dir.join("android/dev/edgeagent/UploadWorker.java"));
    let out = tempfile::tempdir().unwrap();
    let status = Command::new("javac")
        .args(["-Xlint:all", "-Werror", "-d"])
        .arg(out.path())
        .args(&sources)
        .status()
        .expect("javac not found: scripts/install-deps installs a JDK");
    assert!(status.success(), "UploadWorker.java does not compile");
}
