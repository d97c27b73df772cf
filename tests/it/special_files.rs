//! Paths a user gives that are not regular files: a FIFO nobody writes to
//! used to hang `run` in `open()` (SIGTERM could not stop it) and
//! `weir validate /dev/zero` grew without bound. Each now gets a clear error
//! and an exit code at once; the engine runs in the background with a
//! deadline, so a regression fails the test instead of hanging it.

use std::path::Path;
use std::time::Duration;

use crate::support::{stderr, stdout, Engine, Sandbox};

/// Well past what an error takes; a hang is killed here.
const LIMIT: Duration = Duration::from_secs(30);

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

const MANIFEST: &str = r#"
[pipeline]
name = "special"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["a"]

[datasets.raw]
path = "raw_{partition}.csv"
watermark = "raw_{partition}.wm"

[tasks.copy]
command = ["sh", "-c", "cp \"$WEIR_INPUT_RAW\" \"$WEIR_OUTPUT_DIR/out.csv\""]
inputs = ["raw"]
output = { dataset = "copied", grain = ["id"] }
"#;

fn finish(sb: &Sandbox, args: &[&str], name: &str) -> std::process::Output {
    Engine::spawn(sb.weir(args), sb.path(), name).finish(LIMIT)
}

#[test]
fn a_fifo_manifest_is_refused_without_waiting_for_a_writer() {
    let sb = Sandbox::new(MANIFEST);
    mkfifo(&sb.path().join("fifo.toml"));
    let out = finish(&sb, &["validate", "fifo.toml"], "validate");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("cannot read `fifo.toml`: it is a FIFO (named pipe), not a regular file"),
        "{}",
        stderr(&out)
    );
    let out = finish(&sb, &["run", "fifo.toml"], "run");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn dev_zero_as_a_manifest_is_refused_not_read_without_end() {
    let sb = Sandbox::new(MANIFEST);
    let out = finish(&sb, &["validate", "/dev/zero"], "validate");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("cannot read `/dev/zero`: it is a character device, not a regular file"),
        "{}",
        stderr(&out)
    );
    // A regular file too large for a manifest is refused by its size.
    std::fs::write(sb.path().join("big.toml"), "#".repeat(5 << 20)).unwrap();
    let out = finish(&sb, &["validate", "big.toml"], "big");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot read `big.toml`: it is larger than 4 MiB"),
        "{}",
        stderr(&out)
    );
}

/// Runs the one instance; its input or watermark is the FIFO.
fn run_with_fifo(fifo: &str, other: (&str, &str)) -> (Sandbox, std::process::Output) {
    let sb = Sandbox::new(MANIFEST);
    mkfifo(&sb.path().join(fifo));
    std::fs::write(sb.path().join(other.0), other.1).unwrap();
    let out = finish(&sb, &["run", "m.toml", "--run-id", "r1"], "run");
    (sb, out)
}

#[test]
fn a_fifo_external_input_fails_its_instance_at_once() {
    let (sb, out) = run_with_fifo("raw_a.csv", ("raw_a.wm", "2026-09-20T00:00:00Z\n"));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains("raw_a.csv): it is a FIFO (named pipe), not a regular file"),
        "{text}"
    );
    assert!(sb.store("copied", "a").generations().unwrap().is_empty());
}

#[test]
fn a_fifo_watermark_fails_its_instance_at_once() {
    let (sb, out) = run_with_fifo("raw_a.wm", ("raw_a.csv", "id\n1\n"));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains("raw_a.wm): it is a FIFO (named pipe), not a regular file"),
        "{text}"
    );
    assert!(sb.store("copied", "a").generations().unwrap().is_empty());
}

#[test]
fn a_fifo_secret_file_fails_its_instance_at_once() {
    let manifest = MANIFEST.replace(
        "inputs = [\"raw\"]",
        "inputs = [\"raw\"]\nenv = { pass = [\"PATH\"], set = { TOKEN = \"file:token.secret\" } }",
    );
    let sb = Sandbox::new(&manifest);
    mkfifo(&sb.path().join("token.secret"));
    std::fs::write(sb.path().join("raw_a.csv"), "id\n1\n").unwrap();
    std::fs::write(sb.path().join("raw_a.wm"), "2026-09-20T00:00:00Z\n").unwrap();
    let out = finish(&sb, &["run", "m.toml", "--run-id", "r1"], "run");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains(
            "token.secret`, which cannot be read: it is a FIFO (named pipe), not a regular file"
        ),
        "{text}"
    );
    assert!(sb.store("copied", "a").generations().unwrap().is_empty());
}
