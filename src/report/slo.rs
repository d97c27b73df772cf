//! The report's SLO section: the tables of `weir slo` over its default
//! window ([`crate::ops::slo`]), from the commit records and the Gantt
//! chart's run log the report already read, and the logs of the other runs
//! the window touches.

use serde::Serialize;

use super::error::ReportError;
use super::grid::Histories;
use crate::events::EventRecord;
use crate::manifest::Manifest;
use crate::ops::slo::{self, whole, Window, MEASURE_COLUMNS};
use crate::store::Warehouse;

/// What `report/slo.html` lays out: the window, then rows of cells.
#[derive(Serialize)]
pub(super) struct SloView {
    window: String,
    now: String,
    since: String,
    task_head: Vec<&'static str>,
    tasks: Vec<Vec<String>>,
    pool_head: Vec<&'static str>,
    pools: Vec<Vec<String>>,
    plans: Vec<Vec<String>>,
}

/// The SLO section's model: one table per task, one per pool.
pub(super) fn section(
    manifest: &Manifest,
    warehouse: &Warehouse,
    histories: &Histories,
    run: Option<(&str, &[EventRecord])>,
) -> Result<SloView, ReportError> {
    let window = Window::ending_now(slo::DEFAULT_SINCE);
    let events = slo::read_events_with(warehouse, &window, run).map_err(ReportError::Warehouse)?;
    let first = |task: &str, partition: &str| {
        let dataset = &manifest.tasks.get(task)?.output.dataset;
        let record = histories
            .get(&(dataset.clone(), partition.to_string()))?
            .first()?;
        record
            .published_at
            .parse::<jiff::Timestamp>()
            .ok()
            .map(|t| t.as_millisecond())
    };
    let report = slo::measure(manifest, &window, &events, &first);
    let head = |first: &[&'static str]| -> Vec<&'static str> {
        first
            .iter()
            .chain(MEASURE_COLUMNS.iter())
            .copied()
            .collect()
    };
    let tasks = report.task_rows();
    let pools = report.pool_rows();
    let plans = report
        .signed_plans
        .iter()
        .map(|p| {
            vec![
                p.run_id.clone(),
                p.file.clone(),
                slo::span(p.estimated_wall_ms as i64),
                slo::span(p.estimated_wall_p90_ms as i64),
                p.took_ms
                    .map_or_else(|| "- (not finished)".into(), |t| slo::span(t as i64)),
            ]
        })
        .collect();
    Ok(SloView {
        window: whole(report.window_ms),
        now: report.now.to_string(),
        since: report.since.to_string(),
        task_head: head(&["task", "pool", "sla"]),
        tasks,
        pool_head: head(&["pool"]),
        pools,
        plans,
    })
}

#[cfg(test)]
impl SloView {
    /// A view whose every text is `text`.
    pub(super) fn hostile(text: &str) -> SloView {
        let row = || vec![vec![text.to_owned(); 3]];
        SloView {
            window: text.to_owned(),
            now: text.to_owned(),
            since: text.to_owned(),
            task_head: vec!["task"],
            tasks: row(),
            pool_head: vec!["pool"],
            pools: row(),
            plans: row(),
        }
    }
}
