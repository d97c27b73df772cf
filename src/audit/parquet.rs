//! Parquet files as canonical rows, through the Arrow project's reader.
//!
//! A file's footer gives its schema and row groups. Unlike CSV lines, a
//! row group can be read from any row without reading the rows before it
//! (whole pages before that row are skipped by their headers), so a file is
//! folded in parts, ranges of up to 262,144 rows of a row group, on up to
//! one thread per core: each thread decodes a part, renders it in small
//! batches and folds them itself, into an accumulator of that part's own,
//! and the accumulators are merged in file order as they are done. Rendered
//! rows then never leave the core (and its cache) that rendered them, and
//! nothing is handed between threads per batch. Memory stays bounded by the
//! parts being folded.
//!
//! Every value is rendered to the text it would have in a CSV file (see the
//! README's "The canonical digest"), so the same logical rows digest the same
//! in CSV, JSON Lines and Parquet:
//!
//! - strings: their UTF-8 text; binary: its bytes; booleans `true` / `false`;
//! - integers: decimal digits; floats: the shortest text that reads back as
//!   the same value, as serde_json writes it (`2.5`, `1.0`, `1e-7`), and
//!   `NaN`, `inf`, `-inf`;
//! - decimals: the unscaled integer with the scale's digits after the point
//!   (`DECIMAL(9,2)` 1250 is `12.50`);
//! - dates `YYYY-MM-DD`, years -9999 to 9999; times `HH:MM:SS` with the
//!   fraction's digits that are not trailing zeros; timestamps adjusted to
//!   UTC as RFC 3339 with `Z` (`2026-09-20T08:12:00Z`, `…00.25Z`), local
//!   timestamps without it;
//! - nulls are null (an empty string is a value, not null), Arrow's null
//!   type and a dictionary of no values included;
//! - lists, structs and maps: compact JSON text as a nested JSON Lines value
//!   is rendered (keys sorted; numbers as above, floats too, decimals as
//!   JSON numbers, dates, times and timestamps as strings, binary as lossy
//!   UTF-8);
//! - dictionary-encoded columns: their values. Other types (durations,
//!   intervals, unions) are refused, naming the column.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Decimal128Type, Decimal256Type, Decimal32Type, Decimal64Type,
    Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, RecordBatch};
use arrow_schema::{DataType, Schema, TimeUnit};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelectionPolicy, RowSelector,
};
use parquet::file::reader::{ChunkReader, Length};
use serde_json::Value;

use super::read::{Batch, RowFold, Span};
use super::{AuditError, MAX_VALUE_BYTES};

/// Rows per batch, rendered and folded on one thread: small enough for the
/// batch (about 200 bytes a row of values and spans in W6) to stay in the
/// core's L2 cache between the two.
const BATCH_ROWS: usize = 2048;
/// The fewest and most rows of a part. Fewer would spend much of a part
/// decoding the rest of the page it starts in (a writer's pages commonly
/// hold 20,000 rows); more would leave a thread idle at the end for long.
const PART_ROWS: (u64, u64) = (65_536, 262_144);
/// Parts per thread aimed at, so that threads finish about together
/// whatever the rows of each part cost.
const PARTS_PER_THREAD: u64 = 4;

/// Rows `skip..skip + rows` of row group `group`, the file's rows from
/// `first` (counted from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    group: usize,
    skip: u64,
    rows: u64,
    first: u64,
}

/// Cuts row groups of the given rows into parts of at most about `target`
/// rows each, of equal rows within a group, in file order.
fn parts_of(groups: &[u64], target: u64) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut first = 1;
    for (group, &rows) in groups.iter().enumerate() {
        let count = rows.div_ceil(target.max(1)).max(1);
        let mut skip = 0;
        for k in 0..count {
            // Spread the remainder over the first parts.
            let size = rows / count + u64::from(k < rows % count);
            parts.push(Part {
                group,
                skip,
                rows: size,
                first: first + skip,
            });
            skip += size;
        }
        first += rows;
    }
    parts
}

/// A file read with positioned reads (`pread`), so threads share one handle
/// without sharing a file offset.
#[derive(Clone)]
struct Shared(Arc<File>);

impl Length for Shared {
    fn len(&self) -> u64 {
        self.0.metadata().map_or(0, |m| m.len())
    }
}

/// A sequential reader over a [`Shared`] file from an offset.
struct ReadFrom {
    file: Arc<File>,
    at: u64,
}

impl Read for ReadFrom {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.file.read_at(buf, self.at)?;
        self.at += read as u64;
        Ok(read)
    }
}

impl ChunkReader for Shared {
    type T = std::io::BufReader<ReadFrom>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(std::io::BufReader::new(ReadFrom {
            file: Arc::clone(&self.0),
            at: start,
        }))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<bytes::Bytes> {
        let mut buffer = vec![0; length];
        self.0.read_exact_at(&mut buffer, start)?;
        Ok(buffer.into())
    }
}

/// An open Parquet file: its footer and its columns in sorted order.
pub(crate) struct ParquetFile {
    path: PathBuf,
    file: Shared,
    metadata: ArrowReaderMetadata,
    /// The footer with top-level strings and binaries read as views
    /// (`Utf8View`, `BinaryView`): their bytes stay in the decoded pages
    /// instead of being copied into an offsets array, which is most of the
    /// reader's cost on string columns. Only decoding uses it.
    decoding: ArrowReaderMetadata,
    /// The top-level columns, sorted by name.
    pub(crate) columns: Vec<String>,
    /// order[k] = the schema position of the k-th sorted column.
    order: Vec<usize>,
}

