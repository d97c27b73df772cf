//! The Slurm executor: one batch job per attempt.
//!
//! ```text
//!  attempts/<token>/job.env   export WEIR_…='…'   (quoted for sh; never `--export=VAR=…`)
//!  attempts/<token>/job.sh    check the staging dir, write job.node, source job.env, exec argv
//!       │ sbatch --parsable --no-requeue --output=stdout.log --error=stderr.log …
//!       ▼
//!  job id ──► lease, RUNNING ──► poll `scontrol show job -o ID` ──► terminal state ──► Ending
//! ```
//!
//! `--export` cuts values at commas and `NONE` drops `PATH`, so the job keeps
//! sbatch's default (`ALL`: the engine's environment, `PATH` included) and
//! the attempt's own variables travel in `job.env`, one `export` per line,
//! single-quoted. The job writes `job.node` before anything else: a job that
//! ended without it could not see its attempt directory (the warehouse is
//! not on a filesystem the compute node shares), which fails the attempt
//! clearly instead of as a missing output.
//!
//! `--no-requeue`: Slurm never reruns an attempt on its own (one attempt,
//! one job; a retry is weir's, with a new token). The task's `timeout`
//! counts from the job's start (queue wait is not the task's); at the
//! timeout weir `scancel`s the job and waits for it to leave the node.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::classify::{ClusterEnd, Ending};
use super::executor::{Executor, Job};
use super::launch::Launch;
use crate::inputs::InputSnapshot;
use crate::manifest::Resources;

/// How long an interrupted engine waits for its cancelled job to leave the
/// queue before it exits anyway (the job is cancelled either way).
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);

/// The job script's name in the attempt directory.
pub const SCRIPT: &str = "job.sh";
/// The job's environment file in the attempt directory.
pub const ENV_FILE: &str = "job.env";
/// Written by the job first: the node's name (proof it sees the directory).
pub const NODE_MARKER: &str = "job.node";

/// Longest pause between two looks at a job.
const MAX_POLL: Duration = Duration::from_millis(500);
/// The first pause between polls of a job; doubling to [`MAX_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(50);

/// Submits to the Slurm controller the `s*` commands on `PATH` reach.
pub struct Slurm<'a> {
    /// The executor's `args`, passed to sbatch as they are.
    pub args: &'a [String],
    /// The task's resource request.
    pub resources: &'a Resources,
}

/// A submitted attempt.
pub struct SlurmJob {
    id: String,
    dir: PathBuf,
    timeout: Duration,
}

