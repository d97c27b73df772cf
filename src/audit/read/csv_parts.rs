//! A large CSV file folded in byte ranges, each parsed and folded on its own
//! thread, for a fold that can take a file in parts ([`RowFold::PARTS`]).
//!
//! The pipeline ([`super::csv::fold_pipelined`]) parses on one thread and
//! hands every row to the folding threads: the parse is a serial stage, and
//! every row is copied into a batch and read again on another core. Cut
//! into ranges, every core parses and folds its own rows.
//!
//! A range must start where a record starts. Before any `"`, CSV has no
//! quoted field, so every newline ends a record (`\r` too ends one, and the
//! `\n` of `\r\n` then ends an empty line, which is skipped). The file is
//! cut just after a newline, and the cuts are kept only if no `"` comes
//! before the last one; a file with quotes there is pipelined instead. A
//! range's first line number is the newlines before it, counted in the same
//! parallel pass that looks for quotes.

use rayon::prelude::*;

use super::csv_records::CsvRecords;
use super::{io_error, AuditError, RowFold, BUFFER};

/// Bytes a range has at least: below this, a range's set-up (a buffer, a
/// fold) is not repaid.
const MIN_RANGE: u64 = 4 << 20;
/// Ranges per thread: two, so that a thread slowed by something else
/// (the kernel writing back the file the task just wrote) leaves the rest
/// of its share to the others. In W4's `weir run` (10 M rows) one range a
/// thread audited in 2.9× openssl's time and two in 2.5×; four were no
/// better, and every cut but the last costs a look at the bytes before it
/// (2026-12-07, interleaved runs).
const RANGES_PER_THREAD: u64 = 2;

/// Folds the records of `records` (just past the header) in ranges on up to
/// `threads` threads, each range into its own `make(columns)`, and appends
/// them in file order. `None`, having read no record, if the file cannot be
/// cut: too small, or a `"` before the last cut.
pub(super) fn fold_in_ranges<F: RowFold>(
    records: &CsvRecords<'_>,
    threads: usize,
    size: u64,
    columns: &[String],
    make: &dyn Fn(&[String]) -> F,
) -> Result<Option<F>, AuditError> {
    let wanted =
        (threads as u64 * RANGES_PER_THREAD).min(size.saturating_sub(records.offset()) / MIN_RANGE);
    fold_cut(records, wanted, threads, size, columns, make)
}

/// Reads a CSV file in about `wanted` ranges, whatever its size, for tests
/// to compare with reading it whole: the columns, and the fold if the file
/// could be cut.
#[cfg(test)]
pub(crate) fn fold_csv_in_ranges<F: RowFold>(
    path: &std::path::Path,
    wanted: u64,
    make: &dyn Fn(&[String]) -> F,
) -> Result<(Vec<String>, Option<F>), AuditError> {
    let (columns, records) = CsvRecords::open(path)?;
    let size = records.estimate.size();
    let fold = fold_cut(&records, wanted, 2, size, &columns, make)?;
    Ok((columns, fold))
}

