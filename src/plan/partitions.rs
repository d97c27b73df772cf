//! Expanding partition schemes into keys, and choosing which keys a command
//! covers. There is no catch-up: with no explicit partitions, only the latest
//! complete one is selected.

use jiff::civil::Date;
use jiff::ToSpan;

use crate::manifest::PartitionScheme;

/// Every key of a scheme, in order. An open-ended daily scheme ends at the
/// latest complete day (`today - 1`).
pub fn keys(scheme: &PartitionScheme, today: Date) -> Vec<String> {
    match scheme {
        PartitionScheme::Static { keys } => keys.clone(),
        PartitionScheme::Daily { start, end } => {
            let last = last_day(*end, today);
            days(*start, last)
        }
    }
}

/// The latest complete partitions: yesterday (capped at `end`) for daily
/// schemes, every key for static ones (a static key has no "latest").
pub fn latest(scheme: &PartitionScheme, today: Date) -> Vec<String> {
    match scheme {
        PartitionScheme::Static { keys } => keys.clone(),
        PartitionScheme::Daily { start, end } => {
            let last = last_day(*end, today);
            if last < *start {
                Vec::new()
            } else {
                vec![last.to_string()]
            }
        }
    }
}

/// Whether `key` is a partition of the scheme.
pub fn contains(scheme: &PartitionScheme, key: &str, today: Date) -> bool {
    match scheme {
        PartitionScheme::Static { keys } => keys.iter().any(|k| k == key),
        PartitionScheme::Daily { start, end } => match parse_day(key) {
            Some(day) => day >= *start && day <= last_day(*end, today),
            None => false,
        },
    }
}

/// The keys from `from` to `to` inclusive, in scheme order.
pub fn range(scheme: &PartitionScheme, from: &str, to: &str, today: Date) -> Vec<String> {
    match scheme {
        PartitionScheme::Static { keys } => {
            let pos = |k: &str| keys.iter().position(|x| x == k);
            match (pos(from), pos(to)) {
                (Some(a), Some(b)) if a <= b => keys[a..=b].to_vec(),
                _ => Vec::new(),
            }
        }
        PartitionScheme::Daily { .. } => match (parse_day(from), parse_day(to)) {
            (Some(a), Some(b)) => days(a, b)
                .into_iter()
                .filter(|k| contains(scheme, k, today))
                .collect(),
            _ => Vec::new(),
        },
    }
}

/// The key before `key` in the scheme, if any (for `depends_on_past`).
pub fn previous(scheme: &PartitionScheme, key: &str) -> Option<String> {
    match scheme {
        PartitionScheme::Static { .. } => None,
        PartitionScheme::Daily { start, .. } => {
            let day = parse_day(key)?;
            (day > *start)
                .then(|| day.yesterday().ok())
                .flatten()
                .map(|d| d.to_string())
        }
    }
}

/// When a daily partition's interval ends (midnight UTC after the day), as
/// seconds since the Unix epoch; `None` for static keys.
pub fn interval_end(scheme: &PartitionScheme, key: &str) -> Option<i64> {
    match scheme {
        PartitionScheme::Static { .. } => None,
        PartitionScheme::Daily { .. } => {
            let next = parse_day(key)?.tomorrow().ok()?;
            let ts = next
                .to_zoned_datetime(jiff::tz::TimeZone::UTC)
                .ok()?
                .timestamp();
            Some(ts.as_second())
        }
    }
}

fn last_day(end: Option<Date>, today: Date) -> Date {
    let yesterday = today.yesterday().unwrap_or(today);
    match end {
        Some(end) => end.min(yesterday),
        None => yesterday,
    }
}

fn parse_day(key: &str) -> Option<Date> {
    (key.len() == 10)
        .then(|| key.parse::<Date>().ok())
        .flatten()
}

fn days(first: Date, last: Date) -> Vec<String> {
    let mut out = Vec::new();
    let mut day = first;
    while day <= last {
        out.push(day.to_string());
        match day.checked_add(1.day()) {
            Ok(next) => day = next,
            Err(_) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Date {
        s.parse().unwrap()
    }

    #[test]
    fn daily_keys_stop_at_the_latest_complete_day() {
        let open = PartitionScheme::Daily {
            start: d("2026-01-01"),
            end: None,
        };
        let today = d("2026-01-04");
        assert_eq!(
            keys(&open, today),
            ["2026-01-01", "2026-01-02", "2026-01-03"]
        );
        assert_eq!(latest(&open, today), ["2026-01-03"]);
        assert!(!contains(&open, "2026-01-04", today));
        let closed = PartitionScheme::Daily {
            start: d("2024-01-01"),
            end: Some(d("2025-12-30")),
        };
        assert_eq!(keys(&closed, today).len(), 730);
        assert_eq!(latest(&closed, today), ["2025-12-30"]);
        assert_eq!(previous(&closed, "2024-01-01"), None);
        assert_eq!(
            previous(&closed, "2024-03-01").as_deref(),
            Some("2024-02-29")
        );
    }
}
