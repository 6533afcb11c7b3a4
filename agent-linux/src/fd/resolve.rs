//! What an fd is, asked of `/proc`: the link target of `/proc/TID/fd/N`
//! (one `stat` for fds opened by path), and a socket's kind by its inode in
//! the tracee's own `/proc/TID/net` tables. No allocation on the common
//! paths: paths and link targets live on the stack.

use std::ffi::CStr;

use std::os::unix::ffi::OsStrExt;

use agent_core::{FdKind, PeerAddr, PeerIp};

use crate::sys::{self, Tid};

/// File type bits of `st_mode` (`mode_t` is 16 bits on some targets, so
/// these are plain u32 here).
pub const S_IFIFO: u32 = 0o010000;
/// A socket.
pub const S_IFSOCK: u32 = 0o140000;
/// A regular file.
#[cfg(test)]
pub const S_IFREG: u32 = 0o100000;

/// `/proc/TID/fd/FD`, NUL-terminated, in `buf`.
fn fd_path(buf: &mut [u8; 48], tid: Tid, fd: i32) -> Option<&CStr> {
    let mut len = 0;
    buf[..6].copy_from_slice(b"/proc/");
    len += 6;
    len += write_decimal(&mut buf[len..], tid as u64);
    buf[len..len + 4].copy_from_slice(b"/fd/");
    len += 4;
    len += write_decimal(&mut buf[len..], fd as u64);
    buf[len] = 0;
    CStr::from_bytes_with_nul(&buf[..=len]).ok()
}

/// Reads what `/proc/TID/fd/FD` points to, and for a TCP or UDP socket its
/// remote end from the same line of the net table that tells its kind. No
/// allocation: the path and the link target live on the stack.
pub fn resolve(tid: Tid, fd: i32) -> FdFacts {
    let mut path = [0u8; 48];
    let Some(cpath) = fd_path(&mut path, tid, fd) else {
        return FdFacts::of(FdKind::None);
    };
    let mut target = [0u8; 64];
    let Ok(n) = sys::readlink(cpath, &mut target) else {
        return FdFacts::of(FdKind::None);
    };
    classify_link(
        &target[..n],
        || sys::file_type(cpath).ok(),
        |inode| socket_facts(tid, inode, FdKind::Socket),
    )
}

/// An fd that open/openat/creat returned: a file or a FIFO (only an
/// `O_PATH` open reaches a socket's inode, and such an fd carries no
/// traffic). One `stat`, no `readlink`.
pub(super) fn resolve_opened_by_path(tid: Tid, fd: i32) -> FdKind {
    let mut path = [0u8; 48];
    let Some(cpath) = fd_path(&mut path, tid, fd) else {
        return FdKind::None;
    };
    match sys::file_type(cpath) {
        Ok(S_IFIFO) => FdKind::Pipe,
        Ok(S_IFSOCK) => FdKind::Socket,
        Ok(_) => FdKind::File,
        Err(_) => FdKind::None,
    }
}

/// The kind of an fd from its `/proc` link target; `file_type` stats it
/// (needed only for paths: a named FIFO or socket looks like a file), and
/// `socket` looks a socket up by its inode.
pub fn classify_link(
    target: &[u8],
    file_type: impl FnOnce() -> Option<u32>,
    socket: impl FnOnce(u64) -> FdFacts,
) -> FdFacts {
    if target.starts_with(b"socket:[") {
        match socket_inode(target) {
            Some(inode) => socket(inode),
            None => FdFacts::of(FdKind::Socket),
        }
    } else if target.starts_with(b"pipe:[") {
        FdFacts::of(FdKind::Pipe)
    } else if target.starts_with(b"/") {
        FdFacts::of(match file_type() {
            Some(t) if t == S_IFIFO => FdKind::Pipe,
            Some(t) if t == S_IFSOCK => FdKind::Socket,
            _ => FdKind::File,
        })
    } else {
        // anon_inode:[eventfd], anon_inode:[eventpoll], net:[...], ...
        FdFacts::of(FdKind::Other)
    }
}

/// One of the tracee's `/proc/TID/net` tables that name a socket's inode.
#[derive(Clone, Copy, Debug)]
struct NetTable {
    name: &'static str,
    /// The whitespace-separated column holding the inode.
    inode_column: usize,
    /// What a socket listed there is.
    kind: FdKind,
}

const fn table(name: &'static str, inode_column: usize, kind: FdKind) -> NetTable {
    NetTable {
        name,
        inode_column,
        kind,
    }
}

