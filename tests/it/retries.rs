//! Failure classes, retries, the run's retry budget and timeouts, as the
//! event log records them.

use std::time::{Duration, Instant};

use weir::events::{EventRecord, State};
use weir::exec::InstanceResult;
use weir::plan::Scope;

use crate::support::manifest::Pipeline;
use crate::support::{run_options, states, stderr, Sandbox, Visible};

/// One task `t` (script `t.sh`, retry class `fast`) over static `keys`;
/// `extra` is appended to the task's table.
fn sandbox(keys: &[&str], max_attempts: u32, extra: &str, script: &str) -> Sandbox {
    let sb = Pipeline::new("retries")
        .static_keys("k", keys)
        .pool("wide", 32)
        .retry("fast", max_attempts, "10ms", "20ms")
        .sh_task(
            "t",
            "out",
            &format!("pool = \"wide\"\nretry = \"fast\"\n{extra}"),
        )
        .sandbox();
    sb.script("t.sh", script);
    sb
}

fn count(states: &[State], state: State) -> usize {
    states.iter().filter(|s| **s == state).count()
}

fn only<'e>(
    events: &'e [EventRecord],
    task: &str,
    partition: &str,
    state: State,
) -> &'e EventRecord {
    let found: Vec<&EventRecord> = events
        .iter()
        .filter(|e| {
            e.state == state
                && e.task.as_deref() == Some(task)
                && e.partition.as_deref() == Some(partition)
        })
        .collect();
    assert_eq!(found.len(), 1, "one {state:?} for {task} {partition}");
    found[0]
}

