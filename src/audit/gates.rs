//! Quality gates: what they check, how they fold over a candidate's rows, and
//! the outcome each one reports.
//!
//! Every gate keeps a small accumulator per file; accumulators of the files
//! are merged in file order. Offending rows are rendered only when kept (at
//! most [`MAX_OFFENDING`] per gate), so passing data costs no allocation.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::digest::{Digest, RowDigest};
use super::read::{self, Row, RowFold};
use super::{AuditError, Format, InputData};

/// How many offending rows or keys an outcome lists.
const MAX_OFFENDING: usize = 5;
/// How many distinct unaccepted values an outcome names.
const MAX_DISTINCT: usize = 5;
/// Per file, how many keys duplicated from earlier files are remembered so
/// their rows can be found again; beyond this only the count is exact.
const MAX_CROSS: usize = 1 << 16;
/// Domain separator of a key hash.
const KEY_DOMAIN: &[u8] = b"weir.key.v1\0";
/// Units of a decimal: sums count in 1e-9.
const SCALE: i128 = 1_000_000_000;
/// Fractional digits a decimal may have.
const FRACTION_DIGITS: usize = 9;

/// A quality check a candidate must pass before it is published.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "check", rename_all = "snake_case")]
pub enum Gate {
    /// The number of rows is within bounds (both inclusive).
    RowCount {
        /// The fewest rows allowed.
        min: Option<u64>,
        /// The most rows allowed.
        max: Option<u64>,
    },
    /// No two rows share the values of `columns`. Rows with a null in any of
    /// the columns are not compared (as SQL's UNIQUE); the grain check, which
    /// is stricter, rejects them.
    Unique {
        /// The columns that together must be unique.
        columns: Vec<String>,
    },
    /// None of `columns` is null in any row.
    NotNull {
        /// The columns that must not be null.
        columns: Vec<String>,
    },
    /// Every non-null value of `column` is one of `values`.
    AcceptedValues {
        /// The column checked.
        column: String,
        /// The values allowed.
        values: Vec<String>,
    },
    /// sum or count of output `column` equals the same aggregate of
    /// `input_column` over the rows of input `input` that match every
    /// (column, value) pair of `filter` (string equality).
    Reconcile {
        /// The candidate's column.
        column: String,
        /// What is compared: the sum or the count of non-null values.
        aggregate: Aggregate,
        /// The name of the input to reconcile with.
        input: String,
        /// The input's column.
        input_column: String,
        /// (column, value) pairs an input row must all match to count.
        filter: Vec<(String, String)>,
    },
}

/// How a reconcile gate aggregates a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Aggregate {
    /// The exact decimal sum of the non-null values.
    Sum,
    /// The number of non-null values.
    Count,
}

impl Aggregate {
    fn name(self) -> &'static str {
        match self {
            Self::Sum => "sum",
            Self::Count => "count",
        }
    }
}

/// The result of one gate on one candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateOutcome {
    /// The gate, as [`Gate::describe`] writes it.
    pub gate: String,
    /// Whether the candidate passed the gate.
    pub passed: bool,
    /// What the gate requires, e.g. `between 1 and 100000 rows`.
    pub expected: String,
    /// What the candidate has, e.g. `0 rows`.
    pub actual: String,
    /// Up to five offending rows or keys, e.g. `line 7: order_id=A-1002`;
    /// prefixed with the file name when the candidate has several files.
    pub offending: Vec<String>,
}

impl Gate {
    /// The gate in one line, e.g. `unique(order_id, line_no)`.
    pub fn describe(&self) -> String {
        match self {
            Self::RowCount { min, max } => {
                let bounds: Vec<String> = [("min", min), ("max", max)]
                    .into_iter()
                    .filter_map(|(name, bound)| bound.map(|b| format!("{name} {b}")))
                    .collect();
                format!("row_count({})", bounds.join(", "))
            }
            Self::Unique { columns } => format!("unique({})", columns.join(", ")),
            Self::NotNull { columns } => format!("not_null({})", columns.join(", ")),
            Self::AcceptedValues { column, values } => {
                format!("accepted_values({column} in {})", values.join(", "))
            }
            Self::Reconcile {
                column, aggregate, ..
            } => {
                format!(
                    "reconcile({} {column} = {})",
                    aggregate.name(),
                    self.right_side()
                )
            }
        }
    }

    /// A reconcile gate's input side, e.g. `sum raw.amount where status = paid`.
    fn right_side(&self) -> String {
        let Self::Reconcile {
            aggregate,
            input,
            input_column,
            filter,
            ..
        } = self
        else {
            return String::new();
        };
        let mut text = format!("{} {input}.{input_column}", aggregate.name());
        if !filter.is_empty() {
            let conditions: Vec<String> =
                filter.iter().map(|(c, v)| format!("{c} = {v}")).collect();
            text.push_str(" where ");
            text.push_str(&conditions.join(" and "));
        }
        text
    }
}

/// An offending row: where it is, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Offense {
    file: usize,
    line: u64,
    detail: String,
}

/// The first offending rows of a gate, in (file, line) order.
#[derive(Debug, Default)]
struct Offenses(Vec<Offense>);

impl Offenses {
    fn wants_more(&self) -> bool {
        self.0.len() < MAX_OFFENDING
    }

    /// Keeps the row if it is among the first rows seen so far; `detail` is
    /// only rendered then.
    fn push(&mut self, file: usize, line: u64, detail: impl FnOnce() -> String) {
        if self.wants_more() {
            self.0.push(Offense {
                file,
                line,
                detail: detail(),
            });
        } else if let Some(last) = self.0.iter_mut().max() {
            // Rows may come out of order (key checks work in batches).
            if (file, line) < (last.file, last.line) {
                *last = Offense {
                    file,
                    line,
                    detail: detail(),
                };
            }
        }
    }

    fn merge(&mut self, other: Self) {
        self.0.extend(other.0);
        self.0.sort();
        self.0.truncate(MAX_OFFENDING);
    }

    fn render(&self, places: &Places<'_>) -> Vec<String> {
        let mut sorted: Vec<&Offense> = self.0.iter().collect();
        sorted.sort();
        sorted
            .into_iter()
            .map(|offense| places.render(offense))
            .collect()
    }
}

/// Renders where an offending row is in a set of files.
pub(crate) struct Places<'a> {
    files: &'a [PathBuf],
    /// Put in front of every location, e.g. naming an input.
    prefix: String,
    /// What a location counts: `line` (CSV, JSON Lines) or `row` (Parquet).
    unit: &'static str,
}

impl<'a> Places<'a> {
    /// Locations in `files`: just the line when there is one file, the file
    /// name and the line otherwise.
    pub(crate) fn new(files: &'a [PathBuf], format: Format) -> Self {
        Self {
            files,
            prefix: String::new(),
            unit: unit(format),
        }
    }

    fn render(&self, offense: &Offense) -> String {
        let Offense { file, line, detail } = offense;
        let (prefix, unit) = (&self.prefix, self.unit);
        match self.files.get(*file).filter(|_| self.files.len() > 1) {
            Some(path) => format!("{prefix}{} {unit} {line}: {detail}", file_name(path)),
            None => format!("{prefix}{unit} {line}: {detail}"),
        }
    }
}

