//! What light monitoring reads of a process, and only from `/proc`: its
//! parent, state, CPU time, start time and exit status (`/proc/PID/stat`)
//! and the bytes it read and wrote (`/proc/PID/io`). No ptrace, no stop.
//! The parsers take the files' text, which is untrusted: a malformed file
//! is `None`, never a panic.

use agent_core::{CpuTime, IoBytes};

use crate::sys::{self, Tid};

/// The fields of `/proc/PID/stat` light monitoring uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The parent's pid.
    pub ppid: Tid,
    /// Ended, not reaped yet (`Z`) or being reaped (`X`): `exit_status` is
    /// its final status and the CPU figures are final.
    pub zombie: bool,
    /// User and system CPU time of all its threads, clock ticks.
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// When it started, clock ticks since boot.
    pub start_ticks: u64,
    /// Its wait status (field 52, Linux 3.5+); meaningful only for a
    /// zombie. `None` on older kernels.
    pub exit_status: Option<u32>,
}

impl Stat {
    /// Its CPU time in ns (`ns_per_tick`: [`sys::ns_per_clock_tick`]).
    pub fn cpu(&self, ns_per_tick: u64) -> CpuTime {
        CpuTime {
            user_ns: self.utime_ticks.saturating_mul(ns_per_tick),
            system_ns: self.stime_ticks.saturating_mul(ns_per_tick),
        }
    }
}

/// Parses `/proc/PID/stat`. The command name (field 2) is in parentheses
/// and may itself hold `)` and spaces: the fields are counted from the
/// last `)`.
pub fn parse_stat(text: &[u8]) -> Option<Stat> {
    let after = text.iter().rposition(|&b| b == b')')?;
    // Field n of stat(5) is index n - 3 here (field 3, the state, first).
    // One plain pass over the bytes into a fixed array, no allocation,
    // no UTF-8 decoding, no iterator adapters: `watch` reads this file
    // between a program's exec and its seize, where every microsecond is
    // calls missed (a `split_whitespace` into a Vec took 18 us in a debug
    // build, this 6).
    let rest = text.get(after + 1..)?;
    let mut fields: [&[u8]; 50] = [&[]; 50];
    let (mut count, mut i) = (0, 0);
    while i < rest.len() && count < fields.len() {
        if rest[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        while i < rest.len() && !rest[i].is_ascii_whitespace() {
            i += 1;
        }
        fields[count] = &rest[start..i];
        count += 1;
    }
    let field = |n: usize| fields[..count].get(n - 3).copied();
    let number = |n: usize| -> Option<u64> { std::str::from_utf8(field(n)?).ok()?.parse().ok() };
    Some(Stat {
        ppid: std::str::from_utf8(field(4)?).ok()?.parse().ok()?,
        zombie: matches!(field(3)?, b"Z" | b"X"),
        utime_ticks: number(14)?,
        stime_ticks: number(15)?,
        start_ticks: number(22)?,
        exit_status: number(52).and_then(|v| u32::try_from(v).ok()),
    })
}

/// Parses `/proc/PID/io`: `rchar` and `wchar` (bytes passed through read-
/// and write-family calls). A file without both is `None`.
pub fn parse_io(text: &[u8]) -> Option<IoBytes> {
    let text = std::str::from_utf8(text).ok()?;
    let mut read = None;
    let mut written = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim().parse::<u64>().ok();
        match key.trim() {
            "rchar" => read = value,
            "wchar" => written = value,
            _ => {}
        }
    }
    Some(IoBytes {
        read: read?,
        written: written?,
    })
}

/// Reads and parses `/proc/PID/stat`; `None` when the process is gone (or
/// the file is not what the kernel writes).
pub fn read_stat(pid: Tid) -> Option<Stat> {
    parse_stat(&crate::tracee_file::read_proc(pid, "stat")?)
}

/// Reads and parses `/proc/PID/io`; `None` when the process is gone or
/// the agent may not read it (another user's process, without root).
pub fn read_io(pid: Tid) -> Option<IoBytes> {
    parse_io(&crate::tracee_file::read_proc(pid, "io")?)
}

/// The base name of the program `pid` runs (`/proc/PID/exe`); `None` when
/// gone, a zombie, or not readable.
pub fn read_program(pid: Tid) -> Option<String> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    Some(exe.file_name()?.to_string_lossy().into_owned())
}

/// Converts a start time in clock ticks since boot to ns since the Unix
/// epoch, through the boot clock (`CLOCK_BOOTTIME`, which is what the
/// kernel counts start times on, suspend included) read now.
pub fn start_unix_ns(start_ticks: u64, ns_per_tick: u64, now_unix_ns: u64) -> u64 {
    let boot_now = boottime_ns();
    let since_boot = start_ticks.saturating_mul(ns_per_tick);
    now_unix_ns.saturating_sub(boot_now.saturating_sub(since_boot))
}

/// `CLOCK_BOOTTIME` in ns (0 if the clock cannot be read).
fn boottime_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(|t| (t.tv_sec() as u64).saturating_mul(1_000_000_000) + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// The clock tick the stat figures count in, ns.
pub fn ns_per_tick() -> u64 {
    sys::ns_per_clock_tick()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real stat line (a zombie `sh` exited with status 3), with a
    /// command name holding `) (` to check the fields count from the last
    /// parenthesis.
    const ZOMBIE: &[u8] = b"4242 (a) (b c) Z 4200 4242 4200 0 -1 4227084 89 0 0 0 7 3 0 0 20 0 1 0 123456 0 0 18446744073709551615 0 0 0 0 0 0 0 0 65536 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 768\n";

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let s = parse_stat(ZOMBIE).unwrap();
        assert_eq!(s.ppid, 4200);
        assert!(s.zombie);
        assert_eq!((s.utime_ticks, s.stime_ticks), (7, 3));
        assert_eq!(s.start_ticks, 123456);
        assert_eq!(s.exit_status, Some(768), "exit(3) as wait reports it");
        assert_eq!(s.cpu(10_000_000).user_ns, 70_000_000);
    }

    #[test]
    fn our_own_stat_and_io_parse() {
        let me = sys::getpid();
        let s = read_stat(me).expect("our stat");
        assert!(!s.zombie);
        assert_eq!(s.ppid as u32, std::os::unix::process::parent_id());
        assert!(read_io(me).is_some_and(|io| io.read > 0), "we read files");
    }

    #[test]
    fn malformed_files_are_none() {
        for bad in [
            &b""[..],
            b"1 (x",
            b"1 (x) R",
            b"1 (x) R notanumber 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5",
            b"\xff\xfe",
        ] {
            assert_eq!(parse_stat(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_io(b"rchar: 5\n"), None, "no wchar");
        assert_eq!(parse_io(b"rchar: x\nwchar: 1\n"), None);
        assert_eq!(
            parse_io(b"rchar: 5\nwchar: 7\nsyscr: 1\n"),
            Some(IoBytes {
                read: 5,
                written: 7
            })
        );
    }

    #[test]
    fn start_time_converts_to_wall_clock() {
        let me = read_stat(sys::getpid()).unwrap();
        let now = crate::engine::unix_now_ns();
        let start = start_unix_ns(me.start_ticks, ns_per_tick(), now);
        assert!(
            start <= now && now - start < 3600 * 1_000_000_000,
            "{start} {now}"
        );
    }
}
