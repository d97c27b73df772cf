//! `weir report`: one self-contained HTML file (no script, no network, no
//! external font) showing a pipeline's state from the same typed records
//! `weir status` and `weir explain` read: commit records, instance marks and
//! event logs.
//!
//! Four parts, in the order an operator needs them: what needs a person
//! (`ops::problems`, each with its evidence, the command `weir explain`
//! recommends and a link to its cell); a grid of partitions × tasks coloured
//! by state (summarised per task beyond a few hundred partitions), the hover
//! text of a cell giving its generation, code_version and digest; a Gantt
//! chart of one run's attempts (RUNNING to SUCCESS or FAILED) in one lane
//! per pool slot; and each partition's generation history. The page is
//! plain HTML and CSS so that 730 partitions × 10 tasks (7,300 cells) is a
//! table the browser lays out once, with nothing to run.

pub mod grid;
pub mod plan;
mod slo;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;

use crate::events::{self, EventRecord, State};
use crate::manifest::Manifest;
use crate::store::events::EventStore;
use crate::store::Warehouse;

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

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The warehouse could not be read.
    #[error("cannot read the warehouse")]
    Warehouse(#[source] crate::store::StoreError),
    /// The report file could not be written.
    #[error("cannot write `{}`", path.display())]
    Write {
        /// The report's path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `--run` names no run.
    #[error("no run `{0}` in the warehouse")]
    NoRun(String),
    /// The status (commit logs, marks) could not be gathered.
    #[error("cannot read the warehouse's status: {0}")]
    Status(String),
}

/// One attempt in the Gantt chart.
struct Bar {
    task: String,
    partition: String,
    attempt: u32,
    pool: String,
    start: i64,
    end: i64,
    outcome: &'static str,
}

/// Renders the report of `manifest`'s warehouse; `run` picks the Gantt
/// chart's run (default: the latest).
pub fn render(manifest: &Manifest, run: Option<&str>) -> Result<String, ReportError> {
    let warehouse = Warehouse::open_to_read(&manifest.pipeline).map_err(ReportError::Warehouse)?;
    let store = warehouse.events();
    let run_id = match run {
        Some(id) => Some(id.to_owned()),
        None => latest_run(&store)?,
    };
    // A run's log that cannot be read fails the report, naming it: an
    // empty Gantt chart would claim the run did nothing.
    let records: Vec<EventRecord> = match &run_id {
        Some(id) => match events::read_run(&store, id) {
            Ok(Some((records, _))) => records,
            Ok(None) if run.is_some() => return Err(ReportError::NoRun(id.to_owned())),
            Ok(None) => Vec::new(),
            Err(e) => return Err(ReportError::Warehouse(e)),
        },
        None => Vec::new(),
    };

    let mut html = String::new();
    let title = format!("weir report: {}", manifest.pipeline.name);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n\
         <p class=\"meta\">code_version {} · warehouse {} · generated {}</p>\n",
        esc(&title),
        esc(&title),
        esc(&manifest.pipeline.code_version),
        esc(&warehouse.location()),
        esc(&jiff::Timestamp::now().to_string()),
    );
    let grid = grid::Grid::read(manifest, &warehouse, &records)?;
    // What needs a person first, each linked to its row of the grid: a
    // problem cell among thousands is otherwise a needle to find.
    let status = crate::ops::status::Status::gather(manifest, &warehouse, false)
        .map_err(|e| ReportError::Status(e.to_string()))?;
    let (all, _bad) = events::read_all_in(&store).map_err(ReportError::Warehouse)?;
    let (problems, more) = crate::ops::problems::gather(manifest, &warehouse, &status, &all);
    let total = crate::ops::problems::total(&problems, &more);
    write_problems(&mut html, total, &problems, &more, &grid);
    grid::write_html(&mut html, &grid);
    gantt(&mut html, manifest, run_id.as_deref(), &records);
    history(&mut html, &grid.histories);
    let known = run_id.as_deref().map(|id| (id, records.as_slice()));
    slo::section(&mut html, manifest, &warehouse, &grid.histories, known)?;
    html.push_str("</body></html>\n");
    Ok(html)
}

/// The run whose log was written last (none in a warehouse without runs).
pub(crate) fn latest_run(store: &EventStore) -> Result<Option<String>, ReportError> {
    let runs = store.runs().map_err(ReportError::Warehouse)?;
    Ok(runs
        .into_iter()
        .filter_map(|r| Some((r.last_written?, r.id)))
        .max()
        .map(|(_, id)| id))
}