impl ParquetFile {
    /// Opens a file and reads its footer.
    pub(crate) fn open(path: &Path) -> Result<Self, AuditError> {
        let file = File::open(path).map_err(|source| AuditError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let file = Shared(Arc::new(file));
        let metadata = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
            .map_err(|e| invalid(path, &e))?;
        let mut named: Vec<(String, usize)> = metadata
            .schema()
            .fields()
            .iter()
            .enumerate()
            .map(|(position, field)| (field.name().clone(), position))
            .collect();
        named.sort();
        if let Some(pair) = named.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(AuditError::ParquetColumn {
                path: path.to_path_buf(),
                column: pair[0].0.clone(),
                message: "the column appears twice in the schema".to_owned(),
            });
        }
        let schema = metadata.schema();
        for (name, position) in &named {
            let data_type = schema.field(*position).data_type();
            if let Err(unsupported) = supported(data_type, true) {
                return Err(AuditError::ParquetColumn {
                    path: path.to_path_buf(),
                    column: name.clone(),
                    message: format!(
                        "type {unsupported} has no canonical text (see the README's canonical digest)"
                    ),
                });
            }
        }
        let viewed: Vec<arrow_schema::FieldRef> = schema
            .fields()
            .iter()
            .map(|field| match field.data_type() {
                DataType::Utf8 | DataType::LargeUtf8 => {
                    Arc::new(field.as_ref().clone().with_data_type(DataType::Utf8View))
                }
                DataType::Binary | DataType::LargeBinary => {
                    Arc::new(field.as_ref().clone().with_data_type(DataType::BinaryView))
                }
                _ => Arc::clone(field),
            })
            .collect();
        let decoding = ArrowReaderMetadata::try_new(
            Arc::clone(metadata.metadata()),
            ArrowReaderOptions::new().with_schema(Arc::new(Schema::new_with_metadata(
                viewed,
                schema.metadata().clone(),
            ))),
        )
        .map_err(|e| invalid(path, &e))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            decoding,
            columns: named.iter().map(|(name, _)| name.clone()).collect(),
            order: named.iter().map(|&(_, position)| position).collect(),
            metadata,
        })
    }

    /// The Arrow schema of the file.
    pub(crate) fn schema(&self) -> &Schema {
        self.metadata.schema()
    }

    /// The rows the footer declares.
    pub(crate) fn rows(&self) -> u64 {
        u64::try_from(self.metadata.metadata().file_metadata().num_rows()).unwrap_or(0)
    }

    /// The parts a file is folded in on `threads` threads: each row group
    /// cut into ranges of about equal rows, enough of them for the threads
    /// to finish about together (see [`PART_ROWS`]).
    fn parts(&self, threads: usize) -> Vec<Part> {
        let target = (self.rows() / (threads.max(1) as u64 * PARTS_PER_THREAD))
            .clamp(PART_ROWS.0, PART_ROWS.1);
        parts_of(&self.group_rows(), target)
    }

    /// The rows of each row group, as the footer declares them.
    fn group_rows(&self) -> Vec<u64> {
        self.metadata
            .metadata()
            .row_groups()
            .iter()
            .map(|group| u64::try_from(group.num_rows()).unwrap_or(0))
            .collect()
    }

    /// Folds every row of the file into `fold` on this thread, in file
    /// order, until the fold is satisfied.
    pub(crate) fn fold_here<F: RowFold>(&self, fold: &mut F) -> Result<(), AuditError> {
        fold.expect_rows(self.rows());
        let mut batch = Batch::new();
        for part in parts_of(&self.group_rows(), u64::MAX) {
            if fold.satisfied() {
                break;
            }
            self.fold_part(&part, &mut batch, fold)?;
        }
        Ok(())
    }

    /// Folds the file on up to `threads` threads in parts
    /// ([`ParquetFile::parts`]), each into its own accumulator built by
    /// `make`, and returns them merged in file order
    /// ([`RowFold::append`]). A part's accumulator is merged as soon as
    /// those before it are, so few are held at once; the first expects the
    /// whole file's rows, so what the others bring fits without growing it.
    /// A file of one part is folded on this thread.
    pub(crate) fn fold_in_parts<F: RowFold>(
        &self,
        threads: usize,
        make: &dyn Fn(&[String]) -> F,
    ) -> Result<F, AuditError> {
        let parts = self.parts(threads);
        if parts.len() < 2 || threads < 2 {
            let mut fold = make(&self.columns);
            self.fold_here(&mut fold)?;
            return Ok(fold);
        }
        self.fold_parts(&parts, threads, make)
    }

    /// [`ParquetFile::fold_in_parts`] with the parts given.
    fn fold_parts<F: RowFold>(
        &self,
        parts: &[Part],
        threads: usize,
        make: &dyn Fn(&[String]) -> F,
    ) -> Result<F, AuditError> {
        // Made here, since `make` need not be shareable between threads,
        // but sized by the thread that fills it: storage reserved for rows
        // is only touched (and so only costs memory) once rows arrive.
        let made: Vec<Mutex<Option<F>>> = parts
            .iter()
            .map(|_| Mutex::new(Some(make(&self.columns))))
            .collect();
        let merged = Mutex::new(InOrder::new(parts.len()));
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..threads.clamp(1, parts.len().max(1)) {
                scope.spawn(|| {
                    let mut batch = Batch::new();
                    loop {
                        let at = next.fetch_add(1, Ordering::Relaxed);
                        if at >= parts.len() || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let fold = made.get(at).and_then(|slot| slot.lock().ok()?.take());
                        let (Some(mut fold), Some(part)) = (fold, parts.get(at)) else {
                            break;
                        };
                        fold.expect_rows(if at == 0 { self.rows() } else { part.rows });
                        let done = self.fold_part(part, &mut batch, &mut fold).map(|()| fold);
                        if done.is_err() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        if let Ok(mut merged) = merged.lock() {
                            merged.put(at, done);
                        }
                    }
                });
            }
        });
        let merged = merged
            .into_inner()
            .map_err(|_| invalid_text(&self.path, "internal error: the fold of a part panicked"))?;
        merged.finish(&self.path).unwrap_or_else(|| {
            // No row group: the accumulator of no rows.
            Ok(make(&self.columns))
        })
    }

    /// Folds one part into `fold` on this thread, rendering into `batch`;
    /// stops early once the fold is satisfied.
    fn fold_part<F: RowFold>(
        &self,
        part: &Part,
        batch: &mut Batch,
        fold: &mut F,
    ) -> Result<(), AuditError> {
        let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(
            self.file.clone(),
            self.decoding.clone(),
        )
        .with_row_groups(vec![part.group])
        .with_batch_size(BATCH_ROWS);
        let row_groups = self.metadata.metadata().row_groups();
        let group_rows = row_groups
            .get(part.group)
            .map_or(0, |group| group.num_rows());
        if i64::try_from(part.rows).is_ok_and(|rows| rows < group_rows) {
            // Pages before the part are skipped by their headers, without
            // being decompressed; reading stops after its last row.
            let rows = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
            builder = builder
                .with_row_selection(RowSelection::from(vec![
                    RowSelector::skip(rows(part.skip)),
                    RowSelector::select(rows(part.rows)),
                ]))
                .with_row_selection_policy(RowSelectionPolicy::Selectors);
        }
        let reader = builder.build().map_err(|e| invalid(&self.path, &e))?;
        let mut line = part.first;
        for record in reader {
            let record = record.map_err(|e| AuditError::ParquetInvalid {
                path: self.path.clone(),
                message: format!("row group {}: {e}", part.group),
            })?;
            self.render(&record, line, batch)?;
            batch.fold_into(fold);
            if fold.satisfied() {
                break;
            }
            line += record.num_rows() as u64;
        }
        Ok(())
    }

    /// Renders a record batch's rows into `batch` (emptied first), rows
    /// numbered from `line`.
    fn render(&self, record: &RecordBatch, line: u64, batch: &mut Batch) -> Result<(), AuditError> {
        // The spans are kept: every one is written again (see `Fill`), so
        // they need not be cleared to null first.
        let spans = std::mem::take(&mut batch.spans);
        batch.clear();
        batch.spans = spans;
        let rows = record.num_rows();
        let width = self.order.len();
        batch.lines.extend((0..rows as u64).map(|row| line + row));
        batch.spans.resize(rows * width, None);
        for (k, &position) in self.order.iter().enumerate() {
            let column = record.column(position);
            let name = self.columns.get(k).map_or("", String::as_str);
            let failed = |message: String| AuditError::ParquetColumn {
                path: self.path.clone(),
                column: name.to_owned(),
                message,
            };
            render_column(column, &mut batch.data, &mut batch.spans, width, k).map_err(failed)?;
        }
        // Only a batch longer than the limit can hold a value that is.
        if batch.data.len() > MAX_VALUE_BYTES {
            let large = batch.spans.iter().position(|span| {
                span.is_some_and(|(start, end)| end.saturating_sub(start) > MAX_VALUE_BYTES)
            });
            if let Some(at) = large {
                let (row, k) = (at / width.max(1), at % width.max(1));
                return Err(AuditError::TooLarge {
                    path: self.path.clone(),
                    place: format!("row {}", line + row as u64),
                    what: format!(
                        "the value of column `{}`",
                        self.columns.get(k).map_or("", String::as_str)
                    ),
                    limit: MAX_VALUE_BYTES,
                });
            }
        }
        Ok(())
    }
}

