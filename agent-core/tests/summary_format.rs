//! The summary format: round trips, the 2048-byte cap under adversarial
//! input, and strict decoding of bad bytes.

use agent_core::summary::{Failures, InFlightCall, MAX_ENCODED_LEN, MAX_IN_FLIGHT, MAX_PEERS};
use agent_core::*;
use proptest::prelude::*;

fn run_record(events: u64) -> RunRecord {
    RunRecord {
        start_unix_ns: u64::MAX,
        duration_ns: u64::MAX,
        exit: Exit::Signal(9),
        arch: Arch::Aarch64,
        processes: u32::MAX,
        threads: u32::MAX,
        events,
        overflow: Overflow::default(),
        window: u32::MAX,
        spool_dropped: u32::MAX,
    }
}

/// Every fixed fact and all 16 free facts at full length, in multi-byte
/// characters where allowed.
fn full_facts() -> Facts {
    let mut f = Facts::new();
    f.os_name = facts::truncated("ö".repeat(100).as_str());
    f.os_version = facts::truncated("9".repeat(100).as_str());
    f.kernel = facts::truncated("k".repeat(100).as_str());
    f.device_model = facts::truncated("€".repeat(100).as_str());
    f.program = facts::truncated("p".repeat(100).as_str());
    for i in 0..16 {
        let key = format!("{i:02}{}", "k".repeat(22));
        f.add(&key, &"é".repeat(20)).unwrap();
    }
    f
}

fn encode(s: &mut Summary) -> Vec<u8> {
    let mut buf = [0u8; MAX_ENCODED_LEN];
    s.encode(&mut buf).unwrap().to_vec()
}

/// A worst case: every syscall of every architecture, on every fd kind, with
/// every errno, extreme durations, and full facts (no version 2 field).
fn worst_case() -> Summary {
    worst_case_with(false)
}

/// [`worst_case`] with every version 2 to 4 field at its largest too: 20
/// IPv6 peers, four in-flight calls, the widest numbers, the in-process
/// source.
fn worst_observed() -> Summary {
    worst_case_with(true)
}

fn worst_case_with(observed: bool) -> Summary {
    let mut c: Box<Collector> = Box::new(Collector::new(0));
    let mut t = 0u64;
    let mut n = 0u64;
    for arch in Arch::ALL {
        for nr in 0..470u32 {
            for kind in FdKind::ALL {
                for rep in 0..3u64 {
                    let errno = ((nr as i64 * 7 + rep as i64) % 133) + 1;
                    let dur = match rep {
                        0 => 1,
                        1 => u64::MAX / 4,
                        _ => 123_456_789,
                    };
                    c.record(&SyscallEvent {
                        tid: (n % 200) as u32,
                        arch,
                        nr,
                        args: [u64::MAX; 6],
                        ret: if rep == 2 { i64::MAX } else { -errno },
                        entry_ns: t,
                        exit_ns: t.saturating_add(dur),
                        fd_kind: kind,
                        peer: peer_of(kind, n).filter(|_| observed),
                    });
                    t = t.wrapping_add(1_000_003);
                    n += 1;
                }
            }
        }
    }
    let mut s = c.summarize(RunId([0xff; 16]), run_record(0), full_facts());
    if !observed {
        return s;
    }
    s.origin = Origin {
        device: DeviceId([0xfe; 16]),
        stream: StreamId([0xfd; 16]),
        window_ns: u64::MAX,
    };
    s.cpu = Some(CpuTime {
        user_ns: u64::MAX,
        system_ns: u64::MAX,
    });
    s.in_flight.count = u32::MAX;
    for i in 0..MAX_IN_FLIGHT as u64 {
        s.in_flight
            .oldest
            .push(InFlightCall {
                tid: u32::MAX,
                id: SyscallId::from_name("read").unwrap(),
                fd_kind: FdKind::Tcp,
                peer: peer_of(FdKind::Tcp, i),
                start_unix_ns: u64::MAX - MAX_IN_FLIGHT as u64 + i,
            })
            .unwrap();
    }
    s.coverage = Coverage {
        late_ns: Some(u64::MAX),
        from_start: false,
        source: Source::InProcess,
    };
    s.io = Some(IoBytes {
        read: u64::MAX,
        written: u64::MAX,
    });
    s
}

