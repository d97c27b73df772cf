//! Arguments of every subcommand (clap derive): the one place that says
//! what weir accepts.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// weir: a declarative data-pipeline engine with fenced write-audit-publish.
#[derive(Debug, Parser)]
#[command(name = "weir", version, about, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Use this warehouse instead of the manifest's `pipeline.warehouse`: a
    /// directory (relative to the current one) or `s3://bucket/prefix`.
    #[arg(long, global = true, value_name = "DIR|URL")]
    pub(crate) warehouse: Option<String>,
    /// Say why weir does what it does on stderr: `-v` for its decisions
    /// (skipped, retried, fenced, waiting), `-vv` for every step. `WEIR_LOG`
    /// filters by module, e.g. `WEIR_LOG=weir::store=debug`.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Check manifests and report every problem with its location.
    Validate(ValidateArgs),
    /// Show what would run, where, in what order and how long (a dry run).
    Plan(PlanArgs),
    /// Run task instances: write, audit, publish (default: the latest partition).
    Run(RunArgs),
    /// Run each task's partitions as they become due, until SIGTERM (SIGHUP reloads).
    Serve(ServeArgs),
    /// Run a declared backfill in its own pool (`--dry-run`: its plan and cost).
    Backfill(BackfillArgs),
    /// Print the event log.
    Events(EventsArgs),
    /// What is published: generation, token, rows, digest, code_version per partition.
    Status(StatusArgs),
    /// SLO measurements per task and pool: share within `sla`, latency, attempt and queue percentiles, retries, error budget.
    Slo(SloArgs),
    /// Print a partition's visible rows as CSV.
    Show(ShowArgs),
    /// Release a HELD or QUARANTINED instance and run its partition again.
    Retry(DecisionArgs),
    /// Give up a HELD instance: it is not run again until `weir retry`.
    Abandon(DecisionArgs),
    /// Vouch for a generation again after `uncertify`.
    Certify(CertifyArgs),
    /// Mark a generation as suspect: downstream tasks refuse it without --allow-uncertified.
    Uncertify(CertifyArgs),
    /// Republish an earlier generation as a new, fenced generation.
    Rollback(RollbackArgs),
    /// Every publication built from a generation, as read, and what would read it next.
    Impact(ImpactArgs),
    /// Rebuild a generation's impact in dependency order, in a backfill pool (`--dry-run`: the plan and cost).
    Repair(RepairArgs),
    /// Decide that a partition will not be built: downstream fan-in, window and rollup instances run without it.
    Accept(AcceptArgs),
    /// The evidence about one task instance, and what to do about it.
    Explain(ExplainArgs),
    /// List (and with --apply delete) candidate directories nothing can need.
    Gc(GcArgs),
    /// Rerun a published instance from its pinned inputs into scratch and compare digests.
    Verify(VerifyArgs),
    /// Write one self-contained HTML page: partitions by state, a run's Gantt chart, generation history.
    Report(ReportArgs),
    /// Serve the live, read-only console: what needs a person, partitions, runs, instances, /api/.
    Console(ConsoleArgs),
    /// Every generation of a dataset's partition: what `rollback --to` can choose from.
    History(HistoryArgs),
    /// The visible files of a dataset's partitions (path or URL, size, SHA-256): what to read outside weir.
    Files(FilesArgs),
    /// Tables readers query (`table = "delta"` outputs): `sync` brings them up to weir's records.
    Tables(TablesArgs),
    /// Print a shell completion script (`weir completions bash > /etc/bash_completion.d/weir`).
    Completions(CompletionsArgs),
    /// What this host gives weir: process containment, tzdb version, the manifest's store.
    Doctor(DoctorArgs),
    /// Notifications not yet delivered per target; `--flush` delivers them now.
    Notify(NotifyArgs),
    /// Simulate serve over a span of time in seconds: published, missed, late, pool waits, invariants.
    Simulate(SimulateArgs),
}

