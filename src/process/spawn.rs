//! Starting a task's command without copying the engine.
//!
//! `std::process::Command` with a `pre_exec` hook forks: the whole engine's
//! page tables are copied, and every page the engine's other threads write
//! afterwards is copied again (with a TLB shootdown to the other CPUs),
//! until the child's `exec` drops the copy. W1 measured that at about 1.9 ms
//! of system CPU per launch on this 2-core host (BENCHMARKS.md, "The
//! spawn"). This module starts the child the way `posix_spawn(3)` does:
//! `clone(CLONE_VM | CLONE_VFORK)` onto a small stack of its own, the
//! launching thread suspended until the child has exec'd or failed, and
//! nothing copied. In the child, before `execve`, it also does what the
//! old hook did, which `posix_spawn` cannot:
//!
//! ```text
//!  parent: block every signal ──► clone(VM|VFORK) ──► restore the mask, read the child's report
//!  child:  dup2 stdin/stdout/stderr ─► chdir ─► setpgid(0, 0) ─► handlers to SIG_DFL, SIGPIPE too
//!          ─► PR_SET_PDEATHSIG=SIGKILL (and die if the engine already has) ─► join the cgroup
//!          ─► every descriptor above 2 close-on-exec (close_range) ─► unblock signals
//!          ─► execve along the candidates (execvp's rules) ─► or report errno, _exit(127)
//! ```
//!
//! The child shares the engine's memory until its `exec`: it calls only
//! async-signal-safe functions on data the parent prepared, allocates
//! nothing, and reports through atomics in that data.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

/// What to start.
pub struct Spec<'a> {
    /// argv; `argv[0]` is also what is searched along PATH when `program`
    /// is `None`.
    pub argv: &'a [String],
    /// The executable, when already resolved (`launch::resolve`).
    pub program: Option<&'a Path>,
    /// Working directory.
    pub cwd: &'a Path,
    /// The command's whole environment: nothing of the engine's is added.
    pub env: &'a [(OsString, OsString)],
    /// stdin; `None`: `/dev/null`.
    pub stdin: Option<&'a File>,
    /// Where stdout goes.
    pub stdout: &'a File,
    /// Where stderr goes.
    pub stderr: &'a File,
    /// A cgroup's `cgroup.procs`, open for writing: the child joins it
    /// before `exec`.
    pub cgroup_procs: Option<&'a File>,
}

/// A started child process, in its own process group (its pid is the
/// group's id).
#[derive(Debug)]
pub struct Child {
    pid: libc::pid_t,
    joined_cgroup: bool,
    status: Option<ExitStatus>,
}

impl Child {
    /// Its pid.
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Whether it joined the cgroup before its `exec` (so every descendant
    /// is in it).
    pub fn joined_cgroup(&self) -> bool {
        self.joined_cgroup
    }

    /// Waits for it to exit (once; later calls return the same status).
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = wait_pid(self.pid)?;
        self.status = Some(status);
        Ok(status)
    }
}

fn wait_pid(pid: libc::pid_t) -> io::Result<ExitStatus> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child, into a local.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return Ok(ExitStatus::from_raw(status));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Everything the child reads, prepared by the parent, and the child's
/// report.
struct Prepared {
    /// Where to try `execve`, in order (one entry when no PATH search).
    paths: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    /// `/bin/sh <path> argv[1..]`, for a file `execve` says is not an
    /// executable format (`ENOEXEC`), as `execvp(3)` does; index 1 is set
    /// by the child.
    sh_argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    cgroup_procs: RawFd,
    parent: libc::pid_t,
    /// Set by the child: 0, or the errno that stopped it.
    error: AtomicI32,
    /// Set by the child: 1 when its write to `cgroup.procs` succeeded.
    joined: AtomicI32,
}

/// Bytes of stack for the child (it runs a few libc calls).
const STACK: usize = 64 * 1024;

/// `/dev/null`, opened once per engine process.
fn dev_null() -> io::Result<RawFd> {
    static NULL: OnceLock<Result<File, (io::ErrorKind, Option<i32>)>> = OnceLock::new();
    match NULL.get_or_init(|| File::open("/dev/null").map_err(|e| (e.kind(), e.raw_os_error()))) {
        Ok(f) => Ok(f.as_raw_fd()),
        Err((_, Some(code))) => Err(io::Error::from_raw_os_error(*code)),
        Err((kind, None)) => Err(io::Error::new(*kind, "cannot open /dev/null")),
    }
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        )
    })
}

