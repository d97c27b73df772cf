//! One partition's slice of the warehouse: token allocation, attempt dirs
//! and the fenced commit log.
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
//!  log/<g>.json, newest   log/<g>.published-<t>, written   latest(), history() and
//!                         by the commit beside the record,  commit() fail with
//!                         listed with the records          MissingRecord (exit 5):
//!  log/<g>.json, older    the gap: generations are 1..n    nothing read past it,
//!                         with none missing                nothing committed over it
//!  both record and marker PUBLISHED events in _runs/       `status --check` names it
//! ```
//!
//! The marker costs nothing to read (the listing that finds the newest
//! record shows it) and one write per commit, made after the record lands:
//! a marker never names a record that was not committed. Losing the marker
//! alone (a crash right after the commit) only takes one witness away.
//! Allocation reads the newest record, so a log with a hole allocates no
//! token either (one just taken when the hole is found is left unused): a
//! partition in doubt stays as it is until a person restores the record.

use std::path::PathBuf;
use std::sync::Arc;

use crate::store::allocation::{TokenOwner, TokenRecord};
use crate::store::backend::Backend;
use crate::store::error::{PublishError, StoreError};
use crate::store::fs::create_dir_all_durable;
use crate::store::key::{key_path, validate_segment};
use crate::store::layout::{self, DATA_DIR};
use crate::store::leases::Lease;
use crate::store::log::{parse_record, path_problem, CommitRecord, NewCommit};
use crate::store::token::{FencingToken, Generation};

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
    dataset: String,
    partition: String,
    /// `<dataset>/<partition>`, the prefix of every key here.
    prefix: String,
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
    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        root: PathBuf,
        remote: Option<String>,
        seen: SeenGenerations,
        dataset: &str,
        partition: &str,
    ) -> PartitionStore {
        PartitionStore {
            backend,
            root,
            remote,
            seen,
            dataset: dataset.to_owned(),
            partition: partition.to_owned(),
            prefix: layout::partition_prefix(dataset, partition),
        }
    }

    /// Whether published files live in the backend, not under the local root.
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// Where the record's `i`th file is published, for people: its path,
    /// or its URL in an object store.
    pub fn file_location(&self, rec: &CommitRecord, i: usize) -> PathBuf {
        let name = rec.files.get(i).map_or("", String::as_str);
        self.location(&format!("{}/{DATA_DIR}/{name}", rec.attempt_dir))
    }

    /// Where an attempt's files are, for people: its directory, or its
    /// URL in the object store.
    pub fn attempt_location(&self, token: FencingToken) -> PathBuf {
        self.location(&self.attempt_key(token))
    }

    /// Where generation `g`'s commit record is, for people: its path, or
    /// its URL in an object store.
    pub fn record_location(&self, g: Generation) -> PathBuf {
        self.location(&layout::log_key(&self.prefix, g))
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

    /// Durable, strictly increasing per partition, never reused across
    /// runs/processes/restarts: list `tokens/`, take max+1, but never at or
    /// below the latest commit record's token, put-if-absent; if taken,
    /// relist and try the next free one. The first token is 1.
    ///
    /// Token records are never garbage-collected: the highest one is the
    /// partition's counter. The log is its floor: with `tokens/` lost (a
    /// hand `rm`, a lifecycle rule, a partial restore) a count restarting
    /// at 1 would hand out tokens every commit refuses as stale, or a token
    /// whose attempt directory a record names. A log with a hole
    /// ([`PartitionStore::latest`] refuses it) allocates nothing.
    pub fn allocate_token(&self, owner: &TokenOwner) -> Result<FencingToken, StoreError> {
        self.allocate(owner).map(|a| a.token)
    }

    /// [`PartitionStore::allocate_token`], with what the allocation saw:
    /// the latest record read after the token was taken, and the tokens
    /// listed before it. An attempt needs both next (has anyone published
    /// meanwhile; whose attempts are live below mine), so it reads neither
    /// again.
    ///
    /// The log's floor: when this process has looked at the partition's
    /// log, the newest record it kept, if any (any committed record is a
    /// lower bound: tokens only grow along the log); else read before the
    /// token. Either way the log is read again
    /// after the token is taken, and a token not above the newest record
    /// then (a floor that was behind) is left unused and allocation goes on
    /// above that record.
    pub fn allocate(&self, owner: &TokenOwner) -> Result<Allocation, StoreError> {
        self.check()?;
        let record = TokenRecord::new(owner);
        let bytes = serde_json::to_vec(&record).map_err(|e| StoreError::Corrupt {
            key: layout::tokens_prefix(&self.prefix),
            message: format!("cannot encode token record: {e}"),
        })?;
        // The partition's skeleton (tokens/, attempts/, log/) in one
        // durable step, before the first key under it.
        self.backend.prepare_dirs(&self.prefix, &layout::SKELETON)?;
        let looked = self.remote.is_some() && self.seen.get(&self.prefix).is_some();
        let floor_from = match looked {
            true => self.seen.newest_record(&self.prefix),
            false => self.latest()?,
        };
        let mut floor = match floor_from {
            Some(rec) => self.above(&rec)?,
            None => FencingToken::from_raw(1),
        };
        let (mut below, next) = self.listed_tokens()?;
        let mut candidate = next.max(floor);
        loop {
            let key = layout::token_key(&self.prefix, candidate);
            if self.backend.put_if_absent(&key, &bytes)? {
                let latest = self.latest()?;
                match &latest {
                    Some(rec) if rec.token >= candidate => floor = self.above(rec)?,
                    _ => {
                        return Ok(Allocation {
                            token: candidate,
                            latest,
                            below,
                        })
                    }
                }
            }
            // Relisting can jump past several racers at once; the `max`
            // guards against a listing that lags behind what we just saw.
            let (listed, next) = self.listed_tokens()?;
            below = listed;
            candidate = next.max(candidate.next()).max(floor);
        }
    }

    /// The first token above `rec`'s.
    fn above(&self, rec: &CommitRecord) -> Result<FencingToken, StoreError> {
        if rec.token.get() == u64::MAX {
            return Err(StoreError::Corrupt {
                key: layout::log_key(&self.prefix, rec.generation),
                message: "token space exhausted".to_owned(),
            });
        }
        Ok(rec.token.next())
    }

    /// The highest token allocated so far, if any: the newest attempt.
    pub fn latest_token(&self) -> Result<Option<FencingToken>, StoreError> {
        self.check()?;
        let names = self.backend.list(&layout::tokens_prefix(&self.prefix))?;
        Ok(names
            .iter()
            .rev()
            .find_map(|n| FencingToken::parse_key_name(n)))
    }

    /// Every allocated token, ascending.
    pub fn tokens(&self) -> Result<Vec<FencingToken>, StoreError> {
        self.check()?;
        let names = self.backend.list(&layout::tokens_prefix(&self.prefix))?;
        Ok(names
            .iter()
            .filter_map(|n| FencingToken::parse_key_name(n))
            .collect())
    }

    /// Claims the takeover of the attempt holding `stale` (its lease expired
    /// or its engine died): put-if-absent of `claims/<stale>`, so of several
    /// engines noticing the same dead attempt exactly one relaunches it.
    /// `Ok(false)`: another engine claimed it first.
    pub fn claim_takeover(
        &self,
        stale: FencingToken,
        claimant: &TokenOwner,
    ) -> Result<bool, StoreError> {
        self.check()?;
        let bytes =
            serde_json::to_vec(&TokenRecord::new(claimant)).map_err(|e| StoreError::Corrupt {
                key: layout::claim_key(&self.prefix, stale),
                message: format!("cannot encode claim: {e}"),
            })?;
        self.backend
            .put_if_absent(&layout::claim_key(&self.prefix, stale), &bytes)
    }

    /// Who claimed the takeover of `stale`, and when, if anyone did.
    pub fn claim_record(&self, stale: FencingToken) -> Result<Option<TokenRecord>, StoreError> {
        self.check()?;
        match self.backend.get(&layout::claim_key(&self.prefix, stale))? {
            None => Ok(None),
            Some(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| StoreError::Corrupt {
                        key: layout::claim_key(&self.prefix, stale),
                        message: format!("unreadable claim: {e}"),
                    })
            }
        }
    }

    /// The allocated tokens, ascending, and one past the highest.
    fn listed_tokens(&self) -> Result<(Vec<FencingToken>, FencingToken), StoreError> {
        let names = self.backend.list(&layout::tokens_prefix(&self.prefix))?;
        let tokens: Vec<FencingToken> = names
            .iter()
            .filter_map(|n| FencingToken::parse_key_name(n))
            .collect();
        // Sorted 20-digit names: the last valid one is the maximum.
        let next = match tokens.last() {
            None => FencingToken::from_raw(1),
            Some(max) if max.get() == u64::MAX => {
                return Err(StoreError::Corrupt {
                    key: layout::token_key(&self.prefix, *max),
                    message: "token space exhausted".to_owned(),
                })
            }
            Some(max) => max.next(),
        };
        Ok((tokens, next))
    }

    /// When the store wrote `token`'s record (its own clock: the file's
    /// modification time, S3's Last-Modified), if it can tell.
    pub fn token_written_at(&self, token: FencingToken) -> Option<jiff::Timestamp> {
        self.check().ok()?;
        let key = layout::token_key(&self.prefix, token);
        Some(self.backend.get_object(&key).ok()??.meta.last_modified)
    }

    /// Who `token` was allocated to, if it was.
    pub fn token_record(&self, token: FencingToken) -> Result<Option<TokenRecord>, StoreError> {
        self.check()?;
        self.read_json(layout::token_key(&self.prefix, token), "not a token record")
    }

    /// Absolute path of `attempts/<token>`.
    pub fn attempt_dir(&self, token: FencingToken) -> PathBuf {
        key_path(&self.root, &self.attempt_key(token))
    }

    /// Key of `attempts/<token>` (what a commit's `attempt_dir` holds).
    pub fn attempt_key(&self, token: FencingToken) -> String {
        layout::attempt_key(&self.prefix, token)
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
        remove_path(&dir)?;
        // `attempts/` itself was made durable with the partition's skeleton
        // when the token was allocated; the attempt's own directories need
        // not be yet: `fsync_candidate` makes them durable before any commit
        // names them, and an attempt lost in a crash before that is one
        // nobody can read. No fsync inside the pool slot.
        match std::fs::create_dir(&dir) {
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
        let key = layout::lease_key(&self.prefix, token);
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
        self.read_json(layout::lease_key(&self.prefix, token), "unreadable lease")
    }

    /// A JSON record the store wrote; `None` if absent, `Corrupt` (saying
    /// `what`) if it does not parse.
    fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        key: String,
        what: &str,
    ) -> Result<Option<T>, StoreError> {
        let Some(bytes) = self.backend.get(&key)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                key,
                message: format!("{what}: {e}"),
            })
    }

    /// Removes `attempts/<token>` (gc). The caller must know no record in
    /// the log names it.
    pub fn remove_attempt(&self, token: FencingToken) -> Result<(), StoreError> {
        self.check()?;
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

    /// Absolute path of the partition's commit log directory (`log/`).
    pub fn log_dir(&self) -> PathBuf {
        key_path(&self.root, &layout::log_prefix(&self.prefix))
    }

    /// The generations in the log, ascending: 1 to the newest, every one.
    /// A record that is gone (a gap, or a publication marker without its
    /// record) is [`StoreError::MissingRecord`], never skipped.
    pub fn generations(&self) -> Result<Vec<Generation>, StoreError> {
        self.check()?;
        let names = self.backend.list(&layout::log_prefix(&self.prefix))?;
        let listing = LogListing::parse(&names);
        match listing.hole(Generation::FIRST) {
            Some((g, token)) => Err(self.missing(g, token)),
            None => Ok(listing.records),
        }
    }

    /// The error for generation `g`'s record, committed and gone.
    fn missing(&self, g: Generation, token: Option<FencingToken>) -> StoreError {
        StoreError::MissingRecord {
            key: layout::log_key(&self.prefix, g),
            generation: g,
            token,
        }
    }

    /// The record of generation `g`, if committed.
    pub fn record(&self, g: Generation) -> Result<Option<CommitRecord>, StoreError> {
        self.check()?;
        if self.remote.is_some() {
            // Records are never rewritten: the copy this process kept is it.
            if let Some(rec) = self.seen.record(&self.prefix, g) {
                return Ok(Some(rec));
            }
        }
        let key = layout::log_key(&self.prefix, g);
        match self.backend.get(&key)? {
            None => Ok(None),
            Some(bytes) => parse_record(
                &key,
                &bytes,
                g,
                &self.dataset,
                &self.partition,
                &layout::attempts_prefix(&self.prefix),
            )
            .map(Some),
        }
    }

    /// A generation the listing showed (or this process saw committed) must
    /// be readable: records are never deleted.
    fn listed_record(&self, g: Generation) -> Result<CommitRecord, StoreError> {
        self.record(g)?.ok_or_else(|| self.missing(g, None))
    }

    /// The record with the highest generation. Parses only that one.
    ///
    /// A newest record that is gone is [`StoreError::MissingRecord`], not
    /// the one before it: its publication marker, left beside it in `log/`
    /// by the commit, shows in the same listing (and a gap below it, in a
    /// local warehouse whose listing is whole anyway).
    pub fn latest(&self) -> Result<Option<CommitRecord>, StoreError> {
        let Some(g) = self.newest_generation()? else {
            return Ok(None);
        };
        if self.remote.is_none() {
            return self.listed_record(g).map(Some);
        }
        // A generation, once committed, always means the same record: the
        // copy this process read or wrote is that record, and costs no GET.
        if let Some(rec) = self.seen.record(&self.prefix, g) {
            return Ok(Some(rec));
        }
        let rec = self.listed_record(g)?;
        self.seen.keep(&self.prefix, &rec);
        Ok(Some(rec))
    }

    /// The highest generation in the log. In an object store, whose
    /// listings come a thousand keys per request, the listing starts after
    /// a generation known to be committed: the newest this process has
    /// seen; else a log that fits one listing page is read whole in that
    /// one request, and only a longer one reads the log's checkpoint (one
    /// GET) and lists from it. So a log of any length costs one short LIST
    /// (two requests more for the first look at a log past a page). A
    /// missing or unreadable checkpoint only means listing from the start.
    fn newest_generation(&self) -> Result<Option<Generation>, StoreError> {
        if self.remote.is_none() {
            return Ok(self.generations()?.last().copied());
        }
        self.check()?;
        let log = layout::log_prefix(&self.prefix);
        let floor = match self.seen.get(&self.prefix) {
            Some(seen) => seen,
            None => {
                if let Some(names) = self.backend.list_first_page(&log)? {
                    return self.newest_listed(&names, None);
                }
                self.backend
                    .get(&layout::log_checkpoint_key(&self.prefix))?
                    .and_then(|b| String::from_utf8(b).ok()?.trim().parse::<u64>().ok())
                    .filter(|&g| g > 0)
                    .map(Generation::from_raw)
            }
        };
        let names = match floor {
            // From just before the floor's own record, so that the listing
            // shows it is still there (the record read next may be the
            // copy this process kept).
            Some(g) => self.backend.list_after(&log, &listing_start(g))?,
            None => self.backend.list(&log)?,
        };
        self.newest_listed(&names, floor)
    }

    /// The newest generation of a listing of the log after `floor` (a
    /// committed generation, or the log's start).
    fn newest_listed(
        &self,
        names: &[String],
        floor: Option<Generation>,
    ) -> Result<Option<Generation>, StoreError> {
        let listing = LogListing::parse(names);
        // The floor and what follows it must each have its record.
        let first = floor.unwrap_or(Generation::FIRST);
        if let Some((g, token)) = listing.hole(first) {
            return Err(self.missing(g, token));
        }
        let newest = listing.records.last().copied().or(floor);
        self.seen.saw(&self.prefix, newest);
        Ok(newest)
    }

    /// Every record, ascending by generation.
    pub fn history(&self) -> Result<Vec<CommitRecord>, StoreError> {
        self.generations()?
            .into_iter()
            .map(|g| self.listed_record(g))
            .collect()
    }

    /// The fenced compare-and-swap: read the latest record g (token t);
    /// refuse with [`PublishError::Stale`] if `commit.token <= t`; else
    /// put-if-absent `log/<g+1>`; if that key was taken (someone else
    /// committed g+1), reread and re-check. Returns the committed record.
    ///
    /// An `Err(Store)` leaves the outcome unknown. Retrying with the same
    /// token is safe: if the first try landed, the retry is `Stale` with
    /// `committed == mine` (unless a newer token committed since).
    pub fn commit(&self, commit: NewCommit) -> Result<CommitRecord, PublishError> {
        self.check()?;
        if commit.dataset != self.dataset || commit.partition != self.partition {
            return Err(StoreError::WrongPartition {
                store: self.prefix.clone(),
                commit: format!("{}/{}", commit.dataset, commit.partition),
            }
            .into());
        }
        let mut record = commit.into_record(Generation::FIRST);
        if let Some((key, reason)) = path_problem(&record, &layout::attempts_prefix(&self.prefix)) {
            return Err(StoreError::InvalidKey { key, reason }.into());
        }
        let mut latest = self.latest()?;
        loop {
            let next = match &latest {
                None => Generation::FIRST,
                Some(cur) if record.token <= cur.token => {
                    return Err(PublishError::Stale {
                        mine: record.token,
                        committed: cur.token,
                        generation: cur.generation,
                    })
                }
                Some(cur) if cur.generation.get() == u64::MAX => {
                    return Err(StoreError::Corrupt {
                        key: layout::log_key(&self.prefix, cur.generation),
                        message: "generation space exhausted".to_owned(),
                    }
                    .into())
                }
                Some(cur) => cur.generation.next(),
            };
            record.generation = next;
            record.published_at = jiff::Timestamp::now().to_string();
            let key = layout::log_key(&self.prefix, next);
            let bytes = serde_json::to_vec_pretty(&record).map_err(|e| StoreError::Corrupt {
                key: key.clone(),
                message: format!("cannot encode commit record: {e}"),
            })?;
            if self.backend.put_if_absent(&key, &bytes)? {
                // The marker that lets every later listing notice this
                // record if it goes (see `latest`). Evidence, not state:
                // not made durable here (the log's next commit syncs the
                // directory), and a failure to write it loses only that.
                let _ = self.backend.put_if_absent_volatile(
                    &layout::published_key(&self.prefix, next, record.token),
                    record.token.to_string().as_bytes(),
                );
                if self.remote.is_some() {
                    self.seen.saw(&self.prefix, Some(next));
                    self.seen.keep(&self.prefix, &record);
                }
                if self.remote.is_some() && next.get() % LOG_CHECKPOINT_EVERY == 0 {
                    // A hint, written after the record it names: losing it
                    // (a crash, an error) only makes listings longer, and
                    // an older one overwriting it is still a committed
                    // generation.
                    let _ = self.backend.put(
                        &layout::log_checkpoint_key(&self.prefix),
                        next.get().to_string().as_bytes(),
                    );
                }
                return Ok(record);
            }
            // Someone else committed `next`. Prefer a fresh listing (it may
            // skip several racers), but never one that hasn't caught up with
            // the key we just collided with, or we would loop on it.
            latest = match self.latest()? {
                Some(cur) if cur.generation >= next => Some(cur),
                _ => Some(self.listed_record(next)?),
            };
        }
    }

    /// Absolute path of the directory holding the record's files.
    pub fn data_dir(&self, rec: &CommitRecord) -> PathBuf {
        key_path(&self.root, &rec.attempt_dir).join(DATA_DIR)
    }

    /// Absolute paths of the record's files under the local root (for a
    /// remote warehouse, where [`PartitionStore::local_files`] puts them).
    pub fn visible_files(&self, rec: &CommitRecord) -> Vec<PathBuf> {
        let data = key_path(&self.root, &rec.attempt_dir).join(DATA_DIR);
        rec.files.iter().map(|f| key_path(&data, f)).collect()
    }

    /// The record's files as local paths a reader can open: in place in a
    /// local warehouse; from a remote one, downloaded into a directory of
    /// their own under the staging root (`_downloads/`), removed when the
    /// returned value is dropped, so reading never leaves copies behind nor
    /// touches an engine's staged attempts. A file the store does not hold
    /// is absent locally too, so the caller sees it vanished. As for local
    /// files, the caller checks them against the record's sums.
    pub fn local_files(&self, rec: &CommitRecord) -> Result<Downloaded, StoreError> {
        if self.remote.is_none() {
            return Ok(Downloaded {
                paths: self.visible_files(rec),
                dir: None,
            });
        }
        let parent = self.root.join("_downloads");
        std::fs::create_dir_all(&parent).map_err(StoreError::io(&parent))?;
        let dir = parent.join(format!("{}-{}", std::process::id(), unique()));
        std::fs::create_dir(&dir).map_err(StoreError::io(&dir))?;
        let mut downloaded = Downloaded {
            paths: Vec::with_capacity(rec.files.len()),
            dir: Some(dir.clone()),
        };
        let data = dir.join(DATA_DIR);
        for name in &rec.files {
            let key = format!("{}/{DATA_DIR}/{name}", rec.attempt_dir);
            let path = key_path(&data, name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(StoreError::io(parent))?;
            }
            if !self.backend.get_file(&key, &path)? {
                let _ = std::fs::remove_file(&path);
            }
            downloaded.paths.push(path);
        }
        Ok(downloaded)
    }

    /// Uploads what an attempt leaves as evidence (`candidate.json` and the
    /// command's logs, those that exist and are not empty) from its local
    /// staging directory to
    /// a remote warehouse, so that `explain` on any host shows a failed
    /// attempt's stderr. Nothing to do for a local warehouse.
    pub fn upload_evidence(&self, token: FencingToken) -> Result<(), StoreError> {
        self.check()?;
        if self.remote.is_none() {
            return Ok(());
        }
        let key = self.attempt_key(token);
        let dir = self.attempt_dir(token);
        for evidence in [CANDIDATE_FILE, layout::STDOUT_LOG, layout::STDERR_LOG] {
            let path = dir.join(evidence);
            // An empty log says nothing a missing one does not
            // (`read_evidence` finds neither): not a request per instance
            // for the many commands that print nothing.
            let empty_log =
                evidence != CANDIDATE_FILE && std::fs::metadata(&path).is_ok_and(|m| m.len() == 0);
            if path.is_file() && !empty_log {
                self.backend.put_file(&format!("{key}/{evidence}"), &path)?;
            }
        }
        Ok(())
    }

    /// One evidence file of an attempt (`stderr.log`, `candidate.json`):
    /// from its staging directory on this host, else from the store; `None`
    /// if neither has it.
    pub fn read_evidence(&self, token: FencingToken, name: &str) -> Option<Vec<u8>> {
        if let Ok(bytes) = std::fs::read(self.attempt_dir(token).join(name)) {
            return Some(bytes);
        }
        self.remote.as_ref()?;
        self.backend
            .get(&format!("{}/{name}", self.attempt_key(token)))
            .ok()
            .flatten()
    }

    /// Uploads an attempt's audited files (`data/<name>`) and its evidence
    /// (`candidate.json`, the logs) from its local staging directory to a
    /// remote warehouse: the commit record may name only what the store
    /// holds. A file the store checked against its SHA-256 on upload
    /// ([`Backend::put_file_checked`]) is not read again; every other one
    /// is read back and checked against `sums`. Nothing to do for a local
    /// warehouse, where they already are.
    pub fn upload_attempt(
        &self,
        token: FencingToken,
        files: &[PathBuf],
        sums: &[crate::store::FileSum],
    ) -> Result<(), StoreError> {
        self.check()?;
        if self.remote.is_none() {
            return Ok(());
        }
        let key = self.attempt_key(token);
        let dir = self.attempt_dir(token);
        let mut unchecked = Vec::new();
        for (file, sum) in files.iter().zip(sums) {
            let data_key = format!("{key}/{DATA_DIR}/{}", sum.name);
            if !self.backend.put_file_checked(&data_key, file, sum)? {
                unchecked.push(sum);
            }
        }
        self.upload_evidence(token)?;
        let check = dir.join(format!(".{}.check-{}", unique(), std::process::id()));
        let verified = (|| {
            for sum in unchecked {
                let data_key = format!("{key}/{DATA_DIR}/{}", sum.name);
                let held = if self.backend.get_file(&data_key, &check)? {
                    Some(
                        crate::store::FileSum::of(&check, &sum.name)
                            .map_err(StoreError::io(&check))?,
                    )
                } else {
                    None
                };
                if held.as_ref() != Some(sum) {
                    return Err(StoreError::Corrupt {
                        key: data_key,
                        message: match held {
                            None => "the upload is not there when read back".to_owned(),
                            Some(h) => format!(
                                "read back {} bytes with SHA-256 {}, uploaded {} bytes with SHA-256 {}",
                                h.size, h.sha256, sum.size, sum.sha256
                            ),
                        },
                    });
                }
            }
            Ok(())
        })();
        let _ = std::fs::remove_file(&check);
        verified
    }
}

