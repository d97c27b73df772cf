//! `output.table` (issue 27): the table format a dataset is also published
//! as. Only Delta, and only for Parquet outputs: a Delta table's data files
//! are Parquet, and weir references the published files rather than
//! converting them.

use super::model::TableFormat;
use super::tasks::RawOutput;
use super::validate::Validator;
use super::ManifestError;
use crate::audit::Format;

/// The declared table format, or `None` (with an error pushed when the
/// declaration is wrong).
pub(super) fn check(
    v: &mut Validator<'_, '_, '_, '_>,
    task: &str,
    raw: &RawOutput,
) -> Option<TableFormat> {
    let declared = raw.table.as_deref()?;
    let at = v.value(&["tasks", task, "output", "table"]);
    if declared != "delta" {
        v.err(
            ManifestError::new(
                "weir::manifest::invalid_value",
                format!("task `{task}`: unknown table format `{declared}`"),
            )
            .at(at, "not a table format weir writes")
            .help("the one table format is `table = \"delta\"` (a Delta Lake table), on a Parquet output"),
        );
        return None;
    }
    if raw.format != Format::Parquet {
        v.err(
            ManifestError::new(
                "weir::manifest::table_needs_parquet",
                format!(
                    "task `{task}`: a Delta table needs a Parquet output, and this one is {}",
                    format_name(raw.format)
                ),
            )
            .at(at, "Delta tables hold Parquet files")
            .help("publish Parquet (`format = \"parquet\"`), or remove `table`: `weir files` lists the visible files of any dataset"),
        );
        return None;
    }
    Some(TableFormat::Delta)
}

fn format_name(format: Format) -> &'static str {
    match format {
        Format::Csv => "CSV",
        Format::Jsonl => "JSON Lines",
        Format::Parquet => "Parquet",
    }
}
