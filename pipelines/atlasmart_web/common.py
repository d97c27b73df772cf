"""Reading an input mapped to several partitions: a directory holding one
subdirectory per upstream partition and _keys.json, the keys in order."""
import csv
import json
import os
import urllib.parse


def partitions(var):
    """(key, rows) of every partition of input variable `var`, in order."""
    root = os.environ[var]
    with open(os.path.join(root, "_keys.json")) as f:
        keys = json.load(f)
    for key in keys:
        # Subdirectories are named by the key, percent-encoded.
        sub = os.path.join(root, urllib.parse.quote(key, safe="-_."))
        rows = []
        for name in sorted(os.listdir(sub)):
            with open(os.path.join(sub, name), newline="") as f:
                rows.extend(csv.DictReader(f))
        yield key, rows


def write(name, columns, rows):
    with open(os.path.join(os.environ["WEIR_OUTPUT_DIR"], name), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
