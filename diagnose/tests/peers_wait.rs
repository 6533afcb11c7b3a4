//! The wait method (`--method wait`) on synthetic fleets: 4 servers
//! (glusterfsd, role server) and 3 clients (glusterfs, role client), each
//! with an `addr` fact, × 120 one-second windows, training on the first
//! 60. Every client window lists every server with its most recent call;
//! fault-free, the latest of them goes round the servers (client c in
//! window w: server (w + c) mod 4), as a file system client reading its
//! files on every brick in turn. With packet loss at one server from
//! window 80 on, as on the GlusterFS testbed, the clients' latest call
//! was to it in about 4 of 5 windows (76-88 % there).

use agent_core::Summary;
use diagnose::peers::fleet::{Fleet, Range};
use diagnose::peers::metrics::Cause;
use diagnose::peers::wait::{drop_explained_by_disk, wait, WaitParams, WaitRule};
use diagnose::peers::{analyse, Finding, Method, Options, PeerDiagnosis};
use fixtures::synth::{add_peer, Fault, FleetSpec};

const TRAIN: u64 = 60;
const WINDOWS: u64 = 120;
const FAULT_FROM: u64 = 80;
const SERVERS: usize = 4;

fn servers(faults: Vec<Fault>) -> FleetSpec {
    FleetSpec {
        faults,
        ..FleetSpec::new(SERVERS, WINDOWS)
    }
}

fn clients() -> FleetSpec {
    clients_with(Vec::new())
}

fn clients_with(faults: Vec<Fault>) -> FleetSpec {
    FleetSpec::clients(3, WINDOWS, faults)
}

/// What the clients do.
#[derive(Clone, Copy, PartialEq)]
enum Clients {
    /// Their latest call goes round the servers.
    Even,
    /// From the fault on, their latest call is to this server in 4 of 5
    /// windows.
    WaitOn(usize),
    /// From the fault on, they make no call at all on this server's
    /// sockets nor any other: every server listed with the call it had
    /// before the fault (a hang: listed, but not in the window).
    Stuck(usize),
    /// From the fault on, their latest call is to this server in 4 of 5
    /// windows, but they are busy with it, not waiting: the call ended
    /// 1 ms before the window did (every client reading one brick's files
    /// at once, as at a workload's start on the testbed).
    BusyWith(usize),
    /// From the fault on, as many clients as [`UNEVEN`] says for that
    /// window wait on this server, the others go round the other servers: a lossy server
    /// held as unevenly as in the slowest receive-loss rep on the testbed.
    Uneven(usize),
    /// From the fault on, their latest call is to the first server in 4
    /// of 5 windows, waiting, until [`SHIFT_AT`], then to the second: a
    /// long wait on one server, then a short one on another (as postmark's
    /// fanned-out calls under loss, fleet run s50).
    Shifts(usize, usize),
}

/// Where [`Clients::Shifts`] moves to its second server.
const SHIFT_AT: u64 = 110;

/// Per window from the fault on (repeated): how many of the 3 clients
/// ended it waiting on the lossy server in fleet run s44c's rep 1 of
/// receive loss (from its fleet.db), the rep found 11.4 s after the fault.
const UNEVEN: [usize; 12] = [2, 2, 0, 2, 2, 2, 3, 2, 1, 2, 2, 3];

