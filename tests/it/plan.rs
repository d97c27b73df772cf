//! Plans: every bundled pipeline validates and plans; the marigold backfill
//! figures; no catch-up; JSON and graph output.

use crate::support::{repo, run_in, stdout};

#[test]
fn every_bundled_pipeline_validates_and_plans() {
    let dir = repo().join("pipelines");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path.file_name().unwrap().to_str().unwrap();
            let v = run_in(&dir, &["validate", name]);
            assert_eq!(
                v.status.code(),
                Some(0),
                "{name}: {}",
                String::from_utf8_lossy(&v.stderr)
            );
            let p = run_in(&dir, &["plan", name, "--json"]);
            assert_eq!(p.status.code(), Some(0), "{name}");
            serde_json::from_slice::<serde_json::Value>(&p.stdout).expect("plan --json is JSON");
            seen += 1;
        }
    }
    assert!(seen >= 2);
}

#[test]
fn marigold_backfill_states_its_cost() {
    let out = run_in(
        &repo(),
        &["plan", "pipelines/marigold.toml", "--backfill", "rebuild"],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.contains("backfill `rebuild`: 2024-01-01 to 2025-12-30 (730 partitions)"),
        "{text}"
    );
    let pool_line = text
        .lines()
        .find(|l| l.starts_with("backfill ") && l.contains("minutes"))
        .expect("a backfill pool line");
    let cols: Vec<&str> = pool_line.split_whitespace().collect();
    assert_eq!(&cols[..3], ["backfill", "2", "730"], "{pool_line}");
    assert!(
        pool_line.contains("3,650 minutes (about 61 hours)"),
        "{pool_line}"
    );
    assert!(text
        .contains("total: 730 task instances, estimated wall time 3,650 minutes (about 61 hours)"));

    let json = run_in(
        &repo(),
        &[
            "plan",
            "pipelines/marigold.toml",
            "--backfill",
            "rebuild",
            "--json",
        ],
    );
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["pools"][0]["name"], "backfill");
    assert_eq!(doc["pools"][0]["slots"], 2);
    assert_eq!(doc["pools"][0]["instances"], 730);
    assert_eq!(doc["total"]["estimated_wall_ms"], 3650u64 * 60 * 1000);
    assert_eq!(doc["scope"]["kind"], "backfill");
}

#[test]
fn without_partitions_only_the_latest_is_planned() {
    // marigold's range started years before "today" (2026-11-29): no catch-up.
    let out = run_in(&repo(), &["plan", "pipelines/marigold.toml", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["total"]["instances"], 1);
    assert_eq!(
        doc["tasks"][0]["partitions"],
        serde_json::json!(["2025-12-30"])
    );
    assert_eq!(doc["pools"][0]["name"], "current");
}

#[test]
fn plans_follow_dependencies_and_slots() {
    let out = run_in(
        &repo(),
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
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
    let out = run_in(
        &repo(),
        &[
            "plan",
            "pipelines/atlasmart.toml",
            "--partition",
            "2026-10-01",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("partition `2026-10-01` is not in any partition scheme"),
        "{err}"
    );
    assert!(err.contains("days from 2026-09-20 to 2026-09-21"), "{err}");
}

#[test]
fn graphs_render() {
    let dot = stdout(&run_in(
        &repo(),
        &["plan", "pipelines/atlasmart.toml", "--graph", "dot"],
    ));
    assert!(dot.starts_with("digraph \"atlasmart\" {"));
    assert!(dot.contains("\"extract\" -> \"transform\";"));
    assert!(dot.contains("\"transform\" -> \"load\";"));
    let mermaid = stdout(&run_in(
        &repo(),
        &["plan", "pipelines/atlasmart.toml", "--graph", "mermaid"],
    ));
    assert!(mermaid.starts_with("flowchart LR\n"));
    assert!(mermaid.contains("t0 --> t1") && mermaid.contains("t1 --> t2"));
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
    let out = run_in(
        dir.path(),
        &["plan", "totals.toml", "--backfill", "all", "--json"],
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // 10 partitions in order, one at a time despite 4 slots.
    assert_eq!(doc["total"]["estimated_wall_ms"], 10 * 60_000);
}
