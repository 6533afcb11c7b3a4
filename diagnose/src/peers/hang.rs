//! Crashes and hangs (Kasick et al., §7, "Crash/hang faults"): client
//! calls that fail with a connection error (a server crashed) or stay in
//! flight past a timeout (a server hung) are incidents; the culprit is the
//! server that went quiet at that moment while its peers did not:
//!
//! - **its windows**: from the incident on it made no call (or sent no
//!   window) while another server tracing the same program did;
//! - **the clients' sockets**: at a client, the most recent call on the
//!   socket to it (as the windows' socket-peer table recorded it) is older
//!   than the incident and is not the call the client last made with its
//!   other servers (the research's "last call per server socket": a
//!   request written and never answered, a connection closed). Servers are
//!   known by address from their free fact `addr`.
//!
//! Either names the server. Incidents are taken from client devices only
//! (not servers): the client's view is what tells a crash or hang.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use agent_core::summary::LastCall;
use agent_core::SyscallId;
use summary_view::errno_name;

use super::errno::trained_errnos;
use super::fleet::{ip_of, Fleet};
use super::metrics::Cause;
use super::{Finding, Method};

/// The method's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HangParams {
    /// A client call in flight this long is a hang, ns (the research's
    /// 30 s).
    pub hang_after_ns: u64,
    /// Windows after a crash incident a server must stay quiet in.
    pub quiet_windows: u64,
}

impl Default for HangParams {
    fn default() -> HangParams {
        HangParams {
            hang_after_ns: 30_000_000_000,
            quiet_windows: 3,
        }
    }
}

/// Errnos of a lost connection: refused, reset, broken pipe, and
/// GlusterFS's "transport endpoint is not connected" (what its client
/// returns for a brick it lost; PVFS's returned ECONNREFUSED).
pub const CONNECTION_ERRNOS: [u16; 4] = [111, 104, 32, 107];

/// Calls that wait by nature (for an event, a timer, a child, a lock):
/// long in flight without anything being wrong.
const WAITS: [&str; 21] = [
    "futex",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "nanosleep",
    "clock_nanosleep",
    "wait4",
    "waitid",
    "pause",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "accept",
    "accept4",
    "restart_syscall",
    "io_getevents",
    "io_uring_enter",
    "msgrcv",
];

/// A crash or hang seen at a client.
#[derive(Debug, Clone, PartialEq)]
struct Incident {
    cause: Cause,
    /// The client device.
    client: usize,
    /// Crash: the errno's name; hang: the syscall's.
    what: String,
    /// When it began: the failure, or the start of the call that hung.
    since_unix_ns: u64,
    /// When it was certain: a few windows after the failure, or the
    /// timeout.
    until_unix_ns: u64,
}

/// The incidents of the fleet's client devices.
fn incidents(fleet: &Fleet, params: &HangParams) -> Vec<Incident> {
    let normal = trained_errnos(fleet);
    let waits: BTreeSet<SyscallId> = WAITS
        .iter()
        .filter_map(|n| SyscallId::from_name(n))
        .collect();
    // Calls that some device of a program left in flight across a whole
    // training window: waits of that program.
    let mut program_waits: BTreeMap<&str, BTreeSet<_>> = BTreeMap::new();
    for (d, device) in fleet.devices.iter().enumerate() {
        program_waits
            .entry(device.program())
            .or_default()
            .extend(fleet.trails[d].waits());
    }
    let quiet_ns = params.quiet_windows.saturating_mul(fleet.window_ns);
    let mut out = Vec::new();
    for (d, device) in fleet.devices.iter().enumerate() {
        if device.is_server() {
            continue;
        }
        let trail = &fleet.trails[d];
        // One crash incident per window and errno is enough.
        let mut seen = BTreeSet::new();
        for f in &trail.failures {
            if CONNECTION_ERRNOS.contains(&f.errno)
                && !normal[0].contains(&(f.id, f.errno))
                && seen.insert((f.window, f.errno))
            {
                out.push(Incident {
                    cause: Cause::Crash,
                    client: d,
                    what: errno_name(f.errno),
                    since_unix_ns: f.first_unix_ns,
                    until_unix_ns: f.first_unix_ns.saturating_add(quiet_ns),
                });
            }
        }
        let learnt = program_waits.get(device.program());
        for c in trail.flying.values() {
            let waits_by_nature =
                waits.contains(&c.id) || learnt.is_some_and(|w| w.contains(&(c.id, c.fd_kind)));
            if waits_by_nature
                || c.seen_until_unix_ns.saturating_sub(c.start_unix_ns) < params.hang_after_ns
            {
                continue;
            }
            out.push(Incident {
                cause: Cause::Hang,
                client: d,
                what: c.id.to_string(),
                since_unix_ns: c.start_unix_ns,
                until_unix_ns: c.start_unix_ns.saturating_add(params.hang_after_ns),
            });
        }
    }
    out
}

