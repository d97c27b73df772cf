//! What finding the newest generation of a long commit log costs on S3:
//! plants N generations of one partition (records written directly, in
//! parallel), then times `latest()` listing the whole log against listing
//! from the log's checkpoint. For BENCHMARKS.md ("S3: requests and scale").
//!
//! usage: cargo run --release --example s3_log_scale -- s3://bucket/prefix [N] [RUNS]
//! (configured from the AWS_* environment, e.g. `eval "$(ci/moto-up.sh)"`)

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir::store::s3::S3Backend;
use weir::store::{Backend, CommitKind, FencingToken, NewCommit, Warehouse};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = args
        .first()
        .ok_or("usage: s3_log_scale s3://bucket/prefix [N] [RUNS]")?;
    let n: u64 = args.get(1).map_or(Ok(10_000), |v| v.parse())?;
    let runs: u32 = args.get(2).map_or(Ok(20), |v| v.parse())?;
    let backend = Arc::new(S3Backend::open(url)?);
    let staging = std::env::temp_dir().join("weir-s3-log-scale");
    let warehouse = Warehouse::remote(backend.clone(), url, &staging)?;
    let store = warehouse.partition("d", "p");
    let first = store.commit(NewCommit {
        token: FencingToken::from_raw(1),
        dataset: "d".into(),
        partition: "p".into(),
        kind: CommitKind::Publish,
        run_id: "bench".into(),
        task: "t".into(),
        attempt: 1,
        attempt_dir: store.attempt_key(FencingToken::from_raw(1)),
        data_dir: None,
        files: Vec::new(),
        file_sums: Vec::new(),
        rows: 0,
        digest: "sha256:00".into(),
        input_snapshot: serde_json::json!({}),
        input_snapshot_digest: "sha256:00".into(),
        code_version: "1".into(),
        code_fingerprint: None,
    })?;
    let template = serde_json::to_value(&first)?;
    let planted = Instant::now();
    let threads = 16u64;
    std::thread::scope(|s| {
        for t in 0..threads {
            let backend = backend.clone();
            let template = template.clone();
            s.spawn(move || {
                for g in (2..=n).filter(|g| g % threads == t) {
                    let mut record = template.clone();
                    record["generation"] = g.into();
                    record["token"] = g.into();
                    let key = format!("d/p/log/{g:020}.json");
                    let bytes = serde_json::to_vec_pretty(&record).expect("json");
                    backend.put(&key, &bytes).expect("planted");
                }
            });
        }
    });
    println!("planted {n} generations in {:.1?}", planted.elapsed());
    let time = |label: &str| -> Result<(), Box<dyn std::error::Error>> {
        let mut took: Vec<Duration> = Vec::new();
        for _ in 0..runs {
            let started = Instant::now();
            let latest = store.latest()?.ok_or("no latest")?;
            took.push(started.elapsed());
            assert_eq!(latest.generation.get(), n);
        }
        took.sort();
        println!(
            "{label}: median {:.1?}, min {:.1?}, max {:.1?} over {runs} calls",
            took[took.len() / 2],
            took[0],
            took[took.len() - 1]
        );
        Ok(())
    };
    let checkpoint = "d/p/log-checkpoint";
    backend.delete(checkpoint)?;
    time("latest(), whole log listed")?;
    backend.put(
        checkpoint,
        ((n / 1000) * 1000).max(1).to_string().as_bytes(),
    )?;
    time("latest(), from the checkpoint")?;
    Ok(())
}
