//! Per-file statistics for an `add` action (PROTOCOL.md, "Per-file
//! Statistics"): `numRecords`, and per column `minValues`, `maxValues`
//! and `nullCount`, which let DuckDB, Polars and Spark skip a file a
//! filter excludes.
//!
//! They come from the Parquet footer weir reads anyway for the row count
//! and the schema, not from a pass over the values: every writer weir has
//! met (arrow-rs, pyarrow, DuckDB, Polars) writes each column chunk's
//! min, max and null count there. A bound the footer does not mark exact
//! (a truncated string), a column chunk without statistics, or a nested
//! column gets none: a reader then reads the file, which is always
//! correct. Boolean and binary columns get a null count only, as Spark's
//! and delta-rs's writers do.

use arrow_schema::{DataType, Schema, TimeUnit};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::statistics::Statistics;
use serde_json::{json, Map, Value};

/// One column's min and max so far, as comparable values.
#[derive(Clone, PartialEq, PartialOrd)]
enum Bound {
    Int(i64),
    Float(f64),
    Bytes(Vec<u8>),
    Wide(i128),
}

/// The chunk's bounds as [`Bound`]s, `None` when either is missing or
/// inexact.
fn bounds(stats: &Statistics) -> Option<(Bound, Bound)> {
    if !stats.min_is_exact() || !stats.max_is_exact() {
        return None;
    }
    Some(match stats {
        Statistics::Int32(s) => (
            Bound::Int((*s.min_opt()?).into()),
            Bound::Int((*s.max_opt()?).into()),
        ),
        Statistics::Int64(s) => (Bound::Int(*s.min_opt()?), Bound::Int(*s.max_opt()?)),
        Statistics::Float(s) => (
            Bound::Float((*s.min_opt()?).into()),
            Bound::Float((*s.max_opt()?).into()),
        ),
        Statistics::Double(s) => (Bound::Float(*s.min_opt()?), Bound::Float(*s.max_opt()?)),
        Statistics::ByteArray(s) => (
            Bound::Bytes(s.min_opt()?.data().to_vec()),
            Bound::Bytes(s.max_opt()?.data().to_vec()),
        ),
        Statistics::FixedLenByteArray(s) => (
            Bound::Wide(be_i128(s.min_opt()?.data())?),
            Bound::Wide(be_i128(s.max_opt()?.data())?),
        ),
        Statistics::Boolean(_) | Statistics::Int96(_) => return None,
    })
}

/// A big-endian two's complement integer (a decimal's fixed-length bytes).
fn be_i128(bytes: &[u8]) -> Option<i128> {
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xFF } else { 0 };
    let mut buf = [fill; 16];
    buf[16 - bytes.len()..].copy_from_slice(bytes);
    Some(i128::from_be_bytes(buf))
}

/// A bound as the protocol writes it for a column of `data_type`; `None`
/// for types without min/max. `up` rounds a timestamp up to the next
/// millisecond (a max), else down (a min): the protocol's timestamps are
/// milliseconds, and a bound must still hold every value.
fn render(bound: &Bound, data_type: &DataType, up: bool) -> Option<Value> {
    Some(match (data_type, bound) {
        (DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64, Bound::Int(n)) => {
            json!(n)
        }
        (DataType::Float32 | DataType::Float64, Bound::Float(f)) if f.is_finite() => json!(f),
        (DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View, Bound::Bytes(b)) => {
            json!(std::str::from_utf8(b).ok()?)
        }
        (DataType::Date32, Bound::Int(days)) => {
            let epoch = jiff::civil::date(1970, 1, 1);
            json!(epoch
                .checked_add(jiff::Span::new().days(*days))
                .ok()?
                .to_string())
        }
        (DataType::Timestamp(unit, Some(_)), Bound::Int(n)) => {
            let per_ms: i64 = match unit {
                TimeUnit::Second => return render_ms(n.checked_mul(1000)?),
                TimeUnit::Millisecond => 1,
                TimeUnit::Microsecond => 1_000,
                TimeUnit::Nanosecond => 1_000_000,
            };
            let ms = if up {
                n.div_euclid(per_ms) + i64::from(n.rem_euclid(per_ms) != 0)
            } else {
                n.div_euclid(per_ms)
            };
            return render_ms(ms);
        }
        (DataType::Decimal128(_, scale), Bound::Int(n)) => decimal(i128::from(*n), *scale)?,
        (DataType::Decimal128(_, scale), Bound::Wide(n)) => decimal(*n, *scale)?,
        _ => return None,
    })
}

