//! The report's SLO section: the tables of `weir slo` over its default
//! window ([`crate::ops::slo`]), from the commit records and the Gantt
//! chart's run log the report already read, and the logs of the other runs
//! the window touches.

use std::fmt::Write as _;

use super::grid::Histories;
use super::{esc, ReportError};
use crate::events::EventRecord;
use crate::manifest::Manifest;
use crate::ops::slo::{self, cells, whole, Window, MEASURE_COLUMNS};
use crate::store::Warehouse;

/// Appends the SLO section: one table per task, one per pool.
pub(super) fn section(
    html: &mut String,
    manifest: &Manifest,
    warehouse: &Warehouse,
    histories: &Histories,
    run: Option<(&str, &[EventRecord])>,
) -> Result<(), ReportError> {
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
    let _ = write!(
        html,
        "<h2>SLOs</h2>\n<p class=\"meta\">over {} ending {}: partitions whose period ended since {}; percentiles nearest-rank (see <code>weir slo</code>)</p>\n",
        esc(&whole(report.window_ms)),
        esc(&report.now),
        esc(&report.since)
    );
    let head = |first: &[&str]| {
        let mut row = String::from("<thead><tr>");
        for h in first.iter().chain(MEASURE_COLUMNS.iter()) {
            let _ = write!(row, "<th>{}</th>", esc(h));
        }
        row.push_str("</tr></thead>");
        row
    };
    let _ = writeln!(
        html,
        "<div class=\"scroll\"><table id=\"slo-tasks\">{}<tbody>",
        head(&["task", "pool", "sla"])
    );
    for t in &report.tasks {
        let mut row = vec![
            t.task.clone(),
            t.pool.clone(),
            t.sla_ms.map_or_else(|| "-".into(), whole),
        ];
        row.extend(cells(&t.measures, t.slo));
        push_row(html, &row);
    }
    let _ = writeln!(
        html,
        "</tbody></table></div>\n<div class=\"scroll\"><table id=\"slo-pools\">{}<tbody>",
        head(&["pool"])
    );
    for p in &report.pools {
        let mut row = vec![p.pool.clone()];
        row.extend(cells(&p.measures, None));
        push_row(html, &row);
    }
    html.push_str("</tbody></table></div>\n");
    if !report.signed_plans.is_empty() {
        let _ = writeln!(
            html,
            "<h3>Signed plans</h3>\n<div class=\"scroll\"><table id=\"slo-plans\"><thead><tr><th>run</th><th>plan</th><th>estimated</th><th>p90</th><th>took</th></tr></thead><tbody>"
        );
        for p in &report.signed_plans {
            push_row(
                html,
                &[
                    p.run_id.clone(),
                    p.file.clone(),
                    slo::span(p.estimated_wall_ms as i64),
                    slo::span(p.estimated_wall_p90_ms as i64),
                    p.took_ms
                        .map_or_else(|| "- (not finished)".into(), |t| slo::span(t as i64)),
                ],
            );
        }
        html.push_str("</tbody></table></div>\n");
    }
    Ok(())
}

fn push_row(html: &mut String, cells: &[String]) {
    html.push_str("<tr>");
    for c in cells {
        let _ = write!(html, "<td>{}</td>", esc(c));
    }
    html.push_str("</tr>\n");
}