/// The servers quiet in windows `from..=to` (no window with a call) while
/// another server tracing the same program made calls in them.
fn quiet_servers(fleet: &Fleet, from: u64, to: u64) -> Vec<usize> {
    let mut by_program: BTreeMap<&str, Vec<(usize, bool)>> = BTreeMap::new();
    for (d, device) in fleet.devices.iter().enumerate() {
        if device.is_server() {
            let active = fleet.trails[d].active.range(from..=to).next().is_some();
            by_program
                .entry(device.program())
                .or_default()
                .push((d, active));
        }
    }
    by_program
        .into_values()
        .filter(|servers| servers.iter().any(|(_, active)| *active))
        .flat_map(|servers| {
            servers
                .into_iter()
                .filter(|(_, active)| !active)
                .map(|(d, _)| d)
        })
        .collect()
}

/// The server devices by address (their `addr` fact).
fn servers_by_ip(fleet: &Fleet) -> BTreeMap<IpAddr, Vec<usize>> {
    let mut out: BTreeMap<IpAddr, Vec<usize>> = BTreeMap::new();
    for (d, device) in fleet.devices.iter().enumerate() {
        if !device.is_server() {
            continue;
        }
        if let Some(ip) = device.addr() {
            out.entry(ip).or_default().push(d);
        }
    }
    out
}

/// A call's kind for comparing last calls: its syscall, and whether it
/// failed (other than "try again").
fn kind_of(c: &LastCall) -> (SyscallId, bool) {
    const EAGAIN: i64 = -11;
    (
        c.id,
        c.result < 0 && c.result >= -4095 && c.result != EAGAIN,
    )
}

/// The servers whose socket at client `client` went quiet before
/// `stale_before` on a last call unlike the one the client last made with
/// its other servers, looking at calls before `until`. Needs at least 3
/// server sockets at the client (a majority to differ from).
fn unanswered_servers(
    fleet: &Fleet,
    by_ip: &BTreeMap<IpAddr, Vec<usize>>,
    client: usize,
    stale_before: u64,
    until: u64,
) -> Vec<(usize, LastCall)> {
    let trail = &fleet.trails[client];
    let lasts: Vec<(&Vec<usize>, LastCall)> = trail
        .peers
        .keys()
        .filter_map(|addr| {
            let servers = by_ip.get(&ip_of(&addr.ip))?;
            Some((servers, trail.last_call_before(addr, until)?))
        })
        .collect();
    if lasts.len() < 3 {
        return Vec::new();
    }
    let mut votes: BTreeMap<(SyscallId, bool), usize> = BTreeMap::new();
    for (_, c) in &lasts {
        *votes.entry(kind_of(c)).or_default() += 1;
    }
    let Some((&usual, &n)) = votes.iter().max_by_key(|(_, n)| **n) else {
        return Vec::new();
    };
    if n * 2 <= lasts.len() {
        return Vec::new();
    }
    lasts
        .into_iter()
        .filter(|(_, c)| kind_of(c) != usual && c.end_unix_ns < stale_before)
        .flat_map(|(servers, c)| servers.iter().map(move |s| (*s, c)))
        .collect()
}

/// Per server blamed: whether it was quiet, and its socket's last call at
/// a client when that differed.
type Culprits = BTreeMap<usize, (bool, Option<LastCall>)>;

