//! The link method (`--method link`) and the setting apart of clients'
//! symptoms, on synthetic fleets: 4 servers (glusterfsd, role server) and 3
//! clients (glusterfs, role client), each with an `addr` fact, × 120
//! one-second windows, training on the first 60. Every client moves data
//! with every server each window (about 28 KB per socket call, ±10 %); a
//! slow link makes the calls over it carry about a tenth of that from
//! window 80 on: at both ends, or, as on the GlusterFS testbed, only at the
//! receiving end (the sender writes whole replies whatever the link).

use agent_core::Summary;
use diagnose::peers::fleet::{Fleet, Range};
use diagnose::peers::{analyse, report, Method, Options, PeerDiagnosis};
use fixtures::synth::{add_link, Fault, FleetSpec};

const TRAIN: u64 = 60;
const WINDOWS: u64 = 120;
const FAULT_FROM: u64 = 80;

fn servers() -> FleetSpec {
    FleetSpec::new(4, WINDOWS)
}

fn clients(faults: Vec<Fault>) -> FleetSpec {
    FleetSpec::clients(3, WINDOWS, faults)
}

/// Which link is slow.
#[derive(Clone, Copy)]
enum Slow {
    None,
    /// Every link of this server.
    Server(usize),
    /// Every link of this client.
    Client(usize),
}

/// Which ends of a link see a slow link's small pieces.
#[derive(Clone, Copy, PartialEq)]
enum Flow {
    /// Both ends alike.
    Both,
    /// Data flows from server to client (dd reads): the client receives
    /// the small pieces; the server writes 1.5 times larger pieces than
    /// the clients read, whatever the link (on the testbed a brick wrote
    /// 36-39 KB per call where its clients read 24-28 KB).
    Reads,
    /// From client to server (dd writes): the server receives the pieces.
    Writes,
}

/// The network of a synthetic fleet.
#[derive(Clone, Copy)]
struct Net {
    slow: Slow,
    flow: Flow,
    /// In the fault's windows the clients are kept waiting on the slow
    /// host: every other link is near idle (10 calls a window) but the one
    /// between server 0 and client 0.
    crowded: bool,
}

impl Net {
    fn new(slow: Slow) -> Net {
        Net {
            slow,
            flow: Flow::Both,
            crowded: false,
        }
    }
}

/// Calls and bytes per call on the link between `server` and `client` in
/// window `w`, at the server's end or the client's: 28 KB ± 10 % (a fixed
/// pattern), a tenth of it over a slow link in the fault's windows at the
/// receiving end.
fn per_call(net: Net, server: usize, client: usize, w: u64, at_server: bool) -> (u64, u64) {
    let jitter = 0.9 + 0.2 * (((w * 7 + server as u64 * 3 + client as u64 * 5) % 11) as f64 / 10.0);
    let normal = (28_000.0 * jitter) as u64;
    let faulty = w >= FAULT_FROM;
    let hit = faulty
        && match net.slow {
            Slow::None => false,
            Slow::Server(s) => s == server,
            Slow::Client(c) => c == client,
        };
    if faulty && net.crowded && !hit && (server, client) != (0, 0) {
        return (10, normal);
    }
    let sending = match net.flow {
        Flow::Both => false,
        Flow::Reads => at_server,
        Flow::Writes => !at_server,
    };
    if sending {
        // The same bytes in fewer, larger writes, slow link or not.
        (200, normal * 300 / 200)
    } else if hit {
        // The same bytes in ten times the calls.
        (3_000, normal / 10)
    } else {
        (300, normal)
    }
}

fn fleet(slow: Slow, client_faults: Vec<Fault>) -> Fleet {
    fleet_on(Net::new(slow), client_faults)
}

fn fleet_on(net: Net, client_faults: Vec<Fault>) -> Fleet {
    let (s, c) = (servers(), clients(client_faults));
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
                let mut summary: Summary = spec.window(d, w);
                let me = FleetSpec::ip(server, d);
                let addr = format!("{}.{}.{}.{}", me[0], me[1], me[2], me[3]);
                summary.facts.add("addr", &addr).unwrap();
                let others = if server { c.devices } else { s.devices };
                for o in 0..others {
                    let (srv, cli) = if server { (d, o) } else { (o, d) };
                    let (calls, per) = per_call(net, srv, cli, w, server);
                    add_link(&mut summary, FleetSpec::ip(!server, o), calls, calls * per);
                }
                fleet.add(&summary);
            }
        }
    }
    fleet
}

fn link_only() -> Options {
    Options {
        median: false,
        histogram: false,
        errno: false,
        hang: false,
        ..Options::default()
    }
}

