//! `weir run`: progress on a terminal (indicatif), plain lines elsewhere,
//! and a closing summary of what did not publish and why.

use std::collections::HashMap;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};

use super::args::{BackfillArgs, RunArgs};
use super::error::CliError;
use super::exit;
use super::plural;
use std::time::Duration;

use crate::events::progress::Tally;
use crate::events::{EventRecord, State};
use crate::exec::{InstanceResult, RunOptions, RunSummary};
use crate::manifest::Manifest;
use crate::plan::Scope;
use crate::store::steering::Steer;

pub(crate) fn run(args: &RunArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
    super::print_warnings(&manifest);
    let signed = match &args.plan {
        Some(path) => Some(super::plan::honour(&manifest, path, None)?),
        None => None,
    };
    if let Some(crate::plan::contract::FileScope::Backfill { name }) =
        signed.as_ref().map(|f| &f.scope)
    {
        super::steer::before_run(&manifest, name)?;
    }
    let scope = match (&args.from, &args.to, &signed) {
        (_, _, Some(file)) => file.scope.scope(),
        (Some(from), Some(to), _) => Scope::Range {
            from: from.clone(),
            to: to.clone(),
        },
        _ if !args.partition.is_empty() => Scope::Partitions(args.partition.clone()),
        _ => Scope::Latest,
    };
    let options = RunOptions {
        scope,
        tasks: signed
            .as_ref()
            .map_or_else(|| args.task.clone(), |f| f.tasks.clone()),
        force: args.force,
        resume_since: None,
        run_id: args.run_id.clone(),
        seed: args.seed,
        allow_uncertified: args.allow_uncertified,
        wait: args.wait,
        settings: super::settings().clone(),
        signed: signed_plan(args.plan.as_deref(), signed.as_ref()),
    };
    execute_signed(&manifest, &options, None, signed.as_ref())
}

/// `weir backfill`: only ever launched explicitly; resumes by skipping what
/// is already published with the same input snapshot and code_version, or
/// (forced, `--resume RUN`) what was published since RUN started.
pub(crate) fn backfill(args: &BackfillArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
    super::print_warnings(&manifest);
    let resume_run = match &args.resume {
        Some(None) if !args.force => return super::steer::steer(&manifest, args, None),
        Some(None) => {
            return Err(CliError::Usage(
                "--force --resume needs the run it resumes: `--resume RUN`".into(),
            ))
        }
        Some(Some(run)) if !args.force => {
            return Err(CliError::Usage(format!(
                "--resume {run} resumes an interrupted forced backfill: add --force\n  help: `--resume` alone lets a paused backfill continue"
            )))
        }
        Some(Some(run)) => Some(run.clone()),
        None => None,
    };
    if args.pause {
        return super::steer::steer(&manifest, args, Some(Steer::Paused));
    }
    if args.cancel {
        return super::steer::steer(&manifest, args, Some(Steer::Cancelled));
    }
    let scope = Scope::Backfill(args.name.clone());
    if args.dry_run {
        return super::plan::print(&manifest, &scope, &args.task, false, None);
    }
    let signed = match &args.plan {
        Some(path) => Some(super::plan::honour(&manifest, path, Some(&args.name))?),
        None => None,
    };
    let resume_since = match &resume_run {
        Some(run) => Some(started(&manifest, &args.name, run)?),
        None => None,
    };
    super::steer::before_run(&manifest, &args.name)?;
    let options = RunOptions {
        scope,
        tasks: args.task.clone(),
        force: args.force,
        resume_since,
        run_id: args.run_id.clone(),
        seed: None,
        allow_uncertified: args.allow_uncertified,
        wait: None,
        settings: super::settings().clone(),
        signed: signed_plan(args.plan.as_deref(), signed.as_ref()),
    };
    // The same command would force every partition again: an interrupted
    // forced backfill names the one that resumes it.
    let resume = args.force.then(|| Resume {
        command: format!(
            "weir backfill {} {} --force",
            crate::partition::shell_word(&args.manifest.display().to_string()),
            crate::partition::shell_word(&args.name)
        ),
        run: resume_run.clone(),
    });
    execute_signed(&manifest, &options, resume.as_ref(), signed.as_ref())
}

/// What the run records of the plan it honours.
fn signed_plan(
    path: Option<&std::path::Path>,
    file: Option<&crate::plan::contract::PlanFile>,
) -> Option<crate::exec::SignedPlan> {
    Some(crate::exec::SignedPlan {
        file: path?.display().to_string(),
        estimated_wall_ms: file?.estimate.estimated_wall_ms,
        estimated_wall_p90_ms: file?.estimate.estimated_wall_p90_ms,
    })
}

