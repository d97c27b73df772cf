//! Partitions across schemes: rollups wait for and pin every
//! period they cover, fan-in and fan-out, offsets and windows, backfills
//! that pull in the upstream partitions they need, and staleness after a
//! repair.

use serde_json::Value;
use weir::events::State;

use crate::support::{ok, stderr, stdout, Sandbox, Visible};

/// Daily sales, a weekly rollup and a monthly close over them, a balance
/// reading yesterday, a trailing seven days, a region × day table fanned
/// out from unpartitioned FX rates and fanned into a daily total.
const MANIFEST: &str = r#"
[pipeline]
name = "shop"
code_version = "1"
warehouse = "wh"

[partitions.day]
kind = "daily"
start = "2026-09-01"
end = "2026-09-30"

[partitions.week]
kind = "weekly"
start = "2026-09-07"
end = "2026-09-27"

[partitions.month]
kind = "monthly"
start = "2026-09"
end = "2026-09"

[partitions.region]
kind = "static"
keys = ["eu", "us"]

[tasks.sales]
command = ["sh", "sales.sh"]
partitioned_by = "day"
output = { dataset = "sales", grain = ["day"] }

[tasks.weekly]
command = ["sh", "rollup.sh"]
partitioned_by = "week"
inputs = ["sales"]
output = { dataset = "weekly", grain = ["day"] }

[tasks.monthly]
command = ["sh", "rollup.sh"]
partitioned_by = "month"
inputs = ["sales"]
output = { dataset = "monthly", grain = ["day"] }

[tasks.balance]
command = ["sh", "one.sh"]
partitioned_by = "day"
inputs = [{ dataset = "sales", offset = -1 }]
output = { dataset = "balance", grain = ["day"] }

[tasks.trailing]
command = ["sh", "rollup.sh"]
partitioned_by = "day"
inputs = [{ dataset = "sales", window = [-6, 0] }]
output = { dataset = "trailing", grain = ["day"] }

[tasks.fx]
command = ["sh", "fx.sh"]
partitioned_by = []
output = { dataset = "fx", grain = ["currency"] }

[tasks.regional]
command = ["sh", "regional.sh"]
partitioned_by = ["region", "day"]
inputs = ["fx"]
output = { dataset = "regional", grain = ["region"] }

[tasks.total]
command = ["sh", "total.sh"]
partitioned_by = "day"
inputs = ["regional"]
output = { dataset = "total", grain = ["region"] }

[backfills.mid_september]
from = "2026-09-16"
to = "2026-09-22"
pool = "default"
tasks = ["weekly", "monthly"]
reason = "rebuild the rollups of a week of late sales"

[backfills.eu_only]
from = "2026-09-20"
to = "2026-09-21"
pool = "default"
tasks = ["regional"]
keys = { region = ["eu"] }
reason = "the EU feed was late"
"#;

fn sandbox() -> Sandbox {
    let sb = Sandbox::new(MANIFEST);
    // A day's amount is 1 unless amounts/<day> says otherwise (a repair).
    sb.script(
        "sales.sh",
        r#"a=$(cat "amounts/$WEIR_PARTITION" 2>/dev/null || echo 1)
printf 'day,amount\n%s,%s\n' "$WEIR_PARTITION" "$a" > "$WEIR_OUTPUT_DIR/sales.csv"
"#,
    );
    // Every mapped day, in the order of _keys.json, one row each.
    sb.script(
        "rollup.sh",
        r#"printf 'day,amount\n' > "$WEIR_OUTPUT_DIR/out.csv"
for k in $(tr -d '[]"' < "$WEIR_INPUT_SALES/_keys.json" | tr ',' ' '); do
  tail -n +2 "$WEIR_INPUT_SALES/$k/sales.csv" >> "$WEIR_OUTPUT_DIR/out.csv"
done
"#,
    );
    sb.script(
        "one.sh",
        r#"cp "$WEIR_INPUT_SALES/sales.csv" "$WEIR_OUTPUT_DIR/out.csv""#,
    );
    sb.script(
        "fx.sh",
        r#"printf 'currency,rate\nusd,1.1\n' > "$WEIR_OUTPUT_DIR/fx.csv""#,
    );
    sb.script(
        "regional.sh",
        r#"rate=$(tail -n 1 "$WEIR_INPUT_FX/fx.csv" | cut -d, -f2)
printf 'region,day,rate\n%s,%s,%s\n' "$WEIR_PARTITION_REGION" "$WEIR_PARTITION_DAY" "$rate" > "$WEIR_OUTPUT_DIR/r.csv"
"#,
    );
    sb.script(
        "total.sh",
        r#"printf 'region,day,rate\n' > "$WEIR_OUTPUT_DIR/t.csv"
for k in eu%7C$WEIR_PARTITION us%7C$WEIR_PARTITION; do
  tail -n +2 "$WEIR_INPUT_REGIONAL/$k/r.csv" >> "$WEIR_OUTPUT_DIR/t.csv"
done
"#,
    );
    sb
}