/// (server?, index, method, cause) of each finding, sorted.
fn found(
    d: &PeerDiagnosis,
    findings: &[diagnose::peers::Finding],
) -> Vec<(bool, usize, Method, &'static str)> {
    let (s, c) = (servers(), clients(Vec::new()));
    let mut v: Vec<_> = findings
        .iter()
        .map(|f| {
            let id = d.devices[f.device].id;
            match (0..s.devices).find(|i| s.device_id(*i) == id) {
                Some(i) => (true, i, f.method, f.cause.name()),
                None => (
                    false,
                    (0..c.devices)
                        .find(|i| c.device_id(*i) == id)
                        .expect("a finding names a device of the fleet"),
                    f.method,
                    f.cause.name(),
                ),
            }
        })
        .collect();
    v.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    v
}

#[test]
fn a_fault_free_fleet_has_no_slow_link() {
    let d = analyse(&fleet(Slow::None, Vec::new()), &link_only()).unwrap();
    assert_eq!(found(&d, &d.findings), vec![]);
    assert!(d.explained.is_empty());
}

#[test]
fn a_server_behind_a_slow_link_is_named_not_its_clients() {
    let d = analyse(&fleet(Slow::Server(2), Vec::new()), &link_only()).unwrap();
    assert_eq!(
        found(&d, &d.findings),
        vec![(true, 2, Method::Link, "network")],
        "{:#?}",
        d.findings
    );
    let f = &d.findings[0];
    assert!(
        f.evidence.contains("per socket call"),
        "evidence: {}",
        f.evidence
    );
    // Flagged from the fault's first slice (windows 80-84) on, not before.
    let s = servers();
    assert_eq!(f.first_window_unix_ns, s.window_start(FAULT_FROM));
}

/// The link method's findings on a fleet with this network.
fn link_found(net: Net) -> Vec<(bool, usize, Method, &'static str)> {
    let d = analyse(&fleet_on(net, Vec::new()), &link_only()).unwrap();
    found(&d, &d.findings)
}

#[test]
fn a_slow_server_is_named_when_only_the_receiving_ends_see_it() {
    // Half of a slow server's ends (its own, when it sends; its clients',
    // when they send) look normal: a median over ends sat between the two
    // and missed 4 of 20 network-hog runs on the GlusterFS testbed.
    for flow in [Flow::Reads, Flow::Writes] {
        let slow = Net {
            flow,
            ..Net::new(Slow::Server(2))
        };
        assert_eq!(link_found(slow), vec![(true, 2, Method::Link, "network")]);
        let fault_free = Net {
            flow,
            ..Net::new(Slow::None)
        };
        assert_eq!(link_found(fault_free), vec![]);
    }
}

#[test]
fn a_slow_server_that_holds_most_of_a_slice_is_still_named() {
    // The clients wait on the slow server and barely use the others: most
    // of the slice's pairs are the slow server's, so a median over them all
    // is its own; it is measured against the others' pairs only.
    let net = Net {
        flow: Flow::Reads,
        crowded: true,
        ..Net::new(Slow::Server(2))
    };
    assert_eq!(link_found(net), vec![(true, 2, Method::Link, "network")]);
}

#[test]
fn a_client_behind_a_slow_link_is_named_not_the_servers() {
    let d = analyse(&fleet(Slow::Client(1), Vec::new()), &link_only()).unwrap();
    assert_eq!(
        found(&d, &d.findings),
        vec![(false, 1, Method::Link, "network")],
        "{:#?}",
        d.findings
    );
}

fn slow_client_files(device: usize) -> Fault {
    Fault::Disk {
        device,
        from: FAULT_FROM,
        until: WINDOWS,
        factor: 3.0,
    }
}

#[test]
fn a_clients_slow_files_while_its_server_is_flagged_are_explained_by_the_server() {
    // Client 0's file calls are slow (the median method flags it, cause
    // network: a role=client's files are across the network) while server
    // 2's links are slow: the server is the culprit, the client a symptom.
    let d = analyse(
        &fleet(Slow::Server(2), vec![slow_client_files(0)]),
        &Options::default(),
    )
    .unwrap();
    assert_eq!(
        found(&d, &d.findings),
        vec![(true, 2, Method::Link, "network")],
        "{:#?}",
        d.findings
    );
    let explained: Vec<_> = d.explained.iter().map(|e| e.finding.clone()).collect();
    let symptoms = found(&d, &explained);
    assert!(
        !symptoms.is_empty() && symptoms.iter().all(|(server, i, _, _)| !server && *i == 0),
        "explained: {symptoms:?}"
    );
    let server_id = servers().device_id(2);
    assert!(d.explained.iter().all(|e| d.devices[e.by].id == server_id));
    let json = report::json(&d);
    let hex: String = server_id.0.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(json["explained"][0]["explained_by"], hex.as_str());
    assert_eq!(json["findings"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_clients_slow_files_with_no_server_flagged_stay_a_finding() {
    let d = analyse(
        &fleet(Slow::None, vec![slow_client_files(0)]),
        &Options::default(),
    )
    .unwrap();
    let f = found(&d, &d.findings);
    assert!(
        f.contains(&(false, 0, Method::Median, "network")),
        "findings: {f:?}"
    );
    assert!(d.explained.is_empty());
}
