//! Shared helpers: run the real binary, find the repo's files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) mod chromium;
pub(crate) mod http;
pub(crate) mod manifest;
#[cfg(feature = "s3")]
pub(crate) mod s3;
pub(crate) mod snapshot;

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

/// Asserts a process's exit status (showing both streams if it differs),
/// where its output is checked otherwise; `Cmd::assert` checks all three.
#[track_caller]
pub(crate) fn assert_exit(out: &Output, expected: i32) {
    assert_eq!(
        out.status.code(),
        Some(expected),
        "stdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
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
    /// without hidden temp files, nor (in `tokens/`, where tests count
    /// tokens) the commits' witnesses `<token>.committed-<g>`.
    /// The directory of `partition` of `dataset` in `wh/`: under the
    /// dataset's `_weir/` when it keeps its partitions there (a Delta
    /// table weir created).
    pub(crate) fn partition_dir(&self, dataset: &str, partition: &str) -> std::path::PathBuf {
        let dataset = self.path().join("wh").join(dataset);
        let state = dataset.join("_weir");
        let base = if state.is_dir() { state } else { dataset };
        base.join(weir::store::encode_partition(partition))
    }

    pub(crate) fn entries(&self, dataset: &str, partition: &str, sub: &str) -> Vec<String> {
        let dir = self.partition_dir(dataset, partition).join(sub);
        let mut names: Vec<String> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .filter(|n| sub != "tokens" || !n.contains(".committed-"))
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
        settings: Default::default(),
        signed: None,
    }
}

// ---- Multi-process helpers (zombie.rs, kill9.rs, chaos.rs) ----

/// Serializes the tests that run several engines at once or saturate both
/// cores (zombie, kill9, chaos), so lease timings never compete with each
/// other's load. Poisoning is ignored: one failure must not fail the rest.
pub(crate) fn exclusive() -> Exclusive {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // cargo-nextest runs each test in a process of its own, where the mutex
    // serializes nothing: there a lock on a file all its processes share.
    let file = std::env::var_os("NEXTEST_RUN_ID").map(|_| {
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("weir-it-exclusive.lock");
        let file = std::fs::File::create(&path).expect("the lock file opens");
        use std::os::fd::AsRawFd as _;
        // SAFETY: flock(2) on a descriptor this function owns; closing the
        // file (dropping the guard) releases it.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(locked, 0, "flock {}", path.display());
        file
    });
    Exclusive {
        _file: file,
        _guard: guard,
    }
}

/// Held by a test that runs alone (see `exclusive`).
pub(crate) struct Exclusive {
    _file: Option<std::fs::File>,
    _guard: std::sync::MutexGuard<'static, ()>,
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

/// Whether a descendant of `pid` runs the program `comm` (its name in
/// /proc/<pid>/stat): an engine's command is under way.
pub(crate) fn descendant_named(pid: u32, comm: &str) -> bool {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let Some((head, tail)) = stat.rsplit_once(')') else {
            continue;
        };
        let name = head.split_once('(').map_or("", |(_, n)| n);
        let ppid = tail
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((child, ppid, name.to_owned()));
        }
    }
    let mut family = vec![pid];
    let mut grew = true;
    while grew {
        grew = false;
        for (child, ppid, _) in &parent_of {
            if family.contains(ppid) && !family.contains(child) {
                family.push(*child);
                grew = true;
            }
        }
    }
    parent_of
        .iter()
        .any(|(child, _, name)| name == comm && family.contains(child))
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
    run_id_in(&stdout(out))
}

