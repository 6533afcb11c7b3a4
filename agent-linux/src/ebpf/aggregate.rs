//! The BPF program's per-CPU aggregates (`AGG`, `ERRNOS`, `TRANS`, `PEERS` in
//! `bpf/syscalls.bpf.c`; `AGG_DENSE`'s entries are read as `AGG` keys,
//! see `Probe::take_slots`), read from bytes and merged into a collector with
//! agent-core's merge API: one window's generation at each cut, and what is
//! left at the end. Bytes from the kernel are still checked: a key or value
//! that is not one is skipped and counted, never trusted.

use core::mem::{offset_of, size_of};

use agent_core::stats::KeyStats;
use agent_core::{Collector, FdKind, Key, PeerAddr, PeerFigures, SyscallId};

use super::events::{peer_at, u64_at};
use super::kernel_types::{agg, peer_key, peer_stats, trans};

/// `sizeof(struct agg)` in the C program.
pub const AGG_LEN: usize = size_of::<agg>();

/// `sizeof(struct trans)` in the C program.
pub const TRANS_LEN: usize = size_of::<trans>();

/// `sizeof(struct peer_key)` in the C program: the peer, the syscall id,
/// the generation.
pub const PEER_KEY_LEN: usize = size_of::<peer_key>();

/// `sizeof(struct peer_stats)` in the C program.
pub const PEER_STATS_LEN: usize = size_of::<peer_stats>();

/// One generation's entries as read from the kernel: per key, one value
/// per CPU.
#[derive(Debug, Default)]
pub struct Generation {
    /// AGG: `id << 16 | fd_kind << 8 | slot << 1 | generation` and its
    /// per-CPU values.
    pub keys: Vec<(u32, Vec<[u8; AGG_LEN]>)>,
    /// ERRNOS: `id << 32 | fd_kind << 24 | slot << 17 | generation << 16 |
    /// errno`, per CPU.
    pub errnos: Vec<(u64, Vec<u64>)>,
    /// TRANS: `previous id << 32 | id << 16 | slot << 1 | generation`, per
    /// CPU.
    pub transitions: Vec<(u64, Vec<[u8; TRANS_LEN]>)>,
    /// PEERS: `struct peer_key`, per CPU `struct peer_stats`.
    pub peers: Vec<([u8; PEER_KEY_LEN], Vec<[u8; PEER_STATS_LEN]>)>,
}

fn key_of(id: u64, fd_kind: u64) -> Option<Key> {
    let id = u16::try_from(id)
        .ok()
        .filter(|&i| SyscallId(i).is_known())?;
    Some(Key {
        id: SyscallId(id),
        fd_kind: FdKind::from_u8(u8::try_from(fd_kind).ok()?)?,
    })
}

/// The run's slot in an AGG key (`slot << 1`).
pub fn agg_slot(key: u32) -> u8 {
    ((key >> 1) & 0x3f) as u8
}

/// The run's slot in an ERRNOS key (`slot << 17`).
pub fn errno_slot(key: u64) -> u8 {
    ((key >> 17) & 0x3f) as u8
}

/// The run's slot in a TRANS key (`slot << 1`).
pub fn transition_slot(key: u64) -> u8 {
    ((key >> 1) & 0x3f) as u8
}

/// The generation bit of an AGG key.
pub fn agg_generation(key: u32) -> u8 {
    (key & 1) as u8
}

/// The generation bit of an ERRNOS key.
pub fn errno_generation(key: u64) -> u8 {
    ((key >> 16) & 1) as u8
}

/// The generation bit of a TRANS key.
pub fn transition_generation(key: u64) -> u8 {
    (key & 1) as u8
}

/// The generation bit of a PEERS key.
pub fn peer_generation(key: &[u8; PEER_KEY_LEN]) -> u8 {
    key[offset_of!(peer_key, gen)] & 1
}

/// The run's slot in a PEERS key (`gen` is `slot << 1 | generation`).
pub fn peer_slot(key: &[u8; PEER_KEY_LEN]) -> u8 {
    (key[offset_of!(peer_key, gen)] >> 1) & 0x3f
}

