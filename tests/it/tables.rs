//! Readers outside weir. `weir files` names exactly the visible
//! generation's files of each partition (path, size, SHA-256, partition,
//! generation), so a script or DuckDB reads what is published; and a
//! Parquet output declared `table = "delta"` is also a Delta table that
//! follows publications, republishes and rollbacks, keeps its schema
//! policy, checkpoints, survives two engines and a kill -9, works on S3,
//! and that gc leaves readable.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;
use sha2::{Digest as _, Sha256};

use crate::support::{ok, stderr, stdout, Sandbox};

const MANIFEST: &str = r#"
[pipeline]
name = "tables"
code_version = "1"
warehouse = "wh"

[partitions.region]
kind = "static"
keys = ["north", "south", "west"]

[tasks.pq]
command = ["sh", "pq.sh"]
output = { dataset = "sales", format = "parquet", grain = ["id"] }

[tasks.flat]
command = ["sh", "flat.sh"]
output = { dataset = "flat", format = "csv", grain = ["id"] }
"#;

/// Writes rows (id, region, amount) as a Parquet file.
fn write_parquet(path: &Path, region: &str, ids: &[i64], scale: i64) {
    let batch = RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        (
            "region",
            Arc::new(StringArray::from(vec![region; ids.len()])) as ArrayRef,
        ),
        (
            "amount",
            Arc::new(Int64Array::from(
                ids.iter().map(|id| id * scale).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
    ])
    .expect("a batch");
    let file = std::fs::File::create(path).expect("create");
    let mut writer = ArrowWriter::try_new(file, batch.schema(), None).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

/// A sandbox whose tasks publish, per region, two Parquet files and one
/// CSV file; `SCALE` (an environment variable, default 10) changes the
/// amounts so a forced rerun publishes different bytes.
fn sandbox() -> Sandbox {
    let sb = Sandbox::new(MANIFEST);
    for region in ["north", "south", "west"] {
        for scale in [10, 20] {
            write_parquet(
                &sb.path().join(format!("{region}-{scale}-0.parquet")),
                region,
                &[1, 2],
                scale,
            );
            write_parquet(
                &sb.path().join(format!("{region}-{scale}-1.parquet")),
                region,
                &[3],
                scale,
            );
        }
    }
    sb.script(
        "pq.sh",
        "s=${SCALE:-10}\n\
         cp \"$WEIR_PARTITION-$s-0.parquet\" \"$WEIR_OUTPUT_DIR/part-0.parquet\"\n\
         cp \"$WEIR_PARTITION-$s-1.parquet\" \"$WEIR_OUTPUT_DIR/part-1.parquet\"\n",
    );
    sb.script(
        "flat.sh",
        "s=${SCALE:-10}\n\
         printf 'id,region,amount\\n1,%s,%s\\n2,%s,%s\\n' \"$WEIR_PARTITION\" \"$s\" \"$WEIR_PARTITION\" \"$((2 * s))\" \
         > \"$WEIR_OUTPUT_DIR/flat.csv\"\n",
    );
    sb
}

/// `weir files m.toml DATASET EXTRA... --json`, parsed (exit 0 asserted).
#[track_caller]
fn files_json(sb: &Sandbox, dataset: &str, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["files", "m.toml", dataset];
    args.extend_from_slice(extra);
    args.push("--json");
    let out = sb.weir(&args).output().expect("weir runs");
    let doc: serde_json::Value = serde_json::from_str(&ok(&out)).expect("one JSON document");
    assert_eq!(doc["dataset"], dataset);
    doc["files"].as_array().expect("a files array").clone()
}

/// Each listed file checked against the disk (size, SHA-256 recomputed
/// here) and against the partition's visible record; the (partition,
/// generation, path) triples, in the order listed.
#[track_caller]
fn check_against_disk(
    sb: &Sandbox,
    dataset: &str,
    files: &[serde_json::Value],
) -> Vec<(String, u64, String)> {
    let mut seen = Vec::new();
    for f in files {
        let path = f["path"].as_str().expect("a path");
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(f["size"].as_u64(), Some(bytes.len() as u64), "{path}");
        let sha = format!("sha256:{:x}", Sha256::digest(&bytes));
        assert_eq!(f["sha256"].as_str(), Some(sha.as_str()), "{path}");
        let partition = f["partition"].as_str().expect("a partition").to_owned();
        let generation = f["generation"].as_u64().expect("a generation");
        let record = sb
            .store(dataset, &partition)
            .latest()
            .unwrap()
            .expect("published");
        assert_eq!(record.generation.get(), generation, "{path}");
        let data = sb.path().join("wh").join(record.data_key());
        assert!(
            record
                .files
                .iter()
                .any(|name| same_file(&data.join(name), Path::new(path))),
            "{path} is not a file of {dataset} {partition}'s visible generation {generation} ({:?} under {})",
            record.files,
            data.display()
        );
        seen.push((partition, generation, path.to_owned()));
    }
    seen
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

// `weir files` lists, for a Parquet and a CSV dataset and
// every published partition, exactly the visible generation's files with
// the size and SHA-256 on disk; after a forced republish it names the new
// generation's files, after a rollback the older ones again; `--partition`
// selects; the text form names the same files with full digests.
#[test]
fn files_lists_the_visible_files_of_each_partition() {
    let sb = sandbox();
    ok(&sb.run("R1", &["--partition", "north", "--partition", "south"]));

    let files = files_json(&sb, "sales", &[]);
    let seen = check_against_disk(&sb, "sales", &files);
    let parts: Vec<(&str, u64)> = seen.iter().map(|(p, g, _)| (p.as_str(), *g)).collect();
    assert_eq!(
        parts,
        [("north", 1), ("north", 1), ("south", 1), ("south", 1)]
    );
    assert!(
        seen[0]
            .2
            .ends_with("/data-00000000000000000001/part-0.parquet"),
        "{seen:?}"
    );
    assert!(
        seen[1]
            .2
            .ends_with("/data-00000000000000000001/part-1.parquet"),
        "{seen:?}"
    );
    let first_north: Vec<String> = seen[..2].iter().map(|s| s.2.clone()).collect();

    let csv = files_json(&sb, "flat", &[]);
    let csv_seen = check_against_disk(&sb, "flat", &csv);
    assert_eq!(csv_seen.len(), 2, "{csv_seen:?}");
    // What a reader of the listed CSV file gets is what `weir show` prints.
    let shown = sb
        .weir(&["show", "m.toml", "flat", "--partition", "south"])
        .output()
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&csv_seen[1].2).unwrap(),
        ok(&shown),
        "{csv_seen:?}"
    );
    assert_eq!(ok(&shown), "id,region,amount\n1,south,10\n2,south,20\n");

    // A forced republish with other bytes: north's files are generation 2's.
    let out = sb
        .weir(&[
            "run",
            "m.toml",
            "--run-id",
            "R2",
            "--partition",
            "north",
            "--force",
        ])
        .env("SCALE", "20")
        .output()
        .unwrap();
    ok(&out);
    let north = files_json(&sb, "sales", &["--partition", "north"]);
    let north_seen = check_against_disk(&sb, "sales", &north);
    assert_eq!(north_seen.len(), 2, "{north_seen:?}");
    assert!(north_seen.iter().all(|(p, g, _)| p == "north" && *g == 2));
    assert!(
        north_seen
            .iter()
            .all(|(_, _, path)| !first_north.contains(path)),
        "{north_seen:?} vs {first_north:?}"
    );
    let sales_north = sb.store("sales", "north").latest().unwrap().unwrap();
    assert_ne!(
        sales_north.file_sums[0].sha256,
        files[0]["sha256"].as_str().unwrap(),
        "the republish changed the bytes"
    );

    // Rollback: generation 3 shows generation 1's files again.
    ok(&sb
        .weir(&["rollback", "m.toml", "sales", "--partition", "north"])
        .output()
        .unwrap());
    let back = files_json(
        &sb,
        "sales",
        &["--partition", "north", "--partition", "south"],
    );
    let back_seen = check_against_disk(&sb, "sales", &back);
    let listed: Vec<(&str, u64)> = back_seen.iter().map(|(p, g, _)| (p.as_str(), *g)).collect();
    assert_eq!(
        listed,
        [("north", 3), ("north", 3), ("south", 1), ("south", 1)]
    );
    let back_north: Vec<String> = back_seen[..2].iter().map(|s| s.2.clone()).collect();
    assert_eq!(back_north, first_north);

    // The text form: one line per file, full digests, the same paths.
    let text = ok(&sb
        .weir(&["files", "m.toml", "sales", "--partition", "south"])
        .output()
        .unwrap());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("partition"), "{text}");
    for (line, f) in lines[1..].iter().zip(&back[2..]) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "south",
                "1",
                &f["size"].as_u64().unwrap().to_string(),
                f["sha256"].as_str().unwrap(),
                f["path"].as_str().unwrap(),
            ],
            "{text}"
        );
    }
}

