#!/usr/bin/env python3
"""The weir benchmark harness (W1-W5). Run it through bench/run.sh, which
builds weir and makes the temp dir; see BENCHMARKS.md for what each workload
measures and why.

usage: harness.py --weir BIN --work DIR [--quick] [--runs N] [--only W1,W4]
                  [--size w1=N ...] [--json FILE]

Every baseline runs in the same invocation as weir, interleaved with it run by
run (the order alternates), and the table reports medians. Wall time is
measured around the process, CPU is user + system of its process tree, peak
RSS is GNU time's %M (see `timed`). Every
dirty page is flushed before each timed run. Standard library only.
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))

# The tasks' shell commands: the byte-identical argv `sh -c CMD` under weir and
# under xargs. Under weir, CMD gets its directories from WEIR_OUTPUT_DIR and
# WEIR_INPUT_<NAME>; under xargs, from positional parameters appended after
# the command (`sh -c CMD sh OUT_DIR [IN_DIR]`), because setting a variable per
# partition would cost the baseline a second exec per instance (`env VAR=...
# sh -c CMD` measured about 1.9x slower than this on this machine).
WRITE = """printf 'id,v\\n1,a\\n2,b\\n' > "${1:-$WEIR_OUTPUT_DIR}/out.csv\""""
TRANSFORM = """sed 's/,a$/,A/' "${2:-$WEIR_INPUT_RAW}/out.csv" > "${1:-$WEIR_OUTPUT_DIR}/out.csv\""""
LOAD = """cp "${2:-$WEIR_INPUT_STG}/out.csv" "${1:-$WEIR_OUTPUT_DIR}/out.csv\""""
# W4's task: copy the pre-generated file (a reflink where the filesystem can).
# weir refuses hard links in the output (a published file must be the
# only name of its bytes), so the task can no longer hard-link it.
LINK = """cp --reflink=auto {src} "$WEIR_OUTPUT_DIR/big.csv\""""

# W6's task: the same copy, of a Parquet candidate.
LINK_PARQUET = """cp --reflink=auto {src} "$WEIR_OUTPUT_DIR/big.parquet\""""

FULL = {"w1": 1000, "w2": 1000, "w3": (2000, 20, 365), "w4": 10_000_000, "w5": 10_000,
        "w6": 10_000_000}
QUICK = {"w1": 50, "w2": 50, "w3": (20, 5, 30), "w4": 20_000, "w5": 500, "w6": 20_000}
SLOTS = 2


