//! The object API every coordination step is built on, and the
//! capabilities some backends have beyond it.
//!
//! The one primitive that matters is put-if-absent: everything else in the
//! store (token allocation, the fenced commit) is "list, decide, try to
//! create the next key, reread if someone beat us". Nothing depends on a lock
//! held by a live process, so several engine processes can share a warehouse
//! and an object store with conditional PUT (`If-None-Match: *`) can
//! implement the same trait.
//!
//! What only some backends have is a capability trait of its own, reached
//! through [`Backend::durable`] or [`Backend::multipart`]: the caller asks
//! and decides what its absence means, so no backend answers a request it
//! cannot keep by quietly doing nothing. The backends: the filesystem
//! (`store::fs`), memory (`store::memory`), S3 (`store::s3`).

use std::fs;
use std::path::Path;

use crate::store::error::StoreError;

/// An object's version: opaque, compared only for equality. Two reads that
/// see the same version saw the same bytes, and a write of other bytes
/// always changes it (an S3 ETag, a file's inode and change stamp, a write
/// counter in memory).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version(String);

impl Version {
    /// Wraps a backend's own version string.
    pub fn new(raw: impl Into<String>) -> Version {
        Version(raw.into())
    }

    /// The backend's version string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a backend knows about one stored object besides its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// The full key.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// Changes with every write of the key.
    pub version: Version,
    /// When the store (not the writer's host) last wrote it: the one clock
    /// that every engine sharing the warehouse reads alike.
    pub last_modified: jiff::Timestamp,
}

/// An object's bytes with its metadata, read together (one version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The metadata of exactly these bytes.
    pub meta: ObjectMeta,
}

/// A JSON record weir wrote at `key`; `None` if absent, `Corrupt` (saying
/// `what`) if it does not parse.
pub fn read_json<T: serde::de::DeserializeOwned>(
    backend: &dyn Backend,
    key: String,
    what: &str,
) -> Result<Option<T>, StoreError> {
    let Some(bytes) = backend.get(&key)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StoreError::Corrupt {
            key,
            message: format!("{what}: {e}"),
        })
}

