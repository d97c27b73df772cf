//! Run event logs in the warehouse: the one module that knows their keys.
//!
//! On the filesystem a run's events are one append-only JSON Lines file,
//! `_runs/<run-id>/events.jsonl`, written with one `write` per line on an
//! `O_APPEND` file and fsynced by [`EventWriter::sync`], exactly as before
//! the store owned it.
//!
//! An object store has no append, so on any other backend a run's events
//! are ordered chunks `_runs/<run-id>/events/<seq 20-digit>`, each created
//! once with put-if-absent and never replaced. A writer buffers the lines
//! of plain appends and turns them into the next chunk on [`EventWriter::sync`]
//! and [`EventWriter::flush`] (so a durable emit is stored before it
//! returns), from its own flusher thread once the buffer passes
//! [`CHUNK_BYTES`] or is [`CHUNK_AGE`] old (whether or not more lines
//! come), and when it is dropped. A chunk that could not be stored keeps its
//! lines for the next flush. A chunk's seq found taken is reread: the same bytes
//! are our own create retried after a lost reply (ours, move on), other
//! bytes are another writer's on the same run id (try the next seq). Either
//! way nothing is overwritten and each chunk holds one writer's lines.
//! Readers merge a run's chunks in seq order.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::store::backend::Backend;
use crate::store::error::StoreError;
use crate::store::key::validate_segment;

/// Buffered bytes past which a plain append writes a chunk.
pub const CHUNK_BYTES: usize = 256 * 1024;
/// Age past which the next plain append writes the buffer as a chunk.
pub const CHUNK_AGE: Duration = Duration::from_secs(2);

const RUNS: &str = "_runs";
const LOG_FILE: &str = "events.jsonl";
const CHUNKS: &str = "events";

/// Where a warehouse keeps its runs' event logs.
#[derive(Clone)]
pub enum EventStore {
    /// A local warehouse directory: one append-only file per run.
    Dir(PathBuf),
    /// Any backend: ordered put-if-absent chunks per run.
    Objects(Arc<dyn Backend>),
}

/// A run that has an event log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEntry {
    /// The run id.
    pub id: String,
    /// When its log was last written (the file's mtime, or the store's
    /// timestamp of its newest chunk); `None` if that could not be read.
    pub last_written: Option<jiff::Timestamp>,
}

/// Stored bytes of a run's log, in order: the file, or one chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Where the bytes are (a path, or the chunk's key), for messages.
    pub origin: PathBuf,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// The directory of a run's files in a local warehouse.
pub fn run_dir(warehouse: &Path, run_id: &str) -> PathBuf {
    warehouse.join(RUNS).join(run_id)
}

/// The store's error as an I/O error whose message keeps every cause
/// (an `io::Error` shows only its inner error's own message, and "object
/// store error on KEY" alone does not say what went wrong).
fn store_io(e: &StoreError) -> io::Error {
    io::Error::other(crate::store::chain(e))
}

impl EventStore {
    /// The event logs of a local warehouse directory.
    pub fn dir(root: impl Into<PathBuf>) -> EventStore {
        EventStore::Dir(root.into())
    }

    /// The event logs of a warehouse on any backend.
    pub fn objects(backend: Arc<dyn Backend>) -> EventStore {
        EventStore::Objects(backend)
    }

    /// Where the runs are, for messages.
    pub fn location(&self) -> String {
        match self {
            EventStore::Dir(root) => root.join(RUNS).display().to_string(),
            EventStore::Objects(_) => RUNS.to_owned(),
        }
    }

    fn chunk_prefix(run_id: &str) -> Result<String, StoreError> {
        validate_segment(run_id)?;
        Ok(format!("{RUNS}/{run_id}/{CHUNKS}"))
    }

