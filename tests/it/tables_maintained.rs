//! Delta tables that other engines maintain too: delta-rs's VACUUM, its
//! compaction and readers that skip files on statistics and read typed
//! partition columns.

use std::path::Path;

use crate::support::{ok, stderr, stdout, Sandbox};
use crate::tables::{
    delta_sandbox, generations_by_version, log_versions, python_readers, read_table, shown,
    visible, write_rows,
};

/// Runs a Python script with `args`, which prints one JSON document.
#[track_caller]
fn python(script: &str, args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "python3: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("one JSON document")
}

/// Sets the modification time of every file under `dir` but the Delta
/// log's, and those `keep` says to leave, 30 days back: older than any
/// retention, as after a month.
fn age(dir: &Path, keep: &dyn Fn(&Path) -> bool) {
    let month_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(30 * 24 * 3600);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|n| n == "_delta_log") || keep(&path) {
            continue;
        }
        if path.is_dir() {
            age(&path, keep);
        } else {
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(month_ago).unwrap();
        }
    }
}

/// delta-rs's full VACUUM (its default retention, enforced): the files it
/// deleted, sorted.
const VACUUM: &str = r#"
import json, sys
import deltalake
dt = deltalake.DeltaTable(sys.argv[1])
print(json.dumps(sorted(dt.vacuum(dry_run=False, full=True))))
"#;

/// A forced run of `partition` with `SCALE`.
fn republish(sb: &Sandbox, run_id: &str, partition: &str, scale: &str) -> std::process::Output {
    sb.weir(&[
        "run",
        "m.toml",
        "--run-id",
        run_id,
        "--partition",
        partition,
        "--force",
    ])
    .env("SCALE", scale)
    .output()
    .unwrap()
}

/// Every version of the table, as delta-rs and Polars read it, holds the
/// rows `weir show` prints of the generation that version committed.
#[track_caller]
fn every_version_reads_its_generation(sb: &Sandbox, root: &Path) {
    let table = read_table(root);
    for (v, generations) in generations_by_version(root) {
        for (partition, g) in generations {
            assert_eq!(
                table["tables"][v.to_string()][&partition],
                serde_json::json!(shown(sb, &partition, g)),
                "version {v}, {partition} generation {g}: {table}"
            );
        }
    }
}

/// The tombstones of weir's checkpoint at version `v`: path and
/// deletionTimestamp of each `remove` row.
const TOMBSTONES: &str = r#"
import json, sys
import polars as pl
df = pl.read_parquet(sys.argv[1])
rows = df.filter(pl.col("remove").is_not_null())["remove"].to_list()
print(json.dumps(sorted([r["path"], r["deletionTimestamp"]] for r in rows)))
"#;