/// The object API: what every backend gives, object-store shaped. Contract:
///
/// - `put_if_absent` is atomic and durable when it returns `Ok(true)`: the
///   key exists with exactly these bytes and survives a crash; `Ok(false)` =
///   the key already existed (caller rereads and decides: the only outcome a
///   caller may retry on); `Err` = unknown, the key may or may not exist.
/// - `put_if_version_matches` replaces the key only if its current version
///   is `expected`: `Ok(Some(new))` = replaced, `Ok(None)` = it was changed,
///   deleted or never existed; `Err` = unknown.
/// - `put` creates or replaces a key whatever it holds, for keys with one
///   writer (a lease and its heartbeat): on an object store durable like any
///   PUT, on the filesystem atomic (a reader sees the old or the new bytes)
///   but left to the page cache, not fsynced.
/// - `get_object` returns bytes and metadata of one version together.
/// - `list_objects` is every object under a prefix (recursively), sorted by
///   key; `list` is the names directly under a prefix, like a directory.
/// - `delete` removes one key, `delete_prefix` everything under a prefix;
///   neither is conditional (S3 has no conditional delete), and a missing
///   key is not an error.
/// - A write that returned `Ok` is seen by every later read and listing,
///   from any process (read-after-write and list-after-write consistency,
///   which S3 gives).
///
/// The provided methods are right on any backend that keeps the required
/// ones, only slower (more requests, a file held in memory, a listing that
/// proves less): a backend overrides them to be faster, never to be
/// correct. What a backend may lack altogether is a capability, with no
/// default.
///
/// A new backend implements this trait, answers [`Backend::durable`] and
/// [`Backend::multipart`] with what it really has, and is done when it
/// passes the contract suite `tests/it/store_contract` (a module there per
/// backend runs every check; the races too where its conditional writes
/// are atomic): nothing above `store` asks which backend it is.
pub trait Backend: Send + Sync {
    /// Creates `key` with `bytes` only if it does not exist.
    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError>;
    /// put-if-absent for liveness records (pool slots, engine heartbeats):
    /// as atomic, but not made durable. A crash of the writer's host may
    /// leave the key absent or torn, which loses nothing: the record's
    /// holder died with it, and readers take a torn record for a dead
    /// holder's. A backend whose writes are durable anyway keeps the default.
    fn put_if_absent_volatile(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
        self.put_if_absent(key, bytes)
    }
    /// The longest one request may take before the client gives up on it,
    /// if the client bounds it: a reply is never older than this when it
    /// arrives. Lets an engine tell how stale another engine's look at the
    /// store can be (`store::slots`). `None`: unbounded (a local disk).
    fn request_timeout(&self) -> Option<std::time::Duration> {
        None
    }
    /// Replaces `key` with `bytes` only if its version is `expected`.
    fn put_if_version_matches(
        &self,
        key: &str,
        bytes: &[u8],
        expected: &Version,
    ) -> Result<Option<Version>, StoreError>;
    /// Creates or replaces `key` unconditionally (one writer per key).
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError>;
    /// Reads a key with its metadata; `None` if it does not exist.
    fn get_object(&self, key: &str) -> Result<Option<Object>, StoreError>;
    /// Reads a key; `None` if it does not exist.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.get_object(key)?.map(|o| o.bytes))
    }
    /// Names directly under the prefix "directory", sorted; a missing prefix
    /// is empty. The empty prefix lists the root. A prefix that cannot be
    /// listed (on a filesystem: EACCES, or a regular file where a directory
    /// belongs) is an error, never "empty": a commit log that reads as
    /// empty would say that nothing was published.
    fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError>;
    /// [`Backend::list`], only the names that sort after `after`. An object
    /// store starts its listing there (S3's `start-after`), so a long
    /// commit log costs one request from a known generation on.
    fn list_after(&self, prefix: &str, after: &str) -> Result<Vec<String>, StoreError> {
        let mut names = self.list(prefix)?;
        names.retain(|n| n.as_str() > after);
        Ok(names)
    }
    /// [`Backend::list`] of a prefix holding only keys (no "directories"),
    /// in at most one request: `None` when the names may not all fit one
    /// page of an object store's listing (then list with
    /// [`Backend::list_after`] from a known name). A store whose listing is
    /// one call anyway keeps the default, which is never `None`.
    fn list_first_page(&self, prefix: &str) -> Result<Option<Vec<String>>, StoreError> {
        self.list(prefix).map(Some)
    }
    /// Every object at or under `prefix` (a whole key or a "directory"),
    /// recursively, sorted by key; the empty prefix is the whole store.
    fn list_objects(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError>;
    /// The first `max` keys under `prefix` after `prefix/after` (all of
    /// them for an empty `after`), recursively, sorted, and whether they
    /// are all of them: an object store starts there and stops paging
    /// there (a thousand keys a request).
    fn list_keys(
        &self,
        prefix: &str,
        after: &str,
        max: usize,
    ) -> Result<(Vec<String>, bool), StoreError> {
        let from = format!("{prefix}/{after}");
        let mut keys: Vec<String> = self
            .list_objects(prefix)?
            .into_iter()
            .map(|o| o.key)
            .filter(|k| k.as_str() > from.as_str())
            .collect();
        let whole = keys.len() < max;
        keys.truncate(max);
        Ok((keys, whole))
    }
    /// Removes one key; a missing key is not an error.
    fn delete(&self, key: &str) -> Result<(), StoreError>;
    /// Removes several keys, as few requests as the store allows (S3's
    /// DeleteObjects takes a thousand); missing ones are not an error. The
    /// default removes them one by one.
    fn delete_keys(&self, keys: &[String]) -> Result<(), StoreError> {
        keys.iter().try_for_each(|k| self.delete(k))
    }
    /// Removes a key or everything under a prefix (gc of attempt dirs); a
    /// missing prefix is not an error.
    fn delete_prefix(&self, prefix: &str) -> Result<(), StoreError>;
    /// Removes `keys`, all of them under `prefix`, which holds nothing
    /// else worth keeping: the prefix goes with them where the store has
    /// directories. An object store sends one DeleteObjects for the keys,
    /// without the listing `delete_prefix` needs. The default removes the
    /// whole prefix.
    fn delete_known(&self, prefix: &str, keys: &[String]) -> Result<(), StoreError> {
        let _ = keys;
        self.delete_prefix(prefix)
    }
    /// Creates or replaces `key` with the bytes of the local file `path`
    /// (a candidate's file being uploaded; one writer per key). A backend
    /// that can stream large files overrides the default, which reads the
    /// file into memory.
    fn put_file(&self, key: &str, path: &Path) -> Result<(), StoreError> {
        let bytes = fs::read(path).map_err(StoreError::io(path))?;
        self.put(key, &bytes)
    }
    /// [`Backend::put_file`] of a file whose size and SHA-256 are `sum`:
    /// `true` when the store itself checked the bytes it now holds against
    /// that SHA-256 (an object store given the checksum with the upload),
    /// `false` when the caller must read the upload back to know. The
    /// default uploads and answers `false`.
    fn put_file_checked(
        &self,
        key: &str,
        path: &Path,
        sum: &crate::store::FileSum,
    ) -> Result<bool, StoreError> {
        let _ = sum;
        self.put_file(key, path)?;
        Ok(false)
    }
    /// Writes the object `key` into the local file `path` (created or
    /// truncated); `false` if there is no such object. A backend that can
    /// stream large objects overrides the default, which holds it in memory.
    fn get_file(&self, key: &str, path: &Path) -> Result<bool, StoreError> {
        let Some(bytes) = self.get(key)? else {
            return Ok(false);
        };
        fs::write(path, bytes).map_err(StoreError::io(path))?;
        Ok(true)
    }
    /// Its directories on a local disk, whose entries a durable write has
    /// to fsync: `None` for a store without directories, whose every
    /// write that returned is durable (an object store, memory). No
    /// default: a wrapper that forgot to pass it on would lose fsyncs.
    fn durable(&self) -> Option<&dyn DurableDirectories>;
    /// Its multipart uploads, which a lost engine can leave incomplete and
    /// billed: `None` where a write is never left partial in the store.
    fn multipart(&self) -> Option<&dyn MultipartHygiene>;
}

