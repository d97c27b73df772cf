#!/usr/bin/env bash
# Where one W1 instance's time goes: weir vs xargs on disk and on tmpfs (where
# fsync is free), event-log phases, strace syscall counts, every fsync of an
# attempt in order with its latency, and the unit costs of fsync and of
# spawning the task on this filesystem. See BENCHMARKS.md.
#
# usage: bench/profile.sh [N] [--weir BIN]    (N partitions, default 300)
set -euo pipefail
cd "$(dirname "$0")/.."
n=300 weir=""
while (($#)); do
  case "$1" in
    --weir) weir=${2:?--weir needs a path}; shift 2 ;;
    *) n=$1; shift ;;
  esac
done
command -v strace >/dev/null 2>&1 || { echo "profile: needs strace (apt-get install strace)" >&2; exit 2; }
if [[ -z "$weir" ]]; then
  cargo build --release --quiet --bin weir
  weir=${CARGO_TARGET_DIR:-target}/release/weir
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-profile.XXXXXX")
shm=""
if [[ -d /dev/shm && -w /dev/shm ]]; then
  shm=$(mktemp -d /dev/shm/weir-profile.XXXXXX)
fi
trap 'rm -rf "$work" ${shm:+"$shm"}' EXIT
python3 -B bench/profile.py --weir "$weir" --work "$work" --n "$n" ${shm:+--tmpfs "$shm"}
