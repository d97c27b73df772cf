//! Parquet values the audit read wrongly or not at all (an empty
//! dictionary, Arrow's null type, year 9999, a double in a list, gzip and
//! brotli), each against its CSV twin: same digest, same `weir show`; and
//! the audit's bounds (a record or value too large, too many files), each a
//! deterministic gate failure naming what is over.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::builder::{Float64Builder, ListBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, Date32Array, DictionaryArray, Float64Array, Int32Array, Int64Array, NullArray,
    RecordBatch, StringArray, TimestampSecondArray,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{BrotliLevel, Compression, GzipLevel};
use parquet::file::properties::WriterProperties;
use weir::events::State;

use crate::support::{stderr, stdout, Engine, Sandbox};

/// Two tasks publishing the same rows, one as Parquet and one as CSV; a
/// third publishes the Parquet file under a `not_null` gate on `v`.
const TWINS: &str = r#"
[pipeline]
name = "twins"
code_version = "1"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["p"]

[tasks.pq]
command = ["sh", "-c", "cp twin.parquet \"$WEIR_OUTPUT_DIR/part-0.parquet\""]
output = { dataset = "pq", format = "parquet", grain = ["id"] }

[tasks.flat]
command = ["sh", "-c", "cp twin.csv \"$WEIR_OUTPUT_DIR/part-0.csv\""]
output = { dataset = "flat", format = "csv", grain = ["id"] }
"#;

/// Writes `batch` as a Parquet file with `compression`.
fn write_parquet(path: &Path, batch: &RecordBatch, compression: Compression) {
    let props = WriterProperties::builder()
        .set_compression(compression)
        .build();
    let file = std::fs::File::create(path).expect("create");
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
    writer.write(batch).expect("write");
    writer.close().expect("close");
}

/// What the Parquet twin and the CSV twin published: their digests and
/// what `weir show` prints of each.
struct Twins {
    parquet_digest: String,
    csv_digest: String,
    parquet_shown: String,
    csv_shown: String,
}

/// Publishes `batch` as Parquet and `csv` as CSV and reads both back.
#[track_caller]
fn twins(batch: &RecordBatch, csv: &str, compression: Compression) -> Twins {
    let sb = Sandbox::new(TWINS);
    write_parquet(&sb.path().join("twin.parquet"), batch, compression);
    std::fs::write(sb.path().join("twin.csv"), csv).expect("csv");
    // Bounded: a panic on a reader thread once left the run waiting forever.
    let run = sb.weir(&["run", "m.toml", "--run-id", "R1"]);
    let out = Engine::spawn(run, sb.path(), "run").finish(Duration::from_secs(120));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let digest = |dataset: &str| {
        sb.store(dataset, "p")
            .latest()
            .expect("log readable")
            .expect("published")
            .digest
            .as_str()
            .to_owned()
    };
    let show = |dataset: &str| {
        let out = sb
            .weir(&["show", "m.toml", dataset, "--partition", "p"])
            .output()
            .expect("weir runs");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stderr(&out), "");
        stdout(&out)
    };
    Twins {
        parquet_digest: digest("pq"),
        csv_digest: digest("flat"),
        parquet_shown: show("pq"),
        csv_shown: show("flat"),
    }
}

/// Asserts that the twins agree and that `weir show` prints `shown` (the
/// CSV twin's columns are in sorted order, as Parquet's are shown).
#[track_caller]
fn assert_twins(twins: &Twins, shown: &str) {
    assert_eq!(twins.parquet_shown, shown);
    assert_eq!(twins.csv_shown, shown);
    assert_eq!(twins.parquet_digest, twins.csv_digest);
}

fn ids(n: i64) -> ArrayRef {
    Arc::new(Int64Array::from((1..=n).collect::<Vec<_>>()))
}

// A dictionary column holding only nulls (its dictionary empty) panicked
// inside arrow-array; its values are nulls, as an empty CSV field is.
#[test]
fn empty_dictionary_column_is_null_like_its_csv_twin() {
    let keys = Int32Array::from(vec![None, None]);
    let values: ArrayRef = Arc::new(StringArray::from(Vec::<&str>::new()));
    let dictionary = DictionaryArray::<Int32Type>::try_new(keys, values).expect("dictionary");
    let batch = RecordBatch::try_from_iter(vec![
        ("id", ids(2)),
        ("v", Arc::new(dictionary) as ArrayRef),
    ])
    .expect("batch");
    let twins = twins(&batch, "id,v\n1,\n2,\n", Compression::SNAPPY);
    assert_twins(&twins, "id,v\n1,\n2,\n");
}

