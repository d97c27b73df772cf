//! Dates, times of day and timestamps, worked out on the calendar.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::Array;
use arrow_schema::{DataType, TimeUnit};

use super::writer::{unfit, UseWriter};

/// Nanoseconds per tick of a time unit.
fn nanos(unit: TimeUnit) -> i128 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

/// The civil date `days` after 1970-01-01, for years -9999 to 9999: worked
/// out on the calendar, not through a timestamp, whose range (jiff's) ends
/// on 9999-12-30 at 22:00, so that `9999-12-31`, the usual open end of a
/// history table, is a date like any other.
fn civil_date(days: i64) -> Option<jiff::civil::Date> {
    let span = jiff::Span::new().try_days(days).ok()?;
    jiff::civil::date(1970, 1, 1).checked_add(span).ok()
}

fn date(days: i64) -> Result<String, String> {
    civil_date(days)
        .map(|date| date.to_string())
        .ok_or_else(|| {
            format!("date {days} days from 1970-01-01 is out of range (years -9999 to 9999)")
        })
}

/// Nanoseconds per day.
const DAY_NANOS: i128 = 86_400_000_000_000;

fn timestamp(value: i64, unit: TimeUnit, utc: bool) -> Result<String, String> {
    let total = i128::from(value) * nanos(unit);
    let out_of_range = || format!("timestamp {value} is out of range (years -9999 to 9999)");
    let days = i64::try_from(total.div_euclid(DAY_NANOS)).map_err(|_| out_of_range())?;
    let of_day = i64::try_from(total.rem_euclid(DAY_NANOS)).map_err(|_| out_of_range())?;
    let time = time_of_day(of_day).ok_or_else(out_of_range)?;
    let at = civil_date(days).ok_or_else(out_of_range)?.to_datetime(time);
    // jiff prints a timestamp as its civil time in UTC and `Z`.
    Ok(if utc {
        format!("{at}Z")
    } else {
        at.to_string()
    })
}

/// The time of day `nanos` nanoseconds after midnight.
fn time_of_day(nanos: i64) -> Option<jiff::civil::Time> {
    let second = nanos.div_euclid(1_000_000_000);
    let nano = i32::try_from(nanos.rem_euclid(1_000_000_000)).ok()?;
    let part = |n: i64| i8::try_from(n).ok();
    jiff::civil::Time::new(
        part(second / 3600)?,
        part(second / 60 % 60)?,
        part(second % 60)?,
        nano,
    )
    .ok()
}

fn time(value: i64, unit: TimeUnit) -> Result<String, String> {
    let total = i128::from(value) * nanos(unit);
    let out_of_range = || format!("time of day {value} is out of range");
    let second = total.div_euclid(1_000_000_000);
    let nano = i32::try_from(total.rem_euclid(1_000_000_000)).map_err(|_| out_of_range())?;
    let part = |n: i128| i8::try_from(n).map_err(|_| out_of_range());
    let time = jiff::civil::Time::new(
        part(second / 3600)?,
        part(second / 60 % 60)?,
        part(second % 60)?,
        nano,
    )
    .map_err(|_| out_of_range())?;
    Ok(time.to_string())
}

/// Writes the timestamps of a column whose row `row` is `value(row)` ticks.
fn stamp<U: UseWriter>(
    value: impl Fn(usize) -> i64,
    unit: TimeUnit,
    utc: bool,
    using: U,
) -> Result<(), String> {
    let mut dates = Dates::new();
    // jiff's longest is 33 characters: `-009999-12-31T23:59:59.999999999Z`.
    using.with_sized(
        |_| 40,
        move |row, buf| {
            let value = value(row);
            if let Some(length) = whole_second_timestamp(value, unit, utc, &mut dates, buf) {
                return Ok(length);
            }
            let text = timestamp(value, unit, utc)?;
            let text = text.as_bytes();
            buf.get_mut(..text.len())
                .ok_or_else(|| unfit(row))?
                .copy_from_slice(text);
            Ok(text.len())
        },
    )
}

/// The text of recently rendered days (`YYYY-MM-DD`), by their day count
/// from 0000-01-01 modulo the slots: the timestamps of a column tend to
/// fall on few days, and working out a day's date is most of a
/// timestamp's rendering.
struct Dates {
    days: [u64; Self::SLOTS],
    text: [[u8; 10]; Self::SLOTS],
}

impl Dates {
    const SLOTS: usize = 64;

    fn new() -> Self {
        Self {
            days: [u64::MAX; Self::SLOTS],
            text: [[0; 10]; Self::SLOTS],
        }
    }

    /// The text of the day `days` after 0000-01-01 (up to 9999-12-31).
    fn get(&mut self, days: u64) -> [u8; 10] {
        let slot = usize::try_from(days % Self::SLOTS as u64).unwrap_or(0);
        if let (Some(known), Some(text)) = (self.days.get_mut(slot), self.text.get_mut(slot)) {
            if *known != days {
                *known = days;
                *text = date_text(days);
            }
            return *text;
        }
        date_text(days)
    }
}

