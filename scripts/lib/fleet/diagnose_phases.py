#!/usr/bin/env python3
"""Runs `edge-service peers --method all --json` on the store for every
phase of phases.jsonl (its own training range and fault range) and writes
each answer to RUNS/rep<R>-<workload>-<fault>.json."""

import argparse
import json
import math
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--service", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--phases", required=True)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--peers-arg", action="append", default=[],
                    help="one more argument for every `peers` (e.g. --strict-paper); repeatable")
    ap.add_argument("--train-all", action="store_true",
                    help="train every phase also on every other rep's training range (--also-train)")
    args = ap.parse_args()
    failed = 0
    with open(args.phases) as f:
        phases = [json.loads(line) for line in f if line.strip()]
    for p in phases:
        # Whole seconds inside each range: a window that began before the
        # phase (fault not yet on) or ended after it is left out.
        cmd = [
            args.service, "peers", "--db", args.db, "--group", args.group,
            "--train-since", str(math.ceil(p["train_since_ns"] / 1e9)),
            "--train-until", str(math.floor(p["train_until_ns"] / 1e9)),
            "--since", str(math.ceil(p["since_ns"] / 1e9)),
            "--until", str(math.floor(p["until_ns"] / 1e9)),
            "--method", "all", "--json",
        ] + args.peers_arg
        if args.train_all:
            # Every rep's fault-free training jobs, not only this rep's:
            # a min..max learnt from a few slices is narrow.
            own = (p["train_since_ns"], p["train_until_ns"])
            for since, until in sorted({(q["train_since_ns"], q["train_until_ns"]) for q in phases}):
                if (since, until) == own or (since < p["until_ns"] and p["since_ns"] < until):
                    continue
                cmd += ["--also-train", f"{math.ceil(since / 1e9)},{math.floor(until / 1e9)}"]
        name = f"rep{p['rep']}-{p['workload']}-{p['fault']}"
        out = subprocess.run(cmd, capture_output=True, text=True)
        path = os.path.join(args.runs, name + ".json")
        if out.returncode != 0:
            failed += 1
            with open(os.path.join(args.runs, name + ".err"), "w") as e:
                e.write(" ".join(cmd) + "\n" + out.stderr)
            print(f"peers failed for {name}: {out.stderr.strip()}", file=sys.stderr)
            continue
        try:
            json.loads(out.stdout)
        except ValueError as err:
            failed += 1
            print(f"peers printed no JSON for {name}: {err}", file=sys.stderr)
            continue
        with open(path, "w") as w:
            w.write(out.stdout)
    if failed:
        sys.exit(f"edge-service peers failed on {failed} of {len(phases)} phases")


if __name__ == "__main__":
    main()
