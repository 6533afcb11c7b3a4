//! The semantic peer methods (`--method errno|hang`) on synthetic fleets:
//! 4 servers (glusterfsd, role server, an `addr` fact each) and 3 clients
//! (python3, role client) × 120 one-second windows, training on the first
//! 60; the fault's traces are added to some windows (fixtures::synth).

use agent_core::{FdKind, Summary};
use diagnose::peers::fleet::{Fleet, Range};
use diagnose::peers::{analyse, report, Method, Options, PeerDiagnosis};
use fixtures::synth::{add_failures, add_in_flight, add_peer, silence, FleetSpec};

const TRAIN: u64 = 60;
const WINDOWS: u64 = 120;
const SECOND: u64 = 1_000_000_000;
const ENOSPC: u16 = 28;
const ENOENT: u16 = 2;
const ENOTCONN: u16 = 107;

fn servers() -> FleetSpec {
    FleetSpec::new(4, WINDOWS)
}

fn clients() -> FleetSpec {
    FleetSpec {
        program: "python3".into(),
        role: Some("client".into()),
        seed: 2,
        ..FleetSpec::new(3, WINDOWS)
    }
}

fn server_ip(d: usize) -> [u8; 4] {
    [10, 214, 0, d as u8 + 1]
}

/// A device's window: (is it a server, its index, the window index).
type Edit<'a> = &'a dyn Fn(bool, usize, u64, &mut Summary) -> Keep;

/// Whether an edited window is kept (a crashed server sends none).
#[derive(PartialEq)]
enum Keep {
    Yes,
    No,
}

fn fleet_with(edit: Edit) -> Fleet {
    let (s, c) = (servers(), clients());
    let training = Range {
        since: s.window_start(0),
        until: s.window_start(TRAIN),
    };
    let diagnosis = Range {
        since: s.window_start(TRAIN),
        until: s.window_start(WINDOWS),
    };
    let mut fleet = Fleet::new(training, diagnosis, 10);
    for w in 0..WINDOWS {
        for (server, spec) in [(true, &s), (false, &c)] {
            for d in 0..spec.devices {
                let mut summary = spec.window(d, w);
                if server {
                    let ip = server_ip(d);
                    let addr = format!("{}.{}.{}.{}", ip[0], ip[1], ip[2], ip[3]);
                    summary.facts.add("addr", &addr).unwrap();
                }
                if edit(server, d, w, &mut summary) == Keep::Yes {
                    fleet.add(&summary);
                }
            }
        }
    }
    fleet
}

fn semantic_only() -> Options {
    Options {
        median: false,
        histogram: false,
        ..Options::default()
    }
}

fn diagnose(edit: Edit) -> PeerDiagnosis {
    analyse(&fleet_with(edit), &semantic_only()).unwrap()
}

/// (server?, index, method, cause, metric) of each finding.
fn found(d: &PeerDiagnosis) -> Vec<(bool, usize, Method, &'static str, String)> {
    let (s, c) = (servers(), clients());
    let mut v: Vec<_> = d
        .findings
        .iter()
        .map(|f| {
            let id = d.devices[f.device].id;
            let (server, index) = match (0..s.devices).find(|i| s.device_id(*i) == id) {
                Some(i) => (true, i),
                None => (
                    false,
                    (0..c.devices)
                        .find(|i| c.device_id(*i) == id)
                        .expect("a finding names a device of the fleet"),
                ),
            };
            (server, index, f.method, f.cause.name(), f.metric.clone())
        })
        .collect();
    v.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    v
}

#[test]
fn a_fault_free_fleet_has_no_semantic_findings() {
    let d = diagnose(&|_, _, _, _| Keep::Yes);
    assert_eq!(found(&d), vec![]);
}

/// Server 2's writes fail ENOSPC in window 90, client 1's 0.2 s later.
fn enospc(server: bool, d: usize, w: u64, s: &mut Summary) -> Keep {
    if w == 90 && server && d == 2 {
        add_failures(
            s,
            "pwrite64",
            FdKind::File,
            ENOSPC,
            5,
            300_000_000,
            400_000_000,
        );
    }
    if w == 90 && !server && d == 1 {
        add_failures(
            s,
            "write",
            FdKind::File,
            ENOSPC,
            1,
            600_000_000,
            600_000_000,
        );
    }
    Keep::Yes
}

