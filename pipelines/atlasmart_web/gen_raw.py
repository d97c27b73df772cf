#!/usr/bin/env python3
"""Regenerates atlasmart_web's raw events: one small CSV per Paris hour from
2026-09-14T00 to 2026-09-20T23, deterministic (the files are committed;
rerunning this rewrites them byte for byte). Every 13th event is a bot
(is_bot = 1), which the events task drops."""
import datetime
import os

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "raw")
os.makedirs(here, exist_ok=True)
# September: Paris is UTC+2 all week, so a local hour is a UTC hour shifted.
start = datetime.datetime(2026, 9, 14, 0, 0)
regions = ["eu", "us", "apac"]
n = 0
for h in range(7 * 24):
    local = start + datetime.timedelta(hours=h)
    lines = ["event_id,ts,user_id,region,page,is_bot"]
    for i in range(4 + (h * 7) % 5):
        n += 1
        user = f"u{(n * 37) % 7:02d}"
        region = regions[int(user[1:]) % 3]
        ts = (local - datetime.timedelta(hours=2) + datetime.timedelta(minutes=(i * 11 + h) % 60)).strftime("%Y-%m-%dT%H:%M:00Z")
        page = ["/", "/search", "/product", "/cart"][n % 4]
        lines.append(f"e{n:05d},{ts},{user},{region},{page},{1 if n % 13 == 0 else 0}")
    with open(os.path.join(here, f"events_{local:%Y-%m-%dT%H}.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
