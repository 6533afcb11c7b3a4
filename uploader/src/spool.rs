//! The on-device spool: one file per summary, written atomically, named by
//! the summary's 128-bit id so the service can deduplicate.
//!
//! Layout of a spool directory:
//! - `<32 hex id>.summary` — exactly the bytes of `Summary::encode`;
//! - `.tmp-*` — a write in progress (never read; stale ones are removed);
//! - `dropped` — summaries dropped because the spool was full, not yet
//!   reported in a summary's run record (decimal);
//! - `.spool.lock` — held (flock) while a summary is put or dropped;
//! - `.upload.lock` — held (flock) by the uploader that is sending;
//! - `rejected/` — items the service refused for good, and spool files that
//!   are not valid summaries, each with a `.reason` file beside it;
//! - `directives.json` — the last directives fetched from the service.
//!
//! Crash safety: a summary file becomes visible only by a rename after its
//! bytes were fsynced, and the directory is fsynced after the rename, so a
//! power loss leaves either no file or the whole file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use agent_core::summary::MAX_ENCODED_LEN;
use agent_core::{RunId, Summary};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// Most summaries kept by [`Spool::open`].
pub const DEFAULT_MAX_FILES: usize = 1000;
/// Most bytes of summaries kept by [`Spool::open`] (1000 full-size summaries).
pub const DEFAULT_MAX_BYTES: u64 = 1000 * MAX_ENCODED_LEN as u64;
/// Extension of a spooled summary.
pub const SUMMARY_EXT: &str = "summary";
/// Subfolder for items that will never be accepted.
pub const REJECTED_DIR: &str = "rejected";
/// File the uploader stores the service's directives in.
pub const DIRECTIVES_FILE: &str = "directives.json";
const DROPPED_FILE: &str = "dropped";
const SPOOL_LOCK: &str = ".spool.lock";
const UPLOAD_LOCK: &str = ".upload.lock";
const TMP_PREFIX: &str = ".tmp-";
/// A temporary file older than this is a leftover of a crashed writer.
const STALE_TMP: Duration = Duration::from_secs(3600);

/// The spool directory and its limits.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    max_files: usize,
    max_bytes: u64,
    writer: Writer,
}

/// Writes the bytes into the temporary file; replaceable in tests to inject
/// a failing disk.
type Writer = fn(&mut File, &[u8]) -> io::Result<()>;

fn write_and_sync(file: &mut File, bytes: &[u8]) -> io::Result<()> {
    file.write_all(bytes)?;
    file.sync_all()
}

/// A spool operation that failed: names the path, what was being done and
/// the OS reason.
#[derive(Debug)]
pub struct SpoolError {
    path: PathBuf,
    action: &'static str,
    reason: String,
}

impl std::fmt::Display for SpoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "spool {}: cannot {}: {}",
            self.path.display(),
            self.action,
            self.reason
        )
    }
}

impl std::error::Error for SpoolError {}

impl SpoolError {
    fn io(path: &Path, action: &'static str, err: io::Error) -> SpoolError {
        SpoolError {
            path: path.to_path_buf(),
            action,
            reason: err.to_string(),
        }
    }
}

/// One summary waiting in the spool, read and validated.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The summary's id (also its file name).
    pub id: RunId,
    /// The file.
    pub path: PathBuf,
    /// The encoded summary, exactly as spooled.
    pub bytes: Vec<u8>,
}

/// A spool file that was not a valid summary and was moved to `rejected/`.
#[derive(Debug, Clone)]
pub struct SetAside {
    /// Where it is now.
    pub path: PathBuf,
    /// What was wrong.
    pub reason: String,
}

/// What [`Spool::pending`] found.
#[derive(Debug, Default)]
pub struct Listing {
    /// Valid summaries, oldest first.
    pub pending: Vec<Pending>,
    /// Invalid files, moved to `rejected/`.
    pub set_aside: Vec<SetAside>,
}

