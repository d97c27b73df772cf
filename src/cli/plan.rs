//! `weir plan`: a dry run. Reads the manifest, writes nothing.

use super::args::{GraphFormat, PlanArgs};
use super::{exit, load, report};
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
    let today = crate::clock::today();
    let built = if args.task.is_empty() {
        Plan::build(&manifest, &scope, today)
    } else {
        let names: Vec<&str> = args.task.iter().map(String::as_str).collect();
        Plan::build_for(&manifest, &scope, &names, today)
    };
    let plan = match built {
        Ok(p) => p,
        Err(e) => {
            report(&e);
            return exit::INVALID;
        }
    };
    match args.graph {
        Some(GraphFormat::Dot) => print!("{}", render::dot(&plan)),
        Some(GraphFormat::Mermaid) => print!("{}", render::mermaid(&plan)),
        None => {
            let estimate = cost::estimate(&plan);
            if args.json {
                print!("{}", render::json(&plan, &estimate));
            } else {
                print!("{}", render::table(&plan, &estimate));
            }
        }
    }
    exit::OK
}