/// Where `execvp(3)` would try `name`, in its order: `name` itself when it
/// has a slash, else each PATH entry (an empty one is the working
/// directory) joined with it.
fn candidates(name: &[u8], path: Option<&OsStr>) -> io::Result<Vec<CString>> {
    if name.contains(&b'/') {
        return Ok(vec![cstring(name)?]);
    }
    let path = path.map_or(&b"/bin:/usr/bin"[..], OsStr::as_bytes);
    path.split(|b| *b == b':')
        .map(|dir| {
            let mut full = Vec::with_capacity(dir.len() + 1 + name.len());
            if !dir.is_empty() {
                full.extend_from_slice(dir);
                full.push(b'/');
            }
            full.extend_from_slice(name);
            cstring(&full)
        })
        .collect()
}

/// Starts `spec`'s command: see the module doc.
pub fn spawn(spec: &Spec<'_>) -> io::Result<Child> {
    let Some(arg0) = spec.argv.first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty argv"));
    };
    // The environment: exactly `env` (`exec/env.rs` decided what of the
    // engine's the task gets).
    let mut env_owned: Vec<CString> = Vec::new();
    let mut child_path: Option<&OsStr> = None;
    for (k, v) in spec.env {
        if k == "PATH" {
            child_path = Some(v);
        }
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        env_owned.push(cstring(&kv)?);
    }
    let argv_owned = spec
        .argv
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<io::Result<Vec<_>>>()?;
    let paths = match spec.program {
        Some(program) => vec![cstring(program.as_os_str().as_bytes())?],
        None => candidates(arg0.as_bytes(), child_path)?,
    };
    let sh = cstring(b"/bin/sh")?;
    let mut argv: Vec<*const libc::c_char> = argv_owned.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut sh_argv = vec![sh.as_ptr(), std::ptr::null()];
    sh_argv.extend(argv_owned[1..].iter().map(|a| a.as_ptr()));
    sh_argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env_owned.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mut prepared = Prepared {
        paths,
        argv,
        sh_argv,
        envp,
        cwd: cstring(spec.cwd.as_os_str().as_bytes())?,
        stdin: match spec.stdin {
            Some(f) => f.as_raw_fd(),
            None => dev_null()?,
        },
        stdout: spec.stdout.as_raw_fd(),
        stderr: spec.stderr.as_raw_fd(),
        cgroup_procs: spec.cgroup_procs.map_or(-1, AsRawFd::as_raw_fd),
        parent: std::process::id() as libc::pid_t,
        error: AtomicI32::new(0),
        joined: AtomicI32::new(0),
    };
    let mut stack: Vec<u8> = Vec::with_capacity(STACK);
    // SAFETY: the stack top is inside the allocation and 16-byte aligned;
    // `child` touches only `prepared` (alive until clone returns, which
    // CLONE_VFORK delays until the child has exec'd or exited) and its own
    // stack. Every signal is blocked across the clone so no handler of the
    // engine runs on the child's stack before the child resets them.
    let pid = unsafe {
        let top = (stack.as_mut_ptr().add(STACK) as usize) & !15;
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut prepared as *mut Prepared).cast(),
        );
        let clone_error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(clone_error);
        }
        pid
    };
    drop(stack);
    let error = prepared.error.load(Ordering::SeqCst);
    if error != 0 {
        // It exited without exec: reap it, report why.
        let _ = wait_pid(pid);
        return Err(io::Error::from_raw_os_error(error));
    }
    Ok(Child {
        pid,
        joined_cgroup: prepared.joined.load(Ordering::SeqCst) == 1,
        status: None,
    })
}

