//! The simulated store: the real in-memory backend behind a wrapper that
//! injects the faults an object store shows, each drawn from the seed.
//!
//! ```text
//!  lost         a write lands, its reply is lost: the caller sees an error
//!  unavailable  a request fails before it does anything (a 503)
//!  latency      a request takes 1 to 20 simulated seconds: what its caller
//!               does after it happens that much later
//!  short_list   a listing stops at a page boundary and says so: the caller
//!               must continue it (S3 returns a page, `IsTruncated`)
//! ```
//!
//! Listings never omit a key they return a page for: S3 lists consistently,
//! and the store's protocols rely on it. "Short" is only what S3 may do, a
//! page that ends early and says it is not the whole listing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::store::{Backend, MemoryBackend, Object, ObjectMeta, StoreError, Version};

/// Fault rates, each a probability per store request (`kill`: engine
/// kills per engine and simulated day; `late`: the share of instances
/// whose external input comes late; `fail`: the share of attempts that
/// fail on top of what the task's history says).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// A write that lands but whose reply is lost.
    pub lost: f64,
    /// A request refused before it does anything.
    pub unavailable: f64,
    /// Engine kills per engine and simulated day.
    pub kill: f64,
    /// Share of instances whose input comes late.
    pub late: f64,
    /// Share of attempts that fail.
    pub fail: f64,
    /// Share of attempts that hang until their timeout.
    pub hang: f64,
    /// Share of store requests that take 1 to 20 simulated seconds.
    pub latency: f64,
    /// Share of listings that end at a page boundary the caller continues.
    pub short_list: f64,
}

/// The kinds `--faults` names, in the order the report lists them.
pub const KINDS: [&str; 8] = [
    "lost",
    "unavailable",
    "kill",
    "late",
    "fail",
    "hang",
    "latency",
    "short_list",
];

/// Why a `--faults` text is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultsError {
    /// A part without `=`.
    #[error("`{part}` is not kind=rate (kinds: {})", KINDS.join(", "))]
    NotKindRate {
        /// The part as written.
        part: String,
    },
    /// A rate that is not a finite number at least 0.
    #[error("`{part}`: the rate must be a number at least 0")]
    BadRate {
        /// The part as written.
        part: String,
    },
    /// A share (every kind but `kill`) above 1.
    #[error("`{part}`: a share is at most 1")]
    ShareAboveOne {
        /// The part as written.
        part: String,
    },
    /// A kind not in [`KINDS`].
    #[error("unknown fault kind `{kind}` (kinds: {})", KINDS.join(", "))]
    UnknownKind {
        /// The kind as written.
        kind: String,
    },
}

impl Faults {
    /// `--faults none|default|kind=rate,...`.
    pub fn parse(text: &str) -> Result<Faults, FaultsError> {
        match text.trim() {
            "none" => return Ok(Faults::default()),
            "default" => return Ok(Faults::default_mix()),
            _ => {}
        }
        let mut f = Faults::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((kind, rate)) = part.split_once('=') else {
                return Err(FaultsError::NotKindRate { part: part.into() });
            };
            let rate: f64 = rate
                .trim()
                .parse()
                .ok()
                .filter(|r: &f64| r.is_finite() && *r >= 0.0)
                .ok_or_else(|| FaultsError::BadRate { part: part.into() })?;
            let bounded = kind != "kill";
            if bounded && rate > 1.0 {
                return Err(FaultsError::ShareAboveOne { part: part.into() });
            }
            match kind.trim() {
                "lost" => f.lost = rate,
                "unavailable" => f.unavailable = rate,
                "kill" => f.kill = rate,
                "late" => f.late = rate,
                "fail" => f.fail = rate,
                "hang" => f.hang = rate,
                "latency" => f.latency = rate,
                "short_list" => f.short_list = rate,
                other => return Err(FaultsError::UnknownKind { kind: other.into() }),
            }
        }
        Ok(f)
    }

    /// What `default` means: every kind, at rates a flaky week shows.
    pub fn default_mix() -> Faults {
        Faults {
            lost: 0.002,
            unavailable: 0.005,
            kill: 0.5,
            late: 0.05,
            fail: 0.05,
            hang: 0.005,
            latency: 0.0,
            short_list: 0.0,
        }
    }
}

/// The in-memory backend, with faults drawn from the seed.
#[derive(Debug)]
pub struct FaultyStore {
    inner: MemoryBackend,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    rng: fastrand::Rng,
    lost: f64,
    unavailable: f64,
    latency: f64,
    short_list: f64,
    /// Simulated seconds the requests of the event being handled took.
    delay: i64,
    /// Faults are off while the simulator itself reads the store.
    on: bool,
    counts: BTreeMap<&'static str, u64>,
}

/// A warehouse on the simulated store, as an engine on S3 opens it: the
/// object-store paths (paged listings, the log's checkpoint) are the ones
/// that run. Nothing is staged: simulated attempts write no files.
pub fn warehouse(store: &Arc<FaultyStore>) -> crate::store::Warehouse {
    let staging = staging_dir();
    let backend: Arc<dyn Backend> = store.clone();
    crate::store::Warehouse::remote(backend.clone(), "s3://weir-sim/wh", &staging)
        .unwrap_or_else(|_| crate::store::Warehouse::with_backend(backend, staging))
}