/// One CPU's `struct agg` as agent-core's statistics; failure times (the
/// kernel's are monotonic) made relative to `start_ns`.
fn cpu_stats(b: &[u8; AGG_LEN], start_ns: u64) -> KeyStats {
    let at = |offset: usize| u64_at(b, offset);
    let count = at(offset_of!(agg, count));
    let errors = at(offset_of!(agg, errors));
    let mut s = KeyStats::EMPTY;
    if count == 0 {
        return s;
    }
    s.count = count;
    s.errors = errors;
    s.total_ns = at(offset_of!(agg, total_ns));
    s.sum_sq_ns =
        (at(offset_of!(agg, sum_sq_hi)) as u128) << 64 | at(offset_of!(agg, sum_sq_lo)) as u128;
    s.min_ns = at(offset_of!(agg, min_ns));
    s.max_ns = at(offset_of!(agg, max_ns));
    s.consecutive = at(offset_of!(agg, consecutive));
    s.consecutive_gap_ns = at(offset_of!(agg, consecutive_gap_ns));
    s.result_sum = at(offset_of!(agg, result_sum)) as i64 as i128;
    s.param_sum = at(offset_of!(agg, param_sum)) as u128;
    s.has_param = true;
    if errors > 0 {
        s.first_failure_ns = at(offset_of!(agg, first_failure_ns)).saturating_sub(start_ns);
        s.last_failure_ns = at(offset_of!(agg, last_failure_ns)).saturating_sub(start_ns);
    }
    for (i, c) in s.histogram.counts.iter_mut().enumerate() {
        *c = at(offset_of!(agg, histogram) + 8 * i);
    }
    s
}

/// Merges `generation` into `collector`; returns the calls merged and the
/// entries skipped because their key was not one.
pub fn merge(generation: &Generation, collector: &mut Collector) -> (u64, u64) {
    let start_ns = collector.start_ns();
    let mut calls = 0u64;
    let mut bad = 0u64;
    for (raw, per_cpu) in &generation.keys {
        let Some(key) = key_of((*raw >> 16) as u64, ((*raw >> 8) & 0xff) as u64) else {
            bad += 1;
            continue;
        };
        let mut stats = KeyStats::EMPTY;
        for cpu in per_cpu {
            stats.merge(&cpu_stats(cpu, start_ns));
        }
        calls = calls.saturating_add(stats.count);
        collector.merge_key(key, &stats);
    }
    // After the keys: a failure goes where its key went.
    for (raw, per_cpu) in &generation.errnos {
        let Some(key) = key_of(raw >> 32, (raw >> 24) & 0xff) else {
            bad += 1;
            continue;
        };
        let errno = (raw & 0xffff) as u16;
        let failures = per_cpu.iter().fold(0u64, |a, n| a.saturating_add(*n));
        collector.merge_errno(key, errno, failures);
    }
    for (raw, per_cpu) in &generation.transitions {
        let (Some(from), Some(to)) = (key_of(raw >> 32, 0), key_of((raw >> 16) & 0xffff, 0)) else {
            bad += 1;
            continue;
        };
        let (mut count, mut gap) = (0u64, 0u64);
        for v in per_cpu {
            count = count.saturating_add(u64_at(v, offset_of!(trans, count)));
            gap = gap.saturating_add(u64_at(v, offset_of!(trans, gap_sum_ns)));
        }
        collector.merge_transition(from.id, to.id, count, gap);
    }
    bad += merge_peers(&generation.peers, collector);
    (calls, bad)
}

/// A peer's last call: its syscall, result and end (monotonic ns).
type LastPeerCall = (SyscallId, i64, u64);