/// A socket peer for TCP and UDP events: one of 20 IPv6 peers (more than
/// the collector's table holds), with the widest port.
fn peer_of(kind: FdKind, n: u64) -> Option<PeerAddr> {
    matches!(kind, FdKind::Tcp | FdKind::Udp).then(|| PeerAddr {
        transport: kind,
        ip: PeerIp::V6([0xff - (n % 20) as u8; 16]),
        port: u16::MAX,
    })
}

#[test]
fn worst_case_fits_and_round_trips() {
    let mut s = worst_case();
    let events = s.run.events;
    let bytes = encode(&mut s);
    assert!(bytes.len() <= MAX_ENCODED_LEN, "{} bytes", bytes.len());
    assert!(s.truncated);
    let d = Summary::decode(&bytes).unwrap();
    assert_eq!(d, s);
    // Folding loses no event.
    assert_eq!(d.syscalls.iter().map(|s| s.count).sum::<u64>(), events);
    assert_eq!(d.facts, full_facts());
    eprintln!(
        "worst case: {} bytes, {} syscall entries",
        bytes.len(),
        d.syscalls.len()
    );
}

#[test]
fn encoding_is_deterministic() {
    let a = encode(&mut worst_case());
    let b = encode(&mut worst_case());
    assert_eq!(a, b);
}

#[test]
fn a_small_buffer_folds_harder_and_still_decodes() {
    let mut s = worst_case();
    s.facts = Facts::new();
    let mut buf = [0u8; 300];
    let bytes = s.encode(&mut buf).unwrap().to_vec();
    assert!(bytes.len() <= 300);
    assert_eq!(Summary::decode(&bytes).unwrap(), s);
    // Facts alone cannot be folded: a buffer too small for them fails cleanly.
    let mut full = worst_case();
    let mut tiny = [0u8; 100];
    assert_eq!(full.encode(&mut tiny), Err(EncodeError::CannotFit));
}

#[test]
fn every_prefix_is_an_error() {
    let bytes = encode(&mut worst_case());
    for len in 0..bytes.len() {
        assert!(
            Summary::decode(&bytes[..len]).is_err(),
            "prefix {len} decoded"
        );
    }
    assert_eq!(Summary::decode(&[]), Err(DecodeError::Empty));
    assert_eq!(
        Summary::decode(&bytes[..bytes.len() - 1]),
        Err(DecodeError::Truncated)
    );
}

#[test]
fn typed_errors() {
    let mut s = worst_case();
    let bytes = encode(&mut s);
    let mut long = bytes.clone();
    long.push(0);
    assert_eq!(
        Summary::decode(&long),
        Err(DecodeError::TrailingBytes { extra: 1 })
    );
    assert_eq!(
        Summary::decode(&vec![1u8; MAX_ENCODED_LEN + 1]),
        Err(DecodeError::Oversized {
            len: MAX_ENCODED_LEN + 1
        })
    );
    let mut next = bytes.clone();
    next[0] = FORMAT_VERSION as u8 + 1;
    assert_eq!(
        Summary::decode(&next),
        Err(DecodeError::UnsupportedVersion {
            found: FORMAT_VERSION + 1
        })
    );
    let mut v0 = bytes.clone();
    v0[0] = 0;
    assert_eq!(
        Summary::decode(&v0),
        Err(DecodeError::UnsupportedVersion { found: 0 })
    );
}