/// How rows are located in files of a format.
fn unit(format: Format) -> &'static str {
    match format {
        Format::Csv | Format::Jsonl => "line",
        Format::Parquet => "row",
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// A value as readable text.
fn text(value: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(value)
}

/// `1 row`, `2 rows`.
fn plural(count: u64, noun: &str) -> String {
    if count == 1 {
        format!("{count} {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// The column's position among the sorted `columns`.
fn position(columns: &[String], name: &str) -> Option<usize> {
    columns.binary_search_by(|c| c.as_str().cmp(name)).ok()
}

/// "column `x` is missing" for the first of `wanted` not in `columns`.
fn missing<'w>(columns: &[String], wanted: impl IntoIterator<Item = &'w String>) -> Option<String> {
    wanted
        .into_iter()
        .find(|name| position(columns, name).is_none())
        .map(|name| format!("column `{name}` is missing"))
}

/// Hashes u128 key hashes by their own bits: they are already uniform, and
/// SipHash would cost as much as the set lookup itself.
#[derive(Debug, Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u128(&mut self, n: u128) {
        // Truncation is the point: the low bits of a SHA-256 prefix.
        self.0 ^= n as u64;
    }
}

/// A small set of key hashes (duplicates to look for again).
type FewKeys = HashSet<u128, BuildHasherDefault<KeyHasher>>;

/// The set of 128-bit key hashes seen: open addressing with linear probing
/// over a power-of-two table of `u128`, 0 marking an empty slot.
///
/// This is the audit's main memory cost: 16 bytes per slot, at most 3/4 full,
/// so 10 M distinct keys take 256 MiB. Key hashes are SHA-256 prefixes, already
/// uniform, so their low bits index the table directly; four slots share a
/// cache line, so an insert usually touches one line, where std's `HashSet`
/// touches its control bytes and its slot in separate lines.
#[derive(Debug, Default)]
struct KeySet {
    slots: Vec<u128>,
    /// Non-zero hashes stored.
    stored: usize,
    /// Whether the hash 0, which cannot be stored, is in the set.
    zero: bool,
}

impl KeySet {
    fn len(&self) -> usize {
        self.stored + usize::from(self.zero)
    }

    /// Adds a hash; false if it was already in the set.
    fn insert(&mut self, hash: u128) -> bool {
        if hash == 0 {
            return !std::mem::replace(&mut self.zero, true);
        }
        if (self.stored + 1) * 4 > self.slots.len() * 3 {
            self.resize(Self::slots_for(self.stored + 1).max(self.slots.len() * 2));
        }
        let mask = self.slots.len() - 1;
        // Truncation is the point: the low bits pick the slot.
        let mut index = hash as usize & mask;
        loop {
            let slot = &mut self.slots[index];
            if *slot == 0 {
                *slot = hash;
                self.stored += 1;
                return true;
            }
            if *slot == hash {
                return false;
            }
            index = (index + 1) & mask;
        }
    }

    /// Makes room for `additional` more hashes without growing.
    fn reserve(&mut self, additional: usize) {
        let wanted = Self::slots_for(self.stored.saturating_add(additional));
        if wanted > self.slots.len() {
            self.resize(wanted);
        }
    }

    /// A power-of-two table size that holds `hashes` at most 3/4 full.
    fn slots_for(hashes: usize) -> usize {
        (hashes.saturating_mul(4) / 3 + 1)
            .next_power_of_two()
            .max(16)
    }

    fn resize(&mut self, slots: usize) {
        let old = std::mem::replace(&mut self.slots, vec![0; slots]);
        self.stored = 0;
        for hash in old.into_iter().filter(|&hash| hash != 0) {
            self.insert(hash);
        }
    }

    /// Loads the slot of each hash and discards it: independent loads run
    /// in parallel, so the inserts that follow find their lines cached.
    fn touch(&self, hashes: impl Iterator<Item = u128>) {
        let mask = self.slots.len().wrapping_sub(1);
        let mut any = 0;
        for hash in hashes {
            any |= self.slots.get(hash as usize & mask).copied().unwrap_or(0);
        }
        std::hint::black_box(any);
    }

    fn into_iter(self) -> impl Iterator<Item = u128> {
        let zero = self.zero.then_some(0);
        self.slots.into_iter().filter(|&hash| hash != 0).chain(zero)
    }
}

/// The 128-bit hash of a key (the first 16 bytes of SHA-256 of its values,
/// each a u32 LE length and bytes), or `None` if any key column is null.
fn key_hash(columns: &[usize], row: &Row<'_>, buf: &mut Vec<u8>) -> Option<u128> {
    buf.clear();
    buf.extend_from_slice(KEY_DOMAIN);
    for &column in columns {
        let value = row.get(column)?;
        buf.extend_from_slice(&u32::try_from(value.len()).unwrap_or(u32::MAX).to_le_bytes());
        buf.extend_from_slice(value);
    }
    let hash: [u8; 32] = Sha256::digest(&*buf).into();
    let mut low = [0u8; 16];
    low.copy_from_slice(&hash[..16]);
    Some(u128::from_le_bytes(low))
}

/// `a=1, b=2` from a key's encoded values (each a u32 LE length and bytes).
fn render_values(names: &[String], encoded: &[u8]) -> String {
    let mut rest = encoded;
    let mut parts = Vec::with_capacity(names.len());
    for name in names {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            break;
        };
        let len = usize::try_from(u32::from_le_bytes(*len)).unwrap_or(usize::MAX);
        let value = tail.get(..len).unwrap_or(tail);
        parts.push(format!("{name}={}", text(value)));
        rest = tail.get(len..).unwrap_or_default();
    }
    parts.join(", ")
}

/// `a=1, b=null` for the key columns of a row.
fn render_key(names: &[String], columns: &[usize], row: &Row<'_>) -> String {
    let parts: Vec<String> = names
        .iter()
        .zip(columns)
        .map(|(name, &column)| match row.get(column) {
            Some(value) => format!("{name}={}", text(value)),
            None => format!("{name}=null"),
        })
        .collect();
    parts.join(", ")
}

/// Uniqueness of a key over all rows (the grain, or a `unique` gate).
///
/// Remembers a 128-bit hash of each distinct key (see [`KeySet`] for the
/// memory this takes); on a repeat, reports the later row. Rows with a null
/// key value are not hashed.
#[derive(Debug)]
struct KeyCheck {
    file: usize,
    names: Vec<String>,
    /// Positions of the key columns; `None` when one is missing.
    columns: Option<Vec<usize>>,
    /// The grain rejects null key values; `unique` skips such rows.
    reject_nulls: bool,
    seen: KeySet,
    duplicates: u64,
    null_keys: u64,
    offenses: Offenses,
    /// Keys of a later file already seen in earlier files, by later file.
    cross: Vec<(usize, FewKeys)>,
    buf: Vec<u8>,
    /// Keys hashed but not yet looked up (see [`KeyCheck::flush`]).
    pending: Vec<PendingKey>,
    /// The encoded values of the pending keys, for rendering duplicates.
    pending_values: Vec<u8>,
}

/// A key waiting to be looked up in the set.
#[derive(Debug)]
struct PendingKey {
    hash: u128,
    line: u64,
    /// Its encoded values in `pending_values`.
    values: (usize, usize),
}

/// Keys looked up together: enough for their cache misses to overlap, few
/// enough that their table lines stay in the L1 cache.
const PENDING_KEYS: usize = 128;

impl KeyCheck {
    fn new(file: usize, columns: &[String], names: &[String], reject_nulls: bool) -> Self {
        Self {
            file,
            names: names.to_vec(),
            columns: names.iter().map(|name| position(columns, name)).collect(),
            reject_nulls,
            seen: KeySet::default(),
            duplicates: 0,
            null_keys: 0,
            offenses: Offenses::default(),
            cross: Vec::new(),
            buf: Vec::new(),
            pending: Vec::with_capacity(PENDING_KEYS),
            pending_values: Vec::new(),
        }
    }

    fn row(&mut self, row: &Row<'_>) {
        let Some(columns) = &self.columns else {
            return;
        };
        let Some(hash) = key_hash(columns, row, &mut self.buf) else {
            if self.reject_nulls {
                self.null_keys += 1;
                self.offenses.push(self.file, row.line, || {
                    render_key(&self.names, columns, row)
                });
            }
            return;
        };
        let start = self.pending_values.len();
        let values = self.buf.get(KEY_DOMAIN.len()..).unwrap_or_default();
        self.pending_values.extend_from_slice(values);
        self.pending.push(PendingKey {
            hash,
            line: row.line,
            values: (start, self.pending_values.len()),
        });
        if self.pending.len() >= PENDING_KEYS {
            self.flush();
        }
    }

    /// Looks up the pending keys. The set is far larger than the caches, so
    /// each lookup waits on memory; loading all their slots first, with no
    /// branch between the loads, lets those waits overlap.
    fn flush(&mut self) {
        self.seen.reserve(self.pending.len());
        self.seen.touch(self.pending.iter().map(|key| key.hash));
        for key in &self.pending {
            if !self.seen.insert(key.hash) {
                self.duplicates += 1;
                let (start, end) = key.values;
                let values = self.pending_values.get(start..end).unwrap_or_default();
                self.offenses
                    .push(self.file, key.line, || render_values(&self.names, values));
            }
        }
        self.pending.clear();
        self.pending_values.clear();
    }

