//! The key table of the uniqueness checks: a compact list of key
//! fingerprints, sorted once at the end to find repeats, which are then
//! verified against the keys themselves.
//!
//! A key (its value, or for several columns their values each as a u32 LE
//! length and bytes) is hashed with 128-bit xxh3, seeded once per process. The top
//! [`BUCKET_BITS`] bits of the hash pick a bucket and its low 64 bits are
//! stored there: 8 bytes per row, so 10 M keys take 80 MB and no table
//! slack (an open-addressing table of 16-byte hashes took 256 MiB). Equal
//! keys always have equal fingerprints, so a candidate whose fingerprints
//! are all distinct has no duplicate, and that is decided without a second
//! read. Fingerprints that repeat (72 compared bits: a chance of about
//! 10⁻⁸ for 10 M distinct keys) are only suspects: the caller reads the
//! rows again and compares each suspect's key bytes with the keys stored
//! for it, so a hash collision is never reported as a duplicate.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use rayon::prelude::*;

use crate::audit::read::Row;

/// Bits of the key hash that pick a bucket. 256 buckets of 10 M keys
/// hold about 310 KB each, which still sort inside a core's L2 cache,
/// and the 256 tails every key is pushed to (one at random) take 16 KB
/// of cache where 1,024 took 64 KB: the push's store was the hottest
/// instruction of the key check.
pub(super) const BUCKET_BITS: u32 = 8;
const BUCKETS: usize = 1 << BUCKET_BITS;

/// How many repeated fingerprints are verified against their keys. Beyond
/// this the check has failed many times over; the rest are counted by
/// fingerprint (72 bits) without reading their keys.
pub(super) const MAX_SUSPECTS: usize = 1 << 16;

/// How a key's encoded values are hashed: [`xxh3`] except in tests that
/// force collisions.
pub(super) type KeyHash = fn(&[u8]) -> u128;

/// The 128-bit xxh3 hash of an encoded key with this process's seed. xxh3
/// is several times faster than SHA-256 on short keys; the seed keeps a
/// file from being crafted to collide, and a collision is harmless anyway
/// (see the module documentation).
pub(super) fn xxh3(encoded: &[u8]) -> u128 {
    static SEED: OnceLock<u64> = OnceLock::new();
    let seed = *SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u8));
    xxhash_rust::xxh3::xxh3_128_with_seed(encoded, seed)
}

/// What is kept of a key hash: its bucket in the high bits and its
/// fingerprint in the low 64.
pub(super) fn print_of(hash: u128) -> u128 {
    let bucket = hash >> (128 - BUCKET_BITS);
    (bucket << 64) | u128::from(hash as u64)
}

/// Hashes prints by their own low bits: they are already uniform.
#[derive(Debug, Default)]
pub(super) struct PrintHasher(u64);

impl Hasher for PrintHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u128(&mut self, n: u128) {
        // Truncation is the point: the fingerprint's bits.
        self.0 ^= n as u64;
    }
}

/// A set of prints (the suspects to verify).
pub(super) type Prints = HashSet<u128, BuildHasherDefault<PrintHasher>>;
/// Per suspect print, the distinct encoded keys seen with it so far.
pub(super) type StoredKeys = HashMap<u128, Vec<Vec<u8>>, BuildHasherDefault<PrintHasher>>;

/// The fingerprints of every non-null key, by bucket.
#[derive(Debug, Default)]
pub(super) struct KeyPrints {
    /// Empty until the first key, then [`BUCKETS`] buckets.
    buckets: Vec<Vec<u64>>,
    /// The buckets of sets appended, per bucket: moved into it only when
    /// it is sorted, one bucket at a time, so that appending the parts of
    /// a file does not hold two copies of its prints at once.
    appended: Vec<Vec<Vec<u64>>>,
    len: usize,
}

/// What sorting the fingerprints found.
#[derive(Debug, Default)]
pub(super) struct Repeats {
    /// Prints seen more than once, at most [`MAX_SUSPECTS`].
    pub(super) suspects: Prints,
    /// Repeats of prints beyond the first [`MAX_SUSPECTS`]: counted as
    /// duplicates without verification.
    pub(super) unverified: u64,
}

impl KeyPrints {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn push(&mut self, hash: u128) {
        if self.buckets.is_empty() {
            self.buckets.resize_with(BUCKETS, Vec::new);
        }
        let print = print_of(hash);
        // The high bits of the print are the bucket, below BUCKETS.
        if let Some(bucket) = self.buckets.get_mut((print >> 64) as usize) {
            bucket.push(print as u64);
            self.len += 1;
        }
    }

