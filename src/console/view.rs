//! What each page shows, read from the warehouse as it is now. The same
//! values are the pages' template context and the `/api/` documents.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::events::{self, EventRecord, State};
use crate::manifest::Manifest;
use crate::ops::problems::{self, More, Problem};
use crate::ops::status::Status;
use crate::partition::shell_word;
use crate::report::grid::{Grid, SUMMARY_ROWS};
use crate::report::CellState;
use crate::store::Warehouse;

/// Events of one run listed on its page (the newest).
const MAX_RUN_EVENTS: usize = 500;

/// Runs whose logs the runs page reads to count outcomes.
const MAX_RUNS_COUNTED: usize = 30;

/// A page that could not be read: its status and why.
pub(super) struct ViewError {
    pub(super) status: u16,
    pub(super) message: String,
}

impl ViewError {
    fn engine(e: impl std::fmt::Display) -> ViewError {
        ViewError {
            status: 500,
            message: e.to_string(),
        }
    }

    pub(super) fn not_found(message: String) -> ViewError {
        ViewError {
            status: 404,
            message,
        }
    }
}

/// The pipeline's warehouse, opened once per process and shared by every
/// request: an object store's client (and its runtime and connections)
/// is built once, not for each page. A failed open is not kept.
fn open(manifest: &Manifest) -> Result<Warehouse, ViewError> {
    type Opened = std::sync::Mutex<std::collections::HashMap<String, Warehouse>>;
    static OPENED: std::sync::OnceLock<Opened> = std::sync::OnceLock::new();
    let location = crate::store::Location::from(&manifest.pipeline);
    let key = format!("{location:?}");
    let opened = OPENED.get_or_init(Opened::default);
    let known = opened
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&key)
        .cloned();
    if let Some(warehouse) = known {
        return Ok(warehouse);
    }
    let warehouse =
        Warehouse::open_to_read(location).map_err(|e| ViewError::engine(crate::exec::chain(&e)))?;
    Ok(opened
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(key)
        .or_insert(warehouse)
        .clone())
}

fn all_events(warehouse: &Warehouse) -> Result<Vec<EventRecord>, ViewError> {
    events::read_all_in(&warehouse.events())
        .map(|(records, _bad)| records)
        .map_err(|e| ViewError::engine(crate::exec::chain(&e)))
}

fn gather_status(manifest: &Manifest, warehouse: &Warehouse) -> Result<Status, ViewError> {
    Status::gather(manifest, warehouse, false).map_err(ViewError::engine)
}

/// `/api/status`: the document `weir status --json` prints.
pub(super) fn status(manifest: &Manifest) -> Result<Value, ViewError> {
    let warehouse = open(manifest)?;
    let status = gather_status(manifest, &warehouse)?;
    // `weir status --json`'s own document, so the two cannot differ.
    Ok(crate::ops::status::document(manifest, &warehouse, &status))
}

/// The first screen of one pipeline.
#[derive(Serialize)]
pub(super) struct Problems {
    pipeline: String,
    manifest: String,
    code_version: String,
    warehouse: String,
    published: usize,
    missing: usize,
    stale: usize,
    waiting: usize,
    /// Every problem's total, before `more` took the long tails.
    total: usize,
    problems: Vec<Problem>,
    /// Problems past the first few of their kind and task, counted.
    more: Vec<More>,
    /// Backfills in flight, as `weir status` tells them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    backfills: Vec<BackfillLine>,
}

/// A backfill in flight on the first screen: its run's progress and ETA,
/// and a pause or cancellation with since when and by whom.
#[derive(Serialize)]
struct BackfillLine {
    name: String,
    run_id: Option<String>,
    /// "3/8 done, 2 running, ETA 4s".
    progress: Option<String>,
    /// "paused" or "cancelled".
    steered: Option<&'static str>,
    since: Option<String>,
    by: Option<String>,
}

