//! What the tracer asks of files and of a tracee's memory: `/proc` links and
//! file types (both counted in `COUNTERS.proc_reads`), reads of tracee
//! memory, and whether two tasks share an fd table.

use std::ffi::CStr;
use std::io::{self, IoSliceMut};
use std::os::raw::c_long;
use std::sync::atomic::Ordering;

use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

use super::{check, Tid, COUNTERS};

/// kcmp type: do two tasks share one file-descriptor table.
const KCMP_FILES: c_long = 2;

/// Whether two tasks share one file-descriptor table; `None` when the
/// kernel has no kcmp (CONFIG_KCMP off). Raw: nix has no kcmp.
pub fn share_files(a: Tid, b: Tid) -> Option<bool> {
    // SAFETY: kcmp with KCMP_FILES takes plain integers.
    let r = unsafe { libc::syscall(libc::SYS_kcmp, a as c_long, b as c_long, KCMP_FILES, 0, 0) };
    match r {
        0 => Some(true),
        -1 => None,
        _ => Some(false),
    }
}

/// Reads `buf.len()` bytes of tracee memory at `addr`.
pub fn read_memory(tid: Tid, addr: u64, buf: &mut [u8]) -> io::Result<()> {
    let len = buf.len();
    let remote = [RemoteIoVec {
        base: addr as usize,
        len,
    }];
    match process_vm_readv(Pid::from_raw(tid), &mut [IoSliceMut::new(buf)], &remote) {
        Ok(n) if n == len => Ok(()),
        Ok(_) => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read")),
        Err(e) => Err(e.into()),
    }
}

/// readlink(2) into `buf`; returns the target's length. Raw: nix's
/// `readlink` returns a fresh `OsString`, and this path (resolving an fd's
/// kind) is kept free of allocation, the target living on the caller's
/// stack.
pub fn readlink(path: &CStr, buf: &mut [u8]) -> io::Result<usize> {
    COUNTERS.proc_reads.fetch_add(1, Ordering::Relaxed);
    // SAFETY: readlink writes at most `buf.len()` bytes into `buf`; `path`
    // is NUL-terminated.
    let n = unsafe { libc::readlink(path.as_ptr(), buf.as_mut_ptr() as *mut _, buf.len()) };
    check(n as c_long).map(|n| n as usize)
}

/// The file type bits (`S_IFMT`) of what `path` points to (following links).
pub fn file_type(path: &CStr) -> io::Result<u32> {
    COUNTERS.proc_reads.fetch_add(1, Ordering::Relaxed);
    let st = nix::sys::stat::stat(path)?;
    // mode_t is 16 bits on 32-bit Android, 32 elsewhere.
    #[allow(clippy::useless_conversion)]
    let mode = u32::from(st.st_mode);
    Ok(mode & 0o170000)
}
