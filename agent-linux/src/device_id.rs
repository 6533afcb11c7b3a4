//! The device id: 128 random bits made on first use and kept in one small
//! file of the agent's state folder, so that every summary of a device
//! (every run, attach, watch and window) names the same device.
//!
//! Privacy: the id is random, never derived from hardware serials, MAC
//! addresses or host names, and `--reset` replaces it with a new random
//! one that nothing links to the old.
//!
//! The file holds 32 lowercase hex digits and a newline. It is read
//! strictly: anything else (a truncated write by another tool, an edit, a
//! folder or device in its place, an all-zero id, which the summary format
//! reads as "no device") is an error naming the file, never silently
//! replaced, since a new id would split the device's history in two
//! without anyone noticing. Only [`reset`] replaces a file.
//!
//! Writes are atomic: a temporary file (mode 0600) in the same folder,
//! synced, then linked to the name (first use: two agents starting
//! together both end up with the one id that won) or renamed over it
//! (reset).

use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// A device id (written as 32 lowercase hex digits by its `Display`).
pub use agent_core::DeviceId;

/// The file's name in the state folder.
pub const FILE_NAME: &str = "device-id";

/// The environment variable naming the file (as `--device-id-file` does).
pub const ENV_FILE: &str = "EDGE_AGENT_DEVICE_ID_FILE";

/// Where the id lives by default: `$EDGE_AGENT_DEVICE_ID_FILE`, else the
/// agent's state folder, beside the default spool
/// (`$XDG_STATE_HOME/edge-agent/device-id`, else
/// `~/.local/state/edge-agent/device-id`, else
/// `/data/local/tmp/edge-agent/device-id`).
pub fn default_path() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(file) = env(ENV_FILE) {
        return file.into();
    }
    if let Some(state) = env("XDG_STATE_HOME") {
        return PathBuf::from(state).join("edge-agent").join(FILE_NAME);
    }
    if let Some(home) = env("HOME") {
        return PathBuf::from(home)
            .join(".local/state/edge-agent")
            .join(FILE_NAME);
    }
    PathBuf::from("/data/local/tmp/edge-agent").join(FILE_NAME)
}

/// The id in `path`, made (randomly) and stored there if the file does not
/// exist yet. A file that exists but cannot be read or holds no valid id is
/// an error naming it.
pub fn load_or_create(path: &Path) -> anyhow::Result<DeviceId> {
    match read(path)? {
        Some(id) => Ok(id),
        None => create(path),
    }
}

/// The id in `path`; `None` when there is no such file.
pub fn read(path: &Path) -> anyhow::Result<Option<DeviceId>> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => bail!("cannot read the device id file {}: {e}", path.display()),
    };
    if !meta.is_file() {
        // A FIFO would block the open; a folder cannot hold an id.
        bail!(
            "the device id file {} is not a regular file; remove it or choose another with --device-id-file",
            path.display()
        );
    }
    let mut text = Vec::with_capacity(40);
    std::fs::File::open(path)
        // At most one byte past the longest valid content: a huge file
        // is refused without reading it all.
        .and_then(|f| f.take(34).read_to_end(&mut text))
        .with_context(|| format!("cannot read the device id file {}", path.display()))?;
    parse(&text).map(Some).map_err(|why| {
        anyhow::anyhow!(
            "the device id file {} is corrupt ({why}); it must hold 32 hex digits. Fix it, or run `edge-agent device-id --reset` to make a new id (the device's earlier summaries keep the old one)",
            path.display()
        )
    })
}

/// Replaces the id in `path` with a new random one (made as on first use
/// when there is none) and returns it.
pub fn reset(path: &Path) -> anyhow::Result<DeviceId> {
    let id = generate()?;
    let tmp = write_temp(path, &id)?;
    let renamed = std::fs::rename(&tmp, path);
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed.with_context(|| format!("cannot replace the device id file {}", path.display()))?;
    sync_parent(path);
    Ok(id)
}

/// Parses the file's content: 32 hex digits, optionally followed by one
/// newline; not all zeros.
pub fn parse(text: &[u8]) -> Result<DeviceId, String> {
    let digits = text.strip_suffix(b"\n").unwrap_or(text);
    if digits.is_empty() {
        return Err("the file is empty".into());
    }
    if digits.len() != 32 {
        return Err(format!("{} bytes instead of 32 hex digits", digits.len()));
    }
    let id = match std::str::from_utf8(digits) {
        Ok(text) => text
            .parse::<DeviceId>()
            .map_err(|e| format!("not hex: {e}"))?,
        Err(e) => {
            return Err(format!(
                "not hex: a byte that is not text at position {}",
                e.valid_up_to()
            ))
        }
    };
    if id.is_zero() {
        return Err("all zeros, which means no device".into());
    }
    Ok(id)
}