fn backfill_lines(backfills: &[crate::ops::backfills::BackfillState]) -> Vec<BackfillLine> {
    use crate::store::steering::Steer;
    let human = |ms: u64| crate::manifest::duration::human(std::time::Duration::from_millis(ms));
    backfills
        .iter()
        .map(|b| BackfillLine {
            name: b.name.clone(),
            run_id: b.run.as_ref().map(|r| r.run_id.clone()),
            progress: b.run.as_ref().map(|r| r.line(human)),
            steered: b.steering.as_ref().map(|s| match s.state {
                Steer::Paused => "paused",
                Steer::Cancelled => "cancelled",
            }),
            since: b.steering.as_ref().map(|s| s.since.clone()),
            by: b.steering.as_ref().map(|s| s.by.clone()),
        })
        .collect()
}

pub(super) fn problems(manifest: &Manifest) -> Result<Problems, ViewError> {
    let warehouse = open(manifest)?;
    let status = gather_status(manifest, &warehouse)?;
    let events = all_events(&warehouse)?;
    let (problems, more) = problems::gather(manifest, &warehouse, &status, &events);
    let total = problems::total(&problems, &more);
    Ok(Problems {
        pipeline: manifest.pipeline.name.clone(),
        manifest: manifest.path.display().to_string(),
        code_version: manifest.pipeline.code_version.clone(),
        warehouse: warehouse.location(),
        published: status.overview.published.len(),
        missing: status.overview.missing.len(),
        stale: status.overview.stale.len(),
        waiting: status.overview.waiting.len(),
        total,
        problems,
        more,
        backfills: backfill_lines(&status.backfills),
    })
}

/// The grid's filter, from the query string.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(super) struct GridFilter {
    /// One task's column only.
    #[serde(default)]
    pub(super) task: String,
    /// Only cells in this state.
    #[serde(default)]
    pub(super) state: String,
    /// Partition keys from this one (inclusive).
    #[serde(default)]
    pub(super) from: String,
    /// Partition keys up to this one, or starting with it.
    #[serde(default)]
    pub(super) to: String,
}

#[derive(Serialize)]
struct CellView {
    task: String,
    state: &'static str,
    hover: String,
}

#[derive(Serialize)]
struct Row {
    key: String,
    cells: Vec<Option<CellView>>,
}

