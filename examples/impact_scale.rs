//! What `weir impact` costs on a large warehouse: plants the commit records
//! of N publications (default 100,000) of an hourly → daily → weekly →
//! monthly pipeline with a trailing 7-day window and a shared unpartitioned
//! dimension, each record pinning exactly what the mappings make it read,
//! then times the impact of one hour (four downstream datasets scanned) and
//! of the dimension (every record scanned, every one impacted), at N and at
//! N/10, so the ratio shows whether the cost grows linearly. For
//! BENCHMARKS.md ("Impact at scale").
//!
//! usage: cargo run --release --example impact_scale -- [N] [DIR]
//! (DIR: where to plant, default a fresh directory under the temp dir,
//! removed at the end)

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use sha2::{Digest as _, Sha256};
use weir::manifest::Manifest;
use weir::store::{encode_partition, Warehouse};

const MANIFEST: &str = r#"
[pipeline]
name = "clicks"
code_version = "1"
warehouse = "wh"

[partitions.hour]
kind = "hourly"
start = "START_HOUR"
end = "END_HOUR"

[partitions.day]
kind = "daily"
start = "START_DAY"
end = "END_DAY"

[partitions.week]
kind = "weekly"
start = "START_DAY"
end = "END_DAY"

[partitions.month]
kind = "monthly"
start = "START_DAY"
end = "END_DAY"

[tasks.dim]
command = ["true"]
partitioned_by = []
output = { dataset = "dim", grain = ["site"] }

[tasks.hourly]
command = ["true"]
partitioned_by = "hour"
inputs = ["dim"]
output = { dataset = "hourly", grain = ["hour"] }

[tasks.daily]
command = ["true"]
partitioned_by = "day"
inputs = ["hourly", "dim"]
output = { dataset = "daily", grain = ["hour"] }

[tasks.weekly]
command = ["true"]
partitioned_by = "week"
inputs = ["daily"]
output = { dataset = "weekly", grain = ["hour"] }

[tasks.monthly]
command = ["true"]
partitioned_by = "month"
inputs = ["weekly"]
output = { dataset = "monthly", grain = ["hour"] }

[tasks.trailing]
command = ["true"]
partitioned_by = "day"
inputs = [{ dataset = "daily", window = [-6, 0] }]
output = { dataset = "trailing", grain = ["hour"] }
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = args.first().map_or(Ok(100_000), |v| v.parse())?;
    let base = match args.get(1) {
        Some(d) => PathBuf::from(d),
        None => std::env::temp_dir().join(format!("weir-impact-scale-{}", std::process::id())),
    };
    println!("| publications | planted in | impact of one hour | impact of the dimension (all impacted) |");
    println!("|---|---|---|---|");
    for size in [n / 10, n] {
        let dir = base.join(size.to_string());
        let (manifest, planted, took) = plant(&dir, size)?;
        let warehouse = Warehouse::open(&dir.join("wh"))?;
        let hour = best_of(3, || {
            let root = latest(&warehouse, "hourly", &manifest.hour);
            let found = weir::ops::impact::impact(
                &manifest.m,
                &warehouse,
                &manifest.m.tasks["hourly"],
                &root,
            )
            .expect("impact");
            // Its day, week, month and 7 windows (no month or week at the
            // edges of a small range).
            assert!(found.built_from.len() >= 8, "{}", found.built_from.len());
        });
        let dim = best_of(1, || {
            let root = latest(&warehouse, "dim", "all");
            let found =
                weir::ops::impact::impact(&manifest.m, &warehouse, &manifest.m.tasks["dim"], &root)
                    .expect("impact");
            assert_eq!(found.built_from.len() as u64 + 1, planted);
        });
        println!(
            "| {planted} | {:.1} s | {:.3} s | {:.2} s |",
            took.as_secs_f64(),
            hour.as_secs_f64(),
            dim.as_secs_f64()
        );
        std::fs::remove_dir_all(&dir)?;
    }
    let _ = std::fs::remove_dir(&base);
    Ok(())
}