/// The run id in the summary line of `text`, a run's stdout.
#[track_caller]
pub(crate) fn run_id_in(text: &str) -> String {
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

// ---- The command-test builder ----
//
// `sb.cmd(&["run", "m.toml"]).env("K", "v").assert().code(1).stdout(EXACT).stderr_contains("…")`
// runs a command and checks its exit status, stdout and stderr. What a test
// does not assert is asserted anyway when the check is dropped: exit status 0
// and both streams empty, so a test states all of a command's output or says
// which part varies. Expected text is exact, except that `[..]` matches any
// text within a line and a line of `...` any number of lines (as in trycmd).

/// A command to run and check (see `Cmd::assert`).
pub(crate) struct Cmd {
    cmd: Command,
    /// (text, placeholder) replaced in both streams before they are compared.
    redactions: Vec<(String, String)>,
}

/// `program ARGS...` as a command to check.
pub(crate) fn cmd(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Cmd {
    let mut cmd = Command::new(program);
    cmd.args(args);
    Cmd {
        cmd,
        redactions: Vec::new(),
    }
}

/// `weir ARGS...` (as `weir()` sets it up) as a command to check.
pub(crate) fn weir_cmd(args: &[&str]) -> Cmd {
    let mut cmd = weir();
    cmd.args(args);
    Cmd {
        cmd,
        redactions: Vec::new(),
    }
}

impl Sandbox {
    /// `weir ARGS...` in the sandbox as a command to check; the sandbox's
    /// path reads `$SB` in its output.
    pub(crate) fn cmd(&self, args: &[&str]) -> Cmd {
        weir_cmd(args)
            .current_dir(self.path())
            .redact(&self.path().display().to_string(), "$SB")
    }
}

impl Cmd {
    pub(crate) fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Cmd {
        self.cmd.env(key, value);
        self
    }

    pub(crate) fn args(mut self, args: &[&str]) -> Cmd {
        self.cmd.args(args);
        self
    }

    pub(crate) fn current_dir(mut self, dir: impl AsRef<Path>) -> Cmd {
        self.cmd.current_dir(dir);
        self
    }

    /// Shows `text` as `placeholder` in both streams (a tempdir's path).
    pub(crate) fn redact(mut self, text: &str, placeholder: &str) -> Cmd {
        if !text.is_empty() {
            self.redactions
                .push((text.to_owned(), placeholder.to_owned()));
        }
        self
    }

    /// Runs it to completion (stdin empty); the checks come next.
    #[track_caller]
    pub(crate) fn assert(mut self) -> Assert {
        let shown = format!("{:?}", self.cmd);
        let out = self
            .cmd
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{shown} did not start: {e}"));
        Assert::new(
            &out,
            shown,
            &self.redactions,
            std::panic::Location::caller(),
        )
    }
}

impl Sandbox {
    /// `weir run m.toml --run-id RUN_ID EXTRA...` as a command to check.
    pub(crate) fn run_cmd(&self, run_id: &str, extra: &[&str]) -> Cmd {
        self.cmd(&["run", "m.toml", "--run-id", run_id]).args(extra)
    }

    /// The output of a process that ran in the sandbox (an `Engine`'s), to
    /// check as a command's; the sandbox's path reads `$SB`.
    #[track_caller]
    pub(crate) fn check(&self, out: &Output) -> Assert {
        let redactions = [(self.path().display().to_string(), "$SB".to_owned())];
        Assert::new(
            out,
            "weir (spawned)".to_owned(),
            &redactions,
            std::panic::Location::caller(),
        )
    }
}

/// A finished command's exit status and output, being checked. Dropped, it
/// checks what was not: exit status 0, stdout and stderr empty.
pub(crate) struct Assert {
    stdout: String,
    stderr: String,
    code: Option<i32>,
    shown: String,
    at: &'static std::panic::Location<'static>,
    code_checked: bool,
    stdout_checked: bool,
    stderr_checked: bool,
}

impl Assert {
    fn new(
        out: &Output,
        shown: String,
        redactions: &[(String, String)],
        at: &'static std::panic::Location<'static>,
    ) -> Assert {
        let redact = |bytes: &[u8]| {
            let mut text = String::from_utf8_lossy(bytes).into_owned();
            for (from, to) in redactions {
                text = text.replace(from.as_str(), to);
            }
            text
        };
        Assert {
            stdout: redact(&out.stdout),
            stderr: redact(&out.stderr),
            code: out.status.code(),
            shown,
            at,
            code_checked: false,
            stdout_checked: false,
            stderr_checked: false,
        }
    }

    /// Panics with everything a reader needs to fix the test, or only
    /// prints it with `WEIR_ASSERT_SOFT=1` (to see every mismatch of a test
    /// in one run while writing it).
    fn fail(&self, what: &str) {
        let text = format!(
            "{what}\ncommand: {}\nrun at {}\nexit status: {:?}\nstdout:\n{}\nstderr:\n{}\nstdout as a literal: {:?}\nstderr as a literal: {:?}",
            self.shown, self.at, self.code, self.stdout, self.stderr, self.stdout, self.stderr
        );
        if std::env::var_os("WEIR_ASSERT_SOFT").is_some() {
            eprintln!("SOFT FAILURE: {text}");
        } else {
            panic!("{text}");
        }
    }

    /// The exit status is `code` (`None`: killed by a signal).
    #[track_caller]
    pub(crate) fn code(mut self, code: impl Into<Option<i32>>) -> Assert {
        self.code_checked = true;
        let code = code.into();
        if self.code != code {
            self.fail(&format!(
                "exit status {:?}, expected {code:?}, at {}",
                self.code,
                std::panic::Location::caller()
            ));
        }
        self
    }

    /// Exit status 0.
    #[track_caller]
    pub(crate) fn success(self) -> Assert {
        self.code(0)
    }

    /// With `WEIR_ASSERT_SOFT=1`, shows what a loose check (wildcards,
    /// contains) accepted, to tighten it.
    #[track_caller]
    fn loose(&self, stream: &str, text: &str) {
        if std::env::var_os("WEIR_ASSERT_SOFT").is_some() {
            eprintln!(
                "SOFT LOOSE {stream} at {}: {text:?}",
                std::panic::Location::caller()
            );
        }
    }

    /// stdout is `expected` (`[..]` and `...` as wildcards).
    #[track_caller]
    pub(crate) fn stdout(mut self, expected: &str) -> Assert {
        self.stdout_checked = true;
        self.text_is("stdout", &self.stdout, expected);
        self
    }

    /// stderr is `expected` (`[..]` and `...` as wildcards).
    #[track_caller]
    pub(crate) fn stderr(mut self, expected: &str) -> Assert {
        self.stderr_checked = true;
        self.text_is("stderr", &self.stderr, expected);
        self
    }

    #[track_caller]
    fn text_is(&self, stream: &str, actual: &str, expected: &str) {
        if expected.contains("[..]") || expected.contains("...") {
            self.loose(stream, actual);
        }
        if !matches(expected, actual) {
            self.fail(&format!(
                "{stream} differs from the expected (at {}):\n{expected}",
                std::panic::Location::caller()
            ));
        }
    }

    /// stderr is `expected` up to the order of its lines.
    #[track_caller]
    pub(crate) fn stderr_unordered(mut self, expected: &str) -> Assert {
        self.stderr_checked = true;
        if !same_lines(expected, &self.stderr) {
            self.fail(&format!(
                "stderr's lines differ from the expected, in any order (at {}):\n{expected}",
                std::panic::Location::caller()
            ));
        }
        self
    }

    /// stderr holds each of `parts` (where the rest varies).
    #[track_caller]
    pub(crate) fn stderr_contains(mut self, parts: &[&str]) -> Assert {
        self.stderr_checked = true;
        self.loose("stderr", &self.stderr);
        if let Some(part) = parts.iter().find(|p| !self.stderr.contains(**p)) {
            self.fail(&format!(
                "stderr lacks {part:?} (at {})",
                std::panic::Location::caller()
            ));
        }
        self
    }

    /// stdout, which the caller checks itself.
    pub(crate) fn stdout_text(mut self) -> String {
        self.stdout_checked = true;
        std::mem::take(&mut self.stdout)
    }

    /// stderr, which the caller checks itself.
    pub(crate) fn stderr_text(mut self) -> String {
        self.stderr_checked = true;
        std::mem::take(&mut self.stderr)
    }

    /// stdout parsed as one JSON document, which the caller checks.
    #[track_caller]
    pub(crate) fn stdout_json(mut self) -> serde_json::Value {
        self.stdout_checked = true;
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout of {} (run at {}) is not one JSON document: {e}\n{}",
                self.shown, self.at, self.stdout
            )
        })
    }
}

