#!/usr/bin/env python3
"""The online fleet's table (scripts/fleet-eval --online): every incident
event the webhook receiver got (alerts.jsonl), attributed to the stretch
of the run it opened in (segments.jsonl), per fault x workload.

- An incident opened between a fault's start and the start of the next
  fault phase (the fault phase and its fault-free recovery) naming the
  faulty node with the fault's cause is a detection (TP); its delays are
  from the fault's start to the incident's opened time (`opened_unix_ns`,
  the service's clock), to the receiver getting it, and to the end of its
  first flagged window (which may come before the fault: a finding's
  windows run back over over-threshold windows just before it).
- An incident on another node there is a false incident of that phase
  (FP); one on the faulty node with another cause is counted apart.
- Any incident opening in a fault-free stretch (the `none` phases and
  their recoveries, each rep's training, the warm-up once the analysis
  judges) is a false incident of that stretch.
- Each opened incident must get its closed event after it (receive
  order); a detection's close is timed from the fault's stop.

A client node is two devices (its FUSE process "c1", its workload "c1w"):
either names it. Events are de-duplicated on (id, event) (the webhook
delivers at least once)."""

import argparse
import json
import sqlite3
import sys
from collections import defaultdict
from statistics import median


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def node_of(devices, device):
    name = devices.get(device)
    return name.rstrip("w") if name else device[:8]


def stats(values):
    if not values:
        return "-"
    return f"{median(values):.1f} / {max(values):.1f}"


