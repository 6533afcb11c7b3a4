//! Opening and reading a file that a traced (or watched) process controls:
//! a path under its current folder (`/proc/PID/cwd/ARG`), a script it
//! names, a file in a folder others may write (the shim folder's
//! `directive.json`), and the kernel's own `/proc/PID/*` files.
//!
//! Such a path may be a FIFO with no writer (a plain `open` blocks until
//! one comes: the agent's thread that serves the tracees' stops would
//! freeze, and every tracee with it), a device (opening one may act: a
//! watchdog, a tape, a modem line), a symlink to either, or a file of any
//! size. So every open here is `O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_NOCTTY|
//! O_CLOEXEC`, after an `lstat` that refuses anything but a regular file
//! (no device is ever opened, not even to look), and its `fstat` must say
//! the same regular file again (a swap between the two is refused); reads
//! stop at a byte budget the caller names. The kernel's `/proc/PID/NAME`
//! files skip the `lstat` and `fstat` ([`read_proc_within`]).
//!
//! `O_NOFOLLOW` applies to the last component only: `/proc/PID/cwd` (a
//! magic link) and any folder on the way are followed, which is what
//! resolves a path the way the process sees it.
//!
//! Not covered (see docs/edge-agent.md, "What the agent opens on behalf of
//! traced processes"): a regular file on a FUSE file system whose server
//! does not answer blocks `lstat`, `open` and `read` alike, as does a hung
//! network mount; `/proc/PID/cmdline` takes the process's memory lock.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a file was not opened or read (without its path: the allocation-free
/// callers, such as the fd kinds' `/proc/TID/net` lookups, need none).
#[derive(Debug)]
pub enum Refusal {
    /// `lstat`, `open`, `fstat` or `read` failed.
    Io(io::Error),
    /// It is not a regular file: what it is.
    NotRegular(&'static str),
    /// The file opened is not the one `lstat` saw.
    Swapped,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Io(e) => write!(f, "{e}"),
            Refusal::NotRegular(what) => write!(f, "it is {what}, not a regular file"),
            Refusal::Swapped => write!(f, "it was replaced while being opened"),
        }
    }
}

/// A file not opened or not read, with its path.
#[derive(Debug)]
pub struct TraceeFileError {
    /// The path asked for.
    pub path: PathBuf,
    /// Why.
    pub refusal: Refusal,
}

impl std::fmt::Display for TraceeFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} not read: {}", self.path.display(), self.refusal)
    }
}

impl std::error::Error for TraceeFileError {}

/// What a file of type `t` is, in words.
fn describe(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a folder"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "of an unknown type"
    }
}

/// Opens `path` for reading if it is a regular file, and only then;
/// never blocks on a FIFO, never opens a device, never follows a symbolic
/// link as the last component.
pub fn open(path: &Path) -> Result<File, Refusal> {
    let seen = std::fs::symlink_metadata(path).map_err(Refusal::Io)?;
    if !seen.file_type().is_file() {
        return Err(Refusal::NotRegular(describe(seen.file_type())));
    }
    // std adds O_CLOEXEC itself.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // O_NOFOLLOW's answer: it became a link after the lstat.
            Some(libc::ELOOP) => Refusal::NotRegular("a symbolic link"),
            _ => Refusal::Io(e),
        })?;
    let opened = file.metadata().map_err(Refusal::Io)?;
    if !opened.file_type().is_file() {
        return Err(Refusal::NotRegular(describe(opened.file_type())));
    }
    if (opened.dev(), opened.ino()) != (seen.dev(), seen.ino()) {
        return Err(Refusal::Swapped);
    }
    Ok(file)
}

/// The first `budget` bytes (at most) of the regular file `path`.
pub fn read(path: &Path, budget: usize) -> Result<Vec<u8>, TraceeFileError> {
    let fail = |refusal| TraceeFileError {
        path: path.to_path_buf(),
        refusal,
    };
    let file = open(path).map_err(fail)?;
    read_open(file, budget).map_err(|e| fail(Refusal::Io(e)))
}

