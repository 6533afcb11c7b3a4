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

/// How much of one thread's `/proc/PID/task/TID/children` is read: room
/// for some 8 000 children.
const CHILDREN_BUDGET: usize = 64 << 10;

/// At most this many processes are handed out by one [`walk_children`]
/// (a fork bomb under the root must not hold the agent).
const MAX_WALKED: usize = 4096;

/// Parses a `children` file: pids separated by spaces. Anything else is
/// skipped (the text is the kernel's, but read as untrusted).
pub fn parse_children(text: &[u8]) -> Vec<Tid> {
    text.split(|b| b.is_ascii_whitespace())
        .filter_map(|w| std::str::from_utf8(w).ok()?.parse::<Tid>().ok())
        .filter(|&pid| pid > 0)
        .collect()
}

/// The children of process `pid` now (those of every thread of it, from
/// `/proc/PID/task/TID/children`); empty when it is gone or the kernel
/// lacks the files (`CONFIG_PROC_CHILDREN`).
pub fn read_children(pid: Tid) -> Vec<Tid> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let path = task.path().join("children");
        if let Ok(text) = crate::tracee_file::read(&path, CHILDREN_BUDGET) {
            out.extend(parse_children(&text));
        }
    }
    out
}

/// Hands `take` the children `root` has now, then the children of each
/// child it took, breadth first; a child not taken (`take` false) is not
/// looked into. For a tracer that starts on a running process: the
/// children it forked before are not the tracer's, the later ones are
/// (the fork is traced); a child is read only after its parent was taken,
/// so none falls between. At most [`MAX_WALKED`] children are handed out.
pub fn walk_children(root: Tid, mut take: impl FnMut(Tid) -> bool) {
    let mut parents = std::collections::VecDeque::from([root]);
    let mut handed = 0;
    while let Some(parent) = parents.pop_front() {
        for child in read_children(parent) {
            if handed == MAX_WALKED {
                return;
            }
            handed += 1;
            if take(child) {
                parents.push_back(child);
            }
        }
    }
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
    fn children_files_parse_and_junk_is_skipped() {
        assert_eq!(parse_children(b"12 345 \n"), vec![12, 345]);
        assert_eq!(parse_children(b""), Vec::<Tid>::new());
        assert_eq!(parse_children(b"7 x -3 0 \xff 9"), vec![7, 9]);
    }

    /// A child and a grandchild forked before the walk are both handed
    /// out, the child first; one not taken is not looked into.
    #[test]
    fn the_walk_reaches_grandchildren_through_the_children_taken() {
        let me = sys::getpid();
        if !std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists() {
            eprintln!("skipped: no CONFIG_PROC_CHILDREN");
            return;
        }
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sh -c 'sleep 30; :' & wait"])
            .spawn()
            .unwrap();
        let root = sh.id() as Tid;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut all = Vec::new();
        while std::time::Instant::now() < deadline {
            all.clear();
            walk_children(root, |c| {
                all.push(c);
                true
            });
            if all.len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let mut none_taken = Vec::new();
        walk_children(root, |c| {
            none_taken.push(c);
            false
        });
        let _ = sh.kill();
        let _ = sh.wait();
        assert_eq!(all.len(), 2, "the inner sh and its sleep: {all:?}");
        assert_eq!(read_stat(all[1]).map(|s| s.ppid), Some(all[0]));
        assert_eq!(
            none_taken,
            all[..1],
            "the grandchild is reached only through the child"
        );
        for pid in all {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
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
