//! The seam between the ptrace engine ([`crate::engine`]) and the
//! mechanism that stops tracees: the engine keeps the task tree, the
//! sessions and the statistics, and asks a [`StopBackend`] for the next
//! stop, for the syscall a stop is in, and to resume, detach or attach
//! tasks.
//!
//! Only backends that stop the program implement it: [`ptrace::Ptrace`],
//! and the scripted backend of the engine's unit tests (`engine/tests.rs`),
//! which tests the task tree (fork, exec, group-stops, detach) without real
//! processes. The eBPF backend never stops anything and is a variant of
//! [`crate::tracer::Tracer`] instead, the seam every backend shares.

pub mod ptrace;

use std::io;

use agent_core::{Arch, CpuTime};

pub use crate::stop::{Control, Resume};
use crate::stop::{Stop, Stopped};
use crate::sys::Tid;

/// A syscall as seen at its entry: the ABI it was made in, its raw number
/// in that ABI and its six arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawCall {
    /// The ABI of the calling thread.
    pub arch: Arch,
    /// The raw syscall number.
    pub nr: u32,
    /// The arguments.
    pub args: [u64; 6],
}

/// What a syscall-like stop holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyscallRead {
    /// A syscall's entry (or a seccomp stop).
    Entry(RawCall),
    /// A syscall's exit, with its result.
    Exit(i64),
    /// The registers hold both and do not say which stop this is (x86 at
    /// an exit whose result happens to be -ENOSYS, or an entry): the engine
    /// tells them apart by whether the thread is inside a call.
    EntryOrExit(RawCall, i64),
    /// Nothing could be read (the stop is resumed all the same).
    Unreadable,
    /// The tracee is gone (killed meanwhile): its exit report follows, and
    /// the stop must not be resumed.
    Gone,
}

/// What the agent's own signals asked of the loop since it last looked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    /// Stop tracing (SIGINT, SIGTERM, or a library caller's request).
    pub stop: bool,
    /// A timer tick (`watch` scans, `attach --for` deadlines).
    pub tick: bool,
}

/// The tracing mechanism, as the engine sees it. Three groups: stops
/// (`next_stop`, `read_syscall`, `event_msg`), control of tasks (the
/// [`Control`] of stopped ones through their guards, `interrupt`, `seize`), and facts about tasks that
/// the kernel keeps outside the stops (`task_ids`, `share_files`,
/// `read_u64`, `exe_name`, `cpu_time`), the clock, plus the agent's own `requests` and `quiet`.
pub trait StopBackend: Control {
    /// The next report of any tracee; `Ok(None)` when there is none yet (a
    /// signal interrupted the wait). `ECHILD`: no tracee is left.
    fn next_stop(&mut self) -> io::Result<Option<Stop>>;

    /// The syscall a syscall stop (`seccomp` false) or seccomp stop (true)
    /// is in: one path for both, `PTRACE_GET_SYSCALL_INFO` where the kernel
    /// has it, else the registers.
    fn read_syscall(&mut self, stop: &Stopped, seccomp: bool) -> SyscallRead;

    /// The message of an event stop: the new task of fork/vfork/clone, the
    /// former tid of exec. `None` when the tracee is gone.
    fn event_msg(&mut self, stop: &Stopped) -> Option<u64>;

    /// Makes a running tracee stop (it reports an `Interrupt` event, or a
    /// group-stop when it is in one). Fails for a task that is gone.
    fn interrupt(&mut self, tid: Tid) -> io::Result<()>;

    /// Starts tracing a running task with the engine's options.
    fn seize(&mut self, tid: Tid) -> io::Result<()>;

    /// The thread-group id and parent pid of `tid`.
    fn task_ids(&mut self, tid: Tid) -> Option<(Tid, Tid)>;

    /// Whether two tasks share one file-descriptor table.
    fn share_files(&mut self, a: Tid, b: Tid) -> Option<bool>;

    /// Eight bytes of `tid`'s memory at `addr` (`clone3`'s flags).
    fn read_u64(&mut self, tid: Tid, addr: u64) -> Option<u64>;

    /// The base name of `tid`'s executable.
    fn exe_name(&mut self, tid: Tid) -> Option<String>;

    /// The CPU time process `tgid` has used so far (all its threads), in
    /// whole clock ticks; `None` when it is gone. Read at window cuts and
    /// as a process's last thread exits, never per syscall.
    fn cpu_time(&mut self, tgid: Tid) -> Option<CpuTime>;

    /// The clock syscalls are stamped with (CLOCK_MONOTONIC, ns); the
    /// scripted backend of the engine's tests keeps its own.
    fn monotonic_ns(&mut self) -> u64 {
        crate::sys::monotonic_ns()
    }

    /// What the agent's own signals asked since the last call.
    fn requests(&mut self) -> Requests;

    /// Stops the ticks (the kick timer a stop request starts, once the
    /// loop has seen the request and needs no more kicks).
    fn quiet(&mut self);
}
