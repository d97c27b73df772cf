//! The records of a CSV file after its header: a fast path for lines
//! without quotes, and the csv crate's state machine (`csv_core`) for the
//! rest.
//!
//! Most CSV lines hold no `"` and no stray `\r`; such a line is one record
//! whose fields lie between its commas, which `memchr` finds several bytes
//! per cycle. A line with a quote or a `\r` anywhere but at its end is
//! handed to `csv_core` from its first byte, with the same settings as the
//! csv crate's reader (RFC 4180 quoting, `\r`, `\n` or `\r\n` ends a
//! record, blank lines skipped), so both paths read every file alike.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;

use csv_core::ReadRecordResult;

use super::{io_error, open, parse_error, too_large, Row, RowEstimate, RowFold, Span, BUFFER};
use crate::audit::{AuditError, MAX_COLUMNS, MAX_RECORD_BYTES, MAX_VALUE_BYTES};

/// A field of the last record: where its bytes lie in the caller's buffer.
pub(super) type Field = (usize, usize);

/// The records of a CSV file after its header, checked against it.
pub(super) struct CsvRecords<'p> {
    pub(super) path: &'p Path,
    file: File,
    buf: Vec<u8>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    eof: bool,
    /// The file offset of `buf[start]`.
    offset: u64,
    /// Records are read while they start before this offset (a part of
    /// the file, [`CsvRecords::part`]); `u64::MAX` reads to the end.
    limit: u64,
    /// Newlines before `buf[start]`.
    newlines: u64,
    core: csv_core::Reader,
    /// order[k] = the field position of the k-th sorted column.
    pub(super) order: Vec<usize>,
    /// The columns in file order, to name one whose value is too large.
    header: Vec<String>,
    /// The fields of the record last read, in file order.
    pub(super) fields: Vec<Field>,
    /// csv_core's field ends, reused.
    ends: Vec<usize>,
    pub(super) estimate: RowEstimate,
}

