//! `schedule = "0 6 * * *"`: a five-field cron expression read on the
//! civil clock of a timezone.
//!
//! The next firing is a pure function of (expression, zone, instant), walked
//! one constant-offset stretch of the zone's timeline at a time (weir's
//! bundled tzdb), with cronie's rule for the hours a DST change skips or
//! repeats:
//!
//! ```text
//!                 fixed time (`30 2 * * *`)      wildcard or step in minute or hour
//!  skipped hour   once, at the end of the gap    the skipped minutes do not exist
//!  repeated hour  once, in the first pass        in both passes, by wall clock
//! ```
//!
//! `W` and `L` stay inside their month, and an expression no date can match
//! (`0 0 30 2 *`) is refused when parsed, so a schedule that parses fires.
//! Written here rather than on croner: croner matched civil minutes only (the
//! DST rule needs to know which fields are fixed) and let `1W` pick a day of
//! the month before.

use jiff::civil::{Date, DateTime, Weekday};
use jiff::tz::{Offset, TimeZone};
use jiff::{SignedDuration, Timestamp};

/// A parsed schedule in a timezone.
#[derive(Clone)]
pub struct Schedule {
    text: String,
    spec: Spec,
    tz: TimeZone,
    zone: String,
}

/// Why a schedule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Not a five-field cron expression.
    #[error(transparent)]
    Syntax(#[from] CronError),
    /// A well-formed expression that no date matches.
    #[error("`{text}` never fires: no date matches its day of month, month and day of week")]
    NeverFires {
        /// The expression as written.
        text: String,
    },
    /// A timezone the bundled database does not know.
    #[error("unknown timezone `{zone}`: {why}")]
    Zone {
        /// The zone as written.
        zone: String,
        /// The timezone database's reason.
        why: String,
    },
}

/// Why a text is not a five-field cron expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// Not five whitespace-separated fields.
    #[error("`{text}` has {found} fields; a schedule has five: minute hour day-of-month month day-of-week")]
    FieldCount {
        /// The expression as written.
        text: String,
        /// How many fields it has.
        found: usize,
    },
    /// One field is wrong.
    #[error("`{text}` is not a cron expression: {field} {problem}")]
    Field {
        /// The expression as written.
        text: String,
        /// Which field.
        field: CronField,
        /// What is wrong with it.
        problem: FieldProblem,
    },
}

/// The five fields of a cron expression, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CronField {
    /// The first: 0-59.
    Minute,
    /// The second: 0-23.
    Hour,
    /// The third: 1-31, `L`, `W`.
    DayOfMonth,
    /// The fourth: 1-12 or `JAN`-`DEC`.
    Month,
    /// The fifth: 0-7 or `SUN`-`SAT`, `#`, `L`.
    DayOfWeek,
}

impl std::fmt::Display for CronField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CronField::Minute => "minute",
            CronField::Hour => "hour",
            CronField::DayOfMonth => "day of month",
            CronField::Month => "month",
            CronField::DayOfWeek => "day of week",
        })
    }
}

/// What is wrong inside one field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    /// Neither a number nor one of the field's names.
    #[error("`{item}` is not a number")]
    NotANumber {
        /// The item as written.
        item: String,
    },
    /// A number outside what the field (or a `#k` suffix) allows.
    #[error("`{item}` is outside {lo}-{hi}")]
    OutOfRange {
        /// The item as written.
        item: String,
        /// Smallest allowed.
        lo: u32,
        /// Largest allowed.
        hi: u32,
    },
    /// `/0`, `/x`.
    #[error("step `{step}` is not a positive number")]
    BadStep {
        /// The step as written.
        step: String,
    },
    /// `5-1`.
    #[error("range `{range}` runs backwards")]
    Backwards {
        /// The range as written.
        range: String,
    },
}

/// The fields, as sets.
#[derive(Clone, Debug, PartialEq)]
struct Spec {
    minutes: u64,
    hours: u32,
    months: u16,
    dom: DaysOfMonth,
    dow: DaysOfWeek,
    /// Neither minute nor hour has a wildcard or a step: cronie's "fixed
    /// time", which fires once however the clock moves.
    fixed: bool,
}

