//! One open file shared by the threads that read its parts.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use parquet::file::reader::{ChunkReader, Length};

/// A file read with positioned reads (`pread`), so threads share one handle
/// without sharing a file offset.
#[derive(Clone)]
pub(super) struct Shared(pub(super) Arc<File>);

impl Length for Shared {
    fn len(&self) -> u64 {
        self.0.metadata().map_or(0, |m| m.len())
    }
}

/// A sequential reader over a [`Shared`] file from an offset.
pub(super) struct ReadFrom {
    pub(super) file: Arc<File>,
    pub(super) at: u64,
}

impl Read for ReadFrom {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.file.read_at(buf, self.at)?;
        self.at += read as u64;
        Ok(read)
    }
}

impl ChunkReader for Shared {
    type T = std::io::BufReader<ReadFrom>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(std::io::BufReader::new(ReadFrom {
            file: Arc::clone(&self.0),
            at: start,
        }))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<bytes::Bytes> {
        let mut buffer = vec![0; length];
        self.0.read_exact_at(&mut buffer, start)?;
        Ok(buffer.into())
    }
}
