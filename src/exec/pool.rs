//! Pool slots: a counting semaphore per pool. A permit is held exactly while
//! a task's command runs; the engine's own work before (pinning, token
//! allocation, staging) and after (audit, fsyncs, commit) happens outside it,
//! so durability overlaps other instances' commands.

use std::sync::{Condvar, Mutex};

/// The slots of one pool.
pub(crate) struct Slots {
    free: Mutex<u32>,
    freed: Condvar,
}

/// A held slot, given back on drop.
pub(crate) struct Permit<'a> {
    slots: &'a Slots,
}

impl Slots {
    pub(crate) fn new(slots: u32) -> Slots {
        Slots {
            free: Mutex::new(slots),
            freed: Condvar::new(),
        }
    }

    /// Waits for a free slot.
    pub(crate) fn acquire(&self) -> Permit<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        Permit { slots: self }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.slots.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.slots.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn never_more_permits_than_slots() {
        let slots = Slots::new(3);
        let inside = AtomicU32::new(0);
        let most = AtomicU32::new(0);
        std::thread::scope(|s| {
            for _ in 0..16 {
                s.spawn(|| {
                    for _ in 0..20 {
                        let _permit = slots.acquire();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 3);
    }
}
