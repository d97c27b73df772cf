//! `weir status` and `weir show`: what readers see, and what needs attention.

pub(crate) mod summary;

use std::collections::BTreeMap;

use super::args::{ShowArgs, StatusArgs};
use super::checks::{no_generation, producer_of};
use super::error::{doing, CliError};
use super::exit;
use super::plural;
use crate::audit;
use crate::ops::status::{Attention, Overview, Status, StatusError};
use crate::partition::shell_word;
use crate::store::certs as certify;
use crate::store::marks::Mark;
use crate::store::{Depth, Warehouse};

pub(crate) fn status(args: &StatusArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
    let warehouse = super::error::open_to_read(&manifest)?;
    let mut overview = Overview::gather(&manifest, &warehouse).map_err(CliError::engine)?;
    summary::narrow(&manifest, &mut overview, args)?;
    let status = Status::of(&manifest, &warehouse, overview, args.check).map_err(|e| match e {
        StatusError::Engine(e) => CliError::engine(e),
        StatusError::DeltaLog { dataset, source } => {
            doing(format!("cannot read the Delta log of `{dataset}`"))(source)
        }
    })?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&crate::ops::status::document(
                &manifest, &warehouse, &status
            ))
            .expect("status always serializes")
        );
    } else if summary::summarised(args, &status.overview) {
        summary::print(
            &args.manifest,
            &manifest,
            &status.overview,
            &status.attention,
        );
    } else {
        print_status(
            &args.manifest,
            &warehouse,
            &status.overview,
            &status.versions(),
            &status.attention,
            summary::narrowed(args),
        );
        for line in crate::serve::status::lines(&status.serving, &manifest) {
            println!("{line}");
        }
        for note in &status.notes {
            println!("note: {} {}: {}", note.task, note.partition, note.detail);
        }
    }
    if !args.json {
        for line in backfill_lines(&args.manifest, &status.backfills) {
            println!("{line}");
        }
    }
    let Status {
        overview,
        attention,
        drifts,
        unproven,
        ..
    } = status;
    let mut failed = false;
    if !overview.unreadable.is_empty() {
        for (dataset, partition, error) in &overview.unreadable {
            eprintln!("error: {dataset} {partition}: cannot read its commit log: {error}");
        }
        failed = true;
    }
    if !drifts.is_empty() {
        for d in &drifts {
            eprintln!("error: {d}");
        }
        eprintln!(
            "{} published {} drifted from {} commit records",
            drifts.len(),
            plural(drifts.len(), "file", "files"),
            plural(drifts.len(), "its", "their")
        );
        failed = true;
    }
    if !unproven.is_empty() {
        for u in &unproven {
            eprintln!("error: {}", crate::exec::chain(u));
        }
        failed = true;
    }
    if failed {
        return Ok(exit::ENGINE);
    }
    if args.check && !attention.is_empty() {
        eprintln!(
            "check failed: {} {} attention",
            attention.len(),
            plural(attention.len(), "instance needs", "instances need")
        );
        return Ok(exit::ATTENTION);
    }
    Ok(exit::OK)
}

/// WAITING instances of one task that status names one by one.
const MAX_WAITING_LISTED: usize = 5;

fn print_status(
    manifest: &std::path::Path,
    warehouse: &Warehouse,
    overview: &Overview,
    versions: &BTreeMap<(&str, &str), usize>,
    attention: &[Attention],
    narrowed: bool,
) {
    print_published(warehouse, overview, versions, narrowed);
    print_missing(overview);
    print_attention(attention);
    print_waiting(manifest, overview);
    print_released_and_abandoned(manifest, overview);
    print_stale(manifest, overview);
    print_lineage(warehouse);
}

