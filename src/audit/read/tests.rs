use super::compact::compact;
use super::csv::fold_pipelined;
use super::csv_records::CsvRecords;
use super::*;
use crate::audit::{MAX_COLUMNS, MAX_NESTING, MAX_VALUE_BYTES};
use serde_json::Value;
use std::sync::Arc;

/// Collects rows as text, for inspecting what the readers produce.
struct Collect(Vec<(u64, Vec<Option<String>>)>, usize);

impl RowFold for Collect {
    fn append(&mut self, mut later: Self) {
        self.0.append(&mut later.0);
    }

    fn shift_lines(&mut self, lines: u64) {
        for (line, _) in &mut self.0 {
            *line += lines;
        }
    }

    fn row(&mut self, row: &Row<'_>) {
        let values = (0..self.1)
            .map(|c| row.get(c).map(|v| String::from_utf8_lossy(v).into_owned()))
            .collect();
        self.0.push((row.line, values));
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write test file");
    path
}

fn collect(path: &Path, format: Format) -> Result<(Vec<String>, Collect), AuditError> {
    fold_file(path, format, None, false, &|c| Collect(Vec::new(), c.len()))
}

fn s(text: &str) -> Option<String> {
    Some(text.to_owned())
}

#[test]
fn csv_rows_are_sorted_by_column_with_empty_fields_null() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        dir.path(),
        "a.csv",
        "b,a\r\n\"x, y\",1\n,\"\"\n\"multi\nline\",3\n",
    );
    let (columns, rows) = collect(&path, Format::Csv).expect("reads");
    assert_eq!(columns, ["a", "b"]);
    assert_eq!(
        rows.0,
        vec![
            (2, vec![s("1"), s("x, y")]),
            (3, vec![None, None]),
            (4, vec![s("3"), s("multi\nline")]),
        ]
    );
}

#[test]
fn csv_lines_are_exact_with_crlf_blank_lines_and_a_bom() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        dir.path(),
        "a.csv",
        "\u{feff}a,b\r\n1,2\r\n\"3\r\nx\",4\r\n\r\n5,6\r\n\n7,8",
    );
    let (columns, rows) = collect(&path, Format::Csv).expect("reads");
    assert_eq!(columns, ["a", "b"]);
    let lines: Vec<u64> = rows.0.iter().map(|(line, _)| *line).collect();
    assert_eq!(lines, [2, 3, 6, 8]);
    assert_eq!(rows.0[1].1, vec![s("3\r\nx"), s("4")]);

    let path = write(dir.path(), "b.csv", "a,b\r\n1,2\r\n\r\n3\r\n");
    match collect(&path, Format::Csv).err().expect("fails") {
        AuditError::Parse { line, message, .. } => {
            assert_eq!(line, 4);
            assert_eq!(message, "found 1 fields where the header has 2");
        }
        other => panic!("unexpected error {other:?}"),
    }
}

#[test]
fn csv_wrong_field_count_names_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "bad.csv", "a,b\n1,2\n\"3\n3\",4\n5,6,7\n");
    let error = collect(&path, Format::Csv).err().expect("fails");
    match error {
        AuditError::Parse { line, message, .. } => {
            assert_eq!(line, 5);
            assert_eq!(message, "found 3 fields where the header has 2");
        }
        other => panic!("unexpected error {other:?}"),
    }
}

#[test]
fn csv_duplicate_header_is_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "dup.csv", "a,b,a\n1,2,3\n");
    let error = collect(&path, Format::Csv).err().expect("fails");
    assert_eq!(
        error.to_string(),
        format!(
            "cannot parse `{}` at line 1: column `a` appears twice in the header",
            path.display()
        )
    );
}

#[test]
fn jsonl_values_render_as_text_and_missing_keys_are_null() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        dir.path(),
        "a.jsonl",
        concat!(
            "{\"s\":\"x\",\"n\":1,\"f\":2.5,\"t\":true,\"z\":null,\"o\":{\"k\":[1, 2]}}\n",
            "\n   \n",
            "{\"s\":\"\",\"late\":false}\r\n",
        ),
    );
    let (columns, rows) = collect(&path, Format::Jsonl).expect("reads");
    assert_eq!(columns, ["f", "late", "n", "o", "s", "t", "z"]);
    assert_eq!(
        rows.0,
        vec![
            (
                1,
                vec![
                    s("2.5"),
                    None,
                    s("1"),
                    s("{\"k\":[1,2]}"),
                    s("x"),
                    s("true"),
                    None
                ]
            ),
            (4, vec![None, s("false"), None, None, s(""), None, None]),
        ]
    );
}

