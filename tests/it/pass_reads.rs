//! What a scheduling pass reads once for the instances it starts together
//! (one listing of a task's markers, one of its upstreams' certification
//! marks) still sees what operators wrote before the pass, and what a
//! publication leaves or clears of the markers. The pipelines start several
//! instances of one task in one pass: `seed` is a single instance, and when
//! it is done every `fan` instance reading it is ready at once.

use crate::support::{ok, stdout, Sandbox};

/// `seed` runs `seed.sh`, `gate` (when present) reads `seed` and runs
/// `gate.sh`, and `fan` over three regions reads `seed` (and `gate`).
fn manifest(with_gate: bool) -> String {
    let gate = if with_gate {
        r#"
[tasks.gate]
command = ["sh", "gate.sh"]
partitioned_by = []
inputs = ["seed"]
output = { dataset = "gate", format = "csv", grain = ["id"] }
"#
    } else {
        ""
    };
    let fan_inputs = if with_gate {
        r#"["seed", "gate"]"#
    } else {
        r#"["seed"]"#
    };
    format!(
        r#"[pipeline]
name = "passes"
code_version = "1"
warehouse = "wh"

[partitions.region]
kind = "static"
keys = ["eu", "us", "ap"]

[tasks.seed]
command = ["sh", "seed.sh"]
partitioned_by = []
output = {{ dataset = "seed", format = "csv", grain = ["id"] }}
{gate}
[tasks.fan]
command = ["sh", "-c", "printf 'id,region\n1,%s\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/fan.csv\""]
partitioned_by = "region"
inputs = {fan_inputs}
output = {{ dataset = "fan", format = "csv", grain = ["id"] }}
"#
    )
}

/// A script that runs `weir <args>` against the sandbox's manifest, then
/// writes `name`'s output.
fn operator_then_output(weir_args: &str, name: &str) -> String {
    format!(
        "set -e\n\"{}\" {weir_args} >&2\nprintf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/{name}.csv\"\n",
        env!("CARGO_BIN_EXE_weir")
    )
}

// An operator's ACCEPTED marker written while the run goes, after `seed`
// started and before the pass that starts the three `fan` instances, is in
// that pass's listing of `fan`'s markers: that instance is not built, the
// two others are.
#[test]
fn a_marker_written_before_a_pass_is_honoured_by_the_instances_it_starts() {
    let sb = Sandbox::new(&manifest(false));
    sb.script(
        "seed.sh",
        &operator_then_output(
            "accept m.toml fan --partition 'us' --note 'feed gone'",
            "seed",
        ),
    );
    let out = sb.run("r1", &[]);
    let text = stdout(&out);
    assert!(
        !sb.entries("fan", "us", "log")
            .iter()
            .any(|n| n.ends_with(".json")),
        "the accepted instance was built:\n{text}"
    );
    for region in ["eu", "ap"] {
        assert!(
            sb.entries("fan", region, "log")
                .contains(&"00000000000000000001.json".to_string()),
            "{region} was not built:\n{text}"
        );
    }
    assert!(text.contains("3 published, 1 skipped"), "{text}");
    assert!(
        text.contains("fan us: since run op-") && text.contains("accepted as missing"),
        "{text}"
    );
}

// `weir uncertify` of `seed`'s generation, made while the run goes (by
// `gate`, after `seed` published, before the pass that starts the three
// `fan` instances), is in that pass's listing of `seed`'s certification
// marks: none of them pins the uncertified generation.
#[test]
fn an_uncertify_made_before_a_pass_refuses_the_pins_it_starts() {
    let sb = Sandbox::new(&manifest(true));
    sb.script(
        "seed.sh",
        "printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/seed.csv\"\n",
    );
    sb.script(
        "gate.sh",
        &operator_then_output(
            "uncertify m.toml seed --partition all --generation 1 --reason 'totals off'",
            "gate",
        ),
    );
    let out = sb.run("r1", &[]);
    let text = stdout(&out);
    assert_ne!(out.status.code(), Some(0), "{text}");
    for region in ["eu", "us", "ap"] {
        assert!(
            sb.entries("fan", region, "log").is_empty(),
            "{region} pinned an uncertified generation:\n{text}"
        );
    }
    assert!(text.contains("uncertified"), "{text}");
}

