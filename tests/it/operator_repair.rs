//! Day two: the operator's repair path (rollback propagates, precise
//! selection, retry of one instance), clean interrupts and Unix manners,
//! through the binary with exit code, stdout and stderr asserted together.
//!
//! The longest outputs are snapshots, `snapshots/it__operator_repair__*.snap` (times,
//! durations and operator run ids masked): after a deliberate change run
//! `INSTA_UPDATE=always cargo test --test it -- operator_repair::` and review the diff
//! (support/snapshot.rs); a missing or different snapshot fails.

use weir::events::State;

use crate::support::snapshot;
use crate::support::{assert_exit, states, stderr, stdout, Sandbox, Visible};

/// `m.toml` over static `keys`: `a` copies `feed_{partition}.csv` (or writes
/// wrong rows while `flag` exists), `b` copies `a`'s output, `c` copies `b`'s.
fn chain(keys: &[&str]) -> Sandbox {
    chain_over(&format!("kind = \"static\"\nkeys = {keys:?}"), keys)
}

/// `chain` over the scheme `scheme` (the body of `[partitions.k]`), with a
/// feed for each of `keys`.
fn chain_over(scheme: &str, keys: &[&str]) -> Sandbox {
    let sb = Sandbox::new(&format!(
        r#"
[pipeline]
name = "daytwo"
code_version = "1"
warehouse = "wh"

[partitions.k]
{scheme}

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

fn rows(sb: &Sandbox, dataset: &str, partition: &str) -> String {
    let out = sb.weir_out(&["show", "m.toml", dataset, "--partition", partition]);
    assert_exit(&out, 0);
    assert_eq!(stderr(&out), "");
    stdout(&out)
}

// A rolled-back upstream is HELD (not rebuilt) and its published
// generation is consumed downstream: downstream rebuilds from it.
#[test]
fn rollback_is_consumed_downstream() {
    let sb = chain(&["k1"]);
    sb.run_cmd("r1", &[])
        .assert()
        .code(0)
        .stdout("run r1: 3 task instances: 3 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    std::fs::write(sb.path().join("flag"), "").unwrap();
    sb.run_cmd("r2", &["--force", "--task", "a"])
        .assert()
        .code(0)
        .stdout("run r2: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r2/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 2: PUBLISHED generation 2: 1 rows, sha256:d5343173aede9185cd72f1f6017a4fd02aca07a78e41b01f233734d65ada973f\n");
    sb.run_cmd("r2b", &[])
        .assert()
        .code(0)
        .stdout("run r2b: 3 task instances: 2 published, 1 already published; 0 retries\nevents: $SB/wh/_runs/r2b/events.jsonl\n")
        .stderr_unordered("a k1: ALREADY_PUBLISHED generation 2 has the same input snapshot (code_version 1): nothing to do\nb k1 attempt 1 token 2: PUBLISHED generation 2: 1 rows, sha256:d5343173aede9185cd72f1f6017a4fd02aca07a78e41b01f233734d65ada973f\nc k1 attempt 1 token 2: PUBLISHED generation 2: 1 rows, sha256:d5343173aede9185cd72f1f6017a4fd02aca07a78e41b01f233734d65ada973f\n");
    assert_eq!(rows(&sb, "c_out", "k1"), "id,v\n1,wrong\n");

    let out = sb.weir_out(&["rollback", "m.toml", "a_out", "--partition", "k1"]);
    sb.check(&out).code(0).stdout("a_out k1: generation 3 now shows the files of generation 1 (2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3); the instance is held until `weir retry`\n").stderr("");
    let rolled = Visible::of(&sb.store("a_out", "k1"));
    assert_eq!(rolled.record.generation.get(), 3);

    // `--task b`: the held upstream is published, so it is pinned, not
    // planned; b rebuilds from its rolled-back generation.
    let out = sb.run("r3", &["--task", "b"]);
    sb.check(&out).code(0).stdout("run r3: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r3/events.jsonl\n").stderr_unordered("b k1 attempt 1 token 3: PUBLISHED generation 3: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    let text = stdout(&out);
    assert!(
        text.starts_with("run r3: 1 task instance: 1 published; 0 retries\n"),
        "{text}"
    );
    let r3 = sb.events("r3");
    assert_eq!(states(&r3, "a", "k1"), []);
    assert_eq!(states(&r3, "b", "k1").last(), Some(&State::Published));
    assert_eq!(rows(&sb, "b_out", "k1"), "id,v\n1,a\n2,b\n");
    assert_eq!(
        sb.store("a_out", "k1").history().unwrap().len(),
        3,
        "a not rebuilt"
    );

    // The whole pipeline: c rebuilds from b's new generation; b is current.
    let out = sb.run("r4", &[]);
    sb.check(&out).code(1).stdout("run r4: 3 task instances: 1 published, 1 already published, 1 held; 0 retries\n  HELD        a k1: since run op-[..]: rolled back to generation 1 of a_out (token 3, replacing generation 2); `weir retry` releases it (a run then rebuilds it if its inputs or code differ from the restored generation's); its published generation stays readable downstream\nevents: $SB/wh/_runs/r4/events.jsonl\n").stderr_unordered("a k1: HELD since run op-[..]: rolled back to generation 1 of a_out (token 3, replacing generation 2); `weir retry` releases it (a run then rebuilds it if its inputs or code differ from the restored generation's); release with `weir retry m.toml a --partition k1 --note ...`; its published generation stays readable downstream\nb k1: ALREADY_PUBLISHED generation 3 has the same input snapshot (code_version 1): nothing to do\nc k1 attempt 1 token 3: PUBLISHED generation 3: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    let text = stdout(&out);
    assert!(
        text.starts_with("run r4: 3 task instances: 1 published, 1 already published, 1 held; 0 retries\n  HELD        a k1: since run op-"),
        "{text}"
    );
    assert!(
        text.contains("its published generation stays readable downstream"),
        "{text}"
    );
    let r4 = sb.events("r4");
    assert_eq!(states(&r4, "a", "k1"), [State::Queued, State::Held]);
    assert_eq!(
        states(&r4, "b", "k1").last(),
        Some(&State::AlreadyPublished)
    );
    assert_eq!(states(&r4, "c", "k1").last(), Some(&State::Published));
    assert_eq!(rows(&sb, "c_out", "k1"), "id,v\n1,a\n2,b\n");
    assert!(!text.contains("SKIPPED"), "{text}");
    // The progress line names the state once: "a k1: HELD since run …".
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(progress.contains("a k1: HELD since run op-"), "{progress}");
    assert!(!progress.contains("HELD HELD"), "{progress}");
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

// A first SIGINT stops the running task's process tree, records
// the attempt INTERRUPTED, writes RUN_FINISHED, names what was left undone
// and exits 130; the next run resumes at once.
#[test]
fn sigint_stops_cleanly_and_the_next_run_resumes() {
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
                && text.contains(&format!(": weir received {name}\n"))
                && !text.contains("INTERRUPTED slow k1: interrupted")
                && !text.contains("INTERRUPTED slow k2: interrupted"),
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

        // An interrupted instance has no marker, so
        // `weir retry` would refuse it: explain recommends the run.
        let out = sb.weir_out(&["explain", "m.toml", "slow", "--partition", "k1"]);
        assert_exit(&out, 0);
        assert!(
            stdout(&out).contains("\nrecommended: run: the last attempt was interrupted and nothing holds the instance; `weir run m.toml --task slow --partition k1` resumes it\n"),
            "{}",
            stdout(&out)
        );
        let out = sb.weir_out(&["explain", "m.toml", "slow", "--partition", "k1", "--json"]);
        let x: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(x["action"], "run");

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

/// The (task, partition, last state) of every instance event of a run, in
/// log order of first appearance.
fn outcome(sb: &Sandbox, run: &str) -> Vec<(String, String, State)> {
    let mut out: Vec<(String, String, State)> = Vec::new();
    for e in sb.events(run) {
        let (Some(t), Some(p)) = (e.task, e.partition) else {
            continue;
        };
        match out.iter_mut().find(|(a, b, _)| *a == t && *b == p) {
            Some(entry) => entry.2 = e.state,
            None => out.push((t, p, e.state)),
        }
    }
    out
}

fn row(t: &str, p: &str, s: State) -> (String, String, State) {
    (t.to_string(), p.to_string(), s)
}

// `--task NAME` runs exactly that task (published upstream is
// pinned, not planned); `NAME+` adds everything downstream, `+NAME`
// everything upstream under the currency test.
#[test]
fn task_selectors_run_one_task_or_add_its_downstream_or_upstream() {
    let sb = chain(&["k1", "k2"]);
    sb.run_cmd("r1", &["--partition", "k1"])
        .assert()
        .code(0)
        .stdout("run r1: 3 task instances: 3 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");

    let out = sb.run("exact", &["--partition", "k1", "--task", "b", "--force"]);
    sb.check(&out).code(0).stdout("run exact: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/exact/events.jsonl\n").stderr_unordered("b k1 attempt 1 token 2: PUBLISHED generation 2: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    assert_eq!(
        stdout(&out).lines().next(),
        Some("run exact: 1 task instance: 1 published; 0 retries")
    );
    assert_eq!(outcome(&sb, "exact"), [row("b", "k1", State::Published)]);

    let out = sb.run("down", &["--partition", "k1", "--task", "b+", "--force"]);
    sb.check(&out).code(0).stdout("run down: 2 task instances: 2 published; 0 retries\nevents: $SB/wh/_runs/down/events.jsonl\n").stderr_unordered("b k1 attempt 1 token 3: PUBLISHED generation 3: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k1 attempt 1 token 2: PUBLISHED generation 2: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    assert_eq!(
        outcome(&sb, "down"),
        [
            row("b", "k1", State::Published),
            row("c", "k1", State::Published)
        ]
    );

    // Nothing changed upstream of b in k1: current, nothing runs.
    let out = sb.run("up1", &["--partition", "k1", "--task", "+b"]);
    sb.check(&out).code(0).stdout("run up1: 2 task instances: 2 already published; 0 retries\nevents: $SB/wh/_runs/up1/events.jsonl\n").stderr_unordered("a k1: ALREADY_PUBLISHED generation 1 has the same input snapshot (code_version 1): nothing to do\nb k1: ALREADY_PUBLISHED generation 3 has the same input snapshot (code_version 1): nothing to do\n");
    assert_eq!(
        outcome(&sb, "up1"),
        [
            row("a", "k1", State::AlreadyPublished),
            row("b", "k1", State::AlreadyPublished)
        ]
    );
    // A changed feed makes a (and so b) not current: both rebuild, c does not.
    std::fs::write(sb.path().join("feed_k1.csv"), "id,v\n1,a\n2,b\n3,c\n").unwrap();
    let out = sb.run("up2", &["--partition", "k1", "--task", "+b"]);
    sb.check(&out).code(0).stdout("run up2: 2 task instances: 2 published; 0 retries\nevents: $SB/wh/_runs/up2/events.jsonl\n").stderr_unordered("a k1 attempt 1 token 2: PUBLISHED generation 2: 3 rows, sha256:0b239d8a8447d621cc56ac919096add8fd667d783560b1bac27134380db08520\nb k1 attempt 1 token 4: PUBLISHED generation 4: 3 rows, sha256:0b239d8a8447d621cc56ac919096add8fd667d783560b1bac27134380db08520\n");
    assert_eq!(
        outcome(&sb, "up2"),
        [
            row("a", "k1", State::Published),
            row("b", "k1", State::Published)
        ]
    );
    assert_eq!(rows(&sb, "b_out", "k1"), "id,v\n1,a\n2,b\n3,c\n");

    // `--task c` in an unpublished partition adds the upstream it needs.
    let out = sb.run("k2", &["--partition", "k2", "--task", "c"]);
    sb.check(&out).code(0).stdout("run k2: 3 task instances: 3 published; 0 retries\nevents: $SB/wh/_runs/k2/events.jsonl\n").stderr_unordered("a k2 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k2 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k2 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    assert_eq!(
        outcome(&sb, "k2"),
        [
            row("a", "k2", State::Published),
            row("b", "k2", State::Published),
            row("c", "k2", State::Published)
        ]
    );

    let out = sb.run("bad", &["--task", "x+"]);
    sb.check(&out).code(2).stdout("").stderr_unordered(
        "weir::plan::unknown_task\n\n  × unknown task `x`\n  help: did you mean `a`?\n",
    );
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("unknown task `x`"),
        "{}",
        stderr(&out)
    );
}

// `weir run --from A --to B` reruns an ad-hoc range without a
// declared backfill; a backwards or empty range is refused with exit 2.
#[test]
fn run_from_to_reruns_an_ad_hoc_range_and_refuses_an_empty_one() {
    let days = ["2026-09-01", "2026-09-02", "2026-09-03", "2026-09-04"];
    let sb = chain_over(
        "kind = \"daily\"\nstart = \"2026-09-01\"\nend = \"2026-09-04\"",
        &days,
    );
    sb.run_cmd(
        "range",
        &["--from", "2026-09-02", "--to", "2026-09-03", "--task", "a"],
    )
    .assert()
    .success()
    .stdout("run range: 2 task instances: 2 published; 0 retries\nevents: $SB/wh/_runs/range/events.jsonl\n")
    .stderr_unordered("a 2026-09-03 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\na 2026-09-02 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    assert_eq!(
        outcome(&sb, "range"),
        [
            row("a", "2026-09-02", State::Published),
            row("a", "2026-09-03", State::Published)
        ]
    );
    sb.cmd(&[
        "plan",
        "m.toml",
        "--from",
        "2026-09-02",
        "--to",
        "2026-09-03",
    ])
    .assert()
    .success()
    .stdout("plan for `daytwo` (code_version 1)\nrange: 2026-09-02 to 2026-09-03 (ad hoc)\n4 will run, 2 current (skipped), 0 stale (redone), 0 blocked (held, quarantined), 0 waiting (input not ready), 0 accepted\n\nstep  task  scheme     pool     retry    instances  expected\n   1  a     k (daily)  default  default          2  1m\n   2  b     k (daily)  default  default          2  1m\n   3  c     k (daily)  default  default          2  1m\n\ninputs by partition (first planned partition of each task):\n  b 2026-09-02 ← a (same partition)\n  c 2026-09-02 ← b (same partition)\n\npool     slots  instances  busy  estimated wall time\ndefault      4          6   50%  2m\n\ntotal: 6 task instances, estimated wall time 2m\np90: 2m (every attempt at its p90)\ncritical path: a → b → c\nattempt durations:\n  a: p50 [..], p90 [..] over the last 2 attempts; 0% failed, 0.00 retries per instance, queued [..] (p50)\n  b: expected_duration 1m (no attempt recorded)\n  c: expected_duration 1m (no attempt recorded)\n")
    .stderr("");

    sb.run_cmd("back", &["--from", "2026-09-03", "--to", "2026-09-02"])
        .assert()
        .code(2)
        .stdout("")
        .stderr("weir::plan::bad_range\n\n  × range 2026-09-03 to 2026-09-02: runs backwards: swap --from and --to\n  help: partitions are `k`: days from 2026-09-01 to 2026-09-04; a task of\n        several dimensions takes keys joined by `|`\n");
    sb.run_cmd("none", &["--from", "2027-01-01", "--to", "2027-01-02"])
        .assert()
        .code(2)
        .stdout("")
        .stderr("weir::plan::bad_range\n\n  × range 2027-01-01 to 2027-01-02: covers no partition of the selected tasks\n  help: partitions are `k`: days from 2026-09-01 to 2026-09-04; a task of\n        several dimensions takes keys joined by `|`\n");
    sb.run_cmd("half", &["--from", "2026-09-01"])
        .assert()
        .code(2)
        .stdout("")
        .stderr("error: the following required arguments were not provided:\n  --to <TO>\n\nUsage: weir run --from <FROM> --to <TO> --run-id <RUN_ID> <MANIFEST>\n\nFor more information, try '--help'.\n");
    assert!(!sb.path().join("wh/_runs/back").exists(), "nothing logged");
}

// `weir retry TASK --partition P` reruns that instance and its
// downstream in P only; retry/abandon refuse an instance that waits for no
// decision (exit 3), and a partition outside the scheme (exit 2), before
// anything is logged.
#[test]
fn retry_runs_the_instance_and_its_downstream_only() {
    let sb = chain(&["k1", "k2"]);
    // b fails for an operator while `hold_b` exists: HELD, c SKIPPED.
    sb.script(
        "copy.sh",
        r#"if [ "$1" = A_OUT ] && [ -f hold_b ]; then exit 78; fi
eval "src=\$WEIR_INPUT_$1"; cat "$src"/*.csv > "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    std::fs::write(sb.path().join("hold_b"), "").unwrap();
    sb.run_cmd("r1", &["--partition", "k1", "--partition", "k2"])
        .assert()
        .code(1)
        .stdout("run r1: 6 task instances: 2 published, 2 held, 2 skipped; 0 retries\n  HELD        b k1: operator failure: exit code 78\n  HELD        b k2: operator failure: exit code 78\n  SKIPPED     c k1: upstream `b` k1 did not publish\n  SKIPPED     c k2: upstream `b` k2 did not publish\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\na k2 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k1 attempt 1 token 1: FAILED exit code 78\nb k1 attempt 1 token 1: HELD operator failure: exit code 78: held for an operator\nc k1: SKIPPED upstream `b` k1 did not publish\nb k2 attempt 1 token 1: FAILED exit code 78\nb k2 attempt 1 token 1: HELD operator failure: exit code 78: held for an operator\nc k2: SKIPPED upstream `b` k2 did not publish\n");
    let ops_before = std::fs::read_dir(sb.path().join("wh/_runs"))
        .unwrap()
        .count();

    // Refusals first: nothing is logged, nothing runs.
    let refusals = [
        (&["retry", "m.toml", "a", "--partition", "k1", "--note", "n"][..], 3,
         "error: refused: a k1 is neither held nor quarantined; `weir retry` acts only on a HELD or QUARANTINED or ABANDONED or ACCEPTED instance"),
        (&["abandon", "m.toml", "c", "--partition", "k1", "--note", "n"][..], 3,
         "error: refused: c k1 is neither held nor quarantined; `weir abandon` acts only on a HELD or QUARANTINED instance"),
        (&["retry", "m.toml", "b", "--partition", "k9", "--note", "n"][..], 2,
         "error: partition `k9` is not in the partition scheme of task `b`"),
    ];
    for (args, code, message) in refusals {
        sb.cmd(args)
            .assert()
            .code(code)
            .stdout("")
            .stderr(&format!("{message}\n...\n"));
    }
    assert_eq!(
        std::fs::read_dir(sb.path().join("wh/_runs"))
            .unwrap()
            .count(),
        ops_before,
        "no operator log was written"
    );

    std::fs::remove_file(sb.path().join("hold_b")).unwrap();
    let text = sb
        .cmd(&["retry", "m.toml", "b", "--partition", "k1", "--note", "fixed"])
        .assert()
        .success()
        .stdout("released b k1; running it and the downstream partitions that read it\nrun [..]: 2 task instances: 2 published; 0 retries\nevents: $SB/wh/_runs/[..]/events.jsonl\n")
        .stderr("b k1 attempt 1 token 2: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n")
        .stdout_text();
    let run = crate::support::run_id_in(&text);
    assert_eq!(
        outcome(&sb, &run),
        [
            row("b", "k1", State::Published),
            row("c", "k1", State::Published)
        ]
    );
    // k2 still waits for its own decision.
    sb.cmd(&["status", "m.toml", "--check"])
        .assert()
        .code(4)
        .stdout("dataset  partition  gen  token  rows  code_version  published_at              digest\na_out    k1           1      1     2  1             [..]  sha256:d98be1f46a82…\na_out    k2           1      1     2  1             [..]  sha256:d98be1f46a82…\nb_out    k1           1      2     2  1             [..]  sha256:d98be1f46a82…\nc_out    k1           1      1     2  1             [..]  sha256:d98be1f46a82…\n\na_out: 2 partitions built by code_version 1\nb_out: 1 partition built by code_version 1\nc_out: 1 partition built by code_version 1\nmissing: b_out: 1 expected partition without a publication: k2\nmissing: c_out: 1 expected partition without a publication: k2\nHELD        b k2: operator failure: exit code 78\n")
        .stderr("check failed: 1 instance needs attention\n");
}

// A reader that goes away (`weir status | head -1`) ends weir
// quietly with exit 0: no panic message, no backtrace.
#[test]
fn broken_pipe_exits_quietly() {
    let sb = chain(&["k1", "k2"]);
    sb.run_cmd("r1", &["--partition", "k1", "--partition", "k2"])
        .assert()
        .code(0)
        .stdout("run r1: 6 task instances: 6 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\na k2 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k2 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k2 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    for args in [
        &["status", "m.toml"][..],
        &["events", "m.toml"][..],
        &["show", "m.toml", "a_out", "--partition", "k1"][..],
        &["completions", "bash"][..],
    ] {
        let mut child = sb
            .weir(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader is gone before weir writes its first line.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_exit(&out, 0);
        assert_eq!(stderr(&out), "", "{args:?}");
    }
}

/// Runs `weir args` in `dir` with its stderr on a pseudo-terminal and the
/// given environment; returns (exit code, what the terminal received).
fn on_a_terminal(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes the two descriptors it opens into our ints;
    // the name, termios and winsize arguments may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both descriptors were just opened and are owned here only.
    let (master, slave) = unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    };
    let mut cmd = crate::support::weir();
    cmd.current_dir(dir)
        .args(args)
        .stderr(slave)
        .stdout(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let status = cmd.status().unwrap();
    drop(cmd);
    let mut text = Vec::new();
    let mut master = master;
    let mut buf = [0u8; 4096];
    loop {
        // EIO once the slave side is closed and drained.
        match std::io::Read::read(&mut master, &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
        }
    }
    (
        status.code().unwrap(),
        String::from_utf8_lossy(&text).into_owned(),
    )
}

// NO_COLOR on a terminal gets no escape codes (and without it
// the same diagnostic is colored, so the check can fail).
#[test]
fn no_color_on_a_terminal() {
    let sb = Sandbox::new("[pipeline]\nname = \"x\"\ncode_version = 1\n");
    let (code, colored) = on_a_terminal(sb.path(), &["validate", "m.toml"], &[]);
    assert_eq!(code, 2);
    assert!(colored.contains('\x1b'), "{colored:?}");
    let (code, plain) = on_a_terminal(sb.path(), &["validate", "m.toml"], &[("NO_COLOR", "1")]);
    assert_eq!(code, 2);
    assert!(!plain.contains('\x1b'), "{plain:?}");
    assert!(plain.contains("code_version"), "{plain}");
}

// A task that writes 150 MB to stderr does not drive weir's
// memory up: only the tail it keeps is read.
#[test]
fn memory_stays_flat_with_a_huge_stderr() {
    let _serial = crate::support::exclusive();
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "loud"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["k1"]

[tasks.loud]
partitioned_by = ["k"]
command = ["sh", "loud.sh"]
output = { dataset = "loud", grain = ["id"] }
"#,
    );
    sb.script(
        "loud.sh",
        "head -c 150000000 /dev/zero | tr '\\0' x >&2; printf '\\nthe last line\\n' >&2; exit 78\n",
    );
    let child = sb
        .weir(&["run", "m.toml", "--run-id", "r1", "--partition", "k1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    // weir's own peak, read from /proc while it runs: wait4's ru_maxrss
    // would also count the test process's, which a spawned child inherits
    // until its exec (and which grows with the suite).
    let mut peak_kib = 0u64;
    let mut status = 0;
    loop {
        let status_file = std::fs::read_to_string(format!("/proc/{pid}/status"));
        if let Some(hwm) = status_file.ok().as_deref().and_then(vm_hwm_kib) {
            peak_kib = peak_kib.max(hwm);
        }
        // SAFETY: polls our own child; the std handle is not waited again.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == pid {
            break;
        }
        assert_eq!(rc, 0, "waitpid");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::mem::forget(child);
    assert_eq!(libc::WEXITSTATUS(status), 1, "held");
    // The stderr file alone is 146 MiB.
    assert!(peak_kib > 0, "no VmHWM read from /proc/{pid}/status");
    assert!(peak_kib < 64 * 1024, "weir peaked at {peak_kib} KiB");
    let failed: Vec<_> = sb
        .events("r1")
        .into_iter()
        .filter(|e| e.state == State::Failed)
        .collect();
    let tail = failed[0].data["stderr_tail"].as_str().unwrap();
    assert_eq!(tail, "the last line");
}

/// `VmHWM` (peak resident set) of a `/proc/<pid>/status` text, in KiB.
fn vm_hwm_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

// Usage errors exit 2 with stdout empty and the reason on stderr,
// in every command; `weir.toml` is the default manifest; completions print.
#[test]
fn exit_codes_default_manifest_and_completions() {
    let sb = chain(&["k1"]);
    sb.run_cmd("r1", &["--partition", "k1"])
        .assert()
        .code(0)
        .stdout("run r1: 3 task instances: 3 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    let cases: [(&[&str], &str); 5] = [
        (
            &["events", "m.toml", "--run", "nope"],
            "error: no run `nope` in ",
        ),
        (
            &["show", "m.toml", "a_out", "--partition", "k9"],
            "error: partition `k9` is not in the partition scheme of task `a`",
        ),
        (
            &["verify", "m.toml", "nosuch", "--partition", "k1"],
            "unknown task `nosuch`",
        ),
        (
            &["run", "m.toml", "--task", "nosuch"],
            "unknown task `nosuch`",
        ),
        (
            &["abandon", "m.toml", "a", "--partition", "k9", "--note", "n"],
            "error: partition `k9` is not in the partition scheme of task `a`",
        ),
    ];
    for (args, message) in cases {
        let out = sb.weir_out(args);
        assert_exit(&out, 2);
        assert_eq!(stdout(&out), "", "{args:?}");
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }

    // No manifest argument: `weir.toml` in the current directory.
    let out = sb.weir_out(&["status"]);
    sb.check(&out).code(2).stdout("").stderr("error: no manifest given and no `weir.toml` in the current directory\n  help: name one: `weir status pipelines/marigold.toml`\n");
    assert_eq!(stdout(&out), "");
    // A missing default manifest once read "`weir.toml` is not a valid manifest".
    let missing = "error: no manifest given and no `weir.toml` in the current directory\n  help: name one: `weir status pipelines/marigold.toml`\n";
    assert_eq!(stderr(&out), missing);
    let out = sb.weir_out(&["validate"]);
    sb.check(&out).code(2).stdout("").stderr("error: no manifest given and no `weir.toml` in the current directory\n  help: name one: `weir status pipelines/marigold.toml`\n");
    assert_eq!(
        (stdout(&out).as_str(), stderr(&out).as_str()),
        ("", missing)
    );
    std::fs::rename(sb.path().join("m.toml"), sb.path().join("weir.toml")).unwrap();
    let out = sb.weir_out(&["status"]);
    sb.check(&out).code(0).stdout("dataset  partition  gen  token  rows  code_version  published_at              digest\na_out    k1           1      1     2  1             [..]  sha256:d98be1f46a82…\nb_out    k1           1      1     2  1             [..]  sha256:d98be1f46a82…\nc_out    k1           1      1     2  1             [..]  sha256:d98be1f46a82…\n\na_out: 1 partition built by code_version 1\nb_out: 1 partition built by code_version 1\nc_out: 1 partition built by code_version 1\n").stderr("");
    assert!(stdout(&out).contains("a_out"), "{}", stdout(&out));
    assert_eq!(stderr(&out), "");
    let out = sb.weir_out(&["validate"]);
    sb.check(&out).code(0).stdout("ok: weir.toml (pipeline `daytwo`, code_version 1: 3 tasks, 1 partition scheme, 1 pool, 0 backfills)\n").stderr("");
    assert!(stdout(&out).contains("weir.toml"), "{}", stdout(&out));

    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef weir"),
        ("fish", "complete -c weir"),
    ] {
        let out = sb.weir_out(&["completions", shell]);
        assert_exit(&out, 0);
        assert!(stdout(&out).contains(marker), "{shell}");
        assert!(stdout(&out).contains("rollback"), "{shell}");
        assert_eq!(stderr(&out), "");
    }
    let out = sb.weir_out(&["completions", "tcsh"]);
    sb.check(&out).code(2).stdout("").stderr("error: invalid value 'tcsh' for '<SHELL>'\n  [possible values: bash, elvish, fish, powershell, zsh]\n\n  tip: a similar value exists: 'zsh'\n\nFor more information, try '--help'.\n");
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("invalid value 'tcsh'"),
        "{}",
        stderr(&out)
    );
}

/// `m.toml` over k1, k2: `a` runs `a.sh`, which sources `lib/helper.sh`
/// (`code = ["a.sh", "lib/"]`); `b` copies `a`, with `b_extra` appended to
/// its table; `b`'s gate is `gate`.
fn coded(b_extra: &str, gate: &str) -> Sandbox {
    let sb = Sandbox::new(&format!(
        r#"
[pipeline]
name = "coded"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["k1", "k2"]

[tasks.a]
command = ["sh", "a.sh"]
code = ["a.sh", "lib/"]
output = {{ dataset = "a_out", grain = ["id"] }}

[tasks.b]
command = ["sh", "b.sh"]
inputs = ["a_out"]
output = {{ dataset = "b_out", grain = ["id"] }}
gates = [{gate}]
{b_extra}
"#
    ));
    std::fs::create_dir_all(sb.path().join("lib")).unwrap();
    sb.script(
        "a.sh",
        ". lib/helper.sh\nrows > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb.script("lib/helper.sh", "rows() { printf 'id,v\\n1,ok\\n'; }\n");
    sb.script(
        "b.sh",
        r#"cp "$WEIR_INPUT_A_OUT"/*.csv "$WEIR_OUTPUT_DIR/""#,
    );
    sb
}

fn stale_lines(sb: &Sandbox) -> Vec<String> {
    let out = sb.weir_out(&["status", "m.toml"]);
    assert_exit(&out, 0);
    assert_eq!(stderr(&out), "");
    stdout(&out)
        .lines()
        .filter(|l| l.starts_with("STALE"))
        .map(str::to_string)
        .collect()
}

// An edited library file of `code` makes exactly its task's
// instances STALE and reruns them on the next run of those partitions; the
// commit record keeps the declared version and the fingerprint; a task's own
// code_version does the same for its instances.
#[test]
fn edited_code_makes_its_instances_stale_and_reruns_them() {
    let sb = coded("", "");
    sb.run_cmd("r1", &["--partition", "k1", "--partition", "k2"])
        .assert()
        .code(0)
        .stdout("run r1: 4 task instances: 4 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k2 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:7a4720c308735d05536ab5d10cfd3da20f7cb651593526fed7d832d9f93c4c96\na k1 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:7a4720c308735d05536ab5d10cfd3da20f7cb651593526fed7d832d9f93c4c96\nb k1 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:7a4720c308735d05536ab5d10cfd3da20f7cb651593526fed7d832d9f93c4c96\nb k2 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:7a4720c308735d05536ab5d10cfd3da20f7cb651593526fed7d832d9f93c4c96\n");
    assert_eq!(stale_lines(&sb), Vec::<String>::new());
    let first = Visible::of(&sb.store("a_out", "k1")).record;
    assert_eq!(first.code_version, "1");
    let print1 = first.code_fingerprint.clone().expect("a fingerprint");
    assert!(print1.starts_with("sha256:"), "{print1}");

    // Nothing changed: nothing reruns.
    let out = sb.run("r2", &["--partition", "k1"]);
    sb.check(&out).code(0).stdout("run r2: 2 task instances: 2 already published; 0 retries\nevents: $SB/wh/_runs/r2/events.jsonl\n").stderr_unordered("a k1: ALREADY_PUBLISHED generation 1 has the same input snapshot (code_version 1): nothing to do\nb k1: ALREADY_PUBLISHED generation 1 has the same input snapshot (code_version 1): nothing to do\n");
    assert!(stdout(&out).starts_with("run r2: 2 task instances: 2 already published;"));

    sb.script(
        "lib/helper.sh",
        "rows() { printf 'id,v\\n1,ok\\n2,ok\\n'; }\n",
    );
    let stale = stale_lines(&sb);
    assert_eq!(stale.len(), 2, "{stale:?}");
    for (line, k) in stale.iter().zip(["k1", "k2"]) {
        assert!(
            line.starts_with(&format!("STALE       a {k}: its code changed (command, gates, output or `code` files): built with sha256:")),
            "{line}"
        );
    }
    // The plan lists them as work too.
    let out = sb.weir_out(&["plan", "m.toml", "--partition", "k1"]);
    snapshot::assert_output!(
        "plan_with_a_stale_instance",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    assert!(
        stdout(&out).contains("\n  a k1: its code changed (command, gates, output or `code` files): built with sha256:"),
        "{}",
        stdout(&out)
    );
    let out = sb.run("r3", &["--partition", "k1"]);
    sb.check(&out).code(0).stdout("run r3: 2 task instances: 2 published; 0 retries\nevents: $SB/wh/_runs/r3/events.jsonl\n").stderr_unordered("a k1 attempt 1 token 2: PUBLISHED generation 2: 2 rows, sha256:0ebfb8ad8f5636d95e3a180733033f1622cce2c4fdc328f9470aabeec30074eb\nb k1 attempt 1 token 2: PUBLISHED generation 2: 2 rows, sha256:0ebfb8ad8f5636d95e3a180733033f1622cce2c4fdc328f9470aabeec30074eb\n");
    assert_eq!(
        outcome(&sb, "r3"),
        [
            row("a", "k1", State::Published),
            row("b", "k1", State::Published)
        ]
    );
    let second = Visible::of(&sb.store("a_out", "k1")).record;
    assert_eq!(second.generation.get(), 2);
    assert_eq!(second.code_version, "1");
    assert_ne!(second.code_fingerprint.as_deref(), Some(print1.as_str()));
    assert_eq!(rows(&sb, "b_out", "k1"), "id,v\n1,ok\n2,ok\n");
    // k2 was not run: still stale (and its downstream is not yet).
    let stale = stale_lines(&sb);
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert!(stale[0].starts_with("STALE       a k2:"), "{stale:?}");

    // A task's own code_version: only its instances.
    let text = std::fs::read_to_string(sb.path().join("m.toml")).unwrap();
    std::fs::write(
        sb.path().join("m.toml"),
        text.replace("gates = []\n", "gates = []\ncode_version = \"2\"\n"),
    )
    .unwrap();
    let stale = stale_lines(&sb);
    assert_eq!(stale.len(), 3, "{stale:?}");
    assert!(stale.contains(&"STALE       b k1: built by code_version 1, the task is now at 2 (rerun it with `weir run m.toml --partition k1`)".to_string()), "{stale:?}");
    let out = sb.run("r4", &["--partition", "k1"]);
    sb.check(&out).code(0).stdout("run r4: 2 task instances: 1 published, 1 already published; 0 retries\nevents: $SB/wh/_runs/r4/events.jsonl\n").stderr_unordered("a k1: ALREADY_PUBLISHED generation 2 has the same input snapshot (code_version 1): nothing to do\nb k1 attempt 1 token 3: PUBLISHED generation 3: 2 rows, sha256:0ebfb8ad8f5636d95e3a180733033f1622cce2c4fdc328f9470aabeec30074eb\n");
    assert_eq!(
        outcome(&sb, "r4"),
        [
            row("a", "k1", State::AlreadyPublished),
            row("b", "k1", State::Published)
        ]
    );
    let b = Visible::of(&sb.store("b_out", "k1")).record;
    assert_eq!(b.code_version, "2");
}

// A gate edit releases the quarantine the old gate caused; the
// same gate keeps it.
#[test]
fn gate_edit_releases_its_quarantine() {
    let strict = r#"{ check = "row_count", min = 2 }"#;
    let sb = coded("", strict);
    let out = sb.run("r1", &["--partition", "k1"]);
    sb.check(&out).code(1).stdout("run r1: 2 task instances: 1 published, 1 quarantined; 0 retries\n  QUARANTINED b k1: deterministic failure: row_count(min 2): expected at least 2 rows, got 1 row\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:7a4720c308735d05536ab5d10cfd3da20f7cb651593526fed7d832d9f93c4c96\nb k1 attempt 1 token 1: GATE_FAILED row_count(min 2): expected at least 2 rows, got 1 row\nb k1 attempt 1 token 1: QUARANTINED deterministic failure: row_count(min 2): expected at least 2 rows, got 1 row: quarantined, not retried\n");
    assert!(
        stdout(&out).contains("QUARANTINED b k1"),
        "{}",
        stdout(&out)
    );
    let out = sb.run("r2", &["--partition", "k1"]);
    sb.check(&out).code(1).stdout("run r2: 2 task instances: 1 already published, 1 quarantined; 0 retries\n  QUARANTINED b k1: since run r1: deterministic failure: row_count(min 2): expected at least 2 rows, got 1 row\nevents: $SB/wh/_runs/r2/events.jsonl\n").stderr_unordered("a k1: ALREADY_PUBLISHED generation 1 has the same input snapshot (code_version 1): nothing to do\nb k1: QUARANTINED since run r1: deterministic failure: row_count(min 2): expected at least 2 rows, got 1 row; release with `weir retry m.toml b --partition k1 --note ...`\n");
    assert_eq!(
        outcome(&sb, "r2"),
        [
            row("a", "k1", State::AlreadyPublished),
            row("b", "k1", State::Quarantined)
        ]
    );
    let text = std::fs::read_to_string(sb.path().join("m.toml")).unwrap();
    std::fs::write(sb.path().join("m.toml"), text.replace("min = 2", "min = 1")).unwrap();
    let out = sb.run("r3", &["--partition", "k1"]);
    sb.check(&out).code(0).stdout("run r3: 2 task instances: 1 published, 1 already published; 0 retries\nevents: $SB/wh/_runs/r3/events.jsonl\n").stderr_unordered("a k1: ALREADY_PUBLISHED generation 1 has the same input snapshot (code_version 1): nothing to do\nb k1 attempt 1 token 2: PUBLISHED generation 1: 1 rows, sha256:7a4720c308735d05536ab5d10cfd3da20f7cb651593526fed7d832d9f93c4c96\n");
    assert_eq!(
        outcome(&sb, "r3"),
        [
            row("a", "k1", State::AlreadyPublished),
            row("b", "k1", State::Published)
        ]
    );
}

// `weir explain` bases its advice on the failure class and evidence:
// one attempt rejecting bad data (exit 65) is "fix data", shown with the
// failed attempt's own input snapshot; a SKIPPED instance names the
// upstream instance that blocked it; `--json` carries the action.
#[test]
fn explain_advises_from_the_failure_class_and_names_what_blocked_a_skip() {
    let sb = chain(&["k1"]);
    sb.script(
        "a.sh",
        r#"if grep -q bad "$WEIR_INPUT_FEED"; then echo "row 2: bad value" >&2; exit 65; fi
cp "$WEIR_INPUT_FEED" "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    sb.run_cmd("r1", &["--partition", "k1"])
        .assert()
        .code(0)
        .stdout("run r1: 3 task instances: 3 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    let published_feed =
        Visible::of(&sb.store("a_out", "k1")).record.input_snapshot["inputs"][0]["digest"].clone();
    std::fs::write(sb.path().join("feed_k1.csv"), "id,v\n1,a\n2,bad\n").unwrap();
    let out = sb.run("r2", &["--partition", "k1"]);
    sb.check(&out).code(1).stdout("run r2: 3 task instances: 1 quarantined, 2 skipped; 0 retries\n  QUARANTINED a k1: deterministic failure: exit code 65\n  SKIPPED     b k1: upstream `a` k1 did not publish\n  SKIPPED     c k1: upstream `a` k1 did not publish\nevents: $SB/wh/_runs/r2/events.jsonl\n").stderr_unordered("a k1 attempt 1 token 2: FAILED exit code 65\na k1 attempt 1 token 2: QUARANTINED deterministic failure: exit code 65: quarantined, not retried\nb k1: SKIPPED upstream `a` k1 did not publish\nc k1: SKIPPED upstream `a` k1 did not publish\n");

    let out = sb.weir_out(&["explain", "m.toml", "a", "--partition", "k1", "--json"]);
    snapshot::assert_output!(
        "explain_quarantined_json",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    assert_eq!(stderr(&out), "");
    let x: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(x["action"], "fix_data");
    assert_eq!(x["input_snapshot_of"], "failed attempt");
    let failed_feed = &x["input_snapshot"]["inputs"][0]["digest"];
    assert!(failed_feed.is_string());
    assert_ne!(
        failed_feed, &published_feed,
        "the failed attempt's own snapshot"
    );
    let text = stdout(&sb.weir_out(&["explain", "m.toml", "a", "--partition", "k1"]));
    assert!(
        text.contains("input snapshot (of the failed attempt):"),
        "{text}"
    );
    assert!(
        text.contains(
            "recommended: fix data: the task rejected its input (exit code 65, data error"
        ),
        "{text}"
    );
    // The attempt's header says "exit code 65"; its
    // detail line no longer repeats it.
    assert!(text.contains(", exit code 65"), "{text}");
    assert!(!text.contains("\n    exit code 65\n"), "{text}");

    let out = sb.weir_out(&["explain", "m.toml", "b", "--partition", "k1", "--json"]);
    snapshot::assert_output!(
        "explain_blocked_json",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    let x: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(x["action"], "fix_upstream");
    assert_eq!(x["blocked_by"]["task"], "a");
    assert_eq!(x["blocked_by"]["partition"], "k1");
    assert_eq!(x["blocked_by"]["run_id"], "r2");
    let text = stdout(&sb.weir_out(&["explain", "m.toml", "b", "--partition", "k1"]));
    assert!(
        text.contains("recommended: fix upstream first: `a` k1 did not publish, so this instance was SKIPPED in run r2; see `weir explain "),
        "{text}"
    );
}

// `weir history DATASET --partition P` lists every generation.
#[test]
fn history_lists_every_generation() {
    let sb = chain(&["k1"]);
    sb.run_cmd("r1", &["--partition", "k1", "--task", "a"])
        .assert()
        .code(0)
        .stdout("run r1: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    sb.run_cmd("r2", &["--partition", "k1", "--task", "a", "--force"])
        .assert()
        .code(0)
        .stdout("run r2: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r2/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 2: PUBLISHED generation 2: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    sb.cmd(&[
        "rollback",
        "m.toml",
        "a_out",
        "--partition",
        "k1",
        "--to",
        "1",
    ])
    .assert()
    .code(0)
    .stdout("a_out k1: generation 3 now shows the files of generation 1 (2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3); the instance is held until `weir retry`\n")
    .stderr("");
    // The same table style as `status`: lowercase header, numbers
    // right-aligned.
    sb.cmd(&["history", "m.toml", "a_out", "--partition", "k1"])
        .assert()
        .success()
        .stdout("gen  kind             token  run                       code_version  rows  digest                published_at              certified\n  1  publish              1  r1                        1                2  sha256:d98be1f46a82…  [..]  yes\n  2  publish              2  r2                        1                2  sha256:d98be1f46a82…  [..]  yes\n  3  rollback from 1      3  op-[..]  1                2  sha256:d98be1f46a82…  [..]  yes\n")
        .stderr("");
    // No table line ends in spaces (QUEUED events have no detail).
    let out = sb.weir_out(&["events", "m.toml"]);
    snapshot::assert_output!(
        "events_after_a_rollback",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    let events = stdout(&out);
    assert!(events.contains(" QUEUED "), "{events}");
    assert!(
        events.lines().all(|l| !l.ends_with(' ')),
        "trailing spaces in:\n{events}"
    );
    let out = sb.weir_out(&["history", "m.toml", "a_out", "--partition", "k1", "--json"]);
    snapshot::assert_output!(
        "history_json",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc.as_array().unwrap().len(), 3);
    assert_eq!(doc[2]["kind"], "rollback from 1");
    assert_eq!(doc[0]["code_version"], "1");
    sb.cmd(&["history", "m.toml", "a_out", "--partition", "k9"])
        .assert()
        .code(2)
        .stdout("")
        .stderr("error: partition `k9` is not in the partition scheme of task `a`\n  help: partitions are `k`: `k1`; a task of several dimensions takes keys joined by `|`\n");
}

// Validation and planning are linear: 20,000 tasks (each reading
// one task of the layer before and depending on another) cost about ten
// times the CPU of 2,000; the quadratic steps once took minutes.
#[test]
fn validation_and_planning_stay_linear() {
    let _serial = crate::support::exclusive();
    // CPU seconds (user + system of weir's process), not wall time, so a
    // loaded machine does not fail it: ten times the tasks may cost at most
    // thirty times the CPU. Linear work costs 10× (less, with the fixed
    // start-up cost); one quadratic step would cost about 100×.
    let small = linear_case(2, "2000 tasks", "4,000");
    let big = linear_case(20, "20000 tasks", "40,000");
    for (what, small, big) in [("validate", small.0, big.0), ("plan", small.1, big.1)] {
        assert!(
            big < small * 30,
            "{what}: 20,000 tasks took {big:?} of CPU, 2,000 took {small:?}"
        );
    }
}

/// Validates and plans `layers` × 1,000 tasks (each layer reading the one
/// below), asserting their outputs; returns the CPU time of each command.
fn linear_case(
    layers: usize,
    tasks: &str,
    instances: &str,
) -> (std::time::Duration, std::time::Duration) {
    let mut text = String::from(
        "[pipeline]\nname = \"big\"\ncode_version = \"1\"\nwarehouse = \"wh\"\n\n[partitions.daily]\nkind = \"daily\"\nstart = \"2026-01-01\"\nend = \"2026-01-02\"\n\n",
    );
    let per_layer = 1000;
    for layer in 0..layers {
        for i in 0..per_layer {
            text.push_str(&format!(
                "[tasks.t{layer:02}_{i:04}]\ncommand = [\"true\"]\noutput = {{ dataset = \"d{layer:02}_{i:04}\", grain = [\"id\"] }}\n"
            ));
            if layer > 0 {
                let prev = layer - 1;
                let j = (i + 1) % per_layer;
                text.push_str(&format!(
                    "inputs = [\"d{prev:02}_{i:04}\"]\ndepends_on = [\"t{prev:02}_{j:04}\"]\n"
                ));
            }
            text.push('\n');
        }
    }
    let sb = Sandbox::new(&text);
    let (out, validated) = cpu_of(sb.weir(&["validate", "m.toml"]));
    sb.check(&out).code(0).stdout(&format!("ok: m.toml (pipeline `big`, code_version 1: {tasks}, 1 partition scheme, 1 pool, 0 backfills)\n")).stderr("");
    let (out, planned) = cpu_of(sb.weir(&[
        "plan",
        "m.toml",
        "--from",
        "2026-01-01",
        "--to",
        "2026-01-02",
    ]));
    sb.check(&out)
        .code(0)
        .stdout(&format!(
            "...\ntotal: {instances} task instances, [..]\n...\n"
        ))
        .stderr("");
    (validated, planned)
}

/// Runs `cmd` to its end; its output and the CPU time (user + system) its
/// process used, from `wait4`'s usage of that one child.
fn cpu_of(mut cmd: std::process::Command) -> (std::process::Output, std::time::Duration) {
    use std::io::Read;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("weir starts");
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let mut err_pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        err_pipe.read_to_end(&mut buf).unwrap();
        buf
    });
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    stderr.extend(reader.join().unwrap());
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, which std never waits for again
    // (the handle is forgotten below).
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid, "wait4");
    std::mem::forget(child);
    let time = |t: libc::timeval| {
        std::time::Duration::from_secs(t.tv_sec as u64)
            + std::time::Duration::from_micros(t.tv_usec as u64)
    };
    let output = std::process::Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout,
        stderr,
    };
    (output, time(usage.ru_utime) + time(usage.ru_stime))
}

// The committed schema flags what `validate` flags where a schema
// can: durations, dates per scheme kind, slots ≥ 1, gate names, enums; and
// `weir validate` refuses the same manifests (exit 2).
#[test]
fn schema_flags_malformed_values() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(crate::support::repo().join("schemas/pipeline.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let base = |partitions: &str, pools: &str, task_extra: &str| {
        format!(
            "[pipeline]\nname = \"s\"\ncode_version = \"1\"\nwarehouse = \"wh\"\n\n[partitions.p]\n{partitions}\n\n{pools}\n\n[tasks.t]\ncommand = [\"true\"]\noutput = {{ dataset = \"o\", grain = [\"id\"] }}\n{task_extra}\n"
        )
    };
    let good = base(
        "kind = \"daily\"\nstart = \"2026-09-01\"",
        "[pools.x]\nslots = 2",
        "timeout = \"1h30m\"\ngates = [{ check = \"row_count\", min = 1 }]",
    );
    let bad = [
        (
            "a malformed duration",
            base(
                "kind = \"daily\"\nstart = \"2026-09-01\"",
                "",
                "timeout = \"90 minutes\"",
            ),
        ),
        (
            "a daily start that is not a date",
            base("kind = \"daily\"\nstart = \"2026-9-1\"", "", ""),
        ),
        (
            "an hourly start without its hour",
            base("kind = \"hourly\"\nstart = \"2026-09-01\"", "", ""),
        ),
        (
            "slots = 0",
            base(
                "kind = \"daily\"\nstart = \"2026-09-01\"",
                "[pools.x]\nslots = 0",
                "",
            ),
        ),
        (
            "an unknown gate",
            base(
                "kind = \"daily\"\nstart = \"2026-09-01\"",
                "",
                "gates = [{ check = \"row_cnt\", min = 1 }]",
            ),
        ),
        (
            "a static scheme without keys",
            base("kind = \"static\"", "", ""),
        ),
        (
            "an unknown jitter",
            base(
                "kind = \"daily\"\nstart = \"2026-09-01\"",
                "[retry.r]\nmax_attempts = 2\nbackoff = { jitter = \"some\" }",
                "",
            ),
        ),
    ];
    let as_json =
        |text: &str| serde_json::to_value(toml::from_str::<toml::Value>(text).unwrap()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&as_json(&good))
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let sb = Sandbox::new(&good);
    sb.cmd(&["validate", "m.toml"])
        .assert()
        .code(0)
        .stdout("ok: m.toml (pipeline `s`, code_version 1: 1 task, 1 partition scheme, 2 pools, 0 backfills)\n")
        .stderr("");
    for (what, text) in bad {
        assert!(
            !validator.is_valid(&as_json(&text)),
            "the schema accepts {what}"
        );
        std::fs::write(sb.path().join("m.toml"), &text).unwrap();
        let out = sb.weir_out(&["validate", "m.toml"]);
        assert_exit(&out, 2);
        assert_eq!(stdout(&out), "", "{what}");
    }
}

// Output people can read: `show` keeps the file's column order and
// takes --generation, --limit and --json; plurals; no repeated state words;
// `events` columns aligned with timestamps at one width.
#[test]
fn show_and_events_print_columns_people_can_read() {
    let sb = chain(&["k1"]);
    std::fs::write(sb.path().join("feed_k1.csv"), "v,id\na,1\nb,2\nc,3\n").unwrap();
    let out = sb.run("r1", &["--partition", "k1", "--task", "a"]);
    sb.check(&out).code(0).stdout("run r1: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 3 rows, sha256:0b239d8a8447d621cc56ac919096add8fd667d783560b1bac27134380db08520\n");
    assert!(
        stdout(&out).starts_with("run r1: 1 task instance: 1 published; 0 retries\n"),
        "{}",
        stdout(&out)
    );
    std::fs::write(sb.path().join("feed_k1.csv"), "v,id\nz,9\n").unwrap();
    sb.run_cmd("r2", &["--partition", "k1", "--task", "a"])
        .assert()
        .code(0)
        .stdout("run r2: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r2/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 2: PUBLISHED generation 2: 1 rows, sha256:833086529f08c6685e61375ffbc4d04be4a2097b5f517bbb74be4720b525ee9e\n");

    assert_eq!(
        rows(&sb, "a_out", "k1"),
        "v,id\nz,9\n",
        "the file's column order"
    );
    let out = sb.weir_out(&[
        "show",
        "m.toml",
        "a_out",
        "--partition",
        "k1",
        "--generation",
        "1",
        "--limit",
        "2",
    ]);
    sb.check(&out).code(0).stdout("v,id\na,1\nb,2\n").stderr("");
    assert_eq!(stdout(&out), "v,id\na,1\nb,2\n");
    assert_eq!(stderr(&out), "");
    let out = sb.weir_out(&[
        "show",
        "m.toml",
        "a_out",
        "--partition",
        "k1",
        "--generation",
        "1",
        "--json",
    ]);
    sb.check(&out).code(0).stdout("{\"columns\":[\"v\",\"id\"],\"dataset\":\"a_out\",\"digest\":\"sha256:0b239d8a8447d621cc56ac919096add8fd667d783560b1bac27134380db08520\",\"generation\":1,\"partition\":\"k1\",\"rows\":[[\"a\",\"1\"],[\"b\",\"2\"],[\"c\",\"3\"]]}\n").stderr("");
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["generation"], 1);
    assert_eq!(doc["columns"], serde_json::json!(["v", "id"]));
    assert_eq!(
        doc["rows"],
        serde_json::json!([["a", "1"], ["b", "2"], ["c", "3"]])
    );
    let out = sb.weir_out(&[
        "show",
        "m.toml",
        "a_out",
        "--partition",
        "k1",
        "--generation",
        "7",
    ]);
    sb.check(&out).code(2).stdout("").stderr("error: `a_out` k1 has no generation 7 (it has 1 to 2)\n  help: `weir history` lists them\n");
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).starts_with("error: `a_out` k1 has no generation 7 (it has 1 to 2)"),
        "{}",
        stderr(&out)
    );

    // A quarantined instance is listed once as QUARANTINED, not twice.
    sb.script("a.sh", "exit 65\n");
    std::fs::write(sb.path().join("feed_k1.csv"), "v,id\ny,8\n").unwrap();
    sb.run_cmd("r3", &["--partition", "k1", "--task", "a"])
        .assert()
        .code(1)
        .stdout("run r3: 1 task instance: 1 quarantined; 0 retries\n  QUARANTINED a k1: deterministic failure: exit code 65\nevents: $SB/wh/_runs/r3/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 3: FAILED exit code 65\na k1 attempt 1 token 3: QUARANTINED deterministic failure: exit code 65: quarantined, not retried\n");
    let out = sb.run("r4", &["--partition", "k1", "--task", "a"]);
    sb.check(&out).code(1).stdout("run r4: 1 task instance: 1 quarantined; 0 retries\n  QUARANTINED a k1: since run r3: deterministic failure: exit code 65\nevents: $SB/wh/_runs/r4/events.jsonl\n").stderr_unordered("a k1: QUARANTINED since run r3: deterministic failure: exit code 65; release with `weir retry m.toml a --partition k1 --note ...`\n");
    let text = stdout(&out);
    assert!(
        text.contains("  QUARANTINED a k1: since run r3: "),
        "{text}"
    );
    assert!(
        !text.contains("QUARANTINED QUARANTINED")
            && !text.contains("QUARANTINED a k1: QUARANTINED"),
        "{text}"
    );

    // status: aligned columns, one timestamp width, digests abbreviated.
    let out = sb.weir_out(&["status", "m.toml"]);
    sb.check(&out).code(0).stdout("dataset  partition  gen  token  rows  code_version  published_at              digest\na_out    k1           2      2     1  1             [..]  sha256:833086529f08…\n\na_out: 1 partition built by code_version 1\nmissing: b_out: 1 expected partition without a publication: k1\nmissing: c_out: 1 expected partition without a publication: k1\nQUARANTINED a k1: deterministic failure: exit code 65\nSTALE       a k1: external input `feed` (feed_k1.csv) changed since this publication read it: sha256:f8fcd00df98b now, sha256:243a89b895a4 then (rerun it with `weir run m.toml --partition k1`)\n").stderr("");
    let text = stdout(&out);
    let table: Vec<&str> = text.lines().take_while(|l| !l.is_empty()).collect();
    let digest_at = table[0].find("digest").unwrap();
    let published_at = table[0].find("published_at").unwrap();
    for row in &table[1..] {
        assert_eq!(row.find("sha256:"), Some(digest_at), "{text}");
        assert_eq!(
            row[digest_at..].chars().count(),
            "sha256:".len() + 12 + 1,
            "{text}"
        );
        assert!(row[digest_at..].ends_with('…'), "{text}");
        assert_eq!(&row[published_at + 10..published_at + 11], "T", "{text}");
        assert_eq!(&row[published_at + 23..published_at + 24], "Z", "{text}");
    }

    let out = sb.weir_out(&["events", "m.toml"]);
    snapshot::assert_output!(
        "events_of_three_runs",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 10);
    let state_at: Vec<usize> = lines
        .iter()
        .map(|l| l.find(" r").expect("a run id column"))
        .collect();
    assert!(state_at.iter().all(|c| *c == state_at[0]), "{lines:#?}");
    let queued: Vec<usize> = lines
        .iter()
        .filter_map(|l| l.find("QUEUED").or(l.find("RUN_STARTED")))
        .collect();
    assert!(queued.iter().all(|c| *c == queued[0]), "{lines:#?}");
}

// An engine waiting for another engine's live attempt stops
// waiting on SIGINT (exit 130, the waiting attempt INTERRUPTED) and leaves
// the other engine's attempt alone.
#[test]
fn sigint_while_waiting_for_another_engine() {
    let _serial = crate::support::exclusive();
    let sb = slow_pipeline();
    let first = crate::support::Engine::spawn(
        sb.weir(&[
            "run",
            "m.toml",
            "--run-id",
            "r1",
            "--partition",
            "k1",
            "--task",
            "slow",
        ]),
        sb.path(),
        "r1",
    );
    let pids = sb.path().join("pids_k1");
    crate::support::poll_until(
        "the first engine's task",
        std::time::Duration::from_secs(20),
        || std::fs::read_to_string(&pids).is_ok_and(|t| t.ends_with('\n')),
    );
    let second = crate::support::Engine::spawn(
        sb.weir(&[
            "run",
            "m.toml",
            "--run-id",
            "r2",
            "--partition",
            "k1",
            "--task",
            "slow",
        ]),
        sb.path(),
        "r2",
    );
    let log = sb.path().join("wh/_runs/r2/events.jsonl");
    crate::support::poll_until(
        "the second engine waiting",
        std::time::Duration::from_secs(20),
        || std::fs::read_to_string(&log).is_ok_and(|t| t.contains("\"WAITING\"")),
    );
    second.signal(libc::SIGINT);
    let out = second.finish(std::time::Duration::from_secs(10));
    assert_exit(&out, 130);
    assert!(
        stdout(&out).starts_with("run r2: 1 task instance: 1 interrupted; 0 retries\n"),
        "{}",
        stdout(&out)
    );
    assert!(stderr(&out).ends_with("weir: interrupted by SIGINT: 1 task instance left undone; run the same command again to resume\n"), "{}", stderr(&out));
    assert_eq!(
        states(&sb.events("r2"), "slow", "k1"),
        [State::Queued, State::Waiting, State::Interrupted]
    );
    let task_pid: u32 = std::fs::read_to_string(&pids)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        crate::support::process_state(task_pid).is_some_and(|s| s != 'Z'),
        "the first engine's task still runs"
    );
    first.signal(libc::SIGINT);
    assert_exit(&first.finish(std::time::Duration::from_secs(10)), 130);
}

// An engine failure keeps its OS cause on stderr ("Not a
// directory", "Permission denied") and exits 5, whatever the command.
#[test]
fn errors_keep_their_os_cause_and_exit_5() {
    let sb = chain(&["k1"]);
    sb.run_cmd("r1", &["--task", "a"])
        .assert()
        .code(0)
        .stdout("run r1: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    // The warehouse is a file: every command that reads it fails.
    let wh = sb.path().join("wh");
    std::fs::rename(&wh, sb.path().join("wh.d")).unwrap();
    std::fs::write(&wh, "").unwrap();
    for args in [
        &["status", "m.toml"][..],
        &["gc", "m.toml"][..],
        &["report", "m.toml", "--out", "r.html"][..],
        &["events", "m.toml"][..],
        &["history", "m.toml", "a_out", "--partition", "k1"][..],
    ] {
        let out = sb.weir_out(args);
        assert_exit(&out, 5);
        assert_eq!(stdout(&out), "", "{args:?}");
        let err = stderr(&out);
        assert!(
            err.starts_with("error: ") && err.to_lowercase().contains("not a directory"),
            "{args:?}: {err}"
        );
    }
    std::fs::remove_file(&wh).unwrap();
    std::fs::rename(sb.path().join("wh.d"), &wh).unwrap();

    // A report that cannot be written says why, with the OS's words.
    let out = sb.weir_out(&["report", "m.toml", "--out", "m.toml/r.html"]);
    sb.check(&out)
        .code(5)
        .stdout("")
        .stderr("error: cannot write `m.toml/r.html`: Not a directory (os error 20)\n");
    assert_eq!(
        stderr(&out),
        format!(
            "error: cannot write `m.toml/r.html`: {}\n",
            std::io::Error::from_raw_os_error(libc::ENOTDIR)
        )
    );

    // gc --apply, rollback and certify whose operator log cannot be opened
    // say so (they exited 5 in silence before), with the OS's cause.
    let runs = wh.join("_runs");
    std::fs::rename(&runs, sb.path().join("runs.d")).unwrap();
    std::fs::write(&runs, "").unwrap();
    for args in [
        &["gc", "m.toml", "--apply"][..],
        &["rollback", "m.toml", "a_out", "--partition", "k1"][..],
        &[
            "certify",
            "m.toml",
            "a_out",
            "--partition",
            "k1",
            "--reason",
            "ok",
        ][..],
    ] {
        let out = sb.weir_out(args);
        assert_exit(&out, 5);
        let err = stderr(&out);
        assert!(
            err.starts_with("error: cannot open the operator's event log: ")
                && err.contains("/_runs/op-")
                && err.contains("Not a directory"),
            "{args:?}: {err}"
        );
    }
    std::fs::remove_file(&runs).unwrap();
    std::fs::rename(sb.path().join("runs.d"), &runs).unwrap();

    // As another user, a commit log without permissions: EACCES reaches
    // stderr (root reads everything, so drop privileges where possible).
    if unsafe { libc::geteuid() } == 0
        && std::process::Command::new("setpriv")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    {
        use std::os::unix::fs::PermissionsExt;
        let mut up = sb.path().to_path_buf();
        let mut traversable = true;
        while let Some(parent) = up.parent() {
            up = parent.to_path_buf();
            if std::fs::metadata(&up).unwrap().permissions().mode() & 0o001 == 0 {
                traversable = false;
            }
        }
        if traversable {
            let status = std::process::Command::new("chmod")
                .args(["-R", "a+rwX"])
                .arg(sb.path())
                .status()
                .unwrap();
            assert!(status.success());
            let log = wh.join("a_out/k1/log");
            std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o000)).unwrap();
            for args in [
                &["status", "m.toml"][..],
                &["report", "m.toml", "--out", "r.html"][..],
                &["explain", "m.toml", "a", "--partition", "k1"][..],
                &["explain", "m.toml", "b", "--partition", "k1"][..],
            ] {
                let out = std::process::Command::new("setpriv")
                    .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                    .arg(env!("CARGO_BIN_EXE_weir"))
                    .args(args)
                    .current_dir(sb.path())
                    .env("NO_COLOR", "1")
                    .output()
                    .unwrap();
                assert_exit(&out, 5);
                let err = stderr(&out);
                assert!(err.contains("Permission denied"), "{args:?}: {err}");
            }
            std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
}

// `timeout = "99999999999999999d"` validated, then `weir
// run` panicked adding it to an `Instant` (and hung) and `weir gc` panicked
// doubling it. Durations are capped at 3650d with a located diagnostic, and
// the longest accepted ones run and collect without overflow.
#[test]
fn huge_durations_are_refused_not_panicked() {
    let sb = chain(&["k1"]);
    let manifest = std::fs::read_to_string(sb.path().join("m.toml")).unwrap();
    let with = |a_extra: &str| {
        let text = manifest.replace("[tasks.a]\n", &format!("[tasks.a]\n{a_extra}\n"));
        std::fs::write(sb.path().join("m.toml"), text).unwrap();
    };
    with("timeout = \"99999999999999999d\"\nsla = \"3651d\"");
    for args in [&["validate", "m.toml"][..], &["run", "m.toml"][..]] {
        let out = sb.weir_out(args);
        sb.check(&out).code(2).stdout("").stderr("weir::manifest::duration_too_long\n\n  × duration `99999999999999999d` is longer than the maximum of 3650d\n    ╭─[m.toml:15:11]\n 14 │ [tasks.a]\n 15 │ timeout = \"99999999999999999d\"\n    ·           ──────────┬─────────\n    ·                     ╰── too long\n 16 │ sla = \"3651d\"\n    ╰────\n  help: weir accepts durations up to 3650d (about 10 years); a longer one is\n        almost certainly a typo\n\nweir::manifest::duration_too_long\n\n  × duration `3651d` is longer than the maximum of 3650d\n    ╭─[m.toml:16:7]\n 15 │ timeout = \"99999999999999999d\"\n 16 │ sla = \"3651d\"\n    ·       ───┬───\n    ·          ╰── too long\n 17 │ command = [\"sh\", \"a.sh\"]\n    ╰────\n  help: weir accepts durations up to 3650d (about 10 years); a longer one is\n        almost certainly a typo\n\nerror: `m.toml` is not a valid manifest: 2 errors\n");
        assert_eq!(stdout(&out), "");
        let err = stderr(&out);
        assert!(
            err.contains("duration `99999999999999999d` is longer than the maximum of 3650d")
                && err.contains("duration `3651d` is longer than the maximum of 3650d")
                && err.contains("too long")
                && err.contains("timeout = \"99999999999999999d\""),
            "{err}"
        );
    }
    let out = sb.weir_out(&["gc", "m.toml", "--older-than", "99999999999999999d"]);
    sb.check(&out).code(2).stdout("").stderr("weir::manifest::duration_too_long\n\n  × duration `99999999999999999d` is longer than the maximum of 3650d\n    ╭─[m.toml:15:11]\n 14 │ [tasks.a]\n 15 │ timeout = \"99999999999999999d\"\n    ·           ──────────┬─────────\n    ·                     ╰── too long\n 16 │ sla = \"3651d\"\n    ╰────\n  help: weir accepts durations up to 3650d (about 10 years); a longer one is\n        almost certainly a typo\n\nweir::manifest::duration_too_long\n\n  × duration `3651d` is longer than the maximum of 3650d\n    ╭─[m.toml:16:7]\n 15 │ timeout = \"99999999999999999d\"\n 16 │ sla = \"3651d\"\n    ·       ───┬───\n    ·          ╰── too long\n 17 │ command = [\"sh\", \"a.sh\"]\n    ╰────\n  help: weir accepts durations up to 3650d (about 10 years); a longer one is\n        almost certainly a typo\n\nerror: `m.toml` is not a valid manifest: 2 errors\n");
    assert_eq!(stdout(&out), "");

    // The longest accepted durations: the run's deadlines and gc's default
    // threshold (twice timeout plus lease) are computed without overflow.
    with("timeout = \"3650d\"\nsla = \"3650d\"");
    sb.run_cmd("r1", &[])
        .assert()
        .code(0)
        .stdout("run r1: 3 task instances: 3 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    let out = sb.weir_out(&["gc", "m.toml"]);
    sb.check(&out).code(0).stdout("keep         $SB/wh/a_out/k1/attempts/00000000000000000001 ([..]): referenced by generation 1 (current)\nkeep         $SB/wh/b_out/k1/attempts/00000000000000000001 ([..]): referenced by generation 1 (current)\nkeep         $SB/wh/c_out/k1/attempts/00000000000000000001 ([..]): referenced by generation 1 (current)\ndry run: 0 candidate directories ([..]) would be deleted, 3 kept; rerun with --apply to delete\n").stderr("");
    assert_eq!(stderr(&out), "");
    let out = sb.weir_out(&["gc", "m.toml", "--older-than", "99999999999999999d"]);
    assert_eq!(
        stderr(&out),
        "error: --older-than: `99999999999999999d` is longer than the maximum of 3650d\n  help: write a duration such as \"48h\" or \"7d\"\n"
    );
}

// A quarantine its gate edit (or an upstream republish)
// invalidated still paged in `status --check` (exit 4) and explain said
// fix_data, while the next run would release it. Both now apply the run's
// test: RELEASED, not paged, and explain recommends the run.
#[test]
fn an_invalidated_quarantine_does_not_page() {
    let sb = coded("", r#"{ check = "row_count", min = 2 }"#);
    sb.run_cmd("r1", &["--partition", "k1"])
        .assert()
        .code(1)
        .stdout("run r1: 2 task instances: 1 published, 1 quarantined; 0 retries\n  QUARANTINED b k1: deterministic failure: row_count(min 2): expected at least 2 rows, got 1 row\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:7a4720c308735d05536ab5d10cfd3da20f7cb651593526fed7d832d9f93c4c96\nb k1 attempt 1 token 1: GATE_FAILED row_count(min 2): expected at least 2 rows, got 1 row\nb k1 attempt 1 token 1: QUARANTINED deterministic failure: row_count(min 2): expected at least 2 rows, got 1 row: quarantined, not retried\n");
    let out = sb.weir_out(&["status", "m.toml", "--check"]);
    sb.check(&out).code(4).stdout("dataset  partition  gen  token  rows  code_version  published_at              digest\na_out    k1           1      1     1  1             [..]  sha256:7a4720c30873…\n\na_out: 1 partition built by code_version 1\nmissing: a_out: 1 expected partition without a publication: k2\nmissing: b_out: 2 expected partitions without a publication: k1, k2\nQUARANTINED b k1: deterministic failure: row_count(min 2): expected at least 2 rows, got 1 row\n").stderr("check failed: 1 instance needs attention\n");
    assert!(
        stdout(&out).contains("QUARANTINED b k1: "),
        "{}",
        stdout(&out)
    );
    let text = std::fs::read_to_string(sb.path().join("m.toml")).unwrap();
    std::fs::write(sb.path().join("m.toml"), text.replace("min = 2", "min = 1")).unwrap();
    let released = |changed: &str| {
        let out = sb.weir_out(&["status", "m.toml", "--check"]);
        assert_exit(&out, 0);
        assert_eq!(stderr(&out), "");
        let text = stdout(&out);
        let line = text
            .lines()
            .find(|l| l.starts_with("RELEASED"))
            .unwrap_or_else(|| panic!("no RELEASED line in:\n{text}"));
        assert!(
            line.starts_with("RELEASED    b k1: was quarantined (")
                && line.ends_with(&format!(
                    "), but {changed}: will rerun on the next run (`weir run m.toml --task b --partition k1`)"
                )),
            "{line}"
        );
        assert!(!text.contains("QUARANTINED"), "{text}");
        let out = sb.weir_out(&["status", "m.toml", "--json"]);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["attention"], serde_json::json!([]));
        assert_eq!(doc["released"][0]["task"], "b");
        assert_eq!(doc["released"][0]["changed"], changed);
        let out = sb.weir_out(&["explain", "m.toml", "b", "--partition", "k1", "--json"]);
        assert_exit(&out, 0);
        let x: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(x["action"], "run");
        assert_eq!(
            x["recommendation"],
            format!("run: the quarantine no longer stands ({changed}), so the next run reruns it: `weir run m.toml --task b --partition k1`")
        );
        // The report judges it the same way: a stale cell, saying why.
        let out = sb.weir_out(&["report", "m.toml", "--out", "r.html"]);
        sb.check(&out).code(0).stdout("wrote r.html\n").stderr("");
        let html = std::fs::read_to_string(sb.path().join("r.html")).unwrap();
        let cell = html
            .split("<td ")
            .find(|c| c.contains(r#"data-task="b" data-partition="k1""#))
            .unwrap_or_else(|| panic!("no cell for b k1 in the report"));
        assert!(
            cell.contains(r#"data-state="stale""#)
                && cell.contains(&format!("was quarantined, but {changed}")),
            "{cell}"
        );
    };
    released("its code changed");

    // Back to the gate that failed: the quarantine stands again; then an
    // upstream republish (new rows from a's library) releases it.
    std::fs::write(sb.path().join("m.toml"), &text).unwrap();
    sb.cmd(&["status", "m.toml", "--check"])
        .assert()
        .code(4)
        .stdout("dataset  partition  gen  token  rows  code_version  published_at              digest\na_out    k1           1      1     1  1             [..]  sha256:7a4720c30873…\n\na_out: 1 partition built by code_version 1\nmissing: a_out: 1 expected partition without a publication: k2\nmissing: b_out: 2 expected partitions without a publication: k1, k2\nQUARANTINED b k1: deterministic failure: row_count(min 2): expected at least 2 rows, got 1 row\n")
        .stderr("check failed: 1 instance needs attention\n");
    sb.cmd(&["report", "m.toml", "--out", "r.html"])
        .assert()
        .code(0)
        .stdout("wrote r.html\n")
        .stderr("");
    let html = std::fs::read_to_string(sb.path().join("r.html")).unwrap();
    assert!(
        html.contains(r#"data-task="b" data-partition="k1" data-state="quarantined""#),
        "a standing quarantine is shown as one"
    );
    sb.script("lib/helper.sh", "rows() { printf 'id,v\\n1,new\\n'; }\n");
    sb.run_cmd("r2", &["--partition", "k1", "--task", "a"])
        .assert()
        .code(0)
        .stdout("run r2: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r2/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 2: PUBLISHED generation 2: 1 rows, sha256:478cf72da8aaa07a4b7ac5b068dd6a75014af18e65a56e7ffd0be3cf3440b7f4\n");
    released("its input snapshot changed");
}

// The STALE line of a held (rolled-back) instance said
// "rerun it with `weir run`", which the hold prevents: it names the retry.
#[test]
fn a_held_stale_instance_points_at_retry() {
    let sb = chain(&["k1"]);
    sb.run_cmd("r1", &["--partition", "k1"])
        .assert()
        .code(0)
        .stdout("run r1: 3 task instances: 3 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    sb.run_cmd("r2", &["--partition", "k1", "--force"])
        .assert()
        .code(0)
        .stdout("run r2: 3 task instances: 3 published; 0 retries\nevents: $SB/wh/_runs/r2/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 2: PUBLISHED generation 2: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k1 attempt 1 token 2: PUBLISHED generation 2: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k1 attempt 1 token 2: PUBLISHED generation 2: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    let out = sb.weir_out(&["rollback", "m.toml", "a_out", "--partition", "k1"]);
    sb.check(&out).code(0).stdout("a_out k1: generation 3 now shows the files of generation 1 (2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3); the instance is held until `weir retry`\n").stderr("");
    let text = std::fs::read_to_string(sb.path().join("m.toml")).unwrap();
    let text = text.replace("[tasks.a]\n", "[tasks.a]\ncode_version = \"2\"\n");
    std::fs::write(sb.path().join("m.toml"), text).unwrap();
    sb.cmd(&["status", "m.toml"])
        .assert()
        .success()
        .stdout("dataset  partition  gen  token  rows  code_version  published_at              digest\na_out    k1           3      3     2  1             [..]  sha256:d98be1f46a82…\nb_out    k1           2      2     2  1             [..]  sha256:d98be1f46a82…\nc_out    k1           2      2     2  1             [..]  sha256:d98be1f46a82…\n\na_out: 1 partition built by code_version 1\nb_out: 1 partition built by code_version 1\nc_out: 1 partition built by code_version 1\nHELD        a k1: rolled back to generation 1 of a_out (token 3, replacing generation 2); `weir retry` releases it (a run then rebuilds it if its inputs or code differ from the restored generation's)\nSTALE       a k1: built by code_version 1, the task is now at 2 (held: `weir retry m.toml a --partition k1 --note …` releases it and rebuilds it)\n")
        .stderr("");
}

// `weir explain` listed attempts in the order of their runs' ids,
// so an operator's `--run-id RUN-…` rerun came before the nightly `run-…`
// it followed, and the recommendation judged the older attempt.
#[test]
fn explain_lists_attempts_in_time_order() {
    let sb = chain(&["k1"]);
    sb.run_cmd("zz-nightly", &["--partition", "k1"])
        .assert()
        .code(0)
        .stdout("run zz-nightly: 3 task instances: 3 published; 0 retries\nevents: $SB/wh/_runs/zz-nightly/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    sb.run_cmd("aa-rerun", &["--partition", "k1", "--force"])
        .assert()
        .code(0)
        .stdout("run aa-rerun: 3 task instances: 3 published; 0 retries\nevents: $SB/wh/_runs/aa-rerun/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 2: PUBLISHED generation 2: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nb k1 attempt 1 token 2: PUBLISHED generation 2: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\nc k1 attempt 1 token 2: PUBLISHED generation 2: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    let out = sb.weir_out(&["explain", "m.toml", "a", "--partition", "k1", "--json"]);
    snapshot::assert_output!(
        "explain_attempts_in_time_order_json",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    let x: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs: Vec<&str> = x["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(runs, ["zz-nightly", "aa-rerun"], "{x:#}");
}

// ABANDONED instances were missing from `weir status`
// (text and --json) although the operating guide lists them; they do not page.
#[test]
fn status_lists_abandoned_instances() {
    let sb = coded("", r#"{ check = "row_count", min = 2 }"#);
    sb.run_cmd("r1", &["--partition", "k1"])
        .assert()
        .code(1)
        .stdout("run r1: 2 task instances: 1 published, 1 quarantined; 0 retries\n  QUARANTINED b k1: deterministic failure: row_count(min 2): expected at least 2 rows, got 1 row\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:7a4720c308735d05536ab5d10cfd3da20f7cb651593526fed7d832d9f93c4c96\nb k1 attempt 1 token 1: GATE_FAILED row_count(min 2): expected at least 2 rows, got 1 row\nb k1 attempt 1 token 1: QUARANTINED deterministic failure: row_count(min 2): expected at least 2 rows, got 1 row: quarantined, not retried\n");
    sb.cmd(&[
        "abandon",
        "m.toml",
        "b",
        "--partition",
        "k1",
        "--note",
        "known bad feed",
    ])
    .assert()
    .success()
    .stdout("abandoned b k1: not run again until `weir retry`\n")
    .stderr("");
    sb.cmd(&["status", "m.toml", "--check"])
        .assert()
        .success()
        .stdout("dataset  partition  gen  token  rows  code_version  published_at              digest\na_out    k1           1      1     1  1             [..]  sha256:7a4720c30873…\n\na_out: 1 partition built by code_version 1\nmissing: a_out: 1 expected partition without a publication: k2\nmissing: b_out: 2 expected partitions without a publication: k1, k2\nABANDONED   b k1: by an operator: known bad feed (not run until `weir retry m.toml b --partition k1 --note …`)\n")
        .stderr("");
    let out = sb.weir_out(&["status", "m.toml", "--json"]);
    snapshot::assert_output!(
        "status_with_abandoned_json",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["attention"], serde_json::json!([]));
    assert_eq!(
        doc["abandoned"],
        serde_json::json!([{"task": "b", "partition": "k1", "detail": "abandoned by an operator: known bad feed", "note": "known bad feed"}])
    );
    // `weir explain` said "abandoned by an operator (abandoned
    // by an operator: …)".
    let out = sb.weir_out(&["explain", "m.toml", "b", "--partition", "k1", "--json"]);
    let x: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        x["recommendation"],
        "abandoned by an operator (known bad feed); nothing runs until `weir retry m.toml b --partition k1 --note \"...\"`"
    );
}

/// `weir ARGS` in `sb`, killed (and the test failed) if it outlives `limit`.
fn within(sb: &Sandbox, args: &[&str], limit: std::time::Duration) -> std::process::Output {
    let mut child = sb
        .weir(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`weir {args:?}` still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

// A FIFO under a task's `code` paths blocked `run` and
// `status` forever in open(). The fingerprint refuses anything that is not
// a regular file or directory, by its type, without opening it.
#[test]
fn a_fifo_in_code_is_refused_not_opened() {
    let sb = coded("", r#"{ check = "row_count", min = 1 }"#);
    sb.run_cmd("r1", &["--partition", "k1"])
        .assert()
        .code(0)
        .stdout("run r1: 2 task instances: 2 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("a k1 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:7a4720c308735d05536ab5d10cfd3da20f7cb651593526fed7d832d9f93c4c96\nb k1 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:7a4720c308735d05536ab5d10cfd3da20f7cb651593526fed7d832d9f93c4c96\n");
    let fifo = sb.path().join("lib/pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let limit = std::time::Duration::from_secs(20);
    let out = within(
        &sb,
        &["run", "m.toml", "--run-id", "r2", "--partition", "k1"],
        limit,
    );
    assert_exit(&out, 2);
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    assert!(
        err.contains("cannot fingerprint the code of task `a`")
            && err.contains("lib/pipe")
            && err.contains("it is a FIFO, not a regular file or directory"),
        "{err}"
    );
    let out = within(&sb, &["status", "m.toml"], limit);
    assert_exit(&out, 0);
}

// Read-only commands given `--warehouse` of a directory
// that does not exist created it (and said "nothing published yet"). They
// read it as empty and create nothing; a missing parent is an error.
#[test]
fn read_only_commands_create_no_warehouse() {
    let sb = chain(&["k1"]);
    let cases: [(&[&str], i32); 9] = [
        (&["status", "m.toml"], 0),
        (&["show", "m.toml", "a_out", "--partition", "k1"], 1),
        (&["history", "m.toml", "a_out", "--partition", "k1"], 0),
        (&["explain", "m.toml", "a", "--partition", "k1"], 0),
        (&["gc", "m.toml"], 0),
        (&["verify", "m.toml", "a", "--partition", "k1"], 1),
        (&["report", "m.toml", "--out", "r.html"], 0),
        (&["plan", "m.toml"], 0),
        (&["events", "m.toml"], 0),
    ];
    for (args, code) in cases {
        let mut with = vec!["--warehouse", "typo"];
        with.extend_from_slice(args);
        let out = sb.weir_out(&with);
        assert_exit(&out, code);
        assert!(!sb.path().join("typo").exists(), "{args:?} created it");
    }
    let out = sb.weir_out(&["--warehouse", "typo", "status", "m.toml"]);
    assert!(
        stdout(&out).starts_with(&format!(
            "nothing published yet in {}\n",
            sb.path().join("typo").display()
        )),
        "{}",
        stdout(&out)
    );
    let out = sb.weir_out(&["--warehouse", "no/such/typo", "status", "m.toml"]);
    sb.check(&out)
        .code(5)
        .stdout("")
        .stderr("error: i/o error on $SB/no/such: No such file or directory (os error 2)\n");
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        format!(
            "error: i/o error on {}: {}\n",
            sb.path().join("no/such").display(),
            std::io::Error::from_raw_os_error(libc::ENOENT)
        )
    );
    assert!(!sb.path().join("no").exists());
}