/// The (empty) staging directory the simulated warehouses name: one per
/// process, not a fixed name in a shared temporary directory.
pub(crate) fn staging_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("weir-sim-{}", std::process::id()))
}

impl FaultyStore {
    /// A fresh store drawing its faults from `seed`.
    pub fn new(seed: u64, faults: &Faults) -> Arc<FaultyStore> {
        Arc::new(FaultyStore {
            inner: MemoryBackend::new(),
            state: Mutex::new(State {
                rng: fastrand::Rng::with_seed(seed ^ 0x005E_ED0F_FA17),
                lost: faults.lost,
                unavailable: faults.unavailable,
                latency: faults.latency,
                short_list: faults.short_list,
                delay: 0,
                on: true,
                counts: BTreeMap::new(),
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Turns faults on or off (off while invariants read the store).
    pub fn faults_on(&self, on: bool) {
        self.state().on = on;
    }

    /// Faults injected so far, per kind.
    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.state().counts.clone()
    }

    /// Seconds the requests made since the last [`FaultyStore::new_event`]
    /// took: what the event's handler does next happens that much later.
    pub fn delay(&self) -> i64 {
        self.state().delay
    }

    /// A new event is handled: its requests start now.
    pub fn new_event(&self) {
        self.state().delay = 0;
    }

    /// Whether this listing ends at a page boundary (drawn per listing).
    fn short(&self) -> bool {
        let mut s = self.state();
        if !s.on || s.short_list <= 0.0 || s.rng.f64() >= s.short_list {
            return false;
        }
        *s.counts.entry("short_list").or_default() += 1;
        true
    }

    /// The fault this request meets, if any.
    fn draw(&self, write: bool) -> Option<&'static str> {
        let mut s = self.state();
        if !s.on {
            return None;
        }
        if s.latency > 0.0 && s.rng.f64() < s.latency {
            let secs = s.rng.i64(1..=20);
            s.delay += secs;
            *s.counts.entry("latency").or_default() += 1;
        }
        let kind = if s.unavailable > 0.0 && s.rng.f64() < s.unavailable {
            "unavailable"
        } else if write && s.lost > 0.0 && s.rng.f64() < s.lost {
            "lost"
        } else {
            return None;
        };
        *s.counts.entry(kind).or_default() += 1;
        Some(kind)
    }
}

fn injected(key: &str, kind: &str) -> StoreError {
    let why = match kind {
        "lost" => "simulated: the write landed but its reply was lost",
        _ => "simulated: 503 Service Unavailable",
    };
    StoreError::Remote {
        key: key.to_owned(),
        source: why.into(),
    }
}

/// Runs a write under a drawn fault: refused before, or lost after.
fn write<T>(
    store: &FaultyStore,
    key: &str,
    op: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    match store.draw(true) {
        Some("unavailable") => Err(injected(key, "unavailable")),
        Some(kind) => {
            op()?;
            Err(injected(key, kind))
        }
        None => op(),
    }
}

fn read<T>(
    store: &FaultyStore,
    key: &str,
    op: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    match store.draw(false) {
        Some(kind) => Err(injected(key, kind)),
        None => op(),
    }
}

impl Backend for FaultyStore {
    fn durable(&self) -> Option<&dyn crate::store::DurableDirectories> {
        self.inner.durable()
    }

    fn multipart(&self) -> Option<&dyn crate::store::MultipartHygiene> {
        self.inner.multipart()
    }

    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
        write(self, key, || self.inner.put_if_absent(key, bytes))
    }

    fn put_if_version_matches(
        &self,
        key: &str,
        bytes: &[u8],
        expected: &Version,
    ) -> Result<Option<Version>, StoreError> {
        write(self, key, || {
            self.inner.put_if_version_matches(key, bytes, expected)
        })
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        write(self, key, || self.inner.put(key, bytes))
    }

    fn get_object(&self, key: &str) -> Result<Option<Object>, StoreError> {
        read(self, key, || self.inner.get_object(key))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        read(self, prefix, || self.inner.list(prefix))
    }

    fn list_after(&self, prefix: &str, after: &str) -> Result<Vec<String>, StoreError> {
        read(self, prefix, || self.inner.list_after(prefix, after))
    }

    fn list_first_page(&self, prefix: &str) -> Result<Option<Vec<String>>, StoreError> {
        // A page that may not hold every name: the caller lists on from a
        // name it knows.
        if self.short() {
            return read(self, prefix, || Ok(None));
        }
        read(self, prefix, || self.inner.list_first_page(prefix))
    }

    fn list_keys(
        &self,
        prefix: &str,
        after: &str,
        max: usize,
    ) -> Result<(Vec<String>, bool), StoreError> {
        let (mut keys, whole) = read(self, prefix, || self.inner.list_keys(prefix, after, max))?;
        // A page cut early, as S3 may: the keys it has, not the whole.
        if keys.len() > 1 && self.short() {
            keys.truncate(keys.len() / 2);
            return Ok((keys, false));
        }
        Ok((keys, whole))
    }

    fn list_objects(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        read(self, prefix, || self.inner.list_objects(prefix))
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        write(self, key, || self.inner.delete(key))
    }

    fn delete_prefix(&self, prefix: &str) -> Result<(), StoreError> {
        write(self, prefix, || self.inner.delete_prefix(prefix))
    }
}
