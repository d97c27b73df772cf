#!/usr/bin/env python3
"""What an object store's latency costs weir, per instance.

One pipeline (`up`, and `down` reading it, over N static partitions, one 2-slot
pool) runs three ways with the same binary: on a local warehouse; on moto
(S3) behind a proxy that adds LATENCY ms before each request, for each latency
asked; and each S3 run again with everything current. Requests are counted
from moto's own request log (every request it answered, by method), so the
proxy's count is only a cross-check. Reported: requests per published and per
current instance, wall time, and the time per instance that the store adds
over the local warehouse, with the machine's load average.

Standard library only; moto comes from ci/moto-up.sh (bench/s3.sh starts it).
"""

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

MANIFEST = """[pipeline]
name = "s3bench"
code_version = "1"
warehouse = "wh"

[partitions.shard]
kind = "static"
keys = [{keys}]

[pools.work]
slots = 2

[tasks.up]
command = ["sh", "up.sh"]
output = {{ dataset = "up", format = "csv", grain = ["id"] }}
pool = "work"

[tasks.down]
command = ["sh", "down.sh"]
inputs = ["up"]
output = {{ dataset = "down", format = "csv", grain = ["id"] }}
pool = "work"
"""

UP = 'printf "id,shard\\n1,%s\\n2,%s\\n" "$WEIR_PARTITION" "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/up.csv"\n'
DOWN = 'cat "$WEIR_INPUT_UP"/*.csv > "$WEIR_OUTPUT_DIR/down.csv"\n'

REQUEST = re.compile(r'"(GET|PUT|POST|HEAD|DELETE) ([^" ]*)[^"]*" (\d{3})')


class LatencyProxy:
    """A TCP proxy that sleeps `delay` seconds before forwarding each request:
    the first client bytes after the server last answered on that connection
    (or after it opened), which is one request per round trip."""

    def __init__(self, upstream_port, delay):
        self.upstream_port = upstream_port
        self.delay = delay
        self.requests = 0
        self.port = None
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._serve, args=(ready,), daemon=True).start()
        ready.wait()

    def _serve(self, ready):
        asyncio.set_event_loop(self.loop)

        async def start():
            server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            await server.serve_forever()

        self.loop.run_until_complete(start())

    async def _handle(self, client_r, client_w):
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            client_w.close()
            return
        state = {"answered": True}

        async def upstream():
            while data := await client_r.read(65536):
                if state["answered"]:
                    state["answered"] = False
                    self.requests += 1
                    if self.delay:
                        await asyncio.sleep(self.delay)
                server_w.write(data)
                await server_w.drain()
            server_w.close()

        async def downstream():
            while data := await server_r.read(65536):
                state["answered"] = True
                client_w.write(data)
                await client_w.drain()
            client_w.close()

        await asyncio.gather(upstream(), downstream(), return_exceptions=True)


def moto_requests(log_path, start):
    """Requests moto logged after byte `start` of its log, by method."""
    with open(log_path, "rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    counts = {}
    for method, path, _status in REQUEST.findall(text):
        # A listing is a GET of the bucket with a query (list-type, uploads).
        if method == "GET" and ("list-type=" in path or "?uploads" in path or "&uploads" in path):
            method = "LIST"
        counts[method] = counts.get(method, 0) + 1
    return counts


def run(weir, workdir, args, env):
    started = time.monotonic()
    out = subprocess.run(
        [weir, *args], cwd=workdir, env=env, capture_output=True, text=True
    )
    elapsed = time.monotonic() - started
    if out.returncode != 0:
        sys.exit(f"weir {' '.join(args)} exited {out.returncode}:\n{out.stdout}\n{out.stderr}")
    return elapsed, out.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    ap.add_argument("--moto-port", type=int, required=True)
    ap.add_argument("--moto-log", required=True)
    ap.add_argument("--partitions", type=int, default=40)
    ap.add_argument("--latency", default="0,20", help="ms per request, comma-separated")
    ap.add_argument("--json")
    opts = ap.parse_args()

    work = tempfile.mkdtemp(prefix="weir-s3bench-")
    keys = ", ".join(f'"s{i:04}"' for i in range(opts.partitions))
    with open(os.path.join(work, "m.toml"), "w") as f:
        f.write(MANIFEST.format(keys=keys))
    for name, body in (("up.sh", UP), ("down.sh", DOWN)):
        with open(os.path.join(work, name), "w") as f:
            f.write(body)
    instances = 2 * opts.partitions
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT")}

    rows = []
    local, _ = run(opts.weir, work, ["run", "m.toml"], base_env)
    rows.append({"store": "local disk", "latency_ms": None, "published_s": local})

    for latency in [int(x) for x in opts.latency.split(",") if x]:
        proxy = LatencyProxy(opts.moto_port, latency / 1000)
        env = dict(base_env)
        env.update(
            AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}",
            AWS_ALLOW_HTTP="true",
            AWS_REGION="us-east-1",
            AWS_ACCESS_KEY_ID="weir-local",
            AWS_SECRET_ACCESS_KEY="weir-local",
        )
        prefix = f"s3://weir/bench-{int(time.time() * 1000)}-{latency}"
        row = {"store": "moto", "latency_ms": latency}
        for phase in ("published", "current"):
            mark = os.path.getsize(opts.moto_log)
            before = proxy.requests
            elapsed, _ = run(opts.weir, work, ["--warehouse", prefix, "run", "m.toml"], env)
            time.sleep(0.3)  # moto writes its log line after answering
            counts = moto_requests(opts.moto_log, mark)
            row[f"{phase}_s"] = elapsed
            row[f"{phase}_requests"] = counts
            row[f"{phase}_per_instance"] = sum(counts.values()) / instances
            row[f"{phase}_proxy_count"] = proxy.requests - before
        rows.append(row)

    load = os.getloadavg()
    print(f"{instances} instances ({opts.partitions} partitions x 2 tasks), one 2-slot pool; "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n")
    print("| store | latency | first run | req / published instance | again (current) | req / current instance | added per instance vs disk |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if r["latency_ms"] is None:
            print(f"| local disk | - | {r['published_s']:.2f} s | - | - | - | - |")
            continue
        added = (r["published_s"] - local) / instances * 1000
        methods = ", ".join(f"{m} {n}" for m, n in sorted(r["published_requests"].items()))
        print(
            f"| moto | {r['latency_ms']} ms | {r['published_s']:.2f} s | "
            f"{r['published_per_instance']:.1f} ({methods}) | {r['current_s']:.2f} s | "
            f"{r['current_per_instance']:.1f} | {added:.0f} ms |"
        )
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"instances": instances, "load": load, "rows": rows}, f, indent=1)
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
