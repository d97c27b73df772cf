//! `schedule = "0 6 * * *"`: a five-field cron expression read on the
//! civil clock of a timezone.
//!
//! croner finds the next matching civil minute; jiff (with weir's bundled
//! tzdb) turns it into an instant. A civil time that a DST change skips
//! fires at the first instant after the gap (jiff's `compatible`), and one
//! it repeats fires once, at its first occurrence.

use chrono::{Datelike, TimeZone as _, Timelike};
use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// A parsed schedule in a timezone.
#[derive(Clone)]
pub struct Schedule {
    text: String,
    cron: croner::Cron,
    tz: TimeZone,
    zone: String,
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

impl Schedule {
    /// Parses a five-field expression (minute hour day-of-month month
    /// day-of-week); why not, in words.
    pub fn parse(text: &str, zone: &str) -> Result<Schedule, String> {
        let fields = text.split_whitespace().count();
        if fields != 5 {
            return Err(format!(
                "`{text}` has {fields} fields; a schedule has five: minute hour day-of-month month day-of-week"
            ));
        }
        let cron = croner::Cron::new(text)
            .parse()
            .map_err(|e| format!("`{text}` is not a cron expression: {e}"))?;
        let tz = jiff::tz::db()
            .get(zone)
            .map_err(|e| format!("unknown timezone `{zone}`: {e}"))?;
        Ok(Schedule {
            text: text.to_string(),
            cron,
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

    /// The first firing strictly after `after` (seconds since the epoch).
    pub fn next_after(&self, after: i64) -> Option<i64> {
        let mut civil = self.tz.to_datetime(Timestamp::from_second(after).ok()?);
        // The second pass of a repeated civil hour maps back to an instant
        // at or before `after` (its first pass): search on from it.
        for _ in 0..4 {
            civil = self.next_civil(civil)?;
            let at = self.tz.to_ambiguous_timestamp(civil).compatible().ok()?;
            if at.as_second() > after {
                return Some(at.as_second());
            }
        }
        None
    }

    /// The first matching civil minute after `civil`.
    fn next_civil(&self, civil: DateTime) -> Option<DateTime> {
        let naive = chrono::NaiveDate::from_ymd_opt(
            i32::from(civil.year()),
            u32::try_from(civil.month()).ok()?,
            u32::try_from(civil.day()).ok()?,
        )?
        .and_hms_opt(
            u32::try_from(civil.hour()).ok()?,
            u32::try_from(civil.minute()).ok()?,
            u32::try_from(civil.second()).ok()?,
        )?;
        let next = self
            .cron
            .find_next_occurrence(&chrono::Utc.from_utc_datetime(&naive), false)
            .ok()?
            .naive_utc();
        DateTime::new(
            i16::try_from(next.year()).ok()?,
            i8::try_from(next.month()).ok()?,
            i8::try_from(next.day()).ok()?,
            i8::try_from(next.hour()).ok()?,
            i8::try_from(next.minute()).ok()?,
            0,
            0,
        )
        .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::Schedule;

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
    fn a_repeated_hour_fires_once() {
        // 2026-10-25: Paris repeats 02:00-03:00.
        let s = Schedule::parse("30 2 * * *", "Europe/Paris").unwrap();
        let first = s.next_after(at("2026-10-24T23:00:00Z")).unwrap();
        assert_eq!(first, at("2026-10-25T00:30:00Z"));
        assert_eq!(s.next_after(first), Some(at("2026-10-26T01:30:00Z")));
    }

    #[test]
    fn bad_expressions_say_why() {
        assert!(Schedule::parse("0 6 * *", "UTC")
            .unwrap_err()
            .contains("4 fields"));
        assert!(Schedule::parse("0 25 * * *", "UTC").is_err());
        assert!(Schedule::parse("0 6 * * *", "Mars/Olympus").is_err());
    }
}
