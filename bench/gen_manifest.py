#!/usr/bin/env python3
"""Generates a large manifest for the planning benchmark (W3).

usage: gen_manifest.py TASKS LAYERS DAYS [ROLLUPS] > big.toml

TASKS tasks in LAYERS layers; every task of layer k > 0 depends on two tasks
of layer k-1, over one daily scheme of DAYS days, so the plan has
TASKS * DAYS task instances (2,000 x 365 = 730,000 by default). ROLLUPS
(default 0) adds that many weekly and as many monthly tasks, each reading two
tasks of the last layer: mapped links (7 or 28-31 days per instance) on top.
"""
import datetime
import sys

tasks, layers, days = (int(a) for a in (sys.argv[1:4] if len(sys.argv) > 3 else (2000, 20, 365)))
rollups = int(sys.argv[4]) if len(sys.argv) > 4 else 0
start = datetime.date(2025, 1, 1)
end = start + datetime.timedelta(days=days - 1)
per_layer = tasks // layers
out = [
    "[pipeline]",
    'name = "generated"',
    'code_version = "1"',
    'warehouse = "warehouse"',
    "",
    "[partitions.daily]",
    'kind = "daily"',
    f'start = "{start}"',
    f'end = "{end}"',
    "",
    "[pools.backfill]",
    "slots = 8",
    "",
    "[backfills.all]",
    f'from = "{start}"',
    f'to = "{end}"',
    'pool = "backfill"',
    'reason = "planning benchmark"',
    "",
]
if rollups:
    out += [
        "[partitions.weekly]",
        'kind = "weekly"',
        f'start = "{start + datetime.timedelta(days=(7 - start.weekday()) % 7)}"',
        f'end = "{end - datetime.timedelta(days=(end.weekday() + 1) % 7)}"',
        "",
        "[partitions.monthly]",
        'kind = "monthly"',
        f'start = "{start}"',
        f'end = "{end if (end + datetime.timedelta(days=1)).day == 1 else end.replace(day=1) - datetime.timedelta(days=1)}"',
        "",
    ]
for layer in range(layers):
    for i in range(per_layer):
        name = f"t{layer:02d}_{i:04d}"
        out.append(f"[tasks.{name}]")
        out.append('command = ["true"]')
        out.append('partitioned_by = "daily"')
        out.append(f'output = {{ dataset = "d_{name}", grain = ["id"] }}')
        out.append('expected_duration = "1m"')
        if layer > 0:
            a = f"t{layer - 1:02d}_{i:04d}"
            b = f"t{layer - 1:02d}_{(i + 1) % per_layer:04d}"
            out.append(f'depends_on = ["{a}", "{b}"]')
        out.append("")
last = layers - 1
for kind in ("weekly", "monthly"):
    for i in range(rollups):
        name = f"{kind}_{i:04d}"
        a = f"d_t{last:02d}_{i % per_layer:04d}"
        b = f"d_t{last:02d}_{(i + 1) % per_layer:04d}"
        out.append(f"[tasks.{name}]")
        out.append('command = ["true"]')
        out.append(f'partitioned_by = "{kind}"')
        out.append(f'inputs = ["{a}", "{b}"]')
        out.append(f'output = {{ dataset = "d_{name}", grain = ["id"] }}')
        out.append('expected_duration = "1m"')
        out.append("")
print("\n".join(out))
