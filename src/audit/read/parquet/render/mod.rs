//! The hand-tuned renderers: each Arrow value written as its canonical
//! text (see the parent module's list), straight into a batch's bytes.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Decimal128Type, Decimal256Type, Decimal32Type, Decimal64Type, Float16Type, Float32Type,
    Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type,
    UInt8Type,
};
use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, TimeUnit};

use crate::audit::read::Span;
use json::{json, write_json};
use numbers::{decimal, float16, float32, float64, integer};
use time::time_writer;
use views::bytes_writer;

mod json;
mod numbers;
mod time;
mod views;

/// Renders one column of a batch: row `r`'s value goes to `data` and its
/// span to `spans[r * width + k]`.
pub(super) fn render_column(
    column: &ArrayRef,
    data: &mut Vec<u8>,
    spans: &mut [Span],
    width: usize,
    k: usize,
) -> Result<(), String> {
    let (array, keys): (&dyn Array, Option<Vec<usize>>) = match column.as_any_dictionary_opt() {
        // A dictionary of no values (a column of nulls only, as pyarrow
        // writes one) has no key to normalize: arrow-array asserts on it.
        Some(dictionary) if dictionary.values().is_empty() => {
            all_null(spans, width, k, column.len());
            return Ok(());
        }
        Some(dictionary) => (
            dictionary.values().as_ref(),
            Some(dictionary.normalized_keys()),
        ),
        None => (column.as_ref(), None),
    };
    // Arrow's null type holds no validity buffer: its `null_count` is 0
    // though every value is null.
    if *array.data_type() == DataType::Null {
        all_null(spans, width, k, column.len());
        return Ok(());
    }
    with_writer(
        array,
        Fill {
            column: column.as_ref(),
            array,
            keys: keys.as_deref(),
            data,
            spans,
            width,
            k,
        },
    )
}

/// Sets the `k`-th column of a batch's first `rows` rows to null.
fn all_null(spans: &mut [Span], width: usize, k: usize, rows: usize) {
    for slot in spans.iter_mut().skip(k).step_by(width.max(1)).take(rows) {
        *slot = None;
    }
}

/// What is done with a column's writer ([`with_writer`]). Generic over the
/// writer, so each type's write is compiled into the loop over its values
/// instead of being called through a pointer for every value.
trait UseWriter {
    /// `write(at, out)` appends the text of the value at `at` to `out`.
    fn with<W>(self, write: W) -> Result<(), String>
    where
        W: FnMut(usize, &mut Vec<u8>) -> Result<(), String>;

    /// For values whose text has a known bound: `size(at)` bounds the text
    /// of the value at `at`, and `put(at, buf)` writes it at the start of
    /// `buf`, which holds at least `size(at) + SCRATCH` bytes (it may write
    /// words past the text's end, up to `SCRATCH` bytes), returning its
    /// length; an error names a value without canonical text. Written into
    /// a slice sized once per column of a batch, with no check of a
    /// vector's capacity or update of its length per value.
    fn with_sized<S, P>(self, size: S, put: P) -> Result<(), String>
    where
        S: Fn(usize) -> usize,
        P: FnMut(usize, &mut [u8]) -> Result<usize, String>;
}

/// Bytes a sized writer may write past a value's text (see
/// [`UseWriter::with_sized`]).
const SCRATCH: usize = 16;

fn unfit(at: usize) -> String {
    format!("internal error: the text of value {at} does not fit its bound")
}

/// Writes a column's values into a batch (see [`render_column`]).
struct Fill<'a> {
    /// The column as read (a dictionary's keys, or the values).
    column: &'a dyn Array,
    /// The values the writer reads.
    array: &'a dyn Array,
    /// A dictionary's keys, index into `array` per row.
    keys: Option<&'a [usize]>,
    data: &'a mut Vec<u8>,
    spans: &'a mut [Span],
    width: usize,
    k: usize,
}

impl UseWriter for Fill<'_> {
    fn with_sized<S, P>(self, size: S, put: P) -> Result<(), String>
    where
        S: Fn(usize) -> usize,
        P: FnMut(usize, &mut [u8]) -> Result<usize, String>,
    {
        self.sized(size, put)
    }

    fn with<W>(self, mut write: W) -> Result<(), String>
    where
        W: FnMut(usize, &mut Vec<u8>) -> Result<(), String>,
    {
        let Fill {
            column,
            array,
            keys,
            data,
            spans,
            width,
            k,
        } = self;
        let slots = spans.iter_mut().skip(k).step_by(width.max(1));
        // Checking each value for null goes through `dyn Array`: skip it for
        // columns without nulls, the common case.
        let (column_nulls, array_nulls) = (column.null_count() > 0, array.null_count() > 0);
        if keys.is_none() && !column_nulls {
            for (row, slot) in slots.take(column.len()).enumerate() {
                let start = data.len();
                write(row, data)?;
                *slot = Some((start, data.len()));
            }
            return Ok(());
        }
        for (row, slot) in slots.take(column.len()).enumerate() {
            // Every slot is written: the batch's spans are not cleared.
            *slot = None;
            if column_nulls && column.is_null(row) {
                continue;
            }
            let at = keys.map_or(Some(row), |keys| keys.get(row).copied());
            let Some(at) = at.filter(|&at| !array_nulls || !array.is_null(at)) else {
                continue;
            };
            let start = data.len();
            write(at, data)?;
            *slot = Some((start, data.len()));
        }
        Ok(())
    }
}

impl Fill<'_> {
    fn sized<S, P>(self, size: S, mut put: P) -> Result<(), String>
    where
        S: Fn(usize) -> usize,
        P: FnMut(usize, &mut [u8]) -> Result<usize, String>,
    {
        let Fill {
            column,
            array,
            keys,
            data,
            spans,
            width,
            k,
        } = self;
        let rows = column.len();
        let index = |row: usize| keys.map_or(Some(row), |keys| keys.get(row).copied());
        // Room for every row's text (a null's too: an overestimate).
        let bound = (0..rows).filter_map(index).map(&size).sum::<usize>() + SCRATCH;
        let mut end = data.len();
        data.resize(end + bound, 0);
        let slots = spans.iter_mut().skip(k).step_by(width.max(1)).take(rows);
        let (column_nulls, array_nulls) = (column.null_count() > 0, array.null_count() > 0);
        if keys.is_none() && !column_nulls {
            for (row, slot) in slots.enumerate() {
                let length = put(row, data.get_mut(end..).unwrap_or_default())?;
                *slot = Some((end, end + length));
                end += length;
            }
        } else {
            for (row, slot) in slots.enumerate() {
                // Every slot is written: the batch's spans are not cleared.
                *slot = None;
                if column_nulls && column.is_null(row) {
                    continue;
                }
                let Some(at) = index(row).filter(|&at| !array_nulls || !array.is_null(at)) else {
                    continue;
                };
                let length = put(at, data.get_mut(end..).unwrap_or_default())?;
                *slot = Some((end, end + length));
                end += length;
            }
        }
        data.truncate(end);
        Ok(())
    }
}

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
fn value_text(array: &dyn Array, at: usize) -> Result<Vec<u8>, String> {
    let mut text = Vec::new();
    with_writer(array, One { at, out: &mut text })?;
    Ok(text)
}

/// Hands `using` the writer of an array's values; `Err` names a type
/// without canonical text.
fn with_writer<U: UseWriter>(array: &dyn Array, using: U) -> Result<(), String> {
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
pub(super) fn supported(data_type: &DataType, top: bool) -> Result<(), String> {
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
