//! The store's integrity when its files are shared, left behind, removed or
//! rewritten. Staging is private to one warehouse and one attempt; a commit
//! record that goes is noticed and its generation number never used again;
//! tokens come from above everything committed; `verify` and `status
//! --check` prove the visible files by their digest and the record by its
//! token.

use std::path::{Path, PathBuf};

use weir::events::State;

use crate::support::{ok, states, stderr, stdout, Sandbox, Visible};

const MANIFEST: &str = r#"
[pipeline]
name = "integrity"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["p"]

[tasks.write]
command = ["sh", "write.sh"]
output = { dataset = "out", grain = ["id"] }
"#;

/// The pipeline: `write` publishes the same two rows every time.
fn sandbox() -> Sandbox {
    let sb = Sandbox::new(MANIFEST);
    sb.script(
        "write.sh",
        "printf 'id,v\\n1,a\\n2,b\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb
}

/// `<wh>/out/p/<sub>`.
fn part(sb: &Sandbox, sub: &str) -> PathBuf {
    sb.path().join("wh/out/p").join(sub)
}

/// The key name of generation or token `n`.
fn key(n: u64) -> String {
    format!("{n:020}")
}

/// `weir ARGS...` in the sandbox, waited for; diagnostics one line each.
fn weir_out(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    sb.weir(args)
        .env("COLUMNS", "400")
        .env("NO_COLOR", "1")
        .output()
        .expect("weir runs")
}

/// Asserts `out` exited `code`, showing both streams if not.
#[track_caller]
fn exits(out: &std::process::Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

/// Publishes generations 1 (run r1) and 2 (run r2, forced), tokens 1 and 2.
fn two_generations(sb: &Sandbox) {
    ok(&sb.run("r1", &[]));
    ok(&sb.run("r2", &["--force"]));
    let tokens: Vec<u64> = sb
        .store("out", "p")
        .history()
        .unwrap()
        .iter()
        .map(|r| r.token.get())
        .collect();
    assert_eq!(tokens, [1, 2]);
}

// Files a killed attempt left in an attempt directory are not published by
// the next attempt that gets its token (the directory starts empty).
#[test]
fn stale_files_in_an_attempt_directory_are_not_published() {
    let sb = sandbox();
    ok(&sb.run("r1", &[]));
    // What a killed attempt holding the next token left behind: a data
    // file (same columns, so the audit would take it), a candidate and a
    // lease.
    let next = part(&sb, &format!("attempts/{}", key(2)));
    std::fs::create_dir_all(next.join("data")).unwrap();
    std::fs::write(next.join("data/left.csv"), "id,v\n9,stale\n").unwrap();
    std::fs::write(next.join("candidate.json"), "{}").unwrap();
    let out = sb.run("r2", &["--force"]);
    ok(&out);
    let visible = Visible::of(&sb.store("out", "p"));
    assert_eq!(
        (visible.record.generation.get(), visible.record.token.get()),
        (2, 2)
    );
    assert_eq!(visible.record.files, ["out.csv"]);
    assert_eq!(visible.rows(), [["1", "a"], ["2", "b"]]);
    assert!(!next.join("data/left.csv").exists());
}

// A deleted newest commit record is noticed by readers, `status` and
// `status --check` (exit 5, naming it), and its generation number is not
// used again.
#[test]
fn a_deleted_newest_record_is_noticed_and_never_reused() {
    let sb = sandbox();
    two_generations(&sb);
    let record = part(&sb, &format!("log/{}.json", key(2)));
    std::fs::remove_file(&record).unwrap();
    let said = format!(
        "error: out p: cannot read its commit log: commit record out/p/log/{}.json is missing: generation 2 (token 2) was committed\n",
        key(2)
    );
    for args in [&["status", "m.toml"][..], &["status", "m.toml", "--check"]] {
        let status = weir_out(&sb, args);
        exits(&status, 5);
        assert_eq!(stderr(&status), said, "{args:?}");
        assert_eq!(stdout(&status), "", "{args:?}");
    }
    let show = weir_out(&sb, &["show", "m.toml", "out", "--partition", "p"]);
    exits(&show, 5);
    assert!(
        stderr(&show).contains(&format!(
            "commit record out/p/log/{}.json is missing: generation 2 (token 2) was committed",
            key(2)
        )),
        "{}",
        stderr(&show)
    );
    assert_eq!(stdout(&show), "");
    // A run publishes nothing over the hole: the engine fails (exit 5) and
    // generation 2 stays unused until the record is restored.
    let run = sb.run("r3", &["--force"]);
    exits(&run, 5);
    assert!(
        stderr(&run).contains("generation 2 (token 2) was committed"),
        "{}",
        stderr(&run)
    );
    assert!(!states(&sb.events("r3"), "write", "p").contains(&State::Published));
    assert_eq!(sb.entries("out", "p", "log"), [format!("{}.json", key(1))]);
    // A record that goes from the middle of the log is a hole too.
    let sb = sandbox();
    two_generations(&sb);
    std::fs::remove_file(part(&sb, &format!("log/{}.json", key(1)))).unwrap();
    let history = weir_out(&sb, &["history", "m.toml", "out", "--partition", "p"]);
    exits(&history, 5);
    assert!(
        stderr(&history).contains("generation 1 (token 1) was committed"),
        "{}",
        stderr(&history)
    );
}

// With the record and its marker both gone, `status --check` still finds
// the PUBLISHED event without its record.
#[test]
fn status_check_finds_a_published_event_without_its_record() {
    let sb = sandbox();
    two_generations(&sb);
    std::fs::remove_file(part(&sb, &format!("log/{}.json", key(2)))).unwrap();
    // (The marker is absent where weir wrote none.) Its witness under
    // `tokens/` gone too, the events are what is left to tell.
    let _ = std::fs::remove_file(part(&sb, &format!("log/{}.published-{}", key(2), key(2))));
    std::fs::remove_file(part(
        &sb,
        &format!("tokens/{}.committed-{}", key(2), key(2)),
    ))
    .unwrap();
    let check = weir_out(&sb, &["status", "m.toml", "--check"]);
    exits(&check, 5);
    assert_eq!(
        stderr(&check),
        format!(
            "error: out p: cannot read its commit log: run r2 published generation 2 (token 2), and its commit record {} is missing\n",
            part(&sb, &format!("log/{}.json", key(2))).display()
        )
    );
}

// The newest record and its marker removed together (`rm log/<g>*`): the
// log alone looks whole, one generation shorter. `status` and `show` served
// generation 1 as the newest (exit 0) and the next publish committed a new
// generation 2; the commit's witness under `tokens/` says generation 2 was
// committed, so both refuse (exit 5) naming the missing record, and a run
// publishes nothing over it.
#[test]
fn a_newest_record_removed_with_its_marker_is_noticed_and_never_reused() {
    let sb = sandbox();
    two_generations(&sb);
    for name in sb.entries("out", "p", "log") {
        if name.starts_with(&key(2)) {
            std::fs::remove_file(part(&sb, &format!("log/{name}"))).unwrap();
        }
    }
    assert_eq!(sb.entries("out", "p", "log"), [format!("{}.json", key(1))]);
    let missing = format!(
        "commit record out/p/log/{}.json is missing: generation 2 (token 2) was committed",
        key(2)
    );
    let status = weir_out(&sb, &["status", "m.toml"]);
    exits(&status, 5);
    assert_eq!(
        stderr(&status),
        format!("error: out p: cannot read its commit log: {missing}\n")
    );
    assert_eq!(stdout(&status), "");
    let show = weir_out(&sb, &["show", "m.toml", "out", "--partition", "p"]);
    exits(&show, 5);
    assert!(stderr(&show).contains(&missing), "{}", stderr(&show));
    assert_eq!(stdout(&show), "");
    let run = sb.run("r3", &["--force"]);
    exits(&run, 5);
    assert!(stderr(&run).contains(&missing), "{}", stderr(&run));
    assert!(!states(&sb.events("r3"), "write", "p").contains(&State::Published));
    assert_eq!(
        sb.entries("out", "p", "log"),
        [format!("{}.json", key(1))],
        "nothing committed"
    );
}

// A commit on a local disk leaves one marker, its witness under `tokens/`
// (one inode per instance fewer than a marker in `log/` beside it), and a
// warehouse written when every commit left both is still read: there the
// `log/` marker of a newest record gone is what tells, its witness gone
// too.
#[test]
fn one_marker_per_commit_and_an_older_layouts_log_marker_still_tells() {
    let sb = sandbox();
    two_generations(&sb);
    assert_eq!(
        sb.entries("out", "p", "log"),
        [format!("{}.json", key(1)), format!("{}.json", key(2))]
    );
    for g in [1, 2] {
        assert!(part(&sb, &format!("tokens/{}.committed-{}", key(g), key(g))).is_file());
    }
    // The layout before: a marker beside each record.
    for g in [1, 2] {
        let marker = part(&sb, &format!("log/{}.published-{}", key(g), key(g)));
        std::fs::write(marker, key(g)).unwrap();
    }
    ok(&weir_out(&sb, &["status", "m.toml"]));
    std::fs::remove_file(part(&sb, &format!("log/{}.json", key(2)))).unwrap();
    std::fs::remove_file(part(
        &sb,
        &format!("tokens/{}.committed-{}", key(2), key(2)),
    ))
    .unwrap();
    let show = weir_out(&sb, &["show", "m.toml", "out", "--partition", "p"]);
    exits(&show, 5);
    assert!(
        stderr(&show).contains(&format!(
            "commit record out/p/log/{}.json is missing: generation 2 (token 2) was committed",
            key(2)
        )),
        "{}",
        stderr(&show)
    );
    assert_eq!(stdout(&show), "");
    let run = sb.run("r3", &["--force"]);
    exits(&run, 5);
    assert!(!states(&sb.events("r3"), "write", "p").contains(&State::Published));
}

// With the token records gone, a forced rebuild gets a token above the
// committed one and publishes (it was REJECTED_STALE and exited 0 having
// published nothing).
#[test]
fn tokens_come_from_above_the_log_when_token_records_go() {
    let sb = sandbox();
    two_generations(&sb);
    std::fs::remove_dir_all(part(&sb, "tokens")).unwrap();
    std::fs::create_dir(part(&sb, "tokens")).unwrap();
    let run = sb.run("r3", &["--force"]);
    ok(&run);
    assert_eq!(
        states(&sb.events("r3"), "write", "p"),
        [
            State::Queued,
            State::Running,
            State::Success,
            State::Audited,
            State::Published
        ]
    );
    let visible = Visible::of(&sb.store("out", "p"));
    assert_eq!(
        (visible.record.generation.get(), visible.record.token.get()),
        (3, 3)
    );
    assert_eq!(sb.entries("out", "p", "tokens"), [key(3)]);
    assert!(part(&sb, &format!("tokens/{}.committed-{}", key(3), key(3))).exists());
}

// A forced rebuild that a newer token fences off publishes nothing, and
// that is not a success, even when the visible generation has the same
// inputs and code: the record that beat it was there before it began (here:
// generation 1's token turned into 999 by hand while the task ran). It
// exited 0.
#[test]
fn a_forced_rebuild_that_publishes_nothing_is_refused() {
    let sb = sandbox();
    sb.script(
        "write.sh",
        "printf 'id,v\\n1,a\\n2,b\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n\
         if [ -n \"$FORGE\" ]; then sed -i 's/\"token\": 1,/\"token\": 999,/' \"$WEIR_OUTPUT_DIR/../../../log/00000000000000000001.json\"; fi\n",
    );
    ok(&sb.run("r1", &[]));
    let run = sb
        .weir(&["run", "m.toml", "--run-id", "r2", "--force"])
        .env("FORGE", "1")
        .output()
        .unwrap();
    exits(&run, 3);
    assert!(
        stderr(&run).contains(
            "write p attempt 1 token 2: REJECTED_STALE token 2 is not newer than token 999 committed at generation 1; the candidate stays unpublished\n"
        ),
        "{}",
        stderr(&run)
    );
    assert_eq!(
        states(&sb.events("r2"), "write", "p").last(),
        Some(&State::RejectedStale)
    );
    assert_eq!(sb.records("out", "p"), [format!("{}.json", key(1))]);
}

/// Rewrites generation `g`'s record at `to` with `edit` applied.
fn rewrite_record(sb: &Sandbox, g: u64, to: u64, edit: impl FnOnce(&mut serde_json::Value)) {
    let from = part(sb, &format!("log/{}.json", key(g)));
    let mut rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&from).unwrap()).unwrap();
    edit(&mut rec);
    std::fs::write(
        part(sb, &format!("log/{}.json", key(to))),
        serde_json::to_vec_pretty(&rec).unwrap(),
    )
    .unwrap();
}

