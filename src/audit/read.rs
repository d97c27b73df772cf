//! Streaming readers: turn CSV, JSON Lines and Parquet files into canonical
//! rows, one at a time, and fold them into per-file accumulators in parallel.
//! Each format is a [`Reader`]; everything downstream sees only rows.
//!
//! A canonical row has one slot per column of the file, columns sorted by
//! name, each slot null or a byte string. Rows are lent to the accumulator and
//! never collected, so memory stays flat however large the file is.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};

use rayon::prelude::*;
use serde_json::value::RawValue;
use serde_json::Value;

use super::csv_records::{CsvRecords, Field};
use super::parquet::ParquetFile;
use super::{AuditError, Format, MAX_FILES, MAX_RECORD_BYTES, MAX_VALUE_BYTES};

/// Read buffer: large sequential reads keep syscalls off the profile of
/// gigabyte files.
pub(super) const BUFFER: usize = 1 << 20;

/// A parsed JSON Lines row: each key's value as its raw JSON text (a
/// repeated key keeps its last value, as serde_json's map does).
type Object = std::collections::BTreeMap<String, Box<RawValue>>;

/// Where a value lies in a row's byte buffer; `None` is null.
pub(crate) type Span = Option<(usize, usize)>;

/// One canonical row, borrowed from the reader's reused buffers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row<'a> {
    /// The file line the row starts on (1-based; CSV line 1 is the header).
    pub(crate) line: u64,
    /// The bytes the spans point into.
    data: &'a [u8],
    /// One span per column, in sorted column order.
    spans: &'a [Span],
}

impl<'a> Row<'a> {
    /// The value of the `column`-th sorted column, or `None` when it is null.
    pub(crate) fn get(&self, column: usize) -> Option<&'a [u8]> {
        let (start, end) = self.spans.get(column).copied().flatten()?;
        self.data.get(start..end)
    }
}

/// An accumulator that one file's rows are folded into.
pub(crate) trait RowFold: Sized + Send {
    /// True for a fold that usually stops early ([`RowFold::satisfied`]
    /// after a few rows, `weir show --limit`): its files are then read on
    /// one thread each, where `satisfied` is consulted, instead of
    /// pipelined, where the whole file would be parsed.
    const STOPS_EARLY: bool = false;

    /// Takes one row.
    fn row(&mut self, row: &Row<'_>);

    /// Called once early in a file with an estimate of its total rows (from
    /// its size and the bytes per row so far), so storage can be sized once.
    fn expect_rows(&mut self, _rows: u64) {}

    /// True once more rows cannot change the result, so reading can stop.
    fn satisfied(&self) -> bool {
        false
    }

    /// Moves part of the work into another accumulator (a lane) that takes
    /// the same rows on another thread; `None` if no more work divides off.
    /// May be called repeatedly.
    fn split(&mut self) -> Option<Self> {
        None
    }

    /// Takes back the work a [`RowFold::split`] moved out. Lanes are joined
    /// last split first.
    fn join(&mut self, _lane: Self) {}

    /// True for a fold that can take a file in parts: rows `a..b` folded
    /// into one accumulator and rows `b..c` into another made the same way,
    /// then [`RowFold::append`]ed, give the same result as folding `a..c`
    /// into one. Parquet's row groups are then folded on separate threads.
    const PARTS: bool = false;

    /// Takes in the fold of the rows right after this one's: the next file
    /// ([`fold_files`] merges files' accumulators so, and every fold given
    /// to it implements this), or the next part of the file (only when
    /// [`RowFold::PARTS`]). The default, for folds only ever given one file
    /// whole ([`fold_file`]), takes nothing in.
    fn append(&mut self, _later: Self) {}

    /// Called after the file's last row, before the result is used.
    fn finish(&mut self) {}
}

/// Folds every file (in parallel) into its own accumulator built by
/// `make(file index, sorted columns of that file)`, and merges them in file
/// order ([`RowFold::append`]) as they are done.
///
/// Returns the candidate's sorted columns and the merged accumulator. Files
/// are folded a window of [`WINDOW_FILES`] at a time, so however many files
/// there are (up to [`MAX_FILES`]), only a window's accumulators are held at
/// once besides the merge. CSV files must all have the same set of columns.
/// JSON Lines rows may omit keys (a missing key is null), so their columns
/// are the union over all files; with `uniform`, the accumulator is
/// guaranteed to have been built with that union, every file being folded
/// again with it when files' keys differ (needed by the digest, whose row
/// encoding names every column).
pub(crate) fn fold_files<F, M>(
    files: &[PathBuf],
    format: Format,
    uniform: bool,
    make: &M,
) -> Result<(Vec<String>, F), AuditError>
where
    F: RowFold,
    M: Fn(usize, &[String]) -> F + Sync,
{
    if files.len() > MAX_FILES {
        return Err(AuditError::TooManyFiles {
            files: files.len(),
            limit: MAX_FILES,
        });
    }
    match format {
        Format::Csv => fold_files_as::<Csv, F, M>(files, uniform, make),
        Format::Jsonl => fold_files_as::<Jsonl, F, M>(files, uniform, make),
        Format::Parquet => fold_files_as::<Parquet, F, M>(files, uniform, make),
    }
}

/// A format's reader: how the files of a candidate are checked against each
/// other, and how one file becomes canonical [`Row`]s. The gates and the
/// digest see only rows, never a format.
pub(crate) trait Reader {
    /// True if files may lack columns, the candidate's columns being the
    /// union of theirs (JSON Lines: any row may leave a key out). Otherwise
    /// every file must have the same columns.
    const UNION: bool = false;