/// The server client `c`'s latest call in window `w` was to, and when
/// that call ended (ns into the window; past its 1 s: before it).
fn latest(clients: Clients, c: usize, w: u64) -> (usize, Option<u64>) {
    let round = ((w + c as u64) % SERVERS as u64) as usize;
    // Waiting on it since 100 ms before the window's end.
    let waiting = Some(900_000_000);
    match clients {
        Clients::WaitOn(s) if w >= FAULT_FROM && (w + c as u64) % 5 != 0 => (s, waiting),
        Clients::BusyWith(s) if w >= FAULT_FROM && (w + c as u64) % 5 != 0 => {
            (s, Some(999_000_000))
        }
        Clients::Uneven(s) if w >= FAULT_FROM => {
            if c < UNEVEN[(w - FAULT_FROM) as usize % 12] {
                (s, waiting)
            } else {
                // The others go round the other servers (as there).
                let other = ((w + c as u64) % (SERVERS as u64 - 1)) as usize;
                (other + usize::from(other >= s), waiting)
            }
        }
        Clients::Shifts(first, second) if w >= FAULT_FROM && (w + c as u64) % 5 != 0 => {
            (if w < SHIFT_AT { first } else { second }, waiting)
        }
        Clients::Stuck(s) if w >= FAULT_FROM => (s, None),
        _ => (round, waiting),
    }
}

/// Every window of the fleet, window by window (servers, then clients).
fn summaries(clients_do: Clients, client_faults: Vec<Fault>) -> Vec<Summary> {
    let (s, c) = (servers(Vec::new()), clients_with(client_faults));
    let mut out = Vec::new();
    for w in 0..WINDOWS {
        for d in 0..s.devices {
            let mut summary: Summary = s.window(d, w);
            let me = FleetSpec::ip(true, d);
            summary
                .facts
                .add("addr", &format!("10.214.0.{}", me[3]))
                .unwrap();
            out.push(summary);
        }
        for d in 0..c.devices {
            let mut summary: Summary = c.window(d, w);
            let me = FleetSpec::ip(false, d);
            summary
                .facts
                .add("addr", &format!("10.214.0.{}", me[3]))
                .unwrap();
            let start = c.window_start(w);
            let (to, at) = latest(clients_do, d, w);
            for srv in 0..SERVERS {
                // The latest call ends `at` into the window, the others
                // earlier; a stuck client's all before the window.
                let end = match (srv == to, at) {
                    (_, None) => c.window_start(FAULT_FROM) - 100_000_000 - srv as u64,
                    (true, Some(at)) => start + at,
                    (false, Some(_)) => start + 100_000_000 * (srv as u64 + 1),
                };
                add_peer(
                    &mut summary,
                    FleetSpec::ip(true, srv),
                    49152,
                    300,
                    "readv",
                    131_072,
                    end,
                );
            }
            out.push(summary);
        }
    }
    out
}

/// A fleet of those windows, training on the first `train` and judging
/// the ones from `judge_from` on.
fn fleet_of(all: &[Summary], train: (u64, u64), judge_from: u64) -> Fleet {
    let at = |w| servers(Vec::new()).window_start(w);
    let mut fleet = Fleet::new(
        Range {
            since: at(train.0),
            until: at(train.1),
        },
        Range {
            since: at(judge_from),
            until: at(WINDOWS),
        },
        10,
    );
    for s in all {
        fleet.add(s);
    }
    fleet
}

fn fleet(clients_do: Clients, client_faults: Vec<Fault>) -> Fleet {
    fleet_of(&summaries(clients_do, client_faults), (0, TRAIN), TRAIN)
}

fn wait_only() -> Options {
    Options {
        median: false,
        histogram: false,
        link: false,
        errno: false,
        hang: false,
        ..Options::default()
    }
}

/// (server?, index, method, cause) of each finding.
fn found(d: &PeerDiagnosis) -> Vec<(bool, usize, Method, &'static str)> {
    let (s, c) = (servers(Vec::new()), clients());
    let mut v: Vec<_> = d
        .findings
        .iter()
        .map(|f| {
            let id = d.devices[f.device].id;
            match (0..s.devices).find(|i| s.device_id(*i) == id) {
                Some(i) => (true, i, f.method, f.cause.name()),
                None => (
                    false,
                    (0..c.devices).find(|i| c.device_id(*i) == id).unwrap(),
                    f.method,
                    f.cause.name(),
                ),
            }
        })
        .collect();
    v.sort_by_key(|x| format!("{x:?}"));
    v
}