#[test]
fn worst_observed_fits_and_round_trips() {
    let mut s = worst_observed();
    let bytes = encode(&mut s);
    assert!(bytes.len() <= MAX_ENCODED_LEN, "{} bytes", bytes.len());
    let d = Summary::decode(&bytes).unwrap();
    assert_eq!(d, s);
    assert_eq!(d.origin.device, [0xfe; 16]);
    // Peers are folded only once no entry is left to fold; none is lost.
    assert_eq!(d.syscalls.len(), 1, "entries are folded before peers");
    assert!(d.peers.list.len() <= MAX_PEERS);
    assert!(d.peers.rest.peers >= 8, "{:?}", d.peers.rest);
    let peer_calls: u64 = d.peers.list.iter().map(|p| p.calls).sum::<u64>() + d.peers.rest.calls;
    assert_eq!(peer_calls, 2 * 470 * 3 * Arch::ALL.len() as u64);
    assert_eq!(d.in_flight.count, u32::MAX);
    eprintln!(
        "worst observed: {} bytes, {} peers listed, {} in flight described",
        bytes.len(),
        d.peers.list.len(),
        d.in_flight.oldest.len()
    );
}

#[test]
fn a_typical_observed_window_keeps_every_peer() {
    // Reads and writes on the sockets of 8 IPv4 peers, with full facts:
    // nothing is folded.
    let mut c: Box<Collector> = Box::new(Collector::new(0));
    for i in 0..400u64 {
        c.record(&SyscallEvent {
            tid: 1,
            arch: Arch::X86_64,
            nr: (i % 2) as u32,
            args: [3, 0, 1 << 14, 0, 0, 0],
            ret: 1 << 13,
            entry_ns: i * 1000,
            exit_ns: i * 1000 + 500,
            fd_kind: FdKind::Tcp,
            peer: Some(PeerAddr {
                transport: FdKind::Tcp,
                ip: PeerIp::V4([10, 0, 0, (i % 8) as u8]),
                port: 8080,
            }),
        });
    }
    let mut s = c.summarize(RunId([1; 16]), run_record(0), full_facts());
    s.cpu = Some(CpuTime {
        user_ns: 1,
        system_ns: 2,
    });
    let bytes = encode(&mut s);
    let d = Summary::decode(&bytes).unwrap();
    assert!(!d.truncated, "{} bytes", bytes.len());
    assert_eq!(d.peers.list.len(), 8);
    assert_eq!(d.peers.rest, PeerRest::default());
    assert!(d
        .peers
        .list
        .iter()
        .all(|p| p.calls == 50 && p.bytes == 50 << 13));
}

/// A version 1 summary written by the version 1 encoder (commit a1b4c1b,
/// before version 2) still decodes, with empty version 2 fields, and
/// re-encodes as the current version.
#[test]
fn version_1_still_decodes() {
    let bytes = include_bytes!("fixtures/v1-wget.bin");
    assert_eq!(bytes[0], 1);
    let mut d = Summary::decode(bytes).unwrap();
    assert_eq!(d.facts.program.as_str(), "wget");
    assert_eq!(d.run.events, 200);
    assert_eq!(d.origin, Origin::default());
    assert_eq!(d.cpu, None);
    assert_eq!(d.in_flight, InFlight::default());
    assert_eq!(d.peers, Peers::default());
    let again = encode(&mut d);
    assert_eq!(again[0], FORMAT_VERSION as u8);
    assert_eq!(Summary::decode(&again).unwrap(), d);
    // The version 1 layout is a prefix of version 2's: version 2 bytes
    // labelled 1 have trailing bytes, version 1 bytes labelled 2 are
    // truncated.
    let mut relabelled = bytes.to_vec();
    relabelled[0] = 2;
    assert_eq!(Summary::decode(&relabelled), Err(DecodeError::Truncated));
}

