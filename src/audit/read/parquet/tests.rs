use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{Int32Builder, ListBuilder};
use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Float32Array,
    Float64Array, Int64Array, RecordBatch, StringArray, StructArray, Time64MicrosecondArray,
    TimestampMicrosecondArray, TimestampMillisecondArray,
};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

use crate::audit::read::RowFold;
use crate::audit::{audit, digest_files, read_rows, AuditError, AuditSpec, Format, Gate};
use crate::audit::{Aggregate, InputData};
use std::path::{Path, PathBuf};

/// Writes `batch` as a Parquet file, `group` rows per row group.
fn write(path: &Path, batch: &RecordBatch, group: usize) -> PathBuf {
    let file = std::fs::File::create(path).expect("create");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(group))
        .build();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
    writer.write(batch).expect("write");
    writer.close().expect("close");
    path.to_path_buf()
}

fn people(ids: &[i64]) -> RecordBatch {
    let n = ids.len();
    let names: Vec<Option<String>> = ids
        .iter()
        .map(|id| (id % 3 != 0).then(|| format!("name \"{id}\", ok")))
        .collect();
    RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        ("name", Arc::new(StringArray::from(names)) as ArrayRef),
        (
            "paid",
            Arc::new(BooleanArray::from(
                ids.iter().map(|id| id % 2 == 0).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            "day",
            Arc::new(Date32Array::from(
                (0..n).map(|i| 20_716 + i as i32 % 3).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
    ])
    .expect("batch")
}

fn people_csv(ids: &[i64]) -> String {
    // Columns in another order, rows reversed: neither counts.
    let mut text = String::from("day,paid,name,id\n");
    for (i, id) in ids.iter().enumerate().rev() {
        let day = ["2026-09-20", "2026-09-21", "2026-09-22"][i % 3];
        let name = if id % 3 != 0 {
            format!("\"name \"\"{id}\"\", ok\"")
        } else {
            String::new()
        };
        text.push_str(&format!("{day},{},{name},{id}\n", id % 2 == 0));
    }
    text
}

// The same logical rows digest the same in Parquet, CSV and
// JSON Lines (strings, integers, booleans, dates and nulls).
#[test]
fn parquet_csv_and_jsonl_rows_have_one_digest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ids: Vec<i64> = (1..=1000).collect();
    // Two files, several row groups each, decoded in parallel.
    let a = write(&dir.path().join("a.parquet"), &people(&ids[..600]), 128);
    let b = write(&dir.path().join("b.parquet"), &people(&ids[600..]), 100);
    let csv = dir.path().join("all.csv");
    std::fs::write(&csv, people_csv(&ids)).expect("csv");
    let jsonl = dir.path().join("all.jsonl");
    let mut lines = String::new();
    for (i, id) in ids.iter().enumerate() {
        let day = ["2026-09-20", "2026-09-21", "2026-09-22"][i % 3];
        let name = if id % 3 != 0 {
            serde_json::Value::String(format!("name \"{id}\", ok"))
        } else {
            serde_json::Value::Null
        };
        let row = serde_json::json!({"id": id, "name": name, "paid": id % 2 == 0, "day": day});
        lines.push_str(&format!("{row}\n"));
    }
    std::fs::write(&jsonl, lines).expect("jsonl");

    let parquet = digest_files(&[a.clone(), b], Format::Parquet).expect("parquet");
    let csv = digest_files(&[csv], Format::Csv).expect("csv");
    let jsonl = digest_files(&[jsonl], Format::Jsonl).expect("jsonl");
    assert_eq!(parquet.0, 1000);
    assert_eq!(parquet, csv);
    assert_eq!(parquet, jsonl);
    // Any changed value changes it.
    let changed = write(&dir.path().join("c.parquet"), &people(&[1, 2, 3]), 2);
    let small = dir.path().join("small.csv");
    std::fs::write(&small, people_csv(&[1, 2, 3]).replace(",true,", ",false,")).expect("w");
    assert_ne!(
        digest_files(&[changed], Format::Parquet).expect("digest"),
        digest_files(&[small], Format::Csv).expect("digest")
    );
}

// The canonical text of floats, decimals, timestamps, times,
// nested values and dictionary columns, as docs/design/digest.md documents it.
#[test]
fn parquet_values_render_as_documented() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut list = ListBuilder::new(Int32Builder::new());
    list.values().append_value(1);
    list.values().append_null();
    list.append(true);
    list.append(false);
    let inner = StructArray::from(vec![
        (
            Arc::new(Field::new("z", DataType::Utf8, true)),
            Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef,
        ),
        (
            Arc::new(Field::new("a", DataType::Float64, true)),
            Arc::new(Float64Array::from(vec![1.0, 0.5])) as ArrayRef,
        ),
    ]);
    let dictionary: DictionaryArray<arrow_array::types::Int8Type> =
        vec!["x", "y"].into_iter().collect();
    let batch = RecordBatch::try_from_iter(vec![
        (
            "f64",
            Arc::new(Float64Array::from(vec![2.5, 1e21])) as ArrayRef,
        ),
        (
            "f32",
            Arc::new(Float32Array::from(vec![0.1, f32::NAN])) as ArrayRef,
        ),
        (
            "dec",
            Arc::new(
                Decimal128Array::from(vec![1250, -5])
                    .with_precision_and_scale(9, 2)
                    .expect("decimal"),
            ) as ArrayRef,
        ),
        (
            "ts_utc",
            Arc::new(
                TimestampMillisecondArray::from(vec![1_790_064_000_250, 0]).with_timezone("+02:00"),
            ) as ArrayRef,
        ),
        (
            "ts_local",
            Arc::new(TimestampMicrosecondArray::from(vec![
                1_790_064_000_000_000,
                1,
            ])) as ArrayRef,
        ),
        (
            "t",
            Arc::new(Time64MicrosecondArray::from(vec![
                30_600_000_000,
                1_500_000,
            ])) as ArrayRef,
        ),
        ("list", Arc::new(list.finish()) as ArrayRef),
        ("st", Arc::new(inner) as ArrayRef),
        ("dict", Arc::new(dictionary) as ArrayRef),
    ])
    .expect("batch");
    let file = write(&dir.path().join("v.parquet"), &batch, 10);
    let (columns, rows) = read_rows(&[file], Format::Parquet).expect("reads");
    assert_eq!(
        columns,
        ["dec", "dict", "f32", "f64", "list", "st", "t", "ts_local", "ts_utc"]
    );
    let s = |t: &str| Some(t.to_owned());
    assert_eq!(
        rows[0],
        vec![
            s("12.50"),
            s("x"),
            s("0.1"),
            s("2.5"),
            s("[1,null]"),
            s(r#"{"a":1.0,"z":"a"}"#),
            s("08:30:00"),
            s("2026-09-22T08:00:00"),
            s("2026-09-22T08:00:00.25Z"),
        ]
    );
    assert_eq!(
        rows[1],
        vec![
            s("-0.05"),
            s("y"),
            s("NaN"),
            s("1e21"),
            None,
            s(r#"{"a":0.5,"z":"b"}"#),
            s("00:00:01.5"),
            s("1970-01-01T00:00:00.000001"),
            s("1970-01-01T00:00:00Z"),
        ]
    );
}

fn spec<'a>(
    grain: &'a [String],
    gates: &'a [Gate],
    inputs: &'a HashMap<String, InputData>,
) -> AuditSpec<'a> {
    AuditSpec {
        format: Format::Parquet,
        grain,
        gates,
        inputs,
    }
}

// Gates run on Parquet: duplicates across row groups and files
// are located by file and row, and a reconcile gate compares a Parquet
// output with a CSV input.
#[test]
fn gates_on_parquet_locate_rows_and_reconcile_with_csv() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write(
        &dir.path().join("a.parquet"),
        &people(&[1, 2, 3, 4, 5, 2]),
        2,
    );
    let b = write(&dir.path().join("b.parquet"), &people(&[7, 4]), 1);
    let input = dir.path().join("in.csv");
    std::fs::write(&input, "id,kind\n1,x\n2,y\n3,x\n4,x\n5,x\n7,x\n").expect("csv");
    let grain = vec!["id".to_owned()];
    let gates = vec![
        Gate::NotNull {
            columns: vec!["name".to_owned()],
        },
        Gate::Reconcile {
            column: "id".to_owned(),
            aggregate: Aggregate::Sum,
            input: "raw".to_owned(),
            input_column: "id".to_owned(),
            filter: vec![("kind".to_owned(), "x".to_owned())],
        },
    ];
    let inputs = HashMap::from([(
        "raw".to_owned(),
        InputData {
            format: Format::Csv,
            files: vec![input],
        },
    )]);
    let report = audit(&[a, b], &spec(&grain, &gates, &inputs)).expect("audits");
    assert_eq!(report.rows, 8);
    assert_eq!(report.gates[0].actual, "2 duplicate keys");
    assert_eq!(
        report.gates[0].offending,
        ["a.parquet row 6: id=2", "b.parquet row 2: id=4"]
    );
    assert_eq!(report.gates[1].offending, ["a.parquet row 3: name=null"]);
    // 1+2+3+4+5+2+7+4 = 28 against 1+3+4+5+7 = 20.
    assert!(!report.gates[2].passed);
    assert_eq!(report.gates[2].actual, "28");
    assert_eq!(report.gates[2].expected, "20");
}