#[test]
fn clients_spread_evenly_over_the_servers_flag_nothing() {
    let d = analyse(&fleet(Clients::Even, Vec::new()), &wait_only()).unwrap();
    assert_eq!(found(&d), vec![]);
}

#[test]
fn the_server_the_clients_wait_on_is_named_with_cause_network() {
    let d = analyse(&fleet(Clients::WaitOn(2), Vec::new()), &wait_only()).unwrap();
    assert_eq!(found(&d), vec![(true, 2, Method::Wait, "network")]);
    let f = &d.findings[0];
    assert_eq!(f.metric, "wait-share");
    // Found from the fault's first windows on, not before.
    let first = (f.first_window_unix_ns - clients().window_start(0)) / 1_000_000_000;
    assert!(
        (FAULT_FROM..FAULT_FROM + 4).contains(&first),
        "first flagged window {first}"
    );
    assert!(f.score > 1.0, "{f:?}");
}

#[test]
fn clients_busy_with_one_server_are_not_waiting_on_it() {
    // All clients at one server, but each window's latest call to it
    // ended 1 ms before the window did: they work with it. Fleet run
    // s44b opened a false incident on such a pile-up (6 s at a ddr
    // training's start); the same pile-up waiting 100 ms is a fault.
    let d = analyse(&fleet(Clients::BusyWith(1), Vec::new()), &wait_only()).unwrap();
    assert_eq!(found(&d), vec![]);
    let d = analyse(&fleet(Clients::WaitOn(1), Vec::new()), &wait_only()).unwrap();
    assert_eq!(found(&d), vec![(true, 1, Method::Wait, "network")]);
}

#[test]
fn a_server_held_unevenly_is_named_within_six_windows() {
    // The windows after the fault as they came in the slowest rep (one
    // with none of the 3 clients on the lossy server): the finding must
    // be complete by the fault's 6th window, for an incident within 10 s
    // of the fault (1 s upload and 1 s tick on top of 6 windows plus the
    // fault's offset in its first window). Span 3 with 4 of 4 over
    // twice the even share took until the 10th.
    let all = summaries(Clients::Uneven(2), Vec::new());
    let judged_until = |end: u64| {
        let at = |w| servers(Vec::new()).window_start(w);
        let mut f = Fleet::new(
            Range {
                since: at(0),
                until: at(TRAIN),
            },
            Range {
                since: at(TRAIN),
                until: at(end),
            },
            10,
        );
        for s in &all {
            f.add(s);
        }
        f
    };
    let d = analyse(&judged_until(FAULT_FROM + 6), &wait_only()).unwrap();
    assert_eq!(found(&d), vec![(true, 2, Method::Wait, "network")]);
    // And nothing before the fault.
    let d = analyse(&judged_until(FAULT_FROM), &wait_only()).unwrap();
    assert_eq!(found(&d), vec![]);
}

#[test]
fn a_short_wait_beside_a_long_one_is_left_out_offline_only() {
    let shifted = fleet(Clients::Shifts(2, 0), Vec::new());
    let d = analyse(&shifted, &wait_only()).unwrap();
    assert_eq!(found(&d), vec![(true, 2, Method::Wait, "network")]);
    let every = Options {
        wait_params: WaitParams {
            dominant: false,
            ..WaitParams::default()
        },
        ..wait_only()
    };
    let d = analyse(&shifted, &every).unwrap();
    assert_eq!(
        found(&d),
        vec![
            (true, 0, Method::Wait, "network"),
            (true, 2, Method::Wait, "network")
        ]
    );
    let (a, b) = (d.findings[0].windows.len(), d.findings[1].windows.len());
    assert!(a.min(b) * 2 < a.max(b), "{a} and {b} windows");
}

