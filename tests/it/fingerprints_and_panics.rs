//! Code fingerprinted as it launches, panics contained to their instance,
//! names the store refuses caught before it.

use std::time::Duration;

use weir::events::State;

use crate::support::{poll_until, states, Engine, Sandbox, Visible};

/// `m.toml`: `deploy` runs first and rewrites `lib.sh`, the `code` of `t`,
/// which `t` launches after it (it depends on `deploy`); `t` writes what
/// `lib.sh`'s `v` says. Both unpartitioned.
fn deploy_mid_run(t_script: &str) -> Sandbox {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "robust"
code_version = "1"
warehouse = "wh"

[retry.fast]
max_attempts = 3
backoff = { initial = "10ms", max = "20ms" }

[tasks.deploy]
command = ["sh", "deploy.sh"]
partitioned_by = []
output = { dataset = "deployed", grain = ["id"] }

[tasks.t]
command = ["sh", "t.sh"]
code = ["lib.sh"]
partitioned_by = []
depends_on = ["deploy"]
retry = "fast"
output = { dataset = "t_out", grain = ["id"] }
"#,
    );
    sb.script("lib.sh", V1);
    sb.script(
        "deploy.sh",
        "printf 'v() { echo 2; }\\n' > lib.sh\nprintf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb.script("t.sh", t_script);
    sb
}

const V1: &str = "v() { echo 1; }\n";
const T_WRITES: &str =
    ". ./lib.sh\nprintf 'id,v\\n1,%s\\n' \"$(v)\" > \"$WEIR_OUTPUT_DIR/out.csv\"\n";

/// The fingerprint `weir` gives `t`'s code as it is on disk now.
fn fingerprint_now(sb: &Sandbox) -> String {
    let manifest = sb.manifest();
    weir::manifest::fingerprint::fingerprint(sb.path(), &manifest.tasks["t"])
        .expect("t's code is readable")
}

/// `weir status` lines that start with STALE.
fn stale_lines(sb: &Sandbox) -> Vec<String> {
    sb.cmd(&["status", "m.toml"])
        .assert()
        .success()
        .stderr("")
        .stdout_text()
        .lines()
        .filter(|l| l.starts_with("STALE"))
        .map(str::to_string)
        .collect()
}

