//! `weir simulate` on the bundled web example: MISSED counts a hand
//! calculation gives, the same JSON for the same seed, and bad arguments
//! named.

use crate::support::{assert_exit, ok, repo, run_in, stderr, stdout};

fn simulate(extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "simulate",
        "pipelines/atlasmart_web.toml",
        "--from",
        "2026-09-13T22:00:00Z",
        "--to",
        "2026-09-21T00:00:00Z",
    ];
    args.extend_from_slice(extra);
    run_in(&repo(), &args)
}

fn task<'a>(doc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task"] == name)
        .unwrap_or_else(|| panic!("no task {name} in {doc}"))
}

#[test]
fn a_down_window_misses_the_hours_a_hand_calculation_gives() {
    // Down 10:00Z to 16:00Z on the 16th: the hours ending 10:00 to 15:00
    // UTC (six: 12h to 17h in Paris) are MISSED as down, the hour ending
    // 16:00 runs at the restart. 168 hours in the week, 162 published. The
    // 16th's sessions read the missing hours: waited a day, then MISSED.
    // A second window of three hours on the 18th, 03:30Z to 06:30Z: the
    // hours ending 04:00 and 05:00 UTC are missed, the one ending 06:00
    // runs at 06:30; the 18th's sessions wait and are MISSED too.
    let out = simulate(&[
        "--down",
        "2026-09-16T10:00:00Z..2026-09-16T16:00:00Z",
        "--down",
        "2026-09-18T03:30:00Z..2026-09-18T06:30:00Z",
        "--json",
    ]);
    let doc: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let events = task(&doc, "events");
    assert_eq!(events["missed_down"], 6 + 2, "{events}");
    assert_eq!(events["published"], 168 - 8, "{events}");
    assert_eq!(events["missed_waited"], 0, "{events}");
    let sessions = task(&doc, "sessions");
    assert_eq!(sessions["published"], 5, "{sessions}");
    assert_eq!(sessions["missed_waited"], 2, "{sessions}");
    assert_eq!(doc["violations"], serde_json::json!([]));
    assert!(doc["steps"].as_u64().unwrap() > 1000, "{doc}");
}

#[test]
fn the_same_seed_prints_the_same_json_and_the_text_says_the_invariants_held() {
    let args = [
        "--engines",
        "3",
        "--faults",
        "late=0.2,fail=0.1",
        "--seed",
        "9",
    ];
    let a = stdout(&simulate(&[&args[..], &["--json"]].concat()));
    let b = stdout(&simulate(&[&args[..], &["--json"]].concat()));
    assert_eq!(a, b);
    let doc: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert!(doc["faults"].is_object(), "{doc}");
    let text = ok(&simulate(&args));
    assert!(text.contains("invariants: all held"), "{text}");
    assert!(text.contains("3 engine(s), seed 9"), "{text}");
}

#[test]
fn bad_simulate_arguments_are_named_with_why() {
    for (extra, says) in [
        (vec!["--faults", "flood=0.1"], "unknown fault kind `flood`"),
        (vec!["--faults", "lost=3"], "a share is at most 1"),
        (vec!["--down", "2026-09-16T10:00:00Z"], "is not FROM..TO"),
        (
            vec!["--down", "yesterday..today"],
            "--down `yesterday` is not an instant",
        ),
        (vec!["--engines", "0"], "between 1 and 64 engines"),
    ] {
        let out = simulate(&extra);
        assert_exit(&out, 2);
        assert!(stderr(&out).contains(says), "{extra:?}: {}", stderr(&out));
    }
    let out = run_in(
        &repo(),
        &[
            "simulate",
            "pipelines/atlasmart_web.toml",
            "--from",
            "2026-09-21",
            "--to",
            "2026-09-14",
        ],
    );
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("is not after --from"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn recorded_attempts_give_the_durations_where_the_warehouse_has_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pipeline.toml"),
        r#"
[pipeline]
name = "hello"
code_version = "1"
warehouse = "warehouse"

[partitions.day]
kind = "daily"
start = "2026-11-01"

[tasks.greet]
command = ["sh", "-c", "printf 'day,greeting\n%s,hello\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/greetings.csv\""]
output = { dataset = "greetings", format = "csv", grain = ["day"] }
expected_duration = "30m"
"#,
    )
    .unwrap();
    let sim = |dir: &std::path::Path| {
        ok(&run_in(
            dir,
            &[
                "simulate",
                "pipeline.toml",
                "--from",
                "2026-11-01",
                "--to",
                "2026-11-08",
                "--json",
            ],
        ))
    };
    let utilisation = |text: &str| {
        let doc: serde_json::Value = serde_json::from_str(text).unwrap();
        // Seven days due; the last one starts at the very end.
        assert_eq!(doc["tasks"][0]["published"], 6, "{doc}");
        (
            doc["tasks"][0]["history"].as_u64().unwrap(),
            doc["pools"][0]["utilisation"].as_f64().unwrap(),
        )
    };
    // No history: half an hour a day out of the default pool's four slots.
    let (history, before) = utilisation(&sim(dir.path()));
    assert_eq!(history, 0);
    for day in 1..=5 {
        let key = format!("2026-11-0{day}");
        ok(&run_in(
            dir.path(),
            &["run", "pipeline.toml", "--partition", &key],
        ));
    }
    // Five attempts of well under a second each: the estimate gives way.
    let (history, after) = utilisation(&sim(dir.path()));
    assert_eq!(history, 5);
    assert!(after < before / 100.0, "{after} vs {before}");
}
