#!/usr/bin/env python3
"""Generates a large manifest for the planning benchmark (W3).

usage: gen_manifest.py TASKS LAYERS DAYS > big.toml

TASKS tasks in LAYERS layers; every task of layer k > 0 depends on two tasks
of layer k-1, over one daily scheme of DAYS days, so the plan has
TASKS * DAYS task instances (2,000 x 365 = 730,000 by default).
"""
import datetime
import sys

tasks, layers, days = (int(a) for a in (sys.argv[1:4] if len(sys.argv) > 3 else (2000, 20, 365)))
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
for layer in range(layers):
    for i in range(per_layer):
        name = f"t{layer:02d}_{i:04d}"
        out.append(f"[tasks.{name}]")
        out.append('command = ["true"]')
        out.append(f'output = {{ dataset = "d_{name}", grain = ["id"] }}')
        out.append('expected_duration = "1m"')
        if layer > 0:
            a = f"t{layer - 1:02d}_{i:04d}"
            b = f"t{layer - 1:02d}_{(i + 1) % per_layer:04d}"
            out.append(f'depends_on = ["{a}", "{b}"]')
        out.append("")
print("\n".join(out))
