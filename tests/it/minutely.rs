//! Minute schemes: `kind = "minutely"` with `every = N`, keys on the local
//! clock (`2026-11-01T01:15-05:00` in a repeated hour), mapped to and from
//! hours and days by the rules every scheme follows, and located
//! diagnostics for a bad `every`.

use weir::manifest::Manifest;

use crate::support::{assert_snapshot, ok, repo, run_in, stderr, stdout, Sandbox, Visible};

/// Quarter hours in New York, an hourly and a daily rollup over them.
const MANIFEST: &str = r#"
[pipeline]
name = "ticks"
code_version = "1"
warehouse = "wh"

[partitions.quarter]
kind = "minutely"
every = 15
start = "2026-10-31T00:00"
timezone = "America/New_York"

[partitions.hour]
kind = "hourly"
start = "2026-10-31T00"
timezone = "America/New_York"

[partitions.day]
kind = "daily"
start = "2026-10-31"
timezone = "America/New_York"

[tasks.ticks]
command = ["sh", "ticks.sh"]
partitioned_by = "quarter"
output = { dataset = "ticks", grain = ["quarter"] }

[tasks.hourly]
command = ["sh", "rollup.sh"]
partitioned_by = "hour"
inputs = ["ticks"]
output = { dataset = "hourly", grain = ["quarter"] }

[tasks.daily]
command = ["sh", "rollup.sh"]
partitioned_by = "day"
inputs = ["ticks"]
output = { dataset = "daily", grain = ["quarter"] }
"#;

fn sandbox() -> Sandbox {
    let sb = Sandbox::new(MANIFEST);
    sb.script(
        "ticks.sh",
        r#"printf 'quarter\n%s\n' "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/t.csv""#,
    );
    // Every mapped quarter, in the order of _keys.json (keys hold `:`, so
    // the directories are the encoded keys).
    sb.script(
        "rollup.sh",
        r#"printf 'quarter\n' > "$WEIR_OUTPUT_DIR/out.csv"
for d in $(ls "$WEIR_INPUT_TICKS"); do
  [ -d "$WEIR_INPUT_TICKS/$d" ] && tail -n +2 "$WEIR_INPUT_TICKS/$d/t.csv" >> "$WEIR_OUTPUT_DIR/out.csv"
done
true
"#,
    );
    sb
}

// An hour repeated by New York's fall-back takes the four
// quarters of that pass, whose keys carry the offset as hourly keys do
#[test]
fn quarters_of_the_repeated_hour_carry_their_offset() {
    let sb = sandbox();
    let out = sb.run("r1", &["--partition", "2026-11-01T01-05:00"]);
    assert_eq!(
        ok(&out).lines().next(),
        Some("run r1: 5 task instances: 5 published; 0 retries")
    );
    let mut published: Vec<String> = sb
        .warehouse()
        .partitions("ticks")
        .unwrap()
        .into_iter()
        .collect();
    published.sort();
    assert_eq!(
        published,
        [
            "2026-11-01T01:00-05:00",
            "2026-11-01T01:15-05:00",
            "2026-11-01T01:30-05:00",
            "2026-11-01T01:45-05:00",
        ]
    );
    let rows = Visible::of(&sb.store("hourly", "2026-11-01T01-05:00")).rows();
    let mut quarters: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    quarters.sort();
    assert_eq!(
        quarters,
        published.iter().map(String::as_str).collect::<Vec<_>>()
    );
    // The first pass through 01:00 is a different hour, not yet published.
    assert!(sb
        .store("hourly", "2026-11-01T01-04:00")
        .latest()
        .unwrap()
        .is_none());
}

