//! The metadata-heavy workload of `scripts/bench-tracer`: creates, stats
//! and unlinks N small files in DIR, one after another (one process, plain
//! syscalls: openat, write, close, statx/newfstatat, unlink).
//!
//! Usage: `bench_meta DIR N`.

use std::io::Write;

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (dir, n) = match (args.get(1), args.get(2).and_then(|s| s.parse::<u32>().ok())) {
        (Some(d), Some(n)) => (std::path::PathBuf::from(d), n),
        _ => {
            eprintln!("usage: bench_meta DIR N");
            std::process::exit(2);
        }
    };
    std::fs::create_dir_all(&dir)?;
    for i in 0..n {
        let path = dir.join(format!("f{i}"));
        std::fs::File::create(&path)?.write_all(b"small file\n")?;
        let meta = std::fs::metadata(&path)?;
        assert_eq!(meta.len(), 11);
        std::fs::remove_file(&path)?;
    }
    Ok(())
}