/// The size and SHA-256 of `path`, as a record's `file_sums` entry.
fn file_sum(path: &Path) -> serde_json::Value {
    serde_json::to_value(weir::store::FileSum::of(path, "out.csv").unwrap()).unwrap()
}

// A published file changed together with its record's per-file sum is
// found by its digest, by `status --check` and `verify` (exit 5), where
// both passed before.
#[test]
fn a_tampered_file_with_a_valid_sum_is_found_by_its_digest() {
    let sb = sandbox();
    ok(&sb.run("r1", &[]));
    let store = sb.store("out", "p");
    let visible = Visible::of(&store);
    let (rows, digest) = visible.recomputed_digest();
    std::fs::write(&visible.files[0], "id,v\n1,a\n2,forged\n").unwrap();
    let (_, forged) = visible.recomputed_digest();
    let sum = file_sum(&visible.files[0]);
    rewrite_record(&sb, 1, 1, |rec| rec["file_sums"] = serde_json::json!([sum]));
    let status = weir_out(&sb, &["status", "m.toml"]);
    exits(&status, 0);
    let said = format!(
        "error: the files of `out` p generation 1 hold 2 rows with {forged}; its commit record says {rows} rows with {digest}\n"
    );
    let check = weir_out(&sb, &["status", "m.toml", "--check"]);
    exits(&check, 5);
    assert_eq!(stderr(&check), said);
    let verify = weir_out(&sb, &["verify", "m.toml", "write", "--partition", "p"]);
    exits(&verify, 5);
    assert!(
        stderr(&verify).contains(&format!(
            "the files of `out` p generation 1 hold 2 rows with {forged}; its commit record says {rows} rows with {digest}"
        )),
        "{}",
        stderr(&verify)
    );
    assert_eq!(stdout(&verify), "");
}

