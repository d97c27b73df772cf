//! How commands print values: tables, digests, timestamps and sizes.

pub(crate) use crate::audit::words::plural;

/// A table as every command prints one: a lowercase header, each column as
/// wide as its widest cell, the `numeric` columns right-aligned and the
/// others left-aligned, two spaces between columns, no trailing spaces.
pub(crate) fn aligned(header: &[&str], rows: &[Vec<String>], numeric: &[usize]) -> Vec<String> {
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .chain([header[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (c, (cell, w)) in cells.zip(&widths).enumerate() {
            if numeric.contains(&c) {
                out.push_str(&format!("{cell:>w$}  "));
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.trim_end().to_string()
    };
    std::iter::once(line(&mut header.iter().copied()))
        .chain(rows.iter().map(|r| line(&mut r.iter().map(String::as_str))))
        .collect()
}

/// A digest as tables show it: `sha256:` and 12 hex digits, then `…`.
pub(crate) fn short_digest(digest: &str) -> String {
    if digest.len() <= 7 + 12 {
        return digest.to_string();
    }
    digest.chars().take(7 + 12).collect::<String>() + "…"
}

/// A timestamp at one width: UTC to the millisecond
/// (`2026-11-30T22:56:12.120Z`), whatever precision it was written with.
pub(crate) fn fixed_ts(ts: &str) -> String {
    ts.parse::<jiff::Timestamp>().map_or_else(
        |_| ts.to_string(),
        |t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
    )
}

/// A size as people read it: `512 B`, `1.2 KiB`, `3.4 MiB`, `1.0 GiB`.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
