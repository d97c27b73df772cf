//! The one launcher of every command a manifest declares: a task's
//! (`launch.rs`), a sensor's (`readiness.rs`) and a notify `command`
//! target's (`notify`). Each gets the same containment and the same waits:
//!
//! ```text
//!  supervise(Start) ── asked to stop already? ─► Interrupted, nothing starts
//!       │
//!       ▼  process::spawn: own process group, PR_SET_PDEATHSIG=SIGKILL, every descriptor
//!          above 2 closed at exec, WEIR_PROCESS_TAG, the tag's cgroup (process::tree)
//!  watchdog (shared timer) ── at the timeout, or on SIGINT/SIGTERM ─► SIGKILL the group
//!       │
//!  the command exits ─► tree::stop: cgroup, group and tagged processes killed and reaped
//!       ▼
//!  Ending: Success | Exit | Signal | Timeout | Interrupted | SpawnFailed
//! ```
//!
//! [`run_captured`] is the same for a command whose stderr the engine reads
//! (a sensor's, a notify target's): stderr goes through a pipe into a
//! bounded [`Captured`] (its head and tail, [`CAPTURE_BYTES`] each, and how
//! much was cut between), and the wait for that pipe's end is bounded too: a
//! process that escaped the tree and holds stderr open costs at most
//! [`STDERR_GRACE`]. Its stdin is an in-memory file (memfd) holding the bytes
//! given (the notification's JSON), so a command that does not read it
//! blocks nobody.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::classify::Ending;
use super::env::TaskEnv;
use crate::process::{exited, in_memory, kill_group, pipe, tree};

/// What to start and watch.
pub struct Start<'a> {
    /// argv.
    pub argv: &'a [String],
    /// `argv[0]` already found along PATH (`launch::resolve`), or `None`.
    pub program: Option<&'a Path>,
    /// Working directory.
    pub cwd: &'a Path,
    /// The whole environment (`env.rs`); the tag is added here.
    pub env: &'a TaskEnv,
    /// stdin; `None`: `/dev/null`.
    pub stdin: Option<&'a File>,
    /// Where stdout goes.
    pub stdout: &'a File,
    /// Where stderr goes.
    pub stderr: &'a File,
    /// SIGKILL of the whole tree after this long.
    pub timeout: Duration,
    /// The launch's process tag (`tree::new_tag`).
    pub tag: &'a str,
}

