//! The checks a candidate's rows are folded into: key uniqueness, nulls,
//! accepted values, and the candidate fold that runs them all with the row
//! count and the digest.

use std::path::PathBuf;

use super::keys::{encode_key, key_hash, print_of, xxh3, KeyHash, KeyPrints, StoredKeys};
use super::reconcile::{reconcile_outcome, Aggregator, InputSides};
use super::{
    missing, out_of_step, position, text, Gate, GateOutcome, Offenses, Places, MAX_DISTINCT,
};
use crate::audit::digest::{Digest, RowDigest};
use crate::audit::read::{self, Row, RowFold};
use crate::audit::words::count;
use crate::audit::{AuditError, Format};

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
/// Keeps an 8-byte fingerprint of each key (see [`KeyPrints`]). Repeated
/// fingerprints are verified at the end by reading the rows again and
/// comparing the keys themselves, which also finds the rows to report.
/// Rows with a null key value are not hashed.
#[derive(Debug)]
pub(super) struct KeyCheck {
    file: usize,
    names: Vec<String>,
    /// Positions of the key columns; `None` when one is missing.
    columns: Option<Vec<usize>>,
    /// The grain rejects null key values; `unique` skips such rows.
    reject_nulls: bool,
    hash: KeyHash,
    prints: KeyPrints,
    duplicates: u64,
    null_keys: u64,
    offenses: Offenses,
    buf: Vec<u8>,
}

impl KeyCheck {
    fn new(file: usize, columns: &[String], names: &[String], reject_nulls: bool) -> Self {
        Self {
            file,
            names: names.to_vec(),
            columns: names.iter().map(|name| position(columns, name)).collect(),
            reject_nulls,
            hash: xxh3,
            prints: KeyPrints::default(),
            duplicates: 0,
            null_keys: 0,
            offenses: Offenses::default(),
            buf: Vec::new(),
        }
    }

    fn row(&mut self, row: &Row<'_>) {
        let Some(columns) = &self.columns else {
            return;
        };
        match key_hash(self.hash, columns, row, &mut self.buf) {
            Some(hash) => self.prints.push(hash),
            None if self.reject_nulls => {
                self.null_keys += 1;
                self.offenses.push(self.file, row.line, || {
                    render_key(&self.names, columns, row)
                });
            }
            None => {}
        }
    }

    /// Makes room for about `rows` keys at once.
    fn expect_rows(&mut self, rows: u64) {
        if self.columns.is_some() {
            self.prints
                .reserve(usize::try_from(rows).unwrap_or(usize::MAX).min(1 << 40));
        }
    }

    /// Merges the check of the next file, `later`, into this one (which covers
    /// all earlier files).
    fn merge(&mut self, later: Self) {
        self.duplicates += later.duplicates;
        self.null_keys += later.null_keys;
        self.offenses.merge(later.offenses);
        // Append the smaller to the larger: one big file among small ones
        // is not copied.
        let earlier = std::mem::take(&mut self.prints);
        let (mut big, small) = if earlier.len() >= later.prints.len() {
            (earlier, later.prints)
        } else {
            (later.prints, earlier)
        };
        big.append(small);
        self.prints = big;
    }

    /// Finds the repeated fingerprints and, if there are any, reads the
    /// files again in order to count the keys that really repeat (the first
    /// row of a key is its original, every later one a duplicate) and to
    /// list their rows.
    fn locate_duplicates(&mut self, files: &[PathBuf], format: Format) -> Result<(), AuditError> {
        let prints = std::mem::take(&mut self.prints);
        if self.columns.is_none() || prints.len() < 2 {
            return Ok(());
        }
        let mut prints = prints;
        let repeats = prints.repeats();
        drop(prints);
        self.duplicates += repeats.unverified;
        if repeats.suspects.is_empty() {
            return Ok(());
        }
        let mut state = Verified {
            keys: repeats
                .suspects
                .into_iter()
                .map(|print| (print, Vec::new()))
                .collect(),
            duplicates: 0,
            offenses: Offenses::default(),
        };
        for (file, path) in files.iter().enumerate() {
            let template = &state;
            let (_, verify) = read::fold_file(path, format, None, false, &|file_columns| Verify {
                file,
                names: &self.names,
                // Resolved again: a JSON Lines file alone may have fewer keys.
                columns: self
                    .names
                    .iter()
                    .map(|n| position(file_columns, n))
                    .collect(),
                hash: self.hash,
                // A fresh copy per pass: a JSON Lines file may be read twice.
                state: template.clone(),
                buf: Vec::new(),
            })?;
            state = verify.state;
        }
        self.duplicates += state.duplicates;
        self.offenses.merge(state.offenses);
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
            let mut actual = count(self.duplicates, "duplicate key", "duplicate keys");
            if self.null_keys > 0 {
                actual.push_str(&format!(
                    ", {} with nulls",
                    count(self.null_keys, "key", "keys")
                ));
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

/// What the verifying read has found so far, carried from file to file.
#[derive(Debug, Clone)]
struct Verified {
    /// Per suspect print, the distinct keys seen with it.
    keys: StoredKeys,
    duplicates: u64,
    offenses: Offenses,
}

/// Compares the keys of rows whose print is a suspect with the keys seen
/// before with that print: an equal key is a duplicate, another key is a
/// hash collision and is stored in turn.
struct Verify<'n> {
    file: usize,
    names: &'n [String],
    /// `None` when the file lacks a key column, so none of its rows has a key.
    columns: Option<Vec<usize>>,
    hash: KeyHash,
    state: Verified,
    buf: Vec<u8>,
}

impl RowFold for Verify<'_> {
    fn row(&mut self, row: &Row<'_>) {
        let Some(columns) = &self.columns else {
            return;
        };
        let Some(hash) = key_hash(self.hash, columns, row, &mut self.buf) else {
            return;
        };
        let Some(stored) = self.state.keys.get_mut(&print_of(hash)) else {
            return;
        };
        if encode_key(columns, row, &mut self.buf).is_none() {
            return;
        }
        if stored.contains(&self.buf) {
            self.state.duplicates += 1;
            let names = self.names;
            self.state
                .offenses
                .push(self.file, row.line, || render_key(names, columns, row));
        } else {
            stored.push(self.buf.clone());
        }
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
        let rows = count(self.outside, "row", "rows");
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

/// The most lanes a candidate fold splits into.
const MAX_SHARES: usize = 4;

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
    /// The rows this fold digests: those whose line is `share.0` modulo
    /// `share.1` (all of them unless lanes were split off).
    share: (u64, u64),
    /// The share of the next lane split off.
    next_share: u64,
    /// The grain check, then one per `unique` gate.
    pub(super) keys: Vec<KeyCheck>,
    checks: Vec<Check>,
    /// Set in a lane split off: it digests its share of the rows and runs
    /// the key checks it took, nothing else.
    lane: bool,
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
            share: (0, 1),
            next_share: 1,
            keys,
            checks,
            lane: false,
        }
    }