fn snapshot_input<'a>(record: &'a weir::store::CommitRecord, name: &str) -> &'a Value {
    record.input_snapshot["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no input {name} in {}", record.input_snapshot))
}

fn pinned(record: &weir::store::CommitRecord, name: &str) -> Vec<(String, u64)> {
    snapshot_input(record, name)["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["partition"].as_str().unwrap().to_owned(),
                p["generation"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn days(first: u32, last: u32) -> Vec<String> {
    (first..=last).map(|d| format!("2026-09-{d:02}")).collect()
}

// A weekly rollup waits for its seven days and pins seven generations
#[test]
fn weekly_rollup_waits_for_and_pins_its_seven_days() {
    let sb = sandbox();
    let plan = sb
        .weir(&["plan", "m.toml", "--partition", "2026-W38"])
        .output()
        .unwrap();
    ok(&plan);
    let text = stdout(&plan);
    // The cost simulation waits for the seven days: two rounds of 1m days on
    // 4 slots, then the week; not the 2m it would be if the week ran beside them.
    let json = sb
        .weir(&["plan", "m.toml", "--partition", "2026-W38", "--json"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["total"]["estimated_wall_ms"], 3 * 60_000);
    assert_eq!(doc["tzdb"], weir::partition::time::tzdb_version());
    assert!(
        text.contains("weekly 2026-W38 ← sales × 7 (2026-09-14 … 2026-09-20)"),
        "{text}"
    );
    assert!(
        text.contains("sales × 7: 2026-09-14, 2026-09-15, 2026-09-16, 2026-09-17, 2026-09-18, 2026-09-19, 2026-09-20"),
        "the unpublished days are added and named:\n{text}"
    );

    ok(&sb.run("r1", &["--partition", "2026-W38"]));
    let events = sb.events("r1");
    let weekly_started = events
        .iter()
        .position(|e| e.task.as_deref() == Some("weekly") && e.state == State::Running)
        .expect("the week ran");
    for day in days(14, 20) {
        let published = events
            .iter()
            .position(|e| {
                e.task.as_deref() == Some("sales")
                    && e.partition.as_deref() == Some(day.as_str())
                    && e.state == State::Published
            })
            .unwrap_or_else(|| panic!("{day} published"));
        assert!(published < weekly_started, "{day} before the week");
    }
    let week = Visible::of(&sb.store("weekly", "2026-W38"));
    assert_eq!(
        pinned(&week.record, "sales"),
        days(14, 20).into_iter().map(|d| (d, 1)).collect::<Vec<_>>()
    );
    for day in days(14, 20) {
        let digest = Visible::of(&sb.store("sales", &day)).record.digest;
        let pin = snapshot_input(&week.record, "sales")["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["partition"] == day.as_str())
            .unwrap()["digest"]
            .clone();
        assert_eq!(pin, digest.as_str(), "{day}");
    }
    assert_eq!(
        week.rows(),
        days(14, 20)
            .into_iter()
            .map(|d| vec![d, "1".to_owned()])
            .collect::<Vec<_>>()
    );
    // Reruns from the seven pinned generations give the published digest.
    let verify = sb
        .weir(&["verify", "m.toml", "weekly", "--partition", "2026-W38"])
        .output()
        .unwrap();
    ok(&verify);
    assert!(
        stdout(&verify)
            .contains("deterministic: the rerun from the pinned inputs has the published digest"),
        "{}",
        stdout(&verify)
    );
    // explain names the upstream partitions the week needs, not `sales 2026-W38`.
    let explain = sb
        .weir(&["explain", "m.toml", "weekly", "--partition", "2026-W38"])
        .output()
        .unwrap();
    ok(&explain);
    let text = stdout(&explain);
    for day in days(14, 20) {
        assert!(
            text.contains(&format!("  sales -> `sales` {day}: generation 1, sha256:")),
            "{text}"
        );
    }
    // Nothing outside the week ran: no catch-up.
    assert!(sb.entries("sales", "2026-09-13", "log").is_empty());
    assert!(sb.entries("sales", "2026-09-21", "log").is_empty());
}

// A repaired day makes its week STALE; a rerun of the week republishes with the new day's digest
#[test]
fn a_repaired_day_makes_its_week_stale_until_rerun() {
    let sb = sandbox();
    ok(&sb.run("r1", &["--partition", "2026-W38"]));
    let before = Visible::of(&sb.store("weekly", "2026-W38")).record;
    let status = sb.weir(&["status", "m.toml"]).output().unwrap();
    ok(&status);
    assert!(!stdout(&status).contains("STALE"), "{}", stdout(&status));

    std::fs::create_dir(sb.path().join("amounts")).unwrap();
    std::fs::write(sb.path().join("amounts/2026-09-16"), "5\n").unwrap();
    ok(&sb.run(
        "repair",
        &["--task", "sales", "--partition", "2026-09-16", "--force"],
    ));
    let repaired = Visible::of(&sb.store("sales", "2026-09-16")).record;
    assert_eq!(repaired.generation.get(), 2);

    let status = sb.weir(&["status", "m.toml"]).output().unwrap();
    ok(&status);
    let text = stdout(&status);
    assert!(
        text.contains("STALE       weekly 2026-W38: `sales` 2026-09-16 is at generation 2, this publication read generation 1"),
        "{text}"
    );
    let plan = sb
        .weir(&["plan", "m.toml", "--partition", "2026-W38"])
        .output()
        .unwrap();
    ok(&plan);
    assert!(
        stdout(&plan).contains("  weekly 2026-W38: `sales` 2026-09-16 is at generation 2, this publication read generation 1"),
        "the plan lists the stale week as work:\n{}",
        stdout(&plan)
    );
    // Nothing reran on its own.
    assert_eq!(
        Visible::of(&sb.store("weekly", "2026-W38"))
            .record
            .generation,
        before.generation
    );

    ok(&sb.run("r2", &["--partition", "2026-W38"]));
    let week = Visible::of(&sb.store("weekly", "2026-W38"));
    assert_eq!(week.record.generation.get(), 2);
    let pins = pinned(&week.record, "sales");
    assert_eq!(pins[2], ("2026-09-16".to_owned(), 2));
    assert!(pins
        .iter()
        .filter(|(d, _)| d != "2026-09-16")
        .all(|(_, g)| *g == 1));
    let pin = &snapshot_input(&week.record, "sales")["partitions"][2]["digest"];
    assert_eq!(pin, repaired.digest.as_str());
    assert!(week
        .rows()
        .contains(&vec!["2026-09-16".to_owned(), "5".to_owned()]));
    // The other days were pinned, not rerun.
    for day in days(14, 20).iter().filter(|d| *d != "2026-09-16") {
        assert_eq!(
            Visible::of(&sb.store("sales", day)).record.generation.get(),
            1
        );
    }
    let status = sb.weir(&["status", "m.toml"]).output().unwrap();
    assert!(!stdout(&status).contains("STALE"), "{}", stdout(&status));
}

// Fan-out from an unpartitioned input and fan-in over regions
#[test]
fn fan_out_from_unpartitioned_and_fan_in_over_regions() {
    let sb = sandbox();
    ok(&sb.run("r1", &["--task", "total", "--partition", "2026-09-20"]));
    for region in ["eu", "us"] {
        let key = format!("{region}|2026-09-20");
        let regional = Visible::of(&sb.store("regional", &key));
        assert_eq!(
            regional.rows(),
            vec![vec![
                region.to_owned(),
                "2026-09-20".to_owned(),
                "1.1".to_owned()
            ]]
        );
        // The one FX partition, the same for every region.
        let fx = snapshot_input(&regional.record, "fx");
        assert_eq!(fx["partition"], "all");
        assert_eq!(fx["generation"], 1);
    }
    // Multi-dimension keys are one encoded directory each.
    assert!(sb.path().join("wh/regional/eu%7C2026-09-20/log").is_dir());
    let total = Visible::of(&sb.store("total", "2026-09-20"));
    assert_eq!(
        pinned(&total.record, "regional"),
        [
            ("eu|2026-09-20".to_owned(), 1),
            ("us|2026-09-20".to_owned(), 1)
        ]
    );
    assert_eq!(total.rows().len(), 2);
}

// An offset reads the previous period, a window the last seven; before the start is a plan error
#[test]
fn an_offset_reads_the_previous_period_and_a_window_the_last_seven() {
    let sb = sandbox();
    ok(&sb.run(
        "r1",
        &[
            "--task",
            "balance",
            "--task",
            "trailing",
            "--partition",
            "2026-09-10",
        ],
    ));
    let balance = Visible::of(&sb.store("balance", "2026-09-10"));
    let input = snapshot_input(&balance.record, "sales");
    assert_eq!(input["partition"], "2026-09-09");
    assert_eq!(
        balance.rows(),
        vec![vec!["2026-09-09".to_owned(), "1".to_owned()]]
    );
    let trailing = Visible::of(&sb.store("trailing", "2026-09-10"));
    assert_eq!(
        pinned(&trailing.record, "sales")
            .into_iter()
            .map(|(d, _)| d)
            .collect::<Vec<_>>(),
        days(4, 10)
    );

    let early = sb
        .weir(&[
            "plan",
            "m.toml",
            "--task",
            "balance",
            "--partition",
            "2026-09-01",
        ])
        .output()
        .unwrap();
    assert_eq!(early.status.code(), Some(2), "{}", stderr(&early));
    assert!(stdout(&early).is_empty());
    // miette wraps at 80 columns: compare the words.
    let words = stderr(&early)
        .split_whitespace()
        .filter(|w| *w != "│")
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        words.contains("task `balance` partition 2026-09-01 cannot be planned: upstream `sales` needs `day` partition 2026-08-31, before the scheme's start 2026-09-01"),
        "{words}"
    );
}

// A backfill over days covers the weeks and months they touch and pulls in (and names) unpublished days
#[test]
fn backfill_over_days_covers_touched_weeks_and_months() {
    let sb = sandbox();
    // Some days are published already: pinned, not rerun.
    ok(&sb.run(
        "early",
        &[
            "--task",
            "sales",
            "--partition",
            "2026-09-14",
            "--partition",
            "2026-09-15",
        ],
    ));
    let plan = sb
        .weir(&["plan", "m.toml", "--backfill", "mid_september", "--json"])
        .output()
        .unwrap();
    ok(&plan);
    let doc: Value = serde_json::from_slice(&plan.stdout).unwrap();
    let task = |name: &str| {
        doc["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} in the plan"))
            .clone()
    };
    assert_eq!(
        task("weekly")["partitions"],
        serde_json::json!(["2026-W38", "2026-W39"])
    );
    assert_eq!(
        task("monthly")["partitions"],
        serde_json::json!(["2026-09"])
    );
    let mut unpublished: Vec<String> = days(1, 13);
    unpublished.extend(days(16, 30));
    assert_eq!(task("sales")["added"], serde_json::json!(unpublished));
    assert_eq!(task("sales")["partitions"], serde_json::json!(unpublished));
    assert_eq!(
        task("weekly")["needs"][0][0]["partitions"],
        serde_json::json!(days(14, 20))
    );

    ok(&sb
        .weir(&["backfill", "m.toml", "mid_september", "--run-id", "bf"])
        .output()
        .unwrap());
    let month = Visible::of(&sb.store("monthly", "2026-09"));
    assert_eq!(pinned(&month.record, "sales").len(), 30);
    assert_eq!(Visible::of(&sb.store("weekly", "2026-W39")).rows().len(), 7);
    for day in ["2026-09-14", "2026-09-15"] {
        let record = Visible::of(&sb.store("sales", day)).record;
        assert_eq!(
            (record.generation.get(), record.run_id.as_str()),
            (1, "early")
        );
    }
}

// The bundled cross-scheme example runs for real
#[test]
fn atlasmart_web_runs_hours_to_days_to_a_week() {
    let tmp = tempfile::tempdir().unwrap();
    let src = crate::support::repo().join("pipelines");
    std::fs::copy(
        src.join("atlasmart_web.toml"),
        tmp.path().join("atlasmart_web.toml"),
    )
    .unwrap();
    crate::support::copy_tree_without_warehouse(
        &src.join("atlasmart_web"),
        &tmp.path().join("atlasmart_web"),
    );
    let out = crate::support::run_in(
        tmp.path(),
        &["run", "atlasmart_web.toml", "--run-id", "web"],
    );
    ok(&out);
    assert!(
        stdout(&out).contains("run web: 193 task instances: 193 published; 0 retries"),
        "{}",
        stdout(&out)
    );
    let wh = weir::store::Warehouse::open(&tmp.path().join("atlasmart_web/warehouse")).unwrap();
    let week = Visible::of(&wh.partition("weekly_report", "2026-W38"));
    let pins = pinned(&week.record, "sessions");
    assert_eq!(pins.len(), 21, "3 regions × 7 days");
    assert_eq!(pins[0].0, "eu|2026-09-14");
    // Every region's row counts its seven days, and the reconcile gate held.
    assert_eq!(week.record.rows, 3);
    for row in week.rows() {
        assert_eq!(row[2], "7", "{row:?}");
    }
    let day = Visible::of(&wh.partition("sessions", "us|2026-09-16"));
    let hours: Vec<String> = pinned(&day.record, "web_events")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(hours.len(), 24);
    assert_eq!(
        (hours[0].as_str(), hours[23].as_str()),
        ("2026-09-16T00", "2026-09-16T23")
    );
}

// A backfill narrows a static dimension with `keys`
#[test]
fn backfill_narrows_a_static_dimension() {
    let sb = sandbox();
    let plan = sb
        .weir(&["plan", "m.toml", "--backfill", "eu_only", "--json"])
        .output()
        .unwrap();
    ok(&plan);
    let doc: Value = serde_json::from_slice(&plan.stdout).unwrap();
    let tasks = doc["tasks"].as_array().unwrap();
    let names: Vec<&str> = tasks.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["fx", "regional"],
        "the unpublished FX partition is added"
    );
    assert_eq!(tasks[0]["added"], serde_json::json!(["all"]));
    assert_eq!(
        tasks[1]["partitions"],
        serde_json::json!(["eu|2026-09-20", "eu|2026-09-21"])
    );
    assert_eq!(
        tasks[1]["partitioned_by"],
        serde_json::json!(["region", "day"])
    );
}

// `depends_on_past` chains each region's days, not the product's order
#[test]
fn depends_on_past_follows_the_time_dimension_per_region() {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "ledger"
code_version = "1"
warehouse = "wh"

[partitions.day]
kind = "daily"
start = "2026-09-01"
end = "2026-09-30"

[partitions.region]
kind = "static"
keys = ["eu", "us"]

[tasks.balance]
command = ["true"]
partitioned_by = ["region", "day"]
depends_on_past = true
output = { dataset = "balance", grain = ["region"] }

[backfills.three_days]
from = "2026-09-10"
to = "2026-09-12"
pool = "default"
reason = "replay"
"#,
    );
    let plan = sb
        .weir(&["plan", "m.toml", "--backfill", "three_days", "--json"])
        .output()
        .unwrap();
    ok(&plan);
    let doc: Value = serde_json::from_slice(&plan.stdout).unwrap();
    assert_eq!(doc["total"]["instances"], 6);
    // Two chains of three 1m days side by side: 3m (6m if the regions were
    // one chain, 2m if the days did not wait for each other).
    assert_eq!(doc["total"]["estimated_wall_ms"], 3 * 60_000);
}

// A local day across the end of DST holds 25 hours, the repeated one named by its offset
#[test]
fn a_paris_day_across_dst_reads_25_hours() {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "clicks"
code_version = "1"
warehouse = "wh"

[partitions.hour]
kind = "hourly"
start = "2026-03-01T00"
timezone = "Europe/Paris"

[partitions.day]
kind = "daily"
start = "2026-03-01"
timezone = "Europe/Paris"

[tasks.hits]
command = ["true"]
partitioned_by = "hour"
output = { dataset = "hits", grain = ["id"] }

[tasks.daily_hits]
command = ["true"]
partitioned_by = "day"
inputs = ["hits"]
output = { dataset = "daily_hits", grain = ["id"] }
"#,
    );
    let plan = sb
        .weir(&[
            "plan",
            "m.toml",
            "--task",
            "daily_hits",
            "--partition",
            "2026-10-25",
            "--json",
        ])
        .output()
        .unwrap();
    ok(&plan);
    let doc: Value = serde_json::from_slice(&plan.stdout).unwrap();
    let hours: Vec<String> = doc["tasks"][0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(hours.len(), 25, "{hours:?}");
    assert_eq!(&hours[2..4], ["2026-10-25T02+02:00", "2026-10-25T02+01:00"]);
    assert_eq!(hours[24], "2026-10-25T23");
    let spring = sb
        .weir(&[
            "plan",
            "m.toml",
            "--task",
            "daily_hits",
            "--partition",
            "2026-03-29",
        ])
        .output()
        .unwrap();
    ok(&spring);
    assert!(
        stdout(&spring)
            .contains("daily_hits 2026-03-29 ← hits × 23 (2026-03-29T00 … 2026-03-29T23)"),
        "{}",
        stdout(&spring)
    );
}

// The partitions guide's worked example (docs/guides/partitions.md) is the plan weir prints
#[test]
fn readme_worked_example_matches_the_plan() {
    let repo = crate::support::repo();
    let page = std::fs::read_to_string(repo.join("docs/guides/partitions.md")).unwrap();
    let start = page
        .find("$ weir plan pipelines/atlasmart_web.toml\n")
        .expect("the worked example in docs/guides/partitions.md");
    let block = &page[start..];
    let block = &block[..block.find("```").unwrap()];
    // A copy: a warehouse left by running the example would change "added".
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo.join("pipelines/atlasmart_web.toml"),
        tmp.path().join("atlasmart_web.toml"),
    )
    .unwrap();
    let out = crate::support::run_in(tmp.path(), &["plan", "atlasmart_web.toml"]);
    ok(&out);
    let plan = stdout(&out);
    let lines: Vec<&str> = plan.lines().collect();
    for line in block.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        assert!(
            lines.contains(&line),
            "docs/guides/partitions.md line not in the plan: {line:?}\n{plan}"
        );
    }
}