/// One listing of `log/`: the records' generations, ascending, and the
/// publication markers (generation, token).
struct LogListing {
    records: Vec<Generation>,
    markers: Vec<(Generation, FencingToken)>,
}

impl LogListing {
    fn parse(names: &[String]) -> LogListing {
        let mut records: Vec<Generation> = names
            .iter()
            .filter_map(|n| layout::parse_log_name(n))
            .collect();
        records.sort_unstable();
        records.dedup();
        LogListing {
            records,
            markers: names
                .iter()
                .filter_map(|n| layout::parse_published_name(n))
                .collect(),
        }
    }

    /// The lowest generation from `first` on that was committed and whose
    /// record is not listed: a gap in `first, first+1, ...` up to the
    /// newest record, or a marker from `first` on without its record.
    /// Generations are assigned one after the other and records are never
    /// deleted, so either is a record that went.
    fn hole(&self, first: Generation) -> Option<(Generation, Option<FencingToken>)> {
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

/// The newest generation a process has seen committed in each partition
/// of a remote warehouse. A checkpoint read from the store can be older
/// than the truth, never newer, and so is every entry here.
/// An entry of `None` says the log was empty when last looked at (so the
/// checkpoint need not be read again).
///
/// Beside it, the record of the newest generation this process read or
/// committed there, for as many partitions as [`KEPT_RECORDS`]: records are
/// never rewritten, so a listing that shows no newer generation proves the
/// kept copy is the latest without reading it again.
#[derive(Clone, Default)]
pub(crate) struct SeenGenerations(Arc<std::sync::Mutex<Seen>>);

#[derive(Default)]
pub(crate) struct Seen {
    newest: std::collections::HashMap<String, Option<Generation>>,
    records: std::collections::HashMap<String, CommitRecord>,
}

/// Records kept per process: a bound on memory for an engine that walks a
/// million partitions (the kept ones are dropped all at once past it; they
/// are only a saving).
const KEPT_RECORDS: usize = 4096;

impl SeenGenerations {
    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `None` if this process has not looked at the partition's log yet.
    fn get(&self, prefix: &str) -> Option<Option<Generation>> {
        self.lock().newest.get(prefix).copied()
    }

    fn saw(&self, prefix: &str, g: Option<Generation>) {
        let mut seen = self.lock();
        let entry = seen.newest.entry(prefix.to_owned()).or_insert(g);
        *entry = (*entry).max(g);
    }

    /// The newest record kept for the partition, if any.
    fn newest_record(&self, prefix: &str) -> Option<CommitRecord> {
        self.lock().records.get(prefix).cloned()
    }

    /// The kept record of generation `g`, if it is the one kept.
    fn record(&self, prefix: &str, g: Generation) -> Option<CommitRecord> {
        self.lock()
            .records
            .get(prefix)
            .filter(|r| r.generation == g)
            .cloned()
    }

    /// Keeps `rec` unless a newer generation's record is kept already.
    fn keep(&self, prefix: &str, rec: &CommitRecord) {
        let mut seen = self.lock();
        if seen
            .records
            .get(prefix)
            .is_some_and(|kept| kept.generation >= rec.generation)
        {
            return;
        }
        if seen.records.len() >= KEPT_RECORDS && !seen.records.contains_key(prefix) {
            seen.records.clear();
        }
        seen.records.insert(prefix.to_owned(), rec.clone());
    }
}

/// A token just taken, and what its allocation saw
/// ([`PartitionStore::allocate`]).
#[derive(Debug, Clone)]
pub struct Allocation {
    /// The token.
    pub token: FencingToken,
    /// The latest record, read after the token was taken.
    pub latest: Option<CommitRecord>,
    /// The tokens allocated when it was taken (the listing it was chosen
    /// from; every token between the newest record's and this one is there).
    pub below: Vec<FencingToken>,
}

/// A name that sorts just before generation `g`'s record and after every
/// name of an older generation: its record's name without the last letter.
fn listing_start(g: Generation) -> String {
    let mut name = layout::log_name(g);
    name.pop();
    name
}

/// The audit's report an attempt leaves beside its `data/`.
const CANDIDATE_FILE: &str = "candidate.json";

/// Generations between two log checkpoints: one listing page of S3.
const LOG_CHECKPOINT_EVERY: u64 = 1000;

/// A generation's files where a reader can open them
/// ([`PartitionStore::local_files`]); a remote warehouse's downloads are
/// removed when this is dropped.
#[derive(Debug)]
pub struct Downloaded {
    paths: Vec<PathBuf>,
    dir: Option<PathBuf>,
}

impl std::ops::Deref for Downloaded {
    type Target = [PathBuf];
    fn deref(&self) -> &[PathBuf] {
        &self.paths
    }
}

impl Drop for Downloaded {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A name no other download or check in this process uses at once.
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::log::tests::sample;
    use crate::store::log::CommitKind;
    use crate::store::warehouse::Warehouse;
    use std::collections::BTreeSet;
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
    // issue 23 item 3: the hole a listing shows, from where it starts.
    #[test]
    fn log_listing_finds_gaps_and_markers_without_records() {
        let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let (g, t) = (Generation::from_raw, FencingToken::from_raw);
        let rec = |n| layout::log_name(g(n));
        let mark = |n, tok| layout::published_name(g(n), t(tok));
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

    // issue 23 items 1 and 4: a token comes from above the newest record
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

    // issue 23 item 3: in an object store too, whether this process saw
    // the newest generation (its listing starts there) or not.
    #[test]
    fn remote_newest_record_that_goes_is_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(crate::store::MemoryBackend::default());
        let open = || {
            Warehouse::remote(backend.clone(), "s3://b/wh", tmp.path())
                .unwrap()
                .partition("d", "p")
        };
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
        let key = layout::log_key(&p.prefix, rec.generation);
        let path = key_path(tmp.path(), &key);
        std::fs::write(path, serde_json::to_vec(&rec).unwrap()).unwrap();
    }

    /// A backend whose listing lags: it hides the newest log record, as a
    /// stale directory cache would, so the committer collides with it.
    struct LaggingList(FsBackend);

    impl Backend for LaggingList {
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

    use crate::store::backend::FsBackend;

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

    // issue 13: in an object store the newest generation of a long commit
    // log is found from its checkpoint (one GET and one short LIST), not by
    // listing thousands of records; a lost, stale or garbled checkpoint
    // still finds the newest.
    #[test]
    fn issue_13_remote_latest_lists_from_the_log_checkpoint() {
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

    // issue 28: a log that fits one listing page costs its first reader
    // one LIST and one GET (no checkpoint), and each later look one LIST
    // that starts at the record it read, which it does not read again.
    #[test]
    fn issue_28_a_short_remote_log_is_one_listing_and_its_record_is_kept() {
        use std::sync::atomic::Ordering::Relaxed;
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(LogListings::default());
        let open = || {
            Warehouse::remote(backend.clone(), "s3://b/wh", tmp.path())
                .unwrap()
                .partition("d", "p")
        };
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
        assert_eq!(counts(), (1, 0, vec![], 1));
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
        assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
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
