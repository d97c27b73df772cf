//! The mapping: which upstream partitions one downstream partition needs.
//!
//! Dimension by dimension of the upstream:
//!
//! | upstream dimension                     | upstream keys                                     |
//! |----------------------------------------|---------------------------------------------------|
//! | same scheme as a downstream dimension  | the same key (identity)                           |
//! | finer time scheme                      | every period starting inside the downstream one  |
//! | coarser time scheme                    | the period containing the downstream one's start  |
//! | absent downstream (static or time)     | all its keys (fan-in)                             |
//!
//! A downstream dimension the upstream lacks fans out (it does not appear in
//! the upstream key). An unpartitioned upstream has its one key. A `Shift`
//! (an input's `offset` or `window`) widens the time dimension's periods
//! `[a, b]` to `[a + lo, b + hi]`, in the upstream's periods. A mapped period
//! outside the upstream's declared range is an error, never a silent gap.

use thiserror::Error;

use super::{Dims, Grain, PartitionKey, PartitionScheme, TimeScheme};

/// An input's override of the time dimension: periods `lo..=hi` relative to
/// what the rule maps to. `offset = k` is `k..=k`; `window = [-6, 0]` is
/// itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shift {
    /// First period, relative.
    pub lo: i64,
    /// Last period, relative.
    pub hi: i64,
}

impl Shift {
    /// No override.
    pub const NONE: Shift = Shift { lo: 0, hi: 0 };

    /// Whether this is no override.
    pub fn is_none(self) -> bool {
        self == Shift::NONE
    }
}

/// Why a downstream key cannot be mapped.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MapError {
    /// The downstream key is not a key of the downstream dimensions.
    #[error("`{key}` is not a partition key of dimensions {dims}")]
    BadKey {
        /// The key.
        key: String,
        /// The dimensions, described.
        dims: String,
    },
    /// A mapped period falls before the upstream scheme's start.
    #[error("needs `{scheme}` partition {key}, before the scheme's start {start}")]
    BeforeStart {
        /// Upstream scheme name.
        scheme: String,
        /// The period that does not exist.
        key: String,
        /// The scheme's first key.
        start: String,
    },
    /// A mapped period falls after the upstream scheme's declared end.
    #[error("needs `{scheme}` partition {key}, after the scheme's end {end}")]
    AfterEnd {
        /// Upstream scheme name.
        scheme: String,
        /// The period that does not exist.
        key: String,
        /// The scheme's last key.
        end: String,
    },
}

/// The upstream keys, in order, that downstream partition `key` of `down`
/// needs from an upstream partitioned by `up`, with the input's `shift`.
/// `now` (seconds since the epoch) ends open time ranges for fan-in.
pub fn map_keys(
    down: &Dims,
    key: &str,
    up: &Dims,
    shift: Shift,
    now: i64,
) -> Result<Vec<PartitionKey>, MapError> {
    let parts = down.split(key).ok_or_else(|| MapError::BadKey {
        key: key.to_string(),
        dims: down.describe(),
    })?;
    let down_time = down.time_dim();
    let mut per_dim: Vec<Vec<String>> = Vec::with_capacity(up.0.len());
    for u in &up.0 {
        let same = down.position(&u.name);
        let keys = match (&u.scheme, same) {
            (PartitionScheme::Static { .. }, Some(i)) => vec![parts[i].to_string()],
            (PartitionScheme::Static { keys }, None) => keys.clone(),
            (PartitionScheme::Time(ut), Some(i)) => {
                let p = ut.parse(parts[i]).ok_or_else(|| MapError::BadKey {
                    key: key.to_string(),
                    dims: down.describe(),
                })?;
                shifted(&u.name, ut, p, p, shift)?
            }
            (PartitionScheme::Time(ut), None) => match down_time {
                Some(d) => {
                    let PartitionScheme::Time(dt) = &down.0[d].scheme else {
                        unreachable!("time_dim names a time dimension")
                    };
                    let dp = dt.parse(parts[d]).ok_or_else(|| MapError::BadKey {
                        key: key.to_string(),
                        dims: down.describe(),
                    })?;
                    let (a, b) = across(dt, dp, ut);
                    shifted(&u.name, ut, a, b, shift)?
                }
                None => u.scheme.keys(now),
            },
        };
        per_dim.push(keys);
    }
    Ok(Dims::product(&per_dim)
        .into_iter()
        .map(PartitionKey::new)
        .collect())
}