// A checkpoint holds the remove tombstones that have not expired
// (PROTOCOL.md, "Checkpoints"), each with its deletionTimestamp: exactly
// the paths the JSON commits up to it removed and did not add again. A
// full VACUUM by delta-rs, which starts from that checkpoint, with every
// data file a month old, deletes nothing: each version within the
// retention still reads the rows `weir show` prints of its generation.
// (Checkpoints without tombstones let it delete every file removed before
// the checkpoint.)
#[cfg_attr(
    not(any(weir_has_delta_readers, weir_ci)),
    ignore = "needs python3 with deltalake and polars (.ci/run installs them)"
)]
#[test]
fn a_vacuum_from_weirs_checkpoint_keeps_every_file_time_travel_reads() {
    if !python_readers() {
        return;
    }
    let sb = delta_sandbox();
    let root = sb.path().join("wh").join("sales");
    ok(&sb.run("R1", &["--partition", "north", "--partition", "south"]));
    for i in 0..10 {
        let partition = if i % 2 == 0 { "north" } else { "south" };
        let scale = if (i / 2) % 2 == 0 { "20" } else { "10" };
        ok(&republish(&sb, &format!("F{i}"), partition, scale));
    }
    assert_eq!(log_versions(&root), (0..=11).collect::<Vec<u64>>());

    // The tombstones the JSON commits 0..=10 leave.
    let mut expected = std::collections::BTreeMap::new();
    for v in 0..=10u64 {
        let text =
            std::fs::read_to_string(root.join("_delta_log").join(format!("{v:020}.json"))).unwrap();
        for line in text.lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(path) = action["add"]["path"].as_str() {
                expected.remove(path);
            }
            if let Some(path) = action["remove"]["path"].as_str() {
                expected.insert(
                    path.to_owned(),
                    action["remove"]["deletionTimestamp"].clone(),
                );
            }
        }
    }
    assert_eq!(expected.len(), 18, "{expected:?}");
    let expected: Vec<serde_json::Value> = expected
        .into_iter()
        .map(|(p, t)| serde_json::json!([p, t]))
        .collect();
    let checkpoint = root
        .join("_delta_log")
        .join("00000000000000000010.checkpoint.parquet");
    let tombstones = python(TOMBSTONES, &[checkpoint.to_str().unwrap()]);
    assert_eq!(tombstones, serde_json::json!(expected));

    age(&root, &|p| p.extension().is_none_or(|e| e != "parquet"));
    let deleted = python(VACUUM, &[root.to_str().unwrap()]);
    assert_eq!(
        deleted,
        serde_json::json!([]),
        "a full VACUUM deleted files"
    );
    every_version_reads_its_generation(&sb, &root);
}

/// Makes `sb`'s table look like one a weir created before it kept its
/// partitions under the table's `_weir/`: a partition directory at the
/// table's top, which the first run then uses.
fn legacy_layout(sb: &Sandbox) {
    std::fs::create_dir_all(sb.path().join("wh/sales/north/tokens")).unwrap();
}

// A table weir created before it kept its state under `_weir/` keeps its
// layout: weir's records (commit log, tokens) erased by another engine's full
// VACUUM, every file a month old: status, history, show and verify exit 5 naming
// what is missing (not "nothing published"); a run of the partition does not start
// over at token 1 (whose attempt directory version 0 still reads) but
// exits 5 naming what is missing, and writes nothing: no token record,
// no Delta commit, and every version reads what it read before.
#[cfg_attr(
    not(any(weir_has_delta_readers, weir_ci)),
    ignore = "needs python3 with deltalake and polars (.ci/run installs them)"
)]
#[test]
fn records_a_vacuum_erased_are_refused_not_started_over() {
    if !python_readers() {
        return;
    }
    let sb = delta_sandbox();
    legacy_layout(&sb);
    let root = sb.path().join("wh").join("sales");
    ok(&sb.run("R1", &["--partition", "north"]));
    ok(&republish(&sb, "F1", "north", "20"));
    assert!(root.join("north/log").is_dir() && !root.join("_weir").exists());
    let before = read_table(&root);
    assert_eq!(
        before["tables"]["0"]["north"],
        serde_json::json!(shown(&sb, "north", 1))
    );

    age(&root, &|_| false);
    let deleted = python(VACUUM, &[root.to_str().unwrap()]);
    let deleted: Vec<&str> = deleted
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    for gone in [
        "north/log/00000000000000000001.json",
        "north/tokens/00000000000000000001",
    ] {
        assert!(deleted.contains(&gone), "{gone} not in {deleted:?}");
    }
    assert!(sb.store("sales", "north").latest().unwrap().is_none());
    // delta-rs logs its VACUUM as two commits of its own.
    let versions = log_versions(&root);

    let missing = "weir's records of `sales` north are missing: its commit records (the Delta table shows generation 2 at version 1, weir's log has none); its token records (the Delta table reads files of token 2, weir allocated none)";
    for args in [
        &["status", "m.toml"][..],
        &["history", "m.toml", "sales", "--partition", "north"],
        &["show", "m.toml", "sales", "--partition", "north"],
        &["verify", "m.toml", "pq", "--partition", "north"],
    ] {
        let out = sb.weir(args).output().unwrap();
        assert_eq!(out.status.code(), Some(5), "{args:?}: {}", stderr(&out));
        // Collapsed: verify's diagnostic wraps at the terminal's width.
        let err = stderr(&out)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(err.contains(missing), "{args:?}: {}", stderr(&out));
    }

    let out = republish(&sb, "R2", "north", "20");
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(missing), "{err}");
    assert!(!root.join("north/tokens/00000000000000000001").exists());
    assert_eq!(log_versions(&root), versions);
    let after = read_table(&root);
    for v in ["0", "1"] {
        assert_eq!(after["tables"][v], before["tables"][v], "version {v}");
    }
}

