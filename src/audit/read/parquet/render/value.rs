//! The canonical text of one value: the writer each Arrow type has, and
//! lists, structs and maps as compact JSON text (whose members are values
//! again).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Decimal128Type, Decimal256Type, Decimal32Type, Decimal64Type, Float16Type, Float32Type,
    Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type,
    UInt8Type,
};
use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, TimeUnit};
use serde_json::Value;

use super::numbers::{decimal, float16, float32, float64, integer};
use super::time::time_writer;
use super::views::bytes_writer;
use super::writer::{UseWriter, SCRATCH};

/// Writes the value at one index (for nested values, see [`json`]).
struct One<'a> {
    at: usize,
    out: &'a mut Vec<u8>,
}

impl UseWriter for One<'_> {
    fn with_sized<S, P>(self, size: S, mut put: P) -> Result<(), String>
    where
        S: Fn(usize) -> usize,
        P: FnMut(usize, &mut [u8]) -> Result<usize, String>,
    {
        let mut buf = vec![0; size(self.at) + SCRATCH];
        let length = put(self.at, &mut buf)?;
        self.out
            .extend_from_slice(buf.get(..length).unwrap_or_default());
        Ok(())
    }

    fn with<W>(self, mut write: W) -> Result<(), String>
    where
        W: FnMut(usize, &mut Vec<u8>) -> Result<(), String>,
    {
        write(self.at, self.out)
    }
}

/// The canonical text of the non-null value at `at` of `array`.
pub(super) fn value_text(array: &dyn Array, at: usize) -> Result<Vec<u8>, String> {
    let mut text = Vec::new();
    with_writer(array, One { at, out: &mut text })?;
    Ok(text)
}

/// Hands `using` the writer of an array's values; `Err` names a type
/// without canonical text.
pub(super) fn with_writer<U: UseWriter>(array: &dyn Array, using: U) -> Result<(), String> {
    let data_type = array.data_type();
    match data_type {
        DataType::Null => using.with(|_, _| Ok(())),
        DataType::Boolean => {
            let array = array.as_boolean();
            using.with(move |row, out| {
                let word: &[u8] = if array.value(row) { b"true" } else { b"false" };
                out.extend_from_slice(word);
                Ok(())
            })
        }
        DataType::Int8 => integer::<Int8Type, U>(array, using),
        DataType::Int16 => integer::<Int16Type, U>(array, using),
        DataType::Int32 => integer::<Int32Type, U>(array, using),
        DataType::Int64 => integer::<Int64Type, U>(array, using),
        DataType::UInt8 => integer::<UInt8Type, U>(array, using),
        DataType::UInt16 => integer::<UInt16Type, U>(array, using),
        DataType::UInt32 => integer::<UInt32Type, U>(array, using),
        DataType::UInt64 => integer::<UInt64Type, U>(array, using),
        DataType::Float16 => {
            let array = array.as_primitive::<Float16Type>();
            using.with(move |row, out| {
                float16(array.value(row), out);
                Ok(())
            })
        }
        DataType::Float32 => {
            let array = array.as_primitive::<Float32Type>();
            using.with(move |row, out| {
                float32(array.value(row), out);
                Ok(())
            })
        }
        DataType::Float64 => {
            let array = array.as_primitive::<Float64Type>();
            using.with(move |row, out| {
                float64(array.value(row), out);
                Ok(())
            })
        }
        DataType::Decimal32(..) => decimal::<Decimal32Type, U>(array, using),
        DataType::Decimal64(..) => decimal::<Decimal64Type, U>(array, using),
        DataType::Decimal128(..) => decimal::<Decimal128Type, U>(array, using),
        DataType::Decimal256(..) => decimal::<Decimal256Type, U>(array, using),
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => bytes_writer(array, using),
        DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(..)
        | DataType::Time32(_)
        | DataType::Time64(_) => time_writer(array, using),
        DataType::List(_)
        | DataType::LargeList(_)
        | DataType::FixedSizeList(..)
        | DataType::Struct(_)
        | DataType::Map(..) => {
            supported(data_type, false)?;
            using.with(move |row, out| {
                let value = json(array, row)?;
                write_json(&value, out)
            })
        }
        other => Err(other.to_string()),
    }
}

