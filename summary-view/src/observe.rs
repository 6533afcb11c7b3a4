//! Views of what summary format version 2 adds: the origin (device, stream,
//! window), the CPU time, the calls in flight at the cut and the per-peer
//! socket statistics, as JSON (`docs/summary-json.md`) and as the text
//! sections of `edge-agent show`.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use agent_core::{
    CpuTime, InFlight, InFlightCall, LastCall, Peer, PeerAddr, PeerIp, Peers, Summary,
};
use serde_json::{json, Value};

use crate::errno_name;

/// A device or stream id as JSON: 32 hex digits, or `null` when not known
/// (`None`: the id was all zero, as in a version 1 summary).
pub fn id_json(id: Option<impl std::fmt::Display>) -> Value {
    id.map_or(Value::Null, |id| json!(id.to_string()))
}

/// A device or stream id as text: 32 hex digits, or `unknown`.
fn id_text(id: Option<impl std::fmt::Display>) -> String {
    id.map_or("unknown".into(), |id| id.to_string())
}

/// The standard text of a peer's address (`192.0.2.1`, `2001:db8::1`).
pub fn ip_text(ip: PeerIp) -> String {
    ip_addr(ip).to_string()
}

fn ip_addr(ip: PeerIp) -> IpAddr {
    match ip {
        PeerIp::V4(b) => IpAddr::V4(Ipv4Addr::from(b)),
        PeerIp::V6(b) => IpAddr::V6(Ipv6Addr::from(b)),
    }
}

/// A peer as one word: `tcp 192.0.2.1:80`, `udp [2001:db8::1]:53`.
pub fn peer_text(addr: &PeerAddr) -> String {
    format!(
        "{} {}",
        addr.transport.name(),
        SocketAddr::new(ip_addr(addr.ip), addr.port)
    )
}

/// A wall-clock time, ns since the Unix epoch, as RFC 3339 in UTC with
/// microseconds (`2025-11-21T04:40:00.123456Z`).
pub fn time_text(unix_ns: u64) -> String {
    match jiff::Timestamp::from_nanosecond(i128::from(unix_ns)) {
        Ok(t) => format!("{t:.6}"),
        // Beyond jiff's range (year 9999): the raw number.
        Err(_) => format!("{unix_ns} ns"),
    }
}

fn peer_addr_json(addr: &PeerAddr) -> Value {
    json!({
        "transport": addr.transport.name(),
        "address": ip_text(addr.ip),
        "port": addr.port,
    })
}

fn last_call_json(last: &LastCall) -> Value {
    let errno = failed_errno(last.result);
    json!({
        "syscall": last.id.to_string(),
        "result": last.result,
        "errno": errno.map(errno_name),
        "end_unix_ns": last.end_unix_ns,
    })
}

/// The errno of a raw result, when it is a failure (`-4095..=-1`).
fn failed_errno(result: i64) -> Option<u16> {
    (-4095..=-1).contains(&result).then(|| (-result) as u16)
}

fn peer_json(p: &Peer) -> Value {
    let mut v = peer_addr_json(&p.addr);
    v["calls"] = json!(p.calls);
    v["bytes"] = json!(p.bytes);
    v["total_ns"] = json!(p.total_ns);
    v["mean_ns"] = json!(mean(p.total_ns, p.calls));
    v["errors"] = json!(p.errors);
    v["last"] = p.last.as_ref().map_or(Value::Null, last_call_json);
    v
}

fn mean(total_ns: u64, calls: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        total_ns as f64 / calls as f64
    }
}

/// The `"peers"` object of the JSON view.
pub fn peers_json(peers: &Peers) -> Value {
    let r = &peers.rest;
    json!({
        "list": peers.list.iter().map(peer_json).collect::<Vec<_>>(),
        "rest": {
            "peers": r.peers,
            "calls": r.calls,
            "bytes": r.bytes,
            "total_ns": r.total_ns,
            "errors": r.errors,
        },
    })
}

fn in_flight_call_json(c: &InFlightCall) -> Value {
    json!({
        "tid": c.tid,
        "syscall": c.id.to_string(),
        "fd_kind": c.fd_kind.name(),
        "peer": c.peer.as_ref().map_or(Value::Null, peer_addr_json),
        "start_unix_ns": c.start_unix_ns,
    })
}

/// The `"in_flight"` object of the JSON view.
pub fn in_flight_json(f: &InFlight) -> Value {
    json!({
        "count": f.count,
        "oldest": f.oldest.iter().map(in_flight_call_json).collect::<Vec<_>>(),
    })
}

