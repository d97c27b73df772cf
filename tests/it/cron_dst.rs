//! `schedule` across DST changes, against reference answers written down
//! here (the tests do not need the references installed). Each row says
//! where its answer came from: croniter 7.0.0 (`croniter(expr,
//! aware_start).get_next(datetime)`), or cronie's rule where the references
//! disagree (a fixed time in a repeated hour: cronie once in the first pass,
//! croniter both passes, Dagster the second), or the Quartz/cronie `W`/`L`
//! rules croniter does not implement.

use weir::cron::{Schedule, ScheduleError};

fn at(text: &str) -> i64 {
    text.parse::<jiff::Timestamp>()
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .as_second()
}

fn utc(second: i64) -> String {
    jiff::Timestamp::from_second(second).unwrap().to_string()
}

/// `(zone, expression, start, next firings in UTC, source)`.
#[rustfmt::skip]
const REFERENCE: &[(&str, &str, &str, &[&str], &str)] = &[
    // Serve started in the second pass of New York's repeated hour.
    ("America/New_York", "* * * * *", "2026-11-01T06:55:00Z",
     &["2026-11-01T06:56:00Z", "2026-11-01T06:57:00Z", "2026-11-01T06:58:00Z",
       "2026-11-01T06:59:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:01:00Z"],
     "croniter"),
    ("America/New_York", "*/15 * * * *", "2026-11-01T04:50:00Z",
     &["2026-11-01T05:00:00Z", "2026-11-01T05:15:00Z", "2026-11-01T05:30:00Z",
       "2026-11-01T05:45:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:15:00Z",
       "2026-11-01T06:30:00Z", "2026-11-01T06:45:00Z", "2026-11-01T07:00:00Z",
       "2026-11-01T07:15:00Z"],
     "croniter"),
    // croniter also fires 01:30 EST (06:30Z): a fixed time runs once.
    ("America/New_York", "30 1 * * *", "2026-11-01T04:00:00Z",
     &["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
     "cronie rule"),
    ("America/New_York", "30 2 * * *", "2026-03-08T05:00:00Z",
     &["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"],
     "croniter"),
    ("America/New_York", "*/15 * * * *", "2026-03-08T06:30:00Z",
     &["2026-03-08T06:45:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:15:00Z"],
     "croniter"),
    ("America/New_York", "30 * * * *", "2026-03-08T06:00:00Z",
     &["2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z", "2026-03-08T08:30:00Z"],
     "croniter"),
    ("Europe/London", "*/30 * * * *", "2026-10-25T00:00:00Z",
     &["2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z",
       "2026-10-25T02:00:00Z", "2026-10-25T02:30:00Z", "2026-10-25T03:00:00Z"],
     "croniter"),
    ("Europe/London", "15 1 * * *", "2026-03-28T12:00:00Z",
     &["2026-03-29T01:00:00Z", "2026-03-30T00:15:00Z"],
     "croniter"),
    // croniter also fires 02:00 CET (01:00Z).
    ("Europe/Paris", "0 2 * * *", "2026-10-24T12:00:00Z",
     &["2026-10-25T00:00:00Z", "2026-10-26T01:00:00Z"],
     "cronie rule"),
    // Southern hemisphere: Sydney springs forward in October.
    ("Australia/Sydney", "30 2 * * *", "2026-10-03T00:00:00Z",
     &["2026-10-03T16:00:00Z", "2026-10-04T15:30:00Z"],
     "croniter"),
    ("Australia/Sydney", "*/20 2 * * *", "2026-04-04T15:00:00Z",
     &["2026-04-04T15:20:00Z", "2026-04-04T15:40:00Z", "2026-04-04T16:00:00Z",
       "2026-04-04T16:20:00Z", "2026-04-04T16:40:00Z", "2026-04-05T16:00:00Z",
       "2026-04-05T16:20:00Z"],
     "croniter"),
    // Lord Howe shifts by 30 minutes; croniter also fires 01:45+10:30 (15:15Z).
    ("Australia/Lord_Howe", "45 1 * * *", "2026-04-04T12:00:00Z",
     &["2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"],
     "cronie rule"),
    ("Australia/Lord_Howe", "*/10 * * * *", "2026-04-04T14:25:00Z",
     &["2026-04-04T14:30:00Z", "2026-04-04T14:40:00Z", "2026-04-04T14:50:00Z",
       "2026-04-04T15:00:00Z", "2026-04-04T15:10:00Z", "2026-04-04T15:20:00Z",
       "2026-04-04T15:30:00Z", "2026-04-04T15:40:00Z"],
     "croniter"),
    ("Australia/Lord_Howe", "15 2 * * *", "2026-10-03T12:00:00Z",
     &["2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"],
     "croniter"),
    // 2026-08-01 is a Saturday: its nearest weekday is Monday the 3rd.
    ("UTC", "0 0 1W * *", "2026-06-15T00:00:00Z",
     &["2026-07-01T00:00:00Z", "2026-08-03T00:00:00Z", "2026-09-01T00:00:00Z",
       "2026-10-01T00:00:00Z"],
     "croniter"),
    // January 31 and February 28 are Saturdays.
    ("UTC", "0 0 LW * *", "2026-01-15T00:00:00Z",
     &["2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-31T00:00:00Z"],
     "Quartz/cronie rule"),
    ("UTC", "0 12 * * 5L", "2026-01-01T00:00:00Z",
     &["2026-01-30T12:00:00Z", "2026-02-27T12:00:00Z", "2026-03-27T12:00:00Z"],
     "Quartz/cronie rule"),
    ("UTC", "0 0 29 2 *", "2026-01-01T00:00:00Z",
     &["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"],
     "croniter"),
    ("UTC", "0 12 * * MON#2", "2026-01-01T00:00:00Z",
     &["2026-01-12T12:00:00Z", "2026-02-09T12:00:00Z", "2026-03-09T12:00:00Z"],
     "croniter"),
    // Both day fields restricted: either matches (Vixie cron).
    ("UTC", "0 12 13 * FRI", "2026-02-01T00:00:00Z",
     &["2026-02-06T12:00:00Z", "2026-02-13T12:00:00Z", "2026-02-20T12:00:00Z",
       "2026-02-27T12:00:00Z"],
     "croniter"),
];

#[test]
fn schedules_fire_as_the_references_do_across_dst() {
    let mut wrong = Vec::new();
    for (zone, expr, start, expected, source) in REFERENCE {
        let schedule = Schedule::parse(expr, zone).unwrap();
        let mut got = Vec::new();
        let mut t = at(start);
        for _ in *expected {
            match schedule.next_after(t) {
                Some(next) => {
                    got.push(utc(next));
                    t = next;
                }
                None => {
                    got.push("nothing is due again".into());
                    break;
                }
            }
        }
        if got != *expected {
            wrong.push(format!(
                "`{expr}` in {zone} from {start}: got {got:?}, {source} says {expected:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn count(expr: &str, zone: &str, from: &str, to: &str) -> usize {
    let schedule = Schedule::parse(expr, zone).unwrap();
    let (mut t, end) = (at(from) - 1, at(to));
    let mut n = 0;
    while let Some(next) = schedule.next_after(t).filter(|n| *n < end) {
        n += 1;
        t = next;
    }
    n
}

#[test]
fn a_day_of_25_hours_fires_hourly_schedules_25_times_and_fixed_times_once() {
    // New York's 2026-11-01 runs from 04:00Z to 05:00Z the next day.
    let (from, to) = ("2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z");
    assert_eq!(count("0 * * * *", "America/New_York", from, to), 25);
    assert_eq!(count("*/15 * * * *", "America/New_York", from, to), 100);
    assert_eq!(count("30 1 * * *", "America/New_York", from, to), 1);
    // And its 2026-03-08 has 23 hours; the skipped 02:30 fires at 03:00.
    let (from, to) = ("2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z");
    assert_eq!(count("0 * * * *", "America/New_York", from, to), 23);
    assert_eq!(count("30 2 * * *", "America/New_York", from, to), 1);
    // Over a year `1W` fires once a month, never twice in one.
    let year = ("2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z");
    assert_eq!(count("0 0 1W * *", "UTC", year.0, year.1), 12);
}

/// From any instant the next firing is the first one of the walked sequence
/// after it: a pure function of the instant that always moves forward.
#[test]
fn the_next_firing_is_the_same_from_any_instant_and_always_later() {
    let cases = [
        (
            "America/New_York",
            "2026-10-31T12:00:00Z",
            "2026-11-02T12:00:00Z",
        ),
        (
            "America/New_York",
            "2026-03-07T12:00:00Z",
            "2026-03-09T12:00:00Z",
        ),
        (
            "Europe/London",
            "2026-10-24T12:00:00Z",
            "2026-10-26T12:00:00Z",
        ),
        (
            "Australia/Sydney",
            "2026-04-04T00:00:00Z",
            "2026-04-06T00:00:00Z",
        ),
        (
            "Australia/Lord_Howe",
            "2026-10-03T00:00:00Z",
            "2026-10-05T00:00:00Z",
        ),
        (
            "Australia/Lord_Howe",
            "2026-04-04T00:00:00Z",
            "2026-04-06T00:00:00Z",
        ),
    ];
    let exprs = [
        "* * * * *",
        "*/7 * * * *",
        "0 * * * *",
        "30 1,2 * * *",
        "45 1 * * *",
    ];
    for (zone, from, to) in cases {
        for expr in exprs {
            let schedule = Schedule::parse(expr, zone).unwrap();
            let (start, end) = (at(from), at(to));
            let mut firings = Vec::new();
            let mut t = start;
            while t < end {
                t = schedule
                    .next_after(t)
                    .expect("a schedule that parses fires again");
                firings.push(t);
            }
            let mut probe = start;
            while probe < end - 86_400 {
                let next = schedule.next_after(probe).unwrap();
                let expected = *firings.iter().find(|f| **f > probe).unwrap();
                assert_eq!(
                    utc(next),
                    utc(expected),
                    "`{expr}` in {zone} from {}",
                    utc(probe)
                );
                probe += 7 * 60 + 13;
            }
        }
    }
}

#[test]
fn a_schedule_that_can_never_fire_is_refused() {
    for expr in ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31W 2 *"] {
        match Schedule::parse(expr, "UTC") {
            Err(e @ ScheduleError::NeverFires { .. }) => {
                assert_eq!(
                    e.to_string(),
                    format!("`{expr}` never fires: no date matches its day of month, month and day of week")
                );
            }
            other => panic!("`{expr}`: {other:?}"),
        }
    }
    // Restricted day of week: either day field is enough, so this fires.
    assert!(Schedule::parse("0 0 30 2 MON", "UTC").is_ok());
}

#[test]
fn validate_points_at_a_schedule_that_never_fires() {
    let sb = crate::support::Sandbox::new(
        r#"
[pipeline]
name = "never"
code_version = "1"
warehouse = "wh"

[tasks.leap]
command = ["true"]
partitioned_by = []
output = { dataset = "d", grain = ["n"] }
schedule = "0 0 30 2 *"
"#,
    );
    let out = sb.weir(&["validate", "m.toml"]).output().unwrap();
    let err = crate::support::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for part in [
        "weir::manifest::bad_schedule",
        "`0 0 30 2 *` never fires: no date matches its day of month, month and day",
        "m.toml:11:12",
        "no day ever matches",
        "February has at most 29",
    ] {
        assert!(err.contains(part), "{part} not in\n{err}");
    }
}
