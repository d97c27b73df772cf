//! Day two: the operator's repair path (rollback propagates, precise
//! selection, retry of one instance), clean interrupts and Unix manners,
//! through the binary with exit code, stdout and stderr asserted together.

use weir::events::State;

use crate::support::{states, stderr, stdout, Sandbox, Visible};

/// `m.toml` over static `keys`: `a` copies `feed_{partition}.csv` (or writes
/// wrong rows while `flag` exists), `b` copies `a`'s output, `c` copies `b`'s.
fn chain(keys: &[&str]) -> Sandbox {
    let sb = Sandbox::new(&format!(
        r#"
[pipeline]
name = "daytwo"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = {keys:?}

[datasets.feed]
path = "feed_{{partition}}.csv"

[tasks.a]
command = ["sh", "a.sh"]
inputs = ["feed"]
output = {{ dataset = "a_out", grain = ["id"] }}

[tasks.b]
command = ["sh", "copy.sh", "A_OUT"]
inputs = ["a_out"]
output = {{ dataset = "b_out", grain = ["id"] }}

[tasks.c]
command = ["sh", "copy.sh", "B_OUT"]
inputs = ["b_out"]
output = {{ dataset = "c_out", grain = ["id"] }}
"#
    ));
    sb.script(
        "a.sh",
        r#"if [ -f flag ]; then printf 'id,v\n1,wrong\n' > "$WEIR_OUTPUT_DIR/out.csv"
else cp "$WEIR_INPUT_FEED" "$WEIR_OUTPUT_DIR/out.csv"; fi
"#,
    );
    sb.script(
        "copy.sh",
        r#"eval "src=\$WEIR_INPUT_$1"; cat "$src"/*.csv > "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    for k in keys {
        std::fs::write(sb.path().join(format!("feed_{k}.csv")), "id,v\n1,a\n2,b\n").unwrap();
    }
    sb
}

