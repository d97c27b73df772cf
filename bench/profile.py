#!/usr/bin/env python3
"""Where one W1 instance's time goes. Run it through bench/profile.sh.

usage: profile.py --weir BIN --work DIR [--n N] [--runs R] [--tmpfs DIR]

Four measurements of the W1 workload (N partitions, pool of 2 slots):
  1. untraced `weir run` against `xargs -P2` (median of --runs), on the
     work dir's filesystem and, with --tmpfs, on tmpfs where fsync is free:
     wall times and the event log's phases;
  2. `strace -f -c`: exact syscall counts per instance;
  3. `strace -f -ttt -T -y`: every fsync of every attempt thread, in order,
     with its path and latency, and the attempt threads' time by syscall
     (strace slows each syscall by tens of microseconds: use it for counts
     and proportions, and (1) for absolute time);
  4. micro-benchmarks on the same filesystem: the latency of a file fsync, a
     directory fsync after mkdir, and of spawning the task's shell, so the
     per-instance budget can be stated as counts x unit costs.
Standard library only (plus strace).
"""
import argparse
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")
CALL = re.compile(r"^(\w+)\((.*)$")
DONE = re.compile(r"^(.*)\)\s+=\s+(-?\d+|\?)(.*?)(?:<(\d+\.\d+)>)?$")
RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")


def parse_strace(path):
    """-> {pid: [(ts, name, args, ret, dur)]}, merging unfinished/resumed."""
    calls = collections.defaultdict(list)
    pending = {}
    with open(path, errors="replace") as f:
        for raw in f:
            m = LINE.match(raw.rstrip("\n"))
            if not m:
                continue
            pid, ts, rest = int(m.group(1)), float(m.group(2)), m.group(3)
            if rest.startswith("+++") or rest.startswith("---"):
                if rest.startswith("+++ exited"):
                    calls[pid].append((ts, "+exit", "", 0, 0.0))
                continue
            r = RESUMED.match(rest)
            if r:
                if pid not in pending:
                    continue
                ts0, name, args = pending.pop(pid)
                d = DONE.match(args + r.group(2))
                if d:
                    calls[pid].append((ts0, name, d.group(1), d.group(2), float(d.group(4) or 0)))
                continue
            c = CALL.match(rest)
            if not c:
                continue
            name, tail = c.group(1), c.group(2)
            if tail.endswith("<unfinished ...>"):
                pending[pid] = (ts, name, tail[: -len("<unfinished ...>")].rstrip())
                continue
            d = DONE.match(tail)
            if d:
                calls[pid].append((ts, name, d.group(1), d.group(2), float(d.group(4) or 0)))
    return calls


def normalize(path, root):
    path = path.replace(root, "<wh>")
    path = re.sub(r"\.([^/]*?)\.\d+\.\d+\.tmp$", r".\1.<tmp>", path)
    path = re.sub(r"(?<!\w)p\d{5}", "<p>", path)
    path = re.sub(r"\d{20}", "<n>", path)
    path = re.sub(r"run-[\w-]+", "<run>", path)
    return path


def fd_path(args):
    m = re.match(r"\d+<([^>]*)>", args)
    return m.group(1) if m else "?"


def first_str(args):
    m = re.search(r'"([^"]*)"', args)
    return m.group(1) if m else ""


def label_fsyncs(calls, root):
    """Labels each fsync of one thread: file bytes, or a directory made
    durable after a mkdir / link / rename in it, or a tree-walk fsync."""
    out = []
    recent = []  # entry-changing ops since the last fsync: (kind, path)
    for ts, name, args, ret, dur in calls:
        if name in ("mkdir", "linkat", "rename", "renameat", "renameat2"):
            paths = re.findall(r'"([^"]*)"', args)
            if paths:
                recent.append((name, paths[-1]))
        elif name == "openat" and "O_CREAT" in args:
            recent.append(("create", first_str(args)))
        elif name in ("fsync", "fdatasync"):
            p = fd_path(args)
            if os.path.isdir(p) or p.endswith(("/tokens", "/log", "/attempts", "/data")) \
                    or not os.path.splitext(p)[1] and not p.endswith(".tmp"):
                why = None
                for kind, q in reversed(recent):
                    if os.path.dirname(q.rstrip("/")) == p.rstrip("/"):
                        base = normalize(os.path.basename(q), root)
                        why = {"mkdir": f"new dir {base}/", "linkat": f"link {base}",
                               "create": f"new file {base}"}.get(kind, f"rename to {base}")
                        break
                what = f"dir {normalize(p, root)}" + (f" ({why})" if why else " (tree walk)")
            else:
                what = f"file {normalize(p, root)}"
            out.append((what, dur))
            recent = []
    return out


