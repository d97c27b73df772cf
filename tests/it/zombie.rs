//! Two real engine processes on one partition: a paused engine (a zombie) is
//! taken over once its lease expires and loses when it wakes up; a live
//! lease is waited for, never duplicated.

use std::path::PathBuf;
use std::time::Duration;

use weir::events::{EventRecord, State};
use weir::store::FencingToken;

use crate::support::{exclusive, poll_until, process_state, states, stderr, Engine, Sandbox};

/// Generous bound for anything that should take a second or two.
const LIMIT: Duration = Duration::from_secs(60);

/// Task `slow` over the one static key `k`, writing `out` with script `slow.sh`.
fn sandbox(heartbeat: &str, script: &str) -> Sandbox {
    let sb = Sandbox::new(&format!(
        r#"
[pipeline]
name = "zombie"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["k"]

[tasks.slow]
command = ["sh", "slow.sh"]
output = {{ dataset = "out", grain = ["id"] }}
heartbeat = "{heartbeat}"
timeout = "30s"
"#
    ));
    sb.script("slow.sh", script);
    sb
}

fn attempt_dir(sb: &Sandbox, token: u64) -> PathBuf {
    sb.store("out", "k")
        .attempt_dir(FencingToken::from_raw(token))
}

fn engine(sb: &Sandbox, run_id: &str) -> Engine {
    Engine::spawn(
        sb.weir(&["run", "m.toml", "--partition", "k", "--run-id", run_id]),
        sb.path(),
        run_id,
    )
}

fn only(events: &[EventRecord], state: State) -> &EventRecord {
    let found: Vec<&EventRecord> = events.iter().filter(|e| e.state == state).collect();
    assert_eq!(found.len(), 1, "one {state:?} in {events:#?}");
    found[0]
}

/// Three rows, a pause of 1.5 s, two more rows; every row carries the
/// attempt's token.
const SLOW_SCRIPT: &str = r#"t="$WEIR_TOKEN"
printf 'id,token\n1,%s\n2,%s\n3,%s\n' "$t" "$t" "$t" > "$WEIR_OUTPUT_DIR/first.csv"
sleep 1.5
printf 'id,token\n4,%s\n5,%s\n' "$t" "$t" > "$WEIR_OUTPUT_DIR/second.csv"
"#;

