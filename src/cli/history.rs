//! `weir history DATASET --partition P`: every generation of a partition,
//! oldest first, so `weir rollback --to` has something to choose from.

use super::args::HistoryArgs;
use super::error::CliError;
use super::exit;
use crate::store::certs as certify;
use crate::store::CommitKind;

pub(crate) fn run(args: &HistoryArgs) -> Result<u8, CliError> {
    let manifest = super::error::load(&args.manifest)?;
    super::status::producer_of(&manifest, &args.dataset, &args.partition)?;
    let warehouse = super::error::open_to_read(&manifest)?;
    let history = warehouse
        .partition(&args.dataset, &args.partition)
        .history()
        .map_err(CliError::engine)?;
    let rows: Vec<serde_json::Value> = history
        .iter()
        .map(|r| {
            let g = r.generation.get();
            serde_json::json!({
                "generation": g,
                "kind": match r.kind {
                    CommitKind::Publish => "publish".to_string(),
                    CommitKind::Rollback { from_generation } => format!("rollback from {}", from_generation.get()),
                },
                "token": r.token.get(),
                "run_id": r.run_id,
                "code_version": r.code_version,
                "rows": r.rows,
                "digest": r.digest,
                "published_at": r.published_at,
                "certified": certify::is_certified(&warehouse, &args.dataset, &args.partition, g),
            })
        })
        .collect();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).expect("json values serialize")
        );
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        println!(
            "`{}` {}: no generation published",
            args.dataset, args.partition
        );
        return Ok(exit::OK);
    }
    let table: Vec<[String; 9]> = rows
        .iter()
        .map(|r| {
            let s = |k: &str| match &r[k] {
                serde_json::Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            let digest = s("digest");
            [
                s("generation"),
                s("kind"),
                s("token"),
                s("run_id"),
                s("code_version"),
                s("rows"),
                super::short_digest(&digest),
                super::fixed_ts(&s("published_at")),
                if r["certified"] == true { "yes" } else { "NO" }.to_string(),
            ]
        })
        .collect();
    let header = [
        "GEN",
        "KIND",
        "TOKEN",
        "RUN",
        "CODE_VERSION",
        "ROWS",
        "DIGEST",
        "PUBLISHED_AT",
        "CERTIFIED",
    ];
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .chain([header[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    println!("{}", line(&header));
    for r in &table {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        println!("{}", line(&cells));
    }
    Ok(exit::OK)
}