/// The servers quiet in windows `from..=to`, or whose sockets at the
/// clients went unanswered before window `from` (looking at calls before
/// window `to + 1`).
fn culprits(fleet: &Fleet, by_ip: &BTreeMap<IpAddr, Vec<usize>>, from: u64, to: u64) -> Culprits {
    let mut culprits = Culprits::new();
    for s in quiet_servers(fleet, from, to) {
        culprits.entry(s).or_default().0 = true;
    }
    // Every client's sockets, not only the incident's device: a client's
    // application and its file system daemon may be two devices.
    let stale_before = fleet.window_start(from);
    let until = fleet.window_start(to.saturating_add(1));
    for (c, device) in fleet.devices.iter().enumerate() {
        if !device.is_server() {
            for (s, call) in unanswered_servers(fleet, by_ip, c, stale_before, until) {
                culprits.entry(s).or_default().1 = Some(call);
            }
        }
    }
    culprits
}

/// What was found against one server for one cause.
#[derive(Default)]
struct Blame {
    incidents: usize,
    clients: BTreeSet<usize>,
    what: BTreeSet<String>,
    windows: BTreeSet<u64>,
    quiet: usize,
    unanswered: BTreeMap<String, usize>,
}

/// The crash/hang method over the whole fleet.
pub fn hang(fleet: &Fleet, params: &HangParams) -> (Vec<Finding>, Vec<String>) {
    let by_ip = servers_by_ip(fleet);
    let window_ns = fleet.window_ns.max(1);
    let mut blames: BTreeMap<(usize, Cause), Blame> = BTreeMap::new();
    let mut unexplained = 0usize;
    // The culprits of the incidents that began and became certain in the
    // same windows are the same: judged once (a crash can give an incident
    // per client and window for hours).
    let mut judged: BTreeMap<(u64, u64), Culprits> = BTreeMap::new();
    for incident in incidents(fleet, params) {
        // Windows are indexed by their rounded start (fleet.rs): from two
        // after the one the incident began in, so no window holding calls
        // from before it counts.
        let from = incident.since_unix_ns / window_ns + 2;
        let to = (incident.until_unix_ns / window_ns).max(from);
        let culprits = judged
            .entry((from, to))
            .or_insert_with(|| culprits(fleet, &by_ip, from, to))
            .clone();
        if culprits.is_empty() {
            unexplained += 1;
        }
        for (s, (quiet, call)) in culprits {
            let b = blames.entry((s, incident.cause)).or_default();
            b.incidents += 1;
            b.clients.insert(incident.client);
            b.what.insert(incident.what.clone());
            b.windows.insert(incident.until_unix_ns / window_ns);
            b.quiet += usize::from(quiet);
            if let Some(call) = call {
                *b.unanswered.entry(call.id.to_string()).or_default() += 1;
            }
        }
    }
    let mut notes = Vec::new();
    if unexplained > 0 {
        notes.push(format!(
            "hang: {unexplained} client crash/hang incident(s) with no server quiet at the time \
             (no culprit named for them)"
        ));
    }
    let findings = blames
        .into_iter()
        .map(|((s, cause), b)| {
            let windows: Vec<u64> = b.windows.into_iter().collect();
            let what: Vec<String> = b.what.into_iter().collect();
            let happened = match cause {
                Cause::Hang => format!(
                    "{} client call(s) ({}) in flight over {:.0} s",
                    b.incidents,
                    what.join(", "),
                    params.hang_after_ns as f64 / 1e9
                ),
                _ => format!("{} client failure(s) with {}", b.incidents, what.join(", ")),
            };
            let mut why = Vec::new();
            if b.quiet > 0 {
                why.push(format!(
                    "it made no call while its peers did ({} of them)",
                    b.quiet
                ));
            }
            if !b.unanswered.is_empty() {
                let calls: Vec<String> = b
                    .unanswered
                    .iter()
                    .map(|(name, n)| format!("{name} ×{n}"))
                    .collect();
                why.push(format!(
                    "the clients' last call on its socket was unlike the other servers' ({})",
                    calls.join(", ")
                ));
            }
            Finding {
                device: s,
                method: Method::Hang,
                cause,
                metric: what.first().cloned().unwrap_or_default(),
                first_window_unix_ns: fleet.window_start(windows[0]),
                last_window_unix_ns: fleet.window_start(windows[windows.len() - 1]),
                score: b.incidents as f64,
                evidence: format!(
                    "{happened} at {} client device(s); {}",
                    b.clients.len(),
                    why.join("; ")
                ),
                windows,
            }
        })
        .collect();
    (findings, notes)
}