// `weir files` exit codes, as the Delta guide's table (docs/guides/delta.md): a partition
// in the scheme but never published exits 1, one outside the scheme or an
// unknown dataset exits 2, and a visible file that no longer holds what
// was published exits 5 naming it, rather than handing it to a reader.
#[test]
fn files_refuses_what_it_cannot_vouch_for() {
    let sb = sandbox();
    ok(&sb.run("R1", &["--partition", "north"]));

    let out = sb
        .weir(&["files", "m.toml", "sales", "--partition", "west"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("`sales` has no published generation for partition west"),
        "{}",
        stderr(&out)
    );

    let out = sb
        .weir(&["files", "m.toml", "sales", "--partition", "east"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("partition `east` is not in the partition scheme"),
        "{}",
        stderr(&out)
    );

    let out = sb.weir(&["files", "m.toml", "pq"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`pq` is a task; it publishes dataset `sales`"),
        "{}",
        stderr(&out)
    );

    // Without --partition, unpublished partitions are simply not listed.
    let listed = files_json(&sb, "sales", &[]);
    assert_eq!(listed.len(), 2);
    let path = listed[1]["path"].as_str().unwrap().to_owned();
    std::fs::write(&path, b"not parquet").unwrap();
    let out = sb.weir(&["files", "m.toml", "sales"]).output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert!(stderr(&out).contains("part-1.parquet"), "{}", stderr(&out));
}

pub(crate) const DELTA_MANIFEST: &str = r#"
[pipeline]
name = "lake"
code_version = "1"
warehouse = "wh"

[partitions.region]
kind = "static"
keys = ["north", "south"]

[tasks.pq]
command = ["sh", "pq.sh"]
output = { dataset = "sales", format = "parquet", grain = ["id"], table = "delta" }
"#;

/// Writes rows (id, amount, label) as a Parquet file.
pub(crate) fn write_rows(path: &Path, ids: &[i64], scale: i64, label: &str) {
    let batch = RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        (
            "amount",
            Arc::new(Int64Array::from(
                ids.iter().map(|id| id * scale).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            "label",
            Arc::new(StringArray::from(vec![label; ids.len()])) as ArrayRef,
        ),
    ])
    .expect("a batch");
    let file = std::fs::File::create(path).expect("create");
    let mut writer = ArrowWriter::try_new(file, batch.schema(), None).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

/// Whether python3 can import `modules` (`"deltalake, polars"`); under
/// CI=true their absence fails the test, elsewhere the part that needs them
/// is skipped with the reason.
pub(crate) fn python_imports(modules: &str) -> bool {
    let found = std::process::Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python3 cannot import {modules} (.ci/run installs them)"
        );
        eprintln!("skipped: python3 cannot import {modules} (CI installs them)");
    }
    found
}

/// Whether python3 can import delta-rs's reader and Polars.
pub(crate) fn python_readers() -> bool {
    python_imports("deltalake, polars")
}

/// What delta-rs reads from the table (its SQL reader, which takes
/// partition values from the log): its versions (from its history, sorted)
/// and, at each version, the rows per partition as sorted
/// `id,amount,label` lines; Polars must read the same rows.
const READ_TABLE: &str = r#"
import json, os, sys
import deltalake, polars as pl
root = sys.argv[1]
opts = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
dt = deltalake.DeltaTable(root, storage_options=opts)
versions = sorted(h["version"] for h in dt.history())
out = {"versions": versions, "tables": {}}
# After a VACUUM-like gc only the versions within the retention read.
if len(sys.argv) > 3:
    versions = [v for v in versions if v >= int(sys.argv[3])]
line = lambda r: f'{r["id"]},{r["amount"]},{r["label"]}'
for v in versions:
    t = deltalake.DeltaTable(root, version=v, storage_options=opts)
    read = deltalake.QueryBuilder().register("t", t).execute("select * from t").read_all()
    rows = {}
    for r in pl.DataFrame(read).iter_rows(named=True):
        rows.setdefault(r["region"], []).append(line(r))
    rows = {k: sorted(x) for k, x in rows.items()}
    # Polars' own scan (no pyarrow) takes partition values from the files'
    # hive-style paths (`region=north/`), not from the log: it must read
    # the same rows with the same partition column, and prune by it.
    # A table whose files predate those paths (`WEIR_TEST_POLARS=skip`)
    # is read by delta-rs alone: Polars' native scan needs every file's
    # path to name the partition (its pyarrow path needs pyarrow).
    if os.environ.get("WEIR_TEST_POLARS") == "skip":
        out["tables"][str(v)] = rows
        continue
    polars_rows = {}
    for r in pl.read_delta(root, version=v, storage_options=opts).iter_rows(named=True):
        polars_rows.setdefault(r["region"], []).append(line(r))
    polars_rows = {k: sorted(x) for k, x in polars_rows.items()}
    if polars_rows != rows:
        sys.exit(f"version {v}: delta-rs read {rows}, polars {polars_rows}")
    for k in rows:
        lazy = pl.scan_delta(root, version=v, storage_options=opts).filter(pl.col("region") == k)
        filtered = sorted(line(r) for r in lazy.collect().iter_rows(named=True))
        if filtered != rows[k]:
            sys.exit(f"version {v}: delta-rs read {rows[k]} in {k}, polars' filter on it {filtered}")
    out["tables"][str(v)] = rows
print(json.dumps(out))
"#;

/// The table at `root` as delta-rs and Polars read it.
#[track_caller]
pub(crate) fn read_table(root: &Path) -> serde_json::Value {
    read_table_at(root.to_str().unwrap(), None)
}

/// The table at `root` (a path or URL) as delta-rs and Polars read it,
/// with these storage options.
#[track_caller]
fn read_table_at(root: &str, options: Option<&serde_json::Value>) -> serde_json::Value {
    let mut cmd = std::process::Command::new("python3");
    cmd.args(["-c", READ_TABLE]).arg(root);
    if let Some(options) = options {
        cmd.arg(options.to_string());
    }
    let out = cmd.output().expect("python3 runs");
    assert!(
        out.status.success(),
        "python3 read of {root}: {}",
        stderr(&out)
    );
    serde_json::from_str(&stdout(&out)).expect("one JSON document")
}

/// `weir show --generation G --json` as sorted `id,amount,label` lines.
#[track_caller]
pub(crate) fn shown(sb: &Sandbox, partition: &str, generation: u64) -> Vec<String> {
    shown_by(|args| sb.weir(args), partition, generation)
}

/// [`shown`], with `weir` commands built by `weir`.
#[track_caller]
fn shown_by(
    weir: impl Fn(&[&str]) -> std::process::Command,
    partition: &str,
    generation: u64,
) -> Vec<String> {
    let out = weir(&[
        "show",
        "m.toml",
        "sales",
        "--partition",
        partition,
        "--generation",
        &generation.to_string(),
        "--json",
    ])
    .output()
    .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let columns: Vec<&str> = doc["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let at = |name: &str| columns.iter().position(|c| *c == name).unwrap();
    let (id, amount, label) = (at("id"), at("amount"), at("label"));
    let mut rows: Vec<String> = doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |i: usize| r[i].as_str().unwrap().to_owned();
            format!("{},{},{}", s(id), s(amount), s(label))
        })
        .collect();
    rows.sort();
    rows
}

/// The table at its newest version, per partition.
fn newest(table: &serde_json::Value) -> serde_json::Value {
    let last = table["versions"].as_array().unwrap().last().unwrap();
    table["tables"][last.to_string()].clone()
}

/// The visible generation of `partition`.
pub(crate) fn visible(sb: &Sandbox, partition: &str) -> u64 {
    sb.store("sales", partition)
        .latest()
        .unwrap()
        .expect("published")
        .generation
        .get()
}

// A Parquet output declared `table = "delta"` is a
// Delta table delta-rs and Polars read directly: after a first run of two
// partitions, a forced republish and a rollback, the rows per partition
// equal `weir show` of the visible generation, the versions are contiguous
// from 0 (one commit per publication), and the table as of an older
// version shows the older generation. A Delta commit lost after weir's
// (a crash between the two) is repaired by `weir tables sync`, which is
// idempotent.
#[cfg_attr(
    not(any(weir_has_delta_readers, weir_ci)),
    ignore = "needs python3 with deltalake and polars (.ci/run installs them)"
)]
#[test]
fn delta_table_follows_publications_republish_and_rollback() {
    if !python_readers() {
        return;
    }
    let sb = delta_sandbox();
    let root = sb.path().join("wh").join("sales");
    let check_newest = |sb: &Sandbox, table: &serde_json::Value| {
        for partition in ["north", "south"] {
            assert_eq!(
                newest(table)[partition],
                serde_json::json!(shown(sb, partition, visible(sb, partition))),
                "{partition}: {table}"
            );
        }
    };

    let out = sb.run("R1", &["--partition", "north", "--partition", "south"]);
    ok(&out);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let table = read_table(&root);
    assert_eq!(table["versions"], serde_json::json!([0, 1]), "{table}");
    check_newest(&sb, &table);
    assert_eq!(
        newest(&table)["north"],
        serde_json::json!(["1,10,n", "2,20,n", "3,30,n"])
    );

    // A forced republish with other bytes: one more version, north's rows
    // are generation 2's; version 1 still shows generation 1's.
    let out = sb
        .weir(&[
            "run",
            "m.toml",
            "--run-id",
            "R2",
            "--partition",
            "north",
            "--force",
        ])
        .env("SCALE", "20")
        .output()
        .unwrap();
    ok(&out);
    assert_eq!(visible(&sb, "north"), 2);
    let table = read_table(&root);
    assert_eq!(table["versions"], serde_json::json!([0, 1, 2]), "{table}");
    check_newest(&sb, &table);
    assert_eq!(
        newest(&table)["north"],
        serde_json::json!(["1,20,n", "2,40,n", "3,60,n"])
    );
    assert_eq!(
        table["tables"]["1"]["north"],
        serde_json::json!(shown(&sb, "north", 1)),
        "{table}"
    );

    // A rollback is a commit too: generation 3 shows generation 1's rows.
    ok(&sb
        .weir(&["rollback", "m.toml", "sales", "--partition", "north"])
        .output()
        .unwrap());
    assert_eq!(visible(&sb, "north"), 3);
    let table = read_table(&root);
    assert_eq!(
        table["versions"],
        serde_json::json!([0, 1, 2, 3]),
        "{table}"
    );
    check_newest(&sb, &table);
    assert_eq!(newest(&table)["north"], table["tables"]["1"]["north"]);
    assert_eq!(
        table["tables"]["2"]["north"],
        serde_json::json!(shown(&sb, "north", 2))
    );

    // `weir history` shows the Delta version of each generation.
    let history = ok(&sb
        .weir(&[
            "history",
            "m.toml",
            "sales",
            "--partition",
            "north",
            "--json",
        ])
        .output()
        .unwrap());
    let history: serde_json::Value = serde_json::from_str(&history).unwrap();
    let versions: Vec<&serde_json::Value> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|g| &g["delta_version"])
        .collect();
    let north_first = 1 - south_version(&root);
    assert_eq!(
        versions,
        [
            &serde_json::json!(north_first),
            &serde_json::json!(2),
            &serde_json::json!(3)
        ]
    );
    let text = ok(&sb
        .weir(&["history", "m.toml", "sales", "--partition", "north"])
        .output()
        .unwrap());
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].ends_with("certified  delta"), "{text}");
    assert!(lines[3].ends_with("  3"), "{text}");

    // weir's record without its Delta commit (a crash between the two):
    // `weir tables sync` commits it once.
    // The rollback holds north (exit 4 for that alone); the table agrees.
    let check = sb.weir(&["status", "m.toml", "--check"]).output().unwrap();
    assert_eq!(check.status.code(), Some(4), "{}", stderr(&check));
    assert!(
        !stdout(&check).contains("TABLE_BEHIND"),
        "{}",
        stdout(&check)
    );
    assert!(stderr(&check).contains("check failed: 1 instance needs attention"));
    std::fs::remove_file(root.join("_delta_log").join(format!("{:020}.json", 3))).unwrap();
    // `status --check` pages on it too.
    let check = sb.weir(&["status", "m.toml", "--check"]).output().unwrap();
    assert_eq!(check.status.code(), Some(4), "{}", stderr(&check));
    assert!(
        stderr(&check).contains("check failed: 2 instances need attention"),
        "{}",
        stderr(&check)
    );
    assert!(
        stdout(&check).contains(
            "TABLE_BEHIND pq north: the Delta table shows generation 2 (version 2), \
             weir's visible generation is 3; `weir tables sync` repairs it"
        ),
        "{}",
        stdout(&check)
    );
    assert!(
        !stdout(&check).contains("TABLE_BEHIND pq south"),
        "{}",
        stdout(&check)
    );
    let table = read_table(&root);
    assert_eq!(
        newest(&table)["north"],
        serde_json::json!(shown(&sb, "north", 2))
    );
    let sync = ok(&sb.weir(&["tables", "sync", "m.toml"]).output().unwrap());
    assert_eq!(
        sync,
        "sales north: generation 3 committed as version 3\n\
         sales south: generation 1 already at version 0\n"
            .replace("version 0", &format!("version {}", south_version(&root))),
        "{sync}"
    );
    let table = read_table(&root);
    assert_eq!(
        table["versions"],
        serde_json::json!([0, 1, 2, 3]),
        "{table}"
    );
    check_newest(&sb, &table);
    let check = sb.weir(&["status", "m.toml", "--check"]).output().unwrap();
    assert!(
        !stdout(&check).contains("TABLE_BEHIND"),
        "{}",
        stdout(&check)
    );
    assert!(stderr(&check).contains("check failed: 1 instance needs attention"));
    let again = ok(&sb.weir(&["tables", "sync", "m.toml"]).output().unwrap());
    assert!(
        again.contains("sales north: generation 3 already at version 3"),
        "{again}"
    );
    assert_eq!(
        read_table(&root)["versions"],
        serde_json::json!([0, 1, 2, 3])
    );
}