// A record written by hand with a token the partition never allocated
// (files, sums and digest all valid) is refused by `status --check` and
// `verify`.
#[test]
fn a_record_whose_token_was_never_allocated_is_refused() {
    let sb = sandbox();
    ok(&sb.run("r1", &[]));
    rewrite_record(&sb, 1, 2, |rec| {
        rec["generation"] = 2.into();
        rec["token"] = 99.into();
    });
    let store = sb.store("out", "p");
    assert_eq!(Visible::of(&store).record.token.get(), 99);
    let said = format!(
        "the commit record of `out` p generation 2 names token 99, which this partition never allocated (there is no tokens/{})",
        key(99)
    );
    let check = weir_out(&sb, &["status", "m.toml", "--check"]);
    exits(&check, 5);
    assert_eq!(stderr(&check), format!("error: {said}\n"));
    let verify = weir_out(&sb, &["verify", "m.toml", "write", "--partition", "p"]);
    exits(&verify, 5);
    assert!(stderr(&verify).contains(&said), "{}", stderr(&verify));
}

#[cfg(feature = "s3")]
mod two_endpoints {
    //! Two S3 servers, one bucket name: `WEIR_S3_TEST_ENDPOINT` and
    //! `WEIR_S3_TEST_ENDPOINT_2` (`WEIR_MOTO_PORT=5612 ci/moto-up.sh`
    //! starts a second moto), else a moto this test starts itself; skipped
    //! without the first, as every S3 test.

    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::path::Path;
    use std::process::Command;
    use std::time::Duration;