class BenchError(Exception):
    """Something failed to run: the harness exits non-zero."""


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def toml_str(s):
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def _gnu_time():
    """/usr/bin/time if it is GNU time (it understands -f and -o)."""
    path = "/usr/bin/time"
    if not os.access(path, os.X_OK):
        return None
    try:
        ok = subprocess.run([path, "-f", "%M", "-o", os.devnull, "true"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        return None
    return path if ok else None


GNU_TIME = _gnu_time()


def _peak_rss_kib(proc, done, result):
    """Fallback without GNU time: samples VmHWM (the peak RSS of the current
    image, which exec resets) from /proc until the process exits."""
    best = 0
    while not done.is_set():
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        best = max(best, int(line.split()[1]))
                        break
        except (OSError, ValueError):
            pass
        done.wait(0.01)
    result.append(best)


def timed(argv, cwd, stdout=None, stderr=None, env=None, sync=True):
    """Runs argv; returns (wall seconds, peak RSS KiB, exit code, CPU seconds).

    CPU is user + system time of the whole process tree (wait4's rusage of
    the child counts every descendant it or they waited for: weir's tasks
    and their shells, xargs' shells), the cost on a machine that is busy
    anyway, where wall time mostly measures the neighbours.

    Flushes every dirty page first (untimed; R1 turns that off to show what
    it is for), so a measured run does not pay
    for the writeback of whatever ran before it (the previous run's files,
    the rm -rf of its warehouse, another build on the machine).

    Peak RSS: not ru_maxrss from our own wait4, which would be at least this
    Python process's RSS (exec carries the forking parent's high-water mark
    over into the child's), but GNU time's %M (time is small and reports its
    child alone), or, without GNU time, VmHWM sampled from /proc (which only
    sees the top process, i.e. weir without its tasks)."""
    import tempfile
    import threading

    if sync:
        os.sync()
    rss_file = None
    if GNU_TIME:
        fd, rss_file = tempfile.mkstemp(prefix="weir-bench-rss.")
        os.close(fd)
        argv = [GNU_TIME, "-f", "%M", "-o", rss_file, *argv]
    out = open(stdout, "wb") if stdout else subprocess.DEVNULL
    err = open(stderr, "wb") if stderr else subprocess.DEVNULL
    sampled = []
    try:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, env=env)
        done = threading.Event()
        sampler = None
        if not GNU_TIME:
            sampler = threading.Thread(target=_peak_rss_kib, args=(proc, done, sampled))
            sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        cpu = usage.ru_utime + usage.ru_stime
        done.set()
        if sampler:
            sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if stdout:
            out.close()
        if stderr:
            err.close()
    rss = 0
    if rss_file:
        try:
            with open(rss_file) as f:
                lines = [line for line in f.read().split("\n") if line.strip()]
            rss = int(lines[-1]) if lines and lines[-1].strip().isdigit() else 0
        finally:
            os.remove(rss_file)
    elif sampled:
        rss = sampled[0]
    return wall, rss, proc.returncode, cpu


def must(ok, what, files=()):
    if not ok:
        tails = []
        for f in files:
            try:
                with open(f, "rb") as fh:
                    tails.append(f"--- {f}:\n" + fh.read()[-1500:].decode(errors="replace"))
            except OSError:
                pass
        raise BenchError(what + ("\n" + "\n".join(tails) if tails else ""))


def rmtree(path):
    shutil.rmtree(path, ignore_errors=True)


# Trees of finished runs, set aside until the last measurement is taken.
SET_ASIDE = []


def discard(path):
    """Moves a finished run's tree out of the way instead of deleting it.
    ext4 skips inode numbers freed in the last 60 s (300 s while their
    inode-table block is dirty) one by one, so deleting a run's tens of
    thousands of inodes slows the creates of whichever run comes next, by a
    third to a half (BENCHMARKS.md, "Where the time goes now: ext4 inode
    allocation"). Every contender starts on a filesystem with none of the
    benchmark's own deletions; R1 measures runs that follow a delete."""
    if os.path.lexists(path):
        aside = os.path.join(os.path.dirname(path), f".aside-{len(SET_ASIDE)}")
        os.rename(path, aside)
        SET_ASIDE.append(aside)


def remove_set_aside():
    for path in SET_ASIDE:
        rmtree(path)
    SET_ASIDE.clear()


def median(xs):
    return statistics.median(xs)


def parse_ts(ts):
    """RFC 3339 UTC with optional fraction -> seconds (float)."""
    import datetime

    if ts.endswith("Z"):
        ts = ts[:-1] + "+00:00"
    return datetime.datetime.fromisoformat(ts).timestamp()


# ---------------------------------------------------------------- manifests


def static_manifest(path, name, keys, tasks):
    """tasks: list of (name, command, inputs, dataset, extra lines)."""
    lines = [
        "[pipeline]",
        f"name = {toml_str(name)}",
        'code_version = "bench"',
        'warehouse = "warehouse"',
        "",
        "[partitions.parts]",
        'kind = "static"',
        "keys = [" + ", ".join(toml_str(k) for k in keys) + "]",
        "",
        "[pools.work]",
        f"slots = {SLOTS}",
        "",
    ]
    for tname, command, inputs, dataset, extra in tasks:
        lines += [
            f"[tasks.{tname}]",
            f'command = ["sh", "-c", {toml_str(command)}]',
            f"inputs = [{', '.join(toml_str(i) for i in inputs)}]",
            f'output = {{ dataset = {toml_str(dataset)}, format = "csv", grain = ["id"] }}',
            'pool = "work"',
            *extra,
            "",
        ]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def keys_of(n):
    return [f"p{i:05d}" for i in range(n)]


# ---------------------------------------------------------------- helpers


class Runner:
    def __init__(self, weir, work, runs, floor=None):
        self.weir = weir
        self.work = work
        self.runs = runs
        self.floor = floor

    def floor_run(self, d, keys_file, stages, expect):
        """The durability floor (examples/durable_floor.rs): the same commands
        with only the filesystem work weir's invariants require, on a fresh
        root: (wall, rss)."""
        root = os.path.join(d, "floor")
        discard(root)
        out, err = os.path.join(d, "floor.out"), os.path.join(d, "floor.err")
        argv = [self.floor, root, keys_file, str(SLOTS), *[cmd for cmd, _, _ in stages]]
        wall, rss, rc, _ = timed(argv, d, out, err)
        must(rc == 0, f"the durability floor exited {rc}", (out, err))
        with open(out) as f:
            text = f.read()
        must(f"{expect} published" in text, f"the durability floor: {text.strip()}", (err,))
        return wall, rss

    def weir_run(self, d, manifest, expect, fresh=True, sync=True, force=False):
        """`weir run MANIFEST` (on a fresh warehouse unless `fresh` is
        false; `--force` with `force`), checked: (wall, rss)."""
        if fresh:
            discard(os.path.join(d, "warehouse"))
        out, err = os.path.join(d, "run.out"), os.path.join(d, "run.err")
        argv = [self.weir, "run", manifest] + (["--force"] if force else [])
        wall, rss, rc, cpu = timed(argv, d, out, err, sync=sync)
        must(rc == 0, f"weir run {manifest} exited {rc}", (out, err))
        with open(out) as f:
            text = f.read()
        m = re.search(r"(\d+) published", text)
        published = int(m.group(1)) if m else sum(
            1 for e in self.events(d, manifest) if e["state"] == "PUBLISHED")
        must(published == expect,
             f"weir run {manifest}: {published} of {expect} instances published", (out, err))
        return wall, rss, cpu

    def events(self, d, manifest):
        out = os.path.join(d, "events.out")
        _, _, rc, _ = timed([self.weir, "events", manifest, "--json"], d, out, out + ".err")
        must(rc == 0, "weir events failed", (out, out + ".err"))
        records = []
        with open(out) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    records.append(json.loads(line))
        return records

    def interleave(self, baseline, weir, label=""):
        """Runs both self.runs times, alternating which goes first."""
        b, w = [], []
        for rep in range(self.runs):
            order = [(baseline, b), (weir, w)]
            if rep % 2:
                order.reverse()
            for fn, acc in order:
                acc.append(fn())
            log(f"  {label} run {rep + 1}/{self.runs}: baseline {b[-1][0]:.3f} s, "
                f"weir {w[-1][0]:.3f} s")
        return b, w


def xargs_stage(keys_file, cmd, out_root, in_root=None):
    """argv for one stage under xargs -P2, with per-partition dirs."""
    dirs = [f"{out_root}/{{}}"] + ([f"{in_root}/{{}}"] if in_root else [])
    return ["xargs", "-a", keys_file, f"-P{SLOTS}", "-I{}", "sh", "-c", cmd, "sh", *dirs]


def dirty_kib():
    """Dirty + Writeback from /proc/meminfo: page cache not yet on disk."""
    total = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(("Dirty:", "Writeback:")):
                    total += int(line.split()[1])
    except OSError:
        pass
    return total


def baseline_pipeline(d, keys_file, stages, n):
    """mkdir of every partition's fresh output dir, then each stage under
    xargs -P2 in turn; all inside the timed region. Returns (wall, rss)."""
    root = os.path.join(d, "xargs")
    discard(root)
    os.makedirs(root)
    script = ["set -e"]
    for _, out_dir, _ in stages:
        os.makedirs(os.path.join(root, out_dir))
        script.append(f'(cd {out_dir} && xargs -a "$1" mkdir)')
    argvs = []
    for cmd, out_dir, in_dir in stages:
        argv = xargs_stage(keys_file, cmd, os.path.join(root, out_dir),
                           os.path.join(root, in_dir) if in_dir else None)
        argvs.append(argv)
    # Run as one shell script so the timed region is one process tree.
    for i, argv in enumerate(argvs):
        script.append(" ".join(shlex_quote(a) for a in argv))
    err = os.path.join(d, "xargs.err")
    wall, rss, rc, cpu = timed(["sh", "-c", "\n".join(script), "sh", keys_file], root, None, err)
    must(rc == 0, f"the xargs baseline exited {rc}", (err,))
    last = stages[-1][1]
    produced = sum(1 for k in os.listdir(os.path.join(root, last))
                   if os.path.isfile(os.path.join(root, last, k, "out.csv")))
    must(produced == n, f"the xargs baseline produced {produced} of {n} outputs")
    return wall, rss, cpu


def shlex_quote(s):
    import shlex

    return shlex.quote(s)


# ---------------------------------------------------------------- workloads


def w_write(r, sizes):
    """W1 / W5: one trivial task over n static partitions, pool of 2 slots.
    `sizes` is {label: n}; with several (W1 and W5) their runs interleave
    (rep 1 of each, then rep 2 ...), so machine drift hits all sizes alike and
    the per-instance ratio between them is fair."""
    setups = {}
    for label, n in sizes.items():
        d = os.path.join(r.work, label)
        os.makedirs(d, exist_ok=True)
        keys = keys_of(n)
        keys_file = os.path.join(d, "keys.txt")
        with open(keys_file, "w") as f:
            f.write("\n".join(keys) + "\n")
        manifest = os.path.join(d, "pipeline.toml")
        static_manifest(manifest, label.lower(), keys, [("write", WRITE, [], "rows", [])])
        setups[label] = (d, keys_file, manifest, n)
    log(", ".join(f"{label}: {n:,} partitions x 1 task" for label, n in sizes.items())
        + f"; {r.runs} run(s) each of xargs -P{SLOTS} and weir, interleaved")
    runs = {label: ([], []) for label in sizes}
    floors = []
    for rep in range(r.runs):
        for label, (d, keys_file, manifest, n) in setups.items():
            b, w = runs[label]
            order = [
                (lambda: baseline_pipeline(d, keys_file, [(WRITE, "rows", None)], n), b),
                (lambda: r.weir_run(d, manifest, n), w),
            ]
            if r.floor and label == "W1":
                order.append((lambda: r.floor_run(d, keys_file, [(WRITE, "rows", None)], n),
                              floors))
            rotate(order, rep)
            for fn, acc in order:
                acc.append(fn())
            log(f"  {label} run {rep + 1}/{r.runs}: xargs {b[-1][0]:.3f} s, "
                f"weir {w[-1][0]:.3f} s"
                + (f", floor {floors[-1][0]:.3f} s" if r.floor and label == "W1" else ""))
    out = {}
    for label, (d, keys_file, manifest, n) in setups.items():
        b, w = runs[label]
        out[label] = {
            "instances": n,
            "baseline_s": [x[0] for x in b],
            "weir_s": [x[0] for x in w],
            "baseline_cpu_s": [x[2] for x in b],
            "weir_cpu_s": [x[2] for x in w],
            "last_weir_s": w[-1][0],
            "baseline_peak_kib": max(x[1] for x in b),
            "weir_peak_kib": max(x[1] for x in w),
            **timeline(r.events(d, manifest)),
        }
        if floors and label == "W1":
            out[label]["floor_s"] = [x[0] for x in floors]
        for tree in ("warehouse", "xargs", "floor"):
            discard(os.path.join(d, tree))
    return out


def rotate(order, rep):
    """Which contender goes first changes from run to run, so drift over a
    run (writeback, the disk's recently freed inodes) hits each alike."""
    k = rep % len(order)
    order[:] = order[k:] + order[:k]


def r1(r, n, reps=5):
    """R1: W1 run `reps` times back to back, as sequences: xargs; weir on a
    fresh warehouse each time with the usual sync before each run; the same
    without the sync (the previous run's writeback and rm -rf land in the
    next); and weir on one warehouse, the first run then `--force` reruns
    (every partition gains a generation, a token and an attempt dir per
    run: the state that grows). Dirty + Writeback KiB is read just before
    each run."""
    d = os.path.join(r.work, "R1")
    os.makedirs(d, exist_ok=True)
    keys = keys_of(n)
    keys_file = os.path.join(d, "keys.txt")
    with open(keys_file, "w") as f:
        f.write("\n".join(keys) + "\n")
    manifest = os.path.join(d, "pipeline.toml")
    static_manifest(manifest, "r1", keys, [("write", WRITE, [], "rows", [])])
    log(f"R1: {n:,} partitions, {reps} back-to-back runs per sequence")
    warehouse = os.path.join(d, "warehouse")
    sequences = {
        "xargs -P2, sync before each": lambda i: deleted_first(
            os.path.join(d, "xargs"),
            lambda: baseline_pipeline(d, keys_file, [(WRITE, "rows", None)], n)),
        "weir, fresh warehouse, sync before each": lambda i: deleted_first(
            warehouse, lambda: r.weir_run(d, manifest, n, fresh=False)),
        "weir, fresh warehouse, no sync": lambda i: deleted_first(
            warehouse, lambda: r.weir_run(d, manifest, n, fresh=False, sync=False)),
        "weir, one warehouse (--force after the first), sync before each":
            lambda i: r.weir_run(d, manifest, n, fresh=i == 0, force=i > 0),
        "weir, fresh warehouse, the previous one moved aside (not deleted), sync before each":
            lambda i: r.weir_run(d, manifest, n),
    }
    out = {}
    for name, run in sequences.items():
        rmtree(os.path.join(d, "warehouse"))
        os.sync()
        walls, dirty = [], []
        for i in range(reps):
            dirty.append(dirty_kib())
            walls.append(run(i)[0])
        log(f"  {name}: " + ", ".join(f"{w:.3f}" for w in walls) + " s")
        out[name] = {"wall_s": walls, "dirty_kib_before": dirty}
    rmtree(os.path.join(d, "warehouse"))
    rmtree(os.path.join(d, "xargs"))
    return {"instances": n, "sequences": out}


def deleted_first(tree, run):
    """R1's runs that follow an `rm -rf` of the previous run's tree, as a
    deployment's would after a cleanup."""
    rmtree(tree)
    return run()


def w2(r, n):
    d = os.path.join(r.work, "W2")
    os.makedirs(d, exist_ok=True)
    keys = keys_of(n)
    keys_file = os.path.join(d, "keys.txt")
    with open(keys_file, "w") as f:
        f.write("\n".join(keys) + "\n")
    manifest = os.path.join(d, "pipeline.toml")
    static_manifest(manifest, "w2", keys, [
        ("extract", WRITE, [], "raw", []),
        ("transform", TRANSFORM, ["raw"], "stg", []),
        ("load", LOAD, ["stg"], "fact", []),
    ])
    stages = [(WRITE, "raw", None), (TRANSFORM, "stg", "raw"), (LOAD, "fact", "stg")]
    log(f"W2: {n} partitions x extract -> transform -> load, {r.runs} run(s) each")
    b, w, floors = [], [], []
    for rep in range(r.runs):
        order = [(lambda: baseline_pipeline(d, keys_file, stages, n), b),
                 (lambda: r.weir_run(d, manifest, 3 * n), w)]
        if r.floor:
            order.append((lambda: r.floor_run(d, keys_file, stages, 3 * n), floors))
        rotate(order, rep)
        for fn, acc in order:
            acc.append(fn())
        log(f"  W2 run {rep + 1}/{r.runs}: xargs {b[-1][0]:.3f} s, weir {w[-1][0]:.3f} s"
            + (f", floor {floors[-1][0]:.3f} s" if floors else ""))
    for tree in ("warehouse", "xargs", "floor"):
        discard(os.path.join(d, tree))
    out = {
        "instances": 3 * n,
        "baseline_s": [x[0] for x in b],
        "weir_s": [x[0] for x in w],
        "baseline_cpu_s": [x[2] for x in b],
        "weir_cpu_s": [x[2] for x in w],
        "weir_peak_kib": max(x[1] for x in w),
    }
    if floors:
        out["floor_s"] = [x[0] for x in floors]
    return out


def w3(r, shape):
    tasks, layers, days = shape
    d = os.path.join(r.work, "W3")
    os.makedirs(d, exist_ok=True)
    manifest = os.path.join(d, "big.toml")
    with open(manifest, "w") as f:
        subprocess.run([sys.executable, os.path.join(BENCH, "gen_manifest.py"),
                        str(tasks), str(layers), str(days)], stdout=f, check=True)
    log(f"W3: plan {tasks} tasks in {layers} layers x {days} days, {r.runs} run(s)")
    walls, peaks, instances = [], [], None
    out, err = os.path.join(d, "plan.out"), os.path.join(d, "plan.err")
    for _ in range(r.runs):
        wall, rss, rc, _ = timed([r.weir, "plan", manifest, "--backfill", "all"], d, out, err)
        must(rc == 0, f"weir plan exited {rc}", (out, err))
        walls.append(wall)
        peaks.append(rss)
    with open(out) as f:
        for line in f:
            if line.startswith("total:"):
                instances = int(line.split()[1].replace(",", ""))
    expected = tasks * days
    must(instances == expected, f"weir plan reported {instances} instances, expected {expected}",
         (out,))
    os.remove(out)
    return {"instances": instances, "weir_s": walls, "weir_peak_kib": max(peaks)}


def w4(r, rows):
    d = os.path.join(r.work, "W4")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "candidate.csv")
    log(f"W4: generating a {rows}-row CSV")
    subprocess.run([sys.executable, os.path.join(BENCH, "gen_csv.py"), str(rows), src], check=True)
    # Make its pages clean: weir's fsync of the candidate must not pay for
    # the generator's writeback.
    subprocess.run(["sync", src], check=True)
    size = os.path.getsize(src)
    manifest = os.path.join(d, "pipeline.toml")
    with open(manifest, "w") as f:
        f.write("\n".join([
            "[pipeline]",
            'name = "w4"',
            'code_version = "bench"',
            'warehouse = "warehouse"',
            "",
            "[partitions.one]",
            'kind = "static"',
            'keys = ["all"]',
            "",
            "[tasks.copy]",
            f'command = ["sh", "-c", {toml_str(LINK.format(src=shlex_quote(src)))}]',
            'output = { dataset = "big", format = "csv", grain = ["id"] }',
            "gates = [",
            f'  {{ check = "row_count", min = 1, max = {rows} }},',
            '  { check = "unique", columns = ["ref"] },',
            '  { check = "not_null", columns = ["id", "amount_cents"] },',
            "]",
            "",
        ]))
    log(f"W4: {size / 1e9:.2f} GB, {r.runs} run(s) each of openssl dgst -sha256 and weir")
    timed(["openssl", "dgst", "-sha256", src], d)  # warm the page cache
    audits, publishes = [], []

    def openssl():
        wall, rss, rc, cpu = timed(["openssl", "dgst", "-sha256", src], d)
        must(rc == 0, "openssl dgst failed")
        return wall, rss, cpu

    def weir():
        wall, rss, cpu = r.weir_run(d, manifest, 1)
        ev = {e["state"]: parse_ts(e["ts"]) for e in r.events(d, manifest)
              if e.get("task") == "copy"}
        must({"SUCCESS", "AUDITED", "PUBLISHED"} <= ev.keys(), "W4: missing events")
        audits.append(ev["AUDITED"] - ev["SUCCESS"])
        publishes.append(ev["PUBLISHED"] - ev["AUDITED"])
        return wall, rss, cpu

    b, w = r.interleave(openssl, weir, "W4")
    rmtree(d)  # the 1 GB file goes as soon as it is measured
    return {
        "instances": 1,
        "rows": rows,
        "bytes": size,
        "baseline_s": [x[0] for x in b],
        "weir_s": [x[0] for x in w],
        "baseline_cpu_s": [x[2] for x in b],
        "weir_cpu_s": [x[2] for x in w],
        "audit_s": audits,
        "publish_s": publishes,
        "weir_peak_kib": max(x[1] for x in w),
    }


