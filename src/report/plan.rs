//! `weir plan --html`: the plan's simulated schedule as one self-contained
//! page, so a backfill's hours can be seen before they start.
//!
//! Every task is a row spanning its first simulated start to its last end.
//! Up to [`MAX_BARS`] instances are also drawn one by one in their pool's
//! slot lanes; a larger plan (a 730,000-instance backfill) shows each pool's
//! busy slots over time instead, in [`BUCKETS`] columns, so the page stays
//! small whatever the plan.

use std::collections::BTreeMap;

use serde::Serialize;

use super::html::{self, place, Bar, Lane};
use crate::plan::render::human_duration;
use crate::plan::{cost, Plan};

/// A simulated instance: (id, start ms, end ms).
type Slot = (usize, u64, u64);

/// Instances drawn one by one at most.
pub const MAX_BARS: usize = 5000;
/// Columns of a pool's utilisation chart.
const BUCKETS: usize = 240;

/// What `report/plan.html` lays out.
#[derive(Serialize)]
struct PlanPage {
    title: String,
    instances: usize,
    wall: String,
    /// A lane per task, from its first start to its last end.
    tasks: Vec<Lane>,
    /// The pools' slot lanes, or their busy slots over time.
    pools: Vec<Lane>,
    /// Columns of the utilisation chart; 0 when the slots are drawn.
    buckets: usize,
}

/// Renders the page of `plan`.
pub fn render(plan: &Plan) -> Result<String, minijinja::Error> {
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
    let tasks = plan
        .tasks
        .iter()
        .zip(&spans)
        .map(|(task, &(start, end, count))| Lane {
            class: "lane",
            attr: "task",
            key: task.name.clone(),
            label: task.name.clone(),
            bars: (count > 0)
                .then(|| Bar {
                    class: "success",
                    style: place(pct(start), pct(end - start).max(0.3), None),
                    title: Some(format!(
                        "{} · pool {} · {count} instances · {} to {}",
                        task.name,
                        task.pool,
                        human_duration(std::time::Duration::from_millis(start)),
                        human_duration(std::time::Duration::from_millis(end))
                    )),
                })
                .into_iter()
                .collect(),
        })
        .collect();
    let (pools, buckets) = if drawn {
        (lanes(plan, &bars, &pct), 0)
    } else {
        (utilisation(plan, &estimate, total), BUCKETS)
    };
    let page = PlanPage {
        title: format!("weir plan: {}", plan.pipeline),
        instances: plan.instance_count(),
        wall: human_duration(estimate.total),
        tasks,
        pools,
        buckets,
    };
    html::render("report/plan.html", &page)
}

fn lanes(plan: &Plan, bars: &[Slot], pct: &dyn Fn(u64) -> f64) -> Vec<Lane> {
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
    let mut out = Vec::new();
    for (pool, lanes) in &pools {
        for (n, lane) in lanes.iter().enumerate() {
            let bars = lane
                .iter()
                .map(|&(id, start, end)| {
                    let (t, i) = plan.locate(id);
                    let task = &plan.tasks[t];
                    let key = task.keys.get(i).map_or("", String::as_str);
                    Bar {
                        class: "planned",
                        style: place(pct(start), pct(end - start).max(0.1), None),
                        title: Some(format!("{} {key}", task.name)),
                    }
                })
                .collect();
            out.push(Lane::of_pool(pool, n, bars));
        }
    }
    out
}

fn utilisation(plan: &Plan, estimate: &cost::Estimate, total: u64) -> Vec<Lane> {
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
    busy.iter()
        .map(|(pool, row)| {
            let slots = estimate.pools.get(*pool).map_or(1, |p| p.slots.max(1));
            let bars = row
                .iter()
                .enumerate()
                .map(|(bucket, ms)| {
                    let used = *ms as f64 / (width as f64 * f64::from(slots)) * 100.0;
                    Bar {
                        class: "planned",
                        style: place(
                            bucket as f64 / BUCKETS as f64 * 100.0,
                            100.0 / BUCKETS as f64,
                            Some(used.min(100.0)),
                        ),
                        title: None,
                    }
                })
                .collect();
            Lane {
                class: "lane util",
                attr: "pool",
                key: (*pool).to_owned(),
                label: format!("{pool} ({slots})"),
                bars,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "<script>alert(1)</script>\"><img src=x onerror=alert(2)>&amp;'q";
    const ESCAPED: &str = "&lt;script&gt;alert(1)&lt;&#x2f;script&gt;&quot;&gt;&lt;img src=x onerror=alert(2)&gt;&amp;amp;&#x27;q";

    fn lane(attr: &'static str) -> Lane {
        Lane {
            class: "lane",
            attr,
            key: HOSTILE.into(),
            label: HOSTILE.into(),
            bars: vec![Bar {
                class: "planned",
                style: place(0.0, 1.0, None),
                title: Some(HOSTILE.into()),
            }],
        }
    }

    // A pipeline, task, pool or key reaches the plan's page as text, in
    // both layouts of its pools.
    #[test]
    fn every_text_of_the_plan_page_is_escaped() {
        for buckets in [0, BUCKETS] {
            let page = PlanPage {
                title: HOSTILE.into(),
                instances: 1,
                wall: HOSTILE.into(),
                tasks: vec![lane("task")],
                pools: vec![lane("pool")],
                buckets,
            };
            let html = html::render("report/plan.html", &page).unwrap();
            for raw in ["<script>alert", "<img src=x", "\"><img", "&amp;'q"] {
                assert!(!html.contains(raw), "raw `{raw}` in\n{html}");
            }
            assert_eq!(html.matches(ESCAPED).count(), 9, "{html}");
            assert!(html.contains(&format!("data-pool=\"{ESCAPED}\"")));
        }
    }
}