/// A backend whose keys are files in directories on a local disk, where a
/// name is durable only once its directory is fsynced. Callers that put
/// files in place outside [`Backend`] (a candidate's files) ask for it to
/// make them durable; a backend without it has nothing to make durable.
pub trait DurableDirectories {
    /// Makes the directories `names` under `prefix` exist before any key
    /// is put under them. Their entries need not be durable yet: the first
    /// durable write below `prefix` makes them so, all at once (a
    /// partition's skeleton costs no fsync of its own).
    fn prepare_dirs(&self, prefix: &str, names: &[&str]) -> Result<(), StoreError>;
    /// Makes the files or directories `keys`, written in place outside
    /// [`Backend`] (a candidate's files on the local disk), durable with
    /// their names: when it returns, a crash loses none of them.
    fn make_durable(&self, keys: &[String]) -> Result<(), StoreError>;
}

/// A backend whose large writes are multipart uploads, whose parts stay
/// stored (and billed) when the writer dies before completing or aborting
/// one: gc finds and aborts them.
pub trait MultipartHygiene {
    /// Uploads under the warehouse begun and never completed nor aborted
    /// (an engine killed, or a network lost, during a multipart upload):
    /// their parts are stored, and billed, but are no object.
    fn incomplete_uploads(&self) -> Result<Vec<IncompleteUpload>, StoreError>;
    /// Aborts an incomplete upload, deleting its parts (one already gone
    /// is not an error).
    fn abort_upload(&self, upload: &IncompleteUpload) -> Result<(), StoreError>;
}

/// A multipart upload begun and never completed nor aborted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncompleteUpload {
    /// The key it was to create.
    pub key: String,
    /// The store's id of the upload.
    pub id: String,
    /// When the store began it (its clock, not a writer's).
    pub initiated: jiff::Timestamp,
}

/// Writes `key` whatever it holds now (a marker, a certification): create
/// it if absent, else replace the version just read, and start over if
/// another writer got in between. The last writer wins whole; nobody sees a
/// mix.
pub fn put_replacing(backend: &dyn Backend, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
    loop {
        match backend.get_object(key)? {
            None => {
                if backend.put_if_absent(key, bytes)? {
                    return Ok(());
                }
            }
            Some(current) => {
                if backend
                    .put_if_version_matches(key, bytes, &current.meta.version)?
                    .is_some()
                {
                    return Ok(());
                }
            }
        }
    }
}
