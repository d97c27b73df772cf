#!/usr/bin/env python3
"""Regenerates marigold's raw readings: one small CSV per day, 2024-01-01 to
2025-12-30, deterministic (the files are committed; rerunning this rewrites
them byte for byte). Three sensors read every eight hours; every fifth reading
is flagged invalid by the sensor gateway (valid = 0) and must be dropped by
the cleaning task."""
import datetime
import os

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "raw")
os.makedirs(here, exist_ok=True)
day = datetime.date(2024, 1, 1)
n = 0
while day <= datetime.date(2025, 12, 30):
    lines = ["sensor_id,reading_at,celsius,valid"]
    for hour in (0, 8, 16):
        for sensor in ("m-01", "m-02", "m-03"):
            n += 1
            celsius = 12 + (n * 7919 % 200) / 10
            lines.append(f"{sensor},{day}T{hour:02d}:00:00Z,{celsius:.2f},{0 if n % 5 == 0 else 1}")
    with open(os.path.join(here, f"{day}.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    day += datetime.timedelta(days=1)