def attempt_threads(calls, root):
    """Threads that ran one attempt: they spawn the task (clone3 with
    CLONE_VFORK) and fsync under the warehouse."""
    return {pid: cs for pid, cs in calls.items()
            if any(n in ("clone3", "clone") and "CLONE_VFORK" in a for _, n, a, _, _ in cs)
            and any(n == "fsync" and root in a for _, n, a, _, _ in cs)}


def describe_thread_time(threads):
    """Mean per attempt thread: lifetime and time by syscall."""
    per = collections.defaultdict(float)
    life = []
    for cs in threads.values():
        start = cs[0][0]
        end = max(ts + dur for ts, _, _, _, dur in cs)
        life.append(end - start)
        for _, name, args, _, dur in cs:
            if name in ("clone3", "clone"):
                name = "clone3 (spawn: vfork until exec)" if "CLONE_VFORK" in args \
                    else "clone3 (watchdog thread)"
            per[name] += dur
    n = len(threads)
    return statistics.fmean(life), {k: v / n for k, v in per.items()}


def micro(work, reps=200):
    """Median latencies (us) on this filesystem."""
    d = os.path.join(work, "micro")
    os.makedirs(d)
    file_sync, dir_sync, clean_sync, spawn = [], [], [], []
    for i in range(reps):
        p = os.path.join(d, f"f{i}")
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"x" * 120)
        t = time.perf_counter()
        os.fsync(fd)
        file_sync.append(time.perf_counter() - t)
        t = time.perf_counter()
        os.fsync(fd)
        clean_sync.append(time.perf_counter() - t)
        os.close(fd)
        os.mkdir(os.path.join(d, f"d{i}"))
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        t = time.perf_counter()
        os.fsync(dfd)
        dir_sync.append(time.perf_counter() - t)
        os.close(dfd)
        t = time.perf_counter()
        subprocess.run(["sh", "-c", harness.WRITE, "sh", os.path.join(d, f"d{i}")], check=True)
        spawn.append(time.perf_counter() - t)
    shutil.rmtree(d)
    us = lambda xs: 1e6 * statistics.median(xs)  # noqa: E731
    return {"file write+fsync": us(file_sync), "fsync of a clean file": us(clean_sync),
            "dir fsync after a mkdir in it": us(dir_sync),
            "spawn+wait `sh -c WRITE` (sequential)": us(spawn)}