/// An exclusive flock on a file in the spool, released on drop.
#[derive(Debug)]
pub struct SpoolLock {
    _lock: Flock<File>,
}

/// The file name of a summary with this id.
pub fn file_name(id: &RunId) -> String {
    format!("{id}.{SUMMARY_EXT}")
}

/// The id a summary file name stands for, if it is one.
fn id_of(name: &str) -> Option<RunId> {
    let hex_part = name.strip_suffix(&format!(".{SUMMARY_EXT}"))?;
    // Upper case would name the same id as another file: only the name
    // `file_name` writes is a summary's.
    if hex_part.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    hex_part.parse().ok()
}

impl Spool {
    /// Opens (creating it if needed) the spool in `dir` with the default
    /// limits.
    pub fn open(dir: &Path) -> Result<Spool, SpoolError> {
        Spool::with_limits(dir, DEFAULT_MAX_FILES, DEFAULT_MAX_BYTES)
    }

    /// Opens (creating it if needed) the spool in `dir`, keeping at most
    /// `max_files` summaries and `max_bytes` bytes of them.
    pub fn with_limits(dir: &Path, max_files: usize, max_bytes: u64) -> Result<Spool, SpoolError> {
        if max_files == 0 || max_bytes < MAX_ENCODED_LEN as u64 {
            return Err(SpoolError {
                path: dir.to_path_buf(),
                action: "use these limits",
                reason: format!(
                    "the spool must hold at least one summary ({max_files} files, \
                     {max_bytes} bytes given; a summary takes up to {MAX_ENCODED_LEN} bytes)"
                ),
            });
        }
        if !dir.is_dir() {
            fs::create_dir_all(dir).map_err(|e| SpoolError::io(dir, "create the directory", e))?;
            // Summaries describe what the user ran: keep them private.
            let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
        }
        Ok(Spool {
            dir: dir.to_path_buf(),
            max_files,
            max_bytes,
            writer: write_and_sync,
        })
    }

    /// The spool directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Sets `summary.run.spool_dropped` from the spool's pending dropped
    /// count, encodes the summary and writes it atomically. Makes room first
    /// by dropping the oldest summaries; their number goes into the next
    /// summary put.
    pub fn put(&self, summary: &mut Summary) -> Result<PathBuf, SpoolError> {
        let _lock = self.lock_file(SPOOL_LOCK, true)?;
        let carried = self.read_dropped();
        summary.run.spool_dropped = u32::try_from(carried).unwrap_or(u32::MAX);
        let mut buf = [0u8; MAX_ENCODED_LEN];
        let bytes = summary.encode(&mut buf).map_err(|e| SpoolError {
            path: self.dir.clone(),
            action: "encode the summary",
            reason: e.to_string(),
        })?;
        let name = file_name(&summary.id);

        // Oldest first; a file with the same name is replaced, not counted.
        let mut entries: Vec<_> = self
            .summary_entries()?
            .into_iter()
            .filter(|e| e.name != name)
            .collect();
        let mut files = entries.len();
        let mut total: u64 = entries.iter().map(|e| e.len).sum();
        let mut victims = Vec::new();
        entries.reverse();
        while files + 1 > self.max_files || total + bytes.len() as u64 > self.max_bytes {
            let Some(oldest) = entries.pop() else { break };
            files -= 1;
            total -= oldest.len;
            victims.push(oldest);
        }

        let path = self.write_atomic(&name, bytes)?;
        // The carried count is now in the summary just written; what is
        // dropped now goes into the next one. (A crash between these steps
        // can only miscount drops, never lose or duplicate a summary.)
        self.write_dropped(victims.len() as u64)?;
        for victim in victims {
            match fs::remove_file(self.dir.join(&victim.name)) {
                Ok(()) => {}
                // An uploader sent and deleted it meanwhile.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(SpoolError::io(&self.dir.join(&victim.name), "drop", e)),
            }
        }
        Ok(path)
    }

