//! Strings and binaries: their bytes, those read as views copied out of
//! their pages.

use arrow_array::cast::AsArray;
use arrow_array::Array;
use arrow_schema::DataType;

use super::writer::{unfit, UseWriter};

/// Strings or binaries read as views (`Utf8View`, `BinaryView`): a value of
/// up to 12 bytes is inside its view, a longer one in a data buffer (the
/// Arrow format's layout: length, then the bytes or a prefix, buffer and
/// offset, all little-endian). Short values are copied with copies of a
/// fixed size instead of a call to `memcpy`.
fn views<U: UseWriter>(views: &[u128], buffers: Vec<&[u8]>, using: U) -> Result<(), String> {
    let length = |view: u128| (view as u32) as usize;
    using.with_sized(
        |row| views.get(row).map_or(0, |&view| length(view)),
        move |row, buf| view_text(views, &buffers, row, buf).ok_or_else(|| unfit(row)),
    )
}

/// Writes the value of view `row` at the start of `buf` (16 bytes more
/// than the value at least); returns its length.
fn view_text(views: &[u128], buffers: &[&[u8]], row: usize, buf: &mut [u8]) -> Option<usize> {
    let view = *views.get(row)?;
    let length = (view as u32) as usize;
    if length <= 12 {
        // The bytes follow the length: stored from a register, not copied
        // out of the view in memory.
        buf.get_mut(..16)?
            .copy_from_slice(&(view >> 32).to_le_bytes());
        return Some(length);
    }
    let bytes = buffers.get(((view >> 64) as u32) as usize)?;
    let offset = ((view >> 96) as u32) as usize;
    if length <= 16 {
        if let Some(sixteen) = bytes.get(offset..offset + 16) {
            buf.get_mut(..16)?.copy_from_slice(sixteen);
            return Some(length);
        }
    }
    buf.get_mut(..length)?
        .copy_from_slice(bytes.get(offset..offset + length)?);
    Some(length)
}

/// Hands `using` the writer of a string or binary array's values (see
/// [`super::value::with_writer`]).
pub(super) fn bytes_writer<U: UseWriter>(array: &dyn Array, using: U) -> Result<(), String> {
    match array.data_type() {
        DataType::Utf8 => {
            let array = array.as_string::<i32>();
            using.with(move |row, out| {
                out.extend_from_slice(array.value(row).as_bytes());
                Ok(())
            })
        }
        DataType::LargeUtf8 => {
            let array = array.as_string::<i64>();
            using.with(move |row, out| {
                out.extend_from_slice(array.value(row).as_bytes());
                Ok(())
            })
        }
        DataType::Utf8View => {
            let array = array.as_string_view();
            let buffers = array.data_buffers().iter().map(|b| b.as_slice()).collect();
            views(array.views(), buffers, using)
        }
        DataType::Binary => {
            let array = array.as_binary::<i32>();
            using.with(move |row, out| {
                out.extend_from_slice(array.value(row));
                Ok(())
            })
        }
        DataType::LargeBinary => {
            let array = array.as_binary::<i64>();
            using.with(move |row, out| {
                out.extend_from_slice(array.value(row));
                Ok(())
            })
        }
        DataType::BinaryView => {
            let array = array.as_binary_view();
            let buffers = array.data_buffers().iter().map(|b| b.as_slice()).collect();
            views(array.views(), buffers, using)
        }
        DataType::FixedSizeBinary(_) => {
            let array = array.as_fixed_size_binary();
            using.with(move |row, out| {
                out.extend_from_slice(array.value(row));
                Ok(())
            })
        }
        other => Err(other.to_string()),
    }
}
