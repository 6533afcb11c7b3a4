//! The run's table, mapped from the file the agent made: with raw system
//! calls only (libc's `open` and `mmap` are our own wrappers here, and the
//! process is not observed yet).

use agent_inproc::RunTable;

/// The variable naming the table file.
const TABLE_VAR: &[u8] = b"EDGE_AGENT_PRELOAD_TABLE\0";

/// The run's table, if the variable names a table file of this build.
pub fn map_from_env() -> Option<&'static RunTable> {
    // SAFETY: a NUL-terminated name; getenv's result is read before any
    // call that could change the environment.
    let path = unsafe { libc::getenv(TABLE_VAR.as_ptr().cast()) };
    if path.is_null() {
        return None;
    }
    // SAFETY: `path` is a NUL-terminated string from the environment.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD as libc::c_long,
            path,
            (libc::O_RDWR | libc::O_CLOEXEC) as libc::c_long,
        )
    } as libc::c_int;
    if fd < 0 {
        return None;
    }
    let size = RunTable::size();
    let table = map(fd, size);
    // SAFETY: `fd` is ours, opened above; the mapping outlives it.
    unsafe { libc::syscall(libc::SYS_close, fd as libc::c_long) };
    let base = table?;
    // SAFETY: the mapping is `size` bytes, at least the two header words,
    // page-aligned.
    let (magic, layout) = unsafe { (*base.cast::<u64>(), *base.cast::<u64>().add(1)) };
    if !RunTable::is_current(magic, layout) {
        // SAFETY: our own mapping of `size` bytes, not used after.
        unsafe { libc::syscall(libc::SYS_munmap, base, size as libc::c_long) };
        return None;
    }
    // SAFETY: the file holds a `RunTable` of this build (its header says
    // so), written by the agent before it started the program; the
    // mapping stays for the process's life (never unmapped) and is only
    // ever used through `&` (every field is atomic or try-locked).
    Some(unsafe { &*base.cast::<RunTable>() })
}

/// `size` bytes of `fd` mapped shared, if the file is that long.
fn map(fd: libc::c_int, size: usize) -> Option<*mut u8> {
    #[cfg(target_pointer_width = "64")]
    type Stat = libc::stat;
    #[cfg(target_pointer_width = "64")]
    let fstat_nr = agent_inproc::calls::SYS_FSTAT;
    #[cfg(target_pointer_width = "32")]
    type Stat = libc::stat64;
    #[cfg(target_pointer_width = "32")]
    let fstat_nr = libc::SYS_fstat64;
    // SAFETY: an all-zero stat is a valid value; the kernel fills it.
    let mut st: Stat = unsafe { core::mem::zeroed() };
    // SAFETY: `st` is writable and the kernel's stat layout for this call.
    if unsafe { libc::syscall(fstat_nr, fd as libc::c_long, &mut st as *mut Stat) } != 0 {
        return None;
    }
    if (st.st_size as u64) < size as u64 {
        return None;
    }
    #[cfg(target_pointer_width = "64")]
    let mmap_nr = libc::SYS_mmap;
    #[cfg(target_pointer_width = "32")]
    let mmap_nr = libc::SYS_mmap2;
    // Every argument as a full register (`syscall` is variadic: an `int`
    // passed as such leaves the register's upper half undefined, and the
    // kernel reads a whole `unsigned long` of prot, flags and offset).
    // SAFETY: a new shared mapping of an open file, at an address the
    // kernel chooses: nothing of ours is replaced.
    let p = unsafe {
        libc::syscall(
            mmap_nr,
            0 as libc::c_long,
            size as libc::c_long,
            (libc::PROT_READ | libc::PROT_WRITE) as libc::c_long,
            libc::MAP_SHARED as libc::c_long,
            fd as libc::c_long,
            0 as libc::c_long,
        )
    };
    // The kernel's failures are -4095..-1 (libc::syscall made them -1).
    if p == -1 || p == 0 {
        None
    } else {
        Some(p as usize as *mut u8)
    }
}