#[test]
fn calls_before_the_window_are_no_sample() {
    // A hung server: the clients' latest calls were all to it, but before
    // these windows; the clients are idle, not waiting on a slow network.
    let d = analyse(&fleet(Clients::Stuck(1), Vec::new()), &wait_only()).unwrap();
    assert_eq!(found(&d), vec![]);
}

#[test]
fn a_server_the_clients_waited_on_in_training_too_is_not_flagged() {
    // Training holds the same waiting: the threshold learns it.
    let all = summaries(Clients::WaitOn(2), Vec::new());
    assert_eq!(
        wait(&fleet_of(&all, (0, TRAIN), TRAIN), &WaitParams::default())
            .0
            .len(),
        1
    );
    let late = fleet_of(&all, (FAULT_FROM, 100), 100);
    assert!(wait(&late, &WaitParams::default()).0.is_empty());
}

#[test]
fn a_wait_on_a_server_whose_disk_is_blamed_is_left_to_the_disk() {
    let finding = |device, method, cause, first: u64| Finding {
        device,
        method,
        cause,
        metric: "m".into(),
        first_window_unix_ns: first,
        last_window_unix_ns: first + 5,
        score: 2.0,
        windows: vec![first],
        evidence: String::new(),
    };
    let mut findings = vec![
        finding(1, Method::Median, Cause::Disk, 100),
        finding(1, Method::Wait, Cause::Network, 103),
        // Another server's wait, and the same server's long after.
        finding(2, Method::Wait, Cause::Network, 103),
        finding(1, Method::Wait, Cause::Network, 1_000),
    ];
    drop_explained_by_disk(&mut findings, 1, 10);
    let left: Vec<(usize, Method, u64)> = findings
        .iter()
        .map(|f| (f.device, f.method, f.first_window_unix_ns))
        .collect();
    assert_eq!(
        left,
        vec![
            (1, Method::Median, 100),
            (2, Method::Wait, 103),
            (1, Method::Wait, 1_000)
        ]
    );
}

#[test]
fn the_clients_median_findings_are_explained_by_the_waited_on_server() {
    // A client slow on its socket reads while it waits on the lossy
    // server: a symptom, set apart, not a culprit.
    let slow = vec![Fault::Network {
        device: 0,
        from: FAULT_FROM,
        until: WINDOWS,
        factor: 5.0,
    }];
    let median_only = Options {
        wait: false,
        ..Options::default()
    };
    let alone = analyse(&fleet(Clients::WaitOn(3), slow.clone()), &median_only).unwrap();
    assert!(found(&alone).contains(&(false, 0, Method::Median, "network")));
    let d = analyse(&fleet(Clients::WaitOn(3), slow), &Options::default()).unwrap();
    assert_eq!(found(&d), vec![(true, 3, Method::Wait, "network")]);
    assert!(d
        .explained
        .iter()
        .any(|e| !d.devices[e.finding.device].is_server()
            && d.devices[e.by].id == servers(Vec::new()).device_id(3)));
}

#[test]
fn evicted_training_windows_leave_no_sample() {
    // The live analysis evicts its baseline's oldest windows: their
    // samples must go with them, or the threshold would keep learning
    // from windows no longer in the baseline.
    let all = summaries(Clients::WaitOn(2), Vec::new());
    let s = servers(Vec::new());
    let index = |w: u64| (s.window_start(w) + 500_000_000) / 1_000_000_000;
    let mut f = fleet_of(&all, (FAULT_FROM, WINDOWS), WINDOWS);
    let (evicted, kept): (Vec<&Summary>, Vec<&Summary>) = all
        .iter()
        .filter(|x| x.run.start_unix_ns >= s.window_start(FAULT_FROM))
        .partition(|x| x.run.start_unix_ns < s.window_start(110));
    f.evict_training(index(110), evicted, kept);
    assert!(!f.trails.is_empty());
    for t in &f.trails {
        assert!(t.latest.keys().all(|(_, w)| *w >= index(110)));
    }
}