impl Executor for Slurm<'_> {
    fn submit<'l>(&self, launch: Launch<'l>) -> Result<Box<dyn Job + 'l>, Ending> {
        let dir = launch
            .stdout
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        // Asked to stop while waiting for a slot: nothing is submitted.
        if let Some(sig) = super::interrupt::requested() {
            return Err(Ending::Interrupted(sig));
        }
        let _ = std::fs::remove_file(dir.join(NODE_MARKER));
        let env_file = dir.join(ENV_FILE);
        let script = dir.join(SCRIPT);
        // Secrets never go to disk: the job gets them from sbatch's own
        // environment (below), which is exactly the task's.
        let written =
            std::fs::write(&env_file, env_text(&launch.env.public_vars())).and_then(|()| {
                std::fs::write(
                    &script,
                    script_text(&dir, &env_file, launch.cwd, launch.argv),
                )
            });
        if let Err(e) = written {
            return Err(Ending::Engine(format!(
                "cannot write the job script in {}: {e}",
                dir.display()
            )));
        }
        let program = super::launch::resolve("sbatch").unwrap_or_else(|| "sbatch".into());
        let mut sbatch = self.sbatch(&program, &launch, &dir, &script);
        let out = crate::process::tree::output(&mut sbatch).map_err(|e| {
            Ending::SpawnFailed(format!("`sbatch`: {e} (is Slurm installed on this host?)"))
        })?;
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
            // A controller that does not answer may answer the next attempt;
            // a refused job (bad partition, account, resources) will not.
            return Err(
                if why.contains("Unable to contact") || why.contains("timed out") {
                    Ending::Engine(format!("sbatch could not reach the controller: {why}"))
                } else {
                    Ending::SpawnFailed(format!("sbatch refused the job: {why}"))
                },
            );
        }
        let text = String::from_utf8_lossy(&out.stdout);
        // `--parsable`: "ID" or "ID;CLUSTER".
        let id = text.trim().split(';').next().unwrap_or("").to_string();
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
            return Err(Ending::Engine(format!(
                "sbatch printed no job id: `{}`",
                text.trim()
            )));
        }
        Ok(Box::new(SlurmJob {
            id,
            dir,
            timeout: launch.timeout,
        }))
    }

    fn job_name(&self, id: &str) -> String {
        format!("Slurm job {id}")
    }

    // A job outlives its engine on the cluster: what it runs on is written
    // before it exists, for an engine that takes over.
    fn record_basis(&self, dir: &Path, snapshot: &InputSnapshot, code_version: &str) {
        let _ = record(
            dir,
            &JobRecord {
                snapshot_digest: snapshot.digest(),
                code_version: code_version.to_string(),
            },
        );
    }

    fn find_job(&self, attempt_dir: &Path) -> Option<String> {
        find_job(attempt_dir)
    }

    fn await_job(&self, id: &str, limit: Duration, waiting: &mut dyn FnMut()) -> Option<Ending> {
        await_job(id, limit, waiting).map(|s| s.ending())
    }

    fn adopt(&self, old: &Path, new: &Path, snapshot: &InputSnapshot, code_version: &str) -> bool {
        adopt(old, new, &snapshot.digest(), code_version).is_some()
    }
}

impl Slurm<'_> {
    /// The `sbatch` command for `launch`. Its environment is exactly the
    /// task's (`env.rs`), plus the engine's `SLURM_CONF` (where sbatch finds
    /// its controller) and `SBATCH_*` (sbatch's own options): sbatch's
    /// default `--export=ALL` hands the job that, so the job sees what a
    /// local task would, and never the engine's other variables (an S3
    /// warehouse's credentials).
    fn sbatch(&self, program: &Path, launch: &Launch<'_>, dir: &Path, script: &Path) -> Command {
        let mut sbatch = Command::new(program);
        sbatch
            .env_clear()
            .envs(sbatch_env(&launch.env, std::env::vars_os()))
            .arg("--parsable")
            .arg("--no-requeue")
            .arg(format!("--job-name=weir-{}", job_name(dir)))
            .arg(format!("--output={}", pattern_safe(&launch.stdout)))
            .arg(format!("--error={}", pattern_safe(&launch.stderr)))
            .arg(format!("--chdir={}", launch.cwd.display()))
            .args(self.resources.sbatch_flags())
            .args(self.args)
            .arg(script)
            .current_dir(launch.cwd);
        sbatch
    }
}

/// sbatch's environment: the task's, and the engine's `SLURM_CONF` and
/// `SBATCH_*` unless the task sets them itself.
fn sbatch_env(
    env: &super::env::TaskEnv,
    engine: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut all = env.all();
    for (k, v) in engine {
        let scheduler = k == "SLURM_CONF" || k.as_encoded_bytes().starts_with(b"SBATCH_");
        if scheduler && !all.iter().any(|(name, _)| *name == k) {
            all.push((k, v));
        }
    }
    all
}

impl Job for SlurmJob {
    fn id(&self) -> Option<String> {
        Some(self.id.clone())
    }