#[test]
fn errno_names_the_server_whose_errno_reached_a_client() {
    let d = diagnose(&enospc);
    assert_eq!(
        found(&d),
        vec![(true, 2, Method::Errno, "errno", "ENOSPC".to_string())]
    );
    let f = &d.findings[0];
    assert_eq!(f.first_window_unix_ns, servers().window_start(90));
    assert_eq!(f.score, 5.0);
    assert!(f.evidence.contains("pwrite64"), "{}", f.evidence);
    assert!(f.evidence.contains("1 client device(s)"), "{}", f.evidence);
    // The same in JSON, in the shape.
    let json = report::json(&d);
    assert_eq!(json["findings"][0]["method"], "errno");
    assert_eq!(json["findings"][0]["cause"], "errno");
    assert_eq!(json["findings"][0]["metric"], "ENOSPC");
}

#[test]
fn errno_needs_the_client_to_get_the_same_errno_in_time() {
    // Only the server fails: nothing reached a client.
    let d = diagnose(&|server, d, w, s| {
        if w == 90 && server && d == 2 {
            add_failures(s, "pwrite64", FdKind::File, ENOSPC, 5, 0, 1000);
        }
        Keep::Yes
    });
    assert_eq!(found(&d), vec![]);
    // The client's ENOSPC 2.5 s later: outside ±1.5 s, inside ±3 s.
    let late = |server: bool, d: usize, w: u64, s: &mut Summary| {
        if w == 90 && server && d == 2 {
            add_failures(s, "pwrite64", FdKind::File, ENOSPC, 5, 0, 100_000_000);
        }
        if w == 92 && !server && d == 0 {
            add_failures(
                s,
                "write",
                FdKind::File,
                ENOSPC,
                1,
                600_000_000,
                600_000_000,
            );
        }
        Keep::Yes
    };
    assert_eq!(found(&diagnose(&late)), vec![]);
    let mut wide = semantic_only();
    wide.errno_params.window_ns = 3 * SECOND;
    let d = analyse(&fleet_with(&late), &wide).unwrap();
    assert_eq!(d.findings.len(), 1);
    // Another errno at the client does not match.
    let other = |server: bool, d: usize, w: u64, s: &mut Summary| {
        if w == 90 && server && d == 2 {
            add_failures(s, "pwrite64", FdKind::File, ENOSPC, 5, 0, 100_000_000);
        }
        if w == 90 && !server && d == 0 {
            add_failures(s, "write", FdKind::File, 5, 1, 200_000_000, 200_000_000);
        }
        Keep::Yes
    };
    assert_eq!(found(&diagnose(&other)), vec![]);
}

#[test]
fn errno_ignores_errnos_seen_in_training() {
    // Every server's openat fails ENOENT now and then, in training too;
    // a client's ENOENT at the same time is no propagated error.
    let d = diagnose(&|server, d, w, s| {
        if server && w % 7 == d as u64 {
            add_failures(s, "openat", FdKind::None, ENOENT, 2, 100, 200);
        }
        if !server && w == 92 && d == 0 {
            add_failures(s, "openat", FdKind::None, ENOENT, 1, 100, 100);
        }
        Keep::Yes
    });
    assert_eq!(found(&d), vec![]);
}

/// In window 90 the lookups of the servers `at` names fail ENOENT and
/// client 0's access does too, 0.1 s later (a small-file workload creating
/// new files).
fn lookups_fail(at: bool, server: bool, d: usize, w: u64, s: &mut Summary) -> Keep {
    if w == 90 && at {
        add_failures(
            s,
            "lgetxattr",
            FdKind::None,
            ENOENT,
            40,
            200_000_000,
            700_000_000,
        );
    }
    if w == 90 && !server && d == 0 {
        add_failures(
            s,
            "faccessat2",
            FdKind::None,
            ENOENT,
            3,
            300_000_000,
            600_000_000,
        );
    }
    Keep::Yes
}

