#!/usr/bin/env bash
# What S3's latency costs weir per instance: the same two-task
# pipeline on a local warehouse and on moto behind a proxy adding 0 and 20 ms
# per request; requests counted from moto's log. See bench/s3_bench.py.
#
# usage: bench/s3.sh [--weir BIN] [--profile PROFILE] [--partitions N] [--latency 0,20] [--json FILE]
#
# Starts its own moto (ci/moto-up.sh, port 5697) and stops it on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
weir="" profile=release args=()
while (($#)); do
  case "$1" in
    --weir) weir=${2:?}; shift 2 ;;
    --profile) profile=${2:?}; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [[ -z "$weir" ]]; then
  cargo build --quiet --profile "$profile" --bin weir
  dir=$profile; [[ "$profile" == dev ]] && dir=debug
  weir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/$dir/weir"
fi
export WEIR_MOTO_STATE=${WEIR_MOTO_STATE:-/tmp/weir-s3bench-moto} WEIR_MOTO_PORT=${WEIR_MOTO_PORT:-5697}
trap 'ci/moto-up.sh down' EXIT
ci/moto-up.sh >/dev/null
weir=$(realpath "$weir")
python3 bench/s3_bench.py --weir "$weir" --moto-port "$WEIR_MOTO_PORT" \
  --moto-log "$WEIR_MOTO_STATE/moto.log" "${args[@]}"
