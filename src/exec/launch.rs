//! Launching a task's command: its own process group, the documented
//! environment, output to files, a watchdog that kills the whole group at
//! the timeout, and its whole process tree stopped when it exits
//! (`tree.rs`).
//!
//! The environment (`env.rs` builds it, README "The task environment"):
//! `WEIR_RUN_ID`, `WEIR_TASK`, `WEIR_PARTITION`, `WEIR_ATTEMPT`, `WEIR_TOKEN`,
//! `WEIR_OUTPUT_DIR`, `WEIR_INPUT_<NAME>` (one per input, NAME upper-cased
//! with non-alphanumerics as `_`), `WEIR_PARTITION_<SCHEME>` (one per
//! dimension), `WEIR_CODE_VERSION`, `WEIR_PIPELINE`, `WEIR_PROCESS_TAG`
//! (`tree.rs`).

use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::classify::Ending;
use super::tree;

/// What to launch.
pub struct Launch<'a> {
    /// argv.
    pub argv: &'a [String],
    /// `argv[0]` found along the engine's PATH once per task ([`resolve`]):
    /// the child then makes one `execve` instead of one per PATH entry.
    /// `None`: the child searches PATH itself.
    pub program: Option<&'a Path>,
    /// Working directory (the manifest's).
    pub cwd: &'a Path,
    /// The command's whole environment (`env::build`).
    pub env: super::env::TaskEnv,
    /// Where stdout goes.
    pub stdout: PathBuf,
    /// Where stderr goes.
    pub stderr: PathBuf,
    /// Kill the process group after this long.
    pub timeout: Duration,
    /// The launch's process tag (`tree::new_tag`): every process of the task
    /// carries it, and it is what stops them all when the command exits.
    pub tag: String,
}

/// `raw_orders` → `WEIR_INPUT_RAW_ORDERS`.
pub fn input_var(dataset: &str) -> String {
    let name: String = dataset
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("WEIR_INPUT_{name}")
}

/// `WEIR_PARTITION_<SCHEME>` per dimension of a task's key
/// (`WEIR_PARTITION_REGION=eu`).
pub fn partition_vars(dims: &crate::partition::Dims, key: &str) -> Vec<(String, String)> {
    let Some(parts) = dims.split(key) else {
        return Vec::new();
    };
    dims.0
        .iter()
        .zip(parts)
        .map(|(d, part)| {
            let var = input_var(&d.name).replacen("WEIR_INPUT_", "WEIR_PARTITION_", 1);
            (var, part.to_string())
        })
        .collect()
}

/// Where `execvp(3)` would find `program` along the engine's PATH, if that
/// can be known before the child exists: `None` for a name with a slash (no
/// search), a PATH with a relative entry before the match (it depends on the
/// child's working directory), or no executable match (the child then
/// reports the error as before).
pub fn resolve(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.is_empty() || program.contains('/') {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        if !dir.is_absolute() {
            return None;
        }
        let candidate = dir.join(program);
        if let Ok(meta) = std::fs::metadata(&candidate) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Some(candidate);
            }
        }
    }
    None
}

/// Runs the command to completion (or its timeout) and says how it ended.
pub fn run(launch: &Launch<'_>) -> Ending {
    let (Ok(out), Ok(err)) = (File::create(&launch.stdout), File::create(&launch.stderr)) else {
        return Ending::SpawnFailed(format!("cannot create {}", launch.stdout.display()));
    };
    // Asked to stop while waiting for a slot: the command never starts.
    if let Some(sig) = super::interrupt::requested() {
        return Ending::Interrupted(sig);
    }
    let mut env = launch.env.clone();
    env.set(tree::TAG_VAR, &launch.tag);
    let env = env.all();
    let spec = super::spawn::Spec {
        argv: launch.argv,
        program: launch.program,
        cwd: launch.cwd,
        env: &env,
        stdout: &out,
        stderr: &err,
        cgroup_procs: None,
    };
    let cgroup = tree::Cgroup::create(&launch.tag);
    let mut child = match tree::spawn(&spec, cgroup.as_ref()) {
        Ok(c) => c,
        Err(e) => {
            tree::stop(&launch.tag, cgroup.as_ref(), None);
            return Ending::SpawnFailed(format!("`{}`: {e}", launch.argv[0]));
        }
    };
    let pgid = child.id() as libc::pid_t;
    let timed_out = Arc::new(AtomicBool::new(false));
    let interrupted = Arc::new(std::sync::Mutex::new(None));
    let deadline = crate::clock::instant_after(launch.timeout);
    // On the shared timer thread, due at the deadline and woken by a stop
    // request (SIGINT, SIGTERM, `timer::wake_watchdogs`), which kills the
    // group; the tree is stopped below like after any exit.
    let watchdog = {
        let timed_out = timed_out.clone();
        let interrupted = interrupted.clone();
        super::timer::schedule(
            launch.timeout,
            Box::new(move || {
                if let Some(sig) = super::interrupt::requested() {
                    *interrupted.lock().unwrap_or_else(|p| p.into_inner()) = Some(sig);
                    kill_group(pgid);
                    return None;
                }
                // An engine paused past the timeout (SIGSTOP, a stopped VM)
                // wakes with the deadline passed: a child that exited
                // meanwhile finished in time and is not a timeout.
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    if !exited(pgid) {
                        timed_out.store(true, Ordering::SeqCst);
                        kill_group(pgid);
                    }
                    return None;
                }
                Some(left)
            }),
        )
    };
    let watchdog = match watchdog {
        Ok(w) => w,
        Err(e) => {
            // No timeout could be enforced: the command does not run unwatched.
            kill_group(pgid);
            let _ = child.wait();
            tree::waited(child.id());
            tree::stop(&launch.tag, cgroup.as_ref(), Some(pgid));
            return Ending::SpawnFailed(format!("`{}`: {e}", launch.argv[0]));
        }
    };
    // A stop requested before the watchdog was scheduled woke nobody.
    if let Some(sig) = super::interrupt::requested() {
        *interrupted.lock().unwrap_or_else(|p| p.into_inner()) = Some(sig);
        kill_group(pgid);
    }
    let status = child.wait();
    tree::waited(child.id());
    watchdog.cancel();
    // Whatever the task left running in the background, in its group or
    // not, must not write into the candidate after it is audited.
    tree::stop(&launch.tag, cgroup.as_ref(), Some(pgid));
    if let Some(sig) = *interrupted.lock().unwrap_or_else(|p| p.into_inner()) {
        return Ending::Interrupted(sig);
    }
    match status {
        _ if timed_out.load(Ordering::SeqCst) => Ending::Timeout,
        Ok(s) if s.success() => Ending::Success,
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => Ending::Exit(code),
            (None, Some(sig)) => Ending::Signal(sig),
            (None, None) => Ending::Exit(-1),
        },
        Err(e) => Ending::SpawnFailed(format!("wait failed: {e}")),
    }
}