    fn wait(self: Box<Self>) -> Ending {
        let mut polls = 0;
        let mut started: Option<Instant> = None;
        let mut cancelled_at_timeout = false;
        let mut unanswered: Option<Instant> = None;
        // weir was asked to stop (Ctrl-C, SIGTERM): the job is cancelled
        // first, then waited for until it leaves the queue (a few seconds at
        // most), so an interrupt leaves nothing queued or running.
        let mut interrupted: Option<(super::interrupt::Signal, Instant)> = None;
        let ending = loop {
            if interrupted.is_none() {
                if let Some(sig) = super::interrupt::requested() {
                    cancel(&self.id);
                    interrupted = Some((sig, Instant::now()));
                }
            }
            if let Some((sig, since)) = interrupted {
                if since.elapsed() >= INTERRUPT_GRACE {
                    break Ending::Interrupted(sig);
                }
            }
            match state(&self.id) {
                Ok(Some(s)) if s.terminal() => match interrupted {
                    Some((sig, _)) => break Ending::Interrupted(sig),
                    None => break self.ending(&s, cancelled_at_timeout),
                },
                Ok(Some(s)) => {
                    unanswered = None;
                    if s.state != "PENDING" {
                        started.get_or_insert_with(Instant::now);
                    }
                }
                // Aged out of the controller (MinJobAge) or never known.
                Ok(None) => {
                    break Ending::Engine(format!(
                        "Slurm no longer knows job {} (raise MinJobAge above the longest poll gap)",
                        self.id
                    ))
                }
                // The controller does not answer (restarting, overloaded):
                // the job may still run, so keep asking; give up (and try to
                // cancel it, so no duplicate runs beside the retry) only
                // after the task's timeout.
                Err(why) => {
                    let since = *unanswered.get_or_insert_with(Instant::now);
                    if since.elapsed() >= self.timeout {
                        cancel(&self.id);
                        break Ending::Engine(why);
                    }
                }
            }

            if !cancelled_at_timeout && started.is_some_and(|t| t.elapsed() >= self.timeout) {
                cancelled_at_timeout = true;
                cancel(&self.id);
            }
            let poll = crate::clock::doubling(FIRST_POLL, MAX_POLL, polls);
            std::thread::sleep(poll.min(super::interrupt::POLL * 4));
            polls += 1;
        };
        ending
    }
}

impl SlurmJob {
    fn ending(&self, s: &JobState, cancelled_at_timeout: bool) -> Ending {
        if cancelled_at_timeout {
            return Ending::Timeout;
        }
        // A job whose script ran to its end (not one cancelled, preempted or
        // timed out, perhaps before its first line) wrote job.node first
        // thing; without it the node could not see the directory.
        let ran_to_end = matches!(s.state.as_str(), "COMPLETED" | "FAILED");
        if ran_to_end && !self.dir.join(NODE_MARKER).exists() {
            return Ending::NotShared(format!(
                "job {} on {} ended {} without writing {}: the node cannot see the attempt directory {} (the warehouse must be on a filesystem shared with the compute nodes)",
                self.id,
                s.node.as_deref().unwrap_or("its node"),
                s.state,
                NODE_MARKER,
                self.dir.display()
            ));
        }
        s.ending()
    }
}

/// Waits for another engine's job to end; cancels it if it is still running
/// after `limit` and waits for that. `waiting` is called once if it is
/// still running. `None`: the controller does not know it (aged out), or
/// did not answer until `limit` (the job was then cancelled, so that no
/// duplicate runs beside it).
pub fn await_job(id: &str, limit: Duration, waiting: impl FnOnce()) -> Option<JobState> {
    let deadline = crate::clock::instant_after(limit);
    let mut waiting = Some(waiting);
    let mut cancelled = false;
    loop {
        match state(id) {
            Ok(Some(s)) if s.terminal() => return Some(s),
            Ok(None) => return None,
            Ok(Some(_)) => {
                if let Some(w) = waiting.take() {
                    w();
                }
            }
            // A busy controller: the job may still run; ask again.
            Err(_) if Instant::now() < deadline => {}
            Err(_) => {
                cancel(id);
                return None;
            }
        }
        if !cancelled && Instant::now() >= deadline {
            cancelled = true;
            cancel(id);
        }
        std::thread::sleep(MAX_POLL);
    }
}

