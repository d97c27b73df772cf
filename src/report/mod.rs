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
//! table the browser lays out once, with nothing to run. The code computes
//! each part's model; the templates of [`html`] lay it out, escaping every
//! value.

mod error;
pub mod grid;
pub(crate) mod html;
pub mod plan;
mod slo;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde::Serialize;

pub use error::ReportError;
pub use grid::CellState;
use html::{Bar as BarView, Lane};

use crate::events::{self, EventRecord, State};
use crate::manifest::Manifest;
use crate::store::events::EventStore;
use crate::store::Warehouse;

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

    let grid = grid::Grid::read(manifest, &warehouse, &records)?;
    // What needs a person first, each linked to its row of the grid: a
    // problem cell among thousands is otherwise a needle to find.
    let status = crate::ops::status::Status::gather(manifest, &warehouse, false)
        .map_err(|e| ReportError::Status(e.to_string()))?;
    let (all, _bad) = events::read_all_in(&store).map_err(ReportError::Warehouse)?;
    let (problems, more) = crate::ops::problems::gather(manifest, &warehouse, &status, &all);
    let total = crate::ops::problems::total(&problems, &more);
    let known = run_id.as_deref().map(|id| (id, records.as_slice()));
    let page = Page {
        title: format!("weir report: {}", manifest.pipeline.name),
        code_version: &manifest.pipeline.code_version,
        warehouse: warehouse.location(),
        generated: jiff::Timestamp::now().to_string(),
        problems: problems_view(total, &problems, &more, &grid),
        grid: grid.view(),
        gantt: gantt(manifest, run_id.as_deref(), &records),
        history: history(&grid.histories),
        slo: slo::section(manifest, &warehouse, &grid.histories, known)?,
    };
    html::render("report/page.html", &page).map_err(ReportError::Template)
}

/// What `report/page.html` lays out.
#[derive(Serialize)]
struct Page<'a> {
    title: String,
    code_version: &'a str,
    warehouse: String,
    generated: String,
    problems: ProblemsView,
    grid: grid::GridView<'a>,
    gantt: GanttView,
    history: Vec<HistoryRow<'a>>,
    slo: slo::SloView,
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

/// One run's attempts as `report/gantt.html` draws them (the report's
/// and the console's run page alike).
#[derive(Debug, Serialize)]
pub(crate) struct GanttView {
    /// None without a run.
    run_id: Option<String>,
    attempts: usize,
    /// The run's span in seconds, one decimal.
    seconds: String,
    lanes: Vec<Lane>,
}

/// The Gantt chart of `run_id`'s attempts in `records`.
pub(crate) fn gantt(
    manifest: &Manifest,
    run_id: Option<&str>,
    records: &[EventRecord],
) -> GanttView {
    let Some(run_id) = run_id else {
        return GanttView {
            run_id: None,
            attempts: 0,
            seconds: String::new(),
            lanes: Vec::new(),
        };
    };
    let (mut bars, first, last) = attempt_bars(manifest, records);
    bars.sort_by_key(|b| (b.pool.clone(), b.start, b.end));
    let span = (last - first).max(1) as f64;
    GanttView {
        run_id: Some(run_id.to_owned()),
        attempts: bars.len(),
        seconds: format!("{:.1}", span / 1000.0),
        lanes: lane_views(&lanes(&bars), first, span),
    }
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

/// The lanes' models, each bar placed on the run's time span.
fn lane_views(pools: &BTreeMap<&str, Vec<Vec<&Bar>>>, first: i64, span: f64) -> Vec<Lane> {
    let mut out = Vec::new();
    for (pool, lanes) in pools {
        for (n, lane) in lanes.iter().enumerate() {
            let bars = lane
                .iter()
                .map(|bar| BarView {
                    class: bar.outcome,
                    style: html::place(
                        (bar.start - first) as f64 / span * 100.0,
                        ((bar.end - bar.start) as f64 / span * 100.0).max(0.3),
                        None,
                    ),
                    title: Some(format!(
                        "{} {} attempt {} · {} · {:.1} s",
                        bar.task,
                        bar.partition,
                        bar.attempt,
                        bar.outcome,
                        (bar.end - bar.start) as f64 / 1000.0
                    )),
                })
                .collect();
            out.push(Lane::of_pool(pool, n, bars));
        }
    }
    out
}

/// The problems list's model.
#[derive(Serialize)]
struct ProblemsView {
    total: usize,
    rows: Vec<ProblemRow>,
    more: Vec<MoreRow>,
}

/// A problem: kind, instance (its grid row's anchor when drawn), what is
/// wrong, the last attempt's evidence and the command to run.
#[derive(Serialize)]
struct ProblemRow {
    kind: &'static str,
    task: String,
    partition: String,
    anchor: Option<String>,
    detail: String,
    evidence: Option<String>,
    stderr_tail: Option<String>,
    recommendation: Option<String>,
    explain: Option<String>,
}

/// Problems of a kind counted rather than listed.
#[derive(Serialize)]
struct MoreRow {
    kind: &'static str,
    count: usize,
    task: Option<String>,
    first: Option<String>,
    last: Option<String>,
}

fn problems_view(
    total: usize,
    problems: &[crate::ops::problems::Problem],
    more: &[crate::ops::problems::More],
    grid: &grid::Grid,
) -> ProblemsView {
    let summarised = grid.keys.len() > grid::SUMMARY_ROWS;
    let rows = problems
        .iter()
        .map(|p| {
            let partition = p.partition.clone().unwrap_or_default();
            // A row is drawn unless the grid is summarised and it holds no problem cell.
            let drawn = !partition.is_empty()
                && grid.keys.contains(&partition)
                && (!summarised || grid.row_has_problem(&partition));
            ProblemRow {
                kind: p.kind.as_str(),
                task: p.task.clone().unwrap_or_default(),
                anchor: drawn.then(|| grid::row_id(&partition)),
                partition,
                detail: p.detail.clone(),
                evidence: p.evidence.clone(),
                stderr_tail: p.stderr_tail.clone(),
                recommendation: p.recommendation.clone(),
                explain: p.explain.clone(),
            }
        })
        .collect();
    let more = more
        .iter()
        .map(|m| MoreRow {
            kind: m.kind.as_str(),
            count: m.count,
            task: m.task.clone(),
            first: m.first.clone(),
            last: m.last.clone(),
        })
        .collect();
    ProblemsView { total, rows, more }
}

/// A generation in the history table.
#[derive(Serialize)]
struct HistoryRow<'a> {
    dataset: &'a str,
    partition: &'a str,
    generation: u64,
    kind: String,
    run_id: &'a str,
    attempt: u32,
    rows: u64,
    code_version: &'a str,
    digest: &'a str,
    published_at: &'a str,
}