/// `YYYY-MM-DD` of the day `days` after 0000-01-01 (up to 9999-12-31).
fn date_text(days: u64) -> [u8; 10] {
    let (year, month, day) = civil_from_days(days);
    let [y0, y1] = two(year / 100);
    let [y2, y3] = two(year);
    let [mo0, mo1] = two(month);
    let [d0, d1] = two(day);
    [y0, y1, y2, y3, b'-', mo0, mo1, b'-', d0, d1]
}

/// The last two decimal digits of `n`.
fn two(n: u64) -> [u8; 2] {
    let at = usize::try_from(n % 100).unwrap_or(0) * 2;
    let pair = PAIRS.get(at..at + 2).unwrap_or(b"00");
    [pair[0], pair[1]]
}

/// Writes a timestamp of whole seconds from the year 0000 to 9999 at the
/// start of `buf` (20 bytes at least) exactly as
/// [`timestamp`] does (`2026-09-20T08:12:00Z`, the `Z` only if `utc`),
/// without jiff's formatting machinery or a `String`, its date through
/// `dates`, and returns its length; `None`, for any other value.
fn whole_second_timestamp(
    value: i64,
    unit: TimeUnit,
    utc: bool,
    dates: &mut Dates,
    buf: &mut [u8],
) -> Option<usize> {
    /// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z in Unix seconds.
    const FIRST: i64 = -62_167_219_200;
    const LAST: i64 = 253_402_300_799;
    let per_second = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    // A constant divisor for the common unit: a division by a variable
    // costs more than the rest of the rendering.
    let seconds = if per_second == 1 {
        value
    } else if value % per_second == 0 {
        value / per_second
    } else {
        return None;
    };
    if !(FIRST..=LAST).contains(&seconds) {
        return None;
    }
    let buf = buf.get_mut(..20)?;
    // Unsigned from here: days since 0000-01-01, which is in range.
    let since = (seconds - FIRST).unsigned_abs();
    buf.get_mut(..10)?
        .copy_from_slice(&dates.get(since / 86_400));
    // `THH:MM:SS` and `Z`, put together in registers, stored as two words.
    let of_day = since % 86_400;
    let pair = |n: u64| u64::from(u16::from_le_bytes(two(n)));
    let [h, m, s] = [
        pair(of_day / 3600),
        pair(of_day / 60 % 60),
        pair(of_day % 60),
    ];
    let time = u64::from(b'T') | h << 8 | u64::from(b':') << 24 | m << 32 | u64::from(b':') << 48;
    buf.get_mut(10..18)?
        .copy_from_slice(&(time | (s & 0xFF) << 56).to_le_bytes());
    buf.get_mut(18..20)?
        .copy_from_slice(&[(s >> 8) as u8, b'Z']);
    Some(if utc { 20 } else { 19 })
}

/// "00" to "99".
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// The proleptic Gregorian (year, month, day) of a day count from
/// 0000-01-01 (Howard Hinnant's `civil_from_days`, shifted by 400 years
/// so that all of it is unsigned).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Days since -0400-03-01: eras of 400 years start on a March 1st, and
    // 0000-01-01 is 60 days before 0000-03-01.
    let z = days + 146_097 - 60;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = (yoe + era * 400 + u64::from(month <= 2)).saturating_sub(400);
    (year, month, day)
}

/// Hands `using` the writer of a date, time or timestamp array's values
/// (see [`super::value::with_writer`]).
pub(super) fn time_writer<U: UseWriter>(array: &dyn Array, using: U) -> Result<(), String> {
    match array.data_type() {
        DataType::Date32 => {
            let array = array.as_primitive::<Date32Type>();
            text(move |row| date(i64::from(array.value(row))), using)
        }
        DataType::Date64 => {
            let array = array.as_primitive::<Date64Type>();
            text(
                move |row| date(array.value(row).div_euclid(86_400_000)),
                using,
            )
        }
        DataType::Timestamp(unit, zone) => {
            let (unit, utc) = (*unit, zone.is_some());
            match unit {
                TimeUnit::Second => {
                    let array = array.as_primitive::<TimestampSecondType>();
                    stamp(move |row| array.value(row), unit, utc, using)
                }
                TimeUnit::Millisecond => {
                    let array = array.as_primitive::<TimestampMillisecondType>();
                    stamp(move |row| array.value(row), unit, utc, using)
                }
                TimeUnit::Microsecond => {
                    let array = array.as_primitive::<TimestampMicrosecondType>();
                    stamp(move |row| array.value(row), unit, utc, using)
                }
                TimeUnit::Nanosecond => {
                    let array = array.as_primitive::<TimestampNanosecondType>();
                    stamp(move |row| array.value(row), unit, utc, using)
                }
            }
        }
        DataType::Time32(TimeUnit::Second) => {
            let array = array.as_primitive::<Time32SecondType>();
            text(
                move |row| time(i64::from(array.value(row)), TimeUnit::Second),
                using,
            )
        }
        DataType::Time32(TimeUnit::Millisecond) => {
            let array = array.as_primitive::<Time32MillisecondType>();
            text(
                move |row| time(i64::from(array.value(row)), TimeUnit::Millisecond),
                using,
            )
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let array = array.as_primitive::<Time64MicrosecondType>();
            text(
                move |row| time(array.value(row), TimeUnit::Microsecond),
                using,
            )
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            let array = array.as_primitive::<Time64NanosecondType>();
            text(
                move |row| time(array.value(row), TimeUnit::Nanosecond),
                using,
            )
        }
        other => Err(other.to_string()),
    }
}