#[derive(Clone, Debug, PartialEq, Default)]
struct DaysOfMonth {
    days: u32,
    last: bool,
    last_weekday: bool,
    /// `nW`: bit n set.
    nearest_weekday: u32,
    /// Written as `*` or `?` (a `*/n` too, as in Vixie cron and cronie).
    star: bool,
}

#[derive(Clone, Debug, PartialEq, Default)]
struct DaysOfWeek {
    days: u8,
    /// `nL`: bit n set for the last weekday n of the month.
    last: u8,
    /// `n#k`: `nth[n]` has bit k set.
    nth: [u8; 7],
    star: bool,
}

impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.text, self.zone)
    }
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Schedule) -> bool {
        self.text == other.text && self.zone == other.zone
    }
}

/// Enough days to see every calendar the Gregorian cycle of 400 years has.
const CYCLE_DAYS: u32 = 146_097 + 366;

impl Schedule {
    /// Parses a five-field expression (minute hour day-of-month month
    /// day-of-week); why not, in words.
    pub fn parse(text: &str, zone: &str) -> Result<Schedule, ScheduleError> {
        let spec = Spec::parse(text)?;
        let tz = jiff::tz::db().get(zone).map_err(|e| ScheduleError::Zone {
            zone: zone.to_string(),
            why: e.to_string(),
        })?;
        let epoch = jiff::civil::date(2000, 1, 1);
        if spec.next_civil(epoch.at(0, 0, 0, 0)).is_none() {
            return Err(ScheduleError::NeverFires {
                text: text.to_string(),
            });
        }
        Ok(Schedule {
            text: text.to_string(),
            spec,
            tz,
            zone: zone.to_string(),
        })
    }

    /// The expression as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The timezone it is read in.
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// The first firing strictly after `after` (seconds since the epoch):
    /// always later than `after`, and the same whatever came before. `None`
    /// only past the end of representable time, or for a wildcard schedule
    /// whose every match the zone skips (`*/30 2 * 3 SUN#2` in New York,
    /// as cronie never runs it either): every other schedule that parses
    /// fires again.
    pub fn next_after(&self, after: i64) -> Option<i64> {
        let start = Timestamp::from_second(after.checked_add(1)?).ok()?;
        let mut piece = self
            .tz
            .preceding(start.checked_add(SignedDuration::from_secs(1)).ok()?)
            .next()
            .map(|t| t.timestamp());
        // A zone changes its offset about twice a year; a schedule whose every
        // match falls into skipped hours for this long does not fire here.
        for _ in 0..4000 {
            let from = piece.map_or(start, |p| p.max(start));
            let offset = self.tz.to_offset(from);
            let before = piece.map(|p| self.tz.to_offset(p - SignedDuration::from_secs(1)));
            if let (Some(p), Some(before)) = (piece, before) {
                if p >= start && self.spec.fixed && before < offset {
                    // Spring forward: a fixed time in the gap fires as it ends.
                    let gap = before.to_datetime(p);
                    if self
                        .spec
                        .next_civil(gap)
                        .is_some_and(|m| m < offset.to_datetime(p))
                    {
                        return Some(p.as_second());
                    }
                }
            }
            let mut lo = ceil_minute(offset.to_datetime(from));
            if let (Some(p), Some(before)) = (piece, before) {
                if self.spec.fixed && before > offset {
                    // Fall back: a fixed time fired in the first pass already.
                    lo = lo.max(before.to_datetime(p));
                }
            }
            let next = self.tz.following(from).next().map(|t| t.timestamp());
            let found = self.spec.next_civil(lo);
            match (found, next) {
                (Some(m), Some(n)) if m < offset.to_datetime(n) => return civil_at(m, offset),
                (Some(m), None) => return civil_at(m, offset),
                (None, None) => return None,
                (_, Some(n)) => piece = Some(n),
            }
        }
        None
    }
}

fn civil_at(civil: DateTime, offset: Offset) -> Option<i64> {
    offset.to_timestamp(civil).ok().map(|t| t.as_second())
}

