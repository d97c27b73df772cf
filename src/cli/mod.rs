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
mod settings;
mod simulate;
mod slo;
pub(crate) mod status;
mod steer;
mod terminal;
mod text;
mod validate;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

pub(crate) use settings::{load, print_warnings, settings};
pub(crate) use terminal::{color, report};
pub(crate) use text::{aligned, fixed_ts, human_bytes, plural, short_digest};

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
        let _ = settings::WAREHOUSE.set(location);
    }
    // The one read of weir's settings from the environment; a bad value
    // refuses every command before it does anything.
    match crate::exec::Settings::read(|name| std::env::var_os(name)) {
        Ok(settings) => {
            crate::process::tree::use_setting(settings.cgroups);
            let _ = settings::SETTINGS.set(settings);
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

/// `weir report`.
fn write_report(args: &args::ReportArgs) -> Result<u8, error::CliError> {
    let manifest = load(&args.manifest)?;
    // `_runs/<id>`: a path outside the warehouse is never read.
    if let Some(id) = &args.run {
        crate::events::check_run_id(id).map_err(|e| error::CliError::Usage(e.to_string()))?;
    }
    crate::report::write(&manifest, args.run.as_deref(), &args.out)?;
    println!("wrote {}", args.out.display());
    Ok(exit::OK)
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
