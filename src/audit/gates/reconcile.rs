//! Reconcile gates: a sum or count over the candidate's column against the
//! same aggregate over an input, read in its own format.

use std::collections::{BTreeMap, HashMap};

use super::decimal::{parse_decimal, render_decimal};
use super::out_of_step;
use super::{
    missing, position, text, unit, Aggregate, Gate, GateOutcome, Offenses, Places, MAX_OFFENDING,
};
use crate::audit::read::{self, Row, RowFold};
use crate::audit::{AuditError, InputData};

/// A sum or count of one column over the rows matching a filter.
#[derive(Debug)]
pub(super) struct Aggregator {
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
    /// See [`Offenses::shift`].
    pub(super) fn shift_lines(&mut self, lines: u64) {
        self.offenses.shift(lines);
    }

    pub(super) fn new(
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

    pub(super) fn row(&mut self, row: &Row<'_>) {
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

    pub(super) fn merge(&mut self, later: Self) {
        self.count += later.count;
        self.sum = self.sum.zip(later.sum).and_then(|(a, b)| a.checked_add(b));
        self.bad += later.bad;
        self.offenses.merge(later.offenses);
    }

    /// Comparable result: `None` if it cannot be trusted.
    pub(super) fn value(&self) -> Option<String> {
        if self.bad > 0 {
            return None;
        }
        match self.aggregate {
            Aggregate::Count => Some(self.count.to_string()),
            Aggregate::Sum => self.sum.map(render_decimal),
        }
    }

    /// The result as shown, with what went wrong.
    pub(super) fn shown(&self) -> String {
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
    const PARTS: bool = true;

    fn append(&mut self, later: Self) {
        for (aggregator, later) in self.0.iter_mut().zip(later.0) {
            aggregator.merge(later);
        }
    }

    fn shift_lines(&mut self, lines: u64) {
        for aggregator in &mut self.0 {
            aggregator.shift_lines(lines);
        }
    }

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
    let (columns, merged) = read::fold_files(&data.files, data.format, false, &make)?;
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

pub(super) fn reconcile_outcome(
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
    use super::*;
    use crate::audit::Format;

    // An input large enough to be read in ranges names its offending rows
    // by their lines in the file, as when read whole.
    #[test]
    fn an_input_read_in_ranges_names_offending_rows_by_their_file_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut text = String::from("amount,kind\n");
        for i in 0..20_000 {
            let amount = if i % 6_000 == 5_999 {
                "n/a".to_owned()
            } else {
                i.to_string()
            };
            text.push_str(&format!("{amount},k{i}\n"));
        }
        let file = dir.path().join("input.csv");
        std::fs::write(&file, text).expect("write");
        let make = |columns: &[String]| {
            InputFold(vec![Aggregator::new(
                0,
                columns,
                "amount",
                Aggregate::Sum,
                &[],
            )])
        };
        let lines = |fold: &InputFold| -> Vec<u64> {
            fold.0
                .iter()
                .flat_map(|a| a.offenses.0.iter().map(|o| o.line))
                .collect()
        };
        let (_, whole) = read::fold_file(&file, Format::Csv, None, false, &make).expect("reads");
        assert_eq!(lines(&whole), [6_001, 12_001, 18_001]);
        let (_, ranged) = read::fold_csv_in_ranges(&file, 5, &make).expect("reads");
        let (ranged, _) = ranged.expect("cut");
        assert_eq!(lines(&ranged), lines(&whole));
        assert_eq!(ranged.0[0].bad, 3);
    }
}