/// A version 2 summary written by the version 2 encoder (commit 0fe543d,
/// `edge-agent run --out` of a wget over loopback) still decodes, with a
/// full kind, unknown coverage (seen by the kernel) and no I/O figures,
/// and re-encodes as the current version.
#[test]
fn version_2_still_decodes() {
    let bytes = include_bytes!("fixtures/v2-wget.bin");
    assert_eq!(bytes[0], 2);
    let mut d = Summary::decode(bytes).unwrap();
    assert_eq!(d.facts.program.as_str(), "wget");
    assert_eq!(d.run.events, 427);
    assert_ne!(d.origin.device, [0; 16]);
    assert_eq!(d.peers.list.len(), 1);
    assert_eq!(d.kind, Kind::Full);
    assert_eq!(d.coverage, Coverage::default());
    assert_eq!(d.coverage.began_late(), None);
    assert_eq!(d.coverage.source, Source::Kernel);
    assert_eq!(d.io, None);
    let again = encode(&mut d);
    assert_eq!(again[0], FORMAT_VERSION as u8);
    assert_eq!(Summary::decode(&again).unwrap(), d);
    let mut relabelled = bytes.to_vec();
    relabelled[0] = 3;
    assert_eq!(Summary::decode(&relabelled), Err(DecodeError::Truncated));
}

/// A version 3 summary written by the version 3 encoder (commit 4c41724,
/// `edge-agent run --out` of a wget over loopback, eBPF backend) still
/// decodes, with the kernel as its source (every summary before version 4
/// was made by ptrace or eBPF: the kernel's view is true of it, not
/// "unknown"), and re-encodes as version 4.
#[test]
fn version_3_still_decodes_as_seen_by_the_kernel() {
    let bytes = include_bytes!("fixtures/v3-wget.bin");
    assert_eq!(bytes[0], 3);
    let mut d = Summary::decode(bytes).unwrap();
    assert_eq!(d.facts.program.as_str(), "wget");
    assert_eq!(d.run.events, 280);
    assert_eq!(d.kind, Kind::Full);
    assert_eq!(d.coverage, Coverage::FROM_START);
    assert_eq!(d.coverage.source, Source::Kernel);
    let again = encode(&mut d);
    assert_eq!(again[0], FORMAT_VERSION as u8);
    assert_eq!(FORMAT_VERSION, 4);
    assert_eq!(Summary::decode(&again).unwrap(), d);
    // Version 4 appends one byte, the source, at the very end: the version
    // 3 bytes are a prefix of the version 4 ones.
    assert_eq!(again.len(), bytes.len() + 1);
    assert_eq!(&again[1..bytes.len()], &bytes[1..]);
    assert_eq!(again[bytes.len()], 0, "Source::Kernel is tag 0");
    let mut relabelled = bytes.to_vec();
    relabelled[0] = 4;
    assert_eq!(Summary::decode(&relabelled), Err(DecodeError::Truncated));
}

/// Version 4 round-trips both sources, with every coverage; the source is
/// the last byte, and a source this decoder does not know is refused.
#[test]
fn version_4_round_trips_both_sources() {
    let coverages = [
        Coverage::default(),
        Coverage::FROM_START,
        Coverage::attached(7_000_000),
        Coverage::in_process_from_start(),
        Coverage::in_process_attached(u64::MAX),
    ];
    for coverage in coverages {
        let mut s = worst_observed();
        s.coverage = coverage;
        let bytes = encode(&mut s);
        assert!(bytes.len() <= MAX_ENCODED_LEN, "{} bytes", bytes.len());
        let d = Summary::decode(&bytes).unwrap();
        assert_eq!(d.coverage, coverage);
        assert_eq!(d, s);
        let tag = *bytes.last().unwrap();
        assert_eq!(tag, coverage.source as u8, "{coverage:?}");
    }
    assert_eq!(Coverage::in_process_from_start().source, Source::InProcess);
    assert_eq!(Coverage::in_process_from_start().began_late(), Some(false));
    assert_eq!(Coverage::in_process_attached(5).began_late(), Some(true));
    let mut s = worst_case();
    s.coverage = Coverage::in_process_from_start();
    let mut bytes = encode(&mut s);
    *bytes.last_mut().unwrap() = 2;
    assert!(
        matches!(Summary::decode(&bytes), Err(DecodeError::Malformed(_))),
        "{:?}",
        Summary::decode(&bytes)
    );
}

