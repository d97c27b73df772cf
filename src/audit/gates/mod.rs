//! Quality gates: what they check, how they fold over a candidate's rows, and
//! the outcome each one reports.
//!
//! Every gate keeps a small accumulator per file; accumulators of the files
//! are merged in file order. Offending rows are rendered only when kept (at
//! most [`MAX_OFFENDING`] per gate), so passing data costs no allocation.
//!
//! The module splits along what a gate needs: the vocabulary and outcome
//! reporting here, the uniqueness checks' key fingerprints in [`keys`],
//! exact decimal arithmetic in [`decimal`], the per-row checks in
//! [`checks`], and the reading of a reconcile gate's input in [`reconcile`].

mod checks;
mod decimal;
mod keys;
mod reconcile;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Format;

pub(crate) use checks::CandidateFold;
pub(crate) use reconcile::read_inputs;

/// How many offending rows or keys an outcome lists.
pub(super) const MAX_OFFENDING: usize = 5;
/// How many distinct unaccepted values an outcome names.
pub(super) const MAX_DISTINCT: usize = 5;

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

/// The kind of a [`Gate`], by the name a manifest's `check` and a stored
/// gate's `"check"` give it (`row_count`, `unique`, …): the same text both
/// ways, so records written before the kind had a type read as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateCheck {
    /// [`Gate::RowCount`].
    RowCount,
    /// [`Gate::Unique`].
    Unique,
    /// [`Gate::NotNull`].
    NotNull,
    /// [`Gate::AcceptedValues`].
    AcceptedValues,
    /// [`Gate::Reconcile`].
    Reconcile,
}

impl GateCheck {
    /// Every check, in the order docs/guides/gates.md lists them.
    pub const ALL: [GateCheck; 5] = [
        Self::RowCount,
        Self::Unique,
        Self::NotNull,
        Self::AcceptedValues,
        Self::Reconcile,
    ];

    /// Its name in a manifest and in a stored gate.
    pub fn name(self) -> &'static str {
        match self {
            Self::RowCount => "row_count",
            Self::Unique => "unique",
            Self::NotNull => "not_null",
            Self::AcceptedValues => "accepted_values",
            Self::Reconcile => "reconcile",
        }
    }

    /// The check of that name, if there is one.
    pub fn from_name(name: &str) -> Option<GateCheck> {
        Self::ALL.into_iter().find(|check| check.name() == name)
    }
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
    /// Its kind.
    pub fn check(&self) -> GateCheck {
        match self {
            Self::RowCount { .. } => GateCheck::RowCount,
            Self::Unique { .. } => GateCheck::Unique,
            Self::NotNull { .. } => GateCheck::NotNull,
            Self::AcceptedValues { .. } => GateCheck::AcceptedValues,
            Self::Reconcile { .. } => GateCheck::Reconcile,
        }
    }

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
pub(super) struct Offense {
    file: usize,
    line: u64,
    detail: String,
}

/// The first offending rows of a gate, in (file, line) order.
#[derive(Debug, Default, Clone)]
pub(super) struct Offenses(pub(super) Vec<Offense>);

impl Offenses {
    pub(super) fn wants_more(&self) -> bool {
        self.0.len() < MAX_OFFENDING
    }