    /// Opens the writer of `run_id`'s log (appending to it if it exists).
    pub fn open(&self, run_id: &str) -> io::Result<EventWriter> {
        match self {
            EventStore::Dir(root) => {
                let dir = run_dir(root, run_id);
                let path = dir.join(LOG_FILE);
                let open = || {
                    crate::store::fs::create_dir_all_durable(&dir)?;
                    let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
                    // A crash may have torn the last line of a log we now
                    // append to (a run resumed under its id): end it, so only
                    // that line is lost.
                    if ends_torn(&path)? {
                        file.write_all(b"\n")?;
                    }
                    Ok(file)
                };
                // The cause names the log ("Read-only file system" alone does
                // not say where); its kind is kept.
                let file = open().map_err(|e: io::Error| {
                    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
                })?;
                Ok(EventWriter {
                    origin: path,
                    sink: Sink::File(Mutex::new(file)),
                    lost: std::sync::atomic::AtomicBool::new(false),
                })
            }
            EventStore::Objects(backend) => {
                let prefix = Self::chunk_prefix(run_id).map_err(|e| store_io(&e))?;
                let chunks = Arc::new(Chunks {
                    backend: Arc::clone(backend),
                    prefix: prefix.clone(),
                    stored: Mutex::new(Stored {
                        next: 1,
                        listed: false,
                        unsure: None,
                    }),
                    pending: Mutex::new(Pending {
                        bytes: Vec::new(),
                        since: None,
                        failing: false,
                        closed: false,
                    }),
                    wake: Condvar::new(),
                });
                let shared = Arc::clone(&chunks);
                let flusher = std::thread::Builder::new()
                    .name("weir-events".to_owned())
                    .spawn(move || flusher(&shared))?;
                Ok(EventWriter {
                    origin: PathBuf::from(&prefix),
                    sink: Sink::Chunks {
                        chunks,
                        flusher: Some(flusher),
                    },
                    lost: std::sync::atomic::AtomicBool::new(false),
                })
            }
        }
    }

    /// The stored bytes of `run_id`'s log in order; `None` if the run has
    /// no log. A log that exists but cannot be read (EACCES, a directory
    /// where the file belongs) is an error, never "no events".
    pub fn read_run(&self, run_id: &str) -> Result<Option<Vec<Segment>>, StoreError> {
        match self {
            EventStore::Dir(root) => {
                let path = run_dir(root, run_id).join(LOG_FILE);
                match std::fs::read(&path) {
                    Ok(bytes) => Ok(Some(vec![Segment {
                        origin: path,
                        bytes,
                    }])),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(StoreError::io(path)(e)),
                }
            }
            EventStore::Objects(backend) => {
                let Ok(prefix) = Self::chunk_prefix(run_id) else {
                    return Ok(None);
                };
                let mut seqs: Vec<u64> = backend
                    .list(&prefix)?
                    .iter()
                    .filter_map(|n| n.parse::<u64>().ok())
                    .collect();
                if seqs.is_empty() {
                    return Ok(None);
                }
                seqs.sort_unstable();
                let mut segments = Vec::with_capacity(seqs.len());
                for seq in seqs {
                    let key = format!("{prefix}/{seq:020}");
                    // Gone between list and get (gc of the run): skip it.
                    if let Some(bytes) = backend.get(&key)? {
                        segments.push(Segment {
                            origin: PathBuf::from(key),
                            bytes,
                        });
                    }
                }
                Ok(Some(segments))
            }
        }
    }