def perf_trace(weir, manifest, d):
    """`perf trace -s`: per-thread syscall totals with less overhead than
    strace. Returns (wall, {syscall: mean ms per attempt thread}, threads)
    or None when perf cannot trace here."""
    if not shutil.which("perf"):
        return None
    out = os.path.join(d, "perf.txt")
    harness.rmtree(os.path.join(d, "warehouse"))
    t0 = time.perf_counter()
    rc = subprocess.run(["perf", "trace", "-s", "-o", out, "--", weir, "run", manifest], cwd=d,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - t0
    if rc != 0 or not os.path.exists(out):
        return None
    blocks, cur = [], None
    head = re.compile(r"^\s*(\S+) \((\d+)\), \d+ events")
    row = re.compile(r"^\s+(\w+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+")
    with open(out) as f:
        for line in f:
            m = head.match(line)
            if m:
                cur = {"comm": m.group(1), "calls": {}}
                blocks.append(cur)
                continue
            m = row.match(line)
            if m and cur is not None:
                cur["calls"][m.group(1)] = (int(m.group(2)), float(m.group(4)))
    os.remove(out)
    attempts = [b for b in blocks if b["comm"] == "weir" and "clone3" in b["calls"]
                and b["calls"].get("fsync", (0, 0))[0] >= 10]
    if not attempts:
        return None
    totals = collections.defaultdict(float)
    for b in attempts:
        for name, (_, ms) in b["calls"].items():
            totals[name] += ms
    return wall, {k: v / len(attempts) for k, v in totals.items()}, len(attempts)


def fstype(path):
    try:
        out = subprocess.run(["df", "-PT", path], capture_output=True, text=True).stdout
        return out.splitlines()[1].split()[1]
    except (OSError, IndexError):
        return "?"


def fsync_chain(root, i):
    """19 fsyncs shaped like one weir instance's: a new dir made durable in
    its parent, then 6 x (mkdir + fsync dir, write a small file + fsync it,
    fsync its dir again)."""
    inst = os.path.join(root, f"i{i}")
    os.mkdir(inst)
    sync_path(root)
    for k in range(6):
        sub = os.path.join(inst, f"s{k}")
        os.mkdir(sub)
        sync_path(inst)
        fd = os.open(os.path.join(sub, "f"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"x" * 300)
        os.fsync(fd)
        os.close(fd)
        sync_path(sub)


def sync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_scaling(work, n=120, levels=(1, 2, 4, 8, 16)):
    """Throughput of weir-shaped fsync chains by how many run at once: how
    much the filesystem batches concurrent fsyncs (jbd2 group commit)."""
    from concurrent.futures import ThreadPoolExecutor

    out = {}
    for level in levels:
        root = os.path.join(work, f"chains{level}")
        os.mkdir(root)
        t = time.perf_counter()
        with ThreadPoolExecutor(level) as pool:
            list(pool.map(lambda i: fsync_chain(root, i), range(n)))
        out[level] = (time.perf_counter() - t) / n
        shutil.rmtree(root)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tmpfs", help="a dir on tmpfs for the no-fsync comparison")
    args = ap.parse_args()
    if not shutil.which("strace"):
        raise SystemExit("profile: strace is required (apt-get install strace)")
    n, work, weir = args.n, os.path.abspath(args.work), os.path.abspath(args.weir)
    d = os.path.join(work, "profile")
    os.makedirs(d, exist_ok=True)
    keys = harness.keys_of(n)
    manifest = os.path.join(d, "pipeline.toml")
    harness.static_manifest(manifest, "w1", keys, [("write", harness.WRITE, [], "rows", [])])
    root = os.path.join(d, "warehouse")
    units_before = micro(d)

    # 1. untraced, on this filesystem and on tmpfs (where fsync costs nothing)
    disk = harness.w_write(harness.Runner(weir, work, args.runs), {"disk": n})["disk"]
    shm = None
    if args.tmpfs:
        shm = harness.w_write(harness.Runner(weir, os.path.abspath(args.tmpfs), args.runs),
                              {"tmpfs": n})["tmpfs"]
    # 2. counts
    counts_file = os.path.join(d, "counts.txt")
    subprocess.run(["strace", "-f", "-c", "-o", counts_file, weir, "run", manifest], cwd=d,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    counts = {}
    with open(counts_file) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1].isidentifier():
                calls = int(parts[3])
                errors = int(parts[4]) if len(parts) == 6 else 0
                counts[parts[-1]] = (calls, errors)
    # 3. timeline
    harness.rmtree(root)
    trace_file = os.path.join(d, "trace.txt")
    t0 = time.perf_counter()
    subprocess.run(["strace", "-f", "-ttt", "-T", "-y", "-o", trace_file, "-e",
                    "trace=fsync,fdatasync,mkdir,openat,linkat,rename,unlink,clone3,clone,"
                    "execve,wait4,write,futex,read,getdents64,statx,newfstatat",
                    weir, "run", manifest], cwd=d,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    traced_wall = time.perf_counter() - t0
    calls = parse_strace(trace_file)
    threads = attempt_threads(calls, root)
    seqs = [label_fsyncs(cs, root) for cs in threads.values()]
    # An attempt may not have a thread of its own (the publish's fsyncs
    # go to the flusher pool): then there is no per-attempt
    # breakdown to give, only the counts above.
    life, by_call = describe_thread_time(threads) if threads else (0.0, {})
    os.remove(trace_file)
    perf = perf_trace(weir, manifest, d)
    harness.rmtree(root)
    # 4. unit costs again (the machine is shared: bracket the runs), and how
    # fsync chains scale with concurrency
    units_after = micro(d)
    scaling = fsync_scaling(d)

    med = statistics.median
    print(f"### Profile of W1: {n} partitions, 2 slots (untraced: median of {args.runs})\n")
    print("| where | xargs -P2 | weir | ratio | weir slot ms per instance | before RUNNING | "
          "RUNNING→SUCCESS | SUCCESS→AUDITED | AUDITED→PUBLISHED | max in flight |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, x in (("disk (" + fstype(work) + ")", disk), ("tmpfs: fsync is free", shm)):
        if not x:
            continue
        b, w = med(x["baseline_s"]), med(x["weir_s"])
        slot = 2000 * x["last_weir_s"] / n
        ph = x["phases"]
        cols = [ph.get(k, 0) for k in ("RUNNING->SUCCESS", "SUCCESS->AUDITED",
                                       "AUDITED->PUBLISHED")]
        early = x["max_in_flight"] > 2
        pre = slot - (cols[0] if early else sum(cols))
        print(f"| {name} | {b:.3f} s | {w:.3f} s | {w / b:.2f}× | {slot:.2f} | {pre:.2f} | "
              + " | ".join(f"{c:.2f}" for c in cols) + f" | {x['max_in_flight']} |")
    print("\n(phases are means over the last run's event log, in ms. Slot time = 2 slots × "
          "that run's wall / instances. \"before RUNNING\" is the slot time the slot's other "
          "phases do not cover: slot handoff, thread start, input pin, token put-if-absent, "
          "staging dirs. When more than 2 instances are in flight (RUNNING→PUBLISHED) at once, "
          "the slot is released at SUCCESS and only RUNNING→SUCCESS is in it. Under strace -T "
          f"the disk run took {traced_wall:.3f} s.)\n")
    print("\nSyscalls per instance (strace -f -c, whole process tree incl. the task's sh; "
          "errors in brackets):\n")
    print("| syscall | per instance |")
    print("|---|---|")
    for name, (c, e) in sorted(counts.items(), key=lambda kv: -kv[1][0]):
        if c / n >= 0.5:
            print(f"| {name} | {c / n:.1f}" + (f" [{e / n:.1f}]" if e else "") + " |")
    if not threads:
        print("\nNo thread both spawned a task and fsynced under the warehouse: attempts "
              "no longer run on a thread each, so there is no per-attempt fsync sequence or "
              "thread time to show (the syscall counts above cover the whole tree).\n")
    else:
        print(f"\nfsyncs of one attempt thread, in order ({len(threads)} attempt threads; "
              "median latency under strace):\n")
        print("| # | what is made durable | share of instances | median µs |")
        print("|---|---|---|---|")
        by_pos = collections.defaultdict(list)
        for seq in seqs:
            for i, (what, dur) in enumerate(seq):
                by_pos[(i, what)].append(dur)
        shown = sorted(by_pos.items(), key=lambda kv: (kv[0][0], -len(kv[1])))
        for (i, what), durs in shown:
            if len(durs) >= 0.02 * len(seqs):
                print(f"| {i + 1} | {what} | {len(durs) / len(seqs):.0%} | "
                      f"{1e6 * statistics.median(durs):.0f} |")
        total_fsync = sum(d for seq in seqs for _, d in seq) / max(1, len(seqs))
        print(f"\nMean fsyncs per attempt thread: {statistics.fmean(len(s) for s in seqs):.2f}, "
              f"{1000 * total_fsync:.2f} ms.\n")
        print(f"Attempt thread time by syscall (mean per attempt, traced; lifetime "
              f"{1000 * life:.2f} ms):\n")
        print("| syscall | ms | share of lifetime |")
        print("|---|---|---|")
        for name, v in sorted(by_call.items(), key=lambda kv: -kv[1]):
            if v >= 0.01 * life:
                print(f"| {name} | {1000 * v:.2f} | {v / life:.0%} |")
        rest = life - sum(by_call.values())
        print(f"| (untraced syscalls, user CPU, run queue) | {1000 * rest:.2f} | {rest / life:.0%} |")
    if perf:
        pwall, per, nthreads = perf
        print(f"\nSame, under `perf trace -s` (lighter than strace; wall {pwall:.3f} s, "
              f"{nthreads} attempt threads), mean ms per attempt thread:\n")
        print("| syscall | ms |")
        print("|---|---|")
        for name, v in sorted(per.items(), key=lambda kv: -kv[1])[:8]:
            print(f"| {name} | {v:.2f} |")
    print("\nUnit costs on this filesystem (untraced, median of 200, before and after "
          "the runs):\n")
    for k in units_before:
        print(f"- {k}: {units_before[k]:.0f} / {units_after[k]:.0f} µs")
    print("\nweir-shaped chains of 19 fsyncs (6 x mkdir+fsync dir, write+fsync file, fsync dir, "
          "after one new dir), 120 chains, by how many run at once (Python threads):\n")
    print("| chains at once | ms per chain (wall / chains) | speed-up over 1 |")
    print("|---|---|---|")
    for level, per in scaling.items():
        print(f"| {level} | {1000 * per:.2f} | {scaling[1] / per:.1f}× |")


if __name__ == "__main__":
    try:
        main()
    except harness.BenchError as e:
        print(f"profile: error: {e}", file=sys.stderr)
        sys.exit(1)
