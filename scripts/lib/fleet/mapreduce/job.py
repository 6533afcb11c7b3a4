#!/usr/bin/env python3
"""The MapReduce fleet's workloads (scripts/mapreduce-eval), run by the
pyspark venv's python.

  job.py generate DIR MIB FILES   writes FILES text files of MIB MiB in all
                                  (lines of 12 words from a vocabulary of
                                  20 000 made-up words, Zipf-like: word
                                  counts differ a lot, as in real text)
  job.py driver MASTER HOST INPUT EXECUTORS FIFO RESULTS
                                  one Spark application for the whole run:
                                  waits for EXECUTORS executors, then runs a
                                  job per line read from FIFO ("wc" or
                                  "sort") and appends one JSON line per job
                                  to RESULTS ({"job", "start_ns", "end_ns",
                                  "ok", "error"}); ends at the FIFO's end.

Both jobs are a map stage reading INPUT (the same path on every node: each
node's own disk), a shuffle between the workers and a reduce stage:
- wc: split lines into words, count per word (map-side partial counts,
  shuffled by word, summed);
- sort: every line sorted (range-partitioned by a sample, shuffled whole,
  each partition sorted).
Their output is dropped (Spark's "noop" sink): what is measured is the map,
the shuffle and the reduce, not a commit to a shared folder."""

import json
import os
import random
import sys
import time


def generate(out_dir, mib, files):
    rng = random.Random(42)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(20000)]
    # Zipf-like weights: the k-th word is about 1/k as frequent as the first.
    weights = [1.0 / (k + 1) for k in range(len(vocab))]
    per_file = mib * 1024 * 1024 // files
    os.makedirs(out_dir, exist_ok=True)
    for i in range(files):
        path = os.path.join(out_dir, f"part-{i:04d}.txt")
        written = 0
        with open(path, "w") as f:
            while written < per_file:
                words = rng.choices(vocab, weights, k=12 * 2000)
                block = "\n".join(" ".join(words[j:j + 12]) for j in range(0, len(words), 12)) + "\n"
                f.write(block)
                written += len(block)


def driver(master, host, input_dir, executors, fifo, results):
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    total = sum(os.path.getsize(os.path.join(input_dir, n)) for n in os.listdir(input_dir))
    # Two map tasks per executor, and as many reduce tasks.
    tasks = 2 * executors
    spark = (SparkSession.builder.master(master).appName("mapreduce-eval")
             .config("spark.driver.host", host).config("spark.driver.bindAddress", host)
             .config("spark.driver.memory", "512m")
             .config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
             .config("spark.cores.max", str(executors))
             .config("spark.sql.shuffle.partitions", str(tasks))
             .config("spark.sql.adaptive.enabled", "false")
             .config("spark.sql.files.maxPartitionBytes", str(max(1 << 20, total // tasks + 1)))
             .config("spark.ui.enabled", "false")
             .getOrCreate())
    sc = spark.sparkContext
    sc.setLogLevel("WARN")
    deadline = time.time() + 180
    # The driver counts itself among the block managers.
    while sc._jsc.sc().getExecutorMemoryStatus().size() < executors + 1:
        if time.time() > deadline:
            sys.exit(f"only {sc._jsc.sc().getExecutorMemoryStatus().size() - 1} of {executors} executors registered")
        time.sleep(0.5)
    print(f"driver: {executors} executors registered", file=sys.stderr, flush=True)
    with open(results, "a") as r:
        r.write(json.dumps({"job": "ready", "start_ns": time.time_ns(), "end_ns": time.time_ns(), "ok": True}) + "\n")
    lines = spark.read.text(input_dir)
    with open(fifo) as commands:
        for line in commands:
            job = line.strip()
            if not job:
                continue
            start = time.time_ns()
            ok, error = True, None
            try:
                if job == "wc":
                    words = lines.select(F.explode(F.split(F.col("value"), " ")).alias("word"))
                    words.groupBy("word").count().write.format("noop").mode("overwrite").save()
                elif job == "sort":
                    lines.orderBy("value").write.format("noop").mode("overwrite").save()
                else:
                    raise ValueError(f"unknown job {job!r}")
            except Exception as err:  # a failed job is a result, not the end
                ok, error = False, str(err)[:500]
            with open(results, "a") as r:
                r.write(json.dumps({"job": job, "start_ns": start, "end_ns": time.time_ns(), "ok": ok,
                                    "error": error}) + "\n")
    spark.stop()


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "generate":
        generate(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 8 and sys.argv[1] == "driver":
        driver(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6], sys.argv[7])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
