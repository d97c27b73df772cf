//! SLO measurements (`weir slo`) checked against runs whose lateness and
//! durations are known, and `weir status` at scale (a summary per task,
//! filters, `--all`).
//!
//! The longest outputs are snapshots, `snapshots/it__slo__*.snap` (times,
//! durations and operator run ids masked): after a deliberate change run
//! `INSTA_UPDATE=always cargo test --test it -- slo::` and review the diff
//! (support/snapshot.rs); a missing or different snapshot fails.

use std::process::Output;

use jiff::{Timestamp, ToSpan};

use crate::support::snapshot;
use crate::support::{ok, stderr, stdout, Sandbox};

const DAY_MS: i64 = 86_400_000;

/// Today's UTC midnight (ms) and the key of the day `k` days before it.
fn midnight() -> i64 {
    let now = Timestamp::now();
    now.as_millisecond() - now.as_millisecond().rem_euclid(DAY_MS)
}

fn day(midnight_ms: i64, k: i64) -> String {
    Timestamp::from_millisecond(midnight_ms)
        .unwrap()
        .checked_sub((k * 24).hours())
        .unwrap()
        .strftime("%Y-%m-%d")
        .to_string()
}

fn now_ms() -> i64 {
    Timestamp::now().as_millisecond()
}

/// `weir ARGS` with the clock pinned at `now` (ms): the windows and the
/// complete partitions are decided from it.
fn weir_at(sb: &Sandbox, now: i64, args: &[&str]) -> Output {
    sb.weir(args)
        .env(
            "WEIR_NOW",
            Timestamp::from_millisecond(now).unwrap().to_string(),
        )
        .output()
        .expect("weir runs")
}

/// `daily` (sla 2d, slo 0.75) and `report` (sla 3d, slo 0.99, reads
/// daily), both in the one-slot pool `p1`, from day D-6. `daily` fails its
/// first attempt of D-3 (a transient exit, then success) and sleeps 1s on
/// D-2 and D-1.
fn pipeline(m: i64) -> Sandbox {
    let sb = Sandbox::new(&format!(
        r#"
[pipeline]
name = "slos"
code_version = "1"
warehouse = "wh"

[partitions.day]
kind = "daily"
start = "{start}"

[pools.p1]
slots = 1

[retry.fast]
max_attempts = 2
backoff = {{ initial = "10ms", max = "20ms" }}

[tasks.daily]
command = ["sh", "daily.sh"]
output = {{ dataset = "daily", grain = ["id"] }}
pool = "p1"
retry = "fast"
sla = "2d"
slo = 0.75

[tasks.report]
command = ["sh", "report.sh"]
inputs = ["daily"]
output = {{ dataset = "report", grain = ["id"] }}
pool = "p1"
sla = "3d"
slo = 0.99
"#,
        start = day(m, 6)
    ));
    sb.script(
        "daily.sh",
        &format!(
            r#"case "$WEIR_PARTITION" in
  {d3}) if [ "$WEIR_ATTEMPT" = 1 ]; then exit 75; fi ;;
  {d2}|{d1}) sleep 1 ;;
esac
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv"
"#,
            d3 = day(m, 3),
            d2 = day(m, 2),
            d1 = day(m, 1)
        ),
    );
    sb.script(
        "report.sh",
        "printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb
}

/// A run's bounds: the real instants before and after it (ms).
#[track_caller]
fn timed_run(sb: &Sandbox, run_id: &str, args: &[&str]) -> (i64, i64) {
    let before = now_ms();
    let mut all = vec!["run", "m.toml", "--run-id", run_id];
    all.extend_from_slice(args);
    ok(&weir_at(sb, before, &all));
    (before, now_ms())
}

#[track_caller]
fn within(what: &str, value: &serde_json::Value, lo: i64, hi: i64) {
    let v = value
        .as_i64()
        .unwrap_or_else(|| panic!("{what}: {value} is not a number"));
    assert!(lo <= v && v <= hi, "{what}: {v} not in [{lo}, {hi}]");
}

#[track_caller]
fn close(what: &str, value: &serde_json::Value, expected: f64) {
    let v = value
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: {value} is not a number"));
    assert!((v - expected).abs() < 1e-9, "{what}: {v} != {expected}");
}

/// Slack for what real time adds to a known sleep or wait on a loaded
/// two-core machine (spawning, fsyncs, token allocation).
const SLACK_MS: i64 = 3000;

