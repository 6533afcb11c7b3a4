//! A file mapped private and read-only: the kernel's BTF
//! (`/sys/kernel/btf/vmlinux`, 5.5 MB here), which the eBPF loader reads
//! at each start. Mapping it (Linux 6.16 and later map that file) spares
//! copying it into the agent's memory and faulting in the copy's pages.

use std::fs::File;
use std::io;
use std::num::NonZeroUsize;
use std::path::Path;
use std::ptr::NonNull;

use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};

/// Where the kernel publishes its own BTF.
pub const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// A read-only private mapping of a whole file that does not change
/// while the agent runs.
#[derive(Debug)]
pub struct MappedFile {
    base: NonNull<u8>,
    len: usize,
}

impl MappedFile {
    /// Maps the kernel's BTF. An error where the kernel does not map
    /// that file (kernels before 6.16), or where it is missing or empty.
    pub fn kernel_btf() -> io::Result<MappedFile> {
        MappedFile::map(Path::new(KERNEL_BTF))
    }

    /// Private to this file: only paths whose content is fixed for the
    /// kernel's life may be mapped (see `bytes`).
    fn map(path: &Path) -> io::Result<MappedFile> {
        let file = File::open(path)?;
        let len = usize::try_from(file.metadata()?.len()).map_err(io::Error::other)?;
        let size = NonZeroUsize::new(len)
            .ok_or_else(|| io::Error::other(format!("{} is empty", path.display())))?;
        // SAFETY: a new private read-only mapping at an address the
        // kernel chooses: nothing of ours is replaced. The file can be
        // closed once mapped.
        let base = unsafe {
            mmap(
                None,
                size,
                ProtFlags::PROT_READ,
                MapFlags::MAP_PRIVATE,
                &file,
                0,
            )
        }?
        .cast::<u8>();
        Ok(MappedFile { base, len })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `len` readable bytes mapped by `map`, valid for as long
        // as `self`. The only file mapped is the kernel's BTF, which the
        // kernel never changes while it runs, so the bytes do not change
        // under the shared reference.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: our mapping of `len` bytes; no reference to it outlives
        // `self` (`bytes` borrows it).
        let _ = unsafe { munmap(self.base.cast(), self.len) };
    }
}
