//! `weir plan`: a dry run. Reads the manifest, writes nothing.

use super::args::{GraphFormat, PlanArgs};
use super::{exit, load, report};
use crate::manifest::Manifest;
use crate::plan::{cost, render, Plan, Scope};

pub(crate) fn run(args: &PlanArgs) -> u8 {
    let manifest = match load(&args.manifest) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let scope = match (&args.backfill, args.partition.is_empty()) {
        (Some(name), _) => Scope::Backfill(name.clone()),
        (None, false) => Scope::Partitions(args.partition.clone()),
        (None, true) => Scope::Latest,
    };
    if let Some(format) = args.graph {
        let Some(plan) = build(&manifest, &scope, &args.task) else {
            return exit::INVALID;
        };
        match format {
            GraphFormat::Dot => print!("{}", render::dot(&plan)),
            GraphFormat::Mermaid => print!("{}", render::mermaid(&plan)),
        }
        return exit::OK;
    }
    if let Some(path) = &args.html {
        let Some(plan) = build(&manifest, &scope, &args.task) else {
            return exit::INVALID;
        };
        return match std::fs::write(path, crate::report::plan::render(&plan)) {
            Ok(()) => {
                println!("wrote {}", path.display());
                exit::OK
            }
            Err(e) => {
                eprintln!("error: cannot write `{}`: {e}", path.display());
                exit::ENGINE
            }
        };
    }
    print(&manifest, &scope, &args.task, args.json)
}

/// Prints the plan of `scope` as a table or JSON; shared with `backfill --dry-run`.
pub(crate) fn print(manifest: &Manifest, scope: &Scope, tasks: &[String], json: bool) -> u8 {
    let Some(plan) = build(manifest, scope, tasks) else {
        return exit::INVALID;
    };
    let estimate = cost::estimate(&plan);
    if json {
        print!("{}", render::json(&plan, &estimate));
    } else {
        print!("{}", render::table(&plan, &estimate));
    }
    exit::OK
}

fn build(manifest: &Manifest, scope: &Scope, tasks: &[String]) -> Option<Plan> {
    let today = crate::clock::today();
    let built = if tasks.is_empty() {
        Plan::build(manifest, scope, today)
    } else {
        let names: Vec<&str> = tasks.iter().map(String::as_str).collect();
        Plan::build_for(manifest, scope, &names, today)
    };
    built.map_err(|e| report(&e)).ok()
}