/// 128 bits from the OS's random source; without one, no id (an id from
/// the clock could repeat across devices).
fn generate() -> anyhow::Result<DeviceId> {
    let mut id = [0u8; 16];
    loop {
        getrandom::fill(&mut id)
            .map_err(|e| anyhow::anyhow!("cannot make a device id: no random source: {e}"))?;
        if id != [0u8; 16] {
            return Ok(DeviceId(id));
        }
    }
}

/// Makes an id and stores it at `path` unless another agent got there
/// first, in which case that one's id is returned.
fn create(path: &Path) -> anyhow::Result<DeviceId> {
    let id = generate()?;
    let tmp = write_temp(path, &id)?;
    // A hard link never replaces an existing name: of two agents starting
    // together, exactly one id wins and both use it.
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            sync_parent(path);
            Ok(id)
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => read(path)?.ok_or_else(|| {
            anyhow::anyhow!(
                "the device id file {} vanished while it was made",
                path.display()
            )
        }),
        Err(e) => Err(e).with_context(|| {
            format!(
                "cannot create the device id file {} (choose another with --device-id-file)",
                path.display()
            )
        }),
    }
}

/// Writes `id` to a new hidden temporary file (0600) beside `path`,
/// creating the folder (0700) if needed, and syncs it.
fn write_temp(path: &Path, id: &DeviceId) -> anyhow::Result<PathBuf> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| {
            format!(
                "cannot create the folder {} for the device id (choose another file with --device-id-file)",
                dir.display()
            )
        })?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| FILE_NAME.into());
    let tmp = dir.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        hex::encode(&generate()?.0[..4])
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(format!("{id}\n").as_bytes())?;
            f.sync_all()
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| {
            format!(
                "cannot write the device id beside {} (choose another file with --device-id-file)",
                path.display()
            )
        });
    }
    Ok(tmp)
}

/// Syncs the folder so the new name survives a power cut (best effort: not
/// every file system lets a folder be opened for that).
fn sync_parent(path: &Path) {
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn made_once_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/edge-agent/device-id");
        let id = load_or_create(&path).unwrap();
        assert_ne!(id, [0u8; 16]);
        assert_eq!(load_or_create(&path).unwrap(), id, "stable");
        assert_eq!(read(&path).unwrap(), Some(id));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{id}\n"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, [FILE_NAME], "no temporary file left");
    }

    #[test]
    fn reset_makes_a_new_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("device-id");
        let old = load_or_create(&path).unwrap();
        let new = reset(&path).unwrap();
        assert_ne!(old, new);
        assert_eq!(load_or_create(&path).unwrap(), new);
        std::fs::write(&path, "garbage").unwrap();
        let fixed = reset(&path).unwrap();
        assert_eq!(
            read(&path).unwrap(),
            Some(fixed),
            "reset replaces a corrupt file"
        );
    }

    #[test]
    fn a_corrupt_file_is_an_error_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("device-id");
        for bad in [
            &b""[..],
            b"\n",
            b"0123456789abcdef0123456789abcde",
            b"0123456789abcdef0123456789abcdef0",
            b"0123456789abcdef0123456789abcdeg\n",
            b"00000000000000000000000000000000\n",
            b"0123456789abcdef0123456789abcdef\n\n",
        ] {
            std::fs::write(&path, bad).unwrap();
            let err = format!("{:#}", load_or_create(&path).unwrap_err());
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(err.contains("corrupt"), "{err}");
            assert_eq!(std::fs::read(&path).unwrap(), bad, "not replaced");
        }
        std::fs::write(&path, vec![b'a'; 1 << 20]).unwrap();
        assert!(format!("{:#}", read(&path).unwrap_err()).contains("corrupt"));
    }

    #[test]
    fn a_folder_in_its_place_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = format!("{:#}", load_or_create(dir.path()).unwrap_err());
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn upper_case_and_no_newline_are_read() {
        assert_eq!(
            parse(b"0123456789ABCDEF0123456789abcdef").unwrap().0[..2],
            [0x01, 0x23]
        );
    }

    #[test]
    fn racing_first_uses_agree() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("device-id");
        let ids: Vec<DeviceId> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| load_or_create(&path).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    }
}