/// The version that committed south (the first run published the two
/// partitions in either order).
fn south_version(root: &Path) -> u64 {
    (0..2)
        .find(|v| {
            std::fs::read_to_string(root.join("_delta_log").join(format!("{v:020}.json")))
                .unwrap()
                .contains("\"partition\":\"south\"")
        })
        .expect("south's commit")
}

/// The Delta log's versions under `root`, from its file names.
pub(crate) fn log_versions(root: &Path) -> Vec<u64> {
    let mut versions: Vec<u64> = std::fs::read_dir(root.join("_delta_log"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".json")?.parse().ok()
        })
        .collect();
    versions.sort_unstable();
    versions
}

/// A sandbox of [`DELTA_MANIFEST`] (north only) whose task copies
/// `$FILE.parquet` (default `rows`): `rows` (id, amount, label), `wider`
/// (the same and `extra`), `retyped` (`amount` a string).
fn schema_sandbox(policy: Option<&str>) -> Sandbox {
    let manifest = match policy {
        Some(p) => DELTA_MANIFEST.replace(
            "table = \"delta\" }",
            &format!("table = \"delta\", schema = \"{p}\" }}"),
        ),
        None => DELTA_MANIFEST.to_owned(),
    };
    let sb = Sandbox::new(&manifest);
    write_rows(&sb.path().join("rows.parquet"), &[1, 2], 10, "n");
    let write = |name: &str, batch: RecordBatch| {
        let file = std::fs::File::create(sb.path().join(name)).unwrap();
        let mut writer = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    };
    write(
        "wider.parquet",
        RecordBatch::try_from_iter(vec![
            ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
            (
                "amount",
                Arc::new(Int64Array::from(vec![30, 40])) as ArrayRef,
            ),
            (
                "label",
                Arc::new(StringArray::from(vec!["n", "n"])) as ArrayRef,
            ),
            ("extra", Arc::new(Int64Array::from(vec![7, 8])) as ArrayRef),
        ])
        .unwrap(),
    );
    write(
        "retyped.parquet",
        RecordBatch::try_from_iter(vec![
            ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
            (
                "amount",
                Arc::new(StringArray::from(vec!["10", "20"])) as ArrayRef,
            ),
            (
                "label",
                Arc::new(StringArray::from(vec!["n", "n"])) as ArrayRef,
            ),
        ])
        .unwrap(),
    );
    sb.script(
        "pq.sh",
        "cp \"${FILE:-rows}.parquet\" \"$WEIR_OUTPUT_DIR/part-0.parquet\"\n",
    );
    sb
}

/// A forced run of north publishing `$FILE.parquet`.
fn run_file(sb: &Sandbox, run_id: &str, file: &str) -> std::process::Output {
    sb.weir(&[
        "run",
        "m.toml",
        "--run-id",
        run_id,
        "--partition",
        "north",
        "--force",
    ])
    .env("FILE", file)
    .output()
    .unwrap()
}

// `schema = "fixed"` (the default): a generation whose
// columns differ from the Delta table's fails its audit (GATE_FAILED
// naming the columns, exit 1) and nothing is published: the visible
// generation and the table stay as they were.
#[test]
fn delta_fixed_schema_a_changed_schema_fails_the_audit() {
    let sb = schema_sandbox(None);
    let root = sb.path().join("wh").join("sales");
    let out = sb.run("R1", &["--partition", "north"]);
    ok(&out);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    assert_eq!(log_versions(&root), [0]);

    let out = run_file(&sb, "R2", "wider");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains(
            "table_schema: the Delta table's schema does not admit the files: \
             new column `extra` (long) (the table's schema is fixed"
        ),
        "{text}"
    );
    assert_eq!(visible(&sb, "north"), 1);
    assert_eq!(log_versions(&root), [0]);
    let events = sb.events("R2");
    assert!(
        events
            .iter()
            .any(|e| e.state == weir::events::State::GateFailed
                && e.detail.contains("new column `extra` (long)")),
        "{events:?}"
    );

    let out = run_file(&sb, "R3", "retyped");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        format!("{}{}", stdout(&out), stderr(&out))
            .contains("column `amount` is long in the table, string in the files"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(visible(&sb, "north"), 1);
    assert_eq!(log_versions(&root), [0]);
}

