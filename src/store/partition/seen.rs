//! What this process has seen of a remote warehouse's commit logs: the
//! newest generation of each partition it looked at, when a request last
//! proved it newest, and that generation's record or the summary its
//! publication marker carries. A look of a whole dataset fills it for many
//! partitions in a few requests.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::store::backend::Backend;
use crate::store::error::StoreError;
use crate::store::layout;
use crate::store::log::CommitRecord;
use crate::store::summary::Summary;
use crate::store::token::{FencingToken, Generation};

/// A partition's newest generation as a look at its log found it.
#[derive(Debug, Clone)]
pub enum Look {
    /// The log is empty.
    Empty,
    /// The newest record, read (or kept by this process).
    Record(Box<CommitRecord>),
    /// The newest generation, as its publication marker summarises it; its
    /// record was not read.
    Summary(Summary),
}

/// The newest generation a process has seen committed in each partition
/// of a remote warehouse. A checkpoint read from the store can be older
/// than the truth, never newer, and so is every entry here.
/// An entry of `None` says the log was empty when last looked at (so the
/// checkpoint need not be read again).
///
/// Beside it, the record of the newest generation this process read or
/// committed there, or its marker's summary, for as many partitions as
/// [`KEPT_RECORDS`]: records are never rewritten, so a listing that shows
/// no newer generation proves the kept copy is the latest without reading
/// it again.
#[derive(Clone, Default)]
pub(crate) struct SeenGenerations(Arc<std::sync::Mutex<Seen>>);

#[derive(Default)]
pub(crate) struct Seen {
    newest: HashMap<String, Option<Generation>>,
    records: HashMap<String, CommitRecord>,
    summaries: HashMap<String, Summary>,
    /// When a request of this process last proved a generation newest, or
    /// the log empty (sent at that moment): a listing, or its own commit.
    confirmed: HashMap<String, (Option<Generation>, Instant)>,
}

/// Records kept per process: a bound on memory for an engine that walks a
/// million partitions (the kept ones are dropped all at once past it; they
/// are only a saving).
const KEPT_RECORDS: usize = 4096;

/// Inserts into a bounded map: past [`KEPT_RECORDS`] entries, it starts
/// over (what is kept is only a saving).
fn insert_bounded<V>(map: &mut HashMap<String, V>, key: &str, value: V) {
    if map.len() >= KEPT_RECORDS && !map.contains_key(key) {
        map.clear();
    }
    map.insert(key.to_owned(), value);
}

/// Keeps `value` for `key` unless a newer generation's is kept already.
fn keep_newer<V>(
    map: &mut HashMap<String, V>,
    key: &str,
    value: V,
    generation: impl Fn(&V) -> Generation,
) {
    if map
        .get(key)
        .is_some_and(|kept| generation(kept) >= generation(&value))
    {
        return;
    }
    insert_bounded(map, key, value);
}

impl SeenGenerations {
    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `None` if this process has not looked at the partition's log yet.
    pub(super) fn get(&self, prefix: &str) -> Option<Option<Generation>> {
        self.lock().newest.get(prefix).copied()
    }

    pub(super) fn saw(&self, prefix: &str, g: Option<Generation>) {
        let mut seen = self.lock();
        let entry = seen.newest.entry(prefix.to_owned()).or_insert(g);
        *entry = (*entry).max(g);
    }

    /// The kept record of generation `g`, if it is the one kept.
    pub(super) fn record(&self, prefix: &str, g: Generation) -> Option<CommitRecord> {
        self.lock()
            .records
            .get(prefix)
            .filter(|r| r.generation == g)
            .cloned()
    }

    /// The kept summary of generation `g`, if it is the one kept.
    pub(super) fn summary(&self, prefix: &str, g: Generation) -> Option<Summary> {
        self.lock()
            .summaries
            .get(prefix)
            .filter(|s| s.generation == g)
            .cloned()
    }

