//! The engine's notion of "today". Daily partitions are complete once their
//! day has ended in UTC, so the latest complete partition is yesterday (UTC).
//!
//! `WEIR_TODAY=YYYY-MM-DD` pins today's date: for tests and for rehearsing
//! what a scheduled run on a given day would do. It never moves wall-clock
//! timestamps in events or records.

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// Today's date in UTC, or `WEIR_TODAY` when set to a valid date.
pub fn today() -> Date {
    std::env::var("WEIR_TODAY")
        .ok()
        .and_then(|s| s.trim().parse::<Date>().ok())
        .unwrap_or_else(|| Timestamp::now().to_zoned_datetime(TimeZone::UTC).date())
}

/// The current instant, RFC 3339 in UTC with millisecond precision.
pub fn now_rfc3339() -> String {
    let now = Timestamp::now();
    format!("{:.3}", now)
}
