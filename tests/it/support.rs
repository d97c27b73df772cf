//! Shared helpers: run the real binary, find the repo's files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `weir` binary built for these tests, with a pinned "today" so
/// latest-partition logic is reproducible.
pub(crate) fn weir() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.env("WEIR_TODAY", "2026-11-29").env("COLUMNS", "80");
    cmd
}

/// Runs `weir args...` in `dir`.
#[track_caller]
pub(crate) fn run_in(dir: &Path, args: &[&str]) -> Output {
    weir()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("weir runs")
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts a command exited 0 (showing both streams if not); its stdout.
#[track_caller]
pub(crate) fn ok(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
    stdout(out)
}

/// Compares `actual` with the file at `path`, or writes it when
/// `WEIR_BLESS=1` (then review the diff before committing).
#[track_caller]
pub(crate) fn assert_snapshot(path: &Path, actual: &str) {
    if std::env::var_os("WEIR_BLESS").is_some() {
        std::fs::write(path, actual).expect("snapshot is writable");
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|_| panic!("missing snapshot {}; run with WEIR_BLESS=1", path.display()));
    assert_eq!(actual, expected, "snapshot {} differs", path.display());
}

/// A pipeline in its own tempdir: `m.toml`, task scripts beside it, and the
/// warehouse at `wh/` (the manifests here say `warehouse = "wh"`).
pub(crate) struct Sandbox {
    pub(crate) dir: tempfile::TempDir,
}

impl Sandbox {
    /// A tempdir holding `m.toml` with `manifest` as its text.
    pub(crate) fn new(manifest: &str) -> Sandbox {
        let dir = tempfile::tempdir().expect("a tempdir");
        std::fs::write(dir.path().join("m.toml"), manifest).expect("manifest is writable");
        Sandbox { dir }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a POSIX sh script (run as `sh NAME`).
    pub(crate) fn script(&self, name: &str, body: &str) {
        std::fs::write(self.path().join(name), body).expect("script is writable");
    }

    /// The validated manifest.
    pub(crate) fn manifest(&self) -> weir::manifest::Manifest {
        weir::manifest::Manifest::load(&self.path().join("m.toml"))
            .unwrap_or_else(|e| panic!("invalid test manifest: {:?}", e.errors))
    }

    pub(crate) fn warehouse(&self) -> weir::store::Warehouse {
        weir::store::Warehouse::open(&self.path().join("wh")).expect("warehouse opens")
    }

    pub(crate) fn store(&self, dataset: &str, partition: &str) -> weir::store::PartitionStore {
        self.warehouse().partition(dataset, partition)
    }

    /// `weir ARGS...` in the sandbox, not yet spawned.
    pub(crate) fn weir(&self, args: &[&str]) -> Command {
        let mut cmd = weir();
        cmd.current_dir(self.path()).args(args);
        cmd
    }

    /// `weir run m.toml --run-id RUN_ID EXTRA...`, waited for.
    pub(crate) fn run(&self, run_id: &str, extra: &[&str]) -> Output {
        let mut args = vec!["run", "m.toml", "--run-id", run_id];
        args.extend_from_slice(extra);
        self.weir(&args).output().expect("weir runs")
    }

    /// The run's events (panics on a line that does not parse).
    pub(crate) fn events(&self, run_id: &str) -> Vec<weir::events::EventRecord> {
        let path = weir::events::run_dir(&self.path().join("wh"), run_id).join("events.jsonl");
        let (records, bad) = weir::events::read_log(&path).expect("the event log is readable");
        assert!(bad.is_empty(), "bad lines in {}: {bad:?}", path.display());
        records
    }

    /// Names of the entries of `<wh>/<dataset>/<partition>/<sub>`, sorted,
    /// without hidden temp files.
    pub(crate) fn entries(&self, dataset: &str, partition: &str, sub: &str) -> Vec<String> {
        let dir = self
            .path()
            .join("wh")
            .join(dataset)
            .join(partition)
            .join(sub);
        let mut names: Vec<String> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        names
    }
}

/// The states of one instance's events, in log order.
pub(crate) fn states(
    events: &[weir::events::EventRecord],
    task: &str,
    partition: &str,
) -> Vec<weir::events::State> {
    events
        .iter()
        .filter(|e| e.task.as_deref() == Some(task) && e.partition.as_deref() == Some(partition))
        .map(|e| e.state)
        .collect()
}

/// What readers see: the latest record and its files.
pub(crate) struct Visible {
    pub(crate) record: weir::store::CommitRecord,
    pub(crate) files: Vec<PathBuf>,
}

impl Visible {
    pub(crate) fn of(store: &weir::store::PartitionStore) -> Visible {
        let record = store
            .latest()
            .expect("the log is readable")
            .expect("a generation is visible");
        let files = store.visible_files(&record);
        Visible { record, files }
    }

    /// Every data row of the visible CSV files (header lines dropped).
    pub(crate) fn rows(&self) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        for f in &self.files {
            let text = std::fs::read_to_string(f).expect("a visible file is readable");
            rows.extend(
                text.lines()
                    .skip(1)
                    .map(|l| l.split(',').map(str::to_owned).collect::<Vec<_>>()),
            );
        }
        rows
    }

    /// The bytes of every visible file, in record order.
    pub(crate) fn bytes(&self) -> Vec<Vec<u8>> {
        self.files
            .iter()
            .map(|f| std::fs::read(f).unwrap())
            .collect()
    }

    /// `digest_files` of the visible files, recomputed independently.
    pub(crate) fn recomputed_digest(&self) -> (u64, String) {
        let (rows, digest) = weir::audit::digest_files(&self.files, weir::audit::Format::Csv)
            .expect("visible files digest");
        (rows, digest.as_str().to_owned())
    }
}

/// Options of a library run over `scope` (the one place tests build them).
pub(crate) fn run_options(
    scope: weir::plan::Scope,
    run_id: &str,
    force: bool,
) -> weir::exec::RunOptions {
    weir::exec::RunOptions {
        scope,
        tasks: Vec::new(),
        force,
        resume_since: None,
        run_id: Some(run_id.to_owned()),
        seed: Some(1),
        allow_uncertified: false,
        wait: None,
    }
}

// ---- Multi-process helpers (zombie.rs, kill9.rs, chaos.rs) ----

/// Serializes the tests that run several engines at once or saturate both
/// cores (zombie, kill9, chaos), so lease timings never compete with each
/// other's load. Poisoning is ignored: one failure must not fail the rest.
pub(crate) fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Polls `ready` every 5 ms until it holds; panics with `what` after `limit`.
#[track_caller]
pub(crate) fn poll_until(what: &str, limit: std::time::Duration, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The state letter of a process (`R`, `S`, `T` stopped, `Z` zombie …), from
/// /proc/<pid>/stat; `None` once it is gone.
pub(crate) fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// A `weir` process spawned in the background, its stdout and stderr going
/// to `<dir>/<name>.stdout|.stderr`. Dropped unwaited (a failed assertion),
/// it is continued, killed and reaped, so no stopped engine outlives a test.
pub(crate) struct Engine {
    child: Option<std::process::Child>,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Engine {
    pub(crate) fn spawn(mut cmd: Command, dir: &Path, name: &str) -> Engine {
        let stdout = dir.join(format!("{name}.stdout"));
        let stderr = dir.join(format!("{name}.stderr"));
        let child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(&stdout).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("weir starts");
        Engine {
            child: Some(child),
            stdout,
            stderr,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("not yet waited for").id()
    }

    /// Sends `signal` (libc::SIGSTOP, SIGCONT, SIGKILL …) to the engine.
    pub(crate) fn signal(&self, signal: i32) {
        let pid = libc::pid_t::try_from(self.pid()).expect("a pid fits pid_t");
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({pid}, {signal}) failed");
    }

    /// Whether it has exited (it is reaped then).
    pub(crate) fn exited(&mut self) -> bool {
        let child = self.child.as_mut().expect("not yet waited for");
        child.try_wait().expect("try_wait").is_some()
    }

    /// Waits for it to exit, at most `limit` (then kills it and panics).
    #[track_caller]
    pub(crate) fn finish(self, limit: std::time::Duration) -> Output {
        let pid = self.pid();
        self.finish_within(limit).unwrap_or_else(|stderr| {
            panic!("weir (pid {pid}) still running after {limit:?}; stderr:\n{stderr}")
        })
    }

    /// Waits for it to exit, at most `limit`; then kills it and returns
    /// `Err` with its stderr.
    pub(crate) fn finish_within(mut self, limit: std::time::Duration) -> Result<Output, String> {
        let mut child = self.child.take().expect("not yet waited for");
        let deadline = std::time::Instant::now() + limit;
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if std::time::Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(std::fs::read_to_string(&self.stderr).unwrap_or_default());
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        Ok(Output {
            status,
            stdout: std::fs::read(&self.stdout).unwrap_or_default(),
            stderr: std::fs::read(&self.stderr).unwrap_or_default(),
        })
    }

    /// SIGKILLs it (a no-op if it already exited) and reaps it.
    pub(crate) fn kill(mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("not yet waited for");
        let _ = child.kill();
        child.wait().expect("wait")
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: as in `signal`; a stopped process must be continued
                // for SIGKILL to be delivered promptly on every kernel.
                unsafe {
                    libc::kill(pid, libc::SIGCONT);
                }
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Reads every `_runs/*/events.jsonl` of the warehouse at `wh`. Each must
/// parse, except that a crash may tear the last line of a file: a bad line
/// that is not torn, or is not its file's last, is an error.
pub(crate) fn all_events(wh: &Path) -> Result<Vec<weir::events::EventRecord>, String> {
    let runs = wh.join("_runs");
    let mut logs: Vec<PathBuf> = match std::fs::read_dir(&runs) {
        Ok(entries) => entries
            .map(|e| e.expect("a run dir entry").path().join("events.jsonl"))
            .filter(|p| p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    logs.sort();
    let mut all = Vec::new();
    for log in logs {
        let (records, bad) =
            weir::events::read_log(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let text = std::fs::read_to_string(&log).map_err(|e| e.to_string())?;
        let last = text.lines().count();
        if bad.len() > 1 || bad.iter().any(|b| !b.torn || b.line != last) {
            return Err(format!(
                "{}: bad lines other than a torn last one: {bad:?}",
                log.display()
            ));
        }
        all.extend(records);
    }
    Ok(all)
}

// Helpers of backfill.rs and operator.rs.

impl Sandbox {
    /// `weir ARGS...` in the sandbox, waited for.
    pub(crate) fn weir_out(&self, args: &[&str]) -> Output {
        self.weir(args).output().expect("weir runs")
    }

    /// Every event of every run in the warehouse, operator logs (`op-…`)
    /// included, runs in name order (panics on a line that does not parse).
    pub(crate) fn all_runs_events(&self) -> Vec<weir::events::EventRecord> {
        let (records, bad) =
            weir::events::read_all(&self.path().join("wh")).expect("the event logs are readable");
        assert!(bad.is_empty(), "bad event lines: {bad:?}");
        records
    }

    /// `weir status m.toml --json`, parsed (exit 0 asserted).
    #[track_caller]
    pub(crate) fn status_json(&self) -> serde_json::Value {
        let out = self.weir_out(&["status", "m.toml", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).expect("status --json prints one JSON document")
    }
}

/// The run id in the summary line `run ID: N task instances: …` that
/// `weir run`, `weir backfill` and `weir retry` print.
#[track_caller]
pub(crate) fn printed_run_id(out: &Output) -> String {
    let text = stdout(out);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("run ")
                .and_then(|rest| rest.split_once(": "))
                .filter(|(_, rest)| rest.contains("task instance"))
                .map(|(id, _)| id.to_owned())
        })
        .unwrap_or_else(|| panic!("no run summary line in:\n{text}"))
}

/// Copies a directory tree, leaving out any entry named `warehouse`.
pub(crate) fn copy_tree_without_warehouse(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a writable destination");
    for entry in std::fs::read_dir(from).expect("a readable source") {
        let entry = entry.expect("a readable entry");
        let name = entry.file_name();
        if name == "warehouse" {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            copy_tree_without_warehouse(&path, &to.join(&name));
        } else {
            std::fs::copy(&path, to.join(&name)).expect("a copyable file");
        }
    }
}

/// The highest number of intervals open at once. At equal instants an end
/// counts before a start.
pub(crate) fn max_overlap<'a>(intervals: impl IntoIterator<Item = &'a (u128, u128)>) -> usize {
    let mut points: Vec<(u128, i32)> = intervals
        .into_iter()
        .flat_map(|&(s, e)| [(s, 1), (e, -1)])
        .collect();
    points.sort();
    let (mut open, mut max) = (0i32, 0i32);
    for (_, delta) in points {
        open += delta;
        max = max.max(open);
    }
    max as usize
}

impl Sandbox {
    /// Names of the commit records of `<wh>/<dataset>/<partition>/log`,
    /// sorted (without the publication markers beside them).
    pub(crate) fn records(&self, dataset: &str, partition: &str) -> Vec<String> {
        let mut names = self.entries(dataset, partition, "log");
        names.retain(|n| n.ends_with(".json"));
        names
    }
}
