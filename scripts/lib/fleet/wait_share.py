#!/usr/bin/env python3
"""Where the clients wait: per phase, each server's share of the clients'
windows whose latest socket call (ending inside the window) was to it.

For a `scripts/fleet-eval` output folder (its `fleet.db`, `phases.jsonl`
and `devices.txt`): the FUSE clients' windows (devices c1, c2, ...), each
one's socket peers with their most recent call (`peers.last_end_unix_ns`);
the peer of the latest call in the window is the server the client was
waiting on when the window was cut. Fault-free, each of 4 servers gets
about a quarter; a server losing packets holds the clients (the wait
method's signal, docs/peers.md "`wait`"). Prints each phase's shares
(fault phase, and its training) and at the end per fault the target's
share against every other server's largest (docs/fleet-eval.md, "Packet
loss").

    scripts/lib/fleet/wait_share.py OUT
"""

import argparse
import collections
import statistics

from fleet_store import load, servers_by_addr


def shares(db, names, by_addr, since, until):
    """server -> share of the client windows in [since, until) whose latest
    call in the window was to it; and how many windows were samples."""
    latest = {}
    query = """SELECT r.seq, r.device, r.start_unix_ns, r.duration_ns, p.address, p.last_end_unix_ns
               FROM peers p JOIN runs r ON r.seq = p.run
               WHERE r.window_index > 0 AND r.start_unix_ns >= ? AND r.start_unix_ns < ?"""
    for seq, device, start, duration, addr, last in db.execute(query, (int(since), int(until))):
        node = names.get(device, "")
        if not node.startswith("c") or node.endswith("w") or last is None:
            continue
        if not start <= last < start + duration:
            continue
        if seq not in latest or last > latest[seq][0]:
            latest[seq] = (last, by_addr.get(addr))
    counts = collections.Counter(server for _, server in latest.values() if server)
    n = sum(counts.values())
    return {s: counts[s] / n for s in sorted(set(by_addr.values()))} if n else {}, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    args = ap.parse_args()
    db, phases, names = load(args.out)
    by_addr = servers_by_addr(db, names)
    summary = collections.defaultdict(lambda: {"target": [], "others": []})
    for p in phases:
        fault, n = shares(db, names, by_addr, p["fault_at_ns"], p["until_ns"])
        train, _ = shares(db, names, by_addr, p["train_since_ns"], p["train_until_ns"])
        target = p.get("target_node", "")
        cells = [
            f"{s}{'*' if s == target else ''} {fault[s]:.2f} (train {train.get(s, 0):.2f})"
            for s in sorted(fault)
        ]
        print(f"rep {p['rep']} {p['workload']} {p['fault']} {target or '-'}, {n} samples: " + " | ".join(cells))
        key = (p["fault"], p.get("workload", ""))
        for s, x in fault.items():
            summary[key]["target" if s == target else "others"].append(x)
    print()
    print("| fault | workload | target server's share: median (min-max) | other servers' largest |")
    print("|---|---|---|---|")
    for (fault, workload), s in sorted(summary.items()):
        t = s["target"]
        target = f"{statistics.median(t):.2f} ({min(t):.2f}-{max(t):.2f})" if t else "-"
        others = f"{max(s['others']):.2f}" if s["others"] else "-"
        print(f"| {fault} | {workload} | {target} | {others} |")


if __name__ == "__main__":
    main()
