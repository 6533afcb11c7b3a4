#!/usr/bin/env python3
"""How early a disk fault shows in the median method's metric: for each
disk-hog phase of a fleet run, the target server's `dread` mean minus the
median of the servers' means, window by window from the fault on, beside
the same deviation over every server in the run's fault-free `none`
phases (the noise a threshold has to clear).

    cargo run --release -p service --example window_calls -- OUT/fleet.db > calls.tsv
    python3 scripts/lib/fleet/disk_onset.py OUT calls.tsv [--seconds 13] [--tail-us US]

`--tail-us US`: instead of the mean, the share of a window's file reads
in the latency histogram's buckets from US µs up (a power of two: bucket
floors are 1, 2, 4, ... µs), target minus median.

Windows are aligned as the peer methods align them (start rounded to the
nearest second); a deviation is printed only where 3 or more servers made
file reads (the method's MIN_DEVICES)."""

import argparse
import collections
import json
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("calls")
    ap.add_argument("--seconds", type=int, default=13)
    ap.add_argument("--tail-us", type=int)
    a = ap.parse_args()
    node = dict(reversed(line.split()) for line in open(f"{a.run}/devices.txt"))
    # The histogram's bucket b holds calls from 2^(b-1) µs (agent-core's
    # bucket_of); its columns follow the 8 fixed ones.
    first = None if a.tail_us is None else 8 + a.tail_us.bit_length()
    # node -> window second -> (dread count, dread total ns, or the tail's
    # calls and the histogram's when --tail-us)
    rows = collections.defaultdict(dict)
    for line in open(a.calls):
        f = line.rstrip("\n").split("\t")
        n = node.get(f[0])
        if n is None or not n.startswith("s"):
            continue
        if first is None:
            value = (int(f[4]), int(f[5]))
        else:
            hist = [int(x) for x in f[8:]]
            value = (sum(hist), sum(hist[first - 8 :]))
        rows[n][(int(f[2]) + 500_000_000) // 10**9] = value
    servers = sorted(rows)

    def deviation(n, w):
        means = {
            m: rows[m][w][1] / rows[m][w][0]
            for m in servers
            if w in rows[m] and rows[m][w][0]
        }
        if len(means) < 3 or n not in means:
            return None
        d = means[n] - statistics.median(means.values())
        return d if first is not None else d / 1e6

    phases = [json.loads(line) for line in open(f"{a.run}/phases.jsonl")]
    for p in phases:
        if p["fault"] != "disk-hog":
            continue
        t = p["fault_at_ns"] // 10**9
        devs = [deviation(p["target_node"], w) for w in range(t, t + a.seconds)]
        cells = " ".join("  -  " if d is None else f"{d:+.2f}" for d in devs)
        unit = "dread dev ms" if first is None else f"dread share >= {a.tail_us} us, dev"
        print(f"rep {p['rep']} {p['target_node']} {unit}, +0..+{a.seconds - 1} s: {cells}")
    noise = sorted(
        d
        for p in phases
        if p["fault"] == "none"
        for w in range(p["since_ns"] // 10**9, p["until_ns"] // 10**9)
        for n in servers
        if (d := deviation(n, w)) is not None
    )
    if noise:
        q = lambda f: noise[min(len(noise) - 1, int(len(noise) * f))]
        print(
            f"none phases, every server ({len(noise)} windows): dev "
            f"p50 {q(0.5):+.2f} p95 {q(0.95):+.2f} p99 {q(0.99):+.2f} max {noise[-1]:+.2f}"
        )


if __name__ == "__main__":
    main()
