//! The invariants, each with a name, and the ledger that checks them: what
//! the simulated world did (publications, MISSED records, claims held,
//! slots held, notifications), updated at every step.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

/// The invariants, by the name a violation carries.
pub const INVARIANTS: [(&str, &str); 8] = [
    ("visible-is-audited", "a visible generation is always a complete, audited candidate"),
    ("tokens-only-grow", "tokens and generations in a partition's log only grow"),
    (
        "published-or-missed-once",
        "each due period is published once, or recorded MISSED once (down or waited), or failed with its evidence, or still inside its wait",
    ),
    ("no-catch-up", "after downtime only the newest due period runs"),
    ("pool-slots", "a pool's attempts across engines never exceed its slots"),
    ("one-live-claimer", "an instance is never run by two live engines at once"),
    ("notified-once-per-fact", "every fact is delivered at least once, under one key"),
    ("no-silent-wait", "no instance waits past its bound"),
];

/// Violations kept per invariant.
pub const MAX_EACH: usize = 5;

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The invariant's name.
    pub invariant: &'static str,
    /// The step at which it broke.
    pub step: u64,
    /// The simulated instant (RFC 3339).
    pub at: String,
    /// What was seen.
    pub detail: String,
}

/// How an owed period ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum End {
    /// Published this many times.
    Published(u32),
    /// Recorded MISSED: serve was down.
    MissedDown,
    /// Recorded MISSED: waited past its bound.
    MissedWaited,
    /// Its attempts ran out: held for an operator, with the evidence.
    Failed,
}

/// What happened so far, and the violations seen.
#[derive(Debug, Default)]
pub struct Ledger {
    /// The step being checked.
    pub step: u64,
    /// Its instant.
    pub now: i64,
    /// How each (task, occurrence) ended.
    pub ends: BTreeMap<(usize, i64), End>,
    /// Tokens of candidates that succeeded and passed their audit, per
    /// (dataset, partition).
    pub audited: BTreeSet<(String, String, u64)>,
    /// Who runs each instance: (engine, incarnation).
    pub running: BTreeMap<(usize, i64), Vec<(usize, u32)>>,
    /// Slots held per pool.
    pub held: BTreeMap<String, u32>,
    /// Outbox records by fact key: deliveries so far.
    pub outbox: BTreeMap<String, u32>,
    /// Facts that must be announced, with when they became durable.
    pub facts: BTreeMap<String, i64>,
    /// What broke.
    pub violations: Vec<Violation>,
}

impl Ledger {
    /// Records a broken invariant (once per invariant and detail).
    pub fn violate(&mut self, invariant: &'static str, detail: String) {
        // The first few of each invariant say enough (and keep a broken
        // run from slowing down on its own evidence).
        if self
            .violations
            .iter()
            .filter(|v| v.invariant == invariant)
            .take(MAX_EACH)
            .count()
            == MAX_EACH
            || self.violations.iter().any(|v| v.detail == detail)
        {
            return;
        }
        self.violations.push(Violation {
            invariant,
            step: self.step,
            at: crate::serve::instant(self.now),
            detail,
        });
    }

    /// A partition's log after a commit: tokens strictly grow, generations
    /// count 1, 2, 3, and the visible one is an audited candidate.
    pub fn log(&mut self, dataset: &str, partition: &str, log: &[(u64, u64)]) {
        for (i, w) in log.windows(2).enumerate() {
            if w[1].1 <= w[0].1 || w[1].0 != w[0].0 + 1 {
                self.violate(
                    "tokens-only-grow",
                    format!(
                        "{dataset}/{partition}: generation {} token {} follows generation {} token {} (record {})",
                        w[1].0, w[1].1, w[0].0, w[0].1, i + 2
                    ),
                );
            }
        }
        if let Some((g, token)) = log.last() {
            let key = (dataset.to_owned(), partition.to_owned(), *token);
            if !self.audited.contains(&key) {
                self.violate(
                    "visible-is-audited",
                    format!("{dataset}/{partition}: generation {g} shows token {token}, no audited candidate"),
                );
            }
        }
    }

    /// A period ended (published, missed or failed); a second end of a
    /// period is a violation unless it is a forced rerun's publication.
    pub fn end(&mut self, at: (usize, i64), end: End, name: &str, forced: bool) {
        let before = self.ends.get(&at).copied();
        let now = match (before, end) {
            (None, e) => e,
            (Some(End::Published(n)), End::Published(_)) => End::Published(n + 1),
            (Some(b), e) => {
                self.violate(
                    "published-or-missed-once",
                    format!("{name} occurrence {}: {e:?} after {b:?}", at.1),
                );
                return;
            }
        };
        if let End::Published(n) = now {
            if n > 1 && !forced {
                self.violate(
                    "published-or-missed-once",
                    format!("{name} occurrence {}: published {n} times", at.1),
                );
            }
        }
        self.ends.insert(at, now);
    }

    /// `engine` starts running an instance; two live runners are a
    /// violation.
    pub fn run(&mut self, at: (usize, i64), who: (usize, u32), name: &str) {
        let runners = self.running.entry(at).or_default();
        let other = runners.iter().find(|r| **r != who).copied();
        if !runners.contains(&who) {
            runners.push(who);
        }
        if let Some(other) = other {
            self.violate(
                "one-live-claimer",
                format!(
                    "{name} occurrence {}: run by engine {} while engine {} runs it",
                    at.1,
                    label(who),
                    label(other)
                ),
            );
        }
    }

    /// An instance stopped running (ended, or its engine was killed).
    pub fn stop(&mut self, at: (usize, i64), who: (usize, u32)) {
        if let Some(r) = self.running.get_mut(&at) {
            r.retain(|x| *x != who);
            if r.is_empty() {
                self.running.remove(&at);
            }
        }
    }

    /// A slot taken in `pool` of `slots`.
    pub fn take_slot(&mut self, pool: &str, slots: u32) {
        let held = self.held.entry(pool.to_owned()).or_default();
        *held += 1;
        if *held > slots {
            let n = *held;
            self.violate(
                "pool-slots",
                format!("pool {pool}: {n} attempts hold its {slots} slots"),
            );
        }
    }

    /// A slot given back.
    pub fn free_slot(&mut self, pool: &str) {
        if let Some(h) = self.held.get_mut(pool) {
            *h = h.saturating_sub(1);
        }
    }

    /// A durable fact that must be announced.
    pub fn fact(&mut self, key: String) {
        let now = self.now;
        self.facts.entry(key).or_insert(now);
    }

    /// The outbox got a record for `key` (put-if-absent: once).
    pub fn outbox(&mut self, key: String) {
        self.outbox.entry(key).or_insert(0);
    }

    /// At the end: every fact durable before `cutoff` was delivered.
    pub fn all_announced(&mut self, cutoff: i64) {
        let silent: Vec<String> = self
            .facts
            .iter()
            .filter(|(f, at)| **at < cutoff && self.outbox.get(*f).is_none_or(|d| *d == 0))
            .map(|(f, _)| f.clone())
            .collect();
        for f in silent {
            self.violate("notified-once-per-fact", format!("{f}: never delivered"));
        }
    }
}

/// An engine and its incarnation, as the report names them.
pub fn label((engine, inc): (usize, u32)) -> String {
    format!("e{}.{}", engine + 1, inc)
}
