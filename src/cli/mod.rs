//! The command line: a thin layer over the library. Each subcommand parses
//! its arguments, calls the library and maps the outcome to an exit code
//! (`exit.rs`). Errors are miette diagnostics on stderr, never a backtrace.

mod args;
mod events;
pub mod exit;
mod ops;
mod plan;
mod run;
mod status;
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
    // Descendants a task leaves behind are reparented to the engine, which
    // stops and reaps them (exec/tree.rs).
    crate::exec::tree::become_subreaper();
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
    let code = match cli.command {
        Command::Validate(a) => validate::run(&a),
        Command::Plan(a) => plan::run(&a),
        Command::Run(a) => run::run(&a),
        Command::Backfill(a) => run::backfill(&a),
        Command::Events(a) => events::run(&a),
        Command::Status(a) => status::status(&a),
        Command::Show(a) => status::show(&a),
        Command::Retry(a) => ops::retry(&a),
        Command::Abandon(a) => ops::abandon(&a),
        Command::Certify(a) => ops::certify(&a, true),
        Command::Uncertify(a) => ops::certify(&a, false),
        Command::Rollback(a) => ops::rollback(&a),
        Command::Explain(a) => ops::explain(&a),
        Command::Gc(a) => ops::gc(&a),
        Command::Verify(a) => ops::verify(&a),
        Command::Report(a) => write_report(&a),
    };
    ExitCode::from(code)
}

/// Loads a manifest, printing its diagnostics on failure.
pub(crate) fn load(path: &Path) -> Result<Manifest, u8> {
    Manifest::load(path).map_err(|errors| {
        let color = std::io::stderr().is_terminal();
        eprint!("{}", errors.render(color, terminal_width()));
        exit::INVALID
    })
}

/// Prints any diagnostic the way miette renders it, without a backtrace.
pub(crate) fn report(error: &dyn Diagnostic) {
    let theme = if std::io::stderr().is_terminal() {
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
fn write_report(args: &args::ReportArgs) -> u8 {
    let manifest = match load(&args.manifest) {
        Ok(m) => m,
        Err(code) => return code,
    };
    match crate::report::write(&manifest, args.run.as_deref(), &args.out) {
        Ok(()) => {
            println!("wrote {}", args.out.display());
            exit::OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            if e.starts_with("no run") {
                exit::INVALID
            } else {
                exit::ENGINE
            }
        }
    }
}
