"""transform: paid order lines with GMV and cost at sale, in integer cents.

--legacy-cost reproduces release 2026.09.1's bug: it costed lines at the
SKU's standard cost instead of the unit cost recorded at sale.
ATLASMART_INJECT_PARSER_FAILURE=1 makes the first attempt for 2026-09-21 fail
like a flaky parser, exiting 75 (transient), to show weir's retry trace.
"""
import csv
import os
import sys

if (
    os.environ.get("ATLASMART_INJECT_PARSER_FAILURE") == "1"
    and os.environ["WEIR_PARTITION"] == "2026-09-21"
    and os.environ["WEIR_ATTEMPT"] == "1"
):
    print("Traceback (most recent call last):", file=sys.stderr)
    print('  File "transform.py", in parse_line', file=sys.stderr)
    print("ParserError: synthetic parser failure (ATLASMART_INJECT_PARSER_FAILURE)", file=sys.stderr)
    sys.exit(75)

cost_column = "standard_cost_cents" if "--legacy-cost" in sys.argv else "unit_cost_cents"
stg_dir = os.environ["WEIR_INPUT_STG_ORDER_LINES"]
rows = []
for name in sorted(os.listdir(stg_dir)):
    if name.endswith(".csv"):
        with open(os.path.join(stg_dir, name), newline="") as f:
            rows.extend(r for r in csv.DictReader(f) if r["status"] == "paid")

out = os.path.join(os.environ["WEIR_OUTPUT_DIR"], "paid_order_lines.csv")
with open(out, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["order_id", "line_no", "status", "sku", "quantity", "gmv_cents", "cost_cents"])
    for r in rows:
        qty = int(r["quantity"])
        w.writerow([r["order_id"], r["line_no"], r["status"], r["sku"], qty,
                    qty * int(r["unit_price_cents"]), qty * int(r[cost_column])])