/// Starts `start`'s command, waits for it (at most its timeout, and only
/// until a stop is requested) and stops its whole process tree.
pub fn supervise(start: &Start<'_>) -> Ending {
    // Asked to stop while waiting for a slot: the command never starts.
    if let Some(sig) = super::interrupt::requested() {
        return Ending::Interrupted(sig);
    }
    let mut env = start.env.clone();
    env.set(tree::TAG_VAR, start.tag);
    let env: Vec<(OsString, OsString)> = env.all();
    let spec = crate::process::spawn::Spec {
        argv: start.argv,
        program: start.program,
        cwd: start.cwd,
        env: &env,
        stdin: start.stdin,
        stdout: start.stdout,
        stderr: start.stderr,
        cgroup_procs: None,
    };
    let cgroup = tree::Cgroup::create(start.tag);
    let mut child = match tree::spawn(&spec, cgroup.as_ref()) {
        Ok(c) => c,
        Err(e) => {
            tree::stop(start.tag, cgroup.as_ref(), None);
            return Ending::SpawnFailed(format!("`{}`: {e}", start.argv[0]));
        }
    };
    let pgid = child.id() as libc::pid_t;
    let timed_out = Arc::new(AtomicBool::new(false));
    let interrupted = Arc::new(Mutex::new(None));
    let watchdog = watch(pgid, start.timeout, &timed_out, &interrupted);
    let watchdog = match watchdog {
        Ok(w) => w,
        Err(e) => {
            // No timeout could be enforced: the command does not run unwatched.
            kill_group(pgid);
            let _ = child.wait();
            tree::waited(child.id());
            tree::stop(start.tag, cgroup.as_ref(), Some(pgid));
            return Ending::SpawnFailed(format!("`{}`: {e}", start.argv[0]));
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
    // Whatever the command left running in the background, in its group or
    // not, must not outlive it (nor hold its stderr open).
    tree::stop(start.tag, cgroup.as_ref(), Some(pgid));
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

/// On the shared timer thread, due at the deadline and woken by a stop
/// request (SIGINT, SIGTERM, `timer::wake_watchdogs`): kills the group.
fn watch(
    pgid: libc::pid_t,
    timeout: Duration,
    timed_out: &Arc<AtomicBool>,
    interrupted: &Arc<Mutex<Option<super::interrupt::Signal>>>,
) -> std::io::Result<super::timer::Handle> {
    let deadline = crate::clock::instant_after(timeout);
    let (timed_out, interrupted) = (timed_out.clone(), interrupted.clone());
    super::timer::schedule(
        timeout,
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
}

/// How much of a command's stderr is kept at each end.
pub const CAPTURE_BYTES: usize = 64 * 1024;

/// How long the end of a command's stderr is waited for after its tree was
/// stopped (only a process that escaped it can hold the pipe open).
pub const STDERR_GRACE: Duration = Duration::from_millis(500);

/// A command's stderr, bounded: its first and last [`CAPTURE_BYTES`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    /// Bytes written in all.
    pub total: u64,
}

impl Captured {
    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = CAPTURE_BYTES.saturating_sub(self.head.len());
        let (first, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(first);
        bytes = rest;
        if bytes.len() >= CAPTURE_BYTES {
            self.tail.clear();
            bytes = &bytes[bytes.len() - CAPTURE_BYTES..];
        }
        let over = (self.tail.len() + bytes.len()).saturating_sub(CAPTURE_BYTES);
        self.tail.drain(..over);
        self.tail.extend(bytes);
    }

    /// Bytes between the head and the tail that were not kept.
    pub fn cut(&self) -> u64 {
        self.total - self.head.len() as u64 - self.tail.len() as u64
    }

    /// The text kept, lossily decoded, with a line saying how much was cut
    /// between its head and its tail.
    pub fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        let cut = self.cut();
        if cut > 0 {
            text.push_str(&format!("\n[… {cut} bytes of stderr not kept …]\n"));
        }
        let (a, b) = self.tail.as_slices();
        text.push_str(&String::from_utf8_lossy(&[a, b].concat()));
        text
    }
}

/// A command whose stderr the engine reads.
pub struct Captive<'a> {
    /// argv.
    pub argv: &'a [String],
    /// Working directory.
    pub cwd: &'a Path,
    /// Its whole environment (`env.rs`).
    pub env: &'a TaskEnv,
    /// What its stdin holds (empty: nothing).
    pub stdin: &'a [u8],
    /// SIGKILL of the whole tree after this long.
    pub timeout: Duration,
}

/// [`supervise`]s `captive` with stdout to `/dev/null` and stderr captured.
pub fn run_captured(captive: &Captive<'_>) -> (Ending, Captured) {
    let failed = |why: String| (Ending::SpawnFailed(why), Captured::default());
    let (reader, writer) = match pipe() {
        Ok(p) => p,
        Err(e) => return failed(format!("cannot make a pipe for stderr: {e}")),
    };
    let stdin = match in_memory(captive.stdin) {
        Ok(f) => f,
        Err(e) => return failed(format!("cannot hold stdin: {e}")),
    };
    let stdout = match File::options().write(true).open("/dev/null") {
        Ok(f) => f,
        Err(e) => return failed(format!("cannot open /dev/null: {e}")),
    };
    let captured = Arc::new(Mutex::new(Captured::default()));
    let (done_tx, done) = std::sync::mpsc::channel();
    let kept = Arc::clone(&captured);
    let drained = std::thread::Builder::new()
        .name("weir-stderr".into())
        .spawn(move || {
            let mut reader = reader;
            let mut chunk = vec![0u8; 1 << 16];
            while let Ok(n) = reader.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                kept.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(&chunk[..n]);
            }
            let _ = done_tx.send(());
        });
    if let Err(e) = drained {
        return failed(format!("cannot read stderr: {e}"));
    }
    let tag = tree::new_tag();
    let ending = supervise(&Start {
        argv: captive.argv,
        program: None,
        cwd: captive.cwd,
        env: captive.env,
        stdin: Some(&stdin),
        stdout: &stdout,
        stderr: &writer,
        timeout: captive.timeout,
        tag: &tag,
    });
    drop(writer);
    let _ = done.recv_timeout(STDERR_GRACE);
    let captured = captured.lock().unwrap_or_else(|p| p.into_inner()).clone();
    (ending, captured)
}