/// The upstream periods `[a, b]` of time scheme `up` that downstream period
/// `p` of `down` maps to: those starting inside it (finer or equal), or the
/// one containing its start (coarser). Same grain and zone: the same period.
pub fn across(down: &TimeScheme, p: i64, up: &TimeScheme) -> (i64, i64) {
    if down.grain == up.grain && down.zone == up.zone {
        return (p, p);
    }
    let start = down.period_start(p);
    if finer_or_equal(up.grain, down.grain) {
        let end = down.period_end(p);
        let a = up.first_starting_at(start);
        let b = up.first_starting_at(end) - 1;
        (a, b)
    } else {
        let c = up.containing(start);
        (c, c)
    }
}

/// In words, the rule [`across`] follows from periods of `down` to those of
/// `up`: "each UTC day takes the America/New_York hours that start inside
/// it". Plans show it where the zones differ.
pub fn rule(down: &TimeScheme, up: &TimeScheme) -> String {
    let (dz, uz) = (down.zone.name(), up.zone.name());
    let (du, uu) = (down.grain.unit(), up.grain.unit());
    if finer_or_equal(up.grain, down.grain) {
        format!("each {dz} {du} takes the {uz} {uu}s that start inside it")
    } else {
        format!("each {dz} {du} takes the {uz} {uu} containing its start")
    }
}

/// Whether periods of `a` nest inside periods of `b` or are as long (a week
/// is neither inside a month nor the other way: weeks count as finer, so a
/// month takes the weeks that start in it).
fn finer_or_equal(a: Grain, b: Grain) -> bool {
    a <= b
}

fn shifted(
    name: &str,
    t: &TimeScheme,
    a: i64,
    b: i64,
    shift: Shift,
) -> Result<Vec<String>, MapError> {
    let (a, b) = (a + shift.lo, b + shift.hi);
    if a > b {
        return Ok(Vec::new());
    }
    if a < t.start {
        return Err(MapError::BeforeStart {
            scheme: name.to_string(),
            key: t.key(a),
            start: t.key(t.start),
        });
    }
    if let Some(end) = t.end {
        if b > end {
            return Err(MapError::AfterEnd {
                scheme: name.to_string(),
                key: t.key(b),
                end: t.key(end),
            });
        }
    }
    Ok((a..=b).map(|q| t.key(q)).collect())
}

#[cfg(test)]
mod tests {
    use super::super::{Dimension, Zone};
    use super::*;

    fn time(name: &str, grain: Grain, zone: &str, start: &str) -> Dimension {
        let probe = TimeScheme::probe(grain, Zone::get(zone).unwrap(), start);
        let start = probe.parse_bound(start).unwrap();
        Dimension {
            name: name.into(),
            scheme: PartitionScheme::Time(probe.with_range(start, None)),
        }
    }

    fn region() -> Dimension {
        Dimension {
            name: "region".into(),
            scheme: PartitionScheme::Static {
                keys: vec!["eu".into(), "us".into()],
            },
        }
    }

    fn keys(v: Vec<PartitionKey>) -> Vec<String> {
        v.into_iter().map(PartitionKey::into_string).collect()
    }

    const NOW: i64 = 1_800_000_000; // 2027-01-15

    // Each row of the mapping table in the module doc, with a shift and a
    // mapped period before the upstream's start, which is an error and
    // never a silent gap.
    #[test]
    fn downstream_keys_map_to_upstream_keys_by_the_rules_of_the_table() {
        let day = Dims(vec![time("day", Grain::Daily, "UTC", "2026-01-01")]);
        let week = Dims(vec![time("week", Grain::Weekly, "UTC", "2026-01-01")]);
        let month = Dims(vec![time("month", Grain::Monthly, "UTC", "2026-01")]);
        let region_day = Dims(vec![region(), day.0[0].clone()]);
        let none = Dims::default();
        let map = |down: &Dims, k: &str, up: &Dims, s: Shift| {
            keys(map_keys(down, k, up, s, NOW).unwrap())
        };
        // Identity.
        assert_eq!(map(&day, "2026-09-20", &day, Shift::NONE), ["2026-09-20"]);
        // Finer upstream: a week's seven days.
        let w = map(&week, "2026-W38", &day, Shift::NONE);
        assert_eq!(w.first().unwrap(), "2026-09-14");
        assert_eq!(w.last().unwrap(), "2026-09-20");
        assert_eq!(w.len(), 7);
        assert_eq!(map(&month, "2026-02", &day, Shift::NONE).len(), 28);
        // Coarser upstream: the containing month.
        assert_eq!(map(&day, "2026-09-20", &month, Shift::NONE), ["2026-09"]);
        // Fan-in over regions, fan-out from the day.
        assert_eq!(
            map(&day, "2026-09-20", &region_day, Shift::NONE),
            ["eu|2026-09-20", "us|2026-09-20"]
        );
        assert_eq!(
            map(&region_day, "eu|2026-09-20", &day, Shift::NONE),
            ["2026-09-20"]
        );
        // Unpartitioned both ways.
        assert_eq!(map(&day, "2026-09-20", &none, Shift::NONE), ["all"]);
        assert_eq!(map(&none, "all", &month, Shift::NONE).len(), 12);
        // Offset and window.
        assert_eq!(
            map(&day, "2026-09-20", &day, Shift { lo: -1, hi: -1 }),
            ["2026-09-19"]
        );
        let win = map(&day, "2026-09-20", &day, Shift { lo: -6, hi: 0 });
        assert_eq!(win.len(), 7);
        assert_eq!(win[0], "2026-09-14");
        // Before the start: an error naming the missing period.
        assert_eq!(
            map_keys(&day, "2026-01-01", &day, Shift { lo: -1, hi: -1 }, NOW),
            Err(MapError::BeforeStart {
                scheme: "day".into(),
                key: "2025-12-31".into(),
                start: "2026-01-01".into()
            })
        );
    }

