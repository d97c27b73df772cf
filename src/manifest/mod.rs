//! Manifests: TOML in, a validated [`Manifest`] or every problem out.
//!
//! ```text
//!  source ──parse (toml, spans kept)──► document ──per-entry serde──► raw sections
//!                                                                        │
//!        Manifest ◄──────────── validate (names, DAG, ranges) ───────────┘
//! ```
//!
//! Each section entry (`[tasks.load]`, `[pools.backfill]` …) deserializes on
//! its own, so a typo in one task does not hide an unknown pool in another:
//! every independent problem in a file is reported at once, each a miette
//! diagnostic pointing at the key or value in the source.

mod backfills;
mod de;
mod entry;
mod error;
mod executors;
pub mod fingerprint;
mod gates;
mod locate;
mod model;
mod notify;
mod partitions;
pub mod raw;
mod readiness;
mod sections;
mod suggest;
mod task_env;
mod tasks;
mod validate;
mod validator;

pub mod duration;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use miette::NamedSource;
use serde::de::DeserializeOwned;
use toml::de::{DeTable, DeValue, ValueDeserializer};
use toml::Spanned;

pub use error::{render_warnings, ManifestError, ManifestErrorKind, ManifestErrors};
pub use executors::{ClusterEnd, Executor, ExecutorKind, Resources, LOCAL_EXECUTOR};
pub use model::*;
pub use notify::{HttpEndpoint, NotifyKind, NotifySink, NotifyTarget};
pub use suggest::ticked;
pub use task_env::{EnvSpec, EnvValue};

pub(crate) use entry::Entry;
pub(crate) use sections::Sections;

use locate::Locator;

/// The top-level sections a manifest may have.
const SECTIONS: [&str; 10] = [
    "pipeline",
    "partitions",
    "pools",
    "retry",
    "datasets",
    "executors",
    "tasks",
    "backfills",
    "lineage",
    "notify",
];

impl Manifest {
    /// Reads and validates the manifest at `path`; an S3 warehouse stages in
    /// the user's cache ([`Manifest::load_with_staging`]).
    pub fn load(path: &Path) -> Result<Manifest, ManifestErrors> {
        Manifest::load_with_staging(path, None)
    }

    /// [`Manifest::load`], an S3 warehouse staging under `staging`
    /// (`WEIR_STAGING`, read at the edge) when given
    /// ([`staging_dir`]).
    pub fn load_with_staging(
        path: &Path,
        staging: Option<&Path>,
    ) -> Result<Manifest, ManifestErrors> {
        let file = path.display().to_string();
        let source =
            crate::store::user_file::read_limited(path, crate::store::user_file::MANIFEST_LIMIT)
                .map_err(|e| ManifestErrors {
                    file: file.clone(),
                    errors: vec![ManifestError::new(
                ManifestErrorKind::Unreadable,
                format!("cannot read `{file}`: {e}"),
            )
            .help("check the path; manifests are TOML files such as `pipelines/atlasmart.toml`")],
                })?;
        Manifest::parse_with_staging(&file, &source, path, staging)
    }

    /// Validates `source`, the text of the manifest at `path`; `file` names
    /// it in diagnostics.
    pub fn parse(file: &str, source: &str, path: &Path) -> Result<Manifest, ManifestErrors> {
        Manifest::parse_with_staging(file, source, path, None)
    }

    /// [`Manifest::parse`], an S3 warehouse staging under `staging` when
    /// given.
    pub fn parse_with_staging(
        file: &str,
        source: &str,
        path: &Path,
        staging: Option<&Path>,
    ) -> Result<Manifest, ManifestErrors> {
        let named = NamedSource::new(file, Arc::<str>::from(source));
        let fail = |errors: Vec<ManifestError>| ManifestErrors {
            file: file.to_string(),
            errors: errors
                .into_iter()
                .map(|e| e.with_source(named.clone()))
                .collect(),
        };
        let (document, syntax) = DeTable::parse_recoverable(source);
        // Recovery after a syntax error mostly finds echoes of the first one.
        if let Some(first) = syntax.first() {
            return Err(fail(vec![syntax_error(first)]));
        }
        let document = document.into_inner();
        let locator = Locator::new(&document);
        let mut errors = Vec::new();
        let sections = read_sections(&document, &mut errors);
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        let context = validator::Context {
            locator: &locator,
            path,
            dir: &dir,
            now: crate::clock::now(),
            staging,
        };
        let manifest = validate::validate(&sections, &context, &mut errors);
        errors.sort_by_key(|e| e.primary.as_ref().map_or(0, |(s, _)| s.start));
        match manifest {
            Some(mut m) if errors.is_empty() => {
                m.warnings = std::mem::take(&mut m.warnings)
                    .into_iter()
                    .map(|w| w.with_source(named.clone()))
                    .collect();
                Ok(m)
            }
            _ => Err(fail(errors)),
        }
    }
}

