#!/usr/bin/env bash
# The fleet testbed reduced (scripts/fleet-eval, docs/fleet-eval.md): one
# fleet, GlusterFS in namespaces, every server and client traced and
# uploaded to one edge-service, one rep of four faults, each under the
# workload it is checked with: disk-hog and network-hog under ddr, err-space
# (the brick kept full: ENOSPC) and hang (the brick stopped with SIGSTOP)
# under ddw (issue 16). Asserts that every device's windows reached the
# store (fleet-eval fails otherwise) and that `edge-service peers` names the
# disk-hogged server with cause disk by the median method, flagging no
# fault-free server, the network-hogged server with cause network by the
# link method, flagging no fault-free node, the full server with cause
# errno and metric ENOSPC (errno method) and the stopped one with cause
# hang (hang method), neither of these two methods flagging a fault-free
# node in those two phases. (A client flagged by the median method beside
# the disk-hogged server is not asserted on: in 10 reps of the full
# evaluation one client was, once; the servers are the peers the culprit
# is told from.) Needs root. The semantic faults had a fleet of their own
# (61-fleet-semantic.sh) until 2026-12-08: one fleet saves its set-up and
# training, about 40 s of the test command.
# FLEET_TEST_ONLINE=1 runs disk-hog and network-hog only, adds --online
# (issue 35) and checks
# serve's live analysis, with no `peers` command: the disk-hogged server's
# incident opened with cause disk, no incident opened on a fault-free node
# during the disk hog, its recovery or the training, and the webhook
# receiver got each incident's opened and then its closed event (the
# network-hog's incidents are printed: the live analysis did not name the
# shaped server and opened incidents on clients, docs/fleet-eval.md). Short
# settings for the live analysis (a 20 s baseline, hang-after 20 s, which
# keeps 30 recent windows, closing after 3 clean seconds, 9 s recoveries)
# keep its warm-up short. Not on by default: it made this suite 81 s
# longer (169 s against 88 s, load average 13-14), over the test command's
# budget.
# The agent and service under test are the dev build `cargo test` made
# (--profile dev): a release build (LTO, one codegen unit) took 4-8 minutes
# of the test command, and finding the culprit does not need it (both
# detections held with the dev build, measured).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../lib/fail-loudly.sh
source scripts/lib/fail-loudly.sh
out=$(mktemp -d "${TMPDIR:-/tmp}/fleet-test.XXXXXX")

online=()
faults=disk-hog@ddr,network-hog@ddr,err-space@ddw,hang@ddw
semantic=1
if [ "${FLEET_TEST_ONLINE:-0}" = 1 ]; then
    online=(--online --online-close-after 3)
    faults=disk-hog@ddr,network-hog@ddr
    semantic=0
fi
FLEET_ONLINE_BASELINE_SECS=20 FLEET_ONLINE_HANG_AFTER_SECS=20 FLEET_ONLINE_SETTLE_SECS=0 FLEET_ONLINE_RECOVERY_SECS=9 \
    scripts/fleet-eval --profile dev ${FLEET_EVAL_ARGS:-} --reps 1 --faults "$faults" --workloads ddr,ddw \
    --train-secs 10 --phase-secs 15 ${online[@]+"${online[@]}"} --out "$out"
python3 - "$out/table.json" "$semantic" <<'PY'
import json, sys
cells = {(c["fault"], c["workload"], c["method"]): c for c in json.load(open(sys.argv[1]))}
semantic = ("err-space", "hang") if sys.argv[2] == "1" else ()
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
# Each semantic fault named by its method; neither method flags a
# fault-free node in either phase.
for fault, named_by in (("err-space", "errno"), ("hang", "hang")):
    if fault not in semantic:
        continue
    c = cells[(fault, "ddw", named_by)]
    if c["failed"]:
        problems.append(f"{fault}: edge-service peers failed")
    if c["tp"] != c["runs"]:
        problems.append(f"{fault}: the faulty server was not named by the {named_by} method with the right cause")
    for method in ("errno", "hang"):
        alarms = cells[(fault, "ddw", method)]["false_alarms"]
        if alarms:
            problems.append(f"{fault}: {method} flagged fault-free nodes {alarms}")
if problems:
    sys.exit("60-fleet: " + "; ".join(problems) + f" (see {sys.argv[1]})")
print("60-fleet: disk-hog under ddr: culprit found (median, cause disk), no fault-free server flagged;"
      f" clients flagged: {cell['false_alarms'] or 'none'};"
      " network-hog under ddr: culprit found (link, cause network), no fault-free node flagged")
if semantic:
    hang = cells[("hang", "ddw", "hang")]["detected_after_s"]
    print("60-fleet: err-space under ddw named (errno ENOSPC), hang named"
          f" {hang[0]:.1f} s after the SIGSTOP; no fault-free node flagged by either method")
PY
if [ "${FLEET_TEST_ONLINE:-0}" = 1 ]; then
    python3 - "$out/online.json" <<'PY'
import json, sys
online = json.load(open(sys.argv[1]))
cells = {c["fault"]: c for c in online["cells"]}
disk = cells["disk-hog"]
problems = []
if disk["tp"] != disk["runs"]:
    problems.append("no incident opened for the disk-hogged server with cause disk")
if disk["false_on"]:
    problems.append(f"incidents on fault-free nodes during the disk hog: {disk['false_on']}")
if online["fault_free_with_incident"]:
    problems.append(f"incidents in {online['fault_free_with_incident']} fault-free stretch(es)")
if online["never_closed"]:
    problems.append(f"incidents the receiver never got closed: {online['never_closed']}")
if online["order_problems"]:
    problems.append("; ".join(online["order_problems"]))
if disk["tp"] and not disk["closed_in_order"]:
    problems.append("the disk incident's closed event did not follow its opened event")
if problems:
    sys.exit("60-fleet --online: " + "; ".join(problems) + f" (see {sys.argv[1]})")
net = cells.get("network-hog", {})
print(f"60-fleet --online: disk-hog: incident opened {disk['delay_open_s'][0]:.1f} s after the fault (cause disk),"
      " closed after it at the receiver; nothing opened on a fault-free node;"
      f" network-hog: {'incident for the shaped server' if net.get('tp') else 'no incident for the shaped server'},"
      f" incidents on other nodes: {dict(net.get('false_on', {})) or 'none'}")
PY
fi
rm -rf "$out"
