//! The checks a candidate's rows are folded into: key uniqueness, nulls,
//! accepted values, and the candidate fold that runs them all with the row
//! count and the digest.

use std::path::PathBuf;

use super::keys::{key_hash, FewKeys, KeySet, KEY_DOMAIN};
use super::reconcile::{reconcile_outcome, Aggregator, InputSides};
use super::{
    missing, plural, position, text, Gate, GateOutcome, Offenses, Places, MAX_DISTINCT,
    MAX_OFFENDING,
};
use crate::audit::digest::{Digest, RowDigest};
use crate::audit::read::{self, Row, RowFold};
use crate::audit::{AuditError, Format};

/// Per file, how many keys duplicated from earlier files are remembered so
/// their rows can be found again; beyond this only the count is exact.
const MAX_CROSS: usize = 1 << 16;

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
pub(super) struct KeyCheck {
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
    pub(super) keys: Vec<KeyCheck>,
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
pub(super) fn out_of_step(gate: &Gate) -> GateOutcome {
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
