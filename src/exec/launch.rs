//! Launching a task's command, in two halves:
//!
//! ```text
//!  TaskLaunch::new(manifest, task, Contract, program)      what the task is given:
//!      argv, program (found along PATH), cwd (the           one builder for `weir run`'s
//!      manifest's directory), env (`env.rs`), timeout       attempts, `weir verify`'s rerun
//!          │ .command(dir, tag)                             and every executor
//!          ▼
//!  Launch ──► executor (local: `run` below; others: `executor.rs`)
//! ```
//!
//! `run` starts the command through the one launcher (`command.rs`): its
//! own process group with output to files, a watchdog that kills the whole
//! group at the timeout or on a stop request, and its whole process tree
//! stopped when it exits (`process::tree`); a local command also gets
//! `WEIR_PROCESS_TAG`, the launch's tag.
//!
//! The environment (docs/guides/tasks.md): `WEIR_RUN_ID`,
//! `WEIR_PIPELINE`, `WEIR_TASK`, `WEIR_PARTITION`, `WEIR_PARTITION_<SCHEME>`
//! (one per dimension), `WEIR_ATTEMPT`, `WEIR_TOKEN`, `WEIR_OUTPUT_DIR`,
//! `WEIR_INPUT_<NAME>` and `WEIR_WATERMARK_<NAME>` (one per input, NAME
//! upper-cased with non-alphanumerics as `_`), `WEIR_CODE_VERSION`, over the
//! engine's environment or exactly the task's `env`. What differs between a
//! run's attempt and verify's rerun is [`Launcher`] and the paths of each
//! launch's own staging, nothing else.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::classify::Ending;
use super::env::{EnvError, TaskEnv};
use crate::manifest::{Manifest, Task};

pub use super::env::{Contract, ContractInput, Launcher};

/// The names of a launch's logs, in the directory given to
/// [`TaskLaunch::command`].
pub const LOGS: [&str; 2] = ["stdout.log", "stderr.log"];

/// What a task's command is started with, built by [`TaskLaunch::new`]
/// alone: `weir run`'s attempts, `weir verify`'s rerun and every executor
/// take it from there, so what a task sees cannot differ between them.
#[derive(Debug, Clone)]
pub struct TaskLaunch<'a> {
    /// The task's `command`, as written.
    pub argv: &'a [String],
    /// `argv[0]` found along the engine's PATH ([`program`]).
    pub program: Option<PathBuf>,
    /// The manifest's directory.
    pub cwd: &'a Path,
    /// The command's whole environment (`env.rs`).
    pub env: TaskEnv,
    /// The task's `timeout`.
    pub timeout: Duration,
}

impl<'a> TaskLaunch<'a> {
    /// How `task` is launched for `contract` (who launches it, at which
    /// partition, with which staging). `program` is where its `argv[0]` was
    /// found ([`program`]: a run looks once when it starts, verify when it
    /// does). A `set` reference of the task's `env` that cannot be read is
    /// an error, before anything starts.
    pub fn new(
        manifest: &'a Manifest,
        task: &'a Task,
        contract: &Contract<'_>,
        program: Option<PathBuf>,
    ) -> Result<TaskLaunch<'a>, EnvError> {
        let env = super::env::build(manifest, task, contract)?;
        Ok(Self::with_env(manifest, task, env, program))
    }

    /// [`TaskLaunch::new`] over a given engine environment (tests).
    #[cfg(test)]
    fn new_from(
        manifest: &'a Manifest,
        task: &'a Task,
        contract: &Contract<'_>,
        program: Option<PathBuf>,
        engine: &[(std::ffi::OsString, std::ffi::OsString)],
    ) -> Result<TaskLaunch<'a>, EnvError> {
        let env = super::env::build_from(manifest, task, contract, engine)?;
        Ok(Self::with_env(manifest, task, env, program))
    }

    fn with_env(
        manifest: &'a Manifest,
        task: &'a Task,
        env: TaskEnv,
        program: Option<PathBuf>,
    ) -> TaskLaunch<'a> {
        TaskLaunch {
            argv: &task.command,
            program,
            cwd: &manifest.dir,
            env,
            timeout: task.timeout,
        }
    }

    /// The launch an executor starts: logs ([`LOGS`]) in `dir`, the
    /// launch's process `tag` (`tree::new_tag`).
    pub fn command(&self, dir: &Path, tag: String) -> Launch<'_> {
        Launch {
            argv: self.argv,
            program: self.program.as_deref(),
            cwd: self.cwd,
            env: self.env.clone(),
            stdout: dir.join(LOGS[0]),
            stderr: dir.join(LOGS[1]),
            opened: None,
            timeout: self.timeout,
            tag,
        }
    }

    /// Replaces every secret value in the logs in `dir` once the command
    /// ended, before anything reads them; a log that cannot be redacted is
    /// removed. The logs that could not be, with why.
    pub fn redact_logs(&self, dir: &Path) -> Vec<(&'static str, std::io::Error)> {
        let mut failed = Vec::new();
        for log in LOGS {
            if let Err(e) = self.env.secrets().redact_file(&dir.join(log)) {
                let _ = std::fs::remove_file(dir.join(log));
                failed.push((log, e));
            }
        }
        failed
    }
}