// An invalid file, or files of one candidate whose schemas
// differ, fail the audit naming the file and the column.
#[test]
fn invalid_parquet_and_schema_drift_name_file_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write(&dir.path().join("a.parquet"), &people(&[1]), 10);
    let grain = vec!["id".to_owned()];
    let inputs = HashMap::new();

    let bad = dir.path().join("bad.parquet");
    std::fs::write(&bad, b"id,name\n1,x\n").expect("write");
    let error = audit(&[a.clone(), bad.clone()], &spec(&grain, &[], &inputs)).expect_err("bad");
    assert!(matches!(error, AuditError::ParquetInvalid { ref path, .. } if *path == bad));
    assert!(error.to_string().starts_with(&format!(
        "`{}` is not a valid Parquet file: ",
        bad.display()
    )));

    // Truncated: the footer is gone.
    let bytes = std::fs::read(&a).expect("read");
    let cut = dir.path().join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() - 9]).expect("write");
    assert!(matches!(
        digest_files(&[cut], Format::Parquet),
        Err(AuditError::ParquetInvalid { .. })
    ));

    let other = RecordBatch::try_from_iter(vec![
        ("id", Arc::new(StringArray::from(vec!["2"])) as ArrayRef),
        ("name", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
        ("paid", Arc::new(BooleanArray::from(vec![true])) as ArrayRef),
        ("day", Arc::new(Date32Array::from(vec![1])) as ArrayRef),
    ])
    .expect("batch");
    let b = write(&dir.path().join("b.parquet"), &other, 10);
    let error = audit(&[a.clone(), b.clone()], &spec(&grain, &[], &inputs)).expect_err("drift");
    assert_eq!(
        error.to_string(),
        format!(
            "`{}` column `id` is Utf8 but in the first file it is Int64",
            b.display()
        )
    );
    let fewer = RecordBatch::try_from_iter(vec![(
        "id",
        Arc::new(Int64Array::from(vec![3])) as ArrayRef,
    )])
    .expect("batch");
    let c = write(&dir.path().join("c.parquet"), &fewer, 10);
    let error = audit(&[a, c.clone()], &spec(&grain, &[], &inputs)).expect_err("drift");
    assert_eq!(
        error.to_string(),
        format!(
            "`{}` column `day` is no such column but in the first file it is Date32",
            c.display()
        )
    );
    let _ = Schema::empty();
}