fn text<U: UseWriter>(
    render: impl Fn(usize) -> Result<String, String>,
    using: U,
) -> Result<(), String> {
    using.with(move |row, out| {
        out.extend_from_slice(render(row)?.as_bytes());
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use arrow_schema::TimeUnit;

    use super::{timestamp, whole_second_timestamp, Dates};

    // Dates and timestamps are worked out on the calendar,
    // as jiff prints them within its timestamps' range, and on to the end of
    // year 9999 (jiff's timestamps end on 9999-12-30 at 22:00).
    #[test]
    fn dates_and_timestamps_reach_the_end_of_year_9999() {
        for nanos in [
            -377_705_023_201_000_000_000_i128,
            -1,
            0,
            1_500_000_000,
            1_788_220_800_250_000_000,
            253_402_207_200_999_999_999,
        ] {
            let value = i64::try_from(nanos.div_euclid(1_000)).expect("microseconds");
            let at = jiff::Timestamp::from_nanosecond(i128::from(value) * 1_000).expect("range");
            let local = at
                .to_zoned_datetime(jiff::tz::TimeZone::UTC)
                .datetime()
                .to_string();
            assert_eq!(
                timestamp(value, TimeUnit::Microsecond, true),
                Ok(at.to_string())
            );
            assert_eq!(timestamp(value, TimeUnit::Microsecond, false), Ok(local));
        }
        assert_eq!(
            timestamp(253_402_300_799, TimeUnit::Second, true).as_deref(),
            Ok("9999-12-31T23:59:59Z")
        );
        assert_eq!(
            timestamp(253_402_300_799_999_999, TimeUnit::Microsecond, false).as_deref(),
            Ok("9999-12-31T23:59:59.999999")
        );
        assert_eq!(
            timestamp(253_402_300_800, TimeUnit::Second, true),
            Err("timestamp 253402300800 is out of range (years -9999 to 9999)".to_owned())
        );
        assert_eq!(super::date(2_932_896).as_deref(), Ok("9999-12-31"));
        assert_eq!(super::date(-719_528).as_deref(), Ok("0000-01-01"));
        assert_eq!(
            super::date(2_932_897),
            Err(
                "date 2932897 days from 1970-01-01 is out of range (years -9999 to 9999)"
                    .to_owned()
            )
        );
    }

    // The fast timestamp text is jiff's, byte for byte, wherever
    // it applies (whole seconds, years 0000 to 9999), and declines elsewhere.
    #[test]
    fn whole_second_timestamps_render_as_jiff_does() {
        let mut seconds: Vec<i64> = vec![
            -62_167_219_200,
            -62_167_219_201,
            253_402_207_200,
            253_402_207_201,
            253_402_300_799,
            -1,
            0,
            1,
            951_782_400,
            951_868_799,
            1_788_220_800,
            4_107_542_400,
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            seconds.push((x % 315_569_520_000) as i64 - 62_167_219_200);
        }
        let units = [
            (TimeUnit::Second, 1),
            (TimeUnit::Millisecond, 1_000),
            (TimeUnit::Microsecond, 1_000_000),
            (TimeUnit::Nanosecond, 1_000_000_000),
        ];
        // One cache of dates for all of them, as a column's values share one.
        let mut dates = Dates::new();
        for &second in &seconds {
            for (unit, per) in units {
                for utc in [true, false] {
                    for extra in [0, 1] {
                        let Some(value) =
                            second.checked_mul(per).and_then(|v| v.checked_add(extra))
                        else {
                            continue;
                        };
                        let mut fast = [0u8; 20];
                        let slow = timestamp(value, unit, utc);
                        if let Some(length) =
                            whole_second_timestamp(value, unit, utc, &mut dates, &mut fast)
                        {
                            assert_eq!(
                                Ok(String::from_utf8(fast[..length].to_vec()).expect("ASCII")),
                                slow,
                                "{value} {unit:?} {utc}"
                            );
                        } else {
                            let whole = value % per == 0;
                            let in_range =
                                (-62_167_219_200..=253_402_300_799).contains(&(value / per));
                            assert!(!(whole && in_range), "{value} {unit:?} declined");
                        }
                    }
                }
            }
        }
    }
}