/// The errno of the last failed libc call (in the child: the parent
/// thread's errno slot, which it does not read while suspended).
fn errno() -> i32 {
    // SAFETY: reads the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Marks every descriptor above 2 close-on-exec: `close_range(2)` where the
/// kernel has it (5.11+), else one `fcntl` per descriptor below the limit.
/// Async-signal-safe: the child calls it.
fn close_above_stderr() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: syscalls on descriptor numbers only.
    unsafe {
        if libc::syscall(
            libc::SYS_close_range,
            3,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        ) == 0
        {
            return;
        }
        let mut limit: libc::rlimit = std::mem::zeroed();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(1 << 16) as libc::c_int
        } else {
            1024
        };
        for fd in 3..max {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

/// Marks every descriptor this process has above 2 close-on-exec, once, as
/// the engine starts: what it inherited from whoever started it reaches no
/// command, also none started through `std::process::Command` (Slurm's).
pub fn keep_inherited_descriptors() {
    close_above_stderr();
}

/// Runs in the child, on its own stack, sharing the engine's memory.
/// Only async-signal-safe calls; no allocation, no panics.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Prepared`, alive and not touched by the
    // parent until this process has exec'd or exited.
    let p = unsafe { &mut *arg.cast::<Prepared>() };
    let fail = |p: &Prepared, e: i32| -> libc::c_int {
        p.error
            .store(if e == 0 { libc::EINVAL } else { e }, Ordering::SeqCst);
        // SAFETY: ends this process only.
        unsafe { libc::_exit(127) }
    };
    // SAFETY: plain syscalls on fds and memory the parent prepared.
    unsafe {
        for (from, to) in [(p.stdin, 0), (p.stdout, 1), (p.stderr, 2)] {
            if from == to {
                // Already there: only the close-on-exec flag must go.
                if libc::fcntl(to, libc::F_SETFD, 0) == -1 {
                    return fail(p, errno());
                }
            } else if libc::dup2(from, to) == -1 {
                return fail(p, errno());
            }
        }
        if libc::chdir(p.cwd.as_ptr()) == -1 {
            return fail(p, errno());
        }
        // Its own group, so a timeout kills the task's children too.
        if libc::setpgid(0, 0) == -1 {
            return fail(p, errno());
        }
        // The engine's handlers live in memory the child shares until exec:
        // back to the defaults before signals are let in. SIGPIPE too,
        // which the Rust runtime ignores (an ignored signal survives exec).
        let mut old: libc::sigaction = std::mem::zeroed();
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        for sig in 1..65 {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && (sig == libc::SIGPIPE
                    || (old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN))
            {
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        // The engine died before the line above: die now, as it would have.
        // (kill(getpid()), not raise(): raise would signal the thread whose
        // TLS this child shares.)
        if libc::getppid() != p.parent {
            libc::syscall(
                libc::SYS_kill,
                libc::syscall(libc::SYS_getpid),
                libc::SIGKILL,
            );
        }
        // "0": the writing process. Failure leaves the tag as the fallback.
        if p.cgroup_procs >= 0 && libc::write(p.cgroup_procs, b"0".as_ptr().cast(), 1) == 1 {
            p.joined.store(1, Ordering::SeqCst);
        }
        // A descriptor the engine inherited from whoever started it (a
        // wrapper's `exec 7<secrets`), or opened without close-on-exec,
        // is not the command's: only 0, 1 and 2 cross the exec.
        close_above_stderr();
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // execvp(3)'s rules: go on after ENOENT, ENOTDIR and EACCES
        // (reported if nothing else worked), stop at any other error.
        let mut eacces = false;
        let mut last = libc::ENOENT;
        for i in 0..p.paths.len() {
            let path = p.paths[i].as_ptr();
            libc::execve(path, p.argv.as_ptr(), p.envp.as_ptr());
            let e = errno();
            if e == libc::ENOEXEC {
                p.sh_argv[1] = path;
                libc::execve(p.sh_argv[0], p.sh_argv.as_ptr(), p.envp.as_ptr());
                return fail(p, e);
            }
            match e {
                libc::EACCES => eacces = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                _ => return fail(p, e),
            }
            last = e;
        }
        fail(p, if eacces { libc::EACCES } else { last })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logs(dir: &Path) -> (File, File) {
        (
            File::create(dir.join("out")).unwrap(),
            File::create(dir.join("err")).unwrap(),
        )
    }

    // The PATH search is execvp's: an empty entry is the working
    // directory, a name with a slash is not searched
    #[test]
    fn candidates_follow_execvp() {
        let path = OsStr::new("/a::/b");
        let got = candidates(b"sh", Some(path)).unwrap();
        let want: Vec<CString> = ["/a/sh", "sh", "/b/sh"]
            .iter()
            .map(|p| cstring(p.as_bytes()).unwrap())
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            candidates(b"./x", Some(path)).unwrap(),
            [cstring(b"./x").unwrap()]
        );
    }

    // The child starts as `Command` started it: its own process
    // group, no signal blocked, SIGPIPE not ignored, stdin from /dev/null,
    // exactly the launch's environment, in the working directory
    #[test]
    fn the_child_starts_in_the_documented_state() {
        let dir = tempfile::tempdir().unwrap();
        let run = |argv: &[&str], env: &[(OsString, OsString)]| {
            let (out, err) = logs(dir.path());
            let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
            let spec = Spec {
                argv: &argv,
                program: None,
                cwd: dir.path(),
                env,
                stdin: None,
                stdout: &out,
                stderr: &err,
                cgroup_procs: None,
            };
            let mut child = spawn(&spec).unwrap();
            assert!(child.wait().unwrap().success());
            assert!(
                child.wait().unwrap().success(),
                "a second wait repeats the status"
            );
            (
                child.id(),
                std::fs::read_to_string(dir.path().join("out")).unwrap(),
            )
        };
        // The child's own status, read by the child itself (a shell's
        // children would see the shell's mask while it forks them).
        let (pid, text) = run(
            &[
                "grep",
                "-E",
                "^(Pid|NSpgid|SigBlk|SigIgn):",
                "/proc/self/status",
            ],
            &[],
        );
        let field = |name: &str| {
            let line = text.lines().find(|l| l.starts_with(name)).unwrap();
            line.split_whitespace().nth(1).unwrap().to_string()
        };
        assert_eq!(field("Pid:"), pid.to_string(), "{text}");
        assert_eq!(field("NSpgid:"), pid.to_string(), "its own group: {text}");
        let mask = |name: &str| u64::from_str_radix(&field(name), 16).unwrap();
        assert_eq!(mask("SigBlk:"), 0, "{text}");
        assert_eq!(mask("SigIgn:") & (1 << (libc::SIGPIPE - 1)), 0, "{text}");
        let env = [
            ("WEIR_SPAWN_TEST".into(), "yes".into()),
            ("HOME".into(), "/nonexistent".into()),
        ];
        let (_, text) = run(
            &[
                "sh",
                "-c",
                r#"echo "var $WEIR_SPAWN_TEST home ${HOME:+set} cwd $(pwd)"; read line; echo "stdin $?""#,
            ],
            &env,
        );
        let cwd = dir.path().canonicalize().unwrap();
        assert_eq!(
            text,
            format!("var yes home set cwd {}\nstdin 1\n", cwd.display())
        );
    }

    // A command that cannot start is an error carrying the OS's
    // reason, and leaves no child behind
    #[test]
    fn a_command_that_cannot_start_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let (out, err) = logs(dir.path());
        let not_exec = dir.path().join("data.txt");
        std::fs::write(&not_exec, "x").unwrap();
        let cases: [(&[&str], &Path, i32); 3] = [
            (&["weir-no-such-program-anywhere"], dir.path(), libc::ENOENT),
            (&[not_exec.to_str().unwrap()], dir.path(), libc::EACCES),
            (&["true"], &dir.path().join("missing"), libc::ENOENT),
        ];
        for (argv, cwd, errno) in cases {
            let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
            let spec = Spec {
                argv: &argv,
                program: None,
                cwd,
                env: &[],
                stdin: None,
                stdout: &out,
                stderr: &err,
                cgroup_procs: None,
            };
            let e = spawn(&spec).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(errno), "{argv:?} in {cwd:?}: {e}");
        }
    }

    // A script without a `#!` line runs under /bin/sh, as
    // execvp(3) runs it
    #[test]
    fn a_script_without_an_interpreter_line_runs_under_sh() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (out, err) = logs(dir.path());
        let script = dir.path().join("plain");
        std::fs::write(&script, "echo \"ran $1\"\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let argv = [script.display().to_string(), "arg".into()];
        let spec = Spec {
            argv: &argv,
            program: None,
            cwd: dir.path(),
            env: &[],
            stdin: None,
            stdout: &out,
            stderr: &err,
            cgroup_procs: None,
        };
        assert!(spawn(&spec).unwrap().wait().unwrap().success());
        let text = std::fs::read_to_string(dir.path().join("out")).unwrap();
        assert_eq!(text, "ran arg\n");
    }

    /// Minor page faults of the calling thread so far.
    fn minor_faults() -> i64 {
        // SAFETY: getrusage writes only into the zeroed struct we own.
        unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
            usage.ru_minflt
        }
    }

    // Starting a command does not copy the engine. A fork write-protects
    // every page of the engine, so each page the engine writes afterwards
    // faults again (and flushes the other CPUs' TLBs): about 1.9 ms of
    // system CPU per launch in W1.
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
        let (out, err) = logs(dir.path());
        let argv = ["true".to_string()];
        let env = [("WEIR_TASK".into(), "t".into())];
        let spec = Spec {
            argv: &argv,
            program: None,
            cwd: dir.path(),
            env: &env,
            stdin: None,
            stdout: &out,
            stderr: &err,
            cgroup_procs: None,
        };
        let before = minor_faults();
        for round in 2..5 {
            assert!(spawn(&spec).unwrap().wait().unwrap().success());
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
