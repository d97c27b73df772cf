//! `weir console`: the live console of one or more pipelines, until
//! SIGINT or SIGTERM.

use super::args::ConsoleArgs;
use super::error::CliError;
#[cfg(feature = "console")]
use super::exit;

/// Where a token may come from instead of `--token`.
const TOKEN_ENV: &str = "WEIR_CONSOLE_TOKEN";

/// The token: `--token`, else `WEIR_CONSOLE_TOKEN` (which `ps` does not show).
fn token(args: &ConsoleArgs) -> Option<String> {
    args.token
        .clone()
        .or_else(|| std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()))
}

#[cfg(feature = "console")]
pub(crate) fn run(args: &ConsoleArgs) -> Result<u8, CliError> {
    use std::io::Write as _;

    use crate::console::{self, ConsoleError};
    let manifests = args
        .manifests
        .iter()
        .map(|m| super::error::load(m))
        .collect::<Result<Vec<_>, _>>()?;
    let names: Vec<String> = manifests
        .iter()
        .map(|m| format!("`{}`", m.pipeline.name))
        .collect();
    let token = token(args);
    let guarded = token.is_some();
    // Signals are caught before the port opens: a SIGTERM right after the
    // "listening" line stops the console cleanly.
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .map_err(super::error::doing("cannot catch SIGINT and SIGTERM"))?;
    let served = match console::serve(args.http, manifests, token.as_deref()) {
        Ok(c) => c,
        Err(e @ ConsoleError::Bind { .. }) => {
            super::report(&e);
            return Ok(exit::ENGINE);
        }
        Err(e) => {
            super::report(&e);
            return Ok(exit::INVALID);
        }
    };
    println!(
        "console of {} on http://{}/{}",
        names.join(", "),
        served.local_addr(),
        if guarded { " (token required)" } else { "" }
    );
    let _ = std::io::stdout().flush();
    let _ = signals.forever().next();
    served.shutdown();
    println!("console stopped");
    Ok(exit::OK)
}

#[cfg(not(feature = "console"))]
pub(crate) fn run(args: &ConsoleArgs) -> Result<u8, CliError> {
    let _ = token(args);
    Err(CliError::Usage(
        "this weir was built without the console (cargo feature `console`)".into(),
    ))
}
