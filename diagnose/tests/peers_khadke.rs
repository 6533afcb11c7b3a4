//! Khadke et al.'s methods as the paper writes them (`--strict-paper`),
//! the semantic method (§4.3), and training on more than one fault-free
//! range (`--also-train`), on synthetic fleets (fixtures::synth): 5 devices
//! × 120 one-second windows, training on the first 60, a fault in one
//! device from window 80 on.

use diagnose::peers::fleet::{Fleet, Range};
use diagnose::peers::phase::Phase;
use diagnose::peers::request::Methods;
use diagnose::peers::{analyse, report, Method, Options, PeerDiagnosis};
use fixtures::synth::{Fault, FleetSpec};

const TRAIN: u64 = 60;
const WINDOWS: u64 = 120;
const FAULT_FROM: u64 = 80;

fn fleet_of(spec: &FleetSpec, edit: &dyn Fn(usize, u64, &mut agent_core::Summary)) -> Fleet {
    let training = Range {
        since: spec.window_start(0),
        until: spec.window_start(TRAIN),
    };
    let diagnosis = Range {
        since: spec.window_start(TRAIN),
        until: spec.window_start(WINDOWS),
    };
    let mut fleet = Fleet::new(training, diagnosis, 10);
    for w in 0..spec.windows {
        for d in 0..spec.devices {
            let mut s = spec.window(d, w);
            edit(d, w, &mut s);
            fleet.add(&s);
        }
    }
    fleet
}

fn only(methods: Methods, strict_paper: bool) -> Options {
    methods.options().strict_paper(strict_paper)
}

/// (device index in the spec, method, cause, metric) per finding.
fn found(spec: &FleetSpec, d: &PeerDiagnosis) -> Vec<(usize, Method, &'static str, String)> {
    let mut v: Vec<_> = d
        .findings
        .iter()
        .map(|f| {
            let i = (0..spec.devices)
                .find(|i| spec.device_id(*i) == d.devices[f.device].id)
                .expect("a finding names a device of the spec");
            (i, f.method, f.cause.name(), f.metric.clone())
        })
        .collect();
    v.sort_by(|a, b| (a.0, a.1, &a.3).cmp(&(b.0, b.1, &b.3)));
    v
}

fn slow_disk(device: usize) -> FleetSpec {
    FleetSpec {
        faults: vec![Fault::Disk {
            device,
            from: FAULT_FROM,
            until: WINDOWS,
            factor: 3.0,
        }],
        ..FleetSpec::new(5, WINDOWS)
    }
}

#[test]
fn strict_histogram_judges_the_disk_by_stat_and_access_only() {
    let spec = slow_disk(3);
    let fleet = fleet_of(&spec, &|_, _, _| {});
    let strict = analyse(&fleet, &only(Methods::Histogram, true)).unwrap();
    // The paper's rule: stat above range and 25 % above every other device,
    // access out of range too; file reads and writes are not its groups.
    let f = found(&spec, &strict);
    let disk: Vec<_> = f.iter().filter(|f| f.2 == "disk").cloned().collect();
    assert_eq!(
        disk,
        vec![(3, Method::Histogram, "disk", "stat".to_string())],
        "{}",
        report::text(&strict)
    );
    // And its accept rule, with no 50 % further out than the others and
    // one slice enough, flags fault-free devices whose accept time leaves
    // a 6-slice training range by a few per cent: why the default departs.
    assert!(
        f.iter().any(|f| f.0 != 3 && f.3 == "accept"),
        "{}",
        report::text(&strict)
    );
    let improved = analyse(&fleet, &only(Methods::Histogram, false)).unwrap();
    let metrics: Vec<String> = found(&spec, &improved).into_iter().map(|f| f.3).collect();
    assert!(metrics.contains(&"file-read".to_string()), "{metrics:?}");
}

#[test]
fn strict_histogram_needs_access_out_of_range_even_without_access_calls() {
    // No access calls at all: the default judges stat alone, the paper
    // asks access to be out of its range too, which a device that never
    // calls it is not.
    let spec = slow_disk(3);
    let no_access = |_: usize, _: u64, s: &mut agent_core::Summary| {
        let access = agent_core::SyscallId::from_name("access");
        s.syscalls.retain(|e| Some(e.key.id) != access);
    };
    let fleet = fleet_of(&spec, &no_access);
    let strict = analyse(&fleet, &only(Methods::Histogram, true)).unwrap();
    assert!(
        !found(&spec, &strict).iter().any(|f| f.3 == "stat"),
        "{}",
        report::text(&strict)
    );
    let improved = analyse(&fleet, &only(Methods::Histogram, false)).unwrap();
    assert!(
        found(&spec, &improved)
            .iter()
            .any(|f| f.0 == 3 && f.3 == "stat"),
        "{}",
        report::text(&improved)
    );
}