// `schema = "additive"`: a generation with a new column
// is published and its Delta commit carries a metaData action whose
// schema has the column (nullable, same table id); delta-rs reads the new
// version with it and the older version without; a retyped column still
// fails the audit.
#[test]
fn delta_additive_schema_adds_new_columns() {
    let sb = schema_sandbox(Some("additive"));
    let root = sb.path().join("wh").join("sales");
    ok(&sb.run("R1", &["--partition", "north"]));
    let out = run_file(&sb, "R2", "wider");
    ok(&out);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    assert_eq!(visible(&sb, "north"), 2);
    assert_eq!(log_versions(&root), [0, 1]);
    let meta = |v: u64| -> Option<serde_json::Value> {
        std::fs::read_to_string(root.join("_delta_log").join(format!("{v:020}.json")))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find_map(|a| a.get("metaData").cloned())
    };
    let (first, second) = (meta(0).unwrap(), meta(1).expect("a metaData action"));
    assert_eq!(first["id"], second["id"]);
    let fields: serde_json::Value =
        serde_json::from_str(second["schemaString"].as_str().unwrap()).unwrap();
    let names: Vec<&str> = fields["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["id", "amount", "label", "region", "extra"]);
    assert_eq!(
        fields["fields"][4],
        serde_json::json!({"name": "extra", "type": "long", "nullable": true, "metadata": {}})
    );

    let out = run_file(&sb, "R3", "retyped");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        format!("{}{}", stdout(&out), stderr(&out))
            .contains("column `amount` is long in the table, string in the files"),
        "{}",
        stdout(&out)
    );
    assert_eq!(visible(&sb, "north"), 2);
    assert_eq!(log_versions(&root), [0, 1]);

    if python_readers() {
        let read = |version: u64| -> serde_json::Value {
            let script = "import sys, json, deltalake\n\
                t = deltalake.DeltaTable(sys.argv[1], version=int(sys.argv[2]))\n\
                r = deltalake.QueryBuilder().register('t', t).execute('select * from t').read_all()\n\
                import polars as pl\n\
                r = pl.DataFrame(r).sort('id').to_dicts()\n\
                print(json.dumps(r))";
            let out = std::process::Command::new("python3")
                .args(["-c", script])
                .arg(&root)
                .arg(version.to_string())
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
            serde_json::from_str(&stdout(&out)).unwrap()
        };
        assert_eq!(
            read(1),
            serde_json::json!([
                {"id": 1, "amount": 30, "label": "n", "region": "north", "extra": 7},
                {"id": 2, "amount": 40, "label": "n", "region": "north", "extra": 8},
            ])
        );
        assert_eq!(
            read(0),
            serde_json::json!([
                {"id": 1, "amount": 10, "label": "n", "region": "north"},
                {"id": 2, "amount": 20, "label": "n", "region": "north"},
            ])
        );
    }
}

