//! The AtlasMart example end to end, through the binary: the certified
//! numbers, the retry trace, and the historical repair by backfill.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::support::{repo, run_in, stdout};

/// A private copy of the example (manifests, scripts, raw data; no warehouse).
fn example() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let pipelines = dir.path().join("pipelines");
    crate::support::copy_tree_without_warehouse(&repo().join("pipelines"), &pipelines);
    (dir, pipelines)
}

#[derive(Debug, Default, PartialEq)]
struct Totals {
    lines: usize,
    orders: usize,
    units: i64,
    gmv: i64,
    cost: i64,
    profit: i64,
}

/// Totals of the visible `fact_sales` rows of `partitions`, read with `weir show`.
fn fact_sales(dir: &Path, partitions: &[&str]) -> (Totals, Vec<String>) {
    let mut totals = Totals::default();
    let mut orders = HashSet::new();
    let mut versions = Vec::new();
    for p in partitions {
        let out = run_in(
            dir,
            &["show", "atlasmart.toml", "fact_sales", "--partition", p],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut reader = csv::Reader::from_reader(out.stdout.as_slice());
        let headers = reader.headers().unwrap().clone();
        let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
        for row in reader.records() {
            let row = row.unwrap();
            let int = |name: &str| row[col(name)].parse::<i64>().unwrap();
            totals.lines += 1;
            orders.insert(row[col("order_id")].to_string());
            totals.units += int("quantity");
            totals.gmv += int("gmv_cents");
            totals.cost += int("cost_cents");
            totals.profit += int("profit_cents");
            versions.push(row[col("code_version")].to_string());
        }
    }
    totals.orders = orders.len();
    (totals, versions)
}

const CERTIFIED: Totals = Totals {
    lines: 9,
    orders: 7,
    units: 11,
    gmv: 74_000,
    cost: 45_000,
    profit: 29_000,
};

fn status(dir: &Path) -> serde_json::Value {
    let out = run_in(dir, &["status", "atlasmart.toml", "--json"]);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn record<'a>(
    status: &'a serde_json::Value,
    dataset: &str,
    partition: &str,
) -> &'a serde_json::Value {
    status["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["dataset"] == dataset && p["partition"] == partition)
        .unwrap_or_else(|| panic!("{dataset} {partition} is published"))
}

#[test]
fn the_main_command_reproduces_the_certified_numbers() {
    let (_tmp, dir) = example();
    let out = run_in(
        &dir,
        &[
            "run",
            "atlasmart.toml",
            "--partition",
            "2026-09-20",
            "--partition",
            "2026-09-21",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&out).contains("6 task instances: 6 published"));
    let (totals, versions) = fact_sales(&dir, &["2026-09-20", "2026-09-21"]);
    assert_eq!(totals, CERTIFIED);
    assert!(versions.iter().all(|v| v == "2026.09.2"));
    let (day1, _) = fact_sales(&dir, &["2026-09-20"]);
    assert_eq!(day1.cost, 42_500);
    // The source's committed sequence is pinned in the input snapshot.
    let s = status(&dir);
    let raw = &record(&s, "stg_order_lines", "2026-09-21")["input_snapshot"]["inputs"][0];
    assert_eq!(raw["name"], "raw_orders");
    assert_eq!(raw["watermark"], "206");
    // A change after the watermark (seq 207, order A-2004) is not published.
    let day2 = stdout(&run_in(
        &dir,
        &[
            "show",
            "atlasmart.toml",
            "fact_sales",
            "--partition",
            "2026-09-21",
        ],
    ));
    assert!(!day2.contains("A-2004"), "{day2}");
}

#[test]
fn the_retry_trace_reads_failed_retrying_success() {
    let (_tmp, dir) = example();
    let out = crate::support::weir()
        .current_dir(&dir)
        .env("ATLASMART_INJECT_PARSER_FAILURE", "1")
        .args([
            "run",
            "atlasmart.toml",
            "--partition",
            "2026-09-21",
            "--run-id",
            "RUN-20260921-0812-B",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = run_in(
        &dir,
        &[
            "events",
            "atlasmart.toml",
            "--run",
            "RUN-20260921-0812-B",
            "--task",
            "transform",
            "--json",
        ],
    );
    let states: Vec<String> = stdout(&events)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["state"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let trace: Vec<&str> = states
        .iter()
        .map(String::as_str)
        .filter(|s| ["FAILED", "RETRYING", "SUCCESS"].contains(s))
        .collect();
    assert_eq!(trace, ["FAILED", "RETRYING", "SUCCESS"]);
    let published: Vec<usize> = states
        .iter()
        .enumerate()
        .filter(|(_, s)| *s == "PUBLISHED")
        .map(|(i, _)| i)
        .collect();
    let success = states.iter().position(|s| s == "SUCCESS").unwrap();
    assert_eq!(published.len(), 1, "published once: {states:?}");
    assert!(
        published[0] > success,
        "nothing published before SUCCESS and the gates: {states:?}"
    );
    assert!(states[..published[0]].contains(&"AUDITED".to_string()));
    let s = status(&dir);
    assert_eq!(
        record(&s, "paid_order_lines", "2026-09-21")["generation"],
        1
    );
}

#[test]
fn the_historical_repair_rebuilds_only_the_corrupted_day() {
    let (_tmp, dir) = example();
    let old = run_in(
        &dir,
        &[
            "run",
            "atlasmart/atlasmart-2026.09.1.toml",
            "--partition",
            "2026-09-20",
        ],
    );
    assert_eq!(
        old.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&old.stderr)
    );
    let new = run_in(
        &dir,
        &["run", "atlasmart.toml", "--partition", "2026-09-21"],
    );
    assert_eq!(new.status.code(), Some(0));
    let (corrupted, versions) = fact_sales(&dir, &["2026-09-20"]);
    assert_eq!(corrupted.cost, 43_500, "the 2026.09.1 bug");
    assert!(versions.iter().all(|v| v == "2026.09.1"));
    let before = status(&dir);
    let day2_before = record(&before, "fact_sales", "2026-09-21").clone();

    let dry = run_in(
        &dir,
        &[
            "backfill",
            "atlasmart.toml",
            "repair_2026_09_20",
            "--dry-run",
        ],
    );
    assert!(
        stdout(&dry).contains("backfill      1          3"),
        "{}",
        stdout(&dry)
    );
    assert_eq!(status(&dir), before, "a dry run writes nothing");

    let repair = run_in(&dir, &["backfill", "atlasmart.toml", "repair_2026_09_20"]);
    assert_eq!(
        repair.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&repair.stderr)
    );
    let after = status(&dir);
    let day1 = record(&after, "fact_sales", "2026-09-20");
    assert_eq!(day1["code_version"], "2026.09.2");
    assert_eq!(day1["generation"], 2);
    let (repaired, versions) = fact_sales(&dir, &["2026-09-20"]);
    assert_eq!(repaired.cost, 42_500);
    assert!(versions.iter().all(|v| v == "2026.09.2"));
    assert_eq!(
        record(&after, "fact_sales", "2026-09-21"),
        &day2_before,
        "2026-09-21 untouched"
    );
    let (totals, _) = fact_sales(&dir, &["2026-09-20", "2026-09-21"]);
    assert_eq!(totals, CERTIFIED);
    // The backfill ran in its own pool.
    let events = stdout(&run_in(&dir, &["events", "atlasmart.toml", "--json"]));
    assert!(events.contains("repair_2026_09_20"));
}