/// The fastest of `runs` timings of `f`.
fn best_of(runs: u32, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn latest(warehouse: &Warehouse, dataset: &str, partition: &str) -> weir::store::CommitRecord {
    warehouse
        .partition(dataset, partition)
        .latest()
        .expect("readable")
        .expect("planted")
}

struct Planted {
    m: Manifest,
    /// An hour in the middle, whose day's windows are all planted.
    hour: String,
}

/// Plants about `n` publications in `dir`; returns the manifest, the number
/// planted and how long it took.
fn plant(dir: &Path, n: u64) -> Result<(Planted, u64, Duration), Box<dyn std::error::Error>> {
    let started = Instant::now();
    // Per day: 24 hours, a day, a trailing window, 1/7 week, ~1/30 month.
    let days = (n as f64 / (24.0 + 2.0 + 1.0 / 7.0 + 1.0 / 30.4)).round() as i64;
    let first = weir::partition::time::parse_day("2016-01-04").expect("a day");
    let last = first + days - 1;
    let day = weir::partition::time::format_day;
    let text = MANIFEST
        .replace("START_HOUR", &format!("{}T00", day(first)))
        .replace("END_HOUR", &format!("{}T23", day(last)))
        .replace("START_DAY", &day(first))
        .replace("END_DAY", &day(last));
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("m.toml"), text)?;
    let m = Manifest::load(&dir.join("m.toml")).map_err(|e| format!("{:?}", e.errors))?;
    let now = weir::clock::now().max((last + 2) * 86_400);
    let wh = dir.join("wh");
    let mut planted = 0;
    let order = ["dim", "hourly", "daily", "weekly", "monthly", "trailing"];
    for name in order {
        let task = &m.tasks[name];
        for key in task.dims.keys(now) {
            let mut inputs = Vec::new();
            let mut complete = true;
            for input in &task.inputs {
                let weir::manifest::InputSource::Task(producer) = &input.source else {
                    continue;
                };
                let up = &m.tasks[producer];
                let Ok(keys) =
                    weir::partition::map_keys(&task.dims, &key, &up.dims, input.shift, now)
                else {
                    complete = false;
                    break;
                };
                let pins: Vec<_> = keys
                    .iter()
                    .map(|k| json!({"partition": k.as_str(), "generation": 1, "token": 1, "digest": digest(&input.dataset, k.as_str())}))
                    .collect();
                inputs.push(if pins.len() == 1 {
                    let k = keys[0].as_str();
                    json!({"name": input.dataset, "kind": "upstream", "task": producer, "generation": 1, "token": 1,
                           "partition": (k != key).then_some(k), "digest": digest(&input.dataset, k)})
                } else {
                    json!({"name": input.dataset, "kind": "upstream", "task": producer, "partitions": pins,
                           "digest": digest(&input.dataset, &key)})
                });
            }
            if !complete {
                continue;
            }
            let dataset = &task.output.dataset;
            let log = wh.join(dataset).join(encode_partition(&key)).join("log");
            std::fs::create_dir_all(&log)?;
            let record = json!({
                "format_version": weir::store::FORMAT_VERSION,
                "generation": 1,
                "token": 1,
                "dataset": dataset,
                "partition": key,
                "kind": "publish",
                "run_id": "run-planted",
                "task": name,
                "attempt": 1,
                "attempt_dir": format!("{dataset}/{}/attempts/00000000000000000001", encode_partition(&key)),
                "files": [],
                "rows": 1,
                "digest": digest(dataset, &key),
                "input_snapshot": {"inputs": inputs},
                "input_snapshot_digest": digest("snapshot", &key),
                "code_version": "1",
                "published_at": "2026-12-02T08:00:00Z",
            });
            std::fs::write(
                log.join("00000000000000000001.json"),
                serde_json::to_vec_pretty(&record)?,
            )?;
            planted += 1;
        }
    }
    let mid = first + days / 2;
    Ok((
        Planted {
            m,
            hour: format!("{}T10", day(mid)),
        },
        planted,
        started.elapsed(),
    ))
}

/// A made-up canonical digest, distinct per partition.
fn digest(dataset: &str, key: &str) -> String {
    format!("sha256:{:x}", Sha256::digest(format!("{dataset}\0{key}")))
}