/// delta-rs's full VACUUM keeping nothing for time travel: the files it
/// deleted, sorted.
const VACUUM_ALL: &str = r#"
import json, sys
import deltalake
dt = deltalake.DeltaTable(sys.argv[1])
print(json.dumps(sorted(dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True))))
"#;

/// Every file under `dir`, by its path relative to `dir`, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap();
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

/// Every path the table's versions add, percent-decoded as delta-rs
/// names files.
fn added_paths(root: &Path) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for v in log_versions(root) {
        let text =
            std::fs::read_to_string(root.join("_delta_log").join(format!("{v:020}.json"))).unwrap();
        for line in text.lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(path) = action["add"]["path"].as_str() {
                out.insert(path.to_owned());
            }
        }
    }
    out
}

// A new table keeps every partition's state (commit records, tokens,
// leases, attempt logs and files) under the table's top-level `_weir/`,
// which delta-rs's VACUUM skips: its full mode with no retention at all,
// every file a month old, deletes nothing there, and every version still
// reads its generation. status, history, show and verify then read the
// partition as before, and a forced republish commits the next
// generation with a new token at a path no version ever named, which
// delta-rs and Polars read.
#[cfg_attr(
    not(any(weir_has_delta_readers, weir_ci)),
    ignore = "needs python3 with deltalake and polars (.ci/run installs them)"
)]
#[test]
fn a_full_vacuum_leaves_weirs_state_and_the_partition_goes_on() {
    if !python_readers() {
        return;
    }
    let sb = delta_sandbox();
    let root = sb.path().join("wh").join("sales");
    ok(&sb.run("R1", &["--partition", "north", "--partition", "south"]));
    ok(&republish(&sb, "F1", "north", "20"));
    let mut top: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["_delta_log", "_weir"]);
    let state = root.join("_weir");
    let before = files_under(&state);
    let shown_before = shown(&sb, "north", 2);

    age(&root, &|_| false);
    let deleted = python(VACUUM_ALL, &[root.to_str().unwrap()]);
    let deleted: Vec<String> = deleted
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_owned())
        .collect();
    // delta-rs skips `_weir/` whole: even the files only version 0 reads,
    // which its tombstone makes VACUUM's to delete, stay (weir's gc
    // deletes them when their retention ends).
    assert_eq!(deleted, Vec::<String>::new());
    assert_eq!(files_under(&state), before);
    every_version_reads_its_generation(&sb, &root);

    let out = sb.weir(&["status", "m.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = sb
        .weir(&[
            "history",
            "m.toml",
            "sales",
            "--partition",
            "north",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let history: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let rows: Vec<(u64, u64)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["generation"].as_u64().unwrap(),
                r["delta_version"].as_u64().unwrap(),
            )
        })
        .collect();
    // R1's two commits are versions 0 and 1, in either order.
    assert!(matches!(rows[..], [(1, 0 | 1), (2, 2)]), "{history}");
    assert_eq!(shown(&sb, "north", 2), shown_before);
    let out = sb
        .weir(&["verify", "m.toml", "pq", "--partition", "north"])
        .env("SCALE", "20")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );

    let named = added_paths(&root);
    ok(&republish(&sb, "F2", "north", "10"));
    let rec = sb.store("sales", "north").latest().unwrap().unwrap();
    assert_eq!((rec.generation.get(), rec.token.get()), (3, 3));
    let new: Vec<String> = added_paths(&root).difference(&named).cloned().collect();
    assert_eq!(new.len(), 2, "{new:?}");
    for path in &new {
        assert!(
            path.starts_with("_weir/north/attempts/00000000000000000003/region=north/data/"),
            "{path}"
        );
    }
    assert_latest_version_shows(&sb, &root, 3);
}

