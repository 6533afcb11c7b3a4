//! The ptrace backend: stops from `waitpid`, syscalls from
//! `PTRACE_GET_SYSCALL_INFO` or the registers, task facts from `/proc` and
//! `kcmp`, requests from the agent's signal handlers.
//!
//! Cost per traced syscall (full mode, `PTRACE_GET_SYSCALL_INFO` present):
//! two stops, each one wait + one `GET_SYSCALL_INFO` + one resume: four
//! ptrace requests. How it waits for the next stop (poll, then sleep) is
//! [`crate::wait`]'s business.

use std::io;

use agent_core::CpuTime;

use super::{Control, RawCall, Requests, Resume, StopBackend, SyscallRead};
use crate::arch::{arch_from_audit, Abi, Native};
use crate::signals;
use crate::stop::{self, Stop, Stopped};
use crate::sys::{self, RegsBuf, SyscallInfo, Tid};
use crate::wait::WaitPolicy;

/// The ptrace options every tracee gets. Never `PTRACE_O_EXITKILL`: if the
/// agent dies, its tracees must run on. `PTRACE_O_TRACEEXIT`: a task stops
/// once more as it exits, where its process's final CPU time is read.
pub fn ptrace_options(seccomp: bool) -> u32 {
    let mut o = sys::PTRACE_O_TRACESYSGOOD
        | sys::PTRACE_O_TRACEFORK
        | sys::PTRACE_O_TRACEVFORK
        | sys::PTRACE_O_TRACECLONE
        | sys::PTRACE_O_TRACEEXEC
        | sys::PTRACE_O_TRACEEXIT;
    if seccomp {
        o |= sys::PTRACE_O_TRACESECCOMP;
    }
    o
}

/// The ptrace backend.
#[derive(Debug)]
pub struct Ptrace {
    /// Options given to seized tasks ([`ptrace_options`]).
    options: u32,
    wait: WaitPolicy,
    /// `PTRACE_GET_SYSCALL_INFO` works (probed at the first syscall stop;
    /// `Some(false)` from the start with `EDGE_AGENT_FORCE_REGS=1`).
    syscall_info: Option<bool>,
    info: SyscallInfo,
    regs: RegsBuf,
    /// The unit of /proc's CPU times (`USER_HZ`), ns.
    ns_per_tick: u64,
}

impl Ptrace {
    /// A backend whose seized tasks stop at seccomp stops too when
    /// `seccomp` (a `--only` prefilter).
    pub fn new(seccomp: bool) -> Ptrace {
        Ptrace {
            options: ptrace_options(seccomp),
            wait: WaitPolicy::default(),
            // EDGE_AGENT_FORCE_REGS=1 skips the probe and decodes registers,
            // as on kernels before 5.3 (tests run both paths).
            syscall_info: std::env::var_os("EDGE_AGENT_FORCE_REGS")
                .filter(|v| !v.is_empty() && v != "0")
                .map(|_| false),
            info: SyscallInfo::new(),
            regs: RegsBuf::new(),
            ns_per_tick: sys::ns_per_clock_tick(),
        }
    }

    /// How the backend waits for stops (default: [`WaitPolicy::default`]).
    pub fn set_wait_policy(&mut self, wait: WaitPolicy) {
        self.wait = wait;
    }

