//! The rows a rerun and its publication disagree on, as a person reads them.

use std::collections::HashMap;
use std::path::PathBuf;

use super::error::{audit, VerifyError};
use crate::audit::{self, CanonicalRow, Format};

/// How many rows only on one side a report lists.
const MAX_DIFFERENCES: usize = 5;

/// Up to [`MAX_DIFFERENCES`] rows present on one side only, alternating
/// sides, with columns aligned by name (grain columns first).
pub(super) fn differences(
    published: &[PathBuf],
    rerun: &[PathBuf],
    format: Format,
    grain: &[String],
) -> Result<Vec<String>, VerifyError> {
    let (p_columns, p_rows) =
        audit::read_rows(published, format).map_err(audit("published generation"))?;
    let (r_columns, r_rows) = audit::read_rows(rerun, format).map_err(audit("rerun"))?;
    let mut out = Vec::new();
    if p_columns != r_columns {
        out.push(format!(
            "columns differ: published ({}), rerun ({})",
            p_columns.join(", "),
            r_columns.join(", ")
        ));
    }
    // Grain columns first (as declared), then the rest by name.
    let mut columns: Vec<String> = grain
        .iter()
        .filter(|g| p_columns.contains(g) || r_columns.contains(g))
        .cloned()
        .collect();
    let mut rest: Vec<&String> = p_columns
        .iter()
        .chain(&r_columns)
        .filter(|c| !grain.contains(c))
        .collect();
    rest.sort();
    rest.dedup();
    columns.extend(rest.into_iter().cloned());
    let p_rows = align(&p_columns, p_rows, &columns);
    let r_rows = align(&r_columns, r_rows, &columns);
    let only_p = one_sided(&p_rows, &r_rows);
    let only_r = one_sided(&r_rows, &p_rows);
    let mut p = only_p.into_iter();
    let mut r = only_r.into_iter();
    let mut listed = 0;
    while listed < MAX_DIFFERENCES {
        let (a, b) = (p.next(), r.next());
        if a.is_none() && b.is_none() {
            break;
        }
        for (side, row) in [("published", a), ("rerun", b)] {
            if let Some(row) = row {
                if listed < MAX_DIFFERENCES {
                    out.push(format!("only in {side}: {}", render_row(&columns, row)));
                    listed += 1;
                }
            }
        }
    }
    Ok(out)
}

/// Rows reordered to `columns` (a column the side lacks is null).
fn align(have: &[String], rows: Vec<CanonicalRow>, columns: &[String]) -> Vec<CanonicalRow> {
    let index: Vec<Option<usize>> = columns
        .iter()
        .map(|c| have.iter().position(|h| h == c))
        .collect();
    rows.into_iter()
        .map(|row| {
            index
                .iter()
                .map(|i| i.and_then(|i| row.get(i).cloned().flatten()))
                .collect()
        })
        .collect()
}

/// The rows of `side` that `other` does not have, counting duplicates, in
/// `side`'s order.
fn one_sided<'a>(side: &'a [CanonicalRow], other: &[CanonicalRow]) -> Vec<&'a CanonicalRow> {
    let mut counts: HashMap<&CanonicalRow, usize> = HashMap::new();
    for row in other {
        *counts.entry(row).or_default() += 1;
    }
    side.iter()
        .filter(|row| match counts.get_mut(row) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .collect()
}

/// `order_id=A-1, line_no=1, qty=2`; a null is `null`.
fn render_row(columns: &[String], row: &CanonicalRow) -> String {
    columns
        .iter()
        .zip(row)
        .map(|(c, v)| format!("{c}={}", v.as_deref().unwrap_or("null")))
        .collect::<Vec<_>>()
        .join(", ")
}
