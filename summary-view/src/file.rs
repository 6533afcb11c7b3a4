//! Reading a summary file without trusting its size: at most the summary
//! cap plus one byte is ever read, so a big file, `/dev/zero` or a device
//! given by mistake costs 2 KiB of memory, not the whole input. Shared by
//! `edge-agent show` and `edge-service diagnose`.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use agent_core::{DecodeError, Summary, MAX_ENCODED_LEN};

/// Why a summary file could not be read.
#[derive(Debug)]
pub enum FileError {
    /// The file could not be opened or read.
    Io {
        /// The path given.
        path: PathBuf,
        /// The OS's reason.
        err: std::io::Error,
    },
    /// More than `cap` bytes: not a summary.
    TooLarge {
        /// The path given.
        path: PathBuf,
        /// The cap that was exceeded.
        cap: usize,
    },
    /// The bytes are not a valid summary.
    Invalid {
        /// The path given.
        path: PathBuf,
        /// The decoder's reason.
        err: DecodeError,
    },
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Io { path, err } => write!(f, "cannot read {}: {err}", path.display()),
            FileError::TooLarge { path, cap } => write!(
                f,
                "{}: larger than {cap} bytes (the size cap of a summary): not a summary",
                path.display()
            ),
            FileError::Invalid { path, err } => {
                write!(f, "{}: not a valid summary: {err}", path.display())
            }
        }
    }
}

impl std::error::Error for FileError {}

/// Reads at most `cap` bytes of `path`; a file with more is
/// [`FileError::TooLarge`] (only `cap + 1` bytes are read to tell).
pub fn read_capped(path: &Path, cap: usize) -> Result<Vec<u8>, FileError> {
    let io = |err| FileError::Io {
        path: path.to_path_buf(),
        err,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::with_capacity(cap.saturating_add(1).min(64 * 1024));
    file.take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() > cap {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            cap,
        });
    }
    Ok(bytes)
}

/// Reads and decodes one summary file (exactly the bytes of
/// `Summary::encode`), reading at most [`MAX_ENCODED_LEN`] + 1 bytes.
pub fn read_summary(path: &Path) -> Result<Summary, FileError> {
    let bytes = read_capped(path, MAX_ENCODED_LEN)?;
    Summary::decode(&bytes).map_err(|err| FileError::Invalid {
        path: path.to_path_buf(),
        err,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_input_is_read_only_to_the_cap() {
        let err = read_summary(Path::new("/dev/zero")).unwrap_err();
        assert!(matches!(
            err,
            FileError::TooLarge {
                cap: MAX_ENCODED_LEN,
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            "/dev/zero: larger than 2048 bytes (the size cap of a summary): not a summary"
        );
    }

    #[test]
    fn sizes_around_the_cap() {
        let dir = std::env::temp_dir().join(format!("summary-view-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let at = dir.join("at");
        std::fs::write(&at, vec![0u8; MAX_ENCODED_LEN]).unwrap();
        assert_eq!(
            read_capped(&at, MAX_ENCODED_LEN).unwrap().len(),
            MAX_ENCODED_LEN
        );
        // The decoder's own words, after the path.
        let err = read_summary(&at).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}: not a valid summary: ", at.display())),
            "{err}"
        );
        let over = dir.join("over");
        std::fs::write(&over, vec![0u8; MAX_ENCODED_LEN + 1]).unwrap();
        assert!(matches!(
            read_capped(&over, MAX_ENCODED_LEN),
            Err(FileError::TooLarge { .. })
        ));
        let missing = dir.join("missing");
        let err = read_summary(&missing).unwrap_err().to_string();
        assert!(
            err.starts_with("cannot read ") && err.contains("missing"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
