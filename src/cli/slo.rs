//! `weir slo`: the SLO measurements of [`crate::ops::slo`], per task and
//! per pool, as aligned tables or one JSON document.

use super::args::SloArgs;
use super::error::{doing, CliError};
use super::exit;
use crate::ops::slo::{self, Measures, Spread, Window};

pub(crate) fn run(args: &SloArgs) -> Result<u8, CliError> {
    let manifest = super::error::load(&args.manifest)?;
    let since = match &args.since {
        Some(text) => crate::manifest::duration::parse(text).map_err(|why| {
            CliError::Usage(format!(
                "--since `{text}`: {why}\n  help: a duration such as `7d`, `36h` or `90m`"
            ))
        })?,
        None => slo::DEFAULT_SINCE,
    };
    let warehouse = super::error::open_to_read(&manifest)?;
    let window = Window::ending_now(since);
    let report =
        slo::gather(&manifest, &warehouse, &window).map_err(doing("cannot read the warehouse"))?;
    if args.json {
        let mut doc = serde_json::json!({
            "format_version": 1,
            "pipeline": manifest.pipeline.name,
            "percentiles": "nearest-rank",
        });
        if let (Some(doc), serde_json::Value::Object(fields)) = (
            doc.as_object_mut(),
            serde_json::to_value(&report).expect("measurements are plain data"),
        ) {
            doc.extend(fields);
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("json values serialize")
        );
        return Ok(exit::OK);
    }
    for line in render(&manifest.pipeline.name, &report) {
        println!("{line}");
    }
    Ok(exit::OK)
}

/// The text of `weir slo`: a heading, then one table per task and per pool.
pub(crate) fn render(pipeline: &str, report: &slo::SloReport) -> Vec<String> {
    let mut out = vec![format!(
        "SLOs of `{pipeline}` over {} ending {} (partitions whose period ended since {}; percentiles nearest-rank)",
        whole(report.window_ms),
        report.now,
        report.since
    )];
    out.push(String::new());
    let header = [
        "task",
        "pool",
        "sla",
        "within sla",
        "latency p50",
        "p95",
        "attempt p50",
        "p95",
        "queue p50",
        "p95",
        "retries/inst",
        "error budget left",
    ];
    let rows: Vec<Vec<String>> = report
        .tasks
        .iter()
        .map(|t| {
            let mut row = vec![
                t.task.clone(),
                t.pool.clone(),
                t.sla_ms.map_or_else(|| "-".into(), whole),
            ];
            row.extend(cells(&t.measures, t.slo));
            row
        })
        .collect();
    out.extend(super::aligned(&header, &rows, &[4, 5, 6, 7, 8, 9, 10]));
    out.push(String::new());
    let rows: Vec<Vec<String>> = report
        .pools
        .iter()
        .map(|p| {
            let mut row = vec![p.pool.clone()];
            row.extend(cells(&p.measures, None));
            row
        })
        .collect();
    let mut header = vec!["pool"];
    header.extend_from_slice(&[
        "within sla",
        "latency p50",
        "p95",
        "attempt p50",
        "p95",
        "queue p50",
        "p95",
        "retries/inst",
        "error budget left",
    ]);
    out.extend(super::aligned(&header, &rows, &[2, 3, 4, 5, 6, 7, 8]));
    out
}

/// The measured columns: share, three spreads, retries, budget.
fn cells(m: &Measures, slo: Option<f64>) -> Vec<String> {
    let p = &m.partitions;
    let mut row = vec![match m.within_sla {
        Some(share) => format!("{} ({}/{})", percent(share), p.met, p.met + p.missed),
        None => "-".into(),
    }];
    for spread in [
        &m.publication_latency_ms,
        &m.attempt_duration_ms,
        &m.queue_wait_ms,
    ] {
        let Spread { p50, p95, .. } = spread;
        row.push(p50.map_or_else(|| "-".into(), span));
        row.push(p95.map_or_else(|| "-".into(), span));
    }
    row.push(match m.retries_per_instance {
        Some(r) => format!("{r:.2} ({}/{})", m.retries, m.instances),
        None => "-".into(),
    });
    row.push(match &m.error_budget {
        Some(b) => {
            let left = b.remaining.map_or_else(|| "-".into(), percent);
            let target = slo.map_or_else(String::new, |s| format!("slo {}, ", percent(s)));
            format!(
                "{left} ({target}{} of {:.2} allowed {})",
                b.misses,
                b.allowed_misses,
                if b.misses == 1 { "miss" } else { "misses" }
            )
        }
        None => "-".into(),
    });
    row
}

/// A share as a percentage with one decimal (`99.5%`, `-100.0%`).
pub(crate) fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// A declared length (`sla`, `--since`) as it is usually written: `7d`,
/// `6h`, else as a [`span`].
fn whole(ms: u64) -> String {
    match ms {
        0 => "0s".into(),
        ms if ms % 86_400_000 == 0 => format!("{}d", ms / 86_400_000),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms => span(i64::try_from(ms).unwrap_or(i64::MAX)),
    }
}

/// Milliseconds as people read a span: `850ms`, `12.3s`, `4m 5s`,
/// `2h 3m`, `1d 7h`.
pub(crate) fn span(ms: i64) -> String {
    let d = std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    let secs = d.as_secs();
    if secs < 3600 {
        return crate::manifest::duration::human(d);
    }
    if secs < 86_400 {
        return format!("{}h {}m", secs / 3600, (secs % 3600) / 60);
    }
    format!("{}d {}h", secs / 86_400, (secs % 86_400) / 3600)
}

#[cfg(test)]
mod tests {
    #[test]
    fn issue_26_spans_read_at_every_scale() {
        use super::span;
        assert_eq!(span(850), "850ms");
        assert_eq!(span(12_340), "12.3s");
        assert_eq!(span(245_000), "4m 5s");
        assert_eq!(span(7_380_000), "2h 3m");
        assert_eq!(span(111_600_000), "1d 7h");
        assert_eq!(super::percent(-1.0), "-100.0%");
        assert_eq!(super::whole(7 * 86_400_000), "7d");
        assert_eq!(super::whole(36 * 3_600_000), "36h");
        assert_eq!(super::whole(90_000), "1m 30s");
    }
}