// A column of Arrow's null type was hashed and shown as empty strings, so
// a `not_null` gate passed and the digest differed from the same nulls in
// CSV.
#[test]
fn null_type_column_is_null_like_its_csv_twin() {
    let batch = RecordBatch::try_from_iter(vec![
        ("id", ids(2)),
        ("v", Arc::new(NullArray::new(2)) as ArrayRef),
    ])
    .expect("batch");
    let twins = twins(&batch, "id,v\n1,\n2,\n", Compression::SNAPPY);
    assert_twins(&twins, "id,v\n1,\n2,\n");

    // A `not_null` gate sees the nulls.
    let sb = Sandbox::new(&TWINS.replace(
        "grain = [\"id\"] }\n\n[tasks.flat]",
        "grain = [\"id\"] }\ngates = [{ check = \"not_null\", columns = [\"v\"] }]\n\n[tasks.flat]",
    ));
    write_parquet(&sb.path().join("twin.parquet"), &batch, Compression::SNAPPY);
    let out = sb.run("R1", &["--task", "pq"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(sb.store("pq", "p").latest().unwrap().is_none());
    let events = sb.events("R1");
    let failed = events
        .iter()
        .find(|e| e.state == State::GateFailed)
        .unwrap_or_else(|| panic!("no GATE_FAILED in {events:?}"));
    assert_eq!(
        failed.detail,
        "not_null(v): expected no nulls in (v), got 2 null values"
    );
}

// `9999-12-31`, the usual open end of a history table, was refused as out
// of range; the whole of year 9999 is a date, and its last second a
// timestamp.
#[test]
fn the_last_day_of_year_9999_is_a_date_like_its_csv_twin() {
    let batch = RecordBatch::try_from_iter(vec![
        ("id", ids(2)),
        (
            "d",
            Arc::new(Date32Array::from(vec![2_932_896, 2_932_895])) as ArrayRef,
        ),
        (
            "ts",
            Arc::new(
                TimestampSecondArray::from(vec![253_402_300_799, 253_402_214_400])
                    .with_timezone("UTC"),
            ) as ArrayRef,
        ),
    ])
    .expect("batch");
    let shown = "d,id,ts\n9999-12-31,1,9999-12-31T23:59:59Z\n9999-12-30,2,9999-12-31T00:00:00Z\n";
    let twins = twins(&batch, shown, Compression::SNAPPY);
    assert_twins(&twins, shown);
}

// A double inside a list was written `1e+21` but `1e21` at the top level;
// one rule, the top level's.
#[test]
fn a_double_in_a_list_is_written_as_at_the_top_level() {
    let mut list = ListBuilder::new(Float64Builder::new());
    list.values().append_value(1e21);
    list.values().append_value(0.5);
    list.values().append_value(1e-7);
    list.append(true);
    let batch = RecordBatch::try_from_iter(vec![
        ("id", ids(1)),
        ("f", Arc::new(Float64Array::from(vec![1e21])) as ArrayRef),
        ("l", Arc::new(list.finish()) as ArrayRef),
    ])
    .expect("batch");
    let twins = twins(
        &batch,
        "f,id,l\n1e21,1,\"[1e21,0.5,1e-7]\"\n",
        Compression::SNAPPY,
    );
    assert_twins(&twins, "f,id,l\n1e21,1,\"[1e21,0.5,1e-7]\"\n");
}

// Gzip and brotli are common Parquet codecs; a file in either digests as the
// snappy one and its CSV twin.
#[test]
fn gzip_and_brotli_files_digest_as_snappy_and_csv() {
    let names: Vec<Option<String>> = (1..=300)
        .map(|i| (i % 7 != 0).then(|| format!("name {i}")))
        .collect();
    let batch = RecordBatch::try_from_iter(vec![
        ("id", ids(300)),
        (
            "name",
            Arc::new(StringArray::from(names.clone())) as ArrayRef,
        ),
    ])
    .expect("batch");
    let mut csv = String::from("id,name\n");
    let mut shown = String::from("id,name\n");
    for (i, name) in (1..=300).zip(&names) {
        let name = name.as_deref().unwrap_or("");
        csv.push_str(&format!("{i},{name}\n"));
        shown.push_str(&format!("{i},{name}\n"));
    }
    let snappy = twins(&batch, &csv, Compression::SNAPPY);
    assert_twins(&snappy, &shown);
    for codec in [
        Compression::GZIP(GzipLevel::default()),
        Compression::BROTLI(BrotliLevel::default()),
    ] {
        let other = twins(&batch, &csv, codec);
        assert_twins(&other, &shown);
        assert_eq!(other.parquet_digest, snappy.parquet_digest, "{codec:?}");
    }
}

/// A task writing its output with `script` (sh), run under an address-space
/// limit of `limit_mib` MiB: the engine's exit code, stdout, stderr, and
/// the detail of its GATE_FAILED event.
fn run_limited(
    script: &str,
    format: &str,
    limit_mib: u64,
) -> (Option<i32>, String, String, String) {
    let manifest = format!(
        r#"
[pipeline]
name = "limits"
code_version = "1"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["p"]

[tasks.big]
command = ["sh", "write.sh"]
output = {{ dataset = "big", format = "{format}", grain = ["id"] }}
"#
    );
    // On tmpfs where there is one: creating 200,000 files on a journaled
    // disk under load took minutes, on tmpfs about two seconds.
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("a tempdir");
    std::fs::write(dir.path().join("m.toml"), manifest).expect("manifest");
    let sb = Sandbox { dir };
    sb.script("write.sh", script);
    let weir = env!("CARGO_BIN_EXE_weir");
    // `ulimit -v` (the shell's, so no util-linux is needed) limits the
    // engine's address space, then the engine replaces the shell.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {} && exec \"$0\" \"$@\"",
            limit_mib << 10
        ))
        .arg(weir)
        .args(["run", "m.toml", "--run-id", "R1"])
        // glibc reserves 64 MiB of address space per malloc arena, up to
        // eight per core: bounded, so the limit means the same on any host.
        .env("MALLOC_ARENA_MAX", "2")
        .current_dir(sb.path())
        .output()
        .expect("sh runs");
    let events = sb.events("R1");
    let detail = events
        .iter()
        .find(|e| e.state == State::GateFailed)
        .map(|e| e.detail.clone())
        .unwrap_or_default();
    // Published exactly when the run succeeded.
    assert_eq!(
        sb.store("big", "p").latest().unwrap().is_some(),
        out.status.code() == Some(0)
    );
    // The sandbox's path is in every message: `<dir>` stands for it.
    let dir = sb.path().display().to_string();
    let redact = |text: String| text.replace(&dir, "<dir>");
    (
        out.status.code(),
        redact(stdout(&out)),
        redact(stderr(&out)),
        redact(detail),
    )
}

