//! Operator commands through the binary: rollback, certify/uncertify, gc,
//! verify, retry/abandon of held instances, `status --check` and explain.
//!
//! The longest outputs are snapshots, `snapshots/it__operator__*.snap` (times,
//! durations and operator run ids masked): after a deliberate change run
//! `INSTA_UPDATE=always cargo test --test it -- operator::` and review the diff
//! (support/snapshot.rs); a missing or different snapshot fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::Digest as _;
use weir::events::{EventRecord, State};

use crate::support::snapshot;
use crate::support::{assert_exit, run_id_in, states, stdout, Sandbox, Visible};

/// A pipeline `m.toml` over static `keys` with `tasks` (TOML tables) and
/// `extra` tables (datasets, retry classes).
fn pipeline(keys: &[&str], extra: &str, tasks: &str) -> Sandbox {
    Sandbox::new(&format!(
        r#"
[pipeline]
name = "operator"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = {keys:?}

{extra}

{tasks}
"#
    ))
}

/// The events of `state` in `events`.
fn of(events: &[EventRecord], state: State) -> Vec<&EventRecord> {
    events.iter().filter(|e| e.state == state).collect()
}

fn file_sha256(path: &Path) -> String {
    format!(
        "sha256:{:x}",
        sha2::Sha256::digest(std::fs::read(path).unwrap())
    )
}

/// `weir show m.toml DATASET --partition P`, exit 0 asserted.
#[track_caller]
fn show(sb: &Sandbox, dataset: &str, partition: &str) -> String {
    sb.cmd(&["show", "m.toml", dataset, "--partition", partition])
        .assert()
        .success()
        .stderr("")
        .stdout_text()
}

/// `weir retry m.toml TASK --partition PARTITION --note NOTE`, which
/// releases one instance that then publishes, printing `stderr`; the retry
/// run's events.
#[track_caller]
fn retry(sb: &Sandbox, task: &str, partition: &str, note: &str, stderr: &str) -> Vec<EventRecord> {
    let out = sb
        .cmd(&[
            "retry",
            "m.toml",
            task,
            "--partition",
            partition,
            "--note",
            note,
        ])
        .assert()
        .success()
        .stderr(stderr)
        .stdout_text();
    let id = run_id_in(&out);
    assert_eq!(
        out,
        format!(
            "released {task} {partition}; running it and the downstream partitions that read it\n\
             run {id}: 1 task instance: 1 published; 0 retries\n\
             events: $SB/wh/_runs/{id}/events.jsonl\n"
        )
    );
    sb.events(&id)
}