    /// The same fold with every key check hashing keys with `hash`: lets
    /// tests force key hash collisions.
    #[cfg(test)]
    pub(crate) fn with_key_hash(mut self, hash: KeyHash) -> Self {
        for key in &mut self.keys {
            key.hash = hash;
        }
        self
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
            key.locate_duplicates(files, format)?;
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
                        actual: problem
                            .unwrap_or_else(|| count(not_null.nulls, "null value", "null values")),
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
    const PARTS: bool = true;

    fn finish(&mut self) {
        self.digest.release();
    }

    fn append(&mut self, later: Self) {
        self.merge(later);
    }

    fn shift_lines(&mut self, lines: u64) {
        for key in &mut self.keys {
            key.offenses.shift(lines);
        }
        for check in &mut self.checks {
            match check {
                Check::NotNull(not_null) => not_null.offenses.shift(lines),
                Check::Accepted(accepted) => accepted.offenses.shift(lines),
                Check::Reconcile(output) => output.shift_lines(lines),
                Check::RowCount | Check::Unique(_) => {}
            }
        }
    }

    fn split(&mut self) -> Option<Self> {
        self.split_lane()
    }

    fn join(&mut self, lane: Self) {
        self.digest.merge(&lane.digest);
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
        let (share, shares) = self.share;
        if row.line % shares == share {
            self.digest.add(row);
        }
        if self.lane {
            return;
        }
        self.rows += 1;
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
    /// Splits off one lane per core (at most [`MAX_SHARES`] in all). The
    /// digest, SHA-256 of every row, is the largest cost and rows add up in
    /// any order, so each lane digests its share of the rows (by line);
    /// the key checks are dealt out to the lanes, taken from the back so
    /// that joining the lanes last split first rebuilds `keys` in order.
    fn split_lane(&mut self) -> Option<Self> {
        if self.lane {
            return None;
        }
        if self.share.1 == 1 {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            self.share.1 = cores.clamp(1, MAX_SHARES) as u64;
            self.next_share = 1;
        }
        let (shares, share) = (self.share.1, self.next_share);
        if share >= shares {
            return None;
        }
        self.next_share += 1;
        // Lanes still to make, counting this one, and the main fold.
        let ways = usize::try_from(shares - share).unwrap_or(1) + 1;
        let take = self.keys.len().div_ceil(ways);
        let keys = self.keys.split_off(self.keys.len() - take);
        Some(Self {
            rows: 0,
            digest: self.digest.fresh(),
            share: (share, shares),
            next_share: shares,
            keys,
            checks: Vec::new(),
            lane: true,
        })
    }
}

fn row_count_outcome(gate: &Gate, min: Option<u64>, max: Option<u64>, rows: u64) -> GateOutcome {
    let expected = match (min, max) {
        (Some(min), Some(max)) => format!("between {min} and {max} rows"),
        (Some(min), None) => format!("at least {}", count(min, "row", "rows")),
        (None, Some(max)) => format!("at most {}", count(max, "row", "rows")),
        (None, None) => "any number of rows".to_owned(),
    };
    GateOutcome {
        gate: gate.describe(),
        passed: min.is_none_or(|min| rows >= min) && max.is_none_or(|max| rows <= max),
        expected,
        actual: count(rows, "row", "rows"),
        offending: Vec::new(),
    }
}