#[derive(Debug, Args)]
pub(crate) struct SimulateArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Start of the simulated span (RFC 3339, or a date: its midnight UTC).
    #[arg(long)]
    pub(crate) from: String,
    /// End of the simulated span.
    #[arg(long)]
    pub(crate) to: String,
    /// Everything random is drawn from it: the same seed, the same report.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Engines sharing the warehouse.
    #[arg(long, default_value_t = 1)]
    pub(crate) engines: usize,
    /// A window when every engine is down (FROM..TO); repeatable.
    #[arg(long, value_name = "FROM..TO")]
    pub(crate) down: Vec<String>,
    /// `none`, `default`, or kind=rate,... (lost, unavailable, latency, short_list, kill, late, fail, hang).
    #[arg(long, default_value = "none")]
    pub(crate) faults: String,
    /// Print one JSON document.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Manifest file, whose store is named (optional).
    pub(crate) manifest: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Where to write the page.
    #[arg(long, default_value = "report.html")]
    pub(crate) out: PathBuf,
    /// The run drawn as a Gantt chart (default: the latest).
    #[arg(long)]
    pub(crate) run: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ConsoleArgs {
    /// Manifest files, one pipeline each.
    #[arg(required = true)]
    pub(crate) manifests: Vec<PathBuf>,
    /// Address to listen on; one that is not loopback needs a token.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub(crate) http: std::net::SocketAddr,
    /// The token every request must present (default: $WEIR_CONSOLE_TOKEN).
    #[arg(long)]
    pub(crate) token: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Dataset.
    pub(crate) dataset: String,
    /// Partition.
    #[arg(long)]
    pub(crate) partition: String,
    /// Print one JSON document.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct FilesArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Dataset.
    pub(crate) dataset: String,
    /// Only these partitions (repeatable); default: every published one.
    #[arg(long)]
    pub(crate) partition: Vec<String>,
    /// Print one JSON document.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct TablesArgs {
    #[command(subcommand)]
    pub(crate) action: TablesAction,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TablesAction {
    /// Commit to each Delta table whatever visible generation its log does not show yet.
    Sync {
        /// Manifest file.
        manifest: PathBuf,
    },
}

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub(crate) struct GcArgs {
    /// Manifest file (default: `weir.toml` in the current directory).
    #[arg(default_value = "weir.toml")]
    pub(crate) manifest: PathBuf,
    /// Only candidates older than this (default: twice the longest task timeout, at least 24h).
    #[arg(long)]
    pub(crate) older_than: Option<String>,
    /// Generations before the current one kept for rollback.
    #[arg(long, default_value_t = 5)]
    pub(crate) keep_generations: usize,
    /// Delete; without it gc only lists what it would delete and why.
    #[arg(long)]
    pub(crate) apply: bool,
}

#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Task.
    pub(crate) task: String,
    /// Partition.
    #[arg(long)]
    pub(crate) partition: String,
}

#[derive(Debug, Args)]
pub(crate) struct ExplainArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Task.
    pub(crate) task: String,
    /// Partition.
    #[arg(long)]
    pub(crate) partition: String,
    /// Print one JSON document.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct DecisionArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Task.
    pub(crate) task: String,
    /// Partition.
    #[arg(long)]
    pub(crate) partition: String,
    /// Why: recorded in the event log.
    #[arg(long, required = true)]
    pub(crate) note: String,
}

#[derive(Debug, Args)]
pub(crate) struct CertifyArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Dataset.
    pub(crate) dataset: String,
    /// Partition.
    #[arg(long)]
    pub(crate) partition: String,
    /// Generation (default: the current one).
    #[arg(long)]
    pub(crate) generation: Option<u64>,
    /// Why: recorded in the event log.
    #[arg(long, required = true)]
    pub(crate) reason: String,
    /// `uncertify` only: every publication built from the generation too
    /// (its impact), with one operator event listing them.
    #[arg(long)]
    pub(crate) cascade: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ImpactArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Dataset.
    pub(crate) dataset: String,
    /// Partition.
    #[arg(long)]
    pub(crate) partition: String,
    /// Generation (default: the current one).
    #[arg(long)]
    pub(crate) generation: Option<u64>,
    /// Print one JSON document.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RepairArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Dataset whose partition was wrong.
    pub(crate) dataset: String,
    /// Partition.
    #[arg(long)]
    pub(crate) partition: String,
    /// The generation whose impact is rebuilt (default: the current one).
    #[arg(long)]
    pub(crate) generation: Option<u64>,
    /// Why: recorded with the run.
    #[arg(long, required = true)]
    pub(crate) reason: String,
    /// Pool the rebuilds run in (default: the pool of the manifest's first backfill, else `default`).
    #[arg(long)]
    pub(crate) pool: Option<String>,
    /// Print the plan and its cost; write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Resume the interrupted repair RUN (its run id): what was rebuilt since it started is not rebuilt again.
    #[arg(long, value_name = "RUN")]
    pub(crate) resume: Option<String>,
    /// Run id (default: generated from the start time).
    #[arg(long)]
    pub(crate) run_id: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct AcceptArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Task whose partition will not be built.
    pub(crate) task: String,
    /// Partition.
    #[arg(long)]
    pub(crate) partition: String,
    /// Why (recorded in the event log and in the commit records of what runs without it).
    #[arg(long, required = true)]
    pub(crate) note: String,
}