#[test]
fn semantic_names_the_slow_disk() {
    let spec = slow_disk(2);
    let fleet = fleet_of(&spec, &|_, _, _| {});
    let d = analyse(&fleet, &only(Methods::Semantic, false)).unwrap();
    let f = found(&spec, &d);
    assert_eq!(f.len(), 1, "{}", report::text(&d));
    assert_eq!((f[0].0, f[0].1, f[0].2), (2, Method::Semantic, "disk"));
    // Fault-free: nothing.
    let clean = FleetSpec::new(5, WINDOWS);
    let d = analyse(
        &fleet_of(&clean, &|_, _, _| {}),
        &only(Methods::Semantic, false),
    )
    .unwrap();
    assert!(d.findings.is_empty(), "{}", report::text(&d));
}

/// A fleet whose devices list each other as socket peers (each device its
/// next three), the calls to and from device `slow` taking `factor` times
/// as long from window 80 on; with `jitter`, ±10 % per window.
fn slow_peer(slow: Option<usize>, factor: u64, jitter: bool) -> (FleetSpec, Fleet) {
    let spec = FleetSpec {
        links: 3,
        ..FleetSpec::new(5, WINDOWS)
    };
    let addr_of: Vec<agent_core::PeerIp> = (0..spec.devices)
        .map(|d| match spec.addr(d) {
            std::net::IpAddr::V4(a) => agent_core::PeerIp::V4(a.octets()),
            std::net::IpAddr::V6(a) => agent_core::PeerIp::V6(a.octets()),
        })
        .collect();
    let fleet = fleet_of(&spec, &|d, w, s| {
        for p in s.peers.list.iter_mut() {
            let mut per_call = if jitter {
                45_000 + (w * 7 + d as u64 * 3) % 11 * 1_000
            } else {
                50_000
            };
            if let Some(bad) = slow {
                if w >= FAULT_FROM && (d == bad || p.addr.ip == addr_of[bad]) {
                    per_call *= factor;
                }
            }
            p.total_ns = p.calls * per_call;
        }
    });
    (spec, fleet)
}

#[test]
fn semantic_isolates_the_node_common_to_the_highest_pairs() {
    // Strict, only without jitter: the bare ranges of 12 training slices
    // are left by fault-free pairs too (faster or slower), which then tie
    // with the slow node's; and its file-call ranges name a fault-free
    // disk (network findings only, then).
    for (strict, jitter) in [(false, true), (true, false)] {
        let (spec, fleet) = slow_peer(Some(1), 3, jitter);
        let d = analyse(&fleet, &only(Methods::Semantic, strict)).unwrap();
        let network: Vec<_> = found(&spec, &d)
            .into_iter()
            .filter(|f| !strict || f.2 == "network")
            .collect();
        assert_eq!(
            network,
            vec![(1, Method::Semantic, "network", "socket-time".to_string())],
            "strict {strict}: {}",
            report::text(&d)
        );
    }
    let (_, clean) = slow_peer(None, 1, true);
    let d = analyse(&clean, &only(Methods::Semantic, false)).unwrap();
    assert!(d.findings.is_empty(), "{}", report::text(&d));
}

#[test]
fn more_training_ranges_are_training_but_never_the_diagnosed_one() {
    let spec = FleetSpec::new(5, WINDOWS);
    let at = |w: u64| spec.window_start(w);
    let mut fleet = Fleet::new(
        Range {
            since: at(0),
            until: at(20),
        },
        Range {
            since: at(100),
            until: at(120),
        },
        10,
    );
    assert_eq!(fleet.phase_of(at(50)), None);
    fleet.also_train(Range {
        since: at(40),
        until: at(60),
    });
    // Overlapping the diagnosis range: its windows stay diagnosis.
    fleet.also_train(Range {
        since: at(90),
        until: at(110),
    });
    assert_eq!(fleet.phase_of(at(50)), Some(Phase::Training));
    assert_eq!(fleet.phase_of(at(95)), Some(Phase::Training));
    assert_eq!(fleet.phase_of(at(105)), Some(Phase::Diagnosis));
    assert_eq!(fleet.phase_of(at(70)), None);
}
