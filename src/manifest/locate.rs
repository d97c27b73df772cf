//! Spans of keys and values in the parsed document, looked up by path.
//!
//! A path is a list of segments: a table key, or an array index written as a
//! number. When the exact node is missing (a required key that was never
//! written), the span of the nearest existing ancestor's key stands in, so a
//! diagnostic still points at the table that lacks it.

use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// Span lookups over one parsed manifest.
pub(crate) struct Locator<'a, 'i> {
    root: &'a DeTable<'i>,
}

impl<'a, 'i> Locator<'a, 'i> {
    pub(crate) fn new(root: &'a DeTable<'i>) -> Self {
        Locator { root }
    }

    /// Span of the value at `path`, or of the nearest ancestor's key.
    pub(crate) fn value(&self, path: &[&str]) -> Range<usize> {
        self.find(path, false)
    }

    /// Span of the key at `path` (for array elements, the element), or of the
    /// nearest ancestor's key.
    pub(crate) fn key(&self, path: &[&str]) -> Range<usize> {
        self.find(path, true)
    }

    /// Whether the value at `path` is a string (not, say, a list of them).
    pub(crate) fn is_string(&self, path: &[&str]) -> bool {
        let mut node: Option<&Spanned<DeValue<'i>>> = None;
        let mut table = self.root;
        for segment in path {
            let Some((_, v)) = table.iter().find(|(k, _)| k.get_ref() == segment) else {
                return false;
            };
            node = Some(v);
            match v.get_ref() {
                DeValue::Table(t) => table = t,
                _ => continue,
            }
        }
        node.is_some_and(|v| matches!(v.get_ref(), DeValue::String(_)))
    }

    /// Span of the first string element of the array at `path` that `matches`.
    pub(crate) fn find_string(
        &self,
        path: &[&str],
        matches: impl Fn(&str) -> bool,
    ) -> Option<Range<usize>> {
        let mut node = Node::Table(self.root);
        for segment in path {
            let Node::Table(table) = node else {
                return None;
            };
            node = Node::of(table.iter().find(|(k, _)| k.get_ref() == segment)?.1);
        }
        let Node::Array(items) = node else {
            return None;
        };
        items
            .iter()
            .find(|v| v.get_ref().as_str().is_some_and(&matches))
            .map(Spanned::span)
    }

    fn find(&self, path: &[&str], want_key: bool) -> Range<usize> {
        let mut best = 0..0;
        let mut node = Node::Table(self.root);
        for (depth, segment) in path.iter().enumerate() {
            let (key_span, value) = match node {
                Node::Table(table) => match table.iter().find(|(k, _)| k.get_ref() == segment) {
                    Some((k, v)) => (Some(k.span()), v),
                    None => return best,
                },
                Node::Array(items) => {
                    match segment.parse::<usize>().ok().and_then(|i| items.get(i)) {
                        Some(v) => (None, v),
                        None => return best,
                    }
                }
                Node::Scalar => return best,
            };
            if depth + 1 == path.len() {
                return match (want_key, key_span) {
                    (true, Some(k)) => k,
                    _ => value.span(),
                };
            }
            best = key_span.unwrap_or_else(|| value.span());
            node = Node::of(value);
        }
        best
    }
}

enum Node<'a, 'i> {
    Table(&'a DeTable<'i>),
    Array(&'a [Spanned<DeValue<'i>>]),
    Scalar,
}

impl<'a, 'i> Node<'a, 'i> {
    fn of(value: &'a Spanned<DeValue<'i>>) -> Self {
        match value.get_ref() {
            DeValue::Table(t) => Node::Table(t),
            DeValue::Array(a) => Node::Array(a),
            _ => Node::Scalar,
        }
    }
}
