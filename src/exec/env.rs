//! A task's environment (README, "What a task can reach"), built for
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
//! Secret values (read through `env:` or `file:`) are redacted from the
//! attempt's logs ([`TaskEnv::redact_file`]) before anything reads a tail of
//! them, so events, explain, lineage and the evidence uploaded to a remote
//! warehouse never hold them.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::path::Path;

use crate::manifest::{EnvSpec, EnvValue, Manifest, Task};
use crate::store::user_file;

/// What a secret value is replaced with.
pub const REDACTED: &str = "[redacted]";

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
    /// Secret values, longest first.
    secrets: Vec<String>,
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
        /// The OS's reason.
        why: String,
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

    /// No variables, only `secrets` to redact (evidence read later, what
    /// a notification target's headers hold).
    pub fn redacting(mut secrets: Vec<String>) -> TaskEnv {
        secrets.retain(|s| !s.is_empty());
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        TaskEnv {
            secrets,
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
    /// down (a Slurm job's `job.env`).
    pub fn public_vars(&self) -> Vec<(String, String)> {
        self.vars
            .iter()
            .filter(|(k, _)| !self.secret_names.contains(k))
            .cloned()
            .collect()
    }

    /// Whether any value is a secret.
    pub fn has_secrets(&self) -> bool {
        !self.secrets.is_empty()
    }

    /// `text` with every secret value replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }

    /// Rewrites the file at `path` with every secret value replaced, in
    /// bounded memory (a task's log may be gigabytes); untouched when it
    /// holds none. A missing file is fine.
    pub fn redact_file(&self, path: &Path) -> std::io::Result<()> {
        if self.secrets.is_empty() {
            return Ok(());
        }
        let mut input = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut temp_name = path.as_os_str().to_owned();
        temp_name.push(".redacting");
        let temp = Path::new(&temp_name);
        let mut out = std::io::BufWriter::new(std::fs::File::create(temp)?);
        let found = redact_stream(&mut input, &mut out, &self.secrets).and_then(|found| {
            out.flush()?;
            Ok(found)
        });
        drop(out);
        match found {
            Ok(true) => std::fs::rename(temp, path),
            Ok(false) => std::fs::remove_file(temp),
            Err(e) => {
                let _ = std::fs::remove_file(temp);
                Err(e)
            }
        }
    }
}

/// Copies `input` to `out` with every secret replaced; whether one was found.
fn redact_stream(
    input: &mut impl Read,
    out: &mut impl Write,
    secrets: &[String],
) -> std::io::Result<bool> {
    // A match that starts before the last `keep` bytes of the buffer ends
    // inside it: only the tail can hold the start of one still cut off.
    let keep = secrets.iter().map(String::len).max().unwrap_or(1) - 1;
    let finders: Vec<memchr::memmem::Finder<'_>> = secrets
        .iter()
        .map(|s| memchr::memmem::Finder::new(s.as_bytes()))
        .collect();
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let mut found = false;
    loop {
        let n = input.read(&mut chunk)?;
        let eof = n == 0;
        pending.extend_from_slice(&chunk[..n]);
        loop {
            // The earliest match; the longest of those starting there.
            let first = finders
                .iter()
                .filter_map(|f| f.find(&pending).map(|at| (at, f.needle().len())))
                .min_by_key(|&(at, len)| (at, std::cmp::Reverse(len)));
            match first {
                // A longer secret may start here (or before) and end in
                // bytes not read yet: decided when they are.
                Some((at, _)) if !eof && pending.len() - at <= keep => break,
                Some((at, len)) => {
                    found = true;
                    out.write_all(&pending[..at])?;
                    out.write_all(REDACTED.as_bytes())?;
                    pending.drain(..at + len);
                }
                None => break,
            }
        }
        if eof {
            out.write_all(&pending)?;
            return Ok(found);
        }
        let safe = pending.len().saturating_sub(keep);
        out.write_all(&pending[..safe])?;
        pending.drain(..safe);
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
            if !value.is_empty() && !env.secrets.contains(&value) {
                env.secrets.push(value.clone());
            }
        }
        env.set(name, &value);
    }
    // Longest first: a secret that contains another is replaced whole.
    env.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
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
            let unreadable = |why: String| EnvError::Unreadable {
                owner: owner.to_string(),
                var: name.to_string(),
                path: path.display().to_string(),
                why,
            };
            (read_secret_file(&path).map_err(unreadable)?, true)
        }
    })
}