    // Minute keys across New York's fall-back map to hours
    // and days by the rules of the table, offsets included
    #[test]
    fn minutely_maps_to_hourly_and_daily_across_dst() {
        let ny = "America/New_York";
        let min = Dims(vec![time(
            "minute",
            Grain::Minutely(15),
            ny,
            "2026-10-31T00:00",
        )]);
        let hour = Dims(vec![time("hour", Grain::Hourly, ny, "2026-10-31T00")]);
        let day = Dims(vec![time("day", Grain::Daily, ny, "2026-10-31")]);
        let map = |down: &Dims, k: &str, up: &Dims| {
            keys(map_keys(down, k, up, Shift::NONE, NOW).unwrap())
        };
        // Finer upstream: the quarter hours starting inside the repeated hours.
        assert_eq!(
            map(&hour, "2026-11-01T01-04:00", &min),
            [
                "2026-11-01T01:00-04:00",
                "2026-11-01T01:15-04:00",
                "2026-11-01T01:30-04:00",
                "2026-11-01T01:45-04:00"
            ]
        );
        assert_eq!(
            map(&hour, "2026-11-01T01-05:00", &min)[0],
            "2026-11-01T01:00-05:00"
        );
        let whole_day = map(&day, "2026-11-01", &min);
        assert_eq!(whole_day.len(), 25 * 4);
        assert_eq!(whole_day.first().unwrap(), "2026-11-01T00:00");
        assert_eq!(whole_day.last().unwrap(), "2026-11-01T23:45");
        // Coarser upstream: the hour and the day containing the quarter.
        assert_eq!(
            map(&min, "2026-11-01T01:30-05:00", &hour),
            ["2026-11-01T01-05:00"]
        );
        assert_eq!(
            map(&min, "2026-11-01T01:30-04:00", &hour),
            ["2026-11-01T01-04:00"]
        );
        assert_eq!(map(&min, "2026-11-01T01:30-05:00", &day), ["2026-11-01"]);
        // A UTC day takes the New York quarters starting inside it.
        let utc_day = Dims(vec![time("day", Grain::Daily, "UTC", "2026-10-31")]);
        let utc = map(&utc_day, "2026-11-01", &min);
        assert_eq!(utc.first().unwrap(), "2026-10-31T20:00");
        assert_eq!(utc.len(), 96);
        // Offsets and windows count periods of the upstream.
        assert_eq!(
            keys(
                map_keys(
                    &min,
                    "2026-11-01T01:00-05:00",
                    &min,
                    Shift { lo: -1, hi: -1 },
                    NOW
                )
                .unwrap()
            ),
            ["2026-11-01T01:45-04:00"]
        );
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;

    use super::super::time::parse_day;
    use super::super::{Dimension, Zone};
    use super::*;

    const ZONES: [&str; 5] = [
        "UTC",
        "Europe/Paris",
        "America/New_York",
        "Asia/Kolkata",
        "Australia/Sydney",
    ];
    const GRAINS: [Grain; 6] = [
        Grain::Minutely(5),
        Grain::Minutely(15),
        Grain::Hourly,
        Grain::Daily,
        Grain::Weekly,
        Grain::Monthly,
    ];
    const NOW: i64 = 2_000_000_000; // 2033

    fn dims(name: &str, grain: Grain, zone: &str, start_day: i64, end: Option<i64>) -> Dims {
        let zone = Zone::get(zone).unwrap();
        let probe = TimeScheme::new(grain, zone.clone(), 0, None);
        let start = probe.of_day(start_day);
        let end = end.map(|span| start + span);
        Dims(vec![Dimension {
            name: name.into(),
            scheme: PartitionScheme::Time(TimeScheme::new(grain, zone, start, end)),
        }])
    }

    fn time(d: &Dims) -> &TimeScheme {
        d.0[0].scheme.time().unwrap()
    }

    fn day(text: &str) -> i64 {
        parse_day(text).unwrap()
    }

    proptest! {
        // Every mapped upstream key is a key inside the upstream's range
        #[test]
        fn mapped_keys_are_inside_the_upstream_range(
            dg in 0..6usize, ug in 0..6usize, dz in 0..5usize, uz in 0..5usize,
            ustart in 0..3000i64, uspan in proptest::option::of(0..5000i64),
            p in 0..2000i64, lo in -10..3i64, width in 0..10i64,
        ) {
            let down = dims("down", GRAINS[dg], ZONES[dz], day("2020-01-01"), None);
            let up = dims("up", GRAINS[ug], ZONES[uz], day("2019-01-01") + ustart, uspan);
            let key = time(&down).key(time(&down).start + p);
            let shift = Shift { lo, hi: lo + width };
            if let Ok(keys) = map_keys(&down, &key, &up, shift, NOW) {
                let ut = time(&up);
                for k in keys {
                    let q = ut.parse(k.as_str());
                    prop_assert!(q.is_some(), "{k} is not an upstream key");
                    let q = q.unwrap();
                    prop_assert!(q >= ut.start && ut.end.is_none_or(|e| q <= e), "{k} outside");
                }
            }
        }

        // Hourly to daily in a DST zone covers each local hour exactly once
        #[test]
        fn hourly_to_daily_covers_each_hour_once(
            z in 1..5usize, first in 0..4000i64, n in 1..40i64,
        ) {
            let daily = dims("day", Grain::Daily, ZONES[z], day("2015-01-01"), None);
            let hourly = dims("hour", Grain::Hourly, ZONES[z], day("2014-01-01"), None);
            let (dt, ht) = (time(&daily), time(&hourly));
            let mut hours: Vec<i64> = Vec::new();
            for d in dt.start + first..dt.start + first + n {
                let keys = map_keys(&daily, &dt.key(d), &hourly, Shift::NONE, NOW).unwrap();
                let len = (dt.period_end(d) - dt.period_start(d)) / 3600;
                prop_assert_eq!(keys.len() as i64, len);
                prop_assert!((23..=25).contains(&len));
                hours.extend(keys.iter().map(|k| ht.parse(k.as_str()).unwrap()));
            }
            for w in hours.windows(2) {
                prop_assert_eq!(w[1], w[0] + 1, "a gap or an overlap");
            }
        }

        // A rollup's inputs each map back (containment) to the rollup's key
        #[test]
        fn rollup_then_containment_is_the_same_key(
            fine in 0..5usize, coarse_off in 1..3usize, dz in 0..5usize, uz in 0..5usize,
            p in 0..1500i64,
        ) {
            let coarse = (fine + coarse_off).min(5);
            prop_assume!(coarse > fine);
            let down = dims("coarse", GRAINS[coarse], ZONES[dz], day("2020-01-01"), None);
            let up = dims("fine", GRAINS[fine], ZONES[uz], day("2019-01-01"), None);
            let key = time(&down).key(time(&down).start + p);
            let keys = map_keys(&down, &key, &up, Shift::NONE, NOW).unwrap();
            prop_assert!(!keys.is_empty());
            for k in keys {
                let back = map_keys(&up, k.as_str(), &down, Shift::NONE, NOW).unwrap();
                prop_assert_eq!(back, vec![PartitionKey::new(key.clone())]);
            }
        }

        // Keys of every grain and zone parse back to their period
        #[test]
        fn keys_round_trip(
            g in 0..6usize, z in 0..5usize, days in 0i64..47_000, hour in 0..24i64,
            minute in 0..60i64,
        ) {
            let d = dims("x", GRAINS[g], ZONES[z], 0, None);
            let t = time(&d);
            let p = match t.grain {
                Grain::Minutely(_) | Grain::Hourly => {
                    t.containing(days * 86_400 + hour * 3600 + minute * 60)
                }
                _ => t.of_day(days),
            };
            prop_assert_eq!(t.parse(&t.key(p)), Some(p));
        }
    }
}
