//! The README's quick start and the book's walk-throughs run as written.

use crate::support::{repo, stderr, stdout};

/// The lines of the first ` ```sh ` block of `page` (a path from the
/// repository's root).
fn shell_block(page: &str) -> String {
    let text = std::fs::read_to_string(repo().join(page)).unwrap();
    let block = text
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```\n"))
        .unwrap_or_else(|| panic!("{page} has an sh block"))
        .0;
    block.to_owned()
}

// The README's quick start keeps the two set-up commands (the example's main
// job, and the test suite's command, which `.ci/run` runs as written).
#[test]
fn the_readme_quick_start_runs_the_example_and_the_tests() {
    let quick = shell_block("README.md");
    let lines: Vec<&str> = quick.lines().collect();
    assert!(
        lines.contains(
            &"cargo run --release -- run pipelines/atlasmart.toml --partition 2026-09-20 --partition 2026-09-21"
        ),
        "{quick}"
    );
    assert!(lines.contains(&"cargo test"), "{quick}");
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l == "cargo test"),
        ".ci/run runs the README's test command as it is written"
    );
}

// The book's "Your first pipeline": every command exits 0 with what its comment says,
// the shown rows are the task's, and a second `run` without a partition
// builds the latest complete day only.
#[test]
fn the_first_pipeline_of_the_book_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_weir"))
        .parent()
        .unwrap()
        .to_owned();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("bash")
        .args([
            "-e",
            "-c",
            &shell_block("docs/getting-started/first-pipeline.md"),
        ])
        .current_dir(dir.path())
        .env("PATH", path)
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    assert!(
        text.contains("ok: pipeline.toml (pipeline `hello`,"),
        "{text}"
    );
    assert!(text.contains("1 task instance: 1 published"), "{text}");
    assert!(text.contains("day,greeting\n2026-11-01,hello\n"), "{text}");
    // The scheme's timezone is UTC.
    let yesterday = (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24)).to_string()
        [..10]
        .to_owned();
    assert!(
        text.contains(&format!("greetings  {yesterday}")),
        "the second run builds the latest complete day: {text}"
    );
    // Progress goes to stderr: one publication per run, nothing else.
    let progress: Vec<String> = stderr(&out)
        .lines()
        .map(|l| l.split(", sha256:").next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        progress,
        [
            "greet 2026-11-01 attempt 1 token 1: PUBLISHED generation 1: 1 rows".to_owned(),
            format!("greet {yesterday} attempt 1 token 1: PUBLISHED generation 1: 1 rows"),
        ]
    );
}
