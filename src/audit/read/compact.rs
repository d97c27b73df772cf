//! The canonical compact text of a nested JSON Lines value: compact JSON
//! with object keys sorted and numbers as written (see `jsonl::render`).
//!
//! Written as it is parsed, level by level: an array's items are compacted
//! one at a time as raw text borrowed from the line, and an object's
//! members are only borrowed (to be sorted), so a value of 60 MB holding 20
//! million empty arrays takes no memory per item (collected as owned raw
//! values, it took 1.1 GB). Each level is one recursion, counted against
//! [`MAX_NESTING`].

use std::borrow::Cow;
use std::cell::Cell;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::super::MAX_NESTING;

/// Why a nested value has no compact text.
#[derive(Debug)]
pub(super) enum Compact {
    /// It is not valid JSON.
    Json,
    /// It nests deeper than [`MAX_NESTING`].
    TooDeep,
}

impl From<serde_json::Error> for Compact {
    fn from(_: serde_json::Error) -> Self {
        Self::Json
    }
}

/// Appends the canonical compact text of a JSON value at nesting `level`.
/// serde_json skips each level's members as raw text without a depth limit
/// of its own, and this recurses once per level, so the level is counted
/// here: unbounded, a deep value overflowed the stack.
pub(super) fn compact(text: &str, out: &mut Vec<u8>, level: usize) -> Result<(), Compact> {
    let first = text.as_bytes().first();
    if matches!(first, Some(b'{' | b'[')) && level > MAX_NESTING {
        return Err(Compact::TooDeep);
    }
    match first {
        Some(b'{') => {
            let mut members = serde_json::from_str::<Members<'_>>(text)?.0;
            // Sorted by key; a repeated key keeps its last value, as
            // serde_json's map does (the sort is stable).
            members.sort_by(|a, b| a.0.cmp(&b.0));
            out.push(b'{');
            let mut written = 0;
            for (i, (key, value)) in members.iter().enumerate() {
                if members.get(i + 1).is_some_and(|next| next.0 == *key) {
                    continue;
                }
                if written > 0 {
                    out.push(b',');
                }
                written += 1;
                serde_json::to_writer(&mut *out, key)?;
                out.push(b':');
                compact(value.get().trim(), out, level + 1)?;
            }
            out.push(b'}');
        }
        Some(b'[') => {
            let deep = Cell::new(false);
            let mut parser = serde_json::Deserializer::from_str(text);
            let done = parser.deserialize_seq(Items {
                out,
                level,
                deep: &deep,
            });
            if deep.get() {
                return Err(Compact::TooDeep);
            }
            done?;
            parser.end()?;
        }
        Some(b'"') => {
            let unescaped: Cow<'_, str> = serde_json::from_str(text)?;
            serde_json::to_writer(&mut *out, &unescaped)?;
        }
        _ => out.extend_from_slice(text.as_bytes()),
    }
    Ok(())
}

/// An array compacted item by item as it is parsed; `deep` tells a value
/// too deep from invalid JSON.
struct Items<'o> {
    out: &'o mut Vec<u8>,
    level: usize,
    deep: &'o Cell<bool>,
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        self.out.push(b'[');
        let mut first = true;
        while let Some(item) = items.next_element::<&'de RawValue>()? {
            if !first {
                self.out.push(b',');
            }
            first = false;
            if let Err(why) = compact(item.get().trim(), self.out, self.level + 1) {
                self.deep.set(matches!(why, Compact::TooDeep));
                return Err(serde::de::Error::custom("no compact text"));
            }
        }
        self.out.push(b']');
        Ok(())
    }
}

/// An object's members in order, borrowed from the text where they can be.
struct Members<'de>(Vec<(Cow<'de, str>, &'de RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MembersVisitor)
    }
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = Members<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
        let mut members = Vec::new();
        while let Some(entry) = map.next_entry::<Key<'de>, &'de RawValue>()? {
            members.push((entry.0 .0, entry.1));
        }
        Ok(Members(members))
    }
}

/// A key, borrowed unless it has escapes (serde's own `Cow` always owns).
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(key)))
    }

    fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(key.to_owned())))
    }
}
