//! How long the S3 client waits for a request, and for how long it retries
//! (`S3Backend::open_with`).

/// The longest one request may take, from connecting to the last byte of
/// its reply: a 16 MiB part needs 1.6 MB/s to fit.
pub(super) const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The longest a connection may take to open.
pub(super) const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// A failed request (5xx, reset, a timeout of one safe to repeat) is
/// retried at most this many times...
pub(super) const MAX_RETRIES: usize = 3;

/// ...and only while this long has passed since the call's first try: with
/// REQUEST_TIMEOUT, a call ends within 25 s, below the default lease timeout
/// of 30 s.
pub(super) const RETRY_BUDGET: std::time::Duration = std::time::Duration::from_secs(15);

/// A duration as object_store's configuration parses it.
pub(super) fn humantime_secs(d: std::time::Duration) -> String {
    format!("{}s", d.as_secs())
}