/// The published partitions, aligned, and how many each code version built;
/// or why there are none to show.
fn print_published(
    warehouse: &Warehouse,
    overview: &Overview,
    versions: &BTreeMap<(&str, &str), usize>,
    narrowed: bool,
) {
    if overview.published.is_empty() {
        // An unreadable commit log is no proof that nothing was published:
        // its error (stderr) says so instead; nor is a filter.
        if narrowed {
            println!("no published partition matches");
        } else if overview.unreadable.is_empty() {
            println!("nothing published yet in {}", warehouse.root().display());
        }
    } else {
        // Aligned: each column as wide as its widest value; timestamps at
        // one width; digests abbreviated as everywhere else.
        let rows: Vec<Vec<String>> = overview
            .published
            .iter()
            .map(|(_, r)| {
                let uncertified =
                    !certify::is_certified(warehouse, &r.dataset, &r.partition, r.generation.get());
                vec![
                    r.dataset.clone(),
                    r.partition.clone(),
                    r.generation.get().to_string(),
                    r.token.get().to_string(),
                    crate::plan::render::thousands(r.rows),
                    r.code_version.clone(),
                    super::fixed_ts(&r.published_at),
                    format!(
                        "{}{}",
                        super::short_digest(&r.digest),
                        if uncertified { "  UNCERTIFIED" } else { "" }
                    ),
                ]
            })
            .collect();
        let header = [
            "dataset",
            "partition",
            "gen",
            "token",
            "rows",
            "code_version",
            "published_at",
            "digest",
        ];
        for line in super::aligned(&header, &rows, &[2, 3, 4]) {
            println!("{line}");
        }
        println!();
        for ((dataset, version), n) in versions {
            println!(
                "{dataset}: {n} partition{} built by code_version {version}",
                if *n == 1 { "" } else { "s" }
            );
        }
    }
}

/// Expected partitions without a publication, by dataset.
fn print_missing(overview: &Overview) {
    let mut missing: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for m in &overview.missing {
        missing
            .entry(m.dataset.as_str())
            .or_default()
            .push(m.partition.as_str());
    }
    for (dataset, keys) in missing {
        let shown: Vec<&str> = keys.iter().take(10).copied().collect();
        println!(
            "missing: {dataset}: {} expected partition{} without a publication: {}{}",
            keys.len(),
            if keys.len() == 1 { "" } else { "s" },
            shown.join(", "),
            if keys.len() > shown.len() {
                ", …"
            } else {
                ""
            }
        );
    }
}

/// The instances and deliveries that need a person.
fn print_attention(attention: &[Attention]) {
    for a in attention {
        // Not about one instance (notifications undelivered to a target).
        if a.partition.is_empty() {
            println!("{:<11} {}", a.state, a.detail);
            continue;
        }
        println!(
            "{:<11} {} {}: {}",
            a.state,
            a.task,
            a.partition,
            crate::ops::printable(&a.detail)
        );
    }
}

/// Instances waiting for an external input, with the command that runs
/// them once it is in place.
fn print_waiting(manifest: &std::path::Path, overview: &Overview) {
    // The latest few per task by name (what a run without `--partition`
    // holds), then a count: a feed that never arrived is one story, not a
    // page of lines.
    let mut per_task: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for (task, partition, detail) in &overview.waiting {
        per_task
            .entry(task.as_str())
            .or_default()
            .push((partition.as_str(), detail.as_str()));
    }
    for (task, waiting) in per_task {
        let earlier = waiting.len().saturating_sub(MAX_WAITING_LISTED);
        if earlier > 0 {
            println!(
                "{:<11} {task}: {earlier} earlier {} without {} external input too (`weir status --json` lists them)",
                "WAITING",
                plural(earlier, "partition", "partitions"),
                plural(earlier, "its", "their")
            );
        }
        for (partition, detail) in &waiting[earlier..] {
            let run = format!(
                "`weir run {} --task {task} --partition {}`",
                shell_word(&manifest.display().to_string()),
                shell_word(partition)
            );
            // Nothing to put in place while nobody has asked the sensor.
            if detail.contains(crate::exec::sensed::NOT_CHECKED_YET) {
                println!(
                    "{:<11} {task} {partition}: {detail}; {run} asks it",
                    "WAITING"
                );
            } else {
                println!(
                    "{:<11} {task} {partition}: {detail}; put it in place, then {run}",
                    "WAITING"
                );
            }
        }
    }
}

