//! The kernel's process-events connector (netlink `NETLINK_CONNECTOR`,
//! `CN_IDX_PROC`): the kernel tells every subscriber of each exec and exit
//! as it happens, so `watch` learns of a new program at once instead of at
//! its next `/proc` scan.
//!
//! Subscribing needs CAP_NET_ADMIN in the host's user namespace, and the
//! agent in the host's PID namespace (elsewhere the kernel ignores the
//! request without answering); [`ProcEvents::subscribe`] says which was
//! missing. The socket itself is in the `sys` layer; this file builds the
//! request and reads the kernel's messages (`linux/connector.h`,
//! `linux/cn_proc.h`), field by field from bytes: a short or unknown
//! message is skipped, never trusted.

use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::sys::{self, Tid};

/// The connector's index and value of process events (`CN_IDX_PROC`,
/// `CN_VAL_PROC`); the index is also the multicast group.
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
/// `enum proc_cn_mcast_op`.
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_CN_MCAST_IGNORE: u32 = 2;
/// `enum what` of `struct proc_event`.
const PROC_EVENT_NONE: u32 = 0;
const PROC_EVENT_EXEC: u32 = 0x0000_0002;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;
/// Netlink message types (`linux/netlink.h`).
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_OVERRUN: u16 = 4;
/// Sizes: `struct nlmsghdr`, `struct cn_msg` (its payload follows).
const NLMSG_HDR: usize = 16;
const CN_MSG_HDR: usize = 20;
/// Offset of the event's union in `struct proc_event` (after `what`,
/// `cpu` and the 8-byte `timestamp_ns`).
const EVENT_DATA: usize = 16;
/// How long the kernel has to acknowledge the subscription.
const ACK_TIMEOUT: Duration = Duration::from_secs(1);
/// The socket's receive buffer: a burst of thousands of short processes
/// fits before the kernel drops events.
const RECV_BUFFER: usize = 4 << 20;

/// How a process ended, as `wait` would report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// `exit(code)`.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl Ended {
    /// From the kernel's wait status (`task->exit_code`).
    pub fn from_wait_status(status: u32) -> Ended {
        match status & 0x7f {
            0 => Ended::Code(((status >> 8) & 0xff) as i32),
            sig => Ended::Signal(sig as i32),
        }
    }
}

/// One event from the connector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcEvent {
    /// Thread `pid` of process `tgid` called exec and now runs the new
    /// program. `at_ns`: when, on CLOCK_MONOTONIC.
    Exec { pid: Tid, tgid: Tid, at_ns: u64 },
    /// Thread `pid` of process `tgid` ended (the process ended when
    /// `pid == tgid`).
    Exit {
        pid: Tid,
        tgid: Tid,
        ended: Ended,
        at_ns: u64,
    },
    /// The socket's buffer overran: events were lost (a caller that must
    /// not miss a process rescans `/proc`).
    Lost,
}

/// A subscription to the kernel's process events; dropped, it unsubscribes.
#[derive(Debug)]
pub struct ProcEvents {
    fd: OwnedFd,
    buf: Vec<u8>,
    /// Events read but not handed out yet.
    pending: std::collections::VecDeque<ProcEvent>,
}

impl ProcEvents {
    /// Subscribes to exec and exit events. Fails with a sentence naming
    /// what is missing: CAP_NET_ADMIN, the kernel's support, or the host's
    /// namespaces.
    pub fn subscribe() -> anyhow::Result<ProcEvents> {
        // Since Linux 6.6 the kernel accepts anyone's subscription but
        // sends exec events only to CAP_NET_ADMIN (others get non-zero
        // exits alone): ask first rather than wait for events that never
        // come.
        if !has_cap_net_admin() {
            bail!("{}", not_permitted());
        }
        let fd = match sys::netlink_socket(libc::NETLINK_CONNECTOR, CN_IDX_PROC) {
            Ok(fd) => fd,
            Err(e) => bail!("{}", explain_socket_error(&e)),
        };
        // Best effort: a smaller buffer only makes a lost burst likelier,
        // and that is reported as `Lost`.
        let _ = sys::set_recv_buffer(&fd, RECV_BUFFER);
        let mut events = ProcEvents {
            fd,
            buf: vec![0; 8192],
            pending: Default::default(),
        };
        sys::netlink_send(&events.fd, &mcast_request(PROC_CN_MCAST_LISTEN))
            .map_err(|e| anyhow::anyhow!("cannot subscribe to process events: {e}"))?;
        events.await_ack()?;
        Ok(events)
    }

