//! The partition grid: one cell per task and partition key, its state
//! judged as `weir status` and `weir explain` judge it. The report and the
//! console draw the same [`Grid`]; beyond [`SUMMARY_ROWS`] partitions both
//! show a summary per task and only the rows with a problem cell.

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

use super::error::ReportError;
use crate::events::{EventRecord, State};
use crate::exec::sensed::Known;
use crate::manifest::Manifest;
use crate::store::marks::{self, Mark};
use crate::store::{CommitRecord, Warehouse};

/// A cell's state, as its CSS class and legend name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CellState {
    /// The latest generation is visible.
    Published,
    /// Published, but built from an upstream generation that has since been
    /// superseded, or by another code_version than the manifest's.
    Stale,
    /// An attempt of the chosen run is running.
    Running,
    /// Held for an operator.
    Held,
    /// Quarantined.
    Quarantined,
    /// Not published by its SLA deadline.
    Late,
    /// Expected, not published, not late, and its external inputs are not
    /// ready (`exec::readiness`, without sensor commands).
    Waiting,
    /// Expected, not published, not late.
    Missing,
}

impl CellState {
    /// Its name (and CSS class).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Published => "published",
            Self::Stale => "stale",
            Self::Running => "running",
            Self::Held => "held",
            Self::Quarantined => "quarantined",
            Self::Late => "late",
            Self::Waiting => "waiting",
            Self::Missing => "missing",
        }
    }
}

/// Partition rows a grid shows in full; a larger one is summarised per task.
pub const SUMMARY_ROWS: usize = 300;

/// Generation histories by (dataset, partition).
pub(crate) type Histories = BTreeMap<(String, String), Vec<CommitRecord>>;

/// One cell: its state and its hover text (generation, digest, why stale).
#[derive(Debug, Clone)]
pub struct Cell {
    /// Its state.
    pub state: CellState,
    /// The evidence, one fact a line.
    pub hover: String,
}

/// Every task's cells, by partition key.
pub struct Grid {
    /// Task names, in the manifest's order (the columns).
    pub tasks: Vec<String>,
    /// Partition keys of every scheme, newest first (the rows).
    pub keys: Vec<String>,
    /// The cells by (task, key); a task without the key has none.
    pub cells: HashMap<(String, String), Cell>,
    /// Generation histories by (dataset, partition).
    pub(crate) histories: Histories,
}

impl CellState {
    /// Every state, in the legend's order.
    pub const ALL: [CellState; 8] = [
        CellState::Published,
        CellState::Stale,
        CellState::Running,
        CellState::Held,
        CellState::Quarantined,
        CellState::Late,
        CellState::Waiting,
        CellState::Missing,
    ];

    /// Whether the cell needs a person (what the first screen lists).
    pub fn is_problem(self) -> bool {
        matches!(
            self,
            CellState::Held | CellState::Quarantined | CellState::Late
        )
    }
}

impl Grid {
    /// The grid of `manifest`'s warehouse; `records` are the run whose
    /// attempts are drawn as running.
    pub fn read(
        manifest: &Manifest,
        warehouse: &Warehouse,
        records: &[EventRecord],
    ) -> Result<Grid, ReportError> {
        let planned_now = crate::clock::now();
        let now = jiff::Timestamp::now().as_second();
        let staleness = crate::plan::stale::Staleness::default();
        let marks: HashMap<(String, String), marks::InstanceMark> = marks::all(warehouse)
            .map_err(ReportError::Warehouse)?
            .into_iter()
            .map(|m| ((m.task.clone(), m.partition.clone()), m))
            .collect();
        let mut judge = Judge {
            manifest,
            warehouse,
            now,
            staleness,
            marks,
            running: running(records),
            stale_why: HashMap::new(),
            answered: HashMap::new(),
        };
        let mut histories = Histories::new();
        // Partition keys of every scheme, newest first, as rows.
        let mut keys: Vec<String> = Vec::new();
        // Membership by hash: a scheme of thousands of keys is not a
        // quadratic scan per task.
        let mut known: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut cells: HashMap<(String, String), Cell> = HashMap::new();
        for task in manifest.tasks.values() {
            let dataset = &task.output.dataset;
            for key in expected_keys(warehouse, task, planned_now)? {
                let store = warehouse.partition(dataset, &key);
                let history = store.history().map_err(ReportError::Warehouse)?;
                let latest = history.last();
                let state = judge.state(task, &key, latest);
                let why = judge
                    .stale_why
                    .get(&(task.name.clone(), key.clone()))
                    .map(|w| format!("\n{w}"))
                    .unwrap_or_default();
                let hover = hover(task, &key, state, latest, &why);
                if known.insert(key.clone()) {
                    keys.push(key.clone());
                }
                cells.insert((task.name.clone(), key.clone()), Cell { state, hover });
                if !history.is_empty() {
                    histories.insert((dataset.clone(), key), history);
                }
            }
        }
        keys.sort_by(|a, b| b.cmp(a));
        Ok(Grid {
            tasks: manifest.tasks.keys().cloned().collect(),
            keys,
            cells,
            histories,
        })
    }

