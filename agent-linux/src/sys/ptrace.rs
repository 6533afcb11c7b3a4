//! The raw ptrace requests the tracer makes, each counted in
//! `COUNTERS.ptrace` (the benchmark reports ptrace calls per syscall).
//!
//! Hand-written rather than through `nix::sys::ptrace`: nix cannot resume
//! with a real-time signal (its `Signal` enum has none), has no
//! PTRACE_GET_SYSCALL_INFO, and is missing requests on Android.
//!
//! Constants and structures are defined locally rather than taken from the
//! `libc` crate, which lacks several of them on Android (and types
//! `ptrace`'s request differently per C library). They are the kernel's UAPI
//! values, identical on every architecture the agent supports.

use std::io;
use std::os::raw::{c_long, c_void};
use std::sync::atomic::Ordering;

use super::{check, Tid, COUNTERS};

// ptrace requests (include/uapi/linux/ptrace.h).
const PTRACE_CONT: c_long = 7;
const PTRACE_DETACH: c_long = 17;
const PTRACE_SYSCALL: c_long = 24;
const PTRACE_GETEVENTMSG: c_long = 0x4201;
const PTRACE_GETREGSET: c_long = 0x4204;
const PTRACE_SEIZE: c_long = 0x4206;
const PTRACE_INTERRUPT: c_long = 0x4207;
const PTRACE_LISTEN: c_long = 0x4208;
const PTRACE_GET_SYSCALL_INFO: c_long = 0x420e;

// ptrace options.
pub const PTRACE_O_TRACESYSGOOD: u32 = 1;
pub const PTRACE_O_TRACEFORK: u32 = 1 << 1;
pub const PTRACE_O_TRACEVFORK: u32 = 1 << 2;
pub const PTRACE_O_TRACECLONE: u32 = 1 << 3;
pub const PTRACE_O_TRACEEXEC: u32 = 1 << 4;
pub const PTRACE_O_TRACEEXIT: u32 = 1 << 6;
pub const PTRACE_O_TRACESECCOMP: u32 = 1 << 7;

// ptrace events (status >> 16 of a ptrace-event stop).
pub const PTRACE_EVENT_FORK: i32 = 1;
pub const PTRACE_EVENT_VFORK: i32 = 2;
pub const PTRACE_EVENT_CLONE: i32 = 3;
pub const PTRACE_EVENT_EXEC: i32 = 4;
pub const PTRACE_EVENT_EXIT: i32 = 6;
pub const PTRACE_EVENT_SECCOMP: i32 = 7;
pub const PTRACE_EVENT_STOP: i32 = 128;

// PTRACE_GET_SYSCALL_INFO operations.
pub const SYSCALL_INFO_ENTRY: u8 = 1;
pub const SYSCALL_INFO_EXIT: u8 = 2;
pub const SYSCALL_INFO_SECCOMP: u8 = 3;

/// The regset holding the general registers (elf.h).
const NT_PRSTATUS: c_long = 1;

fn count_ptrace() {
    COUNTERS.ptrace.fetch_add(1, Ordering::Relaxed);
}

/// `struct ptrace_syscall_info` (Linux 5.3+): 88 bytes. The union after the
/// common header is kept as bytes and decoded field by field, so one layout
/// serves every architecture.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SyscallInfo {
    /// `PTRACE_SYSCALL_INFO_*`.
    pub op: u8,
    pad: [u8; 3],
    /// `AUDIT_ARCH_*` of the syscall.
    pub arch: u32,
    instruction_pointer: u64,
    stack_pointer: u64,
    /// entry/seccomp: `u64 nr; u64 args[6]` (+ `u32 ret_data` for seccomp);
    /// exit: `s64 rval; u8 is_error`.
    data: [u8; 64],
}

impl SyscallInfo {
    /// A zeroed buffer.
    pub const fn new() -> SyscallInfo {
        SyscallInfo {
            op: 0,
            pad: [0; 3],
            arch: 0,
            instruction_pointer: 0,
            stack_pointer: 0,
            data: [0; 64],
        }
    }

    fn word(&self, i: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.data[i * 8..i * 8 + 8]);
        u64::from_ne_bytes(b)
    }

    /// Entry or seccomp stop: the syscall number.
    pub fn nr(&self) -> u64 {
        self.word(0)
    }

    /// Entry or seccomp stop: the six arguments.
    pub fn args(&self) -> [u64; 6] {
        [
            self.word(1),
            self.word(2),
            self.word(3),
            self.word(4),
            self.word(5),
            self.word(6),
        ]
    }

    /// Exit stop: the return value (negative errno on failure).
    pub fn rval(&self) -> i64 {
        self.word(0) as i64
    }
}

