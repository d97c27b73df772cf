#!/usr/bin/env python3
"""Serve at many due instances: `weir serve` when N instances become due at
one instant, against `weir run` of the same instances. Run it through
bench/serve_due.sh.

Two shapes, each over a minutely scheme whose only period (10:59) ends
(11:00:00Z, serve's clock) 3 s after serve starts:
  one:   one task partitioned by (K static keys, minute): N = K instances of
         one period key, which serve starts in one lane
  many:  T tasks of K keys each: T lanes at once
Every task is in one pool of 2 slots and writes two rows (W1's command).

For serve: period end (the real instant serve's clock reached it, from the
pair of clocks serve's RUN_STARTED holds) -> its last PUBLISHED; for run: `WEIR_NOW=11:00:00Z weir run` of the same
instances on a fresh warehouse, from the process's start to its last
PUBLISHED (and its whole wall). CPU is user + system of each process tree.
Also checked: every instance published, the most commands running at once
within the pool's 2 slots.

usage: serve_due.py --weir BIN --work DIR [--shape one|many|both]
                    [--size one=1000 --size many=100x10] [--runs N] [--quick]
"""
import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

END = "2026-09-20T11:00:00Z"
START_AT = "2026-09-20T10:59:57Z"
SLOTS = 2


def manifest(path, tasks, keys):
    lines = [
        "[pipeline]", 'name = "serve_due"', 'code_version = "bench"',
        'warehouse = "warehouse"', "",
        "[partitions.k]", 'kind = "static"',
        "keys = [" + ", ".join(harness.toml_str(k) for k in keys) + "]", "",
        "[partitions.minute]", 'kind = "minutely"', "every = 1",
        'start = "2026-09-20T10:59"', "",
        "[pools.work]", f"slots = {SLOTS}", "",
    ]
    for t in range(tasks):
        lines += [
            f"[tasks.t{t:03d}]",
            f'command = ["sh", "-c", {harness.toml_str(harness.WRITE)}]',
            'partitioned_by = ["k", "minute"]',
            f'output = {{ dataset = "d{t:03d}", format = "csv", grain = ["id"] }}',
            'pool = "work"', "",
        ]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def events(warehouse):
    out = []
    for path in glob.glob(os.path.join(warehouse, "_runs", "*", "events.jsonl")):
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def max_running(evs):
    """The most commands between RUNNING and SUCCESS/FAILED at once."""
    edges = []
    for e in evs:
        if e["state"] == "RUNNING":
            edges.append((harness.parse_ts(e["ts"]), 1))
        elif e["state"] in ("SUCCESS", "FAILED"):
            edges.append((harness.parse_ts(e["ts"]), -1))
    edges.sort(key=lambda x: (x[0], x[1]))
    cur = best = 0
    for _, d in edges:
        cur += d
        best = max(best, cur)
    return best


def published(evs):
    return sorted(harness.parse_ts(e["ts"]) for e in evs if e["state"] == "PUBLISHED")


def serve_once(weir, d, n):
    """(period end -> last PUBLISHED, CPU s, max running, published)."""
    harness.rmtree(os.path.join(d, "warehouse"))
    os.sync()
    env = dict(os.environ, WEIR_NOW=START_AT)
    before = os.times()
    out = open(os.path.join(d, "serve.out"), "w")
    err = open(os.path.join(d, "serve.err"), "w")
    # Events carry the real time; serve's RUN_STARTED also says what serve's
    # clock (pinned at START_AT when serve starts) read then, so the real
    # instant the period ends on serve's clock is exact to the millisecond,
    # whatever serve's start-up took.
    proc = subprocess.Popen([weir, "serve", "m.toml"], cwd=d, stdout=out, stderr=err, env=env)
    deadline = time.monotonic() + 60 + n * 0.05
    wh = os.path.join(d, "warehouse")
    count = 0
    while time.monotonic() < deadline:
        time.sleep(0.25)
        count = len(published(events(wh)))
        if count >= n or proc.poll() is not None:
            break
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    after = os.times()
    out.close()
    err.close()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    evs = events(wh)
    pubs = published(evs)
    harness.must(len(pubs) == n, f"serve published {len(pubs)} of {n}",
                 [os.path.join(d, "serve.out"), os.path.join(d, "serve.err")])
    return pubs[-1] - period_end(evs), cpu, max_running(evs), len(pubs)


