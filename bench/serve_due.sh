#!/usr/bin/env bash
# `weir serve` with many instances due at one instant against `weir run` of
# the same instances (bench/serve_due.py): one task over 1,000 static keys
# on a minutely scheme (one lane), and 100 tasks x 10 keys (100 lanes), all
# in one pool of 2 slots; period end -> last PUBLISHED, CPU, the most
# commands running at once.
#
# usage: bench/serve_due.sh [--quick] [--runs N] [--shape one|many|both]
#                           [--size one=1000] [--size many=100x10] [--weir BIN]
#   --quick   20 and 5x4 instances, 1 run: a smoke test (seconds once built)
set -euo pipefail
cd "$(dirname "$0")/.."
weir="" args=()
while (($#)); do
  case "$1" in
    --weir) weir=${2:?--weir needs a path}; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [[ -z "$weir" ]]; then
  cargo build --release --quiet --bin weir
  weir=${CARGO_TARGET_DIR:-target}/release/weir
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-serve-due.XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 -B bench/serve_due.py --weir "$weir" --work "$work" "${args[@]}"
