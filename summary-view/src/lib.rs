//! Host-side views of an Edge Agent summary: the documented JSON
//! (`docs/summary-json.md`) and a table in the spirit of `strace -c`.
//!
//! This is the decoder half of the defmt-like split: the device only
//! encodes (agent-core); names, means and layout are computed here.

use std::fmt::Write as _;

pub mod file;
pub mod observe;
mod scope;

use agent_core::summary::MAX_ERRNOS;
use agent_core::{Exit, Summary, SyscallSummary, Transition};
use serde_json::{json, Map, Value};

/// The conventional name of an errno (`EAGAIN`), or `E<n>` when unknown.
pub fn errno_name(errno: u16) -> String {
    syscalls::Errno::new(errno as i32)
        .name()
        .map(str::to_string)
        .unwrap_or_else(|| format!("E{errno}"))
}

/// The syscall name of an entry (`#<id>` for ids newer than this build).
pub fn syscall_name(s: &SyscallSummary) -> String {
    s.key.id.to_string()
}

/// Standard deviation of call durations, ns.
pub fn stddev_ns(s: &SyscallSummary) -> f64 {
    if s.count == 0 {
        return 0.0;
    }
    let n = s.count as f64;
    let mean = s.total_ns as f64 / n;
    let var = s.sum_sq_ns() as f64 / n - mean * mean;
    var.max(0.0).sqrt()
}

/// How the run ended, as the JSON view writes `run.exit`.
pub fn exit_json(exit: Exit) -> Value {
    match exit {
        Exit::Running => json!("running"),
        Exit::Detached => json!("detached"),
        Exit::Code(c) => json!({ "code": c }),
        Exit::Signal(s) => json!({ "signal": s }),
    }
}

/// How the run ended, in words (`exit 0`, `signal 9`, `running`, `detached`).
pub fn exit_text(exit: Exit) -> String {
    match exit {
        Exit::Running => "running".into(),
        Exit::Detached => "detached".into(),
        Exit::Code(c) => format!("exit {c}"),
        Exit::Signal(s) => format!("signal {s}"),
    }
}

fn syscall_json(s: &SyscallSummary) -> Value {
    let mut errnos = Map::new();
    let (mut first, mut last) = (Value::Null, Value::Null);
    if let Some(f) = &s.failures {
        for (errno, n) in &f.errnos {
            errnos.insert(errno_name(*errno), json!(n));
        }
        if f.errno_other > 0 {
            errnos.insert("other".into(), json!(f.errno_other));
        }
        first = json!(f.first_ns);
        last = json!(f.last_ns);
    }
    json!({
        "name": syscall_name(s),
        "fd_kind": s.key.fd_kind.name(),
        "count": s.count,
        "errors": s.errors(),
        "total_ns": s.total_ns,
        "min_ns": s.min_ns(),
        "max_ns": s.max_ns(),
        "mean_ns": s.mean_ns(),
        "stddev_ns": stddev_ns(s),
        "consecutive": s.consecutive_count(),
        "gap_mean_ns": s.gap_mean_ns(),
        "result_mean": s.result_mean(),
        "param_mean": s.param_mean(),
        "errnos": errnos,
        "first_failure_ns": first,
        "last_failure_ns": last,
        "histogram": s.histogram().counts.to_vec(),
    })
}

fn transition_json(t: &Transition) -> Value {
    json!({
        "from": t.from.to_string(),
        "to": t.to.to_string(),
        "count": t.count,
        "gap_mean_ns": t.gap_mean_ns(),
    })
}

/// The `"facts"` object of the JSON view.
pub fn facts_json(summary: &Summary) -> Value {
    let f = &summary.facts;
    let extra: Map<String, Value> = f
        .extra
        .iter()
        .map(|x| (x.key.to_string(), json!(x.value.as_str())))
        .collect();
    json!({
        "os_name": f.os_name.as_str(),
        "os_version": f.os_version.as_str(),
        "kernel": f.kernel.as_str(),
        "device_model": f.device_model.as_str(),
        "agent_version": f.agent_version.as_str(),
        "program": f.program.as_str(),
        "extra": extra,
    })
}