// A schema policy weir does not know, or one on an
// output without a table, is a located manifest diagnostic.
#[test]
fn delta_schema_policy_diagnostics() {
    for (manifest, expected) in [
        (
            DELTA_MANIFEST.replace(
                "table = \"delta\" }",
                "table = \"delta\", schema = \"loose\" }",
            ),
            "unknown schema policy `loose`",
        ),
        (
            DELTA_MANIFEST.replace("table = \"delta\" }", "schema = \"additive\" }"),
            "`schema = \"additive\"` is the schema policy of a table",
        ),
        (
            DELTA_MANIFEST.replace("table = \"delta\" }", "table_retention = \"30d\" }"),
            "`table_retention` is how long a table keeps",
        ),
        (
            DELTA_MANIFEST.replace(
                "table = \"delta\" }",
                "table = \"delta\", table_retention = \"a week\" }",
            ),
            "malformed duration",
        ),
    ] {
        let sb = Sandbox::new(&manifest);
        let out = sb.weir(&["validate", "m.toml"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let text = stderr(&out);
        assert!(text.contains(expected), "{text}");
        assert!(text.contains("[m.toml:13:"), "{text}");
        assert!(
            text.contains("schema = ") || text.contains("table_retention = "),
            "{text}"
        );
    }
}

/// Writes the Delta sandbox's Parquet inputs (scale 10 and 20, per region)
/// and its task script.
pub(crate) fn delta_sandbox() -> Sandbox {
    let sb = Sandbox::new(DELTA_MANIFEST);
    for (region, label) in [("north", "n"), ("south", "s")] {
        for scale in [10, 20] {
            write_rows(
                &sb.path().join(format!("{region}-{scale}-0.parquet")),
                &[1, 2],
                scale,
                label,
            );
            write_rows(
                &sb.path().join(format!("{region}-{scale}-1.parquet")),
                &[3],
                scale,
                label,
            );
        }
    }
    sb.script(
        "pq.sh",
        "s=${SCALE:-10}\n\
         cp \"$WEIR_PARTITION-$s-0.parquet\" \"$WEIR_OUTPUT_DIR/part-0.parquet\"\n\
         cp \"$WEIR_PARTITION-$s-1.parquet\" \"$WEIR_OUTPUT_DIR/part-1.parquet\"\n",
    );
    sb
}

// A Delta table on S3 (moto): the Delta log is committed through the S3
// backend, delta-rs and Polars read the table from the bucket with the
// rows `weir show` prints, the versions are contiguous, and `weir files`
// names the visible files by their s3:// URLs with their sizes and sums.
#[cfg(feature = "s3")]
#[cfg_attr(
    not(any(all(weir_has_s3, weir_has_delta_readers), weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto) and python3 with deltalake and polars (.ci/run installs them)"
)]
#[test]
fn delta_table_and_files_on_s3() {
    let Some(s3) = crate::support::s3::S3::sandbox("wh") else {
        return;
    };
    if !python_readers() {
        return;
    }
    let url = &s3.url;
    let sb = delta_sandbox();
    let staging = sb.path().join("staging");
    let weir_s3 = |args: &[&str]| s3.weir(sb.path(), &staging, args);
    let out = weir_s3(&[
        "run",
        "m.toml",
        "--partition",
        "north",
        "--partition",
        "south",
    ])
    .output()
    .unwrap();
    ok(&out);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let out = weir_s3(&["run", "m.toml", "--partition", "north", "--force"])
        .env("SCALE", "20")
        .output()
        .unwrap();
    ok(&out);

    let options = serde_json::json!({
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "weir-test",
        "AWS_SECRET_ACCESS_KEY": "weir-test",
    });
    let table = read_table_at(&format!("{url}/sales"), Some(&options));
    assert_eq!(table["versions"], serde_json::json!([0, 1, 2]), "{table}");
    assert_eq!(
        newest(&table)["north"],
        serde_json::json!(shown_by(weir_s3, "north", 2))
    );
    assert_eq!(
        newest(&table)["south"],
        serde_json::json!(shown_by(weir_s3, "south", 1))
    );
    assert_eq!(
        table["tables"]["1"]["north"],
        serde_json::json!(shown_by(weir_s3, "north", 1))
    );

    // A rollback is a commit on S3 too: north shows generation 1's rows
    // again, which every reader (Polars' path-based scan included) files
    // under north.
    ok(
        &weir_s3(&["rollback", "m.toml", "sales", "--partition", "north"])
            .output()
            .unwrap(),
    );
    let table = read_table_at(&format!("{url}/sales"), Some(&options));
    assert_eq!(
        table["versions"],
        serde_json::json!([0, 1, 2, 3]),
        "{table}"
    );
    assert_eq!(
        newest(&table)["north"],
        serde_json::json!(shown_by(weir_s3, "north", 3))
    );
    assert_eq!(newest(&table)["north"], table["tables"]["1"]["north"]);

    let listed = ok(&weir_s3(&["files", "m.toml", "sales", "--json"])
        .output()
        .unwrap());
    let doc: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let files = doc["files"].as_array().unwrap();
    assert_eq!(files.len(), 4, "{listed}");
    let store = s3.backend();
    for f in files {
        let path = f["path"].as_str().unwrap();
        let key = path
            .strip_prefix(&format!("{url}/"))
            .unwrap_or_else(|| panic!("{path} is not under {url}"));
        let bytes = weir::store::Backend::get(&store, key)
            .unwrap()
            .expect("in the bucket");
        assert_eq!(f["size"].as_u64(), Some(bytes.len() as u64), "{path}");
        assert_eq!(
            f["sha256"].as_str().unwrap(),
            format!("sha256:{:x}", Sha256::digest(&bytes)),
            "{path}"
        );
    }
    let generations: Vec<(&str, u64)> = files
        .iter()
        .map(|f| {
            (
                f["partition"].as_str().unwrap(),
                f["generation"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        generations,
        [("north", 3), ("north", 3), ("south", 1), ("south", 1)]
    );
    // Published under `<column>=<value>/` below the attempt dir, in the
    // table's `_weir/`.
    for (f, (partition, _)) in files.iter().zip(&generations) {
        let path = f["path"].as_str().unwrap();
        assert!(
            path.contains(&format!("/sales/_weir/{partition}/attempts/"))
                && path.contains(&format!("/region={partition}/data/part-")),
            "{path}"
        );
    }
}

// gc keeps every attempt a version of the Delta table
// references (weir keeps every version), where it would otherwise delete
// generations outside its rollback window; with no table it deletes them
// (the same pipeline without `table`). The oldest version stays readable.
#[test]
fn gc_keeps_what_delta_versions_reference() {
    let plain = DELTA_MANIFEST.replace(", table = \"delta\"", "");
    for (manifest, delta) in [(DELTA_MANIFEST, true), (plain.as_str(), false)] {
        let sb = delta_sandbox();
        std::fs::write(sb.path().join("m.toml"), manifest).unwrap();
        let out = republish_three_times_and_gc(&sb, 3, std::time::Duration::ZERO);
        let attempts = sb.entries("sales", "north", "attempts");
        if delta {
            assert_eq!(attempts.len(), 3, "{out}");
            assert!(
                out.contains("referenced by version 0 of the Delta table"),
                "{out}"
            );
            assert!(
                out.contains("referenced by version 1 of the Delta table"),
                "{out}"
            );
            let root = sb.path().join("wh").join("sales");
            if python_readers() {
                let table = read_table(&root);
                assert_eq!(table["versions"], serde_json::json!([0, 1, 2]));
                assert_eq!(
                    table["tables"]["0"]["north"],
                    serde_json::json!(["1,10,n", "2,20,n", "3,30,n"])
                );
                assert_eq!(
                    table["tables"]["1"]["north"],
                    serde_json::json!(["1,20,n", "2,40,n", "3,60,n"])
                );
            }
        } else {
            assert_eq!(attempts.len(), 1, "{out}");
        }
    }
}

/// Publishes `north` three times more (scales 10, 20, 10) in `sb`, up to
/// `generation`, waits `before_gc`, and collects garbage with weir's own
/// rollback window at zero; gc's output.
fn republish_three_times_and_gc(
    sb: &Sandbox,
    generation: u64,
    before_gc: std::time::Duration,
) -> String {
    for (run, scale) in [("R1", "10"), ("R2", "20"), ("R3", "10")] {
        let out = sb
            .weir(&[
                "run",
                "m.toml",
                "--run-id",
                run,
                "--partition",
                "north",
                "--force",
            ])
            .env("SCALE", scale)
            .output()
            .unwrap();
        ok(&out);
    }
    assert_eq!(visible(sb, "north"), generation);
    std::thread::sleep(before_gc);
    ok(&sb
        .weir(&[
            "gc",
            "m.toml",
            "--older-than",
            "0s",
            "--keep-generations",
            "0",
            "--apply",
        ])
        .output()
        .unwrap())
}

// A declared `table_retention` is the table's VACUUM rule: it is written to
// the table's configuration (and changed there by a metaData action when
// the declaration changes), gc deletes the files of versions replaced
// longer ago than it and keeps those replaced within it, naming until when
// time travel can read them; the current version always reads.
#[test]
fn gc_frees_table_files_replaced_longer_ago_than_the_declared_retention() {
    let sb = delta_sandbox();
    let short = DELTA_MANIFEST.replace(
        "table = \"delta\" }",
        "table = \"delta\", table_retention = \"1s\" }",
    );
    std::fs::write(sb.path().join("m.toml"), &short).unwrap();
    // Past its one-second retention for the versions the third run replaced.
    let out = republish_three_times_and_gc(&sb, 3, std::time::Duration::from_millis(1500));
    let attempts = sb.entries("sales", "north", "attempts");
    assert_eq!(attempts.len(), 1, "{out}");
    assert!(
        out.contains("referenced by generation 3 (current)"),
        "{out}"
    );
    assert_eq!(out.matches("delete ").count(), 2, "{out}");
    let root = sb.path().join("wh").join("sales");
    let first = std::fs::read_to_string(root.join("_delta_log/00000000000000000000.json")).unwrap();
    assert!(
        first.contains(r#""delta.deletedFileRetentionDuration":"interval 1 seconds""#),
        "{first}"
    );
    if python_readers() {
        let read = |from: &str| {
            std::process::Command::new("python3")
                .args(["-c", READ_TABLE, root.to_str().unwrap(), "null", from])
                .output()
                .unwrap()
        };
        // The current version reads; the replaced ones, past the
        // retention, do not (their files are gone, as after VACUUM).
        let out = read("2");
        assert!(out.status.success(), "{}", stderr(&out));
        let table: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(
            table["tables"]["2"]["north"],
            serde_json::json!(["1,10,n", "2,20,n", "3,30,n"])
        );
        let out = read("0");
        assert!(!out.status.success());
        assert!(stderr(&out).contains("not found"), "{}", stderr(&out));
    }

    // A longer declaration: the next commit carries it, and the replaced
    // versions' files stay, with the instant they stay readable until.
    let sb = delta_sandbox();
    std::fs::write(sb.path().join("m.toml"), &short).unwrap();
    ok(&sb
        .weir(&["run", "m.toml", "--run-id", "R0", "--partition", "north"])
        .env("SCALE", "10")
        .output()
        .unwrap());
    let long = DELTA_MANIFEST.replace(
        "table = \"delta\" }",
        "table = \"delta\", table_retention = \"2h\" }",
    );
    std::fs::write(sb.path().join("m.toml"), &long).unwrap();
    let out = republish_three_times_and_gc(&sb, 4, std::time::Duration::from_millis(1500));
    assert_eq!(sb.entries("sales", "north", "attempts").len(), 4, "{out}");
    assert!(out.contains("readable by time travel until"), "{out}");
    assert!(out.contains("(the table's retention)"), "{out}");
    let second =
        std::fs::read_to_string(root_of(&sb).join("_delta_log/00000000000000000001.json")).unwrap();
    assert!(
        second.contains(r#""delta.deletedFileRetentionDuration":"interval 2 hours""#),
        "{second}"
    );
    let third =
        std::fs::read_to_string(root_of(&sb).join("_delta_log/00000000000000000002.json")).unwrap();
    assert!(!third.contains("metaData"), "{third}");
}

fn root_of(sb: &Sandbox) -> std::path::PathBuf {
    sb.path().join("wh").join("sales")
}

// Two engines publishing different partitions of one table at
// once, several times each: every publication gets its own version (a
// taken version is retried on the next), the versions are contiguous, and
// the table ends at each partition's visible generation.
#[test]
fn two_engines_commit_to_one_table_at_once() {
    let sb = delta_sandbox();
    let root = sb.path().join("wh").join("sales");
    for round in 0..3 {
        let engines: Vec<std::process::Child> = ["north", "south"]
            .into_iter()
            .map(|partition| {
                sb.weir(&[
                    "run",
                    "m.toml",
                    "--run-id",
                    &format!("{partition}-{round}"),
                    "--partition",
                    partition,
                    "--force",
                ])
                .env("SCALE", if round % 2 == 0 { "10" } else { "20" })
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
            })
            .collect();
        for engine in engines {
            let out = engine.wait_with_output().unwrap();
            ok(&out);
            assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
        }
    }
    assert_eq!(log_versions(&root), (0..6).collect::<Vec<u64>>());
    assert_eq!((visible(&sb, "north"), visible(&sb, "south")), (3, 3));
    let sync = ok(&sb.weir(&["tables", "sync", "m.toml"]).output().unwrap());
    assert!(
        sync.contains("sales north: generation 3 already at")
            && sync.contains("sales south: generation 3 already at"),
        "{sync}"
    );
    if python_readers() {
        let table = read_table(&root);
        for partition in ["north", "south"] {
            assert_eq!(
                newest(&table)[partition],
                serde_json::json!(shown(&sb, partition, 3)),
                "{table}"
            );
        }
    }
}

// An engine killed (kill -9, by fault injection) right after
// weir's commit record, before the Delta commit: weir's publication stands,
// the table lags (status --check pages TABLE_BEHIND), and the next run,
// which finds the partition already published, commits it to the table.
#[test]
fn kill_9_between_the_commits_is_repaired_by_the_next_run() {
    let sb = delta_sandbox();
    let root = sb.path().join("wh").join("sales");
    ok(&sb.run("R1", &["--partition", "north"]));
    assert_eq!(log_versions(&root), [0]);
    let out = sb
        .weir(&[
            "run",
            "m.toml",
            "--run-id",
            "R2",
            "--partition",
            "north",
            "--force",
        ])
        .env("SCALE", "20")
        .env("WEIR_FAULT", "after_commit@pq/north:crash")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), None, "killed: {}", stderr(&out));
    assert_eq!(visible(&sb, "north"), 2);
    assert_eq!(log_versions(&root), [0]);
    let check = sb.weir(&["status", "m.toml", "--check"]).output().unwrap();
    assert_eq!(check.status.code(), Some(4), "{}", stderr(&check));
    assert!(
        stdout(&check).contains(
            "TABLE_BEHIND pq north: the Delta table shows generation 1 (version 0), \
             weir's visible generation is 2"
        ),
        "{}",
        stdout(&check)
    );

    let out = sb.run("R3", &["--partition", "north"]);
    assert!(ok(&out).contains("1 already published"), "{}", stdout(&out));
    assert_eq!(log_versions(&root), [0, 1]);
    ok(&sb.weir(&["status", "m.toml", "--check"]).output().unwrap());
    if python_readers() {
        let table = read_table(&root);
        assert_eq!(
            newest(&table)["north"],
            serde_json::json!(shown(&sb, "north", 2))
        );
        assert_eq!(
            table["tables"]["0"]["north"],
            serde_json::json!(shown(&sb, "north", 1))
        );
    }
}

/// The newest version of the table at `root` as delta-rs reads it (its
/// version and rows per partition), without its history, which needs
/// every JSON commit.
const READ_NEWEST: &str = r#"
import json, sys
import deltalake, polars as pl
t = deltalake.DeltaTable(sys.argv[1], version=int(sys.argv[2]) if len(sys.argv) > 2 else None)
read = deltalake.QueryBuilder().register("t", t).execute("select * from t").read_all()
rows = {}
for r in pl.DataFrame(read).iter_rows(named=True):
    rows.setdefault(r["region"], []).append(f'{r["id"]},{r["amount"]},{r["label"]}')
print(json.dumps({"version": t.version(), "rows": {k: sorted(x) for k, x in rows.items()}}))
"#;

/// Per version of the log under `root`, each partition's generation as of
/// that version (from the commits' `commitInfo.weir`).
pub(crate) fn generations_by_version(
    root: &Path,
) -> Vec<(u64, std::collections::BTreeMap<String, u64>)> {
    let mut current = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for v in log_versions(root) {
        let text =
            std::fs::read_to_string(root.join("_delta_log").join(format!("{v:020}.json"))).unwrap();
        for line in text.lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            let weir = &action["commitInfo"]["weir"];
            if let (Some(p), Some(g)) = (weir["partition"].as_str(), weir["generation"].as_u64()) {
                current.insert(p.to_owned(), g);
            }
        }
        out.push((v, current.clone()));
    }
    out
}

// Every 10 versions weir writes a Parquet checkpoint of
// the table (protocol, metaData, the live adds) and `_last_checkpoint`.
// delta-rs and Polars read every version before and after it with the
// rows `weir show` prints of the generation each version committed; with
// the JSON commits up to the checkpoint deleted, delta-rs still reads the
// table, and weir's next commit replays from the checkpoint: it removes
// the partition's files the checkpoint holds (no duplicate rows) and
// writes no second protocol/metaData.
#[cfg_attr(
    not(any(weir_has_delta_readers, weir_ci)),
    ignore = "needs python3 with deltalake and polars (.ci/run installs them)"
)]
#[test]
fn delta_checkpoints_are_written_and_read() {
    if !python_readers() {
        return;
    }
    let sb = delta_sandbox();
    let root = sb.path().join("wh").join("sales");
    let log = root.join("_delta_log");
    ok(&sb.run("R1", &["--partition", "north", "--partition", "south"]));
    // Ten forced republishes, north and south in turn, each with other
    // bytes than its partition's last: versions 2 to 11.
    for i in 0..10 {
        let partition = if i % 2 == 0 { "north" } else { "south" };
        let scale = if (i / 2) % 2 == 0 { "20" } else { "10" };
        let out = sb
            .weir(&[
                "run",
                "m.toml",
                "--run-id",
                &format!("F{i}"),
                "--partition",
                partition,
                "--force",
            ])
            .env("SCALE", scale)
            .output()
            .unwrap();
        ok(&out);
        assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    }
    assert_eq!(log_versions(&root), (0..=11).collect::<Vec<u64>>());
    let checkpoints: Vec<String> = std::fs::read_dir(&log)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("checkpoint"))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        checkpoints,
        [
            "00000000000000000010.checkpoint.parquet",
            "_last_checkpoint"
        ]
    );
    // protocol, metaData, two live files per partition and the
    // tombstones of the nine overwrites up to version 10 (two files each,
    // none expired), with the checkpoint's size in bytes.
    let pointer: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(log.join("_last_checkpoint")).unwrap())
            .unwrap();
    let bytes = std::fs::metadata(log.join("00000000000000000010.checkpoint.parquet"))
        .unwrap()
        .len();
    assert_eq!(
        pointer,
        serde_json::json!({"version": 10, "size": 24, "numOfAddFiles": 4, "sizeInBytes": bytes})
    );

    let table = read_table(&root);
    assert_eq!(
        table["versions"],
        serde_json::json!((0..=11).collect::<Vec<u64>>()),
        "{table}"
    );
    for (v, generations) in generations_by_version(&root) {
        for (partition, g) in generations {
            assert_eq!(
                table["tables"][v.to_string()][&partition],
                serde_json::json!(shown(&sb, &partition, g)),
                "version {v}, {partition} generation {g}: {table}"
            );
        }
    }

    // The checkpoint alone: the JSON commits up to it are gone.
    let at_11 = generations_by_version(&root)[11].1.clone();
    for v in 0..=10u64 {
        std::fs::remove_file(log.join(format!("{v:020}.json"))).unwrap();
    }
    let read_newest = || -> serde_json::Value {
        let out = std::process::Command::new("python3")
            .args(["-c", READ_NEWEST])
            .arg(&root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_str(&stdout(&out)).unwrap()
    };
    let read = read_newest();
    assert_eq!(read["version"], 11, "{read}");
    for partition in ["north", "south"] {
        assert_eq!(
            read["rows"][partition],
            serde_json::json!(shown(&sb, partition, visible(&sb, partition))),
            "{read}"
        );
    }
    let out = sb
        .weir(&[
            "run",
            "m.toml",
            "--run-id",
            "F10",
            "--partition",
            "north",
            "--force",
        ])
        .env("SCALE", "10")
        .output()
        .unwrap();
    ok(&out);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    assert_eq!(log_versions(&root), [11, 12]);
    let commit = std::fs::read_to_string(log.join(format!("{:020}.json", 12))).unwrap();
    let kinds: Vec<String> = commit
        .lines()
        .map(|l| {
            let action: serde_json::Value = serde_json::from_str(l).unwrap();
            action.as_object().unwrap().keys().next().unwrap().clone()
        })
        .collect();
    assert_eq!(
        kinds,
        ["remove", "remove", "add", "add", "commitInfo"],
        "{commit}"
    );
    let read = read_newest();
    assert_eq!(read["version"], 12, "{read}");
    for partition in ["north", "south"] {
        assert_eq!(
            read["rows"][partition],
            serde_json::json!(shown(&sb, partition, visible(&sb, partition))),
            "{read}"
        );
    }
    // weir's own view agrees: no TABLE_BEHIND, and following again is a no-op.
    ok(&sb.weir(&["status", "m.toml", "--check"]).output().unwrap());
    ok(&sb.weir(&["tables", "sync", "m.toml"]).output().unwrap());
    assert_eq!(log_versions(&root), [11, 12]);

    // gc keeps the files version 11 (the checkpoint, then one commit)
    // still shows, though no remaining JSON commit added them, and
    // delta-rs still reads that version.
    let out = ok(&sb
        .weir(&[
            "gc",
            "m.toml",
            "--older-than",
            "0s",
            "--keep-generations",
            "0",
            "--apply",
        ])
        .output()
        .unwrap());
    assert!(
        out.contains("referenced by version 10 of the Delta table"),
        "{out}"
    );
    let out = std::process::Command::new("python3")
        .args(["-c", READ_NEWEST])
        .arg(&root)
        .arg("11")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let read: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    for (partition, g) in &at_11 {
        assert_eq!(
            read["rows"][partition],
            serde_json::json!(shown(&sb, partition, *g)),
            "{read}"
        );
    }
}