#[derive(Debug, Args)]
pub(crate) struct RollbackArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Dataset.
    pub(crate) dataset: String,
    /// Partition.
    #[arg(long)]
    pub(crate) partition: String,
    /// The generation to make visible again (default: the one before the current).
    #[arg(long)]
    pub(crate) to: Option<u64>,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Manifest file (default: `weir.toml` in the current directory).
    #[arg(default_value = "weir.toml")]
    pub(crate) manifest: PathBuf,
    /// Partitions to run (repeatable); default: the latest complete one.
    #[arg(long)]
    pub(crate) partition: Vec<String>,
    /// First partition of an ad-hoc range (a day, or a static key): the
    /// partitions a backfill over --from..=--to would cover, in the tasks' own pools.
    #[arg(long, requires = "to", conflicts_with = "partition")]
    pub(crate) from: Option<String>,
    /// Last partition of the ad-hoc range (inclusive).
    #[arg(long, requires = "from")]
    pub(crate) to: Option<String>,
    /// Only these tasks (`NAME`; `NAME+` with everything downstream; `+NAME`
    /// with everything upstream), plus upstream instances not yet published (repeatable).
    #[arg(long)]
    pub(crate) task: Vec<String>,
    /// Rerun even when published with the same input snapshot and code_version.
    #[arg(long)]
    pub(crate) force: bool,
    /// Run id (default: generated from the start time).
    #[arg(long)]
    pub(crate) run_id: Option<String>,
    /// Seed for retry jitter (reproducible runs).
    #[arg(long, hide = true)]
    pub(crate) seed: Option<u64>,
    /// Read upstream generations even if an operator uncertified them.
    #[arg(long)]
    pub(crate) allow_uncertified: bool,
    /// Wait up to DURATION (`90s`, `10m`) for external inputs that are not
    /// ready, rechecking with backoff; default: report them WAITING at once.
    #[arg(long, value_name = "DURATION", value_parser = crate::manifest::duration::parse)]
    pub(crate) wait: Option<std::time::Duration>,
    /// Run exactly the plan file `weir plan --out` wrote, or refuse (exit
    /// 3) naming every difference from the world it assumed.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["partition", "from", "task"])]
    pub(crate) plan: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Manifest files: each is served on its own (they share nothing but the process).
    #[arg(required = true)]
    pub(crate) manifests: Vec<PathBuf>,
    /// Also serve the live console (`weir console`) on this address.
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<std::net::SocketAddr>,
    /// With `--http`: the token every request must present (default:
    /// $WEIR_CONSOLE_TOKEN); needed for an address that is not loopback.
    #[arg(long, requires = "http")]
    pub(crate) token: Option<String>,
    /// How the decision log on stdout is written: `text` (a line a
    /// decision) or `json` (one object a line, for a log shipper).
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub(crate) log_format: String,
}

