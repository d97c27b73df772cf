//! Batched backfills (`batch = { max_partitions = N }`): one command for up
//! to N consecutive partitions, each partition audited, published, held and
//! retried on its own.

use weir::events::State;

use crate::support::{stderr, stdout, Sandbox, Visible};

/// Writes a line per launch (`<attempt> <keys…>`) to `launches.log`, outside
/// the warehouse, then one CSV per partition into its own directory. A
/// partition named in `empty.flag` gets a header only (its `row_count` gate
/// fails); `fail.once` makes the launch that holds 2026-01-10 exit 75
/// (transient) once.
const SCRIPT: &str = r#"echo "$WEIR_ATTEMPT $(echo $WEIR_PARTITIONS)" >> launches.log
if [ -e fail.once ] && echo "$WEIR_PARTITIONS" | grep -qx 2026-01-10; then
  rm fail.once
  echo "flaky source" >&2
  exit 75
fi
for k in $WEIR_PARTITIONS; do
  if [ -e empty.flag ] && [ "$(cat empty.flag)" = "$k" ]; then
    printf 'id,day\n' > "$WEIR_OUTPUT_DIR/$k/out.csv"
  else
    printf 'id,day\n1,%s\n' "$k" > "$WEIR_OUTPUT_DIR/$k/out.csv"
  fi
done
"#;

fn batched() -> Sandbox {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "batches"
code_version = "1"
warehouse = "wh"

[partitions.daily]
kind = "daily"
start = "2026-01-01"
end = "2026-01-31"

[pools.backfill]
slots = 1

[retry.fast]
max_attempts = 3
backoff = { initial = "10ms", max = "20ms", multiplier = 2.0, jitter = "none" }

[tasks.t]
command = ["sh", "t.sh"]
output = { dataset = "out", grain = ["id"] }
retry = "fast"
exit_codes = { 75 = "transient" }
batch = { max_partitions = 7 }
gates = [{ check = "row_count", min = 1 }]

[backfills.two_weeks]
from = "2026-01-01"
to = "2026-01-14"
pool = "backfill"
reason = "rebuild"
"#,
    );
    sb.script("t.sh", SCRIPT);
    sb
}

