//! A socket address in the tracee's memory as a peer: `connect`'s argument
//! (the remote end it asks for) and `accept`'s result (the remote end of the
//! new socket). Read through the tracer's 8-byte reads: one for IPv4, three
//! for IPv6, far cheaper than a look at `/proc/TID/net`.

use agent_core::{FdKind, PeerAddr, PeerIp};

/// `sa_family` values (the same on every architecture the agent supports).
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;
/// The bytes of a `sockaddr_in` the peer is read from (family, port,
/// address), and of a `sockaddr_in6` (family, port, flow info, address).
const INET_LEN: u64 = 8;
const INET6_LEN: u64 = 24;

/// The peer a `sockaddr` at `addr` (in the tracee, `len` bytes of it
/// valid) names for a socket of `transport`; `read_u64` reads 8 bytes of
/// tracee memory (native order). `None`: unreadable, too short, not IPv4
/// or IPv6 (`AF_UNSPEC` disconnects a UDP socket), port 0, or the
/// unspecified address (connecting to it reaches the local host: `/proc`
/// then names the real address). An IPv4-mapped IPv6 address is given as
/// IPv4, as the net tables' are.
pub fn read_peer(
    mut read_u64: impl FnMut(u64) -> Option<u64>,
    addr: u64,
    len: u64,
    transport: FdKind,
) -> Option<PeerAddr> {
    if addr == 0 || len < INET_LEN {
        return None;
    }
    let head = read_u64(addr)?.to_ne_bytes();
    let family = u16::from_ne_bytes([head[0], head[1]]);
    let port = u16::from_be_bytes([head[2], head[3]]);
    let ip = match family {
        AF_INET => PeerIp::V4([head[4], head[5], head[6], head[7]]),
        AF_INET6 if len >= INET6_LEN => {
            let mut v6 = [0u8; 16];
            v6[..8].copy_from_slice(&read_u64(addr.checked_add(8)?)?.to_ne_bytes());
            v6[8..].copy_from_slice(&read_u64(addr.checked_add(16)?)?.to_ne_bytes());
            PeerIp::V6(v6)
        }
        _ => return None,
    };
    remote_end(transport, ip, port)
}

/// The peer at `ip`:`port`, the one rule for every source of an address
/// (a `sockaddr`, the `/proc` net tables): an IPv4-mapped IPv6 address
/// (`::ffff:a.b.c.d`, a dual-stack socket talking IPv4) is given as IPv4;
/// port 0 or the unspecified address is no remote end (`None`).
pub fn remote_end(transport: FdKind, ip: PeerIp, port: u16) -> Option<PeerAddr> {
    let ip = match ip {
        PeerIp::V6([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d]) => {
            PeerIp::V4([a, b, c, d])
        }
        other => other,
    };
    let unspecified = match ip {
        PeerIp::V4(a) => a == [0; 4],
        PeerIp::V6(a) => a == [0; 16],
    };
    (port != 0 && !unspecified).then_some(PeerAddr {
        transport,
        ip,
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads from `mem`, placed at address 0x1000.
    fn reader(mem: &[u8]) -> impl FnMut(u64) -> Option<u64> + '_ {
        move |a| {
            let at = usize::try_from(a.checked_sub(0x1000)?).ok()?;
            let b = mem.get(at..at + 8)?;
            Some(u64::from_ne_bytes(b.try_into().ok()?))
        }
    }

    fn sockaddr_in(ip: [u8; 4], port: u16) -> Vec<u8> {
        let mut v = AF_INET.to_ne_bytes().to_vec();
        v.extend(port.to_be_bytes());
        v.extend(ip);
        v.extend([0u8; 8]);
        v
    }

    fn sockaddr_in6(ip: [u8; 16], port: u16) -> Vec<u8> {
        let mut v = AF_INET6.to_ne_bytes().to_vec();
        v.extend(port.to_be_bytes());
        v.extend([0u8; 4]);
        v.extend(ip);
        v.extend([0u8; 4]);
        v
    }

    #[test]
    fn reads_inet_addresses() {
        let tcp = FdKind::Tcp;
        let m = sockaddr_in([192, 168, 1, 2], 443);
        assert_eq!(
            read_peer(reader(&m), 0x1000, 16, tcp),
            Some(PeerAddr {
                transport: tcp,
                ip: PeerIp::V4([192, 168, 1, 2]),
                port: 443
            })
        );
        let mut ip6 = [0u8; 16];
        ip6[..2].copy_from_slice(&[0x20, 0x01]);
        ip6[15] = 9;
        let m = sockaddr_in6(ip6, 53);
        assert_eq!(
            read_peer(reader(&m), 0x1000, 28, FdKind::Udp),
            Some(PeerAddr {
                transport: FdKind::Udp,
                ip: PeerIp::V6(ip6),
                port: 53
            })
        );
        let mut mapped = [0u8; 16];
        mapped[10..].copy_from_slice(&[0xff, 0xff, 127, 0, 0, 1]);
        let m = sockaddr_in6(mapped, 80);
        assert_eq!(
            read_peer(reader(&m), 0x1000, 28, tcp).map(|p| p.ip),
            Some(PeerIp::V4([127, 0, 0, 1]))
        );
        // An IPv6 address with room for IPv4 only: no peer.
        assert_eq!(read_peer(reader(&m), 0x1000, 16, tcp), None);
    }

    #[test]
    fn no_peer_without_a_usable_address() {
        let tcp = FdKind::Tcp;
        let m = sockaddr_in([10, 0, 0, 1], 80);
        assert_eq!(read_peer(reader(&m), 0, 16, tcp), None, "NULL");
        assert_eq!(read_peer(reader(&m), 0x1000, 4, tcp), None, "short");
        assert_eq!(read_peer(reader(&m), 0x2000, 16, tcp), None, "unreadable");
        assert_eq!(read_peer(|_| None, 0x1000, 16, tcp), None);
        let any = sockaddr_in([0; 4], 80);
        assert_eq!(read_peer(reader(&any), 0x1000, 16, tcp), None, "0.0.0.0");
        let zero_port = sockaddr_in([10, 0, 0, 1], 0);
        assert_eq!(read_peer(reader(&zero_port), 0x1000, 16, tcp), None);
        let mut unspec = sockaddr_in([10, 0, 0, 1], 80);
        unspec[..2].copy_from_slice(&0u16.to_ne_bytes());
        assert_eq!(
            read_peer(reader(&unspec), 0x1000, 16, tcp),
            None,
            "AF_UNSPEC"
        );
        let m = sockaddr_in6([0; 16], 80);
        assert_eq!(read_peer(reader(&m), 0x1000, 28, tcp), None, "::");
        // An IPv6 address cut short in memory.
        assert_eq!(read_peer(reader(&m[..12]), 0x1000, 28, tcp), None);
        assert_eq!(read_peer(reader(&m), u64::MAX - 4, 28, tcp), None);
    }
}
