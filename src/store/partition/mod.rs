//! One partition's slice of the warehouse: token allocation, attempt dirs
//! and the fenced commit log.
//! Attempt dirs are here; tokens in [`tokens`], the log and its commit in
//! [`log`], a generation's files and their uploads in [`files`].
//!
//! # What keeps the fence when files go
//!
//! The invariant: tokens strictly increase along the log, and a generation
//! number, once committed, always means that record. Both rest on files an
//! operator's `rm`, a bucket lifecycle rule or a bad restore can remove,
//! so each has a second witness that the same accident is unlikely to take
//! with it, and the store refuses to go on when the witnesses disagree
//! rather than quietly starting over:
//!
//! ```text
//!  what can go            its witness                      what the store does
//!  tokens/<t> records     the log: the newest record's     allocates above both
//!                         token (tokens only grow along it) (allocate_token)
//!  log/<g>.json, newest   a marker, written by the commit  latest(), history() and
//!                         after the record: on a local     commit() fail with
//!                         disk tokens/<t>.committed-<g>,   MissingRecord (exit 5):
//!                         out of log/ (a hand rm log/<g>*  nothing read past it,
//!                         leaves it); in an object store   nothing committed over it
//!                         log/<g>.published-<t>, listed
//!                         with the records
//!  log/<g>.json, older    the gap: generations are 1..n
//!                         with none missing
//!  record and marker      PUBLISHED events in _runs/       `status --check` names it
//! ```
//!
//! The marker costs nothing to read (the listing that finds the newest
//! record shows it: a local disk's looks at the log list `tokens/` too) and
//! one write per commit, made after the record lands: a marker never names
//! a record that was not committed. Losing it (a crash right after the
//! commit) only takes one witness away. A local warehouse written before
//! one marker was enough holds both names; readers still take either.
//! Allocation reads the newest record (on an object store, unless this
//! process has just looked), so a log with a hole allocates no token either
//! (one just taken when the hole is found is left unused); a hole made
//! after the look is found by the commit, which refuses to go over it: a
//! partition in doubt stays as it is until a person restores the record.

mod files;
mod layouts;
mod log;
mod seen;
mod tokens;

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crate::store::backend::Backend;
use crate::store::epoch::EpochCell;
use crate::store::error::StoreError;
use crate::store::fs::create_dir_all_durable;
use crate::store::key::{key_path, validate_segment};
use crate::store::layout::{self, DATA_DIR};
use crate::store::leases::Lease;
use crate::store::log::CommitRecord;
use crate::store::token::{FencingToken, Generation};

pub use files::Downloaded;
pub use layouts::DatasetLayout;
pub(crate) use layouts::Layouts;
#[cfg(test)]
pub use log::plant_equal_token;
pub use seen::Look;
pub(crate) use seen::{look_and_learn, look_dataset, SeenGenerations};
pub use tokens::Allocation;

/// Handle on `<root>/<dataset>/<partition>`. Cheap to clone; holds no lock
/// and no cached state, so any number of handles in any number of processes
/// may work on the same partition.
///
/// The dataset and partition names are checked by every fallible method
/// (an invalid one is [`StoreError::InvalidKey`]), so no token can be
/// allocated, and no attempt dir prepared, for a name that would escape the
/// root.
#[derive(Clone)]
pub struct PartitionStore {
    backend: Arc<dyn Backend>,
    root: PathBuf,
    /// The object store's URL when published files live there, not under
    /// `root`.
    remote: Option<String>,
    /// Generations this process has seen committed, per partition prefix
    /// (shared by every handle of one warehouse): records are never
    /// deleted, so each is a lower bound a remote listing can start after.
    seen: SeenGenerations,
    /// This warehouse handle's epoch, the floor of its tokens on a local
    /// disk (`store::epoch`).
    epoch: EpochCell,
    /// The decided layouts of the warehouse's datasets.
    layouts: Layouts,
    dataset: String,
    partition: String,
    /// `<dataset>/<partition>` or `<dataset>/_weir/<partition>`, the prefix
    /// of every key here, once the dataset's layout is decided
    /// ([`layouts`]); shared by the handle's clones.
    prefix: Arc<OnceLock<String>>,
}

impl std::fmt::Debug for PartitionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionStore")
            .field("root", &self.root)
            .field("dataset", &self.dataset)
            .field("partition", &self.partition)
            .finish_non_exhaustive()
    }
}

