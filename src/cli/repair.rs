//! `weir repair`: rebuild exactly a generation's impact, as a forced
//! backfill over those instances (see `ops::repair`).

use super::args::RepairArgs;
use super::error::CliError;
use super::exit;
use crate::exec::RunOptions;
use crate::ops::impact::impact;
use crate::ops::repair::rebuild_set;
use crate::partition::shell_word;
use crate::plan::Scope;

/// `weir repair`.
pub(crate) fn run(args: &RepairArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
    super::print_warnings(&manifest);
    let pool = match &args.pool {
        Some(pool) => pool.clone(),
        None => manifest
            .backfills
            .values()
            .next()
            .map_or_else(|| "default".to_string(), |b| b.pool.clone()),
    };
    if !manifest.pools.contains_key(&pool) {
        return Err(CliError::Usage(format!(
            "unknown pool `{pool}`\n  help: declared pools: {}",
            crate::manifest::ticked(&manifest.pools.keys().collect::<Vec<_>>())
        )));
    }
    let warehouse = if args.dry_run {
        super::error::open_to_read(&manifest)?
    } else {
        super::error::open(&manifest)?
    };
    let (task, record) = super::impact::root(
        &manifest,
        &warehouse,
        &args.dataset,
        &args.partition,
        args.generation,
    )?;
    let visible = warehouse
        .partition(&args.dataset, &args.partition)
        .latest()
        .map_err(CliError::engine)?
        .is_some_and(|l| l.generation == record.generation);
    let found = impact(&manifest, &warehouse, task, &record).map_err(CliError::engine)?;
    let instances = rebuild_set(&found, &task.name, visible);
    if instances.is_empty() {
        println!(
            "nothing to repair: {} is no longer visible and nothing visible was built from it",
            found.root
        );
        return Ok(exit::OK);
    }
    let name = format!(
        "repair of `{}` {} generation {}",
        args.dataset, args.partition, found.root.generation
    );
    let tasks: Vec<String> = instances.iter().map(|(t, _)| t.clone()).collect();
    let scope = Scope::Repair {
        name: name.clone(),
        pool: pool.clone(),
        reason: args.reason.clone(),
        instances,
    };
    if args.dry_run {
        return super::plan::print(&manifest, &scope, &tasks, false, None);
    }
    let resume_since = match &args.resume {
        Some(run) => Some(super::run::started(&manifest, &name, run)?),
        None => None,
    };
    let options = RunOptions {
        scope,
        tasks,
        force: true,
        resume_since,
        run_id: args.run_id.clone(),
        seed: None,
        allow_uncertified: false,
        wait: None,
        settings: super::settings().clone(),
        signed: None,
    };
    // Resumed with the generation named: by then a newer one is visible.
    let resume = super::run::Resume {
        command: format!(
            "weir repair {} {} --partition {} --generation {} --pool {} --reason {}",
            shell_word(&args.manifest.display().to_string()),
            shell_word(&args.dataset),
            shell_word(&args.partition),
            found.root.generation,
            shell_word(&pool),
            shell_word(&args.reason)
        ),
        run: args.resume.clone(),
    };
    super::run::execute_resumable(&manifest, &options, Some(&resume))
}