/// Below the 1s sleeps: an instant attempt or wait, however loaded the
/// machine (a 1s sleep or a wait behind one never is).
const INSTANT_MS: i64 = 999;

// Share within the SLA, latency, attempt and queue
// percentiles, retries per instance and the error budget, per task and per
// pool, over `--since 4d`, exactly where the clock is pinned and within the
// real run's bounds where time is real.
#[test]
fn slo_figures_match_a_run_of_known_lateness_and_durations() {
    let m = midnight();
    let sb = pipeline(m);
    let d = |k| day(m, k);
    // D-6: outside a 4-day window (its period ended 5 days ago), published.
    timed_run(&sb, "r1", &["--task", "daily", "--partition", &d(6)]);
    // D-3: published more than 2 days after its period ended (late).
    let (b2, a2) = timed_run(&sb, "r2", &["--task", "daily", "--partition", &d(3)]);
    // D-2 and D-1 in one run of the one-slot pool: one waits for the other.
    let (b3, a3) = timed_run(
        &sb,
        "r3",
        &[
            "--task",
            "daily",
            "--partition",
            &d(2),
            "--partition",
            &d(1),
        ],
    );
    let (b4, a4) = timed_run(
        &sb,
        "r4",
        &[
            "--task",
            "report",
            "--partition",
            &d(3),
            "--partition",
            &d(2),
        ],
    );
    // D-4 and D-5 of both, and report's D-1, are never published. The
    // clock is pinned to a whole second (WEIR_NOW's precision).
    let now = now_ms() / 1000 * 1000;
    let out = weir_at(&sb, now, &["slo", "m.toml", "--since", "4d", "--json"]);
    assert_eq!(stderr(&out), "");
    let doc: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let at = |ms: i64| Timestamp::from_millisecond(ms).unwrap().to_string();
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["pipeline"], "slos");
    assert_eq!(doc["percentiles"], "nearest-rank");
    assert_eq!(doc["now"], at(now));
    assert_eq!(doc["since"], at(now - 4 * DAY_MS));
    assert_eq!(doc["window_ms"], 4 * DAY_MS);

    let daily = &doc["tasks"][0];
    assert_eq!(daily["task"], "daily");
    assert_eq!(daily["pool"], "p1");
    assert_eq!(daily["sla_ms"], 2 * DAY_MS);
    assert_eq!(daily["slo"], 0.75);
    // D-1, D-2 met; D-3 published late; D-4 unpublished past its deadline.
    assert_eq!(
        daily["partitions"],
        serde_json::json!({"met": 2, "missed": 2, "pending": 0})
    );
    close("daily within_sla", &daily["within_sla"], 0.5);
    // Latencies: D-1 (r3 - M), D-2 (r3 - M + 1d), D-3 (r2 - M + 2d);
    // nearest-rank p50 of 3 is the 2nd, p95 the 3rd.
    let lat = &daily["publication_latency_ms"];
    assert_eq!(lat["count"], 3);
    within(
        "daily latency p50",
        &lat["p50"],
        b3 - m + DAY_MS,
        a3 - m + DAY_MS,
    );
    within(
        "daily latency p95",
        &lat["p95"],
        b2 - m + 2 * DAY_MS,
        a2 - m + 2 * DAY_MS,
    );
    // Attempts: D-6, D-3 (failed, then success), D-2 and D-1 (1s each):
    // the 3rd of 5 is an instant one, the 5th a 1s one.
    let dur = &daily["attempt_duration_ms"];
    assert_eq!(dur["count"], 5);
    within("daily attempt p50", &dur["p50"], 0, INSTANT_MS);
    within("daily attempt p95", &dur["p95"], 1000, 1000 + SLACK_MS);
    // Queue waits, one per attempt: r1, both of r2 (the retry is queued
    // again after its backoff) and the first of r3 at once, the second of
    // r3 behind a 1s attempt in the one slot.
    let wait = &daily["queue_wait_ms"];
    assert_eq!(wait["count"], 5);
    within("daily queue p50", &wait["p50"], 0, INSTANT_MS);
    within("daily queue p95", &wait["p95"], 1000, 1000 + SLACK_MS);
    assert_eq!(daily["instances"], 4);
    assert_eq!(daily["retries"], 1);
    close(
        "daily retries/instance",
        &daily["retries_per_instance"],
        0.25,
    );
    // Budget: (1 - 0.75) × 4 = 1 miss allowed, 2 spent: 100% overspent.
    let budget = &daily["error_budget"];
    close("daily allowed", &budget["allowed_misses"], 1.0);
    assert_eq!(budget["misses"], 2);
    close("daily remaining", &budget["remaining"], -1.0);

    let report = &doc["tasks"][1];
    assert_eq!(report["task"], "report");
    // D-3 and D-2 within 3 days; D-4 past its deadline (today's midnight);
    // D-1 unpublished with its deadline ahead.
    assert_eq!(
        report["partitions"],
        serde_json::json!({"met": 2, "missed": 1, "pending": 1})
    );
    close("report within_sla", &report["within_sla"], 2.0 / 3.0);
    let lat = &report["publication_latency_ms"];
    assert_eq!(lat["count"], 2);
    within(
        "report latency p50",
        &lat["p50"],
        b4 - m + DAY_MS,
        a4 - m + DAY_MS,
    );
    within(
        "report latency p95",
        &lat["p95"],
        b4 - m + 2 * DAY_MS,
        a4 - m + 2 * DAY_MS,
    );
    assert_eq!(report["attempt_duration_ms"]["count"], 2);
    within(
        "report attempt p95",
        &report["attempt_duration_ms"]["p95"],
        0,
        INSTANT_MS,
    );
    assert_eq!(report["instances"], 2);
    assert_eq!(report["retries"], 0);
    close(
        "report retries/instance",
        &report["retries_per_instance"],
        0.0,
    );
    let budget = &report["error_budget"];
    close("report allowed", &budget["allowed_misses"], 0.03);
    assert_eq!(budget["misses"], 1);
    close("report remaining", &budget["remaining"], 1.0 - 1.0 / 0.03);

    // The pool: both tasks' partitions and attempts; its budget the sum.
    let pools = doc["pools"].as_array().unwrap();
    assert_eq!(pools.len(), 1, "{pools:?}");
    let p1 = &pools[0];
    assert_eq!(p1["pool"], "p1");
    assert_eq!(
        p1["partitions"],
        serde_json::json!({"met": 4, "missed": 3, "pending": 1})
    );
    close("p1 within_sla", &p1["within_sla"], 4.0 / 7.0);
    // 5 latencies; the 3rd is report's D-2, the 5th report's D-3.
    let lat = &p1["publication_latency_ms"];
    assert_eq!(lat["count"], 5);
    within(
        "p1 latency p50",
        &lat["p50"],
        b4 - m + DAY_MS,
        a4 - m + DAY_MS,
    );
    within(
        "p1 latency p95",
        &lat["p95"],
        b4 - m + 2 * DAY_MS,
        a4 - m + 2 * DAY_MS,
    );
    assert_eq!(p1["attempt_duration_ms"]["count"], 7);
    assert_eq!(p1["queue_wait_ms"]["count"], 7);
    assert_eq!(p1["instances"], 6);
    assert_eq!(p1["retries"], 1);
    close("p1 allowed", &p1["error_budget"]["allowed_misses"], 1.03);
    assert_eq!(p1["error_budget"]["misses"], 3);
    close(
        "p1 remaining",
        &p1["error_budget"]["remaining"],
        1.0 - 3.0 / 1.03,
    );

    // The text: the same numbers, one row per task and per pool.
    let out = weir_at(&sb, now, &["slo", "m.toml", "--since", "4d"]);
    assert_eq!(stderr(&out), "");
    let text = ok(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "SLOs of `slos` over 4d ending {} (partitions whose period ended since {}; percentiles nearest-rank)",
            at(now),
            at(now - 4 * DAY_MS)
        )
    );
    let row = |name: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row {name} in:\n{text}"))
            .to_string()
    };
    let daily = row("daily");
    for cell in [
        " p1 ",
        " 2d ",
        " 50.0% (2/4) ",
        " 0.25 (1/4) ",
        " -100.0% (slo 75.0%, 2 of 1.00 allowed misses)",
    ] {
        assert!(daily.contains(cell), "{cell:?} not in {daily:?}");
    }
    let report = row("report");
    for cell in [
        " 3d ",
        " 66.7% (2/3) ",
        " 0.00 (0/2) ",
        " -3233.3% (slo 99.0%, 1 of 0.03 allowed miss)",
    ] {
        assert!(report.contains(cell), "{cell:?} not in {report:?}");
    }
    let pool = row("p1");
    for cell in [
        " 57.1% (4/7) ",
        " 0.17 (1/6) ",
        " -191.3% (3 of 1.03 allowed misses)",
    ] {
        assert!(pool.contains(cell), "{cell:?} not in {pool:?}");
    }
    // Latency columns: report's D-2 p50 reads "1d Nh".
    assert!(
        report.contains(&format!(" 1d {}h ", (b4 - m) / 3_600_000))
            || report.contains(&format!(" 1d {}h ", (a4 - m) / 3_600_000)),
        "{report}"
    );

    // The report's SLO section: the same numbers (its window is the
    // default 7 days: compare with `weir slo` over 7d at the same instant).
    let out = weir_at(&sb, now, &["report", "m.toml", "--out", "r.html"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let html = std::fs::read_to_string(sb.path().join("r.html")).unwrap();
    let out = weir_at(&sb, now, &["slo", "m.toml", "--json"]);
    let week: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    // The page's templates escape `/` as `&#x2f;` (the same text in a
    // browser); the figures are compared as the reader sees them.
    let html = html.replace("&#x2f;", "/");
    let section = html
        .split_once("<h2>SLOs</h2>")
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("no SLO section in the report"));
    assert!(
        section.contains(&format!(
            "over 7d ending {}: partitions whose period ended since {};",
            at(now),
            at(now - 7 * DAY_MS)
        )),
        "{section}"
    );
    let span = |v: &serde_json::Value| weir::ops::slo::span(v.as_i64().unwrap());
    let daily = &week["tasks"][0];
    let lat = &daily["publication_latency_ms"];
    let dur = &daily["attempt_duration_ms"];
    let wait = &daily["queue_wait_ms"];
    let row = format!(
        "<tr><td>daily</td><td>p1</td><td>2d</td><td>33.3% (2/6)</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>0.25 (1/4)</td><td>-166.7% (slo 75.0%, 4 of 1.50 allowed misses)</td></tr>",
        span(&lat["p50"]),
        span(&lat["p95"]),
        span(&dur["p50"]),
        span(&dur["p95"]),
        span(&wait["p50"]),
        span(&wait["p95"]),
    );
    assert!(section.contains(&row), "{row}\nnot in\n{section}");
    assert!(
        section.contains("<tr><td>p1</td><td>36.4% (4/11)</td>"),
        "{section}"
    );

    // A wider window takes D-5 (unpublished: missed) and D-6 (published
    // 5+ days late) into both tasks' shares.
    let out = weir_at(&sb, now, &["slo", "m.toml", "--since", "7d", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(
        doc["tasks"][0]["partitions"],
        serde_json::json!({"met": 2, "missed": 4, "pending": 0})
    );
    assert_eq!(doc["tasks"][0]["publication_latency_ms"]["count"], 4);
    assert_eq!(
        doc["tasks"][1]["partitions"],
        serde_json::json!({"met": 2, "missed": 3, "pending": 1})
    );
}

// The window is counted back from WEIR_NOW: with the
// clock pinned 10 days on, no partition and no attempt is in a 4-day
// window, and nothing is judged (no share, no budget spent).
#[test]
fn the_window_follows_the_pinned_clock() {
    let m = midnight();
    let sb = pipeline(m);
    timed_run(&sb, "r1", &["--task", "daily", "--partition", &day(m, 3)]);
    let later = now_ms() + 10 * DAY_MS;
    let out = weir_at(&sb, later, &["slo", "m.toml", "--since", "1d", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let daily = &doc["tasks"][0];
    // Only the day that ended within the last day is in the window:
    // unpublished, its 2d deadline ahead.
    assert_eq!(
        daily["partitions"],
        serde_json::json!({"met": 0, "missed": 0, "pending": 1})
    );
    assert_eq!(daily["within_sla"], serde_json::Value::Null);
    assert_eq!(daily["attempt_duration_ms"]["count"], 0);
    assert_eq!(daily["attempt_duration_ms"]["p50"], serde_json::Value::Null);
    assert_eq!(daily["instances"], 0);
    assert_eq!(daily["retries_per_instance"], serde_json::Value::Null);
    assert_eq!(
        daily["error_budget"],
        serde_json::json!({"allowed_misses": 0.0, "misses": 0, "remaining": null})
    );
    let out = weir_at(&sb, later, &["slo", "m.toml", "--since", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("--since `soon`: ")
            && stderr(&out).contains("help: a duration such as `7d`, `36h` or `90m`"),
        "{}",
        stderr(&out)
    );
}

// `slo` is a share strictly between 0 and 1, and needs
// the `sla` it measures; each is a located diagnostic with its fix.
#[test]
fn slo_is_validated_where_it_is_written() {
    let mut manifest = String::from(
        r#"[pipeline]
name = "demo"
code_version = "1"
warehouse = "wh"

[partitions.day]
kind = "daily"
start = "2026-11-20"

[tasks.a]
command = ["true"]
output = { dataset = "a", grain = ["id"] }
sla = "6h"
slo = 1.5

[tasks.b]
command = ["true"]
output = { dataset = "b", grain = ["id"] }
slo = 0.99
"#,
    );
    let sb = Sandbox::new(&manifest);
    let out = sb.weir(&["validate", "m.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        r#"weir::manifest::invalid_value

  × `slo` 1.5 of task `a` is not a share between 0 and 1
    ╭─[m.toml:14:7]
 13 │ sla = "6h"
 14 │ slo = 1.5
    ·       ─┬─
    ·        ╰── must be above 0 and below 1
 15 │ 
    ╰────
  help: the share of partitions to publish within `sla`, e.g. `slo = 0.99` for
        99%

weir::manifest::missing_key

  × task `b` sets `slo` without an `sla`
    ╭─[m.toml:19:1]
 18 │ output = { dataset = "b", grain = ["id"] }
 19 │ slo = 0.99
    · ─┬─
    ·  ╰── a share of partitions published within `sla`
    ╰────
  help: add the deadline it measures, e.g. `sla = "6h"` (after the partition's
        period ends)

error: `m.toml` is not a valid manifest: 2 errors
"#
    );
    // The bounds are exclusive; an integer is a share too (and 1 is out).
    let fixed = manifest.replace("slo = 0.99\n", "slo = 0.99\nsla = \"1d\"\n");
    for (slo, valid) in [("0", false), ("1", false), ("-0.5", false), ("0.5", true)] {
        manifest = fixed.replace("slo = 1.5", &format!("slo = {slo}"));
        std::fs::write(sb.path().join("m.toml"), &manifest).unwrap();
        let out = sb.weir(&["validate", "m.toml"]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(if valid { 0 } else { 2 }),
            "{slo}: {}",
            stderr(&out)
        );
        if !valid {
            let message = format!(
                "`slo` {} of task `a` is not a share between 0 and 1",
                slo.parse::<f64>().unwrap()
            );
            assert!(stderr(&out).contains(&message), "{slo}: {}", stderr(&out));
        }
    }
}

/// `extract` (sla 1d) and `load` (reads it) over 89 days to 2026-11-28:
/// extract published to 2026-11-25 but for 2026-09-15 (HELD) and
/// 2026-10-10 (QUARANTINED), the last three days LATE; load published for
/// ten days, 79 MISSING.
fn at_scale() -> Sandbox {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "scale"
code_version = "1"
warehouse = "wh"

[partitions.day]
kind = "daily"
start = "2026-09-01"

[pools.wide]
slots = 8

[tasks.extract]
command = ["sh", "extract.sh"]
output = { dataset = "raw", grain = ["id"] }
pool = "wide"
sla = "1d"

[tasks.load]
command = ["sh", "load.sh"]
inputs = ["raw"]
output = { dataset = "clean", grain = ["id"] }
pool = "wide"
"#,
    );
    sb.script(
        "extract.sh",
        r#"case "$WEIR_PARTITION" in
  2026-09-15) echo 'the feed is wrong' >&2; exit 78 ;;
  2026-10-10) echo 'bad row' >&2; exit 65 ;;
esac
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    sb.script(
        "load.sh",
        "printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    let out = sb.run(
        "r1",
        &[
            "--task",
            "extract",
            "--from",
            "2026-09-01",
            "--to",
            "2026-11-25",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        crate::support::stderr(&out)
    );
    ok(&sb.run(
        "r2",
        &[
            "--task",
            "load",
            "--from",
            "2026-09-01",
            "--to",
            "2026-09-10",
        ],
    ));
    sb
}

/// The day after `d` (YYYY-MM-DD), at midnight UTC.
fn end_of(d: jiff::civil::Date) -> String {
    format!("{}T00:00:00Z", d.tomorrow().unwrap())
}

// More than a screen of partitions is summarised per task
// (counts by state, the oldest problem), then the problems oldest first as
// many as a screen holds; `--all` is the full listing.
#[test]
fn status_at_scale_summarises_oldest_problem_first() {
    let sb = at_scale();
    let out = sb.weir_out(&["status", "m.toml"]);
    assert_eq!(stderr(&out), "");
    let text = ok(&out);
    let mut expected = String::from(
        "178 partitions of 2 tasks, summarised: `weir status m.toml --all` lists every partition, `--json` prints them all

task     partitions  held  quarantined  late  missing  published  oldest problem
extract          89     1            1     3        0         84  HELD 2026-09-15 since 2026-09-17T00:00:00Z
load             89     0            0     0       79         10  MISSING 2026-09-11 since 2026-09-12T00:00:00Z

84 problems, oldest first:
",
    );
    // A screen (50 lines when piped) less the heading and table: 41 lines.
    let mut day: jiff::civil::Date = "2026-09-11".parse().unwrap();
    let mut lines = 0;
    while lines < 41 {
        let missing = format!(
            "MISSING     load {day}: expected, not published since {}\n",
            end_of(day)
        );
        expected.push_str(&missing);
        lines += 1;
        // Held and quarantined since their SLA deadline (the day after the
        // period's end): after the missing `load` partition of that day.
        let marked = match day.to_string().as_str() {
            "2026-09-15" => Some("HELD        extract 2026-09-15: operator failure: exit code 78"),
            "2026-10-10" => {
                Some("QUARANTINED extract 2026-10-10: deterministic failure: exit code 65")
            }
            _ => None,
        };
        if let Some(line) = marked {
            if lines < 41 {
                expected.push_str(&format!(
                    "{line} since {}\n",
                    end_of(day.tomorrow().unwrap())
                ));
                lines += 1;
            }
        }
        day = day.tomorrow().unwrap();
    }
    expected.push_str(
        "… 43 more: narrow with `--task`, `--state` or `--from`/`--to`, or list them with `--all`\n",
    );
    assert_eq!(text, expected);

    // --all: every publication, and every problem line of the listing.
    let out = sb.weir_out(&["status", "m.toml", "--all"]);
    let all = ok(&out);
    assert_eq!(
        all.lines().filter(|l| l.contains(" sha256:")).count(),
        94,
        "{all}"
    );
    for line in [
        "missing: raw: 5 expected partitions without a publication: 2026-09-15, 2026-10-10, 2026-11-26, 2026-11-27, 2026-11-28",
        "missing: clean: 79 expected partitions without a publication: 2026-09-11, 2026-09-12, 2026-09-13, 2026-09-14, 2026-09-15, 2026-09-16, 2026-09-17, 2026-09-18, 2026-09-19, 2026-09-20, …",
        "LATE        extract 2026-11-28: not published by its SLA deadline 2026-11-30T00:00:00Z",
        "HELD        extract 2026-09-15: operator failure: exit code 78",
    ] {
        assert!(all.lines().any(|l| l == line), "{line:?} not in:\n{all}");
    }
    assert!(!all.contains("summarised"), "{all}");
}

// `--task`, `--state` and `--from/--to` narrow the listing
// and what `--check` pages on; unknown names and bad ranges are usage
// errors; `--json` keeps its shape, adding `summary`.
#[test]
fn status_filters_and_json_summary() {
    let sb = at_scale();
    let out = sb.weir_out(&["status", "m.toml", "--state", "late", "--state", "held"]);
    assert_eq!(stderr(&out), "");
    assert_eq!(
        ok(&out),
        "no published partition matches
missing: raw: 4 expected partitions without a publication: 2026-09-15, 2026-11-26, 2026-11-27, 2026-11-28
LATE        extract 2026-09-15: not published by its SLA deadline 2026-09-17T00:00:00Z
LATE        extract 2026-11-26: not published by its SLA deadline 2026-11-28T00:00:00Z
LATE        extract 2026-11-27: not published by its SLA deadline 2026-11-29T00:00:00Z
LATE        extract 2026-11-28: not published by its SLA deadline 2026-11-30T00:00:00Z
HELD        extract 2026-09-15: operator failure: exit code 78
"
    );
    let out = sb.weir_out(&[
        "status",
        "m.toml",
        "--task",
        "load",
        "--from",
        "2026-09-08",
        "--to",
        "2026-09-12",
    ]);
    let text = ok(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{text}");
    for (line, partition) in lines[1..4]
        .iter()
        .zip(["2026-09-08", "2026-09-09", "2026-09-10"])
    {
        assert!(
            line.starts_with(&format!("clean    {partition}    1")),
            "{text}"
        );
    }
    assert_eq!(lines[5], "clean: 3 partitions built by code_version 1");
    assert_eq!(
        lines[6],
        "missing: clean: 2 expected partitions without a publication: 2026-09-11, 2026-09-12"
    );
    // --check pages only on what the filters keep.
    assert_eq!(
        sb.weir_out(&["status", "m.toml", "--check"]).status.code(),
        Some(4)
    );
    let out = sb.weir_out(&["status", "m.toml", "--check", "--task", "load"]);
    snapshot::assert_output!(
        "status_check_of_one_task",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    let out = sb.weir_out(&["status", "m.toml", "--check", "--state", "quarantined"]);
    sb.check(&out).code(4).stdout("no published partition matches\nmissing: raw: 1 expected partition without a publication: 2026-10-10\nLATE        extract 2026-10-10: not published by its SLA deadline 2026-10-12T00:00:00Z\nQUARANTINED extract 2026-10-10: deterministic failure: exit code 65\n").stderr("check failed: 2 instances need attention\n");
    // QUARANTINED and its LATE, both of the one instance kept.
    assert_eq!(stderr(&out), "check failed: 2 instances need attention\n");

    let out = sb.weir_out(&["status", "m.toml", "--task", "lod"]);
    sb.check(&out)
        .code(2)
        .stdout("")
        .stderr("error: no task `lod` in `scale`\n  help: did you mean `load`?\n");
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        "error: no task `lod` in `scale`\n  help: did you mean `load`?\n"
    );
    let out = sb.weir_out(&[
        "status",
        "m.toml",
        "--from",
        "2026-09-12",
        "--to",
        "2026-09-08",
    ]);
    sb.check(&out).code(2).stdout("").stderr("weir::plan::bad_range\n\n  × range 2026-09-12 to 2026-09-08: runs backwards: swap --from and --to\n  help: partitions are `day`: days from 2026-09-01 to 2026-11-28 (the latest\n        complete day); a task of several dimensions takes keys joined by `|`\n");
    assert!(
        stderr(&out).contains("runs backwards: swap --from and --to"),
        "{}",
        stderr(&out)
    );
    let out = sb.weir_out(&["status", "m.toml", "--state", "lat"]);
    sb.check(&out).code(2).stdout("").stderr("error: invalid value 'lat' for '--state <STATE>'\n  [possible values: unreadable, held, quarantined, abandoned, released, late, waiting, missing, stale, published]\n\n  tip: a similar value exists: 'late'\n\nFor more information, try '--help'.\n");
    assert!(
        stderr(&out).contains("possible values: unreadable, held"),
        "{}",
        stderr(&out)
    );

    // JSON: every partition whatever the screen, the keys it always had,
    // and `summary`.
    let doc = sb.status_json();
    let keys: Vec<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "abandoned",
            "attention",
            "code_versions",
            "drifted",
            "format_version",
            "lineage",
            "missing",
            "notes",
            "notifications_undelivered",
            "partitions",
            "pipeline",
            "released",
            "serve",
            "stale",
            "summary",
            "unproven",
            "unreadable",
            "waiting"
        ]
    );
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["partitions"].as_array().unwrap().len(), 94);
    assert_eq!(doc["missing"].as_array().unwrap().len(), 84);
    let summary = &doc["summary"];
    assert_eq!(
        summary["tasks"][0],
        serde_json::json!({
            "task": "extract",
            "partitions": 89,
            "states": {"unreadable": 0, "held": 1, "quarantined": 1, "abandoned": 0,
                "released": 0, "late": 3, "waiting": 0, "missing": 0, "stale": 0, "published": 84},
            "oldest_problem": {"state": "HELD", "task": "extract", "partition": "2026-09-15",
                "since": "2026-09-17T00:00:00Z", "detail": "operator failure: exit code 78"},
        })
    );
    assert_eq!(summary["tasks"][1]["states"]["missing"], 79);
    let problems = summary["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 84);
    assert_eq!(problems[0]["partition"], "2026-09-11");
    assert_eq!(problems[83]["state"], "LATE");
    assert_eq!(problems[83]["partition"], "2026-11-28");
    // Filters narrow the document, not its shape.
    let out = sb.weir_out(&["status", "m.toml", "--json", "--state", "quarantined"]);
    let doc: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(doc["partitions"], serde_json::json!([]));
    assert_eq!(doc["missing"].as_array().unwrap().len(), 1);
    assert_eq!(doc["summary"]["problems"].as_array().unwrap().len(), 1);
    assert_eq!(doc["attention"].as_array().unwrap().len(), 2);
}

// A summary still names what `--check` pages on beyond
// the instances' states: a Delta table behind weir's records.
#[test]
fn status_summary_names_a_table_behind() {
    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "lake"
code_version = "1"
warehouse = "wh"

[partitions.day]
kind = "daily"
start = "2026-09-01"

[pools.wide]
slots = 8

[tasks.pq]
command = ["sh", "pq.sh"]
output = { dataset = "pq", format = "parquet", grain = ["id"], table = "delta" }
pool = "wide"
"#,
    );
    let batch = RecordBatch::try_from_iter(vec![(
        "id",
        std::sync::Arc::new(Int64Array::from(vec![1_i64, 2])) as ArrayRef,
    )])
    .unwrap();
    let file = std::fs::File::create(sb.path().join("rows.parquet")).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    sb.script(
        "pq.sh",
        "cp rows.parquet \"$WEIR_OUTPUT_DIR/part-0.parquet\"\n",
    );
    ok(&sb.run("r1", &["--from", "2026-09-01", "--to", "2026-11-28"]));
    let out = sb.weir_out(&["status", "m.toml", "--check"]);
    sb.check(&out).code(0).stdout("89 partitions of 1 task, summarised: `weir status m.toml --all` lists every partition, `--json` prints them all\n\ntask  partitions  published  oldest problem\npq            89         89\n").stderr("");
    assert!(stdout(&out).starts_with("89 partitions of 1 task, summarised"));
    // The newest Delta commit lost: one partition's generation not shown.
    let log = sb.path().join("wh/pq/_delta_log");
    let newest = std::fs::read_dir(&log)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .max()
        .unwrap();
    std::fs::remove_file(log.join(newest)).unwrap();
    let out = sb.weir_out(&["status", "m.toml", "--check"]);
    sb.check(&out).code(4).stdout("89 partitions of 1 task, summarised: `weir status m.toml --all` lists every partition, `--json` prints them all\n\ntask  partitions  published  oldest problem\npq            89         89\n\nTABLE_BEHIND pq [..]: the Delta table does not show generation 1 (no commit of this partition); `weir tables sync` repairs it\n").stderr("check failed: 1 instance needs attention\n");
    assert_eq!(stderr(&out), "check failed: 1 instance needs attention\n");
    let text = stdout(&out);
    assert!(
        text.starts_with("89 partitions of 1 task, summarised"),
        "{text}"
    );
    let behind: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("TABLE_BEHIND"))
        .collect();
    assert_eq!(behind.len(), 1, "{text}");
    assert!(
        behind[0].starts_with("TABLE_BEHIND pq 2026-")
            && behind[0].ends_with("`weir tables sync` repairs it"),
        "{text}"
    );
}

// On a terminal "a screen" is its height: 20 rows hold
// the heading, the table and 11 problems, and the line saying how many more.
#[test]
fn status_summary_fits_the_terminal() {
    let sb = at_scale();
    // util-linux `script` gives weir a pseudo-terminal of 20 rows.
    let out = std::process::Command::new("script")
        .args(["-qec"])
        .arg(format!(
            "stty rows 20 cols 120; {} status m.toml",
            env!("CARGO_BIN_EXE_weir")
        ))
        .arg("/dev/null")
        .current_dir(sb.path())
        .env("WEIR_TODAY", "2026-11-29")
        .env("NO_COLOR", "1")
        .output()
        .expect("script runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out).replace("\r\n", "\n");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 19, "{text}");
    assert_eq!(lines[6], "84 problems, oldest first:", "{text}");
    assert_eq!(
        lines[18],
        "… 73 more: narrow with `--task`, `--state` or `--from`/`--to`, or list them with `--all`"
    );
}
