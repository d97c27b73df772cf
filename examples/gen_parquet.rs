//! Generates the bench's Parquet candidate (W6): the rows of
//! `bench/gen_csv.py`, typed (integers as INT64, `created_at` as a UTC
//! timestamp), snappy-compressed, in row groups of 1,048,576 rows. Its
//! canonical digest equals the CSV's, which the bench checks.
//!
//! usage: cargo run --release --example gen_parquet -- ROWS OUT.parquet

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampSecondArray};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

const CHUNK: u64 = 65_536;
const K: u64 = 0x9E37_79B9_7F4A_7C15;
const STATUSES: [&str; 4] = ["paid", "refunded", "pending", "cancelled"];
const NOTE: &str = "synthetic row of the weir audit bench";

fn batch(start: u64, stop: u64) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let ids: Vec<u64> = (start..stop).collect();
    let created = |i: u64| -> i64 {
        // 2026-09-01T00:00:00Z plus the CSV's day, hour, minute and second.
        let base = 1_788_220_800_i64;
        let (day, hour, minute, second) = (i % 30, i % 24, i % 60, (i >> 6) % 60);
        base + i64::try_from(day * 86_400 + hour * 3600 + minute * 60 + second).unwrap_or(0)
    };
    let int = |f: &dyn Fn(u64) -> u64| -> ArrayRef {
        Arc::new(Int64Array::from(
            ids.iter()
                .map(|&i| i64::try_from(f(i)).unwrap_or(i64::MAX))
                .collect::<Vec<_>>(),
        ))
    };
    let text = |f: &dyn Fn(u64) -> String| -> ArrayRef {
        Arc::new(StringArray::from(
            ids.iter().map(|&i| f(i)).collect::<Vec<_>>(),
        ))
    };
    RecordBatch::try_from_iter(vec![
        ("id", int(&|i| i)),
        ("ref", text(&|i| format!("{:016x}", i.wrapping_mul(K)))),
        ("customer_id", text(&|i| format!("c{:06}", i % 99_991))),
        ("amount_cents", int(&|i| (i * 7919) % 1_000_000)),
        ("status", text(&|i| STATUSES[(i & 3) as usize].to_owned())),
        (
            "created_at",
            Arc::new(
                TimestampSecondArray::from(ids.iter().map(|&i| created(i)).collect::<Vec<_>>())
                    .with_timezone("UTC"),
            ) as ArrayRef,
        ),
        ("note", text(&|_| NOTE.to_owned())),
    ])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(rows), Some(path)) = (args.next(), args.next()) else {
        return Err("usage: gen_parquet ROWS OUT.parquet".into());
    };
    let rows: u64 = rows.parse()?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(1 << 20))
        .build();
    let file = std::fs::File::create(&path)?;
    let mut writer = ArrowWriter::try_new(file, batch(1, 1)?.schema(), Some(props))?;
    let mut start = 1;
    while start <= rows {
        let stop = (start + CHUNK).min(rows + 1);
        writer.write(&batch(start, stop)?)?;
        start = stop;
    }
    writer.close()?;
    Ok(())
}
