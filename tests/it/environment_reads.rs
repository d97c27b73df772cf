//! weir's settings are read from the environment once, at the edge (the
//! command line, `exec::Settings::read`), and passed down: every
//! `std::env::var*` call in `src/**/*.rs` outside `#[cfg(test)]` modules
//! is in a file listed here, with why it reads there, and every file listed
//! still reads. A new setting read deep inside fails, naming file and line.

use super::layers::{code_lines, root, rust_files};
use super::support::weir_cmd;

/// `(file, why)`: the files that may read the environment.
const READERS: &[(&str, &str)] = &[
    (
        "src/cli/mod.rs",
        "the edge: weir's settings (`exec::Settings::read`) and `WEIR_LOG` (what diagnostics show, cli/diag.rs)",
    ),
    (
        "src/cli/terminal.rs",
        "the edge: `COLUMNS` and `NO_COLOR`, how wide and whether in color the CLI prints on stderr",
    ),
    (
        "src/cli/console.rs",
        "the edge: `WEIR_CONSOLE_TOKEN`, the console's token when `--token` is not given",
    ),
    (
        "src/clock.rs",
        "`WEIR_NOW`/`WEIR_TODAY` pin the process's one clock and `WEIR_CLOCK_OFFSET` shifts it (a rehearsed skew), read once per process: every layer asks it for now",
    ),
    (
        "src/exec/env.rs",
        "a task's environment: what the engine's own environment passes on, and `env = { X = { env = \"NAME\" } }` values a manifest declares",
    ),
    (
        "src/secrets.rs",
        "a manifest's `env:NAME` secret references (a task's `env.set`, an HTTP target's headers), read where they are used",
    ),
    (
        "src/exec/slurm.rs",
        "sbatch inherits the engine's environment, less what a task must not see",
    ),
    (
        "src/exec/launch.rs",
        "`PATH`, to find a task's program as a shell would",
    ),
    (
        "src/manifest/model.rs",
        "the user's cache directory (`XDG_CACHE_HOME`, `HOME`), where an S3 warehouse stages when `WEIR_STAGING` names no directory",
    ),
    (
        "src/store/mod.rs",
        "the S3 endpoint (`AWS_ENDPOINT_URL*`), as the store's client reads it",
    ),
    (
        "src/store/s3/client.rs",
        "the S3 endpoint checked before the client is built from the environment's credentials",
    ),
    (
        "src/store/warehouse.rs",
        "whether S3 credentials are configured, to say so when the store refuses, and the `AWS_*` environment a shared S3 client was built from",
    ),
    (
        "src/sim/tests.rs",
        "test-only (a file of `#[cfg(test)] mod tests`): the first seed and the count of the long sweep run by hand",
    ),
];

#[test]
fn only_the_edge_and_the_listed_readers_read_the_environment() {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut readers = std::collections::BTreeSet::new();
    for file in &files {
        let name = format!("src/{}", file.strip_prefix(&src).unwrap().display());
        let text = std::fs::read_to_string(file).unwrap();
        for (line, code) in code_lines(&text) {
            if !code.contains("env::var") {
                continue;
            }
            if READERS.iter().any(|(f, _)| *f == name) {
                readers.insert(name.clone());
            } else {
                problems.push(format!(
                    "{name}:{line}: reads the environment below the edge (read it in `exec::Settings::read` and pass it down): {}",
                    code.trim()
                ));
            }
        }
    }
    for (file, _) in READERS {
        if !readers.contains(*file) {
            problems.push(format!(
                "READERS lists {file}, which reads no environment any more: remove it"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_bad_setting_is_refused_before_the_command_reads_anything() {
    // Not even the (missing) manifest is read: the settings come first.
    weir_cmd(&["validate", "no/such/manifest.toml"])
        .env("WEIR_POOL_TIMEOUT", "100ms")
        .assert()
        .code(2)
        .stdout("")
        .stderr("error: WEIR_POOL_TIMEOUT: `100ms` is shorter than 500ms: scheduling delays would look like dead engines\n");
}
