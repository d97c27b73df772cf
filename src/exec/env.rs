//! A task's environment (docs/guides/tasks.md, "What a task can reach"), built for
//! `launch::TaskLaunch`, the one builder of what `run`, `verify` and every
//! executor launch.
//!
//! ```text
//!  task has `env`?  ── yes ──► its `pass` names from the engine's environment
//!        │                     + its `set` (literals; `env:`/`file:` read now, secrets)
//!        no                    + weir's WEIR_* contract
//!        ▼
//!  the engine's environment, minus the store's credentials (S3 warehouse)
//!        + weir's WEIR_* contract
//! ```
//!
//! Secret values (read through `env:` or `file:`: `crate::secrets`) are
//! redacted from the attempt's logs ([`TaskEnv::secrets`]) before anything
//! reads a tail of them, so events, explain, lineage and the evidence
//! uploaded to a remote warehouse never hold them.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use crate::manifest::{EnvSpec, EnvValue, Manifest, Task};
use crate::secrets::{read_secret_file, Secrets};

/// Credential variables of an S3 warehouse's store: the task of an S3
/// warehouse never inherits them (an explicit `pass` still can). Each is
/// something the AWS SDKs and object_store read to authenticate: keys,
/// session tokens, the web-identity and container-credential endpoints, and
/// the profile and shared files that name other keys.
pub const STORE_CREDENTIALS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
];

/// One input of the `WEIR_*` contract.
pub struct ContractInput<'a> {
    /// Input dataset name (`WEIR_INPUT_<NAME>`).
    pub name: &'a str,
    /// Where the task reads it.
    pub location: &'a Path,
    /// Its pinned watermark (`WEIR_WATERMARK_<NAME>`).
    pub watermark: Option<&'a str>,
}

impl<'a> From<&'a crate::inputs::materialize::Materialized> for ContractInput<'a> {
    fn from(input: &'a crate::inputs::materialize::Materialized) -> Self {
        ContractInput {
            name: &input.name,
            location: &input.location,
            watermark: input.watermark.as_deref(),
        }
    }
}

/// Who launches the task: everything of the `WEIR_*` contract that is not
/// a path and differs between `weir run`'s attempt and `weir verify`'s
/// rerun of the same partition. Kept in one type so that nothing else can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher<'a> {
    /// Attempt `attempt` of run `run_id`, holding fencing token `token`:
    /// the task's current `code_version`.
    Attempt {
        /// `WEIR_RUN_ID`.
        run_id: &'a str,
        /// `WEIR_ATTEMPT` (1, 2, …).
        attempt: u32,
        /// `WEIR_TOKEN`.
        token: u64,
    },
    /// `weir verify`'s rerun `id` (`verify-…`) of a publication made with
    /// `code_version`: no attempt and no token (both 0, nothing is
    /// published), and the publication's code_version, so a task that
    /// stamps rows stamps them as the publication did.
    Rerun {
        /// `WEIR_RUN_ID`.
        id: &'a str,
        /// `WEIR_CODE_VERSION`: the commit record's.
        code_version: &'a str,
    },
}

/// The launch-specific values of weir's `WEIR_*` contract: who launches,
/// and the paths of this launch's own staging.
pub struct Contract<'a> {
    /// `WEIR_RUN_ID`, `WEIR_ATTEMPT`, `WEIR_TOKEN`, `WEIR_CODE_VERSION`.
    pub launcher: Launcher<'a>,
    /// `WEIR_PARTITION` (and `WEIR_PARTITION_<SCHEME>` per dimension).
    pub partition: &'a str,
    /// `WEIR_OUTPUT_DIR`.
    pub output_dir: &'a Path,
    /// `WEIR_INPUT_<NAME>` and `WEIR_WATERMARK_<NAME>`.
    pub inputs: Vec<ContractInput<'a>>,
}

