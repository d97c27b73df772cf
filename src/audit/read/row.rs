//! The canonical row every reader produces, the fold that takes rows, and
//! the batches rows travel in between threads.

/// Where a value lies in a row's byte buffer; `None` is null.
pub(crate) type Span = Option<(usize, usize)>;

/// One canonical row, borrowed from the reader's reused buffers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row<'a> {
    /// The file line the row starts on (1-based; CSV line 1 is the header).
    pub(crate) line: u64,
    /// The bytes the spans point into.
    pub(super) data: &'a [u8],
    /// One span per column, in sorted column order.
    pub(super) spans: &'a [Span],
}

impl<'a> Row<'a> {
    /// The value of the `column`-th sorted column, or `None` when it is null.
    pub(crate) fn get(&self, column: usize) -> Option<&'a [u8]> {
        let (start, end) = self.spans.get(column).copied().flatten()?;
        self.data.get(start..end)
    }

    /// Where the `column`-th value lies: the bytes it is in and its range
    /// there, or `None` when it is null; for a reader that copies more
    /// than the value at once.
    pub(crate) fn place(&self, column: usize) -> Option<(&'a [u8], std::ops::Range<usize>)> {
        let (start, end) = self.spans.get(column).copied().flatten()?;
        (start <= end && end <= self.data.len()).then_some((self.data, start..end))
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

    /// Adds `lines` to every line number the fold keeps: a part of a file
    /// read before the lines in front of it were counted (a CSV range,
    /// whose rows are numbered from its start). A fold that keeps line
    /// numbers and takes parts ([`RowFold::PARTS`]) must implement it.
    fn shift_lines(&mut self, _lines: u64) {}

    /// Called after the file's last row, before the result is used.
    fn finish(&mut self) {}
}

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