// Published means immutable, across schemes too: an input mapped to several partitions is a private,
// read-only copy per key, checked against each generation's sums: a rollup
// that writes into it changes no published day, the week's record holds
// its own per-file sums, and a drifted day fails the week with exit 5
#[test]
fn mapped_inputs_are_private_checked_copies() {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "shop"
code_version = "1"
warehouse = "wh"

[partitions.day]
kind = "daily"
start = "2026-09-14"
end = "2026-09-20"

[partitions.week]
kind = "weekly"
start = "2026-09-14"
end = "2026-09-20"

[tasks.sales]
command = ["sh", "sales.sh"]
partitioned_by = "day"
output = { dataset = "sales", grain = ["day"] }

[tasks.weekly]
command = ["sh", "rollup.sh"]
partitioned_by = "week"
inputs = ["sales"]
output = { dataset = "weekly", grain = ["day"] }
"#,
    );
    sb.script(
        "sales.sh",
        r#"printf 'day,amount\n%s,1\n' "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/sales.csv""#,
    );
    // Reads every day, notes where and with which mode, then writes into
    // each copy (as root would, after a chmod).
    sb.script(
        "rollup.sh",
        r#"printf 'day,amount\n' > "$WEIR_OUTPUT_DIR/out.csv"
echo "$WEIR_INPUT_SALES" > "$WEIR_OUTPUT_DIR/../input-path.txt"
for k in $(tr -d '[]"' < "$WEIR_INPUT_SALES/_keys.json" | tr ',' ' '); do
  f="$WEIR_INPUT_SALES/$k/sales.csv"
  tail -n +2 "$f" >> "$WEIR_OUTPUT_DIR/out.csv"
  stat -c '%a' "$f" >> "$WEIR_OUTPUT_DIR/../modes.txt"
  chmod u+w "$f"; echo "$k,666" >> "$f"
done
"#,
    );
    // The week pulls in its seven days, then runs.
    ok(&sb.run("r1", &["--partition", "2026-W38"]));
    for day in days(14, 20) {
        let store = sb.store("sales", &day);
        assert_eq!(
            Visible::of(&store).bytes(),
            vec![format!("day,amount\n{day},1\n").into_bytes()],
            "{day} changed"
        );
        let record = Visible::of(&store).record;
        store
            .check_files(&record, weir::store::Depth::Hash)
            .unwrap_or_else(|d| panic!("{d}"));
    }
    let store = sb.store("weekly", "2026-W38");
    let week = Visible::of(&store);
    assert_eq!(
        week.rows(),
        days(14, 20)
            .into_iter()
            .map(|d| vec![d, "1".to_owned()])
            .collect::<Vec<_>>()
    );
    assert_eq!(pinned(&week.record, "sales").len(), 7);
    assert_eq!(week.record.file_sums.len(), week.record.files.len());
    assert_eq!(week.record.file_sums[0].name, "out.csv");
    store
        .check_files(&week.record, weir::store::Depth::Hash)
        .unwrap_or_else(|d| panic!("{d}"));
    // Seven copies inside the attempt, read-only, gone after it.
    let attempt = store.attempt_dir(week.record.token);
    let modes = std::fs::read_to_string(attempt.join("modes.txt")).unwrap();
    assert_eq!(modes.lines().collect::<Vec<_>>(), vec!["444"; 7]);
    let seen = std::fs::read_to_string(attempt.join("input-path.txt")).unwrap();
    assert!(
        std::path::Path::new(seen.trim()).starts_with(&attempt),
        "{seen}"
    );
    assert_eq!(seen.trim(), attempt.join("input-sales").to_str().unwrap());
    assert!(!attempt.join("input-sales").exists());

    // A day whose published file drifted (same size, other bytes) is never
    // handed to the week: the attempt fails as the engine's, naming the file.
    let drifted = Visible::of(&sb.store("sales", "2026-09-17")).files[0].clone();
    std::fs::write(&drifted, "day,amount\n2026-09-17,2\n").unwrap();
    let out = sb.run(
        "r2",
        &["--partition", "2026-W38", "--task", "weekly", "--force"],
    );
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let err = stderr(&out).replace('\n', " ");
    assert!(err.contains(&drifted.display().to_string()), "{err}");
    assert!(err.contains("changed content"), "{err}");
    assert_eq!(
        store.history().unwrap().len(),
        1,
        "no week from a drifted day"
    );
}

