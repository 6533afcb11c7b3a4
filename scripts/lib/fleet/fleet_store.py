"""What the fleet scripts (peer_time.py, wait_share.py) read of a fleet
run's output folder OUT: its store (read only), phases and device names,
and the servers by their `addr` fact."""

import json
import sqlite3


def load(out):
    db = sqlite3.connect(f"file:{out}/fleet.db?mode=ro", uri=True)
    with open(f"{out}/phases.jsonl") as f:
        phases = [json.loads(line) for line in f if line.strip()]
    with open(f"{out}/devices.txt") as f:
        names = {dev: node for node, dev in (line.split() for line in f if line.strip())}
    return db, phases, names


def servers_by_addr(db, names):
    """Server node by address, from the servers' `addr` fact."""
    out = {}
    for device, facts in db.execute(
        "SELECT DISTINCT device, facts FROM runs WHERE window_index > 0 AND device IS NOT NULL"
    ):
        node = names.get(device, "")
        if not node.startswith("s"):
            continue
        try:
            extra = json.loads(facts).get("extra", {})
        except (ValueError, AttributeError):
            continue
        addr = extra.get("addr") if isinstance(extra, dict) else None
        if addr:
            out[addr] = node
    return out