    /// Makes room for about `rows` keys at once: growing by doubling would
    /// briefly hold the old and the new table, half again the final memory.
    fn expect_rows(&mut self, rows: u64) {
        if self.columns.is_some() {
            let rows = usize::try_from(rows).unwrap_or(usize::MAX);
            self.seen.reserve(rows.saturating_sub(self.seen.len()));
        }
    }

    /// Merges the check of the next file, `later`, into this one (which covers
    /// all earlier files): keys in both are duplicates whose later row is in
    /// `later`'s file.
    fn merge(&mut self, mut later: Self) {
        self.flush();
        later.flush();
        self.duplicates += later.duplicates;
        self.null_keys += later.null_keys;
        self.offenses.merge(later.offenses);
        self.cross.extend(later.cross);
        let earlier = std::mem::take(&mut self.seen);
        // Insert the smaller set into the larger: the work is the same for
        // the duplicates found, and far less for one big file among small ones.
        let (mut big, small) = if earlier.len() >= later.seen.len() {
            (earlier, later.seen)
        } else {
            (later.seen, earlier)
        };
        big.reserve(small.len());
        let mut cross = FewKeys::default();
        for hash in small.into_iter() {
            if !big.insert(hash) {
                self.duplicates += 1;
                if cross.len() < MAX_CROSS {
                    cross.insert(hash);
                }
            }
        }
        self.seen = big;
        if !cross.is_empty() {
            self.cross.push((later.file, cross));
        }
    }

    /// Re-reads files holding keys duplicated from earlier files to list
    /// those rows, as long as they would be among the first offending rows.
    fn locate_cross_duplicates(
        &mut self,
        files: &[PathBuf],
        format: Format,
    ) -> Result<(), AuditError> {
        if self.columns.is_none() {
            return Ok(());
        }
        let mut cross = std::mem::take(&mut self.cross);
        cross.sort_by_key(|(file, _)| *file);
        for (file, targets) in cross {
            let earlier = self.offenses.0.iter().filter(|o| o.file < file).count();
            if earlier >= MAX_OFFENDING {
                break;
            }
            let Some(path) = files.get(file) else {
                continue;
            };
            let (_, rescan) = read::fold_file(path, format, None, false, &|file_columns| Rescan {
                file,
                names: &self.names,
                // Resolved again: a JSON Lines file alone may have fewer keys.
                columns: self
                    .names
                    .iter()
                    .map(|n| position(file_columns, n))
                    .collect(),
                targets: targets.clone(),
                buf: Vec::new(),
                offenses: Offenses::default(),
            })?;
            self.offenses.merge(rescan.offenses);
        }
        Ok(())
    }

    fn outcome(
        &self,
        gate: String,
        expected: String,
        all: &[String],
        places: &Places<'_>,
    ) -> GateOutcome {
        let problem = missing(all, &self.names);
        let passed = problem.is_none() && self.duplicates == 0 && self.null_keys == 0;
        let actual = problem.unwrap_or_else(|| {
            let mut actual = plural(self.duplicates, "duplicate key");
            if self.null_keys > 0 {
                actual.push_str(&format!(", {} with nulls", plural(self.null_keys, "key")));
            }
            actual
        });
        GateOutcome {
            gate,
            passed,
            expected,
            actual,
            offending: self.offenses.render(places),
        }
    }
}

/// Finds the first row of one file for each of some key hashes.
struct Rescan<'n> {
    file: usize,
    names: &'n [String],
    /// `None` when the file lacks a key column, so none of its rows has a key.
    columns: Option<Vec<usize>>,
    targets: FewKeys,
    buf: Vec<u8>,
    offenses: Offenses,
}

impl RowFold for Rescan<'_> {
    fn row(&mut self, row: &Row<'_>) {
        let Some(columns) = &self.columns else {
            return;
        };
        if let Some(hash) = key_hash(columns, row, &mut self.buf) {
            // Only the first row with the key in this file duplicates an
            // earlier file; later ones were reported by the file's own check.
            if self.targets.remove(&hash) {
                self.offenses
                    .push(self.file, row.line, || render_key(self.names, columns, row));
            }
        }
    }

    fn satisfied(&self) -> bool {
        self.columns.is_none() || self.targets.is_empty() || !self.offenses.wants_more()
    }
}

/// Null values in some columns.
#[derive(Debug)]
struct NotNullCheck {
    file: usize,
    /// Name and position of each checked column present in the data.
    columns: Vec<(String, usize)>,
    nulls: u64,
    offenses: Offenses,
}

impl NotNullCheck {
    fn row(&mut self, row: &Row<'_>) {
        let nulls = self
            .columns
            .iter()
            .filter(|(_, c)| row.get(*c).is_none())
            .count();
        if nulls > 0 {
            self.nulls += nulls as u64;
            let columns = &self.columns;
            self.offenses.push(self.file, row.line, || {
                let names: Vec<String> = columns
                    .iter()
                    .filter(|(_, c)| row.get(*c).is_none())
                    .map(|(name, _)| format!("{name}=null"))
                    .collect();
                names.join(", ")
            });
        }
    }

    fn merge(&mut self, later: Self) {
        self.nulls += later.nulls;
        self.offenses.merge(later.offenses);
    }
}

/// Values of a column outside an accepted set.
#[derive(Debug)]
struct AcceptedCheck {
    file: usize,
    column: String,
    position: Option<usize>,
    /// Sorted: a binary search beats hashing every value for the short
    /// lists gates name.
    accepted: Vec<Vec<u8>>,
    outside: u64,
    /// The first distinct unaccepted values, one more than shown so the
    /// outcome can say there are more.
    distinct: Vec<String>,
    offenses: Offenses,
}

impl AcceptedCheck {
    fn row(&mut self, row: &Row<'_>) {
        let Some(value) = self.position.and_then(|c| row.get(c)) else {
            return;
        };
        if self
            .accepted
            .binary_search_by(|accepted| accepted.as_slice().cmp(value))
            .is_ok()
        {
            return;
        }
        self.outside += 1;
        if self.distinct.len() <= MAX_DISTINCT {
            let value = text(value);
            if !self.distinct.iter().any(|seen| *seen == value) {
                self.distinct.push(value.into_owned());
            }
        }
        let column = &self.column;
        self.offenses.push(self.file, row.line, || {
            format!("{column}={:?}", text(value))
        });
    }

    fn merge(&mut self, later: Self) {
        self.outside += later.outside;
        for value in later.distinct {
            if self.distinct.len() <= MAX_DISTINCT && !self.distinct.contains(&value) {
                self.distinct.push(value);
            }
        }
        self.offenses.merge(later.offenses);
    }

    fn actual(&self) -> String {
        let rows = plural(self.outside, "row");
        if self.outside == 0 {
            return format!("{rows} with values outside the set");
        }
        let mut shown: Vec<String> = self
            .distinct
            .iter()
            .take(MAX_DISTINCT)
            .map(|v| format!("{v:?}"))
            .collect();
        if self.distinct.len() > MAX_DISTINCT {
            shown.push("…".to_owned());
        }
        format!("{rows} with values outside the set: {}", shown.join(", "))
    }
}

/// A sum or count of one column over the rows matching a filter.
#[derive(Debug)]
struct Aggregator {
    file: usize,
    column: String,
    aggregate: Aggregate,
    position: Option<usize>,
    /// Positions and values a row must match; `None` when a filter column is
    /// absent, so no row can match.
    filter: Option<Vec<(usize, Vec<u8>)>>,
    count: u64,
    /// In units of 1e-9; `None` once it overflowed.
    sum: Option<i128>,
    /// Values that are not decimal numbers.
    bad: u64,
    offenses: Offenses,
}

impl Aggregator {
    fn new(
        file: usize,
        columns: &[String],
        column: &str,
        aggregate: Aggregate,
        filter: &[(String, String)],
    ) -> Self {
        Self {
            file,
            column: column.to_owned(),
            aggregate,
            position: position(columns, column),
            filter: filter
                .iter()
                .map(|(c, v)| position(columns, c).map(|p| (p, v.as_bytes().to_vec())))
                .collect(),
            count: 0,
            sum: Some(0),
            bad: 0,
            offenses: Offenses::default(),
        }
    }

