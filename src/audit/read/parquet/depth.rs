//! The nesting depth and width of a Parquet file's schema, read from its
//! footer before the Arrow project's reader sees it.
//!
//! That reader builds the schema tree, and then its Arrow schema, recursing
//! once per level with no limit of its own: a file of 8 KB whose one column
//! nests 1,000 groups deep overflowed a 2 MiB thread stack and aborted the
//! engine. The footer keeps the schema as a flat list of elements in
//! depth-first order, each with its number of children, so its depth is
//! counted here in one pass and without recursion (Thrift's compact
//! protocol: <https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md>).
//! Anything this reading does not understand is left to the reader, which
//! names what is wrong; only a schema deeper than [`MAX_NESTING`] or of
//! more top-level columns than [`MAX_COLUMNS`] is refused here, before the
//! reader builds its metadata of every column.

use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::Arc;

use super::shared::{ReadFrom, Shared};
use crate::audit::{AuditError, MAX_COLUMNS, MAX_NESTING};

/// Thrift compact types, as in a field or collection header.
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

/// How deep skipped Thrift values may nest (the Parquet reader's own bound).
const SKIP_DEPTH: u8 = 64;

/// What is over a limit in a schema.
enum Over {
    /// This top-level column nests deeper than [`MAX_NESTING`].
    Deep(String),
    /// More top-level columns than [`MAX_COLUMNS`].
    Wide,
}

/// Refuses a file whose schema nests deeper than [`MAX_NESTING`] levels
/// (a top-level column is level 1), naming the top-level column, or has
/// more than [`MAX_COLUMNS`] top-level columns.
pub(super) fn check_schema(file: &Shared, path: &Path) -> Result<(), AuditError> {
    match over(file) {
        Ok(Some(Over::Deep(column))) => Err(AuditError::TooDeep {
            path: path.to_path_buf(),
            place: "schema".to_owned(),
            what: format!("column `{column}`"),
            limit: MAX_NESTING,
        }),
        Ok(Some(Over::Wide)) => Err(AuditError::TooWide {
            path: path.to_path_buf(),
            place: "schema".to_owned(),
            limit: MAX_COLUMNS,
        }),
        // Not a footer this reading understands: the reader says why.
        Ok(None) | Err(_) => Ok(()),
    }
}

/// What in the schema of `file` is over a limit, if anything.
fn over(file: &Shared) -> io::Result<Option<Over>> {
    let len = file.0.metadata()?.len();
    let mut tail = [0; 8];
    let Some(at) = len.checked_sub(8) else {
        return Ok(None);
    };
    std::os::unix::fs::FileExt::read_exact_at(file.0.as_ref(), &mut tail, at)?;
    if &tail[4..] != b"PAR1" {
        return Ok(None);
    }
    let footer = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    let Some(start) = at.checked_sub(footer) else {
        return Ok(None);
    };
    let reader = ReadFrom {
        file: Arc::clone(&file.0),
        at: start,
    };
    let mut thrift = Thrift(BufReader::new(reader.take(footer)));
    // FileMetaData: field 2 is the schema, a list of SchemaElement.
    let mut last = 0;
    while let Some((id, kind)) = thrift.field(&mut last)? {
        if id == 2 && kind == LIST {
            return schema(&mut thrift);
        }
        thrift.skip(kind, SKIP_DEPTH, false)?;
    }
    Ok(None)
}

/// Reads the schema's elements (depth first, the root first) up to the
/// first that is over a limit.
fn schema<R: Read>(thrift: &mut Thrift<R>) -> io::Result<Option<Over>> {
    let (count, kind) = thrift.collection()?;
    if kind != STRUCT {
        return Ok(None);
    }
    // The children each open group has still to come.
    let mut open: Vec<u64> = Vec::new();
    let mut column = String::new();
    let mut columns = 0;
    for _ in 0..count {
        while open.last() == Some(&0) {
            open.pop();
        }
        if let Some(left) = open.last_mut() {
            *left -= 1;
        }
        let level = open.len();
        let (name, children) = element(thrift, level == 1)?;
        if level == 1 {
            column = name;
            columns += 1;
            if columns > MAX_COLUMNS {
                return Ok(Some(Over::Wide));
            }
        }
        if level > MAX_NESTING {
            return Ok(Some(Over::Deep(column)));
        }
        if children > 0 {
            open.push(children);
        }
    }
    Ok(None)
}

