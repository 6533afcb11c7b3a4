//! The thin system-call layer: every `unsafe` block of the crate lives here
//! (the workspace denies `unsafe_code` elsewhere), each wrapping one kernel
//! interface behind a safe function. One file per job:
//!
//! - `ptrace`: the raw ptrace requests the tracer makes, counted.
//! - `wait`: waitpid for tracees and children, counted.
//! - `spawn`: forking a stopped child that installs a seccomp filter and
//!   execs; the pipe it reports a failure on.
//! - `signal`: signals, handlers and the interval timer.
//! - `fs`: `/proc` links and file types, tracee memory, fd-table sharing.
//! - `host`: facts about the agent's own process and kernel, and the clock.
//! - `poll`: waiting for an fd to be readable (the eBPF ring buffer).
//! - `netlink`: netlink sockets to the kernel (the process-events
//!   connector).
//! - `sched`: the scheduling priority of the agent's own threads.
//! - `bpf`: a thread's own pidfd and a raw BPF map lookup (the eBPF
//!   backend's task-local storage).
//! - `mapped`: a file mapped read-only (the kernel's BTF).
//!
//! Calls go through `nix` where it has a safe wrapper that fits; each file
//! says why the rest stay on raw `libc`. The callers use the flat paths
//! re-exported here (`sys::seize`, `sys::kill`, ...).

use std::io;
use std::os::raw::c_long;
use std::sync::atomic::AtomicU64;

mod bpf;
mod fs;
mod host;
mod mapped;
mod netlink;
mod poll;
mod ptrace;
mod run_table;
mod sched;
mod signal;
mod spawn;
mod wait;

pub use bpf::{bpf_map_lookup, thread_pidfd};
pub use fs::{file_type, read_memory, readlink, share_files};
pub use host::{
    become_subreaper, boottime_ns, geteuid, getpid, max_rss_kib, monotonic_ns, ns_per_clock_tick,
    self_cpu_us, uname,
};
pub use mapped::{MappedFile, KERNEL_BTF};
pub use netlink::{netlink_send, netlink_socket, recv_datagram, set_recv_buffer, set_recv_timeout};
pub use poll::poll_readable;
pub use ptrace::{
    detach, event_msg, get_regs, interrupt, listen, resume_cont, resume_syscall, seize,
    syscall_info, RegsBuf, SyscallInfo, PTRACE_EVENT_CLONE, PTRACE_EVENT_EXEC, PTRACE_EVENT_EXIT,
    PTRACE_EVENT_FORK, PTRACE_EVENT_SECCOMP, PTRACE_EVENT_STOP, PTRACE_EVENT_VFORK,
    PTRACE_O_TRACECLONE, PTRACE_O_TRACEEXEC, PTRACE_O_TRACEEXIT, PTRACE_O_TRACEFORK,
    PTRACE_O_TRACESECCOMP, PTRACE_O_TRACESYSGOOD, PTRACE_O_TRACEVFORK, SYSCALL_INFO_ENTRY,
    SYSCALL_INFO_EXIT, SYSCALL_INFO_SECCOMP,
};
pub use run_table::RunTableFile;
pub use sched::become_realtime;
pub use signal::{
    alarm_thread, current_thread, die_of_signal, kill, pidfd_alive, pidfd_open, set_handler,
    set_timer, ThreadHandle,
};
pub use spawn::{
    cloexec_pipe, close, fork_single_threaded, fork_stopped_exec, install_seccomp, read_fd,
    ChildSetup, SockFilter,
};
pub use wait::{try_wait_any, wait_any, wait_pid, WaitStatus};

/// Thread id as the kernel numbers it.
pub type Tid = i32;

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

/// A raw call's result: `-1` becomes the thread's errno.
fn check(ret: c_long) -> io::Result<c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The thread's errno (async-signal-safe: reads a thread-local int).
fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[cfg(test)]
mod tests;
