//! What one observed call costs agent-inproc's recorder: the path every wrapper
//! takes (the collector's lock free), and the path of a call made while
//! another recording holds it (into a ring, folded in at the next).

use agent_core::{Arch, FdKind, SyscallEvent};
use agent_inproc::Recorder;
use criterion::{criterion_group, criterion_main, Criterion};

fn call(i: u64) -> SyscallEvent {
    SyscallEvent {
        tid: 10,
        arch: Arch::X86_64,
        nr: (i % 2) as u32,
        args: [3, 0, 64, 0, 0, 0],
        ret: 64,
        entry_ns: i * 1000,
        exit_ns: i * 1000 + 150,
        fd_kind: FdKind::File,
        peer: None,
    }
}

fn record(c: &mut Criterion) {
    let r = Recorder::new(0);
    let mut i = 0u64;
    c.bench_function("record (lock free)", |b| {
        b.iter(|| {
            i += 1;
            r.record(1, &call(i));
        })
    });
}

criterion_group!(benches, record);
criterion_main!(benches);