    /// Cells per task and state.
    pub fn counts(&self) -> BTreeMap<&str, BTreeMap<CellState, usize>> {
        let mut out: BTreeMap<&str, BTreeMap<CellState, usize>> = BTreeMap::new();
        for ((task, _), cell) in &self.cells {
            *out.entry(task.as_str())
                .or_default()
                .entry(cell.state)
                .or_default() += 1;
        }
        out
    }

    /// Whether any cell of the row `key` needs a person.
    pub fn row_has_problem(&self, key: &str) -> bool {
        self.tasks.iter().any(|t| {
            self.cells
                .get(&(t.clone(), key.to_owned()))
                .is_some_and(|c| c.state.is_problem())
        })
    }
}

/// A task's partition keys: those its schemes expect now, then those its
/// dataset has outside them.
fn expected_keys(
    warehouse: &Warehouse,
    task: &crate::manifest::Task,
    planned_now: i64,
) -> Result<Vec<String>, ReportError> {
    let mut expected = task.dims.keys(planned_now);
    let scheme: std::collections::HashSet<String> = expected.iter().cloned().collect();
    for key in warehouse
        .partitions(&task.output.dataset)
        .map_err(ReportError::Warehouse)?
    {
        if !scheme.contains(&key) {
            expected.push(key);
        }
    }
    Ok(expected)
}

/// What judges each cell: the marks, the run's open attempts, staleness,
/// and why each stale or waiting cell is so.
struct Judge<'a> {
    manifest: &'a Manifest,
    warehouse: &'a Warehouse,
    now: i64,
    staleness: crate::plan::stale::Staleness,
    marks: HashMap<(String, String), marks::InstanceMark>,
    running: HashMap<(String, String), u32>,
    stale_why: HashMap<(String, String), String>,
    /// Per task, the instances with a recorded sensor answer (one listing).
    answered: HashMap<String, Option<std::collections::HashSet<String>>>,
}

impl Judge<'_> {
    /// A cell's state, judged as `weir status` and `weir explain` judge
    /// it: running, held, released, quarantined, stale, published, late,
    /// waiting, missing, the first that holds.
    fn state(
        &mut self,
        task: &crate::manifest::Task,
        key: &str,
        latest: Option<&CommitRecord>,
    ) -> CellState {
        let (manifest, warehouse, now) = (self.manifest, self.warehouse, self.now);
        let (staleness, stale_why) = (&mut self.staleness, &mut self.stale_why);
        let key = key.to_string();
        let marked = self.marks.get(&(task.name.clone(), key.clone()));
        let mark = marked.map(|m| m.mark);
        // A quarantine that the next run releases (its inputs or code
        // changed since) is judged as status and explain judge it: stale.
        let released = marked
            .map(|m| staleness.quarantine_released(manifest, warehouse, m))
            .filter(|changed| !changed.is_empty());
        let late =
            crate::exec::readiness::sla_deadline(task, &key).is_some_and(|deadline| now > deadline);
        if self.running.contains_key(&(task.name.clone(), key.clone())) {
            CellState::Running
        } else if mark == Some(Mark::Held) {
            CellState::Held
        } else if let Some(changed) = released {
            stale_why.insert(
                (task.name.clone(), key.clone()),
                format!(
                    "was quarantined, but {}: will rerun on the next run",
                    changed.join("; ")
                ),
            );
            CellState::Stale
        } else if mark == Some(Mark::Quarantined) {
            CellState::Quarantined
        } else if let Some(why) = latest.and_then(|r| {
            let changed = staleness.of(manifest, warehouse, task, r);
            (!changed.is_empty()).then(|| format!("stale: {}", changed.join("; ")))
        }) {
            stale_why.insert((task.name.clone(), key.clone()), why);
            CellState::Stale
        } else if latest.is_some() {
            CellState::Published
        } else if late {
            CellState::Late
        } else {
            // Files and watermarks, and a command sensor's recorded
            // answer: a page is no reason to start a sensor command.
            let answered = self.answered.entry(task.name.clone()).or_insert_with(|| {
                crate::exec::sensed::has_command_sensor(manifest, task)
                    .then(|| crate::store::sensed::listed(warehouse, &task.name).ok())
                    .flatten()
            });
            match crate::exec::sensed::known(manifest, warehouse, task, &key, answered.as_ref()) {
                Known::NotYet(n) => {
                    stale_why.insert((task.name.clone(), key.clone()), n.why);
                    CellState::Waiting
                }
                Known::Failed(f) => {
                    stale_why.insert((task.name.clone(), key.clone()), f.why);
                    CellState::Waiting
                }
                // Not asked yet (serve never asks a period it skipped):
                // missing, as status counts it beyond its newest few.
                Known::Ready | Known::Unchecked(_) => CellState::Missing,
            }
        }
    }
}