    /// Reads every spooled summary, oldest first. Files that are not valid
    /// summaries (corrupt, truncated, wrong name) are moved to `rejected/`
    /// and reported, never sent.
    pub fn pending(&self) -> Result<Listing, SpoolError> {
        let mut listing = Listing::default();
        self.remove_stale_tmp();
        for entry in self.summary_entries()? {
            let path = self.dir.join(&entry.name);
            match read_summary_file(&path, &entry.name) {
                Ok(Some(pending)) => listing.pending.push(pending),
                // Gone meanwhile (another uploader, or dropped): nothing to do.
                Ok(None) => {}
                Err(reason) => {
                    let moved = self.set_aside(&entry.name, &reason)?;
                    listing.set_aside.push(SetAside {
                        path: moved,
                        reason,
                    });
                }
            }
        }
        Ok(listing)
    }

    /// Deletes the summary with this id (the service acknowledged it).
    pub fn remove(&self, id: &RunId) -> Result<(), SpoolError> {
        let path = self.dir.join(file_name(id));
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(SpoolError::io(&path, "delete", e)),
        }
    }

    /// Moves the summary with this id to `rejected/` with the reason beside
    /// it (the service will never accept it). Returns its new path.
    pub fn reject(&self, id: &RunId, reason: &str) -> Result<PathBuf, SpoolError> {
        self.set_aside(&file_name(id), reason)
    }

    /// Stores the service's directives for the agent (atomically).
    pub fn store_directives(&self, json: &[u8]) -> Result<PathBuf, SpoolError> {
        self.write_atomic(DIRECTIVES_FILE, json)
    }

    /// Takes the uploader's lock, so two uploaders never send the same file at
    /// once. With `wait`, blocks until the other uploader is done; without,
    /// returns `None` when it is held.
    pub fn lock_upload(&self, wait: bool) -> Result<Option<SpoolLock>, SpoolError> {
        self.lock_file(UPLOAD_LOCK, wait)
    }

    /// Summaries dropped (spool full) and not yet reported in a summary.
    pub fn dropped(&self) -> u64 {
        self.read_dropped()
    }

    /// Takes an exclusive flock on `name`; `None` when it is held elsewhere
    /// and `wait` is false.
    fn lock_file(&self, name: &str, wait: bool) -> Result<Option<SpoolLock>, SpoolError> {
        let path = self.dir.join(name);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| SpoolError::io(&path, "open the lock file", e))?;
        let op = if wait {
            FlockArg::LockExclusive
        } else {
            FlockArg::LockExclusiveNonblock
        };
        let mut file = file;
        loop {
            match Flock::lock(file, op) {
                Ok(lock) => return Ok(Some(SpoolLock { _lock: lock })),
                Err((back, Errno::EINTR)) => file = back,
                Err((_, Errno::EWOULDBLOCK)) => return Ok(None),
                Err((_, errno)) => {
                    return Err(SpoolError::io(&path, "lock", io::Error::from(errno)))
                }
            }
        }
    }

    /// Writes `bytes` to `name` in the spool: temporary file, fsync, rename,
    /// fsync of the directory. On failure nothing new is visible under `name`.
    fn write_atomic(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, SpoolError> {
        let final_path = self.dir.join(name);
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(|e| SpoolError {
            path: self.dir.clone(),
            action: "name a temporary file",
            reason: e.to_string(),
        })?;
        let tmp_path = self.dir.join(format!(
            "{TMP_PREFIX}{name}-{}-{}",
            std::process::id(),
            hex::encode(nonce)
        ));
        let result = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp_path)
                .map_err(|e| SpoolError::io(&tmp_path, "create", e))?;
            (self.writer)(&mut file, bytes).map_err(|e| SpoolError::io(&tmp_path, "write", e))?;
            drop(file);
            fs::rename(&tmp_path, &final_path)
                .map_err(|e| SpoolError::io(&final_path, "rename the written file to", e))
        })();
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp_path);
            return Err(e);
        }
        self.sync_dir()?;
        Ok(final_path)
    }

    fn sync_dir(&self) -> Result<(), SpoolError> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| SpoolError::io(&self.dir, "fsync the directory", e))
    }

    fn read_dropped(&self) -> u64 {
        // A damaged counter only loses a statistic: read it as 0, the next
        // write replaces it.
        fs::read_to_string(self.dir.join(DROPPED_FILE))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    fn write_dropped(&self, count: u64) -> Result<(), SpoolError> {
        let path = self.dir.join(DROPPED_FILE);
        if count == 0 {
            return match fs::remove_file(&path) {
                Ok(()) => self.sync_dir(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(SpoolError::io(&path, "reset the dropped count", e)),
            };
        }
        self.write_atomic(DROPPED_FILE, format!("{count}\n").as_bytes())
            .map(|_| ())
    }

    /// Spooled summary files (by name), oldest first.
    fn summary_entries(&self) -> Result<Vec<Entry>, SpoolError> {
        let read = fs::read_dir(&self.dir).map_err(|e| SpoolError::io(&self.dir, "list", e))?;
        let mut entries = Vec::new();
        for item in read {
            let item = item.map_err(|e| SpoolError::io(&self.dir, "list", e))?;
            let Ok(name) = item.file_name().into_string() else {
                continue;
            };
            if !name.ends_with(&format!(".{SUMMARY_EXT}")) || name.starts_with('.') {
                continue;
            }
            let Ok(meta) = item.metadata() else { continue };
            entries.push(Entry {
                name,
                len: meta.len(),
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            });
        }
        entries.sort_by(|a, b| a.modified.cmp(&b.modified).then(a.name.cmp(&b.name)));
        Ok(entries)
    }

    fn set_aside(&self, name: &str, reason: &str) -> Result<PathBuf, SpoolError> {
        let rejected = self.dir.join(REJECTED_DIR);
        fs::create_dir_all(&rejected)
            .map_err(|e| SpoolError::io(&rejected, "create the directory", e))?;
        let to = rejected.join(name);
        fs::write(
            rejected.join(format!("{name}.reason")),
            format!("{reason}\n"),
        )
        .map_err(|e| SpoolError::io(&rejected, "write a reason file", e))?;
        fs::rename(self.dir.join(name), &to)
            .map_err(|e| SpoolError::io(&to, "move a rejected file to", e))?;
        self.sync_dir()?;
        Ok(to)
    }

    fn remove_stale_tmp(&self) {
        let Ok(read) = fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        for item in read.flatten() {
            let is_tmp = item.file_name().to_string_lossy().starts_with(TMP_PREFIX);
            let stale = item
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > STALE_TMP);
            if is_tmp && stale {
                let _ = fs::remove_file(item.path());
            }
        }
    }
}

#[derive(Debug)]
struct Entry {
    name: String,
    len: u64,
    modified: SystemTime,
}

/// Reads and validates one spool file. `Ok(None)`: it vanished meanwhile.
fn read_summary_file(path: &Path, name: &str) -> Result<Option<Pending>, String> {
    let Some(id) = id_of(name) else {
        return Err(format!(
            "file name {name:?} is not <32 lowercase hex digits>.{SUMMARY_EXT}"
        ));
    };
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read: {e}")),
    };
    if !meta.file_type().is_file() {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::with_capacity(MAX_ENCODED_LEN);
    let read = File::open(path).and_then(|f| {
        f.take(MAX_ENCODED_LEN as u64 + 1)
            .read_to_end(&mut bytes)
            .map(|_| ())
    });
    match read {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read: {e}")),
    }
    let summary = Summary::decode(&bytes).map_err(|e| format!("not a valid summary: {e}"))?;
    if summary.id != id {
        return Err(format!("holds summary {} but is named {name}", summary.id));
    }
    Ok(Some(Pending {
        id,
        path: path.to_path_buf(),
        bytes,
    }))
}

#[cfg(test)]
mod tests;