// An empty Parquet file digests like a header-only CSV file of
// the same columns, and a column type without canonical text is refused
// by name.
#[test]
fn empty_files_agree_and_unsupported_types_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = write(&dir.path().join("e.parquet"), &people(&[]), 10);
    let csv = dir.path().join("e.csv");
    std::fs::write(&csv, "name,id,day,paid\n").expect("csv");
    let parquet = digest_files(&[empty], Format::Parquet).expect("digest");
    assert_eq!(parquet.0, 0);
    assert_eq!(parquet, digest_files(&[csv], Format::Csv).expect("digest"));

    let odd = RecordBatch::try_from_iter(vec![(
        "wait",
        Arc::new(arrow_array::DurationSecondArray::from(vec![5])) as ArrayRef,
    )])
    .expect("batch");
    let file = write(&dir.path().join("d.parquet"), &odd, 10);
    let error = digest_files(std::slice::from_ref(&file), Format::Parquet).expect_err("refused");
    assert!(matches!(error, AuditError::ParquetColumn { ref column, .. } if column == "wait"));
    assert!(error
        .to_string()
        .starts_with(&format!("`{}` column `wait`: type ", file.display())));
}

// Integers, strings and binaries written into a batch's
// slice (fixed-size stores past a value's end, views inline and in
// buffers) read back as `Display` writes them, at every length, with
// nulls and dictionaries, and digest as the same rows in CSV do.
#[test]
fn sized_values_read_back_exactly() {
    const WORDS: [&str; 5] = [
        "",
        "x",
        "twelve chars",
        "thirteen char",
        "a longer word than sixteen",
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ints: Vec<i64> = vec![0, -1, 1, 9, 10, 99, 100, i64::MIN, i64::MAX];
    let mut unsigned: Vec<u64> = vec![0, u64::MAX, 10_000_000_000_000_000, 9_999_999_999_999_999];
    for digits in 1..=19u32 {
        let top = 10i64.checked_pow(digits).unwrap_or(i64::MAX);
        for n in [top / 10, top - 1, top / 3] {
            ints.extend([n, -n]);
        }
        unsigned.extend([10u64.pow(digits) - 1, 10u64.pow(digits)]);
    }
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let sign = if x % 2 == 0 { 1 } else { -1 };
        ints.push((x >> (x % 64)) as i64 * sign);
        unsigned.push(x >> (x % 64));
    }
    let rows = ints.len().max(unsigned.len());
    ints.resize(rows, 7);
    unsigned.resize(rows, 7);
    // Strings of every length from 0 to 40 (some are a buffer's last
    // value), every fifth null; words from a dictionary, every third null.
    let strings: Vec<Option<String>> = (0..rows)
        .map(|row| {
            (row % 5 != 4).then(|| {
                (0..(row * 7) % 41)
                    .map(|i| char::from(b'a' + ((row + i) % 26) as u8))
                    .collect()
            })
        })
        .collect();
    let words: Vec<Option<&str>> = (0..rows)
        .map(|row| (row % 3 != 2).then_some(WORDS[row % 5]))
        .collect();
    let batch = |rows: &[usize]| {
        let words: DictionaryArray<arrow_array::types::Int32Type> =
            rows.iter().map(|&row| words[row]).collect();
        let strings: Vec<Option<&str>> = rows.iter().map(|&row| strings[row].as_deref()).collect();
        RecordBatch::try_from_iter(vec![
            (
                "i",
                Arc::new(Int64Array::from_iter_values(
                    rows.iter().map(|&row| ints[row]),
                )) as ArrayRef,
            ),
            (
                "u",
                Arc::new(arrow_array::UInt64Array::from_iter_values(
                    rows.iter().map(|&row| unsigned[row]),
                )) as ArrayRef,
            ),
            (
                "s",
                Arc::new(StringArray::from(strings.clone())) as ArrayRef,
            ),
            (
                "b",
                Arc::new(arrow_array::BinaryArray::from_iter(
                    strings.iter().map(|s| s.map(str::as_bytes)),
                )) as ArrayRef,
            ),
            ("w", Arc::new(words) as ArrayRef),
        ])
        .expect("batch")
    };
    let all: Vec<usize> = (0..rows).collect();
    let file = write(&dir.path().join("v.parquet"), &batch(&all), 700);
    let (columns, read) = read_rows(std::slice::from_ref(&file), Format::Parquet).expect("reads");
    assert_eq!(columns, ["b", "i", "s", "u", "w"]);
    assert_eq!(read.len(), rows);
    for (row, values) in read.iter().enumerate() {
        let expected = vec![
            strings[row].clone(),
            Some(ints[row].to_string()),
            strings[row].clone(),
            Some(unsigned[row].to_string()),
            words[row].map(str::to_owned),
        ];
        assert_eq!(*values, expected, "row {row}");
    }
    // The same rows as CSV digest the same (CSV cannot tell an empty
    // string from null: rows with one are left out of both).
    let kept: Vec<usize> = (0..rows)
        .filter(|&row| strings[row].as_deref() != Some("") && words[row] != Some(""))
        .collect();
    let mut csv = String::from("b,i,s,u,w\n");
    for &row in &kept {
        let string = strings[row].as_deref().unwrap_or_default();
        let word = words[row].unwrap_or_default();
        let (int, unsigned) = (ints[row], unsigned[row]);
        csv.push_str(&format!("{string},{int},{string},{unsigned},{word}\n"));
    }
    let parquet = write(&dir.path().join("k.parquet"), &batch(&kept), 300);
    let csv_file = dir.path().join("k.csv");
    std::fs::write(&csv_file, csv).expect("csv");
    let digest = digest_files(&[parquet], Format::Parquet).expect("parquet");
    assert_eq!(digest.0, kept.len() as u64);
    assert_eq!(digest, digest_files(&[csv_file], Format::Csv).expect("csv"));
}