// A checkpoint is an optimisation. One that cannot be
// written (here a directory holds its key) is a warning naming the
// version; the publication and its Delta commit stand, and the table
// reads the same from its JSON commits.
#[test]
fn delta_a_failed_checkpoint_is_a_warning() {
    let sb = delta_sandbox();
    let root = sb.path().join("wh").join("sales");
    ok(&sb.run("R1", &["--partition", "north"]));
    for i in 1..=10 {
        if i == 10 {
            std::fs::create_dir_all(
                root.join("_delta_log")
                    .join("00000000000000000010.checkpoint.parquet")
                    .join("x"),
            )
            .unwrap();
        }
        let out = sb
            .weir(&[
                "run",
                "m.toml",
                "--run-id",
                &format!("F{i}"),
                "--partition",
                "north",
                "--force",
            ])
            .env("SCALE", if i % 2 == 1 { "20" } else { "10" })
            .output()
            .unwrap();
        ok(&out);
        if i == 10 {
            assert!(
                stderr(&out).contains(
                    "warning: the Delta table of `sales` has no checkpoint at version 10: "
                ),
                "{}",
                stderr(&out)
            );
        } else {
            assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
        }
    }
    assert_eq!(visible(&sb, "north"), 11);
    assert_eq!(log_versions(&root), (0..=10).collect::<Vec<u64>>());
    assert!(!root.join("_delta_log").join("_last_checkpoint").exists());
    ok(&sb.weir(&["status", "m.toml", "--check"]).output().unwrap());
    if python_readers() {
        let table = read_table(&root);
        assert_eq!(
            newest(&table)["north"],
            serde_json::json!(shown(&sb, "north", 11))
        );
    }
}

// `weir verify` of an instance whose output is a Delta
// table also compares the table with the visible generation: a table
// that lags (weir's commit landed, the Delta commit did not: kill -9
// between the two) is reported with exit 4 even though the rerun is
// deterministic; once `weir tables sync` repaired it, verify says the
// table shows the generation and exits 0.
#[test]
fn verify_reports_a_table_that_disagrees() {
    let sb = delta_sandbox();
    let root = sb.path().join("wh").join("sales");
    ok(&sb.run("R1", &["--partition", "north"]));
    let verify = || {
        sb.weir(&["verify", "m.toml", "pq", "--partition", "north"])
            .output()
            .unwrap()
    };
    let out = verify();
    assert!(
        ok(&out).contains("delta table: shows generation 1's files of this partition"),
        "{}",
        stdout(&out)
    );
    let out = sb
        .weir(&[
            "run",
            "m.toml",
            "--run-id",
            "R2",
            "--partition",
            "north",
            "--force",
        ])
        .env("WEIR_FAULT", "after_commit@pq/north:crash")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), None, "killed: {}", stderr(&out));
    assert_eq!(visible(&sb, "north"), 2);
    assert_eq!(log_versions(&root), [0]);

    let out = verify();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(
        text.contains(
            "DELTA TABLE DISAGREES: the Delta table shows generation 1 (version 0), \
             weir's visible generation is 2; `weir tables sync` repairs it"
        ) && text
            .contains("deterministic: the rerun from the pinned inputs has the published digest"),
        "{text}"
    );

    ok(&sb.weir(&["tables", "sync", "m.toml"]).output().unwrap());
    assert_eq!(log_versions(&root), [0, 1]);
    let out = verify();
    assert!(
        ok(&out).contains("delta table: shows generation 2's files of this partition"),
        "{}",
        stdout(&out)
    );
}

