//! Engine epochs: what lets a local warehouse's token records go unsynced.
//!
//! # Why a token needed two fsyncs, and why it no longer does
//!
//! A fencing token must never be handed out twice, across crashes too: the
//! command gets it as `WEIR_TOKEN` and may fence an external system with it.
//! Tokens are taken per partition at the claims listing's maximum plus one,
//! never at or below the newest commit record's (`PartitionStore::allocate`).
//! The record of a *committed* token can never be lost (the commit record is
//! durable and is the floor), but the record of an attempt that had not
//! committed when the host lost power can: with `tokens/<t>` unsynced, the
//! next engine would list the partition without it and take `t` again.
//!
//! That can only happen across a crash of the host's kernel (a `kill -9`
//! leaves the page cache, and every record in it, to other processes). So
//! instead of making every token durable, each engine process makes one
//! record durable before its first token: `_epochs/<n>` (put-if-absent at
//! the listing's maximum plus one), naming its host and boot. The newest
//! epoch before it tells whether the host may have lost unsynced records
//! since: when it was taken on another boot (or another host, or it cannot
//! be read), the new epoch *raises the token floor* of the whole warehouse
//! to `n << 32`, and every later epoch inherits the highest floor so far.
//! Every token is taken at or above its engine's floor, so a token lost in
//! a crash (below the floor) is never handed out again. Without a crash the
//! floor stays where it is and tokens stay small and dense per partition, as
//! before (old warehouses, without `_epochs/`, start at floor 0: their
//! tokens are all durable and below every later one).
//!
//! The bound: tokens taken between two raises stay below the second raise's
//! floor as long as no partition takes 2^32 tokens between two reboots.
//!
//! An object store makes every write durable: its engines take no epoch.
//!
//! What a power loss can still take with an unsynced record is evidence:
//! who held the token (gc's age of an orphaned attempt, the takeover's
//! "holder is gone"), and the record `weir verify` looks for under a
//! committed generation's token; verify accepts its absence when a later
//! epoch raised the floor above that token ([`raised_above`]), since the
//! commit record itself is durable.
//!
//! # Two engines at once
//!
//! The token order and the claims are unchanged: a token is still claimed
//! by put-if-absent under the partition's `tokens/`, above everything the
//! claims listing and the log showed, and the claimant then looks only
//! below its token (`lease::guard`): of two engines on one instance the
//! higher token waits for the lower. Engine A (epoch 5) and engine B
//! (epoch 6) on one partition:
//!
//! - B committed token 7 before A retries: A's retry is taken above the
//!   newest record (8 or more) and A's currency check sees B's generation:
//!   ALREADY_PUBLISHED when it is what A would publish, else a newer
//!   generation over it (a new input snapshot is a new publication).
//! - A's attempt holds token 6, B's token 7 committed meanwhile: A's commit
//!   reads the log, finds 7 ≥ 6 and is refused (REJECTED_STALE); nothing of
//!   A's is visible, since a record is the only thing that publishes.
//! - A's token is taken while B's is live: A's is higher (B's claim was in
//!   A's listing), so A waits for B, then re-checks what is published.
//!
//! Epochs change none of this: they only decide the floor, and a raised
//! floor is the same for every engine after it. Two engines that take
//! epochs together get two numbers (put-if-absent), and the later one reads
//! the earlier one's record, so a raise is never skipped.

use std::sync::{Arc, Mutex, PoisonError};

use crate::store::backend::Backend;
use crate::store::error::StoreError;
use crate::store::holder::Holder;
use crate::store::token::FencingToken;

/// The warehouse-wide prefix of epoch records.
pub(crate) const EPOCHS: &str = "_epochs";

/// How far a raised floor's epoch is shifted: the floor of epoch `n` is
/// `n << 32`.
const SHIFT: u32 = 32;

/// The stored content of `_epochs/<n>`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EpochRecord {
    /// The engine process that took it (its host and boot are what a later
    /// epoch compares).
    pub holder: Holder,
    /// The lowest token an engine of this epoch hands out.
    pub floor: u64,
    /// When it was taken, RFC 3339 UTC (for people).
    pub taken_at: String,
}

/// An epoch this process holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch {
    /// Its number in `_epochs/`.
    pub number: u64,
    /// The lowest token it may hand out.
    pub floor: FencingToken,
}

/// The epoch of one warehouse handle (and its clones), taken at its first
/// token.
#[derive(Clone, Default)]
pub(crate) struct EpochCell(Arc<Mutex<Option<Epoch>>>);

impl EpochCell {
    /// The epoch, taken now if this handle has none yet.
    pub(crate) fn get_or_take(&self, backend: &dyn Backend) -> Result<Epoch, StoreError> {
        let mut cell = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(epoch) = *cell {
            return Ok(epoch);
        }
        let epoch = take(backend, Holder::current())?;
        *cell = Some(epoch);
        Ok(epoch)
    }
}

