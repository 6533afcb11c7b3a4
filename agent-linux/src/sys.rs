//! The thin system-call layer: every `unsafe` block of the crate lives here,
//! each wrapping one kernel interface behind a safe function.
//!
//! Constants and structures are defined locally rather than taken from the
//! `libc` crate, which lacks several of them on Android (and types `ptrace`'s
//! request differently per C library). They are the kernel's UAPI values,
//! identical on every architecture the agent supports.

use std::ffi::CStr;
use std::io;
use std::os::raw::{c_int, c_long, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// Thread id as the kernel numbers it.
pub type Tid = i32;

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
pub const PTRACE_O_TRACESECCOMP: u32 = 1 << 7;

// ptrace events (status >> 16 of a ptrace-event stop).
pub const PTRACE_EVENT_FORK: i32 = 1;
pub const PTRACE_EVENT_VFORK: i32 = 2;
pub const PTRACE_EVENT_CLONE: i32 = 3;
pub const PTRACE_EVENT_EXEC: i32 = 4;
pub const PTRACE_EVENT_SECCOMP: i32 = 7;
pub const PTRACE_EVENT_STOP: i32 = 128;

// PTRACE_GET_SYSCALL_INFO operations.
pub const SYSCALL_INFO_ENTRY: u8 = 1;
pub const SYSCALL_INFO_EXIT: u8 = 2;
pub const SYSCALL_INFO_SECCOMP: u8 = 3;

/// The regset holding the general registers (elf.h).
const NT_PRSTATUS: c_long = 1;
/// waitpid flags: wait for clone children too (threads of tracees), but
/// only for this thread's children and tracees (a library host's other
/// threads keep theirs: ptrace ties tracees to the tracing thread).
const WALL: c_int = 0x4000_0000 | 0x2000_0000;
/// kcmp type: do two tasks share one file-descriptor table.
const KCMP_FILES: c_long = 2;

// seccomp (include/uapi/linux/seccomp.h, prctl.h).
const SECCOMP_SET_MODE_FILTER: c_long = 1;
const PR_SET_NO_NEW_PRIVS: c_int = 38;
/// setitimer's real-time timer (absent from libc on Android).
const ITIMER_REAL: c_int = 0;

/// How many ptrace requests and waits the agent made: the cost per traced
/// syscall the benchmark reports.
#[derive(Debug)]
pub struct Counters {
    /// ptrace(2) requests of every kind.
    pub ptrace: AtomicU64,
    /// waitpid(2) calls that returned a stop or exit.
    pub waits: AtomicU64,
    /// Reads of /proc made to resolve fd kinds and new tasks.
    pub proc_reads: AtomicU64,
}

/// The process-wide counters (relaxed atomics: one uncontended add each).
pub static COUNTERS: Counters = Counters {
    ptrace: AtomicU64::new(0),
    waits: AtomicU64::new(0),
    proc_reads: AtomicU64::new(0),
};

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

fn check(ret: c_long) -> io::Result<c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
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

/// A stop or end reported by waitpid.
#[derive(Clone, Copy, Debug)]
pub struct WaitStatus(pub c_int);

impl WaitStatus {
    pub fn exited(self) -> Option<i32> {
        libc::WIFEXITED(self.0).then(|| libc::WEXITSTATUS(self.0))
    }
    pub fn signaled(self) -> Option<i32> {
        libc::WIFSIGNALED(self.0).then(|| libc::WTERMSIG(self.0))
    }
    pub fn stopped(self) -> Option<i32> {
        libc::WIFSTOPPED(self.0).then(|| libc::WSTOPSIG(self.0))
    }
    /// The ptrace event of an event stop (0 for other stops).
    pub fn event(self) -> i32 {
        (self.0 >> 16) & 0xffff
    }
}

/// Waits for any tracee or child (`__WALL`). `Ok(None)` when interrupted by
/// a signal.
pub fn wait_any() -> io::Result<Option<(Tid, WaitStatus)>> {
    waitpid_any(WALL)
}

/// Like [`wait_any`], but never sleeps: `Ok(None)` when no tracee has a
/// report yet (or a signal interrupted the call).
pub fn try_wait_any() -> io::Result<Option<(Tid, WaitStatus)>> {
    waitpid_any(WALL | libc::WNOHANG)
}

/// `waitpid(-1, flags)`: `Ok(None)` when interrupted, or when `WNOHANG`
/// found nothing to report.
fn waitpid_any(flags: c_int) -> io::Result<Option<(Tid, WaitStatus)>> {
    let mut status: c_int = 0;
    // SAFETY: waitpid writes one int to `status`, which lives on our stack.
    let pid = unsafe { libc::waitpid(-1, &mut status, flags) };
    match pid {
        -1 => {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                return Ok(None);
            }
            Err(err)
        }
        0 => Ok(None),
        _ => {
            COUNTERS.waits.fetch_add(1, Ordering::Relaxed);
            Ok(Some((pid, WaitStatus(status))))
        }
    }
}

