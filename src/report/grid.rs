//! The partition grid: one cell per task and partition key, its state
//! judged as `weir status` and `weir explain` judge it. The report and the
//! console draw the same [`Grid`]; beyond [`SUMMARY_ROWS`] partitions both
//! show a summary per task and only the rows with a problem cell.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use super::{esc, CellState, ReportError};
use crate::events::{EventRecord, State};
use crate::exec::sensed::Known;
use crate::manifest::Manifest;
use crate::store::marks::{self, Mark};
use crate::store::{CommitRecord, Warehouse};

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

/// Writes the grid's HTML: the legend, then every row, or beyond
/// [`SUMMARY_ROWS`] a table of states per task and the rows that need a person.
pub(crate) fn write_html(html: &mut String, grid: &Grid) {
    let mut counts: BTreeMap<CellState, usize> = BTreeMap::new();
    for cell in grid.cells.values() {
        *counts.entry(cell.state).or_default() += 1;
    }
    html.push_str("<h2 id=\"partitions\">Partitions</h2>\n<p class=\"legend\">");
    for state in CellState::ALL {
        let _ = write!(
            html,
            "<span class=\"cell {0}\"></span> {0} {1} ",
            state.as_str(),
            counts.get(&state).copied().unwrap_or(0)
        );
    }
    html.push_str("</p>\n");
    let summarised = grid.keys.len() > SUMMARY_ROWS;
    if summarised {
        write_summary(html, grid);
    }
    let rows: Vec<&String> = if summarised {
        grid.keys
            .iter()
            .filter(|k| grid.row_has_problem(k))
            .collect()
    } else {
        grid.keys.iter().collect()
    };
    if summarised {
        let _ = writeln!(
            html,
            "<p class=\"meta\">{} partitions: the {} with a held, quarantined or late cell are drawn below; the others are counted above.</p>",
            grid.keys.len(),
            rows.len()
        );
    }
    html.push_str("<div class=\"scroll grid\"><table id=\"grid\"><thead><tr><th>partition</th>");
    for task in &grid.tasks {
        let _ = write!(html, "<th>{}</th>", esc(task));
    }
    html.push_str("</tr></thead><tbody>\n");
    for key in rows {
        let _ = write!(
            html,
            "<tr id=\"{}\"><th>{}</th>",
            esc(&row_id(key)),
            esc(key)
        );
        for task in &grid.tasks {
            match grid.cells.get(&(task.clone(), key.clone())) {
                Some(cell) => {
                    let _ = write!(
                        html,
                        "<td class=\"cell {0}\" data-task=\"{1}\" data-partition=\"{2}\" data-state=\"{0}\" title=\"{3}\"></td>",
                        cell.state.as_str(),
                        esc(task),
                        esc(key),
                        esc(&cell.hover)
                    );
                }
                None => html.push_str("<td class=\"none\"></td>"),
            }
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody></table></div>\n");
}

/// States per task, one row each.
fn write_summary(html: &mut String, grid: &Grid) {
    let counts = grid.counts();
    html.push_str("<div class=\"scroll\"><table id=\"summary\"><thead><tr><th>task</th>");
    for state in CellState::ALL {
        let _ = write!(html, "<th>{}</th>", state.as_str());
    }
    html.push_str("</tr></thead><tbody>\n");
    for task in &grid.tasks {
        let _ = write!(html, "<tr data-task=\"{0}\"><th>{0}</th>", esc(task));
        for state in CellState::ALL {
            let n = counts
                .get(task.as_str())
                .and_then(|c| c.get(&state))
                .copied()
                .unwrap_or(0);
            let _ = write!(
                html,
                "<td class=\"count\" data-state=\"{}\">{n}</td>",
                state.as_str()
            );
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody></table></div>\n");
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