#[test]
fn an_errno_from_most_servers_at_once_is_the_workloads_not_a_culprit() {
    // Every server's lookups fail ENOENT in window 90 and a client's
    // access does too (a small-file workload creating new files): no
    // server stands out, so a note instead of four findings.
    let d = diagnose(&|server, d, w, s| lookups_fail(server && w == 90, server, d, w, s));
    assert_eq!(found(&d), vec![]);
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("ENOENT from 4 of the 4 glusterfsd servers up")),
        "{:?}",
        d.notes
    );
    // Three of the four, all up (a brick back from a hang while the
    // others' lookups fail as it heals): still the fleet's, not three
    // culprits standing out from one.
    let d = diagnose(&|server, d, w, s| lookups_fail(server && d < 3, server, d, w, s));
    assert_eq!(found(&d), vec![]);
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("ENOENT from 3 of the 4 glusterfsd servers up")),
        "{:?}",
        d.notes
    );
    // Two of the four: no majority; they stand out, and are named.
    let d = diagnose(&|server, d, w, s| lookups_fail(server && d < 2, server, d, w, s));
    assert_eq!(found(&d).len(), 2, "{:?}", found(&d));
}

#[test]
fn an_errno_from_every_server_up_while_one_is_silent_is_the_workloads() {
    // Server 3 is hung (no call from window 85 on) and the other three
    // return ENOENT at once, matched at a client (GlusterFS's lookups
    // after a brick hangs): every server that was up, so no culprit among
    // them; the silent one is the hang method's.
    let d = diagnose(&|server, d, w, s| {
        if server && d == 3 && w >= 85 {
            silence(s);
        }
        lookups_fail(server && d < 3, server, d, w, s)
    });
    let errno: Vec<_> = found(&d)
        .into_iter()
        .filter(|f| f.2 == Method::Errno)
        .collect();
    assert_eq!(errno, vec![], "{:?}", found(&d));
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("ENOENT from 3 of the 3 glusterfsd servers up")),
        "{:?}",
        d.notes
    );
}

/// Server 1 is killed in window 90 (no windows after); from then the
/// clients' opens fail ENOTCONN.
fn crash(server: bool, d: usize, w: u64, s: &mut Summary) -> Keep {
    if server && d == 1 && w > 90 {
        return Keep::No;
    }
    if !server && (90..95).contains(&w) {
        add_failures(
            s,
            "openat",
            FdKind::None,
            ENOTCONN,
            2,
            500_000_000,
            700_000_000,
        );
    }
    Keep::Yes
}

#[test]
fn hang_method_names_the_crashed_server_that_stopped_sending_windows() {
    let d = diagnose(&crash);
    assert_eq!(
        found(&d),
        vec![(true, 1, Method::Hang, "crash", "ENOTCONN".to_string())]
    );
    let f = &d.findings[0];
    assert!(f.evidence.contains("made no call"), "{}", f.evidence);
    assert!(f.evidence.contains("3 client device(s)"), "{}", f.evidence);
}

#[test]
fn a_connection_error_with_every_server_alive_names_no_one() {
    let d = diagnose(&|server, _, w, s| {
        if !server && w == 90 {
            add_failures(
                s,
                "openat",
                FdKind::None,
                ENOTCONN,
                2,
                500_000_000,
                700_000_000,
            );
        }
        Keep::Yes
    });
    assert_eq!(found(&d), vec![]);
    assert!(
        d.notes.iter().any(|n| n.contains("no server quiet")),
        "{:?}",
        d.notes
    );
}

/// Server 3 is stopped from window 85: its windows have no calls; client
/// 0's write, started 0.2 s into window 85, never returns.
fn hung(server: bool, d: usize, w: u64, s: &mut Summary, from: u64) -> Keep {
    let start = servers().window_start(from) + 200_000_000;
    if server && d == 3 && w >= from {
        silence(s);
    }
    if !server && d == 0 && w >= from {
        add_in_flight(s, 4242, "write", FdKind::File, start);
        if w > from {
            silence(s);
        }
    }
    Keep::Yes
}

#[test]
fn hang_names_the_stopped_server_once_a_call_is_in_flight_30_s() {
    let d = diagnose(&|server, d, w, s| hung(server, d, w, s, 85));
    assert_eq!(
        found(&d),
        vec![(true, 3, Method::Hang, "hang", "write".to_string())]
    );
    // Detected at the timeout: 30 s after the call began.
    let f = &d.findings[0];
    assert_eq!(f.first_window_unix_ns, servers().window_start(115));
    // A call in flight 25 s (from window 95) is no hang yet.
    let d = diagnose(&|server, d, w, s| hung(server, d, w, s, 95));
    assert_eq!(found(&d), vec![]);
    // Unless the timeout is shorter.
    let mut short = semantic_only();
    short.hang_params.hang_after_ns = 20 * SECOND;
    let d = analyse(
        &fleet_with(&|server, d, w, s| hung(server, d, w, s, 95)),
        &short,
    )
    .unwrap();
    assert_eq!(d.findings.len(), 1);
}