#[test]
fn jsonl_numbers_are_their_literal_text_nested_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = "123456789012345678901234567891";
    let path = write(
        dir.path(),
        "a.jsonl",
        &format!("{{\"n\":{big},\"o\":{{\"z\": [{big}, 2.5, \"\\u00e9\\/\"], \"a\":true}}}}\n"),
    );
    let (_, rows) = collect(&path, Format::Jsonl).expect("reads");
    assert_eq!(
        rows.0,
        vec![(
            1,
            vec![
                s(big),
                s(&format!("{{\"a\":true,\"z\":[{big},2.5,\"é/\"]}}"))
            ]
        )]
    );
    // Ordinary nested values render as serde_json's compact text.
    let ordinary = r#"{"z":[1,-2,0.5,"x\"y",null,{"b":false,"a":[]}],"a":{}}"#;
    let mut out = Vec::new();
    compact(ordinary, &mut out, 2).expect("valid JSON");
    let value: Value = serde_json::from_str(ordinary).expect("valid JSON");
    assert_eq!(String::from_utf8(out).expect("UTF-8"), value.to_string());
}

#[test]
fn jsonl_non_object_names_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "a.jsonl", "{\"a\":1}\n\n[1,2]\n");
    match collect(&path, Format::Jsonl).err().expect("fails") {
        AuditError::Parse { line, message, .. } => {
            assert_eq!(line, 3);
            assert_eq!(message, "expected a JSON object, found an array");
        }
        other => panic!("unexpected error {other:?}"),
    }
    let path = write(dir.path(), "b.jsonl", "{\"a\":1}\n{\"a\":\n");
    match collect(&path, Format::Jsonl).err().expect("fails") {
        AuditError::Parse { line, .. } => assert_eq!(line, 2),
        other => panic!("unexpected error {other:?}"),
    }
}

#[test]
fn csv_files_with_different_columns_mismatch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write(dir.path(), "a.csv", "x,y\n1,2\n");
    let b = write(dir.path(), "b.csv", "y,x\n3,4\n");
    let c = write(dir.path(), "c.csv", "x,z\n5,6\n");
    let make = |_: usize, c: &[String]| Collect(Vec::new(), c.len());
    let (columns, _) =
        fold_files(&[a.clone(), b.clone()], Format::Csv, true, &make).expect("same set");
    assert_eq!(columns, ["x", "y"]);
    match fold_files(&[a, b, c.clone()], Format::Csv, true, &make) {
        Err(AuditError::HeaderMismatch {
            path,
            expected,
            found,
        }) => {
            assert_eq!(path, c);
            assert_eq!(expected, ["x", "y"]);
            assert_eq!(found, ["x", "z"]);
        }
        other => panic!("unexpected {:?}", other.map(|(c, _)| c)),
    }
}

#[test]
fn jsonl_uniform_refolds_files_with_fewer_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write(dir.path(), "a.jsonl", "{\"x\":1}\n");
    let b = write(dir.path(), "b.jsonl", "{\"x\":2,\"y\":3}\n");
    let make = |_: usize, c: &[String]| Collect(Vec::new(), c.len());
    let (columns, fold) = fold_files(&[a, b], Format::Jsonl, true, &make).expect("reads");
    assert_eq!(columns, ["x", "y"]);
    assert_eq!(
        fold.0,
        vec![(1, vec![s("1"), None]), (1, vec![s("2"), s("3")])]
    );
}

/// Collects rows in the first lane and only lines in the lanes split
/// off it (two, numbered 1 and 2).
#[derive(Default)]
struct Lanes {
    rows: Vec<(u64, Vec<Option<String>>)>,
    width: usize,
    /// 0 for the first lane.
    id: usize,
    splits: usize,
    /// Each joined lane's id and lines, in the order joined.
    joined: Vec<(usize, Vec<u64>)>,
    lines: Vec<u64>,
    expected: Vec<u64>,
}