/// The `"cpu"` object of the JSON view (`null`: not measured).
pub fn cpu_json(cpu: Option<CpuTime>) -> Value {
    cpu.map_or(
        Value::Null,
        |c| json!({ "user_ns": c.user_ns, "system_ns": c.system_ns }),
    )
}

/// The `"origin"` object of the JSON view.
pub fn origin_json(summary: &Summary) -> Value {
    let o = &summary.origin;
    json!({
        "device": id_json(o.device.nonzero()),
        "stream": id_json(o.stream.nonzero()),
        "window_ns": o.window_ns,
    })
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The lines under the run line: which window of which stream, from which
/// device, and the CPU time beside the wall time.
pub fn origin_lines(out: &mut String, summary: &Summary) {
    let r = &summary.run;
    let o = &summary.origin;
    let end = r.start_unix_ns.saturating_add(r.duration_ns);
    let piece = if r.window == 0 {
        "whole run".to_string()
    } else {
        format!("window {} (length {:.3} s)", r.window, secs(o.window_ns))
    };
    let _ = writeln!(
        out,
        "{piece}  {} .. {}  stream {}  device id {}",
        time_text(r.start_unix_ns),
        time_text(end),
        id_text(o.stream.nonzero()),
        id_text(o.device.nonzero()),
    );
    match summary.cpu {
        Some(c) => {
            let _ = writeln!(
                out,
                "cpu user {:.6} s  system {:.6} s  (wall {:.6} s)",
                secs(c.user_ns),
                secs(c.system_ns),
                secs(r.duration_ns)
            );
        }
        None => {
            let _ = writeln!(out, "cpu not measured");
        }
    }
}

/// The calls in flight at the cut, oldest first, with how long each had been
/// waiting (nothing when there were none).
pub fn in_flight_lines(out: &mut String, summary: &Summary) {
    let f = &summary.in_flight;
    if f.count == 0 {
        return;
    }
    let cut = summary
        .run
        .start_unix_ns
        .saturating_add(summary.run.duration_ns);
    let _ = writeln!(out, "\nin flight at the cut: {} call(s)", f.count);
    let _ = writeln!(
        out,
        "  {:>8} {:<16} {:<6} {:<30} {:<28} {:>12}",
        "tid", "syscall", "fd", "peer", "started", "waiting-s"
    );
    for c in &f.oldest {
        let _ = writeln!(
            out,
            "  {:>8} {:<16} {:<6} {:<30} {:<28} {:>12.6}",
            c.tid,
            c.id.to_string(),
            c.fd_kind.name(),
            c.peer.as_ref().map_or("-".into(), peer_text),
            time_text(c.start_unix_ns),
            secs(cut.saturating_sub(c.start_unix_ns)),
        );
    }
    let described = f.oldest.len() as u32;
    if f.count > described {
        let _ = writeln!(out, "  ... and {} more", f.count - described);
    }
}

fn last_call_text(last: &LastCall) -> String {
    let result = match failed_errno(last.result) {
        Some(e) => errno_name(e),
        None => last.result.to_string(),
    };
    format!(
        "{} = {} at {}",
        last.id,
        result,
        time_text(last.end_unix_ns)
    )
}

/// The per-peer table: calls, bytes, time and errors on the sockets of
/// each peer, and its last call (nothing when no socket had a peer).
pub fn peer_lines(out: &mut String, summary: &Summary) {
    let p = &summary.peers;
    if p.list.is_empty() && p.rest.peers == 0 {
        return;
    }
    let _ = writeln!(out, "\npeers:");
    let _ = writeln!(
        out,
        "  {:<34} {:>9} {:>12} {:>11} {:>11} {:>7}  last call",
        "peer", "calls", "bytes", "seconds", "usecs/call", "errors"
    );
    for peer in &p.list {
        let _ = writeln!(
            out,
            "  {:<34} {:>9} {:>12} {:>11.6} {:>11.1} {:>7}  {}",
            peer_text(&peer.addr),
            peer.calls,
            peer.bytes,
            secs(peer.total_ns),
            mean(peer.total_ns, peer.calls) / 1e3,
            peer.errors,
            peer.last.as_ref().map_or("-".into(), last_call_text),
        );
    }
    let r = &p.rest;
    if r.peers > 0 {
        let _ = writeln!(
            out,
            "  {:<34} {:>9} {:>12} {:>11.6} {:>11.1} {:>7}",
            format!("({} more peers)", r.peers),
            r.calls,
            r.bytes,
            secs(r.total_ns),
            mean(r.total_ns, r.calls) / 1e3,
            r.errors,
        );
    }
}