fn seconds(ts: &str) -> Option<i64> {
    ts.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

pub(crate) fn gantt(
    html: &mut String,
    manifest: &Manifest,
    run_id: Option<&str>,
    records: &[EventRecord],
) {
    let Some(run_id) = run_id else {
        html.push_str("<h2>Run</h2>\n<p>No run yet.</p>\n");
        return;
    };
    let (mut bars, first, last) = attempt_bars(manifest, records);
    bars.sort_by_key(|b| (b.pool.clone(), b.start, b.end));
    let span = (last - first).max(1) as f64;
    let _ = write!(
        html,
        "<h2>Run {}</h2>\n<p class=\"meta\">{} attempts over {:.1} s; one lane per pool slot</p>\n<div class=\"scroll\"><div id=\"gantt\">",
        esc(run_id),
        bars.len(),
        span / 1000.0
    );
    let pools = lanes(&bars);
    write_lanes(html, &pools, first, span);
    html.push_str("</div></div>\n");
}

/// One bar per attempt of the run, in the pool whose slot it held, and
/// the first and last time the run's records name (an attempt still
/// running ends at the last).
fn attempt_bars(manifest: &Manifest, records: &[EventRecord]) -> (Vec<Bar>, i64, i64) {
    // A backfill runs every instance in its own pool, as the plan does: the
    // lanes are that pool's slots, not the tasks' usual pools.
    let backfill_pool = records
        .iter()
        .find(|r| r.state == State::RunStarted)
        .and_then(|r| r.data.get("backfill")?.get("name")?.as_str())
        .and_then(|name| manifest.backfills.get(name))
        .map(|b| b.pool.clone());
    let pool_of = |task: &str| match &backfill_pool {
        Some(pool) => pool.clone(),
        None => manifest
            .tasks
            .get(task)
            .map_or_else(String::new, |t| t.pool.clone()),
    };
    let mut starts: HashMap<(String, String, u32), i64> = HashMap::new();
    let mut bars = Vec::new();
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for record in records {
        let Some(at) = seconds(&record.ts) else {
            continue;
        };
        first = first.min(at);
        last = last.max(at);
        let (Some(task), Some(partition), Some(attempt)) =
            (&record.task, &record.partition, record.attempt)
        else {
            continue;
        };
        let key = (task.clone(), partition.clone(), attempt);
        let outcome = match record.state {
            State::Running => {
                starts.insert(key, at);
                continue;
            }
            State::Success => "success",
            State::Failed => "failed",
            State::Unknown => "unknown",
            _ => continue,
        };
        if let Some(start) = starts.remove(&key) {
            bars.push(Bar {
                pool: pool_of(task),
                task: task.clone(),
                partition: partition.clone(),
                attempt,
                start,
                end: at,
                outcome,
            });
        }
    }
    for ((task, partition, attempt), start) in starts {
        bars.push(Bar {
            pool: pool_of(&task),
            task,
            partition,
            attempt,
            start,
            end: last,
            outcome: "running",
        });
    }
    (bars, first, last)
}

/// The bars of each pool packed into lanes, one a slot: each bar goes to
/// the first lane free when it starts.
fn lanes(bars: &[Bar]) -> BTreeMap<&str, Vec<Vec<&Bar>>> {
    let mut pools: BTreeMap<&str, Vec<Vec<&Bar>>> = BTreeMap::new();
    for bar in bars {
        let lanes = pools.entry(bar.pool.as_str()).or_default();
        match lanes
            .iter_mut()
            .find(|lane| lane.last().is_some_and(|b| b.end <= bar.start))
        {
            Some(lane) => lane.push(bar),
            None => lanes.push(vec![bar]),
        }
    }
    pools
}

/// The lanes as HTML, each bar placed on the run's time span.
fn write_lanes(html: &mut String, pools: &BTreeMap<&str, Vec<Vec<&Bar>>>, first: i64, span: f64) {
    for (pool, lanes) in pools {
        for (n, lane) in lanes.iter().enumerate() {
            let _ = write!(
                html,
                "<div class=\"lane\" data-pool=\"{0}\"><span class=\"label\">{0} {1}</span><div class=\"track\">",
                esc(pool),
                n + 1
            );
            for bar in lane {
                let left = (bar.start - first) as f64 / span * 100.0;
                let width = ((bar.end - bar.start) as f64 / span * 100.0).max(0.3);
                let _ = write!(
                    html,
                    "<div class=\"bar {}\" style=\"left:{left:.3}%;width:{width:.3}%\" title=\"{}\"></div>",
                    bar.outcome,
                    esc(&format!(
                        "{} {} attempt {} · {} · {:.1} s",
                        bar.task,
                        bar.partition,
                        bar.attempt,
                        bar.outcome,
                        (bar.end - bar.start) as f64 / 1000.0
                    ))
                );
            }
            html.push_str("</div></div>\n");
        }
    }
}

/// The problems list: kind, instance (linked to its grid row when drawn),
/// what is wrong, the last attempt's evidence and the command to run.
fn write_problems(
    html: &mut String,
    total: usize,
    problems: &[crate::ops::problems::Problem],
    more: &[crate::ops::problems::More],
    grid: &grid::Grid,
) {
    let _ = writeln!(html, "<h2 id=\"problems\">Needs a person ({total})</h2>");
    if problems.is_empty() {
        html.push_str("<p class=\"meta\">Nothing: no quarantined, held, late, missed, failing, undelivered or drifted partition.</p>\n");
        return;
    }
    html.push_str("<div class=\"scroll\"><table id=\"problems-list\"><thead><tr><th>state</th><th>task</th><th>partition</th><th>what</th><th>do</th></tr></thead><tbody>\n");
    let summarised = grid.keys.len() > grid::SUMMARY_ROWS;
    for p in problems {
        let partition = p.partition.as_deref().unwrap_or("");
        // A row is drawn unless the grid is summarised and it holds no problem cell.
        let drawn = !partition.is_empty()
            && grid.keys.iter().any(|k| k == partition)
            && (!summarised || grid.row_has_problem(partition));
        let cell = if drawn {
            format!(
                "<a href=\"#{}\">{}</a>",
                esc(&grid::row_id(partition)),
                esc(partition)
            )
        } else {
            esc(partition)
        };
        let mut what = esc(&p.detail);
        if let Some(e) = &p.evidence {
            let _ = write!(what, "<br><span class=\"meta\">{}</span>", esc(e));
        }
        if let Some(tail) = &p.stderr_tail {
            let _ = write!(what, "<pre>{}</pre>", esc(tail));
        }
        let mut todo = String::new();
        if let Some(r) = &p.recommendation {
            todo.push_str(&esc(r));
        }
        if let Some(x) = &p.explain {
            let _ = write!(todo, "<br><code>{}</code>", esc(x));
        }
        let _ = writeln!(
            html,
            "<tr class=\"problem\" data-kind=\"{0}\"><td class=\"kind {1}\">{0}</td><td>{2}</td><td>{cell}</td><td>{what}</td><td>{todo}</td></tr>",
            p.kind.as_str(),
            p.kind.as_str().to_lowercase(),
            esc(p.task.as_deref().unwrap_or("")),
        );
    }
    html.push_str("</tbody></table></div>\n");
    for m in more {
        let _ = writeln!(
            html,
            "<p class=\"more\" data-kind=\"{0}\">and {1} more {0}{2}{3}</p>",
            m.kind.as_str(),
            m.count,
            m.task
                .as_deref()
                .map(|t| format!(" of {}", esc(t)))
                .unwrap_or_default(),
            match (&m.first, &m.last) {
                (Some(f), Some(l)) => format!(", {} to {}", esc(f), esc(l)),
                _ => String::new(),
            }
        );
    }
}

fn history(html: &mut String, histories: &grid::Histories) {
    html.push_str("<h2>Generation history</h2>\n<div class=\"scroll\"><table id=\"history\"><thead><tr><th>dataset</th><th>partition</th><th>generation</th><th>kind</th><th>run</th><th>attempt</th><th>rows</th><th>code_version</th><th>digest</th><th>published</th></tr></thead><tbody>\n");
    for ((dataset, partition), records) in histories {
        for r in records.iter().rev() {
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"digest\">{}</td><td>{}</td></tr>",
                esc(dataset),
                esc(partition),
                r.generation.get(),
                esc(&format!("{:?}", r.kind).to_lowercase()),
                esc(&r.run_id),
                r.attempt,
                r.rows,
                esc(&r.code_version),
                esc(&r.digest),
                esc(&r.published_at)
            );
        }
    }
    html.push_str("</tbody></table></div>\n");
}

