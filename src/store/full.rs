//! A full disk under a local warehouse: telling it from other failures, a
//! pause for a long-running loop to wait it out, and the space kept so that
//! gc can still write the evidence it owes before each deletion.
//!
//! ```text
//!  Warehouse::open ──► <warehouse>/_reserve (RESERVE_BYTES, allocated) if missing, best effort
//!  weir gc --apply ──► release_reserve ─► operator log, GC_DELETED, delete … ─► keep_reserve
//!  a loop's store error ──► is_disk_full? ──► DiskFullPause::wait: log once, back off, try again
//! ```

use std::io::{self, Write};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::Duration;

/// How much space a local warehouse keeps aside for gc's log: about 250
/// `GC_DELETED` lines, and every deletion frees more than its line takes.
pub const RESERVE_BYTES: u64 = 128 << 10;

/// The reserve's name at the warehouse's root (`_`: not a dataset).
pub const RESERVE_FILE: &str = "_reserve";

/// Whether `error` (or any error it was caused by) is a full disk or a
/// spent quota (ENOSPC, EDQUOT).
pub fn is_disk_full(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            if is_full_io(io) {
                return true;
            }
        }
        next = e.source();
    }
    false
}

fn is_full_io(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull
        || e.kind() == io::ErrorKind::QuotaExceeded
        || matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Makes sure `<root>/_reserve` holds [`RESERVE_BYTES`] of allocated space
/// (not a sparse file): created when missing or short, best effort (on a
/// disk already full it stays as it is). Whether the reserve is whole.
pub fn keep_reserve(root: &Path) -> bool {
    let path = root.join(RESERVE_FILE);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() >= RESERVE_BYTES) {
        return true;
    }
    let made = allocate(&path);
    if made.is_err() {
        // A short reserve would only be mistaken for a whole one.
        let _ = std::fs::remove_file(&path);
    }
    made.is_ok()
}

fn allocate(path: &Path) -> io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    let len = libc::off_t::try_from(RESERVE_BYTES).expect("the reserve's size fits off_t");
    // SAFETY: fallocate(2) on a descriptor this function owns.
    if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) } != 0 {
        // A filesystem without fallocate: zeros take the blocks too.
        file.write_all(&vec![0; RESERVE_BYTES as usize])?;
    }
    file.sync_all()
}

/// Gives the reserve back to the filesystem, so that what follows (gc's
/// log) has room on a full disk; whether there was one.
pub fn release_reserve(root: &Path) -> bool {
    std::fs::remove_file(root.join(RESERVE_FILE)).is_ok()
}

/// What a loop that writes to the store does on a full disk: instead of
/// exiting, it waits and tries again, saying so once, with waits doubling
/// from [`DiskFullPause::FIRST`] to [`DiskFullPause::MAX`].
///
/// ```text
///  let mut pause = DiskFullPause::default();
///  loop {
///      match step() {
///          Ok(_) => pause.recovered(),
///          Err(e) => match pause.wait(&e) {
///              Some(d) => sleep(d),        // full disk: nothing half done is kept by `step`
///              None => return Err(e),      // anything else: as before
///          },
///      }
///  }
/// ```
#[derive(Debug, Default)]
pub struct DiskFullPause {
    /// Waits so far in this pause (0: not paused).
    waits: u32,
}

impl DiskFullPause {
    /// The first wait.
    pub const FIRST: Duration = Duration::from_secs(1);
    /// The longest wait.
    pub const MAX: Duration = Duration::from_secs(60);

    /// For a full-disk `error`: how long to wait before trying again, the
    /// first time printing a warning naming it; `None` for anything else.
    pub fn wait(&mut self, error: &(dyn std::error::Error + 'static)) -> Option<Duration> {
        if !is_disk_full(error) {
            return None;
        }
        if self.waits == 0 {
            tracing::warn!(
                "the warehouse's disk is full ({}); pausing, trying again every {}-{} s until there is space (`weir gc --apply` frees what it may)",
                crate::store::chain(error),
                Self::FIRST.as_secs(),
                Self::MAX.as_secs()
            );
        }
        let wait = crate::clock::doubling(Self::FIRST, Self::MAX, self.waits);
        self.waits = self.waits.saturating_add(1);
        Some(wait)
    }

    /// Whether this pause is waiting out a full disk.
    pub fn paused(&self) -> bool {
        self.waits > 0
    }

    /// A write went through: the pause ends (saying so, if there was one).
    pub fn recovered(&mut self) {
        if self.waits > 0 {
            tracing::info!("the warehouse's disk has space again; going on");
        }
        self.waits = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreError;

    #[test]
    fn a_full_disk_is_told_apart_through_the_causes() {
        let full = StoreError::io("/wh/x")(io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(is_disk_full(&full));
        let quota = StoreError::io("/wh/x")(io::Error::from_raw_os_error(libc::EDQUOT));
        assert!(is_disk_full(&quota));
        let other = StoreError::io("/wh/x")(io::Error::from_raw_os_error(libc::EIO));
        assert!(!is_disk_full(&other));
        let wrapped = io::Error::other(full);
        assert!(is_disk_full(&wrapped));
    }

    #[test]
    fn a_pause_backs_off_to_its_bound_and_ends_when_a_write_goes_through() {
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        let mut pause = DiskFullPause::default();
        assert_eq!(pause.wait(&io::Error::from_raw_os_error(libc::EIO)), None);
        assert!(!pause.paused());
        let waits: Vec<u64> = (0..9)
            .map(|_| pause.wait(&full).unwrap().as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert!(pause.paused());
        pause.recovered();
        assert!(!pause.paused());
        assert_eq!(pause.wait(&full), Some(DiskFullPause::FIRST));
    }

    #[test]
    fn the_reserve_is_allocated_and_given_back() {
        let dir = tempfile::tempdir().unwrap();
        assert!(keep_reserve(dir.path()));
        let meta = std::fs::metadata(dir.path().join(RESERVE_FILE)).unwrap();
        assert_eq!(meta.len(), RESERVE_BYTES);
        // Allocated blocks, not a hole that a full disk could not fill.
        assert!(std::os::unix::fs::MetadataExt::blocks(&meta) * 512 >= RESERVE_BYTES);
        assert!(release_reserve(dir.path()));
        assert!(!release_reserve(dir.path()));
        assert!(keep_reserve(dir.path()));
    }
}