    /// Every run with a log, in id order (run ids start with their start
    /// time). On the filesystem a run whose `events.jsonl` exists in any
    /// form is listed, so that reading it reports damage.
    pub fn runs(&self) -> Result<Vec<RunEntry>, StoreError> {
        match self {
            EventStore::Dir(root) => {
                let runs = root.join(RUNS);
                let entries = match std::fs::read_dir(&runs) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(e) => return Err(StoreError::io(runs)(e)),
                };
                let mut out: Vec<RunEntry> = entries
                    .filter_map(Result::ok)
                    .filter_map(|e| {
                        let meta = e.path().join(LOG_FILE).metadata().ok()?;
                        let last_written = meta
                            .modified()
                            .ok()
                            .and_then(|t| jiff::Timestamp::try_from(t).ok());
                        Some(RunEntry {
                            id: e.file_name().to_string_lossy().into_owned(),
                            last_written,
                        })
                    })
                    .collect();
                out.sort_by(|a, b| a.id.cmp(&b.id));
                Ok(out)
            }
            EventStore::Objects(backend) => {
                let mut out = Vec::new();
                for id in backend.list(RUNS)? {
                    let Ok(prefix) = Self::chunk_prefix(&id) else {
                        continue;
                    };
                    let chunks = backend.list_objects(&prefix)?;
                    if chunks.is_empty() {
                        continue;
                    }
                    let last_written = chunks.iter().map(|c| c.last_modified).max();
                    out.push(RunEntry { id, last_written });
                }
                out.sort_by(|a, b| a.id.cmp(&b.id));
                Ok(out)
            }
        }
    }
}

fn ends_torn(path: &Path) -> io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = File::open(path)?;
    if f.metadata()?.len() == 0 {
        return Ok(false);
    }
    f.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    f.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// The writer of one run's log.
pub struct EventWriter {
    origin: PathBuf,
    sink: Sink,
    /// A line was lost: a failed write to the file (chunks keep theirs).
    lost: std::sync::atomic::AtomicBool,
}

enum Sink {
    File(Mutex<File>),
    Chunks {
        chunks: Arc<Chunks>,
        /// The thread that stores pending lines once they are
        /// [`CHUNK_AGE`] old or [`CHUNK_BYTES`] long; joined on drop.
        flusher: Option<std::thread::JoinHandle<()>>,
    },
}

/// A run's chunked log, shared by its writer and the writer's flusher.
///
/// Two locks: `pending` (the lines not yet in a chunk) is only ever held
/// to add or take lines, never across a request, so an append never waits
/// for the network; `stored` is held across the store of a chunk, so chunks
/// are stored one at a time, in the order their lines were appended.
struct Chunks {
    backend: Arc<dyn Backend>,
    prefix: String,
    stored: Mutex<Stored>,
    pending: Mutex<Pending>,
    /// Wakes the flusher: a full buffer, or the writer's end.
    wake: Condvar,
}

struct Stored {
    /// The seq the next chunk tries first.
    next: u64,
    /// Whether the run's chunks were listed. A new run's log (every run
    /// but a resumed one) has none, so its first chunk is tried at seq 1
    /// without a listing; a taken seq 1 is a log appended to, listed
    /// then, once, for its last chunk.
    listed: bool,
    /// A chunk whose create failed with an unknown outcome: the next flush
    /// stores exactly these bytes first, so that a create that did land is
    /// recognised as ours (the same bytes) and not stored twice.
    unsure: Option<Vec<u8>>,
}

struct Pending {
    /// Whole lines not yet handed to a chunk.
    bytes: Vec<u8>,
    /// When the oldest of them was appended.
    since: Option<Instant>,
    /// The last flush failed: the flusher retries at its next tick.
    failing: bool,
    /// The writer is gone: the flusher stops.
    closed: bool,
}

/// How often the flusher looks at the pending lines.
const TICK: Duration = Duration::from_millis(250);

/// Pending bytes past which an append stores them itself and reports a
/// failure to (the store refuses chunks and the buffer would only grow).
const MAX_PENDING: usize = 16 * CHUNK_BYTES;

impl Chunks {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores everything appended so far: an unsure chunk again, then the
    /// pending lines as the next free chunk. Lines whose chunk could not be
    /// stored are kept for the next flush, never dropped.
    fn flush(&self) -> Result<(), StoreError> {
        let mut stored = self.stored.lock().unwrap_or_else(PoisonError::into_inner);
        let result = self.flush_locked(&mut stored);
        self.pending().failing = result.is_err();
        result
    }