// Delta checkpoints on S3 (moto): the checkpoint and `_last_checkpoint` are
// put in the bucket through the S3 backend at version 10; with the JSON
// commits up to it deleted, weir's next commit replays from the
// checkpoint (it removes the partition's files the checkpoint holds) and
// delta-rs reads the table from the bucket with the rows `weir show`
// prints.
#[cfg(feature = "s3")]
#[cfg_attr(
    not(any(all(weir_has_s3, weir_has_delta_readers), weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto) and python3 with deltalake and polars (.ci/run installs them)"
)]
#[test]
fn delta_checkpoints_on_s3() {
    let Some(s3) = crate::support::s3::S3::sandbox("wh") else {
        return;
    };
    if !python_readers() {
        return;
    }
    let url = &s3.url;
    let sb = delta_sandbox();
    let staging = sb.path().join("staging");
    let weir_s3 = |args: &[&str]| s3.weir(sb.path(), &staging, args);
    ok(&weir_s3(&[
        "run",
        "m.toml",
        "--partition",
        "north",
        "--partition",
        "south",
    ])
    .output()
    .unwrap());
    for i in 0..9 {
        let partition = if i % 2 == 0 { "north" } else { "south" };
        let scale = if (i / 2) % 2 == 0 { "20" } else { "10" };
        let out = weir_s3(&["run", "m.toml", "--partition", partition, "--force"])
            .env("SCALE", scale)
            .output()
            .unwrap();
        ok(&out);
        assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    }
    let store = s3.backend();
    let get = |key: &str| weir::store::Backend::get(&store, key).unwrap();
    let checkpoint = get("sales/_delta_log/00000000000000000010.checkpoint.parquet")
        .expect("the checkpoint is put");
    let pointer: serde_json::Value =
        serde_json::from_slice(&get("sales/_delta_log/_last_checkpoint").expect("put")).unwrap();
    // As on a disk: protocol, metaData, four live files and the nine
    // overwrites' unexpired tombstones.
    assert_eq!(
        pointer,
        serde_json::json!({"version": 10, "size": 24, "numOfAddFiles": 4, "sizeInBytes": checkpoint.len()})
    );
    for v in 0..=10u64 {
        weir::store::Backend::delete(&store, &format!("sales/_delta_log/{v:020}.json")).unwrap();
    }
    // South's last republish was version 9: its files are only in the
    // checkpoint now.
    let out = weir_s3(&["run", "m.toml", "--partition", "south", "--force"])
        .env("SCALE", "20")
        .output()
        .unwrap();
    ok(&out);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let commit =
        String::from_utf8(get("sales/_delta_log/00000000000000000011.json").expect("v11")).unwrap();
    let kinds: Vec<String> = commit
        .lines()
        .map(|l| {
            let action: serde_json::Value = serde_json::from_str(l).unwrap();
            action.as_object().unwrap().keys().next().unwrap().clone()
        })
        .collect();
    assert_eq!(
        kinds,
        ["remove", "remove", "add", "add", "commitInfo"],
        "{commit}"
    );

    let options = serde_json::json!({
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "weir-test",
        "AWS_SECRET_ACCESS_KEY": "weir-test",
    });
    let script = "import sys, json, deltalake, polars as pl\n\
        t = deltalake.DeltaTable(sys.argv[1], storage_options=json.loads(sys.argv[2]))\n\
        read = deltalake.QueryBuilder().register('t', t).execute('select * from t').read_all()\n\
        rows = {}\n\
        for r in pl.DataFrame(read).iter_rows(named=True):\n    \
            rows.setdefault(r['region'], []).append(f\"{r['id']},{r['amount']},{r['label']}\")\n\
        print(json.dumps({'version': t.version(), 'rows': {k: sorted(x) for k, x in rows.items()}}))";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(format!("{url}/sales"))
        .arg(options.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let read: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(read["version"], 11, "{read}");
    for partition in ["north", "south"] {
        let g = ok(&weir_s3(&[
            "files",
            "m.toml",
            "sales",
            "--partition",
            partition,
            "--json",
        ])
        .output()
        .unwrap());
        let doc: serde_json::Value = serde_json::from_str(&g).unwrap();
        let generation = doc["files"][0]["generation"].as_u64().unwrap();
        assert_eq!(
            read["rows"][partition],
            serde_json::json!(shown_by(weir_s3, partition, generation)),
            "{partition}: {read}"
        );
    }
}

// A candidate with a column no Delta type holds (a
// timestamp without a time zone) fails its audit, even as the table's
// first generation, instead of being published while its table commit
// fails.
#[test]
fn delta_an_unmappable_column_fails_the_audit() {
    let sb = schema_sandbox(None);
    let batch = RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
        (
            "at",
            Arc::new(arrow_array::TimestampMicrosecondArray::from(vec![0])) as ArrayRef,
        ),
    ])
    .unwrap();
    let file = std::fs::File::create(sb.path().join("naive.parquet")).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let out = run_file(&sb, "R1", "naive");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains("table_schema: column `at` of ")
            && text.contains("which weir does not map to a Delta type"),
        "{text}"
    );
    assert!(sb.store("sales", "north").latest().unwrap().is_none());
    assert!(!sb.path().join("wh/sales/_delta_log").exists());
}

/// [`read_table`] from `from_version` on; with `polars` false, by delta-rs
/// alone.
#[track_caller]
fn read_table_from(root: &Path, from_version: u64, polars: bool) -> serde_json::Value {
    let mut cmd = std::process::Command::new("python3");
    cmd.args(["-c", READ_TABLE])
        .arg(root)
        .arg("null")
        .arg(from_version.to_string());
    if !polars {
        cmd.env("WEIR_TEST_POLARS", "skip");
    }
    let out = cmd.output().expect("python3 runs");
    assert!(
        out.status.success(),
        "python3 read of {}: {}",
        root.display(),
        stderr(&out)
    );
    serde_json::from_str(&stdout(&out)).expect("one JSON document")
}

// A table whose generations were published before weir put
// table files under `<column>=<value>/` (here: published without `table`,
// then declared a table and brought up by `weir tables sync`, which writes
// the log such a table has) keeps working as new generations come in the
// new layout: a forced republish publishes under `region=north/`, a
// rollback to the old generation names its old files again, gc keeps what
// the table references, `weir files` lists what is visible, and delta-rs
// reads the rows `weir show` prints at every version. Once every live
// file is in the new layout, Polars' native scan reads the table too.
#[test]
fn tables_published_before_hive_directories_keep_working() {
    if !python_readers() {
        return;
    }
    let sb = delta_sandbox();
    let root = sb.path().join("wh").join("sales");
    let plain = DELTA_MANIFEST.replace(", table = \"delta\"", "");
    std::fs::write(sb.path().join("m.toml"), plain).unwrap();
    ok(&sb.run("R1", &["--partition", "north", "--partition", "south"]));
    let old = sb.store("sales", "north").latest().unwrap().unwrap();
    assert!(!old.attempt_dir.contains("region="), "{}", old.attempt_dir);
    std::fs::write(sb.path().join("m.toml"), DELTA_MANIFEST).unwrap();
    ok(&sb.weir(&["tables", "sync", "m.toml"]).output().unwrap());
    let check_newest = |table: &serde_json::Value| {
        for partition in ["north", "south"] {
            assert_eq!(
                newest(table)[partition],
                serde_json::json!(shown(&sb, partition, visible(&sb, partition))),
                "{partition}: {table}"
            );
        }
    };
    let table = read_table_from(&root, 0, false);
    assert_eq!(table["versions"], serde_json::json!([0, 1]), "{table}");
    check_newest(&table);

    let republish = |run: &str, partition: &str, scale: &str| {
        ok(&sb
            .weir(&[
                "run",
                "m.toml",
                "--run-id",
                run,
                "--partition",
                partition,
                "--force",
            ])
            .env("SCALE", scale)
            .output()
            .unwrap());
    };
    republish("R2", "north", "20");
    let new = sb.store("sales", "north").latest().unwrap().unwrap();
    assert!(
        new.attempt_dir.ends_with("/region=north"),
        "{}",
        new.attempt_dir
    );
    let table = read_table_from(&root, 0, false);
    assert_eq!(table["versions"], serde_json::json!([0, 1, 2]), "{table}");
    check_newest(&table);

    // Back to the generation in the old layout, then gc with no rollback
    // window of weir's own: the table's versions keep both attempts.
    ok(&sb
        .weir(&["rollback", "m.toml", "sales", "--partition", "north"])
        .output()
        .unwrap());
    let back = sb.store("sales", "north").latest().unwrap().unwrap();
    assert_eq!(back.attempt_dir, old.attempt_dir);
    ok(&sb
        .weir(&[
            "gc",
            "m.toml",
            "--older-than",
            "0s",
            "--keep-generations",
            "0",
            "--apply",
        ])
        .output()
        .unwrap());
    assert_eq!(sb.entries("sales", "north", "attempts").len(), 2);
    let table = read_table_from(&root, 0, false);
    assert_eq!(
        table["versions"],
        serde_json::json!([0, 1, 2, 3]),
        "{table}"
    );
    check_newest(&table);
    assert_eq!(newest(&table)["north"], table["tables"]["1"]["north"]);
    let files = files_json(&sb, "sales", &[]);
    let seen = check_against_disk(&sb, "sales", &files);
    assert_eq!(seen.len(), 4, "{seen:?}");
    let check = sb.weir(&["status", "m.toml", "--check"]).output().unwrap();
    assert!(
        !stdout(&check).contains("TABLE_BEHIND"),
        "{}",
        stdout(&check)
    );

    // Both partitions republished: the newest version's files are all in
    // the new layout, and Polars' native scan reads it.
    ok(&sb
        .weir(&[
            "retry",
            "m.toml",
            "pq",
            "--partition",
            "north",
            "--note",
            "rebuild",
        ])
        .output()
        .unwrap());
    republish("R3", "north", "10");
    republish("R3", "south", "20");
    // The same bytes as generation 1, in the new layout: the same audited
    // digest and file sums.
    let again = sb.store("sales", "north").latest().unwrap().unwrap();
    assert!(again.attempt_dir.ends_with("/region=north"));
    assert_eq!(
        (&again.digest, &again.files, &again.file_sums),
        (&old.digest, &old.files, &old.file_sums)
    );
    let table = read_table_from(&root, 5, true);
    assert_eq!(
        table["versions"],
        serde_json::json!([0, 1, 2, 3, 4, 5]),
        "{table}"
    );
    check_newest(&table);
}