def w6(r, rows, gen_parquet):
    """The audit of the same rows as CSV and as Parquet (typed, snappy, row
    groups of 2^20 rows): rows per second of AUDITED−SUCCESS, and the two
    digests, which must be equal."""
    d = os.path.join(r.work, "W6")
    os.makedirs(d, exist_ok=True)
    csv_src, pq_src = os.path.join(d, "candidate.csv"), os.path.join(d, "candidate.parquet")
    log(f"W6: generating {rows} rows as CSV and as Parquet")
    subprocess.run([sys.executable, os.path.join(BENCH, "gen_csv.py"), str(rows), csv_src],
                   check=True)
    subprocess.run([gen_parquet, str(rows), pq_src], check=True)
    subprocess.run(["sync", csv_src, pq_src], check=True)
    manifests = {}
    for fmt, src, link in (("csv", csv_src, LINK), ("parquet", pq_src, LINK_PARQUET)):
        sub = os.path.join(d, fmt)
        os.makedirs(sub, exist_ok=True)
        manifest = os.path.join(sub, "pipeline.toml")
        with open(manifest, "w") as f:
            f.write("\n".join([
                "[pipeline]",
                f'name = "w6_{fmt}"',
                'code_version = "bench"',
                'warehouse = "warehouse"',
                "",
                "[partitions.one]",
                'kind = "static"',
                'keys = ["all"]',
                "",
                "[tasks.copy]",
                f'command = ["sh", "-c", {toml_str(link.format(src=shlex_quote(src)))}]',
                f'output = {{ dataset = "big", format = "{fmt}", grain = ["id"] }}',
                "gates = [",
                f'  {{ check = "row_count", min = 1, max = {rows} }},',
                '  { check = "unique", columns = ["ref"] },',
                '  { check = "not_null", columns = ["id", "amount_cents"] },',
                "]",
                "",
            ]))
        manifests[fmt] = (sub, manifest)
    sizes = {fmt: os.path.getsize(src) for fmt, src in (("csv", csv_src), ("parquet", pq_src))}
    log(f"W6: CSV {sizes['csv'] / 1e9:.2f} GB, Parquet {sizes['parquet'] / 1e9:.2f} GB, "
        f"{r.runs} run(s) each")
    audits = {"csv": [], "parquet": []}
    digests = {}

    def one(fmt):
        sub, manifest = manifests[fmt]
        wall, rss, _ = r.weir_run(sub, manifest, 1)
        events = [e for e in r.events(sub, manifest) if e.get("task") == "copy"]
        ev = {e["state"]: parse_ts(e["ts"]) for e in events}
        must({"SUCCESS", "AUDITED", "PUBLISHED"} <= ev.keys(), f"W6 {fmt}: missing events")
        audits[fmt].append(ev["AUDITED"] - ev["SUCCESS"])
        digests[fmt] = next(e["data"]["digest"] for e in events if e["state"] == "AUDITED")
        return wall, rss

    b, w = r.interleave(lambda: one("csv"), lambda: one("parquet"), "W6")
    must(digests["csv"] == digests["parquet"],
         f"W6: the CSV and Parquet digests differ: {digests}")
    rmtree(d)
    return {
        "rows": rows,
        "bytes": sizes,
        "csv_audit_s": audits["csv"],
        "parquet_audit_s": audits["parquet"],
        "csv_s": [x[0] for x in b],
        "parquet_s": [x[0] for x in w],
        "csv_peak_kib": max(x[1] for x in b),
        "parquet_peak_kib": max(x[1] for x in w),
        "digest": digests["parquet"],
    }