    /// Checks the files against each other before any row is read.
    fn precheck(_files: &[PathBuf]) -> Result<(), AuditError> {
        Ok(())
    }

    /// Folds one file up to its last row. `columns` (only with
    /// [`Reader::UNION`]) fixes the file's columns to a superset of its own;
    /// `pipeline` lets a large file be read on several threads.
    fn fold_rows<F: RowFold>(
        path: &Path,
        columns: Option<&[String]>,
        pipeline: bool,
        make: &dyn Fn(&[String]) -> F,
    ) -> Result<(Vec<String>, F), AuditError>;
}

/// CSV with a header row.
pub(crate) struct Csv;
/// JSON Lines.
pub(crate) struct Jsonl;
/// Parquet (see [`super::parquet`]).
pub(crate) struct Parquet;

impl Reader for Csv {
    fn fold_rows<F: RowFold>(
        path: &Path,
        _columns: Option<&[String]>,
        pipeline: bool,
        make: &dyn Fn(&[String]) -> F,
    ) -> Result<(Vec<String>, F), AuditError> {
        fold_csv(path, pipeline, make)
    }
}

impl Reader for Jsonl {
    const UNION: bool = true;

    fn fold_rows<F: RowFold>(
        path: &Path,
        columns: Option<&[String]>,
        _pipeline: bool,
        make: &dyn Fn(&[String]) -> F,
    ) -> Result<(Vec<String>, F), AuditError> {
        // Optimistically take the first object's keys as the columns: the
        // common file has the same keys on every line and is read once.
        if let Pass::Done(c, fold) = fold_jsonl(path, columns.map(<[String]>::to_vec), make)? {
            return Ok((c, fold));
        }
        let mut keys = jsonl_keys(path)?;
        keys.extend(columns.into_iter().flatten().cloned());
        match fold_jsonl(path, Some(keys.into_iter().collect()), make)? {
            Pass::Done(c, fold) => Ok((c, fold)),
            Pass::NewKeys(line) => Err(parse_error(
                path,
                line,
                "the file changed while it was being read".to_owned(),
            )),
        }
    }
}

impl Reader for Parquet {
    fn precheck(files: &[PathBuf]) -> Result<(), AuditError> {
        same_schema(files)
    }