#[test]
fn transient_then_success_trace() {
    let sb = sandbox(
        &["p"],
        3,
        "",
        r#"if [ "$WEIR_ATTEMPT" = 1 ]; then echo 'flaky upstream' >&2; exit 75; fi
printf 'id,v\n1,a\n' > "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    let out = sb.run("r", &[]);
    sb.check(&out).code(0).stdout("run r: 1 task instance: 1 published; 1 retry\nevents: $SB/wh/_runs/r/events.jsonl\n").stderr_unordered("t p attempt 1 token 1: FAILED exit code 75\nt p attempt 1 token 1: RETRYING transient failure (exit code 75); attempt 2 of 3 in [..]\nt p attempt 2 token 2: PUBLISHED generation 1: 1 rows, sha256:daec81e5b44abf4f39c6b96e72319f59fd3d1f6bbb2024430843a9846c3e437c\n");
    let events = sb.events("r");
    let s = states(&events, "t", "p");
    let trace: Vec<State> = s
        .iter()
        .copied()
        .filter(|s| matches!(s, State::Failed | State::Retrying | State::Success))
        .collect();
    assert_eq!(
        trace,
        [State::Failed, State::Retrying, State::Success],
        "{s:?}"
    );
    let success = s.iter().position(|x| *x == State::Success).unwrap();
    let published = s.iter().position(|x| *x == State::Published);
    assert_eq!(count(&s, State::Published), 1, "{s:?}");
    assert!(
        published > Some(success),
        "PUBLISHED only after SUCCESS: {s:?}"
    );

    let failed = only(&events, "t", "p", State::Failed);
    assert_eq!(failed.attempt, Some(1));
    assert_eq!(failed.data["exit_code"], 75);
    assert!(failed.data["stderr_tail"]
        .as_str()
        .unwrap()
        .contains("flaky upstream"));
    let retrying = only(&events, "t", "p", State::Retrying);
    assert_eq!(retrying.data["class"], "transient");
    assert_eq!(retrying.data["next_attempt"], 2);
    assert!(retrying.data["delay_ms"].as_u64().unwrap() <= 10);
    assert_eq!(only(&events, "t", "p", State::Success).attempt, Some(2));
    let record = Visible::of(&sb.store("out", "p")).record;
    assert_eq!(record.attempt, 2);
    assert_eq!(
        Some(record.token.get()),
        only(&events, "t", "p", State::Published).token
    );
}

#[test]
fn deterministic_failure_is_tried_once() {
    let sb = sandbox(
        &["a", "b"],
        3,
        r#"
[tasks.down]
command = ["sh", "down.sh"]
output = { dataset = "down", grain = ["id"] }
depends_on = ["t"]
"#,
        r#"if [ "$WEIR_PARTITION" = a ]; then echo 'bad record' >&2; exit 65; fi
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    sb.script(
        "down.sh",
        r#"printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv""#,
    );
    let out = sb.run("r", &[]);
    sb.check(&out).code(1).stdout("run r: 4 task instances: 2 published, 1 quarantined, 1 skipped; 0 retries\n  QUARANTINED t a: deterministic failure: exit code 65\n  SKIPPED     down a: upstream `t` a did not publish\nevents: $SB/wh/_runs/r/events.jsonl\n").stderr_unordered("t a attempt 1 token 1: FAILED exit code 65\nt b attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\nt a attempt 1 token 1: QUARANTINED deterministic failure: exit code 65: quarantined, not retried\ndown a: SKIPPED upstream `t` a did not publish\ndown b attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\n");
    let events = sb.events("r");
    let a = states(&events, "t", "a");
    assert_eq!(count(&a, State::Running), 1, "never retried: {a:?}");
    assert_eq!(
        a,
        [
            State::Queued,
            State::Running,
            State::Failed,
            State::Quarantined
        ]
    );
    assert!(only(&events, "t", "a", State::Quarantined)
        .detail
        .contains("deterministic"));
    assert_eq!(sb.entries("out", "a", "tokens").len(), 1);
    assert_eq!(states(&events, "down", "a"), [State::Skipped]);
    assert!(only(&events, "down", "a", State::Skipped)
        .detail
        .contains("`t` a"));
    assert!(!sb.path().join("wh/down/a").exists(), "down/a never ran");
    // The independent partition, and its downstream, still published.
    assert_eq!(states(&events, "t", "b").last(), Some(&State::Published));
    assert_eq!(states(&events, "down", "b").last(), Some(&State::Published));
}

#[test]
fn operator_exit_is_held() {
    let sb = sandbox(&["p"], 3, "", "exit 78\n");
    let out = sb.run("r", &[]);
    sb.check(&out).code(1).stdout("run r: 1 task instance: 1 held; 0 retries\n  HELD        t p: operator failure: exit code 78\nevents: $SB/wh/_runs/r/events.jsonl\n").stderr_unordered("t p attempt 1 token 1: FAILED exit code 78\nt p attempt 1 token 1: HELD operator failure: exit code 78: held for an operator\n");
    let events = sb.events("r");
    assert_eq!(
        states(&events, "t", "p"),
        [State::Queued, State::Running, State::Failed, State::Held]
    );
    let held = only(&events, "t", "p", State::Held);
    assert_eq!(held.data["class"], "operator");
    assert!(sb.store("out", "p").latest().unwrap().is_none());
}

#[test]
fn exhausted_retries() {
    let sb = sandbox(&["p"], 3, "", "exit 75\n");
    let out = sb.run("r", &[]);
    sb.check(&out).code(1).stdout("run r: 1 task instance: 1 held; 2 retries\n  HELD        t p: transient failure (exit code 75) after 3 of 3 attempts\nevents: $SB/wh/_runs/r/events.jsonl\n").stderr_unordered("t p attempt 1 token 1: FAILED exit code 75\nt p attempt 1 token 1: RETRYING transient failure (exit code 75); attempt 2 of 3 in [..]\nt p attempt 2 token 2: FAILED exit code 75\nt p attempt 2 token 2: RETRYING transient failure (exit code 75); attempt 3 of 3 in [..]\nt p attempt 3 token 3: FAILED exit code 75\nt p attempt 3 token 3: HELD transient failure (exit code 75) after 3 of 3 attempts: held for an operator\n");
    let events = sb.events("r");
    let s = states(&events, "t", "p");
    assert_eq!(count(&s, State::Running), 3, "{s:?}");
    assert_eq!(count(&s, State::Retrying), 2, "{s:?}");
    assert_eq!(count(&s, State::Failed), 3, "{s:?}");
    assert_eq!(s.last(), Some(&State::Held), "{s:?}");
    assert_eq!(count(&s, State::Held), 1, "{s:?}");
    let held = only(&events, "t", "p", State::Held);
    assert_eq!(held.attempt, Some(3));
    assert!(
        held.detail.contains("after 3 of 3 attempts"),
        "{}",
        held.detail
    );
    assert_eq!(sb.entries("out", "p", "tokens").len(), 3);
}

#[test]
fn retry_budget_spent_holds() {
    // 20 partitions, all running at once (32 slots), all failing
    // transiently, 2 attempts each. Budget: 10 + 20% of 20 first attempts.
    const N: usize = 20;
    const BUDGET: usize = 10 + N / 5;
    let keys: Vec<String> = (1..=N).map(|i| format!("k{i:02}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let sb = sandbox(&keys, 2, "", "exit 75\n");
    let summary = weir::exec::run(
        &sb.manifest(),
        &run_options(Scope::Latest, "storm", false),
        None,
    )
    .unwrap();
    let events = sb.events("storm");
    let of = |state: State| events.iter().filter(|e| e.state == state).count();
    assert_eq!(
        of(State::Retrying),
        BUDGET,
        "retries are bounded by the budget"
    );
    assert_eq!(summary.retries as usize, BUDGET);
    assert_eq!(of(State::Running), N + BUDGET);
    assert_eq!(of(State::Held), N, "every instance ends held");
    let budget_held: Vec<&EventRecord> = events
        .iter()
        .filter(|e| e.state == State::Held && e.data["budget_spent"] == true)
        .collect();
    assert_eq!(budget_held.len(), N - BUDGET);
    for e in &budget_held {
        assert_eq!(e.attempt, Some(1));
        assert!(e.detail.contains("retry budget is spent"), "{}", e.detail);
    }
    assert!(summary
        .instances
        .iter()
        .all(|(_, _, r)| matches!(r, InstanceResult::Held(_))));
}

fn alive(pid: &str) -> bool {
    let signalled = std::process::Command::new("kill")
        .args(["-0", pid])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success();
    // A killed child that nobody has reaped yet is a zombie: gone too.
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false);
    signalled && !zombie
}

#[test]
fn timeout_kills_process_group() {
    let sb = sandbox(
        &["p"],
        1,
        r#"timeout = "300ms""#,
        r#"sleep 30 &
echo $! > bg.pid
sleep 30
"#,
    );
    let started = Instant::now();
    let out = sb.run("r", &[]);
    let elapsed = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    let events = sb.events("r");
    assert_eq!(
        states(&events, "t", "p"),
        [State::Queued, State::Running, State::Failed, State::Held]
    );
    let failed = only(&events, "t", "p", State::Failed);
    assert!(failed.detail.contains("timed out"), "{}", failed.detail);
    let duration = failed.data["duration_ms"].as_u64().unwrap();
    assert!((300..2500).contains(&duration), "{duration} ms");

    let pid = std::fs::read_to_string(sb.path().join("bg.pid")).unwrap();
    let pid = pid.trim();
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "the background child {pid} outlived the timeout"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
