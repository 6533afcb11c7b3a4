//! Arbitrary event streams into the collector, cut into windows: each
//! window's summary always encodes within the cap and decodes back, no
//! event is lost, and no call on a socket with a peer is lost from the
//! peer table (listed or folded).
#![no_main]

use agent_core::{
    Arch, Collector, Exit, Facts, FdKind, PeerAddr, PeerIp, RunRecord, Summary, SyscallEvent,
    MAX_ENCODED_LEN,
};
use libfuzzer_sys::fuzz_target;

fn u64_at(d: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    for (j, x) in b.iter_mut().enumerate() {
        *x = d.get(i + j).copied().unwrap_or(0);
    }
    u64::from_le_bytes(b)
}

/// The peer a byte names: half of the values none, the others one of 64
/// peers (more than the collector follows), TCP or UDP, IPv4 or IPv6.
fn peer_of(b: u8) -> Option<PeerAddr> {
    if b & 0x80 == 0 {
        return None;
    }
    let i = b & 0x3f;
    Some(PeerAddr {
        transport: if b & 0x40 == 0 { FdKind::Tcp } else { FdKind::Udp },
        ip: if i % 2 == 0 {
            PeerIp::V4([10, 0, 0, i])
        } else {
            PeerIp::V6([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, i])
        },
        port: u16::from(i) * 257,
    })
}

/// Summarizes the window and checks it.
fn check_window(c: &Collector<8, 8, 4, 8>, events: u64, with_peer: u64) {
    let run = RunRecord::new(0, 0, Exit::Running, Arch::X86_64);
    let mut s = c.summarize([0; 16], run, Facts::new());
    let listed: u64 = s.peers.list.iter().map(|p| p.calls).sum();
    assert_eq!(listed + s.peers.rest.calls, with_peer);
    let mut buf = [0u8; MAX_ENCODED_LEN];
    let bytes = s.encode(&mut buf).expect("fits");
    let d = Summary::decode(bytes).expect("own output decodes");
    assert_eq!(d.syscalls.iter().map(|x| x.count).sum::<u64>(), events);
}

fuzz_target!(|data: &[u8]| {
    let mut c: Box<Collector<8, 8, 4, 8>> = Box::new(Collector::new(0));
    let (mut n, mut with_peer) = (0u64, 0u64);
    for chunk in data.chunks(26) {
        let arch = Arch::ALL[chunk[0] as usize % 4];
        let entry = u64_at(chunk, 8);
        let control = chunk.get(25).copied().unwrap_or(0);
        if control == 0xff {
            // A window boundary.
            check_window(&c, n, with_peer);
            c.reset_window(entry);
            (n, with_peer) = (0, 0);
            continue;
        }
        let peer = peer_of(chunk.get(24).copied().unwrap_or(0));
        c.record(&SyscallEvent {
            tid: chunk.get(1).copied().unwrap_or(0) as u32 % 6,
            arch,
            nr: u64_at(chunk, 2) as u32 % 1_000_000,
            args: [u64_at(chunk, 4); 6],
            ret: u64_at(chunk, 16) as i64,
            entry_ns: entry,
            exit_ns: entry.wrapping_add(u64_at(chunk, 12)),
            fd_kind: FdKind::from_u8(chunk.get(3).copied().unwrap_or(0) % FdKind::COUNT as u8)
                .unwrap(),
            peer,
        });
        n += 1;
        with_peer += peer.is_some() as u64;
    }
    check_window(&c, n, with_peer);
});
