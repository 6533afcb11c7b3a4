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