impl PartitionStore {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        root: PathBuf,
        remote: Option<String>,
        seen: SeenGenerations,
        epoch: EpochCell,
        layouts: Layouts,
        dataset: &str,
        partition: &str,
    ) -> PartitionStore {
        let prefix = OnceLock::new();
        if let Some(known) = layouts.known(dataset) {
            let _ = prefix.set(known.partition_prefix(dataset, partition));
        }
        PartitionStore {
            backend,
            root,
            remote,
            seen,
            epoch,
            layouts,
            dataset: dataset.to_owned(),
            partition: partition.to_owned(),
            prefix: Arc::new(prefix),
        }
    }

    /// The prefix of every key of this partition: its dataset's layout is
    /// looked up once per process (`layouts`); while the dataset has no
    /// partition at all, the plain one, not kept.
    pub(crate) fn prefix(&self) -> Result<Cow<'_, str>, StoreError> {
        if let Some(known) = self.prefix.get() {
            return Ok(Cow::Borrowed(known));
        }
        validate_segment(&self.dataset)?;
        Ok(
            match self.layouts.of(self.backend.as_ref(), &self.dataset)? {
                Some(decided) => Cow::Borrowed(
                    self.prefix
                        .get_or_init(|| decided.partition_prefix(&self.dataset, &self.partition)),
                ),
                None => Cow::Owned(layout::partition_prefix(&self.dataset, &self.partition)),
            },
        )
    }

    /// The key of this partition's directory: `<dataset>/<partition>`, or
    /// `<dataset>/_weir/<partition>` for a Delta table that keeps its
    /// partitions out of VACUUM's reach.
    pub fn key_prefix(&self) -> Result<String, StoreError> {
        self.check()?;
        Ok(self.prefix()?.into_owned())
    }

    /// [`PartitionStore::prefix`] for a path to show or to name an attempt
    /// already allocated (whose allocation decided the layout): the plain
    /// layout's when the dataset cannot be listed.
    fn known_prefix(&self) -> Cow<'_, str> {
        self.prefix().unwrap_or_else(|_| {
            Cow::Owned(layout::partition_prefix(&self.dataset, &self.partition))
        })
    }

    /// The prefix to write this partition's first keys under: the dataset's
    /// layout, or `undecided` while it has no partition, which this handle
    /// then keeps (the keys it writes decide it for everyone).
    pub(crate) fn settle_prefix(&self, undecided: DatasetLayout) -> Result<&str, StoreError> {
        // Keeps the dataset's layout when its directory shows one.
        self.prefix()?;
        Ok(self
            .prefix
            .get_or_init(|| undecided.partition_prefix(&self.dataset, &self.partition)))
    }

    /// Notes the layout this handle wrote a key in as its dataset's, so
    /// no handle of this warehouse asks again.
    fn note_layout(&self) {
        if let Some(prefix) = self.prefix.get() {
            let layout =
                if *prefix == layout::table_partition_prefix(&self.dataset, &self.partition) {
                    DatasetLayout::TableState
                } else {
                    DatasetLayout::Plain
                };
            self.layouts.decided(&self.dataset, layout);
        }
    }

    /// Makes a Delta table dataset that has no partition yet keep them
    /// all under `<dataset>/_weir/`, out of any VACUUM's reach; a dataset
    /// that has some keeps its layout. Called before the first token of a
    /// table's partition is taken.
    pub fn settle_table_layout(&self) -> Result<DatasetLayout, StoreError> {
        self.check()?;
        let prefix = self.settle_prefix(DatasetLayout::TableState)?;
        Ok(
            if prefix == layout::table_partition_prefix(&self.dataset, &self.partition) {
                DatasetLayout::TableState
            } else {
                DatasetLayout::Plain
            },
        )
    }

    /// Whether published files live in the backend, not under the local
    /// root: the store's own question, which nothing above it asks (each
    /// answer it shapes has a method of its own).
    pub(crate) fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// Where the record's `i`th file is published, for people: its path,
    /// or its URL in an object store.
    pub fn file_location(&self, rec: &CommitRecord, i: usize) -> PathBuf {
        self.location(&rec.file_key(i))
    }

    /// Where an attempt's files are, for people: its directory, or its
    /// URL in the object store.
    pub fn attempt_location(&self, token: FencingToken) -> PathBuf {
        self.location(&self.attempt_key(token))
    }

    /// Where generation `g`'s commit record is, for people: its path, or
    /// its URL in an object store.
    pub fn record_location(&self, g: Generation) -> PathBuf {
        self.location(&layout::log_key(&self.known_prefix(), g))
    }

    /// A key as people should see it: its path under the root, or its URL.
    fn location(&self, key: &str) -> PathBuf {
        match &self.remote {
            None => key_path(&self.root, key),
            Some(url) => PathBuf::from(format!("{}/{key}", url.trim_end_matches('/'))),
        }
    }

    pub(crate) fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The dataset name.
    pub fn dataset(&self) -> &str {
        &self.dataset
    }

    /// The partition name.
    pub fn partition(&self) -> &str {
        &self.partition
    }

    fn check(&self) -> Result<(), StoreError> {
        validate_segment(&self.dataset)?;
        validate_segment(&self.partition)
    }

    /// Absolute path of `attempts/<token>`.
    pub fn attempt_dir(&self, token: FencingToken) -> PathBuf {
        key_path(&self.root, &self.attempt_key(token))
    }

    /// Absolute path of `data-<token>`, where attempt `token`'s files are
    /// published on a local disk ([`PartitionStore::move_to_published`]).
    pub fn published_dir(&self, token: FencingToken) -> PathBuf {
        key_path(&self.root, &layout::data_key(&self.known_prefix(), token))
    }

    /// Key of `attempts/<token>` (what a commit's `attempt_dir` holds).
    pub fn attempt_key(&self, token: FencingToken) -> String {
        layout::attempt_key(&self.known_prefix(), token)
    }

    /// Creates `attempts/<token>/data/`, empty, and returns the attempt
    /// dir. Whatever a directory of that name already holds is removed
    /// first: the files a killed attempt left in its staging (a remote
    /// warehouse's local copy outlives a bucket that forgot its token, a
    /// hand-restored tree) would otherwise be audited and published as this
    /// attempt's. No record can name it: the token was allocated above every
    /// committed one ([`PartitionStore::allocate_token`]).
    pub fn prepare_attempt(&self, token: FencingToken) -> Result<PathBuf, StoreError> {
        self.check()?;
        let dir = self.attempt_dir(token);
        let data = dir.join(DATA_DIR);
        if self.remote.is_none() {
            // Its published-data name too (`move_to_published`), for the
            // same reason: a left-over there would fail the rename.
            remove_path(&self.published_dir(token))?;
        }
        // `attempts/` was made with the partition's skeleton when the token
        // was allocated. No directory here is synced now: what a commit
        // names is made durable at publish (`make_durable`: on a local disk
        // the data renamed to `data-<token>`, else these directories), and
        // an attempt lost in a crash before that is one nobody can read.
        // No fsync inside the pool slot.
        // Made first and cleared only if it was there: a fresh token's
        // directory (the usual case) costs no look before the mkdir.
        let made = match std::fs::create_dir(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                remove_path(&dir)?;
                std::fs::create_dir(&dir)
            }
            made => made,
        };
        match made {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // `attempts/` is gone (removed by hand) or was never made
                // here: make it, durably, the slow way.
                if let Some(attempts) = dir.parent() {
                    create_dir_all_durable(attempts).map_err(StoreError::io(attempts))?;
                }
                std::fs::create_dir_all(&dir).map_err(StoreError::io(&dir))?;
            }
            Err(e) => return Err(StoreError::io(&dir)(e)),
        }
        match std::fs::create_dir(&data) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StoreError::io(&data)(e)),
        }
        Ok(dir)
    }

    /// Writes (renews) the lease of the attempt holding `token`; only its
    /// holder writes it.
    pub fn write_lease(&self, token: FencingToken, lease: &Lease) -> Result<(), StoreError> {
        self.check()?;
        let key = layout::lease_key(&self.prefix()?, token);
        let bytes = serde_json::to_vec(lease).map_err(|e| StoreError::Corrupt {
            key: key.clone(),
            message: format!("cannot encode lease: {e}"),
        })?;
        self.backend.put(&key, &bytes)
    }

    /// The lease of the attempt holding `token`; `None` if it has none or
    /// it cannot be read (a reader then watches for one, or calls it dead).
    pub fn read_lease(&self, token: FencingToken) -> Option<Lease> {
        self.try_read_lease(token).ok().flatten()
    }

    /// The lease of an attempt, telling a lease that cannot be read (EACCES,
    /// EIO, torn) from one that does not exist: gc must keep the former.
    pub fn try_read_lease(&self, token: FencingToken) -> Result<Option<Lease>, StoreError> {
        self.check()?;
        self.read_json(
            layout::lease_key(&self.prefix()?, token),
            "unreadable lease",
        )
    }

    /// A JSON record the store wrote; `None` if absent, `Corrupt` (saying
    /// `what`) if it does not parse.
    fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        key: String,
        what: &str,
    ) -> Result<Option<T>, StoreError> {
        crate::store::backend::read_json(self.backend.as_ref(), key, what)
    }

    /// Removes `attempts/<token>` and, on a local disk, its published data
    /// `data-<token>` (gc). The caller must know no record in the log names
    /// it.
    pub fn remove_attempt(&self, token: FencingToken) -> Result<(), StoreError> {
        self.check()?;
        if self.remote.is_none() {
            self.backend
                .delete_prefix(&layout::data_key(&self.prefix()?, token))?;
        }
        self.backend.delete_prefix(&self.attempt_key(token))?;
        if self.remote.is_some() {
            // Its staging copy on this host, if any.
            let dir = self.attempt_dir(token);
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(&dir)(e)),
            }
        }
        Ok(())
    }
}