// A Parquet value over MAX_VALUE_BYTES fails the audit
// naming the file, the row and the column.
#[test]
fn a_value_over_the_limit_names_its_row_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long = "x".repeat(crate::audit::MAX_VALUE_BYTES + 1);
    let batch = RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        (
            "payload",
            Arc::new(StringArray::from(vec!["short", long.as_str()])) as ArrayRef,
        ),
    ])
    .expect("batch");
    let path = write(&dir.path().join("big.parquet"), &batch, 10);
    let error = digest_files(std::slice::from_ref(&path), Format::Parquet).expect_err("too large");
    assert_eq!(
        error.to_string(),
        format!(
            "`{}` row 2: the value of column `payload` is larger than 64 MiB, \
             the most the audit reads",
            path.display()
        )
    );
}

/// The line and `id` of the rows folded, in the order folded.
struct Lines(Vec<(u64, String)>);

impl RowFold for Lines {
    const PARTS: bool = true;

    fn row(&mut self, row: &crate::audit::read::Row<'_>) {
        // Columns sorted: day, id, name, paid.
        let id = row
            .get(1)
            .map(|id| String::from_utf8_lossy(id).into_owned());
        self.0.push((row.line, id.unwrap_or_default()));
    }

    fn append(&mut self, mut later: Self) {
        self.0.append(&mut later.0);
    }
}

