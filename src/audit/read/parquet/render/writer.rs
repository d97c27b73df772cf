//! The interface between a type's text writer and what is done with it:
//! a batch's column filled, or one value's text.

/// What is done with a column's writer (`value::with_writer`). Generic over the
/// writer, so each type's write is compiled into the loop over its values
/// instead of being called through a pointer for every value.
pub(super) trait UseWriter {
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
pub(super) const SCRATCH: usize = 16;

pub(super) fn unfit(at: usize) -> String {
    format!("internal error: the text of value {at} does not fit its bound")
}
