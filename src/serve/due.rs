//! When a task is due: the serve policy, pure (instants in, occurrences
//! out), so a simulated clock tests it.
//!
//! ```text
//!  time-partitioned  period p is due at period_end(p) + delay (its scheme's timezone)
//!  schedule = cron   a firing is due at its instant (static and unpartitioned tasks)
//!  neither           due only when an upstream task publishes something new
//!
//!  seen s, newest due n:   n > s  ─► run n; s+1 .. n-1 are MISSED (never launched)
//!                          none seen (first start) ─► run n; nothing before it is missed
//! ```
//!
//! An occurrence is an `i64`: a period's ordinal, or a firing's instant.

use crate::cron::Schedule;
use crate::partition::TimeScheme;

/// What makes a task due.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// The periods of its (last) time dimension, each `delay` seconds
    /// after it ends.
    Period {
        /// The scheme.
        scheme: TimeScheme,
        /// Seconds after a period's end.
        delay: i64,
    },
    /// A cron schedule.
    Cron(Schedule),
    /// Only an upstream publication.
    Upstream,
}

/// What is due at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Due {
    /// The occurrence to run now.
    pub run: Option<i64>,
    /// Occurrences skipped since the last one seen: recorded, never run.
    pub missed: Vec<i64>,
    /// The newest occurrence due (run now or seen before): the task's
    /// progress.
    pub seen: Option<i64>,
    /// When the next occurrence becomes due.
    pub next_at: Option<i64>,
}

impl Trigger {
    /// The instant occurrence `o` is due.
    pub fn due_at(&self, o: i64) -> i64 {
        match self {
            Trigger::Period { scheme, delay } => scheme.period_end(o) + delay,
            Trigger::Cron(_) | Trigger::Upstream => o,
        }
    }

    /// The partition key of a period occurrence (`None` for a firing).
    pub fn key(&self, o: i64) -> Option<String> {
        match self {
            Trigger::Period { scheme, .. } => Some(scheme.key(o)),
            _ => None,
        }
    }

    /// What is due at `now`, given the newest occurrence handled before.
    pub fn due(&self, seen: Option<i64>, now: i64) -> Due {
        match self {
            Trigger::Period { scheme, delay } => {
                let newest = scheme.latest(now - delay);
                let run = match (newest, seen) {
                    (Some(n), Some(s)) if n > s => Some(n),
                    (Some(n), None) => Some(n),
                    _ => None,
                };
                let missed = match (run, seen) {
                    (Some(n), Some(s)) => ((s + 1).max(scheme.start)..n).collect(),
                    _ => Vec::new(),
                };
                let seen = match (run, seen) {
                    (Some(n), _) => Some(n),
                    (None, s) => s,
                };
                let next = seen.map_or(scheme.start, |s| (s + 1).max(scheme.start));
                let next_at = match scheme.end {
                    Some(end) if next > end => None,
                    _ => Some(self.due_at(next)),
                };
                Due {
                    run,
                    missed,
                    seen,
                    next_at,
                }
            }
            Trigger::Cron(schedule) => {
                // First start: the schedule starts now; nothing is due yet.
                let Some(seen) = seen else {
                    return Due {
                        run: None,
                        missed: Vec::new(),
                        seen: Some(now),
                        next_at: schedule.next_after(now),
                    };
                };
                // The newest firing at or before now. Firings skipped while
                // serve was down need no record: every firing runs the same
                // partitions, and this one fills them.
                let mut newest = None;
                let mut at = seen;
                while let Some(next) = schedule.next_after(at).filter(|n| *n <= now) {
                    newest = Some(next);
                    at = next;
                }
                let seen = newest.unwrap_or(seen);
                Due {
                    run: newest,
                    missed: Vec::new(),
                    seen: Some(seen),
                    next_at: schedule.next_after(seen.max(now)),
                }
            }
            Trigger::Upstream => Due {
                seen,
                ..Due::default()
            },
        }
    }
}

/// Seconds as the manifest writes durations ("10m", "1h30m").
pub fn span(secs: i64) -> String {
    crate::manifest::duration::render(std::time::Duration::from_secs(
        u64::try_from(secs).unwrap_or(0),
    ))
}