/// Where `task`'s program is found along the engine's PATH ([`resolve`]),
/// when that PATH is the task's too: a task whose `env` passes no `PATH`,
/// or sets its own, searches its own (`None`: the child searches).
pub fn program(task: &Task) -> Option<PathBuf> {
    let own_path = task.env.as_ref().is_some_and(|e| {
        !e.pass.iter().any(|p| p == "PATH") || e.set.iter().any(|(k, _)| k == "PATH")
    });
    if own_path {
        return None;
    }
    task.command.first().and_then(|p| resolve(p))
}

/// What to launch.
pub struct Launch<'a> {
    /// argv.
    pub argv: &'a [String],
    /// `argv[0]` found along the engine's PATH once per task ([`resolve`]):
    /// the child then makes one `execve` instead of one per PATH entry.
    /// `None`: the child searches PATH itself.
    pub program: Option<&'a Path>,
    /// Working directory (the manifest's).
    pub cwd: &'a Path,
    /// The command's whole environment (`TaskLaunch`).
    pub env: TaskEnv,
    /// Where stdout goes.
    pub stdout: PathBuf,
    /// Where stderr goes.
    pub stderr: PathBuf,
    /// `stdout` and `stderr` as their creator left them open
    /// ([`Launch::with_logs`]); `None`: [`run`] creates them.
    pub opened: Option<OpenLogs>,
    /// Kill the process group after this long.
    pub timeout: Duration,
    /// The launch's process tag (`tree::new_tag`): every process of the task
    /// carries it, and it is what stops them all when the command exits.
    pub tag: String,
}

/// A launch's logs, created and still open: the attempt creates them
/// before its command may start (failing to is the engine's failure) and
/// hands them over, so they are not looked up and opened a second time.
#[derive(Debug)]
pub struct OpenLogs {
    /// The open `stdout.log`.
    pub stdout: File,
    /// The open `stderr.log`.
    pub stderr: File,
}

impl Launch<'_> {
    /// The launch, its logs already created and open as `logs` (a local
    /// command writes into those; an executor that names the paths to
    /// another host's scheduler ignores them).
    #[must_use]
    pub fn with_logs(mut self, logs: Option<OpenLogs>) -> Self {
        self.opened = logs;
        self
    }
}

/// Where `execvp(3)` would find `program` along the engine's PATH, if that
/// can be known before the child exists: `None` for a name with a slash (no
/// search), a PATH with a relative entry before the match (it depends on the
/// child's working directory), or no executable match (the child then
/// reports the error as before).
pub fn resolve(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.is_empty() || program.contains('/') {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        if !dir.is_absolute() {
            return None;
        }
        let candidate = dir.join(program);
        if let Ok(meta) = std::fs::metadata(&candidate) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Some(candidate);
            }
        }
    }
    None
}

/// Runs the command to completion (or its timeout) and says how it ended:
/// the one launcher every manifest-declared command goes through
/// (`command::supervise`), with stdout and stderr to the launch's logs.
pub fn run(launch: &Launch<'_>) -> Ending {
    let created;
    let (out, err) = match &launch.opened {
        Some(logs) => (&logs.stdout, &logs.stderr),
        None => {
            let (Ok(out), Ok(err)) = (File::create(&launch.stdout), File::create(&launch.stderr))
            else {
                return Ending::SpawnFailed(format!("cannot create {}", launch.stdout.display()));
            };
            created = (out, err);
            (&created.0, &created.1)
        }
    };
    super::command::supervise(&super::command::Start {
        argv: launch.argv,
        program: launch.program,
        cwd: launch.cwd,
        env: &launch.env,
        stdin: None,
        stdout: out,
        stderr: err,
        timeout: launch.timeout,
        tag: &launch.tag,
    })
}