    /// Keeps the row if it is among the first rows seen so far; `detail` is
    /// only rendered then.
    pub(super) fn push(&mut self, file: usize, line: u64, detail: impl FnOnce() -> String) {
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

    /// Moves every row kept `lines` lines down the file: rows read from a
    /// range before the lines in front of it were counted.
    pub(super) fn shift(&mut self, lines: u64) {
        for offense in &mut self.0 {
            offense.line += lines;
        }
    }

    pub(super) fn merge(&mut self, other: Self) {
        self.0.extend(other.0);
        self.0.sort();
        self.0.truncate(MAX_OFFENDING);
    }

    pub(super) fn render(&self, places: &Places<'_>) -> Vec<String> {
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
    pub(super) files: &'a [PathBuf],
    /// Put in front of every location, e.g. naming an input.
    pub(super) prefix: String,
    /// What a location counts: `line` (CSV, JSON Lines) or `row` (Parquet).
    pub(super) unit: &'static str,
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
pub(super) fn unit(format: Format) -> &'static str {
    match format {
        Format::Csv | Format::Jsonl => "line",
        Format::Parquet => "row",
    }
}

pub(super) fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// A value as readable text.
pub(super) fn text(value: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(value)
}

/// The column's position among the sorted `columns`.
pub(super) fn position(columns: &[String], name: &str) -> Option<usize> {
    columns.binary_search_by(|c| c.as_str().cmp(name)).ok()
}

/// "column `x` is missing" for the first of `wanted` not in `columns`.
pub(super) fn missing<'w>(
    columns: &[String],
    wanted: impl IntoIterator<Item = &'w String>,
) -> Option<String> {
    wanted
        .into_iter()
        .find(|name| position(columns, name).is_none())
        .map(|name| format!("column `{name}` is missing"))
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use std::collections::HashMap;

    use super::checks::*;
    use super::decimal::*;
    use super::keys::*;
    use super::reconcile::*;
    use super::*;
    use crate::audit::read;
    use crate::audit::{audit, AuditReport, AuditSpec, InputData};

    /// Gates as records written before a gate's check had a type store
    /// them: each still reads, as the check it names, and is written back
    /// byte for byte.
    #[test]
    fn a_stored_gate_reads_as_its_check_and_writes_back_as_before() {
        let stored = [
            (
                r#"{"check":"row_count","min":1,"max":null}"#,
                GateCheck::RowCount,
            ),
            (
                r#"{"check":"unique","columns":["order_id","line_no"]}"#,
                GateCheck::Unique,
            ),
            (
                r#"{"check":"not_null","columns":["a"]}"#,
                GateCheck::NotNull,
            ),
            (
                r#"{"check":"accepted_values","column":"status","values":["paid","open"]}"#,
                GateCheck::AcceptedValues,
            ),
            (
                r#"{"check":"reconcile","column":"c","aggregate":"count","input":"i","input_column":"d","filter":[["s","paid"]]}"#,
                GateCheck::Reconcile,
            ),
        ];
        for (json, check) in stored {
            let gate: Gate = serde_json::from_str(json).expect(json);
            assert_eq!(gate.check(), check, "{json}");
            assert_eq!(serde_json::to_string(&gate).expect("writes"), json);
            assert_eq!(
                serde_json::to_string(&check).expect("writes"),
                format!("{:?}", check.name())
            );
            assert_eq!(GateCheck::from_name(check.name()), Some(check));
        }
        assert_eq!(GateCheck::from_name("row_cout"), None);
    }

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
        let (columns, mut sequential) =
            read::fold_file(&file, Format::Csv, None, false, &make).expect("reads");
        let (_, mut piped) = read::fold_csv_pipelined(&file, &make).expect("reads");
        assert_eq!(piped.keys.len(), 4, "joined back");
        // In byte ranges, each folded whole and appended: the duplicates
        // of the first rows are in the last range.
        let (_, ranged) = read::fold_csv_in_ranges(&file, 5, &make).expect("reads");
        let (mut ranged, _) = ranged.expect("cut");
        let files = [file];
        for fold in [&mut sequential, &mut piped, &mut ranged] {
            fold.locate_duplicates(&files, Format::Csv)
                .expect("rereads");
        }
        let places = Places::new(&files, Format::Csv);
        let outcomes =
            |fold: &CandidateFold| fold.outcomes(&gates, &columns, &places, &InputSides::new());
        assert_eq!(piped.rows(), 20_000);
        assert_eq!(ranged.rows(), 20_000);
        assert_eq!(piped.digest(&columns), sequential.digest(&columns));
        assert_eq!(ranged.digest(&columns), sequential.digest(&columns));
        assert_eq!(outcomes(&piped), outcomes(&sequential));
        assert_eq!(outcomes(&ranged), outcomes(&sequential));
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

    // Key fingerprints are kept by bucket and sorted once; only
    // repeated prints are suspects, the rest are decided without a reread.
    #[test]
    fn key_prints_report_only_repeated_prints() {
        let mut prints = KeyPrints::default();
        let spread = |i: u128| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
        for i in 1..=50_000u128 {
            prints.push(spread(i));
        }
        // Same fingerprint (low 64 bits) in another bucket: not a repeat.
        prints.push(spread(7) ^ (1 << 127));
        // A real repeat, three times over, and one twice.
        for _ in 0..3 {
            prints.push(spread(11));
        }
        prints.push(spread(12));
        let mut other = KeyPrints::default();
        other.push(spread(40_000));
        // A set appended to a set appended: its prints are found too.
        let mut third = KeyPrints::default();
        third.push(spread(45_000));
        third.push(spread(7) ^ (1 << 126));
        other.append(third);
        prints.append(other);
        assert_eq!(prints.len(), 50_008);
        let repeats = prints.repeats();
        let mut suspects: Vec<u128> = repeats.suspects.into_iter().collect();
        suspects.sort_unstable();
        let mut expected: Vec<u128> = [11, 12, 40_000, 45_000]
            .map(|i| print_of(spread(i)))
            .to_vec();
        expected.sort_unstable();
        assert_eq!(suspects, expected);
        assert_eq!(repeats.unverified, 0);
    }

    // Past the suspects verified against their keys, repeats are
    // still counted, so the count stays exact for real duplicates.
    #[test]
    fn duplicates_beyond_the_verified_suspects_are_counted() {
        let keys = MAX_SUSPECTS + 1000;
        let mut text = String::from("id\n");
        for round in 0..2 {
            for key in 0..keys {
                text.push_str(&format!("k{key}\n"));
            }
            if round == 0 {
                text.push_str("k0\n");
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let file = write(dir.path(), "a.csv", &text);
        let grain = strings(&["id"]);
        let spec = AuditSpec {
            format: Format::Csv,
            grain: &grain,
            gates: &[],
            inputs: &HashMap::new(),
        };
        let report = audit(&[file], &spec).expect("audits");
        assert_eq!(report.rows, 2 * keys as u64 + 1);
        assert_eq!(
            report.gates[0].actual,
            format!("{} duplicate keys", keys + 1)
        );
        assert_eq!(report.gates[0].offending.len(), MAX_OFFENDING);
    }

    /// Audits `text` as one CSV file with grain `id`, every key hashing to
    /// the same value.
    fn audit_colliding(text: &str) -> GateOutcome {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = write(dir.path(), "a.csv", text);
        let grain = strings(&["id"]);
        let make = |columns: &[String]| {
            CandidateFold::new(0, columns, &grain, &[]).with_key_hash(|_| 0x5eed)
        };
        let (columns, mut fold) =
            read::fold_file(&file, Format::Csv, None, false, &make).expect("reads");
        let files = [file];
        fold.locate_duplicates(&files, Format::Csv)
            .expect("rereads");
        let places = Places::new(&files, Format::Csv);
        fold.outcomes(&[], &columns, &places, &InputSides::new())
            .remove(0)
    }

    // A key hash collision is verified against the keys: distinct
    // keys with one hash are not duplicates, an equal key still is.
    #[test]
    fn forced_key_hash_collision_is_no_duplicate_but_a_real_one_is() {
        let distinct = audit_colliding("id,v\na,1\nb,2\nc,3\n");
        assert!(distinct.passed, "{distinct:?}");
        assert_eq!(distinct.actual, "0 duplicate keys");
        assert!(distinct.offending.is_empty());

        let repeated = audit_colliding("id,v\na,1\nb,2\nc,3\nb,4\n\na,5\n");
        assert!(!repeated.passed);
        assert_eq!(repeated.actual, "2 duplicate keys");
        assert_eq!(repeated.offending, ["line 5: id=b", "line 7: id=a"]);
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
