//! The in-process backend's run table as the agent holds it: a file of
//! the run's private folder, mapped shared, holding one
//! [`agent_inproc::RunTable`] that every process of the run maps too (the
//! preload library maps it at load). The agent writes the table before
//! the program starts and reads it at each window and at the end; a
//! process killed by SIGKILL leaves its counts in it.

use std::fs::{File, OpenOptions};
use std::io;
use std::num::NonZeroUsize;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;

use agent_inproc::RunTable;
use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};

/// A run table in a shared file mapping.
#[derive(Debug)]
pub struct RunTableFile {
    base: NonNull<RunTable>,
    len: usize,
}

// SAFETY: the mapping is only reached through `&RunTable` (atomics and
// try-only locks, made for use from many processes at once) or through
// `&mut self`.
unsafe impl Send for RunTableFile {}

impl RunTableFile {
    /// Makes `path` (a new file, mode 0600) holding `table`, mapped.
    pub fn create(path: &Path, table: RunTable) -> io::Result<RunTableFile> {
        let file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        let len = RunTable::size();
        file.set_len(len as u64)?;
        let size = NonZeroUsize::new(len).ok_or_else(|| io::Error::other("empty table"))?;
        // SAFETY: a new shared mapping of our own file at an address the
        // kernel chooses: nothing of ours is replaced.
        let base = unsafe {
            mmap(
                None,
                size,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                &file,
                0,
            )
        }?
        .cast::<RunTable>();
        // SAFETY: the mapping is `len` = size_of::<RunTable>() bytes,
        // page-aligned (enough for RunTable), writable and not yet read by
        // anyone (the program starts after this returns).
        unsafe { base.as_ptr().write(table) };
        Ok(RunTableFile { base, len })
    }

    /// The table, shared with the run's live processes.
    pub fn table(&self) -> &RunTable {
        // SAFETY: written by `create`; valid for as long as the mapping
        // (`self`) lives; only shared references are given while the run
        // may have processes.
        unsafe { self.base.as_ref() }
    }

    /// The table when no process of the run is left (the caller reaped
    /// them all): nothing else can touch it now, whatever state a killed
    /// process left its locks in.
    pub fn table_alone(&mut self) -> &mut RunTable {
        // SAFETY: as for `table`; exclusive by `&mut self` and by the
        // caller's promise that no process of the run is alive (other
        // mappings of the file are gone with their processes).
        unsafe { self.base.as_mut() }
    }
}

impl Drop for RunTableFile {
    fn drop(&mut self) {
        // SAFETY: our mapping of `len` bytes; no reference to it outlives
        // `self` (both accessors borrow it).
        let _ = unsafe { munmap(self.base.cast(), self.len) };
    }
}
