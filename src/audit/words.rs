//! Counted nouns in what weir says ("1 row", "3 instances"): the one helper
//! every layer's messages use, here in the lowest layer that words a count
//! (the gates' findings); `plan` and `cli` use it too.

use std::fmt::Display;

/// `one` when `n` is 1, else `many`: `plural(n, "retry", "retries")`,
/// `plural(n, "its", "their")`.
pub fn plural<N: PartialEq + From<u8> + Copy>(
    n: N,
    one: &'static str,
    many: &'static str,
) -> &'static str {
    if n == N::from(1) {
        one
    } else {
        many
    }
}

/// `n` and its noun: `count(3, "row", "rows")` is `3 rows`.
pub fn count<N: PartialEq + From<u8> + Display + Copy>(
    n: N,
    one: &'static str,
    many: &'static str,
) -> String {
    format!("{n} {}", plural(n, one, many))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1u64, "row", "rows"), "1 row");
        assert_eq!(count(0usize, "row", "rows"), "0 rows");
        assert_eq!(count(2u32, "retry", "retries"), "2 retries");
        assert_eq!(plural(1usize, "its", "their"), "its");
    }
}
