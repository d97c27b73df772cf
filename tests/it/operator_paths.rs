//! Hourly schemes in zones with a sub-hour offset, and operator paths tried
//! as a new user would (every suggested command is pasted into a shell and
//! must work).

use crate::support::{cmd, ok, stderr, stdout, Cmd, Sandbox, Visible};

/// Runs `command` (as printed by weir, between backticks) through `sh -c`
/// in the sandbox, as a person pasting it would.
fn paste(sb: &Sandbox, command: &str) -> Cmd {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_weir"));
    let dir = bin.parent().unwrap().display().to_string();
    cmd("sh", &["-c", command])
        .current_dir(sb.path())
        .redact(&sb.path().display().to_string(), "$SB")
        .env("PATH", format!("{dir}:{}", std::env::var("PATH").unwrap()))
        .env("WEIR_TODAY", "2026-11-29")
        .env("COLUMNS", "80")
}

/// The text between the backticks that follow `after` in `text`.
#[track_caller]
fn command_after(text: &str, after: &str) -> String {
    let at = text
        .find(after)
        .unwrap_or_else(|| panic!("no {after:?} in:\n{text}"));
    let rest = &text[at + after.len()..];
    let start = rest.find('`').expect("an opening backtick") + 1;
    let end = start + rest[start..].find('`').expect("a closing backtick");
    rest[start..end].to_string()
}

const HOURLY: &str = r#"
[pipeline]
name = "tz"
code_version = "1"
warehouse = "wh"

[partitions.nepal]
kind = "hourly"
timezone = "Asia/Kathmandu"
start = "2026-11-28T00"
end = "2026-11-28T03"

[partitions.liberia]
kind = "hourly"
timezone = "Africa/Monrovia"
start = "2026-11-28T00"
end = "2026-11-28T03"

[tasks.ktm]
command = ["sh", "hour.sh"]
partitioned_by = "nepal"
output = { dataset = "ktm", grain = ["hour"] }

[tasks.mlw]
command = ["sh", "hour.sh"]
partitioned_by = "liberia"
output = { dataset = "mlw", grain = ["hour"] }
"#;