fn key(n: u64) -> String {
    format!("{EPOCHS}/{}", FencingToken::from_raw(n).key_name())
}

/// Takes the next epoch for `me`, durably (put-if-absent), raising the
/// floor when the newest epoch before it may have lost records in a crash.
pub(crate) fn take(backend: &dyn Backend, me: &Holder) -> Result<Epoch, StoreError> {
    loop {
        let newest = backend
            .list(EPOCHS)?
            .iter()
            .rev()
            .find_map(|n| FencingToken::parse_key_name(n))
            .map(FencingToken::get);
        let number = newest.map_or(1, |n| n.saturating_add(1));
        if number >= 1 << SHIFT {
            return Err(StoreError::Corrupt {
                key: key(number),
                message: "epoch space exhausted".to_owned(),
            });
        }
        let before = match newest {
            None => None,
            Some(n) => Some(
                backend
                    .get(&key(n))?
                    .and_then(|b| serde_json::from_slice::<EpochRecord>(&b).ok()),
            ),
        };
        let floor = floor_after(before.as_ref(), number, me);
        let record = EpochRecord {
            holder: me.clone(),
            floor,
            taken_at: jiff::Timestamp::now().to_string(),
        };
        let bytes = serde_json::to_vec(&record).map_err(|e| StoreError::Corrupt {
            key: key(number),
            message: format!("cannot encode epoch record: {e}"),
        })?;
        if backend.put_if_absent(&key(number), &bytes)? {
            return Ok(Epoch {
                number,
                floor: FencingToken::from_raw(floor),
            });
        }
        // Another engine took this number: its record is the newest now.
    }
}

/// Whether a floor was raised above `token` after it was handed out: the
/// host lost power since, so an unsynced record of that token may be gone
/// with it. Floors only rise, and every token is taken at or above its
/// engine's floor, so a floor above the token can only come from a later
/// raise.
pub(crate) fn raised_above(backend: &dyn Backend, token: FencingToken) -> Result<bool, StoreError> {
    for name in backend.list(EPOCHS)? {
        let Some(n) = FencingToken::parse_key_name(&name) else {
            continue;
        };
        let Some(bytes) = backend.get(&key(n.get()))? else {
            continue;
        };
        if let Ok(record) = serde_json::from_slice::<EpochRecord>(&bytes) {
            if record.floor > token.get() {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The floor of epoch `number` taken by `me`, after `before`: `None` when
/// there was no epoch, `Some(None)` when the newest one cannot be read.
fn floor_after(before: Option<&Option<EpochRecord>>, number: u64, me: &Holder) -> u64 {
    let raised = number << SHIFT;
    match before {
        None => 0,
        Some(None) => raised,
        Some(Some(rec)) => {
            let same_boot = rec.holder.host == me.host
                && rec.holder.boot_id.is_some()
                && rec.holder.boot_id == me.boot_id;
            if same_boot {
                rec.floor
            } else {
                rec.floor.max(raised)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryBackend;

    fn holder(boot: &str) -> Holder {
        let mut h = Holder::current().clone();
        h.boot_id = Some(boot.to_owned());
        h
    }

    #[test]
    fn the_floor_rises_only_after_another_boot_and_is_inherited() {
        let b = MemoryBackend::new();
        let first = take(&b, &holder("x")).unwrap();
        assert_eq!((first.number, first.floor.get()), (1, 0));
        let same = take(&b, &holder("x")).unwrap();
        assert_eq!((same.number, same.floor.get()), (2, 0));
        // The host rebooted: whatever it had not written back may be lost.
        let rebooted = take(&b, &holder("y")).unwrap();
        assert_eq!((rebooted.number, rebooted.floor.get()), (3, 3 << 32));
        let after = take(&b, &holder("y")).unwrap();
        assert_eq!((after.number, after.floor.get()), (4, 3 << 32));
        // Another host: it cannot tell, so it raises too.
        let mut other = holder("y");
        other.host.push_str("-other");
        assert_eq!(take(&b, &other).unwrap().floor.get(), 5 << 32);
        // An unreadable newest record raises.
        b.put_if_absent(&key(6), b"torn").unwrap();
        assert_eq!(take(&b, &holder("y")).unwrap().floor.get(), 7 << 32);
        // Every old small token is below every raised floor.
        assert!(FencingToken::from_raw(u64::from(u32::MAX)) < FencingToken::from_raw(1 << 32));
    }

    #[test]
    fn a_token_below_a_later_raised_floor_is_explained_by_a_crash() {
        let b = MemoryBackend::new();
        take(&b, &holder("x")).unwrap();
        assert!(!raised_above(&b, FencingToken::from_raw(7)).unwrap());
        take(&b, &holder("y")).unwrap();
        assert!(raised_above(&b, FencingToken::from_raw(7)).unwrap());
        assert!(!raised_above(&b, FencingToken::from_raw(2 << 32)).unwrap());
    }
}
