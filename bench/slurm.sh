#!/usr/bin/env bash
# Per-instance overhead of the Slurm executor against `srun` and
# `sbatch --wait` of the same command in a loop, one at a time (pool slots 1),
# on the single-node Slurm of ci/slurm-up.sh.
#   bench/slurm.sh [N]     (default 30 instances)
set -euo pipefail
N=${1:-30}
cd "$(dirname "$0")/.."
WEIR=${WEIR:-$PWD/target/release/weir}
[ -x "$WEIR" ] || cargo build --release --quiet
sinfo -h >/dev/null || { echo "bench/slurm.sh: no Slurm (run ci/slurm-up.sh)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
keys=$(seq -f '"k%03g"' 1 "$N" | paste -sd, -)
cat > task.sh <<'SH'
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv"
SH
for exec in local hpc; do
  mkdir -p "$exec" && cp task.sh "$exec/"
  cat > "$exec/m.toml" <<TOML
[pipeline]
name = "bench"
code_version = "1"
warehouse = "wh"
[partitions.k]
kind = "static"
keys = [$keys]
[pools.one]
slots = 1
[executors.hpc]
kind = "slurm"
[tasks.t]
command = ["sh", "task.sh"]
output = { dataset = "out", grain = ["id"] }
pool = "one"
executor = "$exec"
TOML
done
now() { date +%s.%N; }
per() { echo "scale=1; ($2 - $1) * 1000 / $N" | bc; }
t0=$(now); for i in $(seq "$N"); do srun -Q sh -c "printf 'id\n1\n' > /dev/null"; done; t1=$(now)
srun_ms=$(per "$t0" "$t1")
printf '#!/bin/sh\nprintf "id\\n1\\n" > /dev/null\n' > job.sh
t0=$(now); for i in $(seq "$N"); do sbatch -Q --wait -o /dev/null job.sh; done; t1=$(now)
sbatch_ms=$(per "$t0" "$t1")
# The cluster's own floor: sbatch, then scontrol every 10 ms until COMPLETED.
t0=$(now)
for i in $(seq "$N"); do
  id=$(sbatch --parsable -o /dev/null job.sh)
  until scontrol show job -o "$id" | grep -q 'JobState=COMPLETED'; do sleep 0.01; done
done
t1=$(now)
poll_ms=$(per "$t0" "$t1")
t0=$(now); (cd local && "$WEIR" run m.toml >/dev/null 2>&1); t1=$(now)
local_ms=$(per "$t0" "$t1")
t0=$(now); (cd hpc && "$WEIR" run m.toml >/dev/null 2>&1); t1=$(now)
slurm_ms=$(per "$t0" "$t1")
echo "| N | srun loop | sbatch --wait loop | sbatch + 10 ms scontrol poll | weir local | weir slurm | slurm − srun | slurm − sbatch+poll |"
echo "|---|---|---|---|---|---|---|---|"
echo "| $N | $srun_ms ms | $sbatch_ms ms | $poll_ms ms | $local_ms ms | $slurm_ms ms | $(echo "$slurm_ms - $srun_ms" | bc) ms | $(echo "$slurm_ms - $poll_ms" | bc) ms |"
