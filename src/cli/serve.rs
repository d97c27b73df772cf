//! `weir serve`: loads every manifest (all must be valid), then serves them
//! until SIGTERM or SIGINT. Exit: 0 once stopped cleanly, 143 / 130 when
//! the signal stopped running attempts, 5 when serve could not go on.

use super::args::ServeArgs;
use super::error::CliError;
use super::exit;

pub(crate) fn run(args: &ServeArgs) -> Result<u8, CliError> {
    let mut manifests = Vec::new();
    for path in &args.manifests {
        let manifest = super::load(path)?;
        super::print_warnings(&manifest);
        manifests.push(manifest);
    }
    // The console reads the warehouse as it is now; it serves the
    // manifests as loaded at start (a SIGHUP reload does not move it).
    #[cfg(feature = "console")]
    let _console = match args.http {
        Some(addr) => {
            let token = super::console::token(args.token.as_ref());
            match super::console::start(addr, manifests.clone(), token.as_deref()) {
                Ok(c) => Some(c),
                Err(code) => return Ok(code),
            }
        }
        None => None,
    };
    #[cfg(not(feature = "console"))]
    if args.http.is_some() {
        return Err(CliError::Usage(
            "this weir was built without the console (cargo feature `console`)".into(),
        ));
    }
    // SIGHUP: an invalid edit is reported on stderr as `validate` reports
    // it, and the manifest loaded before keeps running.
    let loader: std::sync::Arc<crate::serve::Loader> =
        std::sync::Arc::new(|path: &std::path::Path| super::load(path).ok());
    let format = match args.log_format.as_str() {
        "json" => crate::serve::LogFormat::Json,
        _ => crate::serve::LogFormat::Text,
    };
    let ends = crate::serve::serve(manifests, &loader, super::settings(), format)
        .map_err(|e| CliError::from(crate::exec::ExecError::Signals(e)))?;
    let mut code = exit::OK;
    for end in &ends {
        if let Some(e) = &end.error {
            eprintln!("error: {e}");
            code = exit::ENGINE;
        }
    }
    if let Some(signal) = ends.iter().filter(|e| e.stopped).find_map(|e| e.signal) {
        return Ok(signal.exit_code());
    }
    Ok(code)
}