    /// Waits for the kernel's answer to the subscription: its error, if
    /// any. Events that come first are kept for [`ProcEvents::next`].
    fn await_ack(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + ACK_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!(
                    "the kernel did not answer the process-events subscription within {} s: \
                     the agent must run in the host's PID and user namespaces (not in a container)",
                    ACK_TIMEOUT.as_secs()
                );
            }
            sys::set_recv_timeout(&self.fd, left)?;
            let n = match sys::recv_datagram(&self.fd, &mut self.buf) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => bail!("cannot read process events: {e}"),
            };
            let mut ack = None;
            for message in parse(&self.buf[..n]) {
                match message {
                    Message::Ack(err) => ack = Some(err),
                    Message::Event(e) => self.pending.push_back(e),
                }
            }
            match ack {
                Some(0) => return Ok(()),
                Some(err) => {
                    let os = io::Error::from_raw_os_error(err as i32);
                    if err as i32 == libc::EPERM {
                        bail!("{}", not_permitted());
                    }
                    bail!("the kernel refused the process-events subscription: {os}");
                }
                None => {}
            }
        }
    }

    /// The next event, waiting up to `timeout` (zero: for ever); `None`
    /// when none came in time or a signal interrupted the wait.
    pub fn next(&mut self, timeout: Duration) -> io::Result<Option<ProcEvent>> {
        if let Some(e) = self.pending.pop_front() {
            return Ok(Some(e));
        }
        sys::set_recv_timeout(&self.fd, timeout)?;
        loop {
            let n = match sys::recv_datagram(&self.fd, &mut self.buf) {
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Ok(Some(ProcEvent::Lost))
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) => return Err(e),
            };
            for message in parse(&self.buf[..n]) {
                if let Message::Event(e) = message {
                    self.pending.push_back(e);
                }
            }
            if let Some(e) = self.pending.pop_front() {
                return Ok(Some(e));
            }
            // Only messages of no interest (a fork, a uid change): wait on.
        }
    }
}

impl Drop for ProcEvents {
    fn drop(&mut self) {
        // The kernel counts listeners and sends events while any is left.
        let _ = sys::netlink_send(&self.fd, &mcast_request(PROC_CN_MCAST_IGNORE));
    }
}

/// Whether the agent holds CAP_NET_ADMIN (its effective set, from
/// `/proc/self/status`; unreadable: no).
fn has_cap_net_admin() -> bool {
    const CAP_NET_ADMIN: u32 = 12;
    crate::trace::caps_of(sys::getpid(), "CapEff:").is_some_and(|c| c & (1 << CAP_NET_ADMIN) != 0)
}

fn not_permitted() -> String {
    "the process-events connector needs CAP_NET_ADMIN (run the agent as root); \
     without it `watch` finds programs by scanning /proc, or use `edge-agent shim`"
        .to_string()
}

fn explain_socket_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => not_permitted(),
        Some(libc::EPROTONOSUPPORT) | Some(libc::EAFNOSUPPORT) => format!(
            "this kernel has no process-events connector (CONFIG_CONNECTOR and CONFIG_PROC_EVENTS): {e}"
        ),
        _ => format!("cannot open the process-events connector: {e}"),
    }
}

/// A `PROC_CN_MCAST_*` request: nlmsghdr, cn_msg, then the operation.
fn mcast_request(op: u32) -> Vec<u8> {
    let payload = 4usize;
    let total = NLMSG_HDR + CN_MSG_HDR + payload;
    let mut m = Vec::with_capacity(total);
    // struct nlmsghdr: len, type, flags, seq, port.
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&(sys::getpid() as u32).to_ne_bytes());
    // struct cn_msg: id {idx, val}, seq, ack, len, flags.
    m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&(payload as u16).to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&op.to_ne_bytes());
    m
}

/// What one connector message says.
#[derive(Debug, PartialEq, Eq)]
enum Message {
    /// The answer to a request: 0 or an errno.
    Ack(u32),
    Event(ProcEvent),
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The messages of one datagram (several netlink messages may share it);
/// what is short, of another connector, or of no interest is left out. An
/// overrun the kernel reports in-band reads as [`ProcEvent::Lost`].
fn parse(datagram: &[u8]) -> Vec<Message> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let (Some(len), Some(kind)) = (u32_at(datagram, at), u16_at(datagram, at + 4)) {
        let len = len as usize;
        let Some(message) = datagram.get(at..at.saturating_add(len)) else {
            break;
        };
        if len < NLMSG_HDR {
            break;
        }
        match kind {
            NLMSG_OVERRUN => out.push(Message::Event(ProcEvent::Lost)),
            NLMSG_NOOP | NLMSG_ERROR => {}
            _ => out.extend(parse_cn(&message[NLMSG_HDR..])),
        }
        // Messages are 4-byte aligned.
        at = at.saturating_add((len + 3) & !3);
    }
    out
}

