//! The two kernel interfaces the eBPF backend needs beyond aya: a pidfd
//! for one thread (`PIDFD_THREAD`, Linux 6.9), and a raw map lookup, for
//! task-local storage (keyed by such a pidfd), a map type aya 0.13 does
//! not wrap.
//!
//! Raw `libc`: nix has neither `pidfd_open` nor `bpf(2)`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::raw::{c_int, c_long};

use super::{check, Tid};

/// `PIDFD_THREAD` (`O_EXCL`): the pidfd names the thread, not its group.
const PIDFD_THREAD: c_long = libc::O_EXCL as c_long;

/// `BPF_MAP_LOOKUP_ELEM`.
const BPF_MAP_LOOKUP_ELEM: c_long = 1;

/// A pidfd for thread `tid` itself (any thread of a process; Linux 6.9,
/// EINVAL before).
pub fn thread_pidfd(tid: Tid) -> io::Result<OwnedFd> {
    // SAFETY: plain integers; a negative result is checked before use.
    let raw = check(unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) })?;
    // SAFETY: `raw` is a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw as c_int) })
}

/// `union bpf_attr` for the map element commands (the fields they read,
/// in the kernel's layout: `map_fd`, padding, `key`, `value`, `flags`).
#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// Looks `key` up in the BPF map `map` into `value` (its value size);
/// `Ok(false)` when the key has no entry (ENOENT).
pub fn bpf_map_lookup(map: BorrowedFd<'_>, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
    let attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.as_mut_ptr() as u64,
        ..MapElemAttr::default()
    };
    // SAFETY: `attr` lives across the call and is as large as the
    // command's part of bpf_attr; `key` and `value` are live buffers of
    // the caller, the kernel reads the map's key size from `key` and
    // writes its value size to `value`, which the caller sized as the
    // map's value.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_LOOKUP_ELEM,
            &attr as *const MapElemAttr,
            std::mem::size_of::<MapElemAttr>() as c_long,
        )
    };
    match check(ret) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}