/// When run `run`, a run of backfill `name`, started (ms since the epoch):
/// a run id that is no such run is a usage error (exit 2).
pub(crate) fn started(manifest: &Manifest, name: &str, run: &str) -> Result<i64, CliError> {
    crate::events::check_run_id(run).map_err(|e| CliError::Usage(e.to_string()))?;
    let store = super::error::open(manifest)?.events();
    let (records, _) = crate::events::read_run(&store, run)
        .map_err(super::error::doing("cannot read the event log"))?
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--resume: no run `{run}` in {}\n  help: the interrupted backfill printed its run id (`run ID: …`); `weir events` lists every run",
                store.location()
            ))
        })?;
    let start = records.iter().find(|r| r.state == State::RunStarted);
    let of = start
        .and_then(|r| r.data.get("backfill")?.get("name")?.as_str())
        .map(str::to_owned);
    match (start, of) {
        (Some(start), Some(of)) if of == name => start
            .ts
            .parse::<jiff::Timestamp>()
            .map(|t| t.as_millisecond())
            .map_err(|e| {
                CliError::Usage(format!(
                    "--resume: run `{run}` has no readable start time: {e}"
                ))
            }),
        (_, of) => Err(CliError::Usage(format!(
            "--resume: run `{run}` is not a run of backfill `{name}`{}",
            of.map(|o| format!(" (it ran backfill `{o}`)"))
                .unwrap_or_default()
        ))),
    }
}

/// How to resume an interrupted forced backfill (or repair).
pub(crate) struct Resume {
    /// The command, up to its `--resume`.
    pub(crate) command: String,
    /// The run it resumed, if it did: resuming it again covers both.
    pub(crate) run: Option<String>,
}

/// Runs and reports; shared with `weir retry`.
pub(crate) fn execute(manifest: &Manifest, options: &RunOptions) -> Result<u8, CliError> {
    execute_resumable(manifest, options, None)
}

/// Runs (one session, as every front end runs) and reports; `resume` says
/// how a forced backfill resumes.
pub(crate) fn execute_resumable(
    manifest: &Manifest,
    options: &RunOptions,
    resume: Option<&Resume>,
) -> Result<u8, CliError> {
    execute_signed(manifest, options, resume, None)
}

/// [`execute_resumable`] of a signed plan, whose estimate the summary
/// shows beside what the run took.
fn execute_signed(
    manifest: &Manifest,
    options: &RunOptions,
    resume: Option<&Resume>,
    signed: Option<&crate::plan::contract::PlanFile>,
) -> Result<u8, CliError> {
    let display = Display::new();
    let started = std::time::Instant::now();
    let finished = crate::session::run(manifest, options, Some(display.observer()))?;
    display.finish();
    let took = started.elapsed();
    for warning in &finished.warnings {
        eprintln!("warning: {warning}");
    }
    let summary = &finished.summary;
    print_summary(summary, resume);
    if let Some(file) = signed {
        use crate::plan::render::human_duration;
        use std::time::Duration;
        println!(
            "plan: estimated {} (p90 {}), took {}",
            human_duration(Duration::from_millis(file.estimate.estimated_wall_ms)),
            human_duration(Duration::from_millis(file.estimate.estimated_wall_p90_ms)),
            human_duration(took)
        );
    }
    let stale = summary
        .instances
        .iter()
        .any(|(_, _, r)| *r == InstanceResult::RejectedStale);
    // The shell's convention (128 + the signal) wins: whoever pressed
    // Ctrl-C learns that the run did not finish.
    if let Some(sig) = summary.interrupted {
        return Ok(sig.exit_code());
    }
    if summary.engine_failed() {
        return Ok(exit::ENGINE);
    }
    Ok(match (summary.ok(), stale) {
        (false, _) => exit::TASK_FAILED,
        // Readers see a complete generation, but this run's attempt lost to a newer one.
        (true, true) => exit::REFUSED,
        (true, false) => exit::OK,
    })
}

/// Instances left undone by an interrupt that the summary names one by one.
const MAX_UNDONE_LISTED: usize = 20;

fn print_summary(summary: &RunSummary, resume: Option<&Resume>) {
    let parts = outcome_counts(summary);
    println!(
        "run {}: {} task {}: {}; {} {}",
        summary.run_id,
        summary.instances.len(),
        plural(summary.instances.len(), "instance", "instances"),
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        },
        summary.retries,
        plural(summary.retries as usize, "retry", "retries")
    );
    let undone = print_undone(summary);
    if let Some(sig) = summary.interrupted {
        let how = match resume {
            Some(r) => format!(
                "`{} --resume {}` resumes it (the same command would force every partition again)",
                r.command,
                r.run.as_deref().unwrap_or(&summary.run_id)
            ),
            None => "run the same command again to resume".to_owned(),
        };
        eprintln!(
            "weir: interrupted by {}: {undone} task {} left undone; {how}",
            sig.name(),
            if undone == 1 { "instance" } else { "instances" }
        );
    }
    println!("events: {}", summary.events.display());
    match &summary.log_error {
        Some(e) if summary.log_complete => eprintln!(
            "error: the event log could not take a line, so the run stopped admitting instances: {e}\n  the log is complete: every line was stored later"
        ),
        Some(e) => eprintln!("error: the event log is incomplete: {e}"),
        None => {}
    }
}

