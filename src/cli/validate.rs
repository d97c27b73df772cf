//! `weir validate`.

use super::args::ValidateArgs;
use super::{exit, load};

pub(crate) fn run(args: &ValidateArgs) -> u8 {
    let mut code = exit::OK;
    for path in &args.manifests {
        match load(path) {
            Ok(m) => {
                let instances: usize = m.tasks.len();
                println!(
                    "ok: {} (pipeline `{}`, code_version {}: {} {}, {} partition {}, {} {}, {} {})",
                    path.display(),
                    m.pipeline.name,
                    m.pipeline.code_version,
                    instances,
                    plural(instances, "task", "tasks"),
                    m.partitions.len(),
                    plural(m.partitions.len(), "scheme", "schemes"),
                    m.pools.len(),
                    plural(m.pools.len(), "pool", "pools"),
                    m.backfills.len(),
                    plural(m.backfills.len(), "backfill", "backfills"),
                );
            }
            Err(c) => code = c,
        }
    }
    code
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}
