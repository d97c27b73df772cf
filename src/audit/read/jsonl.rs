//! JSON Lines files as rows: each object's keys are its columns, each
//! value rendered as its literal text.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use super::super::{MAX_COLUMNS, MAX_NESTING, MAX_RECORD_BYTES, MAX_VALUE_BYTES};
use super::compact::{compact, Compact};
use super::{
    io_error, open, parse_error, too_large, AuditError, Row, RowEstimate, RowFold, Span, BUFFER,
};

/// A parsed JSON Lines row: each key's value as its raw JSON text (a
/// repeated key keeps its last value, as serde_json's map does).
type Object = std::collections::BTreeMap<String, Box<RawValue>>;

/// The result of one pass over a JSON Lines file.
pub(super) enum Pass<F> {
    /// Every row was folded.
    Done(Vec<String>, F),
    /// The row on this line has a key outside the columns; nothing is usable.
    NewKeys(u64),
}

/// Streams a JSON Lines file through `make(columns)`'s accumulator. Without
/// `columns`, the first object's keys are taken as the columns.
pub(super) fn fold_jsonl<F: RowFold>(
    path: &Path,
    columns: Option<Vec<String>>,
    make: &dyn Fn(&[String]) -> F,
) -> Result<Pass<F>, AuditError> {
    let mut state = columns.map(|columns| {
        let fold = make(&columns);
        (columns, fold)
    });
    let mut lines = JsonLines::open(path)?;
    let mut estimate = RowEstimate::new(lines.reader.get_ref());
    let mut data = Vec::new();
    let mut spans: Vec<Span> = Vec::new();
    while let Some((line, object)) = lines.next_object()? {
        if object.len() > MAX_COLUMNS {
            return Err(too_wide(path, format!("line {line}")));
        }
        let (columns, fold) = state.get_or_insert_with(|| {
            // serde_json's map may keep insertion order; the columns are sorted.
            let mut columns: Vec<String> = object.keys().cloned().collect();
            columns.sort();
            let fold = make(&columns);
            (columns, fold)
        });
        if fold.satisfied() {
            break;
        }
        data.clear();
        spans.clear();
        let mut found = 0;
        for name in columns.iter() {
            let value = object.get(name);
            found += usize::from(value.is_some());
            let span = match value {
                Some(value) => render(value, &mut data).map_err(|TooDeep| AuditError::TooDeep {
                    path: path.to_path_buf(),
                    place: format!("line {line}"),
                    what: format!("the value of column `{name}`"),
                    limit: MAX_NESTING,
                })?,
                None => None,
            };
            if span.is_some_and(|(start, end)| end - start > MAX_VALUE_BYTES) {
                return Err(too_large(
                    path,
                    format!("line {line}"),
                    format!("the value of column `{name}`"),
                    MAX_VALUE_BYTES,
                ));
            }
            spans.push(span);
        }
        if found < object.len() {
            return Ok(Pass::NewKeys(line));
        }
        estimate.row(lines.read);
        if let Some(rows) = estimate.take() {
            fold.expect_rows(rows);
        }
        fold.row(&Row {
            line,
            data: &data,
            spans: &spans,
        });
    }
    let (columns, fold) = state.unwrap_or_else(|| (Vec::new(), make(&[])));
    Ok(Pass::Done(columns, fold))
}

/// Every key used by any object of a JSON Lines file.
pub(super) fn jsonl_keys(path: &Path) -> Result<BTreeSet<String>, AuditError> {
    let mut keys = BTreeSet::new();
    let mut lines = JsonLines::open(path)?;
    while let Some((line, object)) = lines.next_object()? {
        keys.extend(object.into_keys());
        if keys.len() > MAX_COLUMNS {
            return Err(too_wide(path, format!("line {line}")));
        }
    }
    Ok(keys)
}

/// The columns of `path` passed [`MAX_COLUMNS`] at `place` (`line 7`).
pub(super) fn too_wide(path: &Path, place: String) -> AuditError {
    AuditError::TooWide {
        path: path.to_path_buf(),
        place,
        limit: MAX_COLUMNS,
    }
}

/// A nested value deeper than [`MAX_NESTING`].
#[derive(Debug)]
pub(super) struct TooDeep;

