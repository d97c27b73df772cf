//! The operating system's side of running commands, and every `unsafe`
//! block it takes: starting a child without copying the engine
//! (`spawn.rs`), finding, stopping and reaping a command's whole process
//! tree and its cgroup (`tree.rs`), SIGINT and SIGTERM as stop requests
//! (`interrupt.rs`), the timer threads that enforce commands' timeouts
//! (`timer.rs`), and the few system calls around them (signalling a
//! process group, peeking at a child's exit, pipes and in-memory files,
//! the engine's own protection, its open-file limit).
//!
//! ```text
//!  exec (policy: when to start, kill, wait, what to log)
//!    │ safe functions only
//!    ▼
//!  process: spawn ─ tree (tag, cgroup v2/v1, /proc scan, reap) ─ the calls below
//! ```
//!
//! It knows nothing of tasks, attempts or executors: an executor that runs
//! commands elsewhere (a Slurm job, a Kubernetes pod) needs none of it but
//! [`tree::output`] for its own client commands.

pub mod interrupt;
pub mod spawn;
pub(crate) mod timer;
pub mod tree;

use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};

/// SIGKILLs the process group `pgid` (a child [`spawn::spawn`] started
/// leads its own). A group already gone is fine.
pub fn kill_group(pgid: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group; it touches
    // no memory of ours. ESRCH (group already gone) is fine.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Whether the child `pid` has exited (or was reaped already), without
/// reaping it: a `wait` in another thread still collects its status.
pub fn exited(pid: i32) -> bool {
    // SAFETY: waitid(2) writes only into the zeroed siginfo_t we own;
    // WNOWAIT leaves the child waitable, WNOHANG makes it non-blocking.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        // -1 is ECHILD: already reaped by the waiting thread.
        rc == -1 || info.si_pid() != 0
    }
}

/// Ends this process at once with SIGKILL: no destructor, no buffer
/// flushed, as a machine losing power would (crash fault injection).
pub fn kill_self() -> ! {
    // SAFETY: signalling our own pid; the point is to die here.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    unreachable!("SIGKILL cannot be caught")
}

/// A pipe, both ends close-on-exec: (read, write).
pub fn pipe() -> std::io::Result<(File, File)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both were just opened and are owned by nothing else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((File::from(r), File::from(w)))
}

/// An anonymous in-memory file holding `bytes`, read from its start.
pub fn in_memory(bytes: &[u8]) -> std::io::Result<File> {
    use std::io::Seek;
    // SAFETY: memfd_create with a nul-terminated name; returns a new fd.
    let fd = unsafe { libc::memfd_create(c"weir-stdin".as_ptr(), libc::MFD_CLOEXEC) };
    if fd == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nothing else.
    let mut file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(file)
}

/// Makes the engine's process not dumpable (`PR_SET_DUMPABLE` 0): its
/// `/proc/<pid>/environ`, `mem` and the like become root's, and it cannot
/// be ptraced, so a task (which runs as the same user) cannot read the
/// engine's environment, the store's credentials included. A task is
/// dumpable again from its `execve`; the engine leaves no core dump. Every
/// descriptor the engine inherited above 2 is made close-on-exec, so none
/// reaches a command (`spawn.rs` closes them in its children too).
pub fn protect_engine() {
    // SAFETY: prctl(2) with PR_SET_DUMPABLE takes an integer and touches no
    // memory of ours; a failure leaves the process as it was.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    spawn::keep_inherited_descriptors();
}

/// The soft `RLIMIT_NOFILE` of this process (1024 if it cannot be read).
pub fn open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) writes into the struct passed, which lives here.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } == 0;
    if read {
        limit.rlim_cur
    } else {
        1024
    }
}