impl Drop for Assert {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        if !self.code_checked && self.code != Some(0) {
            self.fail("exit status not 0 and not asserted");
        }
        if !self.stdout_checked && !self.stdout.is_empty() {
            self.fail("stdout not empty and not asserted");
        }
        if !self.stderr_checked && !self.stderr.is_empty() {
            self.fail("stderr not empty and not asserted");
        }
    }
}

/// Whether `actual` has the lines of `expected` in any order, each line
/// matched once (`[..]` as in `matches`).
fn same_lines(expected: &str, actual: &str) -> bool {
    if expected.ends_with('\n') != actual.ends_with('\n') {
        return false;
    }
    let mut left: Vec<&str> = actual.lines().collect();
    for want in expected.lines() {
        match left.iter().position(|got| line_matches(want, got)) {
            Some(at) => {
                left.swap_remove(at);
            }
            None => return false,
        }
    }
    left.is_empty()
}

/// Whether `actual` is `expected`, where `[..]` in a line matches any text
/// within that line and a line that is `...` matches any number of lines.
pub(crate) fn matches(expected: &str, actual: &str) -> bool {
    if !expected.contains("[..]") && !expected.contains("...") {
        return expected == actual;
    }
    if expected.ends_with('\n') != actual.ends_with('\n') {
        return false;
    }
    let want: Vec<&str> = expected.lines().collect();
    let got: Vec<&str> = actual.lines().collect();
    lines_match(&want, &got)
}

