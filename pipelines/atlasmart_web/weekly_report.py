#!/usr/bin/env python3
"""A week of every region's sessions -> one row per region."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import partitions, write  # noqa: E402

report = {r: {"region": r, "week": os.environ["WEIR_PARTITION"], "days": set(), "sessions": 0, "events": 0, "users": set()}
          for r in ("eu", "us", "apac")}
for key, rows in partitions("WEIR_INPUT_SESSIONS"):
    region, day = key.split("|")
    report[region]["days"].add(day)
    for s in rows:
        report[region]["sessions"] += 1
        report[region]["events"] += int(s["events"])
        report[region]["users"].add(s["user_id"])
write("weekly_report.csv", ["region", "week", "days", "sessions", "events", "users"],
      [dict(r, days=len(r["days"]), users=len(r["users"])) for r in report.values()])
