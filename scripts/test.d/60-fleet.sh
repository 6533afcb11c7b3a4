#!/usr/bin/env bash
# The fleet testbed reduced (scripts/fleet-eval, docs/fleet-eval.md): one
# rep of disk-hog under ddr on GlusterFS in namespaces, every server and
# client traced and uploaded to one edge-service. Asserts that every device's
# windows reached the store (fleet-eval fails otherwise) and that
# `edge-service peers` names the disk-hogged server with cause disk by the
# median method and flags no fault-free server. (A client flagged alongside
# is not asserted on: in 10 reps of the full evaluation one client was,
# once; the servers are the peers the culprit is told from.) Needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../lib/fail-loudly.sh
source scripts/lib/fail-loudly.sh
out=$(mktemp -d "${TMPDIR:-/tmp}/fleet-test.XXXXXX")

scripts/fleet-eval ${FLEET_EVAL_ARGS:-} --reps 1 --faults disk-hog --workloads ddr --train-secs 10 --phase-secs 15 --out "$out"
python3 - "$out/table.json" <<'PY'
import json, sys
cells = {(c["fault"], c["workload"], c["method"]): c for c in json.load(open(sys.argv[1]))}
cell = cells[("disk-hog", "ddr", "median")]
problems = []
if cell["failed"]:
    problems.append("edge-service peers failed")
if cell["tp"] != cell["runs"]:
    problems.append("the disk-hogged server was not found with cause disk")
servers = {n: c for n, c in cell["false_alarms"].items() if n.startswith("s")}
if servers:
    problems.append(f"fault-free servers flagged: {servers}")
if problems:
    sys.exit("60-fleet: " + "; ".join(problems) + f" (see {sys.argv[1]})")
print("60-fleet: disk-hog under ddr: culprit found (median, cause disk), no fault-free server flagged;"
      f" clients flagged: {cell['false_alarms'] or 'none'}")
PY
rm -rf "$out"
