//! The audit step of write-audit-publish.
//!
//! A candidate is a set of data files, all CSV (with a header row), all JSON
//! Lines (one object per line) or all Parquet. [`audit`] reads them, runs the
//! quality gates and computes the candidate's canonical [`Digest`] in one
//! pass. A format is a reader (`read::Reader`) that turns files into
//! canonical rows; the gates and the digest consume only those rows.
//!
//! Files are streamed, never held in memory: each is folded into its own
//! accumulator on the rayon pool, a window of files at a time, and the
//! accumulators are merged in file order as each window is done. A record
//! over [`MAX_RECORD_BYTES`], a value over [`MAX_VALUE_BYTES`], a value or
//! schema nested deeper than [`MAX_NESTING`], more columns than
//! [`MAX_COLUMNS`] and more files than [`MAX_FILES`] fail the audit before more is read, so memory and stack
//! stay bounded whatever a task writes. With fewer files than threads (one big file), a CSV or JSON Lines
//! file is parsed on one thread while lanes on the others each digest a
//! share of its rows and run some of the key checks; a Parquet file is
//! folded in parts (ranges of its row groups), a part per thread at a time,
//! each into an accumulator of its own merged in file order. Memory is constant per file except for the
//! uniqueness checks, which keep an 8-byte fingerprint per key (80 MB for
//! 10 M rows; the grain check always does) and verify repeated fingerprints
//! against the keys by reading the files again (see `gates/keys.rs`).
//!
//! Values: a CSV field is its bytes and an empty field is null. In JSON Lines,
//! a string is its text, a number its literal text as written, a boolean
//! `true` / `false`, a nested array or object its compact JSON (keys sorted, numbers literal), and `null` or
//! a missing key is null. CSV files of one candidate must have the same set of
//! columns (in any order); JSON Lines columns are the union of the keys of all
//! rows, since any row may leave a key out.

mod candidate;
mod digest;
mod error;
mod format;
mod gates;
mod limits;
mod read;
pub mod words;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use candidate::{candidate_files, CandidateError};
pub use digest::{Digest, DigestParseError};
pub use error::AuditError;
pub use format::{Format, InputData};
pub use gates::{Aggregate, Gate, GateCheck, GateOutcome};
pub use limits::{MAX_COLUMNS, MAX_FILES, MAX_NESTING, MAX_RECORD_BYTES, MAX_VALUE_BYTES};

use digest::DigestFold;
use gates::{CandidateFold, Places};
use read::{Row, RowFold};

/// What to audit a candidate against.
#[derive(Debug, Clone, Copy)]
pub struct AuditSpec<'a> {
    /// The format of every candidate file.
    pub format: Format,
    /// The columns that make a row unique. Always checked for uniqueness and
    /// for nulls, even without a `unique` gate.
    pub grain: &'a [String],
    /// The gates, reported in this order after the grain check.
    pub gates: &'a [Gate],
    /// Inputs by name, for reconcile gates.
    pub inputs: &'a HashMap<String, InputData>,
}

/// What an audit found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditReport {
    /// The number of rows.
    pub rows: u64,
    /// The columns, sorted.
    pub columns: Vec<String>,
    /// The canonical digest of the rows.
    pub digest: Digest,
    /// One outcome per gate, the implicit grain-uniqueness check first.
    pub gates: Vec<GateOutcome>,
}

impl AuditReport {
    /// True if every gate passed.
    pub fn passed(&self) -> bool {
        self.gates.iter().all(|gate| gate.passed)
    }

    /// The outcomes of the gates that failed.
    pub fn failures(&self) -> impl Iterator<Item = &GateOutcome> + '_ {
        self.gates.iter().filter(|gate| !gate.passed)
    }

    /// Applies `redact` to every text the report took from the data (the
    /// columns, each gate's values and offending rows), before it is written
    /// down anywhere: a task may write a secret into the very row a gate
    /// quotes.
    pub fn redact(&mut self, redact: &dyn Fn(&str) -> String) {
        for column in &mut self.columns {
            *column = redact(column);
        }
        for gate in &mut self.gates {
            for text in [&mut gate.gate, &mut gate.expected, &mut gate.actual]
                .into_iter()
                .chain(&mut gate.offending)
            {
                *text = redact(text);
            }
        }
    }
}