impl RowFold for Lanes {
    fn row(&mut self, row: &Row<'_>) {
        if self.id > 0 {
            self.lines.push(row.line);
        } else {
            let values = (0..self.width)
                .map(|c| row.get(c).map(|v| String::from_utf8_lossy(v).into_owned()))
                .collect();
            self.rows.push((row.line, values));
        }
    }

    fn expect_rows(&mut self, rows: u64) {
        self.expected.push(rows);
    }

    fn split(&mut self) -> Option<Self> {
        if self.splits == 2 {
            return None;
        }
        self.splits += 1;
        Some(Self {
            id: self.splits,
            ..Self::default()
        })
    }

    fn join(&mut self, lane: Self) {
        self.joined.push((lane.id, lane.lines));
        self.expected.extend(lane.expected);
    }
}

#[test]
fn pipelined_csv_reads_exactly_what_sequential_reading_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = String::from("b,a\r\n");
    for i in 0..10_000 {
        match i % 1000 {
            7 => text.push_str(&format!("\"x\r\n{i}\",\"\"\r\n")),
            8 => text.push_str(&format!("\r\n{i},\"q\"\"\"\n")),
            _ => text.push_str(&format!("{i},v{i}\r\n")),
        }
    }
    let path = write(dir.path(), "big.csv", &text);
    let (columns, sequential) = collect(&path, Format::Csv).expect("reads");
    let (_, mut records) = CsvRecords::open(&path).expect("opens");
    let lanes = Lanes {
        width: columns.len(),
        ..Lanes::default()
    };
    let piped = fold_pipelined(&mut records, lanes).expect("reads");
    assert_eq!(piped.rows.len(), 10_000);
    assert_eq!(piped.rows, sequential.0);
    let lines: Vec<u64> = piped.rows.iter().map(|(line, _)| *line).collect();
    assert_eq!(
        piped.joined,
        [(2, lines.clone()), (1, lines)],
        "every lane sees every row; lanes join last split first"
    );
    assert_eq!(piped.expected.len(), 3, "each lane hears the estimate once");
    assert!(piped.expected[0] > 9_000 && piped.expected[0] < 11_000);

    // A malformed record stops the pipeline with its line.
    let path = write(dir.path(), "bad.csv", &format!("{text}1,2,3\n"));
    let (_, mut records) = CsvRecords::open(&path).expect("opens");
    let lanes = Lanes {
        width: 2,
        ..Lanes::default()
    };
    match fold_pipelined(&mut records, lanes) {
        Err(AuditError::Parse { line, .. }) => assert_eq!(line, 10_000 + 1 + 20 + 1),
        other => panic!("unexpected {:?}", other.map(|l| l.rows.len())),
    }
}