impl<'p> CsvRecords<'p> {
    /// Opens a file and reads its header: returns its sorted columns.
    pub(super) fn open(path: &'p Path) -> Result<(Vec<String>, Self), AuditError> {
        // The header is a record too: the csv crate is given one byte more
        // than MAX_RECORD_BYTES, so a file without newlines (a sparse file)
        // is not read whole into its header.
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .from_reader(open(path)?.take(MAX_RECORD_BYTES as u64 + 1));
        let header = reader
            .byte_headers()
            .map_err(|e| csv_error(path, e))?
            .clone();
        // The header as the csv crate read it (a BOM, quoting); the records
        // start right after it.
        let offset = reader.position().byte();
        let header_line = 1;
        if offset > MAX_RECORD_BYTES as u64 {
            return Err(too_large(
                path,
                format!("line {header_line}"),
                "the header".to_owned(),
                MAX_RECORD_BYTES,
            ));
        }
        if header.len() > MAX_COLUMNS {
            return Err(AuditError::TooWide {
                path: path.to_path_buf(),
                place: format!("line {header_line}"),
                limit: MAX_COLUMNS,
            });
        }
        let file = reader.into_inner().into_inner();

        let mut named = Vec::with_capacity(header.len());
        for (position, name) in header.iter().enumerate() {
            let name = String::from_utf8(name.to_vec()).map_err(|_| {
                parse_error(
                    path,
                    header_line,
                    format!("the name of column {} is not UTF-8", position + 1),
                )
            })?;
            named.push((name, position));
        }
        let header = named.iter().map(|(name, _)| name.clone()).collect();
        named.sort();
        if let Some(pair) = named.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(parse_error(
                path,
                header_line,
                format!("column `{}` appears twice in the header", pair[0].0),
            ));
        }
        let columns = named.iter().map(|(name, _)| name.clone()).collect();
        let newlines = newlines_before(&file, offset).map_err(|e| io_error(path, e))?;
        let estimate = RowEstimate::new(&file);
        // The records' bytes, and one more for the read that sees the end,
        // up to BUFFER: a small file (most partitions) is not given a
        // megabyte to zero.
        let buffer = usize::try_from(estimate.size().saturating_sub(offset))
            .unwrap_or(BUFFER)
            .saturating_add(1)
            .clamp(4096, BUFFER);
        let records = Self {
            path,
            file,
            buf: vec![0; buffer],
            start: 0,
            end: 0,
            eof: false,
            offset,
            limit: u64::MAX,
            newlines,
            core: record_reader(),
            order: named.iter().map(|&(_, position)| position).collect(),
            header,
            fields: Vec::with_capacity(named.len()),
            ends: Vec::new(),
            estimate,
        };
        Ok((columns, records))
    }

    /// The file offset of the first record not read yet.
    pub(super) fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads the file's bytes at `at`, wherever the records are.
    pub(super) fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
        read_at(&self.file, buf, at)
    }

    /// Reads on past the range's end to the file's end, its lines (counted
    /// from the range's start) moved down by the `before` newlines in front
    /// of it.
    pub(super) fn read_on(&mut self, before: u64) {
        self.limit = u64::MAX;
        self.newlines += before;
    }

    /// The newlines before [`CsvRecords::offset`].
    pub(super) fn newlines(&self) -> u64 {
        self.newlines
    }

    /// A reader of the records that start in `from..to`, `from` being the
    /// start of a record after `newlines` newlines; it estimates the rows of
    /// `rows_in` bytes.
    pub(super) fn part(
        &self,
        from: u64,
        to: u64,
        newlines: u64,
        rows_in: u64,
    ) -> Result<Self, AuditError> {
        Ok(Self {
            path: self.path,
            file: self.file.try_clone().map_err(|e| io_error(self.path, e))?,
            buf: vec![0; BUFFER],
            start: 0,
            end: 0,
            eof: false,
            offset: from,
            limit: to,
            newlines,
            core: record_reader(),
            order: self.order.clone(),
            header: self.header.clone(),
            fields: Vec::with_capacity(self.order.len()),
            ends: Vec::new(),
            estimate: RowEstimate::part(rows_in, from),
        })
    }

    /// Reads the next record: appends its field bytes to `data`, sets
    /// `self.fields` to where they lie there, and returns the line the
    /// record starts on.
    pub(super) fn next_into(&mut self, data: &mut Vec<u8>) -> Result<Option<u64>, AuditError> {
        loop {
            if self.offset >= self.limit {
                return Ok(None);
            }
            let pending = self.buf.get(self.start..self.end).unwrap_or_default();
            let newline = memchr::memchr(b'\n', pending);
            if newline.is_none() && !self.eof {
                self.fill()?;
                continue;
            }
            if pending.is_empty() {
                return Ok(None);
            }
            let taken = newline.map_or(pending.len(), |at| at + 1);
            let mut line = pending
                .get(..newline.unwrap_or(pending.len()))
                .unwrap_or_default();
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            let number = self.newlines + 1;
            if line.is_empty() {
                self.consume(taken, u64::from(newline.is_some()));
                continue;
            }
            let base = data.len();
            self.fields.clear();
            if !split_simple(line, base, &mut self.fields) {
                return self.quoted_record(data, number);
            }
            data.extend_from_slice(line);
            self.consume(taken, u64::from(newline.is_some()));
            return self.checked(number).map(Some);
        }
    }

    /// Folds the records into `fold` on this thread until they end or the
    /// fold is satisfied.
    pub(super) fn fold_into<F: RowFold>(&mut self, fold: &mut F) -> Result<(), AuditError> {
        let mut spans: Vec<Span> = Vec::with_capacity(self.order.len());
        let mut data = Vec::new();
        while !fold.satisfied() {
            data.clear();
            let Some(line) = self.next_into(&mut data)? else {
                break;
            };
            if let Some(rows) = self.estimate.take() {
                fold.expect_rows(rows);
            }
            spans.clear();
            push_spans(&mut spans, &self.fields, &self.order);
            fold.row(&Row {
                line,
                data: &data,
                spans: &spans,
            });
        }
        Ok(())
    }

    /// Reads one record with `csv_core` from the start of a line.
    fn quoted_record(
        &mut self,
        data: &mut Vec<u8>,
        number: u64,
    ) -> Result<Option<u64>, AuditError> {
        let base = data.len();
        let begin = self.offset;
        let (mut written, mut fields) = (0, 0);
        loop {
            // A quoted field never closed would otherwise be read to the
            // end of the file into memory.
            if self.offset - begin > MAX_RECORD_BYTES as u64 {
                data.truncate(base);
                return Err(self.record_too_large(number));
            }
            // Room for the output, doubling while a long record fills it
            // (zeroing a buffer's worth for every short record would cost
            // more than parsing it).
            let room = written.max(4096);
            data.resize(base + written + room, 0);
            if self.ends.len() < fields + 64 {
                self.ends.resize(fields + 64, 0);
            }
            let input = self.buf.get(self.start..self.end).unwrap_or_default();
            let output = data.get_mut(base + written..).unwrap_or_default();
            let ends = self.ends.get_mut(fields..).unwrap_or_default();
            let (result, read, wrote, ended) = self.core.read_record(input, output, ends);
            let newlines =
                memchr::memchr_iter(b'\n', input.get(..read).unwrap_or_default()).count() as u64;
            self.consume(read, newlines);
            written += wrote;
            fields += ended;
            match result {
                ReadRecordResult::InputEmpty => {
                    if !self.eof {
                        self.fill()?;
                    }
                }
                ReadRecordResult::OutputFull | ReadRecordResult::OutputEndsFull => {}
                ReadRecordResult::Record => break,
                ReadRecordResult::End => {
                    data.truncate(base);
                    return Ok(None);
                }
            }
        }
        data.truncate(base + written);
        self.fields.clear();
        let mut from = 0;
        for &end in self.ends.get(..fields).unwrap_or_default() {
            self.fields.push((base + from, base + end));
            from = end;
        }
        self.checked(number).map(Some)
    }

    /// Checks the record's width against the header's, and its values'
    /// sizes against [`MAX_VALUE_BYTES`].
    fn checked(&mut self, number: u64) -> Result<u64, AuditError> {
        self.estimate.row(self.offset);
        // Only a record longer than the limit can hold a value that is.
        let spread = match (self.fields.first(), self.fields.last()) {
            (Some(first), Some(last)) => last.1.saturating_sub(first.0),
            _ => 0,
        };
        if spread > MAX_VALUE_BYTES {
            let large = self
                .fields
                .iter()
                .position(|(start, end)| end.saturating_sub(*start) > MAX_VALUE_BYTES);
            if let Some(position) = large {
                let name = self.header.get(position).map_or("", String::as_str);
                return Err(too_large(
                    self.path,
                    format!("line {number}"),
                    format!("the value of column `{name}`"),
                    MAX_VALUE_BYTES,
                ));
            }
        }
        if self.fields.len() != self.order.len() {
            return Err(parse_error(
                self.path,
                number,
                format!(
                    "found {} fields where the header has {}",
                    self.fields.len(),
                    self.order.len()
                ),
            ));
        }
        Ok(number)
    }

    /// Marks `bytes` as read, `newlines` of them newlines.
    fn consume(&mut self, bytes: usize, newlines: u64) {
        self.start += bytes;
        self.offset += bytes as u64;
        self.newlines += newlines;
    }

    /// The error for a record over [`MAX_RECORD_BYTES`] on line `number`.
    fn record_too_large(&self, number: u64) -> AuditError {
        too_large(
            self.path,
            format!("line {number}"),
            "the record".to_owned(),
            MAX_RECORD_BYTES,
        )
    }

    /// Moves the unread bytes to the front and reads more after them,
    /// growing the buffer if a line fills it, up to [`MAX_RECORD_BYTES`].
    fn fill(&mut self) -> Result<(), AuditError> {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        // Filled only when no newline ends the unread bytes: they are one
        // record in the making.
        if self.end >= MAX_RECORD_BYTES {
            return Err(self.record_too_large(self.newlines + 1));
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        // At an explicit offset: the parts of a file share its descriptor.
        let at = self.offset + self.end as u64;
        let read = read_at(
            &self.file,
            self.buf.get_mut(self.end..).unwrap_or_default(),
            at,
        )
        .map_err(|e| io_error(self.path, e))?;
        self.end += read;
        self.eof = read == 0;
        Ok(())
    }
}