    fn fold_rows<F: RowFold>(
        path: &Path,
        _columns: Option<&[String]>,
        pipeline: bool,
        make: &dyn Fn(&[String]) -> F,
    ) -> Result<(Vec<String>, F), AuditError> {
        fold_parquet(path, pipeline, make)
    }
}

/// Files folded at once in [`fold_files`]: enough to keep every core busy
/// with small files, few enough that their accumulators (a few kilobytes
/// each when empty) stay small beside the merge.
const WINDOW_FILES: usize = 256;

/// [`fold_files`] with the reader `R`.
fn fold_files_as<R, F, M>(
    files: &[PathBuf],
    uniform: bool,
    make: &M,
) -> Result<(Vec<String>, F), AuditError>
where
    R: Reader,
    F: RowFold,
    M: Fn(usize, &[String]) -> F + Sync,
{
    R::precheck(files)?;
    match merge_files::<R, F, M>(files, None, uniform, make)? {
        Merged::Done(columns, fold) => Ok((columns, fold)),
        // JSON Lines files with different keys, to be kept uniform: their
        // accumulators cannot be merged, the digest of a row naming every
        // column. Every file is folded again with the union (rare: the
        // files of a candidate commonly all have the same keys).
        Merged::Mixed(union) => match merge_files::<R, F, M>(files, Some(&union), uniform, make)? {
            Merged::Done(columns, fold) => Ok((columns, fold)),
            Merged::Mixed(_) => Err(parse_error(
                files.first().map_or(Path::new(""), PathBuf::as_path),
                0,
                "the files changed while they were being read".to_owned(),
            )),
        },
    }
}

/// What [`merge_files`] made of the files.
enum Merged<F> {
    /// The candidate's columns and the merge of every file's accumulator.
    Done(Vec<String>, F),
    /// Files of a union format had different keys: the union, to fold them
    /// all with.
    Mixed(Vec<String>),
}

/// Folds the files a window at a time and merges their accumulators in
/// file order. `columns` (JSON Lines only) fixes every file's columns; with
/// `uniform`, files of different keys are not merged but reported as
/// [`Merged::Mixed`].
fn merge_files<R, F, M>(
    files: &[PathBuf],
    columns: Option<&[String]>,
    uniform: bool,
    make: &M,
) -> Result<Merged<F>, AuditError>
where
    R: Reader,
    F: RowFold,
    M: Fn(usize, &[String]) -> F + Sync,
{
    // Fewer files than threads would leave cores idle: then each file is
    // parsed and folded on separate threads too.
    let pipeline =
        columns.is_none() && !F::STOPS_EARLY && files.len() < rayon::current_num_threads();
    let fold = |(index, path): (usize, &PathBuf)| {
        fold_one::<R, F>(path, columns, pipeline, &|c| make(index, c))
    };
    let mut merged: Option<(Vec<String>, F)> = None;
    // With files of different keys, the union of all files' keys.
    let mut union: Option<BTreeSet<String>> = None;
    for (window, chunk) in files.chunks(WINDOW_FILES).enumerate() {
        let first = window * WINDOW_FILES;
        let indexed = chunk.iter().enumerate().map(|(k, path)| (first + k, path));
        // One file (most candidates) is folded here: the pool would only
        // hand it to a worker and wake this thread again when it is done.
        let results: Vec<Result<(Vec<String>, F), AuditError>> = if chunk.len() == 1 {
            indexed.map(fold).collect()
        } else {
            let indexed: Vec<(usize, &PathBuf)> = indexed.collect();
            indexed.into_par_iter().map(fold).collect()
        };
        // Taken in file order, so the error reported is the first file's.
        for (path, result) in chunk.iter().zip(results) {
            let (own, fold) = result?;
            if let Some(union) = &mut union {
                union.extend(own);
                continue;
            }
            let Some((expected, into)) = &mut merged else {
                merged = Some((own, fold));
                continue;
            };
            if own == *expected {
                into.append(fold);
            } else if !R::UNION {
                return Err(AuditError::HeaderMismatch {
                    path: path.clone(),
                    expected: expected.clone(),
                    found: own,
                });
            } else if !uniform {
                // Folds that resolved their columns per file merge whatever
                // each file's keys; the columns are their union.
                let mut all: BTreeSet<String> = expected.drain(..).collect();
                all.extend(own);
                *expected = all.into_iter().collect();
                into.append(fold);
            } else {
                let mut all: BTreeSet<String> = expected.drain(..).collect();
                all.extend(own);
                union = Some(all);
                merged = None;
            }
        }
    }
    if let Some(union) = union {
        return Ok(Merged::Mixed(union.into_iter().collect()));
    }
    Ok(match merged {
        Some((columns, fold)) => Merged::Done(columns, fold),
        None => {
            let columns = columns.map(<[String]>::to_vec).unwrap_or_default();
            let fold = make(0, &columns);
            Merged::Done(columns, fold)
        }
    })
}

/// Checks that every Parquet file has the first file's columns with the
/// same types (nullability aside), reading only their footers; the error
/// names the first file and column that differ.
fn same_schema(files: &[PathBuf]) -> Result<(), AuditError> {
    type Types = std::collections::BTreeMap<String, String>;
    let types = |path: &PathBuf| -> Result<Types, AuditError> {
        let file = ParquetFile::open(path)?;
        Ok(file
            .schema()
            .fields()
            .iter()
            .map(|field| (field.name().clone(), field.data_type().to_string()))
            .collect())
    };
    // A window of footers at a time: only the first file's types are kept.
    let mut want: Option<Types> = None;
    for chunk in files.chunks(WINDOW_FILES) {
        let opened: Vec<Result<Types, AuditError>> = chunk.par_iter().map(types).collect();
        for (path, found) in chunk.iter().zip(opened) {
            let found = found?;
            let Some(want) = &want else {
                want = Some(found);
                continue;
            };
            let names: BTreeSet<&String> = want.keys().chain(found.keys()).collect();
            for name in names {
                let (a, b) = (want.get(name), found.get(name));
                if a != b {
                    return Err(AuditError::SchemaMismatch {
                        path: path.clone(),
                        column: name.clone(),
                        expected: a.cloned().unwrap_or_else(|| "no such column".to_owned()),
                        found: b.cloned().unwrap_or_else(|| "no such column".to_owned()),
                    });
                }
            }
        }
    }
    Ok(())
}

/// Streams a Parquet file's rows through `make(columns)`'s accumulator:
/// with `pipeline`, in parts on every core if the fold takes them
/// ([`RowFold::PARTS`]); on this thread otherwise.
fn fold_parquet<F: RowFold>(
    path: &Path,
    pipeline: bool,
    make: &dyn Fn(&[String]) -> F,
) -> Result<(Vec<String>, F), AuditError> {
    let file = ParquetFile::open(path)?;
    if pipeline && F::PARTS {
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        let fold = file.fold_in_parts(threads, make)?;
        return Ok((file.columns.clone(), fold));
    }
    let mut fold = make(&file.columns);
    file.fold_here(&mut fold)?;
    Ok((file.columns.clone(), fold))
}

/// Folds one file. `columns` (JSON Lines only) fixes the file's columns to a
/// superset of its keys; otherwise they are discovered while reading.
/// `pipeline` lets a large CSV file be parsed and folded on separate threads
/// (then `satisfied` is not consulted).
pub(crate) fn fold_file<F: RowFold>(
    path: &Path,
    format: Format,
    columns: Option<&[String]>,
    pipeline: bool,
    make: &dyn Fn(&[String]) -> F,
) -> Result<(Vec<String>, F), AuditError> {
    match format {
        Format::Csv => fold_one::<Csv, F>(path, columns, pipeline, make),
        Format::Jsonl => fold_one::<Jsonl, F>(path, columns, pipeline, make),
        Format::Parquet => fold_one::<Parquet, F>(path, columns, pipeline, make),
    }
}

/// [`fold_file`] with the reader `R`.
fn fold_one<R: Reader, F: RowFold>(
    path: &Path,
    columns: Option<&[String]>,
    pipeline: bool,
    make: &dyn Fn(&[String]) -> F,
) -> Result<(Vec<String>, F), AuditError> {
    let (columns, mut fold) = R::fold_rows(path, columns, pipeline, make)?;
    fold.finish();
    Ok((columns, fold))
}

/// Opens a file for reading, naming it in the error.
pub(super) fn open(path: &Path) -> Result<File, AuditError> {
    File::open(path).map_err(|source| io_error(path, source))
}

pub(super) fn io_error(path: &Path, source: std::io::Error) -> AuditError {
    AuditError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A record or value of `path` at `place` over `limit` bytes.
pub(super) fn too_large(path: &Path, place: String, what: String, limit: usize) -> AuditError {
    AuditError::TooLarge {
        path: path.to_path_buf(),
        place,
        what,
        limit,
    }
}

pub(super) fn parse_error(path: &Path, line: u64, message: String) -> AuditError {
    AuditError::Parse {
        path: path.to_path_buf(),
        line,
        message,
    }
}

/// Streams a CSV file through `make(columns)`'s accumulator; with
/// `pipeline`, parsing and folding run on separate threads.
fn fold_csv<F: RowFold>(
    path: &Path,
    pipeline: bool,
    make: &dyn Fn(&[String]) -> F,
) -> Result<(Vec<String>, F), AuditError> {
    let (columns, mut records) = CsvRecords::open(path)?;
    let mut fold = make(&columns);
    if pipeline && records.estimate.size >= PIPELINE_BYTES {
        return Ok((columns, fold_pipelined(&mut records, fold)?));
    }
    let mut spans: Vec<Span> = Vec::with_capacity(columns.len());
    let mut data = Vec::new();
    while !fold.satisfied() {
        data.clear();
        let Some(line) = records.next_into(&mut data)? else {
            break;
        };
        if let Some(rows) = records.estimate.take() {
            fold.expect_rows(rows);
        }
        spans.clear();
        push_spans(&mut spans, &records.fields, &records.order);
        fold.row(&Row {
            line,
            data: &data,
            spans: &spans,
        });
    }
    Ok((columns, fold))
}

/// Appends a record's spans in sorted column order.
fn push_spans(spans: &mut Vec<Span>, fields: &[Field], order: &[usize]) {
    spans.extend(order.iter().map(|&position| {
        // Quoted or not, an empty field is null, so `""` and `` agree.
        fields
            .get(position)
            .copied()
            .filter(|(start, end)| start < end)
    }));
}

/// Files at least this large are parsed and folded on separate threads when
/// cores would otherwise idle; below it, starting threads is not worth it.
const PIPELINE_BYTES: u64 = 8 << 20;
/// Rows per batch handed from the parsing thread to the folding threads:
/// large enough that waking threads is rare.
const BATCH_ROWS: usize = 8192;
/// Folding threads per file at most (lanes beyond are folded together).
const MAX_LANES: usize = 4;
/// Batches queued per folding thread. The parser waits when a queue is full,
/// so with the batches being parsed and folded this bounds a pipelined read's
/// memory to a few megabytes.
const QUEUED: usize = 2;

/// Parsed rows on their way from the parsing thread to the folding threads:
/// all rows' bytes in one buffer, reused from batch to batch.
pub(crate) struct Batch {
    pub(crate) data: Vec<u8>,
    /// `width` spans per row, row after row.
    pub(crate) spans: Vec<Span>,
    /// Each row's line (Parquet: its 1-based row in the file).
    pub(crate) lines: Vec<u64>,
    /// The file's estimated rows, passed on with the batch it was made in.
    pub(crate) expect: Option<u64>,
}

impl Batch {
    pub(crate) fn new() -> Self {
        Self {
            data: Vec::new(),
            spans: Vec::new(),
            lines: Vec::new(),
            expect: None,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.data.clear();
        self.spans.clear();
        self.lines.clear();
        self.expect = None;
    }

    pub(crate) fn fold_into<F: RowFold>(&self, fold: &mut F) {
        if let Some(rows) = self.expect {
            fold.expect_rows(rows);
        }
        let width = self.spans.len() / self.lines.len().max(1);
        for (index, &line) in self.lines.iter().enumerate() {
            let spans = self
                .spans
                .get(index * width..(index + 1) * width)
                .unwrap_or_default();
            fold.row(&Row {
                line,
                data: &self.data,
                spans,
            });
        }
    }
}

/// Folds a CSV file with parsing on this thread and folding on one thread
/// per lane of the fold (see [`RowFold::split`]), which see every row.
///
/// Used when one file would otherwise keep one core busy and leave the rest
/// idle, as for a single large candidate file.
fn fold_pipelined<F: RowFold>(records: &mut CsvRecords<'_>, mut fold: F) -> Result<F, AuditError> {
    let path = records.path;
    let mut lanes = Vec::new();
    while lanes.len() + 1 < MAX_LANES {
        match fold.split() {
            Some(lane) => lanes.push(lane),
            None => break,
        }
    }
    let (recycle, returned) = mpsc::channel::<Batch>();
    let (result, lanes) = std::thread::scope(|scope| {
        let mut queues = Vec::new();
        let mut workers = Vec::new();
        for mut lane in std::iter::once(fold).chain(lanes) {
            let (queue, batches) = mpsc::sync_channel::<Arc<Batch>>(QUEUED);
            let recycle = recycle.clone();
            queues.push(queue);
            workers.push(scope.spawn(move || {
                for batch in batches {
                    batch.fold_into(&mut lane);
                    // The last lane done with a batch hands it back.
                    if let Some(batch) = Arc::into_inner(batch) {
                        // The parser may have stopped; then it is not wanted.
                        let _ = recycle.send(batch);
                    }
                }
                lane
            }));
        }
        drop(recycle);
        let mut send = |batch: Batch| -> bool {
            let Some((last, others)) = queues.split_last() else {
                return false;
            };
            let batch = Arc::new(batch);
            for queue in others {
                if queue.send(Arc::clone(&batch)).is_err() {
                    return false;
                }
            }
            // Moved, not cloned: this thread keeps no handle, so the last lane
            // to finish the batch can hand it back for reuse.
            last.send(batch).is_ok()
        };
        let result = produce(records, &mut send, &returned);
        // Closing the queues lets the lanes finish.
        drop(queues);
        let lanes: Vec<F> = workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect();
        (result, lanes)
    });
    result?;
    let mut lanes = lanes.into_iter();
    let mut fold = lanes
        .next()
        .ok_or_else(|| parse_error(path, 0, "internal error: no fold lane".to_owned()))?;
    for lane in lanes.rev() {
        fold.join(lane);
    }
    Ok(fold)
}

/// Folds a CSV file through the pipeline whatever its size, so tests can
/// check that a fold's lanes add up to the fold.
#[cfg(test)]
pub(crate) fn fold_csv_pipelined<F: RowFold>(
    path: &Path,
    make: &dyn Fn(&[String]) -> F,
) -> Result<(Vec<String>, F), AuditError> {
    let (columns, mut records) = CsvRecords::open(path)?;
    let mut fold = fold_pipelined(&mut records, make(&columns))?;
    fold.finish();
    Ok((columns, fold))
}

/// Parses records into batches and sends each to every queue, until the file
/// ends, it is malformed, or a lane has stopped.
fn produce(
    records: &mut CsvRecords<'_>,
    send: &mut dyn FnMut(Batch) -> bool,
    returned: &mpsc::Receiver<Batch>,
) -> Result<(), AuditError> {
    loop {
        // Lanes hand batches back once done with them; the bounded queues,
        // not this, are what keep the number of batches alive small.
        let mut batch = returned.try_recv().unwrap_or_else(|_| Batch::new());
        batch.clear();
        let mut done = false;
        while batch.lines.len() < BATCH_ROWS {
            let Some(line) = records.next_into(&mut batch.data)? else {
                done = true;
                break;
            };
            if let Some(rows) = records.estimate.take() {
                batch.expect = Some(rows);
            }
            push_spans(&mut batch.spans, &records.fields, &records.order);
            batch.lines.push(line);
        }
        if !batch.lines.is_empty() && !send(batch) {
            return Ok(());
        }
        if done {
            return Ok(());
        }
    }
}

/// Estimates a file's rows from its size once a sample of rows is read.
pub(super) struct RowEstimate {
    /// The file's size; 0 if unknown, which disables the estimate.
    size: u64,
    rows: u64,
    /// The estimate, until taken.
    ready: Option<u64>,
}

impl RowEstimate {
    /// Rows read before estimating: enough to average out odd first rows.
    const SAMPLE: u64 = 4096;

    pub(super) fn new(file: &File) -> Self {
        Self {
            size: file.metadata().map_or(0, |m| m.len()),
            rows: 0,
            ready: None,
        }
    }

    /// The file's size in bytes; 0 if unknown.
    pub(super) fn size(&self) -> u64 {
        self.size
    }

    /// Counts a row that ends `read` bytes into the file.
    pub(super) fn row(&mut self, read: u64) {
        self.rows += 1;
        if self.rows == Self::SAMPLE && self.size > 0 && read > 0 {
            let total = u128::from(self.size) * u128::from(self.rows) / u128::from(read);
            self.ready = Some(u64::try_from(total).unwrap_or(u64::MAX));
        }
    }

    /// The estimate, once.
    pub(super) fn take(&mut self) -> Option<u64> {
        self.ready.take()
    }
}

/// The result of one pass over a JSON Lines file.
enum Pass<F> {
    /// Every row was folded.
    Done(Vec<String>, F),
    /// The row on this line has a key outside the columns; nothing is usable.
    NewKeys(u64),
}

/// Streams a JSON Lines file through `make(columns)`'s accumulator. Without
/// `columns`, the first object's keys are taken as the columns.
fn fold_jsonl<F: RowFold>(
    path: &Path,
    columns: Option<Vec<String>>,
    make: &dyn Fn(&[String]) -> F,
) -> Result<Pass<F>, AuditError> {
    let mut state = columns.map(|columns| {
        let fold = make(&columns);
        (columns, fold)
    });
    let mut lines = JsonLines::open(path)?;
    let mut estimate = RowEstimate::new(lines.reader.get_ref());
    let mut data = Vec::new();
    let mut spans: Vec<Span> = Vec::new();
    while let Some((line, object)) = lines.next_object()? {
        let (columns, fold) = state.get_or_insert_with(|| {
            // serde_json's map may keep insertion order; the columns are sorted.
            let mut columns: Vec<String> = object.keys().cloned().collect();
            columns.sort();
            let fold = make(&columns);
            (columns, fold)
        });
        if fold.satisfied() {
            break;
        }
        data.clear();
        spans.clear();
        let mut found = 0;
        for name in columns.iter() {
            let value = object.get(name);
            found += usize::from(value.is_some());
            let span = value.and_then(|value| render(value, &mut data));
            if span.is_some_and(|(start, end)| end - start > MAX_VALUE_BYTES) {
                return Err(too_large(
                    path,
                    format!("line {line}"),
                    format!("the value of column `{name}`"),
                    MAX_VALUE_BYTES,
                ));
            }
            spans.push(span);
        }
        if found < object.len() {
            return Ok(Pass::NewKeys(line));
        }
        estimate.row(lines.read);
        if let Some(rows) = estimate.take() {
            fold.expect_rows(rows);
        }
        fold.row(&Row {
            line,
            data: &data,
            spans: &spans,
        });
    }
    let (columns, fold) = state.unwrap_or_else(|| (Vec::new(), make(&[])));
    Ok(Pass::Done(columns, fold))
}

/// Every key used by any object of a JSON Lines file.
fn jsonl_keys(path: &Path) -> Result<BTreeSet<String>, AuditError> {
    let mut keys = BTreeSet::new();
    let mut lines = JsonLines::open(path)?;
    while let Some((_, object)) = lines.next_object()? {
        keys.extend(object.into_keys());
    }
    Ok(keys)
}

/// Appends a JSON value's canonical text to `data`; `None` for null.
///
/// A number is its literal text as written (`123456789012345678901234567890`
/// stays exact, where a float would round it; for every integer and every
/// float in the shortest form serde_json writes, that is the text serde_json
/// would print). A nested array or object is compact JSON with its object
/// keys sorted, its strings escaped as serde_json escapes them and its
/// numbers literal: serde_json's compact text for every ordinary value.
fn render(value: &RawValue, data: &mut Vec<u8>) -> Span {
    let start = data.len();
    let text = value.get().trim();
    match text.as_bytes().first() {
        None | Some(b'n') => return None,
        Some(b'"') => match serde_json::from_str::<std::borrow::Cow<'_, str>>(text) {
            Ok(unescaped) => data.extend_from_slice(unescaped.as_bytes()),
            Err(_) => data.extend_from_slice(text.as_bytes()),
        },
        Some(b'[' | b'{') => {
            if compact(text, data).is_err() {
                data.truncate(start);
                data.extend_from_slice(text.as_bytes());
            }
        }
        // true, false and numbers: their literal text.
        Some(_) => data.extend_from_slice(text.as_bytes()),
    }
    Some((start, data.len()))
}

/// Appends the canonical compact text of a JSON value (see [`render`]).
fn compact(text: &str, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    match text.as_bytes().first() {
        Some(b'{') => {
            let object: Object = serde_json::from_str(text)?;
            out.push(b'{');
            for (i, (key, value)) in object.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key)?;
                out.push(b':');
                compact(value.get().trim(), out)?;
            }
            out.push(b'}');
        }
        Some(b'[') => {
            let items: Vec<Box<RawValue>> = serde_json::from_str(text)?;
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                compact(item.get().trim(), out)?;
            }
            out.push(b']');
        }
        Some(b'"') => {
            let unescaped: std::borrow::Cow<'_, str> = serde_json::from_str(text)?;
            serde_json::to_writer(&mut *out, &unescaped)?;
        }
        _ => out.extend_from_slice(text.as_bytes()),
    }
    Ok(())
}

