#!/usr/bin/env python3
"""Where packet loss on one Spark worker shows in the workers' socket tables.

For a `scripts/mapreduce-eval` output folder (its `fleet.db`, `phases.jsonl`
and `devices.txt`). On that fleet every worker is client and server of
every other (shuffle fetches between executors), so there are no clients
to watch a server from: each worker W is judged by what the *other*
workers see on their links to W, against their links to the remaining
workers (the master and DNS left out). Per phase (from the fault's start)
and per worker W, the median over the other workers O of the log of:

- `time`: O's mean time per socket call to W / the median of O's to the
  other workers (+0.2: its calls to W take 22 % longer);
- `bytes`: the same for bytes per call;
- `calls`: O's calls to W / the median of O's calls to the others (the
  shuffle traffic W takes part in);
- `latest`: O's windows whose latest worker-bound call (ending inside the
  window) was to W / the median of the same count for the others (the
  wait method's share, from every worker);
- `latest-any`: the same over the windows whose latest call of all (the
  master's included) was to a worker;

and `own`: the log of W's own mean time per socket call to the other
workers / the median of the other workers' own. Prints each phase's
target score beside the other workers' largest, for the training and the
fault range, and at the end per fault the target's median against the
others' range (docs/mapreduce-eval.md, "Packet loss").

    scripts/lib/fleet/worker_links.py OUT
"""

import argparse
import collections
import json
import math
import statistics
import sys

from fleet_store import load

METRICS = ("time", "bytes", "calls", "latest", "latest-any", "own")


def workers_by_addr(db, names):
    """Worker node by address, from the `addr` fact of devices named mr-w*."""
    out = {}
    for device, facts in db.execute(
        "SELECT DISTINCT device, facts FROM runs WHERE window_index > 0 AND device IS NOT NULL"
    ):
        node = names.get(device, "")
        try:
            addr = json.loads(facts).get("extra", {}).get("addr")
        except (ValueError, AttributeError):
            continue
        if node.startswith("mr-w") and addr:
            out[addr] = node
    return out


def links(db, names, by_addr, since, until):
    """(observer, peer) -> [calls, bytes, time ns, latest worker-bound call
    windows, latest call windows]."""
    out = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
    latest = {}
    latest_any = {}
    query = """SELECT r.seq, r.device, r.start_unix_ns, r.duration_ns, p.address,
                      p.calls, p.bytes, p.total_ns, p.last_end_unix_ns
               FROM peers p JOIN runs r ON r.seq = p.run
               WHERE r.window_index > 0 AND r.start_unix_ns >= ? AND r.start_unix_ns < ?"""
    for seq, device, start, duration, addr, calls, nbytes, total, last in db.execute(
        query, (int(since), int(until))
    ):
        observer = names.get(device, "")
        peer = by_addr.get(addr)
        in_window = last is not None and start <= last < start + duration
        if in_window and observer.startswith("mr-w") and (seq not in latest_any or last > latest_any[seq][0]):
            latest_any[seq] = (last, observer, peer)
        if peer is None or peer == observer or not observer.startswith("mr-w"):
            continue
        e = out[(observer, peer)]
        e[0] += calls
        e[1] += nbytes
        e[2] += total
        if in_window:
            if seq not in latest or last > latest[seq][0]:
                latest[seq] = (last, observer, peer)
    for _, observer, peer in latest.values():
        out[(observer, peer)][3] += 1
    for _, observer, peer in latest_any.values():
        if peer is not None and peer != observer:
            out[(observer, peer)][4] += 1
    return out


def log_ratio(x, others):
    others = [o for o in others if o > 0]
    if x <= 0 or len(others) < 2:
        return None
    return math.log(x / statistics.median(others))


def scores(cells, workers):
    """metric -> worker -> score (None: too few calls)."""
    value = {
        "time": lambda c: c[2] / c[0] if c[0] else 0,
        "bytes": lambda c: c[1] / c[0] if c[0] else 0,
        "calls": lambda c: c[0],
        "latest": lambda c: c[3],
        "latest-any": lambda c: c[4],
    }
    out = {m: {} for m in METRICS}
    for m, f in value.items():
        for w in workers:
            logs = []
            for o in workers:
                if o == w or (o, w) not in cells:
                    continue
                others = [f(cells[(o, p)]) for p in workers if p not in (o, w) and (o, p) in cells]
                r = log_ratio(f(cells[(o, w)]), others)
                if r is not None:
                    logs.append(r)
            out[m][w] = statistics.median(logs) if len(logs) >= 2 else None
    own = {}
    for w in workers:
        calls = sum(cells[(w, p)][0] for p in workers if (w, p) in cells)
        total = sum(cells[(w, p)][2] for p in workers if (w, p) in cells)
        own[w] = total / calls if calls else 0
    for w in workers:
        out["own"][w] = log_ratio(own[w], [own[o] for o in workers if o != w])
    return out


def fmt(x):
    return "  -  " if x is None else f"{x:+.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    args = ap.parse_args()
    db, phases, names = load(args.out)
    by_addr = workers_by_addr(db, names)
    workers = sorted(set(by_addr.values()))
    if len(workers) < 3:
        sys.exit(f"{args.out}: fewer than 3 workers with an addr fact")
    summary = collections.defaultdict(lambda: collections.defaultdict(lambda: {"t": [], "o": []}))
    for p in phases:
        fault = scores(links(db, names, by_addr, p["fault_at_ns"], p["until_ns"]), workers)
        train = scores(links(db, names, by_addr, p["train_since_ns"], p["train_until_ns"]), workers)
        target = p.get("target_node", "")
        cells = []
        for m in METRICS:
            if target:
                others = [x for w, x in fault[m].items() if w != target and x is not None]
                t_others = [x for w, x in train[m].items() if w != target and x is not None]
                cells.append(
                    f"{m} {fmt(fault[m][target])} (others ≤{fmt(max(others, default=None))}; "
                    f"train {fmt(train[m][target])}, others ≤{fmt(max(t_others, default=None))})"
                )
                key = (p["fault"], p.get("workload", ""))
                if fault[m][target] is not None:
                    summary[key][m]["t"].append(fault[m][target])
                summary[key][m]["o"].extend(others)
            else:
                xs = [x for x in fault[m].values() if x is not None]
                cells.append(f"{m} largest {fmt(max(xs, default=None))}")
                summary[(p["fault"], p.get("workload", ""))][m]["o"].extend(xs)
        print(f"rep {p['rep']} {p['workload']} {p['fault']} {target or '-'}: " + " | ".join(cells))
    print()
    print("| fault | workload | N | " + " | ".join(f"{m}: target median (min to max) / others (min to max)" for m in METRICS) + " |")
    print("|---|---|---|" + "---|" * len(METRICS))
    for (fault, workload), per in sorted(summary.items()):
        row = []
        n = 0
        for m in METRICS:
            t, o = per[m]["t"], per[m]["o"]
            n = max(n, len(t))
            target = f"{statistics.median(t):+.2f} ({min(t):+.2f} to {max(t):+.2f})" if t else "-"
            others = f"{fmt(min(o))} to {fmt(max(o))}" if o else "-"
            row.append(f"{target} / {others}")
        print(f"| {fault} | {workload} | {n or '-'} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