/// Parts' accumulators merged in file order as they arrive in any.
struct InOrder<F> {
    /// The merge of parts `0..next`.
    merged: Option<F>,
    next: usize,
    /// Parts done out of order, waiting for the ones before them.
    waiting: Vec<Option<F>>,
    /// The error of the first part (in file order) that failed.
    error: Option<(usize, AuditError)>,
}

impl<F: RowFold> InOrder<F> {
    fn new(parts: usize) -> Self {
        Self {
            merged: None,
            next: 0,
            waiting: (0..parts).map(|_| None).collect(),
            error: None,
        }
    }

    fn put(&mut self, part: usize, done: Result<F, AuditError>) {
        match done {
            Ok(fold) => {
                if let Some(slot) = self.waiting.get_mut(part) {
                    *slot = Some(fold);
                }
            }
            Err(error) => {
                if self.error.as_ref().is_none_or(|(first, _)| part < *first) {
                    self.error = Some((part, error));
                }
                return;
            }
        }
        while let Some(fold) = self.waiting.get_mut(self.next).and_then(Option::take) {
            match &mut self.merged {
                Some(merged) => merged.append(fold),
                None => self.merged = Some(fold),
            }
            self.next += 1;
        }
    }

    /// The merge of every part, the first error, or `None` for no parts.
    fn finish(self, path: &Path) -> Option<Result<F, AuditError>> {
        if let Some((_, error)) = self.error {
            return Some(Err(error));
        }
        if self.next < self.waiting.len() {
            return Some(Err(invalid_text(
                path,
                "internal error: a part of the file was not folded",
            )));
        }
        self.merged.map(Ok)
    }
}

fn invalid_text(path: &Path, message: &str) -> AuditError {
    AuditError::ParquetInvalid {
        path: path.to_path_buf(),
        message: message.to_owned(),
    }
}

fn invalid(path: &Path, error: &parquet::errors::ParquetError) -> AuditError {
    AuditError::ParquetInvalid {
        path: path.to_path_buf(),
        message: error.to_string(),
    }
}

/// Renders one column of a batch: row `r`'s value goes to `data` and its
/// span to `spans[r * width + k]`.
fn render_column(
    column: &ArrayRef,
    data: &mut Vec<u8>,
    spans: &mut [Span],
    width: usize,
    k: usize,
) -> Result<(), String> {
    let (array, keys): (&dyn Array, Option<Vec<usize>>) = match column.as_any_dictionary_opt() {
        // A dictionary of no values (a column of nulls only, as pyarrow
        // writes one) has no key to normalize: arrow-array asserts on it.
        Some(dictionary) if dictionary.values().is_empty() => {
            all_null(spans, width, k, column.len());
            return Ok(());
        }
        Some(dictionary) => (
            dictionary.values().as_ref(),
            Some(dictionary.normalized_keys()),
        ),
        None => (column.as_ref(), None),
    };
    // Arrow's null type holds no validity buffer: its `null_count` is 0
    // though every value is null.
    if *array.data_type() == DataType::Null {
        all_null(spans, width, k, column.len());
        return Ok(());
    }
    with_writer(
        array,
        Fill {
            column: column.as_ref(),
            array,
            keys: keys.as_deref(),
            data,
            spans,
            width,
            k,
        },
    )
}

/// Sets the `k`-th column of a batch's first `rows` rows to null.
fn all_null(spans: &mut [Span], width: usize, k: usize, rows: usize) {
    for slot in spans.iter_mut().skip(k).step_by(width.max(1)).take(rows) {
        *slot = None;
    }
}

/// What is done with a column's writer ([`with_writer`]). Generic over the
/// writer, so each type's write is compiled into the loop over its values
/// instead of being called through a pointer for every value.
trait UseWriter {
    /// `write(at, out)` appends the text of the value at `at` to `out`.
    fn with<W>(self, write: W) -> Result<(), String>
    where
        W: FnMut(usize, &mut Vec<u8>) -> Result<(), String>;

    /// For values whose text has a known bound: `size(at)` bounds the text
    /// of the value at `at`, and `put(at, buf)` writes it at the start of
    /// `buf`, which holds at least `size(at) + SCRATCH` bytes (it may write
    /// words past the text's end, up to `SCRATCH` bytes), returning its
    /// length; an error names a value without canonical text. Written into
    /// a slice sized once per column of a batch, with no check of a
    /// vector's capacity or update of its length per value.
    fn with_sized<S, P>(self, size: S, put: P) -> Result<(), String>
    where
        S: Fn(usize) -> usize,
        P: FnMut(usize, &mut [u8]) -> Result<usize, String>;
}

/// Bytes a sized writer may write past a value's text (see
/// [`UseWriter::with_sized`]).
const SCRATCH: usize = 16;

fn unfit(at: usize) -> String {
    format!("internal error: the text of value {at} does not fit its bound")
}

/// Writes a column's values into a batch (see [`render_column`]).
struct Fill<'a> {
    /// The column as read (a dictionary's keys, or the values).
    column: &'a dyn Array,
    /// The values the writer reads.
    array: &'a dyn Array,
    /// A dictionary's keys, index into `array` per row.
    keys: Option<&'a [usize]>,
    data: &'a mut Vec<u8>,
    spans: &'a mut [Span],
    width: usize,
    k: usize,
}