/// Merges the PEERS entries (per peer and syscall, per CPU) into
/// `collector`, one peer at a time: bytes are the successful results of
/// the read/write family, the last call the latest over syscalls and CPUs
/// (as the ptrace backend, which sees calls end in order, keeps it).
/// Entries whose key is not a peer and syscall are skipped and counted.
fn merge_peers(
    entries: &[([u8; PEER_KEY_LEN], Vec<[u8; PEER_STATS_LEN]>)],
    collector: &mut Collector,
) -> u64 {
    let mut bad = 0;
    let mut peers: Vec<(PeerAddr, PeerFigures, Option<LastPeerCall>)> = Vec::new();
    for (raw, per_cpu) in entries {
        let id_at = offset_of!(peer_key, id);
        let id = u16::from_ne_bytes([raw[id_at], raw[id_at + 1]]);
        let peer = peer_at(raw, offset_of!(peer_key, peer));
        let (Some(addr), Some(key)) = (peer, key_of(id as u64, 0)) else {
            bad += 1;
            continue;
        };
        let i = match peers.iter().position(|(a, _, _)| *a == addr) {
            Some(i) => i,
            None => {
                peers.push((addr, PeerFigures::default(), None));
                peers.len() - 1
            }
        };
        let (_, figures, last) = &mut peers[i];
        for v in per_cpu {
            let at = |offset: usize| u64_at(v, offset);
            let calls = at(offset_of!(peer_stats, calls));
            if calls == 0 {
                continue;
            }
            figures.calls = figures.calls.saturating_add(calls);
            figures.errors = figures
                .errors
                .saturating_add(at(offset_of!(peer_stats, errors)));
            figures.total_ns = figures
                .total_ns
                .saturating_add(at(offset_of!(peer_stats, total_ns)));
            if key.id.is_read_write_family() {
                figures.bytes = figures
                    .bytes
                    .saturating_add(at(offset_of!(peer_stats, ok_result_sum)));
            }
            let end = at(offset_of!(peer_stats, last_exit_ns));
            let result = at(offset_of!(peer_stats, last_ret)) as i64;
            if last.is_none_or(|(_, _, e)| end >= e) {
                *last = Some((key.id, result, end));
            }
        }
    }
    for (addr, figures, last) in peers {
        collector.merge_peer(addr, figures, last);
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::RunId;
    use agent_core::{Arch, Exit, Facts, RunRecord, SyscallEvent};

    fn agg(values: &[(usize, u64)]) -> [u8; AGG_LEN] {
        let mut b = [0u8; AGG_LEN];
        for &(i, v) in values {
            b[8 * i..8 * i + 8].copy_from_slice(&v.to_ne_bytes());
        }
        b
    }

    fn event(nr: u32, ret: i64, entry_ns: u64, exit_ns: u64) -> SyscallEvent {
        SyscallEvent {
            tid: 7,
            arch: Arch::X86_64,
            nr,
            args: [3, 0, 64, 0, 0, 0],
            ret,
            entry_ns,
            exit_ns,
            fd_kind: FdKind::File,
            peer: None,
        }
    }

    /// The generation bit sits where `bpf/syscalls.bpf.c` puts it in each
    /// map's key, whatever the ids around it (odd ids included).
    #[test]
    fn generation_bits_follow_the_c_key_layouts() {
        for gen in [0u8, 1] {
            let g = gen as u64;
            assert_eq!(agg_generation(0xffff << 16 | 7 << 8 | g as u32), gen);
            assert_eq!(
                errno_generation(0xffff << 32 | 7 << 24 | g << 16 | 0xffff),
                gen
            );
            assert_eq!(transition_generation(0xffff << 32 | 0xffff << 16 | g), gen);
        }
    }

    /// The slot sits beside the generation bit, as `bpf/syscalls.bpf.c`
    /// puts it, and neither disturbs the other nor the id, kind or errno.
    #[test]
    fn slots_follow_the_c_key_layouts() {
        for (slot, gen) in [(0u64, 1u64), (1, 0), (63, 1), (42, 0)] {
            let g = gen | slot << 1;
            let agg = 0xffff << 16 | 7 << 8 | g as u32;
            assert_eq!(
                (agg_slot(agg), agg_generation(agg)),
                (slot as u8, gen as u8)
            );
            assert_eq!(agg >> 8 & 0xff, 7);
            let errno = 0xffff << 32 | 7 << 24 | g << 16 | 0xffff;
            assert_eq!(
                (errno_slot(errno), errno_generation(errno)),
                (slot as u8, gen as u8)
            );
            assert_eq!((errno >> 24 & 0xff, errno & 0xffff), (7, 0xffff));
            let trans = 0xffff << 32 | 0xfffe << 16 | g;
            assert_eq!(
                (transition_slot(trans), transition_generation(trans)),
                (slot as u8, gen as u8)
            );
            assert_eq!(trans >> 16 & 0xffff, 0xfffe);
        }
    }

    /// Two reads on two CPUs (one failing with EAGAIN), as the kernel
    /// writes them, merge into what recording the same two calls gives.
    #[test]
    fn kernel_values_merge_like_recorded_calls() {
        let read = SyscallId::from_raw(Arch::X86_64, 0);
        let key = (read.0 as u32) << 16 | (FdKind::File as u32) << 8;
        let start = 1_000;
        // CPU 0: read returning 64 after 1500 ns.
        let cpu0 = agg(&[
            (0, 1),
            (2, 1500),
            (3, 1500 * 1500),
            (5, 1500),
            (6, 1500),
            (9, 64),
            (10, 64),
            (13 + 1, 1),
        ]);
        // CPU 1: read failing (-11) after 500 ns, ending at 8500, 500 ns
        // after the first read.
        let cpu1 = agg(&[
            (0, 1),
            (1, 1),
            (2, 500),
            (3, 500 * 500),
            (5, 500),
            (6, 500),
            (7, 1),
            (8, 500),
            (10, 64),
            (11, 8500),
            (12, 8500),
            (13, 1),
        ]);
        let errno_key = (read.0 as u64) << 32 | (FdKind::File as u64) << 24 | 11;
        let trans_key = (read.0 as u64) << 32 | (read.0 as u64) << 16;
        let mut trans = [0u8; TRANS_LEN];
        trans[0..8].copy_from_slice(&1u64.to_ne_bytes());
        trans[8..16].copy_from_slice(&500u64.to_ne_bytes());
        let generation = Generation {
            keys: vec![(key, vec![cpu0, cpu1]), (u32::MAX, vec![cpu0])],
            errnos: vec![(errno_key, vec![0, 1])],
            transitions: vec![(trans_key, vec![[0; TRANS_LEN], trans])],
            peers: Vec::new(),
        };
        let mut merged: Box<Collector> = Box::new(Collector::new(start));
        assert_eq!(merge(&generation, &mut merged), (2, 1), "one bad key");

        let mut recorded: Box<Collector> = Box::new(Collector::new(start));
        recorded.record(&event(0, 64, 6000, 7500));
        recorded.record(&event(0, -11, 8000, 8500));
        let run = || RunRecord::new(0, 1, Exit::Code(0), Arch::X86_64);
        let m = merged.summarize(RunId([0; 16]), run(), Facts::new());
        let r = recorded.summarize(RunId([0; 16]), run(), Facts::new());
        assert_eq!(m, r);
        assert_eq!(m.syscalls[0].count, 2);
    }

    /// Unknown numbers, keyed in the kernel by the ids carrying them
    /// (the loader's SYSINFO), merge as recording them does: the first
    /// `UNKNOWN_ROWS` in rows of their own, the fifth as `<unknown>`.
    #[test]
    fn unknown_numbers_merge_like_recorded_calls() {
        use agent_core::collector::UNKNOWN_ROWS;
        use agent_core::histogram::bucket_of;
        let nrs = [0x1f0u32, 0x1f1, 0x3ff, 0x3fe, 0x3fd];
        assert_eq!(nrs.len(), UNKNOWN_ROWS + 1);
        let start = 1_000;
        let entry = |i: usize| 2_000 + 1_000 * i as u64;
        let ids: Vec<SyscallId> = nrs
            .iter()
            .map(|nr| SyscallId::from_raw_carrying(Arch::X86_64, *nr))
            .collect();
        let mut generation = Generation {
            keys: Vec::new(),
            errnos: Vec::new(),
            transitions: Vec::new(),
            peers: Vec::new(),
        };
        for (i, id) in ids.iter().enumerate() {
            let exit = entry(i) + 100;
            let values = agg(&[
                (0, 1),
                (1, 1),
                (2, 100),
                (3, 100 * 100),
                (5, 100),
                (6, 100),
                (11, exit),
                (12, exit),
                (13 + bucket_of(100), 1),
            ]);
            let file = FdKind::File as u64;
            generation
                .keys
                .push(((id.0 as u32) << 16 | (file as u32) << 8, vec![values]));
            generation
                .errnos
                .push(((id.0 as u64) << 32 | file << 24 | 38, vec![1]));
            if i > 0 {
                let mut trans = [0u8; TRANS_LEN];
                trans[0..8].copy_from_slice(&1u64.to_ne_bytes());
                trans[8..16].copy_from_slice(&900u64.to_ne_bytes());
                let from = ids[i - 1].0 as u64;
                generation
                    .transitions
                    .push((from << 32 | (id.0 as u64) << 16, vec![trans]));
            }
        }
        let mut merged: Box<Collector> = Box::new(Collector::new(start));
        assert_eq!(merge(&generation, &mut merged), (5, 0));
        let mut recorded: Box<Collector> = Box::new(Collector::new(start));
        for (i, nr) in nrs.iter().enumerate() {
            recorded.record(&event(*nr, -38, entry(i), entry(i) + 100));
        }
        let run = || RunRecord::new(0, 1, Exit::Code(0), Arch::X86_64);
        let m = merged.summarize(RunId([0; 16]), run(), Facts::new());
        let r = recorded.summarize(RunId([0; 16]), run(), Facts::new());
        assert_eq!(m, r);
        let names: Vec<String> = m.syscalls.iter().map(|s| s.key.id.to_string()).collect();
        assert_eq!(
            names,
            [
                "<unknown>",
                "syscall_0x1f0",
                "syscall_0x1f1",
                "syscall_0x3fe",
                "syscall_0x3ff"
            ]
        );
    }
}

#[cfg(test)]
mod peer_tests {
    use super::*;
    use agent_core::RunId;
    use agent_core::{Arch, Exit, Facts, PeerIp, RunRecord, SyscallEvent};

    /// A `struct peer_key`: 127.0.0.1:`port` over TCP (`mapped`: as the
    /// IPv4-mapped IPv6 address a dual-stack socket has), syscall `id`.
    fn key(port: u16, mapped: bool, id: SyscallId) -> [u8; PEER_KEY_LEN] {
        let mut k = [0u8; PEER_KEY_LEN];
        if mapped {
            k[10..16].copy_from_slice(&[0xff, 0xff, 127, 0, 0, 1]);
            k[18] = 10;
        } else {
            k[..4].copy_from_slice(&[127, 0, 0, 1]);
            k[18] = 2;
        }
        k[16..18].copy_from_slice(&port.to_ne_bytes());
        k[19] = FdKind::Tcp as u8;
        let id_at = offset_of!(peer_key, id);
        k[id_at..id_at + 2].copy_from_slice(&id.0.to_ne_bytes());
        k
    }

    fn stats(v: [u64; 6]) -> [u8; PEER_STATS_LEN] {
        let mut b = [0u8; PEER_STATS_LEN];
        for (i, x) in v.iter().enumerate() {
            b[8 * i..8 * i + 8].copy_from_slice(&x.to_ne_bytes());
        }
        b
    }

    fn event(nr: u32, ret: i64, entry_ns: u64, exit_ns: u64) -> SyscallEvent {
        SyscallEvent {
            tid: 7,
            arch: Arch::X86_64,
            nr,
            args: [3, 0, 64, 0, 0, 0],
            ret,
            entry_ns,
            exit_ns,
            fd_kind: FdKind::Tcp,
            peer: Some(PeerAddr {
                transport: FdKind::Tcp,
                ip: PeerIp::V4([127, 0, 0, 1]),
                port: 80,
            }),
        }
    }

    /// A peer's reads (on two CPUs, one through the IPv4-mapped address),
    /// a failed write and its close merge into what recording the same
    /// calls gives: bytes from the reads only (not the close's result),
    /// the close as the last call; a key that is no peer is skipped and
    /// counted.
    #[test]
    fn kernel_peers_merge_like_recorded_calls() {
        let read = SyscallId::from_raw(Arch::X86_64, 0);
        let write = SyscallId::from_raw(Arch::X86_64, 1);
        let close = SyscallId::from_raw(Arch::X86_64, 3);
        let mut no_peer = key(80, false, read);
        no_peer[18] = 0;
        let generation = Generation {
            peers: vec![
                (
                    key(80, false, read),
                    vec![stats([1, 0, 100, 64, 1_100, 64]), stats([0; 6])],
                ),
                (
                    key(80, true, read),
                    vec![stats([0; 6]), stats([1, 0, 200, 32, 2_200, 32])],
                ),
                (
                    key(80, false, write),
                    vec![stats([1, 1, 50, 0, 2_500, -32i64 as u64])],
                ),
                (key(80, false, close), vec![stats([1, 0, 10, 0, 3_000, 0])]),
                (no_peer, vec![stats([5, 0, 1, 1, 1, 1])]),
            ],
            ..Generation::default()
        };
        let mut merged: Box<Collector> = Box::new(Collector::new(0));
        assert_eq!(merge(&generation, &mut merged), (0, 1), "one bad key");
        let mut recorded: Box<Collector> = Box::new(Collector::new(0));
        // The key statistics are not merged here: compare peers only.
        recorded.record(&event(0, 64, 1_000, 1_100));
        recorded.record(&event(0, 32, 2_000, 2_200));
        recorded.record(&event(1, -32, 2_450, 2_500));
        recorded.record(&event(3, 0, 2_990, 3_000));
        let run = || RunRecord::new(0, 1, Exit::Code(0), Arch::X86_64);
        let m = merged.summarize(RunId([0; 16]), run(), Facts::new());
        let r = recorded.summarize(RunId([0; 16]), run(), Facts::new());
        assert_eq!(m.peers, r.peers);
        let p = &m.peers.list[0];
        assert_eq!((p.calls, p.bytes, p.errors), (4, 96, 1));
        assert_eq!(p.last.map(|l| (l.id, l.result)), Some((close, 0)));
    }
}
