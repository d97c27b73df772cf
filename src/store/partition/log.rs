//! The partition's commit log: reading the newest record, the history,
//! and the fenced commit.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::store::error::{PublishError, StoreError};
use crate::store::key::key_path;
use crate::store::layout;
use crate::store::log::{parse_record, path_problem, CommitRecord, NewCommit};
use crate::store::summary::Summary;
use crate::store::token::{FencingToken, Generation};

use super::seen::{LogListing, Look};

use super::PartitionStore;

impl PartitionStore {
    /// Absolute path of the partition's commit log directory (`log/`).
    pub fn log_dir(&self) -> PathBuf {
        key_path(&self.root, &layout::log_prefix(&self.known_prefix()))
    }

    /// The generations in the log, ascending: 1 to the newest, every one.
    /// A record that is gone (a gap, or a publication marker without its
    /// record) is [`StoreError::MissingRecord`], never skipped.
    pub fn generations(&self) -> Result<Vec<Generation>, StoreError> {
        self.check()?;
        // Witnesses first: each is written after its record, so one listed
        // here names a record the log listing below must hold (listed the
        // other way round, a commit landing between the two listings
        // looked like a record gone). A directory listing: no request to
        // save.
        let tokens = match self.remote {
            None => Some(self.backend.list(&layout::tokens_prefix(&self.prefix()?))?),
            Some(_) => None,
        };
        let names = self.backend.list(&layout::log_prefix(&self.prefix()?))?;
        let listing = LogListing::parse(&names);
        if let Some((g, token)) = listing.hole(Generation::FIRST) {
            // A local disk's commits name their token under `tokens/`.
            let token = token.or_else(|| {
                tokens.iter().flatten().find_map(|n| {
                    layout::parse_committed_name(n).and_then(|(t, w)| (w == g).then_some(t))
                })
            });
            return Err(self.missing(g, token));
        }
        if let Some(tokens) = tokens {
            self.check_witnesses(&tokens, listing.records.last().copied())?;
        }
        Ok(listing.records)
    }

    /// A generation above `newest` that a name in the `tokens/` listing
    /// says was committed: its record and its marker are both gone, and
    /// the log must not be read (an older generation would be served as
    /// the newest) or committed to (its number would be used again).
    pub(super) fn check_witnesses(
        &self,
        tokens: &[String],
        newest: Option<Generation>,
    ) -> Result<(), StoreError> {
        let witnessed = tokens
            .iter()
            .filter_map(|n| layout::parse_committed_name(n))
            .max_by_key(|(_, g)| *g);
        match witnessed {
            Some((token, g)) if newest.is_none_or(|n| g > n) => Err(self.missing(g, Some(token))),
            _ => Ok(()),
        }
    }

    /// The error for generation `g`'s record, committed and gone.
    fn missing(&self, g: Generation, token: Option<FencingToken>) -> StoreError {
        StoreError::MissingRecord {
            key: layout::log_key(&self.known_prefix(), g),
            generation: g,
            token,
        }
    }

