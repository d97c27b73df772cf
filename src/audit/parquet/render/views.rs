//! Strings and binaries read as views, copied out of their pages.

use super::{unfit, UseWriter};

/// Strings or binaries read as views (`Utf8View`, `BinaryView`): a value of
/// up to 12 bytes is inside its view, a longer one in a data buffer (the
/// Arrow format's layout: length, then the bytes or a prefix, buffer and
/// offset, all little-endian). Short values are copied with copies of a
/// fixed size instead of a call to `memcpy`.
pub(super) fn views<U: UseWriter>(
    views: &[u128],
    buffers: Vec<&[u8]>,
    using: U,
) -> Result<(), String> {
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
