//! Fencing tokens: taking the next one above every claim and record.

use crate::store::allocation::{TokenOwner, TokenRecord};
use crate::store::error::StoreError;
use crate::store::layout;
use crate::store::log::CommitRecord;
use crate::store::token::{FencingToken, Generation};

use super::PartitionStore;

impl PartitionStore {
    /// The record that claims a token for `owner`: in object storage it
    /// carries the attempt's first lease (its process `tag` and
    /// `timeout_ms`, [`TokenRecord::with_lease`]), which readers take
    /// while there is no `lease.json`: a request less per attempt. On a
    /// local disk a lease is one cheap write
    /// ([`PartitionStore::write_first_lease`]).
    pub fn new_claim(&self, owner: &TokenOwner, tag: String, timeout_ms: u64) -> TokenRecord {
        match self.remote {
            Some(_) => TokenRecord::new(owner).with_lease(tag, timeout_ms),
            None => TokenRecord::new(owner),
        }
    }

    /// Writes the first lease of the attempt holding `token`, unless the
    /// record that claimed it carries it ([`PartitionStore::new_claim`]):
    /// on a local disk at once, so tools that read it there (gc, tests)
    /// find it before the first renewal.
    pub fn write_first_lease(
        &self,
        token: FencingToken,
        lease: &crate::store::leases::Lease,
    ) -> Result<(), StoreError> {
        match self.remote {
            Some(_) => Ok(()),
            None => self.write_lease(token, lease),
        }
    }

    /// Strictly increasing per partition, never reused across
    /// runs/processes/restarts/crashes: list `tokens/`, take max+1, but
    /// never at or below the latest commit record's token nor below this
    /// engine's epoch floor, put-if-absent; if taken, relist and try the
    /// next free one. The first token is 1. On a local disk the record is
    /// not synced: the epoch taken (durably) once per warehouse handle
    /// keeps a record lost in a host crash from being reused
    /// ([`crate::store::epoch`]).
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
    /// the latest record as of the token, and the tokens listed before it. An attempt needs both next (has anyone published
    /// meanwhile; whose attempts are live below mine), so it reads neither
    /// again.
    ///
    /// The log's floor: when this process has looked at the partition's
    /// log on an object store, the newest record it saw there (kept), or
    /// none when the log was empty then; else the log is read before the
    /// token.
    ///
    /// The log is not read again after the token is taken unless someone
    /// else may have committed since the floor was read: every commit since
    /// then has a token above the floor's, claimed before it committed, so
    /// it is in this allocation's listing below the new token (a token is
    /// only taken at the listing's maximum plus one, and a put that loses
    /// to a racer relists); a racer whose token ends up above this one
    /// waits for this one (`lease::guard`). So when the listing shows no
    /// token between the floor's and the new one and no put was lost, the
    /// floor is still the newest record. Otherwise the log is read again,
    /// and a token not above the newest record then is left unused and
    /// allocation goes on above that record.
    pub fn allocate(&self, owner: &TokenOwner) -> Result<Allocation, StoreError> {
        self.allocate_for(&TokenRecord::new(owner))
    }

