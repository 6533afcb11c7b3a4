//! Synthetic fleets for the tests and `scripts/bench-peers`: window
//! summaries of devices doing the same work (file reads and writes, socket
//! reads, stat, connect, accept, futex waits), each call's duration drawn
//! around a typical value, with faults that slow one device's disk or
//! network from a window on. Built with agent-core's types, encoded like an
//! agent's.

use agent_core::summary::Spread;
use agent_core::{
    Arch, Exit, Facts, FdKind, Histogram, Key, Origin, RunRecord, Summary, SyscallId,
    SyscallSummary,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What slows a device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// File reads and writes, stat and access `factor` times slower.
    Disk {
        /// The device's index.
        device: usize,
        /// First window (0-based) it lasts from ...
        from: u64,
        /// ... and the first after it.
        until: u64,
        /// How much slower.
        factor: f64,
    },
    /// Socket reads and connect `factor` times slower.
    Network {
        /// The device's index.
        device: usize,
        /// First window.
        from: u64,
        /// First window after it.
        until: u64,
        /// How much slower.
        factor: f64,
    },
    /// Extra `bind` and `socket` calls, slow ones (node isolation).
    Sockets {
        /// The device's index.
        device: usize,
        /// First window.
        from: u64,
        /// First window after it.
        until: u64,
    },
}

/// A fleet to make.
#[derive(Debug, Clone)]
pub struct FleetSpec {
    /// Devices.
    pub devices: usize,
    /// Windows per device.
    pub windows: u64,
    /// Window length, ns.
    pub window_ns: u64,
    /// Start of window 0, ns since the Unix epoch (a multiple of the
    /// window length keeps every device's windows aligned).
    pub start_unix_ns: u64,
    /// The `program` fact.
    pub program: String,
    /// The `group` fact.
    pub group: String,
    /// The `role` fact (`server` or `client`), if any.
    pub role: Option<String>,
    /// The faults.
    pub faults: Vec<Fault>,
    /// Seed of every draw.
    pub seed: u64,
    /// Socket peers each device lists per window (at most 8): the next
    /// devices of the fleet, by their `addr` fact (10.s.d₁.d₀, s the
    /// seed), each link about 300 calls of about 28 KB (for the link
    /// method; 0: no addresses, no peers).
    pub links: usize,
}

impl FleetSpec {
    /// `devices` servers of `program` with 1 s windows from
    /// 2025-11-21T04:40:00Z, no fault.
    pub fn new(devices: usize, windows: u64) -> FleetSpec {
        FleetSpec {
            devices,
            windows,
            window_ns: 1_000_000_000,
            start_unix_ns: 1_763_700_000_000_000_000,
            program: "glusterfsd".into(),
            group: "fleet".into(),
            role: Some("server".into()),
            faults: Vec::new(),
            seed: 1,
            links: 0,
        }
    }