#[test]
fn calls_that_wait_by_nature_are_no_hang() {
    let spec = servers();
    let d = diagnose(&|server, d, w, s| {
        if !server && d == 0 {
            // A futex wait (a wait by its name) from window 84 on; a read
            // on a pipe that waited across training windows too (a wait
            // learnt), and again from window 84.
            if w >= 84 {
                add_in_flight(s, 1, "futex", FdKind::None, spec.window_start(84));
                add_in_flight(s, 2, "read", FdKind::Pipe, spec.window_start(84));
            } else if (10..20).contains(&w) {
                add_in_flight(s, 2, "read", FdKind::Pipe, spec.window_start(10));
            }
        }
        // A server quiet from window 85, which a real hang would blame.
        if server && d == 3 && w >= 85 {
            silence(s);
        }
        Keep::Yes
    });
    assert_eq!(found(&d), vec![]);
}

#[test]
fn a_call_stalled_a_moment_in_training_is_no_wait_by_nature() {
    // Client 0's write stalled across training windows 31 and 32 (a call
    // behind a TCP retransmission under packet loss): not a wait of its
    // program, so the same call stuck on the stopped server from window
    // 85 is still a hang. Across 5 training windows it is one.
    let stalled = |windows: std::ops::Range<u64>| {
        move |server: bool, d: usize, w: u64, s: &mut Summary| {
            if !server && d == 0 && windows.contains(&w) {
                let start = servers().window_start(windows.start - 1) + 500_000_000;
                add_in_flight(s, 7, "write", FdKind::File, start);
            }
            hung(server, d, w, s, 85)
        }
    };
    let d = diagnose(&stalled(31..33));
    assert_eq!(
        found(&d),
        vec![(true, 3, Method::Hang, "hang", "write".to_string())]
    );
    let d = diagnose(&stalled(31..36));
    assert_eq!(found(&d), vec![]);
}

#[test]
fn hang_names_the_server_whose_socket_went_unanswered_at_the_clients() {
    // Every server keeps making calls (a hung thread, not a stopped
    // process), but at the clients the last call on server 2's socket is
    // the request (writev) while the others' is their answer (readv).
    let t0 = servers().window_start(85) + 200_000_000;
    let d = diagnose(&|server, d, w, s| {
        if !server && w == 85 {
            for srv in 0..4 {
                let last = if srv == 2 { "writev" } else { "readv" };
                add_peer(
                    s,
                    server_ip(srv),
                    49152,
                    10,
                    last,
                    100,
                    t0 + 1000 * srv as u64,
                );
            }
        }
        if !server && d == 0 && w >= 85 {
            add_in_flight(s, 7, "newfstatat", FdKind::None, t0);
        }
        Keep::Yes
    });
    assert_eq!(
        found(&d),
        vec![(true, 2, Method::Hang, "hang", "newfstatat".to_string())]
    );
    assert!(
        d.findings[0].evidence.contains("last call on its socket"),
        "{}",
        d.findings[0].evidence
    );
}

#[test]
fn semantic_methods_run_with_fewer_than_three_peers_of_a_program() {
    // Two servers and two clients: too few for the median and the
    // histograms (a note says so), enough for errno.
    let fleet = fleet_with(&|server, d, w, s| {
        if (server && d < 2) || (!server && d == 2) {
            return Keep::No;
        }
        enospc(server, d, w, s)
    });
    let d = analyse(&fleet, &Options::default()).unwrap();
    assert_eq!(
        found(&d),
        vec![(true, 2, Method::Errno, "errno", "ENOSPC".to_string())]
    );
    assert!(
        d.notes.iter().any(|n| n.contains("fewer than 3")),
        "{:?}",
        d.notes
    );
    // The median and histogram methods alone still refuse.
    let statistical = Options {
        link: false,
        errno: false,
        hang: false,
        semantic: false,
        wait: false,
        ..Options::default()
    };
    let err = analyse(&fleet, &statistical).unwrap_err().to_string();
    assert!(err.contains("fewer than 3 devices"), "{err}");
}
