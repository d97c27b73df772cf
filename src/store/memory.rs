//! An in-memory [`Backend`]: the whole store in one map behind one mutex.
//!
//! Every operation is atomic (it holds the lock throughout), which makes it
//! the reference the other backends are held to by the contract tests
//! (`tests/it/store_contract`), and
//! the place to prove the protocol's races (token allocation, the fenced
//! commit) under many threads: moto's conditional checks are not atomic
//! under heavy races and the filesystem is slow to race on.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::store::backend::{
    Backend, DurableDirectories, MultipartHygiene, Object, ObjectMeta, Version,
};
use crate::store::error::StoreError;
use crate::store::key::validate_key;

#[derive(Debug, Clone)]
struct Entry {
    bytes: Vec<u8>,
    /// The store-wide write counter when this entry was written.
    version: u64,
    last_modified: jiff::Timestamp,
}

#[derive(Debug, Default)]
struct State {
    objects: BTreeMap<String, Entry>,
    writes: u64,
}

/// A [`Backend`] in memory; nothing survives the process.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    state: Mutex<State>,
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> MemoryBackend {
        MemoryBackend::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every mutation below is one insert or remove: a panic elsewhere
        // cannot leave the map half-changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn write(&mut self, key: &str, bytes: &[u8]) -> Version {
        self.writes += 1;
        self.objects.insert(
            key.to_owned(),
            Entry {
                bytes: bytes.to_vec(),
                version: self.writes,
                last_modified: jiff::Timestamp::now(),
            },
        );
        version(self.writes)
    }
}

fn version(n: u64) -> Version {
    Version::new(n.to_string())
}

fn meta(key: &str, entry: &Entry) -> ObjectMeta {
    ObjectMeta {
        key: key.to_owned(),
        size: entry.bytes.len() as u64,
        version: version(entry.version),
        last_modified: entry.last_modified,
    }
}

/// `prefix` as the start of the keys under it (`""` stays the whole store).
fn dir_prefix(prefix: &str) -> Result<String, StoreError> {
    if prefix.is_empty() {
        return Ok(String::new());
    }
    validate_key(prefix)?;
    Ok(format!("{prefix}/"))
}

impl Backend for MemoryBackend {
    fn durable(&self) -> Option<&dyn DurableDirectories> {
        None
    }

    fn multipart(&self) -> Option<&dyn MultipartHygiene> {
        None
    }

    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
        validate_key(key)?;
        let mut state = self.state();
        if state.objects.contains_key(key) {
            return Ok(false);
        }
        state.write(key, bytes);
        Ok(true)
    }

    fn put_if_version_matches(
        &self,
        key: &str,
        bytes: &[u8],
        expected: &Version,
    ) -> Result<Option<Version>, StoreError> {
        validate_key(key)?;
        let mut state = self.state();
        match state.objects.get(key) {
            Some(entry) if version(entry.version) == *expected => Ok(Some(state.write(key, bytes))),
            _ => Ok(None),
        }
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        validate_key(key)?;
        self.state().write(key, bytes);
        Ok(())
    }

    fn get_object(&self, key: &str) -> Result<Option<Object>, StoreError> {
        validate_key(key)?;
        Ok(self.state().objects.get(key).map(|entry| Object {
            bytes: entry.bytes.clone(),
            meta: meta(key, entry),
        }))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let start = dir_prefix(prefix)?;
        let state = self.state();
        let mut names: Vec<String> = state
            .objects
            .range(start.clone()..)
            .map_while(|(key, _)| key.strip_prefix(&start))
            .map(|rest| rest.split('/').next().unwrap_or(rest).to_owned())
            .collect();
        // Keys sort with their separators ("x-1" < "x/b"), names without.
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn list_objects(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        let start = dir_prefix(prefix)?;
        let state = self.state();
        let mut out: Vec<ObjectMeta> = state
            .objects
            .range(start.clone()..)
            .take_while(|(key, _)| key.starts_with(&start))
            .map(|(key, entry)| meta(key, entry))
            .collect();
        if !prefix.is_empty() {
            if let Some(entry) = state.objects.get(prefix) {
                out.insert(0, meta(prefix, entry));
            }
        }
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        validate_key(key)?;
        self.state().objects.remove(key);
        Ok(())
    }

    fn delete_prefix(&self, prefix: &str) -> Result<(), StoreError> {
        validate_key(prefix)?;
        let start = format!("{prefix}/");
        let mut state = self.state();
        state.objects.remove(prefix);
        state.objects.retain(|key, _| !key.starts_with(&start));
        Ok(())
    }
}

/// Memory, except that every put-if-absent goes through `hook` (given the
/// memory backend, the key and the bytes): a test's lost replies, refusals
/// and racing writers, on a backend that is otherwise exact.
#[cfg(test)]
pub(crate) struct InterceptPut<F> {
    pub(crate) inner: MemoryBackend,
    pub(crate) hook: F,
}

#[cfg(test)]
impl<F> InterceptPut<F>
where
    F: Fn(&MemoryBackend, &str, &[u8]) -> Result<bool, StoreError> + Send + Sync,
{
    pub(crate) fn new(hook: F) -> std::sync::Arc<InterceptPut<F>> {
        std::sync::Arc::new(InterceptPut {
            inner: MemoryBackend::new(),
            hook,
        })
    }
}

#[cfg(test)]
impl<F> Backend for InterceptPut<F>
where
    F: Fn(&MemoryBackend, &str, &[u8]) -> Result<bool, StoreError> + Send + Sync,
{
    fn durable(&self) -> Option<&dyn DurableDirectories> {
        self.inner.durable()
    }

    fn multipart(&self) -> Option<&dyn MultipartHygiene> {
        self.inner.multipart()
    }

    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
        (self.hook)(&self.inner, key, bytes)
    }
    fn put_if_version_matches(
        &self,
        key: &str,
        bytes: &[u8],
        expected: &Version,
    ) -> Result<Option<Version>, StoreError> {
        self.inner.put_if_version_matches(key, bytes, expected)
    }
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.inner.put(key, bytes)
    }
    fn get_object(&self, key: &str) -> Result<Option<Object>, StoreError> {
        self.inner.get_object(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.inner.list(prefix)
    }
    fn list_objects(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        self.inner.list_objects(prefix)
    }
    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.inner.delete(key)
    }
    fn delete_prefix(&self, prefix: &str) -> Result<(), StoreError> {
        self.inner.delete_prefix(prefix)
    }
}
