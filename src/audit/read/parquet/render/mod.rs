//! The hand-tuned renderers: each Arrow value written as its canonical
//! text (see the parent module's list), straight into a batch's bytes.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;

use crate::audit::read::Span;
use value::with_writer;
use writer::{UseWriter, SCRATCH};

mod numbers;
mod time;
mod value;
mod views;
mod writer;

pub(super) use value::supported;

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