impl UseWriter for Fill<'_> {
    fn with_sized<S, P>(self, size: S, put: P) -> Result<(), String>
    where
        S: Fn(usize) -> usize,
        P: FnMut(usize, &mut [u8]) -> Result<usize, String>,
    {
        self.sized(size, put)
    }

    fn with<W>(self, mut write: W) -> Result<(), String>
    where
        W: FnMut(usize, &mut Vec<u8>) -> Result<(), String>,
    {
        let Fill {
            column,
            array,
            keys,
            data,
            spans,
            width,
            k,
        } = self;
        let slots = spans.iter_mut().skip(k).step_by(width.max(1));
        // Checking each value for null goes through `dyn Array`: skip it for
        // columns without nulls, the common case.
        let (column_nulls, array_nulls) = (column.null_count() > 0, array.null_count() > 0);
        if keys.is_none() && !column_nulls {
            for (row, slot) in slots.take(column.len()).enumerate() {
                let start = data.len();
                write(row, data)?;
                *slot = Some((start, data.len()));
            }
            return Ok(());
        }
        for (row, slot) in slots.take(column.len()).enumerate() {
            // Every slot is written: the batch's spans are not cleared.
            *slot = None;
            if column_nulls && column.is_null(row) {
                continue;
            }
            let at = keys.map_or(Some(row), |keys| keys.get(row).copied());
            let Some(at) = at.filter(|&at| !array_nulls || !array.is_null(at)) else {
                continue;
            };
            let start = data.len();
            write(at, data)?;
            *slot = Some((start, data.len()));
        }
        Ok(())
    }
}

impl Fill<'_> {
    fn sized<S, P>(self, size: S, mut put: P) -> Result<(), String>
    where
        S: Fn(usize) -> usize,
        P: FnMut(usize, &mut [u8]) -> Result<usize, String>,
    {
        let Fill {
            column,
            array,
            keys,
            data,
            spans,
            width,
            k,
        } = self;
        let rows = column.len();
        let index = |row: usize| keys.map_or(Some(row), |keys| keys.get(row).copied());
        // Room for every row's text (a null's too: an overestimate).
        let bound = (0..rows).filter_map(index).map(&size).sum::<usize>() + SCRATCH;
        let mut end = data.len();
        data.resize(end + bound, 0);
        let slots = spans.iter_mut().skip(k).step_by(width.max(1)).take(rows);
        let (column_nulls, array_nulls) = (column.null_count() > 0, array.null_count() > 0);
        if keys.is_none() && !column_nulls {
            for (row, slot) in slots.enumerate() {
                let length = put(row, data.get_mut(end..).unwrap_or_default())?;
                *slot = Some((end, end + length));
                end += length;
            }
        } else {
            for (row, slot) in slots.enumerate() {
                // Every slot is written: the batch's spans are not cleared.
                *slot = None;
                if column_nulls && column.is_null(row) {
                    continue;
                }
                let Some(at) = index(row).filter(|&at| !array_nulls || !array.is_null(at)) else {
                    continue;
                };
                let length = put(at, data.get_mut(end..).unwrap_or_default())?;
                *slot = Some((end, end + length));
                end += length;
            }
        }
        data.truncate(end);
        Ok(())
    }
}

/// Writes the value at one index (for nested values, see [`json`]).
struct One<'a> {
    at: usize,
    out: &'a mut Vec<u8>,
}

impl UseWriter for One<'_> {
    fn with_sized<S, P>(self, size: S, mut put: P) -> Result<(), String>
    where
        S: Fn(usize) -> usize,
        P: FnMut(usize, &mut [u8]) -> Result<usize, String>,
    {
        let mut buf = vec![0; size(self.at) + SCRATCH];
        let length = put(self.at, &mut buf)?;
        self.out
            .extend_from_slice(buf.get(..length).unwrap_or_default());
        Ok(())
    }

    fn with<W>(self, mut write: W) -> Result<(), String>
    where
        W: FnMut(usize, &mut Vec<u8>) -> Result<(), String>,
    {
        write(self.at, self.out)
    }
}

/// The canonical text of the non-null value at `at` of `array`.
fn value_text(array: &dyn Array, at: usize) -> Result<Vec<u8>, String> {
    let mut text = Vec::new();
    with_writer(array, One { at, out: &mut text })?;
    Ok(text)
}

fn integer<T, U>(array: &dyn Array, using: U) -> Result<(), String>
where
    T: ArrowPrimitiveType,
    T::Native: Into<i128>,
    U: UseWriter,
{
    let values = array.as_primitive::<T>().values();
    // At most 20 characters: `-9223372036854775808`, `18446744073709551615`.
    using.with_sized(
        |_| 20,
        move |row, buf| {
            let value = values.get(row).copied().ok_or_else(|| unfit(row))?;
            put_integer(value.into(), buf).ok_or_else(|| unfit(row))
        },
    )
}

/// Writes an integer of at most 64 bits at the start of `buf` (24 bytes at
/// least) in decimal digits, as `itoa` and `Display` do; returns its
/// length. Up to 16 digits are worked out in a register, eight at a time,
/// and stored with one store each, never a byte at a time.
fn put_integer(value: i128, buf: &mut [u8]) -> Option<usize> {
    let Some(magnitude) = u64::try_from(value.unsigned_abs())
        .ok()
        .filter(|&m| m < 10_000_000_000_000_000)
    else {
        let mut text = itoa::Buffer::new();
        let text = text.format(value).as_bytes();
        buf.get_mut(..text.len())?.copy_from_slice(text);
        return Some(text.len());
    };
    // Written always: the first digit replaces it for a positive value.
    *buf.first_mut()? = b'-';
    let sign = usize::from(value < 0);
    let (high, low) = (magnitude / 100_000_000, magnitude % 100_000_000);
    if high == 0 {
        return Some(sign + put_digits(low, buf.get_mut(sign..)?)?);
    }
    let at = sign + put_digits(high, buf.get_mut(sign..)?)?;
    let low = (eight_digits(low) | ASCII_ZEROS).to_le_bytes();
    buf.get_mut(at..at + 8)?.copy_from_slice(&low);
    Some(at + 8)
}

/// '0' in each byte.
const ASCII_ZEROS: u64 = 0x3030_3030_3030_3030;

/// Writes `n` (below 10^8) without leading zeros at the start of `buf` as
/// one 8-byte store; returns the number of digits.
fn put_digits(n: u64, buf: &mut [u8]) -> Option<usize> {
    let digits = eight_digits(n);
    // Leading zeros are the low bytes that are 0 (at most 7: 0 is "0").
    let zeros = (digits.trailing_zeros() / 8).min(7);
    let text = ((digits >> (8 * zeros)) | ASCII_ZEROS).to_le_bytes();
    buf.get_mut(..8)?.copy_from_slice(&text);
    Some(8 - zeros as usize)
}

/// The eight decimal digits of `n` (below 10^8, with leading zeros) as the
/// bytes 0 to 9 of a little-endian `u64`, the most significant first: the
/// halves, quarters and eighths are divided in parallel lanes of 32, 16 and
/// 8 bits, by multiplying and shifting (exact below 10^4 and 10^2).
fn eight_digits(n: u64) -> u64 {
    let halves = (n / 10_000) | ((n % 10_000) << 32);
    let hundreds = ((halves * 10_486) >> 20) & 0x0000_007F_0000_007F;
    let quarters = hundreds | ((halves - hundreds * 100) << 16);
    let tens = ((quarters * 103) >> 10) & 0x000F_000F_000F_000F;
    tens | ((quarters - tens * 10) << 8)
}