/// The secret values of `task` this process can read (unreadable ones
/// left out), as a [`TaskEnv`] that only redacts: for evidence an engine
/// never redacted (it was killed while the command ran), read by `explain`.
pub fn readable_secrets(manifest: &Manifest, task: &Task) -> TaskEnv {
    let values = task.env.iter().flat_map(|s| s.set.iter()).map(|(_, v)| v);
    TaskEnv::redacting(
        values
            .filter_map(|v| read_value(v, &manifest.dir).ok())
            .filter(|(_, secret)| *secret)
            .map(|(value, _)| value)
            .collect(),
    )
}

/// Every secret value of `manifest` this process can read: each task's
/// `env:`/`file:` values and the headers of `[notify]` targets and
/// `[lineage]`, as a [`TaskEnv`] that only redacts. A task may write any of
/// them into its data (one without `env` inherits the engine's variables, a
/// header's `env:` one included), and a gate failure quotes data: the
/// engine redacts what it says about data with these.
pub fn known_secrets(manifest: &Manifest) -> TaskEnv {
    let tasks = manifest
        .tasks
        .values()
        .flat_map(|task| task.env.iter().flat_map(|s| s.set.iter()))
        .map(|(_, value)| value);
    let endpoints = manifest
        .notify
        .values()
        .filter_map(|target| match &target.sink {
            crate::manifest::NotifySink::Http(endpoint) => Some(endpoint),
            crate::manifest::NotifySink::Command(_) => None,
        })
        .chain(manifest.lineage.iter().filter_map(|l| match &l.sink {
            crate::manifest::LineageSink::Http(endpoint) => Some(endpoint),
            crate::manifest::LineageSink::File(_) => None,
        }));
    let headers = endpoints.flat_map(|e| e.headers.iter().map(|(_, value)| value));
    TaskEnv::redacting(
        tasks
            .chain(headers)
            .filter_map(|v| read_value(v, &manifest.dir).ok())
            .filter(|(_, secret)| *secret)
            .map(|(value, _)| value)
            .collect(),
    )
}

/// One value of the manifest that may be a reference (a task's `env.set`,
/// an HTTP header of a notification target or `[lineage]`): a literal as
/// written, `env:NAME` from this process's environment, `file:PATH` (relative
/// to `dir`) without its final newline. With whether it is a secret. The
/// error says which reference could not be read, never a value.
pub fn read_value(value: &EnvValue, dir: &Path) -> Result<(String, bool), String> {
    match value {
        EnvValue::Literal(v) => Ok((v.clone(), false)),
        EnvValue::Env(name) => match std::env::var(name) {
            Ok(v) => Ok((v, true)),
            Err(std::env::VarError::NotPresent) => Err(format!("`env:{name}` is not set")),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!("`env:{name}` is not UTF-8")),
        },
        EnvValue::File(path) => {
            let text = read_secret_file(&dir.join(path))
                .map_err(|why| format!("`file:{}` cannot be read: {why}", path.display()))?;
            Ok((text, true))
        }
    }
}

/// The secret a `file:` reference names, as `$(cat file)` reads it: its
/// final newline is not part of the secret. Opened as a user's file, so a
/// FIFO or a device named there can neither hang nor flood the read.
fn read_secret_file(path: &Path) -> Result<String, String> {
    let text = user_file::read_limited(path, user_file::SECRET_LIMIT).map_err(|e| {
        // std's own UTF-8 error carries no inner error; the limit's does.
        match e.kind() {
            std::io::ErrorKind::InvalidData if e.get_ref().is_none() => "it is not UTF-8".into(),
            _ => e.to_string(),
        }
    })?;
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
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

    fn redacted(text: &str, secrets: &[&str], chunk: usize) -> (String, bool) {
        struct Trickle<'a>(&'a [u8], usize);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let secrets: Vec<String> = secrets.iter().map(|s| s.to_string()).collect();
        let mut out = Vec::new();
        let found =
            redact_stream(&mut Trickle(text.as_bytes(), chunk), &mut out, &secrets).unwrap();
        (String::from_utf8(out).unwrap(), found)
    }

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

    // issue 23 item 11: the store's credentials stay with the engine on S3;
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

    #[test]
    fn secrets_are_redacted_across_read_boundaries() {
        let text = "token s3cr3t-value here; again s3cr3t-value\nand s3cr3t";
        for chunk in [1, 2, 3, 5, 7, 64] {
            assert_eq!(
                redacted(text, &["s3cr3t-value", "s3cr3t"], chunk),
                (
                    "token [redacted] here; again [redacted]\nand [redacted]".to_string(),
                    true
                ),
                "chunks of {chunk}"
            );
        }
        assert_eq!(
            redacted("nothing", &["s3cr3t"], 3),
            ("nothing".into(), false)
        );
    }
}