    /// `g` was the newest generation (`None`: the log was empty) at `at`
    /// (a moment before the request that showed it was sent).
    pub(super) fn confirmed(&self, prefix: &str, g: Option<Generation>, at: Instant) {
        let mut seen = self.lock();
        let newer = match seen.confirmed.get(prefix) {
            Some(&entry) => (g, at) > entry,
            None => true,
        };
        if newer {
            insert_bounded(&mut seen.confirmed, prefix, (g, at));
        }
    }

    /// The newest generation (`None`: the log was empty) as a request
    /// sent at most `max_age` ago found it, if no newer one has been seen
    /// since.
    pub(super) fn fresh(&self, prefix: &str, max_age: Duration) -> Option<Option<Generation>> {
        let seen = self.lock();
        let &(g, at) = seen.confirmed.get(prefix)?;
        let newest = seen.newest.get(prefix).copied()?;
        (g == newest && at.elapsed() <= max_age).then_some(g)
    }

    /// Drops the kept record, summary and look of a partition.
    pub(super) fn forget(&self, prefix: &str) {
        let mut seen = self.lock();
        seen.records.remove(prefix);
        seen.summaries.remove(prefix);
        seen.confirmed.remove(prefix);
    }

    /// Keeps `rec` unless a newer generation's record is kept already.
    pub(super) fn keep(&self, prefix: &str, rec: &CommitRecord) {
        let mut seen = self.lock();
        keep_newer(&mut seen.records, prefix, rec.clone(), |r| r.generation);
    }

    /// Keeps the summary of a generation a listing showed newest.
    pub(super) fn keep_summary(&self, prefix: &str, summary: Summary) {
        let mut seen = self.lock();
        keep_newer(&mut seen.summaries, prefix, summary, |s| s.generation);
    }

    /// Notes what one listing of a partition's log (`names`, from `floor`
    /// on) shows newest, as of `asked`; a hole in it (a record that went)
    /// is returned and drops what was kept of the partition, so that a
    /// commit lists it again.
    pub(super) fn note_listing(
        &self,
        prefix: &str,
        names: &[String],
        floor: Option<Generation>,
        asked: Instant,
    ) -> Result<Option<Generation>, (Generation, Option<FencingToken>)> {
        let listing = LogListing::parse(names);
        if let Some(hole) = listing.hole(floor.unwrap_or(Generation::FIRST)) {
            self.forget(prefix);
            return Err(hole);
        }
        let newest = listing.newest().or(floor);
        self.saw(prefix, newest);
        if let Some(summary) = newest.and_then(|g| listing.summary(g)) {
            self.keep_summary(prefix, summary);
        }
        self.confirmed(prefix, newest, asked);
        Ok(newest)
    }
}

/// One listing of `log/`: the records' generations, ascending, and the
/// publication markers (generation, token), with their summaries.
pub(super) struct LogListing {
    pub(super) records: Vec<Generation>,
    markers: Vec<(Generation, FencingToken)>,
    summaries: Vec<Summary>,
}

impl LogListing {
    pub(super) fn parse(names: &[String]) -> LogListing {
        let mut records: Vec<Generation> = names
            .iter()
            .filter_map(|n| layout::parse_log_name(n))
            .collect();
        records.sort_unstable();
        records.dedup();
        let mut markers = Vec::new();
        let mut summaries = Vec::new();
        for (g, t, suffix) in names.iter().filter_map(|n| layout::parse_published_name(n)) {
            markers.push((g, t));
            summaries.extend(Summary::parse_suffix(g, t, suffix));
        }
        LogListing {
            records,
            markers,
            summaries,
        }
    }

    /// The newest record listed.
    pub(super) fn newest(&self) -> Option<Generation> {
        self.records.last().copied()
    }

    /// The summary generation `g`'s marker carries, if listed.
    pub(super) fn summary(&self, g: Generation) -> Option<Summary> {
        self.summaries.iter().find(|s| s.generation == g).cloned()
    }

