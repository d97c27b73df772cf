//! Issue 27: readers outside weir. `weir files` names exactly the visible
//! generation's files of each partition (path, size, SHA-256, partition,
//! generation), so a script or DuckDB reads what is published.

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
        let data = sb.path().join("wh").join(&record.attempt_dir).join("data");
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

// Issue 27 item 4: `weir files` lists, for a Parquet and a CSV dataset and
// every published partition, exactly the visible generation's files with
// the size and SHA-256 on disk; after a forced republish it names the new
// generation's files, after a rollback the older ones again; `--partition`
// selects; the text form names the same files with full digests.
#[test]
fn issue_27_files_lists_the_visible_files_of_each_partition() {
    let sb = sandbox();
    ok(&sb.run("R1", &["--partition", "north", "--partition", "south"]));

    let files = files_json(&sb, "sales", &[]);
    let seen = check_against_disk(&sb, "sales", &files);
    let parts: Vec<(&str, u64)> = seen.iter().map(|(p, g, _)| (p.as_str(), *g)).collect();
    assert_eq!(
        parts,
        [("north", 1), ("north", 1), ("south", 1), ("south", 1)]
    );
    assert!(seen[0].2.ends_with("/data/part-0.parquet"), "{seen:?}");
    assert!(seen[1].2.ends_with("/data/part-1.parquet"), "{seen:?}");
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

// Issue 27 item 4: `weir files` exit codes, as README's table: a partition
// in the scheme but never published exits 1, one outside the scheme or an
// unknown dataset exits 2, and a visible file that no longer holds what
// was published exits 5 naming it, rather than handing it to a reader.
#[test]
fn issue_27_files_refuses_what_it_cannot_vouch_for() {
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
