//! Partitions: schemes (time grains in a timezone, or declared keys), the
//! keys of a task partitioned by several of them, and the one mapping that
//! says which upstream partitions a downstream partition needs.
//!
//! ```text
//!  scheme    minutely 2026-09-20T13:05 │ hourly 2026-09-20T13 │ daily 2026-09-20 │ weekly 2026-W38 │ monthly 2026-09 │ static eu
//!  task key  the dimensions' keys joined by `|` in `partitioned_by` order: eu|2026-09-20
//!            no dimension (`partitioned_by = []`): the one key `all`
//!  mapping   downstream key + upstream dimensions (+ offset/window) ─► upstream keys, in order
//! ```
//!
//! Everything here is pure: keys in, keys out. Plans, pinning, staleness and
//! backfills all call it, so they cannot disagree.

pub mod dims;
pub mod mapping;
pub mod readers;
pub mod time;

pub use dims::{Dimension, Dims, PartitionKey, UNPARTITIONED};
pub use mapping::{map_keys, MapError, Shift};
pub use readers::readers;
pub use time::{Grain, TimeScheme, Zone};

/// A validated partition scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionScheme {
    /// Periods of a grain in a timezone.
    Time(TimeScheme),
    /// A fixed list of keys.
    Static {
        /// The keys in declaration order.
        keys: Vec<String>,
    },
}

impl PartitionScheme {
    /// Every key, in order; an open-ended time scheme ends at its latest
    /// complete period at `now` (seconds since the epoch).
    pub fn keys(&self, now: i64) -> Vec<String> {
        match self {
            PartitionScheme::Static { keys } => keys.clone(),
            PartitionScheme::Time(t) => (t.start..=t.last(now)).map(|p| t.key(p)).collect(),
        }
    }

    /// The latest complete partition (capped at `end`) of a time scheme;
    /// every key of a static one (a static key has no "latest").
    pub fn latest(&self, now: i64) -> Vec<String> {
        match self {
            PartitionScheme::Static { keys } => keys.clone(),
            PartitionScheme::Time(t) => t.latest(now).map(|p| t.key(p)).into_iter().collect(),
        }
    }

    /// Whether `key` is a partition of the scheme at `now`.
    pub fn contains(&self, key: &str, now: i64) -> bool {
        match self {
            PartitionScheme::Static { keys } => keys.iter().any(|k| k == key),
            PartitionScheme::Time(t) => t.parse(key).is_some_and(|p| t.in_range(p, now)),
        }
    }

    /// The keys of a range of civil days (`first..=last`, days since the
    /// epoch): every period any of whose days is in it, inside the scheme's
    /// range. Static schemes have no days: all their keys.
    pub fn days_range(&self, first: i64, last: i64, now: i64) -> Vec<String> {
        match self {
            PartitionScheme::Static { keys } => keys.clone(),
            PartitionScheme::Time(t) => {
                let (a, b) = match t.grain {
                    Grain::Minutely(_) | Grain::Hourly => (
                        t.first_starting_at(t.zone_midnight(first)),
                        t.first_starting_at(t.zone_midnight(last + 1)) - 1,
                    ),
                    _ => (t.of_day(first), t.of_day(last)),
                };
                let (a, b) = (a.max(t.start), b.min(t.last(now)));
                (a..=b).map(|p| t.key(p)).collect()
            }
        }
    }

    /// The key before `key`, if any (for `depends_on_past`).
    pub fn previous(&self, key: &str) -> Option<String> {
        match self {
            PartitionScheme::Static { .. } => None,
            PartitionScheme::Time(t) => {
                let p = t.parse(key)?;
                (p > t.start).then(|| t.key(p - 1))
            }
        }
    }

    /// When a time partition's interval ends, in seconds since the epoch;
    /// `None` for static keys.
    pub fn interval_end(&self, key: &str) -> Option<i64> {
        match self {
            PartitionScheme::Static { .. } => None,
            PartitionScheme::Time(t) => Some(t.period_end(t.parse(key)?)),
        }
    }

    /// The time scheme, if it is one.
    pub fn time(&self) -> Option<&TimeScheme> {
        match self {
            PartitionScheme::Time(t) => Some(t),
            PartitionScheme::Static { .. } => None,
        }
    }
}

/// A key (or any argument) as a suggested command writes it, so that it
/// pastes into a POSIX shell as one word: as it is when every character is
/// plain (`2026-09-20`, `all`), else in single quotes (`'eu|2026-09-20'`: a
/// bare `|` would be a pipe).
pub fn shell_word(text: &str) -> std::borrow::Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.,:/+=@%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(format!("'{}'", text.replace('\'', r"'\''")))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    // A suggested `--partition eu|2026-11-15` was a pipe
    #[test]
    fn keys_are_one_shell_word() {
        assert_eq!(shell_word("2026-09-20"), "2026-09-20");
        assert_eq!(shell_word("2026-10-25T02+02:00"), "2026-10-25T02+02:00");
        assert_eq!(shell_word("all"), "all");
        assert_eq!(shell_word("eu|2026-11-15"), "'eu|2026-11-15'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
