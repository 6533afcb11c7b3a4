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

/// A JVM observes itself (tests/java/dev/edgeagent/SelfObserveTest.java)
/// against an HTTP server on a thread of this test (loopback): the first
/// snapshot holds exactly the file reads the Java code made and its socket
/// reads on `tcp` with the server's address as peer; the JVM's threads
/// keep working, and a second start is refused.
#[test]
fn a_jvm_observes_itself() {
    use std::io::{Read, Write};
    let library = common::cdylib();
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = tempfile::tempdir().unwrap();
    let classes = work.path().join("classes");
    let sources = [
        "java/dev/edgeagent/EdgeAgent.java",
        "java/dev/edgeagent/EdgeAgentException.java",
        "tests/java/dev/edgeagent/SelfObserveTest.java",
    ];
    let javac = Command::new("javac")
        .args(["-Xlint:all", "-Werror", "-d"])
        .arg(&classes)
        .args(sources.iter().map(|s| crate_dir.join(s)))
        .status()
        .expect("javac not found: scripts/install-deps installs a JDK");
    assert!(javac.success(), "javac failed");

    // The body: 10 000 bytes, served to each connection after its request.
    let body = vec![b'x'; 10_000];
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let served = body.clone();
    // Connections: the warm-up, the observed fetch, the four threads'.
    std::thread::spawn(move || {
        for stream in server.incoming().take(6) {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let head = format!(
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n",
                served.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&served);
        }
    });

    let output = Command::new("java")
        .arg("-Xcheck:jni")
        .arg("-cp")
        .arg(&classes)
        .arg("dev.edgeagent.SelfObserveTest")
        .arg(&library)
        .arg(work.path())
        .arg(port.to_string())
        .arg(body.len().to_string())
        .output()
        .expect("java not found: scripts/install-deps installs a JDK");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the JVM failed: {}", output.status);
    assert!(stdout.contains("self: ok"), "no result line");
    let said = |key: &str| -> u64 {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {key} line"))
    };
    let reads = said("reads=");
    assert_eq!(reads, 64 + 1, "the Java loop's own count");

    let first = json_of(&work.path().join("self-1"));
    assert_eq!(count(&first, "read", "file"), reads, "{first:#}");
    // A blocking java.net.Socket: one read(2) per InputStream.read.
    let socket_reads = said("socket_reads=");
    assert!(socket_reads >= 2, "the body and the end: {socket_reads}");
    assert_eq!(count(&first, "read", "tcp"), socket_reads, "{first:#}");
    let peer = first["peers"]["list"]
        .as_array()
        .unwrap()
        .iter()
        // Java's sockets are dual-stack: IPv4 as a mapped IPv6 address.
        .find(|p| {
            p["port"] == port && (p["address"] == "127.0.0.1" || p["address"] == "::ffff:127.0.0.1")
        })
        .unwrap_or_else(|| panic!("no peer 127.0.0.1:{port}: {:#}", first["peers"]));
    assert_eq!(peer["transport"], "tcp", "{peer}");
    assert!(
        peer["bytes"].as_u64().unwrap() >= body.len() as u64,
        "the body's bytes: {peer}"
    );
    assert_eq!(first["coverage"]["source"], "in-process");
    // The threads' reads, while observed (the JVM may add its own).
    let second = json_of(&work.path().join("self-2"));
    assert!(count(&second, "read", "file") >= 4 * reads, "{second:#}");
}

fn json_of(path: &std::path::Path) -> serde_json::Value {
    let json = agent_android::summary_json(&std::fs::read(path).unwrap()).unwrap();
    serde_json::from_str(&json).unwrap()
}

/// Calls of `name` on fds of `kind`.
fn count(summary: &serde_json::Value, name: &str, kind: &str) -> u64 {
    summary["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == name && s["fd_kind"] == kind)
        .map(|s| s["count"].as_u64().unwrap())
        .sum()
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