    /// Device `d`'s id (never all zero).
    pub fn device_id(&self, d: usize) -> [u8; 16] {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&(self.seed.wrapping_mul(1_000_003) ^ 0x5eed).to_be_bytes());
        id[8..].copy_from_slice(&(d as u64 + 1).to_be_bytes());
        id
    }

    /// The start of window `w`, ns since the Unix epoch.
    pub fn window_start(&self, w: u64) -> u64 {
        self.start_unix_ns + w * self.window_ns
    }

    fn factor(&self, d: usize, w: u64, disk: bool) -> f64 {
        let mut f = 1.0;
        for fault in &self.faults {
            match *fault {
                Fault::Disk {
                    device,
                    from,
                    until,
                    factor,
                } if disk && device == d && (from..until).contains(&w) => f *= factor,
                Fault::Network {
                    device,
                    from,
                    until,
                    factor,
                } if !disk && device == d && (from..until).contains(&w) => f *= factor,
                _ => {}
            }
        }
        f
    }

    fn sockets_fault(&self, d: usize, w: u64) -> bool {
        self.faults.iter().any(|f| {
            matches!(*f, Fault::Sockets { device, from, until }
                if device == d && (from..until).contains(&w))
        })
    }

    /// Device `d`'s window `w`.
    pub fn window(&self, d: usize, w: u64) -> Summary {
        let mut rng = StdRng::seed_from_u64(
            self.seed
                ^ (d as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                ^ w.wrapping_mul(0xbf58_476d),
        );
        let disk = self.factor(d, w, true);
        let net = self.factor(d, w, false);
        // A device of a fleet is a little faster or slower than another.
        let speed = 1.0 + 0.1 * ((d % 5) as f64 - 2.0) / 2.0;
        let server = self.role.as_deref() != Some("client");
        let mut entries: Vec<(&str, FdKind, u64, f64)> = vec![
            ("read", FdKind::File, 120, 60_000.0 * speed * disk),
            ("pwrite64", FdKind::File, 60, 90_000.0 * speed * disk),
            ("newfstatat", FdKind::None, 30, 4_000.0 * speed * disk),
            ("access", FdKind::None, 5, 3_000.0 * speed * disk),
            ("read", FdKind::Tcp, 200, 25_000.0 * speed * net),
            ("connect", FdKind::Tcp, 2, 120_000.0 * speed * net),
            ("write", FdKind::Tcp, 150, 15_000.0 * speed),
            ("futex", FdKind::None, 80, 200_000.0),
            ("epoll_wait", FdKind::Other, 100, 500_000.0),
        ];
        if server {
            entries.push(("accept4", FdKind::Tcp, 1, 20_000.0 * speed));
        }
        if self.sockets_fault(d, w) {
            entries.push(("socket", FdKind::None, 40, 400_000.0));
            entries.push(("bind", FdKind::Tcp, 40, 300_000.0));
        }
        let mut syscalls: Vec<SyscallSummary> = entries
            .into_iter()
            .map(|(name, kind, count, mean)| {
                let id = SyscallId::from_name(name)
                    .unwrap_or_else(|| panic!("{name}: not a syscall this build knows"));
                // ±20 % in how many calls a window has.
                let count = ((count as f64) * rng.random_range(0.8..1.2))
                    .round()
                    .max(1.0) as u64;
                entry(Key { id, fd_kind: kind }, count, mean, &mut rng)
            })
            .collect();
        syscalls.sort_by_key(|s| s.key);
        let mut facts = Facts::new();
        facts.program = agent_core::facts::truncated(&self.program);
        // Valid keys and short values: cannot fail.
        let _ = facts.add("group", &self.group);
        if let Some(role) = &self.role {
            let _ = facts.add("role", role);
        }
        if self.links > 0 {
            let _ = facts.add("addr", &self.addr(d).to_string());
        }
        let mut id = [0u8; 16];
        rng.fill(&mut id);
        let mut summary = Summary::empty();
        summary.id = id;
        summary.run = RunRecord {
            window: (w + 1) as u32,
            events: syscalls.iter().map(|s| s.count).sum(),
            ..RunRecord::new(
                self.window_start(w) + rng.random_range(0..1_000_000),
                self.window_ns,
                Exit::Running,
                Arch::X86_64,
            )
        };
        summary.facts = facts;
        summary.origin = Origin {
            device: self.device_id(d),
            stream: {
                let mut s = self.device_id(d);
                s[0] ^= 0xff;
                s
            },
            window_ns: self.window_ns,
        };
        summary.syscalls = syscalls.into_iter().collect();
        for k in 1..=self.links.min(self.devices.saturating_sub(1)) {
            let far = match self.addr((d + k) % self.devices) {
                std::net::IpAddr::V4(a) => a.octets(),
                std::net::IpAddr::V6(_) => continue,
            };
            let calls = rng.random_range(270..330);
            add_link(
                &mut summary,
                far,
                calls,
                calls * rng.random_range(25_000..31_000),
            );
        }
        // The format's order: most calls first, ties by lower address.
        summary
            .peers
            .list
            .sort_by(|a, b| b.calls.cmp(&a.calls).then(a.addr.cmp(&b.addr)));
        summary
    }

    /// Device `d`'s address when it lists links: 10.seed.(d / 256).(d % 256).
    pub fn addr(&self, d: usize) -> std::net::IpAddr {
        std::net::IpAddr::from([10, self.seed as u8, (d / 256) as u8, (d % 256) as u8])
    }

    /// Every window of every device, window by window.
    pub fn summaries(&self) -> impl Iterator<Item = Summary> + '_ {
        (0..self.windows).flat_map(move |w| (0..self.devices).map(move |d| self.window(d, w)))
    }
}

