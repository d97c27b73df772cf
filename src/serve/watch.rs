//! What became of a due instance that this engine did not run: published,
//! held for an operator, or still claimed by a live engine. A restart asks
//! it of what it would call missed, and the watch of an instance another
//! engine claimed asks it until the instance is settled.
//!
//! The claim orders the two ends of an instance: a MISSED record is written
//! only by the holder of the instance's claim (won, or taken over from a
//! dead claimer), and a lane that took a claim over runs it only when no
//! MISSED record is there. Without that, a restart recording a period
//! MISSED as down and an engine that was up running it late would both
//! happen.

use crate::manifest::Manifest;
use crate::store::Warehouse;

use super::machine::Elsewhere;
use super::record;

/// Seconds between looks at an instance another engine claimed: its
/// claimer's death is noticed within this, which bounds how much of the
/// instance's wait a takeover may lose.
pub const WATCH_EVERY: i64 = 30;

/// This engine's claim of an instance, as its serve `run_id` makes it.
pub fn mine(run_id: &str) -> record::Claim {
    record::Claim {
        engine: crate::exec::lease::engine().engine_id.clone(),
        holder: Some(crate::exec::lease::engine().clone()),
        run_id: run_id.to_owned(),
        at: crate::clock::now_rfc3339(),
    }
}

/// Whether a claim's holder is certainly dead (only this host can tell).
pub fn dead(c: &record::Claim) -> bool {
    c.holder.as_ref().is_some_and(|h| h.certainly_dead())
}

/// An instance not run here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Published, or its attempts ran out and it is held for an operator.
    Settled,
    /// A live engine (as far as this host can tell) holds its claim.
    Claimed(record::Claim),
    /// Neither: it is owed; the claim its dead claimer left, if any.
    Open(Option<record::Claim>),
}

/// Whether partition `key` of `task` was published, or was decided (held
/// or quarantined for an operator).
pub fn settled(manifest: &Manifest, warehouse: &Warehouse, task: &str, key: &str) -> bool {
    let Some(t) = manifest.tasks.get(task) else {
        return false;
    };
    let keys = crate::plan::partitions::explicit(
        &t.dims,
        std::slice::from_ref(&key.to_owned()),
        crate::clock::now(),
    );
    let published = keys
        .iter()
        .any(|k| crate::plan::settled(manifest, warehouse, &t.output.dataset, k));
    // Its attempts ran out while serve was up: held (or quarantined) for
    // an operator, with the evidence; not missed.
    let decided = || {
        keys.iter()
            .any(|k| crate::store::marks::read(warehouse, task, k).is_ok_and(|m| m.is_some()))
    };
    published || decided()
}

/// Whether partition `key` of `task` is [`settled`], or claimed by an
/// engine not certainly dead.
pub fn resolve(manifest: &Manifest, warehouse: &Warehouse, task: &str, key: &str) -> Resolved {
    if settled(manifest, warehouse, task, key) {
        return Resolved::Settled;
    }
    match record::claim_of(warehouse, task, key).ok().flatten() {
        Some(c) if !dead(&c) => Resolved::Claimed(c),
        dead => Resolved::Open(dead),
    }
}

/// What became of an instance another engine claimed: settled (by
/// [`resolve`], or recorded MISSED), still held, or free (its claimer is
/// certainly dead). A store that fails keeps it held: looked at again.
pub fn elsewhere(
    manifest: &Manifest,
    warehouse: &Warehouse,
    task: &str,
    key: &str,
    now: i64,
) -> Elsewhere {
    let again_at = now + WATCH_EVERY;
    match record::is_missed(warehouse, task, key) {
        Ok(true) => return Elsewhere::Missed,
        Ok(false) => {}
        Err(e) => {
            return Elsewhere::Held {
                claimer: format!("unknown ({e})"),
                again_at,
            }
        }
    }
    match resolve(manifest, warehouse, task, key) {
        Resolved::Settled => Elsewhere::Settled,
        Resolved::Claimed(c) => Elsewhere::Held {
            claimer: c.engine,
            again_at,
        },
        Resolved::Open(_) => Elsewhere::Free,
    }
}
