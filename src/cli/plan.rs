//! `weir plan`: a dry run. Reads the manifest, writes nothing.

use super::args::{GraphFormat, PlanArgs};
use super::error::{doing, CliError};
use super::exit;
use crate::manifest::Manifest;
use crate::plan::census::Census;
use crate::plan::history::History;
use crate::plan::{cost, render, Plan, Scope};
use crate::store::Warehouse;

pub(crate) fn run(args: &PlanArgs) -> Result<u8, CliError> {
    let manifest = super::error::load(&args.manifest)?;
    super::print_warnings(&manifest);
    let scope = match (&args.backfill, &args.from, &args.to) {
        (Some(name), _, _) => Scope::Backfill(name.clone()),
        (None, Some(from), Some(to)) => Scope::Range {
            from: from.clone(),
            to: to.clone(),
        },
        _ if !args.partition.is_empty() => Scope::Partitions(args.partition.clone()),
        _ => Scope::Latest,
    };
    if let Some(format) = args.graph {
        let plan = build(&manifest, &scope, &args.task)?;
        match format {
            GraphFormat::Dot => print!("{}", render::dot(&plan)),
            GraphFormat::Mermaid => print!("{}", render::mermaid(&plan)),
        }
        return Ok(exit::OK);
    }
    if let Some(path) = &args.html {
        let plan = build(&manifest, &scope, &args.task)?;
        std::fs::write(path, crate::report::plan::render(&plan))
            .map_err(doing(format!("cannot write `{}`", path.display())))?;
        println!("wrote {}", path.display());
        return Ok(exit::OK);
    }
    print(&manifest, &scope, &args.task, args.json)
}

/// Prints the plan of `scope` as a table or JSON; shared with `backfill --dry-run`.
pub(crate) fn print(
    manifest: &Manifest,
    scope: &Scope,
    tasks: &[String],
    json: bool,
) -> Result<u8, CliError> {
    let plan = build(manifest, scope, tasks)?;
    let warehouse = existing_warehouse(manifest);
    let (census, runs) = Census::take(manifest, warehouse.as_ref(), &plan);
    let estimate = forecast(warehouse.as_ref(), &plan, Some(&runs));
    if json {
        print!(
            "{}",
            render::json(&plan, &estimate, manifest, Some(&census))
        );
    } else {
        print!("{}", render::table(&plan, &estimate, Some(&census)));
        let stale = stale_instances(manifest, &plan);
        if !stale.is_empty() {
            println!();
            println!("stale: planned partitions whose publication read an upstream generation that has changed, or whose code changed (they rerun):");
            for line in stale {
                println!("  {line}");
            }
        }
    }
    Ok(exit::OK)
}

/// The plan's estimate from the warehouse's history (declared durations
/// where it has none, or cannot be read: said once).
pub(crate) fn forecast(
    warehouse: Option<&Warehouse>,
    plan: &Plan,
    runs: Option<&[bool]>,
) -> cost::Estimate {
    let names: Vec<&str> = plan.tasks.iter().map(|t| t.name.as_str()).collect();
    let history = match warehouse.map(|w| History::read(w, &names)) {
        Some(Ok(history)) => history,
        Some(Err(e)) => {
            eprintln!(
                "warning: cannot read the event logs: {}; estimating from expected_duration",
                crate::store::chain(&e)
            );
            History::default()
        }
        None => History::default(),
    };
    cost::estimate_from(plan, &history, runs)
}

/// The manifest's warehouse if it exists: a plan writes nothing, and an
/// absent warehouse has published nothing. An object store is opened
/// (which creates nothing there).
pub(crate) fn existing_warehouse(manifest: &Manifest) -> Option<Warehouse> {
    if manifest.pipeline.remote.is_none() && !manifest.pipeline.warehouse.is_dir() {
        return None;
    }
    match Warehouse::open_for(&manifest.pipeline) {
        Ok(warehouse) => Some(warehouse),
        Err(e) => {
            // Said once, though a plan may look twice.
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                eprintln!(
                    "warning: cannot open the warehouse {}: {}; planning as if nothing were published",
                    manifest.pipeline.location(),
                    crate::store::chain(&e)
                );
            });
            None
        }
    }
}

/// Planned instances whose current publication is STALE, in words.
fn stale_instances(manifest: &Manifest, plan: &Plan) -> Vec<String> {
    let Some(warehouse) = existing_warehouse(manifest) else {
        return Vec::new();
    };
    let mut staleness = crate::plan::stale::Staleness::default();
    let mut out = Vec::new();
    for (t, task) in plan.tasks.iter().enumerate() {
        let declared = &manifest.tasks[&task.name];
        for (i, key) in task.keys.iter().enumerate() {
            if plan.is_added(t, i) {
                continue;
            }
            if let Ok(Some(record)) = warehouse.partition(&declared.output.dataset, key).latest() {
                let changed = staleness.of(manifest, &warehouse, declared, &record);
                if !changed.is_empty() {
                    out.push(format!("{} {key}: {}", task.name, changed.join("; ")));
                }
            }
        }
    }
    out
}

fn build(manifest: &Manifest, scope: &Scope, tasks: &[String]) -> Result<Plan, CliError> {
    let now = crate::clock::now();
    // A plan writes nothing: an absent warehouse has published nothing.
    let warehouse = existing_warehouse(manifest);
    let published = |dataset: &str, key: &str| {
        warehouse
            .as_ref()
            .is_some_and(|w| crate::plan::settled(manifest, w, dataset, key))
    };
    let selection = crate::plan::select::selection(manifest, tasks)?;
    Ok(Plan::build_selected(
        manifest, scope, &selection, now, &published,
    )?)
}
