//! `weir simulate`: a month of serve in seconds, from the manifest, on a
//! simulated clock and world ([`crate::sim`]).

use super::args::SimulateArgs;
use super::error::CliError;
use super::exit;
use crate::sim::world::Faults;
use crate::sim::{self, model::Model, Config};

/// An instant as `--from`, `--to` and `--down` take it: RFC 3339, or a
/// date (its midnight UTC).
fn instant(flag: &str, text: &str) -> Result<i64, CliError> {
    let text = text.trim();
    if let Ok(t) = text.parse::<jiff::Timestamp>() {
        return Ok(t.as_second());
    }
    if let Ok(t) = format!("{text}T00:00:00Z").parse::<jiff::Timestamp>() {
        return Ok(t.as_second());
    }
    Err(CliError::Usage(format!(
        "{flag} `{text}` is not an instant\n  help: RFC 3339 (`2026-09-14T00:00:00Z`) or a date (`2026-09-14`, midnight UTC)"
    )))
}

fn config(args: &SimulateArgs) -> Result<Config, CliError> {
    let from = instant("--from", &args.from)?;
    let to = instant("--to", &args.to)?;
    if to <= from {
        return Err(CliError::Usage(format!(
            "--to `{}` is not after --from `{}`",
            args.to, args.from
        )));
    }
    if args.engines == 0 || args.engines > 64 {
        return Err(CliError::Usage(format!(
            "--engines {}: between 1 and 64 engines",
            args.engines
        )));
    }
    let mut c = Config::new(args.seed, args.engines, from, to);
    for window in &args.down {
        let Some((a, b)) = window.split_once("..") else {
            return Err(CliError::Usage(format!(
                "--down `{window}` is not FROM..TO\n  help: `--down 2026-09-16T10:00:00Z..2026-09-16T16:00:00Z`"
            )));
        };
        let (a, b) = (instant("--down", a)?, instant("--down", b)?);
        if b <= a {
            return Err(CliError::Usage(format!(
                "--down `{window}`: its end is not after its start"
            )));
        }
        c.down.push((a, b));
    }
    c.faults = Faults::parse(&args.faults)
        .map_err(|why| CliError::Usage(format!("--faults `{}`: {why}", args.faults)))?;
    Ok(c)
}

pub(crate) fn run(args: &SimulateArgs) -> Result<u8, CliError> {
    let config = config(args)?;
    let manifest = super::load(&args.manifest)?;
    let mut model = Model::of(&manifest);
    // Recorded attempts, where the warehouse has them; a warehouse not made
    // yet (a plan for a new pipeline) has none.
    if let Ok(warehouse) = crate::store::Warehouse::open_to_read(&manifest.pipeline) {
        if let Ok((records, _)) = crate::events::read_all_in(&warehouse.events()) {
            model.with_history(&records);
        }
    }
    let report = sim::run(&model, &config);
    let replay = replay(args);
    if args.json {
        let mut doc = serde_json::to_value(&report).expect("reports are plain data");
        if let Some(violations) = doc
            .get_mut("violations")
            .and_then(serde_json::Value::as_array_mut)
        {
            for v in violations {
                v["replay"] = serde_json::Value::String(replay.clone());
            }
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("json values serialize")
        );
    } else {
        for line in report.render() {
            println!("{line}");
        }
        if !report.violations.is_empty() {
            println!("replay: {replay}");
        }
    }
    Ok(if report.violations.is_empty() {
        exit::OK
    } else {
        exit::ATTENTION
    })
}

/// The command that replays this simulation.
fn replay(args: &SimulateArgs) -> String {
    let mut words = vec![
        "weir simulate".to_owned(),
        args.manifest.display().to_string(),
        format!("--from {}", args.from),
        format!("--to {}", args.to),
        format!("--seed {}", args.seed),
        format!("--engines {}", args.engines),
    ];
    words.extend(args.down.iter().map(|d| format!("--down {d}")));
    words.push(format!("--faults {}", args.faults));
    words.join(" ")
}