/// A file of row groups of the given rows (`id` 1 up), in pages of 16
/// rows, so that parts start and end inside pages.
fn grouped(dir: &Path, sizes: &[usize]) -> super::ParquetFile {
    let path = dir.join(format!("groups-{}.parquet", sizes.len()));
    let file = std::fs::File::create(&path).expect("create");
    let ids: Vec<i64> = (1..=sizes.iter().sum::<usize>() as i64).collect();
    let batch = people(&ids);
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(usize::MAX))
        .set_data_page_row_count_limit(16)
        .set_write_batch_size(16)
        .build();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
    let mut at = 0;
    for &size in sizes {
        writer.write(&batch.slice(at, size)).expect("write");
        writer.flush().expect("close the row group");
        at += size;
    }
    writer.close().expect("close");
    super::ParquetFile::open(&path).expect("opens")
}

// A file folded in parts (ranges of row groups that start and
// end inside pages), on more threads than cores and finishing in any
// order, is merged in file order: every row once, with its own values.
#[test]
fn parts_of_row_groups_merge_in_file_order_with_their_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sizes = [300, 1, 250, 90, 300, 7, 52];
    let file = grouped(dir.path(), &sizes);
    assert_eq!(file.group_rows(), [300, 1, 250, 90, 300, 7, 52]);
    let expected: Vec<(u64, String)> = (1..=1000).map(|n| (n, n.to_string())).collect();
    for target in [1, 37, 100, u64::MAX] {
        let parts = super::parts_of(&file.group_rows(), target);
        for threads in [1, 2, 3, 8] {
            let folded = file
                .fold_parts(&parts, threads, &|_| Lines(Vec::new()))
                .expect("folds");
            assert_eq!(
                folded.0, expected,
                "parts of {target} rows, {threads} threads"
            );
        }
    }
    let mut here = Lines(Vec::new());
    file.fold_here(&mut here).expect("folds");
    assert_eq!(here.0, expected);
}