#[test]
fn csv_read_in_ranges_reads_exactly_what_sequential_reading_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A BOM, CRLF and LF endings, blank lines, a lone `\r` ending a record,
    // and quoted fields (a comma, an escaped quote) on one line.
    let mut text = String::from("\u{feff}b,a\r\n");
    for i in 0..20_000 {
        match i % 997 {
            3 => text.push_str("\r\n\n"),
            5 => text.push_str(&format!("{i},\r{i},lone\n")),
            8 => text.push_str(&format!("\"{i}, q\"\"\",v{i}\n")),
            _ => text.push_str(&format!("{i},v{i}\r\n")),
        }
    }
    let make = |c: &[String]| Collect(Vec::new(), c.len());
    let ranged = |path: &Path, wanted| {
        let (_, ranged) = fold_csv_in_ranges(path, wanted, &make).expect("reads");
        ranged.expect("cut")
    };
    let path = write(dir.path(), "plain.csv", &text);
    let (_, sequential) = collect(&path, Format::Csv).expect("reads");
    assert!(
        sequential.0.iter().any(|(_, row)| row[0] == s("lone")),
        "a lone \\r ends a record"
    );
    for wanted in [2, 3, 7, 64] {
        let (rows, read_on) = ranged(&path, wanted);
        assert!(!read_on, "no quoted field spans a line");
        assert_eq!(
            rows.0, sequential.0,
            "{wanted} ranges: same rows, same lines"
        );
    }

    // A quoted field of many lines around the middle: the cut there falls
    // inside it, the range before reads the field whole and past the cut,
    // and the file is read on from there.
    let half = text.len() / 2;
    let at = half + text[half..].find('\n').expect("a line") + 1;
    let spanning = format!(
        "{}7,\"{}\"\n{}",
        &text[..at],
        "a long\nquoted\r\nfield\n".repeat(2_000),
        &text[at..]
    );
    let path = write(dir.path(), "spanning.csv", &spanning);
    let (_, sequential) = collect(&path, Format::Csv).expect("reads");
    for wanted in [2, 4] {
        let (rows, read_on) = ranged(&path, wanted);
        assert!(read_on, "{wanted} ranges: a cut inside the quoted field");
        assert_eq!(
            rows.0, sequential.0,
            "{wanted} ranges: same rows, same lines"
        );
    }

    // A malformed record in a later range is reported with its file line.
    let bad = text.replacen("19000,v19000", "19000,v19000,extra", 1);
    let path = write(dir.path(), "bad.csv", &bad);
    let expected = match collect(&path, Format::Csv) {
        Err(AuditError::Parse { line, .. }) => line,
        other => panic!("unexpected {:?}", other.map(|(_, c)| c.0.len())),
    };
    match fold_csv_in_ranges(&path, 4, &make) {
        Err(AuditError::Parse { line, .. }) => assert_eq!(line, expected),
        other => panic!(
            "unexpected {:?}",
            other.map(|(_, c)| c.map(|c| c.0 .0.len()))
        ),
    }
}

/// What the csv crate reads from `text` (header skipped), each record's
/// fields in sorted column order, empty as null.
fn csv_crate_rows(text: &str) -> Vec<Vec<Option<String>>> {
    let mut reader = ::csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(text.as_bytes());
    let header = reader.byte_headers().expect("header").clone();
    let mut order: Vec<(Vec<u8>, usize)> = header
        .iter()
        .enumerate()
        .map(|(i, n)| (n.to_vec(), i))
        .collect();
    order.sort();
    reader
        .byte_records()
        .map(|record| {
            let record = record.expect("record");
            order
                .iter()
                .map(|&(_, i)| {
                    let field = record.get(i).expect("field");
                    (!field.is_empty()).then(|| String::from_utf8_lossy(field).into_owned())
                })
                .collect()
        })
        .collect()
}

