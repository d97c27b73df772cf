//! `weir history DATASET --partition P`: every generation of a partition,
//! oldest first, so `weir rollback --to` has something to choose from.

use super::args::HistoryArgs;
use super::error::CliError;
use super::exit;
use crate::store::certs as certify;
use crate::store::CommitKind;

pub(crate) fn run(args: &HistoryArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
    let task = super::checks::producer_of(&manifest, &args.dataset, &args.partition)?;
    let warehouse = super::error::open_to_read(&manifest)?;
    let store = warehouse.partition(&args.dataset, &args.partition);
    super::checks::records_whole(task, &store)?;
    let history = store.history().map_err(CliError::engine)?;
    // A Delta table's version of each generation.
    let delta = match task.output.table {
        Some(_) => Some(
            crate::store::delta::versions_of(&store)
                .map_err(super::error::doing("cannot read the Delta log"))?,
        ),
        None => None,
    };
    let rows: Vec<serde_json::Value> = history
        .iter()
        .map(|r| {
            let g = r.generation.get();
            let mut row = serde_json::json!({
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
            });
            if let Some(versions) = &delta {
                row["delta_version"] = versions.get(&g).copied().into();
            }
            row
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
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let s = |k: &str| match &r[k] {
                serde_json::Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            vec![
                s("generation"),
                s("kind"),
                s("token"),
                s("run_id"),
                s("code_version"),
                crate::plan::render::thousands(r["rows"].as_u64().unwrap_or_default()),
                super::short_digest(&s("digest")),
                super::fixed_ts(&s("published_at")),
                if r["certified"] == true { "yes" } else { "NO" }.to_string(),
            ]
            .into_iter()
            .chain(delta.as_ref().map(|_| {
                r["delta_version"]
                    .as_u64()
                    .map_or_else(|| "-".to_string(), |v| v.to_string())
            }))
            .collect()
        })
        .collect();
    let mut header = vec![
        "gen",
        "kind",
        "token",
        "run",
        "code_version",
        "rows",
        "digest",
        "published_at",
        "certified",
    ];
    if delta.is_some() {
        header.push("delta");
    }
    // Generation, token and rows are numbers, right-aligned as in `status`.
    for line in super::aligned(&header, &table, &[0, 2, 5, 9]) {
        println!("{line}");
    }
    Ok(exit::OK)
}