/// Splits a line without quotes or carriage returns on its commas: pushes
/// each field's span (offset by `base`) to `fields`. False, with `fields`
/// partly written, if the line holds a `"` or a `\r` (csv_core's to read).
///
/// Eight bytes at a time, as a `u64`: fields are short (about 15 bytes in
/// W4), and `memchr3_iter` paid a call and its setup for every comma (9 %
/// of a CSV audit's CPU, more than the line's bytes cost to look at).
pub(super) fn split_simple(line: &[u8], base: usize, fields: &mut Vec<Field>) -> bool {
    let mut from = 0;
    let mut words = line.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut words {
        let word = u64::from_le_bytes(<[u8; 8]>::try_from(chunk).unwrap_or_default());
        if !split_word(word, at, base, &mut from, fields) {
            return false;
        }
        at += 8;
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        // Zero bytes past the line's end are none of the bytes looked for.
        let mut tail = [0u8; 8];
        tail.get_mut(..rest.len())
            .unwrap_or_default()
            .copy_from_slice(rest);
        if !split_word(u64::from_le_bytes(tail), at, base, &mut from, fields) {
            return false;
        }
    }
    fields.push((base + from, base + line.len()));
    true
}

/// [`split_simple`] for the eight bytes at `at`; `from` is where the field
/// being read starts.
fn split_word(
    word: u64,
    at: usize,
    base: usize,
    from: &mut usize,
    fields: &mut Vec<Field>,
) -> bool {
    if (bytes_equal(word, b'"') | bytes_equal(word, b'\r')) != 0 {
        return false;
    }
    let mut commas = bytes_equal(word, b',');
    while commas != 0 {
        // The lowest byte is the first: the word was read little-endian.
        let comma = at + (commas.trailing_zeros() / 8) as usize;
        fields.push((base + *from, base + comma));
        *from = comma + 1;
        commas &= commas - 1;
    }
    true
}