fn decimal<T: arrow_array::types::DecimalType, U: UseWriter>(
    array: &dyn Array,
    using: U,
) -> Result<(), String> {
    let array = array.as_primitive::<T>();
    using.with(move |row, out| {
        out.extend_from_slice(array.value_as_string(row).as_bytes());
        Ok(())
    })
}

/// Strings or binaries read as views (`Utf8View`, `BinaryView`): a value of
/// up to 12 bytes is inside its view, a longer one in a data buffer (the
/// Arrow format's layout: length, then the bytes or a prefix, buffer and
/// offset, all little-endian). Short values are copied with copies of a
/// fixed size instead of a call to `memcpy`.
fn views<U: UseWriter>(views: &[u128], buffers: Vec<&[u8]>, using: U) -> Result<(), String> {
    let length = |view: u128| (view as u32) as usize;
    using.with_sized(
        |row| views.get(row).map_or(0, |&view| length(view)),
        move |row, buf| view_text(views, &buffers, row, buf).ok_or_else(|| unfit(row)),
    )
}

/// Writes the value of view `row` at the start of `buf` (16 bytes more
/// than the value at least); returns its length.
fn view_text(views: &[u128], buffers: &[&[u8]], row: usize, buf: &mut [u8]) -> Option<usize> {
    let view = *views.get(row)?;
    let length = (view as u32) as usize;
    if length <= 12 {
        // The bytes follow the length: stored from a register, not copied
        // out of the view in memory.
        buf.get_mut(..16)?
            .copy_from_slice(&(view >> 32).to_le_bytes());
        return Some(length);
    }
    let bytes = buffers.get(((view >> 64) as u32) as usize)?;
    let offset = ((view >> 96) as u32) as usize;
    if length <= 16 {
        if let Some(sixteen) = bytes.get(offset..offset + 16) {
            buf.get_mut(..16)?.copy_from_slice(sixteen);
            return Some(length);
        }
    }
    buf.get_mut(..length)?
        .copy_from_slice(bytes.get(offset..offset + length)?);
    Some(length)
}

fn float64(value: f64, out: &mut Vec<u8>) {
    if value.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if value.is_infinite() {
        out.extend_from_slice(if value > 0.0 { b"inf" } else { b"-inf" });
    } else {
        out.extend_from_slice(ryu::Buffer::new().format_finite(value).as_bytes());
    }
}

fn float32(value: f32, out: &mut Vec<u8>) {
    if value.is_finite() {
        out.extend_from_slice(ryu::Buffer::new().format_finite(value).as_bytes());
    } else {
        float64(f64::from(value), out);
    }
}

/// Nanoseconds per tick of a time unit.
fn nanos(unit: TimeUnit) -> i128 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

/// The civil date `days` after 1970-01-01, for years -9999 to 9999: worked
/// out on the calendar, not through a timestamp, whose range (jiff's) ends
/// on 9999-12-30 at 22:00, so that `9999-12-31`, the usual open end of a
/// history table, is a date like any other.
fn civil_date(days: i64) -> Option<jiff::civil::Date> {
    let span = jiff::Span::new().try_days(days).ok()?;
    jiff::civil::date(1970, 1, 1).checked_add(span).ok()
}

fn date(days: i64) -> Result<String, String> {
    civil_date(days)
        .map(|date| date.to_string())
        .ok_or_else(|| {
            format!("date {days} days from 1970-01-01 is out of range (years -9999 to 9999)")
        })
}

/// Nanoseconds per day.
const DAY_NANOS: i128 = 86_400_000_000_000;

fn timestamp(value: i64, unit: TimeUnit, utc: bool) -> Result<String, String> {
    let total = i128::from(value) * nanos(unit);
    let out_of_range = || format!("timestamp {value} is out of range (years -9999 to 9999)");
    let days = i64::try_from(total.div_euclid(DAY_NANOS)).map_err(|_| out_of_range())?;
    let of_day = i64::try_from(total.rem_euclid(DAY_NANOS)).map_err(|_| out_of_range())?;
    let time = time_of_day(of_day).ok_or_else(out_of_range)?;
    let at = civil_date(days).ok_or_else(out_of_range)?.to_datetime(time);
    // jiff prints a timestamp as its civil time in UTC and `Z`.
    Ok(if utc {
        format!("{at}Z")
    } else {
        at.to_string()
    })
}

/// The time of day `nanos` nanoseconds after midnight.
fn time_of_day(nanos: i64) -> Option<jiff::civil::Time> {
    let second = nanos.div_euclid(1_000_000_000);
    let nano = i32::try_from(nanos.rem_euclid(1_000_000_000)).ok()?;
    let part = |n: i64| i8::try_from(n).ok();
    jiff::civil::Time::new(
        part(second / 3600)?,
        part(second / 60 % 60)?,
        part(second % 60)?,
        nano,
    )
    .ok()
}

fn time(value: i64, unit: TimeUnit) -> Result<String, String> {
    let total = i128::from(value) * nanos(unit);
    let out_of_range = || format!("time of day {value} is out of range");
    let second = total.div_euclid(1_000_000_000);
    let nano = i32::try_from(total.rem_euclid(1_000_000_000)).map_err(|_| out_of_range())?;
    let part = |n: i128| i8::try_from(n).map_err(|_| out_of_range());
    let time = jiff::civil::Time::new(
        part(second / 3600)?,
        part(second / 60 % 60)?,
        part(second % 60)?,
        nano,
    )
    .map_err(|_| out_of_range())?;
    Ok(time.to_string())
}

/// Writes the timestamps of a column whose row `row` is `value(row)` ticks.
fn stamp<U: UseWriter>(
    value: impl Fn(usize) -> i64,
    unit: TimeUnit,
    utc: bool,
    using: U,
) -> Result<(), String> {
    let mut dates = Dates::new();
    // jiff's longest is 33 characters: `-009999-12-31T23:59:59.999999999Z`.
    using.with_sized(
        |_| 40,
        move |row, buf| {
            let value = value(row);
            if let Some(length) = whole_second_timestamp(value, unit, utc, &mut dates, buf) {
                return Ok(length);
            }
            let text = timestamp(value, unit, utc)?;
            let text = text.as_bytes();
            buf.get_mut(..text.len())
                .ok_or_else(|| unfit(row))?
                .copy_from_slice(text);
            Ok(text.len())
        },
    )
}

/// The text of recently rendered days (`YYYY-MM-DD`), by their day count
/// from 0000-01-01 modulo the slots: the timestamps of a column tend to
/// fall on few days, and working out a day's date is most of a
/// timestamp's rendering.
struct Dates {
    days: [u64; Self::SLOTS],
    text: [[u8; 10]; Self::SLOTS],
}

