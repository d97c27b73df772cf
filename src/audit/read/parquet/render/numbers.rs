//! Integers, decimals and floats as decimal text.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrowPrimitiveType};

use super::writer::{unfit, UseWriter};

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

/// Writes a half float as the shortest text that rounds back to the same
/// half float, in the style of the other floats (`0.1`, `1.0`, `6e-8`).
/// Its value widened to `f32` would print every digit of that (`0.1` is
/// `0.099975586` as an `f32`): the candidates of 1 to 5 significant digits
/// (5 tell every half float apart) are tried, shortest first, each the
/// value rounded to that many digits, which is the nearest such text.
/// The one that rounds back is then written as the `f64` it reads as: the
/// shortest text of that `f64` is those digits (any shorter one would have
/// been found first).
pub(super) fn float16(value: half::f16, out: &mut Vec<u8>) {
    let wide = value.to_f64();
    if !value.is_finite() {
        float64(wide, out);
        return;
    }
    let shortest = (1..=5)
        .filter_map(|digits| format!("{:.*e}", digits - 1, wide).parse::<f64>().ok())
        .find(|candidate| half::f16::from_f64(*candidate).to_bits() == value.to_bits());
    float64(shortest.unwrap_or(wide), out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bits: u16) -> String {
        let mut out = Vec::new();
        float16(half::f16::from_bits(bits), &mut out);
        String::from_utf8(out).expect("ASCII")
    }

    // Half floats were written as their f32 widening (0.1 as
    // `0.099975586`). The digits expected are the shortest that CPython's
    // `struct.pack('<e', float(text))` (IEEE binary16, to nearest even)
    // packs back to the same bits, found by `f'{v:.{p-1}e}'` for p = 1, 2,
    // …; numpy shows the largest half float, 65504, as `65500.0` too
    // (`np.finfo(np.float16).max`). The text around them is serde_json's,
    // as for every float: `.0` on a whole number, an exponent below 1e-5.
    #[test]
    fn half_floats_are_the_shortest_text_that_rounds_back() {
        for (bits, expected) in [
            (0x2E66, "0.1"),        // 0.0999755859375
            (0x3C00, "1.0"),        // 1
            (0x3C01, "1.001"),      // 1.0009765625
            (0x3555, "0.3333"),     // 0.333251953125
            (0x6801, "2050.0"),     // 2050
            (0x7BFF, "65500.0"),    // 65504, the largest
            (0xFBFF, "-65500.0"),   // -65504
            (0x1400, "0.000977"),   // 0.0009765625
            (0x0400, "0.00006104"), // 6.103515625e-5, the smallest normal
            (0x03FF, "0.000061"),   // 6.097555160522461e-5, the largest subnormal
            (0x0002, "1e-7"),       // 1.1920928955078125e-7
            (0x0001, "6e-8"),       // 5.960464477539063e-8, the smallest
            (0x0000, "0.0"),
            (0x8000, "-0.0"),
            (0x7C00, "inf"),
            (0xFC00, "-inf"),
            (0x7E00, "NaN"),
            (0xFE01, "NaN"),
        ] {
            assert_eq!(text(bits), expected, "{bits:#06x}");
        }
    }

    // Every finite half float's text rounds back to it, and no text of
    // fewer significant digits does.
    #[test]
    fn every_half_float_rounds_back_from_its_text() {
        for bits in 0..=u16::MAX {
            let value = half::f16::from_bits(bits);
            if !value.is_finite() {
                continue;
            }
            let shown = text(bits);
            let back: f64 = shown.parse().expect("a number");
            assert_eq!(half::f16::from_f64(back).to_bits(), bits, "{shown}");
            let digits = shown
                .split('e')
                .next()
                .unwrap_or_default()
                .trim_start_matches(['-', '0', '.'])
                .replace('.', "")
                .trim_end_matches('0')
                .len()
                .max(1);
            if digits > 1 {
                let shorter = format!("{:.*e}", digits - 2, value.to_f64());
                let back: f64 = shorter.parse().expect("a number");
                assert_ne!(
                    half::f16::from_f64(back).to_bits(),
                    bits,
                    "{shown}: {shorter}"
                );
            }
        }
    }
}