/// How much of one `/proc/TID/net` table is read: 16 MiB, some 100 000
/// sockets' lines; a socket listed past that stays a plain `Socket`.
const NET_TABLE_BUDGET: u64 = 16 << 20;

/// The TCP and UDP tables (their lines name the remote end), then Unix.
const SOCKET_TABLES: [NetTable; 5] = [
    table("tcp", 9, FdKind::Tcp),
    table("tcp6", 9, FdKind::Tcp),
    table("udp", 9, FdKind::Udp),
    table("udp6", 9, FdKind::Udp),
    table("unix", 6, FdKind::Unix),
];

/// The column of a TCP or UDP table's line holding the remote end
/// (`rem_address`, `ADDR:PORT` in hex).
const REMOTE_COLUMN: usize = 2;

/// What `/proc` says of an fd: its kind and, for a TCP or UDP socket, its
/// remote end (known whenever the kind is: both come from one line of a
/// net table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdFacts {
    /// Its kind (`Socket` for a socket no table lists).
    pub kind: FdKind,
    /// Its remote end: `None` for an fd that has none (not a socket,
    /// listening, unconnected UDP, not yet connected, Unix, unlisted).
    pub peer: Option<PeerAddr>,
}

impl FdFacts {
    /// An fd of `kind` without a remote end.
    pub const fn of(kind: FdKind) -> FdFacts {
        FdFacts { kind, peer: None }
    }
}

/// A socket's kind, and its remote end, from its inode, looked up in the
/// tracee's own network namespace, in the tables that can list a socket of
/// `kind` (`Socket`: all of them); `Socket` and no peer when no table lists
/// it (netlink, packet, raw, a socket closed meanwhile, an unbound TCP
/// socket) or `/proc` cannot be read. Each table opened counts as one
/// `/proc` read. No allocation: the table paths live on the stack.
pub fn socket_facts(tid: Tid, inode: u64, kind: FdKind) -> FdFacts {
    for t in SOCKET_TABLES {
        if kind != FdKind::Socket && kind != t.kind {
            continue;
        }
        let mut path = [0u8; 48];
        let Some(cpath) = net_path(&mut path, tid, t.name) else {
            continue;
        };
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(cpath.to_bytes()));
        let Ok(file) = crate::tracee_file::open(path) else {
            continue;
        };
        sys::COUNTERS
            .proc_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let peer_of = |line: &[u8]| match t.kind {
            FdKind::Tcp | FdKind::Udp => nth_field(line, REMOTE_COLUMN)
                .and_then(|f| parse_remote(f, t.kind, cfg!(target_endian = "little"))),
            _ => None,
        };
        let table = std::io::Read::take(file, NET_TABLE_BUDGET);
        if let Some(peer) = find_inode_line(table, t.inode_column, inode, peer_of) {
            return FdFacts { kind: t.kind, peer };
        }
    }
    FdFacts {
        kind: FdKind::Socket,
        peer: None,
    }
}

/// The remote end of the TCP or UDP socket `fd` of task `tid` (`kind`: its
/// known kind): `readlink /proc/TID/fd/FD` for its inode, then its line in
/// the tables of that kind. `None` when it has none or `/proc` says nothing.
pub fn socket_peer(tid: Tid, fd: i32, kind: FdKind) -> Option<PeerAddr> {
    let mut path = [0u8; 48];
    let cpath = fd_path(&mut path, tid, fd)?;
    let mut target = [0u8; 64];
    let n = sys::readlink(cpath, &mut target).ok()?;
    let inode = socket_inode(&target[..n])?;
    socket_facts(tid, inode, kind).peer
}

/// The inode of a `socket:[INODE]` link target.
fn socket_inode(target: &[u8]) -> Option<u64> {
    let rest = target.strip_prefix(b"socket:[")?;
    parse_decimal(rest.strip_suffix(b"]").unwrap_or(rest))
}

/// `/proc/TID/net/TABLE`, NUL-terminated, in `buf`.
fn net_path<'a>(buf: &'a mut [u8; 48], tid: Tid, table: &str) -> Option<&'a CStr> {
    let mut len = 0;
    buf[..6].copy_from_slice(b"/proc/");
    len += 6;
    len += write_decimal(&mut buf[len..], tid as u64);
    buf[len..len + 5].copy_from_slice(b"/net/");
    len += 5;
    let name = table.as_bytes();
    buf.get_mut(len..len + name.len())?.copy_from_slice(name);
    len += name.len();
    *buf.get_mut(len)? = 0;
    CStr::from_bytes_with_nul(&buf[..=len]).ok()
}