impl Dates {
    const SLOTS: usize = 64;

    fn new() -> Self {
        Self {
            days: [u64::MAX; Self::SLOTS],
            text: [[0; 10]; Self::SLOTS],
        }
    }

    /// The text of the day `days` after 0000-01-01 (up to 9999-12-31).
    fn get(&mut self, days: u64) -> [u8; 10] {
        let slot = usize::try_from(days % Self::SLOTS as u64).unwrap_or(0);
        if let (Some(known), Some(text)) = (self.days.get_mut(slot), self.text.get_mut(slot)) {
            if *known != days {
                *known = days;
                *text = date_text(days);
            }
            return *text;
        }
        date_text(days)
    }
}

/// `YYYY-MM-DD` of the day `days` after 0000-01-01 (up to 9999-12-31).
fn date_text(days: u64) -> [u8; 10] {
    let (year, month, day) = civil_from_days(days);
    let [y0, y1] = two(year / 100);
    let [y2, y3] = two(year);
    let [mo0, mo1] = two(month);
    let [d0, d1] = two(day);
    [y0, y1, y2, y3, b'-', mo0, mo1, b'-', d0, d1]
}

/// The last two decimal digits of `n`.
fn two(n: u64) -> [u8; 2] {
    let at = usize::try_from(n % 100).unwrap_or(0) * 2;
    let pair = PAIRS.get(at..at + 2).unwrap_or(b"00");
    [pair[0], pair[1]]
}

/// Writes a timestamp of whole seconds from the year 0000 to 9999 at the
/// start of `buf` (20 bytes at least) exactly as
/// [`timestamp`] does (`2026-09-20T08:12:00Z`, the `Z` only if `utc`),
/// without jiff's formatting machinery or a `String`, its date through
/// `dates`, and returns its length; `None`, for any other value.
fn whole_second_timestamp(
    value: i64,
    unit: TimeUnit,
    utc: bool,
    dates: &mut Dates,
    buf: &mut [u8],
) -> Option<usize> {
    /// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z in Unix seconds.
    const FIRST: i64 = -62_167_219_200;
    const LAST: i64 = 253_402_300_799;
    let per_second = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    // A constant divisor for the common unit: a division by a variable
    // costs more than the rest of the rendering.
    let seconds = if per_second == 1 {
        value
    } else if value % per_second == 0 {
        value / per_second
    } else {
        return None;
    };
    if !(FIRST..=LAST).contains(&seconds) {
        return None;
    }
    let buf = buf.get_mut(..20)?;
    // Unsigned from here: days since 0000-01-01, which is in range.
    let since = (seconds - FIRST).unsigned_abs();
    buf.get_mut(..10)?
        .copy_from_slice(&dates.get(since / 86_400));
    // `THH:MM:SS` and `Z`, put together in registers, stored as two words.
    let of_day = since % 86_400;
    let pair = |n: u64| u64::from(u16::from_le_bytes(two(n)));
    let [h, m, s] = [
        pair(of_day / 3600),
        pair(of_day / 60 % 60),
        pair(of_day % 60),
    ];
    let time = u64::from(b'T') | h << 8 | u64::from(b':') << 24 | m << 32 | u64::from(b':') << 48;
    buf.get_mut(10..18)?
        .copy_from_slice(&(time | (s & 0xFF) << 56).to_le_bytes());
    buf.get_mut(18..20)?
        .copy_from_slice(&[(s >> 8) as u8, b'Z']);
    Some(if utc { 20 } else { 19 })
}

/// "00" to "99".
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// The proleptic Gregorian (year, month, day) of a day count from
/// 0000-01-01 (Howard Hinnant's `civil_from_days`, shifted by 400 years
/// so that all of it is unsigned).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Days since -0400-03-01: eras of 400 years start on a March 1st, and
    // 0000-01-01 is 60 days before 0000-03-01.
    let z = days + 146_097 - 60;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = (yoe + era * 400 + u64::from(month <= 2)).saturating_sub(400);
    (year, month, day)
}

fn text<U: UseWriter>(
    render: impl Fn(usize) -> Result<String, String>,
    using: U,
) -> Result<(), String> {
    using.with(move |row, out| {
        out.extend_from_slice(render(row)?.as_bytes());
        Ok(())
    })
}

