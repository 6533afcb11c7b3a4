//! Arbitrary event streams into the collector: the summary always encodes
//! within the cap and decodes back, and no event is lost.
#![no_main]

use agent_core::{
    Arch, Collector, Exit, Facts, FdKind, RunRecord, Summary, SyscallEvent, MAX_ENCODED_LEN,
};
use libfuzzer_sys::fuzz_target;

fn u64_at(d: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    for (j, x) in b.iter_mut().enumerate() {
        *x = d.get(i + j).copied().unwrap_or(0);
    }
    u64::from_le_bytes(b)
}

fuzz_target!(|data: &[u8]| {
    let mut c: Box<Collector<8, 8, 4, 8>> = Box::new(Collector::new(0));
    let mut n = 0u64;
    for chunk in data.chunks(24) {
        let arch = Arch::ALL[chunk[0] as usize % 4];
        let entry = u64_at(chunk, 8);
        c.record(&SyscallEvent {
            tid: chunk.get(1).copied().unwrap_or(0) as u32 % 6,
            arch,
            nr: u64_at(chunk, 2) as u32 % 1_000_000,
            args: [u64_at(chunk, 4); 6],
            ret: u64_at(chunk, 16) as i64,
            entry_ns: entry,
            exit_ns: entry.wrapping_add(u64_at(chunk, 12)),
            fd_kind: FdKind::from_u8(chunk.get(3).copied().unwrap_or(0) % FdKind::COUNT as u8).unwrap(),
        });
        n += 1;
    }
    let run = RunRecord::new(0, 0, Exit::Running, Arch::X86_64);
    let mut s = c.summarize([0; 16], run, Facts::new());
    let mut buf = [0u8; MAX_ENCODED_LEN];
    let bytes = s.encode(&mut buf).expect("fits");
    let d = Summary::decode(bytes).expect("own output decodes");
    assert_eq!(d.syscalls.iter().map(|x| x.count).sum::<u64>(), n);
});