/// Field `n` (from 0) of a whitespace-separated line.
fn nth_field(line: &[u8], n: usize) -> Option<&[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .nth(n)
}

/// A TCP or UDP table's `rem_address` field, `ADDR:PORT`, as a peer.
///
/// The kernel prints the address as the raw words of the network-order
/// address read as native integers (`%08X` of one `__be32` for IPv4, four
/// of them for IPv6), so each 8-digit word's bytes are its value's bytes in
/// the host's order (`little_endian`: the host's byte order; the tables
/// are the running kernel's, so it is the agent's own). The port is printed
/// as a plain number (`ntohs` applied). An IPv4-mapped IPv6 address
/// (`::ffff:a.b.c.d`, a dual-stack socket talking IPv4) is given as IPv4.
/// No remote end (port 0, or the unspecified address: a listening or
/// unconnected socket) and a malformed field are `None`.
pub fn parse_remote(field: &[u8], transport: FdKind, little_endian: bool) -> Option<PeerAddr> {
    let colon = field.iter().position(|&b| b == b':')?;
    let (addr, port) = (&field[..colon], &field[colon + 1..]);
    if port.len() != 4 {
        return None;
    }
    let port = u16::try_from(parse_hex(port)?).ok()?;
    let word = |hex: &[u8]| -> Option<[u8; 4]> {
        let v = u32::try_from(parse_hex(hex)?).ok()?;
        Some(if little_endian {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        })
    };
    let ip = match addr.len() {
        8 => PeerIp::V4(word(addr)?),
        32 => {
            let mut v6 = [0u8; 16];
            for (out, hex) in v6.chunks_exact_mut(4).zip(addr.chunks_exact(8)) {
                out.copy_from_slice(&word(hex)?);
            }
            PeerIp::V6(v6)
        }
        _ => return None,
    };
    super::sockaddr::remote_end(transport, ip, port)
}

/// Whether a `/proc/net` table lists `inode` in whitespace-separated
/// column `column` of some line after the header.
#[cfg(test)]
pub fn table_lists_inode(table: impl std::io::Read, column: usize, inode: u64) -> bool {
    find_inode_line(table, column, inode, |_| ()).is_some()
}

/// `read_line` of the first line after the header of a `/proc/net` table
/// that lists `inode` in whitespace-separated column `column`; `None` when
/// none does. Reads line by line through a fixed buffer; a line longer
/// than the buffer (no table has one: a Unix socket's path is at most 108
/// bytes) ends the search.
fn find_inode_line<R>(
    mut table: impl std::io::Read,
    column: usize,
    inode: u64,
    read_line: impl FnOnce(&[u8]) -> R,
) -> Option<R> {
    let lists = |line: &[u8]| nth_field(line, column).and_then(parse_decimal) == Some(inode);
    let mut buf = [0u8; 4096];
    let mut filled = 0;
    let mut header = true;
    loop {
        let n = match table.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        filled += n;
        let mut start = 0;
        while let Some(end) = buf[start..filled].iter().position(|&b| b == b'\n') {
            let line = &buf[start..start + end];
            start += end + 1;
            if !std::mem::take(&mut header) && lists(line) {
                return Some(read_line(line));
            }
        }
        if n == 0 {
            // The last line may lack its newline.
            let line = &buf[start..filled];
            return (!header && lists(line)).then(|| read_line(line));
        }
        if start == 0 && filled == buf.len() {
            return None;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
    }
}

fn parse_hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &d| {
        let v = (d as char).to_digit(16)?;
        Some((acc << 4) | u64::from(v))
    })
}

fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &d| {
        d.is_ascii_digit()
            .then(|| acc.checked_mul(10)?.checked_add(u64::from(d - b'0')))
            .flatten()
    })
}