#[derive(Debug, Args)]
pub(crate) struct BackfillArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// The backfill's name, as declared under `[backfills]`.
    pub(crate) name: String,
    /// Print the plan (instances, pool, slots, estimated wall time); write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Only these of its tasks (`NAME`, `NAME+`: with the downstream
    /// partitions that read theirs, through the mappings) (repeatable).
    #[arg(long)]
    pub(crate) task: Vec<String>,
    /// Rerun even partitions published with the same input snapshot and code_version.
    #[arg(long)]
    pub(crate) force: bool,
    /// Alone: let a paused backfill admit work again, wherever it runs.
    /// With --force and RUN: resume the interrupted forced backfill RUN
    /// (its run id); partitions published since RUN started are not forced again.
    #[arg(long, value_name = "RUN", num_args = 0..=1)]
    pub(crate) resume: Option<Option<String>>,
    /// Pause the running backfill, wherever it runs (a record in the
    /// warehouse): it admits nothing new, lets running attempts finish and waits.
    #[arg(long, conflicts_with_all = ["resume", "cancel", "dry_run", "force", "task", "plan"])]
    pub(crate) pause: bool,
    /// Stop the running backfill, wherever it runs, as an interrupt would
    /// (it exits 143; running it again resumes it).
    #[arg(long, conflicts_with_all = ["resume", "dry_run", "force", "task", "plan"])]
    pub(crate) cancel: bool,
    /// Run id (default: generated from the start time).
    #[arg(long)]
    pub(crate) run_id: Option<String>,
    /// Read upstream generations even if an operator uncertified them.
    #[arg(long)]
    pub(crate) allow_uncertified: bool,
    /// Run exactly the plan file `weir plan --backfill NAME --out` wrote,
    /// or refuse (exit 3) naming every difference from the world it assumed.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["task", "dry_run"])]
    pub(crate) plan: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct EventsArgs {
    /// Manifest file (default: `weir.toml` in the current directory).
    #[arg(default_value = "weir.toml")]
    pub(crate) manifest: PathBuf,
    /// Only this run.
    #[arg(long = "run")]
    pub(crate) run_id: Option<String>,
    /// Only this task.
    #[arg(long)]
    pub(crate) task: Option<String>,
    /// Only this partition.
    #[arg(long)]
    pub(crate) partition: Option<String>,
    /// Print JSON Lines as stored.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Manifest file (default: `weir.toml` in the current directory).
    #[arg(default_value = "weir.toml")]
    pub(crate) manifest: PathBuf,
    /// Exit 4 when anything is LATE, HELD or QUARANTINED (for cron and alerting).
    #[arg(long)]
    pub(crate) check: bool,
    /// Print one JSON document.
    #[arg(long)]
    pub(crate) json: bool,
    /// List every partition even when that takes more than a screen (default: a summary per task then).
    #[arg(long)]
    pub(crate) all: bool,
    /// Only these tasks (repeatable).
    #[arg(long, value_name = "NAME")]
    pub(crate) task: Vec<String>,
    /// Only instances in these states (repeatable).
    #[arg(long, value_enum)]
    pub(crate) state: Vec<crate::ops::status::summary::InstanceState>,
    /// First partition of a range (a day, or a static key), as `weir run --from` takes it.
    #[arg(long, requires = "to")]
    pub(crate) from: Option<String>,
    /// Last partition of the range (inclusive).
    #[arg(long, requires = "from")]
    pub(crate) to: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct SloArgs {
    /// Manifest file (default: `weir.toml` in the current directory).
    #[arg(default_value = "weir.toml")]
    pub(crate) manifest: PathBuf,
    /// The window: partitions whose period ended, and attempts made, this long before now (default 7d).
    #[arg(long, value_name = "DURATION")]
    pub(crate) since: Option<String>,
    /// Print one JSON document.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// Manifest file.
    pub(crate) manifest: PathBuf,
    /// Dataset.
    pub(crate) dataset: String,
    /// Partition.
    #[arg(long)]
    pub(crate) partition: String,
    /// An earlier generation (see `weir history`); default: the visible one.
    #[arg(long)]
    pub(crate) generation: Option<u64>,
    /// At most this many rows (the header is always printed).
    #[arg(long)]
    pub(crate) limit: Option<usize>,
    /// One JSON document: columns in the file's order, rows as strings or null.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// Manifest files (default: `weir.toml` in the current directory).
    #[arg(default_value = "weir.toml")]
    pub(crate) manifests: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    /// Manifest file (default: `weir.toml` in the current directory).
    #[arg(default_value = "weir.toml")]
    pub(crate) manifest: PathBuf,
    /// Plan a declared backfill instead of the latest partition.
    #[arg(long, conflicts_with = "partition")]
    pub(crate) backfill: Option<String>,
    /// Plan these partitions (repeatable).
    #[arg(long)]
    pub(crate) partition: Vec<String>,
    /// First partition of an ad-hoc range (a day, or a static key): the
    /// partitions a backfill over --from..=--to would cover, in the tasks' own pools.
    #[arg(long, requires = "to", conflicts_with_all = ["partition", "backfill"])]
    pub(crate) from: Option<String>,
    /// Last partition of the ad-hoc range (inclusive).
    #[arg(long, requires = "from")]
    pub(crate) to: Option<String>,
    /// Only these tasks (`NAME`, `NAME+`, `+NAME`; repeatable).
    #[arg(long)]
    pub(crate) task: Vec<String>,
    /// Print one JSON document.
    #[arg(long, conflicts_with = "graph")]
    pub(crate) json: bool,
    /// Print the task graph instead.
    #[arg(long, value_enum)]
    pub(crate) graph: Option<GraphFormat>,
    /// Write the simulated schedule as one self-contained HTML page to this file.
    #[arg(long, conflicts_with_all = ["graph", "json"])]
    pub(crate) html: Option<std::path::PathBuf>,
    /// Also write the plan as a contract to FILE: its instances and the
    /// world each assumed; `weir run --plan FILE` or `weir backfill …
    /// --plan FILE` runs exactly that or refuses.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["graph", "html"])]
    pub(crate) out: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum GraphFormat {
    /// Graphviz DOT.
    Dot,
    /// Mermaid flowchart.
    Mermaid,
}

#[derive(Debug, Args)]
pub(crate) struct NotifyArgs {
    /// Manifest file (default: `weir.toml` in the current directory).
    #[arg(default_value = "weir.toml")]
    pub(crate) manifest: PathBuf,
    /// Deliver every pending notification now (each with its original
    /// idempotency key); exit 4 if any stays undelivered.
    #[arg(long)]
    pub(crate) flush: bool,
}
