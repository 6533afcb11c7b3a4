#!/usr/bin/env bash
# The fleet testbed reduced (scripts/fleet-eval, docs/fleet-eval.md): one
# rep of disk-hog and of network-hog under ddr on GlusterFS in namespaces,
# every server and client traced and uploaded to one edge-service. Asserts
# that every device's windows reached the store (fleet-eval fails
# otherwise) and that `edge-service peers` names the disk-hogged server with
# cause disk by the median method, flagging no fault-free server, and the
# network-hogged server with cause network by the link method, flagging no
# fault-free node. (A client flagged by the median method beside the
# disk-hogged server is not asserted on: in 10 reps of the full evaluation
# one client was, once; the servers are the peers the culprit is told
# from.) Needs root.
# The agent and service under test are the dev build `cargo test` made
# (--profile dev): a release build (LTO, one codegen unit) took 4-8 minutes
# of the test command, and finding the culprit does not need it (both
# detections held with the dev build, measured).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../lib/fail-loudly.sh
source scripts/lib/fail-loudly.sh
out=$(mktemp -d "${TMPDIR:-/tmp}/fleet-test.XXXXXX")

scripts/fleet-eval --profile dev ${FLEET_EVAL_ARGS:-} --reps 1 --faults disk-hog,network-hog --workloads ddr --train-secs 10 --phase-secs 15 --out "$out"
python3 - "$out/table.json" <<'PY'
import json, sys
cells = {(c["fault"], c["workload"], c["method"]): c for c in json.load(open(sys.argv[1]))}
cell = cells[("disk-hog", "ddr", "median")]
link = cells[("network-hog", "ddr", "link")]
problems = []
if cell["failed"] or link["failed"]:
    problems.append("edge-service peers failed")
if cell["tp"] != cell["runs"]:
    problems.append("the disk-hogged server was not found with cause disk")
servers = {n: c for n, c in cell["false_alarms"].items() if n.startswith("s")}
if servers:
    problems.append(f"fault-free servers flagged: {servers}")
if link["tp"] != link["runs"]:
    problems.append("the network-hogged server was not found with cause network by the link method")
if link["false_alarms"]:
    problems.append(f"fault-free nodes flagged by the link method: {link['false_alarms']}")
if problems:
    sys.exit("60-fleet: " + "; ".join(problems) + f" (see {sys.argv[1]})")
print("60-fleet: disk-hog under ddr: culprit found (median, cause disk), no fault-free server flagged;"
      f" clients flagged: {cell['false_alarms'] or 'none'};"
      " network-hog under ddr: culprit found (link, cause network), no fault-free node flagged")
PY
rm -rf "$out"
