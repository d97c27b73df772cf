//! `weir impact` (what a generation's blast radius is) and `weir uncertify
//! --cascade` (uncertify it all, as one decision).

use std::fmt::Write as _;

use super::args::{CertifyArgs, ImpactArgs};
use super::checks::{no_generation, producer_of};
use super::error::CliError;
use super::exit;
use crate::manifest::{Manifest, Task};
use crate::ops::impact::{impact, Impact, PubState};
use crate::store::{CommitRecord, Warehouse};

/// The producer of `dataset` and the record of `generation` (default: the
/// visible one) of its `partition`; a usage error (exit 2) for a name,
/// key or generation that does not exist, a refusal (exit 3) when nothing
/// is published.
pub(crate) fn root<'m>(
    manifest: &'m Manifest,
    warehouse: &Warehouse,
    dataset: &str,
    partition: &str,
    generation: Option<u64>,
) -> Result<(&'m Task, CommitRecord), CliError> {
    let task = producer_of(manifest, dataset, partition)?;
    let store = warehouse.partition(dataset, partition);
    let latest = store.latest().map_err(CliError::engine)?;
    let record = match (generation, latest) {
        (None, Some(latest)) => latest,
        (None, None) => {
            return Err(CliError::Refused(format!(
                "`{dataset}` has no published generation for partition {partition}"
            )))
        }
        (Some(g), latest) => store
            .record(crate::store::Generation::from_raw(g))
            .map_err(CliError::engine)?
            .ok_or_else(|| {
                no_generation(dataset, partition, g, latest.map(|r| r.generation.get()))
            })?,
    };
    Ok((task, record))
}

/// `weir impact`.
pub(crate) fn run(args: &ImpactArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
    let warehouse = super::error::open_to_read(&manifest)?;
    let (task, record) = root(
        &manifest,
        &warehouse,
        &args.dataset,
        &args.partition,
        args.generation,
    )?;
    let found = impact(&manifest, &warehouse, task, &record).map_err(CliError::engine)?;
    if args.json {
        let doc = serde_json::to_string_pretty(&found).expect("an impact always serializes");
        println!("{doc}");
    } else {
        print!("{}", render(&found));
    }
    Ok(exit::OK)
}

/// The impact as a table: what was built from the generation, then what
/// would read it.
fn render(found: &Impact) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "impact of {} ({})",
        found.root,
        abbreviate(&found.digest)
    );
    let _ = writeln!(out);
    let n = found.built_from.len();
    let _ = writeln!(
        out,
        "built from it, as their commit records say they read it: {n} {}",
        if n == 1 {
            "publication"
        } else {
            "publications"
        }
    );
    let dw = found
        .built_from
        .iter()
        .map(|b| b.id.dataset.len())
        .max()
        .unwrap_or(0);
    let pw = found
        .built_from
        .iter()
        .map(|b| b.id.partition.len())
        .max()
        .unwrap_or(0);
    for b in &found.built_from {
        let read: Vec<String> = b
            .read
            .iter()
            .map(|r| format!("{} {} g{}", r.dataset, r.partition, r.generation))
            .collect();
        let _ = write!(
            out,
            "  {:11} {:dw$}  {:pw$}  generation {}  read {}",
            b.state.as_str(),
            b.id.dataset,
            b.id.partition,
            b.id.generation,
            read.join(", ")
        );
        if b.state != PubState::Current {
            let _ = write!(out, " ({})", b.why.join("; "));
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out);
    let n = found.would_read.len();
    let _ = writeln!(
        out,
        "would read it on their next build, through the manifest's mappings: {n} {}",
        if n == 1 { "partition" } else { "partitions" }
    );
    for w in &found.would_read {
        let _ = writeln!(out, "  {} {} ← {}", w.dataset, w.partition, w.reads);
    }
    out
}

/// `sha256:` and the first 12 hex digits.
fn abbreviate(digest: &str) -> &str {
    &digest[..digest.len().min(7 + 12)]
}

/// `weir uncertify --cascade`: the generation and every publication built
/// from it, announced by one durable operator event that lists them before
/// any mark is written.
pub(crate) fn uncertify_cascade(args: &CertifyArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
    let warehouse = super::error::open(&manifest)?;
    let (task, record) = root(
        &manifest,
        &warehouse,
        &args.dataset,
        &args.partition,
        args.generation,
    )?;
    let found = impact(&manifest, &warehouse, task, &record).map_err(CliError::engine)?;
    crate::ops::decide::uncertify_cascade(
        &warehouse,
        &args.dataset,
        &args.partition,
        &record,
        &found,
        &args.reason,
    )?;
    let n = found.built_from.len();
    println!(
        "uncertified {} and the {n} {} built from it:",
        found.root,
        if n == 1 {
            "publication"
        } else {
            "publications"
        }
    );
    for b in &found.built_from {
        println!("  {}", b.id);
    }
    Ok(exit::OK)
}