// Whatever removes weir's records under `_weir/` (a hand `rm`, a bad
// restore), the table's files still name generation 2 and token 2: a
// run of the partition exits 5 naming what is missing before it takes a
// token, so no attempt directory a version reads is written again.
#[cfg_attr(
    not(any(weir_has_delta_readers, weir_ci)),
    ignore = "needs python3 with deltalake and polars (.ci/run installs them)"
)]
#[test]
fn records_removed_under_weirs_directory_are_refused_not_started_over() {
    if !python_readers() {
        return;
    }
    let sb = delta_sandbox();
    let root = sb.path().join("wh").join("sales");
    ok(&sb.run("R1", &["--partition", "north"]));
    ok(&republish(&sb, "F1", "north", "20"));
    let dir = sb.partition_dir("sales", "north");
    assert!(dir.starts_with(root.join("_weir")), "{}", dir.display());
    std::fs::remove_dir_all(dir.join("log")).unwrap();
    std::fs::remove_dir_all(dir.join("tokens")).unwrap();
    let versions = log_versions(&root);
    let out = republish(&sb, "R2", "north", "10");
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("weir's records of `sales` north are missing"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.join("tokens").exists());
    assert_eq!(log_versions(&root), versions);
}

/// delta-rs's compaction of the whole table: the files it removed.
const COMPACT: &str = r#"
import json, sys
import deltalake
dt = deltalake.DeltaTable(sys.argv[1])
print(json.dumps(dt.optimize.compact()))
"#;

/// delta-rs overwrites partition `sys.argv[2]` with other rows.
const OVERWRITE: &str = r#"
import json, sys
import deltalake, polars as pl
root, region = sys.argv[1], sys.argv[2]
df = pl.DataFrame({"id": [7], "amount": [70], "label": ["o"], "region": [region]})
deltalake.write_deltalake(root, df, mode="overwrite", predicate=f"region = '{region}'")
print(json.dumps(deltalake.DeltaTable(root).version()))
"#;

