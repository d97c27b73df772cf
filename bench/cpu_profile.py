#!/usr/bin/env python3
"""Where a trivial instance's CPU goes, by phase: reads `perf script` output
(samples with call chains) of a `weir run` of W1 and charges each sample to
the first phase (in the order of PHASES) any frame of its call chain names.

usage: perf script -F comm,tid,ip,sym | cpu_profile.py INSTANCES [SAMPLE_HZ]

Prints a markdown table: phase, samples, share, CPU-ms per instance. Standard
library only; see bench/cpu_profile.sh, which records the samples.
"""
import collections
import sys

# (phase, substrings of a frame's symbol), tried in this order: a sample is
# charged to the first phase any frame of its call chain names, so a sample
# in an event append made while publishing counts as events, one in the
# store's token files made while claiming as claim. The names are weir's
# own modules and functions.
PHASES = [
    ("events (append, flush of the run's log)", ("weir::store::events", "EventLog")),
    ("audit (list, read, gates, digest, candidate.json)",
     ("weir::audit::", "attempt::audited::", "candidate_files")),
    ("code fingerprint (at launch and exit)", ("manifest::fingerprint", "code_moved")),
    ("publish (file sums, fsync of the candidate, fenced commit, markers)",
     ("attempt::publish::",)),
    ("claim (token put-if-absent, lease, attempt dir)",
     ("attempt::claim", "allocate_for", "weir::exec::lease", "store::leases")),
    ("launch and wait (log files, spawn, reap, process-tree stop)",
     ("create_logs", "prepare_command", "attempt::execute", "weir::exec::spawn",
      "weir::exec::launch", "weir::exec::command", "weir::exec::tree", "redact_logs",
      "executor", "weir::exec::timer")),
    ("slots and pools", ("weir::exec::pool", "weir::store::slots", "take_slot")),
    ("fsync threads (the flusher's fsyncs)", ("weir::store::flush",)),
    ("the attempt's own steps (staging dirs, inlined store calls)", ("attempt::steps",)),
    ("scheduling (machine, scheduler, readiness)",
     ("weir::exec::machine", "weir::exec::scheduler", "weir::exec::readiness",
      "weir::exec::waiting", "weir::exec::job")),
    ("run start and end (manifest, plan, run record, summary)",
     ("weir::manifest", "weir::plan", "weir::cli", "weir::session", "weir::ops")),
]


def phase_of(comm, frames):
    if not comm.startswith("weir"):
        return f"the command's processes ({comm})" if comm in ("sh", "printf") else \
            f"other processes ({comm})"
    for name, needles in PHASES:
        if any(n in sym for sym in frames for n in needles):
            return name
    if frames and all(s.startswith("[k]") or s == "[unknown]" for s in frames):
        return "weir: kernel without a weir frame (exit, page faults, scheduler)"
    return "weir: other (allocator, std, threads without a named frame)"


def main():
    instances = int(sys.argv[1])
    hz = float(sys.argv[2]) if len(sys.argv) > 2 else 0
    counts = collections.Counter()
    comm, frames = None, []
    total = 0

    def flush():
        nonlocal total
        if comm is not None:
            counts[phase_of(comm, frames)] += 1
            total += 1

    for line in sys.stdin:
        if not line.strip():
            flush()
            comm, frames = None, []
            continue
        if not line.startswith((" ", "\t")):
            flush()
            comm, frames = line.split()[0], []
            continue
        parts = line.strip().split(None, 1)
        sym = parts[1] if len(parts) > 1 else "[unknown]"
        frames.append(sym)
    flush()
    print("| phase | samples | share | CPU-ms per instance |")
    print("|---|---|---|---|")
    for name, n in counts.most_common():
        per = f"{1000 * n / hz / instances:.3f}" if hz else "—"
        print(f"| {name} | {n} | {100 * n / max(total, 1):.1f} % | {per} |")
    per = f"{1000 * total / hz / instances:.3f}" if hz else "—"
    print(f"| all | {total} | 100 % | {per} |")


if __name__ == "__main__":
    main()
