//! `weir backfill MANIFEST NAME --pause | --resume | --cancel`: steering a
//! running backfill from any terminal, through its record in the warehouse
//! ([`crate::store::steering`]).

use super::args::BackfillArgs;
use super::error::{doing, CliError};
use super::exit;
use serde_json::json;

use crate::events::{Event, State};
use crate::manifest::Manifest;
use crate::partition::shell_word;
use crate::store::steering::{self, Steer, Steering};

/// Writes (`Some`) or lifts (`None`, `--resume`) the steering of the
/// backfill `args` names.
pub(crate) fn steer(
    manifest: &Manifest,
    args: &BackfillArgs,
    state: Option<Steer>,
) -> Result<u8, CliError> {
    let name = &args.name;
    if !manifest.backfills.contains_key(name) {
        let known: Vec<String> = manifest
            .backfills
            .keys()
            .map(|b| format!("`{b}`"))
            .collect();
        return Err(CliError::Usage(format!(
            "no backfill `{name}` in {}\n  help: declared: {}",
            args.manifest.display(),
            if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            }
        )));
    }
    let warehouse = crate::store::Warehouse::open_for(&manifest.pipeline)
        .map_err(doing("cannot open the warehouse"))?;
    let command = format!(
        "weir backfill {} {}",
        shell_word(&args.manifest.display().to_string()),
        shell_word(name)
    );
    let (pid, host) = (std::process::id(), crate::store::holder::host_name());
    let Some(state) = state else {
        let was = steering::read(&warehouse, name)
            .map_err(doing("cannot read the backfill's steering record"))?;
        match was {
            None => println!("backfill `{name}` is not paused: nothing to resume"),
            Some(was) => {
                if was.state == Steer::Paused {
                    log(
                        &warehouse,
                        State::BackfillResumed,
                        format!(
                            "backfill `{name}` resumed by pid {pid} on {host} (paused since {}, {})",
                            was.since, was.by
                        ),
                        json!({ "backfill": name, "paused_since": was.since, "paused_by": was.by,
                                "by": format!("pid {pid} on {host}"), "host": host, "pid": pid }),
                    )?;
                }
                steering::clear(&warehouse, name)
                    .map_err(doing("cannot remove the backfill's steering record"))?;
                println!(
                    "backfill `{name}` resumed ({} since {}): it admits work again",
                    describe(was.state),
                    was.since
                );
            }
        }
        return Ok(exit::OK);
    };
    let record = Steering {
        backfill: name.clone(),
        state,
        since: jiff::Timestamp::now().to_string(),
        by: format!("pid {pid} on {host}"),
    };
    if state == Steer::Paused {
        log(
            &warehouse,
            State::BackfillPaused,
            format!("backfill `{name}` paused by {}", record.by),
            json!({ "backfill": name, "by": record.by, "host": host, "pid": pid }),
        )?;
    }
    steering::write(&warehouse, &record)
        .map_err(doing("cannot write the backfill's steering record"))?;
    match state {
        Steer::Paused => println!(
            "backfill `{name}` paused: wherever it runs, it admits nothing new and waits; running attempts finish\n  `{command} --resume` continues it"
        ),
        Steer::Cancelled => println!(
            "backfill `{name}` cancelled: wherever it runs, it stops as an interrupt would (exit 143)\n  `{command}` resumes it later"
        ),
    }
    Ok(exit::OK)
}

/// The operator's event, durable before the record it announces changes:
/// `weir events` shows who paused or resumed the backfill, and when.
fn log(
    warehouse: &crate::store::Warehouse,
    state: State,
    detail: String,
    data: serde_json::Value,
) -> Result<(), CliError> {
    let log =
        crate::ops::operator_log(warehouse).map_err(doing("cannot open an operator event log"))?;
    log.emit_durable(state, Event::default().detail(detail).data(data))
        .map_err(doing("cannot log the steering"))?;
    Ok(())
}

fn describe(state: Steer) -> &'static str {
    match state {
        Steer::Paused => "paused",
        Steer::Cancelled => "cancelled",
    }
}

/// Before a backfill runs: a cancellation is over (this run resumes it);
/// a pause still holds, and the run is told so.
pub(crate) fn before_run(manifest: &Manifest, name: &str) -> Result<(), CliError> {
    if !manifest.backfills.contains_key(name) {
        // The plan names the unknown backfill, as before.
        return Ok(());
    }
    // A warehouse that cannot be opened is the run's to report, as always.
    let Ok(warehouse) = crate::store::Warehouse::open_for(&manifest.pipeline) else {
        return Ok(());
    };
    match steering::read(&warehouse, name)
        .map_err(doing("cannot read the backfill's steering record"))?
    {
        Some(s) if s.state == Steer::Cancelled => steering::clear(&warehouse, name)
            .map_err(doing("cannot remove the backfill's steering record"))?,
        Some(s) => eprintln!(
            "warning: backfill `{name}` is paused (since {}, {}): it admits nothing until `--resume`",
            s.since, s.by
        ),
        None => {}
    }
    Ok(())
}
