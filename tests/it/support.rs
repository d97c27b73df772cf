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
        run_id: Some(run_id.to_owned()),
        seed: Some(1),
        allow_uncertified: false,
    }
}