/// Quarantines their inputs or code released, and abandoned instances,
/// each with the command that acts on it.
fn print_released_and_abandoned(manifest: &std::path::Path, overview: &Overview) {
    for (m, changed) in &overview.released {
        println!(
            "{:<11} {} {}: was quarantined ({}), but {changed}: will rerun on the next run (`weir run {} --task {} --partition {}`)",
            "RELEASED",
            m.task,
            m.partition,
            m.reason,
            shell_word(&manifest.display().to_string()),
            m.task,
            shell_word(&m.partition)
        );
    }
    for m in &overview.abandoned {
        println!(
            "{:<11} {} {}: {} (not run until `weir retry {} {} --partition {} --note …`)",
            m.mark.as_str(),
            m.task,
            m.partition,
            m.reason.strip_prefix("abandoned ").unwrap_or(&m.reason),
            shell_word(&manifest.display().to_string()),
            m.task,
            shell_word(&m.partition)
        );
    }
}

/// Stale publications, with what rebuilds each.
fn print_stale(manifest: &std::path::Path, overview: &Overview) {
    for st in &overview.stale {
        // A held instance (a rollback) is not rebuilt by a run until an
        // operator releases it.
        let held = overview
            .marks
            .iter()
            .any(|m| m.mark == Mark::Held && m.task == st.task && m.partition == st.partition);
        let hint = if held {
            format!(
                "held: `weir retry {} {} --partition {} --note …` releases it and rebuilds it",
                shell_word(&manifest.display().to_string()),
                st.task,
                shell_word(&st.partition)
            )
        } else {
            format!(
                "rerun it with `weir run {} --partition {}`",
                shell_word(&manifest.display().to_string()),
                shell_word(&st.partition)
            )
        };
        println!(
            "{:<11} {} {}: {} ({hint})",
            "STALE", st.task, st.partition, st.detail,
        );
    }
}

/// The last run's undelivered OpenLineage events.
fn print_lineage(warehouse: &Warehouse) {
    // Lineage is a side channel: noted here, never a reason to page.
    if let Some(note) = crate::lineage::last_note(warehouse.root()) {
        if !note.delivery.complete() {
            println!(
                "LINEAGE     run {}: {} OpenLineage {} not delivered to {}: {}",
                note.run_id.as_deref().unwrap_or("?"),
                note.delivery.failed + note.delivery.dropped,
                if note.delivery.failed + note.delivery.dropped == 1 {
                    "event"
                } else {
                    "events"
                },
                note.sink,
                note.delivery.last_error.as_deref().unwrap_or("queue full")
            );
        }
    }
}

pub(crate) fn show(args: &ShowArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
    let task = producer_of(&manifest, &args.dataset, &args.partition)?;
    let warehouse = super::error::open_to_read(&manifest)?;
    let store = warehouse.partition(&args.dataset, &args.partition);
    super::checks::records_whole(task, &store)?;
    let record = match args.generation {
        // An earlier generation, as `weir history` lists them.
        Some(g) => {
            let history = store.history().map_err(CliError::engine)?;
            let found = history.iter().find(|r| r.generation.get() == g).cloned();
            found.ok_or_else(|| {
                no_generation(
                    &args.dataset,
                    &args.partition,
                    g,
                    history.last().map(|r| r.generation.get()),
                )
            })?
        }
        None => store.latest().map_err(CliError::engine)?.ok_or_else(|| {
            CliError::NothingPublished(format!(
                "`{}` has no published generation for partition {}",
                args.dataset, args.partition
            ))
        })?,
    };
    // What is shown is what was checked (from an object store, one download).
    let visible = store
        .local_files(&record)
        .map_err(doing("cannot read the published files"))?;
    store
        .check_paths(&record, &visible, Depth::Hash)
        .map_err(CliError::Drift)?;
    let (columns, rows) = audit::read_raw_rows(&visible, task.output.format, args.limit)
        .map_err(doing("cannot read the published files"))?;
    // The reader sorts columns (the canonical digest's order); show them in
    // the file's own order, read from the first file's header.
    let order = file_order(visible.first(), task.output.format, &columns);
    let columns: Vec<String> = order.iter().map(|&i| columns[i].clone()).collect();
    let rows = rows
        .into_iter()
        .map(|r| order.iter().map(|&i| r[i].clone()).collect::<Vec<_>>());
    if args.json {
        // A value that is not UTF-8 is marked, never silently replaced:
        // `{"invalid_utf8": "<its bytes in hex>"}` instead of a string.
        let rows: Vec<Vec<serde_json::Value>> = rows
            .map(|r| {
                r.iter()
                    .map(|v| match v.as_deref().map(std::str::from_utf8) {
                        None => serde_json::Value::Null,
                        Some(Ok(text)) => serde_json::Value::String(text.to_string()),
                        Some(Err(_)) => {
                            let bytes = v.as_deref().unwrap_or_default();
                            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                            serde_json::json!({ "invalid_utf8": hex })
                        }
                    })
                    .collect()
            })
            .collect();
        let doc = serde_json::json!({
            "dataset": args.dataset,
            "partition": args.partition,
            "generation": record.generation.get(),
            "digest": record.digest,
            "columns": columns,
            "rows": rows,
        });
        println!(
            "{}",
            serde_json::to_string(&doc).expect("json values serialize")
        );
        return Ok(exit::OK);
    }
    let mut out = csv::Writer::from_writer(std::io::stdout());
    let written = (|| {
        out.write_record(&columns)?;
        for row in rows {
            // Bytes as they were published: a value that is not UTF-8 is
            // not replaced by U+FFFD.
            out.write_record(row.iter().map(|v| v.as_deref().unwrap_or(b"")))?;
        }
        out.flush()?;
        Ok::<(), csv::Error>(())
    })();
    match written {
        // A reader that went away (`weir show … | head`) ends weir quietly.
        Err(e) if matches!(e.kind(), csv::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe) => {
            Ok(exit::OK)
        }
        Err(e) => Err(doing("cannot write the rows")(e)),
        Ok(()) => Ok(exit::OK),
    }
}

