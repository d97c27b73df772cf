//! One voice for diagnostics: below the CLI, weir says what it noticed
//! through `tracing`, and the CLI's one subscriber (`src/cli/diag.rs`)
//! decides how it reads. Printing is for the files listed here; a print
//! anywhere else fails, naming file and line. `-v`, `-vv` and `WEIR_LOG`
//! raise what is shown; the default reads as weir always printed.
//!
//! Also here, as a rule on what the source says: no comment, test name or
//! message in `src/`, `tests/`, `examples/`, `bench/` or `ci/` cites a
//! tracker's issue number. The tracker is not in the repository, so such a
//! reference tells a reader nothing; the comment says what it means (the
//! behaviour, the reason, the failure it prevents) or names the test that
//! proves it.

use std::path::{Path, PathBuf};

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

/// Where a tracker reference could hide: the folders scanned, and the kinds
/// of file read there (Rust, and the Python and shell of benches and CI).
const SCANNED: &[&str] = &["src", "tests", "examples", "bench", "ci"];
const SCANNED_KINDS: &[&str] = &["rs", "py", "sh"];

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| SCANNED_KINDS.iter().any(|k| e == *k))
        {
            out.push(path);
        }
    }
}

/// Where `line` cites a tracker's issue number, in any case: the word, an
/// `s` or not, then up to three of space, `_`, `-`, `#` or `/` and a digit
/// (a comment's reference, a test name's prefix, a tracker URL). The word
/// alone (`an issue with…`) is fine.
fn tracker_number_at(line: &str) -> Option<usize> {
    let lower = line.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut from = 0;
    while let Some(found) = lower[from..].find("issue") {
        let at = from + found;
        from = at + "issue".len();
        if at > 0 && bytes[at - 1].is_ascii_alphabetic() {
            continue;
        }
        let mut i = from;
        if bytes.get(i) == Some(&b's') {
            i += 1;
        }
        let mut gap = 0;
        while gap < 3 && matches!(bytes.get(i), Some(b' ' | b'_' | b'-' | b'#' | b'/')) {
            i += 1;
            gap += 1;
        }
        if gap > 0 && bytes.get(i).is_some_and(u8::is_ascii_digit) {
            return Some(at);
        }
    }
    None
}

#[test]
fn no_comment_or_test_name_cites_a_tracker_issue_number() {
    let mut files = Vec::new();
    for dir in SCANNED {
        source_files(&root().join(dir), &mut files);
    }
    files.sort();
    assert!(files.len() > 100, "too few files found: {files:?}");
    let mut problems = Vec::new();
    for file in &files {
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            if let Some(at) = tracker_number_at(line) {
                problems.push(format!("{name}:{}:{}: {}", i + 1, at + 1, line.trim()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} lines cite a tracker's issue number, which the repository does not hold: \
         say what it means (the behaviour, the reason, the failure it prevents) or name \
         the test that proves it, and name a test by the behaviour it proves\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_tracker_rule_sees_numbers_in_any_form_and_lets_the_word_alone_pass() {
    // Written with `@` for "ue", so that this file does not cite what it
    // tests for.
    let at = |line: &str| tracker_number_at(&line.replace('@', "ue"));
    for cited in [
        "// iss@ 16: a slot is kept",
        "    // Iss@ #12.",
        "//! Partitions (ISS@ 10): rollups",
        "fn iss@_15_rows_have_one_digest() {",
        "fn a_iss@_15() {",
        "# since iss@s 12 and 14",
        "// https://github.com/weir/weir/iss@s/23 item 7: every file",
        "\"\"\"Prints (iss@-29)",
    ] {
        assert!(at(cited).is_some(), "{cited}");
    }
    assert_eq!(at("x // iss@ 3"), Some(5));
    for fine in [
        "// an iss@ with the store: 3 retries",
        "// the iss@s: 1) late, 2) lost",
        "// tiss@ 3",
        "let issued = 12;",
        "// reissue 2 requests",
    ] {
        assert_eq!(at(fine), None, "{fine}");
    }
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
        [
            "debug: weir::exec::job: runs: nothing is published yet task=up partition=all",
            "debug: weir::exec::scheduler: skipped: upstream `up` all did not publish task=down partition=all"
        ],
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

const CHAIN: &str = r#"
[pipeline]
name = "chain"
code_version = "1"
warehouse = "wh"

[tasks.up]
partitioned_by = []
command = ["sh", "-c", "printf 'a\n%s\n' \"$WEIR_RUN_ID\" > \"$WEIR_OUTPUT_DIR/x.csv\""]
output = { dataset = "up", grain = ["a"] }

[tasks.down]
partitioned_by = []
command = ["sh", "-c", "cp \"$WEIR_INPUT_UP\"/x.csv \"$WEIR_OUTPUT_DIR/x.csv\""]
inputs = ["up"]
output = { dataset = "down", grain = ["a"] }
"#;

/// The `runs:` and `not run:` lines of a verbose run, without the digests.
fn run_decisions(out: &std::process::Output) -> Vec<String> {
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    debug_lines(&out.stderr)
        .into_iter()
        .filter(|l| l.contains("weir::exec::job"))
        .map(|l| match l.find(" (input snapshot ") {
            Some(at) => format!("{} …{}", &l[..at], &l[l.rfind(')').unwrap() + 1..]),
            None => l,
        })
        .collect()
}

#[test]
fn verbose_says_why_each_instance_runs_or_not() {
    let sb = Sandbox::new(CHAIN);
    let verbose = |args: &[&str]| {
        let mut all = vec!["-v", "run", "m.toml"];
        all.extend(args);
        run_decisions(&sb.weir(&all).output().unwrap())
    };
    assert_eq!(
        verbose(&[]),
        [
            "debug: weir::exec::job: runs: nothing is published yet task=up partition=all",
            "debug: weir::exec::job: runs: nothing is published yet task=down partition=all",
        ]
    );
    assert_eq!(
        verbose(&["--task", "up", "--force"]),
        ["debug: weir::exec::job: runs: forced (generation 1 is visible) task=up partition=all"]
    );
    assert_eq!(
        verbose(&[]),
        [
            "debug: weir::exec::job: not run: generation 2 is current (code_version 1) task=up partition=all",
            "debug: weir::exec::job: runs: its inputs changed since generation 1 … task=down partition=all",
        ]
    );
    let bumped = CHAIN.replace("code_version = \"1\"", "code_version = \"2\"");
    std::fs::write(sb.path().join("m.toml"), bumped).unwrap();
    assert_eq!(
        verbose(&["--task", "up"]),
        ["debug: weir::exec::job: runs: generation 2 was built by code_version 1, the manifest's is 2 task=up partition=all"]
    );
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