/// How many instances ended each way, as "N published", in the order a
/// reader wants them.
fn outcome_counts(summary: &RunSummary) -> Vec<String> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for (_, _, r) in &summary.instances {
        let key = match r {
            InstanceResult::Published => "published",
            InstanceResult::AlreadyPublished => "already published",
            InstanceResult::RejectedStale => "refused as stale",
            InstanceResult::Quarantined(_) => "quarantined",
            InstanceResult::Held(_) => "held",
            InstanceResult::Skipped(_) => "skipped",
            InstanceResult::EngineFailed(_) => "engine failures",
            InstanceResult::Interrupted(_) => "interrupted",
            InstanceResult::Waiting {
                late_since: None, ..
            } => "waiting",
            InstanceResult::Waiting { .. } => "late",
            InstanceResult::SensorFailed(_) => "sensor failures",
        };
        *counts.entry(key).or_default() += 1;
    }
    let order = [
        "published",
        "already published",
        "refused as stale",
        "quarantined",
        "held",
        "skipped",
        "sensor failures",
        "waiting",
        "late",
        "engine failures",
        "interrupted",
    ];
    order
        .iter()
        .filter_map(|k| {
            counts.get(k).map(|&n| match *k {
                "engine failures" => format!("{n} {}", plural(n, "engine failure", k)),
                "sensor failures" => format!("{n} {}", plural(n, "sensor failure", k)),
                _ => format!("{n} {k}"),
            })
        })
        .collect()
}

/// The instances that did not publish, each with why (the interrupted
/// ones up to [`MAX_UNDONE_LISTED`]); how many an interrupt left undone.
fn print_undone(summary: &RunSummary) -> usize {
    let mut undone = 0;
    for (task, partition, result) in &summary.instances {
        let (what, why) = match result {
            InstanceResult::Interrupted(w) => {
                undone += 1;
                if undone > MAX_UNDONE_LISTED {
                    continue;
                }
                // The state says it already: "INTERRUPTED slow k1: weir received SIGINT".
                ("INTERRUPTED", w.strip_prefix("interrupted: ").unwrap_or(w))
            }
            InstanceResult::Quarantined(w) => ("QUARANTINED", w.as_str()),
            InstanceResult::Held(w) => ("HELD", w.as_str()),
            InstanceResult::Skipped(w) => ("SKIPPED", w.as_str()),
            InstanceResult::EngineFailed(w) => ("ENGINE", w.as_str()),
            InstanceResult::SensorFailed(w) => ("SENSOR", w.as_str()),
            InstanceResult::Waiting {
                reason,
                late_since: None,
            } => ("WAITING", reason.as_str()),
            InstanceResult::Waiting {
                reason,
                late_since: Some(deadline),
            } => {
                println!("  {:<11} {task} {partition}: past its SLA deadline {deadline}, waiting: {reason}", "LATE");
                continue;
            }
            _ => continue,
        };
        println!("  {what:<11} {task} {partition}: {why}");
    }
    if undone > MAX_UNDONE_LISTED {
        println!("  … and {} more left undone", undone - MAX_UNDONE_LISTED);
    }
    undone
}

/// Progress: a bar on a terminal, one line per notable event elsewhere.
/// How often a run without a terminal prints its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(60);

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

struct Display {
    bar: Option<ProgressBar>,
}

impl Display {
    fn new() -> Display {
        // NO_COLOR: plain lines, no escape codes at all.
        let bar = super::color().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .expect("a valid template"),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            bar
        });
        Display { bar }
    }

    fn observer(&self) -> Box<dyn Fn(&EventRecord) + Send + Sync> {
        let tally = Mutex::new(Tally::default());
        let human = |ms: u64| crate::plan::render::human_duration(Duration::from_millis(ms));
        match self.bar.clone() {
            Some(bar) => Box::new(move |e: &EventRecord| {
                let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
                t.add(e);
                bar.set_message(t.progress(now_ms()).line(human));
                if let Some(line) = notable(e) {
                    bar.println(line);
                }
            }),
            // No terminal: a progress line a minute, beside the notable ones.
            None => {
                let last = Mutex::new(std::time::Instant::now());
                Box::new(move |e: &EventRecord| {
                    let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
                    t.add(e);
                    if let Some(line) = notable(e) {
                        eprintln!("{line}");
                    }
                    let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
                    if last.elapsed() >= PROGRESS_EVERY {
                        *last = std::time::Instant::now();
                        eprintln!("progress: {}", t.progress(now_ms()).line(human));
                    }
                })
            }
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn notable(e: &EventRecord) -> Option<String> {
    let interesting = matches!(
        e.state,
        State::Published
            | State::AlreadyPublished
            | State::Failed
            | State::Retrying
            | State::GateFailed
            | State::RejectedStale
            | State::Quarantined
            | State::Held
            | State::Skipped
            | State::EngineFailed
            | State::Interrupted
    );
    if !interesting {
        return None;
    }
    let attempt = e
        .attempt
        .map(|a| format!(" attempt {a}"))
        .unwrap_or_default();
    let token = e.token.map(|t| format!(" token {t}")).unwrap_or_default();
    Some(format!(
        "{} {}{}{}: {} {}",
        e.task.as_deref().unwrap_or("-"),
        e.partition.as_deref().unwrap_or("-"),
        attempt,
        token,
        e.state.as_str(),
        e.detail
    ))
}