/// What an attempt records about its job, for an engine that takes over.
pub const JOB_RECORD: &str = "job.json";

/// The job record, written before submission: on which inputs and code
/// the attempt's job runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobRecord {
    /// Digest of the attempt's input snapshot.
    pub snapshot_digest: String,
    /// The pipeline's code_version.
    pub code_version: String,
}

/// Writes `job.json` in the attempt directory.
pub fn record(dir: &Path, record: &JobRecord) -> std::io::Result<()> {
    std::fs::write(
        dir.join(JOB_RECORD),
        serde_json::to_vec(record).map_err(std::io::Error::other)?,
    )
}

/// Takes a completed job's output from the attempt directory `old` into
/// `new` (both `data/` inside), when that job ran on the same input snapshot
/// and code_version; returns its record. Files are copied (a candidate may
/// hold no hard links), never moved: the old attempt's engine may be only
/// paused, and if it wakes it must audit the files its job wrote, not an
/// emptied directory (its commit is then refused by fencing, or it publishes
/// those same bytes first). Logs are copied as evidence. The new attempt
/// audits and publishes under its own token, fenced as always.
pub fn adopt(
    old: &Path,
    new: &Path,
    snapshot_digest: &str,
    code_version: &str,
) -> Option<JobRecord> {
    let record: JobRecord =
        serde_json::from_slice(&std::fs::read(old.join(JOB_RECORD)).ok()?).ok()?;
    if record.snapshot_digest != snapshot_digest || record.code_version != code_version {
        return None;
    }
    let (from, to) = (old.join("data"), new.join("data"));
    let entries: Vec<_> = std::fs::read_dir(&from).ok()?.flatten().collect();
    // Only plain files (the task contract): anything else is left for the
    // command to produce again, with nothing half-taken.
    if !entries
        .iter()
        .all(|e| e.file_type().is_ok_and(|t| t.is_file()))
    {
        return None;
    }
    let mut taken = Vec::new();
    for e in &entries {
        let dest = to.join(e.file_name());
        if std::fs::copy(e.path(), &dest).is_err() {
            for t in &taken {
                let _ = std::fs::remove_file(t);
            }
            return None;
        }
        taken.push(dest);
    }
    for log in ["stdout.log", "stderr.log"] {
        let _ = std::fs::copy(old.join(log), new.join(log));
    }
    Some(record)
}

/// The job of the attempt in `dir`, by its script's path (unique to the
/// attempt), for a lease that does not name it: its engine died between
/// `sbatch` and the lease's next write.
pub fn find_job(dir: &Path) -> Option<String> {
    let script = dir.join(SCRIPT);
    if !script.exists() {
        return None;
    }
    let out = crate::process::tree::output(
        Command::new("squeue").args(["-h", "-t", "all", "-o", "%i|%o"]),
    )
    .ok()?;
    let want = script.display().to_string();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('|'))
        .find(|(_, command)| *command == want)
        .map(|(id, _)| id.to_string())
}

/// Cancels a job (`scancel`); an unknown or finished job is fine.
pub fn cancel(id: &str) {
    let _ = crate::process::tree::output(Command::new("scancel").arg(id));
}

/// What `scontrol show job -o` says about a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobState {
    /// `JobState`, e.g. RUNNING, COMPLETED, OUT_OF_MEMORY.
    pub state: String,
    /// `ExitCode=code:signal`.
    pub exit: (i32, i32),
    /// `BatchHost` / `NodeList`, once placed.
    pub node: Option<String>,
}

