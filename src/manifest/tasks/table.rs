//! `output.table`: the table format a dataset is also published
//! as. Only Delta, and only for Parquet outputs: a Delta table's data files
//! are Parquet, and weir references the published files rather than
//! converting them.

use super::RawOutput;
use crate::audit::Format;
use crate::manifest::model::{SchemaPolicy, TableFormat};
use crate::manifest::validator::Validator;
use crate::manifest::ManifestError;
use crate::manifest::ManifestErrorKind;

/// The declared table format, or `None` (with an error pushed when the
/// declaration is wrong).
pub(super) fn check(
    v: &mut Validator<'_, '_, '_, '_>,
    task: &str,
    raw: &RawOutput,
) -> Option<TableFormat> {
    let Some(declared) = raw.table.as_deref() else {
        if raw.table_retention.is_some() {
            let at = v.value(&["tasks", task, "output", "table_retention"]);
            v.err(
                ManifestError::new(
                    ManifestErrorKind::RetentionNeedsTable,
                    format!("task `{task}`: `table_retention` is how long a table keeps replaced versions readable, and this output declares no table"),
                )
                .at(at, "only for `table = \"delta\"`")
                .help("declare `table = \"delta\"` on this Parquet output, or remove `table_retention` (`weir gc --keep-generations` keeps weir's own generations)"),
            );
        }
        if let Some(policy) = &raw.schema {
            let at = v.value(&["tasks", task, "output", "schema"]);
            v.err(
                ManifestError::new(
                    ManifestErrorKind::SchemaNeedsTable,
                    format!("task `{task}`: `schema = \"{policy}\"` is the schema policy of a table, and this output declares none"),
                )
                .at(at, "only for `table = \"delta\"`")
                .help("declare `table = \"delta\"` on this Parquet output, or remove `schema`"),
            );
        }
        return None;
    };
    let at = v.value(&["tasks", task, "output", "table"]);
    if declared != "delta" {
        v.err(
            ManifestError::new(
                ManifestErrorKind::InvalidValue,
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
                ManifestErrorKind::TableNeedsParquet,
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
    let policy = match raw.schema.as_deref() {
        None | Some("fixed") => SchemaPolicy::Fixed,
        Some("additive") => SchemaPolicy::Additive,
        Some(other) => {
            let at = v.value(&["tasks", task, "output", "schema"]);
            v.err(
                ManifestError::new(
                    ManifestErrorKind::InvalidValue,
                    format!("task `{task}`: unknown schema policy `{other}`"),
                )
                .at(at, "not a schema policy")
                .help("`schema = \"fixed\"` (the default: a changed schema fails the audit) or `schema = \"additive\"` (new nullable columns join the table)"),
            );
            return None;
        }
    };
    let retention = raw.table_retention.as_deref().map(|text| {
        v.duration(
            Some(text),
            std::time::Duration::ZERO,
            &["tasks", task, "output", "table_retention"],
        )
    });
    Some(TableFormat::Delta {
        schema: policy,
        retention,
    })
}

fn format_name(format: Format) -> &'static str {
    match format {
        Format::Csv => "CSV",
        Format::Jsonl => "JSON Lines",
        Format::Parquet => "Parquet",
    }
}

impl crate::store::delta::TableTask for crate::manifest::model::Task {
    fn dims(&self) -> &crate::partition::Dims {
        &self.dims
    }

    fn delta(&self) -> Option<crate::store::delta::Declared> {
        self.output
            .table
            .map(
                |TableFormat::Delta { schema, retention }| crate::store::delta::Declared {
                    schema,
                    retention,
                },
            )
    }
}