/// The high bit of every byte of `word` equal to `needle`, and no other
/// bit: exact, since no carry crosses from one byte into the next.
fn bytes_equal(word: u64, needle: u8) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let x = word ^ (u64::from(needle) * 0x0101_0101_0101_0101);
    !(((x & LOW7) + LOW7) | x | LOW7)
}

/// Appends a record's spans in sorted column order.
pub(super) fn push_spans(spans: &mut Vec<Span>, fields: &[Field], order: &[usize]) {
    spans.extend(order.iter().map(|&position| {
        // Quoted or not, an empty field is null, so `""` and `` agree.
        fields
            .get(position)
            .copied()
            .filter(|(start, end)| start < end)
    }));
}

/// `file`'s bytes at `at` into `buf`, read again when a signal interrupts.
fn read_at(file: &File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    loop {
        match file.read_at(buf, at) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            done => return done,
        }
    }
}

/// A `csv_core` reader with the csv crate's settings, past the BOM.
fn record_reader() -> csv_core::Reader {
    let mut core = csv_core::Reader::new();
    // csv_core strips a BOM from its first input: the header's, which
    // the csv crate has read. A newline alone marks it as read.
    let _ = core.read_record(b"\n", &mut [0; 1], &mut [0; 1]);
    core
}

/// The newlines in a file's first `offset` bytes (its header).
fn newlines_before(file: &File, offset: u64) -> std::io::Result<u64> {
    let mut buf = vec![0; usize::try_from(offset).unwrap_or(usize::MAX).min(1 << 20)];
    let (mut at, mut count) = (0u64, 0u64);
    while at < offset {
        let want = usize::try_from(offset - at)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let read = read_at(file, buf.get_mut(..want).unwrap_or_default(), at)?;
        if read == 0 {
            break;
        }
        count += memchr::memchr_iter(b'\n', buf.get(..read).unwrap_or_default()).count() as u64;
        at += read as u64;
    }
    Ok(count)
}

/// A csv crate error as an audit error naming the file and line.
fn csv_error(path: &Path, error: csv::Error) -> AuditError {
    let line = error.position().map_or(0, csv::Position::line);
    let message = error.to_string();
    match error.into_kind() {
        csv::ErrorKind::Io(source) => io_error(path, source),
        _ => parse_error(path, line, message),
    }
}