    fn row(&mut self, row: &Row<'_>) {
        let Some(filter) = &self.filter else {
            return;
        };
        if !filter
            .iter()
            .all(|(c, v)| row.get(*c) == Some(v.as_slice()))
        {
            return;
        }
        let Some(value) = self.position.and_then(|c| row.get(c)) else {
            return;
        };
        self.count += 1;
        if self.aggregate == Aggregate::Sum {
            match parse_decimal(value) {
                Some(units) => self.sum = self.sum.and_then(|sum| sum.checked_add(units)),
                None => {
                    self.bad += 1;
                    let column = &self.column;
                    self.offenses.push(self.file, row.line, || {
                        format!("{column}={:?}", text(value))
                    });
                }
            }
        }
    }

    fn merge(&mut self, later: Self) {
        self.count += later.count;
        self.sum = self.sum.zip(later.sum).and_then(|(a, b)| a.checked_add(b));
        self.bad += later.bad;
        self.offenses.merge(later.offenses);
    }

    /// Comparable result: `None` if it cannot be trusted.
    fn value(&self) -> Option<String> {
        if self.bad > 0 {
            return None;
        }
        match self.aggregate {
            Aggregate::Count => Some(self.count.to_string()),
            Aggregate::Sum => self.sum.map(render_decimal),
        }
    }

    /// The result as shown, with what went wrong.
    fn shown(&self) -> String {
        let base = match self.aggregate {
            Aggregate::Count => self.count.to_string(),
            Aggregate::Sum => self
                .sum
                .map_or_else(|| "overflow".to_owned(), render_decimal),
        };
        match self.bad {
            0 => base,
            1 => format!("{base} (1 value is not a decimal number)"),
            bad => format!("{base} ({bad} values are not decimal numbers)"),
        }
    }
}

/// A decimal (`-12.5`, `+3`, `7.000000001`) in units of 1e-9: optional sign,
/// digits, optionally `.` and 1 to 9 digits. `None` if it is not one or
/// does not fit.
fn parse_decimal(value: &[u8]) -> Option<i128> {
    let (negative, unsigned) = match value.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, value),
    };
    let (whole, fraction) = match unsigned.iter().position(|&b| b == b'.') {
        Some(dot) => (&unsigned[..dot], Some(&unsigned[dot + 1..])),
        None => (unsigned, None),
    };
    if whole.is_empty() || !whole.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut units: i128 = 0;
    for &digit in whole {
        units = units
            .checked_mul(10)?
            .checked_add(i128::from(digit - b'0'))?;
    }
    units = units.checked_mul(SCALE)?;
    if let Some(fraction) = fraction {
        if fraction.is_empty()
            || fraction.len() > FRACTION_DIGITS
            || !fraction.iter().all(u8::is_ascii_digit)
        {
            return None;
        }
        let mut scale = SCALE;
        for &digit in fraction {
            scale /= 10;
            units = units.checked_add(i128::from(digit - b'0') * scale)?;
        }
    }
    Some(if negative { -units } else { units })
}

/// Units of 1e-9 as a decimal without trailing zeros: `74000`, `12.5`.
fn render_decimal(units: i128) -> String {
    let sign = if units < 0 { "-" } else { "" };
    let magnitude = units.unsigned_abs();
    let scale = SCALE.unsigned_abs();
    let (whole, fraction) = (magnitude / scale, magnitude % scale);
    if fraction == 0 {
        return format!("{sign}{whole}");
    }
    let digits = format!("{fraction:09}");
    format!("{sign}{whole}.{}", digits.trim_end_matches('0'))
}

/// One gate's accumulator over the candidate.
#[derive(Debug)]
enum Check {
    RowCount,
    /// The position of its check in [`CandidateFold::keys`].
    Unique(usize),
    NotNull(NotNullCheck),
    Accepted(AcceptedCheck),
    /// The candidate side of a reconcile gate.
    Reconcile(Aggregator),
}

/// Everything the audit accumulates over a candidate's rows: the row count,
/// the digest sum, the grain check and one accumulator per gate.
#[derive(Debug)]
pub(crate) struct CandidateFold {
    rows: u64,
    digest: RowDigest,
    /// The grain check, then one per `unique` gate.
    keys: Vec<KeyCheck>,
    checks: Vec<Check>,
    /// Set in the lane split off to run only the key checks.
    keys_only: bool,
}

impl CandidateFold {
    /// An empty accumulator for file `file` whose columns are `columns`.
    pub(crate) fn new(file: usize, columns: &[String], grain: &[String], gates: &[Gate]) -> Self {
        let mut keys = vec![KeyCheck::new(file, columns, grain, true)];
        let checks = gates
            .iter()
            .map(|gate| match gate {
                Gate::RowCount { .. } => Check::RowCount,
                Gate::Unique { columns: names } => {
                    keys.push(KeyCheck::new(file, columns, names, false));
                    Check::Unique(keys.len() - 1)
                }
                Gate::NotNull { columns: names } => Check::NotNull(NotNullCheck {
                    file,
                    columns: names
                        .iter()
                        .filter_map(|name| position(columns, name).map(|p| (name.clone(), p)))
                        .collect(),
                    nulls: 0,
                    offenses: Offenses::default(),
                }),
                Gate::AcceptedValues { column, values } => Check::Accepted(AcceptedCheck {
                    file,
                    column: column.clone(),
                    position: position(columns, column),
                    accepted: {
                        let mut accepted: Vec<Vec<u8>> =
                            values.iter().map(|v| v.as_bytes().to_vec()).collect();
                        accepted.sort();
                        accepted
                    },
                    outside: 0,
                    distinct: Vec::new(),
                    offenses: Offenses::default(),
                }),
                Gate::Reconcile {
                    column, aggregate, ..
                } => Check::Reconcile(Aggregator::new(file, columns, column, *aggregate, &[])),
            })
            .collect();
        Self {
            rows: 0,
            digest: RowDigest::new(columns),
            keys,
            checks,
            keys_only: false,
        }
    }

    /// Merges the accumulator of the next file into this one, which covers
    /// all the files before it.
    pub(crate) fn merge(&mut self, later: Self) {
        self.rows += later.rows;
        self.digest.merge(&later.digest);
        for (key, later) in self.keys.iter_mut().zip(later.keys) {
            key.merge(later);
        }
        for (check, later) in self.checks.iter_mut().zip(later.checks) {
            match (check, later) {
                (Check::NotNull(a), Check::NotNull(b)) => a.merge(b),
                (Check::Accepted(a), Check::Accepted(b)) => a.merge(b),
                (Check::Reconcile(a), Check::Reconcile(b)) => a.merge(b),
                // Both sides were built from the same gates, so the rest is
                // RowCount or Unique on both sides, which hold nothing here.
                _ => {}
            }
        }
    }

    /// The number of rows read.
    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// The canonical digest of the rows read, whose columns are `columns`.
    pub(crate) fn digest(&self, columns: &[String]) -> Digest {
        self.digest.finish(self.rows, columns)
    }

    /// Finds the rows of keys duplicated across files (only the counts are
    /// known after merging), re-reading the later files if need be.
    pub(crate) fn locate_duplicates(
        &mut self,
        files: &[PathBuf],
        format: Format,
    ) -> Result<(), AuditError> {
        for key in &mut self.keys {
            key.locate_cross_duplicates(files, format)?;
        }
        Ok(())
    }

    /// One outcome per gate, the grain check first.
    pub(crate) fn outcomes(
        &self,
        gates: &[Gate],
        columns: &[String],
        places: &Places<'_>,
        inputs: &InputSides<'_>,
    ) -> Vec<GateOutcome> {
        let mut outcomes = Vec::with_capacity(gates.len() + 1);
        if let Some(grain) = self.keys.first() {
            let names = grain.names.join(", ");
            outcomes.push(grain.outcome(
                format!("grain unique({names})"),
                format!("no duplicate or null ({names})"),
                columns,
                places,
            ));
        }
        for (index, (gate, check)) in gates.iter().zip(&self.checks).enumerate() {
            let key = |at: &usize| self.keys.get(*at);
            outcomes.push(match (gate, check) {
                (Gate::Unique { columns: names }, Check::Unique(at)) => match key(at) {
                    Some(unique) => unique.outcome(
                        gate.describe(),
                        format!("no duplicate ({})", names.join(", ")),
                        columns,
                        places,
                    ),
                    None => out_of_step(gate),
                },
                (Gate::NotNull { columns: names }, Check::NotNull(not_null)) => {
                    let problem = missing(columns, names);
                    GateOutcome {
                        gate: gate.describe(),
                        passed: problem.is_none() && not_null.nulls == 0,
                        expected: format!("no nulls in ({})", names.join(", ")),
                        actual: problem.unwrap_or_else(|| plural(not_null.nulls, "null value")),
                        offending: not_null.offenses.render(places),
                    }
                }
                (Gate::AcceptedValues { column, values }, Check::Accepted(accepted)) => {
                    let problem = missing(columns, [column]);
                    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
                    GateOutcome {
                        gate: gate.describe(),
                        passed: problem.is_none() && accepted.outside == 0,
                        expected: format!("one of {}", quoted.join(", ")),
                        actual: problem.unwrap_or_else(|| accepted.actual()),
                        offending: accepted.offenses.render(places),
                    }
                }
                (Gate::Reconcile { .. }, Check::Reconcile(output)) => {
                    reconcile_outcome(gate, output, columns, places, inputs.get(&index))
                }
                (Gate::RowCount { min, max }, _) => row_count_outcome(gate, *min, *max, self.rows),
                _ => out_of_step(gate),
            });
        }
        outcomes
    }
}