// A 1 GiB field (a sparse file: the task's field never ends) took memory
// without bound and the engine was OOM-killed on every rerun. It now fails
// the audit at 128 MiB, naming the file and line, under a 1 GiB
// address-space limit.
#[test]
fn a_1_gib_field_fails_the_audit_within_bounded_memory() {
    let (code, out, err, detail) = run_limited(
        "printf 'id,payload\\n1,' > \"$WEIR_OUTPUT_DIR/big.csv\"\n\
         truncate -s 1G \"$WEIR_OUTPUT_DIR/big.csv\"\n",
        "csv",
        1024,
    );
    let reason = "candidate cannot be read: `<dir>/wh/big/p/attempts/00000000000000000001/data/\
big.csv` line 2: the record is larger than 128 MiB, the most the audit reads";
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(detail, reason);
    assert_eq!(
        out,
        format!(
            "run R1: 1 task instance: 1 quarantined; 0 retries\n  QUARANTINED big p: \
deterministic failure: {reason}\nevents: <dir>/wh/_runs/R1/events.jsonl\n"
        )
    );
    assert_eq!(
        err,
        format!(
            "big p attempt 1 token 1: GATE_FAILED {reason}\n\
big p attempt 1 token 1: QUARANTINED deterministic failure: {reason}: quarantined, not retried\n"
        )
    );
}

// A candidate of 200,000 files is refused before any is read (the limit
// is 100,000), naming the limit, as a gate failure, under a 1 GiB
// address-space limit.
#[test]
fn two_hundred_thousand_files_fail_the_audit_within_bounded_memory() {
    let (code, out, err, detail) = run_limited(
        "cd \"$WEIR_OUTPUT_DIR\" && seq -f 'f%06g.csv' 1 200000 | xargs touch\n",
        "csv",
        1024,
    );
    let reason = "the output is not publishable: more than 100000 `*.csv` files: a partition \
holds at most 100000 (write fewer, larger files)";
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(detail, reason);
    assert_eq!(
        out,
        format!(
            "run R1: 1 task instance: 1 quarantined; 0 retries\n  QUARANTINED big p: \
deterministic failure: {reason}\nevents: <dir>/wh/_runs/R1/events.jsonl\n"
        )
    );
    assert_eq!(
        err,
        format!(
            "big p attempt 1 token 1: GATE_FAILED {reason}\n\
big p attempt 1 token 1: QUARANTINED deterministic failure: {reason}: quarantined, not retried\n"
        )
    );
}

