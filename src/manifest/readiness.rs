//! `ready = { … }` of an external dataset: when a partition of it may be
//! read. The raw table as written and its validation into a [`Ready`]
//! (`model.rs`).

use schemars::JsonSchema;
use serde::Deserialize;

use indexmap::IndexMap;

use super::model::{ExternalDataset, InputSource, Ready, Task};
use super::task_env::EnvSpec;
use super::validator::Validator;
use super::{ManifestError, ManifestErrorKind};

/// What `watermark_at_least` compares the watermark with.
const MARKS: [&str; 1] = ["period_end"];

/// `ready`: one sensor. Kept flat (not a tagged enum) so that serde reports
/// unknown keys instead of guessing a variant; validation checks that
/// exactly one key is given.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("minProperties" = 1, "maxProperties" = 2))]
pub struct RawReady {
    /// Ready once this file exists (relative to the manifest, may use
    /// `{partition}`), e.g. `raw/{partition}/_SUCCESS`.
    pub file: Option<String>,
    /// Ready once the dataset's `watermark` (an RFC 3339 instant) has
    /// reached the partition period's end: `period_end`.
    #[schemars(extend("enum" = ["period_end"]))]
    pub watermark_at_least: Option<String>,
    /// Ready when this command (run in the manifest's directory, `{partition}`
    /// replaced in its words) exits 0; 1 means not yet, anything else is a
    /// sensor failure.
    #[schemars(length(min = 1))]
    pub command: Option<Vec<String>>,
    /// The environment of a `command` sensor, as a task's `env`: exactly
    /// its `pass` names of the engine's environment and its `set` values
    /// (`env:`/`file:` references are secrets). Without it, the engine's
    /// environment minus weir's secrets.
    pub env: Option<super::task_env::RawTaskEnv>,
}

impl Validator<'_, '_, '_, '_> {
    /// A task without a time dimension has no period end for a watermark
    /// to reach: reading a dataset that waits for one is an error.
    pub(super) fn watermark_sensors_need_time(
        &mut self,
        tasks: &IndexMap<String, Task>,
        datasets: &IndexMap<String, ExternalDataset>,
    ) {
        for task in tasks.values() {
            if task.dims.time_dim().is_some() {
                continue;
            }
            for (i, input) in task.inputs.iter().enumerate() {
                let waits = matches!(input.source, InputSource::External)
                    && datasets
                        .get(&input.dataset)
                        .is_some_and(|d| d.ready == Some(Ready::WatermarkAtPeriodEnd));
                if !waits {
                    continue;
                }
                let idx = i.to_string();
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::BadReady,
                        format!(
                            "task `{}` reads `{}`, which waits for its watermark to reach the period's end, but the task has no time dimension",
                            task.name, input.dataset
                        ),
                    )
                    .at(self.value(&["tasks", &task.name, "inputs", &idx]), "no period here")
                    .also(self.value(&["datasets", &input.dataset, "ready"]), "waits for the period's end")
                    .help("partition the task by a time scheme (`partitioned_by`), or give the dataset another sensor (`file` or `command`)"),
                );
            }
        }
    }

    /// The environment of dataset `name`'s sensor command (`ready.env`),
    /// which only a `command` sensor takes.
    pub(super) fn ready_env(&mut self, name: &str, raw: &RawReady) -> Option<EnvSpec> {
        let env = raw.env.as_ref()?;
        if raw.command.is_none() {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::BadReady,
                    format!("`ready.env` of dataset `{name}` is for a `command` sensor"),
                )
                .at(
                    self.key(&["datasets", name, "ready", "env"]),
                    "no command runs here",
                )
                .help("remove `env`, or check readiness with `command = [\"sh\", \"check.sh\"]`"),
            );
            return None;
        }
        let owner = format!("the sensor of dataset `{name}`");
        self.env_spec(&owner, &["datasets", name, "ready", "env"], Some(env))
    }

    /// The `ready` of dataset `name`; `watermark` says whether it declares
    /// one.
    pub(super) fn ready(&mut self, name: &str, raw: &RawReady, watermark: bool) -> Option<Ready> {
        let p = |k: &'static str| ["datasets", name, "ready", k];
        let given: Vec<&str> = [
            ("file", raw.file.is_some()),
            ("watermark_at_least", raw.watermark_at_least.is_some()),
            ("command", raw.command.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, present)| present.then_some(k))
        .collect();
        let help = "write one of `ready = { file = \"raw/{partition}/_SUCCESS\" }`, `ready = { watermark_at_least = \"period_end\" }` or `ready = { command = [\"sh\", \"check.sh\"] }`";
        match given.as_slice() {
            [] => {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::BadReady,
                        format!("`ready` of dataset `{name}` names no sensor"),
                    )
                    .at(self.value(&["datasets", name, "ready"]), "empty")
                    .help(help),
                );
                return None;
            }
            [_] => {}
            [first, second, ..] => {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::BadReady,
                        format!("`ready` of dataset `{name}` names more than one sensor"),
                    )
                    .at(self.key(&p(second)), "a second sensor")
                    .also(self.key(&p(first)), "first here")
                    .help(format!(
                        "one sensor per dataset: keep `{first}` or `{second}`; {help}"
                    )),
                );
                return None;
            }
        }
        if let Some(file) = &raw.file {
            if file.trim().is_empty() {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::EmptyValue,
                        format!("`ready.file` of dataset `{name}` is empty"),
                    )
                    .at(self.value(&p("file")), "empty")
                    .help(
                        "give a path relative to the manifest, e.g. \"raw/{partition}/_SUCCESS\"",
                    ),
                );
                return None;
            }
            return Some(Ready::File(file.clone()));
        }
        if let Some(mark) = &raw.watermark_at_least {
            if !MARKS.contains(&mark.as_str()) {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::BadReady,
                        format!("`watermark_at_least` of dataset `{name}` is `{mark}`, which is not a point weir knows"),
                    )
                    .at(self.value(&p("watermark_at_least")), "not `period_end`")
                    .help("write `watermark_at_least = \"period_end\"`: ready once the watermark has reached the end of the partition's period"),
                );
                return None;
            }
            if !watermark {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::BadReady,
                        format!("dataset `{name}` waits for its watermark but declares none"),
                    )
                    .at(self.key(&p("watermark_at_least")), "needs `watermark`")
                    .also(self.key(&["datasets", name]), "no `watermark` here")
                    .help("add `watermark = \"raw/{partition}.watermark\"`, a file holding an RFC 3339 instant such as \"2026-09-20T13:05:00Z\""),
                );
                return None;
            }
            return Some(Ready::WatermarkAtPeriodEnd);
        }
        let command = raw.command.as_ref()?;
        if command
            .first()
            .is_none_or(|program| program.trim().is_empty())
        {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::EmptyValue,
                    format!("`ready.command` of dataset `{name}` has no program"),
                )
                .at(self.value(&p("command")), "no program")
                .help("give the program and its arguments, e.g. [\"sh\", \"check.sh\", \"{partition}\"]"),
            );
            return None;
        }
        Some(Ready::Command(command.clone()))
    }
}