/// Whether the child `pid` has exited (or was reaped already), without
/// reaping it: `wait` in the launching thread still collects its status.
fn exited(pid: libc::pid_t) -> bool {
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
        // -1 is ECHILD: already reaped by the launching thread.
        rc == -1 || info.si_pid() != 0
    }
}

fn kill_group(pgid: libc::pid_t) {
    // SAFETY: kill(2) with a negative pid signals a process group; it touches
    // no memory of ours. ESRCH (group already gone) is fine.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// The last `max` bytes of a file, lossily decoded, from a line start.
/// Only those bytes are read: a task that wrote gigabytes to stderr costs
/// the engine `max` bytes of memory, not the file.
pub fn tail(path: &Path, max: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let start = len.saturating_sub(max as u64);
    let mut bytes = Vec::with_capacity(max.min(len as usize));
    if file.seek(SeekFrom::Start(start)).is_err()
        || file.take(max as u64).read_to_end(&mut bytes).is_err()
    {
        return String::new();
    }
    last_lines(&bytes, start > 0)
}

/// The last `max` bytes of `bytes` as text, in whole lines (what [`tail`]
/// reads from a file, for evidence that came from the store).
pub fn tail_bytes(bytes: &[u8], max: usize) -> String {
    let start = bytes.len().saturating_sub(max);
    last_lines(&bytes[start..], start > 0)
}

fn last_lines(bytes: &[u8], cut: bool) -> String {
    let text = String::from_utf8_lossy(bytes);
    // Cut mid-file: drop the partial first line.
    let text = if cut {
        text.split_once('\n')
            .map_or(text.as_ref(), |(_, rest)| rest)
            .to_string()
    } else {
        text.into_owned()
    };
    text.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Minor page faults of the calling thread so far.
    fn minor_faults() -> i64 {
        // SAFETY: getrusage writes only into the zeroed struct we own.
        unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
            usage.ru_minflt
        }
    }

    // issue 16: launching a command does not copy the engine. A fork
    // write-protects every page of the engine, so each page the engine
    // writes afterwards faults again (and flushes the other CPUs' TLBs):
    // about 1.9 ms of system CPU per launch in W1.
    #[test]
    fn a_launch_does_not_fork_the_engine() {
        const LEN: usize = 32 << 20;
        const PAGE: usize = 4096;
        // SAFETY: a private anonymous mapping of our own, unmapped below;
        // small pages, so a fault is counted per page.
        let buf = unsafe {
            let buf = libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(buf, libc::MAP_FAILED);
            libc::madvise(buf, LEN, libc::MADV_NOHUGEPAGE);
            buf.cast::<u8>()
        };
        let touch = |round: u8| {
            for offset in (0..LEN).step_by(PAGE) {
                // SAFETY: inside the mapping.
                unsafe { buf.add(offset).write_volatile(round) };
            }
        };
        touch(1);
        let dir = tempfile::tempdir().unwrap();
        let argv = ["true".to_string()];
        let launch = Launch {
            argv: &argv,
            program: None,
            cwd: dir.path(),
            env: crate::exec::env::TaskEnv::exactly(vec![("WEIR_TASK".into(), "t".into())]),
            stdout: dir.path().join("stdout.log"),
            stderr: dir.path().join("stderr.log"),
            timeout: Duration::from_secs(30),
            tag: tree::new_tag(),
        };
        let before = minor_faults();
        for round in 2..5 {
            assert_eq!(run(&launch), Ending::Success);
            touch(round);
        }
        let faults = minor_faults() - before;
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(buf.cast(), LEN) };
        // A fork per launch: at least 3 × 8,192 faults on the buffer alone.
        assert!(
            faults < (LEN / PAGE) as i64 / 2,
            "{faults} page faults for 3 launches: the engine's memory was copied"
        );
    }
}