proptest::proptest! {
    // The CSV fast path (lines without quotes split on commas)
    // and csv_core for the rest read every file as the csv crate does:
    // quoting, CRLF, a lone CR ending a record, blank lines, no final newline.
    #[test]
    fn csv_fast_path_reads_as_the_csv_crate(
        rows in proptest::collection::vec(
            (proptest::collection::vec(0..9usize, 3), 0..6usize), 0..40),
        bom in proptest::bool::ANY,
        last in 0..3usize,
    ) {
        const FIELDS: [&str; 9] = [
            "", "a", "b c", "\"q\"\"x\"", "\"multi\nline\"", "\"a,b\"",
            "\"cr\r\nlf\"", "\"\"", "x\"y",
        ];
        const ENDS: [&str; 6] = ["\n", "\r\n", "\r", "\n\n", "\r\n\r\n", "\n \n"];
        let mut text = String::from(if bom { "\u{feff}c,a,b\r\n" } else { "c,a,b\n" });
        for (i, (fields, end)) in rows.iter().enumerate() {
            let line: Vec<&str> = fields.iter().map(|&f| FIELDS[f]).collect();
            text.push_str(&line.join(","));
            if i + 1 < rows.len() || last > 0 {
                // "\n \n": a line holding one space is a 1-field record.
                text.push_str(if *end == 5 { "\n" } else { ENDS[*end] });
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write(dir.path(), "a.csv", &text);
        let ours = collect(&path, Format::Csv).map(|(c, rows)| {
            (c, rows.0.into_iter().map(|(_, values)| values).collect::<Vec<_>>())
        });
        let (columns, ours) = ours.map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        proptest::prop_assert_eq!(columns, ["a", "b", "c"]);
        proptest::prop_assert_eq!(ours, csv_crate_rows(&text));
    }
}

// Lines and quoted fields longer than the read buffer.
#[test]
fn csv_records_longer_than_the_buffer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long = "x".repeat(3 * BUFFER + 17);
    let text = format!("a,b\n{long},1\n\"{long}\n\",2\r\n3,{long}");
    let path = write(dir.path(), "long.csv", &text);
    let (_, rows) = collect(&path, Format::Csv).expect("reads");
    let lines: Vec<u64> = rows.0.iter().map(|(line, _)| *line).collect();
    assert_eq!(lines, [2, 3, 5]);
    assert_eq!(rows.0[0].1, vec![s(&long), s("1")]);
    assert_eq!(rows.0[1].1, vec![s(&format!("{long}\n")), s("2")]);
    assert_eq!(rows.0[2].1, vec![s("3"), s(&long)]);
}

/// Counts the accumulators alive at once, and keeps each file's index.
struct Live {
    files: Vec<usize>,
    live: Arc<std::sync::atomic::AtomicUsize>,
}

impl Live {
    fn new(
        file: usize,
        live: &Arc<std::sync::atomic::AtomicUsize>,
        most: &Arc<std::sync::atomic::AtomicUsize>,
    ) -> Self {
        use std::sync::atomic::Ordering::SeqCst;
        let now = live.fetch_add(1, SeqCst) + 1;
        most.fetch_max(now, SeqCst);
        Self {
            files: vec![file],
            live: Arc::clone(live),
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.live.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl RowFold for Live {
    fn append(&mut self, mut later: Self) {
        self.files.append(&mut later.files);
    }

    fn row(&mut self, _row: &Row<'_>) {}
}

// Every file's accumulator was held until all files were read (1,000,000
// one-row files OOM-killed the engine); they are merged in file order as
// they are done, a window at a time.
#[test]
fn files_are_merged_as_they_are_folded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files: Vec<PathBuf> = (0..1000)
        .map(|i| write(dir.path(), &format!("f{i:04}.csv"), &format!("id\n{i}\n")))
        .collect();
    let live = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let make = |file: usize, _: &[String]| Live::new(file, &live, &most);
    let (columns, merged) = fold_files(&files, Format::Csv, true, &make).expect("reads");
    assert_eq!(columns, ["id"]);
    assert_eq!(merged.files, (0..1000).collect::<Vec<_>>());
    let most = most.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        most <= WINDOW_FILES + 1,
        "{most} accumulators alive at once"
    );
}

// JSON Lines files of different keys among many are
// folded again with the union of all keys, in file order.
#[test]
fn jsonl_keys_differing_after_the_first_window_are_united() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files: Vec<PathBuf> = (0..WINDOW_FILES + 10)
        .map(|i| {
            let extra = if i == WINDOW_FILES + 5 {
                ",\"z\":true"
            } else {
                ""
            };
            write(
                dir.path(),
                &format!("f{i:04}.jsonl"),
                &format!("{{\"id\":{i}{extra}}}\n"),
            )
        })
        .collect();
    let make = |_: usize, c: &[String]| Collect(Vec::new(), c.len());
    let (columns, fold) = fold_files(&files, Format::Jsonl, true, &make).expect("reads");
    assert_eq!(columns, ["id", "z"]);
    assert_eq!(fold.0.len(), WINDOW_FILES + 10);
    assert_eq!(fold.0[0].1, vec![s("0"), None]);
    assert_eq!(
        fold.0[WINDOW_FILES + 5].1,
        vec![s(&(WINDOW_FILES + 5).to_string()), s("true")]
    );
}

// More files than MAX_FILES are refused before any is
// opened (these do not exist).
#[test]
fn too_many_files_are_refused_before_reading() {
    let files: Vec<PathBuf> = (0..=MAX_FILES)
        .map(|i| PathBuf::from(format!("/nonexistent/f{i}.csv")))
        .collect();
    let make = |_: usize, c: &[String]| Collect(Vec::new(), c.len());
    let error = fold_files(&files, Format::Csv, true, &make)
        .err()
        .expect("refused");
    assert_eq!(
        error.to_string(),
        "100001 data files are more than the 100000 one audit reads"
    );
}

// A value over MAX_VALUE_BYTES in a record under
// MAX_RECORD_BYTES fails naming the file, line and column, in CSV and
// JSON Lines alike.
#[test]
fn a_value_over_the_limit_names_its_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long = "x".repeat(MAX_VALUE_BYTES + 1);
    let path = write(
        dir.path(),
        "a.csv",
        &format!("id,payload\n1,short\n2,{long}\n"),
    );
    let error = collect(&path, Format::Csv).err().expect("too large");
    assert_eq!(
        error.to_string(),
        format!(
            "`{}` line 3: the value of column `payload` is larger than 64 MiB, \
             the most the audit reads",
            path.display()
        )
    );
    let path = write(
        dir.path(),
        "a.jsonl",
        &format!("{{\"id\":1}}\n\n{{\"id\":2,\"payload\":\"{long}\"}}\n"),
    );
    let error = collect(&path, Format::Jsonl).err().expect("too large");
    assert_eq!(
        error.to_string(),
        format!(
            "`{}` line 3: the value of column `payload` is larger than 64 MiB, \
             the most the audit reads",
            path.display()
        )
    );
    // At the limit, a value is read.
    let path = write(
        dir.path(),
        "b.csv",
        &format!("id,payload\n1,{}\n", &long[1..]),
    );
    let (_, rows) = collect(&path, Format::Csv).expect("reads");
    assert_eq!(
        rows.0[0].1[1].as_ref().map(String::len),
        Some(MAX_VALUE_BYTES)
    );
}

// A record over MAX_RECORD_BYTES (a sparse file: a
// field that never ends, quoted or not, or a JSON line) fails naming
// the line where it starts, without reading the rest of it.
#[test]
fn a_record_over_the_limit_names_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, head) in [
        ("header.csv", "id,pay"),
        ("plain.csv", "id,payload\n1,a\n\n2,"),
        ("quoted.csv", "id,payload\n1,a\n\n2,\"x"),
        ("lines.jsonl", "{\"id\":1}\n\n{\"id\":\""),
    ] {
        let path = write(dir.path(), name, head);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        file.set_len(1 << 30).expect("sparse");
        let format = if name.ends_with(".csv") {
            Format::Csv
        } else {
            Format::Jsonl
        };
        let error = collect(&path, format).err().expect("too large");
        let (line, what) = match name {
            "header.csv" => (1, "the header"),
            "plain.csv" | "quoted.csv" => (4, "the record"),
            _ => (3, "the record"),
        };
        assert_eq!(
            error.to_string(),
            format!(
                "`{}` line {line}: {what} is larger than 128 MiB, the most the audit reads",
                path.display(),
            ),
            "{name}"
        );
    }
}

