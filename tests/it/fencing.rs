//! Fencing: a publisher holding an older token can never replace what a
//! newer token committed, whichever finishes last.

use std::path::Path;
use std::time::{Duration, Instant};

use weir::audit::{digest_files, Format};
use weir::events::State;
use weir::exec::InstanceResult;
use weir::plan::Scope;
use weir::store::{CommitKind, FencingToken, NewCommit, PartitionStore, PublishError, TokenOwner};

use crate::support::{run_options, states, Sandbox, Visible};

fn owner(run_id: &str, attempt: u32) -> TokenOwner {
    TokenOwner {
        run_id: run_id.into(),
        task: "write".into(),
        attempt,
    }
}

/// Stages `csv` as `out.csv` in the token's attempt dir and returns the
/// commit a publisher holding `token` would make.
fn staged(store: &PartitionStore, token: FencingToken, run_id: &str, csv: &str) -> NewCommit {
    let dir = store.prepare_attempt(token).unwrap();
    let file = dir.join("data/out.csv");
    std::fs::write(&file, csv).unwrap();
    let (rows, digest) = digest_files(std::slice::from_ref(&file), Format::Csv).unwrap();
    NewCommit {
        token,
        dataset: store.dataset().into(),
        partition: store.partition().into(),
        kind: CommitKind::Publish,
        run_id: run_id.into(),
        task: "write".into(),
        attempt: 1,
        attempt_dir: store.attempt_key(token),
        data_dir: None,
        files: vec!["out.csv".into()],
        file_sums: vec![weir::store::FileSum::of(&file, "out.csv").unwrap()],
        rows,
        digest: digest.as_str().into(),
        // A hand-made publication that read something else: a run reading
        // the same would find it current (early cutoff).
        input_snapshot: serde_json::json!({ "inputs": [
            { "name": "by-hand", "kind": "external", "path": "by-hand.csv", "digest": "sha256:by-hand" }
        ] }),
        input_snapshot_digest: "sha256:by-hand".into(),
        code_version: "1".into(),
        code_fingerprint: None,
    }
}

#[test]
fn stale_token_finishing_last_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let wh = weir::store::Warehouse::open(tmp.path()).unwrap();
    let store = wh.partition("out", "p");
    let a = store.allocate_token(&owner("old", 1)).unwrap();
    let b = store.allocate_token(&owner("new", 1)).unwrap();
    assert!(a < b);
    let commit_a = staged(&store, a, "old", "id,v\n1,old\n");
    let commit_b = staged(&store, b, "new", "id,v\n1,new\n2,new\n");

    // B (newer) finishes first; A (older) wakes up and tries last.
    let rec_b = store.commit(commit_b).unwrap();
    assert_eq!(rec_b.generation.get(), 1);
    match store.commit(commit_a) {
        Err(PublishError::Stale {
            mine,
            committed,
            generation,
        }) => assert_eq!((mine, committed, generation), (a, b, rec_b.generation)),
        other => panic!("expected Stale, got {other:?}"),
    }
    assert_eq!(store.generations().unwrap(), vec![rec_b.generation]);
    let visible = Visible::of(&store);
    assert_eq!(visible.record, rec_b);
    assert_eq!(visible.rows(), [["1", "new"], ["2", "new"]]);
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Task `write` at `p`: it announces it is running (started.flag), then
/// waits (bounded) for go.flag before writing its candidate, so the test can
/// commit a newer token in between.
fn waiting_sandbox() -> Sandbox {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "fencing"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["p"]

[tasks.write]
command = ["sh", "write.sh"]
output = { dataset = "out", grain = ["id"] }
"#,
    );
    sb.script(
        "write.sh",
        r#": > started.flag
i=0
while [ ! -f go.flag ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
printf 'id,v\n1,engine\n' > "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    sb
}

/// Plays the racing newer attempt once the engine's task is running:
/// allocates a newer token, commits it, and lets the task finish.
fn overtake(sb: &Sandbox, store: &PartitionStore) -> weir::store::CommitRecord {
    wait_for(&sb.path().join("started.flag"));
    let newer = store.allocate_token(&owner("racer", 1)).unwrap();
    let hand = store
        .commit(staged(store, newer, "racer", "id,v\n1,racer\n2,racer\n"))
        .unwrap();
    std::fs::write(sb.path().join("go.flag"), "").unwrap();
    hand
}

#[test]
fn engine_attempt_overtaken_by_newer_token_is_rejected_stale() {
    let sb = waiting_sandbox();
    let manifest = sb.manifest();
    let store = sb.store("out", "p");
    let options = run_options(Scope::Partitions(vec!["p".into()]), "engine", false);
    let (summary, hand) = std::thread::scope(|s| {
        let engine = s.spawn(|| weir::exec::run(&manifest, &options, None).unwrap());
        let hand = overtake(&sb, &store);
        (engine.join().unwrap(), hand)
    });
    assert_eq!(summary.instances[0].2, InstanceResult::RejectedStale);
    let events = sb.events("engine");
    assert_eq!(
        states(&events, "write", "p"),
        [
            State::Queued,
            State::Running,
            State::Success,
            State::Audited,
            State::RejectedStale
        ]
    );
    let stale = events
        .iter()
        .find(|e| e.state == State::RejectedStale)
        .unwrap();
    assert_eq!(stale.token, Some(1));
    assert_eq!(stale.data["mine"], 1);
    assert_eq!(stale.data["committed"], hand.token.get());
    assert_eq!(stale.data["generation"], 1);

    assert_eq!(store.generations().unwrap(), vec![hand.generation]);
    let visible = Visible::of(&store);
    assert_eq!(visible.record, hand);
    assert_eq!(visible.rows(), [["1", "racer"], ["2", "racer"]]);
    // The engine's candidate was audited and kept, never made visible.
    let engine_dir = store.attempt_dir(FencingToken::from_raw(1));
    assert!(engine_dir.join("candidate.json").is_file());
    assert_eq!(
        std::fs::read_to_string(engine_dir.join("data/out.csv")).unwrap(),
        "id,v\n1,engine\n"
    );
}

#[test]
fn stale_refusal_exits_with_refused() {
    let sb = waiting_sandbox();
    let store = sb.store("out", "p");
    let child = sb
        .weir(&["run", "m.toml", "--run-id", "engine"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let hand = overtake(&sb, &store);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        states(&sb.events("engine"), "write", "p").last(),
        Some(&State::RejectedStale)
    );
    assert_eq!(Visible::of(&store).record, hand);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        crate::support::stderr(&out)
    );
}