impl JobState {
    /// Parses one line of `scontrol show job -o`.
    pub fn parse(line: &str) -> Option<JobState> {
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        };
        let state = field("JobState")?.to_string();
        let exit = field("ExitCode")
            .and_then(|e| e.split_once(':'))
            .map_or((0, 0), |(c, s)| {
                (c.parse().unwrap_or(0), s.parse().unwrap_or(0))
            });
        let node = field("BatchHost")
            .or_else(|| field("NodeList"))
            .filter(|n| *n != "(null)" && !n.is_empty())
            .map(str::to_string);
        Some(JobState { state, exit, node })
    }

    /// Whether the job is over (its files written, its node released).
    pub fn terminal(&self) -> bool {
        matches!(
            self.state.as_str(),
            "COMPLETED"
                | "FAILED"
                | "TIMEOUT"
                | "CANCELLED"
                | "NODE_FAIL"
                | "PREEMPTED"
                | "OUT_OF_MEMORY"
                | "BOOT_FAIL"
                | "DEADLINE"
        )
    }

    /// How a terminal state ends the attempt.
    pub fn ending(&self) -> Ending {
        match (self.state.as_str(), self.exit) {
            ("COMPLETED", (0, 0)) => Ending::Success,
            ("TIMEOUT" | "DEADLINE", _) => Ending::Timeout,
            ("OUT_OF_MEMORY", _) => Ending::Cluster(ClusterEnd::OutOfMemory),
            ("NODE_FAIL" | "BOOT_FAIL", _) => Ending::Cluster(ClusterEnd::NodeFail),
            ("PREEMPTED", _) => Ending::Cluster(ClusterEnd::Preempted),
            ("CANCELLED", _) => Ending::Cluster(ClusterEnd::Cancelled),
            (_, (_, sig)) if sig != 0 => Ending::Signal(sig),
            (_, (code, _)) if code != 0 => Ending::Exit(code),
            (other, _) => Ending::Engine(format!("Slurm ended the job {other} with exit code 0")),
        }
    }
}

