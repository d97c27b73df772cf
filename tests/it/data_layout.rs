//! Where a local warehouse keeps a published generation's files: the
//! attempt's audited `data/`, renamed at publish to the partition's
//! `data-<token>/` and named by the record's `data_dir`; and records of the
//! layout before it (no `data_dir`, files in `attempts/<token>/data/`),
//! which every reader keeps reading.

use std::path::Path;

use crate::support::{stderr, stdout, Sandbox};

const MANIFEST: &str = r#"
[pipeline]
name = "layout"
code_version = "1"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["a"]

[tasks.up]
command = ["sh", "up.sh"]
output = { dataset = "up_out", format = "csv", grain = ["id"] }

[tasks.down]
command = ["sh", "down.sh"]
inputs = ["up_out"]
output = { dataset = "down_out", format = "csv", grain = ["id"] }
"#;

fn pipeline(up_rows: &str) -> Sandbox {
    let sb = Sandbox::new(MANIFEST);
    pipeline_script(&sb, up_rows);
    sb.script(
        "down.sh",
        "cp \"$WEIR_INPUT_UP_OUT\"/*.csv \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb
}

const T1: &str = "00000000000000000001";

#[track_caller]
fn ok(out: &std::process::Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    stdout(out)
}

fn record_json(sb: &Sandbox, dataset: &str, g: u64) -> serde_json::Value {
    let path = sb.path().join(format!("wh/{dataset}/a/log/{g:020}.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn a_published_generation_lives_in_its_partitions_data_dir_named_by_its_record() {
    let sb = pipeline("1");
    ok(&sb.run("r1", &[]));
    let p = sb.path().join("wh/up_out/a");
    let rec = record_json(&sb, "up_out", 1);
    assert_eq!(rec["data_dir"], format!("up_out/a/data-{T1}"));
    assert_eq!(rec["attempt_dir"], format!("up_out/a/attempts/{T1}"));
    assert_eq!(
        std::fs::read_to_string(p.join(format!("data-{T1}/out.csv"))).unwrap(),
        "id\n1\n"
    );
    // The attempt dir keeps its evidence; its staging `data/` moved.
    assert!(p.join(format!("attempts/{T1}/candidate.json")).is_file());
    assert!(!p.join(format!("attempts/{T1}/data")).exists());
    let files = ok(&sb.weir_out(&["files", "m.toml", "up_out", "--json"]));
    assert!(
        files.contains(&format!("wh/up_out/a/data-{T1}/out.csv")),
        "{files}"
    );
    assert_eq!(
        ok(&sb.weir_out(&["show", "m.toml", "down_out", "--partition", "a"])),
        "id\n1\n"
    );
}

/// Rewrites every record of `dataset`'s partition `a` as weir wrote them
/// before `data_dir`: the files back in `attempts/<token>/data/`, the field
/// gone, the rest of the record's bytes as they were.
fn to_old_layout(sb: &Sandbox, dataset: &str) {
    let p = sb.path().join(format!("wh/{dataset}/a"));
    for entry in std::fs::read_dir(p.join("log")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let mut rec: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let Some(dir) = rec.as_object_mut().unwrap().remove("data_dir") else {
            continue;
        };
        let attempt = rec["attempt_dir"].as_str().unwrap().to_owned();
        let (from, to) = (
            sb.path().join("wh").join(dir.as_str().unwrap()),
            sb.path().join("wh").join(attempt).join("data"),
        );
        if from.exists() {
            std::fs::rename(from, to).unwrap();
        }
        std::fs::write(&path, serde_json::to_vec_pretty(&rec).unwrap()).unwrap();
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

#[test]
fn a_warehouse_written_before_data_dirs_is_read_rolled_back_and_collected() {
    let sb = pipeline("1");
    ok(&sb.run("r1", &[]));
    to_old_layout(&sb, "up_out");
    to_old_layout(&sb, "down_out");
    let p = sb.path().join("wh/up_out/a");
    assert_eq!(names(&p), ["attempts", "log", "tokens"]);
    assert!(record_json(&sb, "up_out", 1).get("data_dir").is_none());

    // Readers: `files`, `show`, and a rerun of `down` from its pinned input.
    let files = ok(&sb.weir_out(&["files", "m.toml", "up_out", "--json"]));
    assert!(
        files.contains(&format!("wh/up_out/a/attempts/{T1}/data/out.csv")),
        "{files}"
    );
    assert_eq!(
        ok(&sb.weir_out(&["show", "m.toml", "up_out", "--partition", "a"])),
        "id\n1\n"
    );
    ok(&sb.weir_out(&["verify", "m.toml", "down", "--partition", "a"]));
    // Everything is current: nothing reruns.
    ok(&sb.run("r2", &[]));
    assert_eq!(names(&p.join("log")).len(), 1, "one record");

    // A new generation in the new layout over the old one, then a rollback
    // to the old one: its record names the old attempt's data/ again.
    pipeline_script(&sb, "2");
    ok(&sb.run("r3", &["--force", "--task", "up"]));
    assert_eq!(
        ok(&sb.weir_out(&["show", "m.toml", "up_out", "--partition", "a"])),
        "id\n2\n"
    );
    ok(&sb.weir_out(&[
        "rollback",
        "m.toml",
        "up_out",
        "--partition",
        "a",
        "--to",
        "1",
    ]));
    let rollback = record_json(&sb, "up_out", 3);
    assert!(rollback.get("data_dir").is_none(), "{rollback}");
    assert_eq!(
        ok(&sb.weir_out(&["show", "m.toml", "up_out", "--partition", "a"])),
        "id\n1\n"
    );

    // gc keeps the old layout's live generation and collects the newer,
    // superseded one's data dir with its attempt.
    ok(&sb.weir_out(&[
        "gc",
        "m.toml",
        "--older-than",
        "0s",
        "--keep-generations",
        "0",
        "--apply",
    ]));
    let t2 = record_json(&sb, "up_out", 2)["token"].as_u64().unwrap();
    assert!(!p.join(format!("data-{t2:020}")).exists());
    assert!(!p.join(format!("attempts/{t2:020}")).exists());
    assert_eq!(
        std::fs::read_to_string(p.join(format!("attempts/{T1}/data/out.csv"))).unwrap(),
        "id\n1\n"
    );
    assert_eq!(
        ok(&sb.weir_out(&["show", "m.toml", "up_out", "--partition", "a"])),
        "id\n1\n"
    );
}

fn pipeline_script(sb: &Sandbox, up_rows: &str) {
    sb.script(
        "up.sh",
        &format!("printf 'id\\n{up_rows}\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n"),
    );
}
