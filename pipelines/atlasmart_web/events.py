#!/usr/bin/env python3
"""One hour of raw events -> web_events without bots."""
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write  # noqa: E402

with open(os.environ["WEIR_INPUT_RAW_EVENTS"], newline="") as f:
    rows = [r for r in csv.DictReader(f) if r["is_bot"] == "0"]
write("events.csv", ["event_id", "ts", "user_id", "region", "page"],
      [{k: r[k] for k in ("event_id", "ts", "user_id", "region", "page")} for r in rows])
