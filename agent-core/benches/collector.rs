//! Throughput of the per-event update path and of summarize + encode.
//!
//! Run: `cargo bench -p agent-core --bench collector`. The events/s figure is
//! criterion's "thrpt" line (elements/s); the state size is printed first.

use std::hint::black_box;

use agent_core::*;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const N: usize = 100_000;

/// A `dd`-like stream: read/write alternating on one thread, as the tracer
/// would deliver it.
fn dd_stream() -> Vec<SyscallEvent> {
    (0..N as u64)
        .map(|i| SyscallEvent {
            tid: 42,
            arch: Arch::X86_64,
            nr: (i % 2) as u32,
            args: [0, 0, 64, 0, 0, 0],
            ret: 64,
            entry_ns: i * 1_000,
            exit_ns: i * 1_000 + 300 + (i % 7) * 50,
            fd_kind: if i % 2 == 0 {
                FdKind::File
            } else {
                FdKind::Pipe
            },
            peer: None,
        })
        .collect()
}

/// A server-like stream: 8 threads interleaved, 40 syscalls, 5% failures
/// with a few errnos, durations spread over the histogram.
fn mixed_stream() -> Vec<SyscallEvent> {
    let nrs = [
        0u32, 1, 3, 7, 9, 44, 45, 202, 232, 257, 262, 281, 288, 290, 291, 17, 18, 19, 20, 39,
    ];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..N as u64)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let nr = nrs[(x % nrs.len() as u64) as usize];
            SyscallEvent {
                tid: 100 + (x >> 20) as u32 % 8,
                arch: Arch::X86_64,
                nr,
                args: [3, 0, x % 65_536, 0, 0, 0],
                ret: if x % 20 == 0 {
                    -((x >> 8) as i64 % 4 + 11)
                } else {
                    (x % 4096) as i64
                },
                entry_ns: i * 2_000,
                exit_ns: i * 2_000 + (x >> 30) % 1_000_000,
                fd_kind: FdKind::from_u8((x >> 40) as u8 % FdKind::COUNT as u8).unwrap(),
                peer: None,
            }
        })
        .collect()
}

fn run_record() -> RunRecord {
    RunRecord {
        threads: 8,
        ..RunRecord::new(1, 1, Exit::Code(0), Arch::X86_64)
    }
}

fn bench(c: &mut Criterion) {
    println!(
        "state: size_of::<Collector>() = {} bytes; size_of::<Summary>() = {} bytes",
        std::mem::size_of::<Collector>(),
        std::mem::size_of::<Summary>()
    );
    let mut g = c.benchmark_group("record");
    g.throughput(Throughput::Elements(N as u64));
    for (name, events) in [("dd", dd_stream()), ("mixed-8-threads", mixed_stream())] {
        g.bench_function(name, |b| {
            let mut col: Box<Collector> = Box::new(Collector::new(0));
            b.iter(|| {
                for ev in &events {
                    col.record(black_box(ev));
                }
            })
        });
    }
    g.finish();

    let mut col: Box<Collector> = Box::new(Collector::new(0));
    for ev in &mixed_stream() {
        col.record(ev);
    }
    let mut facts = Facts::new();
    facts.program = facts::truncated("wget");
    let mut buf = [0u8; MAX_ENCODED_LEN];
    let size = col
        .summarize(RunId([1; 16]), run_record(), facts.clone())
        .encode(&mut buf)
        .unwrap()
        .len();
    println!("mixed stream summary: {size} bytes encoded");
    c.bench_function("summarize+encode", |b| {
        b.iter(|| {
            let mut s = col.summarize(RunId([1; 16]), run_record(), facts.clone());
            black_box(s.encode(&mut buf).unwrap().len())
        })
    });
    let bytes = col
        .summarize(RunId([1; 16]), run_record(), facts.clone())
        .encode(&mut buf)
        .unwrap()
        .to_vec();
    c.bench_function("decode", |b| {
        b.iter(|| black_box(Summary::decode(black_box(&bytes)).unwrap().run.events))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