/// Hands `using` the writer of an array's values; `Err` names a type
/// without canonical text.
fn with_writer<U: UseWriter>(array: &dyn Array, using: U) -> Result<(), String> {
    let data_type = array.data_type();
    match data_type {
        DataType::Null => using.with(|_, _| Ok(())),
        DataType::Boolean => {
            let array = array.as_boolean();
            using.with(move |row, out| {
                let word: &[u8] = if array.value(row) { b"true" } else { b"false" };
                out.extend_from_slice(word);
                Ok(())
            })
        }
        DataType::Int8 => integer::<Int8Type, U>(array, using),
        DataType::Int16 => integer::<Int16Type, U>(array, using),
        DataType::Int32 => integer::<Int32Type, U>(array, using),
        DataType::Int64 => integer::<Int64Type, U>(array, using),
        DataType::UInt8 => integer::<UInt8Type, U>(array, using),
        DataType::UInt16 => integer::<UInt16Type, U>(array, using),
        DataType::UInt32 => integer::<UInt32Type, U>(array, using),
        DataType::UInt64 => integer::<UInt64Type, U>(array, using),
        DataType::Float16 => {
            let array = array.as_primitive::<Float16Type>();
            using.with(move |row, out| {
                float32(array.value(row).to_f32(), out);
                Ok(())
            })
        }
        DataType::Float32 => {
            let array = array.as_primitive::<Float32Type>();
            using.with(move |row, out| {
                float32(array.value(row), out);
                Ok(())
            })
        }
        DataType::Float64 => {
            let array = array.as_primitive::<Float64Type>();
            using.with(move |row, out| {
                float64(array.value(row), out);
                Ok(())
            })
        }
        DataType::Decimal32(..) => decimal::<Decimal32Type, U>(array, using),
        DataType::Decimal64(..) => decimal::<Decimal64Type, U>(array, using),
        DataType::Decimal128(..) => decimal::<Decimal128Type, U>(array, using),
        DataType::Decimal256(..) => decimal::<Decimal256Type, U>(array, using),
        DataType::Utf8 => {
            let array = array.as_string::<i32>();
            using.with(move |row, out| {
                out.extend_from_slice(array.value(row).as_bytes());
                Ok(())
            })
        }
        DataType::LargeUtf8 => {
            let array = array.as_string::<i64>();
            using.with(move |row, out| {
                out.extend_from_slice(array.value(row).as_bytes());
                Ok(())
            })
        }
        DataType::Utf8View => {
            let array = array.as_string_view();
            let buffers = array.data_buffers().iter().map(|b| b.as_slice()).collect();
            views(array.views(), buffers, using)
        }
        DataType::Binary => {
            let array = array.as_binary::<i32>();
            using.with(move |row, out| {
                out.extend_from_slice(array.value(row));
                Ok(())
            })
        }
        DataType::LargeBinary => {
            let array = array.as_binary::<i64>();
            using.with(move |row, out| {
                out.extend_from_slice(array.value(row));
                Ok(())
            })
        }
        DataType::BinaryView => {
            let array = array.as_binary_view();
            let buffers = array.data_buffers().iter().map(|b| b.as_slice()).collect();
            views(array.views(), buffers, using)
        }
        DataType::FixedSizeBinary(_) => {
            let array = array.as_fixed_size_binary();
            using.with(move |row, out| {
                out.extend_from_slice(array.value(row));
                Ok(())
            })
        }
        DataType::Date32 => {
            let array = array.as_primitive::<Date32Type>();
            text(move |row| date(i64::from(array.value(row))), using)
        }
        DataType::Date64 => {
            let array = array.as_primitive::<Date64Type>();
            text(
                move |row| date(array.value(row).div_euclid(86_400_000)),
                using,
            )
        }
        DataType::Timestamp(unit, zone) => {
            let (unit, utc) = (*unit, zone.is_some());
            match unit {
                TimeUnit::Second => {
                    let array = array.as_primitive::<TimestampSecondType>();
                    stamp(move |row| array.value(row), unit, utc, using)
                }
                TimeUnit::Millisecond => {
                    let array = array.as_primitive::<TimestampMillisecondType>();
                    stamp(move |row| array.value(row), unit, utc, using)
                }
                TimeUnit::Microsecond => {
                    let array = array.as_primitive::<TimestampMicrosecondType>();
                    stamp(move |row| array.value(row), unit, utc, using)
                }
                TimeUnit::Nanosecond => {
                    let array = array.as_primitive::<TimestampNanosecondType>();
                    stamp(move |row| array.value(row), unit, utc, using)
                }
            }
        }
        DataType::Time32(TimeUnit::Second) => {
            let array = array.as_primitive::<Time32SecondType>();
            text(
                move |row| time(i64::from(array.value(row)), TimeUnit::Second),
                using,
            )
        }
        DataType::Time32(TimeUnit::Millisecond) => {
            let array = array.as_primitive::<Time32MillisecondType>();
            text(
                move |row| time(i64::from(array.value(row)), TimeUnit::Millisecond),
                using,
            )
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let array = array.as_primitive::<Time64MicrosecondType>();
            text(
                move |row| time(array.value(row), TimeUnit::Microsecond),
                using,
            )
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            let array = array.as_primitive::<Time64NanosecondType>();
            text(
                move |row| time(array.value(row), TimeUnit::Nanosecond),
                using,
            )
        }
        DataType::List(_)
        | DataType::LargeList(_)
        | DataType::FixedSizeList(..)
        | DataType::Struct(_)
        | DataType::Map(..) => {
            supported(data_type, false)?;
            using.with(move |row, out| {
                let value = json(array, row)?;
                write_json(&value, out)
            })
        }
        other => Err(other.to_string()),
    }
}

/// Checks that a type has canonical text; dictionaries only at the top
/// level (`top`). `Err` is the first type that has none.
fn supported(data_type: &DataType, top: bool) -> Result<(), String> {
    match data_type {
        DataType::Null
        | DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Float16
        | DataType::Float32
        | DataType::Float64
        | DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..)
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_)
        | DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(..)
        | DataType::Time32(TimeUnit::Second | TimeUnit::Millisecond)
        | DataType::Time64(TimeUnit::Microsecond | TimeUnit::Nanosecond) => Ok(()),
        DataType::List(field) | DataType::LargeList(field) | DataType::FixedSizeList(field, _) => {
            supported(field.data_type(), false)
        }
        DataType::Struct(fields) => fields
            .iter()
            .try_for_each(|field| supported(field.data_type(), false)),
        DataType::Map(entries, _) => supported(entries.data_type(), false),
        DataType::Dictionary(_, values) if top => supported(values, false),
        other => Err(other.to_string()),
    }
}

/// Writes a nested value as compact JSON, as serde_json does except for
/// floats, which are written as at the top level (`1e21`, where serde_json
/// writes `1e+21`), so that a double has one text wherever it is.
fn write_json(value: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    match value {
        Value::Number(number) if number.is_f64() => {
            float64(number.as_f64().unwrap_or(f64::NAN), out);
        }
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_json(item, out)?;
            }
            out.push(b']');
        }
        Value::Object(object) => {
            let mut entries: Vec<(&String, &Value)> = object.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).map_err(|e| e.to_string())?;
                out.push(b':');
                write_json(item, out)?;
            }
            out.push(b'}');
        }
        other => serde_json::to_writer(&mut *out, other).map_err(|e| e.to_string())?,
    }
    Ok(())
}

