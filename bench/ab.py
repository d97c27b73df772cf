#!/usr/bin/env python3
"""Two weir binaries on the same workload, runs interleaved (the order
alternates), for a change measured against the commit before it on a
loaded machine: per binary the median CPU (user + system of the process
tree) and wall per instance, and B's ratio to A's.

usage: bench/ab.py A_BIN B_BIN [--workload w1|w2] [--n 1000] [--runs 5]

W1: one trivial task (printf into out.csv) over N static partitions; W2:
extract -> transform -> load over N partitions (3N instances); one pool of 2
slots (bench/harness.py's shapes).
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def manifest(path, workload, n):
    keys = harness.keys_of(n)
    if workload == "w1":
        tasks = [("write", harness.WRITE, [], "rows", [])]
    else:
        tasks = [("extract", harness.WRITE, [], "raw", []),
                 ("transform", harness.TRANSFORM, ["raw"], "stg", []),
                 ("load", harness.LOAD, ["stg"], "mart", [])]
    harness.static_manifest(path, workload, keys, tasks)
    return n * len(tasks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--workload", default="w1", choices=["w1", "w2"])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    x = ap.parse_args()
    bins = {"A": os.path.realpath(x.a), "B": os.path.realpath(x.b)}
    with tempfile.TemporaryDirectory(prefix="weir-ab.") as d:
        instances = manifest(os.path.join(d, "pipeline.toml"), x.workload, x.n)
        got = {"A": [], "B": []}
        for rep in range(x.runs):
            for which in (["A", "B"] if rep % 2 == 0 else ["B", "A"]):
                harness.discard(os.path.join(d, "warehouse"))
                wall, _, code, cpu = harness.timed(
                    [bins[which], "run", "pipeline.toml"], d,
                    stdout=os.path.join(d, "out"), stderr=os.path.join(d, "err"))
                harness.must(code == 0, f"{which} exited {code}", [os.path.join(d, "err")])
                got[which].append((cpu, wall))
                harness.log(f"run {rep + 1} {which}: {cpu:.3f} CPU-s, wall {wall:.3f} s")
        harness.remove_set_aside()
    med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v))
           for k, v in got.items()}
    print(f"{x.workload}, {instances:,} instances, {x.runs} interleaved runs each, load "
          f"{os.getloadavg()[0]:.1f} at the end")
    for k in ("A", "B"):
        cpus = sorted(c for c, _ in got[k])
        print(f"{k} {bins[k]}: CPU {1000 * med[k][0] / instances:.3f} ms/instance "
              f"(range {1000 * cpus[0] / instances:.3f}–{1000 * cpus[-1] / instances:.3f}), "
              f"wall {1000 * med[k][1] / instances:.3f} ms/instance")
    print(f"B/A: CPU {med['B'][0] / med['A'][0]:.3f}, wall {med['B'][1] / med['A'][1]:.3f}")


if __name__ == "__main__":
    main()
