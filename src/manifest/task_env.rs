//! `env = { pass = [...], set = { ... } }` of a task, a sensor command
//! (`ready = { command = [...], env = {...} }`) or a notify `command` target:
//! what its command may see besides weir's own `WEIR_*` variables (docs/guides/tasks.md,
//! "What a task can reach"). The environment itself is built in
//! `exec/env.rs`.

use std::path::PathBuf;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Deserialize;

use super::validator::Validator;
use super::ManifestError;
use super::ManifestErrorKind;

/// `env = { pass, set }` of a task, a sensor command or a notify command,
/// validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvSpec {
    /// Names of the engine's variables the task gets.
    pub pass: Vec<String>,
    /// Variables set for the task, in declaration order.
    pub set: Vec<(String, EnvValue)>,
}

/// A value of `env.set`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvValue {
    /// Written in the manifest.
    Literal(String),
    /// `env:NAME`: the engine's variable, a secret.
    Env(String),
    /// `file:PATH`: a file's content (relative to the manifest), a secret.
    File(PathBuf),
}

/// `env = { ... }` of a task, a sensor command or a notify command.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTaskEnv {
    /// Variables of the engine's environment the task gets, by name
    /// (e.g. `["PATH", "HOME"]`); no other variable of the engine's reaches it.
    #[serde(default)]
    pub pass: Vec<String>,
    /// Variables set for the task: a literal value, `"env:NAME"` (the
    /// engine's variable NAME) or `"file:PATH"` (the file's content, without
    /// a final newline; PATH relative to the manifest). Values read through
    /// `env:` and `file:` are secrets: redacted from logs, events and
    /// explain.
    #[serde(default)]
    pub set: IndexMap<String, String>,
}

/// `LEVEL`, `API_TOKEN`: a name a shell can export.
pub(crate) fn var_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a `set` value (or a header value) is not a reference weir can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EnvValueError {
    /// `env:` with nothing after it.
    #[error("`env:` names no variable")]
    NoVariable,
    /// `env:NAME` where NAME is not a variable name.
    #[error("`{name}` is not a variable name")]
    BadVariable {
        /// NAME as written.
        name: String,
    },
    /// `file:` with no path.
    #[error("`file:` names no file")]
    NoFile,
}

/// A `set` value: `env:NAME`, `file:PATH` or a literal.
pub(super) fn parse_value(text: &str) -> Result<EnvValue, EnvValueError> {
    if let Some(name) = text.strip_prefix("env:") {
        if name.is_empty() {
            return Err(EnvValueError::NoVariable);
        }
        if !var_name_ok(name) {
            return Err(EnvValueError::BadVariable {
                name: name.to_string(),
            });
        }
        return Ok(EnvValue::Env(name.to_string()));
    }
    if let Some(path) = text.strip_prefix("file:") {
        if path.trim().is_empty() {
            return Err(EnvValueError::NoFile);
        }
        return Ok(EnvValue::File(path.into()));
    }
    Ok(EnvValue::Literal(text.to_string()))
}

impl Validator<'_, '_, '_, '_> {
    /// `env` of task `task`, checked for names and reference syntax (whether
    /// a reference can be read is known only at launch).
    pub(super) fn task_env(&mut self, task: &str, raw: Option<&RawTaskEnv>) -> Option<EnvSpec> {
        let owner = format!("task `{task}`");
        self.env_spec(&owner, &["tasks", task, "env"], raw)
    }

    /// `env` of `owner` ("task `t`", "the sensor of dataset `raw`") at
    /// `at`, the path to the `env` table.
    pub(super) fn env_spec(
        &mut self,
        owner: &str,
        at: &[&str],
        raw: Option<&RawTaskEnv>,
    ) -> Option<EnvSpec> {
        let raw = raw?;
        let mut spec = EnvSpec::default();
        let reserved = |name: &str| name.starts_with("WEIR_");
        let path = |rest: &[&str]| -> Vec<String> {
            at.iter().chain(rest).map(|s| s.to_string()).collect()
        };
        for (i, name) in raw.pass.iter().enumerate() {
            let idx = i.to_string();
            let at = path(&["pass", idx.as_str()]);
            let at: Vec<&str> = at.iter().map(String::as_str).collect();
            if !var_name_ok(name) || reserved(name) {
                self.err(bad_name(owner, name, reserved(name)).at(self.value(&at), "not passed"));
            } else if !spec.pass.contains(name) {
                spec.pass.push(name.clone());
            }
        }
        for (name, text) in &raw.set {
            let at = path(&["set", name.as_str()]);
            let at: Vec<&str> = at.iter().map(String::as_str).collect();
            if !var_name_ok(name) || reserved(name) {
                self.err(bad_name(owner, name, reserved(name)).at(self.key(&at), "not set"));
                continue;
            }
            match parse_value(text) {
                Ok(value) => spec.set.push((name.clone(), value)),
                Err(why) => self.err(
                    ManifestError::new(
                        ManifestErrorKind::EnvReference,
                        format!("`env.set.{name}` of {owner}: {why}"),
                    )
                    .at(self.value(&at), "bad reference")
                    .help("write `\"env:NAME\"` for the engine's variable NAME, `\"file:/run/secrets/x\"` for a file's content, or a literal value"),
                ),
            }
        }
        Some(spec)
    }
}

fn bad_name(owner: &str, name: &str, reserved: bool) -> ManifestError {
    if reserved {
        ManifestError::new(
            ManifestErrorKind::EnvName,
            format!("{owner} declares `{name}` in `env`, but `WEIR_*` variables are weir's"),
        )
        .help("weir sets its own `WEIR_*` variables for every task; choose another name")
    } else {
        ManifestError::new(
            ManifestErrorKind::EnvName,
            format!("`{name}` in `env` of {owner} is not an environment variable name"),
        )
        .help("use letters, digits and `_`, not starting with a digit, e.g. `API_TOKEN`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_literals() {
        assert_eq!(parse_value("info"), Ok(EnvValue::Literal("info".into())));
        assert_eq!(
            parse_value("env:API_TOKEN"),
            Ok(EnvValue::Env("API_TOKEN".into()))
        );
        assert_eq!(
            parse_value("file:/run/secrets/x"),
            Ok(EnvValue::File("/run/secrets/x".into()))
        );
        assert_eq!(parse_value("env:"), Err(EnvValueError::NoVariable));
        assert_eq!(
            parse_value("env:API TOKEN"),
            Err(EnvValueError::BadVariable {
                name: "API TOKEN".into()
            })
        );
        assert_eq!(parse_value("file: "), Err(EnvValueError::NoFile));
        assert!(var_name_ok("_A1") && !var_name_ok("1A") && !var_name_ok("A-B"));
    }
}
