//! Exact decimal arithmetic for reconcile sums: values in units of 1e-9 in
//! an i128, parsed from and rendered to text without floats.

/// Units of a decimal: sums count in 1e-9.
pub(super) const SCALE: i128 = 1_000_000_000;
/// Fractional digits a decimal may have.
pub(super) const FRACTION_DIGITS: usize = 9;

/// A decimal (`-12.5`, `+3`, `7.000000001`) in units of 1e-9: optional sign,
/// digits, optionally `.` and 1 to 9 digits. `None` if it is not one or
/// does not fit.
pub(super) fn parse_decimal(value: &[u8]) -> Option<i128> {
    let (negative, unsigned) = match value.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, value),
    };
    let (whole, fraction) = match unsigned.iter().position(|&b| b == b'.') {
        Some(dot) => (&unsigned[..dot], Some(&unsigned[dot + 1..])),
        None => (unsigned, None),
    };
    if whole.is_empty() || !whole.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut units: i128 = 0;
    for &digit in whole {
        units = units
            .checked_mul(10)?
            .checked_add(i128::from(digit - b'0'))?;
    }
    units = units.checked_mul(SCALE)?;
    if let Some(fraction) = fraction {
        if fraction.is_empty()
            || fraction.len() > FRACTION_DIGITS
            || !fraction.iter().all(u8::is_ascii_digit)
        {
            return None;
        }
        let mut scale = SCALE;
        for &digit in fraction {
            scale /= 10;
            units = units.checked_add(i128::from(digit - b'0') * scale)?;
        }
    }
    Some(if negative { -units } else { units })
}

/// Units of 1e-9 as a decimal without trailing zeros: `74000`, `12.5`.
pub(super) fn render_decimal(units: i128) -> String {
    let sign = if units < 0 { "-" } else { "" };
    let magnitude = units.unsigned_abs();
    let scale = SCALE.unsigned_abs();
    let (whole, fraction) = (magnitude / scale, magnitude % scale);
    if fraction == 0 {
        return format!("{sign}{whole}");
    }
    let digits = format!("{fraction:09}");
    format!("{sign}{whole}.{}", digits.trim_end_matches('0'))
}