/// A nested value as JSON, for the compact text of lists, structs and maps.
fn json(array: &dyn Array, row: usize) -> Result<Value, String> {
    // `is_null` reads the validity buffer, which Arrow's null type lacks.
    if array.is_null(row) || *array.data_type() == DataType::Null {
        return Ok(Value::Null);
    }
    let items = |values: ArrayRef| -> Result<Value, String> {
        (0..values.len())
            .map(|item| json(values.as_ref(), item))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    };
    Ok(match array.data_type() {
        DataType::List(_) => items(array.as_list::<i32>().value(row))?,
        DataType::LargeList(_) => items(array.as_list::<i64>().value(row))?,
        DataType::FixedSizeList(..) => items(array.as_fixed_size_list().value(row))?,
        DataType::Struct(fields) => {
            let array = array.as_struct();
            let mut object = serde_json::Map::new();
            for (field, column) in fields.iter().zip(array.columns()) {
                object.insert(field.name().clone(), json(column.as_ref(), row)?);
            }
            Value::Object(object)
        }
        DataType::Map(..) => {
            let entries = array.as_map().value(row);
            let mut object = serde_json::Map::new();
            for entry in 0..entries.len() {
                let key = match json(entries.column(0).as_ref(), entry)? {
                    Value::String(key) => key,
                    other => other.to_string(),
                };
                object.insert(key, json(entries.column(1).as_ref(), entry)?);
            }
            Value::Object(object)
        }
        DataType::Boolean => Value::Bool(array.as_boolean().value(row)),
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            let text = value_text(array, row)?;
            serde_json::from_slice(&text).unwrap_or(Value::Null)
        }
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_)
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(..)
        | DataType::Time32(_)
        | DataType::Time64(_) => {
            let text = value_text(array, row)?;
            Value::String(String::from_utf8_lossy(&text).into_owned())
        }
        // Integers and decimals: JSON numbers, read back as a nested JSON
        // Lines number is.
        _ => {
            let text = value_text(array, row)?;
            serde_json::from_slice(&text).map_err(|e| e.to_string())?
        }
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use arrow_array::builder::{Int32Builder, ListBuilder};
    use arrow_array::{
        ArrayRef, BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Float32Array,
        Float64Array, Int64Array, RecordBatch, StringArray, StructArray, Time64MicrosecondArray,
        TimestampMicrosecondArray, TimestampMillisecondArray,
    };
    use arrow_schema::{DataType, Field, Schema, TimeUnit};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    use super::super::read::RowFold;
    use super::super::{audit, digest_files, read_rows, AuditError, AuditSpec, Format, Gate};
    use super::super::{Aggregate, InputData};
    use super::{timestamp, whole_second_timestamp, Dates};
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

    // issue 15: the same logical rows digest the same in Parquet, CSV and
    // JSON Lines (strings, integers, booleans, dates and nulls).
    #[test]
    fn issue_15_parquet_csv_and_jsonl_rows_have_one_digest() {
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

    // issue 15: the canonical text of floats, decimals, timestamps, times,
    // nested values and dictionary columns, as the README documents it.
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
                    TimestampMillisecondArray::from(vec![1_790_064_000_250, 0])
                        .with_timezone("+02:00"),
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

    // issue 15: gates run on Parquet: duplicates across row groups and files
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

    // issue 15: an invalid file, or files of one candidate whose schemas
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

    // issue 15: an empty Parquet file digests like a header-only CSV file of
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
        let error =
            digest_files(std::slice::from_ref(&file), Format::Parquet).expect_err("refused");
        assert!(matches!(error, AuditError::ParquetColumn { ref column, .. } if column == "wait"));
        assert!(error
            .to_string()
            .starts_with(&format!("`{}` column `wait`: type ", file.display())));
    }

    // Issue 15: integers, strings and binaries written into a batch's
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
        let mut unsigned: Vec<u64> =
            vec![0, u64::MAX, 10_000_000_000_000_000, 9_999_999_999_999_999];
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
            let strings: Vec<Option<&str>> =
                rows.iter().map(|&row| strings[row].as_deref()).collect();
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
        let (columns, read) =
            read_rows(std::slice::from_ref(&file), Format::Parquet).expect("reads");
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

    // Issue 23 item 7: a Parquet value over MAX_VALUE_BYTES fails the audit
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
        let error =
            digest_files(std::slice::from_ref(&path), Format::Parquet).expect_err("too large");
        assert_eq!(
            error.to_string(),
            format!(
                "`{}` row 2: the value of column `payload` is larger than 64 MiB, \
                 the most the audit reads",
                path.display()
            )
        );
    }

    // Issue 23 item 10: dates and timestamps are worked out on the calendar,
    // as jiff prints them within its timestamps' range, and on to the end of
    // year 9999 (jiff's timestamps end on 9999-12-30 at 22:00).
    #[test]
    fn dates_and_timestamps_reach_the_end_of_year_9999() {
        for nanos in [
            -377_705_023_201_000_000_000_i128,
            -1,
            0,
            1_500_000_000,
            1_788_220_800_250_000_000,
            253_402_207_200_999_999_999,
        ] {
            let value = i64::try_from(nanos.div_euclid(1_000)).expect("microseconds");
            let at = jiff::Timestamp::from_nanosecond(i128::from(value) * 1_000).expect("range");
            let local = at
                .to_zoned_datetime(jiff::tz::TimeZone::UTC)
                .datetime()
                .to_string();
            assert_eq!(
                timestamp(value, TimeUnit::Microsecond, true),
                Ok(at.to_string())
            );
            assert_eq!(timestamp(value, TimeUnit::Microsecond, false), Ok(local));
        }
        assert_eq!(
            timestamp(253_402_300_799, TimeUnit::Second, true).as_deref(),
            Ok("9999-12-31T23:59:59Z")
        );
        assert_eq!(
            timestamp(253_402_300_799_999_999, TimeUnit::Microsecond, false).as_deref(),
            Ok("9999-12-31T23:59:59.999999")
        );
        assert_eq!(
            timestamp(253_402_300_800, TimeUnit::Second, true),
            Err("timestamp 253402300800 is out of range (years -9999 to 9999)".to_owned())
        );
        assert_eq!(super::date(2_932_896).as_deref(), Ok("9999-12-31"));
        assert_eq!(super::date(-719_528).as_deref(), Ok("0000-01-01"));
        assert_eq!(
            super::date(2_932_897),
            Err(
                "date 2932897 days from 1970-01-01 is out of range (years -9999 to 9999)"
                    .to_owned()
            )
        );
    }

    // Issue 15: the fast timestamp text is jiff's, byte for byte, wherever
    // it applies (whole seconds, years 0000 to 9999), and declines elsewhere.
    #[test]
    fn whole_second_timestamps_render_as_jiff_does() {
        let mut seconds: Vec<i64> = vec![
            -62_167_219_200,
            -62_167_219_201,
            253_402_207_200,
            253_402_207_201,
            253_402_300_799,
            -1,
            0,
            1,
            951_782_400,
            951_868_799,
            1_788_220_800,
            4_107_542_400,
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            seconds.push((x % 315_569_520_000) as i64 - 62_167_219_200);
        }
        let units = [
            (TimeUnit::Second, 1),
            (TimeUnit::Millisecond, 1_000),
            (TimeUnit::Microsecond, 1_000_000),
            (TimeUnit::Nanosecond, 1_000_000_000),
        ];
        // One cache of dates for all of them, as a column's values share one.
        let mut dates = Dates::new();
        for &second in &seconds {
            for (unit, per) in units {
                for utc in [true, false] {
                    for extra in [0, 1] {
                        let Some(value) =
                            second.checked_mul(per).and_then(|v| v.checked_add(extra))
                        else {
                            continue;
                        };
                        let mut fast = [0u8; 20];
                        let slow = timestamp(value, unit, utc);
                        if let Some(length) =
                            whole_second_timestamp(value, unit, utc, &mut dates, &mut fast)
                        {
                            assert_eq!(
                                Ok(String::from_utf8(fast[..length].to_vec()).expect("ASCII")),
                                slow,
                                "{value} {unit:?} {utc}"
                            );
                        } else {
                            let whole = value % per == 0;
                            let in_range =
                                (-62_167_219_200..=253_402_300_799).contains(&(value / per));
                            assert!(!(whole && in_range), "{value} {unit:?} declined");
                        }
                    }
                }
            }
        }
    }

    /// The line and `id` of the rows folded, in the order folded.
    struct Lines(Vec<(u64, String)>);

    impl RowFold for Lines {
        const PARTS: bool = true;

        fn row(&mut self, row: &super::super::read::Row<'_>) {
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

    // issue 15: a file folded in parts (ranges of row groups that start and
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

    // issue 15: row groups are cut into parts of equal rows, in order, the
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

    // issue 15: parts are merged as they are done in file order, and the
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

    // issue 15: one file of many row groups, audited (in parts on a
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
}
