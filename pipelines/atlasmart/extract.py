"""extract: the committed state of each order line from the raw change log.

The raw file is an append-only change log; each change carries the source's
sequence number. Only changes up to the source's committed sequence (the
dataset's watermark, pinned by weir in the input snapshot and passed as
WEIR_WATERMARK_RAW_ORDERS: 206 for the bundled data) are part of the
snapshot: later ones are still in flight at the source.
"""
import csv
import os

committed = int(os.environ["WEIR_WATERMARK_RAW_ORDERS"])
latest = {}
with open(os.environ["WEIR_INPUT_RAW_ORDERS"], newline="") as f:
    for change in csv.DictReader(f):
        if int(change["seq"]) > committed:
            continue
        key = (change["order_id"], int(change["line_no"]))
        if key not in latest or int(change["seq"]) > int(latest[key]["seq"]):
            latest[key] = change

out = os.path.join(os.environ["WEIR_OUTPUT_DIR"], "stg_order_lines.csv")
with open(out, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(next(iter(latest.values())).keys()) + ["committed_seq"])
    w.writeheader()
    for key in sorted(latest):
        w.writerow({**latest[key], "committed_seq": committed})