fn write_decimal(out: &mut [u8], mut v: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        out[i] = digits[n - 1 - i];
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_link_targets() {
        let never = |_| panic!("not a socket");
        let kind = |f: FdFacts| f.kind;
        assert_eq!(
            kind(classify_link(
                b"socket:[1234]",
                || None,
                |ino| {
                    assert_eq!(ino, 1234);
                    FdFacts::of(FdKind::Tcp)
                }
            )),
            FdKind::Tcp
        );
        assert_eq!(
            kind(classify_link(b"socket:[12x]", || None, never)),
            FdKind::Socket
        );
        assert_eq!(
            kind(classify_link(b"pipe:[99]", || None, never)),
            FdKind::Pipe
        );
        assert_eq!(
            kind(classify_link(b"anon_inode:[eventfd]", || None, never)),
            FdKind::Other
        );
        assert_eq!(
            kind(classify_link(b"/tmp/f", || Some(S_IFREG), never)),
            FdKind::File
        );
        assert_eq!(
            kind(classify_link(b"/tmp/fifo", || Some(S_IFIFO), never)),
            FdKind::Pipe
        );
    }

    fn v4(ip: [u8; 4], port: u16, transport: FdKind) -> Option<PeerAddr> {
        Some(PeerAddr {
            transport,
            ip: PeerIp::V4(ip),
            port,
        })
    }

    #[test]
    fn resolves_our_own_fds() {
        use std::os::fd::AsRawFd;
        let me = std::process::id() as Tid;
        let kind = |fd| resolve(me, fd).kind;
        let file = std::fs::File::open("/proc/self/status").unwrap();
        assert_eq!(kind(file.as_raw_fd()), FdKind::File);
        let (r, w) = std::io::pipe().unwrap();
        assert_eq!(kind(r.as_raw_fd()), FdKind::Pipe);
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(resolve(me, udp.as_raw_fd()), FdFacts::of(FdKind::Udp));
        let udp6 = std::net::UdpSocket::bind("[::1]:0");
        if let Ok(udp6) = &udp6 {
            assert_eq!(kind(udp6.as_raw_fd()), FdKind::Udp);
        }
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        // A listening socket has no remote end.
        assert_eq!(resolve(me, tcp.as_raw_fd()), FdFacts::of(FdKind::Tcp));
        let server = tcp.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(tcp.local_addr().unwrap()).unwrap();
        let client_port = client.local_addr().unwrap().port();
        // A connected one has, read from the same line as its kind.
        assert_eq!(
            resolve(me, client.as_raw_fd()),
            FdFacts {
                kind: FdKind::Tcp,
                peer: v4([127, 0, 0, 1], server, FdKind::Tcp)
            }
        );
        let (accepted, _) = tcp.accept().unwrap();
        assert_eq!(
            socket_peer(me, accepted.as_raw_fd(), FdKind::Tcp),
            v4([127, 0, 0, 1], client_port, FdKind::Tcp)
        );
        // A connected UDP socket has one; the unconnected one had none.
        udp.connect(("127.0.0.1", 9)).unwrap();
        assert_eq!(
            socket_peer(me, udp.as_raw_fd(), FdKind::Udp),
            v4([127, 0, 0, 1], 9, FdKind::Udp)
        );
        // A dual-stack IPv6 socket talking IPv4 names it as IPv4.
        if let Ok(v6) = std::net::TcpListener::bind("[::]:0") {
            let port = v6.local_addr().unwrap().port();
            let c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            let (a, _) = v6.accept().unwrap();
            assert_eq!(
                resolve(me, a.as_raw_fd()).peer,
                v4([127, 0, 0, 1], c.local_addr().unwrap().port(), FdKind::Tcp)
            );
        }
        let (ua, ub) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(resolve(me, ua.as_raw_fd()), FdFacts::of(FdKind::Unix));
        assert_eq!(kind(100_000), FdKind::None);
        assert_eq!(socket_peer(me, 100_000, FdKind::Tcp), None);
        assert_eq!(socket_peer(me, r.as_raw_fd(), FdKind::Tcp), None);
        // Opened by path: one stat tells a file from a FIFO.
        assert_eq!(resolve_opened_by_path(me, file.as_raw_fd()), FdKind::File);
        assert_eq!(resolve_opened_by_path(me, r.as_raw_fd()), FdKind::Pipe);
        drop((r, w, ua, ub));
    }

    #[test]
    fn parses_remote_addresses() {
        let tcp = FdKind::Tcp;
        // 127.0.0.1:8080 as a little-endian kernel prints it, and as a
        // big-endian one does.
        assert_eq!(
            parse_remote(b"0100007F:1F90", tcp, true),
            v4([127, 0, 0, 1], 8080, tcp)
        );
        assert_eq!(
            parse_remote(b"7F000001:1F90", tcp, false),
            v4([127, 0, 0, 1], 8080, tcp)
        );
        assert_eq!(
            parse_remote(b"0A00A8C0:0035", FdKind::Udp, true),
            v4([192, 168, 0, 10], 53, FdKind::Udp)
        );
        // ::1 port 443 (little-endian words).
        assert_eq!(
            parse_remote(b"00000000000000000000000001000000:01BB", tcp, true),
            Some(PeerAddr {
                transport: tcp,
                ip: PeerIp::V6([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
                port: 443
            })
        );
        // 2001:db8::5 port 80.
        assert_eq!(
            parse_remote(b"B80D0120000000000000000005000000:0050", tcp, true),
            Some(PeerAddr {
                transport: tcp,
                ip: PeerIp::V6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5]),
                port: 80
            })
        );
        // ::ffff:10.1.2.3 is the IPv4 peer 10.1.2.3.
        assert_eq!(
            parse_remote(b"0000000000000000FFFF000003020A0A:1000", tcp, true),
            v4([10, 10, 2, 3], 4096, tcp)
        );
        assert_eq!(
            parse_remote(b"0000000000000000FFFF0000030A0A0A:1000", tcp, true),
            v4([10, 10, 10, 3], 4096, tcp)
        );
        // No remote end: listening, unconnected.
        assert_eq!(parse_remote(b"00000000:0000", tcp, true), None);
        assert_eq!(parse_remote(b"0100007F:0000", tcp, true), None);
        assert_eq!(
            parse_remote(b"00000000000000000000000000000000:0000", tcp, true),
            None
        );
        // Malformed: never a panic, never a peer.
        for bad in [
            &b""[..],
            b":",
            b"0100007F",
            b"0100007F:1F9",
            b"0100007F:1F900",
            b"0100007G:1F90",
            b"100007F:1F90",
            b"0100007F:+F90",
            b"\xff\xff:1F90",
            b"000000000000000000000000010000:01BB",
        ] {
            assert_eq!(parse_remote(bad, tcp, true), None, "{bad:?}");
        }
    }

    #[test]
    fn reads_the_remote_end_from_the_inode_line() {
        let tcp = b"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0\n   1: 0100007F:1F90 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 31338 1 0000000000000000 100 0 0 10 0\n";
        let remote = |line: &[u8]| {
            nth_field(line, REMOTE_COLUMN).and_then(|f| parse_remote(f, FdKind::Tcp, true))
        };
        assert_eq!(find_inode_line(&tcp[..], 9, 31337, remote), Some(None));
        assert_eq!(
            find_inode_line(&tcp[..], 9, 31338, remote),
            Some(v4([127, 0, 0, 1], 0xa1b2, FdKind::Tcp))
        );
        assert_eq!(find_inode_line(&tcp[..], 9, 31339, remote), None);
    }

    #[test]
    fn net_paths() {
        let mut buf = [0u8; 48];
        assert_eq!(
            net_path(&mut buf, 4_194_304, "tcp6").unwrap().to_bytes(),
            b"/proc/4194304/net/tcp6"
        );
        let mut buf = [0u8; 48];
        assert!(net_path(&mut buf, i32::MAX, &"x".repeat(40)).is_none());
    }

    #[test]
    fn finds_inodes_in_net_tables() {
        let tcp = b"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0\n";
        assert!(table_lists_inode(&tcp[..], 9, 31337));
        assert!(!table_lists_inode(&tcp[..], 9, 3133));
        // The header is never matched, and a missing final newline is fine.
        let unix = b"Num       RefCount Protocol Flags    Type St Inode Path\n0000000000000000: 00000002 00000000 00010000 0001 01 4242 /run/x.sock";
        assert!(table_lists_inode(&unix[..], 6, 4242));
        assert!(!table_lists_inode(&b"a b c d e f 7\n"[..], 6, 7));
        // A line too long for the buffer ends the search without a match.
        let mut long = b"header\n".to_vec();
        long.extend(std::iter::repeat_n(b'x', 10_000));
        long.extend(b" 1 2 3 4 5 6\n");
        assert!(!table_lists_inode(&long[..], 6, 6));
        // Lines split across reads are reassembled.
        let mut many = b"header\n".to_vec();
        for i in 0..500u64 {
            many.extend(format!("{i}: a b c d e {}\n", 1_000_000 + i).bytes());
        }
        assert!(table_lists_inode(&many[..], 6, 1_000_499));
        assert!(!table_lists_inode(&many[..], 6, 1_000_500));
    }
}