    use crate::support::s3::{backend, create_bucket, endpoint, weir_s3};
    use crate::support::{ok, poll_until, stdout, Engine};

    /// `weir --warehouse URL ARGS...` against `endpoint`, staging under the
    /// shared `staging` (one host running both), as `who`.
    fn weir_at(dir: &Path, endpoint: &str, staging: &Path, url: &str, who: &str) -> Command {
        let mut cmd = weir_s3(
            dir,
            endpoint,
            staging,
            url,
            &["run", "m.toml", "--run-id", who],
        );
        cmd.env("WHO", who);
        cmd
    }

    /// A moto server of this test's own, on a free loopback port; stopped
    /// when dropped.
    struct Moto {
        child: std::process::Child,
        endpoint: String,
    }

    impl Moto {
        fn start() -> Moto {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let child = Command::new("python3")
                .args([
                    "-m",
                    "moto.server",
                    "-H",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                ])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("python3 -m moto.server starts (ci/moto-up.sh installs moto)");
            let moto = Moto {
                child,
                endpoint: format!("http://127.0.0.1:{port}"),
            };
            poll_until("the second moto answers", Duration::from_secs(60), || {
                TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut c| {
                    write!(
                        c,
                        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                    )
                    .is_ok()
                        && {
                            let mut reply = String::new();
                            c.read_to_string(&mut reply).is_ok()
                                && reply.starts_with("HTTP/1.1 200")
                        }
                })
            });
            moto
        }
    }

    impl Drop for Moto {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    // Prod and dev, one bucket name and prefix on two servers, one host's
    // staging: each engine stages in its own directory and publishes its
    // own rows (they shared one: prod's attempt took dev's staged file for
    // its own). The second server is `WEIR_S3_TEST_ENDPOINT_2`, else a moto
    // started here.
    #[cfg_attr(
        not(any(weir_has_s3, weir_ci)),
        ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
    )]
    #[test]
    fn one_bucket_name_on_two_endpoints_stages_apart() {
        let Some(prod) = endpoint() else {
            return;
        };
        let own;
        let dev = match std::env::var("WEIR_S3_TEST_ENDPOINT_2") {
            Ok(e) if !e.is_empty() => e,
            _ => {
                own = Moto::start();
                own.endpoint.clone()
            }
        };
        let bucket = format!("weir-two-{}", std::process::id());
        create_bucket(&prod, &bucket);
        create_bucket(&dev, &bucket);
        let url = format!("s3://{bucket}/wh");
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("m.toml"), super::MANIFEST).unwrap();
        // Each writes its own row and says where; dev then waits for go.flag,
        // so both stage at once.
        std::fs::write(
            dir.join("write.sh"),
            "printf 'id,v\\n1,%s\\n' \"$WHO\" > \"$WEIR_OUTPUT_DIR/$WHO.csv\"\n\
             printf '%s' \"$WEIR_OUTPUT_DIR\" > \"$WHO.where\"\n\
             if [ \"$WHO\" = dev ]; then i=0; while [ ! -f go.flag ] && [ $i -lt 2000 ]; do sleep 0.01; i=$((i+1)); done; fi\n",
        )
        .unwrap();
        let staging = dir.join("staging");
        let dev_engine = Engine::spawn(weir_at(dir, &dev, &staging, &url, "dev"), dir, "dev");
        poll_until("dev staged", Duration::from_secs(30), || {
            dir.join("dev.where").exists()
        });
        let prod_run = weir_at(dir, &prod, &staging, &url, "prod")
            .output()
            .unwrap();
        std::fs::write(dir.join("go.flag"), "").unwrap();
        let dev_run = dev_engine.finish(Duration::from_secs(60));
        ok(&prod_run);
        ok(&dev_run);
        let prod_dir = std::fs::read_to_string(dir.join("prod.where")).unwrap();
        let dev_dir = std::fs::read_to_string(dir.join("dev.where")).unwrap();
        assert_ne!(prod_dir, dev_dir);
        for (endpoint, who) in [(&prod, "prod"), (&dev, "dev")] {
            let backend = backend(endpoint, &url);
            let log = weir::store::Warehouse::remote(
                std::sync::Arc::new(backend),
                &url,
                &dir.join(format!("read-{who}")),
            )
            .unwrap()
            .partition("out", "p")
            .latest()
            .unwrap()
            .expect("published");
            assert_eq!(log.files, [format!("{who}.csv")], "{}", stdout(&prod_run));
            assert_eq!(log.rows, 1);
        }
    }
}
