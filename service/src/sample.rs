//! Realistic summaries for the benchmark and the tests, made the way a
//! device makes them: syscall events folded by agent-core's `Collector`.

use agent_core::facts::truncated;
use agent_core::{
    Arch, Collector, Exit, Facts, FdKind, RunRecord, Summary, SyscallEvent, SyscallId,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// (syscall, fd kind, relative weight, typical duration ns, errno it fails with)
const MIX: &[(&str, FdKind, u32, u64, u16)] = &[
    ("read", FdKind::File, 30, 4_000, 0),
    ("read", FdKind::Tcp, 25, 40_000, 11),
    ("write", FdKind::Tcp, 15, 20_000, 11),
    ("write", FdKind::Pipe, 4, 3_000, 0),
    ("openat", FdKind::None, 6, 9_000, 2),
    ("close", FdKind::File, 6, 1_500, 0),
    ("fstat", FdKind::File, 5, 1_000, 0),
    ("mmap", FdKind::None, 4, 5_000, 0),
    ("munmap", FdKind::None, 2, 4_000, 0),
    ("epoll_wait", FdKind::Other, 8, 300_000, 4),
    ("futex", FdKind::None, 6, 80_000, 110),
    ("poll", FdKind::None, 3, 150_000, 0),
    ("connect", FdKind::Tcp, 1, 250_000, 111),
    ("sendto", FdKind::Udp, 3, 25_000, 0),
    ("recvfrom", FdKind::Udp, 3, 30_000, 11),
    ("getrandom", FdKind::None, 1, 2_000, 0),
    ("clock_gettime", FdKind::None, 5, 300, 0),
    ("brk", FdKind::None, 2, 2_500, 0),
    ("lseek", FdKind::File, 2, 800, 0),
    ("ioctl", FdKind::Other, 1, 3_000, 25),
];

const PROGRAMS: &[&str] = &["curl", "wget", "git", "apt-get", "ssh"];

/// A summary of a simulated run of `events` syscalls, deterministic for
/// `seed` (the id too). `group` adds the free fact `group`.
pub fn summary(seed: u64, events: u32, group: Option<&str>) -> Summary {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut collector: Box<Collector> = Box::new(Collector::new(0));
    let total_weight: u32 = MIX.iter().map(|m| m.2).sum();
    // Slow runs wait longer on the network: the difference diagnose finds.
    let slow = rng.random_bool(0.3);
    let mut now: u64 = 1_000;
    for _ in 0..events {
        let mut pick = rng.random_range(0..total_weight);
        let &(name, fd_kind, _, typical, errno) = MIX
            .iter()
            .find(|m| {
                if pick < m.2 {
                    true
                } else {
                    pick -= m.2;
                    false
                }
            })
            .unwrap_or(&MIX[0]);
        let id = SyscallId::from_name(name).unwrap_or(SyscallId::UNKNOWN);
        let nr = id.to_raw(Arch::X86_64).unwrap_or(0);
        let scale = if slow && fd_kind.is_socket() { 4 } else { 1 };
        let duration = rng.random_range(typical / 4..=typical * 2) * scale;
        let failed = errno != 0 && rng.random_bool(0.08);
        let ret = if failed {
            -i64::from(errno)
        } else {
            rng.random_range(0..16_384)
        };
        let entry_ns = now + rng.random_range(500..20_000);
        let exit_ns = entry_ns + duration;
        now = exit_ns;
        collector.record(&SyscallEvent {
            tid: 4242 + rng.random_range(0..4),
            arch: Arch::X86_64,
            nr,
            args: [3, 0x7fff_0000, rng.random_range(512..65_536), 0, 0, 0],
            ret,
            entry_ns,
            exit_ns,
            fd_kind,
            peer: None,
        });
    }
    let mut id = [0u8; 16];
    rng.fill(&mut id);
    let mut facts = Facts::new();
    facts.os_name = truncated("Debian GNU/Linux");
    facts.os_version = truncated("12");
    facts.kernel = truncated("6.1.0-28-amd64");
    facts.device_model = truncated("ThinkPad X1 Carbon Gen 9");
    facts.program = truncated(PROGRAMS[rng.random_range(0..PROGRAMS.len())]);
    let _ = facts.add("net.adapter", if slow { "nat" } else { "bridged" });
    if let Some(g) = group {
        let _ = facts.add(crate::ingest::GROUP_FACT, g);
    }
    let run = RunRecord {
        threads: 4,
        ..RunRecord::new(
            1_795_000_000_000_000_000 + seed * 1_000_000,
            now,
            Exit::Code(0),
            Arch::X86_64,
        )
    };
    collector.summarize(id, run, facts)
}

/// `summary` encoded, as a device would send it.
///
/// # Panics
/// Never in practice: encoding into a full-size buffer folds entries until
/// the summary fits.
pub fn encoded(seed: u64, events: u32, group: Option<&str>) -> Vec<u8> {
    let mut s = summary(seed, events, group);
    let mut buf = [0u8; agent_core::MAX_ENCODED_LEN];
    match s.encode(&mut buf) {
        Ok(bytes) => bytes.to_vec(),
        // Cannot happen with a full-size buffer: encode folds until it fits.
        Err(e) => panic!("sample summary does not encode: {e}"),
    }
}

/// Whole runs of the demo's case study (`edge-demo`) without the
/// testbed: `wget` fetching one file, the bad runs with a receive buffer
/// far too small, so they make ten times the `read` calls on the socket,
/// each returning a tenth of the bytes, and take longer. Deterministic for
/// `seed`; `device` is the summary's device id, the run starts at
/// `start_unix_ns`.
pub fn demo_run(seed: u64, bad: bool, device: [u8; 16], start_unix_ns: u64) -> Summary {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut collector: Box<Collector> = Box::new(Collector::new(0));
    let mut now: u64 = 1_000;
    let mut call =
        |collector: &mut Collector, rng: &mut StdRng, name: &str, fd_kind, ret, dur: u64| {
            let id = SyscallId::from_name(name).unwrap_or(SyscallId::UNKNOWN);
            let entry_ns = now + rng.random_range(2_000..6_000);
            let exit_ns = entry_ns + rng.random_range(dur / 2..=dur * 3 / 2);
            now = exit_ns;
            collector.record(&SyscallEvent {
                tid: 777,
                arch: Arch::X86_64,
                nr: id.to_raw(Arch::X86_64).unwrap_or(0),
                args: [3, 0x7fff_0000, 65_536, 0, 0, 0],
                ret,
                entry_ns,
                exit_ns,
                fd_kind,
                peer: None,
            });
        };
    for _ in 0..12 {
        call(&mut collector, &mut rng, "openat", FdKind::None, 3, 8_000);
        call(&mut collector, &mut rng, "fstat", FdKind::File, 0, 1_000);
        call(&mut collector, &mut rng, "close", FdKind::File, 0, 1_500);
    }
    call(&mut collector, &mut rng, "socket", FdKind::None, 4, 5_000);
    call(&mut collector, &mut rng, "connect", FdKind::Tcp, 0, 120_000);
    call(&mut collector, &mut rng, "write", FdKind::Tcp, 140, 20_000);
    // 4 MiB: 64 KiB a read normally, a tenth of it with the tiny buffer.
    let (reads, bytes, wait) = if bad {
        (640, 6_553, 400_000)
    } else {
        (64, 65_536, 150_000)
    };
    for _ in 0..reads {
        call(&mut collector, &mut rng, "read", FdKind::Tcp, bytes, wait);
        call(
            &mut collector,
            &mut rng,
            "write",
            FdKind::File,
            bytes,
            6_000,
        );
    }
    call(&mut collector, &mut rng, "close", FdKind::Tcp, 0, 3_000);
    let mut id = [0u8; 16];
    rng.fill(&mut id);
    let mut facts = Facts::new();
    facts.os_name = truncated("Debian GNU/Linux");
    facts.os_version = truncated("12");
    facts.kernel = truncated("6.1.0-28-amd64");
    facts.program = truncated("wget");
    let _ = facts.add("client", &format!("client{}", device[0]));
    let run = RunRecord::new(start_unix_ns, now, Exit::Code(0), Arch::X86_64);
    let mut summary = collector.summarize(id, run, facts);
    summary.origin.device = device;
    summary
}

/// A run of `program` on `device` cut into `windows` one-second windows
/// (indices 1..=windows, one stream), its load rising then falling.
pub fn windowed_run(
    seed: u64,
    program: &str,
    device: [u8; 16],
    start_unix_ns: u64,
    windows: u32,
) -> Vec<Summary> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut stream = [0u8; 16];
    rng.fill(&mut stream);
    (1..=windows)
        .map(|w| {
            let mut collector: Box<Collector> = Box::new(Collector::new(0));
            let load = 20 + 10 * u64::from(w.min(windows + 1 - w));
            let mut now = 1_000;
            for i in 0..load {
                let (name, fd_kind) = if i % 3 == 0 {
                    ("write", FdKind::Pipe)
                } else {
                    ("read", FdKind::File)
                };
                let id = SyscallId::from_name(name).unwrap_or(SyscallId::UNKNOWN);
                let entry_ns = now + rng.random_range(1_000..50_000);
                let exit_ns = entry_ns + rng.random_range(2_000..20_000);
                now = exit_ns;
                collector.record(&SyscallEvent {
                    tid: 99,
                    arch: Arch::X86_64,
                    nr: id.to_raw(Arch::X86_64).unwrap_or(0),
                    args: [3, 0, 4096, 0, 0, 0],
                    ret: 4096,
                    entry_ns,
                    exit_ns,
                    fd_kind,
                    peer: None,
                });
            }
            let mut id = [0u8; 16];
            rng.fill(&mut id);
            let mut facts = Facts::new();
            facts.program = truncated(program);
            let run = RunRecord {
                window: w,
                ..RunRecord::new(
                    start_unix_ns + u64::from(w - 1) * 1_000_000_000,
                    1_000_000_000,
                    Exit::Running,
                    Arch::X86_64,
                )
            };
            let mut s = collector.summarize(id, run, facts);
            s.origin.device = device;
            s.origin.stream = stream;
            s.origin.window_ns = 1_000_000_000;
            s.cpu = Some(agent_core::CpuTime {
                user_ns: load * 200_000,
                system_ns: load * 100_000,
            });
            s
        })
        .collect()
}

/// `summary` encoded, as a device would send it.
///
/// # Panics
/// Never in practice: encoding into a full-size buffer folds entries until
/// the summary fits.
pub fn encode(summary: &Summary) -> Vec<u8> {
    let mut s = summary.clone();
    let mut buf = [0u8; agent_core::MAX_ENCODED_LEN];
    match s.encode(&mut buf) {
        Ok(bytes) => bytes.to_vec(),
        Err(e) => panic!("sample summary does not encode: {e}"),
    }
}