/// One `struct cn_msg` with its `struct proc_event`.
fn parse_cn(cn: &[u8]) -> Option<Message> {
    if u32_at(cn, 0)? != CN_IDX_PROC || u32_at(cn, 4)? != CN_VAL_PROC {
        return None;
    }
    let data_len = u16_at(cn, 16)? as usize;
    let ev = cn.get(CN_MSG_HDR..CN_MSG_HDR + data_len)?;
    let what = u32_at(ev, 0)?;
    let at_ns = u64_at(ev, 8)?;
    let d = EVENT_DATA;
    let pid_at = |off: usize| u32_at(ev, d + off).map(|v| v as i32);
    match what {
        PROC_EVENT_NONE => Some(Message::Ack(u32_at(ev, d)?)),
        PROC_EVENT_EXEC => Some(Message::Event(ProcEvent::Exec {
            pid: pid_at(0)?,
            tgid: pid_at(4)?,
            at_ns,
        })),
        PROC_EVENT_EXIT => Some(Message::Event(ProcEvent::Exit {
            pid: pid_at(0)?,
            tgid: pid_at(4)?,
            ended: Ended::from_wait_status(u32_at(ev, d + 8)?),
            at_ns,
        })),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connector message as the kernel builds it.
    fn kernel_message(what: u32, data: &[u32]) -> Vec<u8> {
        let mut ev = Vec::new();
        ev.extend_from_slice(&what.to_ne_bytes());
        ev.extend_from_slice(&0u32.to_ne_bytes()); // cpu
        ev.extend_from_slice(&123_456u64.to_ne_bytes());
        for v in data {
            ev.extend_from_slice(&v.to_ne_bytes());
        }
        let mut m = mcast_request(0);
        m.truncate(NLMSG_HDR + CN_MSG_HDR);
        m[NLMSG_HDR + 16..NLMSG_HDR + 18].copy_from_slice(&(ev.len() as u16).to_ne_bytes());
        m.extend_from_slice(&ev);
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    #[test]
    fn parses_exec_exit_and_ack() {
        let mut dgram = kernel_message(PROC_EVENT_EXEC, &[42, 41]);
        dgram.extend(kernel_message(PROC_EVENT_EXIT, &[41, 41, 3 << 8, 17, 1, 1]));
        dgram.extend(kernel_message(PROC_EVENT_EXIT, &[43, 43, 9, 17, 1, 1]));
        dgram.extend(kernel_message(PROC_EVENT_NONE, &[1]));
        assert_eq!(
            parse(&dgram),
            vec![
                Message::Event(ProcEvent::Exec {
                    pid: 42,
                    tgid: 41,
                    at_ns: 123_456
                }),
                Message::Event(ProcEvent::Exit {
                    pid: 41,
                    tgid: 41,
                    ended: Ended::Code(3),
                    at_ns: 123_456
                }),
                Message::Event(ProcEvent::Exit {
                    pid: 43,
                    tgid: 43,
                    ended: Ended::Signal(9),
                    at_ns: 123_456
                }),
                Message::Ack(1),
            ]
        );
    }

    #[test]
    fn short_or_foreign_messages_are_skipped() {
        let exec = kernel_message(PROC_EVENT_EXEC, &[42, 41]);
        for cut in 0..exec.len() {
            assert!(parse(&exec[..cut]).is_empty(), "cut at {cut}");
        }
        let mut foreign = exec.clone();
        foreign[NLMSG_HDR..NLMSG_HDR + 4].copy_from_slice(&7u32.to_ne_bytes());
        assert!(parse(&foreign).is_empty());
        // A length field that points past the end, or below the header.
        let mut lying = exec.clone();
        lying[0..4].copy_from_slice(&4u32.to_ne_bytes());
        assert!(parse(&lying).is_empty());
        lying[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(parse(&lying).is_empty());
    }

    /// Root (CAP_NET_ADMIN) in the host's namespaces: a child's exec and
    /// exit arrive with its pid and exit code. Elsewhere the subscription
    /// must fail with the sentence that says why.
    #[test]
    fn a_child_exec_and_exit_arrive() {
        let mut events = match ProcEvents::subscribe() {
            Ok(e) => e,
            Err(e) if crate::sys::geteuid() != 0 => {
                let msg = format!("{e:#}");
                assert!(msg.contains("CAP_NET_ADMIN"), "{msg}");
                return;
            }
            Err(e) => panic!("root could not subscribe: {e:#}"),
        };
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 7"])
            .spawn()
            .expect("sh runs");
        let pid = child.id() as Tid;
        let mut child = child;
        assert_eq!(child.wait().unwrap().code(), Some(7));
        let (mut exec, mut exit) = (false, None);
        let deadline = Instant::now() + Duration::from_secs(10);
        while (!exec || exit.is_none()) && Instant::now() < deadline {
            match events.next(Duration::from_millis(200)).unwrap() {
                Some(ProcEvent::Exec { pid: p, tgid, .. }) if tgid == pid => {
                    assert_eq!(p, pid);
                    exec = true;
                }
                Some(ProcEvent::Exit {
                    pid: p,
                    tgid,
                    ended,
                    ..
                }) if tgid == pid && p == pid => exit = Some(ended),
                _ => {}
            }
        }
        assert!(exec, "no exec event for {pid}");
        assert_eq!(exit, Some(Ended::Code(7)));
    }
}
