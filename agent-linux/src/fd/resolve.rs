//! What an fd is, asked of `/proc`: the link target of `/proc/TID/fd/N`
//! (one `stat` for fds opened by path), and a socket's kind by its inode in
//! the tracee's own `/proc/TID/net` tables. No allocation on the common
//! paths: paths and link targets live on the stack.

use std::ffi::CStr;

use agent_core::FdKind;

use crate::sys::{self, Tid};

/// File type bits of `st_mode` (`mode_t` is 16 bits on some targets, so
/// these are plain u32 here).
pub const S_IFIFO: u32 = 0o010000;
/// A socket.
pub const S_IFSOCK: u32 = 0o140000;
/// A regular file.
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

/// Reads what `/proc/TID/fd/FD` points to. No allocation: the path and the
/// link target live on the stack.
pub fn resolve(tid: Tid, fd: i32) -> FdKind {
    let mut path = [0u8; 48];
    let Some(cpath) = fd_path(&mut path, tid, fd) else {
        return FdKind::None;
    };
    let mut target = [0u8; 64];
    let Ok(n) = sys::readlink(cpath, &mut target) else {
        return FdKind::None;
    };
    classify_link(
        &target[..n],
        || sys::file_type(cpath).ok(),
        |inode| socket_kind(tid, inode),
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
/// `socket` classifies a socket by its inode.
pub fn classify_link(
    target: &[u8],
    file_type: impl FnOnce() -> Option<u32>,
    socket: impl FnOnce(u64) -> FdKind,
) -> FdKind {
    if let Some(rest) = target.strip_prefix(b"socket:[") {
        match parse_decimal(rest.strip_suffix(b"]").unwrap_or(rest)) {
            Some(inode) => socket(inode),
            None => FdKind::Socket,
        }
    } else if target.starts_with(b"pipe:[") {
        FdKind::Pipe
    } else if target.starts_with(b"/") {
        match file_type() {
            Some(t) if t == S_IFIFO => FdKind::Pipe,
            Some(t) if t == S_IFSOCK => FdKind::Socket,
            _ => FdKind::File,
        }
    } else {
        // anon_inode:[eventfd], anon_inode:[eventpoll], net:[...], ...
        FdKind::Other
    }
}

/// The tables of `/proc/TID/net` that name a socket's inode, with the
/// column holding it and the kind a match means.
const SOCKET_TABLES: [(&str, usize, FdKind); 5] = [
    ("tcp", 9, FdKind::Tcp),
    ("tcp6", 9, FdKind::Tcp),
    ("udp", 9, FdKind::Udp),
    ("udp6", 9, FdKind::Udp),
    ("unix", 6, FdKind::Unix),
];

/// A socket's kind from its inode, looked up in the tracee's own network
/// namespace; `Socket` when no table lists it (netlink, packet, raw, a
/// socket closed meanwhile) or `/proc` cannot be read. Allocates the
/// table paths: it runs only for sockets the agent did not see created.
pub fn socket_kind(tid: Tid, inode: u64) -> FdKind {
    for (table, column, kind) in SOCKET_TABLES {
        let path = format!("/proc/{tid}/net/{table}");
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        sys::COUNTERS
            .proc_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if table_lists_inode(file, column, inode) {
            return kind;
        }
    }
    FdKind::Socket
}

/// Whether a `/proc/net` table lists `inode` in whitespace-separated
/// column `column` of some line after the header. Reads line by line
/// through a fixed buffer; a line longer than the buffer (no table has
/// one: a Unix socket's path is at most 108 bytes) ends the search.
pub fn table_lists_inode(mut table: impl std::io::Read, column: usize, inode: u64) -> bool {
    let lists = |line: &[u8]| {
        line.split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty())
            .nth(column)
            .and_then(parse_decimal)
            == Some(inode)
    };
    let mut buf = [0u8; 4096];
    let mut filled = 0;
    let mut header = true;
    loop {
        let n = match table.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        };
        filled += n;
        let mut start = 0;
        while let Some(end) = buf[start..filled].iter().position(|&b| b == b'\n') {
            let line = &buf[start..start + end];
            start += end + 1;
            if !std::mem::take(&mut header) && lists(line) {
                return true;
            }
        }
        if n == 0 {
            // The last line may lack its newline.
            return !header && lists(&buf[start..filled]);
        }
        if start == 0 && filled == buf.len() {
            return false;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
    }
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
        assert_eq!(
            classify_link(
                b"socket:[1234]",
                || None,
                |ino| {
                    assert_eq!(ino, 1234);
                    FdKind::Tcp
                }
            ),
            FdKind::Tcp
        );
        assert_eq!(
            classify_link(b"socket:[12x]", || None, never),
            FdKind::Socket
        );
        assert_eq!(classify_link(b"pipe:[99]", || None, never), FdKind::Pipe);
        assert_eq!(
            classify_link(b"anon_inode:[eventfd]", || None, never),
            FdKind::Other
        );
        assert_eq!(
            classify_link(b"/tmp/f", || Some(S_IFREG), never),
            FdKind::File
        );
        assert_eq!(
            classify_link(b"/tmp/fifo", || Some(S_IFIFO), never),
            FdKind::Pipe
        );
    }

    #[test]
    fn resolves_our_own_fds() {
        use std::os::fd::AsRawFd;
        let me = std::process::id() as Tid;
        let file = std::fs::File::open("/proc/self/status").unwrap();
        assert_eq!(resolve(me, file.as_raw_fd()), FdKind::File);
        let (r, w) = std::io::pipe().unwrap();
        assert_eq!(resolve(me, r.as_raw_fd()), FdKind::Pipe);
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(resolve(me, udp.as_raw_fd()), FdKind::Udp);
        let udp6 = std::net::UdpSocket::bind("[::1]:0");
        if let Ok(udp6) = &udp6 {
            assert_eq!(resolve(me, udp6.as_raw_fd()), FdKind::Udp);
        }
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(resolve(me, tcp.as_raw_fd()), FdKind::Tcp);
        let client = std::net::TcpStream::connect(tcp.local_addr().unwrap()).unwrap();
        assert_eq!(resolve(me, client.as_raw_fd()), FdKind::Tcp);
        let (ua, ub) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(resolve(me, ua.as_raw_fd()), FdKind::Unix);
        assert_eq!(resolve(me, 100_000), FdKind::None);
        // Opened by path: one stat tells a file from a FIFO.
        assert_eq!(resolve_opened_by_path(me, file.as_raw_fd()), FdKind::File);
        assert_eq!(resolve_opened_by_path(me, r.as_raw_fd()), FdKind::Pipe);
        drop((r, w, ua, ub));
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
