//! `weir status` and `weir show`: what readers see.

use serde_json::json;

use super::args::{ShowArgs, StatusArgs};
use super::{exit, load};
use crate::audit;
use crate::manifest::Manifest;
use crate::store::{CommitRecord, Warehouse};

/// The current generation of every published partition of the manifest's datasets.
fn published(
    manifest: &Manifest,
    warehouse: &Warehouse,
) -> Result<Vec<(String, CommitRecord)>, String> {
    let mut out = Vec::new();
    for task in manifest.tasks.values() {
        let dataset = &task.output.dataset;
        let partitions = warehouse.partitions(dataset).map_err(|e| e.to_string())?;
        for partition in partitions {
            let store = warehouse.partition(dataset, &partition);
            if let Some(record) = store.latest().map_err(|e| e.to_string())? {
                out.push((task.name.clone(), record));
            }
        }
    }
    Ok(out)
}

pub(crate) fn status(args: &StatusArgs) -> u8 {
    let manifest = match load(&args.manifest) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let warehouse = match Warehouse::open(&manifest.pipeline.warehouse) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::ENGINE;
        }
    };
    let records = match published(&manifest, &warehouse) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::ENGINE;
        }
    };
    if args.json {
        let partitions: Vec<_> = records
            .iter()
            .map(|(task, r)| {
                let store = warehouse.partition(&r.dataset, &r.partition);
                json!({
                    "dataset": r.dataset,
                    "partition": r.partition,
                    "task": task,
                    "generation": r.generation.get(),
                    "token": r.token.get(),
                    "run_id": r.run_id,
                    "attempt": r.attempt,
                    "rows": r.rows,
                    "digest": r.digest,
                    "input_snapshot": r.input_snapshot,
                    "input_snapshot_digest": r.input_snapshot_digest,
                    "code_version": r.code_version,
                    "published_at": r.published_at,
                    "files": store.visible_files(r),
                })
            })
            .collect();
        let doc = json!({ "format_version": 1, "pipeline": manifest.pipeline.name, "partitions": partitions });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("status always serializes")
        );
        return exit::OK;
    }
    if records.is_empty() {
        println!("nothing published yet in {}", warehouse.root().display());
        return exit::OK;
    }
    println!(
        "{:<20} {:<11} {:>4} {:>5} {:>7}  {:<14} {:<25} digest",
        "dataset", "partition", "gen", "token", "rows", "code_version", "published_at"
    );
    for (_, r) in &records {
        println!(
            "{:<20} {:<11} {:>4} {:>5} {:>7}  {:<14} {:<25} {}",
            r.dataset,
            r.partition,
            r.generation.get(),
            r.token.get(),
            r.rows,
            r.code_version,
            r.published_at,
            short(&r.digest)
        );
    }
    exit::OK
}

fn short(digest: &str) -> String {
    digest.chars().take(7 + 16).collect::<String>() + "…"
}

pub(crate) fn show(args: &ShowArgs) -> u8 {
    let manifest = match load(&args.manifest) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let Some(task) = manifest.producer(&args.dataset) else {
        eprintln!(
            "error: no task of `{}` publishes dataset `{}`",
            manifest.pipeline.name, args.dataset
        );
        return exit::INVALID;
    };
    let warehouse = match Warehouse::open(&manifest.pipeline.warehouse) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::ENGINE;
        }
    };
    let store = warehouse.partition(&args.dataset, &args.partition);
    let record = match store.latest() {
        Ok(Some(r)) => r,
        Ok(None) => {
            eprintln!(
                "error: `{}` has no published generation for partition {}",
                args.dataset, args.partition
            );
            return exit::TASK_FAILED;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return exit::ENGINE;
        }
    };
    let (columns, rows) = match audit::read_rows(&store.visible_files(&record), task.output.format)
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::ENGINE;
        }
    };
    let mut out = csv::Writer::from_writer(std::io::stdout());
    let _ = out.write_record(&columns);
    for row in rows {
        let _ = out.write_record(row.iter().map(|v| v.as_deref().unwrap_or("")));
    }
    let _ = out.flush();
    exit::OK
}