/// The first `budget` bytes (at most) of `file`, from where it is.
fn read_open(file: File, budget: usize) -> io::Result<Vec<u8>> {
    // Room for a small file at once: from an empty Vec, `read_to_end`
    // probes with 32 bytes and grows, six reads for a `/proc/PID/stat`
    // where two do (watch reads it between an exec and the seize).
    let mut bytes = Vec::with_capacity(budget.min(FIRST_READ));
    file.take(budget as u64).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The buffer a read starts with: all of most small files in one read.
const FIRST_READ: usize = 4 << 10;

/// How much of `/proc/PID/stat`, `/proc/PID/status` and `/proc/PID/io` is
/// read: each is well under 2 KiB (a `comm` of 15 bytes, fixed fields).
pub const PROC_SMALL_BUDGET: usize = 8 << 10;

/// How much of `/proc/PID/cmdline` is read: 1 MiB of arguments; a text to
/// match past that is not seen.
pub const CMDLINE_BUDGET: usize = 1 << 20;

/// `/proc/PID/NAME`, a small kernel file of the process (`stat`,
/// `status`, `io`, `comm`), at most [`PROC_SMALL_BUDGET`] bytes; `None`
/// when the process is gone or the file is not ours to read.
pub fn read_proc(pid: i32, name: &str) -> Option<Vec<u8>> {
    read_proc_within(pid, name, PROC_SMALL_BUDGET).ok()
}

/// `/proc/PID/NAME`, at most `budget` bytes, without [`open`]'s `lstat`
/// and `fstat`: a numeric pid and a name of ours under procfs name a
/// file of the kernel, which no process can make a FIFO, a device or a
/// link (only root could mount something over /proc; the open keeps
/// `O_NONBLOCK|O_NOFOLLOW|O_NOCTTY` for that case). `watch` reads a
/// process's command line between its exec and the seize, while the
/// program runs untraced: the three calls saved there are calls of the
/// program's not missed.
pub fn read_proc_within(pid: i32, name: &str, budget: usize) -> Result<Vec<u8>, TraceeFileError> {
    let path = format!("/proc/{pid}/{name}");
    let fail = |refusal| TraceeFileError {
        path: PathBuf::from(&path),
        refusal,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(&path)
        .map_err(|e| fail(Refusal::Io(e)))?;
    read_open(file, budget).map_err(|e| fail(Refusal::Io(e)))
}

/// [`read_proc`] as text (`None` when it is not UTF-8).
pub fn read_proc_text(pid: i32, name: &str) -> Option<String> {
    String::from_utf8(read_proc(pid, name)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_regular_files_within_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read(&path, 4).unwrap(), b"0123");
        assert_eq!(read(&path, 100).unwrap(), b"0123456789");
        assert_eq!(
            read(Path::new("/proc/self/stat"), PROC_SMALL_BUDGET)
                .unwrap()
                .first()
                .copied()
                .map(|b| b.is_ascii_digit()),
            Some(true)
        );
    }

    /// The kernel's own files read within the budget, and a process that
    /// is not there named in the error.
    #[test]
    fn proc_files_are_read_within_the_budget() {
        let me = std::process::id() as i32;
        let whole = read_proc_within(me, "cmdline", CMDLINE_BUDGET).unwrap();
        assert!(whole.len() > 4, "{whole:?}");
        assert_eq!(read_proc_within(me, "cmdline", 4).unwrap(), whole[..4]);
        let err = read_proc_within(i32::MAX, "stat", 16).unwrap_err();
        assert!(err.to_string().contains("/proc/2147483647/stat"), "{err}");
    }

    #[test]
    fn refuses_fifos_links_devices_and_folders_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        for (path, what) in [
            (fifo.as_path(), "a FIFO"),
            (link.as_path(), "a symbolic link"),
            (Path::new("/dev/null"), "a character device"),
            (dir.path(), "a folder"),
        ] {
            let err = read(path, 16).unwrap_err();
            assert!(
                matches!(err.refusal, Refusal::NotRegular(w) if w == what),
                "{err}"
            );
            let said = err.to_string();
            assert!(said.contains(&path.display().to_string()), "{said}");
        }
        assert!(matches!(
            read(&dir.path().join("none"), 16).unwrap_err().refusal,
            Refusal::Io(_)
        ));
    }
}
