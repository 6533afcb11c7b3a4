//! Where `edge-agent` puts summaries: a file given as `--out` (windows
//! beside it), a device or FIFO, a folder, or the uploader's spool.

use std::io::Write;
use std::path::{Path, PathBuf};

use agent_core::{Summary, MAX_ENCODED_LEN};
use anyhow::{bail, Context};

/// Where summaries go.
pub(crate) enum Sink {
    /// A regular file, written whole or not at all (temporary + rename).
    File(PathBuf),
    /// A device or FIFO given as `--out`, written in place.
    Stream(PathBuf),
    Dir(PathBuf),
    #[cfg(feature = "upload")]
    Spool(uploader::spool::Spool),
}

impl Sink {
    /// Opens the destination, failing now (before any tracing) if it cannot
    /// be written.
    pub(crate) fn open(
        out: Option<PathBuf>,
        spool: Option<PathBuf>,
        out_dir: Option<PathBuf>,
    ) -> anyhow::Result<Sink> {
        if let Some(path) = out {
            return match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => bail!("--out {}: is a folder", path.display()),
                // A device or FIFO (/dev/stdout, a pipe) is written in place.
                Ok(m) if !m.is_file() => {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    Ok(Sink::Stream(path))
                }
                // A file is replaced by a rename once the summary is
                // complete: its folder must take new files. Through a
                // symlink, the file it points to is replaced, not the link.
                _ => {
                    let target = match std::fs::symlink_metadata(&path) {
                        Ok(m) if m.file_type().is_symlink() => {
                            std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone())
                        }
                        _ => path.clone(),
                    };
                    probe(parent_dir(&target))
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    Ok(Sink::File(target))
                }
            };
        }
        if let Some(dir) = out_dir {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            probe_writable(&dir)?;
            return Ok(Sink::Dir(dir));
        }
        open_spool(spool)
    }

    /// Stores a summary. `last`: the trace's last one (the run's end),
    /// which a `--out` file takes; the windows before it go to the file's
    /// name with their index before the extension (`run.summary` ->
    /// `run.3.summary`). A stream takes each in turn.
    pub(crate) fn put(&self, summary: &mut Summary, last: bool) -> anyhow::Result<PathBuf> {
        match self {
            Sink::File(path) => {
                let path = if last {
                    path.clone()
                } else {
                    window_path(path, summary.run.window)
                };
                write_summary(&path, summary)?;
                Ok(path)
            }
            Sink::Stream(path) => {
                let bytes = encode(summary)?;
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .and_then(|mut f| f.write_all(&bytes))
                    .with_context(|| format!("cannot write {}", path.display()))?;
                Ok(path.clone())
            }
            Sink::Dir(dir) => {
                let path = dir.join(format!("{}.summary", summary.id));
                write_summary(&path, summary)?;
                Ok(path)
            }
            #[cfg(feature = "upload")]
            Sink::Spool(spool) => Ok(spool.put(summary)?),
        }
    }
}

/// Where window `index` of a trace given `--out FILE` goes: FILE with the
/// index before its extension (`run.summary` -> `run.3.summary`, `run` ->
/// `run.3`).
pub(crate) fn window_path(path: &Path, index: u32) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let named = match name.rfind('.') {
        Some(dot) if dot > 0 => format!("{}.{index}{}", &name[..dot], &name[dot..]),
        _ => format!("{name}.{index}"),
    };
    path.with_file_name(named)
}

#[cfg(feature = "upload")]
pub(crate) fn open_spool(spool: Option<PathBuf>) -> anyhow::Result<Sink> {
    let dir = spool.unwrap_or_else(uploader::session::default_spool_dir);
    let s = uploader::spool::Spool::open(&dir)?;
    probe_writable(&dir)?;
    Ok(Sink::Spool(s))
}

#[cfg(not(feature = "upload"))]
pub(crate) fn open_spool(spool: Option<PathBuf>) -> anyhow::Result<Sink> {
    match spool {
        Some(_) => bail!("this build has no spool support (feature `upload`); use --out FILE"),
        None => bail!("give --out FILE"),
    }
}

/// Fails with the OS reason when `dir` cannot take a new file.
pub(crate) fn probe_writable(dir: &Path) -> anyhow::Result<()> {
    probe(dir).with_context(|| format!("cannot write to {}", dir.display()))
}

/// Creates and removes a hidden file in `dir`.
pub(crate) fn probe(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".edge-agent-probe-{}", std::process::id()));
    std::fs::File::create(&probe)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The folder a file path lives in (`.` for a bare name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

pub(crate) fn encode(summary: &mut Summary) -> anyhow::Result<Vec<u8>> {
    let mut buf = [0u8; MAX_ENCODED_LEN];
    let bytes = summary
        .encode(&mut buf)
        .map_err(|e| anyhow::anyhow!("cannot encode the summary: {e}"))?;
    Ok(bytes.to_vec())
}

/// Writes the summary to a hidden temporary file in `path`'s folder, syncs
/// it and renames it to `path`: `path` is either the whole summary or
/// untouched (never an empty or partial file after a failure).
pub(crate) fn write_summary(path: &Path, summary: &mut Summary) -> anyhow::Result<()> {
    let bytes = encode(summary)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = parent_dir(path).join(format!(
        ".{}.tmp-{}",
        name.unwrap_or_default(),
        std::process::id()
    ));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(&bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.with_context(|| format!("cannot write {}", path.display()))
}
