#!/usr/bin/env python3
"""TP and FP per fault x workload x method from the fleet's phases and the
`edge-service peers` answers, in the research's definitions, beside the
research's figures.

TP: the fraction of runs of a fault whose fault-injected node is among the
method's findings with the fault's cause (and, for cause errno, the fault's
errno as the finding's metric). FP: the fraction of runs where at
least one fault-free node is among the method's findings (any cause); for
the fault-free control (`none`) every node is fault-free. A client node is
two devices (its FUSE process "c1", its workload "c1w"): either names it."""

import argparse
import json
import os
import sys
from collections import defaultdict
from statistics import median

import effect

METHODS = ("median", "histogram", "semantic", "link", "wait", "errno", "hang", "statistical")
STATISTICAL = ("median", "histogram", "link", "wait")
# "statistical": the four statistical methods' findings together, what
# `peers --method all` answers on a performance fault (TP: any of them
# names the node with the right cause; FP: any of them flags another).
ANY_STATISTICAL = "statistical"
# Khadke's semantic method (§4.3): judged on performance faults beside the
# statistical ones, not joined into "statistical" (whose figures predate it).
HADOOP_SEMANTIC_METHOD = "semantic"
SEMANTIC = ("errno", "hang")
SEMANTIC_CAUSES = ("errno", "crash", "hang")


# The causes a method can name when it cannot name every one: its TP on
# other faults is n/a (its row is there for the false positives).
NAMES = {"errno": ("errno",), "hang": ("crash", "hang"), "link": ("network",), "wait": ("network",)}


def methods_for(cause):
    """The methods judged on a fault: the statistical ones (median,
    histogram, link, wait) on performance faults, the semantic ones on errors,
    crashes and hangs, all of them on the fault-free control (any finding
    there is a false positive); "statistical" joins the four."""
    if cause == "none":
        return METHODS
    if cause in SEMANTIC_CAUSES:
        return SEMANTIC
    return STATISTICAL + (HADOOP_SEMANTIC_METHOD, ANY_STATISTICAL)

# The research's figures (TP/FP) for the nearest fault and workload: PVFS
# (Kasick et al., Table 1: the statistical median method) and Hadoop
# (Khadke et al., Table 1: statistical, disk-hog only, over MapReduce jobs,
# not per workload). None where the paper has no figure.
PVFS = {
    ("disk-hog", "ddr"): "1/0 dread",
    ("disk-hog", "ddw"): "0.4/0 dwrite",
    ("disk-hog", "postmark"): "1/0.1",
    ("disk-busy", "ddr"): "1/0 dread",
    ("disk-busy", "ddw"): "0.4/0 dwrite",
    ("disk-busy", "postmark"): "0.9-1/0.1",
    ("network-hog", "ddr"): "0/0 ncread",
    ("network-hog", "ddw"): "0/0 nsread",
    ("network-hog", "postmark"): "0.9-1/0",
}
HADOOP = {"disk-hog": "0.88/0.13"}
# Khadke et al., Table 2: semantic, disk-hog (speculative; non-speculative).
HADOOP_SEMANTIC = {"disk-hog": "0.63/0.00; 0.69/0.06"}
# Kasick et al. §8: "for propagated errors and crash/hang faults, our
# diagnosis algorithms successfully diagnosed the faulty server with no
# false positives" (err-space and err-files there under their own
# workloads, crash/hang from err-fsize, err-vmsize, err-remount).
PVFS_SEMANTIC = {"err-space": "1/0", "err-files": "1/0", "crash": "1/0", "hang": "1/0"}


def load(args):
    devices = {}
    with open(args.devices) as f:
        for line in f:
            node, device = line.split()
            devices[device] = node
    phases = []
    with open(args.phases) as f:
        for line in f:
            if line.strip():
                phases.append(json.loads(line))
    return devices, phases


def node_of(devices, device):
    """The node a device id belongs to (its name without the workload's
    "w"), or the id's first digits when it is none of the fleet's."""
    name = devices.get(device)
    return name.rstrip("w") if name else device[:8]


