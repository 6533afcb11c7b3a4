//! Summaries made by agent-core's Collector from synthetic events.

#![allow(dead_code)]

use agent_core::{
    Arch, Collector, Exit, Facts, FdKind, Overflow, RunId, RunRecord, Summary, SyscallEvent,
    SyscallId,
};

/// Builds one run's events and turns them into a summary.
pub struct RunBuilder {
    collector: Collector,
    now: u64,
    events: u64,
}

impl Default for RunBuilder {
    fn default() -> Self {
        RunBuilder {
            collector: Collector::new(0),
            now: 0,
            events: 0,
        }
    }
}

impl RunBuilder {
    /// Records one call of `name` that lasts `dur_ns`, after a `gap_ns`
    /// pause, returning `ret`.
    pub fn call(
        &mut self,
        name: &str,
        fd_kind: FdKind,
        args: [u64; 6],
        ret: i64,
        dur_ns: u64,
        gap_ns: u64,
    ) -> &mut Self {
        let id = SyscallId::from_name(name).unwrap_or_else(|| panic!("unknown syscall {name}"));
        let nr = id
            .to_raw(Arch::X86_64)
            .unwrap_or_else(|| panic!("{name} has no x86_64 number"));
        self.now += gap_ns;
        let ev = SyscallEvent {
            tid: 100,
            arch: Arch::X86_64,
            nr,
            args,
            ret,
            entry_ns: self.now,
            exit_ns: self.now + dur_ns,
            fd_kind,
            peer: None,
        };
        self.now += dur_ns;
        self.collector.record(&ev);
        self.events += 1;
        self
    }

    /// The summary, with `facts` and a duration of `duration_ns`.
    pub fn finish(&self, seed: u8, duration_ns: u64, facts: Facts) -> Summary {
        let mut id = [0u8; 16];
        id[0] = seed;
        id[15] = 0xd1;
        let run = RunRecord {
            start_unix_ns: 1_763_700_000_000_000_000 + seed as u64,
            duration_ns,
            exit: Exit::Code(0),
            arch: Arch::X86_64,
            processes: 1,
            threads: 1,
            events: 0,
            overflow: Overflow::default(),
            window: 0,
            spool_dropped: 0,
        };
        self.collector.summarize(RunId(id), run, facts)
    }
}

/// A download like wget's: `reads` rounds of pselect6, a socket read of
/// `chunk` bytes (asked for 8192) and a file write of the same, plus a few
/// file opens; each socket read lasts `read_ns`.
pub fn download(seed: u8, total_bytes: u64, chunk: u64, read_ns: u64, facts: Facts) -> Summary {
    let mut b = RunBuilder::default();
    b.call("openat", FdKind::None, [0; 6], 3, 2_000, 1_000);
    b.call("read", FdKind::File, [3, 0, 4096, 0, 0, 0], 700, 1_500, 500);
    b.call("close", FdKind::File, [3, 0, 0, 0, 0, 0], 0, 500, 500);
    let reads = total_bytes.div_ceil(chunk);
    for _ in 0..reads {
        // Gaps differ a little from run to run, as on real machines.
        let gap = 200 + seed as u64 * 10;
        b.call(
            "pselect6",
            FdKind::None,
            [5, 0, 0, 0, 0, 0],
            1,
            1_000,
            gap + 100,
        );
        b.call(
            "read",
            FdKind::Socket,
            [4, 0, 8192, 0, 0, 0],
            chunk as i64,
            read_ns,
            gap,
        );
        b.call(
            "write",
            FdKind::File,
            [5, 0, chunk, 0, 0, 0],
            chunk as i64,
            800,
            gap,
        );
    }
    let duration = b.now + 1_000_000;
    b.finish(seed, duration, facts)
}

/// Facts with a program name and free facts.
pub fn facts(program: &str, extra: &[(&str, &str)]) -> Facts {
    let mut f = Facts::new();
    f.program = agent_core::facts::truncated(program);
    f.os_name = agent_core::facts::truncated("Debian GNU/Linux");
    for (k, v) in extra {
        f.add(k, v).expect("valid fact");
    }
    f
}
