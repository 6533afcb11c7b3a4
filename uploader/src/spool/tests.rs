use super::*;
use fixtures::summaries::{random_id, sample_summary};

fn spool_in(dir: &Path, files: usize, bytes: u64) -> Spool {
    Spool::with_limits(dir, files, bytes).unwrap()
}

#[test]
fn put_writes_exactly_the_encoded_bytes_named_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::open(dir.path()).unwrap();
    let mut s = sample_summary(random_id(), "curl", None);
    let path = spool.put(&mut s).unwrap();
    assert_eq!(
        path.file_name().unwrap().to_str().unwrap(),
        file_name(&s.id)
    );
    let mut buf = [0u8; MAX_ENCODED_LEN];
    assert_eq!(
        fs::read(&path).unwrap(),
        s.clone().encode(&mut buf).unwrap()
    );
    let listing = spool.pending().unwrap();
    assert_eq!(listing.pending.len(), 1);
    assert_eq!(listing.pending[0].id, s.id);
    // No temporary file is left behind.
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with(TMP_PREFIX)),
        "{names:?}"
    );
}

#[test]
fn full_spool_drops_oldest_and_reports_count_in_next_summary() {
    let dir = tempfile::tempdir().unwrap();
    let spool = spool_in(dir.path(), 3, DEFAULT_MAX_BYTES);
    let mut ids = Vec::new();
    for _ in 0..5 {
        let mut s = sample_summary(random_id(), "p", None);
        spool.put(&mut s).unwrap();
        ids.push(s.id);
        // Distinct modification times so "oldest" is well defined.
        std::thread::sleep(Duration::from_millis(15));
    }
    let left: Vec<_> = spool
        .pending()
        .unwrap()
        .pending
        .iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(left, ids[2..].to_vec(), "the two oldest are dropped");
    assert_eq!(
        spool.dropped(),
        1,
        "the drop made by the 5th put is pending"
    );
    let mut next = sample_summary(random_id(), "p", None);
    spool.put(&mut next).unwrap();
    assert_eq!(next.run.spool_dropped, 1);
    let stored = Summary::decode(&fs::read(dir.path().join(file_name(&next.id))).unwrap()).unwrap();
    assert_eq!(stored.run.spool_dropped, 1, "the count travels in the file");
    assert_eq!(spool.dropped(), 1, "this put dropped one more");
}

#[test]
fn byte_limit_is_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let mut one = sample_summary(random_id(), "p", None);
    let mut buf = [0u8; MAX_ENCODED_LEN];
    let len = one.encode(&mut buf).unwrap().len() as u64;
    let spool = spool_in(dir.path(), 100, (MAX_ENCODED_LEN as u64).max(len * 2));
    let fit = spool.max_bytes / len;
    for _ in 0..fit + 3 {
        spool
            .put(&mut sample_summary(random_id(), "p", None))
            .unwrap();
    }
    let total: u64 = spool.summary_entries().unwrap().iter().map(|e| e.len).sum();
    assert!(total <= spool.max_bytes, "{total} > {}", spool.max_bytes);
    assert_eq!(spool.summary_entries().unwrap().len() as u64, fit);
    assert!(spool.dropped() > 0);
}

#[test]
fn failed_write_leaves_no_visible_file_and_keeps_old_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut spool = Spool::open(dir.path()).unwrap();
    let mut kept = sample_summary(random_id(), "p", None);
    spool.put(&mut kept).unwrap();
    spool.writer = |file, bytes| {
        // Half the bytes reach the disk, then it is full.
        file.write_all(&bytes[..bytes.len() / 2])?;
        Err(io::Error::from_raw_os_error(libc::ENOSPC))
    };
    let mut lost = sample_summary(random_id(), "p", None);
    let err = spool.put(&mut lost).unwrap_err().to_string();
    assert!(err.contains("No space left"), "{err}");
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with(".spool"))
        .collect();
    assert_eq!(names, vec![file_name(&kept.id)]);
}

#[test]
fn corrupt_files_are_set_aside_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::open(dir.path()).unwrap();
    let mut good = sample_summary(random_id(), "p", None);
    spool.put(&mut good).unwrap();
    let bad_id = random_id();
    fs::write(dir.path().join(file_name(&bad_id)), b"\x01garbage").unwrap();
    fs::write(dir.path().join("nothex.summary"), b"x").unwrap();
    // A valid summary under another id's name.
    let mut other = sample_summary(random_id(), "p", None);
    let mut buf = [0u8; MAX_ENCODED_LEN];
    let misnamed = random_id();
    fs::write(
        dir.path().join(file_name(&misnamed)),
        other.encode(&mut buf).unwrap(),
    )
    .unwrap();
    let listing = spool.pending().unwrap();
    assert_eq!(listing.pending.len(), 1);
    assert_eq!(listing.pending[0].id, good.id);
    assert_eq!(listing.set_aside.len(), 3, "{:?}", listing.set_aside);
    for s in &listing.set_aside {
        assert!(s.path.starts_with(dir.path().join(REJECTED_DIR)));
        assert!(s.path.exists());
    }
    assert!(spool.pending().unwrap().set_aside.is_empty(), "moved once");
}

#[test]
fn upload_lock_is_exclusive() {
    let dir = tempfile::tempdir().unwrap();
    let a = Spool::open(dir.path()).unwrap();
    let b = Spool::open(dir.path()).unwrap();
    let held = a.lock_upload(false).unwrap();
    assert!(held.is_some());
    assert!(b.lock_upload(false).unwrap().is_none());
    drop(held);
    assert!(b.lock_upload(false).unwrap().is_some());
}

#[test]
fn unwritable_spool_names_dir_and_reason() {
    let err = Spool::open(Path::new("/proc/edge-agent-spool"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/proc/edge-agent-spool"), "{err}");
    assert!(err.contains("create the directory"), "{err}");
}

#[test]
fn reject_moves_with_reason() {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::open(dir.path()).unwrap();
    let mut s = sample_summary(random_id(), "p", None);
    spool.put(&mut s).unwrap();
    let to = spool.reject(&s.id, "group mismatch").unwrap();
    assert!(to.exists());
    let reason = fs::read_to_string(format!("{}.reason", to.display())).unwrap();
    assert_eq!(reason.trim(), "group mismatch");
    assert!(spool.pending().unwrap().pending.is_empty());
}

#[test]
fn odd_entries_never_panic_and_are_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::open(dir.path()).unwrap();
    // Oversized, empty, a directory, a symlink, random bytes of many sizes.
    fs::write(
        dir.path().join(file_name(&random_id())),
        vec![0u8; MAX_ENCODED_LEN + 1],
    )
    .unwrap();
    fs::write(dir.path().join(file_name(&random_id())), b"").unwrap();
    fs::create_dir(dir.path().join(file_name(&random_id()))).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join(file_name(&random_id()))).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for len in [1usize, 2, 3, 17, 100, 700, 2048] {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        fs::write(dir.path().join(file_name(&random_id())), bytes).unwrap();
    }
    let listing = spool.pending().unwrap();
    assert!(listing.pending.is_empty());
    assert_eq!(listing.set_aside.len(), 11, "{:?}", listing.set_aside);
    assert!(
        fs::read_to_string("/etc/passwd").is_ok(),
        "the link target is untouched"
    );
}