    /// The syscall from `PTRACE_GET_SYSCALL_INFO`; `None` to fall back to
    /// the registers.
    fn read_info(&mut self, tid: Tid, seccomp: bool) -> Option<SyscallRead> {
        if self.syscall_info == Some(false) {
            return None;
        }
        match sys::syscall_info(tid, &mut self.info) {
            Ok(_) => {
                self.syscall_info = Some(true);
                // The call is decoded only at entries: an exit needs its
                // result alone (half of all stops).
                let call = |info: &SyscallInfo| RawCall {
                    arch: arch_from_audit(info.arch).unwrap_or(Native::NATIVE),
                    nr: info.nr() as u32,
                    args: info.args(),
                };
                match (seccomp, self.info.op) {
                    (true, sys::SYSCALL_INFO_SECCOMP) => Some(SyscallRead::Entry(call(&self.info))),
                    // A seccomp stop the info does not describe: ask the
                    // registers.
                    (true, _) => None,
                    (false, sys::SYSCALL_INFO_ENTRY) => Some(SyscallRead::Entry(call(&self.info))),
                    (false, sys::SYSCALL_INFO_EXIT) => Some(SyscallRead::Exit(self.info.rval())),
                    (false, _) => Some(SyscallRead::Unreadable),
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Some(SyscallRead::Gone),
            Err(_) => {
                // The first refusal at a syscall stop, or any at a seccomp
                // stop, means the kernel lacks the request (or this use of
                // it): the registers from now on. A later failure at a
                // syscall stop falls back for that stop only.
                if seccomp || self.syscall_info.is_none() {
                    self.syscall_info = Some(false);
                }
                None
            }
        }
    }

    /// The syscall from the registers.
    fn read_regs(&mut self, tid: Tid, seccomp: bool) -> SyscallRead {
        match sys::get_regs(tid, &mut self.regs) {
            Ok(len) => match self.regs.0.get(..len).and_then(Native::decode) {
                Some(r) => {
                    let call = RawCall {
                        arch: r.arch,
                        nr: r.nr,
                        args: r.args,
                    };
                    match (seccomp, r.at_entry) {
                        // A seccomp stop is always a call's entry.
                        (true, _) | (false, Some(true)) => SyscallRead::Entry(call),
                        (false, Some(false)) => SyscallRead::Exit(r.ret),
                        (false, None) => SyscallRead::EntryOrExit(call, r.ret),
                    }
                }
                None => SyscallRead::Unreadable,
            },
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => SyscallRead::Gone,
            Err(_) => SyscallRead::Unreadable,
        }
    }
}

impl Control for Ptrace {
    #[inline]
    fn resume(&mut self, tid: Tid, how: Resume, sig: i32) {
        // ESRCH: killed meanwhile; its exit is reported next.
        let _ = match how {
            Resume::Syscall => sys::resume_syscall(tid, sig),
            Resume::Cont => sys::resume_cont(tid, sig),
        };
    }

    fn detach(&mut self, tid: Tid, sig: i32) {
        let _ = sys::detach(tid, sig);
    }

    fn listen(&mut self, tid: Tid) {
        let _ = sys::listen(tid);
    }
}

impl StopBackend for Ptrace {
    fn next_stop(&mut self) -> io::Result<Option<Stop>> {
        Ok(self
            .wait
            .wait()?
            .and_then(|(tid, status)| stop::classify(tid, status)))
    }

    fn read_syscall(&mut self, stop: &Stopped, seccomp: bool) -> SyscallRead {
        let tid = stop.tid();
        match self.read_info(tid, seccomp) {
            Some(read) => read,
            None => self.read_regs(tid, seccomp),
        }
    }

    fn event_msg(&mut self, stop: &Stopped) -> Option<u64> {
        sys::event_msg(stop.tid()).ok()
    }

    fn interrupt(&mut self, tid: Tid) -> io::Result<()> {
        sys::interrupt(tid)
    }

    fn seize(&mut self, tid: Tid) -> io::Result<()> {
        sys::seize(tid, self.options)
    }

    fn task_ids(&mut self, tid: Tid) -> Option<(Tid, Tid)> {
        read_ids(tid)
    }

    fn share_files(&mut self, a: Tid, b: Tid) -> Option<bool> {
        sys::share_files(a, b)
    }

    fn read_u64(&mut self, tid: Tid, addr: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        sys::read_memory(tid, addr, &mut b).ok()?;
        Some(u64::from_ne_bytes(b))
    }

    fn exe_name(&mut self, tid: Tid) -> Option<String> {
        let exe = std::fs::read_link(format!("/proc/{tid}/exe")).ok()?;
        Some(exe.file_name()?.to_string_lossy().into_owned())
    }

    fn cpu_time(&mut self, tgid: Tid) -> Option<CpuTime> {
        read_cpu_time(tgid, self.ns_per_tick)
    }

    fn requests(&mut self) -> Requests {
        Requests {
            stop: signals::stop_requested().is_some(),
            tick: signals::take_tick(),
        }
    }

    fn quiet(&mut self) {
        signals::quiet();
    }
}

/// The CPU time process `tgid` has used (all its threads, the exited ones
/// included; not its children), from /proc/TGID/stat, in whole clock ticks
/// of `ns_per_tick`.
pub fn read_cpu_time(tgid: Tid, ns_per_tick: u64) -> Option<CpuTime> {
    sys::COUNTERS
        .proc_reads
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stat = crate::tracee_file::read_proc_text(tgid, "stat")?;
    parse_stat_cpu(&stat, ns_per_tick)
}

/// utime and stime (fields 14 and 15) of a /proc/PID/stat line, in ns.
/// The command name (field 2) may hold spaces and parentheses: the fields
/// are counted after its last `)`.
fn parse_stat_cpu(stat: &str, ns_per_tick: u64) -> Option<CpuTime> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // Fields from 3 (state) on: utime is the 12th of them, stime the 13th.
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let ticks = |f: Option<&str>| f?.parse::<u64>().ok();
    let user = ticks(fields.next())?;
    let system = ticks(fields.next())?;
    Some(CpuTime {
        user_ns: user.saturating_mul(ns_per_tick),
        system_ns: system.saturating_mul(ns_per_tick),
    })
}

/// The thread-group id and parent pid of `tid`, from /proc/TID/status.
pub fn read_ids(tid: Tid) -> Option<(Tid, Tid)> {
    sys::COUNTERS
        .proc_reads
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let status = crate::tracee_file::read_proc_text(tid, "status")?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((field("Tgid:")?, field("PPid:")?))
}