#[test]
fn missing_file_is_an_io_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nope.csv");
    match collect(&path, Format::Csv).err().expect("fails") {
        AuditError::Io { path: p, .. } => assert_eq!(p, path),
        other => panic!("unexpected error {other:?}"),
    }
}

/// A JSON Lines line whose `v` nests `depth` arrays, alternating with
/// objects every other level so both kinds are counted.
fn nested_line(id: u32, depth: usize) -> String {
    let mut open = String::new();
    let mut close = String::new();
    for level in 0..depth {
        if level % 2 == 0 {
            open.push('[');
            close.insert(0, ']');
        } else {
            open.push_str("{\"k\":");
            close.insert(0, '}');
        }
    }
    format!("{{\"id\":{id},\"v\":{open}0{close}}}\n")
}

// A line of 60 KB nested 30,000 deep overflowed the audit's stack and
// aborted the engine, on every rerun. It now fails naming its line and
// column, and a value nested to the limit is read.
#[test]
fn a_value_nested_deeper_than_the_limit_names_its_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    for depth in [MAX_NESTING, 30_000] {
        let text = format!("{}{}", nested_line(1, 3), nested_line(2, depth));
        let path = write(dir.path(), "deep.jsonl", &text);
        let error = collect(&path, Format::Jsonl).err().expect("too deep");
        assert_eq!(
            error.to_string(),
            format!(
                "`{}` line 2: the value of column `v` is nested deeper than 128 levels, \
                 the most the audit reads",
                path.display()
            )
        );
    }
    // The row's object is level 1: a value of 127 levels is read whole.
    let path = write(dir.path(), "ok.jsonl", &nested_line(1, MAX_NESTING - 1));
    let (_, rows) = collect(&path, Format::Jsonl).expect("reads");
    let value = rows.0[0].1[1].clone().expect("not null");
    assert_eq!(value.matches('[').count() + value.matches('{').count(), 127);
    // A line that is not an object is held to serde_json's own limit.
    let path = write(dir.path(), "array.jsonl", &"[".repeat(30_000));
    match collect(&path, Format::Jsonl).err().expect("fails") {
        AuditError::Parse { line, message, .. } => {
            assert_eq!(line, 1);
            assert!(message.contains("recursion limit exceeded"), "{message}");
        }
        other => panic!("unexpected error {other:?}"),
    }
}

