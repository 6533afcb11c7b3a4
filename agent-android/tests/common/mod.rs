//! Where this build put libagent_android.so.

use std::path::PathBuf;

/// The cdylib built with this test. `cargo test` builds the library with
/// all its crate types into `<target>/<profile>/deps/`, next to the test
/// executables (only `cargo build` copies it up to `<profile>/`).
pub fn cdylib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let library = exe.parent().unwrap().join("libagent_android.so");
    assert!(
        library.is_file(),
        "{} is missing (cargo builds it with the tests)",
        library.display()
    );
    library
}
