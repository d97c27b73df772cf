//! Parquet outputs and inputs through the whole engine: audited, digested
//! like CSV, reconciled against CSV, shown as CSV or JSON, and refused with
//! the file and column named when a candidate's files disagree.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Date32Array, Int64Array, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use weir::events::State;

use crate::support::{stderr, stdout, Sandbox};

const MANIFEST: &str = r#"
[pipeline]
name = "pq"
code_version = "1"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["good", "drift"]

[datasets.raw]
path = "raw.csv"
format = "csv"

[datasets.ext]
path = "ext.parquet"
format = "parquet"

[tasks.make]
command = ["sh", "make.sh"]
inputs = ["raw", "ext"]
output = { dataset = "out", format = "parquet", grain = ["id"] }
gates = [
  { check = "reconcile", column = "amount", aggregate = "sum", input = "raw", input_column = "amount" },
  { check = "not_null", columns = ["name", "day"] },
  { check = "accepted_values", column = "paid", values = ["true", "false"] },
]

[tasks.flat]
command = ["sh", "flat.sh"]
inputs = ["out"]
output = { dataset = "flat", format = "csv", grain = ["id"] }
gates = [
  { check = "reconcile", column = "amount", aggregate = "sum", input = "out", input_column = "amount" },
]
"#;

/// Writes rows (id, name, paid, day, amount) as a Parquet file with two
/// rows per row group.
fn write(path: &Path, ids: &[i64], id_as_text: bool) {
    let ids_column: ArrayRef = if id_as_text {
        Arc::new(StringArray::from(
            ids.iter().map(i64::to_string).collect::<Vec<_>>(),
        ))
    } else {
        Arc::new(Int64Array::from(ids.to_vec()))
    };
    let batch = RecordBatch::try_from_iter(vec![
        ("id", ids_column),
        (
            "name",
            Arc::new(StringArray::from(
                ids.iter().map(|id| format!("n{id}")).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            "paid",
            Arc::new(BooleanArray::from(
                ids.iter().map(|id| id % 2 == 0).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            "day",
            Arc::new(Date32Array::from(vec![20_716; ids.len()])) as ArrayRef,
        ),
        (
            "amount",
            Arc::new(Int64Array::from(
                ids.iter().map(|id| id * 100).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
    ])
    .expect("a batch");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(2))
        .build();
    let file = std::fs::File::create(path).expect("create");
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

fn sandbox() -> Sandbox {
    let sb = Sandbox::new(MANIFEST);
    write(&sb.path().join("ext.parquet"), &[1, 2, 3], false);
    write(&sb.path().join("second_good.parquet"), &[4, 5], false);
    write(&sb.path().join("second_drift.parquet"), &[4, 5], true);
    std::fs::write(
        sb.path().join("raw.csv"),
        "id,amount\n1,100\n2,200\n3,300\n4,400\n5,500\n",
    )
    .expect("raw");
    // The task publishes the external Parquet input and a second file.
    sb.script(
        "make.sh",
        "cp \"$WEIR_INPUT_EXT\" \"$WEIR_OUTPUT_DIR/part-0.parquet\"\n\
         cp \"second_$WEIR_PARTITION.parquet\" \"$WEIR_OUTPUT_DIR/part-1.parquet\"\n",
    );
    // The same rows as CSV, columns in another order.
    sb.script(
        "flat.sh",
        "printf 'amount,day,id,name,paid\\n500,2026-09-20,5,n5,false\\n100,2026-09-20,1,n1,false\\n\
200,2026-09-20,2,n2,true\\n300,2026-09-20,3,n3,false\\n400,2026-09-20,4,n4,true\\n' \
         > \"$WEIR_OUTPUT_DIR/flat.csv\"\n",
    );
    sb
}

// A task publishes Parquet; every gate runs on it (a reconcile
// against a CSV input included), its digest equals the digest of the same
// rows published as CSV downstream (which reconciles against the Parquet
// output), and `weir show` prints it as CSV or JSON.
#[test]
fn parquet_output_is_audited_digested_and_shown_like_csv() {
    let sb = sandbox();
    let out = sb.run("R1", &["--partition", "good"]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let parquet = sb
        .store("out", "good")
        .latest()
        .unwrap()
        .expect("published");
    let csv = sb
        .store("flat", "good")
        .latest()
        .unwrap()
        .expect("published");
    assert_eq!(parquet.rows, 5);
    assert_eq!(parquet.files, ["part-0.parquet", "part-1.parquet"]);
    let flat = sb
        .weir(&["show", "m.toml", "flat", "--partition", "good"])
        .output()
        .unwrap();
    let mut flat_rows: Vec<String> = stdout(&flat).lines().map(str::to_owned).collect();
    flat_rows.sort();
    let shown = sb
        .weir(&["show", "m.toml", "out", "--partition", "good"])
        .output()
        .unwrap();
    let mut out_rows: Vec<String> = stdout(&shown).lines().map(str::to_owned).collect();
    out_rows.sort();
    assert_eq!(flat_rows, out_rows);
    assert_eq!(parquet.digest, csv.digest);

    let shown = sb
        .weir(&["show", "m.toml", "out", "--partition", "good"])
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert_eq!(
        stdout(&shown),
        "amount,day,id,name,paid\n100,2026-09-20,1,n1,false\n200,2026-09-20,2,n2,true\n\
300,2026-09-20,3,n3,false\n400,2026-09-20,4,n4,true\n500,2026-09-20,5,n5,false\n"
    );
    let json = sb
        .weir(&["show", "m.toml", "out", "--partition", "good", "--json"])
        .output()
        .unwrap();
    assert!(json.status.success(), "{}", stderr(&json));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(
        doc["columns"],
        serde_json::json!(["amount", "day", "id", "name", "paid"])
    );
    assert_eq!(
        doc["rows"][0],
        serde_json::json!(["100", "2026-09-20", "1", "n1", "false"])
    );
    assert_eq!(doc["rows"].as_array().map(Vec::len), Some(5));
}

// Files of one Parquet candidate whose schemas differ fail the
// audit (quarantined, nothing published) naming the file and the column.
#[test]
fn parquet_schema_drift_between_files_is_refused_by_name() {
    let sb = sandbox();
    let out = sb.run("R2", &["--partition", "drift", "--task", "make"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(sb.store("out", "drift").latest().unwrap().is_none());
    let events = sb.events("R2");
    let failed = events
        .iter()
        .find(|e| e.state == State::GateFailed)
        .unwrap_or_else(|| panic!("no GATE_FAILED in {events:?}"));
    assert!(
        failed
            .detail
            .contains("part-1.parquet` column `id` is Utf8 but in the first file it is Int64"),
        "{}",
        failed.detail
    );
}
