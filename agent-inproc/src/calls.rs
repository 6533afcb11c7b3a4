//! The system call each wrapped libc function is filed under: the one
//! libc makes for it, so a run observed in-process counts what `strace`
//! and the kernel-side backends count for the same calls (`open` is
//! `openat`, `send` is `sendto`, `fork` is `clone`, `sleep` is
//! `clock_nanosleep`...). Measured on glibc 2.36 x86_64 with `strace -f`
//! (tests/tests/tracer_preload.rs checks it); the other ABIs follow their
//! kernel's table (no `open`, `poll` or `dup2` on arm64) and are checked by
//! the cross tests where they run.

use agent_core::Arch;

/// The ABI the calls are made through.
#[cfg(target_arch = "x86_64")]
pub const ARCH: Arch = Arch::X86_64;
#[cfg(target_arch = "x86")]
pub const ARCH: Arch = Arch::I386;
#[cfg(target_arch = "aarch64")]
pub const ARCH: Arch = Arch::Aarch64;
#[cfg(target_arch = "arm")]
pub const ARCH: Arch = Arch::Arm;

macro_rules! nr {
    ($($name:ident = $sys:ident;)*) => {
        $(pub const $name: u32 = libc::$sys as u32;)*
    };
}

// The same call on every ABI.
nr! {
    READ = SYS_read;
    WRITE = SYS_write;
    PREAD = SYS_pread64;
    PWRITE = SYS_pwrite64;
    READV = SYS_readv;
    WRITEV = SYS_writev;
    PREADV = SYS_preadv;
    PWRITEV = SYS_pwritev;
    OPENAT = SYS_openat;
    CLOSE = SYS_close;
    DUP = SYS_dup;
    DUP3 = SYS_dup3;
    FSYNC = SYS_fsync;
    FDATASYNC = SYS_fdatasync;
    SOCKET = SYS_socket;
    CONNECT = SYS_connect;
    ACCEPT4 = SYS_accept4;
    BIND = SYS_bind;
    LISTEN = SYS_listen;
    SHUTDOWN = SYS_shutdown;
    SENDTO = SYS_sendto;
    RECVFROM = SYS_recvfrom;
    SENDMSG = SYS_sendmsg;
    RECVMSG = SYS_recvmsg;
    PPOLL = SYS_ppoll;
    PSELECT = SYS_pselect6;
    EPOLL_PWAIT = SYS_epoll_pwait;
    CLOCK_NANOSLEEP = SYS_clock_nanosleep;
    MUNMAP = SYS_munmap;
    MADVISE = SYS_madvise;
    CLONE = SYS_clone;
    EXECVE = SYS_execve;
    WAIT4 = SYS_wait4;
}

// Calls the 64-bit ABIs name one way and the 32-bit ones another.
#[cfg(target_arch = "x86_64")]
nr! {
    SENDFILE = SYS_sendfile;
    MMAP = SYS_mmap;
    STAT = SYS_newfstatat;
}
// arm64's generic table; the libc crate's Android arm64 table lacks these
// names, so their numbers are the kernel's (include/uapi/asm-generic/unistd.h).
#[cfg(target_arch = "aarch64")]
nr! {
    MMAP = SYS_mmap;
}
#[cfg(target_arch = "aarch64")]
pub const SENDFILE: u32 = 71;
#[cfg(target_arch = "aarch64")]
pub const STAT: u32 = 79;
/// `fstat` (arm64's generic table; see above).
#[cfg(target_arch = "aarch64")]
pub const SYS_FSTAT: libc::c_long = 80;
/// `fstatfs` (arm64's generic table; see above).
#[cfg(target_arch = "aarch64")]
pub const SYS_FSTATFS: libc::c_long = 44;
#[cfg(target_arch = "x86_64")]
pub const SYS_FSTAT: libc::c_long = libc::SYS_fstat;
#[cfg(target_arch = "x86_64")]
pub const SYS_FSTATFS: libc::c_long = libc::SYS_fstatfs;
#[cfg(target_pointer_width = "32")]
nr! {
    SENDFILE = SYS_sendfile64;
    MMAP = SYS_mmap2;
    STAT = SYS_fstatat64;
}

/// `fcntl`: the 32-bit ABIs' libcs make `fcntl64`.
#[cfg(target_pointer_width = "64")]
pub const FCNTL: u32 = libc::SYS_fcntl as u32;
#[cfg(target_pointer_width = "32")]
pub const FCNTL: u32 = libc::SYS_fcntl64 as u32;

// Calls x86 (and 32-bit ARM) still have, which arm64's table dropped.
#[cfg(not(target_arch = "aarch64"))]
nr! {
    OPEN = SYS_open;
    CREAT = SYS_creat;
    DUP2 = SYS_dup2;
    POLL = SYS_poll;
    EPOLL_WAIT = SYS_epoll_wait;
}
#[cfg(target_arch = "aarch64")]
nr! {
    OPEN = SYS_openat;
    CREAT = SYS_openat;
    DUP2 = SYS_dup3;
    POLL = SYS_ppoll;
    EPOLL_WAIT = SYS_epoll_pwait;
}
// i386 has no `accept` of its own (socketcall's, or accept4 since 4.3).
#[cfg(not(target_arch = "x86"))]
nr! {
    ACCEPT = SYS_accept;
}
#[cfg(target_arch = "x86")]
nr! {
    ACCEPT = SYS_accept4;
}

/// What glibc makes of `open` and `creat` (openat for both since 2.26,
/// `creat` excepted on the ABIs that have it), of the stat family (one
/// `fstatat` since 2.33, `fstat` included) and of `poll`/`select`.
pub const OPEN_AS: u32 = OPENAT;
/// `creat`: its own call where the ABI has one.
pub const CREAT_AS: u32 = CREAT;
/// `stat`, `lstat`, `fstat`, `fstatat` and glibc's old `__xstat` names.
pub const STAT_AS: u32 = STAT;
/// `fstat` on bionic is its own call.
#[cfg(all(target_os = "android", target_pointer_width = "64"))]
pub const FSTAT_AS: u32 = SYS_FSTAT as u32;
/// `fstat` on bionic is its own call.
#[cfg(all(target_os = "android", target_pointer_width = "32"))]
pub const FSTAT_AS: u32 = libc::SYS_fstat64 as u32;
/// `fstat` on glibc is an `fstatat` with an empty path.
#[cfg(not(target_os = "android"))]
pub const FSTAT_AS: u32 = STAT;
/// `select` is a `pselect6` (glibc 2.36; bionic too).
pub const SELECT_AS: u32 = PSELECT;

/// `vfork`: its own call where the ABI has one; arm64's libcs make it a
/// `clone(CLONE_VM|CLONE_VFORK)`.
#[cfg(not(target_arch = "aarch64"))]
pub const VFORK: u32 = libc::SYS_vfork as u32;
#[cfg(target_arch = "aarch64")]
pub const VFORK: u32 = CLONE;

/// The process `posix_spawn` (and `system`, `popen`, which use it) makes:
/// glibc 2.36 a `clone3(CLONE_VM|CLONE_VFORK)`, bionic a `clone`.
#[cfg(not(target_os = "android"))]
pub const SPAWN_AS: u32 = 435; // clone3: the same number on every ABI
#[cfg(target_os = "android")]
pub const SPAWN_AS: u32 = CLONE;