/// A task's whole environment: nothing else reaches its command.
#[derive(Debug, Clone, Default)]
pub struct TaskEnv {
    /// The engine's variables the task gets.
    inherited: Vec<(OsString, OsString)>,
    /// weir's `WEIR_*` variables, then the task's `set`.
    vars: Vec<(String, String)>,
    /// Names in `vars` whose values are secrets.
    secret_names: Vec<String>,
    /// Secret values (`crate::secrets`).
    secrets: Secrets,
}

/// A reference in `env.set` that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// `env:NAME` of a variable the engine does not have (or not UTF-8).
    #[error("`env.set.{var}` of {owner} reads `{name}` from weir's environment, which {why}")]
    Unset {
        /// Whose: "task `load`", "the sensor of dataset `raw`".
        owner: String,
        /// The variable set for the command.
        var: String,
        /// The engine's variable.
        name: String,
        /// "is not set" or "is not UTF-8".
        why: &'static str,
    },
    /// `file:PATH` that cannot be read.
    #[error("`env.set.{var}` of {owner} reads `{path}`, which cannot be read: {why}")]
    Unreadable {
        /// Whose: "task `load`", "the sensor of dataset `raw`".
        owner: String,
        /// The variable set for the command.
        var: String,
        /// The file, as resolved.
        path: String,
        /// Why.
        why: crate::secrets::SecretFileError,
    },
}

impl TaskEnv {
    /// An environment of exactly `vars` (tests, and callers with no task).
    pub fn exactly(vars: Vec<(String, String)>) -> TaskEnv {
        TaskEnv {
            vars,
            ..TaskEnv::default()
        }
    }

    /// Adds (or replaces) a variable weir sets.
    pub fn set(&mut self, name: &str, value: &str) {
        self.vars.retain(|(k, _)| k != name);
        self.vars.push((name.to_string(), value.to_string()));
    }

    /// Every variable the command sees; weir's and `set` win over inherited
    /// ones of the same name.
    pub fn all(&self) -> Vec<(OsString, OsString)> {
        let mut all: Vec<(OsString, OsString)> = self
            .inherited
            .iter()
            .filter(|(k, _)| !self.vars.iter().any(|(name, _)| OsStr::new(name) == k))
            .cloned()
            .collect();
        all.extend(
            self.vars
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v))),
        );
        all
    }

    /// weir's and `set` variables that are not secrets: what may be written
    /// down (a batch job's environment file).
    pub fn public_vars(&self) -> Vec<(String, String)> {
        self.vars
            .iter()
            .filter(|(k, _)| !self.secret_names.contains(k))
            .cloned()
            .collect()
    }

    /// Its secret values: what is redacted from its logs.
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }
}

/// `task`'s environment for one attempt (or `verify`'s rerun): see the
/// module doc. A `set` reference that cannot be read is an error, before
/// anything is launched. Only `launch::TaskLaunch` calls it: `run`,
/// `verify` and the executors get their environment from there.
pub(super) fn build(
    manifest: &Manifest,
    task: &Task,
    contract: &Contract<'_>,
) -> Result<TaskEnv, EnvError> {
    build_from(
        manifest,
        task,
        contract,
        &std::env::vars_os().collect::<Vec<_>>(),
    )
}

/// [`build`] over a given engine environment (tests).
pub(super) fn build_from(
    manifest: &Manifest,
    task: &Task,
    contract: &Contract<'_>,
    engine: &[(OsString, OsString)],
) -> Result<TaskEnv, EnvError> {
    let owner = format!("task `{}`", task.name);
    let weir = weir_vars(manifest, task, contract);
    let withheld = withheld(manifest);
    assemble(
        &manifest.dir,
        &withheld,
        task.env.as_ref(),
        &owner,
        weir,
        engine,
    )
}

/// The environment of a command weir starts that is not a task's (a
/// sensor's, a notify target's): declared by `spec`, or the engine's minus
/// `withheld` (the manifest's [`withheld`]); then `weir`'s own variables.
/// `file:` references are relative to `dir`; `owner` names it in errors
/// ("the sensor of dataset `raw`").
pub fn for_command(
    dir: &Path,
    withheld: &[String],
    spec: Option<&EnvSpec>,
    owner: &str,
    weir: Vec<(String, String)>,
) -> Result<TaskEnv, EnvError> {
    let engine: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    assemble(dir, withheld, spec, owner, weir, &engine)
}