    /// The lowest generation from `first` on that was committed and whose
    /// record is not listed: a gap in `first, first+1, ...` up to the
    /// newest record, or a marker from `first` on without its record.
    /// Generations are assigned one after the other and records are never
    /// deleted, so either is a record that went.
    pub(super) fn hole(&self, first: Generation) -> Option<(Generation, Option<FencingToken>)> {
        let token_of = |g: Generation| self.markers.iter().find(|(m, _)| *m == g).map(|&(_, t)| t);
        let mut expected = first;
        let mut gap = None;
        for &g in &self.records {
            if g != expected {
                gap = Some(expected);
                break;
            }
            expected = expected.next();
        }
        let orphan = self
            .markers
            .iter()
            .filter(|(g, _)| *g >= first && self.records.binary_search(g).is_err())
            .map(|&(g, _)| g)
            .min();
        let hole = match (gap, orphan) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some((hole, token_of(hole)))
    }
}

/// Looks at the commit logs of `partitions` of `dataset` in one listing of
/// the dataset (its pages from the first of them on, at most `max_keys`
/// keys), as of the moment it was sent: each partition the listing covers
/// whole gets its newest generation noted, with its marker's summary, as a
/// listing of its own log would have. Returns how many were covered. A partition the listing
/// stops inside of, or whose log has a hole, is left to its own listing.
/// `dataset` is the key its partitions' directories are listed under
/// (`<dataset>/_weir` for a table keeping them there).
pub(crate) fn look_dataset(
    backend: &dyn Backend,
    seen: &SeenGenerations,
    dataset: &str,
    partitions: &[&str],
    max_keys: usize,
) -> Result<usize, StoreError> {
    look(backend, seen, dataset, partitions, max_keys, false).map(|(covered, _)| covered)
}

/// [`look_dataset`] of a dataset whose layout this process does not know,
/// as if its partitions were at its top: how many it covered, and what
/// the same listing shows of its layout: a key under `_weir/` or a
/// partition's at the top; `Some(None)` for a dataset with no key at all
/// (a request of one key more when the listing started past its first).
pub(crate) fn look_and_learn(
    backend: &dyn Backend,
    seen: &SeenGenerations,
    dataset: &str,
    partitions: &[&str],
    max_keys: usize,
) -> Result<(usize, Option<Option<super::DatasetLayout>>), StoreError> {
    look(backend, seen, dataset, partitions, max_keys, true)
}