// A deploy that lands after the run started and before `t` launches, then
// is reverted: `t`'s publication names the code it ran (v2), so it is STALE
// once v1 is back, instead of passing as current.
#[test]
fn code_is_fingerprinted_when_its_command_launches() {
    let sb = deploy_mid_run(T_WRITES);
    let v1 = fingerprint_now(&sb);
    sb.run_cmd("r1", &[])
        .assert()
        .success()
        .stdout("run r1: 2 task instances: 2 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr("deploy all attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\nt all attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:979090c5a6c319f774e222d4f8f3b4bb9fd7e390f2f010e4550b7f30859a748d\n");
    let v2 = fingerprint_now(&sb);
    assert_ne!(v1, v2);
    let visible = Visible::of(&sb.store("t_out", "all"));
    assert_eq!(visible.rows(), [["1", "2"]], "t ran the deployed code");
    assert_eq!(
        visible.record.code_fingerprint.as_deref(),
        Some(v2.as_str())
    );
    // The candidate's evidence says the same.
    let candidate = std::fs::read_to_string(
        sb.path()
            .join("wh")
            .join(&visible.record.attempt_dir)
            .join("candidate.json"),
    )
    .unwrap();
    let candidate: serde_json::Value = serde_json::from_str(&candidate).unwrap();
    assert_eq!(candidate["code_fingerprint"], v2.as_str());
    assert_eq!(stale_lines(&sb), Vec::<String>::new());

    // The deploy is reverted: what `t` published is not what v1 builds.
    sb.script("lib.sh", V1);
    assert_eq!(fingerprint_now(&sb), v1);
    // Fingerprints are shown by their first 12 hex digits.
    assert_eq!(
        stale_lines(&sb),
        [format!(
            "STALE       t all: its code changed (command, gates, output or `code` files): built with {}, now {} (rerun it with `weir run m.toml --partition all`)",
            &v2[..19],
            &v1[..19]
        )]
    );
}

// The code changes while `t`'s command runs (here: the command itself
// deploys, once): the attempt fails as transient, naming both
// fingerprints, and the retry publishes as the new code.
#[test]
fn code_changed_while_the_command_ran_fails_the_attempt_as_transient() {
    let sb = deploy_mid_run(&format!(
        "if [ ! -e deployed_by_t ]; then touch deployed_by_t; printf 'v() {{ echo 3; }}\\n' > lib.sh; fi\n{T_WRITES}"
    ));
    // `deploy` writes v2 before `t` launches: t launches with v2, and its
    // command writes v3 while it runs.
    sb.run_cmd("r1", &[])
        .assert()
        .success()
        .stdout("run r1: 2 task instances: 2 published; 1 retry\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr("deploy all attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\nt all attempt 1 token 1: FAILED the task's code changed while its command ran (sha256:[..] at launch, sha256:[..] at exit): its output is not published; the next attempt runs the new code\nt all attempt 1 token 1: RETRYING transient failure (the task's code changed while its command ran (sha256:[..] at launch, sha256:[..] at exit): its output is not published; the next attempt runs the new code); attempt 2 of 3 in [..]\nt all attempt 2 token 2: PUBLISHED generation 1: 1 rows, sha256:3c151701c1431d27c049db0f97ee088e0ebd98a13478ceaaa7458e1317604823\n");
    let v3 = fingerprint_now(&sb);
    sb.script("lib.sh", "v() { echo 2; }\n");
    let v2 = fingerprint_now(&sb);
    let events = sb.events("r1");
    assert_eq!(
        states(&events, "t", "all"),
        [
            State::Queued,
            State::Running,
            State::Failed,
            State::Retrying,
            State::Queued,
            State::Running,
            State::Success,
            State::Audited,
            State::Published
        ]
    );
    let failed = events
        .iter()
        .find(|e| e.state == State::Failed)
        .expect("a FAILED event");
    assert_eq!(failed.attempt, Some(1));
    assert_eq!(
        failed.detail,
        format!("the task's code changed while its command ran ({v2} at launch, {v3} at exit): its output is not published; the next attempt runs the new code")
    );
    let retrying = events
        .iter()
        .find(|e| e.state == State::Retrying)
        .expect("a RETRYING event");
    assert!(
        retrying
            .detail
            .starts_with("transient failure (the task's code changed while its command ran"),
        "{}",
        retrying.detail
    );
    let visible = Visible::of(&sb.store("t_out", "all"));
    assert_eq!(
        visible.record.generation.get(),
        1,
        "attempt 1 published nothing"
    );
    assert_eq!(visible.record.attempt, 2);
    assert_eq!(visible.rows(), [["1", "3"]]);
    assert_eq!(
        visible.record.code_fingerprint.as_deref(),
        Some(v3.as_str())
    );
}

/// `m.toml`: `bad` (two CSV files, so its audit reads them on rayon
/// workers), `after` reading `bad`, and `slow`, which runs `slow.sh`; all
/// unpartitioned, in a pool of 4 slots.
fn panicking() -> Sandbox {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "robust"
code_version = "1"
warehouse = "wh"

[pools.four]
slots = 4

[tasks.bad]
command = ["sh", "bad.sh"]
partitioned_by = []
pool = "four"
output = { dataset = "bad_out", grain = ["id"] }

[tasks.after]
command = ["sh", "-c", "cp \"$WEIR_INPUT_BAD_OUT\"/*.csv \"$WEIR_OUTPUT_DIR/\""]
inputs = ["bad_out"]
partitioned_by = []
pool = "four"
output = { dataset = "after_out", grain = ["id"] }

[tasks.slow]
command = ["sh", "slow.sh"]
partitioned_by = []
pool = "four"
output = { dataset = "slow_out", grain = ["id"] }
"#,
    );
    sb.script(
        "bad.sh",
        "printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/a.csv\"\nprintf 'id\\n2\\n' > \"$WEIR_OUTPUT_DIR/b.csv\"\n",
    );
    sb.script(
        "slow.sh",
        "while [ ! -e go ]; do sleep 0.05; done\nprintf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb
}

// A panic on a rayon worker of `bad`'s audit ends `bad` ENGINE_FAILED with
// the panic's message; `after` is skipped, `slow` publishes, the run
// finishes and exits 5.
#[test]
fn panic_in_an_audit_worker_fails_the_instance_and_the_run_ends() {
    let sb = panicking();
    std::fs::write(sb.path().join("go"), "").unwrap();
    let mut cmd = sb.weir(&["run", "m.toml", "--run-id", "r1"]);
    cmd.env("WEIR_FAULT", "audit@bad:panic");
    // Before the fix the run never ended: bounded here.
    let out = Engine::spawn(cmd, sb.path(), "r1")
        .finish_within(Duration::from_secs(60))
        .expect("the run ends");
    sb.check(&out)
        .code(5)
        .stdout("run r1: 3 task instances: 1 published, 1 skipped, 1 engine failure; 0 retries\n  ENGINE      bad all: the engine panicked in attempt 1: injected panic at Audit\n  SKIPPED     after all: upstream `bad` all did not publish\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        // The panic is reported where it happened, by the default hook.
        .stderr_contains(&["panicked at ", "injected panic at Audit"]);
    let events = sb.events("r1");
    assert_eq!(
        states(&events, "bad", "all"),
        [
            State::Queued,
            State::Running,
            State::Success,
            State::EngineFailed
        ]
    );
    let failed = events
        .iter()
        .find(|e| e.state == State::EngineFailed)
        .unwrap();
    assert_eq!(
        failed.detail,
        "the engine panicked in attempt 1: injected panic at Audit; not the task's failure: no retry spent, no marker; the run exits 5"
    );
    assert_eq!(events.last().unwrap().state, State::RunFinished);
    assert_eq!(Visible::of(&sb.store("slow_out", "all")).record.rows, 1);
    assert!(sb.store("bad_out", "all").latest().unwrap().is_none());

    // Nothing of the panicked attempt holds the next run: without the
    // fault it publishes.
    sb.run_cmd("r2", &[])
        .assert()
        .success()
        .stdout("run r2: 3 task instances: 2 published, 1 already published; 0 retries\nevents: $SB/wh/_runs/r2/events.jsonl\n")
        // slow and bad run side by side.
        .stderr_unordered("slow all: ALREADY_PUBLISHED generation 1 has the same input snapshot (code_version 1): nothing to do\nbad all attempt 1 token 2: PUBLISHED generation 1: 2 rows, sha256:0314c6f143e41cfda10ee9acddcfcf125e504e6328ea52d4c069789fb49bdd6c\nafter all attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:0314c6f143e41cfda10ee9acddcfcf125e504e6328ea52d4c069789fb49bdd6c\n");
}

// A panic in `bad`'s attempt thread while `slow` runs: the first SIGINT
// still stops the run (exit 130, `slow` INTERRUPTED, RUN_FINISHED) and
// `bad` is an engine failure carrying the panic's message.
#[test]
fn panic_in_an_attempt_thread_then_sigint_stops_the_run() {
    let _serial = crate::support::exclusive();
    let sb = panicking();
    let mut cmd = sb.weir(&["run", "m.toml", "--run-id", "r1"]);
    cmd.env("WEIR_FAULT", "after_command@bad:panic");
    let engine = Engine::spawn(cmd, sb.path(), "r1");
    let log = weir::events::run_dir(&sb.path().join("wh"), "r1").join("events.jsonl");
    let seen = |task: &str, state: State| {
        weir::events::read_log(&log).is_ok_and(|(records, _)| {
            records
                .iter()
                .any(|e| e.task.as_deref() == Some(task) && e.state == state)
        })
    };
    // `bad`'s command exited (its thread panics right after) while `slow`
    // runs its loop.
    poll_until(
        "bad's command to end and slow to run",
        Duration::from_secs(30),
        || seen("bad", State::Success) && seen("slow", State::Running),
    );
    std::thread::sleep(Duration::from_millis(300));
    engine.signal(libc::SIGINT);
    let out = engine
        .finish_within(Duration::from_secs(30))
        .expect("the first SIGINT stops the run");
    sb.check(&out)
        .code(130)
        .stdout("run r1: 3 task instances: 1 skipped, 1 engine failure, 1 interrupted; 0 retries\n  ENGINE      bad all: the engine panicked in attempt 1: injected panic at AfterCommand\n  SKIPPED     after all: upstream `bad` all did not publish\n  INTERRUPTED slow all: weir received SIGINT\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr("...\nweir: interrupted by SIGINT: 1 task instance left undone; run the same command again to resume\n");
    let events = sb.events("r1");
    assert_eq!(
        states(&events, "bad", "all").last(),
        Some(&State::EngineFailed)
    );
    assert_eq!(
        states(&events, "slow", "all").last(),
        Some(&State::Interrupted)
    );
    let last = events.last().unwrap();
    assert_eq!(last.state, State::RunFinished);
    assert_eq!(last.data["interrupted"], "SIGINT");
}

/// `m.toml`: one unpartitioned task `t` running `t.sh`.
fn one_task() -> Sandbox {
    Sandbox::new(
        r#"
[pipeline]
name = "robust"
code_version = "1"
warehouse = "wh"

[tasks.t]
command = ["sh", "t.sh"]
partitioned_by = []
output = { dataset = "t_out", grain = ["id"] }
"#,
    )
}

// An output file whose name the store refuses (a backslash) fails the
// audit as a gate, naming the file: QUARANTINED, not ENGINE_FAILED and a
// new launch every run.
#[test]
fn a_file_name_the_store_refuses_fails_the_audit_naming_it() {
    let sb = one_task();
    sb.script(
        "t.sh",
        "printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/ok.csv\"\nprintf 'id\\n2\\n' > \"$WEIR_OUTPUT_DIR/back\\\\slash.csv\"\n",
    );
    let why = "the output is not publishable: `back\\slash.csv` is a name the warehouse refuses: a segment may not contain '\\' or NUL";
    sb.run_cmd("r1", &[])
        .assert()
        .code(1)
        .stdout("run r1: 1 task instance: 1 quarantined; 0 retries\n  QUARANTINED t all: deterministic failure: the output is not publishable: `back\\slash.csv` is a name the warehouse refuses: a segment may not contain '\\' or NUL\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr("t all attempt 1 token 1: GATE_FAILED the output is not publishable: `back\\slash.csv` is a name the warehouse refuses: a segment may not contain '\\' or NUL\nt all attempt 1 token 1: QUARANTINED deterministic failure: the output is not publishable: `back\\slash.csv` is a name the warehouse refuses: a segment may not contain '\\' or NUL: quarantined, not retried\n");
    let events = sb.events("r1");
    assert_eq!(
        states(&events, "t", "all"),
        [
            State::Queued,
            State::Running,
            State::Success,
            State::GateFailed,
            State::Quarantined
        ]
    );
    let gate = events
        .iter()
        .find(|e| e.state == State::GateFailed)
        .unwrap();
    assert_eq!(gate.detail, why);
    assert!(sb.store("t_out", "all").latest().unwrap().is_none());
    // The quarantine stands: the next run launches nothing.
    sb.run_cmd("r2", &[])
        .assert()
        .code(1)
        .stdout("run r2: 1 task instance: 1 quarantined; 0 retries\n  QUARANTINED t all: since run r1: deterministic failure: the output is not publishable: `back\\slash.csv` is a name the warehouse refuses: a segment may not contain '\\' or NUL\nevents: $SB/wh/_runs/r2/events.jsonl\n")
        .stderr("t all: QUARANTINED since run r1: deterministic failure: the output is not publishable: `back\\slash.csv` is a name the warehouse refuses: a segment may not contain '\\' or NUL; release with `weir retry m.toml t --partition all --note ...`\n");
    assert!(!states(&sb.events("r2"), "t", "all").contains(&State::Running));
}

// Keys each short enough alone, joined across a task's two schemes, would
// name a partition the warehouse cannot hold: `validate` refuses the task.
#[test]
fn keys_joined_across_schemes_must_fit_the_warehouse() {
    let manifest = |len: usize| {
        format!(
            r#"
[pipeline]
name = "robust"
code_version = "1"
warehouse = "wh"

[partitions.a]
kind = "static"
keys = ["{}"]

[partitions.b]
kind = "static"
keys = ["x", "{}"]

[tasks.t]
command = ["sh", "t.sh"]
partitioned_by = ["a", "b"]
output = {{ dataset = "t_out", grain = ["id"] }}
"#,
            "a".repeat(123),
            "b".repeat(len)
        )
    };
    // 123 + 3 (`|` encoded) + 124 = 250 bytes: the longest that fits.
    Sandbox::new(&manifest(124))
        .cmd(&["validate", "m.toml"])
        .assert()
        .success()
        .stdout("ok: m.toml (pipeline `robust`, code_version 1: 1 task, 2 partition schemes, 1 pool, 0 backfills)\n")
        .stderr("");
    Sandbox::new(&manifest(125))
        .cmd(&["validate", "m.toml"])
        .assert()
        .code(2)
        .stdout("")
        .stderr("weir::manifest::key_too_long\n\n  × task `t` has partition keys too long for the warehouse, such as\n  │ `aaaaaaaaaaaaaaaaaaaaaaaa…`\n    ╭─[m.toml:17:18]\n 16 │ command = [\"sh\", \"t.sh\"]\n 17 │ partitioned_by = [\"a\", \"b\"]\n    ·                  ─────┬────\n    ·                       ╰── these dimensions' keys joined\n 18 │ output = { dataset = \"t_out\", grain = [\"id\"] }\n    ╰────\n  help: its name in the warehouse is 251 bytes, over the 250 a partition may\n        have (255 bytes a name, less `.json` of its marker file); shorten the\n        keys, or partition by fewer schemes\n\nerror: `m.toml` is not a valid manifest: 1 error\n")
        .stderr_contains(&[
            "[m.toml:17:18]",
            "its name in the warehouse is 251 bytes, over the 250",
        ]);
}

// The longest key `validate` accepts (250 bytes) works end to end: its
// partition publishes, and its marker (`<key>.json`, 255 bytes, written
// through a temp file) is written when it fails.
#[test]
fn the_longest_accepted_key_publishes_and_is_marked() {
    let key = "k".repeat(250);
    let sb = Sandbox::new(&format!(
        r#"
[pipeline]
name = "robust"
code_version = "1"
warehouse = "wh"

[partitions.long]
kind = "static"
keys = ["{key}"]

[tasks.t]
command = ["sh", "t.sh"]
output = {{ dataset = "t_out", grain = ["id"] }}

[tasks.u]
command = ["sh", "-c", "exit 65"]
output = {{ dataset = "u_out", grain = ["id"] }}
"#
    ));
    sb.script(
        "t.sh",
        "printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb.run_cmd("r1", &[])
        .assert()
        .code(1)
        .stdout(&format!("run r1: 2 task instances: 1 published, 1 quarantined; 0 retries\n  QUARANTINED u {key}: deterministic failure: exit code 65\nevents: $SB/wh/_runs/r1/events.jsonl\n"))
        // u and t run side by side: their lines interleave in any order.
        .stderr_unordered(&format!("u {key} attempt 1 token 1: FAILED exit code 65\nt {key} attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\nu {key} attempt 1 token 1: QUARANTINED deterministic failure: exit code 65: quarantined, not retried\n"));
    assert_eq!(Visible::of(&sb.store("t_out", &key)).record.rows, 1);
    let marker = sb
        .path()
        .join("wh/_instances/u")
        .join(format!("{key}.json"));
    let marker: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(marker).expect("the marker")).unwrap();
    assert_eq!(marker["mark"], "QUARANTINED");
}

// A quarantine names the code that failed, as it launched: the deployed
// code (v2) fails, and once the deploy is reverted the next run releases
// the quarantine and publishes with v1, which never failed.
#[test]
fn a_quarantine_names_the_code_its_command_launched_with() {
    let sb = deploy_mid_run(&format!(
        ". ./lib.sh\nif [ \"$(v)\" = 2 ]; then exit 65; fi\n{T_WRITES}"
    ));
    sb.run_cmd("r1", &[])
        .assert()
        .code(1)
        .stdout("run r1: 2 task instances: 1 published, 1 quarantined; 0 retries\n  QUARANTINED t all: deterministic failure: exit code 65\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr("deploy all attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\nt all attempt 1 token 1: FAILED exit code 65\nt all attempt 1 token 1: QUARANTINED deterministic failure: exit code 65: quarantined, not retried\n");
    let v2 = fingerprint_now(&sb);
    let marker: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.path().join("wh/_instances/t/all.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(marker["code_fingerprint"], v2.as_str());

    // The deploy is reverted: v1 is not the code that failed.
    sb.script("lib.sh", V1);
    sb.run_cmd("r2", &[])
        .assert()
        .success()
        .stdout("run r2: 2 task instances: 1 published, 1 already published; 0 retries\nevents: $SB/wh/_runs/r2/events.jsonl\n")
        .stderr("deploy all: ALREADY_PUBLISHED generation 1 has the same input snapshot (code_version 1): nothing to do\nt all attempt 1 token 2: PUBLISHED generation 1: 1 rows, sha256:133295690dbaaac3f9a75484ee9ec3411b6fedbc70e86c641d5aa91e505a30f3\n");
    let visible = Visible::of(&sb.store("t_out", "all"));
    assert_eq!(visible.rows(), [["1", "1"]]);
    assert_eq!(
        visible.record.code_fingerprint.as_deref(),
        Some(fingerprint_now(&sb).as_str())
    );
}

// A task, pool or dataset name becomes a directory name in
// the warehouse: one longer than the store's 255 bytes is refused by
// `validate`, where it is written, instead of failing every run.
#[test]
fn names_longer_than_the_warehouse_takes_are_refused() {
    let long = "n".repeat(256);
    let manifest = |task: &str, pool: &str, dataset: &str| {
        format!(
            r#"
[pipeline]
name = "robust"
code_version = "1"
warehouse = "wh"

[pools.{pool}]
slots = 1

[tasks.{task}]
command = ["sh", "t.sh"]
partitioned_by = []
pool = "{pool}"
output = {{ dataset = "{dataset}", grain = ["id"] }}
"#
        )
    };
    let ok = "n".repeat(255);
    Sandbox::new(&manifest(&ok, &ok, &ok))
        .cmd(&["validate", "m.toml"])
        .assert()
        .success()
        .stdout("ok: m.toml (pipeline `robust`, code_version 1: 1 task, 0 partition schemes, 2 pools, 0 backfills)\n")
        .stderr("");
    for (what, text, line) in [
        ("task", manifest(&long, "p", "d"), 10),
        ("pool", manifest("t", &long, "d"), 7),
        ("dataset", manifest("t", "p", &long), 14),
    ] {
        Sandbox::new(&text)
            .cmd(&["validate", "m.toml"])
            .assert()
            .code(2)
            .stdout("")
            .stderr(&format!(
                "weir::manifest::name_too_long\n\n  × {what} `nnnnnnnnnnnnnnnnnnnnnnnn…` is too long for the warehouse\n\
                 ...\nerror: `m.toml` is not a valid manifest: 1 error\n"
            ))
            .stderr_contains(&[
                &format!("[m.toml:{line}:"),
                "256 bytes",
                "longer than 255 bytes); shorten it\n",
            ]);
    }
}
