//! Lists, structs and maps as compact JSON text.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use serde_json::Value;

use super::numbers::float64;
use super::value_text;

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