// Row groups are cut into parts of equal rows, in order, the
// remainder spread over the first.
#[test]
fn row_groups_are_cut_into_parts_of_about_equal_rows() {
    let part = |group, skip, rows, first| super::Part {
        group,
        skip,
        rows,
        first,
    };
    assert_eq!(
        super::parts_of(&[300, 1, 250], 100),
        [
            part(0, 0, 100, 1),
            part(0, 100, 100, 101),
            part(0, 200, 100, 201),
            part(1, 0, 1, 301),
            part(2, 0, 84, 302),
            part(2, 84, 83, 386),
            part(2, 167, 83, 469),
        ]
    );
    assert_eq!(super::parts_of(&[0], 100), [part(0, 0, 0, 1)]);
    assert_eq!(super::parts_of(&[], 100), []);
    // A small file is one part per row group, folded on one thread.
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(grouped(dir.path(), &[1000]).parts(2).len(), 1);
}

// Parts are merged as they are done in file order, and the
// error reported is the first part's in file order, not the first to
// fail in time.
#[test]
fn parts_arriving_out_of_order_merge_in_order_and_report_the_first_error() {
    let lines = |ns: &[u64]| Lines(ns.iter().map(|&n| (n, String::new())).collect());
    let numbers = |l: &Lines| l.0.iter().map(|(n, _)| *n).collect::<Vec<u64>>();
    let mut in_order = super::InOrder::new(3);
    in_order.put(2, Ok(lines(&[5, 6])));
    in_order.put(0, Ok(lines(&[1, 2])));
    assert_eq!(in_order.merged.as_ref().map(numbers), Some(vec![1, 2]));
    in_order.put(1, Ok(lines(&[3, 4])));
    let merged = in_order.finish(Path::new("f")).expect("some").expect("ok");
    assert_eq!(numbers(&merged), [1, 2, 3, 4, 5, 6]);

    let error = |part: usize| Err(super::invalid_text(Path::new("f"), &format!("part {part}")));
    let mut failed = super::InOrder::<Lines>::new(3);
    failed.put(2, error(2));
    failed.put(0, Ok(lines(&[1])));
    failed.put(1, error(1));
    let Some(Err(error)) = failed.finish(Path::new("f")) else {
        panic!("an error");
    };
    assert!(error.to_string().ends_with("part 1"), "{error}");

    let mut missing = super::InOrder::new(2);
    missing.put(0, Ok(lines(&[1])));
    assert!(matches!(missing.finish(Path::new("f")), Some(Err(_))));
    assert!(super::InOrder::<Lines>::new(0)
        .finish(Path::new("f"))
        .is_none());
}

// One file of many row groups, audited (in parts on a
// machine of several cores): the digest is the CSV's, duplicates
// across groups and nulls are located by row.
#[test]
fn one_file_of_many_row_groups_audits_as_its_csv() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ids: Vec<i64> = (1..=1000).collect();
    ids[870] = 12;
    ids[400] = 399;
    let path = write(&dir.path().join("a.parquet"), &people(&ids), 100);
    assert_eq!(
        super::ParquetFile::open(&path)
            .expect("opens")
            .parts(2)
            .len(),
        10
    );
    let csv = dir.path().join("a.csv");
    std::fs::write(&csv, people_csv(&ids)).expect("csv");
    let grain = vec!["id".to_owned()];
    let gates = vec![Gate::NotNull {
        columns: vec!["name".to_owned()],
    }];
    let inputs = HashMap::new();
    let report =
        audit(std::slice::from_ref(&path), &spec(&grain, &gates, &inputs)).expect("audits");
    assert_eq!(report.rows, 1000);
    assert_eq!(report.gates[0].actual, "2 duplicate keys");
    assert_eq!(
        report.gates[0].offending,
        ["row 401: id=399", "row 871: id=12"]
    );
    let nulls = ids.iter().filter(|id| *id % 3 == 0).count();
    assert_eq!(report.gates[1].actual, format!("{nulls} null values"));
    assert_eq!(report.gates[1].offending[0], "row 3: name=null");
    assert_eq!(
        digest_files(std::slice::from_ref(&path), Format::Parquet).expect("digest"),
        digest_files(&[csv], Format::Csv).expect("digest")
    );
    let rows = read_rows(&[path], Format::Parquet).expect("rows").1;
    let read: Vec<String> = rows.iter().filter_map(|row| row[1].clone()).collect();
    let expected: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    assert_eq!(read, expected);
}

