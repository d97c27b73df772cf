//! A full disk: the attempt fails, the published generation stays visible and
//! readable, nothing partial appears; once space is back, a rerun converges
//! to the digest of a run that never saw the disk fill.
//!
//! The warehouse lives on a small tmpfs, so this needs root (CI has it); where
//! mounting is not permitted the test says so and returns.

use std::path::Path;
use std::process::Command;

use crate::support::{run_in, stdout};

const MANIFEST: &str = r#"
[pipeline]
name = "full"
code_version = "1"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["p"]

[retry.quick]
max_attempts = 2
backoff = { initial = "1ms", max = "2ms" }

[datasets.raw]
path = "raw.csv"

[tasks.copy]
command = ["sh", "copy.sh"]
inputs = ["raw"]
output = { dataset = "copied", grain = ["id"] }
retry = "quick"
"#;

fn setup(dir: &Path, rows: usize) {
    std::fs::write(dir.join("m.toml"), MANIFEST).unwrap();
    std::fs::write(
        dir.join("copy.sh"),
        "cat \"$WEIR_INPUT_RAW\" > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    )
    .unwrap();
    write_raw(dir, rows);
}

fn write_raw(dir: &Path, rows: usize) {
    let mut text = String::from("id,payload\n");
    for i in 0..rows {
        text.push_str(&format!("{i},{}\n", "x".repeat(60)));
    }
    std::fs::write(dir.join("raw.csv"), text).unwrap();
}

fn mount_tmpfs(at: &Path, size: &str) -> bool {
    std::fs::create_dir_all(at).unwrap();
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(at)
        .status()
        .is_ok_and(|s| s.success())
}

struct Unmount<'a>(&'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

fn latest(dir: &Path) -> serde_json::Value {
    let out = run_in(dir, &["status", "m.toml", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["partitions"][0].clone()
}

#[test]
fn a_full_disk_loses_nothing_and_a_rerun_converges() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    setup(dir, 100);
    let wh = dir.join("wh");
    if !mount_tmpfs(&wh, "1m") {
        eprintln!("skipping: cannot mount a tmpfs here (needs root)");
        return;
    }
    let _unmount = Unmount(&wh);

    // Generation 1: small, fits.
    assert_eq!(run_in(dir, &["run", "m.toml"]).status.code(), Some(0));
    let before = latest(dir);
    let shown_before = stdout(&run_in(
        dir,
        &["show", "m.toml", "copied", "--partition", "p"],
    ));

    // New input of ~2 MB on a 1 MB disk: the attempt cannot be written.
    write_raw(dir, 30_000);
    // The task's own write fails first (exit 1, retried); the engine's
    // next token then finds no space: the engine's failure, exit 5.
    let out = run_in(dir, &["run", "m.toml"]);
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let during = latest(dir);
    assert_eq!(
        during["generation"], before["generation"],
        "nothing new is visible"
    );
    assert_eq!(during["digest"], before["digest"]);
    assert_eq!(
        stdout(&run_in(
            dir,
            &["show", "m.toml", "copied", "--partition", "p"]
        )),
        shown_before,
        "the published rows are intact and readable"
    );

    // Space comes back: the same input converges to the reference digest.
    let ok = Command::new("mount")
        .args(["-o", "remount,size=64m"])
        .arg(&wh)
        .status()
        .unwrap();
    assert!(ok.success());
    // An engine failure leaves no marker: the next run simply tries it
    // again (`weir retry` refuses an instance that waits for no operator's
    // decision).
    let out = run_in(dir, &["run", "m.toml"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = latest(dir);
    assert_eq!(after["rows"], 30_000);

    let reference = tempfile::tempdir().unwrap();
    setup(reference.path(), 30_000);
    assert_eq!(
        run_in(reference.path(), &["run", "m.toml"]).status.code(),
        Some(0)
    );
    assert_eq!(after["digest"], latest(reference.path())["digest"]);
    // Every generation in the log is complete: each names files that exist.
    let history = weir::store::Warehouse::open(&wh)
        .unwrap()
        .partition("copied", "p")
        .history()
        .unwrap();
    assert_eq!(history.len(), 2);
    for record in &history {
        for f in &record.files {
            assert!(wh.join(record.data_key()).join(f).is_file());
        }
    }
}

/// Fills the filesystem under `dir` with one file, to the last byte it takes.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(dir.join("_filler")).unwrap();
    let block = vec![b'x'; 4096];
    loop {
        if let Err(e) = file.write_all(&block) {
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
            break;
        }
    }
    // The last partial block too.
    while file.write_all(b"x").is_ok() {}
}

// On a full disk `gc --apply` deleted nothing: it logs each deletion before
// making it, the log could not take a line, and only a hand `rm` freed
// space. The warehouse keeps a reserve that gc gives back before it logs:
// it deletes what it may, each deletion still logged first.
#[test]
fn gc_frees_space_on_a_full_disk_and_still_logs_first() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    setup(dir, 100);
    let wh = dir.join("wh");
    if !mount_tmpfs(&wh, "1m") {
        eprintln!("skipping: cannot mount a tmpfs here (needs root)");
        return;
    }
    let _unmount = Unmount(&wh);
    assert_eq!(run_in(dir, &["run", "m.toml"]).status.code(), Some(0));
    // Generation 2 over it: generation 1's attempt is collectable once no
    // generation before the current one is kept for rollback.
    assert_eq!(
        run_in(dir, &["run", "m.toml", "--force"]).status.code(),
        Some(0)
    );
    let shown = stdout(&run_in(
        dir,
        &["show", "m.toml", "copied", "--partition", "p"],
    ));
    fill(&wh);
    let gc = [
        "gc",
        "m.toml",
        "--apply",
        "--older-than",
        "0s",
        "--keep-generations",
        "0",
    ];
    let out = run_in(dir, &gc);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout(&out).contains("deleted 1 candidate directory, 1 kept"),
        "{}",
        stdout(&out)
    );
    assert!(!wh.join("copied/p/attempts/00000000000000000001").exists());
    assert!(wh.join("copied/p/attempts/00000000000000000002").exists());
    // The deletion's evidence is in the warehouse.
    let events = crate::support::all_events(&wh).unwrap();
    let deleted: Vec<_> = events
        .iter()
        .filter(|e| e.state == weir::events::State::GcDeleted)
        .collect();
    assert_eq!(deleted.len(), 1, "{events:?}");
    assert_eq!(deleted[0].token, Some(1));
    // What is published is untouched.
    assert_eq!(
        stdout(&run_in(
            dir,
            &["show", "m.toml", "copied", "--partition", "p"]
        )),
        shown
    );
}

const HOURLY: &str = r#"
[pipeline]
name = "full"
code_version = "1"
warehouse = "wh"

[partitions.hour]
kind = "hourly"
start = "2026-09-20T00"

[tasks.h]
command = ["sh", "h.sh"]
partitioned_by = "hour"
output = { dataset = "hours", grain = ["hour"] }
"#;

// Serve exited 5 at the first ENOSPC. Now its own writes (progress, MISSED
// records) wait out a full disk, saying so once, and serve goes on when
// space is back: the next period publishes, and SIGTERM still stops it.
#[test]
fn serve_pauses_on_a_full_disk_and_goes_on_when_space_is_back() {
    let sb = crate::support::Sandbox::new(HOURLY);
    sb.script(
        "h.sh",
        "printf 'hour,n\\n%s,1\\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/part.csv\"\n",
    );
    let wh = sb.path().join("wh");
    if !mount_tmpfs(&wh, "2m") {
        eprintln!("skipping: cannot mount a tmpfs here (needs root)");
        return;
    }
    let _unmount = Unmount(&wh);
    let mut serve =
        crate::serve::Serve::spawn(sb.weir(&["serve", "m.toml"]), "2026-09-20T11:59:54Z");
    serve.wait_for(&["DONE h 2026-09-20T10 PUBLISHED"]);
    serve.wait_for(&["IDLE until 2026-09-20T12:00:00Z"]);
    fill(&wh);
    // Hour 11 is due at 12:00:00; its writes meet the full disk.
    serve.wait_for_stderr("the warehouse's disk is full");
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(
        serve.running(),
        "serve exited on a full disk: {:#?}",
        serve.lines()
    );
    std::fs::remove_file(wh.join("_filler")).unwrap();
    serve.wait_for_stderr("the warehouse's disk has space again");
    serve.wait_for(&["DONE h 2026-09-20T11 PUBLISHED"]);
    let (code, lines) = serve.stop();
    assert_eq!(code, 0, "{lines:#?}");
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("EXIT: serve could not go on")),
        "{lines:#?}"
    );
}
