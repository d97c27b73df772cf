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
