//! Streaming readers: turn CSV, JSON Lines and Parquet files into canonical
//! rows, one at a time, and fold them into per-file accumulators in parallel.
//! Each format is a [`Reader`]; everything downstream sees only rows.
//!
//! A canonical row has one slot per column of the file, columns sorted by
//! name, each slot null or a byte string. Rows are lent to the accumulator and
//! never collected, so memory stays flat however large the file is.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use self::parquet::ParquetFile;
use super::{AuditError, Format, MAX_COLUMNS, MAX_FILES};
use csv::fold_csv;
#[cfg(test)]
pub(crate) use csv::fold_csv_pipelined;
#[cfg(test)]
pub(crate) use csv_parts::fold_csv_in_ranges;
use jsonl::{fold_jsonl, jsonl_keys, Pass};

pub(super) use file::{io_error, open, parse_error, too_large, RowEstimate, BUFFER};
pub(crate) use row::{Batch, Row, RowFold, Span};

mod compact;
mod csv;
mod csv_parts;
mod csv_records;
mod file;
mod jsonl;
mod parquet;
mod row;

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
/// Parquet (see [`parquet`]).
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

/// A file folded: its columns (`None`: the first file's) and accumulator.
type Folded<F> = Result<(Option<Vec<String>>, F), AuditError>;

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
    // A file whose columns are those of the first file done keeps no copy
    // of its own while it waits to be merged: a window of files of 100,000
    // columns each held them all (5 MB a file).
    let first_done: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let fold = |(index, path): (usize, &PathBuf)| {
        let (own, fold) = fold_one::<R, F>(path, columns, pipeline, &|c| make(index, c))?;
        let own = (*first_done.get_or_init(|| own.clone()) != own).then_some(own);
        Ok((own, fold))
    };
    let columns_of = |own: Option<Vec<String>>| {
        own.or_else(|| first_done.get().cloned())
            .unwrap_or_default()
    };
    let mut merged: Option<(Vec<String>, F)> = None;
    // With files of different keys, the union of all files' keys.
    let mut union: Option<BTreeSet<String>> = None;
    for (window, chunk) in files.chunks(WINDOW_FILES).enumerate() {
        let first = window * WINDOW_FILES;
        let indexed = chunk.iter().enumerate().map(|(k, path)| (first + k, path));
        // One file (most candidates) is folded here: the pool would only
        // hand it to a worker and wake this thread again when it is done.
        let results: Vec<Folded<F>> = if chunk.len() == 1 {
            indexed.map(fold).collect()
        } else {
            let indexed: Vec<(usize, &PathBuf)> = indexed.collect();
            indexed.into_par_iter().map(fold).collect()
        };
        // Taken in file order, so the error reported is the first file's.
        for (path, result) in chunk.iter().zip(results) {
            let (own, fold) = result?;
            let own = columns_of(own);
            if let Some(union) = &mut union {
                union.extend(own);
                if union.len() > MAX_COLUMNS {
                    return Err(jsonl::too_wide(path, "with the files before it".to_owned()));
                }
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
                if all.len() > MAX_COLUMNS {
                    return Err(jsonl::too_wide(path, "with the files before it".to_owned()));
                }
                *expected = all.into_iter().collect();
                into.append(fold);
            } else {
                let mut all: BTreeSet<String> = expected.drain(..).collect();
                all.extend(own);
                if all.len() > MAX_COLUMNS {
                    return Err(jsonl::too_wide(path, "with the files before it".to_owned()));
                }
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
    let Some(first) = files.first() else {
        return Ok(());
    };
    let want = types(first)?;
    // Each file is compared where its footer is read: only the first
    // file's types are kept (a window of 256 files' types, 100,000 columns
    // each, was gigabytes).
    let compare = |path: &PathBuf| -> Result<(), AuditError> {
        let found = types(path)?;
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
        Ok(())
    };
    for chunk in files[1..].chunks(WINDOW_FILES) {
        let compared: Vec<Result<(), AuditError>> = chunk.par_iter().map(compare).collect();
        // The first file that differs is named.
        compared.into_iter().collect::<Result<(), AuditError>>()?;
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

#[cfg(test)]
mod tests;