impl Default for SyscallInfo {
    fn default() -> Self {
        SyscallInfo::new()
    }
}

/// A buffer for a `NT_PRSTATUS` regset: large enough for the biggest
/// supported layout (aarch64's `user_pt_regs`, 272 bytes), 8-byte aligned.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug)]
pub struct RegsBuf(pub [u8; 288]);

impl RegsBuf {
    /// A zeroed buffer.
    pub const fn new() -> RegsBuf {
        RegsBuf([0; 288])
    }
}

impl Default for RegsBuf {
    fn default() -> Self {
        RegsBuf::new()
    }
}

/// One ptrace request through the raw system call (the C libraries disagree
/// on the wrapper's request type, and the raw call has the same semantics
/// for every request used here).
fn ptrace(req: c_long, tid: Tid, addr: usize, data: usize) -> io::Result<c_long> {
    count_ptrace();
    // SAFETY: ptrace with these requests reads/writes at most the buffer
    // `data` points to (sized by the caller-provided length where the
    // request takes one); for the others `addr`/`data` are plain integers.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_ptrace,
            req,
            tid as c_long,
            addr as *mut c_void,
            data as *mut c_void,
        )
    };
    check(ret)
}

/// PTRACE_SEIZE with `options` (never PTRACE_O_EXITKILL).
pub fn seize(tid: Tid, options: u32) -> io::Result<()> {
    ptrace(PTRACE_SEIZE, tid, 0, options as usize).map(drop)
}

/// PTRACE_INTERRUPT: stop a seized tracee.
pub fn interrupt(tid: Tid) -> io::Result<()> {
    ptrace(PTRACE_INTERRUPT, tid, 0, 0).map(drop)
}

/// PTRACE_LISTEN: leave a tracee in its group-stop but hear of its end.
pub fn listen(tid: Tid) -> io::Result<()> {
    ptrace(PTRACE_LISTEN, tid, 0, 0).map(drop)
}

/// Resume until the next syscall stop, delivering `sig` (0: none).
pub fn resume_syscall(tid: Tid, sig: i32) -> io::Result<()> {
    ptrace(PTRACE_SYSCALL, tid, 0, sig as usize).map(drop)
}

/// Resume without syscall stops, delivering `sig` (0: none).
pub fn resume_cont(tid: Tid, sig: i32) -> io::Result<()> {
    ptrace(PTRACE_CONT, tid, 0, sig as usize).map(drop)
}

/// Detach, delivering `sig` (0: none).
pub fn detach(tid: Tid, sig: i32) -> io::Result<()> {
    ptrace(PTRACE_DETACH, tid, 0, sig as usize).map(drop)
}

/// PTRACE_GETEVENTMSG: the new tid of a fork/clone event, the former tid of
/// an exec event.
pub fn event_msg(tid: Tid) -> io::Result<u64> {
    let mut msg: libc::c_ulong = 0;
    ptrace(
        PTRACE_GETEVENTMSG,
        tid,
        0,
        &mut msg as *mut libc::c_ulong as usize,
    )?;
    Ok(msg as u64)
}

/// PTRACE_GET_SYSCALL_INFO into `info`; returns the bytes the kernel has.
pub fn syscall_info(tid: Tid, info: &mut SyscallInfo) -> io::Result<usize> {
    let size = std::mem::size_of::<SyscallInfo>();
    ptrace(
        PTRACE_GET_SYSCALL_INFO,
        tid,
        size,
        info as *mut SyscallInfo as usize,
    )
    .map(|n| n as usize)
}

/// PTRACE_GETREGSET(NT_PRSTATUS) into `buf`; returns the bytes written (the
/// size tells a 32-bit process from a 64-bit one).
pub fn get_regs(tid: Tid, buf: &mut RegsBuf) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.0.as_mut_ptr() as *mut c_void,
        iov_len: buf.0.len(),
    };
    ptrace(
        PTRACE_GETREGSET,
        tid,
        NT_PRSTATUS as usize,
        &mut iov as *mut libc::iovec as usize,
    )?;
    Ok(iov.iov_len)
}
