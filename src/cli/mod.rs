//! The command line: a thin layer over the library. Each subcommand parses
//! its arguments, calls the library and maps the outcome to an exit code
//! (`exit.rs`). Errors are miette diagnostics on stderr, never a backtrace.

mod accept;
mod args;
mod checks;
mod console;
mod diag;
mod error;
mod events;
pub mod exit;
mod files;
mod history;
mod impact;
mod notify;
mod ops;
mod plan;
pub mod reference;
mod repair;
mod run;
mod serve;
mod simulate;
mod slo;
pub(crate) mod status;
mod steer;
mod validate;

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme};

use crate::manifest::Manifest;
use args::{Cli, Command};

/// Entry point of the `weir` binary.
pub fn main() -> ExitCode {
    quiet_broken_pipe();
    // Descendants a task leaves behind are reparented to the engine, which
    // stops and reaps them (process/tree.rs).
    crate::process::tree::become_subreaper();
    // A task runs as this user: it must not read weir's environment (the
    // store's credentials) through /proc (process/mod.rs).
    crate::process::protect_engine();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::INVALID
            } else {
                exit::OK
            });
        }
    };
    // Diagnostics first: reading the settings may already warn.
    let log = std::env::var(diag::ENV).ok();
    match diag::filter(cli.verbose, log.as_deref()) {
        Ok(filter) => diag::install(filter, log_format(&cli.command)),
        Err(refused) => {
            return ExitCode::from(error::finish(Err(error::CliError::Usage(
                refused.to_string(),
            ))));
        }
    }
    if let Some(location) = cli.warehouse {
        let _ = WAREHOUSE.set(location);
    }
    // The one read of weir's settings from the environment; a bad value
    // refuses every command before it does anything.
    match crate::exec::Settings::read(|name| std::env::var_os(name)) {
        Ok(settings) => {
            crate::process::tree::use_setting(settings.cgroups);
            let _ = SETTINGS.set(settings);
        }
        Err(refused) => {
            return ExitCode::from(error::finish(Err(error::CliError::Usage(
                refused.to_string(),
            ))));
        }
    }
    let outcome = match cli.command {
        Command::Validate(a) => validate::run(&a),
        Command::Plan(a) => plan::run(&a),
        Command::Run(a) => run::run(&a),
        Command::Backfill(a) => run::backfill(&a),
        Command::Serve(a) => serve::run(&a),
        Command::Events(a) => events::run(&a),
        Command::Status(a) => status::status(&a),
        Command::Slo(a) => slo::run(&a),
        Command::Show(a) => status::show(&a),
        Command::Retry(a) => ops::retry(&a),
        Command::Abandon(a) => ops::abandon(&a),
        Command::Certify(a) => ops::certify(&a, true),
        Command::Uncertify(a) => ops::certify(&a, false),
        Command::Rollback(a) => ops::rollback(&a),
        Command::Impact(a) => impact::run(&a),
        Command::Repair(a) => repair::run(&a),
        Command::Accept(a) => accept::run(&a),
        Command::Explain(a) => ops::explain(&a),
        Command::Gc(a) => ops::gc(&a),
        Command::Verify(a) => ops::verify(&a),
        Command::Report(a) => write_report(&a),
        Command::Console(a) => console::run(&a),
        Command::History(a) => history::run(&a),
        Command::Files(a) => files::run(&a),
        Command::Tables(a) => files::tables(&a),
        Command::Completions(a) => completions(&a),
        Command::Doctor(a) => doctor(&a),
        Command::Notify(a) => notify::run(&a),
        Command::Simulate(a) => simulate::run(&a),
    };
    // The one place where an error becomes an exit code.
    ExitCode::from(error::finish(outcome))
}

/// How diagnostics are written: as JSON where serve was asked for its
/// decision log in JSON, so one shipper reads both streams.
fn log_format(command: &Command) -> diag::Format {
    match command {
        Command::Serve(a) if a.log_format == "json" => diag::Format::Json,
        _ => diag::Format::Text,
    }
}

/// `weir completions SHELL`.
fn completions(args: &args::CompletionsArgs) -> Result<u8, error::CliError> {
    let mut command = <Cli as clap::CommandFactory>::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "weir", &mut script);
    match std::io::Write::write_all(&mut std::io::stdout(), &script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(error::doing("cannot write the completions")(e))
        }
        _ => Ok(exit::OK),
    }
}