/// A cell's hover text: its state, its generation when it has one, and
/// `why` (a line break first) it is stale or waiting.
fn hover(
    task: &crate::manifest::Task,
    key: &str,
    state: CellState,
    latest: Option<&CommitRecord>,
    why: &str,
) -> String {
    match latest {
        Some(r) => format!(
            "{} {} · {}\ngeneration {} · {} rows\ncode_version {}\n{}\npublished {} by {} attempt {}{why}",
            task.name,
            key,
            state.as_str(),
            r.generation.get(),
            r.rows,
            r.code_version,
            r.digest,
            r.published_at,
            r.run_id,
            r.attempt
        ),
        None => format!(
            "{} {} · {}\nno generation{why}",
            task.name,
            key,
            state.as_str()
        ),
    }
}

/// The row's anchor: `#p-<key>` (a key is a partition key or a `/`-joined
/// tuple, which an id may hold as it is).
pub(crate) fn row_id(key: &str) -> String {
    format!("p-{key}")
}

/// A state and how many cells (or a task's cells) are in it.
#[derive(Serialize)]
pub(crate) struct Count {
    state: &'static str,
    count: usize,
}

/// A task's cells per state (a row of the summary).
#[derive(Serialize)]
pub(crate) struct SummaryRow {
    task: String,
    counts: Vec<Count>,
}

/// A drawn cell of the grid.
#[derive(Serialize)]
pub(crate) struct CellView<'a> {
    state: &'static str,
    task: &'a str,
    hover: &'a str,
}

/// A drawn row: its anchor, its key, and a cell per task (none where the
/// task has no such key).
#[derive(Serialize)]
pub(crate) struct RowView<'a> {
    id: String,
    key: &'a str,
    cells: Vec<Option<CellView<'a>>>,
}

/// What `report/grid.html` draws: the legend, then every row, or beyond
/// [`SUMMARY_ROWS`] a table of states per task and the rows that need a
/// person.
#[derive(Serialize)]
pub(crate) struct GridView<'a> {
    legend: Vec<Count>,
    summarised: bool,
    /// Empty unless summarised.
    summary: Vec<SummaryRow>,
    partitions: usize,
    tasks: &'a [String],
    rows: Vec<RowView<'a>>,
}

impl Grid {
    /// The grid's page model.
    pub(crate) fn view(&self) -> GridView<'_> {
        let mut counts: BTreeMap<CellState, usize> = BTreeMap::new();
        for cell in self.cells.values() {
            *counts.entry(cell.state).or_default() += 1;
        }
        let count = |counts: Option<&BTreeMap<CellState, usize>>| {
            CellState::ALL
                .iter()
                .map(|&state| Count {
                    state: state.as_str(),
                    count: counts.and_then(|c| c.get(&state)).copied().unwrap_or(0),
                })
                .collect::<Vec<_>>()
        };
        let summarised = self.keys.len() > SUMMARY_ROWS;
        let summary = if summarised {
            let per_task = self.counts();
            self.tasks
                .iter()
                .map(|task| SummaryRow {
                    task: task.clone(),
                    counts: count(per_task.get(task.as_str())),
                })
                .collect()
        } else {
            Vec::new()
        };
        let rows = self
            .keys
            .iter()
            .filter(|k| !summarised || self.row_has_problem(k))
            .map(|key| RowView {
                id: row_id(key),
                key,
                cells: self
                    .tasks
                    .iter()
                    .map(|task| {
                        self.cells
                            .get(&(task.clone(), key.clone()))
                            .map(|cell| CellView {
                                state: cell.state.as_str(),
                                task,
                                hover: &cell.hover,
                            })
                    })
                    .collect(),
            })
            .collect();
        GridView {
            legend: count(Some(&counts)),
            summarised,
            summary,
            partitions: self.keys.len(),
            tasks: &self.tasks,
            rows,
        }
    }
}

/// Instances with an attempt RUNNING and not ended in the run (none once
/// the run finished).
pub(crate) fn running(records: &[EventRecord]) -> HashMap<(String, String), u32> {
    let mut open = HashMap::new();
    for record in records {
        if record.state == State::RunFinished {
            return HashMap::new();
        }
        let (Some(task), Some(partition)) = (&record.task, &record.partition) else {
            continue;
        };
        let key = (task.clone(), partition.clone());
        match record.state {
            State::Running => {
                open.insert(key, record.attempt.unwrap_or(0));
            }
            State::Success | State::Failed | State::Unknown => {
                open.remove(&key);
            }
            _ => {}
        }
    }
    open
}