/// The documented JSON view of a summary (see `docs/summary-json.md`).
pub fn to_json(summary: &Summary) -> Value {
    let r = &summary.run;
    json!({
        "id": summary.id.to_string(),
        "format_version": agent_core::FORMAT_VERSION,
        "truncated": summary.truncated,
        "run": {
            "start_unix_ns": r.start_unix_ns,
            "duration_ns": r.duration_ns,
            "exit": exit_json(r.exit),
            "arch": r.arch.name(),
            "processes": r.processes,
            "threads": r.threads,
            "events": r.events,
            "overflow": {
                "keys": r.overflow.keys,
                "transitions": r.overflow.transitions,
                "threads": r.overflow.threads,
                "errnos": r.overflow.errnos,
            },
            "window": r.window,
            "spool_dropped": r.spool_dropped,
        },
        "facts": facts_json(summary),
        "syscalls": summary.syscalls.iter().map(syscall_json).collect::<Vec<_>>(),
        "transitions": summary.transitions.iter().map(transition_json).collect::<Vec<_>>(),
        "origin": observe::origin_json(summary),
        "cpu": observe::cpu_json(summary.cpu),
        "in_flight": observe::in_flight_json(&summary.in_flight),
        "peers": observe::peers_json(&summary.peers),
        "kind": scope::kind_json(summary.kind),
        "coverage": scope::coverage_json(&summary.coverage),
        "io": scope::io_json(summary.io),
    })
}

fn top_errnos_text(s: &SyscallSummary) -> String {
    let Some(f) = &s.failures else {
        return String::new();
    };
    let mut parts: Vec<String> = f
        .errnos
        .iter()
        .take(MAX_ERRNOS)
        .map(|(e, n)| format!("{}:{n}", errno_name(*e)))
        .collect();
    if f.errno_other > 0 {
        parts.push(format!("other:{}", f.errno_other));
    }
    parts.join(",")
}