/// The entry of `dataset`/`partition` in `status --json`.
#[track_caller]
fn status_entry(sb: &Sandbox, dataset: &str, partition: &str) -> serde_json::Value {
    sb.status_json()["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["dataset"] == dataset && p["partition"] == partition)
        .unwrap_or_else(|| panic!("{dataset} {partition} is published"))
        .clone()
}

#[test]
fn rollback_then_status() {
    let sb = pipeline(
        &["k1"],
        r#"
[datasets.feed]
path = "feed_{partition}.csv""#,
        r#"
[tasks.t]
command = ["sh", "t.sh"]
inputs = ["feed"]
output = { dataset = "out", grain = ["id"] }"#,
    );
    // With `flag` present the task is "buggy": it rewrites the rows.
    sb.script(
        "t.sh",
        r#"if [ -f flag ]; then printf 'id,v\n1,wrong\n2,wrong\n3,wrong\n' > "$WEIR_OUTPUT_DIR/out.csv"
else cp "$WEIR_INPUT_FEED" "$WEIR_OUTPUT_DIR/out.csv"; fi
"#,
    );
    std::fs::write(sb.path().join("feed_k1.csv"), "id,v\n1,a\n2,b\n").unwrap();
    let store = sb.store("out", "k1");

    sb.run_cmd("r1", &[])
        .assert()
        .code(0)
        .stdout("run r1: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("t k1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    let gen1 = Visible::of(&store);
    std::fs::write(sb.path().join("flag"), "").unwrap();
    sb.run_cmd("r2", &["--force"])
        .assert()
        .code(0)
        .stdout("run r2: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r2/events.jsonl\n")
        .stderr_unordered("t k1 attempt 1 token 2: PUBLISHED generation 2: 3 rows, sha256:d8e96cc49108cec77db4151d73ab4a7507e5575096ae8a12627f832ccb22ba91\n");
    let gen2 = Visible::of(&store);
    assert_eq!(gen2.record.generation.get(), 2);
    assert_ne!(gen2.record.digest, gen1.record.digest, "gen 2 differs");

    sb.cmd(&["rollback", "m.toml", "out", "--partition", "k1"])
        .assert()
        .success()
        .stdout("out k1: generation 3 now shows the files of generation 1 (2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3); the instance is held until `weir retry`\n")
        .stderr("");

    // Readers see generation 3 with generation 1's rows and digest.
    let entry = status_entry(&sb, "out", "k1");
    assert_eq!(entry["generation"], 3);
    assert_eq!(entry["digest"], gen1.record.digest.as_str());
    assert_eq!(entry["rows"], 2);
    let gen3 = Visible::of(&store);
    assert_eq!(gen3.files, gen1.files, "the files of generation 1");
    assert_eq!(gen3.recomputed_digest().1, gen1.record.digest);
    assert_eq!(show(&sb, "out", "k1"), "id,v\n1,a\n2,b\n");

    // The log only grew: three records, tokens increasing, the third a rollback.
    let history = store.history().unwrap();
    assert_eq!(history.len(), 3);
    assert!(
        history.windows(2).all(|w| w[0].token < w[1].token),
        "{history:?}"
    );
    assert_eq!(
        history[2].kind,
        weir::store::CommitKind::Rollback {
            from_generation: weir::store::Generation::from_raw(1)
        }
    );
    assert_eq!(history[0].kind, weir::store::CommitKind::Publish);
    let events = sb.all_runs_events();
    let rolled = of(&events, State::RolledBack);
    assert_eq!(rolled.len(), 1);
    assert_eq!(rolled[0].data["token"], history[2].token.get());
    assert_eq!(rolled[0].data["from_generation"], 1);
    assert_eq!(rolled[0].data["replaced_generation"], 2);
    assert_eq!(rolled[0].data["digest"], gen1.record.digest.as_str());
    assert_eq!(rolled[0].token, Some(history[2].token.get()));

    // The operator fixes the code and new data arrives: without the hold the
    // next run would rebuild the partition. It is HELD instead.
    std::fs::remove_file(sb.path().join("flag")).unwrap();
    std::fs::write(sb.path().join("feed_k1.csv"), "id,v\n1,a\n2,b\n3,c\n").unwrap();
    sb.cmd(&["status", "m.toml", "--check"])
        .assert()
        .code(4)
        .stdout("dataset  partition  gen  token  rows  code_version  published_at              digest\nout      k1           3      3     2  1             [..]  sha256:d98be1f46a82…\n\nout: 1 partition built by code_version 1\nHELD        t k1: rolled back to generation 1 of out (token 3, replacing generation 2); `weir retry` releases it (a run then rebuilds it if its inputs or code differ from the restored generation's)\nSTALE       t k1: external input `feed` (feed_k1.csv) changed since this publication read it: sha256:c5dbf702e653 now, sha256:b5dccbd508bf then (held: `weir retry m.toml t --partition k1 --note …` releases it and rebuilds it)\n")
        .stderr("check failed: 1 instance needs attention\n");
    let out = sb.run("r3", &[]);
    sb.check(&out).code(1).stdout("run r3: 1 task instance: 1 held; 0 retries\n  HELD        t k1: since run op-[..]: rolled back to generation 1 of out (token 3, replacing generation 2); `weir retry` releases it (a run then rebuilds it if its inputs or code differ from the restored generation's); its published generation stays readable downstream\nevents: $SB/wh/_runs/r3/events.jsonl\n").stderr_unordered("t k1: HELD since run op-[..]: rolled back to generation 1 of out (token 3, replacing generation 2); `weir retry` releases it (a run then rebuilds it if its inputs or code differ from the restored generation's); release with `weir retry m.toml t --partition k1 --note ...`; its published generation stays readable downstream\n");
    let r3 = sb.events("r3");
    assert_eq!(states(&r3, "t", "k1"), [State::Queued, State::Held]);
    assert!(of(&r3, State::Held)[0].detail.contains("weir retry"));
    assert_eq!(store.history().unwrap().len(), 3, "nothing rebuilt");

    let retry = retry(&sb, "t", "k1", "bug fixed, new feed checked",
        "t k1 attempt 1 token 4: PUBLISHED generation 4: 3 rows, sha256:0b239d8a8447d621cc56ac919096add8fd667d783560b1bac27134380db08520\n",
    );
    let s = states(&retry, "t", "k1");
    assert!(s.contains(&State::Running), "{s:?}");
    assert_eq!(s.last(), Some(&State::Published), "{s:?}");
    let gen4 = Visible::of(&store);
    assert_eq!(gen4.record.generation.get(), 4);
    assert_eq!(gen4.record.kind, weir::store::CommitKind::Publish);
    assert_eq!(show(&sb, "out", "k1"), "id,v\n1,a\n2,b\n3,c\n");
    sb.cmd(&["status", "m.toml", "--check"])
        .assert()
        .success()
        .stdout("dataset  partition  gen  token  rows  code_version  published_at              digest\nout      k1           4      4     3  1             [..]  sha256:0b239d8a8447…\n\nout: 1 partition built by code_version 1\n")
        .stderr("");
}

#[test]
fn uncertify_blocks_downstream() {
    let sb = pipeline(
        &["p"],
        "",
        r#"
[tasks.up]
command = ["sh", "up.sh"]
output = { dataset = "up", grain = ["id"] }

[tasks.down]
command = ["sh", "down.sh"]
inputs = ["up"]
output = { dataset = "down", grain = ["id"] }"#,
    );
    sb.script(
        "up.sh",
        r#"printf 'id,token\n1,%s\n' "$WEIR_TOKEN" > "$WEIR_OUTPUT_DIR/up.csv""#,
    );
    sb.script(
        "down.sh",
        r#"cp "$WEIR_INPUT_UP"/*.csv "$WEIR_OUTPUT_DIR/""#,
    );
    sb.run_cmd("r1", &[])
        .assert()
        .code(0)
        .stdout("run r1: 2 task instances: 2 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("up p attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:6f5f739e6800f5d6f7ee86a63009e6aa6bddbafbde7d1996bde0e9063747a6ca\ndown p attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:6f5f739e6800f5d6f7ee86a63009e6aa6bddbafbde7d1996bde0e9063747a6ca\n");
    // A second generation of `up`, which its consumer finds wrong.
    sb.run_cmd("r1b", &["--force", "--task", "up"])
        .assert()
        .code(0)
        .stdout("run r1b: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r1b/events.jsonl\n")
        .stderr_unordered("up p attempt 1 token 2: PUBLISHED generation 2: 1 rows, sha256:25221b3dcda70e49ac6f3c85f11a331886935cbedf6fbc2078d922a312fc4ad0\n");
    let down = sb.store("down", "p");
    assert_eq!(down.history().unwrap().len(), 1);

    sb.cmd(&[
        "uncertify",
        "m.toml",
        "up",
        "--partition",
        "p",
        "--reason",
        "vendor resent the feed",
    ])
    .assert()
    .success()
    .stdout("uncertified up p generation 2\n")
    .stderr("");
    assert_eq!(status_entry(&sb, "up", "p")["certified"], false);

    sb.run_cmd("r2", &["--force", "--task", "down"])
        .assert()
        .code(1)
        .stdout("run r2: 1 task instance: 1 held; 0 retries\n  HELD        down p: upstream `up` p generation 2 is uncertified (vendor resent the feed); run with --allow-uncertified to read it anyway\nevents: $SB/wh/_runs/r2/events.jsonl\n")
        .stderr("down p: HELD inputs unavailable: upstream `up` p generation 2 is uncertified (vendor resent the feed); run with --allow-uncertified to read it anyway\n");
    let r2 = sb.events("r2");
    // `--task down` selects exactly `down`: the published `up` is pinned,
    // not planned.
    assert_eq!(states(&r2, "up", "p"), []);
    assert_eq!(states(&r2, "down", "p"), [State::Queued, State::Held]);
    let held = &of(&r2, State::Held)[0].detail;
    assert!(
        held.contains("upstream `up` p generation 2 is uncertified (vendor resent the feed)"),
        "{held}"
    );
    assert!(held.contains("--allow-uncertified"), "{held}");
    assert_eq!(down.history().unwrap().len(), 1, "nothing published");

    let out = sb.run("r3", &["--force", "--task", "down", "--allow-uncertified"]);
    sb.check(&out).code(0).stdout("run r3: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r3/events.jsonl\n").stderr_unordered("down p attempt 1 token 2: PUBLISHED generation 2: 1 rows, sha256:25221b3dcda70e49ac6f3c85f11a331886935cbedf6fbc2078d922a312fc4ad0\n");
    let published = Visible::of(&down).record;
    assert_eq!(published.generation.get(), 2);
    assert_eq!(published.run_id, "r3");
    assert_eq!(published.input_snapshot["inputs"][0]["generation"], 2);

    sb.cmd(&[
        "certify",
        "m.toml",
        "up",
        "--partition",
        "p",
        "--reason",
        "checked against the vendor's totals",
    ])
    .assert()
    .success()
    .stdout("certified up p generation 2\n")
    .stderr("");
    assert_eq!(status_entry(&sb, "up", "p")["certified"], true);
    let out = sb.run("r4", &["--force", "--task", "down"]);
    sb.check(&out).code(0).stdout("run r4: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r4/events.jsonl\n").stderr_unordered("down p attempt 1 token 3: PUBLISHED generation 3: 1 rows, sha256:25221b3dcda70e49ac6f3c85f11a331886935cbedf6fbc2078d922a312fc4ad0\n");
    assert_eq!(
        states(&sb.events("r4"), "down", "p").last(),
        Some(&State::Published)
    );
    assert_eq!(Visible::of(&down).record.generation.get(), 3);

    let events = sb.all_runs_events();
    for (state, reason) in [
        (State::Uncertified, "vendor resent the feed"),
        (State::Certified, "checked against the vendor's totals"),
    ] {
        let found = of(&events, state);
        assert_eq!(found.len(), 1, "{state:?}");
        assert_eq!(found[0].task.as_deref(), Some("up"));
        assert_eq!(found[0].partition.as_deref(), Some("p"));
        assert_eq!(found[0].data["dataset"], "up");
        assert_eq!(found[0].data["generation"], 2);
        assert!(found[0].detail.contains(reason), "{}", found[0].detail);
    }
}

/// Every file under `dir` (recursively) with its bytes, by relative path.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.insert(path.strip_prefix(root).unwrap().join(""), Vec::new());
                walk(root, &path, out);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.insert(path.strip_prefix(root).unwrap().to_path_buf(), bytes);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// A pipeline whose task `t` stamps its token in a column and fails its
/// accepted_values gate when `bad_<partition>` exists.
fn gated(keys: &[&str]) -> Sandbox {
    let sb = pipeline(
        keys,
        "",
        r#"
[tasks.t]
command = ["sh", "t.sh"]
output = { dataset = "out", grain = ["id"] }
gates = [{ check = "accepted_values", column = "v", values = ["ok"] }]"#,
    );
    sb.script(
        "t.sh",
        r#"if [ -f "bad_$WEIR_PARTITION" ]; then v=bad; else v=ok; fi
printf 'id,v,token\n1,%s,%s\n' "$v" "$WEIR_TOKEN" > "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    sb
}

#[test]
fn gc_dry_run_deletes_nothing_and_apply_keeps_referenced() {
    let sb = gated(&["p", "q"]);
    let bad = |on: bool| {
        for k in ["p", "q"] {
            let flag = sb.path().join(format!("bad_{k}"));
            if on {
                std::fs::write(flag, "").unwrap();
            } else {
                std::fs::remove_file(flag).unwrap();
            }
        }
    };
    // p: generations 1 and 2 (tokens 1, 2), a gate-failed candidate (token
    // 3), generations 3 and 4 (tokens 4, 5). q: generation 1 (token 1) and a
    // gate-failed candidate (token 2).
    sb.run_cmd("r1", &[])
        .assert()
        .code(0)
        .stdout("run r1: 2 task instances: 2 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("t q attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:287865831c58942634211d76d712b983bc3722d3b0e8a29ed3adfab93165b91d\nt p attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:287865831c58942634211d76d712b983bc3722d3b0e8a29ed3adfab93165b91d\n");
    sb.run_cmd("r2", &["--force", "--partition", "p"])
        .assert()
        .code(0)
        .stdout("run r2: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r2/events.jsonl\n")
        .stderr_unordered("t p attempt 1 token 2: PUBLISHED generation 2: 1 rows, sha256:09a4b2a1812b7006f7e29d44b43b373334c304ba2bef94eb8be00be77f17cd88\n");
    bad(true);
    sb.run_cmd("r3", &["--force"])
        .assert()
        .code(1)
        .stdout("run r3: 2 task instances: 2 quarantined; 0 retries\n  QUARANTINED t p: deterministic failure: accepted_values(v in ok): expected one of \"ok\", got 1 row with values outside the set: \"bad\"\n  QUARANTINED t q: deterministic failure: accepted_values(v in ok): expected one of \"ok\", got 1 row with values outside the set: \"bad\"\nevents: $SB/wh/_runs/r3/events.jsonl\n")
        .stderr_unordered("t p attempt 1 token 3: GATE_FAILED accepted_values(v in ok): expected one of \"ok\", got 1 row with values outside the set: \"bad\"\nt q attempt 1 token 2: GATE_FAILED accepted_values(v in ok): expected one of \"ok\", got 1 row with values outside the set: \"bad\"\nt p attempt 1 token 3: QUARANTINED deterministic failure: accepted_values(v in ok): expected one of \"ok\", got 1 row with values outside the set: \"bad\": quarantined, not retried\nt q attempt 1 token 2: QUARANTINED deterministic failure: accepted_values(v in ok): expected one of \"ok\", got 1 row with values outside the set: \"bad\": quarantined, not retried\n");
    bad(false);
    sb.run_cmd("r4", &["--force", "--partition", "p"])
        .assert()
        .code(0)
        .stdout("run r4: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r4/events.jsonl\n")
        .stderr_unordered("t p attempt 1 token 4: PUBLISHED generation 3: 1 rows, sha256:6a64c07326944fcc35efb28019c5c813eb7cf9bbe5918244836980f846553d00\n");
    sb.run_cmd("r5", &["--force", "--partition", "p"])
        .assert()
        .code(0)
        .stdout("run r5: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r5/events.jsonl\n")
        .stderr_unordered("t p attempt 1 token 5: PUBLISHED generation 4: 1 rows, sha256:e9cf54e6e18e5252cd51a06b15645abde4968d82bcd722fad2c34f4e6e45557d\n");
    let p = sb.store("out", "p");
    let q = sb.store("out", "q");
    assert_eq!(p.history().unwrap().len(), 4);
    assert_eq!(sb.entries("out", "p", "attempts").len(), 5);
    assert_eq!(sb.entries("out", "q", "attempts").len(), 2);

    // q's candidate looks like one whose engine is still on it.
    let q2 = q.attempt_dir(weir::store::FencingToken::from_raw(2));
    let lease = serde_json::json!({
        "engine_id": "00000000deadbeef",
        "host": "elsewhere",
        "pid": 4_000_000,
        "pid_start": null,
        "run_id": "r3",
        "task": "t",
        "attempt": 1,
        "token": 2,
        "heartbeat_ms": 1_700_000_000_000_i64,
        "heartbeat_at": "2023-11-14T22:13:20.000Z",
        "timeout_ms": 30_000,
        "finished": false,
    });
    std::fs::write(q2.join("lease.json"), lease.to_string()).unwrap();
    let parsed = weir::store::leases::read_at(&q2).expect("the hand-written lease parses");
    assert!(!parsed.finished);

    let wh = sb.path().join("wh");
    let before = tree(&wh);
    let out = sb.weir_out(&[
        "gc",
        "m.toml",
        "--older-than",
        "0s",
        "--keep-generations",
        "1",
    ]);
    sb.check(&out).code(0).stdout("would delete $SB/wh/out/p/attempts/00000000000000000001 ([..]): generation 1, outside the rollback window, of run r1 attempt 1 (token 1), age [..] > threshold [..]; generations kept: 4, 3\nwould delete $SB/wh/out/p/attempts/00000000000000000002 ([..]): generation 2, outside the rollback window, of run r2 attempt 1 (token 2), age [..] > threshold [..]; generations kept: 4, 3\nwould delete $SB/wh/out/p/attempts/00000000000000000003 ([..]): unreferenced candidate of run r3 attempt 1 (token 3), age [..] > threshold [..]; generations kept: 4, 3\nkeep         $SB/wh/out/p/attempts/00000000000000000004 ([..]): referenced by generation 3 (retained for rollback)\nkeep         $SB/wh/out/p/attempts/00000000000000000005 ([..]): referenced by generation 4 (current)\nkeep         $SB/wh/out/q/attempts/00000000000000000001 ([..]): referenced by generation 1 (current)\nkeep         $SB/wh/out/q/attempts/00000000000000000002 ([..]): may still be running: its lease (engine 00000000deadbeef pid 4000000 on elsewhere) is not finished\ndry run: 3 candidate directories ([..]) would be deleted, 4 kept; rerun with --apply to delete\n").stderr("");
    let text = stdout(&out);
    let line = |partition: &str, token: u64| -> String {
        let suffix = format!("out/{partition}/attempts/{token:020}");
        text.lines()
            .find(|l| l.split(" (").next().unwrap().ends_with(&suffix))
            .unwrap_or_else(|| panic!("no line for {suffix}:\n{text}"))
            .to_owned()
    };
    for (partition, token) in [("p", 1), ("p", 2), ("p", 3)] {
        assert!(
            line(partition, token).starts_with("would delete "),
            "{text}"
        );
    }
    for (partition, token, why) in [
        ("p", 4, "referenced by generation 3 (retained for rollback)"),
        ("p", 5, "referenced by generation 4 (current)"),
        ("q", 1, "referenced by generation 1 (current)"),
        ("q", 2, "its lease (engine 00000000deadbeef"),
    ] {
        let l = line(partition, token);
        assert!(l.starts_with("keep "), "{l}");
        assert!(l.contains(why), "{l}");
    }
    assert!(text.contains("dry run: 3 candidate directories"), "{text}");
    assert_eq!(tree(&wh), before, "a dry run changes nothing");

    let out = sb.weir_out(&[
        "gc",
        "m.toml",
        "--older-than",
        "0s",
        "--keep-generations",
        "1",
        "--apply",
    ]);
    sb.check(&out).code(0).stdout("delete       $SB/wh/out/p/attempts/00000000000000000001 ([..]): generation 1, outside the rollback window, of run r1 attempt 1 (token 1), age [..] > threshold [..]; generations kept: 4, 3\ndelete       $SB/wh/out/p/attempts/00000000000000000002 ([..]): generation 2, outside the rollback window, of run r2 attempt 1 (token 2), age [..] > threshold [..]; generations kept: 4, 3\ndelete       $SB/wh/out/p/attempts/00000000000000000003 ([..]): unreferenced candidate of run r3 attempt 1 (token 3), age [..] > threshold [..]; generations kept: 4, 3\nkeep         $SB/wh/out/p/attempts/00000000000000000004 ([..]): referenced by generation 3 (retained for rollback)\nkeep         $SB/wh/out/p/attempts/00000000000000000005 ([..]): referenced by generation 4 (current)\nkeep         $SB/wh/out/q/attempts/00000000000000000001 ([..]): referenced by generation 1 (current)\nkeep         $SB/wh/out/q/attempts/00000000000000000002 ([..]): may still be running: its lease (engine 00000000deadbeef pid 4000000 on elsewhere) is not finished\ndeleted 3 candidate directories, 4 kept\n").stderr("");
    assert!(
        stdout(&out).contains("deleted 3 candidate directories, 4 kept"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        sb.entries("out", "p", "attempts"),
        [format!("{:020}", 4), format!("{:020}", 5)]
    );
    assert_eq!(
        sb.entries("out", "q", "attempts"),
        [format!("{:020}", 1), format!("{:020}", 2)]
    );
    // Nothing but attempt directories went: records, tokens, events stay.
    let after = tree(&wh);
    for path in before.keys() {
        let in_deleted = (1..=3).any(|t| {
            path.starts_with(format!("out/p/attempts/{t:020}"))
                || path.starts_with(format!("out/p/data-{t:020}"))
        });
        assert_eq!(after.contains_key(path), !in_deleted, "{}", path.display());
    }
    let events = sb.all_runs_events();
    let deleted = of(&events, State::GcDeleted);
    let mut tokens: Vec<u64> = deleted
        .iter()
        .map(|e| {
            assert_eq!(e.data["partition"], "p");
            assert!(!Path::new(e.data["path"].as_str().unwrap()).exists());
            e.data["token"].as_u64().unwrap()
        })
        .collect();
    tokens.sort_unstable();
    assert_eq!(tokens, [1, 2, 3]);

    // The current and the retained generation are whole and readable.
    for g in [3, 4] {
        let record = p
            .record(weir::store::Generation::from_raw(g))
            .unwrap()
            .unwrap();
        for f in p.visible_files(&record) {
            assert!(f.is_file(), "{}", f.display());
        }
    }
    // `show` keeps the file's column order.
    assert_eq!(show(&sb, "out", "p"), "id,v,token\n1,ok,5\n");
    assert_eq!(show(&sb, "out", "q"), "id,v,token\n1,ok,1\n");
    // The retained generation can still be rolled back to.
    let out = sb.weir_out(&["rollback", "m.toml", "out", "--partition", "p", "--to", "3"]);
    sb.check(&out).code(0).stdout("out p: generation 5 now shows the files of generation 3 (1 rows, sha256:6a64c07326944fcc35efb28019c5c813eb7cf9bbe5918244836980f846553d00); the instance is held until `weir retry`\n").stderr("");
    assert_eq!(show(&sb, "out", "p"), "id,v,token\n1,ok,4\n");
}

#[test]
fn rollback_to_a_generation_gc_deleted_is_refused() {
    let sb = gated(&["p"]);
    sb.run_cmd("r1", &[])
        .assert()
        .code(0)
        .stdout("run r1: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("t p attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:287865831c58942634211d76d712b983bc3722d3b0e8a29ed3adfab93165b91d\n");
    sb.run_cmd("r2", &["--force"])
        .assert()
        .code(0)
        .stdout("run r2: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r2/events.jsonl\n")
        .stderr_unordered("t p attempt 1 token 2: PUBLISHED generation 2: 1 rows, sha256:09a4b2a1812b7006f7e29d44b43b373334c304ba2bef94eb8be00be77f17cd88\n");
    sb.run_cmd("r3", &["--force"])
        .assert()
        .code(0)
        .stdout("run r3: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r3/events.jsonl\n")
        .stderr_unordered("t p attempt 1 token 3: PUBLISHED generation 3: 1 rows, sha256:904c6d2d70570b17009df0227ac5b7d607f529d1857d39e5f798e7dd6a6c6ab8\n");
    let out = sb.weir_out(&[
        "gc",
        "m.toml",
        "--older-than",
        "0s",
        "--keep-generations",
        "1",
        "--apply",
    ]);
    sb.check(&out).code(0).stdout("delete       $SB/wh/out/p/attempts/00000000000000000001 ([..]): generation 1, outside the rollback window, of run r1 attempt 1 (token 1), age [..] > threshold [..]; generations kept: 3, 2\nkeep         $SB/wh/out/p/attempts/00000000000000000002 ([..]): referenced by generation 2 (retained for rollback)\nkeep         $SB/wh/out/p/attempts/00000000000000000003 ([..]): referenced by generation 3 (current)\ndeleted 1 candidate directory, 2 kept\n").stderr("");
    assert!(!sb
        .path()
        .join(format!("wh/out/p/attempts/{:020}", 1))
        .exists());

    // Generation 1 is outside the rollback window and its files are gone:
    // a rollback to it must be refused, not publish a record without files.
    let out = sb.weir_out(&["rollback", "m.toml", "out", "--partition", "p", "--to", "1"]);
    sb.check(&out).code(3).stdout("").stderr("weir::rollback::bad_target\n\n  × cannot roll back to generation 1: its files are gone (garbage-\n  │ collected?): $SB/wh/out/p/data-00000000000000000001/out.csv\n  help: `weir history` lists generations; pass `--to` one older than the\n        current\n");
    assert_eq!(sb.store("out", "p").history().unwrap().len(), 3);
    assert_eq!(show(&sb, "out", "p"), "id,v,token\n1,ok,3\n");
}

#[test]
fn verify_detects_a_non_deterministic_task() {
    let sb = pipeline(
        &["p"],
        "",
        r#"
[tasks.clock]
command = ["sh", "clock.sh"]
output = { dataset = "clock", grain = ["id"] }

[tasks.fixed]
command = ["sh", "fixed.sh"]
output = { dataset = "fixed", grain = ["id"] }"#,
    );
    sb.script(
        "clock.sh",
        r#"printf 'id,at\n1,%s\n2,constant\n' "$(date +%s%N)" > "$WEIR_OUTPUT_DIR/out.csv""#,
    );
    sb.script(
        "fixed.sh",
        r#"printf 'id,v\n1,a\n2,b\n' > "$WEIR_OUTPUT_DIR/out.csv""#,
    );
    sb.run_cmd("r1", &[])
        .assert()
        .code(0)
        .stdout("run r1: 2 task instances: 2 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("clock p attempt 1 token 1: PUBLISHED generation 1: 2 rows, [..]\nfixed p attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
    let published = Visible::of(&sb.store("clock", "p"));
    let stamp = published.rows().into_iter().find(|r| r[0] == "1").unwrap()[1].clone();
    let wh = sb.path().join("wh");
    let runs_before = std::fs::read_dir(wh.join("_runs")).unwrap().count();

    let out = sb.weir_out(&["verify", "m.toml", "clock", "--partition", "p"]);
    sb.check(&out).code(1).stdout("clock p generation 1: published sha256:[..] (2 rows), rerun sha256:[..] (2 rows)\nscratch: $SB/wh/_scratch/verify-[..]\nNOT deterministic: the rerun from the same inputs differs\n  only in published: id=1, at=[..]\n  only in rerun: id=1, at=[..]\n").stderr("");
    let text = stdout(&out);
    assert!(
        text.contains("NOT deterministic: the rerun from the same inputs differs"),
        "{text}"
    );
    assert!(
        text.contains(&format!("only in published: id=1, at={stamp}")),
        "{text}"
    );
    assert!(text.contains("only in rerun: id=1, at="), "{text}");
    assert!(
        !text.contains("id=2"),
        "the constant row is no difference: {text}"
    );

    let out = sb.weir_out(&["verify", "m.toml", "fixed", "--partition", "p"]);
    sb.check(&out).code(0).stdout("fixed p generation 1: published sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3 (2 rows), rerun sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3 (2 rows)\nscratch: $SB/wh/_scratch/verify-[..]\ndeterministic: the rerun from the pinned inputs has the published digest\n").stderr("");
    let text = stdout(&out);
    assert!(
        text.contains("deterministic: the rerun from the pinned inputs has the published digest"),
        "{text}"
    );
    assert!(!text.contains("NOT"), "{text}");

    // Verification publishes nothing and starts no run.
    for dataset in ["clock", "fixed"] {
        assert_eq!(sb.records(dataset, "p").len(), 1, "{dataset}");
        assert_eq!(sb.entries(dataset, "p", "tokens").len(), 1, "{dataset}");
    }
    assert_eq!(
        Visible::of(&sb.store("clock", "p")).record,
        published.record
    );
    assert_eq!(
        std::fs::read_dir(wh.join("_runs")).unwrap().count(),
        runs_before
    );
}

#[test]
fn held_instance_waits_for_retry() {
    let sb = pipeline(
        &["a", "b"],
        "",
        r#"
[tasks.t]
command = ["sh", "t.sh"]
output = { dataset = "out", grain = ["id"] }"#,
    );
    sb.script(
        "t.sh",
        "echo 'credentials expired: ask the vendor' >&2\nexit 78\n",
    );
    let out = sb.run("r1", &[]);
    sb.check(&out).code(1).stdout("run r1: 2 task instances: 2 held; 0 retries\n  HELD        t a: operator failure: exit code 78\n  HELD        t b: operator failure: exit code 78\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("t a attempt 1 token 1: FAILED exit code 78\nt b attempt 1 token 1: FAILED exit code 78\nt a attempt 1 token 1: HELD operator failure: exit code 78: held for an operator\nt b attempt 1 token 1: HELD operator failure: exit code 78: held for an operator\n");
    let r1 = sb.events("r1");
    for k in ["a", "b"] {
        assert_eq!(
            states(&r1, "t", k),
            [State::Queued, State::Running, State::Failed, State::Held]
        );
    }

    // The next run does not launch them.
    let out = sb.run("r2", &[]);
    sb.check(&out).code(1).stdout("run r2: 2 task instances: 2 held; 0 retries\n  HELD        t a: since run r1: operator failure: exit code 78\n  HELD        t b: since run r1: operator failure: exit code 78\nevents: $SB/wh/_runs/r2/events.jsonl\n").stderr_unordered("t a: HELD since run r1: operator failure: exit code 78; release with `weir retry m.toml t --partition a --note ...`\nt b: HELD since run r1: operator failure: exit code 78; release with `weir retry m.toml t --partition b --note ...`\n");
    let r2 = sb.events("r2");
    assert!(of(&r2, State::Running).is_empty(), "{r2:?}");
    for k in ["a", "b"] {
        assert_eq!(states(&r2, "t", k), [State::Queued, State::Held]);
    }
    for held in of(&r2, State::Held) {
        assert!(
            held.detail.starts_with("since run r1")
                && held
                    .detail
                    .contains("release with `weir retry m.toml t --partition"),
            "{}",
            held.detail
        );
    }
    assert_eq!(sb.entries("out", "a", "tokens").len(), 1, "no new attempt");

    sb.cmd(&["status", "m.toml", "--check"])
        .assert()
        .code(4)
        .stdout("nothing published yet in $SB/wh\nmissing: out: 2 expected partitions without a publication: a, b\nHELD        t a: operator failure: exit code 78\nHELD        t b: operator failure: exit code 78\n")
        .stderr("check failed: 2 instances need attention\n");

    // Fixed: `weir retry` releases and runs `a`.
    sb.script("t.sh", r#"printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv""#);
    let retry = retry(&sb, "t", "a", "fixed",
        "t a attempt 1 token 2: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\n",
    );
    assert_eq!(
        states(&retry, "t", "a"),
        [
            State::Queued,
            State::Running,
            State::Success,
            State::Audited,
            State::Published
        ]
    );
    assert!(states(&retry, "t", "b").is_empty(), "only `a` was retried");
    assert_eq!(
        Visible::of(&sb.store("out", "a")).record.generation.get(),
        1
    );
    let events = sb.all_runs_events();
    let released = of(&events, State::Released);
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].partition.as_deref(), Some("a"));
    assert_eq!(released[0].data["note"], "fixed");
    assert_eq!(released[0].data["was"]["mark"], "HELD");
    assert!(released[0].detail.contains("fixed"));
    let text = sb
        .cmd(&["status", "m.toml", "--check"])
        .assert()
        .code(4)
        .stderr("check failed: 1 instance needs attention\n")
        .stdout_text();
    assert!(!text.contains("HELD        t a"), "{text}");

    // `b` is given up: not run again, and no longer paged on.
    sb.cmd(&[
        "abandon",
        "m.toml",
        "t",
        "--partition",
        "b",
        "--note",
        "source retired",
    ])
    .assert()
    .success()
    .stdout("abandoned t b: not run again until `weir retry`\n")
    .stderr("");
    sb.cmd(&["status", "m.toml", "--check"])
        .assert()
        .success()
        .stdout("dataset  partition  gen  token  rows  code_version  published_at              digest\nout      a            1      2     1  1             [..]  sha256:0ead588b958b…\n\nout: 1 partition built by code_version 1\nmissing: out: 1 expected partition without a publication: b\nABANDONED   t b: by an operator: source retired (not run until `weir retry m.toml t --partition b --note …`)\n")
        .stderr("");
    let out = sb.run("r3", &[]);
    sb.check(&out).code(1).stdout("run r3: 2 task instances: 1 already published, 1 skipped; 0 retries\n  SKIPPED     t b: since run op-[..]: abandoned by an operator: source retired\nevents: $SB/wh/_runs/r3/events.jsonl\n").stderr_unordered("t a: ALREADY_PUBLISHED generation 1 has the same input snapshot (code_version 1): nothing to do\nt b: SKIPPED since run op-[..]: abandoned by an operator: source retired; release with `weir retry m.toml t --partition b --note ...`\n");
    let r3 = sb.events("r3");
    assert!(of(&r3, State::Running).is_empty(), "{r3:?}");
    assert_eq!(states(&r3, "t", "b"), [State::Queued, State::Skipped]);
    assert!(of(&r3, State::Skipped)[0].detail.contains("source retired"));
    assert_eq!(
        states(&r3, "t", "a"),
        [State::Queued, State::AlreadyPublished]
    );
    assert!(sb.store("out", "b").latest().unwrap().is_none());
    let abandoned = of(&sb.all_runs_events(), State::Abandoned)
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(abandoned.len(), 1);
    assert_eq!(abandoned[0].data["note"], "source retired");
}

#[test]
fn status_check_fails_on_late() {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "late"
code_version = "1"
warehouse = "wh"

[partitions.daily]
kind = "daily"
start = "2026-11-18"
end = "2026-11-20"

[tasks.t]
command = ["sh", "t.sh"]
output = { dataset = "out", grain = ["id"] }
sla = "6h"
"#,
    );
    sb.script("t.sh", r#"printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv""#);
    let days = ["2026-11-18", "2026-11-19", "2026-11-20"];

    let text = sb
        .cmd(&["status", "m.toml", "--check"])
        .assert()
        .code(4)
        .stderr("check failed: 3 instances need attention\n")
        .stdout_text();
    for (day, deadline) in days.iter().zip([
        "2026-11-19T06:00:00Z",
        "2026-11-20T06:00:00Z",
        "2026-11-21T06:00:00Z",
    ]) {
        assert!(
            text.contains(&format!(
                "LATE        t {day}: not published by its SLA deadline {deadline}"
            )),
            "{text}"
        );
    }
    let status = sb.status_json();
    let late: Vec<&str> = status["attention"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            assert_eq!(a["state"], "LATE");
            a["partition"].as_str().unwrap()
        })
        .collect();
    assert_eq!(late, days);

    let mut args = vec![];
    for d in &days {
        args.extend(["--partition", d]);
    }
    assert_exit(&sb.run("r1", &args), 0);
    sb.cmd(&["status", "m.toml", "--check"])
        .assert()
        .success()
        .stdout("dataset  partition   gen  token  rows  code_version  published_at              digest\nout      2026-11-18    1      1     1  1             [..]  sha256:0ead588b958b…\nout      2026-11-19    1      1     1  1             [..]  sha256:0ead588b958b…\nout      2026-11-20    1      1     1  1             [..]  sha256:0ead588b958b…\n\nout: 3 partitions built by code_version 1\n")
        .stderr("");
    let status = sb.status_json();
    assert_eq!(status["attention"], serde_json::json!([]));
    assert_eq!(status["missing"], serde_json::json!([]));
}

#[test]
fn explain_gives_evidence_and_a_recommendation() {
    let sb = pipeline(
        &["p"],
        r#"
[retry.quick]
max_attempts = 2
backoff = { initial = "10ms", max = "20ms" }

[datasets.orders]
path = "orders_{partition}.csv""#,
        r#"
[tasks.paid]
command = ["sh", "paid.sh"]
inputs = ["orders"]
output = { dataset = "paid", grain = ["id"] }
gates = [{ check = "accepted_values", column = "status", values = ["paid"] }]

[tasks.flaky]
command = ["sh", "flaky.sh"]
output = { dataset = "flaky", grain = ["id"] }
retry = "quick""#,
    );
    std::fs::write(
        sb.path().join("orders_p.csv"),
        "id,status\n1,paid\n2,refunded\n3,paid\n",
    )
    .unwrap();
    sb.script(
        "paid.sh",
        r#"cp "$WEIR_INPUT_ORDERS" "$WEIR_OUTPUT_DIR/out.csv""#,
    );
    sb.script(
        "flaky.sh",
        "echo \"connection reset by peer (attempt $WEIR_ATTEMPT)\" >&2\nexit 75\n",
    );
    sb.run_cmd("r1", &[])
        .assert()
        .code(1)
        .stdout("run r1: 2 task instances: 1 quarantined, 1 held; 1 retry\n  QUARANTINED paid p: deterministic failure: accepted_values(status in paid): expected one of \"paid\", got 1 row with values outside the set: \"refunded\"\n  HELD        flaky p: transient failure (exit code 75) after 2 of 2 attempts\nevents: $SB/wh/_runs/r1/events.jsonl\n")
        .stderr_unordered("flaky p attempt 1 token 1: FAILED exit code 75\nflaky p attempt 1 token 1: RETRYING transient failure (exit code 75); attempt 2 of 2 in [..]\npaid p attempt 1 token 1: GATE_FAILED accepted_values(status in paid): expected one of \"paid\", got 1 row with values outside the set: \"refunded\"\npaid p attempt 1 token 1: QUARANTINED deterministic failure: accepted_values(status in paid): expected one of \"paid\", got 1 row with values outside the set: \"refunded\": quarantined, not retried\nflaky p attempt 2 token 2: FAILED exit code 75\nflaky p attempt 2 token 2: HELD transient failure (exit code 75) after 2 of 2 attempts: held for an operator\n");
    let events = sb.events("r1");
    let gate_failed = of(&events, State::GateFailed);
    assert_eq!(gate_failed.len(), 1);
    let gate_token = gate_failed[0].token.unwrap();
    let orders_sha = file_sha256(&sb.path().join("orders_p.csv"));

    // A gate failure: evidence, then "fix data".
    let out = sb.weir_out(&["explain", "m.toml", "paid", "--partition", "p"]);
    snapshot::assert_output!(
        "explain_gate_failure",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    let text = stdout(&out);
    for needle in [
        format!("run r1 attempt 1 token {gate_token}: GATE_FAILED -> QUARANTINED (deterministic)"),
        r#"gate accepted_values(status in paid): expected one of "paid", actual 1 row with values outside the set: "refunded""#.to_owned(),
        r#"line 3: status="refunded""#.to_owned(),
        format!("orders (external): {orders_sha}"),
        "recommended: fix data".to_owned(),
    ] {
        assert!(text.contains(&needle), "missing {needle:?} in:\n{text}");
    }
    let out = sb.weir_out(&["explain", "m.toml", "paid", "--partition", "p", "--json"]);
    snapshot::assert_output!(
        "explain_gate_failure_json",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    let x: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(x["attempts"].as_array().unwrap().len(), 1);
    let a = &x["attempts"][0];
    assert_eq!(a["run_id"], "r1");
    assert_eq!(a["token"], gate_token);
    assert_eq!(a["state"], "GATE_FAILED");
    assert_eq!(a["decision"], "QUARANTINED");
    let gate = &a["failed_gates"][0];
    assert_eq!(gate["expected"], r#"one of "paid""#);
    assert_eq!(
        gate["actual"],
        r#"1 row with values outside the set: "refunded""#
    );
    assert_eq!(
        gate["offending"],
        serde_json::json!([r#"line 3: status="refunded""#])
    );
    assert_eq!(x["input_snapshot"]["inputs"][0]["name"], "orders");
    assert_eq!(
        x["input_snapshot"]["inputs"][0]["digest"],
        orders_sha.as_str()
    );
    assert_eq!(x["mark"]["mark"], "QUARANTINED");
    assert!(x["recommendation"]
        .as_str()
        .unwrap()
        .starts_with("fix data"));

    // Transient failures until the attempts ran out: exit code, stderr, "retry".
    let out = sb.weir_out(&["explain", "m.toml", "flaky", "--partition", "p"]);
    snapshot::assert_output!(
        "explain_flaky",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    let text = stdout(&out);
    let flaky_tokens: Vec<u64> = of(&events, State::Failed)
        .iter()
        .filter(|e| e.task.as_deref() == Some("flaky"))
        .map(|e| e.token.unwrap())
        .collect();
    assert_eq!(flaky_tokens.len(), 2);
    for needle in [
        format!(
            "run r1 attempt 1 token {}: FAILED -> RETRYING (transient), exit code 75",
            flaky_tokens[0]
        ),
        format!(
            "run r1 attempt 2 token {}: FAILED -> HELD (transient), exit code 75",
            flaky_tokens[1]
        ),
        "| connection reset by peer (attempt 2)".to_owned(),
        "recommended: retry: ".to_owned(),
        "`weir retry m.toml flaky --partition p --note \"...\"`".to_owned(),
    ] {
        assert!(text.contains(&needle), "missing {needle:?} in:\n{text}");
    }
    let out = sb.weir_out(&["explain", "m.toml", "flaky", "--partition", "p", "--json"]);
    snapshot::assert_output!(
        "explain_flaky_json",
        sb.check(&out).code(0).stderr("").stdout_text()
    );
    let x: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let last = x["attempts"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["exit_code"], 75);
    assert_eq!(last["decision"], "HELD");
    assert_eq!(last["class"], "transient");
    assert!(last["stderr_tail"]
        .as_str()
        .unwrap()
        .contains("connection reset by peer (attempt 2)"));
    assert!(x["recommendation"].as_str().unwrap().starts_with("retry"));
    assert_eq!(x["mark"]["mark"], "HELD");
}