/// Two sources merged (the windows of one stream): in-process if any part
/// is, whatever the order.
#[test]
fn sources_combine_to_in_process_if_any_part_is() {
    use Source::*;
    assert_eq!(Kernel.combined(Kernel), Kernel);
    assert_eq!(Kernel.combined(InProcess), InProcess);
    assert_eq!(InProcess.combined(Kernel), InProcess);
    assert_eq!(InProcess.combined(InProcess), InProcess);
}

/// A light record round-trips with its kind, coverage and I/O bytes; one
/// that carries syscall or peer entries is refused.
#[test]
fn light_records_round_trip_and_carry_no_entries() {
    let run = RunRecord {
        processes: 1,
        threads: 1,
        ..RunRecord::new(
            1_700_000_000_000_000_000,
            420_000_000,
            Exit::Code(0),
            Arch::X86_64,
        )
    };
    let mut facts = Facts::new();
    facts.program = facts::truncated("wget");
    let mut s = Summary::light(
        RunId([7; 16]),
        run,
        facts,
        Origin {
            device: DeviceId([1; 16]),
            stream: StreamId([2; 16]),
            window_ns: 0,
        },
        Some(CpuTime {
            user_ns: 10_000_000,
            system_ns: 20_000_000,
        }),
        Some(IoBytes {
            read: 1 << 20,
            written: 4096,
        }),
    );
    s.coverage = Coverage::attached(30_000_000);
    let bytes = encode(&mut s);
    assert!(
        bytes.len() < 200,
        "a light record is small: {} bytes",
        bytes.len()
    );
    let d = Summary::decode(&bytes).unwrap();
    assert_eq!(d, s);
    assert_eq!(d.kind, Kind::Light);
    assert_eq!(d.coverage.began_late(), Some(true));

    let mut with_entry = worst_case();
    let _ = encode(&mut with_entry);
    with_entry.kind = Kind::Light;
    let e = Summary::decode(&reencode(&with_entry)).unwrap_err();
    assert!(e.to_string().contains("light record"), "{e}");
}

#[test]
fn coverage_is_checked() {
    assert_eq!(Coverage::FROM_START.began_late(), Some(false));
    let e = inconsistent(|s| {
        s.coverage = Coverage {
            late_ns: None,
            from_start: true,
            source: Source::Kernel,
        }
    });
    assert!(e.to_string().contains("coverage"), "{e}");
}

#[test]
fn observation_fields_are_checked() {
    let inconsistent = |mutate: fn(&mut Summary)| {
        let mut s = worst_observed();
        s.facts = Facts::new();
        let _ = encode(&mut s);
        mutate(&mut s);
        Summary::decode(&reencode(&s)).unwrap_err()
    };
    let e = inconsistent(|s| s.in_flight.oldest.swap(0, 1));
    assert!(e.to_string().contains("oldest first"), "{e}");
    let e = inconsistent(|s| s.in_flight.count = 2);
    assert!(e.to_string().contains("in_flight"), "{e}");
    let e = inconsistent(|s| s.peers.list.swap(0, 1));
    assert!(e.to_string().contains("peers"), "{e}");
    let e = inconsistent(|s| s.peers.list[0].addr.transport = FdKind::Unix);
    assert!(e.to_string().contains("transport"), "{e}");
    let e = inconsistent(|s| s.peers.list[1].errors = s.peers.list[1].calls + 1);
    assert!(e.to_string().contains("errors"), "{e}");
}

fn reencode(s: &Summary) -> Vec<u8> {
    // Encode without validation, as a hostile device could.
    let mut v = postcard::to_allocvec_unused_helper(s);
    v.shrink_to_fit();
    v
}

mod postcard {
    /// postcard without its alloc feature: encode into a big buffer.
    pub fn to_allocvec_unused_helper(s: &agent_core::Summary) -> Vec<u8> {
        let mut buf = vec![0u8; 1 << 20];
        let n = ::postcard::to_slice(&(agent_core::FORMAT_VERSION, s), &mut buf)
            .unwrap()
            .len();
        buf.truncate(n);
        buf
    }
}

fn inconsistent(mutate: impl FnOnce(&mut Summary)) -> DecodeError {
    let mut s = worst_case();
    let _ = encode(&mut s);
    mutate(&mut s);
    Summary::decode(&reencode(&s)).unwrap_err()
}