// Files of more columns than MAX_COLUMNS fail naming where the limit was
// passed: a JSON Lines line's own keys, or the keys of its lines together.
#[test]
fn json_lines_of_more_columns_than_the_limit_name_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let object = |from: usize, to: usize| {
        let keys: Vec<String> = (from..to).map(|k| format!("\"k{k}\":1")).collect();
        format!("{{{}}}\n", keys.join(","))
    };
    let half = MAX_COLUMNS / 2 + 1;
    for (name, text, line) in [
        ("one.jsonl", object(0, MAX_COLUMNS + 1), 1),
        (
            "two.jsonl",
            format!(
                "{}{}{}",
                object(0, half),
                object(0, half),
                object(half, 2 * half)
            ),
            3,
        ),
    ] {
        let path = write(dir.path(), name, &text);
        let error = collect(&path, Format::Jsonl).err().expect("too wide");
        assert_eq!(
            error.to_string(),
            format!(
                "`{}` line {line}: more than 100000 columns, the most the audit reads",
                path.display()
            )
        );
    }
    let path = write(dir.path(), "at.jsonl", &object(0, MAX_COLUMNS));
    let (columns, _) = collect(&path, Format::Jsonl).expect("reads");
    assert_eq!(columns.len(), MAX_COLUMNS);
}

// Compact text is written as the value is parsed: keys sorted (by bytes,
// escaped ones unescaped first), a repeated key keeping its last value,
// items in order.
#[test]
fn compact_text_sorts_keys_and_keeps_a_repeated_keys_last_value() {
    let mut out = Vec::new();
    compact(
        r#"{"b":[1, {"y":2,"x":[]}],"a":1,"\u0061a":{},"a":"last"}"#,
        &mut out,
        2,
    )
    .expect("valid JSON");
    assert_eq!(
        String::from_utf8(out).expect("UTF-8"),
        r#"{"a":"last","aa":{},"b":[1,{"x":[],"y":2}]}"#
    );
}

proptest::proptest! {
    // The word-at-a-time comma split finds the fields a byte-by-byte split
    // does, with commas, quotes and carriage returns at every offset of
    // lines longer than a word, and says so when a quote or `\r` is there.
    #[test]
    fn comma_split_agrees_with_a_byte_by_byte_split(
        line in proptest::collection::vec(
            proptest::prop_oneof![
                8 => proptest::prelude::Just(b'x'),
                3 => proptest::prelude::Just(b','),
                1 => proptest::prelude::Just(b'"'),
                1 => proptest::prelude::Just(b'\r'),
                1 => 0u8..=255,
            ],
            0..70,
        ),
        base in 0usize..100,
    ) {
        let mut fields = Vec::new();
        let simple = super::csv_records::split_simple(&line, base, &mut fields);
        let expected_simple = !line.iter().any(|&b| b == b'"' || b == b'\r');
        proptest::prop_assert_eq!(simple, expected_simple);
        if simple {
            let mut expected = Vec::new();
            let mut from = 0;
            for (at, &byte) in line.iter().enumerate() {
                if byte == b',' {
                    expected.push((base + from, base + at));
                    from = at + 1;
                }
            }
            expected.push((base + from, base + line.len()));
            proptest::prop_assert_eq!(fields, expected);
        }
    }
}
