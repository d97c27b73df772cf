//! The seams that keep a new executor to one module, enforced:
//!
//! - every `unsafe` block of running commands (spawning, killing a process
//!   tree, cgroups, the engine's own protection) is in `src/process`, so
//!   `exec` holds the policy (when to start, kill, wait, what to report)
//!   and no system call;
//! - inside `src/exec`, only the Slurm executor (`slurm.rs`) and the
//!   registry that maps the manifest's executor kinds to implementations
//!   (`mod.rs`) name Slurm: attempts, leases and takeovers go through the
//!   `Executor` trait, which is all a Kubernetes executor would implement.

use super::layers::{code_lines, root, rust_files};

/// Files under `src/exec`, relative to `src/`.
fn exec_files() -> Vec<(String, String)> {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src.join("exec"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            let name = f.strip_prefix(&src).unwrap().display().to_string();
            (name, text)
        })
        .collect()
}

#[test]
fn no_unsafe_block_is_left_in_exec() {
    let mut found = Vec::new();
    for (file, text) in exec_files() {
        for (line, code) in code_lines(&text) {
            let unsafe_word = code
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|word| word == "unsafe");
            if unsafe_word {
                found.push(format!("src/{file}:{line}: {}", code.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "`unsafe` in exec (move the system call into src/process behind a safe function):\n{}",
        found.join("\n")
    );
}

#[test]
fn only_the_slurm_executor_and_the_registry_name_slurm_in_exec() {
    let allowed = ["exec/slurm.rs", "exec/mod.rs"];
    let mut found = Vec::new();
    for (file, text) in exec_files() {
        if allowed.contains(&file.as_str()) {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            if line.to_ascii_lowercase().contains("slurm") {
                found.push(format!("src/{file}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "exec names Slurm outside slurm.rs and the executor registry (make it an `Executor` method):\n{}",
        found.join("\n")
    );
}