// A JSON Lines value nested 30,000 deep (one line of 60 KB) overflowed the
// audit's stack: the engine aborted with every other attempt of the run and
// wrote no marker, so every rerun crashed again. It now fails its own
// partition's gate, naming file, line, column and the limit, and the
// healthy partition of the same run publishes.
#[test]
fn a_line_nested_30000_deep_fails_its_own_gate_while_a_healthy_partition_publishes() {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "deep"
code_version = "1"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["deep", "flat"]

[tasks.t]
command = ["sh", "write.sh"]
output = { dataset = "t", format = "jsonl", grain = ["id"] }
"#,
    );
    let deep = format!(
        "{{\"id\":1,\"v\":{}{}}}\n",
        "[".repeat(30_000),
        "]".repeat(30_000)
    );
    std::fs::write(sb.path().join("deep.jsonl"), deep).expect("deep line");
    sb.script(
        "write.sh",
        "if [ \"$WEIR_PARTITION\" = deep ]; then cp deep.jsonl \"$WEIR_OUTPUT_DIR/x.jsonl\"\n\
         else echo '{\"id\":1,\"v\":[[2]]}' > \"$WEIR_OUTPUT_DIR/x.jsonl\"; fi\n",
    );
    let reason = "candidate cannot be read: `$SB/wh/t/deep/attempts/00000000000000000001/data/\
x.jsonl` line 1: the value of column `v` is nested deeper than 128 levels, the most the audit reads";
    let digest = "sha256:[..]";
    sb.run_cmd("R1", &[])
        .assert()
        .code(1)
        .stdout(&format!(
            "run R1: 2 task instances: 1 published, 1 quarantined; 0 retries\n  QUARANTINED t deep: \
deterministic failure: {reason}\nevents: $SB/wh/_runs/R1/events.jsonl\n"
        ))
        .stderr_unordered(&format!(
            "t flat attempt 1 token 1: PUBLISHED generation 1: 1 rows, {digest}\n\
t deep attempt 1 token 1: GATE_FAILED {reason}\n\
t deep attempt 1 token 1: QUARANTINED deterministic failure: {reason}: quarantined, not retried\n"
        ));
    assert!(sb.store("t", "flat").latest().unwrap().is_some());
    assert!(sb.store("t", "deep").latest().unwrap().is_none());
    let failed: Vec<String> = sb
        .events("R1")
        .iter()
        .filter(|e| e.state == State::GateFailed)
        .map(|e| e.detail.replace(&sb.path().display().to_string(), "$SB"))
        .collect();
    assert_eq!(failed, [reason]);
}

/// A CSV file of `columns` columns (`id` then `c…` in descending order, so
/// the file's order is not the sorted one) and two rows.
fn wide_csv(columns: usize) -> String {
    let names: Vec<String> = (1..columns).rev().map(|i| format!("c{i:06}")).collect();
    let ones = vec!["1"; columns - 1].join(",");
    format!("id,{}\n1,{ones}\n2,{ones}\n", names.join(","))
}

// `weir show` of a file of 1 million columns did not finish in 10 minutes
// (each header name was looked for by a scan of all the columns), and the
// audit kept about 300 bytes a column. Files of more than 100,000 columns
// now fail the audit naming the limit; one of 100,000 publishes and shows
// in its own column order.
#[test]
fn a_file_of_100000_columns_publishes_and_shows_and_one_more_fails() {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "wide"
code_version = "1"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["at", "over"]

[tasks.w]
command = ["sh", "-c", "cp \"$WEIR_PARTITION.csv\" \"$WEIR_OUTPUT_DIR/w.csv\""]
output = { dataset = "w", format = "csv", grain = ["id"] }
"#,
    );
    let at = wide_csv(weir::audit::MAX_COLUMNS);
    std::fs::write(sb.path().join("at.csv"), &at).expect("csv");
    std::fs::write(
        sb.path().join("over.csv"),
        wide_csv(weir::audit::MAX_COLUMNS + 1),
    )
    .expect("csv");
    let reason =
        "candidate cannot be read: `$SB/wh/w/over/attempts/00000000000000000001/data/w.csv` \
line 1: more than 100000 columns, the most the audit reads";
    sb.run_cmd("R1", &[])
        .assert()
        .code(1)
        .stdout(&format!(
            "run R1: 2 task instances: 1 published, 1 quarantined; 0 retries\n  QUARANTINED w over: \
deterministic failure: {reason}\nevents: $SB/wh/_runs/R1/events.jsonl\n"
        ))
        .stderr_unordered(&format!(
            "w at attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:[..]\n\
w over attempt 1 token 1: GATE_FAILED {reason}\n\
w over attempt 1 token 1: QUARANTINED deterministic failure: {reason}: quarantined, not retried\n"
        ));
    // Bounded, against a hang (the file order is checked for speed in
    // `cli::status`, on a million columns).
    let show = sb.weir(&["show", "m.toml", "w", "--partition", "at"]);
    let out = Engine::spawn(show, sb.path(), "show").finish(Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    assert!(stdout(&out) == at, "`weir show` differs from the file");
}