/// A JSON Lines file read one object at a time.
struct JsonLines<'p> {
    path: &'p Path,
    reader: BufReader<File>,
    buf: Vec<u8>,
    line: u64,
    /// Bytes read so far.
    read: u64,
}

impl<'p> JsonLines<'p> {
    fn open(path: &'p Path) -> Result<Self, AuditError> {
        Ok(Self {
            path,
            reader: BufReader::with_capacity(BUFFER, open(path)?),
            buf: Vec::new(),
            line: 0,
            read: 0,
        })
    }

    /// The next object and its line number, skipping blank lines.
    fn next_object(&mut self) -> Result<Option<(u64, Object)>, AuditError> {
        loop {
            self.buf.clear();
            // One byte past the limit tells a line over it from one at it.
            let most = MAX_RECORD_BYTES as u64 + 1;
            let read = (&mut self.reader)
                .take(most)
                .read_until(b'\n', &mut self.buf)
                .map_err(|source| io_error(self.path, source))?;
            if read == 0 {
                return Ok(None);
            }
            if read as u64 == most && self.buf.last() != Some(&b'\n') {
                return Err(too_large(
                    self.path,
                    format!("line {}", self.line + 1),
                    "the record".to_owned(),
                    MAX_RECORD_BYTES,
                ));
            }
            self.read += read as u64;
            self.line += 1;
            if self.buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Ok(object) = serde_json::from_slice::<Object>(&self.buf) {
                return Ok(Some((self.line, object)));
            }
            // Not an object: say what it is instead.
            let value: Value = serde_json::from_slice(&self.buf)
                .map_err(|e| parse_error(self.path, self.line, format!("invalid JSON: {e}")))?;
            return Err(parse_error(
                self.path,
                self.line,
                format!("expected a JSON object, found {}", kind(&value)),
            ));
        }
    }
}