def timeline(events):
    """Phases, and the pace (ms per PUBLISHED) in the first and the last
    tenth of the run: a scheduler that slows as it goes shows up here, free
    of the drift between separate runs."""
    pub = sorted(parse_ts(e["ts"]) for e in events if e["state"] == "PUBLISHED")
    tenth = len(pub) // 10
    pace = None
    if tenth >= 5:
        pace = (1000 * (pub[tenth] - pub[0]) / tenth, 1000 * (pub[-1] - pub[-1 - tenth]) / tenth)
    return {"phases": phase_breakdown(events), "pace_first_last_tenth_ms": pace,
            "max_in_flight": max_in_flight(events)}


def max_in_flight(events):
    """The most instances between RUNNING and PUBLISHED at once: more than
    the slots means the engine frees a slot when the command exits."""
    edges = []
    for e in events:
        if e["state"] == "RUNNING":
            edges.append((parse_ts(e["ts"]), 1))
        elif e["state"] == "PUBLISHED":
            edges.append((parse_ts(e["ts"]), -1))
    edges.sort(key=lambda x: (x[0], x[1]))
    cur = best = 0
    for _, d in edges:
        cur += d
        best = max(best, cur)
    return best


def phase_breakdown(events):
    """Per-instance means (ms) of the phases the event log brackets."""
    by = {}
    for e in events:
        if e.get("task") and e.get("partition"):
            by.setdefault((e["task"], e["partition"]), {})[e["state"]] = parse_ts(e["ts"])
    pairs = [("RUNNING", "SUCCESS"), ("SUCCESS", "AUDITED"), ("AUDITED", "PUBLISHED")]
    out = {}
    for a, b in pairs:
        xs = [v[b] - v[a] for v in by.values() if a in v and b in v]
        if xs:
            out[f"{a}->{b}"] = 1000 * statistics.fmean(xs)
    return out


