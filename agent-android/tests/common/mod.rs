//! Where this build put libagent_android.so.

use std::path::PathBuf;

/// The cdylib built with this test: integration tests live in
/// `<target>/<profile>/deps/`, the library next to `deps/`.
pub fn cdylib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let library = profile_dir.join("libagent_android.so");
    assert!(
        library.is_file(),
        "{} is missing (cargo builds it with the tests)",
        library.display()
    );
    library
}