#[derive(Serialize)]
struct TaskCounts {
    task: String,
    counts: Vec<(&'static str, usize)>,
}

/// The grid page.
#[derive(Serialize)]
pub(super) struct GridView {
    pipeline: String,
    tasks: Vec<String>,
    states: Vec<&'static str>,
    filter: GridFilter,
    columns: Vec<String>,
    rows: Vec<Row>,
    /// Partitions the filter matched.
    matched: usize,
    /// Beyond SUMMARY_ROWS matched partitions: counts per task, and only
    /// the rows with a problem cell (or the filter's state) are drawn.
    summarised: bool,
    summary: Vec<TaskCounts>,
    legend: Vec<(&'static str, usize)>,
}

/// A filter naming a task the pipeline does not have (404) or no state
/// (400) is refused, saying which.
fn check_filter(manifest: &Manifest, filter: &GridFilter) -> Result<(), ViewError> {
    if !filter.task.is_empty() && !manifest.tasks.contains_key(&filter.task) {
        return Err(ViewError::not_found(format!(
            "no task `{}` in `{}`",
            filter.task, manifest.pipeline.name
        )));
    }
    if !filter.state.is_empty() && !CellState::ALL.iter().any(|s| s.as_str() == filter.state) {
        return Err(ViewError {
            status: 400,
            message: format!(
                "no state `{}`: the grid's states are {}",
                filter.state,
                CellState::ALL
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    Ok(())
}

pub(super) fn grid(manifest: &Manifest, filter: GridFilter) -> Result<GridView, ViewError> {
    check_filter(manifest, &filter)?;
    let warehouse = open(manifest)?;
    let records = latest_run_records(&warehouse)?;
    let grid = Grid::read(manifest, &warehouse, &records).map_err(ViewError::engine)?;
    let columns: Vec<String> = grid
        .tasks
        .iter()
        .filter(|t| filter.task.is_empty() || **t == filter.task)
        .cloned()
        .collect();
    let state_ok = |s: CellState| filter.state.is_empty() || s.as_str() == filter.state;
    let in_range = |k: &str| {
        (filter.from.is_empty() || k >= filter.from.as_str())
            && (filter.to.is_empty() || k <= filter.to.as_str() || k.starts_with(&filter.to))
    };
    let cell = |task: &String, key: &String| grid.cells.get(&(task.clone(), key.clone()));
    let matched: Vec<&String> = grid
        .keys
        .iter()
        .filter(|k| in_range(k))
        .filter(|k| {
            columns
                .iter()
                .any(|t| cell(t, k).is_some_and(|c| state_ok(c.state)))
        })
        .collect();
    let summarised = matched.len() > SUMMARY_ROWS;
    let mut summary = Vec::new();
    let mut legend = std::collections::BTreeMap::new();
    for t in &columns {
        let mut counts = std::collections::BTreeMap::new();
        for k in &matched {
            if let Some(c) = cell(t, k).filter(|c| state_ok(c.state)) {
                *counts.entry(c.state).or_insert(0) += 1;
                *legend.entry(c.state).or_insert(0) += 1;
            }
        }
        summary.push(TaskCounts {
            task: t.clone(),
            counts: CellState::ALL
                .iter()
                .map(|s| (s.as_str(), counts.get(s).copied().unwrap_or(0)))
                .collect(),
        });
    }
    let drawn: Vec<&String> = if summarised {
        matched
            .iter()
            .copied()
            .filter(|k| {
                columns.iter().any(|t| {
                    cell(t, k).is_some_and(|c| {
                        state_ok(c.state) && (!filter.state.is_empty() || c.state.is_problem())
                    })
                })
            })
            .take(SUMMARY_ROWS)
            .collect()
    } else {
        matched.clone()
    };
    let rows = drawn
        .into_iter()
        .map(|k| Row {
            key: k.clone(),
            cells: columns
                .iter()
                .map(|t| {
                    cell(t, k).filter(|c| state_ok(c.state)).map(|c| CellView {
                        task: t.clone(),
                        state: c.state.as_str(),
                        hover: c.hover.clone(),
                    })
                })
                .collect(),
        })
        .collect();
    Ok(GridView {
        pipeline: manifest.pipeline.name.clone(),
        tasks: grid.tasks.clone(),
        states: CellState::ALL.iter().map(|s| s.as_str()).collect(),
        filter,
        columns,
        rows,
        matched: matched.len(),
        summarised,
        summary: if summarised { summary } else { Vec::new() },
        legend: CellState::ALL
            .iter()
            .map(|s| (s.as_str(), legend.get(s).copied().unwrap_or(0)))
            .collect(),
    })
}

/// The latest run's records, whose attempts the grid draws as running.
fn latest_run_records(warehouse: &Warehouse) -> Result<Vec<EventRecord>, ViewError> {
    let store = warehouse.events();
    let run = crate::report::latest_run(&store).map_err(ViewError::engine)?;
    Ok(match run {
        Some(id) => events::read_run(&store, &id)
            .map_err(|e| ViewError::engine(crate::exec::chain(&e)))?
            .map(|(r, _)| r)
            .unwrap_or_default(),
        None => Vec::new(),
    })
}

#[derive(Serialize)]
struct RunSummary {
    id: String,
    last_written: Option<String>,
    finished: Option<bool>,
    attempts: Option<usize>,
    published: Option<usize>,
    failed: Option<usize>,
}

/// The runs page.
#[derive(Serialize)]
pub(super) struct Runs {
    pipeline: String,
    runs: Vec<RunSummary>,
}

pub(super) fn runs(manifest: &Manifest) -> Result<Runs, ViewError> {
    let warehouse = open(manifest)?;
    let store = warehouse.events();
    let mut entries = store
        .runs()
        .map_err(|e| ViewError::engine(crate::exec::chain(&e)))?;
    // Newest first: run ids start with their start time.
    entries.reverse();
    let runs = entries
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let records = (i < MAX_RUNS_COUNTED)
                .then(|| events::read_run(&store, &r.id).ok().flatten())
                .flatten()
                .map(|(records, _)| records);
            let count = |states: &[State]| {
                records
                    .as_ref()
                    .map(|rs| rs.iter().filter(|e| states.contains(&e.state)).count())
            };
            RunSummary {
                last_written: r.last_written.map(|t| t.to_string()),
                finished: records
                    .as_ref()
                    .map(|rs| rs.iter().any(|e| e.state == State::RunFinished)),
                attempts: count(&[State::Running]),
                published: count(&[State::Published]),
                failed: count(&[State::Failed, State::GateFailed]),
                id: r.id,
            }
        })
        .collect();
    Ok(Runs {
        pipeline: manifest.pipeline.name.clone(),
        runs,
    })
}

/// One run's page: its Gantt chart and its events.
#[derive(Serialize)]
pub(super) struct RunView {
    pipeline: String,
    run_id: String,
    events: Vec<EventRecord>,
    /// Events before the ones listed.
    earlier: usize,
    /// The report's chart model, laid out by its `report/gantt.html`
    /// (not in the `/api/` document, which lists the events themselves).
    #[serde(skip)]
    pub(super) gantt: crate::report::GanttView,
}

pub(super) fn run(manifest: &Manifest, run_id: &str) -> Result<RunView, ViewError> {
    events::check_run_id(run_id).map_err(|e| ViewError::not_found(e.to_string()))?;
    let warehouse = open(manifest)?;
    let store = warehouse.events();
    let Some((records, _)) =
        events::read_run(&store, run_id).map_err(|e| ViewError::engine(crate::exec::chain(&e)))?
    else {
        return Err(ViewError::not_found(format!(
            "no run `{run_id}` in the warehouse"
        )));
    };
    let gantt = crate::report::gantt(manifest, Some(run_id), &records);
    let earlier = records.len().saturating_sub(MAX_RUN_EVENTS);
    Ok(RunView {
        pipeline: manifest.pipeline.name.clone(),
        run_id: run_id.to_owned(),
        events: records[earlier..].to_vec(),
        earlier,
        gantt,
    })
}

/// One instance's page: `weir explain`'s evidence and the partition's
/// generations.
#[derive(Serialize)]
pub(super) struct InstanceView {
    pipeline: String,
    explain_command: String,
    explanation: crate::ops::explain::Explanation,
    input_snapshot: Option<String>,
    generations: Vec<Value>,
}

pub(super) fn instance(
    manifest: &Manifest,
    task: &str,
    partition: &str,
) -> Result<InstanceView, ViewError> {
    let Some(spec) = manifest.tasks.get(task) else {
        return Err(ViewError::not_found(format!(
            "no task `{task}` in `{}`",
            manifest.pipeline.name
        )));
    };
    let now = crate::clock::now();
    if !spec.dims.contains(partition, now) {
        return Err(ViewError::not_found(format!(
            "partition `{partition}` is not in the partition scheme of task `{task}`: {}",
            crate::plan::partition_help(manifest, &[task], now)
        )));
    }
    let warehouse = open(manifest)?;
    let events = all_events(&warehouse)?;
    let explanation = crate::ops::explain::explain(manifest, &warehouse, &events, task, partition)
        .map_err(|e| ViewError::engine(crate::exec::chain(&e)))?;
    let history = warehouse
        .partition(&spec.output.dataset, partition)
        .history()
        .map_err(|e| ViewError::engine(crate::exec::chain(&e)))?;
    let generations = history
        .iter()
        .rev()
        .map(|r| {
            serde_json::json!({
                "generation": r.generation.get(),
                "token": r.token.get(),
                "kind": format!("{:?}", r.kind).to_lowercase(),
                "run_id": r.run_id,
                "attempt": r.attempt,
                "rows": r.rows,
                "digest": r.digest,
                "code_version": r.code_version,
                "published_at": r.published_at,
            })
        })
        .collect();
    Ok(InstanceView {
        pipeline: manifest.pipeline.name.clone(),
        explain_command: format!(
            "weir explain {} {} --partition {}",
            shell_word(&manifest.path.display().to_string()),
            shell_word(task),
            shell_word(partition)
        ),
        input_snapshot: explanation
            .input_snapshot
            .as_ref()
            .and_then(|v| serde_json::to_string_pretty(v).ok()),
        explanation,
        generations,
    })
}