#[track_caller]
fn assert_exit(out: &std::process::Output, expected: i32) {
    assert_eq!(
        out.status.code(),
        Some(expected),
        "stdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

fn rows(sb: &Sandbox, dataset: &str, partition: &str) -> String {
    let out = sb.weir_out(&["show", "m.toml", dataset, "--partition", partition]);
    assert_exit(&out, 0);
    assert_eq!(stderr(&out), "");
    stdout(&out)
}

// issue 12: a rolled-back upstream is HELD (not rebuilt) and its published
// generation is consumed downstream: downstream rebuilds from it.
#[test]
fn issue_12_rollback_is_consumed_downstream() {
    let sb = chain(&["k1"]);
    assert_exit(&sb.run("r1", &[]), 0);
    std::fs::write(sb.path().join("flag"), "").unwrap();
    assert_exit(&sb.run("r2", &["--force", "--task", "a"]), 0);
    assert_exit(&sb.run("r2b", &[]), 0);
    assert_eq!(rows(&sb, "c_out", "k1"), "id,v\n1,wrong\n");

    let out = sb.weir_out(&["rollback", "m.toml", "a_out", "--partition", "k1"]);
    assert_exit(&out, 0);
    let rolled = Visible::of(&sb.store("a_out", "k1"));
    assert_eq!(rolled.record.generation.get(), 3);

    // `--task b`: the held upstream is not rebuilt, its rolled-back
    // generation is read.
    let out = sb.run("r3", &["--task", "b"]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains("run r3: 2 task instances: 1 published, 1 held; 0 retries"),
        "{text}"
    );
    assert!(
        text.contains("HELD        a k1: HELD since run op-"),
        "{text}"
    );
    let r3 = sb.events("r3");
    assert_eq!(states(&r3, "a", "k1"), [State::Queued, State::Held]);
    assert_eq!(states(&r3, "b", "k1").last(), Some(&State::Published));
    assert_eq!(rows(&sb, "b_out", "k1"), "id,v\n1,a\n2,b\n");
    assert_eq!(
        sb.store("a_out", "k1").history().unwrap().len(),
        3,
        "a not rebuilt"
    );

    // The whole pipeline: c rebuilds from b's new generation; b is current.
    let out = sb.run("r4", &[]);
    assert_exit(&out, 1);
    let r4 = sb.events("r4");
    assert_eq!(states(&r4, "a", "k1"), [State::Queued, State::Held]);
    assert_eq!(
        states(&r4, "b", "k1").last(),
        Some(&State::AlreadyPublished)
    );
    assert_eq!(states(&r4, "c", "k1").last(), Some(&State::Published));
    assert_eq!(rows(&sb, "c_out", "k1"), "id,v\n1,a\n2,b\n");
    assert!(!stdout(&out).contains("SKIPPED"), "{}", stdout(&out));
}

/// `m.toml` over keys k1, k2 in one slot: `slow` records its pid and its
/// child `sleep`'s, then waits for the sleep (unless `fast` exists); `after`
/// copies `slow`'s output.
fn slow_pipeline() -> Sandbox {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "interrupts"
code_version = "1"
warehouse = "wh"

[pools.default]
slots = 1

[partitions.k]
kind = "static"
keys = ["k1", "k2"]

[tasks.slow]
command = ["sh", "slow.sh"]
output = { dataset = "slow", grain = ["id"] }

[tasks.after]
command = ["sh", "after.sh"]
inputs = ["slow"]
output = { dataset = "after", grain = ["id"] }
"#,
    );
    sb.script(
        "slow.sh",
        r#"if [ ! -f fast ]; then
  sleep 60 & echo "$$ $!" > "pids_$WEIR_PARTITION"; wait
fi
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    sb.script(
        "after.sh",
        r#"cp "$WEIR_INPUT_SLOW"/*.csv "$WEIR_OUTPUT_DIR/""#,
    );
    sb
}

// issue 12: a first SIGINT stops the running task's process tree, records
// the attempt INTERRUPTED, writes RUN_FINISHED, names what was left undone
// and exits 130; the next run resumes at once.
#[test]
fn issue_12_sigint_stops_cleanly_and_the_next_run_resumes() {
    for (signal, code, name) in [
        (libc::SIGINT, 130, "SIGINT"),
        (libc::SIGTERM, 143, "SIGTERM"),
    ] {
        let _serial = crate::support::exclusive();
        let sb = slow_pipeline();
        let engine = crate::support::Engine::spawn(
            sb.weir(&[
                "run",
                "m.toml",
                "--run-id",
                "r1",
                "--partition",
                "k1",
                "--partition",
                "k2",
            ]),
            sb.path(),
            "r1",
        );
        // One slot: exactly one `slow` instance is running its sleep.
        let pids_file = || {
            ["k1", "k2"]
                .iter()
                .map(|k| sb.path().join(format!("pids_{k}")))
                .find(|p| std::fs::read_to_string(p).is_ok_and(|t| t.ends_with('\n')))
        };
        crate::support::poll_until("a task running", std::time::Duration::from_secs(20), || {
            pids_file().is_some()
        });
        let pids: Vec<u32> = std::fs::read_to_string(pids_file().unwrap())
            .unwrap()
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(pids.len(), 2);
        engine.signal(signal);
        let started = std::time::Instant::now();
        let out = engine.finish(std::time::Duration::from_secs(10));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_exit(&out, code);
        for pid in &pids {
            assert!(
                matches!(crate::support::process_state(*pid), None | Some('Z')),
                "task process {pid} outlived the interrupt"
            );
        }
        let text = stdout(&out);
        assert!(
            text.contains("run r1: 4 task instances: 4 interrupted; 0 retries"),
            "{text}"
        );
        assert!(
            text.contains("  INTERRUPTED slow ")
                && text.contains(&format!("interrupted: weir received {name}")),
            "{text}"
        );
        assert!(
            text.contains("not started: the run was interrupted"),
            "{text}"
        );
        assert!(
            stderr(&out).ends_with(&format!(
                "weir: interrupted by {name}: 4 task instances left undone; run the same command again to resume\n"
            )),
            "{}",
            stderr(&out)
        );
        let events = sb.events("r1");
        let last = events.last().unwrap();
        assert_eq!(last.state, State::RunFinished);
        assert_eq!(last.data["interrupted"], name);
        // The running attempt and the one admitted, waiting for the slot:
        // both had tokens, both end INTERRUPTED; `after` never started.
        let interrupted: Vec<_> = events
            .iter()
            .filter(|e| e.state == State::Interrupted)
            .collect();
        assert_eq!(interrupted.len(), 2, "{interrupted:?}");
        assert!(interrupted
            .iter()
            .all(|e| e.task.as_deref() == Some("slow")));
        assert!(!events.iter().any(|e| e.task.as_deref() == Some("after")));
        assert!(!events.iter().any(|e| e.state == State::Skipped));

        // The next run does not wait for r1's leases.
        std::fs::write(sb.path().join("fast"), "").unwrap();
        let started = std::time::Instant::now();
        let out = sb.run("r2", &["--partition", "k1", "--partition", "k2"]);
        assert_exit(&out, 0);
        assert!(stdout(&out).contains("run r2: 4 task instances: 4 published; 0 retries"));
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        assert!(
            !sb.events("r2").iter().any(|e| e.state == State::Waiting),
            "no takeover wait"
        );
    }
}
