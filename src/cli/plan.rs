//! `weir plan`: a dry run. Reads the manifest, writes nothing.

use super::args::{GraphFormat, PlanArgs};
use super::error::{doing, CliError};
use super::exit;
use crate::manifest::Manifest;
use std::path::Path;

use crate::partition::shell_word;
use crate::plan::census::Census;
use crate::plan::contract::{self, FileEstimate, FileScope, ManifestId, PlanFile};
use crate::plan::history::History;
use crate::plan::{cost, render, Plan, Scope};
use crate::store::Warehouse;

pub(crate) fn run(args: &PlanArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
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
        let page = crate::report::plan::render(&plan)
            .map_err(doing("cannot render the plan's HTML".to_owned()))?;
        std::fs::write(path, page).map_err(doing(format!("cannot write `{}`", path.display())))?;
        println!("wrote {}", path.display());
        return Ok(exit::OK);
    }
    print(
        &manifest,
        &scope,
        &args.task,
        args.json,
        args.out.as_deref(),
    )
}

/// Prints the plan of `scope` as a table or JSON; shared with `backfill --dry-run`.
pub(crate) fn print(
    manifest: &Manifest,
    scope: &Scope,
    tasks: &[String],
    json: bool,
    out: Option<&Path>,
) -> Result<u8, CliError> {
    let plan = build(manifest, scope, tasks)?;
    let warehouse = existing_warehouse(manifest);
    let (census, runs) = Census::take(manifest, warehouse.as_ref(), &plan);
    let estimate = forecast(warehouse.as_ref(), &plan, Some(&runs));
    if let Some(path) = out {
        let file = contract_of(manifest, scope, tasks, &plan, &estimate, warehouse.as_ref())?;
        let text = serde_json::to_string_pretty(&file).expect("a plan file always serializes");
        std::fs::write(path, text + "\n")
            .map_err(doing(format!("cannot write `{}`", path.display())))?;
    }
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
    if let Some(path) = out {
        let run = match scope {
            Scope::Backfill(name) => format!(
                "weir backfill {} {} --plan {}",
                shell_word(&manifest.path.display().to_string()),
                shell_word(name),
                shell_word(&path.display().to_string())
            ),
            _ => format!(
                "weir run {} --plan {}",
                shell_word(&manifest.path.display().to_string()),
                shell_word(&path.display().to_string())
            ),
        };
        eprintln!(
            "wrote the plan to {}: `{run}` runs exactly it, or refuses if the world it assumed changed",
            path.display()
        );
    }
    Ok(exit::OK)
}

/// The contract of `plan`: its instances and the world each assumed.
fn contract_of(
    manifest: &Manifest,
    scope: &Scope,
    tasks: &[String],
    plan: &Plan,
    estimate: &cost::Estimate,
    warehouse: Option<&Warehouse>,
) -> Result<PlanFile, CliError> {
    let scope = FileScope::of(scope)
        .ok_or_else(|| CliError::Usage("a repair cannot be written as a plan file".into()))?;
    let sha256 = contract::file_sha256(&manifest.path).map_err(doing(format!(
        "cannot read the manifest `{}`",
        manifest.path.display()
    )))?;
    let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    Ok(PlanFile {
        kind: contract::KIND.into(),
        format_version: contract::FORMAT_VERSION,
        pipeline: manifest.pipeline.name.clone(),
        manifest: ManifestId {
            path: manifest.path.display().to_string(),
            sha256,
        },
        warehouse: manifest.pipeline.location(),
        scope,
        tasks: tasks.to_vec(),
        code_version: manifest.pipeline.code_version.clone(),
        estimate: FileEstimate {
            estimated_wall_ms: ms(estimate.total),
            estimated_wall_p90_ms: ms(estimate.p90),
        },
        instances: contract::worlds(manifest, warehouse, plan, plan.now),
    })
}

/// Reads the plan file at `path` and checks that the world it assumed
/// still holds for `manifest` (and, for `weir backfill NAME --plan`, that
/// it plans backfill `backfill`): its scope and selectors to run, or a
/// refusal (exit 3) naming every difference, before anything starts.
pub(crate) fn honour(
    manifest: &Manifest,
    path: &Path,
    backfill: Option<&str>,
) -> Result<PlanFile, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::Usage(format!(
            "cannot read the plan file `{}`: {e}",
            path.display()
        ))
    })?;
    let file: PlanFile = serde_json::from_str(&text)
        .ok()
        .filter(|f: &PlanFile| f.kind == contract::KIND && f.format_version == contract::FORMAT_VERSION)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "`{}` is not a plan file of this weir (format {})\n  help: `weir plan MANIFEST … --out FILE` writes one",
                path.display(),
                contract::FORMAT_VERSION
            ))
        })?;
    let refused = |lines: Vec<String>| {
        CliError::Refused(format!(
            "the plan `{}` no longer holds; nothing was started:\n{}\n  help: review a new plan (`weir plan … --out FILE`)",
            path.display(),
            lines
                .iter()
                .map(|l| format!("  - {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        ))
    };
    if let Some(name) = backfill {
        if file.scope != (FileScope::Backfill { name: name.into() }) {
            return Err(refused(vec![format!(
                "the plan is not one of backfill `{name}` ({:?})",
                file.scope
            )]));
        }
    }
    let sha256 = contract::file_sha256(&manifest.path).map_err(doing(format!(
        "cannot read the manifest `{}`",
        manifest.path.display()
    )))?;
    let warehouse = existing_warehouse(manifest);
    let plan = build(manifest, &file.scope.scope(), &file.tasks)?;
    let differences = contract::differences(
        &file,
        manifest,
        &sha256,
        warehouse.as_ref(),
        &plan,
        plan.now,
    );
    if differences.is_empty() {
        Ok(file)
    } else {
        Err(refused(differences))
    }
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