/// Reads `files` (all in `spec.format`) and audits them.
pub fn audit(files: &[PathBuf], spec: &AuditSpec<'_>) -> Result<AuditReport, AuditError> {
    audit_with(files, spec, &|_| {})
}

/// [`audit`], calling `probe` with each file on the thread that starts
/// reading it (a rayon worker when there are several files): the engine's
/// fault points (`exec::fault`) rehearse a reader's panic there.
pub fn audit_with(
    files: &[PathBuf],
    spec: &AuditSpec<'_>,
    probe: &(dyn Fn(&Path) + Sync),
) -> Result<AuditReport, AuditError> {
    let read_candidate = || {
        let make = |file: usize, columns: &[String]| {
            if let Some(path) = files.get(file) {
                probe(path);
            }
            CandidateFold::new(file, columns, spec.grain, spec.gates)
        };
        read::fold_files(files, spec.format, true, &make)
    };
    let read_inputs = || gates::read_inputs(spec.gates, spec.inputs);
    // Inputs that reconcile gates compare with are read alongside the
    // candidate, on the rayon pool; without such gates there is nothing to
    // read alongside, and the pool is not woken.
    let reconciles = spec
        .gates
        .iter()
        .any(|gate| matches!(gate, Gate::Reconcile { .. }));
    let (candidate, inputs) = if reconciles {
        rayon::join(read_candidate, read_inputs)
    } else {
        (read_candidate(), read_inputs())
    };
    let (columns, mut fold) = candidate?;
    let inputs = inputs?;
    fold.locate_duplicates(files, spec.format)?;
    Ok(AuditReport {
        rows: fold.rows(),
        digest: fold.digest(&columns),
        gates: fold.outcomes(
            spec.gates,
            &columns,
            &Places::new(files, spec.format),
            &inputs,
        ),
        columns,
    })
}

/// Digest only (no gates): used by `weir verify` and tests. Returns the
/// number of rows and the digest.
pub fn digest_files(files: &[PathBuf], format: Format) -> Result<(u64, Digest), AuditError> {
    let (columns, merged) =
        read::fold_files(files, format, true, &|_, columns| DigestFold::new(columns))?;
    Ok((merged.rows(), merged.finish(&columns)))
}

/// Reads every row of the files and counts the rows and the bytes of their
/// values, without the digest or any gate: what reading a format costs on
/// its own (`examples/audit_bench --scan`).
pub fn scan_files(files: &[PathBuf], format: Format) -> Result<(u64, u64), AuditError> {
    let (_, scan) = read::fold_files(files, format, false, &|_, columns| Scan {
        width: columns.len(),
        rows: 0,
        bytes: 0,
    })?;
    Ok((scan.rows, scan.bytes))
}

/// Counts rows and value bytes for [`scan_files`].
struct Scan {
    width: usize,
    rows: u64,
    bytes: u64,
}

impl RowFold for Scan {
    const PARTS: bool = true;

    fn append(&mut self, later: Self) {
        self.rows += later.rows;
        self.bytes += later.bytes;
    }

    fn row(&mut self, row: &Row<'_>) {
        self.rows += 1;
        for column in 0..self.width {
            self.bytes += row.get(column).map_or(0, |value| value.len() as u64);
        }
    }
}