/// The job's state now; `Ok(None)` when the controller does not know it.
pub fn state(id: &str) -> Result<Option<JobState>, String> {
    let mut tries = 0;
    loop {
        let out =
            crate::process::tree::output(Command::new("scontrol").args(["show", "job", "-o", id]))
                .map_err(|e| format!("`scontrol show job {id}`: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            if let Some(s) = stdout.lines().find_map(JobState::parse) {
                return Ok(Some(s));
            }
        }
        if stderr.contains("Invalid job id") {
            return Ok(None);
        }
        // A busy or restarting controller: a few tries before giving up.
        tries += 1;
        if tries >= 20 {
            return Err(format!(
                "`scontrol show job {id}` failed: {}",
                stderr.trim()
            ));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `export NAME='value'` lines: single quotes keep every byte but `'`,
/// which becomes `'\''`.
pub fn env_text(env: &[(String, String)]) -> String {
    let mut text = String::from("# weir: the attempt's environment (docs/guides/tasks.md)\n");
    for (k, v) in env {
        text.push_str(&format!("export {k}={}\n", quote(v)));
    }
    text
}

/// Single-quoted for sh.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn script_text(dir: &Path, env_file: &Path, cwd: &Path, argv: &[String]) -> String {
    let dir = quote(&dir.display().to_string());
    let marker_missing = format!(
        "echo \"weir: job $SLURM_JOB_ID on $(hostname) cannot see its attempt directory \"{dir}\": the warehouse must be on a filesystem shared with the compute nodes\" >&2; exit 97"
    );
    format!(
        "#!/bin/sh\n\
         # weir: one attempt, one job. Generated; the attempt directory holds its logs.\n\
         [ -d {dir} ] || {{ {marker_missing}; }}\n\
         hostname > {dir}/{NODE_MARKER} || {{ {marker_missing}; }}\n\
         . {env} || exit 97\n\
         cd {cwd} || exit 97\n\
         exec {argv}\n",
        env = quote(&env_file.display().to_string()),
        cwd = quote(&cwd.display().to_string()),
        argv = argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" "),
    )
}

/// `…/<dataset>/<partition>/attempts/<token>` → `<dataset>-<partition>-<token>`
/// (for people reading `squeue`).
fn job_name(dir: &Path) -> String {
    let parts: Vec<String> = dir
        .components()
        .rev()
        .take(4)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.as_slice() {
        [token, _, partition, dataset] => format!("{dataset}-{partition}-{token}"),
        _ => "attempt".into(),
    }
}

/// sbatch expands `%` in file names: `%%` is a literal `%`.
fn pattern_safe(path: &Path) -> String {
    path.display().to_string().replace('%', "%%")
}

#[cfg(test)]
mod tests {
    use super::*;

    // Every Slurm end state maps to an ending
    #[test]
    fn end_states_map_to_endings() {
        let line = |state: &str, exit: &str| {
            JobState::parse(&format!(
                "JobId=7 JobName=x JobState={state} Reason=None ExitCode={exit} RunTime=00:00:03 BatchHost=vm"
            ))
            .unwrap()
        };
        assert_eq!(line("COMPLETED", "0:0").ending(), Ending::Success);
        assert_eq!(line("FAILED", "3:0").ending(), Ending::Exit(3));
        assert_eq!(line("FAILED", "0:9").ending(), Ending::Signal(9));
        assert_eq!(line("TIMEOUT", "0:15").ending(), Ending::Timeout);
        assert_eq!(
            line("OUT_OF_MEMORY", "0:125").ending(),
            Ending::Cluster(ClusterEnd::OutOfMemory)
        );
        assert_eq!(
            line("NODE_FAIL", "0:0").ending(),
            Ending::Cluster(ClusterEnd::NodeFail)
        );
        assert_eq!(
            line("PREEMPTED", "0:0").ending(),
            Ending::Cluster(ClusterEnd::Preempted)
        );
        assert_eq!(
            line("CANCELLED", "0:15").ending(),
            Ending::Cluster(ClusterEnd::Cancelled)
        );
        assert!(!line("RUNNING", "0:0").terminal());
        assert!(!line("COMPLETING", "0:0").terminal());
        assert_eq!(line("RUNNING", "0:0").node.as_deref(), Some("vm"));
    }

    // `sbatch` gets the task's environment and the
    // scheduler's own settings, nothing else of the engine's
    #[test]
    fn sbatch_gets_the_task_environment_and_scheduler_settings() {
        let task = crate::exec::env::TaskEnv::exactly(vec![
            ("WEIR_TASK".into(), "t".into()),
            ("SBATCH_QOS".into(), "task's".into()),
        ]);
        let engine = [
            ("AWS_SECRET_ACCESS_KEY", "k"),
            ("SLURM_CONF", "/etc/slurm/x.conf"),
            ("SBATCH_PARTITION", "batch"),
            ("SBATCH_QOS", "engine's"),
            ("HOME", "/root"),
        ]
        .map(|(k, v)| (k.into(), v.into()));
        let got: Vec<(String, String)> = sbatch_env(&task, engine.into_iter())
            .into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect();
        let want: Vec<(String, String)> = [
            ("WEIR_TASK", "t"),
            ("SBATCH_QOS", "task's"),
            ("SLURM_CONF", "/etc/slurm/x.conf"),
            ("SBATCH_PARTITION", "batch"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        assert_eq!(got, want);
    }

    // Values with commas, quotes, newlines and `$` survive the env file
    #[test]
    fn env_file_keeps_every_value() {
        let env = vec![
            ("WEIR_A".to_string(), "a,b=c d".to_string()),
            ("WEIR_B".to_string(), "it's $HOME `x`\nline2".to_string()),
        ];
        let text = env_text(&env);
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{text}\nprintf '%s|%s' \"$WEIR_A\" \"$WEIR_B\""))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "a,b=c d|it's $HOME `x`\nline2"
        );
    }
}