/// Waits for `pid` with `flags` (`libc::WUNTRACED`, ...), retrying on EINTR
/// when `retry` is set; `Ok(None)` when interrupted and not retrying.
pub fn wait_pid(pid: Tid, flags: c_int, retry: bool) -> io::Result<Option<WaitStatus>> {
    loop {
        let mut status: c_int = 0;
        // SAFETY: waitpid writes one int to `status`, which lives on our stack.
        let r = unsafe { libc::waitpid(pid, &mut status, flags | WALL) };
        if r == -1 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                if retry {
                    continue;
                }
                return Ok(None);
            }
            return Err(err);
        }
        return Ok(Some(WaitStatus(status)));
    }
}

/// CLOCK_MONOTONIC in ns (through the vDSO: no system call).
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to `ts`, on our stack.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Sends `sig` to process `pid`.
pub fn kill(pid: Tid, sig: i32) -> io::Result<()> {
    // SAFETY: kill takes plain integers.
    check(unsafe { libc::kill(pid, sig) } as c_long).map(drop)
}

/// Whether two tasks share one file-descriptor table; `None` when the
/// kernel has no kcmp (CONFIG_KCMP off).
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
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut c_void,
        iov_len: buf.len(),
    };
    // SAFETY: process_vm_readv writes at most `buf.len()` bytes into `buf`;
    // the remote address is only dereferenced by the kernel, in the tracee.
    let n = unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) };
    if n as usize == buf.len() {
        Ok(())
    } else if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read"))
    }
}

/// readlink(2) into `buf`; returns the target's length.
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
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: stat writes one struct to `st`; `path` is NUL-terminated.
    check(unsafe { libc::stat(path.as_ptr(), &mut st) } as c_long)?;
    // mode_t is 16 bits on 32-bit Android, 32 elsewhere.
    #[allow(clippy::useless_conversion)]
    let mode = u32::from(st.st_mode);
    Ok(mode & 0o170000)
}

/// One classic-BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// `struct sock_fprog`.
#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const SockFilter,
}

/// Installs a seccomp filter on the calling thread (and its future
/// children). Tries without `no_new_privs` first (allowed with
/// CAP_SYS_ADMIN, and keeps set-uid programs working), then with it.
/// Async-signal-safe: called between fork and exec.
pub fn install_seccomp(filter: &[SockFilter]) -> Result<(), i32> {
    let prog = SockFprog {
        len: filter.len() as u16,
        filter: filter.as_ptr(),
    };
    let set = || {
        // SAFETY: the kernel copies `prog` and the instructions it points
        // to; both outlive the call.
        unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                SECCOMP_SET_MODE_FILTER,
                0 as c_long,
                &prog as *const SockFprog,
            )
        }
    };
    if set() == 0 {
        return Ok(());
    }
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) takes plain integers.
    if unsafe {
        libc::prctl(
            PR_SET_NO_NEW_PRIVS,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    } != 0
    {
        return Err(errno());
    }
    if set() == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// What the child must do between fork and exec.
#[derive(Debug)]
pub struct ChildSetup<'a> {
    /// The executable (already resolved through PATH).
    pub path: &'a CStr,
    /// NULL-terminated argv.
    pub argv: &'a [*const libc::c_char],
    /// The seccomp prefilter, if any.
    pub filter: Option<&'a [SockFilter]>,
    /// Write end of a close-on-exec pipe for reporting a failure (errno,
    /// preceded by a stage byte).
    pub error_fd: c_int,
}

/// Forks a child that stops itself with SIGSTOP and, once continued,
/// installs the filter and execs the command. Returns the child's pid.
///
/// The stop comes before the filter: once the filter is in, every syscall
/// it selects needs a tracer (without one it fails with ENOSYS), and the
/// tracer seizes the child only at this stop. So the filter may select any
/// syscall, `kill` and `getpid` included.
///
/// The child only makes async-signal-safe calls (the parent may have other
/// threads); everything it needs was allocated before the fork.
pub fn fork_stopped_exec(setup: &ChildSetup<'_>) -> io::Result<Tid> {
    // SAFETY: fork has no preconditions; the child below only makes
    // async-signal-safe system calls before exec or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid > 0 {
        return Ok(pid);
    }
    // Child.
    let fail = |stage: u8, err: i32| -> ! {
        let mut msg = [0u8; 5];
        msg[0] = stage;
        msg[1..].copy_from_slice(&err.to_ne_bytes());
        // SAFETY: write and _exit are async-signal-safe; `msg` is on our
        // stack.
        unsafe {
            libc::write(setup.error_fd, msg.as_ptr() as *const c_void, msg.len());
            libc::_exit(127)
        }
    };
    restore_ignored_signals();
    // SAFETY: getpid and kill are async-signal-safe. kill is a bare system
    // call (unlike raise, which would leave signal-mask calls to trace).
    unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
    if let Some(filter) = setup.filter {
        if let Err(e) = install_seccomp(filter) {
            fail(b's', e);
        }
    }
    // SAFETY: path and argv are NUL-terminated and outlive the call;
    // execv is async-signal-safe.
    unsafe { libc::execv(setup.path.as_ptr(), setup.argv.as_ptr()) };
    fail(b'e', errno())
}