impl RowFold for CandidateFold {
    fn finish(&mut self) {
        for key in &mut self.keys {
            key.flush();
        }
    }

    fn split(&mut self) -> Option<Self> {
        self.split_keys()
    }

    fn join(&mut self, lane: Self) {
        self.keys.extend(lane.keys);
    }

    fn expect_rows(&mut self, rows: u64) {
        for key in &mut self.keys {
            key.expect_rows(rows);
        }
    }

    fn row(&mut self, row: &Row<'_>) {
        for key in &mut self.keys {
            key.row(row);
        }
        if self.keys_only {
            return;
        }
        self.rows += 1;
        self.digest.add(row);
        for check in &mut self.checks {
            match check {
                Check::RowCount | Check::Unique(_) => {}
                Check::NotNull(not_null) => not_null.row(row),
                Check::Accepted(accepted) => accepted.row(row),
                Check::Reconcile(output) => output.row(row),
            }
        }
    }
}

impl CandidateFold {
    /// Each key check (a hash and a set insert per row) costs about as much
    /// as all other checks together and needs nothing they have, so each
    /// makes a lane of its own. Taken from the back, so that joining the
    /// lanes last split first rebuilds `keys` in order.
    fn split_keys(&mut self) -> Option<Self> {
        if self.keys_only {
            return None;
        }
        let check = self.keys.pop()?;
        Some(Self {
            rows: 0,
            digest: RowDigest::new(&[]),
            keys: vec![check],
            checks: Vec::new(),
            keys_only: true,
        })
    }
}

/// Checks are built from the very gates they are paired with, one each, in
/// order, so this cannot happen; it fails the gate rather than panic.
fn out_of_step(gate: &Gate) -> GateOutcome {
    GateOutcome {
        gate: gate.describe(),
        passed: false,
        expected: String::new(),
        actual: "internal error: gate and check out of step".to_owned(),
        offending: Vec::new(),
    }
}

fn row_count_outcome(gate: &Gate, min: Option<u64>, max: Option<u64>, rows: u64) -> GateOutcome {
    let expected = match (min, max) {
        (Some(min), Some(max)) => format!("between {min} and {max} rows"),
        (Some(min), None) => format!("at least {}", plural(min, "row")),
        (None, Some(max)) => format!("at most {}", plural(max, "row")),
        (None, None) => "any number of rows".to_owned(),
    };
    GateOutcome {
        gate: gate.describe(),
        passed: min.is_none_or(|min| rows >= min) && max.is_none_or(|max| rows <= max),
        expected,
        actual: plural(rows, "row"),
        offending: Vec::new(),
    }
}

/// A reconcile gate's input side: the input's columns and the aggregate.
pub(crate) struct InputSide<'a> {
    columns: Vec<String>,
    aggregator: Aggregator,
    places: Places<'a>,
}

/// Input sides by the index of their reconcile gate.
pub(crate) type InputSides<'a> = HashMap<usize, InputSide<'a>>;

/// The input side of one input's reconcile gates, per file.
struct InputFold(Vec<Aggregator>);

impl RowFold for InputFold {
    fn row(&mut self, row: &Row<'_>) {
        for aggregator in &mut self.0 {
            aggregator.row(row);
        }
    }
}

/// Reads each input that reconcile gates name, once per input however many
/// gates use it, in parallel. Inputs not in `inputs` are left out (their gates
/// fail).
pub(crate) fn read_inputs<'a>(
    gates: &[Gate],
    inputs: &'a HashMap<String, InputData>,
) -> Result<InputSides<'a>, AuditError> {
    use rayon::prelude::*;

    let mut by_input: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, gate) in gates.iter().enumerate() {
        if let Gate::Reconcile { input, .. } = gate {
            by_input.entry(input.as_str()).or_default().push(index);
        }
    }
    let groups: Vec<(&'a String, &'a InputData, Vec<usize>)> = by_input
        .into_iter()
        .filter_map(|(name, indices)| inputs.get_key_value(name).map(|(n, d)| (n, d, indices)))
        .collect();
    let read: Vec<Result<Vec<(usize, InputSide<'a>)>, AuditError>> = groups
        .into_par_iter()
        .map(|(name, data, indices)| read_input(gates, name, data, &indices))
        .collect();
    let mut sides = InputSides::new();
    for result in read {
        sides.extend(result?);
    }
    Ok(sides)
}

fn read_input<'a>(
    gates: &[Gate],
    name: &str,
    data: &'a InputData,
    indices: &[usize],
) -> Result<Vec<(usize, InputSide<'a>)>, AuditError> {
    let make = |file: usize, columns: &[String]| {
        InputFold(
            indices
                .iter()
                .filter_map(|&index| match gates.get(index) {
                    Some(Gate::Reconcile {
                        aggregate,
                        input_column,
                        filter,
                        ..
                    }) => Some(Aggregator::new(
                        file,
                        columns,
                        input_column,
                        *aggregate,
                        filter,
                    )),
                    _ => None,
                })
                .collect(),
        )
    };
    // Input rows need no digest, so a JSON Lines file lacking a key need not
    // be re-read: its aggregators already treat the key as null.
    let (columns, folds) = read::fold_files(&data.files, data.format, false, &make)?;
    let mut folds = folds.into_iter();
    let mut merged = folds.next().unwrap_or_else(|| make(0, &columns));
    for later in folds {
        for (aggregator, later) in merged.0.iter_mut().zip(later.0) {
            aggregator.merge(later);
        }
    }
    Ok(indices
        .iter()
        .copied()
        .zip(merged.0)
        .map(|(index, aggregator)| {
            let side = InputSide {
                columns: columns.clone(),
                aggregator,
                places: Places {
                    files: &data.files,
                    prefix: format!("input {name} "),
                    unit: unit(data.format),
                },
            };
            (index, side)
        })
        .collect())
}

