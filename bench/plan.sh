#!/usr/bin/env bash
# W3: planning 730,000 task instances (2,000 tasks in 20 layers x 365 days).
# Target: under 2 s and under 1 GiB peak memory. Prints the median of RUNS runs.
# usage: bench/plan.sh [RUNS]   (TASKS/LAYERS/DAYS env vars shrink it for CI;
#        ROLLUPS=N adds N weekly and N monthly rollups over the last layer)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
tasks=${TASKS:-2000} layers=${LAYERS:-20} days=${DAYS:-365} rollups=${ROLLUPS:-0}
cargo build --release --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 bench/gen_manifest.py "$tasks" "$layers" "$days" "$rollups" > "$work/big.toml"
for _ in $(seq "$runs"); do
  /usr/bin/time -f "%e %M" -o "$work/t" ./target/release/weir plan "$work/big.toml" --backfill all > "$work/plan.txt"
  cat "$work/t" >> "$work/times"
done
instances=$(grep '^total:' "$work/plan.txt" | awk '{print $2}')
sort -n "$work/times" | awk -v n="$runs" -v inst="$instances" '
  { s[NR] = $1; m[NR] = $2 }
  END {
    med = s[int((n + 1) / 2)]; peak = 0
    for (i = 1; i <= n; i++) if (m[i] > peak) peak = m[i]
    printf "| workload | instances | median wall s | peak RSS MiB | target |\n"
    printf "|---|---|---|---|---|\n"
    printf "| W3 plan | %s | %.2f | %.0f | < 2 s, < 1024 MiB |\n", inst, med, peak / 1024
  }'