/// A QUARANTINED marker for `seed` as the failing engine would have
/// written it, for the snapshot and code of `seed`'s generation 1.
fn quarantine_of_generation_1(sb: &Sandbox) -> serde_json::Value {
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(sb.path().join("wh/seed/all/log/00000000000000000001.json")).unwrap(),
    )
    .unwrap();
    serde_json::json!({
        "mark": "QUARANTINED",
        "task": "seed",
        "partition": "all",
        "run_id": "another-engine",
        "reason": "failed 3 times",
        "input_snapshot_digest": record["input_snapshot_digest"],
        "code_version": record["code_version"],
        "code_fingerprint": record["code_fingerprint"],
        "since": "2026-12-02T00:00:00Z",
    })
}

// Another engine's attempt can fail and quarantine an instance while this
// one publishes it (a publication clears only a marker that stood when it
// started). A quarantine of exactly what is now published holds nothing:
// the next run finds the instance current, clears the marker, and its
// downstream runs.
#[test]
fn a_quarantine_of_what_is_published_and_current_holds_nothing() {
    let sb = Sandbox::new(&manifest(false));
    sb.script(
        "seed.sh",
        "printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/seed.csv\"\n",
    );
    ok(&sb.run("r1", &["--task", "seed"]));
    let marker = sb.path().join("wh/_instances/seed/all.json");
    std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
    std::fs::write(&marker, quarantine_of_generation_1(&sb).to_string()).unwrap();

    let text = ok(&sb.run("r2", &[]));
    assert!(text.contains("3 published, 1 already published"), "{text}");
    assert!(!marker.exists(), "the moot quarantine stands");
    for region in ["eu", "us", "ap"] {
        let records = sb.entries("fan", region, "log");
        assert_eq!(records, ["00000000000000000001.json"], "{text}");
    }
}

// A quarantine of another snapshot (new data since) is a marker read when
// the instance starts: the run rebuilds it, and its publication clears it.
#[test]
fn a_publication_clears_the_marker_that_stood_when_it_started() {
    let sb = Sandbox::new(&manifest(false));
    sb.script(
        "seed.sh",
        "printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/seed.csv\"\n",
    );
    ok(&sb.run("r1", &["--task", "seed"]));
    let marker = sb.path().join("wh/_instances/seed/all.json");
    std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
    let mut old = quarantine_of_generation_1(&sb);
    old["code_version"] = "0".into();
    std::fs::write(&marker, old.to_string()).unwrap();

    let text = ok(&sb.run("r2", &["--task", "seed", "--force"]));
    assert!(text.contains("1 task instance: 1 published"), "{text}");
    assert!(!marker.exists(), "the marker read at the start stands");
}

// On S3: `weir rollback` between two runs holds the instance it rolled
// back, and the next run's pass, which starts the three `fan` instances
// together and lists `fan`'s markers once instead of reading each, sees
// the HELD marker: the rolled-back instance is not rebuilt, even forced,
// and the two others are.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn a_rollback_between_runs_is_held_by_the_pass_that_lists_the_markers_on_s3() {
    let Some(s3) = crate::support::s3::S3::sandbox("wh") else {
        return;
    };
    let sb = Sandbox::new(&manifest(false));
    sb.script(
        "seed.sh",
        "printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/seed.csv\"\n",
    );
    let staging = sb.path().join("staging");
    let weir = |args: &[&str]| s3.weir(sb.path(), &staging, args).output().unwrap();
    ok(&weir(&["run", "m.toml"]));
    ok(&weir(&["run", "m.toml", "--task", "fan", "--force"]));
    ok(&weir(&["rollback", "m.toml", "fan", "--partition", "us"]));
    let generation = |partition: &str| {
        let out = weir(&[
            "history",
            "m.toml",
            "fan",
            "--partition",
            partition,
            "--json",
        ]);
        let doc: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
        doc.as_array()
            .or_else(|| doc["generations"].as_array())
            .map_or(0, Vec::len)
    };
    assert_eq!(generation("us"), 3, "the rollback is generation 3");

    let out = weir(&["run", "m.toml", "--task", "fan", "--force"]);
    let text = stdout(&out);
    assert!(
        text.contains("2 published, 1 held") && text.contains("fan us: since run"),
        "{text}"
    );
    assert_eq!(
        generation("us"),
        3,
        "the held instance was rebuilt:\n{text}"
    );
    assert_eq!(generation("eu"), 3, "{text}");
    assert_eq!(generation("ap"), 3, "{text}");
}
