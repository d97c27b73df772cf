//! The README's walk-throughs run as written.

use crate::support::{repo, stderr, stdout};

/// The shell lines of the first `sh` block under `heading` in the README.
fn shell_block(heading: &str) -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = readme
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README has a section {heading:?}"))
        .1;
    let block = section
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```\n"))
        .expect("the section has an sh block")
        .0;
    block.to_owned()
}

// "Your first pipeline": every command exits 0 with what its comment says,
// the shown rows are the task's, and a second `run` without a partition
// builds the latest complete day only.
#[test]
fn the_first_pipeline_of_the_readme_runs_as_written() {
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
        .args(["-e", "-c", &shell_block("## Your first pipeline")])
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
