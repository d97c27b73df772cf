//! The mapping read backwards: which downstream partitions read one
//! upstream partition. [`super::map_keys`] stays the one definition of what
//! a partition reads; this only proposes candidates near the upstream key
//! (the same static key, the downstream periods around the upstream
//! period's instants, widened by the input's shift) and keeps those whose
//! forward mapping holds the key. So an hour is read by its day, a day by
//! its week and by the seven trailing windows that contain it, a week by the
//! month it starts in, and an unpartitioned dataset by every partition.

use super::mapping::{map_keys, Shift};
use super::{Dims, PartitionKey, PartitionScheme};

/// The downstream keys of `down`, in scheme order, whose input from an
/// upstream partitioned by `up` (with `shift`) includes `up_key`, among the
/// keys that exist at `now`. Empty when `up_key` is no key of `up`.
pub fn readers(down: &Dims, up: &Dims, up_key: &str, shift: Shift, now: i64) -> Vec<PartitionKey> {
    let Some(up_parts) = up.split(up_key) else {
        return Vec::new();
    };
    let down_time = down.time_dim();
    let mut per_dim: Vec<Vec<String>> = Vec::with_capacity(down.0.len());
    for (i, d) in down.0.iter().enumerate() {
        let same = up.position(&d.name);
        let candidates = match (&d.scheme, same) {
            (PartitionScheme::Static { .. }, Some(j)) => vec![up_parts[j].to_string()],
            (PartitionScheme::Static { keys }, None) => keys.clone(),
            (PartitionScheme::Time(dt), Some(j)) => match dt.parse(up_parts[j]) {
                // The same scheme: p reads p + lo ..= p + hi.
                Some(q) => range(dt, q - shift.hi, q - shift.lo, now),
                None => Vec::new(),
            },
            (PartitionScheme::Time(dt), None) => {
                // Another time scheme of the upstream maps across to this
                // one (only the downstream's last time dimension does).
                let across = (Some(i) == down_time)
                    .then(|| {
                        up.0.iter()
                            .zip(&up_parts)
                            .find_map(|(u, part)| match &u.scheme {
                                PartitionScheme::Time(ut) if down.position(&u.name).is_none() => {
                                    Some((ut, ut.parse(part)?))
                                }
                                _ => None,
                            })
                    })
                    .flatten();
                match across {
                    Some((ut, q)) => {
                        let from = dt.containing(ut.period_start(q - shift.hi)) - 1;
                        let to = dt.containing(ut.period_end(q - shift.lo)) + 1;
                        range(dt, from, to, now)
                    }
                    // An upstream without time fans out to every period.
                    None => d.scheme.keys(now),
                }
            }
        };
        per_dim.push(candidates);
    }
    Dims::product(&per_dim)
        .into_iter()
        .filter(|k| {
            map_keys(down, k, up, shift, now)
                .is_ok_and(|keys| keys.iter().any(|u| u.as_str() == up_key))
        })
        .map(PartitionKey::new)
        .collect()
}

