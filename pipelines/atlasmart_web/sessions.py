#!/usr/bin/env python3
"""A region's day of hourly events -> sessions (a user's events with no gap
over 30 minutes). WEIR_PARTITION_REGION and WEIR_PARTITION_DAY name the
partition; WEIR_INPUT_WEB_EVENTS holds the day's hours."""
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import partitions, write  # noqa: E402

region, day = os.environ["WEIR_PARTITION_REGION"], os.environ["WEIR_PARTITION_DAY"]
events = [r for _, rows in partitions("WEIR_INPUT_WEB_EVENTS") for r in rows if r["region"] == region]
events.sort(key=lambda r: (r["user_id"], r["ts"]))
out, current = [], None
for e in events:
    ts = datetime.datetime.strptime(e["ts"], "%Y-%m-%dT%H:%M:%SZ")
    if current and current["user_id"] == e["user_id"] and ts - current["_last"] <= datetime.timedelta(minutes=30):
        current["events"] += 1
        current["_last"] = ts
        current["last_ts"] = e["ts"]
        continue
    current = {"session_id": f"{day}-{region}-{len(out) + 1:04d}", "user_id": e["user_id"], "region": region,
               "day": day, "events": 1, "first_ts": e["ts"], "last_ts": e["ts"], "_last": ts}
    out.append(current)
write("sessions.csv", ["session_id", "user_id", "region", "day", "events", "first_ts", "last_ts"],
      [{k: v for k, v in s.items() if k != "_last"} for s in out])
