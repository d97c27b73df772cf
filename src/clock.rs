//! The engine's notion of "now". A period is complete once it has ended in
//! its scheme's timezone, so the latest complete day of a UTC scheme is
//! yesterday (UTC).
//!
//! `WEIR_NOW=2026-09-21T00:30:00Z` (any RFC 3339 instant) or
//! `WEIR_TODAY=YYYY-MM-DD` (midnight UTC of that day) pins now: for tests and
//! for rehearsing what a scheduled run at that time would do. Neither moves
//! wall-clock timestamps in events or records.
//!
//! `WEIR_CLOCK_OFFSET=10m` (or `-10m`) shifts this engine's wall clock, as a
//! misset host clock would: for rehearsing clock skew between engines.
//! `weir serve` compares its clock with the warehouse's and decides
//! nothing while they disagree by more than [`MAX_SKEW_MS`].
//!
//! `weir serve` makes the pinned instant its clock's start
//! ([`start_advancing`]): from there the clock advances in real time, so
//! serve can be started at 11:59:58 of a day it rehearses and see that day
//! end two seconds later.

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// Where an advancing clock started: milliseconds since the epoch, and
/// the monotonic instant it did.
static ADVANCING: std::sync::OnceLock<(i64, std::time::Instant)> = std::sync::OnceLock::new();

/// From now on, [`now`] starts at what it says now (`WEIR_NOW` or the
/// real clock) and advances in real time (`weir serve`).
pub fn start_advancing() {
    ADVANCING.get_or_init(|| (pinned_ms(), std::time::Instant::now()));
}

/// Now in milliseconds since the epoch (see [`now`]).
pub fn now_ms() -> i64 {
    match ADVANCING.get() {
        Some((base, at)) => base + i64::try_from(at.elapsed().as_millis()).unwrap_or(i64::MAX / 2),
        None => pinned_ms(),
    }
}

/// The instant `WEIR_NOW` or `WEIR_TODAY` pins, read from the environment
/// once per process: every caller sees one answer, and a clock read costs
/// no environment lookup.
fn pinned() -> Option<Timestamp> {
    static PINNED: std::sync::OnceLock<Option<Timestamp>> = std::sync::OnceLock::new();
    *PINNED.get_or_init(|| {
        if let Some(ts) = std::env::var("WEIR_NOW")
            .ok()
            .and_then(|s| s.trim().parse::<Timestamp>().ok())
        {
            return Some(ts);
        }
        std::env::var("WEIR_TODAY")
            .ok()
            .and_then(|s| s.trim().parse::<Date>().ok())
            .and_then(|day| day.to_zoned_datetime(TimeZone::UTC).ok())
            .map(|zoned| zoned.timestamp())
    })
}

fn pinned_ms() -> i64 {
    pinned().map_or_else(system_ms, |t| t.as_millisecond())
}

/// How far this engine's clock and the warehouse's may disagree before
/// `weir serve` stops deciding about periods.
pub const MAX_SKEW_MS: i64 = 30_000;

/// The host's wall clock in milliseconds, shifted by `WEIR_CLOCK_OFFSET`:
/// what a skew check compares with the store's time (a pinned `WEIR_NOW`
/// is a rehearsal, not a skew).
pub fn system_ms() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    let offset = *OFFSET.get_or_init(|| {
        let Ok(text) = std::env::var("WEIR_CLOCK_OFFSET") else {
            return 0;
        };
        let text = text.trim();
        let (sign, body) = match text.strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, text.strip_prefix('+').unwrap_or(text)),
        };
        let (digits, unit) = body.split_at(
            body.find(|c: char| !c.is_ascii_digit())
                .unwrap_or(body.len()),
        );
        let scale = match unit {
            "ms" => 1,
            "" | "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return 0,
        };
        digits
            .parse::<i64>()
            .map_or(0, |n| sign * n.saturating_mul(scale))
    });
    Timestamp::now().as_millisecond() + offset
}

/// Now, as seconds since the Unix epoch, honouring `WEIR_NOW` and
/// `WEIR_TODAY` (and an advancing clock, [`start_advancing`]).
pub fn now() -> i64 {
    if ADVANCING.get().is_some() {
        return now_ms().div_euclid(1000);
    }
    now_pinned()
}

fn now_pinned() -> i64 {
    pinned().map_or_else(|| system_ms().div_euclid(1000), |t| t.as_second())
}

/// The monotonic instant `after` from now, or a point far in the future
/// when that is beyond what `Instant` can represent: deadlines come from
/// manifest durations, and a huge one must mean "never", not a panic.
pub fn instant_after(after: std::time::Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    now.checked_add(after)
        .or_else(|| now.checked_add(std::time::Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(now)
}

/// Pause `n` (0 for the first) of a wait that starts at `first` and
/// doubles up to `cap`: weir's one backoff without jitter, for every loop
/// that waits on something outside it (a sender's retries, a job's poll, a
/// full disk, a readiness recheck). A retry class's backoff is the
/// manifest's, with jitter (`exec::retry`). Any `n` is fine: it saturates.
pub fn doubling(
    first: std::time::Duration,
    cap: std::time::Duration,
    n: u32,
) -> std::time::Duration {
    first.saturating_mul(1 << n.min(16)).min(cap)
}

/// The current instant, RFC 3339 in UTC with millisecond precision.
pub fn now_rfc3339() -> String {
    let now = Timestamp::now();
    format!("{:.3}", now)
}

#[cfg(test)]
mod instant_tests {
    use std::time::Duration;

    #[test]
    fn a_doubling_wait_starts_at_its_first_pause_and_stays_at_its_cap() {
        let s = Duration::from_secs;
        let waits: Vec<_> = (0..5).map(|n| super::doubling(s(1), s(6), n)).collect();
        assert_eq!(waits, [s(1), s(2), s(4), s(6), s(6)]);
        assert_eq!(super::doubling(s(1), Duration::MAX, u32::MAX), s(1 << 16));
        assert_eq!(
            super::doubling(Duration::MAX, Duration::MAX, 3),
            Duration::MAX
        );
    }

    #[test]
    fn instant_after_a_huge_duration_is_far_away_not_a_panic() {
        let far = super::instant_after(Duration::MAX);
        assert!(far > std::time::Instant::now() + Duration::from_secs(365 * 86_400));
        let soon = super::instant_after(Duration::from_secs(1));
        assert!(soon < far);
    }
}