fn ceil_minute(civil: DateTime) -> DateTime {
    let floor = civil
        .with()
        .second(0)
        .subsec_nanosecond(0)
        .build()
        .unwrap_or(civil);
    if floor == civil {
        civil
    } else {
        floor
            .checked_add(SignedDuration::from_mins(1))
            .unwrap_or(civil)
    }
}

impl Spec {
    fn parse(text: &str) -> Result<Spec, CronError> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(CronError::FieldCount {
                text: text.to_string(),
                found: fields.len(),
            });
        }
        let bad = |field: CronField| {
            move |problem| CronError::Field {
                text: text.to_string(),
                field,
                problem,
            }
        };
        let minutes = parse_list(fields[0], 0, 59, &[]).map_err(bad(CronField::Minute))?;
        let hours = parse_list(fields[1], 0, 23, &[]).map_err(bad(CronField::Hour))?;
        let dom = parse_dom(fields[2]).map_err(bad(CronField::DayOfMonth))?;
        let months = parse_list(fields[3], 1, 12, &MONTHS).map_err(bad(CronField::Month))?;
        let dow = parse_dow(fields[4]).map_err(bad(CronField::DayOfWeek))?;
        let wild = |f: &str| f.starts_with('*') || f.contains('/');
        Ok(Spec {
            minutes,
            hours: u32::try_from(hours).expect("hours are 0-23"),
            months: u16::try_from(months).expect("months are 1-12"),
            dom,
            dow,
            fixed: !wild(fields[0]) && !wild(fields[1]),
        })
    }

    /// The first matching civil minute at or after `lo`, within a 400-year
    /// cycle (after which the calendar repeats).
    fn next_civil(&self, lo: DateTime) -> Option<DateTime> {
        let lo = ceil_minute(lo);
        let mut date = lo.date();
        let (mut hour, mut minute) = (lo.hour(), lo.minute());
        for _ in 0..CYCLE_DAYS {
            if self.day_matches(date) {
                if let Some((h, m)) = self.time_at_or_after(hour, minute) {
                    return Some(date.at(h, m, 0, 0));
                }
            }
            date = date.tomorrow().ok()?;
            (hour, minute) = (0, 0);
        }
        None
    }

    fn time_at_or_after(&self, hour: i8, minute: i8) -> Option<(i8, i8)> {
        for h in hour..24 {
            if self.hours & (1 << h) == 0 {
                continue;
            }
            let from = if h == hour { minute } else { 0 };
            let left = self.minutes >> from;
            if left != 0 {
                let m = from + i8::try_from(left.trailing_zeros()).expect("below 64");
                return Some((h, m));
            }
        }
        None
    }

    fn day_matches(&self, date: Date) -> bool {
        if self.months & (1 << date.month()) == 0 {
            return false;
        }
        let dom = self.dom.star || self.dom.matches(date);
        let dow = self.dow.star || self.dow.matches(date);
        // Vixie cron: with both day fields restricted, either one is enough.
        if self.dom.star || self.dow.star {
            dom && dow
        } else {
            dom || dow
        }
    }
}

impl DaysOfMonth {
    fn matches(&self, date: Date) -> bool {
        let day = date.day();
        let last = date.days_in_month();
        if self.days & (1 << day) != 0 || (self.last && day == last) {
            return true;
        }
        if self.last_weekday && Some(day) == nearest_weekday(date, last) {
            return true;
        }
        (1..=last)
            .any(|n| self.nearest_weekday & (1 << n) != 0 && nearest_weekday(date, n) == Some(day))
    }
}

/// The weekday nearest to day `n` of `date`'s month, never leaving the
/// month (Quartz and cronie: a Saturday the 1st gives Monday the 3rd).
fn nearest_weekday(date: Date, n: i8) -> Option<i8> {
    let last = date.days_in_month();
    let day = date
        .first_of_month()
        .checked_add(jiff::Span::new().days(n - 1))
        .ok()?;
    Some(match day.weekday() {
        Weekday::Saturday if n == 1 => 3,
        Weekday::Saturday => n - 1,
        Weekday::Sunday if n == last => n - 2,
        Weekday::Sunday => n + 1,
        _ => n,
    })
}