fn look(
    backend: &dyn Backend,
    seen: &SeenGenerations,
    dataset: &str,
    partitions: &[&str],
    max_keys: usize,
    learn: bool,
) -> Result<(usize, Option<Option<super::DatasetLayout>>), StoreError> {
    let asked = Instant::now();
    let base = format!("{dataset}/");
    let prefixes: Vec<String> = partitions
        .iter()
        .map(|p| layout::partition_prefix(dataset, p))
        .collect();
    // From the first partition asked about: a run of the newest few of a
    // long history does not page through the oldest.
    let after = prefixes
        .iter()
        .map(|prefix| &prefix[base.len()..])
        .min()
        .unwrap_or_default();
    let (keys, whole) = backend.list_keys(dataset, after, max_keys)?;
    let mut logs: HashMap<&str, Vec<String>> = HashMap::new();
    for key in &keys {
        let Some(rest) = key.strip_prefix(&base) else {
            continue;
        };
        if let Some((partition, name)) = rest.split_once("/log/") {
            if !name.contains('/') {
                logs.entry(partition).or_default().push(name.to_owned());
            }
        }
    }
    let last = keys.last().map(String::as_str).unwrap_or_default();
    let mut covered = 0;
    for prefix in &prefixes {
        let dir = format!("{prefix}/");
        if !whole && (dir.as_str() >= last || last.starts_with(&dir)) {
            continue;
        }
        let names = logs
            .get(&prefix[base.len()..])
            .map_or(&[][..], Vec::as_slice);
        if seen.note_listing(prefix, names, None, asked).is_ok() {
            covered += 1;
        }
    }
    let tops = keys
        .iter()
        .filter_map(|k| k.strip_prefix(&base)?.split_once('/'))
        .map(|(top, _)| top);
    let mut learned = None;
    for top in tops {
        if top == layout::TABLE_STATE_DIR {
            learned = Some(Some(super::DatasetLayout::TableState));
            break;
        }
        if top != "_delta_log" && crate::store::key::decode_partition(top).is_some() {
            learned = Some(Some(super::DatasetLayout::Plain));
        }
    }
    if learn && learned.is_none() && whole && keys.is_empty() {
        // Nothing from the first partition asked about on; a dataset with
        // no key at all is one with no partition, whose first writer
        // chooses (a view of part of it could miss older partitions).
        let empty = after.is_empty() || backend.list_keys(dataset, "", 1)?.0.is_empty();
        if empty {
            learned = Some(None);
        }
    }
    Ok((covered, learned))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    use super::*;
    use crate::store::error::PublishError;
    use crate::store::log::tests::sample;
    use crate::store::log::NewCommit;
    use crate::store::{MemoryBackend, ObjectMeta, Warehouse};

    /// A memory store that counts the requests an object store would get.
    #[derive(Default)]
    struct Counted {
        inner: MemoryBackend,
        requests: AtomicUsize,
    }

    impl Counted {
        fn take(&self) -> usize {
            self.requests.swap(0, Relaxed)
        }
        fn count(&self) {
            self.requests.fetch_add(1, Relaxed);
        }
    }

    impl Backend for Counted {
        fn durable(&self) -> Option<&dyn crate::store::DurableDirectories> {
            self.inner.durable()
        }

        fn multipart(&self) -> Option<&dyn crate::store::MultipartHygiene> {
            self.inner.multipart()
        }

        fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
            self.count();
            self.inner.put_if_absent(key, bytes)
        }
        fn put_if_version_matches(
            &self,
            key: &str,
            bytes: &[u8],
            expected: &crate::store::Version,
        ) -> Result<Option<crate::store::Version>, StoreError> {
            self.count();
            self.inner.put_if_version_matches(key, bytes, expected)
        }
        fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
            self.count();
            self.inner.put(key, bytes)
        }
        fn get_object(&self, key: &str) -> Result<Option<crate::store::Object>, StoreError> {
            self.count();
            self.inner.get_object(key)
        }
        fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
            self.count();
            self.inner.list(prefix)
        }
        fn list_objects(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
            self.count();
            self.inner.list_objects(prefix)
        }
        fn delete(&self, key: &str) -> Result<(), StoreError> {
            self.count();
            self.inner.delete(key)
        }
        fn delete_prefix(&self, prefix: &str) -> Result<(), StoreError> {
            self.count();
            self.inner.delete_prefix(prefix)
        }
    }

    /// A new engine on the same bucket: it has seen nothing.
    fn engine(backend: &Arc<Counted>, dir: &std::path::Path) -> Warehouse {
        Warehouse::remote(backend.clone(), "s3://b/wh", dir).unwrap()
    }

    fn commit_at(partition: &str, token: u64, snapshot: &str) -> NewCommit {
        let mut c = sample(token);
        c.partition = partition.to_owned();
        c.attempt_dir = format!(
            "d/{partition}/attempts/{}",
            crate::store::FencingToken::from_raw(token).key_name()
        );
        c.digest = format!("sha256:{token:02x}");
        c.input_snapshot_digest = snapshot.to_owned();
        c.code_fingerprint = Some("fp".to_owned());
        c
    }

    // One listing of a dataset tells every partition's
    // newest generation and whether it is current, from the summaries its
    // publication markers carry, with no read of any record; a partition
    // with no log is known empty; what a newer commit changes is seen once
    // the look is older than the age a caller accepts.
    #[test]
    fn a_dataset_look_proves_partitions_current_without_reading_records() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(Counted::default());
        let writer = engine(&backend, tmp.path());
        for (i, p) in ["a", "b", "c"].into_iter().enumerate() {
            writer
                .partition("d", p)
                .commit(commit_at(p, i as u64 + 1, "sha256:11"))
                .unwrap();
        }
        writer
            .partition("d", "b")
            .commit(commit_at("b", 9, "sha256:22"))
            .unwrap();
        let reader = engine(&backend, tmp.path());
        backend.take();
        let partitions = ["a", "b", "c", "none"];
        assert_eq!(reader.look_dataset("d", &partitions, 1000).unwrap(), 4);
        assert_eq!(backend.take(), 1, "one listing, which shows the layout too");
        let age = Duration::from_secs(60);
        let look = |p: &str| reader.partition("d", p).look_within(age).unwrap();
        let Look::Summary(b) = look("b") else {
            panic!("{:?}", look("b"))
        };
        assert_eq!((b.generation.get(), b.token.get()), (2, 9));
        assert_eq!(b.digest, "sha256:09");
        assert!(b.is_current("sha256:22", "v1", "fp"));
        assert!(!b.is_current("sha256:11", "v1", "fp"));
        assert!(matches!(look("a"), Look::Summary(s) if s.is_current("sha256:11", "v1", "fp")));
        assert!(matches!(look("none"), Look::Empty));
        assert_eq!(backend.take(), 0, "no record read, no log listed");
        // Another engine commits; a look this old no longer stands.
        writer
            .partition("d", "a")
            .commit(commit_at("a", 10, "sha256:33"))
            .unwrap();
        backend.take();
        assert!(matches!(look("a"), Look::Summary(s) if s.generation.get() == 1));
        let fresh = reader
            .partition("d", "a")
            .look_within(Duration::ZERO)
            .unwrap();
        assert!(
            matches!(fresh, Look::Summary(s) if s.generation.get() == 2 && s.token.get() == 10)
        );
        assert_eq!(backend.take(), 1, "one listing of its log, no record read");
    }

    // A listing cut short by its page budget covers only the partitions
    // whose keys all came before its last key: the one it stopped inside
    // of, and those after, are left to a listing of their own log.
    #[test]
    fn a_look_cut_short_covers_only_whole_partitions() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(Counted::default());
        let writer = engine(&backend, tmp.path());
        for (i, p) in ["a", "b", "c"].into_iter().enumerate() {
            let store = writer.partition("d", p);
            store.commit(commit_at(p, 2 * i as u64 + 1, "s")).unwrap();
            store.commit(commit_at(p, 2 * i as u64 + 2, "s")).unwrap();
        }
        // a: two records and two markers; b's first record ends the page.
        let reader = engine(&backend, tmp.path());
        assert_eq!(reader.look_dataset("d", &["a", "b", "c"], 5).unwrap(), 1);
        backend.take();
        let look = |p: &str| {
            reader
                .partition("d", p)
                .look_within(Duration::from_secs(60))
        };
        assert!(matches!(look("a").unwrap(), Look::Summary(s) if s.generation.get() == 2));
        assert_eq!(backend.take(), 0);
        assert!(matches!(look("b").unwrap(), Look::Summary(s) if s.generation.get() == 2));
        assert_eq!(backend.take(), 1, "b lists its own log");
        // The listing starts at the first partition asked about: the
        // newest few of a long history are one page.
        let newest = engine(&backend, tmp.path());
        assert_eq!(newest.look_dataset("d", &["c"], 5).unwrap(), 1);
        backend.take();
        let c = newest
            .partition("d", "c")
            .look_within(Duration::from_secs(60));
        assert!(matches!(c.unwrap(), Look::Summary(s) if s.token.get() == 6));
        assert_eq!(backend.take(), 0);
    }

    // A hole in a partition's log (a record deleted by hand) is not
    // covered by the dataset's look: its own listing then reports it.
    #[test]
    fn a_log_with_a_hole_is_left_to_its_own_listing() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(Counted::default());
        let writer = engine(&backend, tmp.path());
        let store = writer.partition("d", "a");
        store.commit(commit_at("a", 1, "s")).unwrap();
        store.commit(commit_at("a", 2, "s")).unwrap();
        backend
            .delete(&layout::log_key("d/a", Generation::from_raw(2)))
            .unwrap();
        let reader = engine(&backend, tmp.path());
        assert_eq!(reader.look_dataset("d", &["a"], 1000).unwrap(), 0);
        assert!(matches!(
            reader
                .partition("d", "a")
                .look_within(Duration::from_secs(60)),
            Err(StoreError::MissingRecord { generation, .. }) if generation.get() == 2
        ));
    }

    // A marker whose summary would make its name longer than a key's
    // segment may be (a long run id) goes without one: the record is read.
    #[test]
    fn a_marker_too_long_for_a_summary_goes_without_one() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(Counted::default());
        let writer = engine(&backend, tmp.path());
        let mut long = commit_at("a", 1, "s");
        long.run_id = "r".repeat(128);
        long.digest = format!("sha256:{}", "ab".repeat(32));
        writer.partition("d", "a").commit(long).unwrap();
        let names = backend.list("d/a/log").unwrap();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names
            .iter()
            .all(|n| n.len() <= crate::store::MAX_SEGMENT_BYTES));
        let reader = engine(&backend, tmp.path());
        assert_eq!(reader.look_dataset("d", &["a"], 1000).unwrap(), 1);
        backend.take();
        let look = reader
            .partition("d", "a")
            .look_within(Duration::from_secs(60));
        assert!(matches!(look.unwrap(), Look::Record(r) if r.run_id.len() == 128));
        assert_eq!(backend.take(), 1, "its record is read");
    }

    // A commit puts the generation after the newest its
    // process saw without listing the log, and stays fenced: another
    // engine's commit since makes the put collide, the log is listed, and
    // a token older than the committed one is refused.
    #[test]
    fn a_commit_without_a_listing_is_still_fenced() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(Counted::default());
        let (a, b) = (engine(&backend, tmp.path()), engine(&backend, tmp.path()));
        let (pa, pb) = (a.partition("d", "p"), b.partition("d", "p"));
        pa.commit(commit_at("p", 1, "s")).unwrap();
        backend.take();
        // Nobody else committed: one put of the record and its marker.
        assert_eq!(
            pa.commit(commit_at("p", 2, "s")).unwrap().generation.get(),
            2
        );
        assert_eq!(backend.take(), 2, "no listing");
        // B commits generation 3 (token 6); A's put of 3 collides.
        assert_eq!(
            pb.commit(commit_at("p", 6, "s")).unwrap().generation.get(),
            3
        );
        match pa.commit(commit_at("p", 5, "s")) {
            Err(PublishError::Stale {
                mine, committed, ..
            }) => assert_eq!((mine.get(), committed.get()), (5, 6)),
            other => panic!("{other:?}"),
        }
        // A newer token after the collision goes on, at generation 4.
        assert_eq!(
            pa.commit(commit_at("p", 7, "s")).unwrap().generation.get(),
            4
        );
        // A token not above the one this process kept is refused at once.
        backend.take();
        assert!(matches!(
            pa.commit(commit_at("p", 7, "s")),
            Err(PublishError::Stale { .. })
        ));
        assert_eq!(backend.take(), 0);
        let gens: Vec<u64> = a
            .partition("d", "p")
            .history()
            .unwrap()
            .iter()
            .map(|r| r.token.get())
            .collect();
        assert_eq!(gens, vec![1, 2, 6, 7]);
    }
}