fn render_ms(ms: i64) -> Option<Value> {
    let t = jiff::Timestamp::from_millisecond(ms).ok()?;
    Some(json!(t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()))
}

/// A decimal's unscaled value as a JSON number with `scale` digits.
fn decimal(unscaled: i128, scale: i8) -> Option<Value> {
    let text = if scale <= 0 {
        unscaled.to_string()
    } else {
        let scale = usize::try_from(scale).ok()?;
        let digits = format!("{:0>width$}", unscaled.unsigned_abs(), width = scale + 1);
        let (int, frac) = digits.split_at(digits.len() - scale);
        format!("{}{int}.{frac}", if unscaled < 0 { "-" } else { "" })
    };
    serde_json::from_str::<serde_json::Number>(&text)
        .ok()
        .map(Value::Number)
}

/// The `stats` of a file whose footer is `meta` and Arrow schema `arrow`.
pub(super) fn file_stats(meta: &ParquetMetaData, arrow: &Schema, rows: u64) -> Value {
    let (mut mins, mut maxs, mut nulls) = (Map::new(), Map::new(), Map::new());
    let schema = meta.file_metadata().schema_descr();
    for (i, column) in schema.columns().iter().enumerate() {
        let path = column.path().parts();
        let [name] = path else {
            continue;
        };
        let Ok(field) = arrow.field_with_name(name) else {
            continue;
        };
        let chunks: Vec<Option<&Statistics>> = meta
            .row_groups()
            .iter()
            .map(|rg| rg.column(i).statistics())
            .collect();
        let null_count: Option<u64> = chunks
            .iter()
            .map(|s| s.and_then(Statistics::null_count_opt))
            .sum();
        if let Some(n) = null_count {
            nulls.insert(name.clone(), json!(n));
        }
        let mut range: Option<(Bound, Bound)> = None;
        let mut whole = true;
        for chunk in &chunks {
            // A chunk of nulls only has no bounds and needs none.
            let all_null = chunk
                .and_then(Statistics::null_count_opt)
                .is_some_and(|n| n > 0)
                && chunk.is_some_and(|s| s.min_bytes_opt().is_none());
            if all_null {
                continue;
            }
            match chunk.and_then(bounds) {
                None => whole = false,
                Some((lo, hi)) => {
                    range = Some(match range {
                        None => (lo, hi),
                        Some((a, b)) => (if lo < a { lo } else { a }, if hi > b { hi } else { b }),
                    });
                }
            }
        }
        if let (true, Some((lo, hi))) = (whole, range) {
            let (lo, hi) = (
                render(&lo, field.data_type(), false),
                render(&hi, field.data_type(), true),
            );
            if let (Some(lo), Some(hi)) = (lo, hi) {
                mins.insert(name.clone(), lo);
                maxs.insert(name.clone(), hi);
            }
        }
    }
    json!({"numRecords": rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_render_as_the_protocol_writes_them() {
        let ts = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        // 1 ms and 1 µs past the epoch: a min rounds down, a max up.
        assert_eq!(
            render(&Bound::Int(1_001), &ts, false),
            Some(json!("1970-01-01T00:00:00.001Z"))
        );
        assert_eq!(
            render(&Bound::Int(1_001), &ts, true),
            Some(json!("1970-01-01T00:00:00.002Z"))
        );
        assert_eq!(
            render(&Bound::Int(19_723), &DataType::Date32, false),
            Some(json!("2024-01-01"))
        );
        let dec = DataType::Decimal128(12, 2);
        assert_eq!(
            render(&Bound::Int(12_345), &dec, false),
            Some(json!(123.45))
        );
        assert_eq!(render(&Bound::Int(-5), &dec, false), Some(json!(-0.05)));
        assert_eq!(
            render(&Bound::Wide(be_i128(&[0xFF, 0x85]).unwrap()), &dec, false),
            Some(json!(-1.23))
        );
        assert_eq!(render(&Bound::Int(1), &DataType::Boolean, false), None);
        assert_eq!(
            render(&Bound::Bytes(b"\xFF".to_vec()), &DataType::Utf8, false),
            None
        );
        assert_eq!(
            render(&Bound::Float(f64::NAN), &DataType::Float64, false),
            None
        );
    }
}