/// Removes a directory tree, or a file or link standing where one should
/// be.
fn remove_path(path: &std::path::Path) -> Result<(), StoreError> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match removed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::log::listing_start;
    use super::seen::LogListing;
    use super::*;
    use crate::store::allocation::TokenOwner;
    use crate::store::error::PublishError;
    use crate::store::log::tests::sample;
    use crate::store::log::CommitKind;
    use crate::store::warehouse::Warehouse;
    use std::collections::BTreeSet;
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::Barrier;

    fn owner(attempt: u32) -> TokenOwner {
        TokenOwner {
            run_id: "run".into(),
            task: "task".into(),
            attempt,
        }
    }

    fn setup() -> (tempfile::TempDir, Warehouse, PartitionStore) {
        let tmp = tempfile::tempdir().unwrap();
        let wh = Warehouse::open(tmp.path()).unwrap();
        let p = wh.partition("d", "p");
        (tmp, wh, p)
    }

    #[test]
    fn tokens_increase_and_survive_reopening() {
        let (tmp, _wh, p) = setup();
        let mut last = FencingToken::from_raw(0);
        for i in 1..=20 {
            let t = p.allocate_token(&owner(i)).unwrap();
            assert!(t > last);
            last = t;
        }
        assert_eq!(last.get(), 20);
        let reopened = Warehouse::open(tmp.path()).unwrap().partition("d", "p");
        let t = reopened.allocate_token(&owner(21)).unwrap();
        assert_eq!(t.get(), 21);
        let rec = reopened.token_record(t).unwrap().unwrap();
        assert_eq!(rec.owner(), owner(21));
        assert_eq!(reopened.token_record(t.next()).unwrap(), None);
        // Partitions count independently.
        let other = reopened.allocate_token(&owner(1));
        assert_eq!(other.unwrap().get(), 22);
        let q = Warehouse::open(tmp.path()).unwrap().partition("d", "q");
        assert_eq!(q.allocate_token(&owner(1)).unwrap().get(), 1);
    }

    #[test]
    fn allocation_skips_a_token_taken_behind_its_back() {
        let (tmp, _wh, p) = setup();
        assert_eq!(p.allocate_token(&owner(1)).unwrap().get(), 1);
        // Stray names in tokens/ don't count; a hand-made higher token does.
        std::fs::write(tmp.path().join("d/p/tokens/junk"), b"").unwrap();
        std::fs::write(tmp.path().join("d/p/tokens/00000000000000000007"), b"{}").unwrap();
        assert_eq!(p.allocate_token(&owner(2)).unwrap().get(), 8);
    }

    #[test]
    fn concurrent_allocate_gives_distinct_dense_tokens() {
        let (_tmp, _wh, p) = setup();
        let (threads, per_thread) = (8u32, 10u32);
        let barrier = Barrier::new(threads as usize);
        let all: Vec<FencingToken> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|i| {
                    let (p, barrier) = (p.clone(), &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        (0..per_thread)
                            .map(|j| p.allocate_token(&owner(i * 100 + j)).unwrap())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let n = u64::from(threads * per_thread);
        let set: BTreeSet<u64> = all.iter().map(|t| t.get()).collect();
        assert_eq!(set.len(), all.len(), "duplicate tokens");
        assert_eq!(set, (1..=n).collect());
    }

    #[test]
    fn commits_advance_generations_and_stale_is_refused() {
        let (_tmp, _wh, p) = setup();
        assert_eq!(p.latest().unwrap(), None);
        let t1 = p.allocate_token(&owner(1)).unwrap();
        let t2 = p.allocate_token(&owner(2)).unwrap();
        let t3 = p.allocate_token(&owner(3)).unwrap();
        let r1 = p.commit(sample(t1.get())).unwrap();
        assert_eq!(r1.generation, Generation::FIRST);
        let r2 = p.commit(sample(t3.get())).unwrap();
        assert_eq!(r2.generation.get(), 2);
        // t2 < t3: fenced off, and the log is unchanged.
        match p.commit(sample(t2.get())) {
            Err(PublishError::Stale {
                mine,
                committed,
                generation,
            }) => {
                assert_eq!((mine, committed, generation.get()), (t2, t3, 2));
            }
            other => panic!("expected stale, got {other:?}"),
        }
        // Equal token (a retry after an unknown outcome) is stale too.
        assert!(matches!(
            p.commit(sample(t3.get())),
            Err(PublishError::Stale { mine, committed, .. }) if mine == committed
        ));
        assert_eq!(p.history().unwrap(), vec![r1.clone(), r2.clone()]);
        assert_eq!(p.latest().unwrap(), Some(r2.clone()));
        assert_eq!(p.record(Generation::FIRST).unwrap(), Some(r1));
        assert_eq!(p.record(Generation::from_raw(3)).unwrap(), None);
        assert!(r2.published_at.ends_with('Z'));
    }

    /// Writes log/<g> as a racing publisher would have.
    // The hole a listing shows, from where it starts.
    #[test]
    fn log_listing_finds_gaps_and_markers_without_records() {
        let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let (g, t) = (Generation::from_raw, FencingToken::from_raw);
        let rec = |n| layout::log_name(g(n));
        let mark = |n, tok| layout::published_name(g(n), t(tok), "");
        let hole = |list: Vec<String>, first| LogListing::parse(&list).hole(g(first));
        let whole = names(&[&rec(1), &mark(1, 1), &rec(2), &mark(2, 4)]);
        assert_eq!(hole(whole.clone(), 1), None);
        // The newest record gone: its marker names it and its token.
        assert_eq!(
            hole(names(&[&rec(1), &mark(1, 1), &mark(2, 4)]), 1),
            Some((g(2), Some(t(4))))
        );
        // A record gone from the middle: the gap, with or without a marker.
        assert_eq!(
            hole(names(&[&mark(1, 1), &rec(2), &mark(2, 4)]), 1),
            Some((g(1), Some(t(1))))
        );
        assert_eq!(hole(names(&[&rec(2), &rec(3)]), 1), Some((g(1), None)));
        // Listed after a floor of 1: the floor's marker is not a hole there.
        assert_eq!(hole(names(&[&mark(1, 1), &rec(2), &mark(2, 4)]), 2), None);
        assert_eq!(hole(names(&[&mark(1, 1), &rec(3)]), 2), Some((g(2), None)));
        // Records written before markers existed have none: no hole.
        assert_eq!(hole(names(&[&rec(1), &rec(2)]), 1), None);
        assert_eq!(hole(Vec::new(), 1), None);
    }

    // A local token's record is not synced; a host crash
    // may lose the record of an attempt that never committed, and the first
    // epoch after the reboot raises the floor above it, so that token is
    // never handed out again. Without a reboot tokens stay dense.
    #[test]
    fn a_token_lost_in_a_host_crash_is_not_handed_out_again() {
        let (tmp, wh, p) = setup();
        for i in 1..=3 {
            assert_eq!(p.allocate_token(&owner(i)).unwrap().get(), u64::from(i));
        }
        p.commit(sample(1)).unwrap();
        let epochs: Vec<String> = wh.backend().list("_epochs").unwrap();
        assert_eq!(epochs, ["00000000000000000001"], "one epoch per handle");
        // Another handle in the same boot: no raise, the next dense token.
        let same = Warehouse::open(tmp.path()).unwrap().partition("d", "p");
        assert_eq!(same.allocate_token(&owner(4)).unwrap().get(), 4);
        // The host lost power: token 4's record (never committed) is gone,
        // and the epochs were taken on the boot before this one.
        std::fs::remove_file(tmp.path().join("d/p/tokens/00000000000000000004")).unwrap();
        for name in ["00000000000000000001", "00000000000000000002"] {
            let path = tmp.path().join("_epochs").join(name);
            let mut rec: crate::store::epoch::EpochRecord =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            rec.holder.boot_id = Some("the boot before".into());
            std::fs::write(&path, serde_json::to_vec(&rec).unwrap()).unwrap();
        }
        let rebooted = Warehouse::open(tmp.path()).unwrap().partition("d", "p");
        let t = rebooted.allocate_token(&owner(5)).unwrap();
        assert_eq!(t.get(), 3 << 32, "above every token of the boot before");
        // A zombie of the boot before (token 3, alive on another host)
        // loses to it.
        assert_eq!(
            rebooted.commit(sample(t.get())).unwrap().generation.get(),
            2
        );
        assert!(matches!(
            p.commit(sample(3)),
            Err(PublishError::Stale { .. })
        ));
        // And the next handle in this boot inherits the raised floor.
        let next = Warehouse::open(tmp.path()).unwrap().partition("d", "q");
        assert_eq!(next.allocate_token(&owner(1)).unwrap().get(), 3 << 32);
    }

    // A token comes from above the newest record
    // even with tokens/ gone, and its attempt directory starts empty.
    #[test]
    fn tokens_come_from_above_the_log_and_attempts_start_empty() {
        let (tmp, _wh, p) = setup();
        for i in 1..=3 {
            let t = p.allocate_token(&owner(i)).unwrap();
            p.commit(sample(t.get())).unwrap();
        }
        std::fs::remove_dir_all(tmp.path().join("d/p/tokens")).unwrap();
        let stale = tmp.path().join("d/p/attempts/00000000000000000004");
        std::fs::create_dir_all(stale.join("data/sub")).unwrap();
        std::fs::write(stale.join("data/sub/left.csv"), b"x\n").unwrap();
        std::fs::write(stale.join("lease.json"), b"{}").unwrap();
        let t = p.allocate_token(&owner(4)).unwrap();
        assert_eq!(t.get(), 4);
        let dir = p.prepare_attempt(t).unwrap();
        assert_eq!(dir, stale);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        assert_eq!(std::fs::read_dir(dir.join("data")).unwrap().count(), 0);
        assert_eq!(p.commit(sample(t.get())).unwrap().generation.get(), 4);
        // A newest record that goes stops allocation, reads and commits.
        std::fs::remove_file(tmp.path().join("d/p/log/00000000000000000004.json")).unwrap();
        let missing = |e: StoreError| match e {
            StoreError::MissingRecord {
                key,
                generation,
                token,
            } => {
                assert_eq!(key, "d/p/log/00000000000000000004.json");
                (generation.get(), token.map(FencingToken::get))
            }
            other => panic!("expected a missing record, got {other:?}"),
        };
        assert_eq!(missing(p.latest().unwrap_err()), (4, Some(4)));
        assert_eq!(
            missing(p.allocate_token(&owner(5)).unwrap_err()),
            (4, Some(4))
        );
        match p.commit(sample(9)) {
            Err(PublishError::Store(e)) => assert_eq!(missing(e), (4, Some(4))),
            other => panic!("expected a missing record, got {other:?}"),
        }
        assert_eq!(missing(p.history().unwrap_err()), (4, Some(4)));
    }

    // In an object store too, whether this process saw
    // the newest generation (its listing starts there) or not.
    #[test]
    fn remote_newest_record_that_goes_is_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(crate::store::MemoryBackend::default());
        let open = || remote_partition(&backend, tmp.path());
        let p = open();
        for t in [3, 5] {
            p.commit(sample(t)).unwrap();
        }
        backend.delete("d/p/log/00000000000000000002.json").unwrap();
        // The committer kept the record it wrote; its listing shows it gone.
        for (reader, token) in [(p, Some(5)), (open(), Some(5))] {
            match reader.latest() {
                Err(StoreError::MissingRecord {
                    generation,
                    token: t,
                    ..
                }) => assert_eq!((generation.get(), t.map(FencingToken::get)), (2, token)),
                other => panic!("expected a missing record, got {other:?}"),
            }
        }
        assert!(matches!(
            open().commit(sample(9)),
            Err(PublishError::Store(StoreError::MissingRecord { .. }))
        ));
    }

    fn plant(tmp: &tempfile::TempDir, p: &PartitionStore, g: u64, token: u64) {
        let rec = sample(token).into_record(Generation::from_raw(g));
        let key = layout::log_key(&p.prefix().unwrap(), rec.generation);
        let path = key_path(tmp.path(), &key);
        std::fs::write(path, serde_json::to_vec(&rec).unwrap()).unwrap();
    }

    /// A backend whose listing lags: it hides the newest log record, as a
    /// stale directory cache would, so the committer collides with it.
    struct LaggingList(FsBackend);

    impl Backend for LaggingList {
        fn durable(&self) -> Option<&dyn crate::store::DurableDirectories> {
            self.0.durable()
        }

        fn multipart(&self) -> Option<&dyn crate::store::MultipartHygiene> {
            self.0.multipart()
        }

        fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
            self.0.put_if_absent(key, bytes)
        }
        fn put_if_version_matches(
            &self,
            key: &str,
            bytes: &[u8],
            expected: &crate::store::Version,
        ) -> Result<Option<crate::store::Version>, StoreError> {
            self.0.put_if_version_matches(key, bytes, expected)
        }
        fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
            self.0.put(key, bytes)
        }
        fn get_object(&self, key: &str) -> Result<Option<crate::store::Object>, StoreError> {
            self.0.get_object(key)
        }
        fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
            let mut names = self.0.list(prefix)?;
            if prefix.ends_with("/log") {
                names.pop();
            }
            Ok(names)
        }
        fn list_objects(&self, prefix: &str) -> Result<Vec<crate::store::ObjectMeta>, StoreError> {
            self.0.list_objects(prefix)
        }
        fn delete(&self, key: &str) -> Result<(), StoreError> {
            self.0.delete(key)
        }
        fn delete_prefix(&self, prefix: &str) -> Result<(), StoreError> {
            self.0.delete_prefix(prefix)
        }
    }

    use crate::store::FsBackend;

    /// Partition `d/p` of a remote warehouse over `backend`.
    fn remote_partition<B: Backend + 'static>(
        backend: &Arc<B>,
        dir: &std::path::Path,
    ) -> PartitionStore {
        Warehouse::remote(backend.clone(), "s3://b/wh", dir)
            .unwrap()
            .partition("d", "p")
    }

    impl LogListings {
        /// The commit-log reads since the last call.
        fn log_reads(&self) -> usize {
            self.firsts.swap(0, Relaxed)
                + self.whole.swap(0, Relaxed)
                + std::mem::take(&mut *self.after.lock().unwrap()).len()
        }
    }

    /// A memory backend that counts whole listings of a commit log and
    /// records where listings from a name started.
    #[derive(Default)]
    struct LogListings {
        inner: crate::store::MemoryBackend,
        whole: std::sync::atomic::AtomicUsize,
        firsts: std::sync::atomic::AtomicUsize,
        gets: std::sync::atomic::AtomicUsize,
        after: std::sync::Mutex<Vec<String>>,
    }

    impl Backend for LogListings {
        fn durable(&self) -> Option<&dyn crate::store::DurableDirectories> {
            self.inner.durable()
        }

        fn multipart(&self) -> Option<&dyn crate::store::MultipartHygiene> {
            self.inner.multipart()
        }

        fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
            self.inner.put_if_absent(key, bytes)
        }
        fn put_if_version_matches(
            &self,
            key: &str,
            bytes: &[u8],
            expected: &crate::store::Version,
        ) -> Result<Option<crate::store::Version>, StoreError> {
            self.inner.put_if_version_matches(key, bytes, expected)
        }
        fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
            self.inner.put(key, bytes)
        }
        fn get_object(&self, key: &str) -> Result<Option<crate::store::Object>, StoreError> {
            self.gets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.inner.get_object(key)
        }
        fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
            if prefix.ends_with("/log") {
                self.whole
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            self.inner.list(prefix)
        }
        fn list_after(&self, prefix: &str, after: &str) -> Result<Vec<String>, StoreError> {
            self.after.lock().unwrap().push(after.to_owned());
            self.inner.list_after(prefix, after)
        }
        fn list_first_page(&self, prefix: &str) -> Result<Option<Vec<String>>, StoreError> {
            // S3's page: a thousand keys.
            self.firsts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let names = self.inner.list(prefix)?;
            Ok((names.len() < 1000).then_some(names))
        }
        fn list_objects(&self, prefix: &str) -> Result<Vec<crate::store::ObjectMeta>, StoreError> {
            self.inner.list_objects(prefix)
        }
        fn delete(&self, key: &str) -> Result<(), StoreError> {
            self.inner.delete(key)
        }
        fn delete_prefix(&self, prefix: &str) -> Result<(), StoreError> {
            self.inner.delete_prefix(prefix)
        }
    }

    // In an object store the newest generation of a long commit
    // log is found from its checkpoint (one GET and one short LIST), not by
    // listing thousands of records; a lost, stale or garbled checkpoint
    // still finds the newest.
    #[test]
    fn remote_latest_lists_from_the_log_checkpoint() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(LogListings::default());
        let wh = Warehouse::remote(backend.clone(), "s3://b/wh", tmp.path()).unwrap();
        let p = wh.partition("d", "p");
        for t in 1..=2_500 {
            p.commit(sample(t)).unwrap();
        }
        let checkpoint = layout::log_checkpoint_key("d/p");
        assert_eq!(backend.get(&checkpoint).unwrap().unwrap(), b"2000");
        // Another process: it knows nothing yet, so it starts at the
        // checkpoint; then at what it saw.
        let reader = || {
            Warehouse::remote(backend.clone(), "s3://b/wh", tmp.path())
                .unwrap()
                .partition("d", "p")
        };
        let other = reader();
        backend.whole.store(0, std::sync::atomic::Ordering::Relaxed);
        backend.after.lock().unwrap().clear();
        assert_eq!(other.latest().unwrap().unwrap().generation.get(), 2_500);
        assert_eq!(other.latest().unwrap().unwrap().generation.get(), 2_500);
        assert_eq!(backend.whole.load(std::sync::atomic::Ordering::Relaxed), 0);
        assert_eq!(
            *backend.after.lock().unwrap(),
            vec![
                listing_start(Generation::from_raw(2000)),
                listing_start(Generation::from_raw(2500))
            ]
        );
        // A generation committed by someone else after what it saw.
        p.commit(sample(2_501)).unwrap();
        assert_eq!(other.latest().unwrap().unwrap().generation.get(), 2_501);
        // An older checkpoint (a slow committer's) is still a lower bound.
        backend.put(&checkpoint, b"1000").unwrap();
        assert_eq!(reader().latest().unwrap().unwrap().generation.get(), 2_501);
        for garbage in [&b"not a number"[..], b"0"] {
            backend.put(&checkpoint, garbage).unwrap();
            assert_eq!(reader().latest().unwrap().unwrap().generation.get(), 2_501);
        }
        backend.delete(&checkpoint).unwrap();
        assert_eq!(reader().latest().unwrap().unwrap().generation.get(), 2_501);
        assert_eq!(backend.whole.load(std::sync::atomic::Ordering::Relaxed), 3);
        // A checkpoint at the newest generation: nothing after it.
        backend.put(&checkpoint, b"2501").unwrap();
        assert_eq!(reader().latest().unwrap().unwrap().generation.get(), 2_501);
        // And the fence holds across it.
        assert!(matches!(
            p.commit(sample(7)),
            Err(PublishError::Stale { .. })
        ));
        assert_eq!(
            reader().commit(sample(2_502)).unwrap().generation.get(),
            2_502
        );
    }

    // A log that fits one listing page costs its first reader
    // one LIST and one GET (no checkpoint; and one LIST of the dataset
    // the first time the process looks at it, for its layout), and each later look one LIST
    // that starts at the record it read, which it does not read again.
    #[test]
    fn a_short_remote_log_is_one_listing_and_its_record_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(LogListings::default());
        let open = || remote_partition(&backend, tmp.path());
        let writer = open();
        for t in 1..=3 {
            writer.commit(sample(t)).unwrap();
        }
        let counts = || {
            (
                backend.firsts.swap(0, Relaxed),
                backend.whole.swap(0, Relaxed),
                std::mem::take(&mut *backend.after.lock().unwrap()),
                backend.gets.swap(0, Relaxed),
            )
        };
        counts();
        let reader = open();
        assert_eq!(reader.latest().unwrap().unwrap().token.get(), 3);
        // The log's first page, and the dataset's, once per process for
        // its layout.
        assert_eq!(counts(), (2, 0, vec![], 1));
        assert_eq!(reader.latest().unwrap().unwrap().token.get(), 3);
        let start = listing_start(Generation::from_raw(3));
        assert_eq!(counts(), (0, 0, vec![start.clone()], 0));
        // The committer kept what it wrote.
        assert_eq!(writer.latest().unwrap().unwrap().token.get(), 3);
        assert_eq!(counts(), (0, 0, vec![start], 0));
        // A newer generation is read once.
        writer.commit(sample(4)).unwrap();
        counts();
        assert_eq!(reader.latest().unwrap().unwrap().token.get(), 4);
        assert_eq!(counts().3, 1);
        // The kept record's key removed by hand: the listing shows it.
        backend.delete("d/p/log/00000000000000000004.json").unwrap();
        assert!(matches!(
            writer.latest(),
            Err(StoreError::MissingRecord { generation, .. }) if generation.get() == 4
        ));
        assert!(matches!(
            writer.commit(sample(9)),
            Err(PublishError::Store(StoreError::MissingRecord { .. }))
        ));
    }

    // An allocation after this process's own look at the
    // log reads it no more when nobody else can have committed since (no
    // token between the kept record's and the new one), and reads it when
    // another engine's token is there: that engine committed meanwhile, and
    // the allocation says so.
    #[test]
    fn allocation_reads_the_log_only_when_someone_may_have_committed() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(LogListings::default());
        let open = || remote_partition(&backend, tmp.path());
        let log_reads = || backend.log_reads();
        let mine = open();
        let a = mine.allocate(&owner(1)).unwrap();
        assert_eq!((a.token.get(), a.latest.is_none()), (1, true));
        let first = mine.commit(sample(1)).unwrap();
        log_reads();
        let b = mine.allocate(&owner(2)).unwrap();
        assert_eq!(b.token.get(), 2);
        assert_eq!(b.latest.as_ref(), Some(&first));
        assert_eq!(log_reads(), 0, "the kept record is the newest");
        // Another engine takes token 3 and commits it.
        let other = open();
        let c = other.allocate(&owner(3)).unwrap();
        assert_eq!(c.token.get(), 3);
        let theirs = other.commit(sample(3)).unwrap();
        log_reads();
        let d = mine.allocate(&owner(4)).unwrap();
        assert_eq!(d.token.get(), 4);
        assert_eq!(d.latest.as_ref(), Some(&theirs));
        assert_eq!(log_reads(), 1);
    }

    // A reader's pin just after this process's own look at the log (its
    // listing, or its commit) costs no listing; a look older than the
    // bound is not reused, and the listing then shows another engine's
    // commit made since.
    #[test]
    fn a_look_at_the_log_younger_than_the_bound_stands_for_a_pin_and_no_older() {
        use std::time::Duration;
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(LogListings::default());
        let open = || remote_partition(&backend, tmp.path());
        let log_reads = || backend.log_reads();
        let long = Duration::from_secs(600);
        let mine = open();
        mine.allocate(&owner(1)).unwrap();
        let first = mine.commit(sample(1)).unwrap();
        log_reads();
        assert_eq!(mine.latest_within(long).unwrap().as_ref(), Some(&first));
        assert_eq!(log_reads(), 0, "the commit was a look at the log");
        let other = open();
        other.allocate(&owner(2)).unwrap();
        let theirs = other.commit(sample(2)).unwrap();
        log_reads();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            mine.latest_within(Duration::from_millis(10))
                .unwrap()
                .as_ref(),
            Some(&theirs)
        );
        assert_eq!(
            log_reads(),
            1,
            "a look older than the bound is listed again"
        );
        assert_eq!(mine.latest_within(long).unwrap().as_ref(), Some(&theirs));
        assert_eq!(log_reads(), 0, "that listing was a look too");
    }

    // What exec asks instead of which backend: a remote warehouse keeps
    // an attempt's files at their attempt keys and frees the staged copy
    // once published, its token record carries the first lease, and gc
    // finds attempts without a listing of the partition; a local one moves
    // the files to `data-<token>` and keeps them.
    #[test]
    fn each_warehouse_answers_where_an_attempt_publishes() {
        let tmp = tempfile::tempdir().unwrap();
        let remote = Warehouse::remote(
            Arc::new(crate::store::MemoryBackend::new()),
            "s3://b/wh",
            &tmp.path().join("staging"),
        )
        .unwrap()
        .partition("d", "p");
        let (_local_tmp, _wh, local) = setup();
        for (p, in_place) in [(&remote, false), (&local, true)] {
            let claim = p.new_claim(&owner(1), "tag".into(), 60_000);
            assert_eq!(claim.process_tag.is_some(), !in_place);
            let token = p.allocate_for(&claim).unwrap().token;
            let data = p.prepare_attempt(token).unwrap().join(DATA_DIR);
            std::fs::write(data.join("f.csv"), b"a\n").unwrap();
            let moved = p.move_to_published(token).unwrap();
            assert_eq!(moved.is_some(), in_place);
            let files = match &moved {
                Some((_, to)) => to.clone(),
                None => data.clone(),
            };
            assert!(files.join("f.csv").is_file());
            p.release_staged(&files);
            assert_eq!(files.join("f.csv").is_file(), in_place);
            // Evidence is uploaded (remote) or stays in the attempt dir.
            let evidence = format!("{}/candidate.json", p.attempt_key(token));
            p.backend().put(&evidence, b"{}").unwrap();
            assert_eq!(p.attempt_tokens().unwrap(), vec![token]);
        }
    }

    // A backend wrapping a directory backend passes its directories on,
    // or says it has none: it cannot keep the capability and quietly drop
    // the fsyncs a candidate needs before its record names it.
    #[test]
    fn a_wrapped_directory_backend_still_makes_a_candidate_durable() {
        let tmp = tempfile::tempdir().unwrap();
        let p = Warehouse::with_backend(
            Arc::new(LaggingList(FsBackend::new(tmp.path()))),
            tmp.path().to_path_buf(),
        )
        .partition("d", "p");
        let token = p.allocate_token(&owner(1)).unwrap();
        let dir = p.prepare_attempt(token).unwrap();
        std::fs::write(dir.join(DATA_DIR).join("f.csv"), b"a\n").unwrap();
        let (key, to) = p.move_to_published(token).unwrap().expect("a local disk");
        p.make_durable(&key, &["f.csv".to_owned()]).unwrap();
        let synced = crate::store::fs::counted::under(tmp.path());
        for path in [to.join("f.csv"), to.clone(), tmp.path().join("d/p")] {
            assert!(
                synced.contains(&path),
                "{} not fsynced: {synced:?}",
                path.display()
            );
        }
    }

    #[test]
    fn committer_rereads_a_racing_record_then_commits_after_it() {
        let (tmp, _wh, p) = setup();
        p.commit(sample(1)).unwrap();
        // The racer committed generation 2 with token 5 after we listed; we
        // hold token 9, so we must land at generation 3.
        plant(&tmp, &p, 2, 5);
        let lagging = Warehouse::with_backend(
            Arc::new(LaggingList(FsBackend::new(tmp.path()))),
            tmp.path().to_path_buf(),
        )
        .partition("d", "p");
        let rec = lagging.commit(sample(9)).unwrap();
        assert_eq!(rec.generation.get(), 3);
        let tokens: Vec<u64> = p.history().unwrap().iter().map(|r| r.token.get()).collect();
        assert_eq!(tokens, vec![1, 5, 9]);
    }

    #[test]
    fn committer_rereads_a_racing_record_then_is_stale() {
        let (tmp, _wh, p) = setup();
        p.commit(sample(1)).unwrap();
        plant(&tmp, &p, 2, 7);
        let lagging = Warehouse::with_backend(
            Arc::new(LaggingList(FsBackend::new(tmp.path()))),
            tmp.path().to_path_buf(),
        )
        .partition("d", "p");
        match lagging.commit(sample(6)) {
            Err(PublishError::Stale {
                mine,
                committed,
                generation,
            }) => assert_eq!((mine.get(), committed.get(), generation.get()), (6, 7, 2)),
            other => panic!("expected stale, got {other:?}"),
        }
        assert_eq!(p.generations().unwrap().len(), 2);
    }

    #[test]
    fn concurrent_publish_same_partition() {
        let (_tmp, _wh, p) = setup();
        let threads = 8;
        let barrier = Barrier::new(threads);
        let outcomes: Vec<(FencingToken, Result<CommitRecord, PublishError>)> =
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|i| {
                        let (p, barrier) = (p.clone(), &barrier);
                        s.spawn(move || {
                            let t = p.allocate_token(&owner(i as u32)).unwrap();
                            barrier.wait();
                            (t, p.commit(sample(t.get())))
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
        let mut generations = BTreeSet::new();
        for (t, outcome) in &outcomes {
            match outcome {
                Ok(rec) => {
                    assert_eq!(rec.token, *t);
                    assert!(
                        generations.insert(rec.generation.get()),
                        "generation reused"
                    );
                }
                Err(PublishError::Stale {
                    mine, committed, ..
                }) => {
                    assert_eq!(mine, t);
                    assert!(committed > mine);
                }
                Err(e) => panic!("unexpected error {e:?}"),
            }
        }
        let k = generations.len() as u64;
        assert!(k >= 1);
        assert_eq!(generations, (1..=k).collect());
        let history = p.history().unwrap();
        assert_eq!(history.len() as u64, k);
        assert!(history.windows(2).all(|w| w[0].token < w[1].token));
        // The highest token always wins in the end.
        let max = outcomes.iter().map(|(t, _)| *t).max().unwrap();
        assert_eq!(p.latest().unwrap().unwrap().token, max);
    }

    #[test]
    fn commit_rejects_wrong_partition_and_escaping_paths() {
        let (_tmp, wh, p) = setup();
        let q = wh.partition("d", "q");
        assert!(matches!(
            q.commit(sample(1)),
            Err(PublishError::Store(StoreError::WrongPartition { .. }))
        ));
        let mut bad = sample(1);
        bad.attempt_dir = "d/q/attempts/00000000000000000001".into();
        assert!(matches!(
            p.commit(bad),
            Err(PublishError::Store(StoreError::InvalidKey { .. }))
        ));
        let mut bad = sample(1);
        bad.files = vec!["../../../../etc/passwd".into()];
        assert!(matches!(
            p.commit(bad),
            Err(PublishError::Store(StoreError::InvalidKey { .. }))
        ));
        assert_eq!(p.latest().unwrap(), None);
    }

    #[test]
    fn invalid_names_never_touch_the_disk() {
        let (tmp, wh, _p) = setup();
        for (d, part) in [("..", "p"), ("d", ".."), ("d", "a/b"), ("", "p")] {
            let bad = wh.partition(d, part);
            assert!(matches!(
                bad.allocate_token(&owner(1)),
                Err(StoreError::InvalidKey { .. })
            ));
            assert!(bad.prepare_attempt(FencingToken::from_raw(1)).is_err());
            assert!(bad.latest().is_err());
        }
        // Nothing but the space gc keeps aside, made when the warehouse opened.
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != crate::store::full::RESERVE_FILE)
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn corrupt_latest_names_its_key() {
        let (tmp, _wh, p) = setup();
        p.commit(sample(1)).unwrap();
        let path = tmp.path().join("d/p/log/00000000000000000001.json");
        std::fs::write(&path, b"{\"format_version\": 1, \"gen").unwrap();
        match p.latest() {
            Err(StoreError::Corrupt { key, .. }) => {
                assert_eq!(key, "d/p/log/00000000000000000001.json")
            }
            other => panic!("expected corrupt, got {other:?}"),
        }
        assert!(matches!(
            p.commit(sample(2)),
            Err(PublishError::Store(StoreError::Corrupt { .. }))
        ));
    }

    /// A left-over that is not a directory at a fresh token's attempt
    /// name (a file, a link to elsewhere) is replaced by an empty attempt
    /// directory; what a link pointed at is left alone.
    #[test]
    fn a_left_over_file_or_link_at_an_attempts_name_is_replaced() {
        let (tmp, _wh, p) = setup();
        let t = p.allocate_token(&owner(1)).unwrap();
        std::fs::write(p.attempt_dir(t), b"x").unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("keep.csv"), b"k\n").unwrap();
        let t2 = p.allocate_token(&owner(2)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, p.attempt_dir(t2)).unwrap();
        for t in [t, t2] {
            let dir = p.prepare_attempt(t).unwrap();
            assert!(std::fs::symlink_metadata(&dir).unwrap().is_dir());
            let names: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names, [DATA_DIR]);
        }
        assert_eq!(std::fs::read(elsewhere.join("keep.csv")).unwrap(), b"k\n");
    }

    #[test]
    fn attempts_and_visible_files() {
        let (tmp, wh, p) = setup();
        let t = p.allocate_token(&owner(1)).unwrap();
        let dir = p.prepare_attempt(t).unwrap();
        assert_eq!(dir, wh.root().join("d/p/attempts/00000000000000000001"));
        assert_eq!(p.attempt_dir(t), dir);
        assert_eq!(p.attempt_key(t), "d/p/attempts/00000000000000000001");
        std::fs::write(dir.join("data/part-0.csv"), b"a\n").unwrap();
        crate::store::fs::fsync_tree(&dir).unwrap();
        let rec = p.commit(sample(t.get())).unwrap();
        let files = p.visible_files(&rec);
        assert_eq!(files, vec![dir.join("data/part-0.csv")]);
        assert_eq!(std::fs::read(&files[0]).unwrap(), b"a\n");
        // A rollback is a newer record naming the older attempt's files.
        let t2 = p.allocate_token(&owner(2)).unwrap();
        let mut rollback = sample(t2.get());
        rollback.kind = CommitKind::Rollback {
            from_generation: rec.generation,
        };
        rollback.attempt_dir = rec.attempt_dir.clone();
        let rb = p.commit(rollback).unwrap();
        assert_eq!(p.visible_files(&rb), files);
        let t3 = p.allocate_token(&owner(3)).unwrap();
        p.prepare_attempt(t3).unwrap();
        p.remove_attempt(t3).unwrap();
        assert!(!p.attempt_dir(t3).exists());
        assert!(tmp.path().join("d/p/attempts").is_dir());
    }

    #[test]
    fn warehouse_lists_datasets_and_partitions() {
        let (tmp, wh, p) = setup();
        p.allocate_token(&owner(1)).unwrap();
        wh.partition("d", "a").allocate_token(&owner(1)).unwrap();
        wh.partition("e", "x").allocate_token(&owner(1)).unwrap();
        std::fs::create_dir(tmp.path().join("_runs")).unwrap();
        assert_eq!(wh.datasets().unwrap(), vec!["d", "e"]);
        assert_eq!(wh.partitions("d").unwrap(), vec!["a", "p"]);
        assert!(wh.partitions("none").unwrap().is_empty());
        assert!(wh.partitions("..").is_err());
    }

    #[test]
    fn relative_root_becomes_absolute() {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = std::env::current_dir().unwrap();
        let rel = pathdiff(tmp.path(), &cwd);
        let wh = Warehouse::open(&rel).unwrap();
        assert!(wh.root().is_absolute());
        let t = FencingToken::from_raw(1);
        assert!(wh.partition("d", "p").attempt_dir(t).is_absolute());
    }

    /// `target` relative to `base` (both absolute), via `..` segments.
    fn pathdiff(target: &std::path::Path, base: &std::path::Path) -> PathBuf {
        let mut rel = PathBuf::new();
        for _ in base.components().skip(1) {
            rel.push("..");
        }
        rel.extend(target.components().skip(1));
        rel
    }
}
