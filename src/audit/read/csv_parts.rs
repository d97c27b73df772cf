//! A large CSV file folded in byte ranges, each parsed and folded on its own
//! thread, for a fold that can take a file in parts ([`RowFold::PARTS`]).
//!
//! The pipeline ([`super::csv::fold_pipelined`]) parses on one thread and
//! hands every row to the folding threads: the parse is a serial stage, and
//! every row is copied into a batch and read again on another core. Cut
//! into ranges, every core parses and folds its own rows.
//!
//! The file is cut just after a newline, which is where a record starts
//! unless a quoted field spans it. Whether it does is known once the range
//! before is read: that range stops at the first record starting at or
//! after the cut, so it ends on the cut exactly when the cut is a record's
//! start. A range's rows are numbered from its start, and moved down by the
//! newlines before it once the ranges before are read. Where a quoted field
//! spans a cut, the ranges from there on are dropped and the file is read
//! on from where the range before it stopped.

use rayon::prelude::*;

use super::csv_records::CsvRecords;
use super::{io_error, AuditError, RowFold};

/// Bytes a range has at least: below this, a range's set-up (a buffer, a
/// fold) is not repaid.
const MIN_RANGE: u64 = 4 << 20;
/// Ranges per thread: two, so that a thread slowed by something else
/// (the kernel writing back the file the task just wrote) leaves the rest
/// of its share to the others. In W4's `weir run` (10 M rows) one range a
/// thread audited in 2.9× openssl's time and two in 2.5×; four were no
/// better (2026-12-07, interleaved runs).
const RANGES_PER_THREAD: u64 = 2;

/// What reading a file in ranges came to.
pub(super) enum Ranged<'p, F> {
    /// Every row, folded.
    Done(F),
    /// A quoted field spans a cut: the rows before `records`' offset are
    /// folded, the rest are still to be read from there.
    ReadOn(Box<CsvRecords<'p>>, F),
    /// Too small to cut: nothing read.
    Whole,
}

/// Folds the records of `records` (just past the header) in ranges on the
/// rayon pool's `threads` threads, each range into its own `make(columns)`,
/// and appends them in file order.
pub(super) fn fold_in_ranges<'p, F: RowFold>(
    records: &CsvRecords<'p>,
    threads: usize,
    size: u64,
    columns: &[String],
    make: &dyn Fn(&[String]) -> F,
) -> Result<Ranged<'p, F>, AuditError> {
    let wanted =
        (threads as u64 * RANGES_PER_THREAD).min(size.saturating_sub(records.offset()) / MIN_RANGE);
    fold_cut(records, wanted, size, columns, make)
}

/// The columns, and the fold if the file could be cut, with whether a
/// quoted field spanned a cut.
#[cfg(test)]
pub(crate) type InRanges<F> = (Vec<String>, Option<(F, bool)>);

/// Reads a CSV file in about `wanted` ranges, whatever its size, for tests
/// to compare with reading it whole.
#[cfg(test)]
pub(crate) fn fold_csv_in_ranges<F: RowFold>(
    path: &std::path::Path,
    wanted: u64,
    make: &dyn Fn(&[String]) -> F,
) -> Result<InRanges<F>, AuditError> {
    let (columns, records) = CsvRecords::open(path)?;
    let size = records.estimate.size();
    let fold = match fold_cut(&records, wanted, size, &columns, make)? {
        Ranged::Done(fold) => Some((fold, false)),
        Ranged::ReadOn(mut rest, mut fold) => {
            rest.fold_into(&mut fold)?;
            Some((fold, true))
        }
        Ranged::Whole => None,
    };
    Ok((columns, fold))
}

/// [`fold_in_ranges`] in about `wanted` ranges.
fn fold_cut<'p, F: RowFold>(
    records: &CsvRecords<'p>,
    wanted: u64,
    size: u64,
    columns: &[String],
    make: &dyn Fn(&[String]) -> F,
) -> Result<Ranged<'p, F>, AuditError> {
    let from = records.offset();
    let cuts = cuts(records, from, size, wanted)?;
    if cuts.is_empty() {
        return Ok(Ranged::Whole);
    }
    let starts =
        std::iter::once((from, records.newlines())).chain(cuts.iter().map(|&cut| (cut, 0)));
    let ends = cuts.iter().copied().chain(std::iter::once(u64::MAX));
    let mut ranges = Vec::new();
    for ((start, newlines), end) in starts.zip(ends) {
        ranges.push((
            records.part(start, end, newlines, end.min(size) - start)?,
            make(columns),
        ));
    }
    let read: Vec<(CsvRecords<'p>, Result<F, AuditError>)> = ranges
        .into_par_iter()
        .map(|(mut part, mut fold)| {
            let done = part.fold_into(&mut fold).map(|()| fold);
            (part, done)
        })
        .collect();
    let mut read = read.into_iter();
    let Some((mut last, first)) = read.next() else {
        return Ok(Ranged::Whole);
    };
    // The first range's lines are the file's; its error is the file's first.
    let mut whole = first?;
    // The newlines before the range `last` (its lines start after them).
    let mut before = 0;
    for (&cut, (part, done)) in cuts.iter().zip(read) {
        if last.offset() != cut {
            // A quoted field spans the cut: read on from where the range
            // before stopped, the ranges after it dropped.
            last.read_on(before);
            return Ok(Ranged::ReadOn(Box::new(last), whole));
        }
        before += last.newlines();
        match done {
            Ok(mut fold) => {
                fold.shift_lines(before);
                whole.append(fold);
            }
            // Read again with its lines counted, for the error's line.
            Err(_) => {
                let mut again = records.part(cut, u64::MAX, before, 0)?;
                again.fold_into(&mut whole)?;
                return Ok(Ranged::Done(whole));
            }
        }
        last = part;
    }
    Ok(Ranged::Done(whole))
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