/// Escapes text for HTML content and attribute values.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' => out.push_str("&#10;"),
            _ => out.push(c),
        }
    }
    out
}

/// Writes the report to `out`.
pub fn write(manifest: &Manifest, run: Option<&str>, out: &PathBuf) -> Result<(), ReportError> {
    let html = render(manifest, run)?;
    std::fs::write(out, html).map_err(|source| ReportError::Write {
        path: out.clone(),
        source,
    })
}

pub(crate) const STYLE: &str = "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em;color:#1d2430}\
h1{font-size:20px;margin:0}h2{font-size:16px;margin:1.4em 0 .4em}.meta{color:#5b6472;margin:.2em 0}\
.scroll{max-height:70vh;overflow:auto;border:1px solid #d7dbe0}\
table{border-collapse:collapse}th,td{padding:2px 6px;text-align:left;white-space:nowrap}\
#grid th{position:sticky;background:#f4f5f7;font-weight:600}#grid thead th{top:0;z-index:2}#grid tbody th{left:0;z-index:1}\
#grid td{width:34px;height:18px;border:1px solid #fff}\
.legend .cell{display:inline-block;width:14px;height:14px;vertical-align:middle;margin-left:.8em}\
.published{background:#2f9e44}.stale{background:#a9e34b}.running{background:#1c7ed6}.held{background:#f59f00}.quarantined{background:#e03131}\
.late{background:#9c36b5}.waiting{background:#74c0fc}.missing{background:#ced4da}.none{background:#fff}\
#gantt{min-width:900px;padding:4px}.lane{display:flex;align-items:center;height:22px}\
.label{width:110px;flex:none;color:#5b6472;font-size:12px}.track{position:relative;flex:1;height:16px;background:#f4f5f7}\
.bar{position:absolute;top:1px;height:14px;border-radius:2px}.bar.success{background:#2f9e44}.bar.failed{background:#e03131}\
.bar.unknown{background:#f59f00}.bar.running{background:#1c7ed6}.bar.planned{background:#4c6ef5;border-radius:0;box-shadow:inset -1px 0 #fff}\
.util .track{height:30px}\
#history td{border-bottom:1px solid #eef0f2;font-size:12px}.digest{font-family:ui-monospace,monospace}";