/// `count` calls of about `mean_ns` each (uniform in 0.7..1.4 of it).
fn entry(key: Key, count: u64, mean_ns: f64, rng: &mut StdRng) -> SyscallSummary {
    let mut histogram = Histogram::default();
    let (mut total, mut min, mut max, mut sum_sq) = (0u64, u64::MAX, 0u64, 0u128);
    for _ in 0..count {
        let ns = (mean_ns * rng.random_range(0.7..1.4)).max(1.0) as u64;
        histogram.add(ns);
        total += ns;
        min = min.min(ns);
        max = max.max(ns);
        sum_sq += u128::from(ns) * u128::from(ns);
    }
    SyscallSummary {
        key,
        count,
        total_ns: total,
        // One call's spread is its duration: the format leaves it out.
        spread: (count > 1).then_some(Spread {
            min_ns: min,
            max_ns: max,
            sum_sq_ns: sum_sq,
            histogram,
        }),
        failures: None,
        consecutive: None,
        result_sum: 0,
        param_sum: key
            .id
            .is_read_write_family()
            .then_some(u128::from(count) * 4096),
    }
}

/// Adds `count` calls of `syscall` on `fd_kind` failing with `errno` to a
/// window, the first and last `first_ns` and `last_ns` after its start
/// (what a server's or client's failed calls leave in its summary).
pub fn add_failures(
    summary: &mut Summary,
    syscall: &str,
    fd_kind: FdKind,
    errno: u16,
    count: u64,
    first_ns: u64,
    last_ns: u64,
) {
    let id = SyscallId::from_name(syscall)
        .unwrap_or_else(|| panic!("{syscall}: not a syscall this build knows"));
    let key = Key { id, fd_kind };
    let failures = agent_core::summary::Failures {
        errors: count,
        errnos: [(errno, count)].into_iter().collect(),
        errno_other: 0,
        first_ns,
        last_ns,
    };
    match summary.syscalls.iter_mut().find(|s| s.key == key) {
        Some(s) => {
            s.count += count;
            s.failures = Some(failures);
        }
        None => {
            let mut rng = StdRng::seed_from_u64(u64::from(errno));
            let mut s = entry(key, count, 50_000.0, &mut rng);
            s.failures = Some(failures);
            s.param_sum = None;
            let _ = summary.syscalls.push(s);
            summary.syscalls.sort_by_key(|s| s.key);
        }
    }
}

/// Records a call still in flight when the window was cut.
pub fn add_in_flight(
    summary: &mut Summary,
    tid: u32,
    syscall: &str,
    fd_kind: FdKind,
    start_unix_ns: u64,
) {
    let id = SyscallId::from_name(syscall)
        .unwrap_or_else(|| panic!("{syscall}: not a syscall this build knows"));
    summary.in_flight.count += 1;
    let _ = summary.in_flight.oldest.push(agent_core::InFlightCall {
        tid,
        id,
        fd_kind,
        peer: None,
        start_unix_ns,
    });
}

/// Lists a TCP peer at `ip:port` whose most recent call was `syscall`
/// returning `result`, ending at `end_unix_ns`, with `calls` calls in the
/// window.
pub fn add_peer(
    summary: &mut Summary,
    ip: [u8; 4],
    port: u16,
    calls: u64,
    syscall: &str,
    result: i64,
    end_unix_ns: u64,
) {
    let id = SyscallId::from_name(syscall)
        .unwrap_or_else(|| panic!("{syscall}: not a syscall this build knows"));
    let _ = summary.peers.list.push(agent_core::Peer {
        addr: agent_core::PeerAddr {
            transport: FdKind::Tcp,
            ip: agent_core::PeerIp::V4(ip),
            port,
        },
        calls,
        bytes: 0,
        total_ns: 0,
        errors: 0,
        last: Some(agent_core::LastCall {
            id,
            result,
            end_unix_ns,
        }),
    });
}

/// Lists a TCP peer at `ip` (port 49152) with `calls` calls that moved
/// `bytes` bytes in the window (a link, for the link method).
pub fn add_link(summary: &mut Summary, ip: [u8; 4], calls: u64, bytes: u64) {
    let _ = summary.peers.list.push(agent_core::Peer {
        addr: agent_core::PeerAddr {
            transport: FdKind::Tcp,
            ip: agent_core::PeerIp::V4(ip),
            port: 49152,
        },
        calls,
        bytes,
        total_ns: calls.saturating_mul(50_000),
        errors: 0,
        last: None,
    });
}

/// Empties a window of its calls (a stopped process's windows).
pub fn silence(summary: &mut Summary) {
    summary.syscalls.clear();
    summary.run.events = 0;
}