def upload_lag(db, since_ns):
    """Seconds from a window's end to its row in the store: median, p90, max."""
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT received_unix_ns - (start_unix_ns + duration_ns) FROM runs "
        "WHERE window_ns > 0 AND start_unix_ns >= ? ORDER BY 1", (since_ns,)).fetchall()
    lags = [r[0] / 1e9 for r in rows if r[0] is not None]
    if not lags:
        return None
    return {"windows": len(lags), "median_s": lags[len(lags) // 2],
            "p90_s": lags[int(len(lags) * 0.9)], "max_s": lags[-1]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--segments", required=True)
    ap.add_argument("--alerts", required=True)
    ap.add_argument("--devices", required=True)
    ap.add_argument("--db")
    ap.add_argument("--close-after", type=float, default=0)
    ap.add_argument("--table")
    ap.add_argument("--json")
    args = ap.parse_args()
    devices = {}
    with open(args.devices) as f:
        for line in f:
            name, device = line.split()
            devices[device] = name
    segments = sorted(load_jsonl(args.segments), key=lambda s: s["since_ns"])
    events = []
    seen = set()
    for i, line in enumerate(load_jsonl(args.alerts)):
        body = line["body"]
        key = (body.get("id"), body.get("event"))
        if key in seen:
            continue
        seen.add(key)
        events.append((i, line["received_unix_ns"], body))
    opened = {b["id"]: (i, r, b) for i, r, b in events if b.get("event") == "opened"}
    closed = {b["id"]: (i, r, b) for i, r, b in events if b.get("event") == "closed"}
    problems = []
    for iid in closed:
        if iid not in opened:
            problems.append(f"incident {iid} closed, never opened")
        elif closed[iid][0] < opened[iid][0]:
            problems.append(f"incident {iid} closed before it opened")

    # The stretch each incident opened in: a fault phase and its recovery
    # form one unit, attributed to the fault.
    def unit_of(t):
        index = None
        for k, s in enumerate(segments):
            if s["since_ns"] <= t:
                index = k
        if index is None:
            return None
        if segments[index]["kind"] == "recovery" and index > 0 and segments[index - 1]["kind"] == "fault":
            index -= 1
        return index

    hits = defaultdict(list)  # segment index -> incidents
    for iid, (i, received, b) in sorted(opened.items()):
        k = unit_of(b["opened_unix_ns"])
        if k is not None:
            hits[k].append(iid)

    cells = {}
    fault_free = defaultdict(lambda: {"phases": 0, "with_incident": 0, "incidents": []})
    incidents = []
    for k, s in enumerate(segments):
        next_since = segments[k + 2]["since_ns"] if (s["kind"] == "fault" and k + 2 < len(segments)) else None
        wrong_node, wrong_cause, right = [], [], []
        for iid in hits.get(k, []):
            _, received, b = opened[iid]
            node = node_of(devices, b["device"])
            row = {"id": iid, "node": node, "cause": b["cause"].get("kind"), "metric": b.get("metric"),
                   "segment": k, "kind": s["kind"], "rep": s["rep"], "workload": s["workload"], "fault": s["fault"]}
            incidents.append(row)
            if s["kind"] == "fault" and s["fault"] != "none" and node == s["target_node"]:
                if b["cause"].get("kind") == s["cause"]:
                    right.append(iid)
                else:
                    wrong_cause.append(iid)
            else:
                wrong_node.append(iid)
        if s["kind"] != "fault" or s["fault"] == "none":
            if s["kind"] == "warmup":
                continue  # learning: nothing is judged yet
            if s["kind"] == "recovery" and k > 0 and segments[k - 1]["kind"] == "fault":
                continue  # part of its fault phase's unit
            label = "none" if s["kind"] == "fault" else s["kind"]
            ff = fault_free[(label, s["workload"])]
            ff["phases"] += 1
            if wrong_node:
                ff["with_incident"] += 1
                ff["incidents"] += wrong_node
            continue
        cell = cells.setdefault((s["fault"], s["workload"]), {
            "fault": s["fault"], "workload": s["workload"], "cause": s["cause"], "runs": 0, "tp": 0, "fp": 0,
            "wrong_cause": 0, "false_on": defaultdict(int), "delay_open_s": [], "delay_received_s": [],
            "delay_window_s": [], "closed_in_order": 0, "closed_in_recovery": 0, "close_after_stop_s": [],
            "missed": []})
        cell["runs"] += 1
        if wrong_node:
            cell["fp"] += 1
            for iid in wrong_node:
                cell["false_on"][node_of(devices, opened[iid][2]["device"])] += 1
        cell["wrong_cause"] += len(wrong_cause)
        if not right:
            cell["missed"].append(f"rep {s['rep']} on {s['target_node']}")
            continue
        cell["tp"] += 1
        iid = min(right, key=lambda x: opened[x][2]["opened_unix_ns"])
        _, received, b = opened[iid]
        cell["delay_open_s"].append((b["opened_unix_ns"] - s["fault_at_ns"]) / 1e9)
        cell["delay_received_s"].append((received - s["fault_at_ns"]) / 1e9)
        cell["delay_window_s"].append((b["first_window_unix_ns"] + 1_000_000_000 - s["fault_at_ns"]) / 1e9)
        if iid in closed and closed[iid][0] > opened[iid][0]:
            cell["closed_in_order"] += 1
            c = closed[iid][2]["closed_unix_ns"]
            cell["close_after_stop_s"].append((c - s["until_ns"]) / 1e9)
            if next_since is None or c < next_since:
                cell["closed_in_recovery"] += 1

    never_closed = [iid for iid in opened if iid not in closed]
    lines = [
        "| fault | workload | runs | TP | FP (other node) | wrong cause on the node | fault → opened (s, median / max) | fault → received (s) | fault → end of first flagged window (s) | closed after, in order | closed in the recovery | stop → closed (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells.values():
        false = ", ".join(f"{n}×{v}" for n, v in sorted(c["false_on"].items()))
        lines.append(
            f"| {c['fault']} | {c['workload']} | {c['runs']} | {c['tp']}/{c['runs']} | {c['fp']}/{c['runs']}"
            f"{' (' + false + ')' if false else ''} | {c['wrong_cause']} | {stats(c['delay_open_s'])} | "
            f"{stats(c['delay_received_s'])} | {stats(c['delay_window_s'])} | {c['closed_in_order']}/{c['tp']} | "
            f"{c['closed_in_recovery']}/{c['tp']} | {stats(c['close_after_stop_s'])} |")
    lines += ["", "| fault-free stretch | workload | phases | with a false incident |", "|---|---|---|---|"]
    total = sum(v["phases"] for v in fault_free.values())
    bad = sum(v["with_incident"] for v in fault_free.values())
    for (label, workload), v in sorted(fault_free.items()):
        lines.append(f"| {label} | {workload} | {v['phases']} | {v['with_incident']} |")
    lines.append(f"| **all** | | {total} | {bad} |")
    lag = upload_lag(args.db, segments[0]["since_ns"]) if args.db and segments else None
    lines.append("")
    lines.append(f"Incident events received: {len(events)} ({len(opened)} opened, {len(closed)} closed); "
                 f"never closed: {never_closed or 'none'}; order problems: {problems or 'none'}.")
    if lag:
        lines.append(f"Window end → stored (upload lag) over {lag['windows']} windows: median {lag['median_s']:.2f} s, "
                     f"p90 {lag['p90_s']:.2f} s, max {lag['max_s']:.2f} s.")
    for c in cells.values():
        if c["missed"]:
            lines.append(f"Missed: {c['fault']} under {c['workload']}: {', '.join(c['missed'])}.")
    for row in incidents:
        lines.append(f"- incident {row['id']}: {row['node']} cause {row['cause']} ({row['metric']}), opened in "
                     f"rep {row['rep']} {row['kind']} {row['workload']} {row['fault']}")
    text = "\n".join(lines)
    print(text)
    if args.table:
        with open(args.table, "w") as f:
            f.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({
                "cells": [dict(c, false_on=dict(c["false_on"])) for c in cells.values()],
                "fault_free": [dict(v, stretch=k[0], workload=k[1]) for k, v in sorted(fault_free.items())],
                "fault_free_phases": total, "fault_free_with_incident": bad,
                "incidents": incidents, "never_closed": never_closed, "order_problems": problems,
                "events": [dict(b, received_unix_ns=r) for _, r, b in events],
                "upload_lag": lag, "close_after_s": args.close_after,
            }, f, indent=1)
    sys.exit(0)


if __name__ == "__main__":
    main()