    /// The record of generation `g`, if committed.
    pub fn record(&self, g: Generation) -> Result<Option<CommitRecord>, StoreError> {
        self.check()?;
        if self.remote.is_some() {
            // Records are never rewritten: the copy this process kept is it.
            if let Some(rec) = self.seen.record(&self.prefix()?, g) {
                return Ok(Some(rec));
            }
        }
        let key = layout::log_key(&self.prefix()?, g);
        match self.backend.get(&key)? {
            None => Ok(None),
            Some(bytes) => parse_record(
                &key,
                &bytes,
                g,
                &self.dataset,
                &self.partition,
                &self.prefix()?,
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
    /// the one before it: the marker its commit left shows in the same
    /// look (in an object store beside it in `log/`; on a local disk under
    /// `tokens/`, listed with it, where a gap below it shows too).
    pub fn latest(&self) -> Result<Option<CommitRecord>, StoreError> {
        let Some(g) = self.newest_generation()? else {
            return Ok(None);
        };
        if self.remote.is_none() {
            return self.listed_record(g).map(Some);
        }
        self.newest_record(g).map(Some)
    }

    /// In an object store, the record of generation `g`, shown newest: the
    /// copy this process read or wrote (a generation, once committed,
    /// always means the same record, so it costs no GET), else read and
    /// kept.
    fn newest_record(&self, g: Generation) -> Result<CommitRecord, StoreError> {
        if let Some(rec) = self.seen.record(&self.prefix()?, g) {
            return Ok(rec);
        }
        let rec = self.listed_record(g)?;
        self.seen.keep(&self.prefix()?, &rec);
        Ok(rec)
    }

    /// In an object store, the record of the newest generation this
    /// process has seen in the log (`Some(None)`: it saw the log empty),
    /// if it keeps that record; not a proof that nothing is newer, only
    /// the generation a commit tries first (see [`PartitionStore::commit`]).
    fn kept_newest(&self) -> Option<Option<CommitRecord>> {
        self.remote.as_ref()?;
        match self.seen.get(&self.known_prefix())? {
            None => Some(None),
            Some(g) => self.seen.record(&self.known_prefix(), g).map(Some),
        }
    }

    /// The newest record as of a moment at most `max_age` ago: the one this
    /// process committed, or proved newest by a listing, that recently (the
    /// moment taken before the request was sent), without asking the store
    /// again; else [`PartitionStore::latest`]. For a reader's pin taken
    /// just after this process's own look at the log: a snapshot as of
    /// that look is what a listing would give had another engine's commit
    /// landed `max_age` later, which no reader can tell apart.
    pub fn latest_within(&self, max_age: Duration) -> Result<Option<CommitRecord>, StoreError> {
        match self.look_within(max_age)? {
            Look::Empty => Ok(None),
            Look::Record(rec) => Ok(Some(*rec)),
            Look::Summary(s) => self.newest_record(s.generation).map(Some),
        }
    }

    /// [`PartitionStore::latest_within`], or only the newest generation's
    /// summary when its publication marker carries one and its record is
    /// not kept: what tells an instance current and pins it as an input,
    /// with no read of the record. One listing at most, in an object store
    /// (none within `max_age` of this process's own look, which may have
    /// been a look at the whole dataset, `Warehouse::look_dataset`).
    pub fn look_within(&self, max_age: Duration) -> Result<Look, StoreError> {
        if self.remote.is_none() {
            return Ok(self
                .latest()?
                .map_or(Look::Empty, |r| Look::Record(Box::new(r))));
        }
        let newest = match self.seen.fresh(&self.prefix()?, max_age) {
            Some(newest) => newest,
            None => self.newest_generation()?,
        };
        let Some(g) = newest else {
            return Ok(Look::Empty);
        };
        if let Some(rec) = self.seen.record(&self.prefix()?, g) {
            return Ok(Look::Record(Box::new(rec)));
        }
        if let Some(summary) = self.seen.summary(&self.prefix()?, g) {
            return Ok(Look::Summary(summary));
        }
        Ok(Look::Record(Box::new(self.newest_record(g)?)))
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
        let log = layout::log_prefix(&self.prefix()?);
        let asked = Instant::now();
        let floor = match self.seen.get(&self.prefix()?) {
            Some(seen) => seen,
            None => {
                if let Some(names) = self.backend.list_first_page(&log)? {
                    return self.newest_listed(&names, None, asked);
                }
                self.backend
                    .get(&layout::log_checkpoint_key(&self.prefix()?))?
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
        self.newest_listed(&names, floor, asked)
    }

    /// The newest generation of a listing of the log after `floor` (a
    /// committed generation, or the log's start), asked at `asked`.
    fn newest_listed(
        &self,
        names: &[String],
        floor: Option<Generation>,
        asked: Instant,
    ) -> Result<Option<Generation>, StoreError> {
        self.seen
            .note_listing(&self.prefix()?, names, floor, asked)
            .map_err(|(g, token)| self.missing(g, token))
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
    /// In an object store, the latest record is first taken to be the
    /// newest this process has seen, without listing the log again:
    /// generations are committed one after the other, each by a
    /// put-if-absent of the one after a record its committer saw, and
    /// records are never deleted, so while `log/<g+1>` is absent nothing
    /// newer than g exists, and the put landing proves g was still the
    /// latest. Had anyone committed since, the put finds `g+1` taken and
    /// the log is listed as before.
    ///
    /// An `Err(Store)` leaves the outcome unknown. Retrying with the same
    /// token is safe: if the first try landed, the retry is `Stale` with
    /// `committed == mine` (unless a newer token committed since).
    pub fn commit(&self, commit: NewCommit) -> Result<CommitRecord, PublishError> {
        self.check()?;
        if commit.dataset != self.dataset || commit.partition != self.partition {
            return Err(StoreError::WrongPartition {
                store: self.prefix()?.into_owned(),
                commit: format!("{}/{}", commit.dataset, commit.partition),
            }
            .into());
        }
        let mut record = commit.into_record(Generation::FIRST);
        if let Some((key, reason)) = path_problem(&record, &self.prefix()?) {
            return Err(StoreError::InvalidKey { key, reason }.into());
        }
        let mut latest = match self.kept_newest() {
            Some(kept) => kept,
            None => self.latest()?,
        };
        loop {
            let next = match &latest {
                None => Generation::FIRST,
                Some(cur)
                    if record.token < cur.token
                        || (record.token == cur.token && !equal_token_accepted()) =>
                {
                    return Err(PublishError::Stale {
                        mine: record.token,
                        committed: cur.token,
                        generation: cur.generation,
                    })
                }
                Some(cur) if cur.generation.get() == u64::MAX => {
                    return Err(StoreError::Corrupt {
                        key: layout::log_key(&self.prefix()?, cur.generation),
                        message: "generation space exhausted".to_owned(),
                    }
                    .into())
                }
                Some(cur) => cur.generation.next(),
            };
            record.generation = next;
            record.published_at = jiff::Timestamp::now().to_string();
            let key = layout::log_key(&self.prefix()?, next);
            let bytes = serde_json::to_vec_pretty(&record).map_err(|e| StoreError::Corrupt {
                key: key.clone(),
                message: format!("cannot encode commit record: {e}"),
            })?;
            let asked = Instant::now();
            if self.backend.put_if_absent(&key, &bytes)? {
                self.landed(&record, next, asked);
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
}

impl PartitionStore {
    /// What follows a commit record's landing at generation `next` (its
    /// put asked at `asked`): the evidence beside it and what this process
    /// keeps of the log.
    fn landed(&self, record: &CommitRecord, next: Generation, asked: Instant) {
        // One name beside the record witnesses its commit, so that
        // a later look notices the record if it goes. Evidence, not
        // state: not made durable here (the log's next commit syncs
        // the directory), and a failure to write it loses only that.
        // Readers still read both names (warehouses written before
        // one was enough hold both).
        if self.remote.is_some() {
            // In `log/`, with the summary that tells an instance
            // current without reading the record (`look_within`): the
            // listing of the log shows it at no extra request. No
            // witness under `tokens/`: it would be one request more
            // per publication (at the budget's edge,
            // `tests/it/store_budget.rs`); there a PUBLISHED event
            // without its record is what `status --check` finds.
            let _ = self.backend.put_if_absent_volatile(
                &layout::published_key(
                    &self.known_prefix(),
                    next,
                    record.token,
                    &self.summary_of(record),
                ),
                record.token.to_string().as_bytes(),
            );
        } else {
            // On a disk, under `tokens/`: every look at the log lists
            // `tokens/` too (`generations`), so this one name notices a
            // newest record gone, alone or with its marker by a hand
            // `rm log/<g>*` (`check_witnesses`), where a `log/` marker
            // would be a second inode per instance and tell nothing
            // more (a summary is for object stores only, and a gap
            // below the newest shows in the numbering).
            let _ = self.backend.put_if_absent_volatile(
                &layout::committed_key(&self.known_prefix(), record.token, next),
                b"",
            );
        }
        if self.remote.is_some() {
            self.seen.saw(&self.known_prefix(), Some(next));
            self.seen.keep(&self.known_prefix(), record);
            // Generation `next` was absent when the put landed, so
            // nothing newer existed then: a commit is a look too.
            self.seen.confirmed(&self.known_prefix(), Some(next), asked);
        }
        if self.remote.is_some() && next.get() % LOG_CHECKPOINT_EVERY == 0 {
            // A hint, written after the record it names: losing it
            // (a crash, an error) only makes listings longer, and
            // an older one overwriting it is still a committed
            // generation.
            let _ = self.backend.put(
                &layout::log_checkpoint_key(&self.known_prefix()),
                next.get().to_string().as_bytes(),
            );
        }
    }

    /// What the publication marker of `record` carries after its token: a
    /// summary of it on an object store, where it saves a read of the
    /// record per instance told current; nothing on a disk, or where the
    /// name would be longer than a key's segment may be (a long run id).
    fn summary_of(&self, record: &CommitRecord) -> String {
        let Some(summary) = self.remote.as_ref().and_then(|_| Summary::of(record)) else {
            return String::new();
        };
        let suffix = summary.name_suffix();
        let name = layout::published_name(record.generation, record.token, &suffix);
        if name.len() <= crate::store::MAX_SEGMENT_BYTES {
            suffix
        } else {
            String::new()
        }
    }
}

/// A name that sorts just before generation `g`'s record and after every
/// name of an older generation: its record's name without the last letter.
pub(super) fn listing_start(g: Generation) -> String {
    let mut name = layout::log_name(g);
    name.pop();
    name
}

/// Generations between two log checkpoints: one listing page of S3.
const LOG_CHECKPOINT_EVERY: u64 = 1000;

#[cfg(test)]
thread_local! {
    /// A planted bug for the simulator's tests: the commit accepts a token
    /// equal to the committed one (test builds only, this thread only).
    static ACCEPT_EQUAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Plants (or removes) the equal-token bug on this thread.
#[cfg(test)]
pub fn plant_equal_token(on: bool) {
    ACCEPT_EQUAL.with(|c| c.set(on));
}

#[cfg(test)]
fn equal_token_accepted() -> bool {
    ACCEPT_EQUAL.with(|c| c.get())
}

#[cfg(not(test))]
fn equal_token_accepted() -> bool {
    false
}