/// Positions in `sorted` of a CSV file's header columns, in the file's order;
/// the identity for JSON Lines (objects have no column order) or when the
/// header cannot be read again.
fn file_order(
    file: Option<&std::path::PathBuf>,
    format: crate::audit::Format,
    sorted: &[String],
) -> Vec<usize> {
    let identity = (0..sorted.len()).collect();
    if format != crate::audit::Format::Csv {
        return identity;
    }
    let Some(header) = file
        .and_then(|f| csv::Reader::from_path(f).ok())
        .and_then(|mut r| r.headers().ok().cloned())
    else {
        return identity;
    };
    // `sorted` is sorted: a search per name, where a scan per name took
    // minutes for a file of 200,000 columns.
    let order: Option<Vec<usize>> = header
        .iter()
        .map(|name| sorted.binary_search_by(|c| c.as_str().cmp(name)).ok())
        .collect();
    match order {
        Some(o) if o.len() == sorted.len() => o,
        _ => identity,
    }
}

/// Backfills in flight: a run's progress and ETA, a pause and since when.
fn backfill_lines(
    manifest: &std::path::Path,
    backfills: &[crate::ops::backfills::BackfillState],
) -> Vec<String> {
    use crate::plan::render::human_duration;
    use crate::store::steering::Steer;
    let human = |ms: u64| human_duration(std::time::Duration::from_millis(ms));
    let mut out = Vec::new();
    for b in backfills {
        if let Some(run) = &b.run {
            out.push(format!(
                "backfill `{}`: run {}: {}",
                b.name,
                run.run_id,
                run.line(human)
            ));
        }
        let command = format!(
            "weir backfill {} {}",
            crate::partition::shell_word(&manifest.display().to_string()),
            crate::partition::shell_word(&b.name)
        );
        match &b.steering {
            Some(s) if s.state == Steer::Paused => out.push(format!(
                "backfill `{}`: PAUSED since {} ({}): it admits nothing new; `{command} --resume` continues it",
                b.name, s.since, s.by
            )),
            Some(s) => out.push(format!(
                "backfill `{}`: CANCELLED since {} ({}): `{command}` resumes it",
                b.name, s.since, s.by
            )),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // The order of a header of a million columns: a scan of the sorted
    // columns per name (half a million million comparisons) never ended,
    // a search per name takes a moment.
    #[test]
    fn the_file_order_of_a_million_columns_is_found_by_search() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wide.csv");
        let names: Vec<String> = (0..1_000_000).rev().map(|i| format!("c{i:07}")).collect();
        std::fs::write(&path, format!("{}\n", names.join(","))).expect("header");
        let mut sorted = names.clone();
        sorted.sort();
        let order = file_order(Some(&path), crate::audit::Format::Csv, &sorted);
        let shown: Vec<String> = order.iter().map(|&i| sorted[i].clone()).collect();
        assert!(shown == names, "not the file's order");
    }
}
