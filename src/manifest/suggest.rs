//! "Did you mean …?" for misspelt names.

/// The closest of `known` to `name`, if within edit distance 2 (or 1 for
/// short names, where 2 edits make anything look alike).
pub(crate) fn closest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = if name.chars().count() <= 3 { 1 } else { 2 };
    known
        .into_iter()
        .map(|k| (edit_distance(name, k), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Help text for an unknown `what` named `name`, among `known`.
pub(crate) fn unknown_help<'a>(
    what: &str,
    name: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> String {
    let known: Vec<&str> = known.into_iter().collect();
    if let Some(best) = closest(name, known.iter().copied()) {
        return format!("did you mean `{best}`?");
    }
    if known.is_empty() {
        return format!("no {what} is declared; declare it or remove the reference");
    }
    let list = known
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("declared {what}s: {list}")
}

/// Levenshtein distance over chars.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// `a`, `b` and `c` → "`a`, `b`, `c`".
pub fn ticked<S: AsRef<str>>(names: &[S]) -> String {
    names
        .iter()
        .map(|n| format!("`{}`", n.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_names_only() {
        let known = ["extract", "transform", "load"];
        assert_eq!(closest("transfrom", known), Some("transform"));
        assert_eq!(closest("lod", known), Some("load"));
        assert_eq!(closest("publish", known), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