    /// [`PartitionStore::allocate`], writing `record` as the token's.
    pub fn allocate_for(&self, record: &TokenRecord) -> Result<Allocation, StoreError> {
        self.check()?;
        // The first token of a dataset's first partition decides its
        // layout: a Delta table's was settled before (`settle_table_layout`).
        self.settle_prefix(super::DatasetLayout::Plain)?;
        let bytes = serde_json::to_vec(record).map_err(|e| StoreError::Corrupt {
            key: layout::tokens_prefix(&self.known_prefix()),
            message: format!("cannot encode token record: {e}"),
        })?;
        // The partition's skeleton (tokens/, attempts/, log/) in one
        // durable step, before the first key under it; a store without
        // directories makes them with the keys.
        if let Some(dirs) = self.backend.durable() {
            dirs.prepare_dirs(&self.prefix()?, &layout::SKELETON)?;
        }
        // What this process saw last, when it has the record itself.
        let kept = match self.remote.is_some() {
            true => match self.seen.get(&self.prefix()?) {
                Some(None) => Some(None),
                Some(Some(g)) => self.seen.record(&self.prefix()?, g).map(Some),
                None => None,
            },
            false => None,
        };
        let floor_from = match kept {
            Some(kept) => kept,
            None => self.latest()?,
        };
        let floor_token = floor_from.as_ref().map(|r| r.token);
        let mut floor = match &floor_from {
            Some(rec) => self.above(rec)?,
            None => FencingToken::from_raw(1),
        };
        // On a local disk the token's record is not synced: the epoch's
        // floor keeps a record lost in a crash from being handed out again
        // (`store::epoch`). An object store's writes are durable anyway.
        if self.remote.is_none() {
            floor = floor.max(self.epoch.get_or_take(self.backend.as_ref())?.floor);
        }
        let (mut below, next) = self.listed_tokens(floor_from.as_ref().map(|r| r.generation))?;
        let mut candidate = next.max(floor);
        let mut raced = false;
        loop {
            let key = layout::token_key(&self.prefix()?, candidate);
            if self.backend.put_if_absent_volatile(&key, &bytes)? {
                self.note_layout();
                let quiet = !raced
                    && !below
                        .iter()
                        .any(|t| *t < candidate && floor_token.is_none_or(|f| *t > f));
                let latest = match quiet {
                    true => floor_from.clone(),
                    false => self.latest()?,
                };
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
            raced = true;
            // Relisting can jump past several racers at once; the `max`
            // guards against a listing that lags behind what we just saw.
            let (listed, next) = self.listed_tokens(floor_from.as_ref().map(|r| r.generation))?;
            below = listed;
            candidate = next.max(candidate.next()).max(floor);
        }
    }

    /// The first token above `rec`'s.
    fn above(&self, rec: &CommitRecord) -> Result<FencingToken, StoreError> {
        if rec.token.get() == u64::MAX {
            return Err(StoreError::Corrupt {
                key: layout::log_key(&self.prefix()?, rec.generation),
                message: "token space exhausted".to_owned(),
            });
        }
        Ok(rec.token.next())
    }

    /// The highest token allocated so far, if any: the newest attempt.
    pub fn latest_token(&self) -> Result<Option<FencingToken>, StoreError> {
        self.check()?;
        let names = self.backend.list(&layout::tokens_prefix(&self.prefix()?))?;
        Ok(names
            .iter()
            .rev()
            .find_map(|n| FencingToken::parse_key_name(n)))
    }

    /// Every allocated token, ascending.
    pub fn tokens(&self) -> Result<Vec<FencingToken>, StoreError> {
        self.check()?;
        let names = self.backend.list(&layout::tokens_prefix(&self.prefix()?))?;
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
                key: layout::claim_key(&self.known_prefix(), stale),
                message: format!("cannot encode claim: {e}"),
            })?;
        self.backend
            .put_if_absent(&layout::claim_key(&self.prefix()?, stale), &bytes)
    }

    /// Who claimed the takeover of `stale`, and when, if anyone did.
    pub fn claim_record(&self, stale: FencingToken) -> Result<Option<TokenRecord>, StoreError> {
        self.check()?;
        match self
            .backend
            .get(&layout::claim_key(&self.prefix()?, stale))?
        {
            None => Ok(None),
            Some(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| StoreError::Corrupt {
                        key: layout::claim_key(&self.known_prefix(), stale),
                        message: format!("unreadable claim: {e}"),
                    })
            }
        }
    }

    /// The allocated tokens, ascending, and one past the highest. A commit
    /// the listing witnesses above `newest` (the log's newest generation
    /// as read before) is a hole ([`StoreError::MissingRecord`]), unless
    /// the log, read again, has it (another engine's commit since): so no
    /// token is taken, and no generation number used again, over a record
    /// and marker removed together.
    fn listed_tokens(
        &self,
        newest: Option<Generation>,
    ) -> Result<(Vec<FencingToken>, FencingToken), StoreError> {
        let names = self.backend.list(&layout::tokens_prefix(&self.prefix()?))?;
        if self.check_witnesses(&names, newest).is_err() {
            let now = self.latest()?.map(|r| r.generation);
            self.check_witnesses(&names, now)?;
        }
        let tokens: Vec<FencingToken> = names
            .iter()
            .filter_map(|n| FencingToken::parse_key_name(n))
            .collect();
        // Sorted 20-digit names: the last valid one is the maximum.
        let next = match tokens.last() {
            None => FencingToken::from_raw(1),
            Some(max) if max.get() == u64::MAX => {
                return Err(StoreError::Corrupt {
                    key: layout::token_key(&self.prefix()?, *max),
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
        let key = layout::token_key(&self.known_prefix(), token);
        Some(self.backend.get_object(&key).ok()??.meta.last_modified)
    }

    /// Who `token` was allocated to, if it was.
    pub fn token_record(&self, token: FencingToken) -> Result<Option<TokenRecord>, StoreError> {
        self.check()?;
        self.read_json(
            layout::token_key(&self.prefix()?, token),
            "not a token record",
        )
    }

    /// Whether `token`'s record may have been lost in a power cut: an
    /// engine raised the token floor above it after a reboot
    /// ([`crate::store::epoch`]).
    pub fn token_lost_in_a_crash(&self, token: FencingToken) -> Result<bool, StoreError> {
        crate::store::epoch::raised_above(self.backend.as_ref(), token)
    }
}

/// A token just taken, and what its allocation saw
/// ([`PartitionStore::allocate`]).
#[derive(Debug, Clone)]
pub struct Allocation {
    /// The token.
    pub token: FencingToken,
    /// The latest record as of the token: read after it was taken, or the
    /// floor when nobody can have committed since ([`PartitionStore::allocate`]).
    pub latest: Option<CommitRecord>,
    /// The tokens allocated when it was taken (the listing it was chosen
    /// from; every token between the newest record's and this one is there).
    pub below: Vec<FencingToken>,
}