fn reconcile_outcome(
    gate: &Gate,
    output: &Aggregator,
    columns: &[String],
    places: &Places<'_>,
    input: Option<&InputSide<'_>>,
) -> GateOutcome {
    let Gate::Reconcile {
        column,
        input: input_name,
        input_column,
        filter,
        ..
    } = gate
    else {
        return out_of_step(gate);
    };
    let input_problem = match input {
        None => Some(format!("input `{input_name}` was not provided")),
        Some(side) => missing(
            &side.columns,
            std::iter::once(input_column).chain(filter.iter().map(|(c, _)| c)),
        )
        .map(|problem| format!("{problem} from input `{input_name}`")),
    };
    let output_problem = missing(columns, [column]);

    let expected = match (input, &input_problem) {
        (Some(side), None) => side.aggregator.shown(),
        _ => gate.right_side(),
    };
    let actual = match (&output_problem, &input_problem) {
        (Some(problem), _) | (None, Some(problem)) => problem.clone(),
        (None, None) => output.shown(),
    };
    let input_value = input
        .filter(|_| input_problem.is_none())
        .and_then(|s| s.aggregator.value());
    let output_value = Some(output)
        .filter(|_| output_problem.is_none())
        .and_then(Aggregator::value);
    let passed = matches!((&output_value, &input_value), (Some(a), Some(b)) if a == b);

    let mut offending = output.offenses.render(places);
    if let Some(side) = input {
        offending.extend(side.aggregator.offenses.render(&side.places));
    }
    offending.truncate(MAX_OFFENDING);
    GateOutcome {
        gate: gate.describe(),
        passed,
        expected,
        actual,
        offending,
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::audit::{audit, AuditReport, AuditSpec};

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write test file");
        path
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    const ORDERS: &str = "\
order_id,line_no,status,gmv_cents
A-1001,1,paid,50000
A-1002,1,paid,23500
A-1002,2,pending,
A-1003,1,refunded,100
";

    const RAW_ORDERS: &str = "\
order_id,status,amount_cents
A-1001,paid,50000
A-1002,paid,24000
A-1002,pending,999
A-1003,refunded,100
";

    /// Audits `files` as CSV with grain (order_id, line_no), and inputs.
    fn run(files: &[PathBuf], gates: &[Gate], inputs: &HashMap<String, InputData>) -> AuditReport {
        let grain = strings(&["order_id", "line_no"]);
        let spec = AuditSpec {
            format: Format::Csv,
            grain: &grain,
            gates,
            inputs,
        };
        audit(files, &spec).expect("audits")
    }

    /// Audits one CSV file and returns the outcome of the single gate.
    fn one(text: &str, gate: Gate) -> GateOutcome {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = write(dir.path(), "part-0.csv", text);
        let report = run(&[file], &[gate], &HashMap::new());
        assert_eq!(report.gates.len(), 2, "grain check and the gate");
        report.gates[1].clone()
    }

    fn outcome(
        gate: &str,
        passed: bool,
        expected: &str,
        actual: &str,
        offending: &[&str],
    ) -> GateOutcome {
        GateOutcome {
            gate: gate.to_owned(),
            passed,
            expected: expected.to_owned(),
            actual: actual.to_owned(),
            offending: strings(offending),
        }
    }

    #[test]
    fn describe_names_each_gate() {
        let cases = [
            (
                Gate::RowCount {
                    min: Some(1),
                    max: Some(100_000),
                },
                "row_count(min 1, max 100000)",
            ),
            (
                Gate::RowCount {
                    min: None,
                    max: Some(5),
                },
                "row_count(max 5)",
            ),
            (
                Gate::Unique {
                    columns: strings(&["order_id", "line_no"]),
                },
                "unique(order_id, line_no)",
            ),
            (
                Gate::NotNull {
                    columns: strings(&["status"]),
                },
                "not_null(status)",
            ),
            (
                Gate::AcceptedValues {
                    column: "status".into(),
                    values: strings(&["paid", "pending"]),
                },
                "accepted_values(status in paid, pending)",
            ),
            (
                Gate::Reconcile {
                    column: "gmv_cents".into(),
                    aggregate: Aggregate::Sum,
                    input: "raw_orders".into(),
                    input_column: "amount_cents".into(),
                    filter: vec![("status".into(), "paid".into())],
                },
                "reconcile(sum gmv_cents = sum raw_orders.amount_cents where status = paid)",
            ),
            (
                Gate::Reconcile {
                    column: "id".into(),
                    aggregate: Aggregate::Count,
                    input: "raw".into(),
                    input_column: "id".into(),
                    filter: vec![("a".into(), "1".into()), ("b".into(), "2".into())],
                },
                "reconcile(count id = count raw.id where a = 1 and b = 2)",
            ),
        ];
        for (gate, text) in cases {
            assert_eq!(gate.describe(), text);
        }
    }

    #[test]
    fn gates_deserialize_from_tagged_json() {
        let gate: Gate = serde_json::from_str(
            r#"{"check":"reconcile","column":"c","aggregate":"count","input":"i","input_column":"d","filter":[["s","paid"]]}"#,
        )
        .expect("parses");
        assert_eq!(
            gate,
            Gate::Reconcile {
                column: "c".into(),
                aggregate: Aggregate::Count,
                input: "i".into(),
                input_column: "d".into(),
                filter: vec![("s".into(), "paid".into())],
            }
        );
        let gate: Gate =
            serde_json::from_str(r#"{"check":"row_count","min":1,"max":null}"#).expect("parses");
        assert_eq!(
            gate,
            Gate::RowCount {
                min: Some(1),
                max: None
            }
        );
    }

    #[test]
    fn row_count_passes_and_fails() {
        let gate = Gate::RowCount {
            min: Some(1),
            max: Some(100_000),
        };
        assert_eq!(
            one(ORDERS, gate.clone()),
            outcome(
                "row_count(min 1, max 100000)",
                true,
                "between 1 and 100000 rows",
                "4 rows",
                &[]
            )
        );
        assert_eq!(
            one("order_id,line_no\n", gate),
            outcome(
                "row_count(min 1, max 100000)",
                false,
                "between 1 and 100000 rows",
                "0 rows",
                &[]
            )
        );
        assert_eq!(
            one(
                ORDERS,
                Gate::RowCount {
                    min: None,
                    max: Some(1)
                }
            ),
            outcome("row_count(max 1)", false, "at most 1 row", "4 rows", &[])
        );
    }

    #[test]
    fn unique_passes_and_fails_with_the_later_rows() {
        let gate = Gate::Unique {
            columns: strings(&["order_id", "line_no"]),
        };
        assert_eq!(
            one(ORDERS, gate),
            outcome(
                "unique(order_id, line_no)",
                true,
                "no duplicate (order_id, line_no)",
                "0 duplicate keys",
                &[]
            )
        );
        let gate = Gate::Unique {
            columns: strings(&["order_id"]),
        };
        assert_eq!(
            one(&format!("{ORDERS}A-1001,2,paid,1\n,3,paid,1\n"), gate),
            outcome(
                "unique(order_id)",
                false,
                "no duplicate (order_id)",
                "2 duplicate keys",
                &["line 4: order_id=A-1002", "line 6: order_id=A-1001"]
            )
        );
    }

    #[test]
    fn not_null_passes_and_fails() {
        let gate = Gate::NotNull {
            columns: strings(&["status", "order_id"]),
        };
        assert_eq!(
            one(ORDERS, gate.clone()),
            outcome(
                "not_null(status, order_id)",
                true,
                "no nulls in (status, order_id)",
                "0 null values",
                &[]
            )
        );
        let report = one(&format!("{ORDERS}A-1004,1,,5\n"), gate);
        assert_eq!(
            report,
            outcome(
                "not_null(status, order_id)",
                false,
                "no nulls in (status, order_id)",
                "1 null value",
                &["line 6: status=null"]
            )
        );
        assert_eq!(
            one(
                ORDERS,
                Gate::NotNull {
                    columns: strings(&["gmv_cents", "nope"])
                }
            ),
            outcome(
                "not_null(gmv_cents, nope)",
                false,
                "no nulls in (gmv_cents, nope)",
                "column `nope` is missing",
                &["line 4: gmv_cents=null"]
            )
        );
    }

    #[test]
    fn accepted_values_passes_and_fails() {
        let gate = Gate::AcceptedValues {
            column: "status".into(),
            values: strings(&["paid", "pending", "refunded"]),
        };
        assert_eq!(
            one(ORDERS, gate.clone()),
            outcome(
                "accepted_values(status in paid, pending, refunded)",
                true,
                r#"one of "paid", "pending", "refunded""#,
                "0 rows with values outside the set",
                &[]
            )
        );
        let text =
            format!("{ORDERS}A-1004,1,pendng,1\nA-1005,1,,1\nA-1006,1,PAID,1\nA-1007,1,pendng,1\n");
        assert_eq!(
            one(&text, gate),
            outcome(
                "accepted_values(status in paid, pending, refunded)",
                false,
                r#"one of "paid", "pending", "refunded""#,
                r#"3 rows with values outside the set: "pendng", "PAID""#,
                &[
                    r#"line 6: status="pendng""#,
                    r#"line 8: status="PAID""#,
                    r#"line 9: status="pendng""#
                ]
            )
        );
    }

    #[test]
    fn accepted_values_lists_five_distinct_values_at_most() {
        let gate = Gate::AcceptedValues {
            column: "v".into(),
            values: strings(&["ok"]),
        };
        let text = "order_id,line_no,v\n1,1,a\n2,1,b\n3,1,c\n4,1,d\n5,1,e\n6,1,f\n7,1,ok\n";
        let result = one(text, gate);
        assert_eq!(
            result.actual,
            r#"6 rows with values outside the set: "a", "b", "c", "d", "e", …"#
        );
        assert_eq!(result.offending.len(), 5);
        assert_eq!(result.offending[4], r#"line 6: v="e""#);
    }

    #[test]
    fn missing_gate_column_fails_the_gate() {
        let gate = Gate::AcceptedValues {
            column: "colour".into(),
            values: strings(&["red"]),
        };
        assert_eq!(
            one(ORDERS, gate),
            outcome(
                "accepted_values(colour in red)",
                false,
                r#"one of "red""#,
                "column `colour` is missing",
                &[]
            )
        );
    }

    fn reconcile_gmv(filter: &[(&str, &str)]) -> Gate {
        Gate::Reconcile {
            column: "gmv_cents".into(),
            aggregate: Aggregate::Sum,
            input: "raw_orders".into(),
            input_column: "amount_cents".into(),
            filter: filter
                .iter()
                .map(|(c, v)| ((*c).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn with_raw_orders(dir: &Path, text: &str) -> HashMap<String, InputData> {
        let file = write(dir, "raw.csv", text);
        HashMap::from([(
            "raw_orders".to_owned(),
            InputData {
                format: Format::Csv,
                files: vec![file],
            },
        )])
    }

    #[test]
    fn reconcile_sum_with_filter_is_exact() {
        let dir = tempfile::tempdir().expect("tempdir");
        let inputs = with_raw_orders(dir.path(), RAW_ORDERS);
        let paid_only = write(
            dir.path(),
            "out.csv",
            "order_id,line_no,gmv_cents\nA-1001,1,50000\nA-1002,1,24000\n",
        );
        let report = run(
            &[paid_only],
            &[reconcile_gmv(&[("status", "paid")])],
            &inputs,
        );
        assert_eq!(
            report.gates[1],
            outcome(
                "reconcile(sum gmv_cents = sum raw_orders.amount_cents where status = paid)",
                true,
                "74000",
                "74000",
                &[]
            )
        );
        let short = write(
            dir.path(),
            "short.csv",
            "order_id,line_no,gmv_cents\nA-1001,1,50000\nA-1002,1,23500\n",
        );
        let report = run(&[short], &[reconcile_gmv(&[("status", "paid")])], &inputs);
        assert_eq!(
            report.gates[1],
            outcome(
                "reconcile(sum gmv_cents = sum raw_orders.amount_cents where status = paid)",
                false,
                "74000",
                "73500",
                &[]
            )
        );
    }

    #[test]
    fn reconcile_sums_decimals_exactly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let raw = "order_id,status,amount_cents\na,paid,0.1\nb,paid,0.2\nc,paid,-0.3\nd,paid,12.5\ne,paid,+0.000000001\n";
        let inputs = with_raw_orders(dir.path(), raw);
        let out = write(
            dir.path(),
            "out.csv",
            "order_id,line_no,gmv_cents\na,1,12.500000001\n",
        );
        let report = run(&[out], &[reconcile_gmv(&[])], &inputs);
        assert_eq!(
            report.gates[1],
            outcome(
                "reconcile(sum gmv_cents = sum raw_orders.amount_cents)",
                true,
                "12.500000001",
                "12.500000001",
                &[]
            )
        );
    }

    #[test]
    fn reconcile_reads_inputs_in_their_own_format() {
        let dir = tempfile::tempdir().expect("tempdir");
        let raw = write(
            dir.path(),
            "raw.jsonl",
            concat!(
                "{\"amount\":1.25,\"paid\":true}\n",
                "{\"amount\":2,\"paid\":false}\n",
                "{\"amount\":\"3.5\",\"paid\":true}\n",
                "{\"paid\":true}\n",
            ),
        );
        let inputs = HashMap::from([(
            "raw".to_owned(),
            InputData {
                format: Format::Jsonl,
                files: vec![raw],
            },
        )]);
        let out = write(dir.path(), "out.csv", "order_id,line_no,total\na,1,4.75\n");
        let gate = Gate::Reconcile {
            column: "total".into(),
            aggregate: Aggregate::Sum,
            input: "raw".into(),
            input_column: "amount".into(),
            filter: vec![("paid".into(), "true".into())],
        };
        let report = run(&[out], &[gate], &inputs);
        assert_eq!(
            report.gates[1],
            outcome(
                "reconcile(sum total = sum raw.amount where paid = true)",
                true,
                "4.75",
                "4.75",
                &[]
            )
        );
    }

    #[test]
    fn reconcile_count_counts_non_null_values() {
        let dir = tempfile::tempdir().expect("tempdir");
        let inputs = with_raw_orders(dir.path(), RAW_ORDERS);
        let gate = Gate::Reconcile {
            column: "gmv_cents".into(),
            aggregate: Aggregate::Count,
            input: "raw_orders".into(),
            input_column: "order_id".into(),
            filter: Vec::new(),
        };
        let out = write(dir.path(), "out.csv", ORDERS);
        let report = run(&[out], &[gate], &inputs);
        assert_eq!(
            report.gates[1],
            outcome(
                "reconcile(count gmv_cents = count raw_orders.order_id)",
                false,
                "4",
                "3",
                &[]
            )
        );
    }

    #[test]
    fn reconcile_lists_values_that_are_not_decimals() {
        let dir = tempfile::tempdir().expect("tempdir");
        let raw = "order_id,status,amount_cents\na,paid,1\nb,paid,1e3\nc,paid,0.0000000001\n";
        let inputs = with_raw_orders(dir.path(), raw);
        let out = write(
            dir.path(),
            "out.csv",
            "order_id,line_no,gmv_cents\na,1,1\nb,1, 2\n",
        );
        let report = run(&[out], &[reconcile_gmv(&[])], &inputs);
        assert_eq!(
            report.gates[1],
            outcome(
                "reconcile(sum gmv_cents = sum raw_orders.amount_cents)",
                false,
                "1 (2 values are not decimal numbers)",
                "1 (1 value is not a decimal number)",
                &[
                    r#"line 3: gmv_cents=" 2""#,
                    r#"input raw_orders line 3: amount_cents="1e3""#,
                    r#"input raw_orders line 4: amount_cents="0.0000000001""#,
                ]
            )
        );
    }

    #[test]
    fn reconcile_fails_on_missing_inputs_and_columns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = write(dir.path(), "out.csv", ORDERS);
        let described =
            "reconcile(sum gmv_cents = sum raw_orders.amount_cents where status = paid)";
        let right = "sum raw_orders.amount_cents where status = paid";

        let report = run(
            std::slice::from_ref(&out),
            &[reconcile_gmv(&[("status", "paid")])],
            &HashMap::new(),
        );
        assert_eq!(
            report.gates[1],
            outcome(
                described,
                false,
                right,
                "input `raw_orders` was not provided",
                &[]
            )
        );

        let inputs = with_raw_orders(dir.path(), "order_id,amount_cents\na,1\n");
        let report = run(
            std::slice::from_ref(&out),
            &[reconcile_gmv(&[("status", "paid")])],
            &inputs,
        );
        assert_eq!(
            report.gates[1],
            outcome(
                described,
                false,
                right,
                "column `status` is missing from input `raw_orders`",
                &[]
            )
        );

        let inputs = with_raw_orders(dir.path(), RAW_ORDERS);
        let other = write(dir.path(), "other.csv", "order_id,line_no\na,1\n");
        let report = run(&[other], &[reconcile_gmv(&[("status", "paid")])], &inputs);
        assert_eq!(
            report.gates[1],
            outcome(
                described,
                false,
                "74000",
                "column `gmv_cents` is missing",
                &[]
            )
        );
    }

    #[test]
    fn grain_is_checked_first_even_without_gates() {
        let report = {
            let dir = tempfile::tempdir().expect("tempdir");
            let file = write(dir.path(), "a.csv", ORDERS);
            run(&[file], &[], &HashMap::new())
        };
        assert_eq!(report.rows, 4);
        assert_eq!(
            report.columns,
            ["gmv_cents", "line_no", "order_id", "status"]
        );
        assert_eq!(
            report.gates,
            [outcome(
                "grain unique(order_id, line_no)",
                true,
                "no duplicate or null (order_id, line_no)",
                "0 duplicate keys",
                &[]
            )]
        );
        assert!(report.passed());
        assert_eq!(report.failures().count(), 0);
    }

    #[test]
    fn grain_rejects_duplicates_and_nulls() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = format!("{ORDERS}A-1002,1,paid,7\nA-1005,,paid,1\nA-1002,1,paid,7\n");
        let file = write(dir.path(), "a.csv", &text);
        let report = run(
            &[file],
            &[Gate::RowCount {
                min: Some(1),
                max: None,
            }],
            &HashMap::new(),
        );
        assert_eq!(
            report.gates[0],
            outcome(
                "grain unique(order_id, line_no)",
                false,
                "no duplicate or null (order_id, line_no)",
                "2 duplicate keys, 1 key with nulls",
                &[
                    "line 6: order_id=A-1002, line_no=1",
                    "line 7: order_id=A-1005, line_no=null",
                    "line 8: order_id=A-1002, line_no=1",
                ]
            )
        );
        assert!(!report.passed());
        let failed: Vec<&str> = report.failures().map(|o| o.gate.as_str()).collect();
        assert_eq!(failed, ["grain unique(order_id, line_no)"]);
    }

    #[test]
    fn grain_duplicates_across_files_are_found_with_their_rows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = write(
            dir.path(),
            "part-0.csv",
            "order_id,line_no\nA-1,1\nA-2,1\nA-3,1\n",
        );
        let b = write(
            dir.path(),
            "part-1.csv",
            "line_no,order_id\n1,A-4\n1,A-2\n2,A-3\n",
        );
        let c = write(
            dir.path(),
            "part-2.csv",
            "order_id,line_no\nA-5,1\nA-1,1\nA-2,1\n",
        );
        let report = run(&[a, b, c], &[], &HashMap::new());
        assert_eq!(report.rows, 9);
        assert_eq!(
            report.gates[0],
            outcome(
                "grain unique(order_id, line_no)",
                false,
                "no duplicate or null (order_id, line_no)",
                "3 duplicate keys",
                &[
                    "part-1.csv line 3: order_id=A-2, line_no=1",
                    "part-2.csv line 3: order_id=A-1, line_no=1",
                    "part-2.csv line 4: order_id=A-2, line_no=1",
                ]
            )
        );
    }

    #[test]
    fn grain_column_missing_fails_the_grain_check() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = write(dir.path(), "a.csv", "order_id\nA-1\n");
        let report = run(&[file], &[], &HashMap::new());
        assert_eq!(report.gates[0].actual, "column `line_no` is missing");
        assert!(!report.gates[0].passed);
    }

    #[test]
    fn no_files_is_no_rows_and_no_columns() {
        let report = run(
            &[],
            &[Gate::RowCount {
                min: Some(1),
                max: None,
            }],
            &HashMap::new(),
        );
        assert_eq!(report.rows, 0);
        assert!(report.columns.is_empty());
        assert_eq!(report.gates[0].actual, "column `order_id` is missing");
        assert_eq!(
            report.gates[1],
            outcome("row_count(min 1)", false, "at least 1 row", "0 rows", &[])
        );
    }

    #[test]
    fn jsonl_candidates_run_the_same_gates() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = write(
            dir.path(),
            "a.jsonl",
            "{\"order_id\":\"A-1\",\"line_no\":1,\"paid\":true}\n{\"order_id\":\"A-1\",\"line_no\":1}\n",
        );
        let grain = strings(&["order_id", "line_no"]);
        let gates = [Gate::NotNull {
            columns: strings(&["paid"]),
        }];
        let spec = AuditSpec {
            format: Format::Jsonl,
            grain: &grain,
            gates: &gates,
            inputs: &HashMap::new(),
        };
        let report = audit(&[file], &spec).expect("audits");
        assert_eq!(report.columns, ["line_no", "order_id", "paid"]);
        assert_eq!(
            report.gates[0].offending,
            ["line 2: order_id=A-1, line_no=1"]
        );
        assert_eq!(report.gates[1].offending, ["line 2: paid=null"]);
    }

    #[test]
    fn candidate_lanes_add_up_to_the_sequential_fold() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut text = String::from("order_id,line_no,ref,status\n");
        for i in 0..20_000 {
            let status = if i % 4999 == 0 { "pendng" } else { "paid" };
            let line_no = if i == 15_000 {
                String::new()
            } else {
                (i % 3).to_string()
            };
            text.push_str(&format!(
                "O-{},{line_no},R-{},{status}\n",
                i % 19_997,
                i % 19_999
            ));
        }
        let file = write(dir.path(), "a.csv", &text);
        let grain = strings(&["order_id", "line_no"]);
        let gates = [
            Gate::Unique {
                columns: strings(&["ref"]),
            },
            Gate::NotNull {
                columns: strings(&["line_no"]),
            },
            Gate::Unique {
                columns: strings(&["order_id"]),
            },
            Gate::AcceptedValues {
                column: "status".into(),
                values: strings(&["paid"]),
            },
            Gate::Unique {
                columns: strings(&["status", "ref"]),
            },
        ];
        let make = |columns: &[String]| CandidateFold::new(0, columns, &grain, &gates);
        let (columns, sequential) =
            read::fold_file(&file, Format::Csv, None, false, &make).expect("reads");
        let (_, piped) = read::fold_csv_pipelined(&file, &make).expect("reads");
        assert_eq!(piped.keys.len(), 4, "joined back");
        let files = [file];
        let places = Places::new(&files, Format::Csv);
        let outcomes =
            |fold: &CandidateFold| fold.outcomes(&gates, &columns, &places, &InputSides::new());
        assert_eq!(piped.rows(), 20_000);
        assert_eq!(piped.digest(&columns), sequential.digest(&columns));
        assert_eq!(outcomes(&piped), outcomes(&sequential));
        let summary: Vec<(bool, String)> = outcomes(&piped)
            .into_iter()
            .map(|o| (o.passed, o.actual))
            .collect();
        assert_eq!(
            summary,
            [
                (false, "0 duplicate keys, 1 key with nulls".to_owned()),
                (false, "1 duplicate key".to_owned()),
                (false, "1 null value".to_owned()),
                (false, "3 duplicate keys".to_owned()),
                (
                    false,
                    r#"5 rows with values outside the set: "pendng""#.to_owned()
                ),
                (true, "0 duplicate keys".to_owned()),
            ]
        );
    }

    #[test]
    fn key_set_grows_and_finds_duplicates() {
        let mut set = KeySet::default();
        // Spread like SHA-256 prefixes, plus colliding low bits and zero.
        let hashes: Vec<u128> = (1..=5000u128)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
            .chain([0, 1 << 64, 2 << 64, 3 << 64])
            .collect();
        for &hash in &hashes {
            assert!(set.insert(hash), "{hash:#x} is new");
        }
        for &hash in &hashes {
            assert!(!set.insert(hash), "{hash:#x} is a duplicate");
        }
        assert_eq!(set.len(), hashes.len());
        assert!(set.slots.len() * 3 >= set.stored * 4);
        let mut back: Vec<u128> = set.into_iter().collect();
        let mut expected = hashes.clone();
        back.sort_unstable();
        expected.sort_unstable();
        assert_eq!(back, expected);

        let mut set = KeySet::default();
        set.reserve(1000);
        let slots = set.slots.len();
        for hash in 1..=1000u128 {
            set.insert(hash << 70);
        }
        assert_eq!(set.slots.len(), slots, "reserved room is enough");
    }

    #[test]
    fn decimals_parse_and_render() {
        let cases: &[(&str, Option<i128>)] = &[
            ("0", Some(0)),
            ("74000", Some(74_000 * SCALE)),
            ("-12.5", Some(-12_500_000_000)),
            ("+0.000000001", Some(1)),
            ("007.10", Some(7_100_000_000)),
            ("1.", None),
            (".5", None),
            ("1.0000000001", None),
            ("1e3", None),
            (" 1", None),
            ("-", None),
            ("", None),
            ("1,5", None),
            ("99999999999999999999999999999999999999", None),
        ];
        for (text, units) in cases {
            assert_eq!(parse_decimal(text.as_bytes()), *units, "{text:?}");
        }
        assert_eq!(render_decimal(74_000 * SCALE), "74000");
        assert_eq!(render_decimal(12_500_000_000), "12.5");
        assert_eq!(render_decimal(-1), "-0.000000001");
        assert_eq!(render_decimal(0), "0");
        assert_eq!(
            render_decimal(i128::MIN),
            "-170141183460469231731687303715.884105728"
        );
    }
}