/// Checks that a type has canonical text; dictionaries only at the top
/// level (`top`). `Err` is the first type that has none.
pub(in crate::audit::read::parquet) fn supported(
    data_type: &DataType,
    top: bool,
) -> Result<(), String> {
    match data_type {
        DataType::Null
        | DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Float16
        | DataType::Float32
        | DataType::Float64
        | DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..)
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_)
        | DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(..)
        | DataType::Time32(TimeUnit::Second | TimeUnit::Millisecond)
        | DataType::Time64(TimeUnit::Microsecond | TimeUnit::Nanosecond) => Ok(()),
        DataType::List(field) | DataType::LargeList(field) | DataType::FixedSizeList(field, _) => {
            supported(field.data_type(), false)
        }
        DataType::Struct(fields) => fields
            .iter()
            .try_for_each(|field| supported(field.data_type(), false)),
        DataType::Map(entries, _) => supported(entries.data_type(), false),
        DataType::Dictionary(_, values) if top => supported(values, false),
        other => Err(other.to_string()),
    }
}

/// Writes a nested value as compact JSON, as serde_json does except for
/// floats, which are written as at the top level (`1e21`, where serde_json
/// writes `1e+21`), so that a double has one text wherever it is.
pub(super) fn write_json(value: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    match value {
        Value::Number(number) if number.is_f64() => {
            float64(number.as_f64().unwrap_or(f64::NAN), out);
        }
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_json(item, out)?;
            }
            out.push(b']');
        }
        Value::Object(object) => {
            let mut entries: Vec<(&String, &Value)> = object.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).map_err(|e| e.to_string())?;
                out.push(b':');
                write_json(item, out)?;
            }
            out.push(b'}');
        }
        other => serde_json::to_writer(&mut *out, other).map_err(|e| e.to_string())?,
    }
    Ok(())
}

/// A nested value as JSON, for the compact text of lists, structs and maps.
pub(super) fn json(array: &dyn Array, row: usize) -> Result<Value, String> {
    // `is_null` reads the validity buffer, which Arrow's null type lacks.
    if array.is_null(row) || *array.data_type() == DataType::Null {
        return Ok(Value::Null);
    }
    let items = |values: ArrayRef| -> Result<Value, String> {
        (0..values.len())
            .map(|item| json(values.as_ref(), item))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    };
    Ok(match array.data_type() {
        DataType::List(_) => items(array.as_list::<i32>().value(row))?,
        DataType::LargeList(_) => items(array.as_list::<i64>().value(row))?,
        DataType::FixedSizeList(..) => items(array.as_fixed_size_list().value(row))?,
        DataType::Struct(fields) => {
            let array = array.as_struct();
            let mut object = serde_json::Map::new();
            for (field, column) in fields.iter().zip(array.columns()) {
                object.insert(field.name().clone(), json(column.as_ref(), row)?);
            }
            Value::Object(object)
        }
        DataType::Map(..) => {
            let entries = array.as_map().value(row);
            let mut object = serde_json::Map::new();
            for entry in 0..entries.len() {
                let key = match json(entries.column(0).as_ref(), entry)? {
                    Value::String(key) => key,
                    other => other.to_string(),
                };
                object.insert(key, json(entries.column(1).as_ref(), entry)?);
            }
            Value::Object(object)
        }
        DataType::Boolean => Value::Bool(array.as_boolean().value(row)),
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            let text = value_text(array, row)?;
            serde_json::from_slice(&text).unwrap_or(Value::Null)
        }
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_)
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(..)
        | DataType::Time32(_)
        | DataType::Time64(_) => {
            let text = value_text(array, row)?;
            Value::String(String::from_utf8_lossy(&text).into_owned())
        }
        // Integers and decimals: JSON numbers, read back as a nested JSON
        // Lines number is.
        _ => {
            let text = value_text(array, row)?;
            serde_json::from_slice(&text).map_err(|e| e.to_string())?
        }
    })
}