// delta-rs's `optimize.compact()` rewrites each partition's two files as
// one with the same rows: `status --check` sees the same rows (canonical
// digest of the table's files) and exits 0 with a note, not TABLE_BEHIND;
// a republish then replaces the compacted file (the table shows exactly
// the new generation's rows). A rewrite with other rows is drift:
// TABLE_BEHIND, exit 4.
#[cfg_attr(
    not(any(weir_has_delta_readers, weir_ci)),
    ignore = "needs python3 with deltalake and polars (.ci/run installs them)"
)]
#[test]
fn another_engines_compaction_is_agreement_and_other_rows_are_drift() {
    if !python_readers() {
        return;
    }
    let sb = delta_sandbox();
    let root = sb.path().join("wh").join("sales");
    ok(&sb.run("R1", &["--partition", "north", "--partition", "south"]));
    let metrics = python(COMPACT, &[root.to_str().unwrap()]);
    assert_eq!(metrics["numFilesRemoved"], 4, "{metrics}");
    assert_eq!(metrics["numFilesAdded"], 2, "{metrics}");

    for _ in 0..2 {
        // The second time from the cache of what was checked.
        let out = sb.weir(&["status", "m.toml", "--check"]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            stdout(&out),
            stderr(&out)
        );
        let text = stdout(&out);
        for partition in ["north", "south"] {
            assert!(
                text.contains(&format!("note: pq {partition}: the Delta table shows generation 1's rows in 1 other file (another engine's compaction or rewrite): agreement")),
                "{text}"
            );
        }
        assert!(!text.contains("TABLE_BEHIND"), "{text}");
    }

    ok(&republish(&sb, "F1", "north", "20"));
    assert_latest_version_shows(&sb, &root, 2);
    let out = sb.weir(&["status", "m.toml", "--check"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(!stdout(&out).contains("pq north"), "{}", stdout(&out));

    python(OVERWRITE, &[root.to_str().unwrap(), "south"]);
    let out = sb.weir(&["status", "m.toml", "--check"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(
        text.contains("TABLE_BEHIND pq south: the Delta table's files of this partition")
            && text.contains("and the rows of those files are not generation 1's"),
        "{text}"
    );
    assert_eq!(visible(&sb, "south"), 1);
}

const DAILY_MANIFEST: &str = r#"
[pipeline]
name = "lake"
code_version = "1"
warehouse = "wh"

[partitions.day]
kind = "daily"
start = "2024-01-01"
end = "2024-01-02"
timezone = "UTC"

[tasks.pq]
command = ["sh", "pq.sh"]
partitioned_by = ["day"]
output = { dataset = "sales", format = "parquet", grain = ["id"], table = "delta" }
"#;

/// What delta-rs and Polars read of the daily table: the type of `day`,
/// the rows with it, and the files DataFusion (delta-rs's reader) scans
/// with a filter on `id` (from its physical plan), without and with one.
const TYPED: &str = r#"
import json, re, sys
import deltalake, polars as pl
root = sys.argv[1]
dt = deltalake.DeltaTable(root)
day = [f for f in dt.schema().fields if f.name == "day"][0]
df = pl.read_delta(root)
def scanned(where):
    plan = deltalake.QueryBuilder().register("t", dt).execute(f"explain select * from t {where}").read_all()
    text = "\n".join(str(v) for col in plan.columns for v in col.to_pylist())
    return sorted(set(re.findall(r"attempts/\d+/day=[0-9-]+/data/part-0\.parquet", text)))
print(json.dumps({
    "delta_rs": str(day.type),
    "polars": str(df.schema["day"]),
    "days": sorted(str(d) for d in df["day"].unique().to_list()),
    "all": scanned(""),
    "filtered": scanned("where id >= 10"),
    "filtered_rows": pl.read_delta(root).filter(pl.col("id") >= 10)["id"].sort().to_list(),
}))
"#;

// A new table of a daily scheme has its `day` column typed `date`, which
// delta-rs and Polars read as a date; each `add` carries stats
// (numRecords, minValues, maxValues, nullCount per column), on which
// delta-rs's reader skips the file whose ids a filter excludes.
#[cfg_attr(
    not(any(weir_has_delta_readers, weir_ci)),
    ignore = "needs python3 with deltalake and polars (.ci/run installs them)"
)]
#[test]
fn readers_get_stats_to_skip_files_and_a_daily_column_as_a_date() {
    if !python_readers() {
        return;
    }
    let sb = Sandbox::new(DAILY_MANIFEST);
    write_rows(&sb.path().join("2024-01-01.parquet"), &[1, 2, 3], 10, "a");
    write_rows(&sb.path().join("2024-01-02.parquet"), &[10, 11], 10, "b");
    sb.script(
        "pq.sh",
        "cp \"$WEIR_PARTITION.parquet\" \"$WEIR_OUTPUT_DIR/part-0.parquet\"\n",
    );
    ok(&sb.run(
        "R1",
        &["--partition", "2024-01-01", "--partition", "2024-01-02"],
    ));
    let root = sb.path().join("wh").join("sales");
    let mut stats = std::collections::BTreeMap::new();
    for v in log_versions(&root) {
        let text =
            std::fs::read_to_string(root.join("_delta_log").join(format!("{v:020}.json"))).unwrap();
        for line in text.lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(meta) = action.get("metaData") {
                let schema: serde_json::Value =
                    serde_json::from_str(meta["schemaString"].as_str().unwrap()).unwrap();
                let day = &schema["fields"].as_array().unwrap().last().unwrap();
                assert_eq!(
                    (&day["name"], &day["type"]),
                    (&"day".into(), &"date".into())
                );
            }
            if let Some(add) = action.get("add") {
                let s: serde_json::Value =
                    serde_json::from_str(add["stats"].as_str().unwrap()).unwrap();
                stats.insert(
                    add["partitionValues"]["day"].as_str().unwrap().to_owned(),
                    s,
                );
            }
        }
    }
    assert_eq!(
        stats["2024-01-01"],
        serde_json::json!({"numRecords": 3,
            "minValues": {"id": 1, "amount": 10, "label": "a"},
            "maxValues": {"id": 3, "amount": 30, "label": "a"},
            "nullCount": {"id": 0, "amount": 0, "label": 0}})
    );
    assert_eq!(stats["2024-01-02"]["minValues"]["id"], 10);
    assert_eq!(stats["2024-01-02"]["maxValues"]["id"], 11);

    let read = python(TYPED, &[root.to_str().unwrap()]);
    assert_eq!(read["delta_rs"], "PrimitiveType(\"date\")", "{read}");
    assert_eq!(read["polars"], "Date", "{read}");
    assert_eq!(
        read["days"],
        serde_json::json!(["2024-01-01", "2024-01-02"])
    );
    assert_eq!(read["all"].as_array().unwrap().len(), 2, "{read}");
    let filtered = read["filtered"].as_array().unwrap();
    assert_eq!(filtered.len(), 1, "{read}");
    assert!(
        filtered[0].as_str().unwrap().contains("day=2024-01-02"),
        "{read}"
    );
    assert_eq!(read["filtered_rows"], serde_json::json!([10, 11]));
}

/// delta-rs turns on a table feature weir does not support.
const ADD_FEATURE: &str = r#"
import json, sys
import deltalake
from deltalake import TableFeatures
dt = deltalake.DeltaTable(sys.argv[1])
dt.alter.add_feature(TableFeatures.DeletionVectors, allow_protocol_versions_increase=True)
p = deltalake.DeltaTable(sys.argv[1]).protocol()
print(json.dumps([p.min_reader_version, p.min_writer_version]))
"#;

// Another writer turned on deletion vectors (reader version 3, writer
// version 7): weir understands neither, so a run of a partition fails
// naming the feature (exit 5) before it takes a token or writes a file,
// and the table gets no commit of weir's.
#[cfg_attr(
    not(any(weir_has_delta_readers, weir_ci)),
    ignore = "needs python3 with deltalake and polars (.ci/run installs them)"
)]
#[test]
fn a_table_feature_weir_does_not_support_is_refused_by_name_before_writing() {
    if !python_readers() {
        return;
    }
    let sb = delta_sandbox();
    let root = sb.path().join("wh").join("sales");
    ok(&sb.run("R1", &["--partition", "north"]));
    let versions = python(ADD_FEATURE, &[root.to_str().unwrap()]);
    assert_eq!(versions, serde_json::json!([3, 7]));
    let log = log_versions(&root);

    let out = republish(&sb, "F1", "north", "20");
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the Delta table of `sales`: the table uses deletionVectors (reader version 3, writer version 7), which weir does not support: it writes nothing to such a table"),
        "{}",
        stderr(&out)
    );
    assert_eq!(log_versions(&root), log);
    let tokens = sb.partition_dir("sales", "north").join("tokens");
    assert!(tokens.join("00000000000000000001").exists());
    assert!(!tokens.join("00000000000000000002").exists());
    assert_eq!(visible(&sb, "north"), 1);
}

/// The table's latest version reads north's generation `north` and south's
/// first, as `weir show` gives them.
#[track_caller]
fn assert_latest_version_shows(sb: &Sandbox, root: &Path, north: u64) {
    let table = read_table(root);
    let last = table["versions"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert_eq!(
        table["tables"][&last]["north"],
        serde_json::json!(shown(sb, "north", north))
    );
    assert_eq!(
        table["tables"][&last]["south"],
        serde_json::json!(shown(sb, "south", 1))
    );
}