/// Appends a JSON value's canonical text to `data`; `None` for null.
///
/// A number is its literal text as written (`123456789012345678901234567890`
/// stays exact, where a float would round it; for every integer and every
/// float in the shortest form serde_json writes, that is the text serde_json
/// would print). A nested array or object is compact JSON with its object
/// keys sorted, its strings escaped as serde_json escapes them and its
/// numbers literal: serde_json's compact text for every ordinary value.
fn render(value: &RawValue, data: &mut Vec<u8>) -> Result<Span, TooDeep> {
    let start = data.len();
    let text = value.get().trim();
    match text.as_bytes().first() {
        None | Some(b'n') => return Ok(None),
        Some(b'"') => match serde_json::from_str::<std::borrow::Cow<'_, str>>(text) {
            Ok(unescaped) => data.extend_from_slice(unescaped.as_bytes()),
            Err(_) => data.extend_from_slice(text.as_bytes()),
        },
        Some(b'[' | b'{') => {
            // The row's object is level 1, so a value is at level 2.
            match compact(text, data, 2) {
                Ok(()) => {}
                Err(Compact::TooDeep) => return Err(TooDeep),
                Err(Compact::Json) => {
                    data.truncate(start);
                    data.extend_from_slice(text.as_bytes());
                }
            }
        }
        // true, false and numbers: their literal text.
        Some(_) => data.extend_from_slice(text.as_bytes()),
    }
    Ok(Some((start, data.len())))
}

/// A JSON Lines file read one object at a time.
struct JsonLines<'p> {
    path: &'p Path,
    reader: BufReader<File>,
    buf: Vec<u8>,
    line: u64,
    /// Bytes read so far.
    read: u64,
}

impl<'p> JsonLines<'p> {
    fn open(path: &'p Path) -> Result<Self, AuditError> {
        Ok(Self {
            path,
            reader: BufReader::with_capacity(BUFFER, open(path)?),
            buf: Vec::new(),
            line: 0,
            read: 0,
        })
    }

    /// The next object and its line number, skipping blank lines.
    fn next_object(&mut self) -> Result<Option<(u64, Object)>, AuditError> {
        loop {
            self.buf.clear();
            // One byte past the limit tells a line over it from one at it.
            let most = MAX_RECORD_BYTES as u64 + 1;
            let read = (&mut self.reader)
                .take(most)
                .read_until(b'\n', &mut self.buf)
                .map_err(|source| io_error(self.path, source))?;
            if read == 0 {
                return Ok(None);
            }
            if read as u64 == most && self.buf.last() != Some(&b'\n') {
                return Err(too_large(
                    self.path,
                    format!("line {}", self.line + 1),
                    "the record".to_owned(),
                    MAX_RECORD_BYTES,
                ));
            }
            self.read += read as u64;
            self.line += 1;
            if self.buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let wide = std::cell::Cell::new(false);
            let mut parser = serde_json::Deserializer::from_slice(&self.buf);
            let parsed = Bounded(&wide)
                .deserialize(&mut parser)
                .and_then(|object| parser.end().map(|()| object));
            if wide.get() {
                return Err(too_wide(self.path, format!("line {}", self.line)));
            }
            if let Ok(object) = parsed {
                return Ok(Some((self.line, object)));
            }
            // Not an object: say what it is instead.
            let value: Value = serde_json::from_slice(&self.buf)
                .map_err(|e| parse_error(self.path, self.line, format!("invalid JSON: {e}")))?;
            return Err(parse_error(
                self.path,
                self.line,
                format!("expected a JSON object, found {}", kind(&value)),
            ));
        }
    }
}

/// A row's object, refused past [`MAX_COLUMNS`] keys as it is parsed: a
/// line of 128 MiB holds millions of short keys, and their map would take
/// gigabytes before the columns could be counted. The flag tells that
/// error from others.
struct Bounded<'a>(&'a std::cell::Cell<bool>);

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Object;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Object, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Object;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
        let mut object = Object::new();
        // A repeated key keeps its last value, as serde_json's map does.
        while let Some((key, value)) = map.next_entry::<String, Box<RawValue>>()? {
            object.insert(key, value);
            if object.len() > MAX_COLUMNS {
                self.0.set(true);
                return Err(serde::de::Error::custom("too many keys"));
            }
        }
        Ok(object)
    }
}

/// What a JSON value is, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
