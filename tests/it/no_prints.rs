//! One voice for diagnostics: below the CLI, weir says what it noticed
//! through `tracing`, and the CLI's one subscriber (`src/cli/diag.rs`)
//! decides how it reads. Printing is for the files listed here; a print
//! anywhere else fails, naming file and line. `-v`, `-vv` and `WEIR_LOG`
//! raise what is shown; the default reads as weir always printed.

use super::layers::{code_lines, root, rust_files};
use super::support::{weir_cmd, Sandbox};

/// `(file or folder/, why)`: where writing to stdout or stderr is allowed.
const PRINTERS: &[(&str, &str)] = &[
    (
        "src/cli/",
        "the CLI owns the terminal: results on stdout, diagnostics rendered by its subscriber (diag.rs)",
    ),
    (
        "src/main.rs",
        "the binary (a one-line main today; printing there is the CLI's)",
    ),
    (
        "src/serve/mod.rs",
        "serve's decision log: a line a decision on stdout is serve's product (`--log-format`), not a diagnostic",
    ),
    (
        "src/sim/tests.rs",
        "test-only (a file of `#[cfg(test)] mod tests`): the sweep's counts, shown by `cargo test -- --nocapture`",
    ),
];

/// What writes to the terminal directly (`eprintln!` before `println!`,
/// which it contains, so a problem names the macro written).
const PRINTING: &[&str] = &[
    "eprintln!",
    "eprint!(",
    "println!",
    "print!(",
    "dbg!(",
    "io::stdout(",
    "io::stderr(",
];

#[test]
fn nothing_below_the_cli_prints_past_tracing() {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    for file in &files {
        let name = format!("src/{}", file.strip_prefix(&src).unwrap().display());
        if PRINTERS.iter().any(|(f, _)| name.starts_with(f)) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (line, code) in code_lines(&text) {
            if let Some(how) = PRINTING.iter().find(|p| code.contains(*p)) {
                problems.push(format!(
                    "{name}:{line}: `{how}` below the CLI (say it with tracing::warn!/error!/debug!; the CLI decides how it reads): {}",
                    code.trim()
                ));
            }
        }
    }
    for (file, _) in PRINTERS {
        assert!(
            root().join(file).exists(),
            "PRINTERS lists {file}, which is gone"
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

const TWO: &str = r#"
[pipeline]
name = "two"
code_version = "1"
warehouse = "wh"

[tasks.up]
partitioned_by = []
command = ["sh", "-c", "exit 65"]
output = { dataset = "up", grain = ["a"] }

[tasks.down]
partitioned_by = []
command = ["sh", "-c", "printf 'a\n1\n' > \"$WEIR_OUTPUT_DIR/x.csv\""]
depends_on = ["up"]
output = { dataset = "down", grain = ["a"] }
"#;

fn debug_lines(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| l.starts_with("debug: ") || l.starts_with("trace: "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn verbose_says_why_an_instance_was_skipped_and_the_default_does_not() {
    // A sandbox each: the second run would find `up` quarantined.
    let quiet = Sandbox::new(TWO).weir(&["run", "m.toml"]).output().unwrap();
    assert_eq!(quiet.status.code(), Some(1), "{quiet:?}");
    assert_eq!(debug_lines(&quiet.stderr), Vec::<String>::new());

    let loud = Sandbox::new(TWO)
        .weir(&["-v", "run", "m.toml"])
        .output()
        .unwrap();
    assert_eq!(loud.status.code(), Some(1), "{loud:?}");
    assert_eq!(
        debug_lines(&loud.stderr),
        ["debug: weir::exec::scheduler: skipped: upstream `up` all did not publish task=down partition=all"],
        "{}",
        String::from_utf8_lossy(&loud.stderr)
    );
    // -v adds lines and changes none: without them, stderr is the same.
    let rest = |o: &std::process::Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stderr)
            .lines()
            .filter(|l| !l.starts_with("debug: "))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(rest(&loud), rest(&quiet));
}

#[test]
fn weir_log_raises_one_module_and_keeps_the_rest_at_the_default() {
    // The scheduler's module is not named: its skip stays quiet.
    let other = Sandbox::new(TWO)
        .weir(&["run", "m.toml"])
        .env("WEIR_LOG", "weir::store=debug")
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(1), "{other:?}");
    assert!(!String::from_utf8_lossy(&other.stderr).contains("skipped: upstream"));
    let named = Sandbox::new(TWO)
        .weir(&["run", "m.toml"])
        .env("WEIR_LOG", "weir::exec::scheduler=debug")
        .output()
        .unwrap();
    assert_eq!(
        debug_lines(&named.stderr),
        ["debug: weir::exec::scheduler: skipped: upstream `up` all did not publish task=down partition=all"]
    );
}

#[test]
fn a_bad_weir_log_is_refused_before_the_command_runs() {
    let stderr = weir_cmd(&["validate", "no/such/manifest.toml"])
        .env("WEIR_LOG", "weir=loud")
        .assert()
        .code(2)
        .stdout("")
        .stderr_text();
    assert!(
        stderr.starts_with("error: WEIR_LOG: `weir=loud` is not a filter ("),
        "{stderr}"
    );
    assert!(stderr.contains("help: targets and levels"), "{stderr}");
}

const ONE: &str = r#"
[pipeline]
name = "one"
code_version = "1"
warehouse = "wh"

[tasks.t]
partitioned_by = []
command = ["sh", "-c", "printf 'a\n1\n' > \"$WEIR_OUTPUT_DIR/x.csv\""]
output = { dataset = "t", grain = ["a"] }
"#;

#[test]
fn serve_in_json_writes_its_warnings_as_json_and_other_commands_as_text() {
    let sb = Sandbox::new(ONE);
    let text = sb
        .weir(&["validate", "m.toml"])
        .env("WEIR_FAULT", "nowhere:fail")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&text.stderr),
        "warning: WEIR_FAULT: unknown point `nowhere` ignored\n"
    );

    let mut cmd = sb.weir(&["serve", "m.toml", "--log-format", "json"]);
    cmd.env("WEIR_FAULT", "nowhere:fail");
    let serve = super::support::Engine::spawn(cmd, sb.path(), "serve");
    let stdout = sb.path().join("serve.stdout");
    super::support::poll_until(
        "serve's first decision",
        std::time::Duration::from_secs(20),
        || std::fs::read_to_string(&stdout).is_ok_and(|s| s.contains("\"decision\"")),
    );
    serve.signal(libc::SIGTERM);
    let out = serve.finish(std::time::Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr.lines().next().unwrap_or_default();
    let v: serde_json::Value =
        serde_json::from_str(first).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(v["level"], "warn", "{first}");
    assert_eq!(v["target"], "weir::exec::fault", "{first}");
    assert_eq!(v["message"], "WEIR_FAULT: unknown point `nowhere` ignored");
    assert!(v["ts"].is_string(), "{first}");
    // The decision log on stdout is untouched: JSON lines with decisions.
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let d: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(d["decision"].is_string(), "{line}");
    }
}
