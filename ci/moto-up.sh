#!/usr/bin/env bash
# moto's standalone S3 server for the S3 backend's tests.
#   ci/moto-up.sh        install moto[server] if missing, start it on loopback, wait until it answers,
#                        create the bucket `weir`, print `export WEIR_S3_TEST_ENDPOINT=...` and the
#                        AWS_* settings of the server for the caller to eval
#   ci/moto-up.sh down   stop the server this script started
# moto honours S3's If-None-Match: * and If-Match, which the store's protocol needs.
set -euo pipefail
STATE=${WEIR_MOTO_STATE:-/tmp/weir-moto}
PORT=${WEIR_MOTO_PORT:-5599}
VERSION=5.2.5

if [ "${1:-}" = down ]; then
  if [ -f "$STATE/moto.pid" ]; then
    pid=$(cat "$STATE/moto.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$STATE/moto.pid"
  fi
  exit 0
fi

installed=$(python3 -c 'import moto; print(moto.__version__)' 2>/dev/null || true)
if [ "$installed" != "$VERSION" ] || ! python3 -c 'import moto.server' 2>/dev/null; then
  python3 -m pip install --quiet "moto[server]==$VERSION" >&2
fi
mkdir -p "$STATE"
# As a module of the python3 that has it, not through a console script that
# a fresh pip install may have left off PATH (pyenv shims, ~/.local/bin).
python3 -m moto.server -H 127.0.0.1 -p "$PORT" >"$STATE/moto.log" 2>&1 &
echo $! >"$STATE/moto.pid"
for _ in $(seq 100); do
  if python3 - "$PORT" <<'PY' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/", timeout=1)
PY
  then
    # A bucket `weir` to point a warehouse at (moto takes an unsigned
    # CreateBucket; an existing one is fine).
    python3 - "$PORT" <<'PY' >&2
import sys, urllib.request
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/weir", method="PUT")
urllib.request.urlopen(req, timeout=5)
PY
    echo "export WEIR_S3_TEST_ENDPOINT=http://127.0.0.1:$PORT"
    # What any S3 client (weir included) reads: moto takes any credentials.
    echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT AWS_ALLOW_HTTP=true AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=weir-local AWS_SECRET_ACCESS_KEY=weir-local"
    exit 0
  fi
  sleep 0.1
done
echo "moto_server did not answer on port $PORT; its log:" >&2
cat "$STATE/moto.log" >&2
exit 1