/// A close-on-exec pipe: (read end, write end).
pub fn cloexec_pipe() -> io::Result<(c_int, c_int)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: pipe2 writes two ints to `fds`.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } as c_long)?;
    Ok((fds[0], fds[1]))
}

/// Closes `fd`.
pub fn close(fd: c_int) {
    // SAFETY: closing an fd we own.
    unsafe { libc::close(fd) };
}

/// Reads up to `buf.len()` bytes from `fd`.
pub fn read_fd(fd: c_int, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: read writes at most `buf.len()` bytes into `buf`.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut c_void, buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Installs `handler` for `sig` without SA_RESTART, so a blocking waitpid
/// returns EINTR when the signal arrives.
pub fn set_handler(sig: i32, handler: extern "C" fn(c_int)) -> io::Result<()> {
    // SAFETY: an all-zero sigaction is valid (empty mask, no flags).
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler as usize;
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `sa` is a valid sigaction; `old` receives the previous one.
    check(unsafe { libc::sigaction(sig, &sa, &mut old) } as c_long)?;
    if old.sa_sigaction == libc::SIG_IGN && (0..64).contains(&sig) {
        IGNORED_BEFORE_OUR_HANDLERS.fetch_or(1 << sig, Ordering::SeqCst);
    }
    Ok(())
}

/// Signals (bit N: signal N) that were ignored when the agent put its own
/// handler on them. exec resets handled signals to the default action but
/// keeps ignored ones ignored, so a child must re-ignore these itself to
/// start with the dispositions it would have had without the agent (a
/// program started in the background with SIGINT ignored must not become
/// killable by SIGINT because it is traced).
static IGNORED_BEFORE_OUR_HANDLERS: AtomicU64 = AtomicU64::new(0);

/// In a forked child: ignores again the signals that were ignored before
/// the agent handled them. Async-signal-safe (an atomic load and
/// sigaction calls).
fn restore_ignored_signals() {
    let ignored = IGNORED_BEFORE_OUR_HANDLERS.load(Ordering::SeqCst);
    for sig in 1..64 {
        if ignored & (1 << sig) != 0 {
            // SAFETY: an all-zero sigaction with SIG_IGN (0 flags, empty
            // mask) is valid; the old action is not needed.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = libc::SIG_IGN;
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    }
}

/// Arms the real-time interval timer (SIGALRM): first after `first_us`,
/// then every `interval_us` (0: once). `first_us == 0` disarms it.
/// Async-signal-safe (one system call).
pub fn set_timer(first_us: u64, interval_us: u64) {
    let tv = |us: u64| libc::timeval {
        tv_sec: (us / 1_000_000) as libc::time_t,
        tv_usec: (us % 1_000_000) as libc::suseconds_t,
    };
    let it = libc::itimerval {
        it_interval: tv(interval_us),
        it_value: tv(first_us),
    };
    // SAFETY: setitimer reads `it`; the old value is not needed.
    unsafe { libc::setitimer(ITIMER_REAL as _, &it, std::ptr::null_mut()) };
}

/// Dies of `sig` the way the traced program did: default action, no core
/// file of the agent. Returns only if the signal does not kill.
pub fn die_of_signal(sig: i32) {
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on our own process: a zero core limit, the
    // default action for `sig`, `sig` unblocked, then the signal itself.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
    }
}

/// The effective uid of the agent.
pub fn geteuid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::geteuid() }
}

/// Our own pid.
pub fn getpid() -> Tid {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::getpid() }
}

/// The kernel's release and machine (`uname -r`, `uname -m`).
pub fn uname() -> (String, String) {
    // SAFETY: an all-zero utsname is valid.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes one struct to `u`.
    if unsafe { libc::uname(&mut u) } != 0 {
        return (String::new(), String::new());
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| c.to_ne_bytes()[0])
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (field(&u.release), field(&u.machine))
}

/// The agent's own peak resident set size, KiB (children not included).
pub fn max_rss_kib() -> u64 {
    self_usage().map_or(0, |ru| ru.ru_maxrss as u64)
}

/// The agent's own CPU time so far (user + system), microseconds.
pub fn self_cpu_us() -> u64 {
    let us = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    self_usage().map_or(0, |ru| us(ru.ru_utime) + us(ru.ru_stime))
}

fn self_usage() -> Option<libc::rusage> {
    // SAFETY: an all-zero rusage is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one struct to `ru`.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return None;
    }
    Some(ru)
}