/// The last `max` bytes of a file, lossily decoded, from a line start.
/// Only those bytes are read: a task that wrote gigabytes to stderr costs
/// the engine `max` bytes of memory, not the file.
pub fn tail(path: &Path, max: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let start = len.saturating_sub(max as u64);
    let mut bytes = Vec::with_capacity(max.min(len as usize));
    if file.seek(SeekFrom::Start(start)).is_err()
        || file.take(max as u64).read_to_end(&mut bytes).is_err()
    {
        return String::new();
    }
    last_lines(&bytes, start > 0)
}

/// The last `max` bytes of `bytes` as text, in whole lines (what [`tail`]
/// reads from a file, for evidence that came from the store).
pub fn tail_bytes(bytes: &[u8], max: usize) -> String {
    let start = bytes.len().saturating_sub(max);
    last_lines(&bytes[start..], start > 0)
}

fn last_lines(bytes: &[u8], cut: bool) -> String {
    let text = String::from_utf8_lossy(bytes);
    // Cut mid-file: drop the partial first line.
    let text = if cut {
        text.split_once('\n')
            .map_or(text.as_ref(), |(_, rest)| rest)
            .to_string()
    } else {
        text.into_owned()
    };
    text.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::ffi::OsString;

    use super::*;

    const TWO_DIMS: &str = r#"
[pipeline]
name = "p"
code_version = "1"
warehouse = "wh"

[partitions.region]
kind = "static"
keys = ["eu", "us"]

[partitions.shop-id]
kind = "static"
keys = ["s1"]

[datasets.raw]
path = "raw.csv"

[tasks.t]
command = ["sh", "t.sh", "--flag"]
inputs = ["raw"]
partitioned_by = ["region", "shop-id"]
output = { dataset = "o", grain = ["id"] }
timeout = "7m"
env = { pass = ["PATH", "HOME", "ABSENT"], set = { LEVEL = "info", KEY = "env:API_KEY" } }
"#;

    /// The engine's environment both launches see.
    fn engine() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/h"),
            ("API_KEY", "k-1"),
            ("OTHER", "not passed"),
        ]
        .iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    fn vars(launch: &TaskLaunch<'_>) -> BTreeMap<String, String> {
        launch
            .env
            .all()
            .into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect()
    }

    /// A run's attempt and verify's rerun of the same partition: the same
    /// argv, program, cwd, timeout and environment, but for what names the
    /// launch (run id, attempt, token) and where its own staging is.
    #[test]
    fn a_rerun_is_launched_as_the_runs_attempt_but_for_its_identity_and_staging() {
        let m = Manifest::parse("m.toml", TWO_DIMS, Path::new("/m/m.toml")).unwrap();
        let task = &m.tasks["t"];
        let contract = |launcher, dir: &'static str, raw: &'static str| Contract {
            launcher,
            partition: "eu|s1",
            output_dir: Path::new(dir),
            inputs: vec![ContractInput {
                name: "raw",
                location: Path::new(raw),
                watermark: None,
            }],
        };
        let attempt = contract(
            Launcher::Attempt {
                run_id: "run-1",
                attempt: 2,
                token: 41,
            },
            "/wh/o/attempts/41/data",
            "/wh/o/attempts/41/input-raw/raw.csv",
        );
        let rerun = contract(
            Launcher::Rerun {
                id: "verify-1",
                code_version: "1",
            },
            "/wh/_scratch/verify-1/data",
            "/wh/_scratch/verify-1/input-raw/raw.csv",
        );
        let sh = Some(PathBuf::from("/bin/sh"));
        let run = TaskLaunch::new_from(&m, task, &attempt, sh.clone(), &engine()).unwrap();
        let verify = TaskLaunch::new_from(&m, task, &rerun, sh, &engine()).unwrap();

        assert_eq!(run.argv, ["sh", "t.sh", "--flag"]);
        assert_eq!(verify.argv, run.argv);
        assert_eq!(verify.program, run.program);
        assert_eq!((run.cwd, verify.cwd), (Path::new("/m"), Path::new("/m")));
        assert_eq!((run.timeout, verify.timeout), (task.timeout, task.timeout));

        let (run, verify) = (vars(&run), vars(&verify));
        assert_eq!(
            run.keys().collect::<Vec<_>>(),
            verify.keys().collect::<Vec<_>>()
        );
        let differ = |name: &str| (run[name].as_str(), verify[name].as_str());
        assert_eq!(differ("WEIR_RUN_ID"), ("run-1", "verify-1"));
        assert_eq!(differ("WEIR_ATTEMPT"), ("2", "0"));
        assert_eq!(differ("WEIR_TOKEN"), ("41", "0"));
        assert_eq!(
            differ("WEIR_OUTPUT_DIR"),
            ("/wh/o/attempts/41/data", "/wh/_scratch/verify-1/data")
        );
        assert_eq!(
            differ("WEIR_INPUT_RAW"),
            (
                "/wh/o/attempts/41/input-raw/raw.csv",
                "/wh/_scratch/verify-1/input-raw/raw.csv"
            )
        );
        let same = |env: &BTreeMap<String, String>| -> BTreeMap<String, String> {
            let identity = [
                "WEIR_RUN_ID",
                "WEIR_ATTEMPT",
                "WEIR_TOKEN",
                "WEIR_OUTPUT_DIR",
                "WEIR_INPUT_RAW",
            ];
            env.iter()
                .filter(|(k, _)| !identity.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        let expected: BTreeMap<String, String> = [
            ("HOME", "/h"),
            ("KEY", "k-1"),
            ("LEVEL", "info"),
            ("PATH", "/usr/bin:/bin"),
            ("WEIR_CODE_VERSION", "1"),
            ("WEIR_PARTITION", "eu|s1"),
            ("WEIR_PARTITION_REGION", "eu"),
            ("WEIR_PARTITION_SHOP_ID", "s1"),
            ("WEIR_PIPELINE", "p"),
            ("WEIR_TASK", "t"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(same(&run), expected);
        assert_eq!(same(&verify), expected);
    }

    /// verify stamps rows as the publication did: its code_version, not
    /// the task's current one.
    #[test]
    fn a_rerun_gets_the_publications_code_version() {
        let m = Manifest::parse("m.toml", TWO_DIMS, Path::new("/m/m.toml")).unwrap();
        let rerun = Contract {
            launcher: Launcher::Rerun {
                id: "verify-1",
                code_version: "0.9",
            },
            partition: "us|s1",
            output_dir: Path::new("/d"),
            inputs: Vec::new(),
        };
        let launch = TaskLaunch::new_from(&m, &m.tasks["t"], &rerun, None, &engine()).unwrap();
        let env = vars(&launch);
        assert_eq!(env["WEIR_CODE_VERSION"], "0.9");
        assert_eq!(env["WEIR_PARTITION_REGION"], "us");
        let logs = launch.command(Path::new("/a"), "tag".into());
        assert_eq!(
            (logs.stdout, logs.stderr),
            (
                PathBuf::from("/a/stdout.log"),
                PathBuf::from("/a/stderr.log")
            )
        );
    }

    /// A launch handed its logs open writes into those very files and
    /// opens nothing by path: here the paths lead nowhere.
    #[test]
    fn a_launch_given_open_logs_writes_into_them() {
        let dir = tempfile::tempdir().unwrap();
        let argv = [
            "sh".to_string(),
            "-c".into(),
            "echo out; echo err >&2".into(),
        ];
        let logs = OpenLogs {
            stdout: File::create(dir.path().join("o")).unwrap(),
            stderr: File::create(dir.path().join("e")).unwrap(),
        };
        let launch = Launch {
            argv: &argv,
            program: None,
            cwd: dir.path(),
            env: super::super::env::TaskEnv::exactly(vec![("PATH".into(), "/usr/bin:/bin".into())]),
            stdout: dir.path().join("gone/stdout.log"),
            stderr: dir.path().join("gone/stderr.log"),
            opened: None,
            timeout: Duration::from_secs(60),
            tag: crate::process::tree::new_tag(),
        }
        .with_logs(Some(logs));
        assert_eq!(run(&launch), Ending::Success);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("o")).unwrap(),
            "out\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("e")).unwrap(),
            "err\n"
        );
        assert!(!dir.path().join("gone").exists());
    }

    /// A task searches the engine's PATH (looked up once) only when that
    /// PATH is its own.
    #[test]
    fn a_program_is_looked_up_only_along_the_tasks_own_path() {
        let with = |env: &str| {
            let text = TWO_DIMS.replace(
                "env = { pass = [\"PATH\", \"HOME\", \"ABSENT\"], set = { LEVEL = \"info\", KEY = \"env:API_KEY\" } }",
                env,
            );
            let m = Manifest::parse("m.toml", &text, Path::new("/m/m.toml")).unwrap();
            program(&m.tasks["t"])
        };
        let found = resolve("sh");
        assert!(found.is_some(), "sh is on this PATH");
        assert_eq!(with(""), found);
        assert_eq!(with("env = { pass = [\"PATH\"] }"), found);
        assert_eq!(with("env = { pass = [\"HOME\"] }"), None);
        assert_eq!(
            with("env = { pass = [\"PATH\"], set = { PATH = \"/opt/bin\" } }"),
            None
        );
    }
}