/// What a command without `env` never inherits of the engine's
/// environment, whatever started it (a task, a sensor, a notify target):
/// `WEIR_CONSOLE_TOKEN`, every variable the manifest reads a secret from
/// (`env:NAME` in any `env.set`, notify or lineage header), and, for a
/// warehouse on S3, the store's credentials ([`STORE_CREDENTIALS`]). A
/// command's `env.pass` may still name one: that is the manifest's say.
pub fn withheld(manifest: &Manifest) -> Vec<String> {
    let mut names: Vec<String> = vec![CONSOLE_TOKEN.to_string()];
    if manifest.pipeline.remote.is_some() {
        names.extend(STORE_CREDENTIALS.iter().map(|c| c.to_string()));
    }
    let sets = manifest
        .tasks
        .values()
        .filter_map(|t| t.env.as_ref())
        .chain(
            manifest
                .datasets
                .values()
                .filter_map(|d| d.sensor_env.as_ref()),
        )
        .chain(manifest.notify.values().filter_map(|n| n.env.as_ref()))
        .flat_map(|spec| spec.set.iter().map(|(_, v)| v));
    let notify_headers = manifest.notify.values().filter_map(|n| match &n.sink {
        crate::manifest::NotifySink::Http(e) => Some(e),
        crate::manifest::NotifySink::Command(_) => None,
    });
    let lineage_headers = manifest.lineage.iter().filter_map(|l| match &l.sink {
        crate::manifest::LineageSink::Http(e) => Some(e),
        crate::manifest::LineageSink::File(_) => None,
    });
    let headers = notify_headers
        .chain(lineage_headers)
        .flat_map(|e| e.headers.iter().map(|(_, v)| v));
    for value in sets.chain(headers) {
        if let EnvValue::Env(name) = value {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    names
}

/// The console's token (`weir console`, `weir serve --console`).
pub const CONSOLE_TOKEN: &str = "WEIR_CONSOLE_TOKEN";

/// The one builder of a command's environment: see [`for_command`].
fn assemble(
    dir: &Path,
    withheld: &[String],
    spec: Option<&EnvSpec>,
    owner: &str,
    weir: Vec<(String, String)>,
    engine: &[(OsString, OsString)],
) -> Result<TaskEnv, EnvError> {
    let mut env = TaskEnv::default();
    match spec {
        Some(spec) => {
            env.inherited = engine
                .iter()
                .filter(|(k, _)| spec.pass.iter().any(|p| OsStr::new(p) == k))
                .cloned()
                .collect();
        }
        None => {
            env.inherited = engine
                .iter()
                .filter(|(k, _)| !withheld.iter().any(|w| OsStr::new(w) == k))
                .cloned()
                .collect();
        }
    }
    env.vars = weir;
    for (name, value) in spec.iter().flat_map(|s| s.set.iter()) {
        let (value, secret) = set_value(dir, owner, name, value, engine)?;
        if secret {
            env.secret_names.push(name.clone());
            env.secrets.add(&value);
        }
        env.set(name, &value);
    }
    Ok(env)
}

/// One `env.set` value of `owner`, read; with whether it is a secret.
fn set_value(
    dir: &Path,
    owner: &str,
    name: &str,
    value: &EnvValue,
    engine: &[(OsString, OsString)],
) -> Result<(String, bool), EnvError> {
    Ok(match value {
        EnvValue::Literal(v) => (v.clone(), false),
        EnvValue::Env(from) => {
            let found = engine.iter().find(|(k, _)| k == from.as_str());
            let unset = |why| EnvError::Unset {
                owner: owner.to_string(),
                var: name.to_string(),
                name: from.clone(),
                why,
            };
            match found {
                None => return Err(unset("is not set")),
                Some((_, v)) => (
                    v.to_str().ok_or_else(|| unset("is not UTF-8"))?.to_string(),
                    true,
                ),
            }
        }
        EnvValue::File(path) => {
            let path = dir.join(path);
            let path = std::path::absolute(&path).unwrap_or(path);
            let unreadable = |why| EnvError::Unreadable {
                owner: owner.to_string(),
                var: name.to_string(),
                path: path.display().to_string(),
                why,
            };
            (read_secret_file(&path).map_err(unreadable)?, true)
        }
    })
}

/// Every variable weir sets for a task, with what it holds: the one list
/// the code names them from ([`listed`]) and `docs/reference/task-environment.md`
/// is generated from. `<NAME>` stands for the part a manifest's name gives.
pub const TASK_VARIABLES: &[(&str, &str)] = &[
    ("WEIR_RUN_ID", "the run id (`verify-...` for a `weir verify` rerun)"),
    ("WEIR_PIPELINE", "the pipeline name"),
    ("WEIR_TASK", "the task name"),
    ("WEIR_PARTITION", "the partition key, e.g. `2026-09-20`, `eu|2026-09-20`, or `all` (unpartitioned)"),
    ("WEIR_PARTITION_<SCHEME>", "per dimension, the scheme name upper-cased: its part of the key (`WEIR_PARTITION_REGION=eu`)"),
    ("WEIR_ATTEMPT", "1 for the first attempt, then 2, 3 ... (0 for a `weir verify` rerun)"),
    ("WEIR_TOKEN", "this attempt's fencing token (0 for a `weir verify` rerun)"),
    ("WEIR_OUTPUT_DIR", "the attempt's private staging directory: write the output files here"),
    ("WEIR_INPUT_<NAME>", "per input, NAME upper-cased with `_` for other characters: a private, read-only copy of the pinned bytes (a file for an external input, a directory for an upstream one)"),
    ("WEIR_WATERMARK_<NAME>", "per external input that declares a `watermark`: the source's committed position as pinned in the input snapshot"),
    ("WEIR_CODE_VERSION", "the task's `code_version` (its own, or the pipeline's)"),
    ("WEIR_PARTITIONS", "a batched task (`batch = { max_partitions = N }`): the batch's partition keys, one a line, in order; `WEIR_OUTPUT_DIR/<key>/` and `WEIR_INPUT_<NAME>/<key>` are each key's"),
    (crate::process::tree::TAG_VAR, "local executor: this launch's tag, inherited by every process of the task, by which weir finds them all; leave it alone"),
];

/// `name` (or a prefix `WEIR_INPUT_` of a `<NAME>` entry) as
/// [`TASK_VARIABLES`] lists it: a variable the code sets is one the
/// reference shows.
pub(crate) fn listed(name: &'static str) -> &'static str {
    debug_assert!(
        TASK_VARIABLES
            .iter()
            .any(|(v, _)| *v == name || v.split('<').next() == Some(name)),
        "{name} is set for tasks and missing from TASK_VARIABLES"
    );
    name
}

/// weir's own variables ([`TASK_VARIABLES`]).
fn weir_vars(manifest: &Manifest, task: &Task, c: &Contract<'_>) -> Vec<(String, String)> {
    let (run_id, attempt, token, code_version) = match c.launcher {
        Launcher::Attempt {
            run_id,
            attempt,
            token,
        } => (run_id, attempt, token, task.code_version.as_str()),
        Launcher::Rerun { id, code_version } => (id, 0, 0, code_version),
    };
    let mut env = vec![
        (listed("WEIR_RUN_ID").to_string(), run_id.to_string()),
        (
            listed("WEIR_PIPELINE").into(),
            manifest.pipeline.name.clone(),
        ),
        (listed("WEIR_TASK").into(), task.name.clone()),
        (listed("WEIR_PARTITION").into(), c.partition.to_string()),
        (listed("WEIR_ATTEMPT").into(), attempt.to_string()),
        (listed("WEIR_TOKEN").into(), token.to_string()),
        (listed("WEIR_OUTPUT_DIR").into(), absolute(c.output_dir)),
        (listed("WEIR_CODE_VERSION").into(), code_version.to_string()),
    ];
    env.extend(partition_vars(&task.dims, c.partition));
    for input in &c.inputs {
        let var = input_var(input.name);
        env.push((var.clone(), absolute(input.location)));
        if let Some(w) = input.watermark {
            env.push((
                var.replacen(listed("WEIR_INPUT_"), listed("WEIR_WATERMARK_"), 1),
                w.to_string(),
            ));
        }
    }
    env
}

/// `raw_orders` → `WEIR_INPUT_RAW_ORDERS`.
pub fn input_var(dataset: &str) -> String {
    format!("{}{}", listed("WEIR_INPUT_"), var_suffix(dataset))
}

/// `WEIR_PARTITION_<SCHEME>` per dimension of a task's key
/// (`WEIR_PARTITION_REGION=eu`).
pub fn partition_vars(dims: &crate::partition::Dims, key: &str) -> Vec<(String, String)> {
    let Some(parts) = dims.split(key) else {
        return Vec::new();
    };
    dims.0
        .iter()
        .zip(parts)
        .map(|(d, part)| {
            (
                format!("{}{}", listed("WEIR_PARTITION_"), var_suffix(&d.name)),
                part.to_string(),
            )
        })
        .collect()
}

/// A name upper-cased with `_` for every character a variable name cannot
/// hold.
fn var_suffix(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(warehouse: &str, env: &str) -> Manifest {
        let text = format!(
            "[pipeline]\nname = \"p\"\ncode_version = \"1\"\nwarehouse = \"{warehouse}\"\n\n\
             [tasks.t]\ncommand = [\"true\"]\noutput = {{ dataset = \"o\", grain = [\"id\"] }}\n\
             partitioned_by = []\n{env}\n"
        );
        Manifest::parse("m.toml", &text, Path::new("/m/m.toml")).unwrap()
    }

    fn built(m: &Manifest, engine: &[(&str, &str)]) -> Vec<(String, String)> {
        let contract = Contract {
            launcher: Launcher::Attempt {
                run_id: "r",
                attempt: 1,
                token: 7,
            },
            partition: "all",
            output_dir: Path::new("/out"),
            inputs: Vec::new(),
        };
        let engine: Vec<(OsString, OsString)> =
            engine.iter().map(|(k, v)| (k.into(), v.into())).collect();
        let mut all: Vec<(String, String)> = build_from(m, &m.tasks["t"], &contract, &engine)
            .unwrap()
            .all()
            .into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .filter(|(k, _)| !k.starts_with("WEIR_") || k == "WEIR_TOKEN")
            .collect();
        all.sort();
        all
    }

    // The store's credentials stay with the engine on S3;
    // `env` gives exactly what it declares; weir's variables win
    #[test]
    fn environment_by_warehouse_and_declaration() {
        let engine = [
            ("AWS_SECRET_ACCESS_KEY", "k"),
            ("AWS_REGION", "eu"),
            ("HOME", "/h"),
            ("WEIR_TOKEN", "forged"),
        ];
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            built(&manifest("s3://b/w", ""), &engine),
            pairs(&[("AWS_REGION", "eu"), ("HOME", "/h"), ("WEIR_TOKEN", "7")])
        );
        assert_eq!(
            built(&manifest("wh", ""), &engine),
            pairs(&[
                ("AWS_REGION", "eu"),
                ("AWS_SECRET_ACCESS_KEY", "k"),
                ("HOME", "/h"),
                ("WEIR_TOKEN", "7")
            ])
        );
        let declared = manifest(
            "s3://b/w",
            "env = { pass = [\"HOME\", \"ABSENT\"], set = { LEVEL = \"info\", K = \"env:AWS_SECRET_ACCESS_KEY\" } }",
        );
        assert_eq!(
            built(&declared, &engine),
            pairs(&[
                ("HOME", "/h"),
                ("K", "k"),
                ("LEVEL", "info"),
                ("WEIR_TOKEN", "7")
            ])
        );
    }
}