fn launches(sb: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(sb.path().join("launches.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn days(from: u32, to: u32) -> String {
    (from..=to)
        .map(|d| format!("2026-01-{d:02}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn partitions_in(sb: &Sandbox, run_id: &str, state: State) -> Vec<String> {
    let mut keys: Vec<String> = sb
        .events(run_id)
        .into_iter()
        .filter(|e| e.state == state)
        .filter_map(|e| e.partition)
        .collect();
    keys.sort();
    keys
}

#[test]
fn a_batched_backfill_launches_once_per_batch_and_a_gate_failure_holds_only_its_partition() {
    let sb = batched();
    std::fs::write(sb.path().join("empty.flag"), "2026-01-05").unwrap();
    let out = sb
        .weir(&["backfill", "m.toml", "two_weeks", "--run-id", "b1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(
        launches(&sb),
        [format!("1 {}", days(1, 7)), format!("1 {}", days(8, 14))]
    );
    let published = partitions_in(&sb, "b1", State::Published);
    assert_eq!(published.len(), 13, "{published:?}");
    assert!(!published.contains(&"2026-01-05".to_string()));
    assert_eq!(partitions_in(&sb, "b1", State::Quarantined), ["2026-01-05"]);
    // Each published its own file, and only its own.
    for k in ["2026-01-04", "2026-01-06", "2026-01-14"] {
        assert_eq!(Visible::of(&sb.store("out", k)).rows(), [["1", k]]);
    }
    // Each member's RUNNING names its batch.
    let running = sb
        .events("b1")
        .into_iter()
        .find(|e| e.state == State::Running && e.partition.as_deref() == Some("2026-01-12"))
        .expect("a RUNNING of 2026-01-12");
    assert_eq!(running.data["batch"], "2026-01-08");
    assert_eq!(running.data["batch_size"], 7);
    let out = sb
        .weir(&["explain", "m.toml", "t", "--partition", "2026-01-05"])
        .output()
        .unwrap();
    assert!(
        stdout(&out).contains("    ran in a batch of 7 partitions from 2026-01-01 (one command)\n"),
        "{}",
        stdout(&out)
    );

    // Released and fixed, a retry reruns only the partition that did not
    // publish: a batch of one.
    std::fs::remove_file(sb.path().join("empty.flag")).unwrap();
    let out = sb
        .weir(&[
            "retry",
            "m.toml",
            "t",
            "--partition",
            "2026-01-05",
            "--note",
            "fixed",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(launches(&sb).last().unwrap(), "1 2026-01-05");
    assert_eq!(launches(&sb).len(), 3);
    // The backfill again: everything current, nothing launched.
    let out = sb
        .weir(&["backfill", "m.toml", "two_weeks", "--run-id", "b2"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(launches(&sb).len(), 3);
    assert_eq!(partitions_in(&sb, "b2", State::AlreadyPublished).len(), 14);
}

#[test]
fn a_transient_failure_retries_only_the_batch_that_did_not_publish_as_one_launch() {
    let sb = batched();
    std::fs::write(sb.path().join("fail.once"), "").unwrap();
    let out = sb
        .weir(&["backfill", "m.toml", "two_weeks", "--run-id", "b1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(
        launches(&sb),
        [
            format!("1 {}", days(1, 7)),
            format!("1 {}", days(8, 14)),
            format!("2 {}", days(8, 14)),
        ]
    );
    assert_eq!(partitions_in(&sb, "b1", State::Published).len(), 14);
    assert_eq!(
        partitions_in(&sb, "b1", State::Retrying),
        days(8, 14).split(' ').collect::<Vec<_>>()
    );
}

#[test]
fn a_plan_counts_a_batch_as_one_attempt() {
    let sb = batched();
    let out = sb
        .weir(&["plan", "m.toml", "--backfill", "two_weeks"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("(in 2 attempts: consecutive partitions share one)"),
        "{text}"
    );
    let out = sb
        .weir(&["plan", "m.toml", "--backfill", "two_weeks", "--json"])
        .output()
        .unwrap();
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        plan["tasks"][0]["batches"],
        serde_json::json!([["2026-01-01", "2026-01-07"], ["2026-01-08", "2026-01-14"]])
    );
    assert_eq!(plan["tasks"][0]["instances"], 14);
    // Two attempts of the default 1m in one slot, not fourteen.
    assert_eq!(plan["total"]["estimated_wall_ms"], 120_000);
}

#[test]
fn a_batch_is_refused_where_partitions_are_not_consecutive_or_depend_on_the_past() {
    for (task_extra, message) in [
        (
            "batch = { max_partitions = 0 }",
            "`batch.max_partitions` 0 of task `t` is not a positive count",
        ),
        (
            "batch = { max_partitions = 7 }\ndepends_on_past = true",
            "task `t` sets both `batch` and `depends_on_past`",
        ),
        (
            "batch = { max_partitions = 7 }\npartitioned_by = []",
            "task `t` sets `batch` without a time scheme",
        ),
        ("batch = { max = 7 }", "unknown key `max`"),
    ] {
        let sb = Sandbox::new(&format!(
            r#"
[pipeline]
name = "batches"
code_version = "1"
warehouse = "wh"

[partitions.daily]
kind = "daily"
start = "2026-01-01"

[tasks.t]
command = ["true"]
output = {{ dataset = "out", grain = ["id"] }}
{task_extra}
"#
        ));
        let out = sb.weir(&["validate", "m.toml"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{task_extra}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(message),
            "{task_extra}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn a_partition_already_current_splits_its_batch_into_consecutive_runs() {
    let sb = batched();
    let out = sb.run("one", &["--partition", "2026-01-04"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A batch of one gets the batch's layout too.
    assert_eq!(launches(&sb), ["1 2026-01-04"]);
    let out = sb
        .weir(&["backfill", "m.toml", "two_weeks", "--run-id", "b1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let mut launched = launches(&sb);
    launched.sort();
    assert_eq!(
        launched,
        [
            format!("1 {}", days(1, 3)),
            "1 2026-01-04".to_string(),
            format!("1 {}", days(5, 7)),
            format!("1 {}", days(8, 14)),
        ]
    );
    assert_eq!(partitions_in(&sb, "b1", State::Published).len(), 13);
    assert_eq!(
        partitions_in(&sb, "b1", State::AlreadyPublished),
        ["2026-01-04"]
    );
    let running = sb
        .events("b1")
        .into_iter()
        .find(|e| e.state == State::Running && e.partition.as_deref() == Some("2026-01-06"))
        .expect("a RUNNING of 2026-01-06");
    assert_eq!(running.data["batch"], "2026-01-05");
    assert_eq!(running.data["batch_size"], 3);
}