/// How a captured command ended, in words for a message: "exited with 3",
/// "did not exit within 30 s", with the end of its stderr when it has one.
pub fn describe(ending: &Ending) -> String {
    match ending {
        Ending::Success => "exited with 0".into(),
        Ending::Exit(code) => format!("exited with {code}"),
        Ending::Signal(sig) => format!("was killed by signal {sig}"),
        Ending::Timeout => "did not exit within its timeout".into(),
        Ending::Interrupted(sig) => format!("was stopped: weir received {}", sig.name()),
        Ending::SpawnFailed(why) => format!("cannot start: {why}"),
        other => other.describe(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captive(script: &str, timeout: Duration) -> (Ending, Captured) {
        let dir = tempfile::tempdir().unwrap();
        let argv = ["sh".to_string(), "-c".into(), script.into()];
        let env = TaskEnv::exactly(vec![("PATH".into(), "/usr/bin:/bin".into())]);
        run_captured(&Captive {
            argv: &argv,
            cwd: dir.path(),
            env: &env,
            stdin: b"{\"event\": \"published\"}",
            timeout,
        })
    }

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
            !s.lines()
                .any(|l| l.starts_with("State:") && l.contains('Z'))
        })
    }

    // A command that hangs with a background child holding its stderr is
    // stopped at its timeout: the call returns within the timeout and a
    // small grace, and the child is gone.
    #[test]
    fn a_hung_command_and_its_stderr_holder_are_stopped_at_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!(
            "sleep 300 & echo $! > '{}'; echo started >&2; sleep 300",
            pid_file.display()
        );
        let started = std::time::Instant::now();
        let (ending, captured) = captive(&script, Duration::from_secs(1));
        let took = started.elapsed();
        assert_eq!(ending, Ending::Timeout);
        assert!(took < Duration::from_secs(4), "returned after {took:?}");
        assert_eq!(captured.text(), "started\n");
        assert_background_child_gone(&pid_file);
    }

    /// The background child whose pid the script wrote to `pid_file` is dead.
    fn assert_background_child_gone(pid_file: &std::path::Path) {
        let pid: i32 = std::fs::read_to_string(pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            !alive(pid),
            "the background child {pid} outlived the command"
        );
    }

    // A command that exits leaving a background child that holds stderr open
    // is judged by its exit, at once, and the child is stopped with it.
    #[test]
    fn a_background_child_holding_stderr_does_not_keep_the_caller_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!(
            "sleep 300 & echo $! > '{}'; echo 'no route' >&2; exit 3",
            pid_file.display()
        );
        let started = std::time::Instant::now();
        let (ending, captured) = captive(&script, Duration::from_secs(60));
        assert_eq!(ending, Ending::Exit(3));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(captured.text(), "no route\n");
        assert_background_child_gone(&pid_file);
    }

    // 50 MB of stderr are kept as their first and last 64 KiB, with how
    // much was cut between; stdin holds what was given.
    #[test]
    fn stderr_is_kept_bounded_head_and_tail() {
        let (ending, captured) = captive(
            "cat >&2; head -c 50000000 /dev/zero | tr '\\0' x >&2; echo '<end>' >&2",
            Duration::from_secs(60),
        );
        assert_eq!(ending, Ending::Success);
        assert_eq!(captured.total, 22 + 50_000_000 + 6);
        assert_eq!(captured.cut(), captured.total - 2 * CAPTURE_BYTES as u64);
        let text = captured.text();
        assert!(
            text.starts_with("{\"event\": \"published\"}x"),
            "{}",
            &text[..40]
        );
        assert!(text.ends_with("xxx<end>\n"));
        assert!(text.contains(&format!(
            "[… {} bytes of stderr not kept …]",
            captured.cut()
        )));
        assert!(text.len() < 2 * CAPTURE_BYTES + 100);
    }

    #[test]
    fn capture_keeps_head_and_tail_across_chunks() {
        let mut c = Captured::default();
        let data: Vec<u8> = (0..3 * CAPTURE_BYTES + 17)
            .map(|i| (i % 251) as u8)
            .collect();
        for chunk in data.chunks(1000) {
            c.push(chunk);
        }
        assert_eq!(c.head, data[..CAPTURE_BYTES]);
        assert_eq!(
            c.tail.iter().copied().collect::<Vec<u8>>(),
            data[data.len() - CAPTURE_BYTES..]
        );
        assert_eq!(c.cut(), (CAPTURE_BYTES + 17) as u64);
    }
}
