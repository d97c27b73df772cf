//! Which keys of a task a command covers. There is no catch-up: with no
//! explicit partitions, only the latest complete period of each time
//! dimension is selected (every key of a static one).

use crate::manifest::Backfill;
use crate::partition::{Dims, PartitionScheme};

/// The keys of a task with dimensions `dims` in the latest scope.
pub fn latest(dims: &Dims, now: i64) -> Vec<String> {
    let per: Vec<Vec<String>> = dims.0.iter().map(|d| d.scheme.latest(now)).collect();
    Dims::product(&per)
}

/// The keys of a task that `given` (`--partition` values) select: a full
/// key, or keys of single dimensions whose product covers the others (a
/// static dimension no key names takes all its keys; a time one none).
pub fn explicit(dims: &Dims, given: &[String], now: i64) -> Vec<String> {
    let mut out: Vec<String> = given
        .iter()
        .filter(|k| dims.contains(k, now))
        .cloned()
        .collect();
    if dims.0.len() > 1 {
        let per: Vec<Vec<String>> = dims
            .0
            .iter()
            .map(|d| {
                let named: Vec<String> = given
                    .iter()
                    .filter(|k| d.scheme.contains(k, now))
                    .cloned()
                    .collect();
                match (&d.scheme, named.is_empty()) {
                    (PartitionScheme::Static { keys }, true) => keys.clone(),
                    _ => named,
                }
            })
            .collect();
        // Only when some dimension was named: a bare static product is not
        // what anybody asked for.
        let named_any = dims
            .0
            .iter()
            .any(|d| given.iter().any(|k| d.scheme.contains(k, now)));
        if named_any {
            for k in Dims::product(&per) {
                if !out.contains(&k) {
                    out.push(k);
                }
            }
        }
    }
    sort(dims, &mut out);
    out
}

/// The keys of a task in a backfill: periods of each time dimension any of
/// whose days is in `from..=to`, static dimensions narrowed by `keys` (or
/// the `from..=to` key range of a static-only backfill).
pub fn backfill(dims: &Dims, backfill: &Backfill, now: i64) -> Vec<String> {
    let per: Vec<Vec<String>> = dims
        .0
        .iter()
        .map(|d| {
            if let Some(narrow) = backfill.keys.get(&d.name) {
                return narrow.clone();
            }
            match (&d.scheme, backfill.days) {
                (PartitionScheme::Time(_), Some((a, b))) => d.scheme.days_range(a, b, now),
                (PartitionScheme::Static { keys }, None) => {
                    let pos = |k: &str| keys.iter().position(|x| x == k);
                    match (pos(&backfill.from), pos(&backfill.to)) {
                        (Some(a), Some(b)) if a <= b => keys[a..=b].to_vec(),
                        _ => keys.clone(),
                    }
                }
                (PartitionScheme::Static { keys }, Some(_)) => keys.clone(),
                (PartitionScheme::Time(_), None) => Vec::new(),
            }
        })
        .collect();
    Dims::product(&per)
}

/// Sorts keys in scheme order: by each dimension's period or declared
/// position, the first dimension first.
pub fn sort(dims: &Dims, keys: &mut [String]) {
    keys.sort_by_cached_key(|k| order(dims, k));
}

/// The sort key of a task key.
pub fn order(dims: &Dims, key: &str) -> Vec<i64> {
    let Some(parts) = dims.split(key) else {
        return Vec::new();
    };
    parts
        .iter()
        .zip(&dims.0)
        .map(|(k, d)| match &d.scheme {
            PartitionScheme::Time(t) => t.parse(k).unwrap_or(i64::MAX),
            PartitionScheme::Static { keys } => keys
                .iter()
                .position(|x| x == k)
                .map_or(i64::MAX, |p| p as i64),
        })
        .collect()
}
