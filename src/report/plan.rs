//! `weir plan --html`: the plan's simulated schedule as one self-contained
//! page, so a backfill's hours can be seen before they start.
//!
//! Every task is a row spanning its first simulated start to its last end.
//! Up to [`MAX_BARS`] instances are also drawn one by one in their pool's
//! slot lanes; a larger plan (a 730,000-instance backfill) shows each pool's
//! busy slots over time instead, in [`BUCKETS`] columns, so the page stays
//! small whatever the plan.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{esc, STYLE};
use crate::plan::render::human_duration;
use crate::plan::{cost, Plan};

/// A simulated instance: (id, start ms, end ms).
type Slot = (usize, u64, u64);

/// Instances drawn one by one at most.
pub const MAX_BARS: usize = 5000;
/// Columns of a pool's utilisation chart.
const BUCKETS: usize = 240;

/// Renders the page of `plan`.
pub fn render(plan: &Plan) -> String {
    let mut spans: Vec<(u64, u64, usize)> = vec![(u64::MAX, 0, 0); plan.tasks.len()];
    let mut bars: Vec<Slot> = Vec::new();
    let drawn = plan.instance_count() <= MAX_BARS;
    let estimate = cost::schedule(plan, &mut |id, start, end| {
        let (t, _) = plan.locate(id);
        if let Some(span) = spans.get_mut(t) {
            span.0 = span.0.min(start);
            span.1 = span.1.max(end);
            span.2 += 1;
        }
        if drawn {
            bars.push((id, start, end));
        }
    });
    let total = u64::try_from(estimate.total.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let pct = |ms: u64| ms as f64 / total as f64 * 100.0;
    let mut html = String::new();
    let title = format!("weir plan: {}", plan.pipeline);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title>\
         <style>{STYLE}</style></head><body>\n<h1>{0}</h1>\n<p class=\"meta\">{1} instances · \
         estimated wall time {2} · simulated with each task's expected_duration, pool slots, \
         dependencies and depends_on_past</p>\n",
        esc(&title),
        plan.instance_count(),
        esc(&human_duration(estimate.total)),
    );
    html.push_str("<h2>Tasks</h2>\n<div class=\"scroll\"><div id=\"gantt\">");
    for (t, task) in plan.tasks.iter().enumerate() {
        let (start, end, count) = spans[t];
        let _ = write!(
            html,
            "<div class=\"lane\" data-task=\"{0}\"><span class=\"label\">{0}</span><div class=\"track\">",
            esc(&task.name)
        );
        if count > 0 {
            let _ = write!(
                html,
                "<div class=\"bar success\" style=\"left:{:.3}%;width:{:.3}%\" title=\"{}\"></div>",
                pct(start),
                pct(end - start).max(0.3),
                esc(&format!(
                    "{} · pool {} · {count} instances · {} to {}",
                    task.name,
                    task.pool,
                    human_duration(std::time::Duration::from_millis(start)),
                    human_duration(std::time::Duration::from_millis(end))
                ))
            );
        }
        html.push_str("</div></div>\n");
    }
    html.push_str("</div></div>\n");
    if drawn {
        lanes(&mut html, plan, &bars, &pct);
    } else {
        utilisation(&mut html, plan, &estimate, total);
    }
    html.push_str("</body></html>\n");
    html
}

fn lanes(html: &mut String, plan: &Plan, bars: &[Slot], pct: &dyn Fn(u64) -> f64) {
    html.push_str("<h2>Pools</h2>\n<div class=\"scroll\"><div id=\"lanes\">");
    let mut pools: BTreeMap<&str, Vec<Vec<Slot>>> = BTreeMap::new();
    for &(id, start, end) in bars {
        let (t, _) = plan.locate(id);
        let lanes = pools.entry(plan.tasks[t].pool.as_str()).or_default();
        match lanes
            .iter_mut()
            .find(|lane| lane.last().is_some_and(|b| b.2 <= start))
        {
            Some(lane) => lane.push((id, start, end)),
            None => lanes.push(vec![(id, start, end)]),
        }
    }
    for (pool, lanes) in &pools {
        for (n, lane) in lanes.iter().enumerate() {
            let _ = write!(
                html,
                "<div class=\"lane\" data-pool=\"{0}\"><span class=\"label\">{0} {1}</span><div class=\"track\">",
                esc(pool),
                n + 1
            );
            for &(id, start, end) in lane {
                let (t, i) = plan.locate(id);
                let task = &plan.tasks[t];
                let key = task.keys.get(i).map_or("", String::as_str);
                let _ = write!(
                    html,
                    "<div class=\"bar planned\" style=\"left:{:.3}%;width:{:.3}%\" title=\"{}\"></div>",
                    pct(start),
                    pct(end - start).max(0.1),
                    esc(&format!("{} {key}", task.name))
                );
            }
            html.push_str("</div></div>\n");
        }
    }
    html.push_str("</div></div>\n");
}

fn utilisation(html: &mut String, plan: &Plan, estimate: &cost::Estimate, total: u64) {
    let _ = write!(
        html,
        "<h2>Pools</h2>\n<p class=\"meta\">{} instances: each pool's busy slots over time in {BUCKETS} columns</p>\n",
        plan.instance_count()
    );
    // Busy slot-milliseconds per bucket and pool, from a second simulation.
    let width = total.div_ceil(BUCKETS as u64).max(1);
    let mut busy: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    cost::schedule(plan, &mut |id, start, end| {
        let (t, _) = plan.locate(id);
        let row = busy
            .entry(plan.tasks[t].pool.as_str())
            .or_insert_with(|| vec![0; BUCKETS]);
        let mut at = start;
        while at < end {
            let bucket = usize::try_from(at / width).unwrap_or(0).min(BUCKETS - 1);
            let stop = ((bucket as u64 + 1) * width).min(end);
            row[bucket] += stop.saturating_sub(at);
            at = stop.max(at + 1);
        }
    });
    for (pool, row) in &busy {
        let slots = estimate.pools.get(*pool).map_or(1, |p| p.slots.max(1));
        let _ = write!(
            html,
            "<div class=\"lane util\" data-pool=\"{0}\"><span class=\"label\">{0} ({slots})</span><div class=\"track\">",
            esc(pool)
        );
        for (bucket, ms) in row.iter().enumerate() {
            let used = *ms as f64 / (width as f64 * f64::from(slots)) * 100.0;
            let _ = write!(
                html,
                "<div class=\"bar planned\" style=\"left:{:.3}%;width:{:.3}%;top:auto;bottom:0;height:{:.1}%\"></div>",
                bucket as f64 / BUCKETS as f64 * 100.0,
                100.0 / BUCKETS as f64,
                used.min(100.0)
            );
        }
        html.push_str("</div></div>\n");
    }
}