/// `weir doctor`: what the engine detects about this host at startup.
fn doctor(args: &args::DoctorArgs) -> Result<u8, error::CliError> {
    let mut text = format!(
        "containment: {}\ntzdb: {}\n",
        crate::process::tree::Containment::host().describe(),
        crate::partition::time::tzdb_version()
    );
    if let Some(path) = &args.manifest {
        let pipeline = load(path)?.pipeline;
        let local = std::path::absolute(&pipeline.warehouse).unwrap_or(pipeline.warehouse);
        text += &match &pipeline.remote {
            Some(url) => format!(
                "store: object storage {url} (staging {})\n",
                local.display()
            ),
            None => format!("store: directory {}\n", local.display()),
        };
    }
    match std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(error::doing("cannot write to stdout")(e))
        }
        _ => Ok(exit::OK),
    }
}

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
static WAREHOUSE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// What the environment said, read once by [`main`].
static SETTINGS: std::sync::OnceLock<crate::exec::Settings> = std::sync::OnceLock::new();

/// The settings [`main`] read (an unset environment's before it did).
pub(crate) fn settings() -> &'static crate::exec::Settings {
    SETTINGS.get_or_init(Default::default)
}

/// Prints any diagnostic the way miette renders it, without a backtrace.
pub(crate) fn report(error: &dyn Diagnostic) {
    let theme = if color() {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let mut out = String::new();
    let handler = GraphicalReportHandler::new_themed(theme).with_width(terminal_width());
    if handler.render_report(&mut out, error).is_err() {
        out = format!("error: {error}\n");
    }
    eprint!("{out}");
}

fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100)
}

/// `weir report`.
fn write_report(args: &args::ReportArgs) -> Result<u8, error::CliError> {
    let manifest = error::load(&args.manifest)?;
    // `_runs/<id>`: a path outside the warehouse is never read.
    if let Some(id) = &args.run {
        crate::events::check_run_id(id).map_err(|e| error::CliError::Usage(e.to_string()))?;
    }
    crate::report::write(&manifest, args.run.as_deref(), &args.out)?;
    println!("wrote {}", args.out.display());
    Ok(exit::OK)
}

/// Whether stderr gets colors and other escape codes: only on a terminal,
/// and never when `NO_COLOR` is set to anything non-empty (no-color.org).
pub(crate) fn color() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A reader that went away (`weir status | head -1`) ends weir quietly with
/// exit 0, as for every Unix filter, instead of a panic message: `print!`
/// panics on EPIPE (Rust ignores SIGPIPE), and this hook turns exactly that
/// panic into an exit.
fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout")
            && message.contains(&std::io::Error::from_raw_os_error(libc::EPIPE).to_string())
        {
            std::process::exit(exit::OK.into());
        }
        default(info);
    }));
}

pub(crate) use crate::audit::words::plural;

/// A table as every command prints one: a lowercase header, each column as
/// wide as its widest cell, the `numeric` columns right-aligned and the
/// others left-aligned, two spaces between columns, no trailing spaces.
pub(crate) fn aligned(header: &[&str], rows: &[Vec<String>], numeric: &[usize]) -> Vec<String> {
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .chain([header[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (c, (cell, w)) in cells.zip(&widths).enumerate() {
            if numeric.contains(&c) {
                out.push_str(&format!("{cell:>w$}  "));
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.trim_end().to_string()
    };
    std::iter::once(line(&mut header.iter().copied()))
        .chain(rows.iter().map(|r| line(&mut r.iter().map(String::as_str))))
        .collect()
}

/// A digest as tables show it: `sha256:` and 12 hex digits, then `…`.
pub(crate) fn short_digest(digest: &str) -> String {
    if digest.len() <= 7 + 12 {
        return digest.to_string();
    }
    digest.chars().take(7 + 12).collect::<String>() + "…"
}

/// A timestamp at one width: UTC to the millisecond
/// (`2026-11-30T22:56:12.120Z`), whatever precision it was written with.
pub(crate) fn fixed_ts(ts: &str) -> String {
    ts.parse::<jiff::Timestamp>().map_or_else(
        |_| ts.to_string(),
        |t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
    )
}

/// A size as people read it: `512 B`, `1.2 KiB`, `3.4 MiB`, `1.0 GiB`.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    // Sizes are printed for people (1.2 MiB), not as byte counts.
    #[test]
    fn sizes_are_printed_in_binary_units_with_one_decimal() {
        assert_eq!(super::human_bytes(0), "0 B");
        assert_eq!(super::human_bytes(1023), "1023 B");
        assert_eq!(super::human_bytes(1024), "1.0 KiB");
        assert_eq!(super::human_bytes(1_258_291), "1.2 MiB");
        assert_eq!(super::human_bytes(5 * 1024 * 1024 * 1024), "5.0 GiB");
    }

    // Durations are printed for people, keeping tenths of a second.
    #[test]
    fn durations_are_printed_for_people_keeping_tenths() {
        use crate::manifest::duration::human;
        use std::time::Duration;
        assert_eq!(human(Duration::from_millis(850)), "850ms");
        assert_eq!(human(Duration::from_millis(1234)), "1.2s");
        assert_eq!(human(Duration::from_millis(3_723_000)), "1h 2m 3s");
    }
}