/// A fleet of servers only (Spark's workers: each serves the others'
/// shuffle fetches and fetches from them): every server's window lists
/// the other three, its latest call going round them; with `wait_on`,
/// from the fault on the others' latest call is to that server in 4 of 5
/// windows (it keeps going round).
fn mesh(wait_on: Option<usize>) -> Fleet {
    mesh_with(wait_on, |w, d| w >= FAULT_FROM && (w + d as u64) % 5 != 0)
}

/// [`mesh`], the others' latest call going to `wait_on` in the windows
/// `forced(window, device)` says.
fn mesh_with(wait_on: Option<usize>, forced: fn(u64, usize) -> bool) -> Fleet {
    fleet_of(&mesh_windows(wait_on, forced), (0, TRAIN), TRAIN)
}

/// The windows of [`mesh_with`]'s fleet.
fn mesh_windows(wait_on: Option<usize>, forced: fn(u64, usize) -> bool) -> Vec<Summary> {
    let s = servers(Vec::new());
    let mut all = Vec::new();
    for w in 0..WINDOWS {
        for d in 0..SERVERS {
            let mut summary: Summary = s.window(d, w);
            summary
                .facts
                .add("addr", &format!("10.214.0.{}", FleetSpec::ip(true, d)[3]))
                .unwrap();
            let others: Vec<usize> = (0..SERVERS).filter(|o| *o != d).collect();
            let mut to = others[((w + d as u64) % others.len() as u64) as usize];
            if let Some(t) = wait_on {
                if d != t && forced(w, d) {
                    to = t;
                }
            }
            let start = s.window_start(w);
            for (i, o) in others.iter().enumerate() {
                let end = if *o == to {
                    start + 900_000_000
                } else {
                    start + 100_000_000 * (i as u64 + 1)
                };
                add_peer(
                    &mut summary,
                    FleetSpec::ip(true, *o),
                    49152,
                    300,
                    "read",
                    65_536,
                    end,
                );
            }
            all.push(summary);
        }
    }
    all
}

#[test]
fn servers_of_each_other_spread_evenly_flag_nothing() {
    let d = analyse(&mesh(None), &wait_only()).unwrap();
    assert_eq!(found(&d), vec![]);
}

#[test]
fn without_clients_the_server_the_other_servers_wait_on_is_named() {
    let d = analyse(&mesh(Some(2)), &wait_only()).unwrap();
    assert_eq!(found(&d), vec![(true, 2, Method::Wait, "network")]);
    let first =
        (d.findings[0].first_window_unix_ns - servers(Vec::new()).window_start(0)) / 1_000_000_000;
    assert!(
        (FAULT_FROM..FAULT_FROM + 4).contains(&first),
        "first flagged window {first}"
    );
}

/// A worker the others end a window on somewhat more often than the rest
/// (about 0.44 of the samples, against 0.25 each fault-free): a client
/// fleet's rule (over 1.5 even shares, 3 of 4 windows) names it, the rule
/// for a fleet of servers (over 2 even shares, 4 of 4) does not: a
/// healthy Spark worker's share swings that far.
#[test]
fn servers_of_each_other_need_a_clearer_wait_than_clients() {
    let f = mesh_with(Some(2), |w, d| w >= FAULT_FROM && (w + d as u64) % 8 < 3);
    let mesh_rule = WaitParams::default();
    assert_eq!(mesh_rule.rule_for(&f), &mesh_rule.mesh);
    assert!(
        wait(&f, &mesh_rule).0.is_empty(),
        "{:?}",
        wait(&f, &mesh_rule).0
    );
    let client_rule = WaitParams {
        mesh: WaitRule::default(),
        ..WaitParams::default()
    };
    let (found, _) = wait(&f, &client_rule);
    assert_eq!(
        found.iter().map(|x| x.device).collect::<Vec<_>>(),
        vec![2],
        "with the clients' rule: {found:?}"
    );
}

