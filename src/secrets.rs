//! The secret values a manifest references, read and kept out of what
//! weir writes: an `env:NAME` or `file:PATH` value of a task's, a sensor's
//! or a notify target's `env.set`, and the headers of `[notify]` and
//! `[lineage]` HTTP targets.
//!
//! ```text
//!  manifest value ── read_value ──► (text, secret?)
//!        secret values ──► Secrets (longest first) ──► redact(text), redact_file(log)
//! ```
//!
//! Below `http` and `exec`, which both read them: a command's environment
//! (`exec::env`) and a target's headers (`http`) come from the same
//! reference syntax and are redacted with the same rules.

use std::io::{Read, Write};
use std::path::Path;

use crate::manifest::{EnvValue, Manifest, Task};
use crate::store::user_file;

/// What a secret value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Secret values to redact, longest first (a secret that contains another
/// is replaced whole).
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    values: Vec<String>,
}

impl Secrets {
    /// Redacts `values` (empty ones and repeats dropped).
    pub fn new(mut values: Vec<String>) -> Secrets {
        values.retain(|s| !s.is_empty());
        values.sort_by_key(|s| std::cmp::Reverse(s.len()));
        values.dedup();
        Secrets { values }
    }

    /// Adds one more value (kept longest first).
    pub fn add(&mut self, value: &str) {
        if !value.is_empty() && !self.values.iter().any(|v| v == value) {
            self.values.push(value.to_string());
            self.values.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    /// Whether there is any value to redact.
    pub fn has_secrets(&self) -> bool {
        !self.values.is_empty()
    }

    /// `text` with every secret value replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in &self.values {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }

    /// Rewrites the file at `path` with every secret value replaced, in
    /// bounded memory (a task's log may be gigabytes); untouched when it
    /// holds none. A missing file is fine.
    pub fn redact_file(&self, path: &Path) -> std::io::Result<()> {
        if self.values.is_empty() {
            return Ok(());
        }
        let mut input = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut temp_name = path.as_os_str().to_owned();
        temp_name.push(".redacting");
        let temp = Path::new(&temp_name);
        let mut out = std::io::BufWriter::new(std::fs::File::create(temp)?);
        let found = redact_stream(&mut input, &mut out, &self.values).and_then(|found| {
            out.flush()?;
            Ok(found)
        });
        drop(out);
        match found {
            Ok(true) => std::fs::rename(temp, path),
            Ok(false) => std::fs::remove_file(temp),
            Err(e) => {
                let _ = std::fs::remove_file(temp);
                Err(e)
            }
        }
    }
}

/// Copies `input` to `out` with every secret replaced; whether one was found.
fn redact_stream(
    input: &mut impl Read,
    out: &mut impl Write,
    secrets: &[String],
) -> std::io::Result<bool> {
    // A match that starts before the last `keep` bytes of the buffer ends
    // inside it: only the tail can hold the start of one still cut off.
    let keep = secrets.iter().map(String::len).max().unwrap_or(1) - 1;
    let finders: Vec<memchr::memmem::Finder<'_>> = secrets
        .iter()
        .map(|s| memchr::memmem::Finder::new(s.as_bytes()))
        .collect();
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let mut found = false;
    loop {
        let n = input.read(&mut chunk)?;
        let eof = n == 0;
        pending.extend_from_slice(&chunk[..n]);
        loop {
            // The earliest match; the longest of those starting there.
            let first = finders
                .iter()
                .filter_map(|f| f.find(&pending).map(|at| (at, f.needle().len())))
                .min_by_key(|&(at, len)| (at, std::cmp::Reverse(len)));
            match first {
                // A longer secret may start here (or before) and end in
                // bytes not read yet: decided when they are.
                Some((at, _)) if !eof && pending.len() - at <= keep => break,
                Some((at, len)) => {
                    found = true;
                    out.write_all(&pending[..at])?;
                    out.write_all(REDACTED.as_bytes())?;
                    pending.drain(..at + len);
                }
                None => break,
            }
        }
        if eof {
            out.write_all(&pending)?;
            return Ok(found);
        }
        let safe = pending.len().saturating_sub(keep);
        out.write_all(&pending[..safe])?;
        pending.drain(..safe);
    }
}

/// The secret values of `task` this process can read (unreadable ones
/// left out), as [`Secrets`]: for evidence an engine
/// never redacted (it was killed while the command ran), read by `explain`.
pub fn readable_secrets(manifest: &Manifest, task: &Task) -> Secrets {
    let values = task.env.iter().flat_map(|s| s.set.iter()).map(|(_, v)| v);
    Secrets::new(
        values
            .filter_map(|v| read_value(v, &manifest.dir).ok())
            .filter(|(_, secret)| *secret)
            .map(|(value, _)| value)
            .collect(),
    )
}

/// Every secret value of `manifest` this process can read: each task's
/// `env:`/`file:` values and the headers of `[notify]` targets and
/// `[lineage]`, as [`Secrets`]. A task may write any of
/// them into its data (one without `env` inherits the engine's variables, a
/// header's `env:` one included), and a gate failure quotes data: the
/// engine redacts what it says about data with these.
pub fn known_secrets(manifest: &Manifest) -> Secrets {
    let tasks = manifest
        .tasks
        .values()
        .flat_map(|task| task.env.iter().flat_map(|s| s.set.iter()))
        .map(|(_, value)| value);
    let endpoints = manifest
        .notify
        .values()
        .filter_map(|target| match &target.sink {
            crate::manifest::NotifySink::Http(endpoint) => Some(endpoint),
            crate::manifest::NotifySink::Command(_) => None,
        })
        .chain(manifest.lineage.iter().filter_map(|l| match &l.sink {
            crate::manifest::LineageSink::Http(endpoint) => Some(endpoint),
            crate::manifest::LineageSink::File(_) => None,
        }));
    let headers = endpoints.flat_map(|e| e.headers.iter().map(|(_, value)| value));
    Secrets::new(
        tasks
            .chain(headers)
            .filter_map(|v| read_value(v, &manifest.dir).ok())
            .filter(|(_, secret)| *secret)
            .map(|(value, _)| value)
            .collect(),
    )
}

/// One value of the manifest that may be a reference (a task's `env.set`,
/// an HTTP header of a notification target or `[lineage]`): a literal as
/// written, `env:NAME` from this process's environment, `file:PATH` (relative
/// to `dir`) without its final newline. With whether it is a secret. The
/// error says which reference could not be read, never a value.
pub fn read_value(value: &EnvValue, dir: &Path) -> Result<(String, bool), ReferenceError> {
    match value {
        EnvValue::Literal(v) => Ok((v.clone(), false)),
        EnvValue::Env(name) => match std::env::var(name) {
            Ok(v) => Ok((v, true)),
            Err(std::env::VarError::NotPresent) => Err(ReferenceError::EnvNotSet(name.clone())),
            Err(std::env::VarError::NotUnicode(_)) => Err(ReferenceError::EnvNotUtf8(name.clone())),
        },
        EnvValue::File(path) => {
            let text = read_secret_file(&dir.join(path)).map_err(|why| ReferenceError::File {
                path: path.clone(),
                why,
            })?;
            Ok((text, true))
        }
    }
}

/// A manifest reference ([`read_value`]) that could not be read; it names
/// the reference, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// `env:NAME` names a variable this process does not have.
    #[error("`env:{0}` is not set")]
    EnvNotSet(String),
    /// `env:NAME` holds bytes that are not UTF-8.
    #[error("`env:{0}` is not UTF-8")]
    EnvNotUtf8(String),
    /// `file:PATH` cannot be read.
    #[error("`file:{}` cannot be read: {why}", path.display())]
    File {
        /// The path as the manifest gives it.
        path: std::path::PathBuf,
        /// Why.
        why: SecretFileError,
    },
}

/// Why a secret's file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretFileError {
    /// Its bytes are not UTF-8.
    #[error("it is not UTF-8")]
    NotUtf8,
    /// It cannot be opened or read, or is not a regular file within the limit.
    #[error("{text}")]
    Unreadable {
        /// The OS's kind of failure.
        kind: std::io::ErrorKind,
        /// The OS's reason.
        text: String,
    },
}

