//! CSV files as rows, parsed and folded on one thread or, for a large file,
//! in ranges on several threads ([`super::csv_parts`]) or a pipeline of a
//! parsing thread and folding threads.

use std::path::Path;
use std::sync::{mpsc, Arc};

use super::csv_parts::{fold_in_ranges, Ranged};
use super::csv_records::{push_spans, CsvRecords};
use super::{parse_error, AuditError, Batch, RowFold};

/// Streams a CSV file through `make(columns)`'s accumulator; with
/// `pipeline`, parsing and folding run on separate threads.
pub(super) fn fold_csv<F: RowFold>(
    path: &Path,
    pipeline: bool,
    make: &dyn Fn(&[String]) -> F,
) -> Result<(Vec<String>, F), AuditError> {
    let (columns, mut records) = CsvRecords::open(path)?;
    let size = records.estimate.size();
    if pipeline && size >= PIPELINE_BYTES {
        let threads = rayon::current_num_threads();
        if F::PARTS && threads > 1 {
            match fold_in_ranges(&records, threads, size, &columns, make)? {
                Ranged::Done(fold) => return Ok((columns, fold)),
                Ranged::ReadOn(mut rest, fold) => {
                    return Ok((columns, fold_pipelined(&mut rest, fold)?));
                }
                Ranged::Whole => {}
            }
        }
        let fold = make(&columns);
        return Ok((columns, fold_pipelined(&mut records, fold)?));
    }
    let mut fold = make(&columns);
    records.fold_into(&mut fold)?;
    Ok((columns, fold))
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

/// Folds a CSV file with parsing on this thread and folding on one thread
/// per lane of the fold (see [`RowFold::split`]), which see every row.
///
/// Used when one file would otherwise keep one core busy and leave the rest
/// idle, as for a single large candidate file.
pub(super) fn fold_pipelined<F: RowFold>(
    records: &mut CsvRecords<'_>,
    mut fold: F,
) -> Result<F, AuditError> {
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