// Kathmandu (+05:45) and Monrovia keys were refused key by
// key (the sub-hour phase came from 1970, with the wrong sign)
#[test]
fn hourly_schemes_in_nepal_and_liberia_validate_plan_and_run() {
    let sb = Sandbox::new(HOURLY);
    sb.script(
        "hour.sh",
        r#"printf 'hour\n%s\n' "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/h.csv""#,
    );
    sb.cmd(&["validate", "m.toml"])
        .assert()
        .success()
        .stdout("ok: m.toml (pipeline `tz`, code_version 1: 2 tasks, 2 partition schemes, 1 pool, 0 backfills)\n")
        .stderr("");
    sb.cmd(&[
        "plan",
        "m.toml",
        "--from",
        "2026-11-28",
        "--to",
        "2026-11-28",
    ])
    .assert()
    .success()
    .stdout("plan for `tz` (code_version 1)\nrange: 2026-11-28 to 2026-11-28 (ad hoc)\n8 will run, 0 current (skipped), 0 stale (redone), 0 blocked (held, quarantined), 0 waiting (input not ready), 0 accepted\n\nstep  task  scheme                             pool     retry    instances  expected\n   1  ktm   nepal (hourly, Asia/Kathmandu)     default  default          4  1m\n   2  mlw   liberia (hourly, Africa/Monrovia)  default  default          4  1m\n\npool     slots  instances  busy  estimated wall time\ndefault      4          8  100%  2m\n\ntotal: 8 task instances, estimated wall time 2m\np90: 2m (every attempt at its p90)\ncritical path: mlw\nattempt durations: each task's expected_duration (no attempt recorded)\n")
    .stderr("");
    sb.run_cmd("r1", &["--from", "2026-11-28", "--to", "2026-11-28"])
        .assert()
        .success()
        .stdout("run r1: 8 task instances: 8 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("mlw 2026-11-28T02 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:adc36ad047e237bced1bc57585db10e0e7422ec4772dad9848c8dbf1020a52ff\nktm 2026-11-28T00 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:ec3ad84c3dfddde7461944d07226dbc1a76d722f30cf8ec11466a2b685e42af6\nktm 2026-11-28T02 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:adc36ad047e237bced1bc57585db10e0e7422ec4772dad9848c8dbf1020a52ff\nmlw 2026-11-28T01 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:caccdefb4724bc326a6e3349890ba95ffca8755b5d65105b6fd2dea29df31953\nktm 2026-11-28T01 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:caccdefb4724bc326a6e3349890ba95ffca8755b5d65105b6fd2dea29df31953\nmlw 2026-11-28T03 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:ddfb099e9bbda73a6c085655b0cda4cb04145bce28cb30f00f840b30a8ff4554\nktm 2026-11-28T03 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:ddfb099e9bbda73a6c085655b0cda4cb04145bce28cb30f00f840b30a8ff4554\nmlw 2026-11-28T00 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:ec3ad84c3dfddde7461944d07226dbc1a76d722f30cf8ec11466a2b685e42af6\n");
    // Each key round-trips: published under its key, passed to the task
    // as it, and named by `show`.
    for dataset in ["ktm", "mlw"] {
        let keys = [
            "2026-11-28T00",
            "2026-11-28T01",
            "2026-11-28T02",
            "2026-11-28T03",
        ];
        for key in keys {
            let rows = Visible::of(&sb.store(dataset, key)).rows();
            assert_eq!(rows, vec![vec![key.to_string()]], "{dataset} {key}");
        }
        sb.cmd(&["show", "m.toml", dataset, "--partition", "2026-11-28T02"])
            .assert()
            .success()
            .stdout("hour\n2026-11-28T02\n")
            .stderr("");
    }
}

// A sub-minute phase (Liberia was 44 min 30 s behind UTC
// until 1972): its hours are whole local hours; a range across the change
// to UTC is refused
#[test]
fn liberia_before_1972_keeps_its_sub_minute_phase() {
    let manifest = |end: &str| {
        format!(
            r#"[pipeline]
name = "tz"
code_version = "1"
warehouse = "wh"

[partitions.liberia]
kind = "hourly"
timezone = "Africa/Monrovia"
start = "1971-03-01T00"
{end}

[tasks.old]
command = ["sh", "hour.sh"]
partitioned_by = "liberia"
output = {{ dataset = "old", grain = ["hour"] }}
"#
        )
    };
    let sb = Sandbox::new(&manifest("end = \"1971-03-01T03\""));
    sb.script(
        "hour.sh",
        r#"printf 'hour\n%s\n' "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/h.csv""#,
    );
    ok(&sb.weir_out(&["validate", "m.toml"]));
    let out = sb.run("r1", &["--from", "1971-03-01", "--to", "1971-03-01"]);
    assert!(
        ok(&out).starts_with("run r1: 4 task instances: 4 published; 0 retries\n"),
        "{}",
        stdout(&out)
    );
    for key in [
        "1971-03-01T00",
        "1971-03-01T01",
        "1971-03-01T02",
        "1971-03-01T03",
    ] {
        let out = sb.weir_out(&["show", "m.toml", "old", "--partition", key]);
        assert_eq!(ok(&out), format!("hour\n{key}\n"));
    }
    let open = Sandbox::new(&manifest(""));
    let out = open.weir_out(&["validate", "m.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("× hourly scheme `liberia` cannot be in `Africa/Monrovia`: its clocks change\n  │ by a fraction of an hour (-00:44:30 to +00:00 at 1972-01-07T00:44:30Z)"),
        "{}",
        stderr(&out)
    );
}

// Lord Howe's half-hour DST was accepted, then mislabelled
// hours; refused at validate wherever `start` falls
#[test]
fn an_hourly_scheme_in_lord_howe_is_refused_at_validate() {
    for (start, change) in [
        (
            "2026-11-28T00",
            "(+11:00 to +10:30 at 2027-04-03T15:00:00Z)",
        ),
        (
            "2026-07-01T00",
            "(+10:30 to +11:00 at 2026-10-03T15:30:00Z)",
        ),
    ] {
        let sb = Sandbox::new(&format!(
            r#"[pipeline]
name = "tz"
code_version = "1"
warehouse = "wh"

[partitions.island]
kind = "hourly"
timezone = "Australia/Lord_Howe"
start = "{start}"

[tasks.lh]
command = ["true"]
partitioned_by = "island"
output = {{ dataset = "lh", grain = ["hour"] }}
"#
        ));
        for command in ["validate", "plan", "run"] {
            sb.cmd(&[command, "m.toml"])
                .assert()
                .code(2)
                .stdout("")
                .stderr("weir::manifest::fractional_offset_change\n...\nerror: `m.toml` is not a valid manifest: 1 error\n")
                .stderr_contains(&[
                    "× hourly scheme `island` cannot be in `Australia/Lord_Howe`: its clocks\n  │ change by a fraction of an hour ",
                    change,
                    "╰── offsets change by a fraction of an hour",
                    "╰── from here on",
                    "help: its local hours would not stay whole hours: make the scheme `kind =\n        \"daily\"`, or hourly in a zone such as \"UTC\"",
                ]);
            assert!(!sb.path().join("wh").exists(), "nothing is written");
        }
    }
}

const OPS: &str = r#"
[pipeline]
name = "ops"
code_version = "1"
warehouse = "wh"

[partitions.day]
kind = "daily"
start = "2026-11-20"

[partitions.region]
kind = "static"
keys = ["eu", "us"]

[datasets.raw]
path = "in/{partition}.csv"
format = "csv"

[tasks.load]
command = ["sh", "-c", "cp \"$WEIR_INPUT_RAW\" \"$WEIR_OUTPUT_DIR/out.csv\""]
partitioned_by = "day"
inputs = ["raw"]
output = { dataset = "loaded", grain = ["id"] }

[tasks.regional]
command = ["sh", "-c", "cp \"$WEIR_INPUT_LOADED/out.csv\" \"$WEIR_OUTPUT_DIR/out.csv\""]
partitioned_by = ["region", "day"]
inputs = ["loaded"]
output = { dataset = "regional", grain = ["id"] }
"#;

// A missing external input made the run say HELD (exit 1)
// while status showed nothing, explain said "not run yet" and retry refused;
// now, as an input a sensor waits for, the run says WAITING too (exit 0, nothing done)
#[test]
fn a_missing_external_input_is_one_story_with_a_command_that_works() {
    let sb = Sandbox::new(OPS);
    std::fs::create_dir(sb.path().join("in")).unwrap();
    sb.run_cmd("r1", &[])
        .assert()
        .success()
        .stdout("run r1: 3 task instances: 3 waiting; 0 retries\n  WAITING     load 2026-11-28: external input `raw` (./in/2026-11-28.csv) does not exist; nothing done, no marker: the next run checks again (`--wait DURATION` waits for it)\n  WAITING     regional eu|2026-11-28: upstream `load` 2026-11-28 waits for its inputs\n  WAITING     regional us|2026-11-28: upstream `load` 2026-11-28 waits for its inputs\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr("");
    // status: the instance waits on that input, by name and path.
    let status = sb
        .cmd(&["status", "m.toml"])
        .assert()
        .success()
        .stdout("nothing published yet in $SB/wh\nmissing: loaded: 9 expected partitions without a publication: 2026-11-20, 2026-11-21, 2026-11-22, 2026-11-23, 2026-11-24, 2026-11-25, 2026-11-26, 2026-11-27, 2026-11-28\nmissing: regional: 18 expected partitions without a publication: eu|2026-11-20, eu|2026-11-21, eu|2026-11-22, eu|2026-11-23, eu|2026-11-24, eu|2026-11-25, eu|2026-11-26, eu|2026-11-27, eu|2026-11-28, us|2026-11-20, …\nWAITING     load: 4 earlier partitions without their external input too (`weir status --json` lists them)\nWAITING     load 2026-11-24: external input `raw` (./in/2026-11-24.csv) does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-24`\nWAITING     load 2026-11-25: external input `raw` (./in/2026-11-25.csv) does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-25`\nWAITING     load 2026-11-26: external input `raw` (./in/2026-11-26.csv) does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-26`\nWAITING     load 2026-11-27: external input `raw` (./in/2026-11-27.csv) does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-27`\nWAITING     load 2026-11-28: external input `raw` (./in/2026-11-28.csv) does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-28`\n")
        .stderr("")
        .stdout_text();
    let json = sb.status_json();
    assert_eq!(json["waiting"].as_array().unwrap().len(), 9, "{json}");
    assert_eq!(
        json["waiting"][8]["detail"],
        "external input `raw` (./in/2026-11-28.csv) does not exist"
    );
    // explain: what is missing and what to do.
    sb.cmd(&["explain", "m.toml", "load", "--partition", "2026-11-28"])
        .assert()
        .success()
        .stdout("load 2026-11-28 (dataset `loaded`)\n\npublished: nothing\n\nattempts:\n  none\n\ninput snapshot:\n  no inputs recorded\n\nupstream:\n  none\n\nrecommended: wait for the input: external input `raw` (./in/2026-11-28.csv) does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-28` (nothing holds the instance, so `weir retry` has nothing to release)\n")
        .stderr("");
    let doc = sb
        .cmd(&[
            "explain",
            "m.toml",
            "load",
            "--partition",
            "2026-11-28",
            "--json",
        ])
        .assert()
        .success()
        .stderr("")
        .stdout_json();
    assert_eq!(doc["action"], "wait", "{doc}");
    // retry: refused, saying why and what works instead.
    sb.cmd(&[
        "retry",
        "m.toml",
        "load",
        "--partition",
        "2026-11-28",
        "--note",
        "x",
    ])
    .assert()
    .code(3)
    .stdout("")
    .stderr("error: refused: load 2026-11-28 waits for its input, not for a decision: external input `raw` (./in/2026-11-28.csv) does not exist; `weir retry` acts only on a HELD or QUARANTINED or ABANDONED or ACCEPTED instance\n  help: put it in place, then `weir run m.toml --task load --partition 2026-11-28`\n");
    // The file arrives; the command every story named works as pasted.
    std::fs::write(sb.path().join("in/2026-11-28.csv"), "id\n1\n").unwrap();
    paste(
        &sb,
        &command_after(
            &status,
            "2026-11-28.csv) does not exist; put it in place, then ",
        ),
    )
    .assert()
    .success()
    .stdout("run [..]: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/[..]/events.jsonl\n")
    .stderr("load 2026-11-28 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\n");
    let status = ok(&sb.weir_out(&["status", "m.toml"]));
    assert!(!status.contains("WAITING     load 2026-11-28"), "{status}");
}

// Suggested commands printed `--partition eu|2026-11-15`
// unquoted, a pipe when pasted into a shell
#[test]
fn suggested_commands_quote_keys_and_work_when_pasted() {
    let sb = Sandbox::new(OPS);
    std::fs::create_dir(sb.path().join("in")).unwrap();
    // As an input a sensor waits for, the instance waits with its upstream (exit 0),
    // not SKIPPED.
    assert_eq!(sb.run("r1", &[]).status.code(), Some(0));
    let out = sb.weir_out(&[
        "explain",
        "m.toml",
        "regional",
        "--partition",
        "eu|2026-11-28",
    ]);
    let explain = ok(&out);
    assert!(
        explain
            .ends_with("recommended: not run yet: `weir run m.toml --partition 'eu|2026-11-28'`\n"),
        "{explain}"
    );
    std::fs::write(sb.path().join("in/2026-11-28.csv"), "id\n1\n").unwrap();
    paste(&sb, &command_after(&explain, "not run yet: "))
        .assert()
        .success()
        .stdout("run [..]: 2 task instances: 2 published; 0 retries\nevents: $SB/wh/_runs/[..]/events.jsonl\n")
        .stderr("load 2026-11-28 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\nregional eu|2026-11-28 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\n");
    assert_eq!(
        Visible::of(&sb.store("regional", "eu|2026-11-28")).rows(),
        vec![vec!["1".to_string()]]
    );
}

// A static key alone on `--partition` selected nothing
// without saying why
#[test]
fn a_static_key_alone_says_why_it_selects_nothing() {
    let sb = Sandbox::new(OPS);
    for command in ["plan", "run"] {
        sb.cmd(&[command, "m.toml", "--partition", "eu"])
            .assert()
            .code(2)
            .stdout("")
            .stderr(
            "weir::plan::selects_nothing\n\n  × partition `eu` selects no instance: it is a `region` key, and `regional`\n  │ is also partitioned by `day`, of which no key was given\n  help: name a full key, e.g. `--partition 'eu|2026-11-28'`, or add the other\n        dimensions' keys: `--partition eu --partition 2026-11-28`\n",
            );
    }
    // Both suggestions select that instance.
    let plan = ok(&sb.weir_out(&[
        "plan",
        "m.toml",
        "--partition",
        "eu",
        "--partition",
        "2026-11-28",
    ]));
    assert!(plan.contains("partitions: eu, 2026-11-28\n"), "{plan}");
    assert!(
        plan.contains("   2  regional  region × day (daily)  default  default          1  1m\n"),
        "{plan}"
    );
}

// New York hours into UTC days validated silently and
// shifted data by a day
#[test]
fn a_mapping_across_timezones_warns_and_the_plan_shows_its_rule() {
    let sb = Sandbox::new(
        r#"[pipeline]
name = "tz"
code_version = "1"
warehouse = "wh"

[partitions.ny_hour]
kind = "hourly"
timezone = "America/New_York"
start = "2026-11-20T00"

[partitions.day]
kind = "daily"
start = "2026-11-21"

[tasks.clicks]
command = ["sh", "-c", "echo hour > \"$WEIR_OUTPUT_DIR/h.csv\""]
partitioned_by = "ny_hour"
output = { dataset = "clicks", grain = ["hour"] }

[tasks.daily]
command = ["sh", "-c", "echo hour > \"$WEIR_OUTPUT_DIR/h.csv\""]
partitioned_by = "day"
inputs = ["clicks"]
output = { dataset = "daily", grain = ["hour"] }
"#,
    );
    let warning = "weir::manifest::cross_timezone_mapping\n\n  ⚠ input `clicks` of task `daily` maps `America/New_York` hours into `UTC`\n  │ days\n    ╭─[m.toml:23:11]\n 22 │ partitioned_by = \"day\"\n 23 │ inputs = [\"clicks\"]\n    ·           ────┬───\n    ·               ╰── each UTC day takes the America/New_York hours that start inside it\n 24 │ output = { dataset = \"daily\", grain = [\"hour\"] }\n    ╰────\n  help: UTC day 2026-11-21 takes `clicks` 2026-11-20T19 … 2026-11-21T18; if\n        you meant the same local day, partition both tasks in one timezone\n\n";
    let out = sb.weir_out(&["validate", "m.toml"]);
    assert_eq!(
        ok(&out),
        "ok: m.toml (pipeline `tz`, code_version 1: 2 tasks, 2 partition schemes, 1 pool, 0 backfills)\n"
    );
    assert_eq!(stderr(&out), warning);
    let out = sb.weir_out(&["plan", "m.toml"]);
    assert!(
        ok(&out).contains("inputs by partition (first planned partition of each task):\n  daily 2026-11-28 ← clicks × 24 (2026-11-27T19 … 2026-11-28T18); each UTC day takes the America/New_York hours that start inside it\n"),
        "{}",
        stdout(&out)
    );
    assert_eq!(stderr(&out), warning);
    let out = sb.run("r1", &["--task", "clicks", "--partition", "2026-11-28T18"]);
    assert!(
        ok(&out).starts_with("run r1: 1 task instance: 1 published; 0 retries\n"),
        "{}",
        stdout(&out)
    );
    assert!(stderr(&out).starts_with(warning), "{}", stderr(&out));
    // Commands that only read stay quiet.
    assert_eq!(stderr(&sb.weir_out(&["status", "m.toml"])), "");
    // A `depends_on` maps partitions as an input does: warned of too.
    let text = std::fs::read_to_string(sb.path().join("m.toml")).unwrap();
    std::fs::write(
        sb.path().join("m.toml"),
        text.replace("inputs = [\"clicks\"]", "depends_on = [\"clicks\"]"),
    )
    .unwrap();
    let out = sb.weir_out(&["validate", "m.toml"]);
    ok(&out);
    assert!(
        stderr(&out).starts_with("weir::manifest::cross_timezone_mapping\n\n  ⚠ upstream task `clicks` of task `daily` maps `America/New_York` hours into\n  │ `UTC` days\n    ╭─[m.toml:23:15]\n"),
        "{}",
        stderr(&out)
    );
}

const BACKFILL: &str = r#"
[pipeline]
name = "bf"
code_version = "1"
warehouse = "wh"

[partitions.day]
kind = "daily"
start = "2026-10-01"

[partitions.month]
kind = "monthly"
start = "2026-10"

[pools.rebuild]
slots = 1

[tasks.sales]
command = ["sh", "day.sh"]
partitioned_by = "day"
output = { dataset = "sales", grain = ["day"] }

[tasks.close]
command = ["sh", "-c", "echo day > \"$WEIR_OUTPUT_DIR/m.csv\""]
partitioned_by = "month"
inputs = ["sales"]
output = { dataset = "close", grain = ["day"] }

[backfills.october]
from = "2026-10-01"
to = "2026-10-31"
pool = "rebuild"
reason = "restate October"
"#;

/// A run summary's counts: "3 published, 29 interrupted", zeros left out.
fn counts(parts: &[(usize, &str)]) -> String {
    parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn backfill_sandbox() -> Sandbox {
    let sb = Sandbox::new(BACKFILL);
    sb.script(
        "day.sh",
        r#"if [ -e "slow/$WEIR_PARTITION" ]; then sleep 30; fi
printf 'day\n%s\n' "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/d.csv"
"#,
    );
    sb
}

// The backfill header said "(1 partition)" for 31 days,
// and the report's Gantt labelled lanes with the tasks' own pool
#[test]
fn the_backfill_header_counts_each_scheme_and_its_lanes_are_its_pool() {
    // A monthly task planned first: the header counted its one partition.
    let sb = Sandbox::new(&BACKFILL.replace(
        "[tasks.sales]",
        "[tasks.budget]\ncommand = [\"sh\", \"-c\", \"echo day > \\\"$WEIR_OUTPUT_DIR/b.csv\\\"\"]\npartitioned_by = \"month\"\noutput = { dataset = \"budget\", grain = [\"day\"] }\n\n[tasks.sales]",
    ));
    sb.script(
        "day.sh",
        r#"printf 'day\n%s\n' "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/d.csv""#,
    );
    for args in [
        &["plan", "m.toml", "--backfill", "october"][..],
        &["backfill", "m.toml", "october", "--dry-run"][..],
    ] {
        let out = sb.weir_out(args);
        assert!(
            ok(&out).starts_with("plan for `bf` (code_version 1)\nbackfill `october`: 2026-10-01 to 2026-10-31 (1 partition of `month (monthly)`, 31 of `day (daily)`)\nreason: restate October\n"),
            "{}",
            stdout(&out)
        );
    }
    let out = sb.weir_out(&["backfill", "m.toml", "october", "--run-id", "b1"]);
    assert!(ok(&out).starts_with("run b1: 33 task instances: 33 published; 0 retries\n"));
    let out = sb.weir_out(&["report", "m.toml", "--run", "b1", "--out", "r.html"]);
    assert_eq!(ok(&out), "wrote r.html\n");
    let html = std::fs::read_to_string(sb.path().join("r.html")).unwrap();
    // One slot of `rebuild`: one lane, holding all 33 attempts.
    assert_eq!(html.matches("data-pool=\"rebuild\"").count(), 1, "{html}");
    assert_eq!(html.matches("data-pool=\"default\"").count(), 0, "{html}");
    assert!(
        html.contains("<span class=\"label\">rebuild 1</span>"),
        "{html}"
    );
}

// An interrupted forced backfill could not be resumed
// (the hint, "run the same command again", forced everything again)
#[test]
fn an_interrupted_forced_backfill_resumes_with_the_command_it_prints() {
    let _serial = crate::support::exclusive();
    let sb = backfill_sandbox();
    ok(&sb.weir_out(&["backfill", "m.toml", "october", "--run-id", "b1"]));
    std::fs::create_dir(sb.path().join("slow")).unwrap();
    std::fs::write(sb.path().join("slow/2026-10-05"), "").unwrap();
    let engine = crate::support::Engine::spawn(
        sb.weir(&["backfill", "m.toml", "october", "--force", "--run-id", "f1"]),
        sb.path(),
        "f1",
    );
    // One slot: days forced one at a time until 2026-10-05 sleeps.
    crate::support::poll_until(
        "2026-10-05 running",
        std::time::Duration::from_secs(60),
        || {
            std::fs::read_to_string(sb.path().join("wh/_runs/f1/events.jsonl")).is_ok_and(|t| {
                t.lines()
                    .any(|l| l.contains("\"RUNNING\"") && l.contains("2026-10-05"))
            })
        },
    );
    engine.signal(libc::SIGINT);
    let out = engine.finish(std::time::Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let generation = |dataset: &str, key: &str| {
        sb.store(dataset, key)
            .latest()
            .unwrap()
            .unwrap()
            .generation
            .get()
    };
    let days: Vec<String> = (1..=31).map(|d| format!("2026-10-{d:02}")).collect();
    let forced = days.iter().filter(|k| generation("sales", k) == 2).count();
    assert_eq!(generation("sales", "2026-10-05"), 1);
    let undone = 32 - forced;
    assert!(
        stdout(&out).starts_with(&format!(
            "run f1: 32 task instances: {}; 0 retries\n",
            counts(&[(forced, "published"), (undone, "interrupted")])
        )),
        "{}",
        stdout(&out)
    );
    let err = stderr(&out);
    assert!(
        err.ends_with(&format!("weir: interrupted by SIGINT: {undone} task instances left undone; `weir backfill m.toml october --force --resume f1` resumes it (the same command would force every partition again)\n")),
        "{err}"
    );
    std::fs::remove_file(sb.path().join("slow/2026-10-05")).unwrap();
    paste(
        &sb,
        &format!("{} --run-id f2", command_after(&err, "left undone; ")),
    )
    .assert()
    .success()
    .stdout(&format!(
        "run f2: 32 task instances: {}; 0 retries\nevents: $SB/wh/_runs/f2/events.jsonl\n",
        counts(&[(undone, "published"), (forced, "already published")])
    ))
    .stderr_contains(&[": ALREADY_PUBLISHED generation 2 was published at "]);
    // Every day forced exactly once: generation 2, none rebuilt twice.
    for key in &days {
        assert_eq!(generation("sales", key), 2, "{key}");
    }
    assert_eq!(generation("close", "2026-10"), 2);
    // A run that is not this backfill's is refused before anything runs.
    sb.cmd(&[
        "backfill", "m.toml", "october", "--force", "--resume", "nosuch",
    ])
    .assert()
    .code(2)
    .stdout("")
    .stderr("error: --resume: no run `nosuch` in $SB/wh/_runs\n  help: the interrupted backfill printed its run id (`run ID: …`); `weir events` lists every run\n");
}

// The JSON Schema accepted month 13, day 32 and 30 February
#[test]
fn the_schema_refuses_impossible_dates() {
    let schema: serde_json::Value = serde_json::from_str(&weir::manifest::json_schema()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let manifest = |kind: &str, start: &str| {
        let text = format!(
            "[pipeline]\nname='x'\ncode_version='1'\nwarehouse='w'\n[partitions.p]\nkind='{kind}'\nstart='{start}'\n[tasks.t]\ncommand=['true']\noutput={{dataset='d', grain=['a']}}\n"
        );
        serde_json::to_value(toml::from_str::<toml::Value>(&text).unwrap()).unwrap()
    };
    for (kind, start, valid) in [
        ("daily", "2026-09-20", true),
        ("daily", "2026-13-01", false),
        ("daily", "2026-01-32", false),
        ("daily", "2026-02-30", false),
        ("daily", "2026-04-31", false),
        ("daily", "2026-02-29", false),
        ("daily", "2028-02-29", true),
        ("daily", "2100-02-29", false),
        ("daily", "2000-02-29", true),
        ("hourly", "2026-09-20T13", true),
        ("hourly", "2026-10-25T02+01:00", true),
        ("hourly", "2026-09-20T24", false),
        ("hourly", "2026-02-30T00", false),
        ("weekly", "2026-W38", true),
        ("weekly", "2026-W54", false),
        ("weekly", "2026-02-30", false),
        ("monthly", "2026-09", true),
        ("monthly", "2026-13", false),
        ("monthly", "2026-09-31", false),
    ] {
        assert_eq!(
            validator.is_valid(&manifest(kind, start)),
            valid,
            "{kind} start = {start}"
        );
    }
}
