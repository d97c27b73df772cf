#!/usr/bin/env python3
"""Generates the W4 candidate: a CSV of ROWS rows of about 100 bytes each
(10,000,000 rows is about 1 GB), deterministic, standard library only.

usage: gen_csv.py ROWS OUT.csv

Columns: id (the grain: 1..ROWS), ref (16 hex digits, unique: a bijection of
id), customer_id, amount_cents (never empty), status, created_at, note.
"""
import sys

CHUNK = 50_000
MASK = (1 << 64) - 1
# An odd multiplier makes id -> id * K mod 2^64 a bijection, so refs are unique.
K = 0x9E3779B97F4A7C15
STATUSES = ("paid", "refunded", "pending", "cancelled")
NOTE = "synthetic row of the weir audit bench"  # pads rows to ~100 bytes


def main() -> None:
    rows, path = int(sys.argv[1]), sys.argv[2]
    with open(path, "w", encoding="ascii", newline="") as out:
        out.write("id,ref,customer_id,amount_cents,status,created_at,note\n")
        for start in range(1, rows + 1, CHUNK):
            stop = min(start + CHUNK, rows + 1)
            out.write(
                "".join(
                    f"{i},{(i * K) & MASK:016x},c{i % 99991:06d},{(i * 7919) % 1000000},"
                    f"{STATUSES[i & 3]},2026-09-{1 + i % 30:02d}T{i % 24:02d}:{i % 60:02d}:{(i >> 6) % 60:02d}Z,"
                    f"{NOTE}\n"
                    for i in range(start, stop)
                )
            )


if __name__ == "__main__":
    main()