fn syntax_error(e: &toml::de::Error) -> ManifestError {
    let mut lines = e.message().trim().lines();
    let first = lines.next().unwrap_or("syntax error").trim_end_matches('.');
    let rest: Vec<&str> = lines.map(str::trim).filter(|l| !l.is_empty()).collect();
    let error = ManifestError::new(
        ManifestErrorKind::Syntax,
        format!("TOML syntax error: {first}"),
    )
    .at(e.span().unwrap_or(0..0), "here")
    .help(if rest.is_empty() {
        "see https://toml.io for the syntax of tables, strings and arrays".to_string()
    } else {
        rest.join("; ")
    });
    error
}

fn read_sections(document: &DeTable<'_>, errors: &mut Vec<ManifestError>) -> Sections {
    let mut sections = Sections::default();
    for (key, value) in document {
        let name = key.get_ref().as_ref();
        match name {
            "pipeline" => sections.pipeline = deserialize(value, errors),
            "partitions" => sections.partitions = entries(name, value, errors),
            "pools" => sections.pools = entries(name, value, errors),
            "retry" => sections.retry = entries(name, value, errors),
            "datasets" => sections.datasets = entries(name, value, errors),
            "executors" => sections.executors = entries(name, value, errors),
            "tasks" => sections.tasks = entries(name, value, errors),
            "backfills" => sections.backfills = entries(name, value, errors),
            "lineage" => sections.lineage = deserialize(value, errors),
            "notify" => sections.notify = entries(name, value, errors),
            other => errors.push(
                ManifestError::new(
                    ManifestErrorKind::UnknownSection,
                    format!("unknown section `{other}`"),
                )
                .at(key.span(), "not a manifest section")
                .help(suggest::closest(other, SECTIONS).map_or_else(
                    || format!("sections are {}", ticked(&SECTIONS)),
                    |s| format!("did you mean `{s}`?"),
                )),
            ),
        }
    }
    for required in ["pipeline", "tasks"] {
        if !document.iter().any(|(k, _)| k.get_ref() == required) {
            errors.push(
                ManifestError::new(
                    ManifestErrorKind::MissingSection,
                    format!("missing required section `[{required}]`"),
                )
                .at(0..0, "the manifest starts here")
                .help(match required {
                    "pipeline" => "add `[pipeline]` with `name`, `code_version` and `warehouse`",
                    _ => "add at least one `[tasks.NAME]` table",
                }),
            );
        }
    }
    sections
}

fn entries<T: DeserializeOwned>(
    section: &str,
    value: &Spanned<DeValue<'_>>,
    errors: &mut Vec<ManifestError>,
) -> Vec<Entry<T>> {
    let Some(table) = value.get_ref().as_table() else {
        errors.push(
            ManifestError::new(
                ManifestErrorKind::WrongType,
                format!("wrong type: `{section}` must be a table of named entries"),
            )
            .at(
                value.span(),
                format!("found {}", value.get_ref().type_str()),
            )
            .help(format!("write entries as `[{section}.NAME]` tables")),
        );
        return Vec::new();
    };
    table
        .iter()
        .map(|(key, value)| Entry {
            name: key.get_ref().to_string(),
            raw: deserialize(value, errors),
        })
        .collect()
}

fn deserialize<T: DeserializeOwned>(
    value: &Spanned<DeValue<'_>>,
    errors: &mut Vec<ManifestError>,
) -> Option<T> {
    match T::deserialize(ValueDeserializer::from(value.clone())) {
        Ok(v) => Some(v),
        Err(e) => {
            let (message, help) = error::humanize_serde(e.message());
            let kind = if message.starts_with("unknown key") {
                ManifestErrorKind::UnknownKey
            } else if message.starts_with("missing required key") {
                ManifestErrorKind::MissingKey
            } else if message.starts_with("wrong type") {
                ManifestErrorKind::WrongType
            } else {
                ManifestErrorKind::InvalidValue
            };
            let label = match kind {
                ManifestErrorKind::UnknownKey => "unknown key",
                ManifestErrorKind::MissingKey => "in this table",
                ManifestErrorKind::WrongType => "wrong type",
                _ => "invalid",
            };
            let mut error = ManifestError::new(kind, message).at(e.span().unwrap_or(0..0), label);
            if let Some(help) = help {
                error = error.help(help);
            }
            errors.push(error);
            None
        }
    }
}

/// "did you mean …" help for a task name the manifest does not declare.
pub fn unknown_task_help(manifest: &Manifest, name: &str) -> String {
    suggest::unknown_help("task", name, manifest.tasks.keys().map(String::as_str))
}

/// The JSON Schema of a manifest, generated from the raw types; committed as
/// `schemas/pipeline.schema.json` (a test keeps the two equal).
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(raw::RawManifest);
    serde_json::to_string_pretty(&schema).expect("a schema always serializes") + "\n"
}
