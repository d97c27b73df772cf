//! `weir console`: the live console of one or more pipelines, until
//! SIGINT or SIGTERM.

use super::args::ConsoleArgs;
use super::error::CliError;
#[cfg(feature = "console")]
use super::exit;

/// Where a token may come from instead of `--token`.
const TOKEN_ENV: &str = "WEIR_CONSOLE_TOKEN";

/// The token: `--token`, else `WEIR_CONSOLE_TOKEN` (which `ps` does not show).
pub(super) fn token(given: Option<&String>) -> Option<String> {
    if given.is_some() {
        // Said at every start, since the flag works and people copy it.
        eprintln!(
            "warning: `--token` is readable by every user of this host (ps, /proc/<pid>/cmdline); set {TOKEN_ENV} instead"
        );
    }
    given
        .cloned()
        .or_else(|| std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()))
}

/// Starts the console of `manifests` on `addr` (for `weir console` and
/// `weir serve --http`), saying where; the exit code when it cannot.
#[cfg(feature = "console")]
pub(super) fn start(
    addr: std::net::SocketAddr,
    manifests: Vec<crate::manifest::Manifest>,
    token: Option<&str>,
) -> Result<crate::console::Console, u8> {
    use std::io::Write as _;

    use crate::console::{self, ConsoleError};
    let names: Vec<String> = manifests
        .iter()
        .map(|m| format!("`{}`", m.pipeline.name))
        .collect();
    match console::serve(addr, manifests, token) {
        Ok(served) => {
            println!(
                "console of {} on http://{}/{}",
                names.join(", "),
                served.local_addr(),
                if token.is_some() {
                    " (token required)"
                } else {
                    ""
                }
            );
            let _ = std::io::stdout().flush();
            Ok(served)
        }
        Err(e @ ConsoleError::Bind { .. }) => {
            super::report(&e);
            Err(exit::ENGINE)
        }
        Err(e) => {
            super::report(&e);
            Err(exit::INVALID)
        }
    }
}

#[cfg(feature = "console")]
pub(crate) fn run(args: &ConsoleArgs) -> Result<u8, CliError> {
    let manifests = args
        .manifests
        .iter()
        .map(|m| super::load(m))
        .collect::<Result<Vec<_>, _>>()?;
    let token = token(args.token.as_ref());
    // Signals are caught before the port opens: a SIGTERM right after the
    // "listening" line stops the console cleanly.
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .map_err(super::error::doing("cannot catch SIGINT and SIGTERM"))?;
    let served = match start(args.http, manifests, token.as_deref()) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let _ = signals.forever().next();
    served.shutdown();
    println!("console stopped");
    Ok(exit::OK)
}

#[cfg(not(feature = "console"))]
pub(crate) fn run(args: &ConsoleArgs) -> Result<u8, CliError> {
    let _ = token(args.token.as_ref());
    Err(CliError::Usage(
        "this weir was built without the console (cargo feature `console`)".into(),
    ))
}