/// The secret a `file:` reference names, as `$(cat file)` reads it: its
/// final newline is not part of the secret. Opened as a user's file, so a
/// FIFO or a device named there can neither hang nor flood the read.
pub fn read_secret_file(path: &Path) -> Result<String, SecretFileError> {
    let text = user_file::read_limited(path, user_file::SECRET_LIMIT).map_err(|e| {
        // std's own UTF-8 error carries no inner error; the limit's does.
        match e.kind() {
            std::io::ErrorKind::InvalidData if e.get_ref().is_none() => SecretFileError::NotUtf8,
            kind => SecretFileError::Unreadable {
                kind,
                text: e.to_string(),
            },
        }
    })?;
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(text: &str, secrets: &[&str], chunk: usize) -> (String, bool) {
        struct Trickle<'a>(&'a [u8], usize);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let secrets: Vec<String> = secrets.iter().map(|s| s.to_string()).collect();
        let mut out = Vec::new();
        let found =
            redact_stream(&mut Trickle(text.as_bytes(), chunk), &mut out, &secrets).unwrap();
        (String::from_utf8(out).unwrap(), found)
    }

    #[test]
    fn secrets_are_redacted_across_read_boundaries() {
        let text = "token s3cr3t-value here; again s3cr3t-value\nand s3cr3t";
        for chunk in [1, 2, 3, 5, 7, 64] {
            assert_eq!(
                redacted(text, &["s3cr3t-value", "s3cr3t"], chunk),
                (
                    "token [redacted] here; again [redacted]\nand [redacted]".to_string(),
                    true
                ),
                "chunks of {chunk}"
            );
        }
        assert_eq!(
            redacted("nothing", &["s3cr3t"], 3),
            ("nothing".into(), false)
        );
    }
}