/// A fleet of servers whose training holds too few judged windows for a
/// threshold of its own (three short sort jobs: 0-11 on the testbed)
/// takes the floor: run s46 rep 2's threshold came from 2 judged windows
/// in which the worker later lossy held 0.63 (× 1.25 = 0.80, over its
/// 0.75 under 50 % send loss), rep 3 had none and was not judged.
#[test]
fn servers_of_each_other_with_little_training_are_judged_by_the_floor() {
    // Worker 2 held 3 of the 4 samples in each of the 3 training windows
    // (2 of them judged), then the others wait on it from the fault on.
    let all = mesh_windows(Some(2), |w, d| {
        (57..60).contains(&w) || (w >= FAULT_FROM && (w + d as u64) % 5 != 0)
    });
    let names = |f: &Fleet, p: &WaitParams| -> Vec<usize> {
        wait(f, p).0.iter().map(|x| x.device).collect()
    };
    let mesh_rule = WaitParams::default();
    let few = fleet_of(&all, (57, 60), 60);
    assert_eq!(names(&few, &mesh_rule), vec![2]);
    assert!(
        wait(&few, &mesh_rule)
            .1
            .iter()
            .any(|n| n.contains("the floor alone")),
        "{:?}",
        wait(&few, &mesh_rule).1
    );
    // Learning from those 2 windows, as before: 0.75 × 1.25 hides it.
    let learn_any = WaitParams {
        mesh: WaitRule {
            min_trained: 0,
            ..mesh_rule.mesh
        },
        ..mesh_rule
    };
    assert_eq!(names(&few, &learn_any), Vec::<usize>::new());
    // No judged training window at all (one window: 4 samples, under the
    // 2 per window of a 4-window span): the floor, not "not judged".
    let none = fleet_of(&all, (59, 60), 60);
    assert_eq!(names(&none, &mesh_rule), vec![2]);
    assert_eq!(names(&none, &learn_any), Vec::<usize>::new());
    // Enough training windows still set the threshold: a worker held as
    // much through 40 of the 60 training windows is not flagged.
    let trained = mesh_windows(Some(2), |w, d| w >= 20 && (w + d as u64) % 5 != 0);
    let f = fleet_of(&trained, (0, TRAIN), TRAIN);
    assert_eq!(names(&f, &mesh_rule), Vec::<usize>::new());
}

/// A disk finding explains a wait finding only through at least half of
/// the wait's windows: a disk fault keeps the others waiting while the
/// disk is slow. Run s46 rep 1: `median` blamed the 50 %-send-lossy
/// worker's `dread` in 4 windows at the phase's start, and that single
/// overlapping window dropped its wait finding of 10 windows.
#[test]
fn a_disk_blamed_for_a_few_windows_of_a_long_wait_does_not_explain_it() {
    let finding = |method, cause, windows: std::ops::RangeInclusive<u64>| Finding {
        device: 1,
        method,
        cause,
        metric: "m".into(),
        first_window_unix_ns: *windows.start(),
        last_window_unix_ns: *windows.end(),
        score: 2.0,
        windows: windows.collect(),
        evidence: String::new(),
    };
    // Windows 1 ns long, the disk's span padded by 5: 100..108.
    let disk = finding(Method::Median, Cause::Disk, 100..=103);
    let kept = |wait: std::ops::RangeInclusive<u64>| {
        let mut findings = vec![disk.clone(), finding(Method::Wait, Cause::Network, wait)];
        drop_explained_by_disk(&mut findings, 1, 5);
        findings.iter().any(|f| f.method == Method::Wait)
    };
    // 1 of its 20 windows under the disk's blame: kept.
    assert!(kept(107..=126));
    // 7 of 8, and 4 of 8: the disk's.
    assert!(!kept(101..=108));
    assert!(!kept(104..=111));
    // 3 of 8: kept.
    assert!(kept(105..=112));
}