/// One SchemaElement: its name (when `named`) and number of children.
fn element<R: Read>(thrift: &mut Thrift<R>, named: bool) -> io::Result<(String, u64)> {
    let mut name = String::new();
    let mut children = 0;
    let mut last = 0;
    while let Some((id, kind)) = thrift.field(&mut last)? {
        match (id, kind) {
            (4, BINARY) if named => {
                let len = thrift.varint()?;
                let mut bytes = Vec::new();
                (&mut thrift.0).take(len).read_to_end(&mut bytes)?;
                name = String::from_utf8_lossy(&bytes).into_owned();
            }
            (5, I32) => children = u64::try_from(thrift.i32()?).unwrap_or(0),
            _ => thrift.skip(kind, SKIP_DEPTH, false)?,
        }
    }
    Ok((name, children))
}

/// A reader of Thrift's compact protocol.
struct Thrift<R>(R);

fn invalid() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "not a Thrift compact value")
}

impl<R: Read> Thrift<R> {
    fn byte(&mut self) -> io::Result<u8> {
        let mut byte = [0];
        self.0.read_exact(&mut byte)?;
        Ok(byte[0])
    }

    fn varint(&mut self) -> io::Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(invalid())
    }

    fn i32(&mut self) -> io::Result<i32> {
        let raw = u32::try_from(self.varint()?).map_err(|_| invalid())?;
        // Zigzag: 0, -1, 1, -2, … as 0, 1, 2, 3, …
        Ok((raw >> 1) as i32 ^ -((raw & 1) as i32))
    }

    /// The next field's id and type, or `None` at the struct's end.
    fn field(&mut self, last: &mut i16) -> io::Result<Option<(i16, u8)>> {
        let header = self.byte()?;
        if header == 0 {
            return Ok(None);
        }
        let delta = header >> 4;
        *last = if delta == 0 {
            let raw = u16::try_from(self.varint()?).map_err(|_| invalid())?;
            (raw >> 1) as i16 ^ -((raw & 1) as i16)
        } else {
            last.wrapping_add(i16::from(delta))
        };
        Ok(Some((*last, header & 0x0f)))
    }

    /// A list or set header: its size and its elements' type.
    fn collection(&mut self) -> io::Result<(u64, u8)> {
        let header = self.byte()?;
        let size = match header >> 4 {
            15 => self.varint()?,
            small => u64::from(small),
        };
        Ok((size, header & 0x0f))
    }

    fn bytes(&mut self, count: u64) -> io::Result<()> {
        let copied = io::copy(&mut (&mut self.0).take(count), &mut io::sink())?;
        if copied == count {
            Ok(())
        } else {
            Err(io::ErrorKind::UnexpectedEof.into())
        }
    }

    /// Skips a value of type `kind`; a boolean in a collection is a byte,
    /// in a struct it is all in the field's header.
    fn skip(&mut self, kind: u8, depth: u8, in_collection: bool) -> io::Result<()> {
        let depth = depth.checked_sub(1).ok_or_else(invalid)?;
        match kind {
            BOOL_TRUE | BOOL_FALSE if !in_collection => Ok(()),
            BOOL_TRUE | BOOL_FALSE | BYTE => self.bytes(1),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => self.bytes(8),
            UUID => self.bytes(16),
            BINARY => {
                let len = self.varint()?;
                self.bytes(len)
            }
            LIST | SET => {
                let (size, kind) = self.collection()?;
                (0..size).try_for_each(|_| self.skip(kind, depth, true))
            }
            MAP => {
                let size = self.varint()?;
                if size == 0 {
                    return Ok(());
                }
                let kinds = self.byte()?;
                (0..size).try_for_each(|_| {
                    self.skip(kinds >> 4, depth, true)?;
                    self.skip(kinds & 0x0f, depth, true)
                })
            }
            STRUCT => {
                let mut last = 0;
                while let Some((_, kind)) = self.field(&mut last)? {
                    self.skip(kind, depth, false)?;
                }
                Ok(())
            }
            _ => Err(invalid()),
        }
    }
}
