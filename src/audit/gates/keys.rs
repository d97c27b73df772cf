//! The key hash table of the uniqueness checks: 128-bit key hashes in an
//! open-addressing table sized for the rows expected.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use sha2::{Digest as _, Sha256};

use crate::audit::read::Row;

/// Domain separator of a key hash.
pub(super) const KEY_DOMAIN: &[u8] = b"weir.key.v1\0";

/// Hashes u128 key hashes by their own bits: they are already uniform, and
/// SipHash would cost as much as the set lookup itself.
#[derive(Debug, Default)]
pub(super) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u128(&mut self, n: u128) {
        // Truncation is the point: the low bits of a SHA-256 prefix.
        self.0 ^= n as u64;
    }
}

/// A small set of key hashes (duplicates to look for again).
pub(super) type FewKeys = HashSet<u128, BuildHasherDefault<KeyHasher>>;

/// The set of 128-bit key hashes seen: open addressing with linear probing
/// over a power-of-two table of `u128`, 0 marking an empty slot.
///
/// This is the audit's main memory cost: 16 bytes per slot, at most 3/4 full,
/// so 10 M distinct keys take 256 MiB. Key hashes are SHA-256 prefixes, already
/// uniform, so their low bits index the table directly; four slots share a
/// cache line, so an insert usually touches one line, where std's `HashSet`
/// touches its control bytes and its slot in separate lines.
#[derive(Debug, Default)]
pub(super) struct KeySet {
    pub(super) slots: Vec<u128>,
    /// Non-zero hashes stored.
    pub(super) stored: usize,
    /// Whether the hash 0, which cannot be stored, is in the set.
    pub(super) zero: bool,
}

impl KeySet {
    pub(super) fn len(&self) -> usize {
        self.stored + usize::from(self.zero)
    }

    /// Adds a hash; false if it was already in the set.
    pub(super) fn insert(&mut self, hash: u128) -> bool {
        if hash == 0 {
            return !std::mem::replace(&mut self.zero, true);
        }
        if (self.stored + 1) * 4 > self.slots.len() * 3 {
            self.resize(Self::slots_for(self.stored + 1).max(self.slots.len() * 2));
        }
        let mask = self.slots.len() - 1;
        // Truncation is the point: the low bits pick the slot.
        let mut index = hash as usize & mask;
        loop {
            let slot = &mut self.slots[index];
            if *slot == 0 {
                *slot = hash;
                self.stored += 1;
                return true;
            }
            if *slot == hash {
                return false;
            }
            index = (index + 1) & mask;
        }
    }

    /// Makes room for `additional` more hashes without growing.
    pub(super) fn reserve(&mut self, additional: usize) {
        let wanted = Self::slots_for(self.stored.saturating_add(additional));
        if wanted > self.slots.len() {
            self.resize(wanted);
        }
    }

    /// A power-of-two table size that holds `hashes` at most 3/4 full.
    pub(super) fn slots_for(hashes: usize) -> usize {
        (hashes.saturating_mul(4) / 3 + 1)
            .next_power_of_two()
            .max(16)
    }

    pub(super) fn resize(&mut self, slots: usize) {
        let old = std::mem::replace(&mut self.slots, vec![0; slots]);
        self.stored = 0;
        for hash in old.into_iter().filter(|&hash| hash != 0) {
            self.insert(hash);
        }
    }

    /// Loads the slot of each hash and discards it: independent loads run
    /// in parallel, so the inserts that follow find their lines cached.
    pub(super) fn touch(&self, hashes: impl Iterator<Item = u128>) {
        let mask = self.slots.len().wrapping_sub(1);
        let mut any = 0;
        for hash in hashes {
            any |= self.slots.get(hash as usize & mask).copied().unwrap_or(0);
        }
        std::hint::black_box(any);
    }

    pub(super) fn into_iter(self) -> impl Iterator<Item = u128> {
        let zero = self.zero.then_some(0);
        self.slots.into_iter().filter(|&hash| hash != 0).chain(zero)
    }
}

/// The 128-bit hash of a key (the first 16 bytes of SHA-256 of its values,
/// each a u32 LE length and bytes), or `None` if any key column is null.
pub(super) fn key_hash(columns: &[usize], row: &Row<'_>, buf: &mut Vec<u8>) -> Option<u128> {
    buf.clear();
    buf.extend_from_slice(KEY_DOMAIN);
    for &column in columns {
        let value = row.get(column)?;
        buf.extend_from_slice(&u32::try_from(value.len()).unwrap_or(u32::MAX).to_le_bytes());
        buf.extend_from_slice(value);
    }
    let hash: [u8; 32] = Sha256::digest(&*buf).into();
    let mut low = [0u8; 16];
    low.copy_from_slice(&hash[..16]);
    Some(u128::from_le_bytes(low))
}
