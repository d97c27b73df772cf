//! A task's dimensions and its partition keys: the product of its schemes,
//! keys joined by `|` in `partitioned_by` order.

use std::fmt;

use super::PartitionScheme;

/// The one key of an unpartitioned task (`partitioned_by = []`).
pub const UNPARTITIONED: &str = "all";

/// The separator of dimension keys inside a task's key. Static keys cannot
/// contain it and time keys never do, so a key splits back unambiguously.
pub const SEPARATOR: char = '|';

/// A partition key of a task: one key per dimension joined by `|`, or
/// [`UNPARTITIONED`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionKey(String);

impl PartitionKey {
    /// Wraps a key as written (`eu|2026-09-20`).
    pub fn new(key: impl Into<String>) -> PartitionKey {
        PartitionKey(key.into())
    }

    /// Joins one key per dimension; no dimension gives [`UNPARTITIONED`].
    pub fn join<S: AsRef<str>>(parts: &[S]) -> PartitionKey {
        if parts.is_empty() {
            return PartitionKey(UNPARTITIONED.into());
        }
        let mut out = String::new();
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                out.push(SEPARATOR);
            }
            out.push_str(p.as_ref());
        }
        PartitionKey(out)
    }

    /// The key text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for PartitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One dimension of a task: a named scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dimension {
    /// The scheme's name (`[partitions.NAME]`).
    pub name: String,
    /// The scheme.
    pub scheme: PartitionScheme,
}

/// A task's dimensions in `partitioned_by` order; empty = unpartitioned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dims(pub Vec<Dimension>);

impl Dims {
    /// The scheme names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|d| d.name.as_str()).collect()
    }

    /// The dimension of scheme `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.0.iter().position(|d| d.name == name)
    }

    /// Whether there is no dimension.
    pub fn is_unpartitioned(&self) -> bool {
        self.0.is_empty()
    }

    /// The dimension `depends_on_past` and "previous" follow: the last time
    /// dimension.
    pub fn time_dim(&self) -> Option<usize> {
        self.0
            .iter()
            .rposition(|d| matches!(d.scheme, PartitionScheme::Time(_)))
    }

    /// A key's parts, one per dimension; `None` if the count is wrong.
    pub fn split<'k>(&self, key: &'k str) -> Option<Vec<&'k str>> {
        if self.0.is_empty() {
            return (key == UNPARTITIONED).then(Vec::new);
        }
        let parts: Vec<&str> = key.split(SEPARATOR).collect();
        (parts.len() == self.0.len()).then_some(parts)
    }

    /// Whether `key` is a partition of the product at `now`.
    pub fn contains(&self, key: &str, now: i64) -> bool {
        self.split(key).is_some_and(|parts| {
            parts
                .iter()
                .zip(&self.0)
                .all(|(k, d)| d.scheme.contains(k, now))
        })
    }

    /// The product of per-dimension key lists, row-major (the last
    /// dimension varies fastest).
    pub fn product(per_dim: &[Vec<String>]) -> Vec<String> {
        let mut out = vec![String::new()];
        if per_dim.is_empty() {
            return vec![UNPARTITIONED.to_string()];
        }
        for (i, keys) in per_dim.iter().enumerate() {
            let mut next = Vec::with_capacity(out.len() * keys.len());
            for prefix in &out {
                for k in keys {
                    let mut s = String::with_capacity(prefix.len() + 1 + k.len());
                    s.push_str(prefix);
                    if i > 0 {
                        s.push(SEPARATOR);
                    }
                    s.push_str(k);
                    next.push(s);
                }
            }
            out = next;
        }
        out
    }

    /// Every key at `now`.
    pub fn keys(&self, now: i64) -> Vec<String> {
        let per: Vec<Vec<String>> = self.0.iter().map(|d| d.scheme.keys(now)).collect();
        Dims::product(&per)
    }

    /// The key before `key` along the time dimension, if any.
    pub fn previous(&self, key: &str) -> Option<String> {
        let t = self.time_dim()?;
        let mut parts: Vec<String> = self.split(key)?.into_iter().map(String::from).collect();
        parts[t] = self.0[t].scheme.previous(&parts[t])?;
        Some(PartitionKey::join(&parts).into_string())
    }

    /// When the key's time period ends (seconds since the epoch); `None`
    /// without a time dimension.
    pub fn interval_end(&self, key: &str) -> Option<i64> {
        let t = self.time_dim()?;
        let parts = self.split(key)?;
        self.0[t].scheme.interval_end(parts[t])
    }

    /// "region × day (daily, Europe/Paris)", "daily", "unpartitioned" …,
    /// for plans.
    pub fn describe(&self) -> String {
        if self.0.is_empty() {
            return "unpartitioned".into();
        }
        self.0
            .iter()
            .map(|d| match &d.scheme {
                PartitionScheme::Static { .. } => d.name.clone(),
                PartitionScheme::Time(t) => {
                    let zone = (!t.zone.is_utc()).then(|| t.zone.name());
                    match (d.name == t.grain.as_str(), zone) {
                        (true, None) => d.name.clone(),
                        (true, Some(z)) => format!("{} ({z})", d.name),
                        (false, None) => format!("{} ({})", d.name, t.grain),
                        (false, Some(z)) => format!("{} ({}, {z})", d.name, t.grain),
                    }
                }
            })
            .collect::<Vec<_>>()
            .join(" × ")
    }
}
