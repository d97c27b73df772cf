//! Files weir opens from a path a user gave (a manifest, an external input,
//! a watermark, a `file:` secret): opened without blocking and checked to be regular files
//! before a byte is read, so a FIFO nobody writes to cannot hang a run in
//! `open()` and a device (`/dev/zero`) cannot be read without end; small
//! files are read with a limit.

use std::fs::File;
use std::io::{Error, ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest manifest weir reads.
pub const MANIFEST_LIMIT: u64 = 4 << 20;
/// The largest watermark file weir reads (it holds one instant).
pub const WATERMARK_LIMIT: u64 = 4 << 10;
/// The largest `file:` secret weir reads (a token, a password, a key).
pub const SECRET_LIMIT: u64 = 64 << 10;

/// Opens `path` for reading if it is a regular file (following links);
/// anything else is an `InvalidInput` error naming what it is.
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
    // writer, and no signal but SIGKILL ends that wait. It changes nothing
    // for a regular file's reads.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    let what = if kind.is_file() {
        return Ok(file);
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(Error::new(
        ErrorKind::InvalidInput,
        format!("it is {what}, not a regular file"),
    ))
}

/// The text of the regular file at `path`, refused (`InvalidData`) when it
/// is larger than `limit` bytes.
pub fn read_limited(path: &Path, limit: u64) -> std::io::Result<String> {
    let file = open_regular(path)?;
    let mut text = String::new();
    // One byte more than the limit tells a file at the limit from a larger
    // one, also one that grows while it is read.
    file.take(limit + 1).read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("it is larger than {}", bytes_text(limit)),
        ));
    }
    Ok(text)
}

fn bytes_text(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_open_and_small_files_have_a_limit() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let err = open_regular(&fifo).unwrap_err();
        assert_eq!(
            err.to_string(),
            "it is a FIFO (named pipe), not a regular file"
        );
        let err = read_limited(Path::new("/dev/zero"), 10).unwrap_err();
        assert_eq!(
            err.to_string(),
            "it is a character device, not a regular file"
        );
        assert!(open_regular(dir.path()).is_err());
        let file = dir.path().join("f");
        std::fs::write(&file, "x".repeat(4096)).unwrap();
        assert_eq!(read_limited(&file, 4096).unwrap().len(), 4096);
        let err = read_limited(&file, 4095).unwrap_err();
        assert_eq!(err.to_string(), "it is larger than 4095 bytes");
        std::fs::write(&file, "x".repeat(5000)).unwrap();
        assert_eq!(
            read_limited(&file, WATERMARK_LIMIT)
                .unwrap_err()
                .to_string(),
            "it is larger than 4 KiB"
        );
    }
}