/// What a JSON value is, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects rows as text, for inspecting what the readers produce.
    struct Collect(Vec<(u64, Vec<Option<String>>)>, usize);

    impl RowFold for Collect {
        fn append(&mut self, mut later: Self) {
            self.0.append(&mut later.0);
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
        compact(ordinary, &mut out).expect("valid JSON");
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

    /// What the csv crate reads from `text` (header skipped), each record's
    /// fields in sorted column order, empty as null.
    fn csv_crate_rows(text: &str) -> Vec<Vec<Option<String>>> {
        let mut reader = csv::ReaderBuilder::new()
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
        // Issue 16: the CSV fast path (lines without quotes split on commas)
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

    // Issue 16: lines and quoted fields longer than the read buffer.
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

    // Issue 23.
    // https://github.com/weir/weir/issues/23 item 7: every file's
    // accumulator was held until all files were read (1,000,000 one-row
    // files OOM-killed the engine); they are merged in file order as they
    // are done, a window at a time.
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

    // Issue 23 item 7: JSON Lines files of different keys among many are
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

    // Issue 23 item 7: more files than MAX_FILES are refused before any is
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

    // Issue 23 item 7: a value over MAX_VALUE_BYTES in a record under
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

    // Issue 23 item 7: a record over MAX_RECORD_BYTES (a sparse file: a
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
}