// A day of 25 hours takes its hundred quarters; a quarter's
// own key says which pass of the repeated hour it is
#[test]
fn the_plan_of_a_fall_back_day_takes_a_hundred_quarters() {
    let sb = sandbox();
    let out = sb.weir_out(&[
        "plan",
        "m.toml",
        "--task",
        "daily",
        "--partition",
        "2026-11-01",
    ]);
    let text = ok(&out);
    assert!(
        text.contains("daily 2026-11-01 ← ticks × 100 (2026-11-01T00:00 … 2026-11-01T23:45)"),
        "{text}"
    );
    let out = sb.weir_out(&[
        "plan",
        "m.toml",
        "--task",
        "ticks",
        "--partition",
        "2026-11-01T01:15",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("2026-11-01T01:15"), "{err}");
}

// `every` must tile the hour; the error points at it
#[test]
fn a_bad_every_is_a_located_diagnostic() {
    let path = repo().join("tests/fixtures/bad/bad_every.toml");
    let errors = Manifest::load(&path).unwrap_err();
    assert_eq!(errors.errors.len(), 1, "{:?}", errors.errors);
    assert_eq!(errors.errors[0].code, "weir::manifest::bad_every");
    assert_eq!(errors.errors[0].line_col(), Some((8, 9)));
    let out = run_in(
        &repo().join("tests/fixtures/bad"),
        &["validate", "bad_every.toml"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert_snapshot(
        &repo().join("tests/fixtures/bad/bad_every.stderr"),
        &stderr(&out),
    );
}

// Every other misuse of `every` and of minute keys, one
// row per rule: (scheme lines, code, message, help)
#[test]
fn each_misuse_of_every_and_minute_keys_is_a_located_error() {
    let cases = [
        (
            "kind = \"minutely\"\nstart = \"2026-11-01T00:00\"",
            "weir::manifest::missing_key",
            "minutely scheme `tick` needs `every`",
            "add `every = 5` (minutes per partition: 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)",
        ),
        (
            "kind = \"minutely\"\nevery = 60\nstart = \"2026-11-01T00:00\"",
            "weir::manifest::bad_every",
            "minutely scheme `tick` cannot have periods of 60 minutes",
            "for one partition per hour, write `kind = \"hourly\"`",
        ),
        (
            "kind = \"minutely\"\nevery = 0\nstart = \"2026-11-01T00:00\"",
            "weir::manifest::bad_every",
            "minutely scheme `tick` cannot have periods of 0 minutes",
            "periods must tile the hour: write one of 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30",
        ),
        (
            "kind = \"daily\"\nevery = 5\nstart = \"2026-11-01\"",
            "weir::manifest::unexpected_key",
            "daily scheme `tick` cannot have `every`",
            "remove `every`, or make the scheme `kind = \"minutely\"`",
        ),
        (
            "kind = \"minutely\"\nevery = 5\nstart = \"2026-11-01T00:07\"",
            "weir::manifest::bad_partition_key",
            "`2026-11-01T00:07` is not a minutely partition key",
            "write a key such as \"2026-09-20T13:05\" (local time, minutes a multiple of 5; a repeated hour's time ends with its offset, \"-04:00\")",
        ),
        (
            "kind = \"minutely\"\nevery = 20\nstart = \"2026-07-01T00:00\"\ntimezone = \"Australia/Lord_Howe\"",
            "weir::manifest::fractional_offset_change",
            "minutely scheme `tick` cannot be in `Australia/Lord_Howe`: its clocks change by a fraction of 20 minutes (+10:30 to +11:00 at 2026-10-03T15:30:00Z)",
            "its local periods would not stay whole 20-minute periods: choose an `every` that divides the change, or a zone such as \"UTC\"",
        ),
    ];
    let manifest = |scheme: &str| {
        Sandbox::new(&format!(
            "[pipeline]\nname = \"t\"\ncode_version = \"1\"\nwarehouse = \"wh\"\n\n[partitions.tick]\n{scheme}\n\n[tasks.a]\ncommand = [\"true\"]\npartitioned_by = \"tick\"\noutput = {{ dataset = \"a\", grain = [\"x\"] }}\n"
        ))
    };
    for (scheme, code, message, help) in cases {
        let sb = manifest(scheme);
        let errors = Manifest::load(&sb.path().join("m.toml")).unwrap_err();
        let first = &errors.errors[0];
        assert_eq!(
            (first.code, first.message.as_str()),
            (code, message),
            "{scheme}"
        );
        assert_eq!(first.help.as_deref(), Some(help), "{scheme}");
        assert!(first.line_col().is_some(), "{scheme}: located");
    }
    // 30-minute periods take Lord Howe's half-hour change.
    manifest("kind = \"minutely\"\nevery = 30\nstart = \"2026-07-01T00:00\"\ntimezone = \"Australia/Lord_Howe\"").manifest();
}

// The latest complete quarter is the one whose 15 minutes
// have ended, offset included in the repeated hour
#[test]
fn the_latest_complete_quarter_is_due_when_it_ends() {
    let sb = sandbox();
    let latest = |now: &str| {
        let out = sb
            .weir(&["plan", "m.toml", "--task", "ticks"])
            .env("WEIR_NOW", now)
            .output()
            .unwrap();
        ok(&out).lines().nth(1).unwrap_or_default().to_owned()
    };
    // 01:15-05:00 runs from 06:15Z to 06:30Z.
    assert_eq!(
        latest("2026-11-01T06:29:59Z"),
        "latest complete partition: 2026-11-01T01:00-05:00 (no catch-up: earlier partitions run only as a backfill)"
    );
    assert_eq!(
        latest("2026-11-01T06:30:00Z"),
        "latest complete partition: 2026-11-01T01:15-05:00 (no catch-up: earlier partitions run only as a backfill)"
    );
    assert_eq!(
        latest("2026-11-01T05:15:00Z"),
        "latest complete partition: 2026-11-01T01:00-04:00 (no catch-up: earlier partitions run only as a backfill)"
    );
}
