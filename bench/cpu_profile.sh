#!/usr/bin/env bash
# Where a trivial instance's CPU goes, by phase: W1 (N instances of one
# `printf` task, 2 slots) run under `perf record` with DWARF call chains,
# each sample charged to the first weir phase its chain names
# (bench/cpu_profile.py). Also prints user + system CPU of the run's process
# tree. See BENCHMARKS.md, "A trivial instance's CPU".
#
# usage: bench/cpu_profile.sh [N] [--weir BIN] [--chain]
#   N partitions (default 1000); --chain profiles W2's extract -> transform
#   -> load instead (3N instances).
#
# Needs perf (apt-get install linux-perf) and python3. Build weir with the
# `debugging` profile (release code, weir's line tables, symbols kept) for
# named frames: cargo build --profile debugging.
set -euo pipefail
cd "$(dirname "$0")/.."
n=1000 weir="" hz=499 chain=0
while (($#)); do
  case "$1" in
    --weir) weir=${2:?--weir needs a path}; shift 2 ;;
    --chain) chain=1; shift ;;
    *) n=$1; shift ;;
  esac
done
command -v perf >/dev/null 2>&1 || { echo "cpu_profile: needs perf (apt-get install linux-perf)" >&2; exit 2; }
if [[ -z "$weir" ]]; then
  cargo build --profile debugging --quiet --bin weir
  weir=${CARGO_TARGET_DIR:-target}/debugging/weir
fi
weir=$(realpath "$weir")
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-cpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 -B -c '
import sys
sys.path.insert(0, "bench")
import harness
keys = harness.keys_of(int(sys.argv[2]))
tasks = [("write", harness.WRITE, [], "rows", [])]
if sys.argv[3] == "1":
    tasks = [("extract", harness.WRITE, [], "raw", []),
             ("transform", harness.TRANSFORM, ["raw"], "stg", []),
             ("load", harness.LOAD, ["stg"], "mart", [])]
harness.static_manifest(sys.argv[1] + "/pipeline.toml", "w", keys, tasks)
' "$work" "$n" "$chain"
cd "$work"
# Once without perf, for the CPU of the process tree; then on a fresh
# warehouse under perf for the samples.
sync
/usr/bin/time -f "weir run (no perf): wall %e s, user %U s, system %S s, peak %M KiB" \
  -o time.txt "$weir" run pipeline.toml >run.out 2>run.err || { tail -5 run.err >&2; exit 1; }
cat time.txt
grep -o '[0-9]* published' run.out || true
# Set aside, not deleted: ext4 would make the next run's creates skip the
# inodes just freed (BENCHMARKS.md, "Where the time goes now").
mv warehouse aside
sync
perf record -q -F "$hz" --call-graph dwarf,8192 -o perf.data -- "$weir" run pipeline.toml >run.out 2>run.err \
  || { tail -5 run.err >&2; exit 1; }
perf script -i perf.data -F comm,tid,ip,sym 2>/dev/null | python3 -B "$OLDPWD/bench/cpu_profile.py" "$((n * (chain ? 3 : 1)))" "$hz"
