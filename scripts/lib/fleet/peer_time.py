#!/usr/bin/env python3
"""The effect of a fault on the clients' socket time per server.

For a `scripts/fleet-eval` output folder (its `fleet.db`, `phases.jsonl`
and `devices.txt`): per slice of SLICE windows, at every client device,
the mean time per call on its sockets to each server (the windows' peer
tables: calls and time per peer address), against the median of the
other servers' at the same client; a server's score in the slice is the
median over clients of the log of that ratio (0: like its peers; +0.2:
calls on its sockets take 22 % longer than on the others'). Prints, per
phase, each server's scores in the fault phase beside the largest in its
training, and at the end per fault the target's scores against every
other server's largest (docs/fleet-eval.md, "Packet loss").

    scripts/lib/fleet/peer_time.py OUT [--slice 5] [--min-calls 100]
"""

import argparse
import collections
import math
import statistics
import sys

from fleet_store import load, servers_by_addr


def slices(db, names, by_addr, since, until, slice_windows):
    """(slice, client, server) -> [calls, time ns] over [since, until)."""
    out = collections.defaultdict(lambda: [0, 0])
    query = """SELECT r.device, (r.start_unix_ns + 500000000) / 1000000000, p.address,
                      SUM(p.calls), SUM(p.total_ns)
               FROM peers p JOIN runs r ON r.seq = p.run
               WHERE r.window_index > 0 AND r.start_unix_ns >= ? AND r.start_unix_ns < ?
               GROUP BY 1, 2, 3"""
    for device, window, addr, calls, total in db.execute(query, (int(since), int(until))):
        client = names.get(device, "")
        server = by_addr.get(addr)
        if not client.startswith("c") or server is None:
            continue
        e = out[(window // slice_windows, client, server)]
        e[0] += calls
        e[1] += total
    return out


def scores(cells, min_calls):
    """server -> [score per slice], in slice order."""
    by_slice = collections.defaultdict(lambda: collections.defaultdict(dict))
    for (s, client, server), (calls, total) in cells.items():
        if calls >= min_calls and total > 0:
            by_slice[s][client][server] = total / calls
    out = collections.defaultdict(list)
    for s in sorted(by_slice):
        per_server = collections.defaultdict(list)
        for per_client in by_slice[s].values():
            for server, t in per_client.items():
                others = [x for k, x in per_client.items() if k != server]
                if len(others) >= 2:
                    per_server[server].append(math.log(t / statistics.median(others)))
        for server, logs in per_server.items():
            if len(logs) >= 2:
                out[server].append(statistics.median(logs))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--slice", type=int, default=5)
    ap.add_argument("--min-calls", type=int, default=100)
    args = ap.parse_args()
    db, phases, names = load(args.out)
    by_addr = servers_by_addr(db, names)
    if not by_addr:
        sys.exit(f"{args.out}: no server with an addr fact")
    summary = collections.defaultdict(lambda: {"target": [], "others_max": []})
    for p in phases:
        train = scores(
            slices(db, names, by_addr, p["train_since_ns"], p["train_until_ns"], args.slice),
            args.min_calls,
        )
        fault = scores(
            slices(db, names, by_addr, p["fault_at_ns"], p["until_ns"], args.slice),
            args.min_calls,
        )
        target = p.get("target_node", "")
        cells = []
        for server in sorted(fault):
            mark = "*" if server == target else ""
            trained = max(train.get(server, [0.0]))
            cells.append(
                f"{server}{mark} train max {trained:+.2f} fault "
                + " ".join(f"{x:+.2f}" for x in fault[server])
            )
            key = (p["fault"], p.get("workload", ""))
            if server == target:
                summary[key]["target"].extend(fault[server])
            elif fault[server]:
                summary[key]["others_max"].append(max(fault[server]))
        print(f"rep {p['rep']} {p['workload']} {p['fault']} {target or '-'}: " + " | ".join(cells))
    print()
    print("| fault | workload | target's slices: median (min-max) | other servers' largest |")
    print("|---|---|---|---|")
    for (fault, workload), s in sorted(summary.items()):
        t = s["target"]
        target = (
            f"{statistics.median(t):+.2f} ({min(t):+.2f} to {max(t):+.2f}), {len(t)} slices"
            if t
            else "-"
        )
        others = f"{max(s['others_max']):+.2f}" if s["others_max"] else "-"
        print(f"| {fault} | {workload} | {target} | {others} |")


if __name__ == "__main__":
    main()