/// A table in the spirit of `strace -c`, with the extra columns: consecutive
/// calls, mean gap between them, mean result, mean requested size and the
/// top errnos. Rows are sorted by total time, largest first. Above it: the
/// run, its window, stream and device, the CPU time and the facts; below
/// it: the transitions, the calls in flight at the cut and the peers.
pub fn table(summary: &Summary) -> String {
    let r = &summary.run;
    let f = &summary.facts;
    let mut out = String::new();
    let _ =
        writeln!(
        out,
        "run {}  program {}  arch {}  {}  duration {:.6} s  processes {}  threads {}  events {}{}",
        summary.id,
        if f.program.is_empty() { "?" } else { f.program.as_str() },
        r.arch.name(),
        exit_text(r.exit),
        r.duration_ns as f64 / 1e9,
        r.processes,
        r.threads,
        r.events,
        if summary.truncated { "  (truncated)" } else { "" },
    );
    observe::origin_lines(&mut out, summary);
    scope::scope_lines(&mut out, summary);
    let _ = writeln!(
        out,
        "os {} {}  kernel {}  device {}  agent {}",
        f.os_name, f.os_version, f.kernel, f.device_model, f.agent_version
    );
    for x in &f.extra {
        let _ = writeln!(out, "fact {}={}", x.key, x.value);
    }
    let o = &r.overflow;
    if o.keys + o.transitions + o.threads + o.errnos > 0 {
        let _ = writeln!(
            out,
            "overflow: keys {} transitions {} threads {} errnos {}",
            o.keys, o.transitions, o.threads, o.errnos
        );
    }
    let total_time: u64 = summary.syscalls.iter().map(|s| s.total_ns).sum();
    let mut rows: Vec<&SyscallSummary> = summary.syscalls.iter().collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.key.cmp(&b.key)));
    let _ = writeln!(
        out,
        "{:>6} {:>11} {:>11} {:>9} {:>9} {:>9} {:>10} {:>11} {:>10} {:<18} {:<6} errnos",
        "% time",
        "seconds",
        "usecs/call",
        "calls",
        "errors",
        "consec",
        "gap-usecs",
        "mean-result",
        "mean-req",
        "syscall",
        "fd"
    );
    let _ = writeln!(out, "{}", "-".repeat(130));
    for s in &rows {
        let pct = if total_time == 0 {
            0.0
        } else {
            100.0 * s.total_ns as f64 / total_time as f64
        };
        let _ = writeln!(
            out,
            "{:>6.2} {:>11.6} {:>11.0} {:>9} {:>9} {:>9} {:>10.1} {:>11.1} {:>10} {:<18} {:<6} {}",
            pct,
            s.total_ns as f64 / 1e9,
            s.mean_ns() / 1e3,
            s.count,
            if s.errors() > 0 {
                s.errors().to_string()
            } else {
                String::new()
            },
            if s.consecutive_count() > 0 {
                s.consecutive_count().to_string()
            } else {
                String::new()
            },
            s.gap_mean_ns() / 1e3,
            s.result_mean(),
            s.param_mean()
                .map(|p| format!("{p:.1}"))
                .unwrap_or_default(),
            syscall_name(s),
            s.key.fd_kind.name(),
            top_errnos_text(s),
        );
    }
    let calls: u64 = summary.syscalls.iter().map(|s| s.count).sum();
    let errors: u64 = summary.syscalls.iter().map(|s| s.errors()).sum();
    let _ = writeln!(out, "{}", "-".repeat(130));
    let _ = writeln!(
        out,
        "{:>6} {:>11.6} {:>11} {:>9} {:>9} {:>9} {:>10} {:>11} {:>10} total",
        "100.00",
        total_time as f64 / 1e9,
        "",
        calls,
        errors,
        "",
        "",
        "",
        ""
    );
    if !summary.transitions.is_empty() {
        let _ = writeln!(out, "\ntransitions (most frequent kept):");
        let mut ts: Vec<&Transition> = summary.transitions.iter().collect();
        ts.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then((a.from, a.to).cmp(&(b.from, b.to)))
        });
        for t in ts {
            let _ = writeln!(
                out,
                "  {:>9} {} -> {}  gap {:.1} us",
                t.count,
                t.from,
                t.to,
                t.gap_mean_ns() / 1e3
            );
        }
    }
    observe::in_flight_lines(&mut out, summary);
    observe::peer_lines(&mut out, summary);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::RunId;
    use agent_core::{Arch, Collector, Facts, FdKind, RunRecord, SyscallEvent};

    fn sample() -> Summary {
        let mut c: Collector = Collector::new(0);
        for i in 0..10u64 {
            c.record(&SyscallEvent {
                tid: 7,
                arch: Arch::X86_64,
                nr: 0,
                args: [3, 0, 4096, 0, 0, 0],
                ret: if i == 3 { -11 } else { 100 },
                entry_ns: i * 10_000,
                exit_ns: i * 10_000 + 2_000,
                fd_kind: FdKind::Socket,
                peer: None,
            });
        }
        let run = RunRecord::new(1, 100_000, Exit::Code(0), Arch::X86_64);
        let mut facts = Facts::new();
        facts.add("net.adapter", "bridged").unwrap();
        c.summarize(RunId([0xab; 16]), run, facts)
    }

    #[test]
    fn json_has_the_documented_fields() {
        let v = to_json(&sample());
        assert_eq!(v["id"], "abababababababababababababababab");
        assert_eq!(v["run"]["exit"]["code"], 0);
        assert_eq!(v["facts"]["extra"]["net.adapter"], "bridged");
        let read = &v["syscalls"][0];
        assert_eq!(read["name"], "read");
        assert_eq!(read["fd_kind"], "socket");
        assert_eq!(read["count"], 10);
        assert_eq!(read["errors"], 1);
        assert_eq!(read["errnos"]["EAGAIN"], 1);
        assert_eq!(read["consecutive"], 9);
        assert_eq!(read["gap_mean_ns"], 8000.0);
        assert_eq!(read["result_mean"], 100.0);
        assert_eq!(read["param_mean"], 4096.0);
        assert_eq!(read["histogram"][2], 10);
        assert_eq!(v["transitions"][0]["from"], "read");
    }

    #[test]
    fn table_lists_rows_and_totals() {
        let t = table(&sample());
        assert!(t.contains("read"), "{t}");
        assert!(t.contains("EAGAIN:1"), "{t}");
        assert!(t.contains("net.adapter=bridged"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.trim_end().ends_with("total") && l.contains(" 10 ")),
            "{t}"
        );
    }

    /// Distinct unknown numbers are named as strace names them, in the
    /// JSON and the table; further ones share the `<unknown>` row.
    #[test]
    fn unknown_numbers_are_named_as_strace_names_them() {
        let mut c: Collector = Collector::new(0);
        for (i, nr) in [0x1f0u32, 0x1f1, 0x3ff, 0x3fe, 0x3fd].iter().enumerate() {
            c.record(&SyscallEvent {
                tid: 7,
                arch: Arch::X86_64,
                nr: *nr,
                args: [0; 6],
                ret: -38,
                entry_ns: i as u64 * 10_000,
                exit_ns: i as u64 * 10_000 + 2_000,
                fd_kind: FdKind::None,
                peer: None,
            });
        }
        let run = RunRecord::new(1, 100_000, Exit::Code(0), Arch::X86_64);
        let summary = c.summarize(RunId([1; 16]), run, Facts::new());
        let v = to_json(&summary);
        let names: Vec<&str> = v["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "<unknown>",
                "syscall_0x1f0",
                "syscall_0x1f1",
                "syscall_0x3fe",
                "syscall_0x3ff"
            ]
        );
        assert_eq!(v["transitions"][0]["from"], "syscall_0x1f0");
        let t = table(&summary);
        assert!(
            t.lines()
                .any(|l| l.contains("syscall_0x1f0") && l.contains("ENOSYS:1")),
            "{t}"
        );
    }
}
