//! `edge-agent show`'s views of format version 2: the window, stream and
//! device, the CPU time, the calls in flight and the peers, in the table and
//! in the JSON; and a version 1 summary, which has none of them.

use agent_core::{
    Arch, Collector, CpuTime, DeviceId, Exit, Facts, FdKind, InFlight, InFlightCall, Origin,
    PeerAddr, PeerIp, RunId, RunRecord, StreamId, Summary, SyscallEvent, SyscallId,
};

const START: u64 = 1_763_700_000_000_000_000;
const CLIENT: PeerAddr = PeerAddr {
    transport: FdKind::Tcp,
    ip: PeerIp::V4([192, 0, 2, 7]),
    port: 5432,
};
const RESOLVER: PeerAddr = PeerAddr {
    transport: FdKind::Udp,
    ip: PeerIp::V6([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
    port: 53,
};

fn nr(name: &str) -> u32 {
    SyscallId::from_name(name)
        .unwrap()
        .to_raw(Arch::X86_64)
        .unwrap()
}

/// Window 3 of a 10 s stream: reads from a database peer (one failing
/// with EAGAIN), a DNS query, and a read still blocked at the cut.
fn window() -> Summary {
    let mut c: Collector = Collector::new(0);
    let mut at = 1_000;
    for i in 0..5u64 {
        c.record(&SyscallEvent {
            tid: 11,
            arch: Arch::X86_64,
            nr: nr("read"),
            args: [4, 0, 512, 0, 0, 0],
            ret: if i == 4 { -11 } else { 100 },
            entry_ns: at,
            exit_ns: at + 3_000,
            fd_kind: FdKind::Tcp,
            peer: Some(CLIENT),
        });
        at += 10_000;
    }
    c.record(&SyscallEvent {
        tid: 12,
        arch: Arch::X86_64,
        nr: nr("sendto"),
        args: [5, 0, 40, 0, 0, 0],
        ret: 40,
        entry_ns: at,
        exit_ns: at + 2_000,
        fd_kind: FdKind::Udp,
        peer: Some(RESOLVER),
    });
    let run = RunRecord {
        window: 3,
        ..RunRecord::new(START, 10_000_000_000, Exit::Running, Arch::X86_64)
    };
    let mut facts = Facts::new();
    facts.program = agent_core::facts::truncated("pgbouncer");
    let mut s = c.summarize(RunId([0x5a; 16]), run, facts);
    s.origin = Origin {
        device: DeviceId([0xde; 16]),
        stream: StreamId([0x57; 16]),
        window_ns: 10_000_000_000,
    };
    s.cpu = Some(CpuTime {
        user_ns: 120_000_000,
        system_ns: 30_000_000,
    });
    let mut oldest = heapless::Vec::new();
    oldest
        .push(InFlightCall {
            tid: 13,
            id: SyscallId::from_name("read").unwrap(),
            fd_kind: FdKind::Tcp,
            peer: Some(CLIENT),
            start_unix_ns: START - 2_500_000_000,
        })
        .unwrap();
    s.in_flight = InFlight { count: 1, oldest };
    // What the device would send: it must encode and decode unchanged.
    let mut buf = [0u8; agent_core::MAX_ENCODED_LEN];
    let bytes = s.encode(&mut buf).unwrap().to_vec();
    assert_eq!(Summary::decode(&bytes).unwrap(), s);
    s
}

#[test]
fn the_table_shows_the_window_cpu_in_flight_calls_and_peers() {
    let t = summary_view::table(&window());
    let has = |needle: &str| assert!(t.contains(needle), "no {needle:?} in\n{t}");
    has("window 3 (length 10.000 s)");
    has("2025-11-21T04:40:00.000000Z .. 2025-11-21T04:40:10.000000Z");
    has(&format!("stream {}", "57".repeat(16)));
    has(&format!("device id {}", "de".repeat(16)));
    has("cpu user 0.120000 s  system 0.030000 s  (wall 10.000000 s)");
    // The blocked read: its thread, peer, start and how long it had waited
    // at the cut (2.5 s before the window plus the 10 s window).
    has("in flight at the cut: 1 call(s)");
    let blocked = t
        .lines()
        .find(|l| l.contains("2025-11-21T04:39:57.500000Z"))
        .unwrap_or_else(|| panic!("no in-flight row in\n{t}"));
    for part in ["13", "read", "tcp 192.0.2.7:5432", "12.500000"] {
        assert!(blocked.contains(part), "{part:?} not in {blocked:?}");
    }
    // The peers, busiest first, with their last call.
    has("peers:");
    let rows: Vec<&str> = t
        .lines()
        .skip_while(|l| !l.starts_with("peers:"))
        .skip(2)
        .collect();
    assert!(rows[0].contains("tcp 192.0.2.7:5432"), "{t}");
    let fields: Vec<&str> = rows[0].split_whitespace().collect();
    // calls 5, bytes 400 (4 successful reads of 100), 15 us in all, 1 error,
    // the last call the failed read.
    assert_eq!(&fields[2..7], ["5", "400", "0.000015", "3.0", "1"], "{t}");
    assert!(
        rows[0].contains("read = EAGAIN at 2025-11-21T04:40:00"),
        "{t}"
    );
    assert!(rows[1].contains("udp [2001:db8::1]:53"), "{t}");
}

#[test]
fn the_json_has_the_version_2_fields() {
    let v = summary_view::to_json(&window());
    assert_eq!(v["run"]["window"], 3);
    assert_eq!(v["origin"]["device"], "de".repeat(16));
    assert_eq!(v["origin"]["stream"], "57".repeat(16));
    assert_eq!(v["origin"]["window_ns"], 10_000_000_000u64);
    assert_eq!(v["cpu"]["user_ns"], 120_000_000);
    assert_eq!(v["cpu"]["system_ns"], 30_000_000);
    let blocked = &v["in_flight"]["oldest"][0];
    assert_eq!(v["in_flight"]["count"], 1);
    assert_eq!(blocked["tid"], 13);
    assert_eq!(blocked["syscall"], "read");
    assert_eq!(blocked["fd_kind"], "tcp");
    assert_eq!(
        blocked["peer"],
        serde_json::json!({"transport": "tcp", "address": "192.0.2.7", "port": 5432})
    );
    assert_eq!(blocked["start_unix_ns"], START - 2_500_000_000);
    let db = &v["peers"]["list"][0];
    assert_eq!(db["address"], "192.0.2.7");
    assert_eq!(db["calls"], 5);
    assert_eq!(db["bytes"], 400);
    assert_eq!(db["total_ns"], 15_000);
    assert_eq!(db["mean_ns"], 3_000.0);
    assert_eq!(db["errors"], 1);
    assert_eq!(db["last"]["syscall"], "read");
    assert_eq!(db["last"]["result"], -11);
    assert_eq!(db["last"]["errno"], "EAGAIN");
    // The collector's clock starts at 0 = START: the last read ended at
    // 41 us + 3 us.
    assert_eq!(db["last"]["end_unix_ns"], START + 44_000);
    let dns = &v["peers"]["list"][1];
    assert_eq!(
        (&dns["transport"], &dns["address"], &dns["port"]),
        (
            &serde_json::json!("udp"),
            &serde_json::json!("2001:db8::1"),
            &serde_json::json!(53)
        )
    );
    assert_eq!(dns["last"]["errno"], serde_json::Value::Null);
    assert_eq!(v["peers"]["rest"]["peers"], 0);
}

#[test]
fn a_version_1_summary_shows_unknown_origin_and_no_new_sections() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent-core/tests/fixtures/v1-wget.bin");
    let s = summary_view::file::read_summary(&path).unwrap();
    let v = summary_view::to_json(&s);
    assert_eq!(v["origin"]["device"], serde_json::Value::Null);
    assert_eq!(v["origin"]["stream"], serde_json::Value::Null);
    assert_eq!(v["origin"]["window_ns"], 0);
    assert_eq!(v["cpu"], serde_json::Value::Null);
    assert_eq!(
        v["in_flight"],
        serde_json::json!({"count": 0, "oldest": []})
    );
    assert_eq!(v["peers"]["list"], serde_json::json!([]));
    let t = summary_view::table(&s);
    assert!(t.contains("whole run"), "{t}");
    assert!(t.contains("stream unknown  device id unknown"), "{t}");
    assert!(t.contains("cpu not measured"), "{t}");
    assert!(!t.contains("in flight") && !t.contains("peers:"), "{t}");
}

/// Format version 3: the kind, how late the trace began and the I/O bytes,
/// in the table and in the JSON, for a late attach, a trace from the start,
/// a light record and a version 2 summary (coverage not known).
#[test]
fn the_version_3_fields_are_shown() {
    let mut late = window();
    late.coverage = agent_core::Coverage::attached(1_250_000_000);
    late.io = Some(agent_core::IoBytes {
        read: 4096,
        written: 10,
    });
    let t = summary_view::table(&late);
    assert!(
        t.contains("trace began 1.250 s after the process started"),
        "{t}"
    );
    assert!(t.contains("io read 4096 bytes  written 10 bytes"), "{t}");
    let v = summary_view::to_json(&late);
    assert_eq!(v["kind"], "full");
    assert_eq!(
        v["coverage"],
        serde_json::json!({"late_ns": 1_250_000_000u64, "from_start": false, "began_late": true, "source": "kernel"})
    );
    assert_eq!(v["io"], serde_json::json!({"read": 4096, "written": 10}));

    let mut whole = window();
    whole.coverage = agent_core::Coverage::FROM_START;
    let t = summary_view::table(&whole);
    assert!(
        t.contains("trace began before the program's first syscall"),
        "{t}"
    );

    let light = Summary::light(
        RunId([3; 16]),
        RunRecord::new(START, 1_000_000, Exit::Code(0), Arch::X86_64),
        Facts::new(),
        Origin::default(),
        None,
        None,
    );
    let t = summary_view::table(&light);
    assert!(t.contains("light record"), "{t}");
    assert!(
        !t.contains("trace began") && !t.contains("trace start"),
        "{t}"
    );
    assert_eq!(summary_view::to_json(&light)["kind"], "light");

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent-core/tests/fixtures/v2-wget.bin");
    let s = summary_view::file::read_summary(&path).unwrap();
    assert!(summary_view::table(&s).contains("trace start not known"));
    assert_eq!(summary_view::to_json(&s)["io"], serde_json::Value::Null);
}

/// Format version 4: how the calls were observed, in the table (so on the
/// web UI's run page) and in the JSON; a version 2 summary was seen by the
/// kernel.
#[test]
fn the_source_of_the_calls_is_shown() {
    let mut inproc = window();
    inproc.coverage = agent_core::Coverage::in_process_from_start();
    let t = summary_view::table(&inproc);
    assert!(
        t.contains("calls seen: in-process (libc calls): no raw syscall()"),
        "{t}"
    );
    assert!(
        t.contains("trace began before the program's first syscall"),
        "{t}"
    );
    assert_eq!(
        summary_view::to_json(&inproc)["coverage"]["source"],
        "in-process"
    );

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent-core/tests/fixtures/v2-wget.bin");
    let s = summary_view::file::read_summary(&path).unwrap();
    let t = summary_view::table(&s);
    assert!(t.contains("calls seen: kernel (every syscall)"), "{t}");
    assert_eq!(summary_view::to_json(&s)["coverage"]["source"], "kernel");

    let light = Summary::light(
        RunId([4; 16]),
        RunRecord::new(START, 1_000_000, Exit::Code(0), Arch::X86_64),
        Facts::new(),
        Origin::default(),
        None,
        None,
    );
    assert!(!summary_view::table(&light).contains("calls seen"));
}
