//! Concurrent fsyncs: the shared flusher behind a candidate's pre-commit sync
//! (`FsBackend::make_durable`).
//!
//! A candidate needs several independent fsyncs before its commit record may
//! be written (its data files and the directories holding their entries).
//! Issued one after the other, each waits for its own device cache flush;
//! issued at once, the block layer folds the concurrent flushes into a few.
//! [`sync_all`] hands a batch to a small pool of flusher threads shared by
//! every attempt of the process, so the batches of instances publishing at
//! the same time overlap too (a group commit without `syncfs(2)`: only the
//! named files are flushed, never another writer's dirty pages), and returns
//! once every one of them is durable or the first one failed.

use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};

/// Flusher threads. Enough for a few instances' batches at once; each one
/// is idle on a condition variable between batches.
const FLUSHERS: usize = 8;

type Reply = mpsc::Sender<Result<(), (PathBuf, io::Error)>>;

struct Flusher {
    queue: Mutex<VecDeque<(PathBuf, Reply)>>,
    ready: Condvar,
}

static FLUSHER: Flusher = Flusher {
    queue: Mutex::new(VecDeque::new()),
    ready: Condvar::new(),
};

/// Starts the flusher threads once; how many could be started (0: the
/// caller fsyncs inline).
fn started() -> usize {
    static STARTED: OnceLock<usize> = OnceLock::new();
    *STARTED.get_or_init(|| {
        (0..FLUSHERS)
            .filter(|i| {
                std::thread::Builder::new()
                    .name(format!("weir-fsync-{i}"))
                    .stack_size(64 * 1024)
                    .spawn(|| work(&FLUSHER))
                    .is_ok()
            })
            .count()
    })
}

fn work(flusher: &Flusher) {
    loop {
        let (path, reply) = {
            let mut queue = flusher.queue.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                match queue.pop_front() {
                    Some(job) => break job,
                    None => {
                        queue = flusher
                            .ready
                            .wait(queue)
                            .unwrap_or_else(PoisonError::into_inner)
                    }
                }
            }
        };
        // The caller may have gone (it returns at the first error).
        let _ = reply.send(super::fsync_path(&path).map_err(|e| (path, e)));
    }
}

/// fsyncs every path (files or directories) concurrently and returns when
/// all are durable, or with the first error and its path (its OS cause
/// kept). The others still complete in the background; nothing may be
/// assumed durable then.
pub fn sync_all(paths: Vec<PathBuf>) -> Result<(), (PathBuf, io::Error)> {
    let inline = |paths: Vec<PathBuf>| {
        paths
            .into_iter()
            .try_for_each(|p| super::fsync_path(&p).map_err(|e| (p, e)))
    };
    if paths.len() <= 1 || started() == 0 {
        return inline(paths);
    }
    let (reply, replies) = mpsc::channel();
    let n = paths.len();
    {
        let mut queue = FLUSHER.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.extend(paths.into_iter().map(|p| (p, reply.clone())));
    }
    FLUSHER.ready.notify_all();
    drop(reply);
    for _ in 0..n {
        match replies.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            // Unreachable while the flushers hold the senders; a lost
            // reply must not read as "durable".
            Err(_) => {
                return Err((
                    PathBuf::new(),
                    io::Error::other("a flusher thread went away"),
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncs_every_path_and_reports_a_missing_one_with_its_os_cause() {
        let tmp = tempfile::tempdir().unwrap();
        let files: Vec<PathBuf> = (0..5).map(|i| tmp.path().join(format!("f{i}"))).collect();
        for f in &files {
            std::fs::write(f, b"x").unwrap();
        }
        let mut all = files.clone();
        all.push(tmp.path().to_path_buf());
        sync_all(all).unwrap();
        let mut bad = files;
        bad.push(tmp.path().join("gone"));
        let (path, err) = sync_all(bad).unwrap_err();
        assert_eq!(path, tmp.path().join("gone"));
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        sync_all(Vec::new()).unwrap();
    }
}
