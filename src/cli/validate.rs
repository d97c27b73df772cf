//! `weir validate`.

use super::args::ValidateArgs;
use super::error::CliError;
use super::plural;
use super::{exit, load};

/// Validates every manifest given, reporting each; any invalid one makes
/// the whole command fail (its diagnostics are on stderr already).
pub(crate) fn run(args: &ValidateArgs) -> Result<u8, CliError> {
    let mut invalid = false;
    for path in &args.manifests {
        match load(path) {
            Ok(m) => {
                super::print_warnings(&m);
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
            // Its diagnostics are printed already; anything else is not.
            Err(CliError::Manifest) => invalid = true,
            Err(e) => {
                e.report();
                invalid = true;
            }
        }
    }
    if invalid {
        return Err(CliError::Manifest);
    }
    Ok(exit::OK)
}