// Half floats were hashed and shown as their f32 widening (0.1 as
// `0.099975586`): each is now the shortest text that rounds back to it,
// in the style of the other floats, so a CSV twin holding that text
// digests the same, and a list of them too.
#[test]
fn half_floats_are_their_shortest_text_like_their_csv_twin() {
    let values = [0.1_f32, 65504.0, -0.0, 5.960_464_5e-8, 1.0];
    let halves: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f32(v)).collect();
    let list = arrow_array::ListArray::from_iter_primitive::<arrow_array::types::Float16Type, _, _>(
        vec![Some(halves.iter().map(|&h| Some(h)).collect::<Vec<_>>()); 5],
    );
    let batch = RecordBatch::try_from_iter(vec![
        ("id", ids(5)),
        (
            "h",
            Arc::new(arrow_array::Float16Array::from(halves.clone())) as ArrayRef,
        ),
        ("l", Arc::new(list) as ArrayRef),
    ])
    .expect("batch");
    let texts = ["0.1", "65500.0", "-0.0", "6e-8", "1.0"];
    let list = format!("\"[{}]\"", texts.join(","));
    // Columns in sorted order, as Parquet's are shown.
    let csv: String = std::iter::once("h,id,l\n".to_owned())
        .chain(
            texts
                .iter()
                .enumerate()
                .map(|(i, text)| format!("{text},{},{list}\n", i + 1)),
        )
        .collect();
    let twins = twins(&batch, &csv, Compression::SNAPPY);
    assert_twins(&twins, &csv);
}

// A JSON Lines line of 100 MB holding 8 million short keys was parsed into
// a map of them all before its columns were counted: 1.2 GB and 26 s
// before it failed. It now fails at the 100,001st key, under a 1 GiB
// address-space limit.
#[test]
fn a_line_of_8_million_keys_fails_the_audit_within_bounded_memory() {
    let (code, out, err, detail) = run_limited(
        "awk 'BEGIN { printf \"{\"; for (i = 0; i < 8000000; i++) printf \"%s\\\"k%d\\\":0\", \
         (i ? \",\" : \"\"), i; print \"}\" }' > \"$WEIR_OUTPUT_DIR/keys.jsonl\"\n",
        "jsonl",
        1024,
    );
    let reason = "candidate cannot be read: `<dir>/wh/big/p/attempts/00000000000000000001/data/\
keys.jsonl` line 1: more than 100000 columns, the most the audit reads";
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(detail, reason);
    assert_eq!(
        out,
        format!(
            "run R1: 1 task instance: 1 quarantined; 0 retries\n  QUARANTINED big p: \
deterministic failure: {reason}\nevents: <dir>/wh/_runs/R1/events.jsonl\n"
        )
    );
}

// A JSON Lines value of 30 MB holding 10 million empty arrays was
// collected item by item before its compact text was written (575 MB,
// 1.1 GB for 20 million); it is now written as it is parsed, and the row
// publishes under a 512 MiB address-space limit.
#[test]
fn a_value_of_10_million_items_is_read_within_bounded_memory() {
    let (code, out, err, detail) = run_limited(
        "awk 'BEGIN { printf \"{\\\"id\\\":1,\\\"v\\\":[\"; for (i = 0; i < 10000000; i++) \
         printf \"%s[]\", (i ? \",\" : \"\"); print \"]}\" }' > \"$WEIR_OUTPUT_DIR/items.jsonl\"\n",
        "jsonl",
        512,
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(detail, "");
}