impl DaysOfWeek {
    fn matches(&self, date: Date) -> bool {
        let wd = date.weekday().to_sunday_zero_offset();
        let bit = 1u8 << wd;
        if self.days & bit != 0 {
            return true;
        }
        if self.last & bit != 0 && date.day() + 7 > date.days_in_month() {
            return true;
        }
        let week = (date.day() - 1) / 7 + 1;
        self.nth[usize::try_from(wd).expect("weekday is 0-6")] & (1 << week) != 0
    }
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// One number or name of a field; names count from `lo`.
fn value(item: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u32, FieldProblem> {
    let v = match names.iter().position(|n| n.eq_ignore_ascii_case(item)) {
        Some(i) => lo + u32::try_from(i).expect("a dozen names"),
        None => item.parse::<u32>().map_err(|_| FieldProblem::NotANumber {
            item: item.to_string(),
        })?,
    };
    if v < lo || v > hi {
        return Err(FieldProblem::OutOfRange {
            item: item.to_string(),
            lo,
            hi,
        });
    }
    Ok(v)
}

/// `*`, `a`, `a-b`, each with an optional `/step`, comma-separated: the set
/// as bits.
fn parse_list(field: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u64, FieldProblem> {
    let mut bits = 0u64;
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step = s.parse::<u32>().ok().filter(|s| *s > 0).ok_or_else(|| {
                    FieldProblem::BadStep {
                        step: s.to_string(),
                    }
                })?;
                (r, Some(step))
            }
            None => (item, None),
        };
        let (a, b) = match range {
            "*" | "?" => (lo, hi),
            _ => match range.split_once('-') {
                Some((a, b)) => (value(a, lo, hi, names)?, value(b, lo, hi, names)?),
                None => {
                    let a = value(range, lo, hi, names)?;
                    (a, if step.is_some() { hi } else { a })
                }
            },
        };
        if a > b {
            return Err(FieldProblem::Backwards {
                range: range.to_string(),
            });
        }
        let mut v = a;
        while v <= b {
            bits |= 1 << v;
            v += step.unwrap_or(1);
        }
    }
    Ok(bits)
}

fn parse_dom(field: &str) -> Result<DaysOfMonth, FieldProblem> {
    let mut dom = DaysOfMonth {
        star: field.starts_with('*') || field == "?",
        ..DaysOfMonth::default()
    };
    for item in field.split(',') {
        match item.to_ascii_uppercase().as_str() {
            "L" => dom.last = true,
            "LW" => dom.last_weekday = true,
            up if up.ends_with('W') => {
                let n = value(&up[..up.len() - 1], 1, 31, &[])?;
                dom.nearest_weekday |= 1 << n;
            }
            _ => {
                let bits = parse_list(item, 1, 31, &[])?;
                dom.days |= u32::try_from(bits).expect("days are 1-31");
            }
        }
    }
    Ok(dom)
}

fn parse_dow(field: &str) -> Result<DaysOfWeek, FieldProblem> {
    let mut dow = DaysOfWeek {
        star: field.starts_with('*') || field == "?",
        ..DaysOfWeek::default()
    };
    let weekday = |s: &str| value(s, 0, 7, &WEEKDAYS).map(|v| v % 7);
    for item in field.split(',') {
        let up = item.to_ascii_uppercase();
        if let Some((day, k)) = up.split_once('#') {
            let k = value(k, 1, 5, &[])?;
            let day = usize::try_from(weekday(day)?).expect("weekday is 0-6");
            dow.nth[day] |= 1 << k;
        } else if let Some(day) = up.strip_suffix('L').filter(|d| !d.is_empty()) {
            dow.last |= 1 << weekday(day)?;
        } else {
            let bits = parse_list(item, 0, 7, &WEEKDAYS)?;
            // 7 is Sunday too.
            let bits = bits | (bits >> 7);
            dow.days |= u8::try_from(bits & 0x7f).expect("masked to 7 bits");
        }
    }
    Ok(dow)
}

#[cfg(test)]
mod tests {
    use super::{CronError, CronField, FieldProblem, Schedule, ScheduleError};