def score(devices, phases, runs):
    # (fault, workload, method) -> [runs, tp, fp, flagged nodes]
    table = defaultdict(lambda: {"runs": 0, "tp": 0, "fp": 0, "missing": 0, "false": defaultdict(int), "ttd": []})
    for p in phases:
        name = f"rep{p['rep']}-{p['workload']}-{p['fault']}.json"
        path = os.path.join(runs, name)
        answer = None
        if os.path.exists(path):
            with open(path) as f:
                answer = json.load(f)
        for method in methods_for(p["cause"]):
            cell = table[(p["fault"], p["workload"], method)]
            cell["cause"] = p["cause"]
            cell["runs"] += 1
            if answer is None:
                cell["missing"] += 1
                continue
            wanted = STATISTICAL if method == ANY_STATISTICAL else (method,)
            findings = [x for x in answer.get("findings", []) if x.get("method") in wanted]
            target = p["target_node"]
            flagged = [(node_of(devices, x["device"]), x["cause"]) for x in findings]
            right = [(node_of(devices, x["device"]), x["cause"]) for x in findings
                     if not p.get("errno") or x.get("metric") == p["errno"]]
            if target and (target, p["cause"]) in right:
                cell["tp"] += 1
                # Time to detection: from the fault to the end of the first
                # window of the finding (when a run of `peers` over the
                # windows so far could have named it).
                if "fault_at_ns" in p:
                    window = answer.get("window_ns", 0)
                    firsts = [x["first_window_unix_ns"] for x in findings
                              if node_of(devices, x["device"]) == target and x["cause"] == p["cause"]]
                    cell["ttd"].append((min(firsts) + window - p["fault_at_ns"]) / 1e9)
            wrong = {node for node, _ in flagged if node != target}
            if wrong:
                cell["fp"] += 1
                for node in wrong:
                    cell["false"][node] += 1
    return table


def effect_text(values, fault):
    """The median effect of a fault's phases on its node's traced calls
    (effect.py): "×10" slower file calls, or "×0.09" the bytes per
    socket call."""
    if not values:
        return "-"
    what = "file-call time" if fault in effect.DISK_FAULTS else "bytes/call"
    return f"{what} ×{median(values):.2g} ({min(values):.2g}-{max(values):.2g})"


def render(table, faults, workloads, effects):
    lines = [
        "| fault | workload | method | runs | TP | FP | false alarms on | research TP/FP | detected after (s) | effect on the node's traced calls |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for fault in faults:
        for workload in workloads:
            for method in METHODS:
                cell = table.get((fault, workload, method))
                if not cell:
                    continue
                n = cell["runs"] - cell["missing"]
                cause = cell.get("cause")
                blind = method in NAMES and cause not in NAMES[method]
                tp = "n/a" if fault == "none" or blind else (f"{cell['tp'] / n:.2f}" if n else "-")
                fp = f"{cell['fp'] / n:.2f}" if n else "-"
                false = ", ".join(f"{k}×{v}" for k, v in sorted(cell["false"].items())) or "-"
                if method == "median" or (method == "link" and fault == "network-hog"):
                    paper = "PVFS " + PVFS[(fault, workload)] if (fault, workload) in PVFS else "-"
                elif method in SEMANTIC:
                    paper = "PVFS " + PVFS_SEMANTIC[fault] if fault in PVFS_SEMANTIC and not blind else "-"
                elif method == "histogram":
                    paper = "Hadoop " + HADOOP[fault] if fault in HADOOP else "-"
                elif method == HADOOP_SEMANTIC_METHOD:
                    paper = "Hadoop " + HADOOP_SEMANTIC[fault] if fault in HADOOP_SEMANTIC else "-"
                else:
                    paper = "-"
                missing = f" ({cell['missing']} failed)" if cell["missing"] else ""
                ttd = cell["ttd"]
                after = "-" if not ttd else f"{sum(ttd) / len(ttd):.1f} ({min(ttd):.1f}-{max(ttd):.1f})"
                touched = effect_text(effects.get((fault, workload)), fault)
                lines.append(f"| {fault} | {workload} | {method} | {n}{missing} | {tp} | {fp} | {false} | {paper} | {after} | {touched} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phases", required=True)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--devices", required=True)
    ap.add_argument("--table")
    ap.add_argument("--json")
    ap.add_argument("--db", help="the fleet's store: adds each fault's effect on its node's traced calls")
    args = ap.parse_args()
    devices, phases = load(args)
    table = score(devices, phases, args.runs)
    faults = list(dict.fromkeys(p["fault"] for p in phases))
    workloads = list(dict.fromkeys(p["workload"] for p in phases))
    effects = {}
    if args.db:
        effects = effect.effects(args.db, {d: node_of(devices, d) for d in devices}, phases)
    text = render(table, faults, workloads, effects)
    print(text)
    if args.table:
        with open(args.table, "w") as f:
            f.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                [{"fault": k[0], "workload": k[1], "method": k[2], "runs": v["runs"], "failed": v["missing"],
                  "tp": v["tp"], "fp": v["fp"], "false_alarms": dict(v["false"]),
                  "detected_after_s": v["ttd"], "effect": effects.get((k[0], k[1]), [])}
                 for k, v in table.items()],
                f, indent=1)
    sys.exit(0)


if __name__ == "__main__":
    main()
