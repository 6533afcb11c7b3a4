#!/usr/bin/env python3
"""The fleet's client workloads, on a folder of the mounted volume, for a
given number of seconds (no network fetch, nothing but the standard library).

  workload.py prepare DIR     write the files ddr reads (once per client)
  workload.py ddr DIR SECS    dd-like sequential reads of those files
  workload.py ddw DIR SECS    dd-like sequential writes of fresh files
  workload.py postmark DIR SECS   PostMark-like small-file transactions

ddr and ddw move 1 MiB records with O_DIRECT (the volume passes O_DIRECT to
the bricks: strict-o-direct), so every record reaches a server's disk, as dd
over PVFS did in the research. The files are spread over the servers by
GlusterFS's name hash, so each server sees every client's load within every
1 s window. postmark follows PostMark v1.51's loop: a pool of small files;
each transaction a read or an append, then a create or a delete.

A failed file operation (a server fault carried to the client: ENOSPC,
EMFILE, ENOTCONN) is reported on stderr, once per errno, and the workload
goes on after a short pause, so the other servers keep their load.
"""

import errno

import mmap
import os
import random
import sys
import time

RECORD = 1 << 20
FILES = 16
FILE_RECORDS = 4  # 4 MiB per file


FAILED = set()


def survive(step):
    """Runs one step of a workload; an OSError is reported (once per errno)
    and followed by a pause instead of ending the workload."""
    try:
        step()
    except OSError as err:
        if err.errno not in FAILED:
            FAILED.add(err.errno)
            print(f"workload: {errno.errorcode.get(err.errno, err.errno)}: {err}", file=sys.stderr, flush=True)
        time.sleep(0.2)


def records(path, flags):
    return os.open(path, flags | os.O_DIRECT, 0o644)


def write_file(path, buf):
    fd = records(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for _ in range(FILE_RECORDS):
            os.write(fd, buf)
    finally:
        os.close(fd)


def prepare(folder):
    os.makedirs(folder, exist_ok=True)
    buf = mmap.mmap(-1, RECORD)
    buf.write(b"\x5a" * RECORD)
    for i in range(FILES):
        write_file(os.path.join(folder, f"ddr-{i}"), buf)


def ddr(folder, deadline):
    buf = mmap.mmap(-1, RECORD)
    i = 0
    def read_one(path):
        fd = records(path, os.O_RDONLY)
        try:
            while os.readv(fd, [buf]) > 0:
                pass
        finally:
            os.close(fd)

    while time.time() < deadline:
        survive(lambda: read_one(os.path.join(folder, f"ddr-{i % FILES}")))
        i += 1


def ddw(folder, deadline):
    os.makedirs(folder, exist_ok=True)
    buf = mmap.mmap(-1, RECORD)
    i = 0
    while time.time() < deadline:
        survive(lambda: write_file(os.path.join(folder, f"ddw-{i % FILES}"), buf))
        i += 1


def postmark(folder, deadline):
    rng = random.Random(os.getpid())
    pool = os.path.join(folder, "pm")
    os.makedirs(pool, exist_ok=True)
    names = []
    serial = 0

    def create():
        nonlocal serial
        name = os.path.join(pool, f"f{os.getpid()}-{serial}")
        serial += 1
        with open(name, "wb") as f:
            f.write(os.urandom(rng.randint(512, 16384)))
        names.append(name)

    for _ in range(100):
        survive(create)

    def transaction():
        if not names:
            create()
            return
        name = rng.choice(names)
        if rng.random() < 0.5:
            with open(name, "rb") as f:
                f.read()
        else:
            with open(name, "ab") as f:
                f.write(os.urandom(rng.randint(512, 4096)))
        if rng.random() < 0.5 or len(names) < 50:
            create()
        else:
            os.unlink(names.pop(rng.randrange(len(names))))

    while time.time() < deadline:
        survive(transaction)
    for name in names:
        survive(lambda: os.unlink(name))


def main(argv):
    if len(argv) < 3 or argv[1] not in ("prepare", "ddr", "ddw", "postmark"):
        sys.exit(__doc__)
    mode, folder = argv[1], argv[2]
    if mode == "prepare":
        prepare(folder)
        return
    try:
        seconds = float(argv[3])
    except (IndexError, ValueError):
        sys.exit(f"workload.py {mode}: SECS must be a number")
    {"ddr": ddr, "ddw": ddw, "postmark": postmark}[mode](folder, time.time() + seconds)


if __name__ == "__main__":
    main(sys.argv)