# ---------------------------------------------------------------- report


def fmt_s(x):
    return f"{x:.3f} s" if x < 10 else f"{x:.1f} s"


def mib(kib):
    return f"{kib / 1024:.0f} MiB"


def cpu_row(row, key, x):
    """The CPU (user + system of the process tree) per instance of a W1,
    W2 or W5 result against xargs running the same commands."""
    if not x.get("weir_cpu_s"):
        return
    n = x["instances"]
    bc, wc = median(x["baseline_cpu_s"]), median(x["weir_cpu_s"])
    row(f"{key} CPU (user + system of the process tree), {n:,} instances",
        f"xargs -P2: {fmt_s(bc)}", fmt_s(wc),
        f"{1000 * wc / n:.2f} CPU-ms (xargs {1000 * bc / n:.2f})", f"{wc / bc:.2f}×",
        "(reported)", "—")


def report(res, sizes, runs, quick):
    rows = []
    met_all = []

    def row(name, base, weir, per, ratio, target, met):
        rows.append(f"| {name} | {base} | {weir} | {per} | {ratio} | {target} | {met} |")
        if met in ("yes", "no"):
            met_all.append(met == "yes")

    yn = lambda ok: "yes" if ok else "no"  # noqa: E731
    for key, title in (("W1", "W1 write, {n:,} partitions, 2 slots"),
                       ("W2", "W2 extract→transform→load, {p:,} partitions ({n:,} instances)")):
        if key in res:
            x = res[key]
            bm, wm = median(x["baseline_s"]), median(x["weir_s"])
            ratio = wm / bm
            row(title.format(n=x["instances"], p=x["instances"] // 3 if key == "W2" else 0),
                f"xargs -P2: {fmt_s(bm)}", fmt_s(wm),
                f"{1000 * wm / x['instances']:.2f} (xargs {1000 * bm / x['instances']:.2f})",
                f"{ratio:.2f}×", "≤ 1.5×", yn(ratio <= 1.5))
            cpu_row(row, key, x)
            if "floor_s" in x:
                fm = median(x["floor_s"])
                row(f"{key} durability floor (same commands, only the invariants' fsyncs and inodes)",
                    f"xargs -P2: {fmt_s(bm)}", f"floor: {fmt_s(fm)}",
                    f"{1000 * fm / x['instances']:.2f}",
                    f"{fm / bm:.2f}× xargs; weir {wm / fm:.2f}× the floor", "(reported)", "—")
    if "W3" in res:
        x = res["W3"]
        wm, peak = median(x["weir_s"]), x["weir_peak_kib"]
        row(f"W3 plan, {x['instances']:,} instances", "—",
            f"{fmt_s(wm)}, peak {mib(peak)}", f"{1000 * wm / x['instances']:.5f}",
            f"{wm / 2:.2f}× of 2 s, {peak / 1048576:.2f}× of 1 GiB",
            "< 2 s and < 1 GiB", yn(wm < 2 and peak < 1048576))
    if "W4" in res:
        x = res["W4"]
        bm, am = median(x["baseline_s"]), median(x["audit_s"])
        wm = median(x["weir_s"])
        gb = x["bytes"] / 1e9
        row(f"W4 audit (AUDITED−SUCCESS), {x['rows']:,} rows, {gb:.2f} GB",
            f"openssl sha256: {fmt_s(bm)}", f"{fmt_s(am)} ({gb / am:.2f} GB/s)", "—",
            f"{am / bm:.2f}×", "≤ 3×", yn(am <= 3 * bm))
        if x.get("weir_cpu_s"):
            bc, wc = median(x["baseline_cpu_s"]), median(x["weir_cpu_s"])
            row("W4 whole `weir run`, CPU (user + system)", f"openssl sha256: {fmt_s(bc)}",
                fmt_s(wc), "—", f"{wc / bc:.2f}×", "(reported)", "—")
        row("W4 whole `weir run` (same runs)", f"openssl sha256: {fmt_s(bm)}",
            f"{fmt_s(wm)}, peak {mib(x['weir_peak_kib'])}", f"{1000 * wm:.0f}",
            f"{wm / bm:.2f}×", "(reported)", "—")
    if "W6" in res:
        x = res["W6"]
        cm, pm = median(x["csv_audit_s"]), median(x["parquet_audit_s"])
        crate, prate = x["rows"] / cm, x["rows"] / pm
        row(f"W6 Parquet audit, {x['rows']:,} rows, {x['bytes']['parquet'] / 1e9:.2f} GB",
            f"CSV audit: {fmt_s(cm)} ({crate / 1e6:.2f} M rows/s)",
            f"{fmt_s(pm)} ({prate / 1e6:.2f} M rows/s), peak {mib(x['parquet_peak_kib'])}", "—",
            f"{prate / crate:.2f}× the CSV rate", "≥ 1×", yn(prate >= crate))
    if "W5" in res:
        x = res["W5"]
        bm, wm = median(x["baseline_s"]), median(x["weir_s"])
        per = 1000 * wm / x["instances"]
        if "W1" in res:
            w1 = res["W1"]
            per1 = 1000 * median(w1["weir_s"]) / w1["instances"]
            ratio = f"{per / per1:.2f}× W1's per instance"
            met = yn(per / per1 <= 1.2)
        else:
            ratio, met = "(needs W1)", "—"
        row(f"W5 write, {x['instances']:,} partitions, 2 slots", f"xargs -P2: {fmt_s(bm)}",
            f"{fmt_s(wm)}, peak {mib(x['weir_peak_kib'])}",
            f"{per:.2f} (xargs {1000 * bm / x['instances']:.2f})", ratio,
            "≤ 1.2× W1 per instance", met)
        cpu_row(row, "W5", x)

    if "R1" in res:
        x = res["R1"]
        rows.append("")
        rows.append(f"R1: {x['instances']:,} W1 instances, back-to-back runs (s); "
                    "last/first; Dirty+Writeback MiB just before each run (before its sync, if any)")
        rows.append("")
        rows.append("| sequence | runs (s) | last/first | dirty before (MiB) |")
        rows.append("|---|---|---|---|")
        for name, seq in x["sequences"].items():
            w = seq["wall_s"]
            rows.append(f"| {name} | {', '.join(f'{v:.2f}' for v in w)} | {w[-1] / w[0]:.2f}× | "
                        f"{', '.join(f'{v / 1024:.0f}' for v in seq['dirty_kib_before'])} |")
    mode = "quick" if quick else "full"
    print(f"### weir benchmarks ({mode}: median of {runs} run(s); "
          f"sizes {json.dumps(sizes)})\n")
    print("| workload | baseline median | weir median | per-instance ms | ratio | target | met? |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if "W1" in res and res["W1"].get("phases"):
        x = res["W1"]
        ph = x["phases"]
        slot_ms = SLOTS * 1000 * x["last_weir_s"] / x["instances"]
        early = x.get("max_in_flight", 0) > SLOTS
        in_slot = ph.get("RUNNING->SUCCESS", 0) if early else sum(ph.values())
        print(f"\nW1 per-instance phases (means over the last weir run, from its event log; "
              f"slot time per instance = {SLOTS} slots × its wall / instances = {slot_ms:.2f} ms; "
              f"up to {x.get('max_in_flight')} instances were between RUNNING and PUBLISHED at "
              f"once, so " + ("a slot is released when the command exits and the audit and "
                              "publish overlap later commands" if early else
                              "a slot is held until PUBLISHED") + "):\n")
        print("| phase | in the slot? | mean ms |")
        print("|---|---|---|")
        print(f"| before RUNNING: slot handoff, thread, pin, token put-if-absent, staging dirs "
              f"(slot time − the slot's other phases) | yes | {slot_ms - in_slot:.2f} |")
        names = {
            "RUNNING->SUCCESS": ("RUNNING→SUCCESS: log files, spawn, the command, wait, kill group",
                                 "yes"),
            "SUCCESS->AUDITED": ("SUCCESS→AUDITED: list, audit, candidate.json",
                                 "no" if early else "yes"),
            "AUDITED->PUBLISHED": ("AUDITED→PUBLISHED: fsync the candidate tree, fenced commit",
                                   "no" if early else "yes"),
        }
        for k, v in ph.items():
            name, where = names.get(k, (k, "?"))
            print(f"| {name} | {where} | {v:.2f} |")
    if "W5" in res and "W1" in res:
        x5, x1 = res["W5"], res["W1"]
        w5, w1 = median(x5["weir_s"]), median(x1["weir_s"])
        b5, b1 = median(x5["baseline_s"]), median(x1["baseline_s"])
        dn = x5["instances"] - x1["instances"]
        print(f"\nW5 vs W1: marginal cost (W5 − W1) / {dn:,} extra instances = "
              f"{1000 * (w5 - w1) / dn:.2f} ms per instance (W1: {1000 * w1 / x1['instances']:.2f}); "
              f"ratio to xargs {w5 / b5:.2f}× at {x5['instances']:,} vs {w1 / b1:.2f}× at "
              f"{x1['instances']:,}; peak RSS {mib(x5['weir_peak_kib'])} vs {mib(x1['weir_peak_kib'])}.")
        pace = x5.get("pace_first_last_tenth_ms")
        if pace:
            print(f"Within the last W5 run: {pace[0]:.2f} ms per instance over its first tenth, "
                  f"{pace[1]:.2f} over its last ({pace[1] / pace[0]:.2f}×).")
    if "W4" in res:
        x = res["W4"]
        print(f"\nW4: AUDITED→PUBLISHED median {1000 * median(x['publish_s']):.0f} ms "
              f"(SHA-256 and fsync of the copied candidate + commit).")
    print()
    print("Every run exited 0 and published every instance; a baseline is the same "
          "`sh -c` command run under `xargs -P2` (W4: `openssl dgst -sha256`).")
    return met_all


def machine():
    info = {"python": platform.python_version(), "kernel": platform.release(),
            "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem"] = f.readline().split(":", 1)[1].strip()
        info["load"] = os.getloadavg()
    except OSError:
        pass
    return info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--only", default="W1,W2,W3,W4,W5,W6")
    ap.add_argument("--gen-parquet", help="the gen_parquet example binary (W6)")
    ap.add_argument("--floor", help="the durable_floor example binary (W1 and W2's floor)")
    ap.add_argument("--json")
    ap.add_argument("--size", action="append", default=[],
                    help="override a size: w1=N, w2=N, w3=TASKSxLAYERSxDAYS, w4=ROWS, w5=N, w6=ROWS")
    args = ap.parse_args()
    sizes = dict(QUICK if args.quick else FULL)
    for item in args.size:
        key, _, val = item.partition("=")
        if key not in sizes or not val:
            raise SystemExit(f"bad --size {item!r}")
        sizes[key] = tuple(int(v) for v in val.split("x")) if key == "w3" else int(val)
    runs = args.runs or (1 if args.quick else 3)
    only = {w.strip().upper() for w in args.only.split(",") if w.strip()}
    unknown = only - {"W1", "W2", "W3", "W4", "W5", "W6", "R1"}
    if "W6" in only and not args.gen_parquet:
        log("W6 skipped: it needs --gen-parquet BIN (bench/run.sh builds it with cargo)")
        only.discard("W6")
    if unknown:
        raise SystemExit(f"unknown workload(s): {', '.join(sorted(unknown))}")
    weir = os.path.abspath(args.weir)
    r = Runner(weir, os.path.abspath(args.work), runs,
               os.path.abspath(args.floor) if args.floor else None)
    info = machine()
    log(f"machine: {info}")
    # Warm-up: the binary, the shell and xargs into the page cache.
    w_write(Runner(weir, r.work, 1), {"warmup": 5})
    rmtree(os.path.join(r.work, "warmup"))
    res = {}
    started = time.perf_counter()
    if "W1" in only or "W5" in only:
        wanted = {"W1": sizes["w1"]}
        if "W5" in only:
            wanted["W5"] = sizes["w5"]
        res.update(w_write(r, wanted))
    if "W2" in only:
        res["W2"] = w2(r, sizes["w2"])
    if "R1" in only:
        res["R1"] = r1(r, sizes["w1"])
    if "W3" in only:
        res["W3"] = w3(r, sizes["w3"])
    if "W4" in only:
        res["W4"] = w4(r, sizes["w4"])
    if "W6" in only:
        res["W6"] = w6(r, sizes["w6"], os.path.abspath(args.gen_parquet))
    info["load_after"] = os.getloadavg()
    log(f"measured in {time.perf_counter() - started:.0f} s")
    remove_set_aside()
    report(res, sizes, runs, args.quick)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "runs": runs, "sizes": sizes, "results": res}, f, indent=1)


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"bench: error: {e}", file=sys.stderr)
        sys.exit(1)
