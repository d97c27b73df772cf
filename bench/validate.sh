#!/usr/bin/env bash
# W6: `weir validate` of a 20,000-task manifest (20 layers, every task of a
# layer reading two of the one before). Target: under 1 s, and linear: the
# 5,000-task manifest takes about a quarter of the time. Prints the medians
# of RUNS runs. usage: bench/validate.sh [RUNS]   (TASKS env var resizes it)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
tasks=${TASKS:-20000}
cargo build --release --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf "| workload | tasks | median wall s | peak RSS MiB | target |\n|---|---|---|---|---|\n"
for n in $((tasks / 4)) "$tasks"; do
  python3 bench/gen_manifest.py "$n" 20 2 > "$work/big.toml"
  : > "$work/times"
  for _ in $(seq "$runs"); do
    /usr/bin/time -f "%e %M" -o "$work/t" ./target/release/weir validate "$work/big.toml" > /dev/null
    cat "$work/t" >> "$work/times"
  done
  sort -n "$work/times" | awk -v n="$runs" -v tasks="$n" '
    { s[NR] = $1; if ($2 > peak) peak = $2 }
    END { printf "| W6 validate | %s | %.2f | %.0f | < 1 s at 20,000 |\n", tasks, s[int((n + 1) / 2)], peak / 1024 }'
done
