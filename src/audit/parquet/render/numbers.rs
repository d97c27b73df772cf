//! Integers, decimals and floats as decimal text.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrowPrimitiveType};

use super::{unfit, UseWriter};

pub(super) fn integer<T, U>(array: &dyn Array, using: U) -> Result<(), String>
where
    T: ArrowPrimitiveType,
    T::Native: Into<i128>,
    U: UseWriter,
{
    let values = array.as_primitive::<T>().values();
    // At most 20 characters: `-9223372036854775808`, `18446744073709551615`.
    using.with_sized(
        |_| 20,
        move |row, buf| {
            let value = values.get(row).copied().ok_or_else(|| unfit(row))?;
            put_integer(value.into(), buf).ok_or_else(|| unfit(row))
        },
    )
}

/// Writes an integer of at most 64 bits at the start of `buf` (24 bytes at
/// least) in decimal digits, as `itoa` and `Display` do; returns its
/// length. Up to 16 digits are worked out in a register, eight at a time,
/// and stored with one store each, never a byte at a time.
fn put_integer(value: i128, buf: &mut [u8]) -> Option<usize> {
    let Some(magnitude) = u64::try_from(value.unsigned_abs())
        .ok()
        .filter(|&m| m < 10_000_000_000_000_000)
    else {
        let mut text = itoa::Buffer::new();
        let text = text.format(value).as_bytes();
        buf.get_mut(..text.len())?.copy_from_slice(text);
        return Some(text.len());
    };
    // Written always: the first digit replaces it for a positive value.
    *buf.first_mut()? = b'-';
    let sign = usize::from(value < 0);
    let (high, low) = (magnitude / 100_000_000, magnitude % 100_000_000);
    if high == 0 {
        return Some(sign + put_digits(low, buf.get_mut(sign..)?)?);
    }
    let at = sign + put_digits(high, buf.get_mut(sign..)?)?;
    let low = (eight_digits(low) | ASCII_ZEROS).to_le_bytes();
    buf.get_mut(at..at + 8)?.copy_from_slice(&low);
    Some(at + 8)
}

/// '0' in each byte.
const ASCII_ZEROS: u64 = 0x3030_3030_3030_3030;

/// Writes `n` (below 10^8) without leading zeros at the start of `buf` as
/// one 8-byte store; returns the number of digits.
fn put_digits(n: u64, buf: &mut [u8]) -> Option<usize> {
    let digits = eight_digits(n);
    // Leading zeros are the low bytes that are 0 (at most 7: 0 is "0").
    let zeros = (digits.trailing_zeros() / 8).min(7);
    let text = ((digits >> (8 * zeros)) | ASCII_ZEROS).to_le_bytes();
    buf.get_mut(..8)?.copy_from_slice(&text);
    Some(8 - zeros as usize)
}

/// The eight decimal digits of `n` (below 10^8, with leading zeros) as the
/// bytes 0 to 9 of a little-endian `u64`, the most significant first: the
/// halves, quarters and eighths are divided in parallel lanes of 32, 16 and
/// 8 bits, by multiplying and shifting (exact below 10^4 and 10^2).
fn eight_digits(n: u64) -> u64 {
    let halves = (n / 10_000) | ((n % 10_000) << 32);
    let hundreds = ((halves * 10_486) >> 20) & 0x0000_007F_0000_007F;
    let quarters = hundreds | ((halves - hundreds * 100) << 16);
    let tens = ((quarters * 103) >> 10) & 0x000F_000F_000F_000F;
    tens | ((quarters - tens * 10) << 8)
}

pub(super) fn decimal<T: arrow_array::types::DecimalType, U: UseWriter>(
    array: &dyn Array,
    using: U,
) -> Result<(), String> {
    let array = array.as_primitive::<T>();
    using.with(move |row, out| {
        out.extend_from_slice(array.value_as_string(row).as_bytes());
        Ok(())
    })
}

pub(super) fn float64(value: f64, out: &mut Vec<u8>) {
    if value.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if value.is_infinite() {
        out.extend_from_slice(if value > 0.0 { b"inf" } else { b"-inf" });
    } else {
        out.extend_from_slice(ryu::Buffer::new().format_finite(value).as_bytes());
    }
}

pub(super) fn float32(value: f32, out: &mut Vec<u8>) {
    if value.is_finite() {
        out.extend_from_slice(ryu::Buffer::new().format_finite(value).as_bytes());
    } else {
        float64(f64::from(value), out);
    }
}