/// Lists the data files of a directory for a format: every regular file (or
/// link to one) whose name ends in `.csv` / `.jsonl` / `.parquet`, sorted by name, not
/// descending into subdirectories.
pub fn data_files(dir: &Path, format: Format) -> std::io::Result<Vec<PathBuf>> {
    let suffix = format!(".{}", format.extension());
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let named = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.ends_with(&suffix));
        if named && std::fs::metadata(entry.path())?.is_file() {
            files.push(entry.path());
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

/// One row's values in sorted column order, `None` for null, as
/// [`read_rows`] returns them.
pub type CanonicalRow = Vec<Option<String>>;

/// Reads all rows of files as canonical rows, for small data only (`weir
/// show`, `weir verify` diffs): the sorted columns, and each row's values in
/// that order (`None` for null), rows in file order then line order.
pub fn read_rows(
    files: &[PathBuf],
    format: Format,
) -> Result<(Vec<String>, Vec<CanonicalRow>), AuditError> {
    let (columns, fold) = read::fold_files(files, format, true, &|_, columns| Rows {
        width: columns.len(),
        rows: Vec::new(),
    })?;
    Ok((columns, fold.rows))
}

/// One row's values as bytes, exactly as read (`None` for null).
pub type RawRow = Vec<Option<Vec<u8>>>;

/// [`read_rows`] without decoding: values are their bytes as is, so a value
/// that is not UTF-8 is shown as it was written (`weir show`). With a
/// `limit`, the first `limit` rows in file order, each file read only up to
/// `limit` rows (`weir show --limit 10` of a large partition stays quick).
pub fn read_raw_rows(
    files: &[PathBuf],
    format: Format,
    limit: Option<usize>,
) -> Result<(Vec<String>, Vec<RawRow>), AuditError> {
    let Some(limit) = limit else {
        let (columns, fold) = read::fold_files(files, format, true, &|_, columns| RawRows {
            width: columns.len(),
            rows: Vec::new(),
        })?;
        return Ok((columns, fold.rows));
    };
    let (columns, fold) = read::fold_files(files, format, true, &|_, columns| FirstRawRows {
        rows: RawRows {
            width: columns.len(),
            rows: Vec::new(),
        },
        limit,
    })?;
    Ok((columns, fold.rows.rows))
}

/// Collects rows as text for [`read_rows`].
struct Rows {
    width: usize,
    rows: Vec<CanonicalRow>,
}

impl RowFold for Rows {
    const PARTS: bool = true;

    fn append(&mut self, mut later: Self) {
        self.rows.append(&mut later.rows);
    }

    fn row(&mut self, row: &Row<'_>) {
        let values = (0..self.width)
            .map(|column| {
                row.get(column)
                    .map(|value| String::from_utf8_lossy(value).into_owned())
            })
            .collect();
        self.rows.push(values);
    }
}

/// Collects rows as bytes for [`read_raw_rows`].
struct RawRows {
    width: usize,
    rows: Vec<RawRow>,
}

impl RowFold for RawRows {
    const PARTS: bool = true;

    fn append(&mut self, mut later: Self) {
        self.rows.append(&mut later.rows);
    }

    fn row(&mut self, row: &Row<'_>) {
        let values = (0..self.width)
            .map(|column| row.get(column).map(<[u8]>::to_vec))
            .collect();
        self.rows.push(values);
    }
}

/// A file's first `limit` rows as bytes: reading stops there.
struct FirstRawRows {
    rows: RawRows,
    limit: usize,
}

impl RowFold for FirstRawRows {
    const STOPS_EARLY: bool = true;

    fn append(&mut self, mut later: Self) {
        // Files after the first `limit` rows add nothing.
        let wanted = self.limit.saturating_sub(self.rows.rows.len());
        later.rows.rows.truncate(wanted);
        self.rows.append(later.rows);
    }

    fn row(&mut self, row: &Row<'_>) {
        self.rows.row(row);
    }

    fn satisfied(&self) -> bool {
        self.rows.rows.len() >= self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write test file");
        path
    }

    #[test]
    fn data_files_lists_matching_regular_files_sorted() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["b.csv", "a.csv", "c.jsonl", "notes.txt", "d.csv.tmp"] {
            write(dir.path(), name, "x\n");
        }
        std::fs::create_dir(dir.path().join("sub.csv")).expect("mkdir");
        write(&dir.path().join("sub.csv"), "e.csv", "x\n");
        let names = |format| -> Vec<String> {
            data_files(dir.path(), format)
                .expect("lists")
                .iter()
                .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
                .collect()
        };
        assert_eq!(names(Format::Csv), ["a.csv", "b.csv"]);
        assert_eq!(names(Format::Jsonl), ["c.jsonl"]);
        assert!(data_files(&dir.path().join("missing"), Format::Csv).is_err());
    }

    #[test]
    fn read_rows_returns_canonical_rows_in_file_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = write(dir.path(), "a.jsonl", "{\"b\":1,\"a\":\"x\"}\n");
        let b = write(
            dir.path(),
            "b.jsonl",
            "{\"c\":[1,2]}\n{\"a\":null,\"b\":2.5}\n",
        );
        let (columns, rows) = read_rows(&[a, b], Format::Jsonl).expect("reads");
        assert_eq!(columns, ["a", "b", "c"]);
        let s = |t: &str| Some(t.to_owned());
        assert_eq!(
            rows,
            vec![
                vec![s("x"), s("1"), None],
                vec![None, None, s("[1,2]")],
                vec![None, s("2.5"), None],
            ]
        );
    }

    // The probe runs on the rayon workers reading a candidate of
    // several files, so a fault injected there is a panic in a worker.
    #[test]
    fn audit_probe_runs_on_the_threads_reading_the_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = write(dir.path(), "a.csv", "id\n1\n");
        let b = write(dir.path(), "b.csv", "id\n2\n");
        let grain = vec!["id".to_owned()];
        let inputs = HashMap::new();
        let spec = AuditSpec {
            format: Format::Csv,
            grain: &grain,
            gates: &[],
            inputs: &inputs,
        };
        let seen = std::sync::Mutex::new(Vec::new());
        let probe = |path: &Path| {
            let worker = rayon::current_thread_index().is_some();
            seen.lock().unwrap().push((path.to_path_buf(), worker));
        };
        let report = audit_with(&[a.clone(), b.clone()], &spec, &probe).expect("audits");
        assert_eq!(report.rows, 2);
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        assert_eq!(seen, [(a, true), (b, true)]);
    }

    #[test]
    fn audit_rejects_csv_files_with_different_columns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = write(dir.path(), "a.csv", "id,v\n1,2\n");
        let b = write(dir.path(), "b.csv", "id,w\n3,4\n");
        let grain = vec!["id".to_owned()];
        let inputs = HashMap::new();
        let spec = AuditSpec {
            format: Format::Csv,
            grain: &grain,
            gates: &[],
            inputs: &inputs,
        };
        let error = audit(&[a, b.clone()], &spec).expect_err("mismatch");
        assert_eq!(
            error.to_string(),
            format!(
                "`{}` has columns (id, w) but the first file has (id, v)",
                b.display()
            )
        );
    }

    #[test]
    fn audit_reports_the_first_malformed_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = write(dir.path(), "a.csv", "id\n1\n");
        let b = write(dir.path(), "b.csv", "id\n2\n3,4\n");
        let grain = vec!["id".to_owned()];
        let inputs = HashMap::new();
        let spec = AuditSpec {
            format: Format::Csv,
            grain: &grain,
            gates: &[],
            inputs: &inputs,
        };
        let error = audit(&[a, b.clone()], &spec).expect_err("malformed");
        assert_eq!(
            error.to_string(),
            format!(
                "cannot parse `{}` at line 3: found 2 fields where the header has 1",
                b.display()
            )
        );
    }

    #[test]
    fn jsonl_grain_duplicates_across_files_with_different_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = write(dir.path(), "a.jsonl", "{\"id\":1}\n{\"id\":2}\n");
        let b = write(
            dir.path(),
            "b.jsonl",
            "{\"id\":3,\"x\":true}\n\n{\"id\":1,\"x\":false}\n",
        );
        let grain = vec!["id".to_owned()];
        let inputs = HashMap::new();
        let spec = AuditSpec {
            format: Format::Jsonl,
            grain: &grain,
            gates: &[],
            inputs: &inputs,
        };
        let report = audit(&[a, b], &spec).expect("audits");
        assert_eq!(report.rows, 4);
        assert_eq!(report.columns, ["id", "x"]);
        assert_eq!(report.gates[0].actual, "1 duplicate key");
        assert_eq!(report.gates[0].offending, ["b.jsonl line 3: id=1"]);
    }

    #[test]
    fn report_round_trips_through_json() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = write(dir.path(), "a.csv", "id\n1\n");
        let grain = vec!["id".to_owned()];
        let gates = [Gate::RowCount {
            min: Some(2),
            max: None,
        }];
        let inputs = HashMap::new();
        let spec = AuditSpec {
            format: Format::Csv,
            grain: &grain,
            gates: &gates,
            inputs: &inputs,
        };
        let report = audit(std::slice::from_ref(&a), &spec).expect("audits");
        assert_eq!(
            report.digest,
            digest_files(&[a], Format::Csv).expect("digests").1
        );
        let json = serde_json::to_value(&report).expect("serializes");
        assert_eq!(json["digest"], report.digest.as_str());
        assert_eq!(json["gates"][1]["gate"], "row_count(min 2)");
        let back: AuditReport = serde_json::from_value(json).expect("deserializes");
        assert_eq!(back.gates, report.gates);
        assert_eq!(back.digest, report.digest);
        assert!(!back.passed());
        assert_eq!(Format::Jsonl.extension(), "jsonl");
        assert_eq!(
            serde_json::to_string(&Format::Csv).expect("serializes"),
            "\"csv\""
        );
    }
}
