"""load: fact_sales, one row per paid order line, stamped with the code_version
that built it (WEIR_CODE_VERSION), so consumers can tell old logic from new."""
import csv
import os

src = os.environ["WEIR_INPUT_PAID_ORDER_LINES"]
out = os.path.join(os.environ["WEIR_OUTPUT_DIR"], "fact_sales.csv")
with open(out, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["order_id", "line_no", "order_date", "quantity", "gmv_cents", "cost_cents",
                "profit_cents", "code_version"])
    for name in sorted(os.listdir(src)):
        if not name.endswith(".csv"):
            continue
        with open(os.path.join(src, name), newline="") as f_in:
            for r in csv.DictReader(f_in):
                gmv, cost = int(r["gmv_cents"]), int(r["cost_cents"])
                w.writerow([r["order_id"], r["line_no"], os.environ["WEIR_PARTITION"], r["quantity"],
                            gmv, cost, gmv - cost, os.environ["WEIR_CODE_VERSION"]])