    fn flush_locked(&self, stored: &mut Stored) -> Result<(), StoreError> {
        if let Some(bytes) = stored.unsure.take() {
            if let Err(e) = self.store(stored, &bytes) {
                stored.unsure = Some(bytes);
                return Err(e);
            }
        }
        let bytes = {
            let mut pending = self.pending();
            pending.since = None;
            std::mem::take(&mut pending.bytes)
        };
        if bytes.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.store(stored, &bytes) {
            stored.unsure = Some(bytes);
            return Err(e);
        }
        Ok(())
    }

    /// Stores `bytes` as the next free chunk from seq `stored.next` on.
    fn store(&self, stored: &mut Stored, bytes: &[u8]) -> Result<(), StoreError> {
        loop {
            let key = format!("{}/{:020}", self.prefix, stored.next);
            if self.backend.put_if_absent(&key, bytes)? {
                break;
            }
            // Taken. The same bytes: our own create, retried after its reply
            // was lost (by us, or inside the backend's client). Other bytes
            // (or gone again): another writer's chunk, so try the next seq,
            // or past the log's last chunk if it was never listed.
            if self.backend.get(&key)?.as_deref() == Some(bytes) {
                break;
            }
            stored.next += 1;
            if !stored.listed {
                let last = self
                    .backend
                    .list(&self.prefix)?
                    .iter()
                    .filter_map(|n| n.parse::<u64>().ok())
                    .max()
                    .unwrap_or(0);
                stored.next = stored.next.max(last + 1);
                stored.listed = true;
            }
        }
        stored.next += 1;
        Ok(())
    }
}

