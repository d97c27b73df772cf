//! Plans: every bundled pipeline validates and plans; the marigold backfill
//! figures; no catch-up; JSON and graph output.

use crate::support::{repo, weir_cmd};

/// `weir ARGS...` in `dir`, a plan as JSON: exit 0, nothing on stderr.
#[track_caller]
fn plan_json(dir: impl AsRef<std::path::Path>, args: &[&str]) -> serde_json::Value {
    weir_cmd(args)
        .current_dir(dir)
        .assert()
        .success()
        .stderr("")
        .stdout_json()
}

#[test]
fn every_bundled_pipeline_validates_and_plans() {
    let dir = repo().join("pipelines");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path.file_name().unwrap().to_str().unwrap();
            weir_cmd(&["validate", name])
                .current_dir(&dir)
                .assert()
                .success()
                .stdout(&format!(
                    "ok: {name} (pipeline `[..]`, code_version [..]: [..])\n"
                ))
                .stderr("");
            plan_json(&dir, &["plan", name, "--json"]);
            seen += 1;
        }
    }
    assert!(seen >= 2);
}

#[test]
fn marigold_backfill_states_its_cost() {
    weir_cmd(&["plan", "pipelines/marigold.toml", "--backfill", "rebuild"])
        .current_dir(repo())
        .assert()
        .success()
        .stdout(
            "plan for `marigold` (code_version 2026.11.1)
backfill `rebuild`: 2024-01-01 to 2025-12-30 (730 partitions)
reason: rebuild two years of clean readings after the calibration fix in 2026.11.1
730 will run, 0 current (skipped), 0 stale (redone), 0 blocked (held, quarantined), 0 waiting (input not ready), 0 accepted

step  task   scheme  pool      retry    instances  expected
   1  clean  daily   backfill  default        730  10m

pool      slots  instances  busy  estimated wall time
backfill      2        730  100%  3,650 minutes (about 61 hours)

total: 730 task instances, estimated wall time 3,650 minutes (about 61 hours)
p90: 3,650 minutes (about 61 hours) (every attempt at its p90)
critical path: clean
attempt durations: each task's expected_duration (no attempt recorded)
",
        )
        .stderr("");

    let doc = plan_json(
        repo(),
        &[
            "plan",
            "pipelines/marigold.toml",
            "--backfill",
            "rebuild",
            "--json",
        ],
    );
    assert_eq!(doc["pools"][0]["name"], "backfill");
    assert_eq!(doc["pools"][0]["slots"], 2);
    assert_eq!(doc["pools"][0]["instances"], 730);
    assert_eq!(doc["total"]["estimated_wall_ms"], 3650u64 * 60 * 1000);
    assert_eq!(doc["scope"]["kind"], "backfill");
}

#[test]
fn without_partitions_only_the_latest_is_planned() {
    // marigold's range started years before "today" (2026-11-29): no catch-up.
    let doc = plan_json(repo(), &["plan", "pipelines/marigold.toml", "--json"]);
    assert_eq!(doc["total"]["instances"], 1);
    assert_eq!(
        doc["tasks"][0]["partitions"],
        serde_json::json!(["2025-12-30"])
    );
    assert_eq!(doc["pools"][0]["name"], "current");
}

#[test]
fn plans_follow_dependencies_and_slots() {
    let doc = plan_json(
        repo(),
        &[
            "plan",
            "pipelines/atlasmart.toml",
            "--partition",
            "2026-09-20",
            "--partition",
            "2026-09-21",
            "--json",
        ],
    );
    let names: Vec<&str> = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["extract", "transform", "load"]);
    assert_eq!(doc["total"]["instances"], 6);
    // extract 30s, transform 1m, load 30s per partition; two partitions run side by side in 2 slots.
    assert_eq!(doc["total"]["estimated_wall_ms"], 120_000);
}

#[test]
fn an_unknown_partition_is_a_usage_error() {
    weir_cmd(&[
        "plan",
        "pipelines/atlasmart.toml",
        "--partition",
        "2026-10-01",
    ])
    .current_dir(repo())
    .assert()
    .code(2)
    .stdout("")
    .stderr(
        "weir::plan::unknown_partition

  × partition `2026-10-01` is not in any partition scheme of the selected
  │ tasks
  help: partitions are `daily`: days from 2026-09-20 to 2026-09-21; a task of
        several dimensions takes keys joined by `|`
",
    );
}

#[test]
fn graphs_render() {
    weir_cmd(&["plan", "pipelines/atlasmart.toml", "--graph", "dot"])
        .current_dir(repo())
        .assert()
        .success()
        .stdout(
            r#"digraph "atlasmart" {
  rankdir=LR;
  node [shape=box];
  "extract" [label="extract\npool current · 1 instance"];
  "transform" [label="transform\npool current · 1 instance"];
  "load" [label="load\npool current · 1 instance"];
  "extract" -> "transform";
  "transform" -> "load";
}
"#,
        )
        .stderr("");
    weir_cmd(&["plan", "pipelines/atlasmart.toml", "--graph", "mermaid"])
        .current_dir(repo())
        .assert()
        .success()
        .stdout(
            r#"flowchart LR
  t0["extract<br/>pool current · 1 instance"]
  t1["transform<br/>pool current · 1 instance"]
  t2["load<br/>pool current · 1 instance"]
  t0 --> t1
  t1 --> t2
"#,
        )
        .stderr("");
}

#[test]
fn depends_on_past_serialises_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("totals.toml");
    std::fs::write(
        &manifest,
        r#"
[pipeline]
name = "totals"
code_version = "1"
warehouse = "wh"

[partitions.daily]
kind = "daily"
start = "2026-01-01"
end = "2026-01-10"

[pools.p]
slots = 4

[tasks.running_total]
command = ["true"]
output = { dataset = "totals", grain = ["day"] }
pool = "p"
depends_on_past = true
expected_duration = "1m"

[backfills.all]
from = "2026-01-01"
to = "2026-01-10"
pool = "p"
reason = "test"
"#,
    )
    .unwrap();
    let doc = plan_json(
        dir.path(),
        &["plan", "totals.toml", "--backfill", "all", "--json"],
    );
    // 10 partitions in order, one at a time despite 4 slots.
    assert_eq!(doc["total"]["estimated_wall_ms"], 10 * 60_000);
}
