//! Times the audit of one candidate file with W4's gates (grain `id`,
//! `row_count`, `unique(ref)`, `not_null(id, amount_cents)`), without the
//! rest of `weir run`: the loop to profile the audit in (`perf record`,
//! `/usr/bin/time -v` for peak RSS).
//!
//! usage: cargo run --release --example audit_bench -- csv|parquet FILE [RUNS] [--scan] [--one-key]
//!
//! With `--scan`, only reads the rows (no digest, no gates): the cost of
//! the format's reader alone. With `--one-key`, the tracker's audit: the
//! grain's uniqueness set only (`unique(ref)` left out).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use weir::audit::{audit, scan_files, AuditSpec, Format, Gate};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (format, file) = match args.as_slice() {
        [format, file, ..] => (format.as_str(), PathBuf::from(file)),
        _ => return Err("usage: audit_bench csv|parquet FILE [RUNS]".into()),
    };
    let format = match format {
        "csv" => Format::Csv,
        "parquet" => Format::Parquet,
        "jsonl" => Format::Jsonl,
        other => return Err(format!("unknown format {other}").into()),
    };
    let scan = args.iter().any(|arg| arg == "--scan");
    let one_key = args.iter().any(|arg| arg == "--one-key");
    let runs: usize = args
        .get(2)
        .filter(|arg| !arg.starts_with("--"))
        .map_or(Ok(1), |n| n.parse())?;
    let grain = vec!["id".to_owned()];
    let mut gates = vec![
        Gate::RowCount {
            min: Some(1),
            max: None,
        },
        Gate::Unique {
            columns: vec!["ref".to_owned()],
        },
        Gate::NotNull {
            columns: vec!["id".to_owned(), "amount_cents".to_owned()],
        },
    ];
    if one_key {
        gates.retain(|gate| !matches!(gate, Gate::Unique { .. }));
    }
    let inputs = HashMap::new();
    let spec = AuditSpec {
        format,
        grain: &grain,
        gates: &gates,
        inputs: &inputs,
    };
    for _ in 0..runs {
        let start = Instant::now();
        if scan {
            let (rows, bytes) = scan_files(std::slice::from_ref(&file), format)?;
            let seconds = start.elapsed().as_secs_f64();
            println!(
                "{seconds:.3} s  {rows} rows  {:.2} M rows/s  {bytes} value bytes (scan only)",
                rows as f64 / seconds / 1e6
            );
            continue;
        }
        let report = audit(std::slice::from_ref(&file), &spec)?;
        let seconds = start.elapsed().as_secs_f64();
        let failed: Vec<String> = report
            .failures()
            .map(|g| format!("{}: {}", g.gate, g.actual))
            .collect();
        println!(
            "{:.3} s  {} rows  {:.2} M rows/s  {}  failed: {:?}",
            seconds,
            report.rows,
            report.rows as f64 / seconds / 1e6,
            report.digest,
            failed
        );
    }
    Ok(())
}