/// The instant as the decision log and records write it.
pub fn instant(secs: i64) -> String {
    jiff::Timestamp::from_second(secs).map_or_else(|_| secs.to_string(), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::{Grain, Zone};

    fn at(text: &str) -> i64 {
        text.parse::<jiff::Timestamp>().unwrap().as_second()
    }

    fn hourly(delay: i64) -> Trigger {
        let probe = TimeScheme::probe(Grain::Hourly, Zone::utc(), "2026-09-20T00");
        let start = probe.parse("2026-09-20T00").unwrap();
        Trigger::Period {
            scheme: probe.with_range(start, None),
            delay,
        }
    }

    fn keys(t: &Trigger, os: &[i64]) -> Vec<String> {
        os.iter().map(|o| t.key(*o).unwrap()).collect()
    }

    #[test]
    fn a_period_is_due_when_it_ends_plus_its_delay() {
        let t = hourly(15 * 60);
        let d = t.due(None, at("2026-09-20T12:14:59Z"));
        assert_eq!(keys(&t, &[d.run.unwrap()]), ["2026-09-20T10"]);
        assert_eq!(d.next_at, Some(at("2026-09-20T12:15:00Z")));
        let seen = d.seen;
        // One second later hour 11 is due, and nothing is missed.
        let d = t.due(seen, at("2026-09-20T12:15:00Z"));
        assert_eq!(keys(&t, &[d.run.unwrap()]), ["2026-09-20T11"]);
        assert!(d.missed.is_empty());
        assert_eq!(d.next_at, Some(at("2026-09-20T13:15:00Z")));
        // Woken early: nothing due, the same next instant.
        let again = t.due(d.seen, at("2026-09-20T12:40:00Z"));
        assert_eq!(again.run, None);
        assert_eq!(again.seen, d.seen);
        assert_eq!(again.next_at, Some(at("2026-09-20T13:15:00Z")));
    }

    #[test]
    fn after_downtime_only_the_newest_runs_and_the_rest_are_missed() {
        let t = hourly(0);
        let seen = t.due(None, at("2026-09-20T05:00:00Z")).seen; // hour 04
        let d = t.due(seen, at("2026-09-20T09:30:00Z"));
        assert_eq!(keys(&t, &[d.run.unwrap()]), ["2026-09-20T08"]);
        assert_eq!(
            keys(&t, &d.missed),
            ["2026-09-20T05", "2026-09-20T06", "2026-09-20T07"]
        );
        // Missed once: the next step from the new progress misses nothing.
        let later = t.due(d.seen, at("2026-09-20T10:00:00Z"));
        assert_eq!(keys(&t, &[later.run.unwrap()]), ["2026-09-20T09"]);
        assert!(later.missed.is_empty());
    }

    #[test]
    fn the_first_start_misses_nothing_and_before_the_start_nothing_is_due() {
        let t = hourly(0);
        let d = t.due(None, at("2026-09-25T00:00:00Z"));
        assert_eq!(keys(&t, &[d.run.unwrap()]), ["2026-09-24T23"]);
        assert!(d.missed.is_empty());
        let early = t.due(None, at("2026-09-19T10:00:00Z"));
        assert_eq!(early.run, None);
        assert_eq!(early.next_at, Some(at("2026-09-20T01:00:00Z")));
    }

    #[test]
    fn a_bounded_scheme_is_never_due_after_its_last_period() {
        let Trigger::Period { scheme, .. } = hourly(0) else {
            unreachable!()
        };
        let end = scheme.parse("2026-09-20T02").unwrap();
        let t = Trigger::Period {
            scheme: scheme.clone().with_range(scheme.start, Some(end)),
            delay: 0,
        };
        let d = t.due(Some(end - 2), at("2026-09-21T00:00:00Z"));
        assert_eq!(keys(&t, &[d.run.unwrap()]), ["2026-09-20T02"]);
        assert_eq!(keys(&t, &d.missed), ["2026-09-20T01"]);
        assert_eq!(d.next_at, None);
    }

    #[test]
    fn a_daily_period_ends_at_local_midnight() {
        let probe = TimeScheme::probe(
            Grain::Daily,
            Zone::get("Europe/Paris").unwrap(),
            "2026-09-14",
        );
        let start = probe.parse("2026-09-14").unwrap();
        let t = Trigger::Period {
            scheme: probe.with_range(start, None),
            delay: 0,
        };
        // Midnight in Paris is 22:00 UTC in September.
        let d = t.due(None, at("2026-09-20T21:59:59Z"));
        assert_eq!(keys(&t, &[d.run.unwrap()]), ["2026-09-19"]);
        assert_eq!(d.next_at, Some(at("2026-09-20T22:00:00Z")));
    }

    #[test]
    fn a_schedule_starts_at_the_next_firing_and_runs_once_after_downtime() {
        let t = Trigger::Cron(Schedule::parse("0 6 * * *", "UTC").unwrap());
        let d = t.due(None, at("2026-09-20T05:00:00Z"));
        assert_eq!(d.run, None);
        assert_eq!(d.next_at, Some(at("2026-09-20T06:00:00Z")));
        let d = t.due(d.seen, at("2026-09-20T06:00:00Z"));
        assert_eq!(d.run, Some(at("2026-09-20T06:00:00Z")));
        // Three days down: one run, at the newest firing.
        let d = t.due(d.seen, at("2026-09-23T07:00:00Z"));
        assert_eq!(d.run, Some(at("2026-09-23T06:00:00Z")));
        assert!(d.missed.is_empty());
        assert_eq!(d.next_at, Some(at("2026-09-24T06:00:00Z")));
    }
}