#[test]
fn zombie_engine_loses_after_takeover() {
    let _serial = exclusive();
    let sb = sandbox("100ms", SLOW_SCRIPT);
    let zombie_dir = attempt_dir(&sb, 1);

    // Engine A starts attempt 1 (token 1); once its command is running, A
    // is paused: no more heartbeats, but its command (own process group)
    // goes on.
    let a = engine(&sb, "A");
    poll_until("A's lease and first rows", LIMIT, || {
        zombie_dir.join("lease.json").is_file() && zombie_dir.join("data/first.csv").is_file()
    });
    a.signal(libc::SIGSTOP);
    poll_until("A to be stopped", LIMIT, || {
        process_state(a.pid()) == Some('T')
    });

    // Engine B finds token 1's lease expiring, takes over, publishes token 2.
    let b = engine(&sb, "B").finish(LIMIT);
    assert_eq!(b.status.code(), Some(0), "B: {}", stderr(&b));
    let b_events = sb.events("B");
    let b_states: Vec<State> = states(&b_events, "slow", "k")
        .into_iter()
        .filter(|s| *s != State::Waiting)
        .collect();
    assert_eq!(
        b_states,
        [
            State::Queued,
            State::Unknown,
            State::TakenOver,
            State::Running,
            State::Success,
            State::Audited,
            State::Published
        ],
        "B's events: {b_events:#?}"
    );
    assert!(
        b_events
            .iter()
            .filter(|e| e.state == State::Waiting)
            .count()
            <= 1,
        "at most one WAITING, before the lease expired"
    );
    let unknown = only(&b_events, State::Unknown);
    assert_eq!(unknown.token, Some(1), "B's UNKNOWN is about token 1");
    assert_eq!(unknown.data["lease"]["run_id"], "A");
    assert_eq!(unknown.data["lease"]["pid"], a.pid());
    assert_eq!(unknown.data["expired"], true);
    assert_eq!(unknown.data["dead"], false, "A is paused, not gone");
    assert!(
        unknown.detail.contains("no heartbeat"),
        "{}",
        unknown.detail
    );
    assert_eq!(only(&b_events, State::Running).token, Some(2));
    let published = only(&b_events, State::Published);
    assert_eq!(published.token, Some(2));
    assert_eq!(published.data["generation"], 1);

    // While A stays paused, its command finishes writing token 1's candidate.
    poll_until("A's command to finish its rows", LIMIT, || {
        zombie_dir.join("data/second.csv").is_file()
    });
    assert_eq!(process_state(a.pid()), Some('T'), "A is still paused");
    let lease = weir::store::leases::read_at(&zombie_dir).expect("A's lease");
    assert!(!lease.finished, "A never got to end its lease");
    assert_eq!(lease.token, 1);

    // A wakes up: its attempt succeeds and audits, and its publish is
    // refused. B published the same input snapshot and code_version, so the
    // partition ended correct: a benign race, not an exit 3.
    a.signal(libc::SIGCONT);
    let a = a.finish(LIMIT);
    assert_eq!(a.status.code(), Some(0), "A is refused: {}", stderr(&a));
    let a_events = sb.events("A");
    assert_eq!(
        states(&a_events, "slow", "k"),
        [
            State::Queued,
            State::Running,
            State::Success,
            State::Audited,
            State::RejectedStale
        ],
        "A's events: {a_events:#?}"
    );
    let stale = only(&a_events, State::RejectedStale);
    assert_eq!(stale.token, Some(1));
    assert_eq!(
        (
            &stale.data["mine"],
            &stale.data["committed"],
            &stale.data["generation"]
        ),
        (&1.into(), &2.into(), &1.into())
    );

    // Readers see B's generation only, complete and from one attempt.
    let store = sb.store("out", "k");
    assert_eq!(store.generations().unwrap().len(), 1, "one generation");
    let visible = crate::support::Visible::of(&store);
    assert_eq!(visible.record.token.get(), 2);
    assert_eq!(visible.record.run_id, "B");
    let rows = visible.rows();
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert!(
        rows.iter().all(|r| r[1] == "2"),
        "only token 2's rows: {rows:?}"
    );
    assert_eq!(
        visible.recomputed_digest(),
        (5, visible.record.digest.clone())
    );
    for f in &visible.files {
        assert!(
            f.starts_with(
                sb.store("out", "k")
                    .published_dir(FencingToken::from_raw(2))
            ),
            "{}",
            f.display()
        );
    }

    // A's candidate stays on disk, audited, unpublished.
    let candidate: serde_json::Value =
        serde_json::from_slice(&std::fs::read(zombie_dir.join("candidate.json")).unwrap()).unwrap();
    assert_eq!(candidate["token"], 1);
    assert_eq!(candidate["run_id"], "A");
    assert_eq!(candidate["passed"], true);
    assert_eq!(candidate["rows"], 5);
    assert_ne!(candidate["digest"], visible.record.digest.as_str());
    let zombie_files = [
        zombie_dir.join("data/first.csv"),
        zombie_dir.join("data/second.csv"),
    ];
    let (rows, digest) =
        weir::audit::digest_files(&zombie_files, weir::audit::Format::Csv).unwrap();
    assert_eq!(
        (rows, digest.as_str()),
        (5, candidate["digest"].as_str().unwrap())
    );
    assert_eq!(
        std::fs::read_to_string(&zombie_files[0]).unwrap(),
        "id,token\n1,1\n2,1\n3,1\n"
    );
    assert!(store.history().unwrap().iter().all(|r| r.token.get() != 1));
    assert_eq!(sb.entries("out", "k", "tokens").len(), 2);
    assert_eq!(
        sb.entries("out", "k", "claims"),
        [FencingToken::from_raw(1).key_name()],
        "B claimed token 1's takeover"
    );
}

