"""How much a performance fault changed the calls the agents traced on its
node, from the stored windows (the fleet's SQLite store): whether the
fault touched the traced calls at all, which the issue's aim is scoped to.

- disk faults (disk-hog, disk-busy) on a server: the mean time of the
  server's file reads, writes and syncs over the phase (of the phase's
  "program", default glusterfsd), divided by the median of the other
  servers' (10 means ten times slower; about 1: the
  fault did not reach its file calls);
- network faults (network-hog, receive-pktloss and send-pktloss on a
  server, slow-client-link on a client):
  the bytes per socket call on the node's links (its own socket-peer
  tables, and the other devices' tables naming its address) divided by
  the bytes per call on every other link (0.1: a tenth; about 1: the
  data arrived as usual).

`None` where the phase has nothing to compare (no file calls, no links)."""

import json
import sqlite3
import statistics

FILE_CALLS = ("read", "pread64", "readv", "preadv", "preadv2", "write", "pwrite64", "writev",
              "pwritev", "pwritev2", "fsync", "fdatasync")
DISK_FAULTS = ("disk-hog", "disk-busy")
NETWORK_FAULTS = ("network-hog", "slow-client-link", "receive-pktloss", "send-pktloss",
                  "receive-pktloss-5", "send-pktloss-5", "receive-pktloss-50", "send-pktloss-50")


def _addresses(con, node_of_device):
    """node -> its addr fact (from any of its windows)."""
    out = {}
    for device, node in node_of_device.items():
        row = con.execute("SELECT facts FROM runs WHERE device = ? LIMIT 1", (device,)).fetchone()
        if row:
            facts = json.loads(row[0])
            # The store's facts JSON: free facts under "extra".
            addr = facts.get("extra", {}).get("addr") or facts.get("addr")
            if addr:
                out[node] = addr
    return out


def _disk(con, node_of_device, p):
    rows = con.execute(
        "SELECT r.device, SUM(s.total_ns), SUM(s.count) FROM runs r JOIN syscalls s ON s.run = r.seq "
        "WHERE r.program = ? AND s.fd_kind = 'file' AND s.syscall IN (%s) "
        "AND r.start_unix_ns >= ? AND r.start_unix_ns < ? GROUP BY r.device" % ",".join("?" * len(FILE_CALLS)),
        (p.get("program", "glusterfsd"), *FILE_CALLS, p["since_ns"], p["until_ns"])).fetchall()
    means = {node_of_device.get(d): t / c for d, t, c in rows if c}
    target = means.pop(p["target_node"], None)
    others = [m for n, m in means.items() if n]
    if target is None or not others or statistics.median(others) == 0:
        return None
    return target / statistics.median(others)


def _network(con, node_of_device, addr_of, p):
    target_addr = addr_of.get(p["target_node"])
    rows = con.execute(
        "SELECT device, address, SUM(calls), SUM(bytes) FROM run_peers "
        "WHERE start_unix_ns >= ? AND start_unix_ns < ? GROUP BY device, address",
        (p["since_ns"], p["until_ns"])).fetchall()
    mine, rest = [0, 0], [0, 0]
    known = set(addr_of.values())
    for device, address, calls, nbytes in rows:
        node = node_of_device.get(device)
        if node is None or address not in known:
            continue
        side = mine if node == p["target_node"] or address == target_addr else rest
        side[0] += calls
        side[1] += nbytes
    if not mine[0] or not rest[0] or not rest[1]:
        return None
    return (mine[1] / mine[0]) / (rest[1] / rest[0])


def effects(db_path, node_of_device, phases):
    """(fault, workload) -> the effect of each of its phases (see above)."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    addr_of = _addresses(con, node_of_device)
    out = {}
    for p in phases:
        if p["fault"] in DISK_FAULTS:
            value = _disk(con, node_of_device, p)
        elif p["fault"] in NETWORK_FAULTS:
            value = _network(con, node_of_device, addr_of, p)
        else:
            continue
        if value is not None:
            out.setdefault((p["fault"], p["workload"]), []).append(value)
    return out
