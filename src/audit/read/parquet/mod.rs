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
//! Every value is rendered to the text it would have in a CSV file (see
//! docs/design/digest.md), so the same logical rows digest the same
//! in CSV, JSON Lines and Parquet:
//!
//! - strings: their UTF-8 text; binary: its bytes; booleans `true` / `false`;
//! - integers: decimal digits; floats: the shortest text that reads back as
//!   the same value of their width (a half float's too: 0.1 is `0.1`), as
//!   serde_json writes it (`2.5`, `1.0`, `1e-7`), and `NaN`, `inf`, `-inf`;
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
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Schema};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelectionPolicy, RowSelector,
};

use super::{Batch, RowFold};
use crate::audit::{AuditError, MAX_VALUE_BYTES};
use render::{render_column, supported};
use shared::Shared;

mod depth;
mod render;
mod shared;
#[cfg(test)]
mod tests;

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
        depth::check_schema(&file, path)?;
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
                        "type {unsupported} has no canonical text (see docs/design/digest.md)"
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
