//! The two ordered numbers of the store: fencing tokens and generations.
//!
//! Both are plain `u64` newtypes with `Ord` and `next()` but no arithmetic,
//! so a token can't be mixed up with a generation or bumped by anything but
//! one. Their key names are zero-padded to 20 digits (the width of
//! `u64::MAX`) so that a sorted listing is also numeric order, which is what
//! lets `latest()` read only the last name.

use std::fmt;

/// Width of a zero-padded `u64` key name.
const KEY_DIGITS: usize = 20;

macro_rules! ordered_number {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            PartialOrd,
            Ord,
            Hash,
            serde::Serialize,
            serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(u64);

        impl $name {
            /// Wraps a raw number (parsing, tests).
            pub const fn from_raw(raw: u64) -> Self {
                Self(raw)
            }

            /// The raw number.
            pub const fn get(self) -> u64 {
                self.0
            }

            /// The successor. Saturates at `u64::MAX` rather than wrapping,
            /// so it can never go backwards; the store refuses to allocate
            /// past the maximum instead of reusing it.
            pub const fn next(self) -> Self {
                Self(self.0.saturating_add(1))
            }

            /// The 20-digit zero-padded name used in keys.
            pub fn key_name(self) -> String {
                format!("{:0width$}", self.0, width = KEY_DIGITS)
            }

            /// Parses a 20-digit key name; anything else (stray files,
            /// unpadded numbers) is `None`.
            pub fn parse_key_name(name: &str) -> Option<Self> {
                parse_padded(name).map(Self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

ordered_number!(
    /// A per-partition number handed to each attempt; a commit is accepted
    /// only if its token is greater than the token of the latest commit.
    FencingToken
);

ordered_number!(
    /// The position of a commit record in a partition's log; the first
    /// commit is generation 1.
    Generation
);

impl Generation {
    /// The generation of a partition's first commit.
    pub const FIRST: Generation = Generation(1);
}

/// Accepts exactly 20 ASCII digits: a name that is merely numeric would
/// break the "sorted listing is numeric order" rule.
fn parse_padded(name: &str) -> Option<u64> {
    if name.len() != KEY_DIGITS || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names_are_padded_and_sort_numerically() {
        let names: Vec<String> = [1u64, 9, 10, 100, u64::MAX]
            .iter()
            .map(|&n| FencingToken::from_raw(n).key_name())
            .collect();
        assert_eq!(names[0], "00000000000000000001");
        assert_eq!(names[4], "18446744073709551615");
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(sorted, names);
    }

    #[test]
    fn parse_accepts_only_padded_names() {
        assert_eq!(
            Generation::parse_key_name("00000000000000000042"),
            Some(Generation::from_raw(42))
        );
        assert_eq!(Generation::parse_key_name("42"), None);
        assert_eq!(Generation::parse_key_name("0000000000000000004x"), None);
        assert_eq!(Generation::parse_key_name("+0000000000000000042"), None);
        assert_eq!(Generation::parse_key_name("99999999999999999999"), None);
    }

    #[test]
    fn next_orders_and_saturates() {
        let t = FencingToken::from_raw(7);
        assert!(t.next() > t);
        assert_eq!(t.next().get(), 8);
        let max = FencingToken::from_raw(u64::MAX);
        assert_eq!(max.next(), max);
        assert_eq!(Generation::FIRST.get(), 1);
    }

    #[test]
    fn serde_is_transparent() {
        let json = serde_json::to_string(&FencingToken::from_raw(5)).unwrap();
        assert_eq!(json, "5");
        let g: Generation = serde_json::from_str("12").unwrap();
        assert_eq!(g, Generation::from_raw(12));
        assert_eq!(g.to_string(), "12");
    }
}