/// Every partition's generations, newest first.
fn history(histories: &grid::Histories) -> Vec<HistoryRow<'_>> {
    let mut out = Vec::new();
    for ((dataset, partition), records) in histories {
        for r in records.iter().rev() {
            out.push(HistoryRow {
                dataset,
                partition,
                generation: r.generation.get(),
                kind: format!("{:?}", r.kind).to_lowercase(),
                run_id: &r.run_id,
                attempt: r.attempt,
                rows: r.rows,
                code_version: &r.code_version,
                digest: &r.digest,
                published_at: &r.published_at,
            });
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Markup that would run or break out of an attribute, an entity that
    /// must stay literal, and a quote.
    const HOSTILE: &str = "<script>alert(1)</script>\"><img src=x onerror=alert(2)>&amp;'q";
    const ESCAPED: &str = "&lt;script&gt;alert(1)&lt;&#x2f;script&gt;&quot;&gt;&lt;img src=x onerror=alert(2)&gt;&amp;amp;&#x27;q";

    fn h() -> String {
        HOSTILE.to_owned()
    }

    /// Every text a report shows, hostile (a manifest validates names and
    /// keys today; the page does not count on it).
    fn hostile_grid() -> grid::Grid {
        let cell = grid::Cell {
            state: CellState::Quarantined,
            hover: h(),
        };
        grid::Grid {
            tasks: vec![h()],
            keys: vec![h()],
            cells: HashMap::from([((h(), h()), cell)]),
            histories: grid::Histories::new(),
        }
    }

    #[test]
    fn every_text_of_the_report_page_is_escaped() {
        let grid = hostile_grid();
        let page = Page {
            title: h(),
            code_version: HOSTILE,
            warehouse: h(),
            generated: h(),
            problems: ProblemsView {
                total: 1,
                rows: vec![ProblemRow {
                    kind: "QUARANTINED",
                    task: h(),
                    partition: h(),
                    anchor: Some(grid::row_id(HOSTILE)),
                    detail: h(),
                    evidence: Some(h()),
                    stderr_tail: Some(h()),
                    recommendation: Some(h()),
                    explain: Some(h()),
                }],
                more: vec![MoreRow {
                    kind: "LATE",
                    count: 2,
                    task: Some(h()),
                    first: Some(h()),
                    last: Some(h()),
                }],
            },
            grid: grid.view(),
            gantt: GanttView {
                run_id: Some(h()),
                attempts: 1,
                seconds: "1.0".into(),
                lanes: vec![Lane {
                    class: "lane",
                    attr: "pool",
                    key: h(),
                    label: h(),
                    bars: vec![BarView {
                        class: "failed",
                        style: html::place(1.0, 2.0, None),
                        title: Some(h()),
                    }],
                }],
            },
            history: vec![HistoryRow {
                dataset: HOSTILE,
                partition: HOSTILE,
                generation: 1,
                kind: h(),
                run_id: HOSTILE,
                attempt: 1,
                rows: 1,
                code_version: HOSTILE,
                digest: HOSTILE,
                published_at: HOSTILE,
            }],
            slo: slo::SloView::hostile(HOSTILE),
        };
        let html = html::render("report/page.html", &page).unwrap();
        for raw in ["<script>alert", "<img src=x", "\"><img", "&amp;'q"] {
            assert!(!html.contains(raw), "raw `{raw}` in\n{html}");
        }
        // Each text above: 5 in the head, 8 in the problem and 3 in its
        // `more`, the grid's column, row anchor, key and cell (task, key,
        // hover), 4 in the Gantt chart, 7 in the history, 12 in the SLOs.
        let copies = html.matches(ESCAPED).count();
        assert_eq!(copies, 45, "escaped copies in\n{html}");
        assert!(html.contains(&format!("<tr id=\"p-{ESCAPED}\"><th>{ESCAPED}</th>")));
        assert!(html.contains(&format!("<a href=\"#p-{ESCAPED}\">{ESCAPED}</a>")));
        assert!(html.contains(&format!("title=\"{ESCAPED}\"></td>")));
    }
}