fn lines_match(want: &[&str], got: &[&str]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((&"...", rest)) => (0..=got.len()).any(|skip| lines_match(rest, &got[skip..])),
        Some((line, rest)) => {
            !got.is_empty() && line_matches(line, got[0]) && lines_match(rest, &got[1..])
        }
    }
}

fn line_matches(want: &str, got: &str) -> bool {
    let mut parts = want.split("[..]");
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = got.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[test]
fn the_builder_matches_wildcards_within_lines_and_across_lines() {
    assert!(matches("a\n", "a\n"));
    assert!(!matches("a\n", "a"));
    assert!(matches("run [..]: 2 published\n", "run r-1: 2 published\n"));
    assert!(!matches(
        "run [..]: 2 published\n",
        "run r-1: 3 published\n"
    ));
    assert!(matches("[..]x[..]\n", "x\n"));
    assert!(!matches("a[..]a\n", "a\n"));
    assert!(matches("head\n...\ntail\n", "head\n1\n2\ntail\n"));
    assert!(matches("head\n...\ntail\n", "head\ntail\n"));
    assert!(!matches("head\n...\ntail\n", "head\n1\n"));
    assert!(!matches("one [..]\n", "one a\ntwo\n"));
    assert!(same_lines("b\na [..]\n", "a 1\nb\n"));
    assert!(!same_lines("b\nb\n", "a\nb\n"));
}

#[test]
#[should_panic(expected = "stdout not empty and not asserted")]
fn the_builder_fails_a_command_whose_output_the_test_did_not_state() {
    cmd("sh", &["-c", "echo unexpected"]).assert().success();
}

#[test]
#[should_panic(expected = "exit status not 0 and not asserted")]
fn the_builder_fails_a_command_that_failed_unless_the_test_says_so() {
    cmd("sh", &["-c", "exit 3"]).assert();
}