    /// Makes room for about `keys` keys in all, so buckets are not copied
    /// as they grow (room not written to costs no memory).
    pub(super) fn reserve(&mut self, keys: usize) {
        if self.buckets.is_empty() {
            self.buckets.resize_with(BUCKETS, Vec::new);
        }
        let each = keys / BUCKETS + keys / BUCKETS / 16 + 64;
        for bucket in &mut self.buckets {
            bucket.reserve(each.saturating_sub(bucket.len()));
        }
    }

    /// Takes in the prints of another set (without copying them yet).
    pub(super) fn append(&mut self, other: Self) {
        if self.buckets.is_empty() {
            *self = other;
            return;
        }
        if other.len == 0 {
            return;
        }
        self.appended.resize_with(BUCKETS, Vec::new);
        let theirs = other.buckets.into_iter().zip(
            other
                .appended
                .into_iter()
                .chain(std::iter::repeat_with(Vec::new)),
        );
        for (mine, (bucket, more)) in self.appended.iter_mut().zip(theirs) {
            mine.push(bucket);
            mine.extend(more);
        }
        self.len += other.len;
    }

    /// Sorts each bucket (in parallel, for enough keys to be worth waking
    /// the pool) and collects the prints that occur more than once.
    pub(super) fn repeats(&mut self) -> Repeats {
        self.appended.resize_with(self.buckets.len(), Vec::new);
        let buckets = self.buckets.iter_mut().zip(&mut self.appended);
        let found: Vec<Vec<(u128, u64)>> = if self.len < PARALLEL_SORT {
            let mut scratch = Vec::new();
            buckets
                .enumerate()
                .map(|bucket| bucket_repeats(&mut scratch, bucket))
                .collect()
        } else {
            let buckets: Vec<_> = buckets.collect();
            buckets
                .into_par_iter()
                .enumerate()
                .map_init(Vec::new, bucket_repeats)
                .collect()
        };
        let mut repeats = Repeats::default();
        for (print, extra) in found.into_iter().flatten() {
            if repeats.suspects.len() < MAX_SUSPECTS {
                repeats.suspects.insert(print);
            } else {
                repeats.unverified += extra;
            }
        }
        repeats
    }
}

/// Fewer keys than this are sorted on the calling thread: for a small
/// partition, handing the buckets to the rayon pool (waking its workers,
/// which then spin before they sleep again) costs more than the sort.
const PARALLEL_SORT: usize = 1 << 16;

/// One bucket's prints, with those appended to it, sorted, and those that
/// occur more than once with how many times more. Appended prints are
/// sorted together in `scratch`, reused from bucket to bucket: copying them
/// into the bucket would, with the allocator keeping what is freed, leave
/// the process holding them twice.
fn bucket_repeats(
    scratch: &mut Vec<u64>,
    (bucket, (prints, appended)): (usize, (&mut Vec<u64>, &mut Vec<Vec<u64>>)),
) -> Vec<(u128, u64)> {
    let prints = if appended.is_empty() {
        prints.as_mut_slice()
    } else {
        scratch.clear();
        scratch.extend_from_slice(prints);
        *prints = Vec::new();
        for more in appended.drain(..) {
            scratch.extend_from_slice(&more);
        }
        scratch.as_mut_slice()
    };
    prints.sort_unstable();
    let mut repeated = Vec::new();
    let mut at = 0;
    while at < prints.len() {
        let run = prints[at..]
            .iter()
            .take_while(|&&p| p == prints[at])
            .count();
        if run > 1 {
            let print = ((bucket as u128) << 64) | u128::from(prints[at]);
            repeated.push((print, (run - 1) as u64));
        }
        at += run;
    }
    repeated
}

/// The hash of a row's key, or `None` if any key column is null: of its
/// one value for a one-column key (hashed where the reader left it: a copy
/// just written would stall the hash's loads), of [`encode_key`]'s bytes
/// (written to `buf`) otherwise.
pub(super) fn key_hash(
    hash: KeyHash,
    columns: &[usize],
    row: &Row<'_>,
    buf: &mut Vec<u8>,
) -> Option<u128> {
    if let [column] = columns {
        return row.get(*column).map(hash);
    }
    encode_key(columns, row, buf)?;
    Some(hash(buf))
}

/// Encodes a key's values into `buf` (each a u32 LE length and bytes);
/// `None` if any key column is null.
pub(super) fn encode_key(columns: &[usize], row: &Row<'_>, buf: &mut Vec<u8>) -> Option<()> {
    buf.clear();
    for &column in columns {
        let value = row.get(column)?;
        buf.extend_from_slice(&u32::try_from(value.len()).unwrap_or(u32::MAX).to_le_bytes());
        buf.extend_from_slice(value);
    }
    Some(())
}
