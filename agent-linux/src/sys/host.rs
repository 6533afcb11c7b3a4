//! Facts about the agent's own process and kernel, and the clock the
//! tracer stamps syscalls with. All through nix's safe wrappers.

use nix::sys::resource::{getrusage, Usage, UsageWho};
use nix::sys::time::TimeVal;
use nix::time::{clock_gettime, ClockId};

use super::Tid;

/// CLOCK_MONOTONIC in ns (through the vDSO: no system call). On the hot
/// path (twice per traced syscall): one clock_gettime, no allocation.
#[inline]
pub fn monotonic_ns() -> u64 {
    // CLOCK_MONOTONIC cannot fail; were it to, 0 as before.
    let Ok(ts) = clock_gettime(ClockId::CLOCK_MONOTONIC) else {
        return 0;
    };
    (ts.tv_sec() as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec() as u64)
}

/// CLOCK_BOOTTIME in ns: CLOCK_MONOTONIC plus the time suspended, the
/// clock of a process's start time in /proc/PID/stat.
pub fn boottime_ns() -> u64 {
    let Ok(ts) = clock_gettime(ClockId::CLOCK_BOOTTIME) else {
        return monotonic_ns();
    };
    (ts.tv_sec() as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec() as u64)
}

/// The effective uid of the agent.
pub fn geteuid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Our own pid.
pub fn getpid() -> Tid {
    nix::unistd::getpid().as_raw()
}

/// The kernel's release and machine (`uname -r`, `uname -m`); empty strings
/// if uname fails.
pub fn uname() -> (String, String) {
    match nix::sys::utsname::uname() {
        Ok(u) => (
            u.release().to_string_lossy().into_owned(),
            u.machine().to_string_lossy().into_owned(),
        ),
        Err(_) => (String::new(), String::new()),
    }
}

/// The agent's own peak resident set size, KiB (children not included).
pub fn max_rss_kib() -> u64 {
    self_usage().map_or(0, |ru| ru.max_rss() as u64)
}

/// The agent's own CPU time so far (user + system), microseconds.
pub fn self_cpu_us() -> u64 {
    let us = |tv: TimeVal| tv.tv_sec() as u64 * 1_000_000 + tv.tv_usec() as u64;
    self_usage().map_or(0, |ru| us(ru.user_time()) + us(ru.system_time()))
}

/// Nanoseconds per clock tick (`USER_HZ`, the unit of the CPU times in
/// /proc/PID/stat): 10 ms almost everywhere.
pub fn ns_per_clock_tick() -> u64 {
    use nix::unistd::{sysconf, SysconfVar};
    match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(hz)) if hz > 0 => 1_000_000_000 / hz as u64,
        _ => 10_000_000,
    }
}

fn self_usage() -> Option<Usage> {
    getrusage(UsageWho::RUSAGE_SELF).ok()
}

/// Makes the agent the subreaper of its descendants: a process of the run
/// whose parent ends is reparented to the agent (which then reaps it)
/// rather than to init, so the agent knows when the run's last process
/// ended.
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag; no pointers.
    let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