/// The flusher of a chunked log: stores the pending lines once the oldest
/// is [`CHUNK_AGE`] old or they pass [`CHUNK_BYTES`], and retries a failed
/// flush each tick, so that lines reach the store while the run waits on
/// a long command (a kill -9 then loses at most the last [`CHUNK_AGE`]).
/// A thread of its own: a slow store never delays the engine's timers.
fn flusher(chunks: &Chunks) {
    let mut pending = chunks.pending();
    loop {
        if pending.closed {
            return;
        }
        let due = pending.failing
            || pending.bytes.len() >= CHUNK_BYTES
            || pending.since.is_some_and(|s| s.elapsed() >= CHUNK_AGE);
        if due {
            drop(pending);
            // A failure is the caller's to see at its next sync; the lines
            // stay pending and are tried again at the next tick.
            let _ = chunks.flush();
            pending = chunks.pending();
            continue;
        }
        pending = chunks
            .wake
            .wait_timeout(pending, TICK)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

impl EventWriter {
    /// Where the log is (the file, or the run's chunk prefix), for messages.
    pub fn origin(&self) -> &Path {
        &self.origin
    }

    /// Appends whole lines (each ending in `\n`). On the filesystem one
    /// `write`, not fsynced; on chunks buffered until [`EventWriter::sync`],
    /// [`EventWriter::flush`], the flusher thread (after [`CHUNK_AGE`] or
    /// [`CHUNK_BYTES`]) or drop. An error on chunks means the store refused
    /// them for long: the lines are kept and stored by a later flush.
    pub fn append(&self, lines: &[u8]) -> io::Result<()> {
        match &self.sink {
            Sink::File(file) => {
                let written = file
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .write_all(lines);
                if written.is_err() {
                    self.lost.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                written
            }
            Sink::Chunks { chunks, .. } => {
                let mut pending = chunks.pending();
                pending.bytes.extend_from_slice(lines);
                pending.since.get_or_insert_with(Instant::now);
                let size = pending.bytes.len();
                drop(pending);
                if size >= MAX_PENDING {
                    return chunks.flush().map_err(|e| store_io(&e));
                }
                if size >= CHUNK_BYTES {
                    chunks.wake.notify_one();
                }
                Ok(())
            }
        }
    }

    /// Whether a line appended was lost (a failed write to the file); lines
    /// a store refused stay pending, and [`EventWriter::sync`] says whether
    /// they were stored in the end.
    pub fn lost_lines(&self) -> bool {
        self.lost.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Makes everything appended so far outlive this process (a kill -9,
    /// not a power cut): on the filesystem every append already has (its
    /// `write` is in the kernel), on chunks the pending lines are stored.
    pub fn flush(&self) -> io::Result<()> {
        match &self.sink {
            Sink::File(_) => Ok(()),
            Sink::Chunks { chunks, .. } => chunks.flush().map_err(|e| store_io(&e)),
        }
    }

    /// Makes everything appended so far durable: fsync of the file, or the
    /// pending lines stored as a chunk.
    pub fn sync(&self) -> io::Result<()> {
        match &self.sink {
            Sink::File(file) => file
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .sync_data(),
            Sink::Chunks { chunks, .. } => chunks.flush().map_err(|e| store_io(&e)),
        }
    }
}

impl Drop for EventWriter {
    fn drop(&mut self) {
        if let Sink::Chunks { chunks, flusher } = &mut self.sink {
            chunks.pending().closed = true;
            chunks.wake.notify_all();
            if let Some(thread) = flusher.take() {
                let _ = thread.join();
            }
            // Best effort: a writer that could not store its tail already
            // failed a sync or an append the caller saw.
            let _ = chunks.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::InterceptPut;
    use crate::store::MemoryBackend;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn memory() -> (Arc<MemoryBackend>, EventStore) {
        let backend = Arc::new(MemoryBackend::new());
        let store = EventStore::objects(Arc::clone(&backend) as Arc<dyn Backend>);
        (backend, store)
    }

    fn text(store: &EventStore, run: &str) -> String {
        store
            .read_run(run)
            .unwrap()
            .unwrap()
            .iter()
            .map(|s| String::from_utf8(s.bytes.clone()).unwrap())
            .collect()
    }

    // A run's chunks read back in seq order, across writers that
    // reopen the run, and a plain append is buffered until sync or drop.
    #[test]
    fn chunks_read_back_in_order() {
        let (backend, store) = memory();
        let w = store.open("r1").unwrap();
        w.append(b"1\n").unwrap();
        w.append(b"2\n").unwrap();
        assert_eq!(store.read_run("r1").unwrap(), None, "plain appends buffer");
        w.sync().unwrap();
        w.append(b"3\n").unwrap();
        drop(w);
        let w = store.open("r1").unwrap();
        for i in 4..=12 {
            w.append(format!("{i}\n").as_bytes()).unwrap();
            w.sync().unwrap();
        }
        drop(w);
        let want: String = (1..=12).map(|i| format!("{i}\n")).collect();
        assert_eq!(text(&store, "r1"), want);
        // Ten chunks, zero-padded so that seq 10 sorts after seq 9.
        let keys: Vec<String> = backend
            .list_objects("_runs/r1/events")
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(keys.len(), 11);
        assert_eq!(keys[0], "_runs/r1/events/00000000000000000001");
        assert_eq!(keys[10], "_runs/r1/events/00000000000000000011");
        let runs = store.runs().unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].id, "r1");
        assert!(runs[0].last_written.is_some());
    }

    // The durability point: once sync returns, the chunk holding
    // every line appended before it is in the backend.
    #[test]
    fn sync_stores_the_chunk_before_returning() {
        let (backend, store) = memory();
        let w = store.open("r1").unwrap();
        w.append(b"queued\n").unwrap();
        w.append(b"deleting\n").unwrap();
        assert_eq!(
            backend.list("_runs/r1/events").unwrap(),
            Vec::<String>::new()
        );
        w.sync().unwrap();
        assert_eq!(
            backend
                .get("_runs/r1/events/00000000000000000001")
                .unwrap()
                .as_deref(),
            Some(&b"queued\ndeleting\n"[..])
        );
        // Nothing pending: another sync writes no empty chunk.
        w.sync().unwrap();
        assert_eq!(backend.list("_runs/r1/events").unwrap().len(), 1);
    }

    // Two writers on one run id lose no line and never mix lines
    // inside a chunk: a seq found taken by other bytes moves on.
    #[test]
    fn two_writers_on_one_run_lose_nothing() {
        let (backend, store) = memory();
        let writers = [store.open("r1").unwrap(), store.open("r1").unwrap()];
        std::thread::scope(|s| {
            for (w, name) in writers.iter().zip(["a", "b"]) {
                s.spawn(move || {
                    for i in 0..200 {
                        w.append(format!("{name}{i}\n").as_bytes()).unwrap();
                        if i % 3 == 0 {
                            w.sync().unwrap();
                        }
                    }
                    w.sync().unwrap();
                });
            }
        });
        let mut seen: Vec<String> = Vec::new();
        for segment in store.read_run("r1").unwrap().unwrap() {
            let chunk = String::from_utf8(segment.bytes).unwrap();
            let lines: Vec<&str> = chunk.lines().collect();
            let first = &lines[0][..1];
            assert!(
                lines.iter().all(|l| l.starts_with(first)),
                "chunk {} mixes writers: {chunk:?}",
                segment.origin.display()
            );
            seen.extend(lines.iter().map(|l| l.to_string()));
        }
        for name in ["a", "b"] {
            let mine: Vec<&String> = seen.iter().filter(|l| l.starts_with(name)).collect();
            let want: Vec<String> = (0..200).map(|i| format!("{name}{i}")).collect();
            assert_eq!(mine, want.iter().collect::<Vec<_>>(), "writer {name}");
        }
        drop(writers);
        // 67 syncs inside the loop and a last one, each writer.
        assert_eq!(backend.list_objects("_runs/r1").unwrap().len(), 2 * 68);
    }

    // A create that was stored but reported as failed, retried,
    // finds its own bytes and counts them as its chunk: no duplicate lines,
    // no gap.
    #[test]
    fn a_retried_create_of_the_same_bytes_is_ours() {
        // The first put-if-absent stores its bytes, then reports an error: a
        // committed create whose reply was lost.
        let fired = AtomicBool::new(false);
        let backend = InterceptPut::new(move |inner: &MemoryBackend, key: &str, bytes: &[u8]| {
            let created = inner.put_if_absent(key, bytes)?;
            if !fired.swap(true, Ordering::SeqCst) {
                return Err(StoreError::io(key)(io::Error::other("503 after the write")));
            }
            Ok(created)
        });
        let store = EventStore::objects(Arc::clone(&backend) as Arc<dyn Backend>);
        let w = store.open("r1").unwrap();
        w.append(b"gc-deleted\n").unwrap();
        let err = w.sync().unwrap_err();
        let why = crate::store::chain(&err);
        assert!(why.contains("503 after the write"), "{why}");
        w.sync().unwrap();
        w.append(b"next\n").unwrap();
        w.sync().unwrap();
        assert_eq!(text(&store, "r1"), "gc-deleted\nnext\n");
        assert_eq!(
            backend
                .get("_runs/r1/events/00000000000000000002")
                .unwrap()
                .as_deref(),
            Some(&b"next\n"[..])
        );
    }

    // Lines nobody syncs reach the store on the flusher's
    // timer, with no further append: an engine killed while a long command
    // runs keeps them.
    #[test]
    fn pending_lines_are_stored_on_a_timer() {
        let (backend, store) = memory();
        let w = store.open("r1").unwrap();
        w.append(b"published\n").unwrap();
        assert_eq!(store.read_run("r1").unwrap(), None, "not yet");
        let deadline = Instant::now() + CHUNK_AGE + Duration::from_secs(3);
        while backend.list("_runs/r1/events").unwrap().is_empty() {
            assert!(Instant::now() < deadline, "no chunk after {CHUNK_AGE:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(text(&store, "r1"), "published\n");
        // While the writer lives: not its drop.
        w.append(b"next\n").unwrap();
        w.sync().unwrap();
        assert_eq!(text(&store, "r1"), "published\nnext\n");
    }

    /// Memory, except that put-if-absent fails (`lost`: after storing) the
    /// next `fail` times.
    fn flaky(fail: usize, lost: bool) -> (Arc<dyn Backend>, EventStore) {
        let fail = std::sync::atomic::AtomicUsize::new(fail);
        let backend = InterceptPut::new(move |inner: &MemoryBackend, key: &str, bytes: &[u8]| {
            let failing = fail
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if failing && !lost {
                return Err(StoreError::Remote {
                    key: key.to_owned(),
                    source: "HTTP 503 Service Unavailable".into(),
                });
            }
            let created = inner.put_if_absent(key, bytes)?;
            if failing {
                return Err(StoreError::Remote {
                    key: key.to_owned(),
                    source: "HTTP 503 after the write".into(),
                });
            }
            Ok(created)
        });
        let store = EventStore::objects(Arc::clone(&backend) as Arc<dyn Backend>);
        (backend, store)
    }

    // A refused chunk's error says why (the store's
    // cause, not "object store error on KEY" alone), and its lines are kept:
    // the next flush stores them with the lines appended since, in order.
    #[test]
    fn a_refused_chunk_names_its_cause_and_keeps_its_lines() {
        let (_backend, store) = flaky(1, false);
        let w = store.open("r1").unwrap();
        w.append(b"running\n").unwrap();
        let err = w.sync().unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.contains("_runs/r1/events/00000000000000000001")
                && shown.contains("HTTP 503 Service Unavailable"),
            "{shown}"
        );
        w.append(b"success\n").unwrap();
        w.sync().unwrap();
        assert_eq!(text(&store, "r1"), "running\nsuccess\n");
    }

    // A chunk whose create landed but was reported failed
    // is retried with exactly its own bytes, though lines were appended
    // since: found as ours, not stored twice.
    #[test]
    fn an_unsure_chunk_is_retried_alone_and_never_doubled() {
        let (backend, store) = flaky(1, true);
        let w = store.open("r1").unwrap();
        w.append(b"running\n").unwrap();
        assert!(w.sync().is_err());
        w.append(b"success\n").unwrap();
        w.sync().unwrap();
        assert_eq!(text(&store, "r1"), "running\nsuccess\n");
        assert_eq!(backend.list("_runs/r1/events").unwrap().len(), 2);
    }

    // The filesystem keeps one append-only file per run, where
    // existing warehouses have it.
    #[test]
    fn filesystem_keeps_one_file_per_run() {
        let dir = tempfile::tempdir().unwrap();
        let store = EventStore::dir(dir.path());
        let w = store.open("r1").unwrap();
        w.append(b"a\n").unwrap();
        w.append(b"b\n").unwrap();
        let path = dir.path().join("_runs/r1/events.jsonl");
        assert_eq!(w.origin(), path);
        assert_eq!(std::fs::read(&path).unwrap(), b"a\nb\n");
        let segments = store.read_run("r1").unwrap().unwrap();
        assert_eq!(segments.len(), 1);
        assert_eq!(store.read_run("r2").unwrap(), None);
        assert_eq!(store.runs().unwrap()[0].id, "r1");
    }

    // On the filesystem a run whose log is damaged (a directory
    // where the file belongs) is listed and its read fails naming the file:
    // damage is not "no events".
    #[test]
    fn a_damaged_log_file_is_an_error_not_absence() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("_runs/r9/events.jsonl");
        std::fs::create_dir_all(&log).unwrap();
        let store = EventStore::dir(dir.path());
        assert_eq!(store.runs().unwrap()[0].id, "r9");
        match store.read_run("r9") {
            Err(StoreError::Io { path, source }) => {
                assert_eq!(path, log);
                assert_eq!(source.raw_os_error(), Some(libc::EISDIR));
            }
            other => panic!("expected EISDIR on the log, got {other:?}"),
        }
    }
}