#[test]
fn inconsistent_fields_are_named() {
    let e = inconsistent(|s| s.run.events += 1);
    assert!(e.to_string().contains("events"), "{e}");
    let e = inconsistent(|s| {
        let last = s.syscalls.len() - 1;
        s.syscalls.swap(1, last);
    });
    assert!(e.to_string().contains("increasing"), "{e}");
    let e = inconsistent(|s| {
        let x = s
            .syscalls
            .iter_mut()
            .find(|x| x.failures.is_some())
            .unwrap();
        let f: &mut Failures = x.failures.as_mut().unwrap();
        f.errors += 1;
    });
    assert!(e.to_string().contains("errno counts"), "{e}");
    let e = inconsistent(|s| {
        let x = s.syscalls.iter_mut().find(|x| x.spread.is_some()).unwrap();
        x.spread.as_mut().unwrap().histogram.counts[0] += 1;
    });
    assert!(e.to_string().contains("histogram"), "{e}");
    let e = inconsistent(|s| s.facts.extra[0].key = facts::truncated("bad key"));
    assert!(e.to_string().contains("facts"), "{e}");
}

#[test]
fn decodes_on_a_small_stack() {
    // The service decodes on async worker threads (2 MiB stacks) and the
    // Android shim on JVM threads: with the summary itself on the heap,
    // decoding must need little stack even in unoptimized builds.
    let bytes = encode(&mut worst_case());
    let stack = if cfg!(debug_assertions) { 256 } else { 128 } * 1024;
    let h = std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            let mut out = Box::new(Summary::empty());
            Summary::decode_into(&bytes, &mut out).map(|()| out.syscalls.len())
        })
        .unwrap();
    assert!(h.join().unwrap().unwrap() > 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2100)) {
        let _ = Summary::decode(&bytes);
    }

    #[test]
    fn flipped_bytes_never_panic(pos in 0usize..4096, val in any::<u8>()) {
        static WORST: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        let mut bytes = WORST.get_or_init(|| encode(&mut worst_case())).clone();
        let i = pos % bytes.len();
        bytes[i] = val;
        if let Ok(s) = Summary::decode(&bytes) {
            // Whatever decodes is consistent.
            prop_assert!(s.validate().is_ok());
        }
    }
}

#[test]
fn malformed_fields_are_explained_in_the_decoders_own_words() {
    // Version 1, a 16-byte id, then a run record whose first number never
    // ends (every byte has the continuation bit).
    let mut bytes = vec![1u8];
    bytes.extend_from_slice(&[7u8; 16]);
    bytes.extend_from_slice(&[0xffu8; 12]);
    let err = Summary::decode(&bytes).unwrap_err();
    assert!(matches!(err, DecodeError::Malformed(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with("malformed summary: "), "{text}");
    for postcard_words in ["varint", "Found", "usize", "platform"] {
        assert!(!text.contains(postcard_words), "{text}");
    }
    assert!(text.contains("number"), "{text}");
}

/// Whatever the buffer, an encoding that fits decodes to the folded summary:
/// every stage of folding (entries, then peers, then in-flight
/// descriptions) leaves a valid summary.
#[test]
fn every_fold_stage_decodes() {
    let mut stages = std::collections::BTreeSet::new();
    for cap in (200..=MAX_ENCODED_LEN).step_by(13) {
        let mut s = worst_observed();
        let mut buf = vec![0u8; cap];
        let Ok(bytes) = s.encode(&mut buf) else {
            continue;
        };
        let d = Summary::decode(bytes).unwrap_or_else(|e| panic!("cap {cap}: {e}"));
        assert_eq!(d, s);
        stages.insert((d.peers.list.len(), d.in_flight.oldest.len()));
    }
    // Some encodings dropped in-flight descriptions.
    assert!(
        stages.iter().any(|(p, f)| *p == 0 && *f < MAX_IN_FLIGHT),
        "{stages:?}"
    );
}
