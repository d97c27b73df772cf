//! What every command starts from: the environment's settings, read once,
//! `--warehouse`, and the manifest loaded with them.

use std::path::Path;

use super::error;
use super::terminal::{color, terminal_width};
use crate::manifest::Manifest;

/// Loads a manifest, printing its diagnostics on failure.
pub(crate) fn load(path: &Path) -> Result<Manifest, error::CliError> {
    // The default manifest absent: say that, not "not a valid manifest" of
    // a file the user never named.
    if path == Path::new(DEFAULT_MANIFEST) && std::fs::symlink_metadata(path).is_err() {
        return Err(error::CliError::Usage(format!(
            "no manifest given and no `{DEFAULT_MANIFEST}` in the current directory\n  help: name one: `weir status pipelines/marigold.toml`"
        )));
    }
    let staging = settings().staging.as_deref();
    let mut manifest = Manifest::load_with_staging(path, staging).map_err(|errors| {
        let color = color();
        eprint!("{}", errors.render(color, terminal_width()));
        error::CliError::Manifest
    })?;
    if let Some(location) = WAREHOUSE.get() {
        let here =
            std::env::current_dir().map_err(error::doing("cannot read the current directory"))?;
        manifest
            .pipeline
            .set_warehouse(location, &here, staging)
            .map_err(|e| error::CliError::Usage(format!("--warehouse: {e}")))?;
    }
    Ok(manifest)
}

/// Prints a valid manifest's warnings on stderr (`validate`, `plan`, `run`
/// and `backfill`: the commands that say what a manifest means).
pub(crate) fn print_warnings(manifest: &Manifest) {
    if !manifest.warnings.is_empty() {
        eprint!(
            "{}",
            crate::manifest::render_warnings(&manifest.warnings, color(), terminal_width())
        );
    }
}

/// The manifest commands read when given none.
const DEFAULT_MANIFEST: &str = "weir.toml";

/// `--warehouse`, which every command applies to the manifest it loads.
pub(super) static WAREHOUSE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// What the environment said, read once by `cli::main`.
pub(super) static SETTINGS: std::sync::OnceLock<crate::exec::Settings> = std::sync::OnceLock::new();

/// The settings `cli::main` read (an unset environment's before it did).
pub(crate) fn settings() -> &'static crate::exec::Settings {
    SETTINGS.get_or_init(Default::default)
}