#[test]
fn live_lease_is_respected() {
    let _serial = exclusive();
    // A's command writes a row, then holds until the test releases it.
    let sb = sandbox(
        "200ms",
        r#"t="$WEIR_TOKEN"
printf 'id,token\n1,%s\n' "$t" > "$WEIR_OUTPUT_DIR/first.csv"
i=0
while [ ! -f release.flag ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done
printf 'id,token\n2,%s\n' "$t" > "$WEIR_OUTPUT_DIR/second.csv"
"#,
    );
    let live = attempt_dir(&sb, 1);
    let a = engine(&sb, "A");
    let a_pid = a.pid();
    poll_until("A's lease and first rows", LIMIT, || {
        live.join("lease.json").is_file() && live.join("data/first.csv").is_file()
    });

    let mut b = engine(&sb, "B");
    let b_log = weir::events::run_dir(&sb.path().join("wh"), "B").join("events.jsonl");
    poll_until("B to decide about A's attempt", LIMIT, || {
        weir::events::read_log(&b_log).is_ok_and(|(records, _)| {
            records.iter().any(|e| {
                matches!(
                    e.state,
                    State::Waiting | State::Unknown | State::Running | State::RunFinished
                )
            })
        })
    });
    let decided = sb.events("B");
    assert_eq!(
        states(&decided, "slow", "k"),
        [State::Queued, State::Waiting],
        "B waits for A's live attempt"
    );
    // A stays busy for two lease timeouts (3 × 200 ms each) while B waits:
    // only A's heartbeats keep B from taking over.
    std::thread::sleep(Duration::from_millis(1200));
    assert!(!b.exited(), "B waits while A's lease is live");
    std::fs::write(sb.path().join("release.flag"), "").unwrap();

    let a = a.finish(LIMIT);
    assert_eq!(a.status.code(), Some(0), "A: {}", stderr(&a));
    let b = b.finish(LIMIT);
    assert_eq!(b.status.code(), Some(0), "B: {}", stderr(&b));

    let a_events = sb.events("A");
    assert_eq!(
        states(&a_events, "slow", "k"),
        [
            State::Queued,
            State::Running,
            State::Success,
            State::Audited,
            State::Published
        ]
    );
    let b_events = sb.events("B");
    assert_eq!(
        states(&b_events, "slow", "k"),
        [State::Queued, State::Waiting, State::AlreadyPublished],
        "B launched nothing: {b_events:#?}"
    );
    let waiting = only(&b_events, State::Waiting);
    assert_eq!(waiting.token, Some(1));
    assert_eq!(waiting.data["lease"]["run_id"], "A");
    assert_eq!(waiting.data["lease"]["pid"], a_pid);
    assert!(
        only(&b_events, State::AlreadyPublished)
            .detail
            .contains("generation 1"),
        "{b_events:#?}"
    );

    let store = sb.store("out", "k");
    assert_eq!(
        store.generations().unwrap().len(),
        1,
        "exactly one generation"
    );
    // B's token is allocated before it looks for A's attempt (the check
    // and the claim are one step, so no engine launches an instance it has
    // not claimed), and never launched.
    assert_eq!(
        sb.entries("out", "k", "tokens").len(),
        2,
        "A's token and B's unlaunched one"
    );
    let b_lease = weir::store::leases::read_at(&attempt_dir(&sb, 2)).expect("B's lease");
    assert!(b_lease.finished && b_lease.run_id == "B");
    assert!(
        !attempt_dir(&sb, 2).join("stdout.log").exists(),
        "B launched nothing"
    );
    assert!(
        sb.entries("out", "k", "claims").is_empty(),
        "no takeover claimed"
    );
    let visible = crate::support::Visible::of(&store);
    assert_eq!(
        (visible.record.token.get(), visible.record.run_id.as_str()),
        (1, "A")
    );
    assert_eq!(visible.rows(), [["1", "1"], ["2", "1"]]);
}
