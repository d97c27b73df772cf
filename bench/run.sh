#!/usr/bin/env bash
# The weir benchmark: W1-W5 against their baselines, one markdown table.
#
# usage: bench/run.sh [--quick] [--runs N] [--only W1,W2,W3,W4,W5,W6,R1] [--json FILE]
#                     [--size w1=N] [--weir BIN] [--profile PROFILE]
#
#   (default)  full sizes, median of 3 runs: 1,000 / 10,000 partitions, a
#              730,000-instance plan and a 1 GB, 10 M-row CSV (5 to 11 min on
#              the 2-core VM of BENCHMARKS.md; needs about 1.2 GB free in
#              $TMPDIR, whose filesystem is the one measured)
#   --quick    CI sizes, 1 run: 50 / 500 partitions, a 20x5x30 plan, a
#              20,000-row CSV (about 5 s once weir is built); its verdicts are
#              a smoke test, not a measurement
#   --runs N   median of N runs (default 3, or 1 with --quick)
#   --only     a subset of the workloads (W5 always brings W1, its reference;
#              R1, five back-to-back W1 runs per sequence, runs only when named)
#   --size     override one size: w1=N, w2=N, w3=TASKSxLAYERSxDAYS, w4=ROWS, w5=N, w6=ROWS
#   --json     also write every measurement to FILE
#   --weir BIN use this binary instead of building one with cargo
#   --profile  build with this cargo profile (default release); CI's --quick smoke run
#              passes `dev` so it reuses the test build instead of a second, release build
#
# Needs: cargo, python3 (standard library only), sh, openssl, and GNU
# coreutils/findutils (xargs -a, sync FILE, ln). GNU time (/usr/bin/time) is
# used for peak RSS when present, else /proc is sampled. Everything is
# generated in a mktemp dir that is removed on exit (the 1 GB CSV as soon as
# W4 is measured). Exits 0 when every workload ran, whether or not its target
# was met (this is a report); non-zero only if something failed to build or
# run (2: a required tool is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

weir=""
profile=release
args=()
while (($#)); do
  case "$1" in
    --weir) weir=${2:?--weir needs a path}; shift 2 ;;
    --weir=*) weir=${1#--weir=}; shift ;;
    --profile) profile=${2:?--profile needs a cargo profile}; shift 2 ;;
    --profile=*) profile=${1#--profile=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

missing=()
[[ -n "$weir" ]] || command -v cargo >/dev/null 2>&1 || missing+=(cargo)
for tool in python3 sh openssl xargs sync ln mktemp; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  echo "bench: missing required tool(s): ${missing[*]}" >&2
  case " ${missing[*]} " in *" openssl "*)
    echo "bench: openssl is W4's baseline; install it (e.g. apt-get install openssl)" >&2 ;;
  esac
  exit 2
fi

# Build (cargo waits on the shared target dir's lock by itself) and find the
# binary wherever CARGO_TARGET_DIR puts it.
# built TARGET CARGO-ARGS...: builds and prints the path of TARGET's executable.
built() {
  local target=$1
  shift
  cargo build --profile "$profile" "$@" --message-format=json-render-diagnostics \
    | python3 -c '
import json, sys
exe = None
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == sys.argv[1] and m.get("executable"):
        exe = m["executable"]
print(exe or "")' "$target"
}
if [[ -z "$weir" ]]; then
  echo "[bench] cargo build --profile $profile" >&2
  weir=$(built weir --bin weir)
fi
if [[ -z "$weir" || ! -x "$weir" ]]; then
  echo "bench: cannot find the weir binary after cargo build" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/weir-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

{
  echo "[bench] weir $("$weir" --version 2>/dev/null | awk '{print $2}') at $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src 2>/dev/null || echo ' (src/ modified)'), binary $weir"
  echo "[bench] work dir $work on $(df -PT "$work" | awk 'NR==2 {print $1 " (" $2 ")"}')"
} >&2

# W6's generator: the rows of gen_csv.py written as Parquet by the parquet
# crate (Python's standard library has no Parquet writer).
# W1 and W2's durability floor: the same commands with only the filesystem
# work the invariants require (examples/durable_floor.rs).
examples=()
if command -v cargo >/dev/null 2>&1; then
  echo "[bench] cargo build --profile $profile --example gen_parquet --example durable_floor" >&2
  gen=$(built gen_parquet --example gen_parquet)
  [[ -n "$gen" && -x "$gen" ]] && examples+=(--gen-parquet "$gen")
  floor=$(built durable_floor --example durable_floor)
  [[ -n "$floor" && -x "$floor" ]] && examples+=(--floor "$floor")
fi
python3 -B bench/harness.py --weir "$weir" --work "$work" ${examples[@]+"${examples[@]}"} ${args[@]+"${args[@]}"}