def period_end(evs):
    """The real instant END was on serve's clock, from its RUN_STARTED."""
    started = [e for e in evs if e["state"] == "RUN_STARTED" and e["run_id"].startswith("serve-")]
    harness.must(len(started) == 1 and "clock" in (started[0].get("data") or {}),
                 "serve's RUN_STARTED does not say its clock (a weir older than this bench?)")
    e = started[0]
    return harness.parse_ts(e["ts"]) + (harness.parse_ts(END) - harness.parse_ts(e["data"]["clock"]))


def run_once(weir, d, n):
    """(process start -> last PUBLISHED, wall, CPU s, max running)."""
    harness.rmtree(os.path.join(d, "warehouse"))
    env = dict(os.environ, WEIR_NOW=END)
    os.sync()
    started = time.time()
    wall, _, code, cpu = harness.timed([weir, "run", "m.toml"], d,
                                       stdout=os.path.join(d, "run.out"),
                                       stderr=os.path.join(d, "run.err"), env=env, sync=False)
    harness.must(code == 0, f"weir run exited {code}",
                 [os.path.join(d, "run.out"), os.path.join(d, "run.err")])
    evs = events(os.path.join(d, "warehouse"))
    pubs = published(evs)
    harness.must(len(pubs) == n, f"run published {len(pubs)} of {n}")
    return pubs[-1] - started, wall, cpu, max_running(evs)


def shape(weir, work, label, tasks, keys, runs):
    n = tasks * keys
    d = os.path.join(work, label)
    os.makedirs(d, exist_ok=True)
    manifest(os.path.join(d, "m.toml"), tasks, harness.keys_of(keys))
    rows = []
    for rep in range(runs):
        order = ["serve", "run"] if rep % 2 == 0 else ["run", "serve"]
        got = {}
        for which in order:
            got[which] = serve_once(weir, d, n) if which == "serve" else run_once(weir, d, n)
        s, r = got["serve"], got["run"]
        harness.log(f"{label} run {rep + 1}/{runs}: serve {s[0]:.3f} s ({s[1]:.2f} CPU-s, "
                    f"≤{s[2]} running), run {r[0]:.3f} s to its last PUBLISHED, wall {r[1]:.3f} s "
                    f"({r[2]:.2f} CPU-s, ≤{r[3]} running)")
        rows.append((s, r))
    harness.rmtree(os.path.join(d, "warehouse"))
    med = harness.median
    serve_s = med([s[0] for s, _ in rows])
    run_s = med([r[0] for _, r in rows])
    return {
        "shape": label, "tasks": tasks, "keys": keys, "instances": n, "runs": runs,
        "serve_to_last_published_s": serve_s, "run_to_last_published_s": run_s,
        "run_wall_s": med([r[1] for _, r in rows]),
        "serve_cpu_s": med([s[1] for s, _ in rows]), "run_cpu_s": med([r[2] for _, r in rows]),
        "serve_max_running": max(s[2] for s, _ in rows),
        "run_max_running": max(r[3] for _, r in rows),
        "ratio": serve_s / run_s if run_s > 0 else None,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--shape", default="both", choices=["one", "many", "both"])
    ap.add_argument("--size", action="append", default=[])
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    sizes = {"one": (1, 20), "many": (5, 4)} if a.quick else {"one": (1, 1000), "many": (100, 10)}
    for s in a.size:
        k, v = s.split("=")
        t, _, keys = v.partition("x")
        sizes[k] = (int(t), int(keys)) if keys else (1, int(t))
    runs = a.runs or (1 if a.quick else 3)
    weir = os.path.realpath(a.weir)
    res = []
    for label in (["one", "many"] if a.shape == "both" else [a.shape]):
        tasks, keys = sizes[label]
        res.append(shape(weir, a.work, label, tasks, keys, runs))
    print("| shape | instances | serve: period end → last PUBLISHED | run: start → last PUBLISHED"
          " (wall) | ratio | CPU serve / run | most running (slots 2) |")
    print("|---|---|---|---|---|---|---|")
    for x in res:
        print(f"| {x['shape']} ({x['tasks']} task(s) × {x['keys']} keys) | {x['instances']:,} | "
              f"{x['serve_to_last_published_s']:.3f} s | {x['run_to_last_published_s']:.3f} s "
              f"({x['run_wall_s']:.3f} s) | {x['ratio']:.2f}× | "
              f"{x['serve_cpu_s']:.2f} / {x['run_cpu_s']:.2f} s | "
              f"{x['serve_max_running']} / {x['run_max_running']} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    try:
        main()
    except harness.BenchError as e:
        print(f"serve_due: {e}", file=sys.stderr)
        sys.exit(1)