/// [`fold_in_ranges`] in about `wanted` ranges.
fn fold_cut<F: RowFold>(
    records: &CsvRecords<'_>,
    wanted: u64,
    threads: usize,
    size: u64,
    columns: &[String],
    make: &dyn Fn(&[String]) -> F,
) -> Result<Option<F>, AuditError> {
    let from = records.offset();
    let cuts = cuts(records, from, size, wanted)?;
    if cuts.is_empty() {
        return Ok(None);
    }
    // Each stretch between cuts (the last range excluded) is looked at in
    // pieces, so the look is spread over every core whatever the ranges.
    let mut pieces = Vec::new();
    let mut start = from;
    for &cut in &cuts {
        let step = ((cut - start) / threads.max(1) as u64).max(BUFFER as u64);
        let mut at = start;
        while at < cut {
            pieces.push((at, (at + step).min(cut)));
            at += step;
        }
        start = cut;
    }
    let looks: Vec<std::io::Result<Look>> = pieces
        .par_iter()
        .map(|&(at, to)| look(records, at, to))
        .collect();
    let mut newlines = records.newlines();
    let mut before = Vec::with_capacity(cuts.len());
    let mut looks = looks.into_iter();
    for (&(_, to), look) in pieces.iter().zip(&mut looks) {
        let look = look.map_err(|e| io_error(records.path, e))?;
        if look.quote {
            return Ok(None);
        }
        newlines += look.newlines;
        if cuts.contains(&to) {
            before.push(newlines);
        }
    }
    debug_assert_eq!(before.len(), cuts.len());

    let starts =
        std::iter::once((from, records.newlines())).chain(cuts.iter().copied().zip(before));
    let ends = cuts.iter().copied().chain(std::iter::once(u64::MAX));
    let mut ranges = Vec::new();
    for ((start, newlines), end) in starts.zip(ends) {
        ranges.push((
            records.part(start, end, newlines, end.min(size) - start)?,
            make(columns),
        ));
    }
    let folded: Vec<Result<F, AuditError>> = ranges
        .into_par_iter()
        .map(|(mut part, mut fold)| {
            part.fold_into(&mut fold)?;
            Ok(fold)
        })
        .collect();
    // Taken in file order, so an error reported is the file's first.
    let mut folded = folded.into_iter();
    let mut whole = match folded.next() {
        Some(first) => first?,
        None => return Ok(None),
    };
    for later in folded {
        whole.append(later?);
    }
    Ok(Some(whole))
}

/// Up to `wanted - 1` offsets that cut `from..size` into about equal
/// stretches, each just after a newline, increasing and below `size`.
fn cuts(
    records: &CsvRecords<'_>,
    from: u64,
    size: u64,
    wanted: u64,
) -> Result<Vec<u64>, AuditError> {
    let mut cuts: Vec<u64> = Vec::new();
    let mut window = vec![0; 64 << 10];
    for k in 1..wanted {
        let mut at = from + (size - from) * k / wanted;
        if cuts.last().is_some_and(|&last| at < last) {
            continue;
        }
        // The first newline at or after `at - 1`: the next record starts
        // after it, at `at` itself if a newline ends the byte before.
        at = at.saturating_sub(1).max(from);
        let cut = loop {
            let read = records
                .read_at(&mut window, at)
                .map_err(|e| io_error(records.path, e))?;
            let bytes = window.get(..read).unwrap_or_default();
            if let Some(newline) = memchr::memchr(b'\n', bytes) {
                break Some(at + newline as u64 + 1);
            }
            if read == 0 {
                break None;
            }
            at += read as u64;
        };
        match cut {
            Some(cut) if cut < size && cuts.last().is_none_or(|&last| cut > last) => cuts.push(cut),
            _ => {}
        }
    }
    Ok(cuts)
}

/// What one stretch of the file holds.
struct Look {
    newlines: u64,
    /// A `"` somewhere in it (the newlines are then not counted to the end).
    quote: bool,
}

/// Counts the newlines of `at..to` and looks for a `"` there.
fn look(records: &CsvRecords<'_>, mut at: u64, to: u64) -> std::io::Result<Look> {
    let mut buf = vec![0; BUFFER.min(usize::try_from(to - at).unwrap_or(BUFFER))];
    let mut newlines = 0;
    while at < to {
        let want = usize::try_from(to - at)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let read = records.read_at(buf.get_mut(..want).unwrap_or_default(), at)?;
        let bytes = buf.get(..read).unwrap_or_default();
        if read == 0 {
            break;
        }
        if memchr::memchr(b'"', bytes).is_some() {
            return Ok(Look {
                newlines,
                quote: true,
            });
        }
        newlines += memchr::memchr_iter(b'\n', bytes).count() as u64;
        at += read as u64;
    }
    Ok(Look {
        newlines,
        quote: false,
    })
}
