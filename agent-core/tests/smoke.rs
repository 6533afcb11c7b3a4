use agent_core::*;

#[test]
fn smoke() {
    let mut c: Collector = Collector::new(0);
    for i in 0..1000u64 {
        c.record(&SyscallEvent { tid: 1, arch: Arch::X86_64, nr: (i % 3) as u32, args: [0, 0, 64, 0, 0, 0], ret: if i % 7 == 0 { -11 } else { 64 }, entry_ns: i * 1000, exit_ns: i * 1000 + 500, fd_kind: FdKind::File });
    }
    let run = RunRecord { start_unix_ns: 1, duration_ns: 2, exit: Exit::Code(0), arch: Arch::X86_64, processes: 1, threads: 1, events: 0, overflow: Overflow::default(), window: 0, spool_dropped: 0 };
    let mut s = c.summarize([7; 16], run, Facts::new());
    let mut buf = [0u8; 2048];
    let bytes = s.encode(&mut buf).unwrap().to_vec();
    println!("size {} {}", bytes.len(), core::mem::size_of::<Collector>());
    let d = Summary::decode(&bytes).unwrap();
    assert_eq!(d, s);
}