/// Writes a Parquet file of one row whose column `s` is `depth` structs
/// nested around an integer (`depth + 1` levels), on a thread with a stack
/// large enough for the writer's own recursion.
fn write_deep(path: &Path, depth: usize) {
    let path = path.to_path_buf();
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(move || {
            let mut array: ArrayRef = Arc::new(Int64Array::from(vec![7]));
            for _ in 0..depth {
                let field = Field::new("s", array.data_type().clone(), true);
                array = Arc::new(StructArray::from(vec![(Arc::new(field), array)]));
            }
            let batch = RecordBatch::try_from_iter(vec![
                ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
                ("s", array),
            ])
            .expect("batch");
            // Without Arrow's schema in the footer, which its reader holds
            // to 64 levels of its own.
            let options = parquet::arrow::arrow_writer::ArrowWriterOptions::new()
                .with_skip_arrow_metadata(true);
            let file = std::fs::File::create(&path).expect("create");
            let mut writer =
                ArrowWriter::try_new_with_options(file, batch.schema(), options).expect("writer");
            writer.write(&batch).expect("write");
            writer.close().expect("close");
        })
        .expect("thread")
        .join()
        .expect("written");
}

// A Parquet file of 12 KB whose column nests 1,000 structs deep overflowed
// the stack while the Arrow reader built its schema, aborting the engine.
// It is now refused naming the column; 128 levels are read.
#[test]
fn a_schema_nested_deeper_than_the_limit_names_its_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("deep.parquet");
    write_deep(&path, 1000);
    let error = read_rows(std::slice::from_ref(&path), Format::Parquet).expect_err("too deep");
    assert_eq!(
        error.to_string(),
        format!(
            "`{}` schema: column `s` is nested deeper than 128 levels, the most the audit reads",
            path.display()
        )
    );
    let path = dir.path().join("ok.parquet");
    write_deep(&path, crate::audit::MAX_NESTING - 1);
    let (columns, rows) = read_rows(&[path], Format::Parquet).expect("reads");
    assert_eq!(columns, ["id", "s"]);
    let text = rows[0][1].clone().expect("not null");
    let expected = format!("{}7{}", "{\"s\":".repeat(127), "}".repeat(127));
    assert_eq!(text, expected);
}

// A Parquet file of more top-level columns than MAX_COLUMNS is refused
// from its footer, before the reader builds the metadata of each.
#[test]
fn a_schema_of_more_columns_than_the_limit_is_refused() {
    use parquet::basic::{Repetition, Type as Physical};
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::types::Type;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wide.parquet");
    let fields = (0..=crate::audit::MAX_COLUMNS)
        .map(|i| {
            let leaf = Type::primitive_type_builder(&format!("c{i}"), Physical::INT32)
                .with_repetition(Repetition::OPTIONAL)
                .build()
                .expect("leaf");
            Arc::new(leaf)
        })
        .collect();
    let root = Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
        .expect("root");
    let file = std::fs::File::create(&path).expect("create");
    let props = Arc::new(WriterProperties::builder().build());
    let writer = SerializedFileWriter::new(file, Arc::new(root), props).expect("writer");
    writer.close().expect("close");
    let error = read_rows(std::slice::from_ref(&path), Format::Parquet).expect_err("too wide");
    assert_eq!(
        error.to_string(),
        format!(
            "`{}` schema: more than 100000 columns, the most the audit reads",
            path.display()
        )
    );
}
