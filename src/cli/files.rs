//! `weir files MANIFEST DATASET [--partition P]... [--json]`: the stable
//! read path. The files readers outside weir (a script, DuckDB, Polars)
//! should read for each selected partition: exactly the visible
//! generation's, found the way every reader finds it (the partition's
//! newest commit record, [`crate::store::PartitionStore::latest`]), with the
//! size and SHA-256 that record committed.
//!
//! Every file is checked against its record first (its existence and size,
//! one `lstat` or one object-store listing per partition, nothing
//! downloaded), so weir never hands out a path that no longer holds what was
//! published: a drifted or vanished file exits 5 naming it, as in `status
//! --check`.

use serde_json::json;

use super::args::FilesArgs;
use super::error::{doing, CliError};
use super::exit;
use crate::store::{CommitRecord, Depth, PartitionStore};

/// One visible file, as `weir files` prints it.
struct Visible {
    partition: String,
    generation: u64,
    /// Its path, or its `s3://` URL.
    location: String,
    /// Size and `sha256:<hex>` as committed; `None` in records written
    /// before weir kept them.
    size: Option<u64>,
    sha256: Option<String>,
}

pub(crate) fn run(args: &FilesArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
    super::checks::publisher_of(&manifest, &args.dataset)?;
    for partition in &args.partition {
        super::checks::producer_of(&manifest, &args.dataset, partition)?;
    }
    let warehouse = super::error::open_to_read(&manifest)?;
    // Named partitions must each have a publication (as in `show`); without
    // any, every published partition, in the warehouse's order.
    let named = !args.partition.is_empty();
    let partitions = if named {
        args.partition.clone()
    } else {
        warehouse.partitions(&args.dataset).map_err(doing(format!(
            "cannot list the partitions of `{}`",
            args.dataset
        )))?
    };
    let mut files = Vec::new();
    for partition in &partitions {
        let store = warehouse.partition(&args.dataset, partition);
        let Some(record) = store.latest().map_err(CliError::engine)? else {
            if named {
                return Err(CliError::NothingPublished(format!(
                    "`{}` has no published generation for partition {partition}",
                    args.dataset
                )));
            }
            continue;
        };
        store
            .check_files(&record, Depth::Stat)
            .map_err(CliError::Drift)?;
        files.extend(visible(&store, &record));
    }
    if args.json {
        let doc = json!({
            "dataset": args.dataset,
            "files": files.iter().map(|f| json!({
                "partition": f.partition,
                "generation": f.generation,
                "path": f.location,
                "size": f.size,
                "sha256": f.sha256,
            })).collect::<Vec<_>>(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("json values serialize")
        );
        return Ok(exit::OK);
    }
    if files.is_empty() {
        println!("`{}`: no generation published", args.dataset);
        return Ok(exit::OK);
    }
    let rows: Vec<Vec<String>> = files
        .into_iter()
        .map(|f| {
            vec![
                f.partition,
                f.generation.to_string(),
                f.size.map_or_else(|| "-".to_string(), |s| s.to_string()),
                f.sha256.unwrap_or_else(|| "-".to_string()),
                f.location,
            ]
        })
        .collect();
    // Full digests, not the tables' short form: a script checks them.
    let header = ["partition", "gen", "bytes", "sha256", "path"];
    for line in super::aligned(&header, &rows, &[1, 2]) {
        println!("{line}");
    }
    Ok(exit::OK)
}

/// The record's files in its order, with the sums it committed.
fn visible(store: &PartitionStore, record: &CommitRecord) -> Vec<Visible> {
    (0..record.files.len())
        .map(|i| {
            let sum = record.file_sums.get(i);
            Visible {
                partition: record.partition.clone(),
                generation: record.generation.get(),
                location: store.file_location(record, i).display().to_string(),
                size: sum.map(|s| s.size),
                sha256: sum.map(|s| s.sha256.clone()),
            }
        })
        .collect()
}

/// `weir tables sync MANIFEST`: every published partition of every Delta
/// table, committed to the table's log unless it already shows that
/// generation; one line per partition. Any failure exits 5 after the other
/// partitions were tried.
pub(crate) fn tables(args: &super::args::TablesArgs) -> Result<u8, CliError> {
    use crate::store::delta::{self, Followed};
    let super::args::TablesAction::Sync { manifest } = &args.action;
    let manifest = super::load(manifest)?;
    let warehouse = super::error::open_to_read(&manifest)?;
    let mut failed = 0;
    let mut any = false;
    for task in manifest.tasks.values() {
        let dataset = &task.output.dataset;
        if task.output.table.is_none() {
            continue;
        }
        any = true;
        let partitions = warehouse
            .partitions(dataset)
            .map_err(doing(format!("cannot list the partitions of `{dataset}`")))?;
        for partition in partitions {
            let store = warehouse.partition(dataset, &partition);
            let Some(record) = store.latest().map_err(CliError::engine)? else {
                continue;
            };
            let Some((columns, values)) = delta::columns_of(task, &partition) else {
                continue;
            };
            let g = record.generation.get();
            let types = delta::column_types(task);
            let declared = delta::declared_of(task);
            match delta::follow(&store, &columns, &values, &types, declared, &record) {
                Ok(Followed::Committed(v)) => {
                    println!("{dataset} {partition}: generation {g} committed as version {v}");
                }
                Ok(Followed::AlreadyThere(v)) => {
                    println!("{dataset} {partition}: generation {g} already at version {v}");
                }
                Err(e) => {
                    failed += 1;
                    eprintln!(
                        "error: {dataset} {partition}: generation {g} not committed to the Delta table: {}",
                        crate::store::chain(&e)
                    );
                }
            }
        }
    }
    if !any {
        println!(
            "no output of `{}` is declared with `table = \"delta\"`",
            manifest.pipeline.name
        );
    }
    Ok(if failed > 0 { exit::ENGINE } else { exit::OK })
}
