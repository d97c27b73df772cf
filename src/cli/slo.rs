//! `weir slo`: the SLO measurements of [`crate::ops::slo`], per task and
//! per pool, as aligned tables or one JSON document.

use super::args::SloArgs;
use super::error::{doing, CliError};
use super::exit;
use crate::ops::slo::{self, span, whole, Window, MEASURE_COLUMNS};

pub(crate) fn run(args: &SloArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
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
    let mut header = vec!["task", "pool", "sla"];
    header.extend_from_slice(&MEASURE_COLUMNS);
    let rows = report.task_rows();
    out.extend(super::aligned(&header, &rows, &[4, 5, 6, 7, 8, 9, 10]));
    out.push(String::new());
    let rows = report.pool_rows();
    let mut header = vec!["pool"];
    header.extend_from_slice(&MEASURE_COLUMNS);
    out.extend(super::aligned(&header, &rows, &[2, 3, 4, 5, 6, 7, 8]));
    if !report.signed_plans.is_empty() {
        out.push(String::new());
        out.push("signed plans (estimate beside what the run took):".into());
        for p in &report.signed_plans {
            out.push(format!(
                "  {} ({}): estimated {} (p90 {}), took {}",
                p.run_id,
                p.file,
                span(p.estimated_wall_ms as i64),
                span(p.estimated_wall_p90_ms as i64),
                p.took_ms
                    .map_or_else(|| "- (not finished)".into(), |t| span(t as i64))
            ));
        }
    }
    out
}