    fn at(text: &str) -> i64 {
        text.parse::<jiff::Timestamp>().unwrap().as_second()
    }

    #[test]
    fn fires_on_the_zones_civil_clock() {
        let s = Schedule::parse("0 6 * * *", "Europe/Paris").unwrap();
        // 06:00 in Paris in September is 04:00 UTC.
        assert_eq!(
            s.next_after(at("2026-09-20T03:00:00Z")),
            Some(at("2026-09-20T04:00:00Z"))
        );
        assert_eq!(
            s.next_after(at("2026-09-20T04:00:00Z")),
            Some(at("2026-09-21T04:00:00Z"))
        );
        let utc = Schedule::parse("*/15 * * * *", "UTC").unwrap();
        assert_eq!(
            utc.next_after(at("2026-09-20T03:07:00Z")),
            Some(at("2026-09-20T03:15:00Z"))
        );
    }

    #[test]
    fn a_repeated_hour_fires_a_fixed_time_once() {
        // 2026-10-25: Paris repeats 02:00-03:00.
        let s = Schedule::parse("30 2 * * *", "Europe/Paris").unwrap();
        let first = s.next_after(at("2026-10-24T23:00:00Z")).unwrap();
        assert_eq!(first, at("2026-10-25T00:30:00Z"));
        assert_eq!(s.next_after(first), Some(at("2026-10-26T01:30:00Z")));
    }

    #[test]
    fn a_wildcard_schedule_only_in_skipped_minutes_never_fires() {
        // The second Sunday of March is New York's spring-forward day.
        let s = Schedule::parse("*/30 2 * 3 SUN#2", "America/New_York").unwrap();
        assert_eq!(s.next_after(at("2026-01-01T00:00:00Z")), None);
        let fixed = Schedule::parse("30 2 * 3 SUN#2", "America/New_York").unwrap();
        assert_eq!(
            fixed.next_after(at("2026-01-01T00:00:00Z")),
            Some(at("2026-03-08T07:00:00Z"))
        );
    }

    #[test]
    fn bad_expressions_say_which_field_which_value_and_why() {
        let syntax = |text: &str| match Schedule::parse(text, "UTC") {
            Err(ScheduleError::Syntax(e)) => e,
            other => panic!("{text}: {other:?}"),
        };
        let field = |text: &str| match syntax(text) {
            CronError::Field { field, problem, .. } => (field, problem),
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(
            syntax("0 6 * *"),
            CronError::FieldCount {
                text: "0 6 * *".into(),
                found: 4
            }
        );
        assert!(syntax("0 6 * *").to_string().contains("4 fields"));
        let out_of_range = |item: &str, lo, hi| FieldProblem::OutOfRange {
            item: item.into(),
            lo,
            hi,
        };
        assert_eq!(
            field("0 25 * * *"),
            (CronField::Hour, out_of_range("25", 0, 23))
        );
        assert!(syntax("0 25 * * *")
            .to_string()
            .contains("hour `25` is outside 0-23"));
        assert_eq!(
            field("*/0 * * * *"),
            (
                CronField::Minute,
                FieldProblem::BadStep { step: "0".into() }
            )
        );
        assert_eq!(
            field("0 0 * * MON#6"),
            (CronField::DayOfWeek, out_of_range("6", 1, 5))
        );
        assert_eq!(
            field("0 0 5-1 * *"),
            (
                CronField::DayOfMonth,
                FieldProblem::Backwards {
                    range: "5-1".into()
                }
            )
        );
        assert_eq!(
            field("0 0 * FOO *"),
            (
                CronField::Month,
                FieldProblem::NotANumber { item: "FOO".into() }
            )
        );
        assert!(matches!(
            Schedule::parse("0 6 * * *", "Mars/Olympus"),
            Err(ScheduleError::Zone { zone, .. }) if zone == "Mars/Olympus"
        ));
        assert!(matches!(
            Schedule::parse("0 0 30 2 *", "UTC"),
            Err(ScheduleError::NeverFires { text }) if text == "0 0 30 2 *"
        ));
    }
}