// An `end` in the half hour Lord Howe skips is no key only because of the
// zone, which is refused: that is the one error, not a "not a partition
// key" about `end` before it.
#[test]
fn a_zone_refused_for_a_fractional_change_is_the_only_error_about_its_end() {
    for end in ["2026-10-04T02", "2026-12-31T23"] {
        let sb = crate::support::Sandbox::new(&format!(
            "[pipeline]\nname = \"t\"\ncode_version = \"1\"\nwarehouse = \"wh\"\n\n[partitions.hour]\nkind = \"hourly\"\nstart = \"2026-01-01T00\"\nend = \"{end}\"\ntimezone = \"Australia/Lord_Howe\"\n\n[tasks.a]\ncommand = [\"true\"]\npartitioned_by = \"hour\"\noutput = {{ dataset = \"a\", grain = [\"x\"] }}\n"
        ));
        let errors = weir::manifest::Manifest::load(&sb.path().join("m.toml")).unwrap_err();
        let found: Vec<(&str, &str)> = errors
            .errors
            .iter()
            .map(|e| (e.code, e.message.as_str()))
            .collect();
        assert_eq!(
            found,
            [(
                "weir::manifest::fractional_offset_change",
                "hourly scheme `hour` cannot be in `Australia/Lord_Howe`: its clocks change by a fraction of an hour (+11:00 to +10:30 at 2026-04-04T15:00:00Z)"
            )],
            "end {end}"
        );
    }
}
