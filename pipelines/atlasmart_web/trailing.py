#!/usr/bin/env python3
"""A region's last seven days of sessions (a window) -> active users."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import partitions, write  # noqa: E402

region = os.environ["WEIR_PARTITION_REGION"]
keys, users, sessions = [], set(), 0
for key, rows in partitions("WEIR_INPUT_SESSIONS"):
    keys.append(key.split("|")[1])
    sessions += len(rows)
    users.update(s["user_id"] for s in rows)
write("trailing_7d.csv", ["region", "day", "from", "sessions", "active_users"],
      [{"region": region, "day": os.environ["WEIR_PARTITION_TRAILING_DAY"], "from": keys[0],
        "sessions": sessions, "active_users": len(users)}])