const DUCK_MANIFEST: &str = r#"
[pipeline]
name = "duck"
code_version = "1"
warehouse = "wh"

[partitions.region]
kind = "static"
keys = ["north", "south"]

[tasks.pq]
command = ["sh", "pq.sh"]
output = { dataset = "sales", format = "parquet", grain = ["id"], table = "delta" }

[tasks.flat]
command = ["sh", "flat.sh"]
output = { dataset = "flat", format = "csv", grain = ["id"] }

[tasks.lines]
command = ["sh", "lines.sh"]
output = { dataset = "lines", format = "jsonl", grain = ["id"] }
"#;

/// DuckDB reads the files `argv[1]` names (a JSON array of paths) in
/// format `argv[2]` and prints the columns `argv[3]` (a JSON array) of
/// every row as text, rows sorted, as one JSON document.
const DUCK_READ: &str = r#"
import json, sys, duckdb
paths, fmt, columns = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
listed = "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"
reader = {
    "parquet": f"read_parquet({listed})",
    "csv": f"read_csv({listed})",
    "jsonl": f"read_json({listed}, format = 'newline_delimited')",
}[fmt]
select = ", ".join('"' + c + '"' for c in columns)
rows = duckdb.sql(f"select {select} from {reader}").fetchall()
print(json.dumps(sorted([[None if v is None else str(v) for v in r] for r in rows])))
"#;

/// `weir show m.toml DATASET --partition P --json`: its columns and its
/// rows (cells as text), rows sorted.
#[track_caller]
fn show_rows(sb: &Sandbox, dataset: &str, partition: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let out = sb
        .weir(&[
            "show",
            "m.toml",
            dataset,
            "--partition",
            partition,
            "--json",
        ])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let columns = doc["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    let mut rows: Vec<Vec<String>> = doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|c| match c {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .collect();
    rows.sort();
    (columns, rows)
}

/// DuckDB's rows of `paths` ([`DUCK_READ`]).
#[track_caller]
fn duck_rows(paths: &[&str], format: &str, columns: &[String]) -> Vec<Vec<String>> {
    let out = std::process::Command::new("python3")
        .args(["-c", DUCK_READ])
        .arg(serde_json::json!(paths).to_string())
        .arg(format)
        .arg(serde_json::json!(columns).to_string())
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "duckdb: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("one JSON document")
}

// The stable read path serves a reader with no weir in
// it. DuckDB (its Python package: the delta extension is downloaded at
// run time, which this build cannot do) reads the files `weir files
// --json` lists of a Parquet (Delta table), a CSV and a JSON Lines
// dataset, per partition, after a first run and after a forced republish,
// and gets exactly the rows `weir show` prints; of the table's files it
// also takes the partition column from their `region=<key>/` directories.
#[test]
fn duckdb_reads_what_weir_files_lists() {
    if !python_imports("duckdb") {
        return;
    }
    let sb = Sandbox::new(DUCK_MANIFEST);
    for (region, label) in [("north", "n"), ("south", "s")] {
        for scale in [10, 20] {
            write_rows(
                &sb.path().join(format!("{region}-{scale}.parquet")),
                &[1, 2, 3],
                scale,
                label,
            );
        }
    }
    sb.script(
        "pq.sh",
        "s=${SCALE:-10}\ncp \"$WEIR_PARTITION-$s.parquet\" \"$WEIR_OUTPUT_DIR/part-0.parquet\"\n",
    );
    sb.script(
        "flat.sh",
        "s=${SCALE:-10}\n\
         printf 'id,region,amount\\n1,%s,%s\\n2,%s,%s\\n' \"$WEIR_PARTITION\" \"$s\" \"$WEIR_PARTITION\" \"$((2 * s))\" \
         > \"$WEIR_OUTPUT_DIR/flat.csv\"\n",
    );
    sb.script(
        "lines.sh",
        "s=${SCALE:-10}\n\
         printf '{\"id\":1,\"region\":\"%s\",\"amount\":%s}\\n' \"$WEIR_PARTITION\" \"$s\" > \"$WEIR_OUTPUT_DIR/a.jsonl\"\n\
         printf '{\"id\":2,\"region\":\"%s\",\"amount\":%s}\\n' \"$WEIR_PARTITION\" \"$((3 * s))\" > \"$WEIR_OUTPUT_DIR/b.jsonl\"\n",
    );
    let compare = |sb: &Sandbox| {
        for (dataset, format) in [("sales", "parquet"), ("flat", "csv"), ("lines", "jsonl")] {
            let files = files_json(sb, dataset, &[]);
            for partition in ["north", "south"] {
                let paths: Vec<&str> = files
                    .iter()
                    .filter(|f| f["partition"] == partition)
                    .map(|f| f["path"].as_str().unwrap())
                    .collect();
                assert!(!paths.is_empty(), "{dataset} {partition}: {files:?}");
                let (columns, shown) = show_rows(sb, dataset, partition);
                assert_eq!(
                    duck_rows(&paths, format, &columns),
                    shown,
                    "{dataset} {partition}"
                );
                if dataset == "sales" {
                    let region = duck_rows(&paths, format, &["region".to_owned()]);
                    assert_eq!(region, vec![vec![partition.to_owned()]; shown.len()]);
                }
            }
        }
    };
    ok(&sb.run("R1", &[]));
    compare(&sb);
    let (_, first) = show_rows(&sb, "lines", "north");
    let out = sb
        .weir(&["run", "m.toml", "--run-id", "R2", "--force"])
        .env("SCALE", "20")
        .output()
        .unwrap();
    ok(&out);
    let (_, second) = show_rows(&sb, "lines", "north");
    assert_ne!(first, second, "the republish changed the rows");
    compare(&sb);
}

// A table partitioned by two schemes, one whose keys need
// percent-encoding in a path (`:` of a time): each file sits under one
// `<scheme>=<key>` directory per scheme, and Polars' native scan, its
// filter on a partition column and delta-rs all read the partition values
// `weir show` publishes (the keys, decoded).
#[test]
fn delta_partition_columns_of_two_schemes_read_in_polars() {
    if !python_readers() {
        return;
    }
    let manifest = r#"
[pipeline]
name = "lake"
code_version = "1"
warehouse = "wh"

[partitions.region]
kind = "static"
keys = ["north", "south"]

[partitions.half]
kind = "minutely"
every = 30
start = "2026-09-20T13:00"
end = "2026-09-20T13:30"
timezone = "UTC"

[tasks.pq]
command = ["sh", "pq.sh"]
partitioned_by = ["region", "half"]
output = { dataset = "sales", format = "parquet", grain = ["id"], table = "delta" }
"#;
    let sb = Sandbox::new(manifest);
    write_rows(&sb.path().join("rows.parquet"), &[1, 2], 10, "x");
    sb.script(
        "pq.sh",
        "cp rows.parquet \"$WEIR_OUTPUT_DIR/part-0.parquet\"\n",
    );
    let mut every = Vec::new();
    for key in [
        "north|2026-09-20T13:00",
        "north|2026-09-20T13:30",
        "south|2026-09-20T13:00",
        "south|2026-09-20T13:30",
    ] {
        every.extend(["--partition", key]);
    }
    ok(&sb.run("R1", &every));
    let files = files_json(&sb, "sales", &[]);
    let mut keys: Vec<String> = files
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap();
            let key = f["partition"].as_str().unwrap();
            let (region, half) = key.split_once('|').unwrap();
            let below = format!("/region={region}/half={}/data/", half.replace(':', "%3A"));
            assert!(path.contains(&below), "{path} has no {below}");
            key.to_owned()
        })
        .collect();
    keys.sort();
    assert_eq!(keys.len(), 4, "{files:?}");
    let script = r#"
import json, sys, deltalake, polars as pl
root = sys.argv[1]
pairs = lambda rows: sorted(f'{r["region"]}|{r["half"]}|{r["id"]}' for r in rows)
t = deltalake.DeltaTable(root)
rs = pl.DataFrame(deltalake.QueryBuilder().register("t", t).execute("select * from t").read_all())
native = pl.read_delta(root)
half = "2026-09-20T13:30"
filtered = pl.scan_delta(root).filter(pl.col("half") == half).collect()
print(json.dumps({
    "delta_rs": pairs(rs.iter_rows(named=True)),
    "polars": pairs(native.iter_rows(named=True)),
    "filtered": pairs(filtered.iter_rows(named=True)),
}))
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(sb.path().join("wh").join("sales"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let read: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let expected: Vec<String> = keys
        .iter()
        .flat_map(|k| [format!("{k}|1"), format!("{k}|2")])
        .collect();
    assert_eq!(read["delta_rs"], serde_json::json!(expected), "{read}");
    assert_eq!(read["polars"], serde_json::json!(expected), "{read}");
    let at_half: Vec<&String> = expected.iter().filter(|k| k.contains("T13:30|")).collect();
    assert_eq!(at_half.len(), 4, "{expected:?}");
    assert_eq!(read["filtered"], serde_json::json!(at_half), "{read}");
}