/// The keys of periods `from..=to` of `t` inside its range at `now`.
fn range(t: &super::TimeScheme, from: i64, to: i64, now: i64) -> Vec<String> {
    let (a, b) = (from.max(t.start), to.min(t.last(now)));
    (a..=b).map(|p| t.key(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::super::{Dimension, Grain, TimeScheme, Zone};
    use super::*;

    fn time(name: &str, grain: Grain, zone: &str, start: &str) -> Dimension {
        let zone = Zone::get(zone).unwrap();
        let probe = TimeScheme::probe(grain, zone.clone(), start);
        let start = probe.parse_bound(start).unwrap();
        Dimension {
            name: name.into(),
            scheme: PartitionScheme::Time(probe.with_range(start, None)),
        }
    }

    fn keys(v: Vec<PartitionKey>) -> Vec<String> {
        v.into_iter().map(PartitionKey::into_string).collect()
    }

    const NOW: i64 = 1_800_000_000; // 2027-01-15

    // The mapping read backwards, checked against the
    // forward one
    #[test]
    fn readers_of_an_hour_a_day_and_a_week() {
        let hour = Dims(vec![time("hour", Grain::Hourly, "UTC", "2026-01-01T00")]);
        let paris = Dims(vec![time(
            "phour",
            Grain::Hourly,
            "Europe/Paris",
            "2026-01-01T00",
        )]);
        let day = Dims(vec![time("day", Grain::Daily, "UTC", "2026-01-01")]);
        let week = Dims(vec![time("week", Grain::Weekly, "UTC", "2026-01-01")]);
        let month = Dims(vec![time("month", Grain::Monthly, "UTC", "2026-01")]);
        let region = Dimension {
            name: "region".into(),
            scheme: PartitionScheme::Static {
                keys: vec!["eu".into(), "us".into()],
            },
        };
        let region_day = Dims(vec![region, day.0[0].clone()]);
        let none = Dims::default();
        let r = |down: &Dims, up: &Dims, k: &str, s: Shift| keys(readers(down, up, k, s, NOW));
        assert_eq!(r(&day, &hour, "2026-11-15T10", Shift::NONE), ["2026-11-15"]);
        // A Paris hour just after midnight UTC belongs to the UTC day
        // before only if it starts then: 2026-11-16T00 Paris is 23:00 UTC.
        assert_eq!(
            r(&day, &paris, "2026-11-16T00", Shift::NONE),
            ["2026-11-15"]
        );
        assert_eq!(r(&week, &day, "2026-11-15", Shift::NONE), ["2026-W46"]);
        assert_eq!(r(&month, &week, "2026-W46", Shift::NONE), ["2026-11"]);
        // A week starting in one month and ending in the next is the first's.
        assert_eq!(r(&month, &week, "2026-W49", Shift::NONE), ["2026-11"]);
        // The coarser upstream: every day of the month reads it.
        assert_eq!(r(&day, &month, "2026-02", Shift::NONE).len(), 28);
        let window = Shift { lo: -6, hi: 0 };
        assert_eq!(
            r(&day, &day, "2026-11-15", window),
            [
                "2026-11-15",
                "2026-11-16",
                "2026-11-17",
                "2026-11-18",
                "2026-11-19",
                "2026-11-20",
                "2026-11-21"
            ]
        );
        assert_eq!(
            r(&day, &day, "2026-11-15", Shift { lo: -1, hi: -1 }),
            ["2026-11-16"]
        );
        // Fan-out from unpartitioned, fan-in over regions.
        assert_eq!(
            r(&region_day, &day, "2026-11-15", Shift::NONE),
            ["eu|2026-11-15", "us|2026-11-15"]
        );
        assert_eq!(
            r(&day, &region_day, "us|2026-11-15", Shift::NONE),
            ["2026-11-15"]
        );
        assert_eq!(r(&none, &day, "2026-11-15", Shift::NONE), ["all"]);
        assert_eq!(
            r(&day, &none, "all", Shift::NONE).len(),
            day.keys(NOW).len()
        );
        // Not a key of the upstream: nobody reads it.
        assert!(r(&day, &hour, "2026-11-15", Shift::NONE).is_empty());
        // Backwards agrees with forwards, exhaustively over a fortnight.
        for (down, up, s) in [
            (&day, &hour, Shift::NONE),
            (&day, &paris, Shift::NONE),
            (&week, &day, Shift { lo: -1, hi: 0 }),
            (&day, &day, window),
            (&day, &week, Shift::NONE),
        ] {
            for d in down
                .keys(NOW)
                .iter()
                .filter(|k| k.starts_with("2026-1") || k.starts_with("2026-W4"))
            {
                for u in map_keys(down, d, up, s, NOW).unwrap() {
                    assert!(
                        keys(readers(down, up, u.as_str(), s, NOW)).contains(d),
                        "{d} reads {u} but is not among its readers"
                    );
                }
            }
        }
    }
}
