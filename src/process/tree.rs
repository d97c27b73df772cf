//! A task's whole process tree: found, stopped and reaped when its command
//! exits, and never left running beside its engine's successor.
//!
//! ```text
//!  launch ──► child: own process group, PR_SET_PDEATHSIG=SIGKILL (dies with its engine),
//!             WEIR_PROCESS_TAG=<engine id>-<n> in its environment (inherited by every descendant),
//!             joins the cgroup weir/<tag> before its exec: in the unified (v2) hierarchy
//!             where it is mounted, writable and has cgroup.kill, else in the v1 freezer
//!  command exits ──► stop(tag): v2: write 1 to cgroup.kill, wait for `populated 0` in
//!                    cgroup.events, remove it; v1: freeze it, SIGKILL its members, thaw, remove it;
//!                    SIGKILL the process group; SIGKILL every process whose environment
//!                    carries the tag (a descendant that left the group: setsid, a double
//!                    fork) until a scan finds none; reap the zombies reparented to us
//!  engine killed ──► the child dies (PDEATHSIG); its descendants are stopped by the engine that
//!                    takes the attempt over (the lease records the tag)
//! ```
//!
//! The engine binary makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`),
//! so descendants that escape their command are reparented to it rather than
//! to init, and it reaps them once they are killed. The cgroup is the exact
//! answer where it exists; the tag is the fallback that always works. It
//! misses only a process that both leaves the process group and replaces its
//! environment (`setsid env -i …`): the task contract (docs/guides/tasks.md) forbids leaving
//! background processes behind. `WEIR_CGROUP` (`on`, `v2`, `v1`, `off`),
//! read once at the edge (`exec::Settings`), limits which hierarchies are
//! tried; `weir doctor` prints
//! what a host gets.

use std::collections::HashSet;
use std::path::PathBuf;

pub use super::spawn::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The environment variable that marks a task's processes.
pub const TAG_VAR: &str = "WEIR_PROCESS_TAG";

/// Children started by [`spawn`] or [`output`] and not yet waited for: the
/// zombie sweep must never reap one of them behind its wait.
static DIRECT: Mutex<Direct> = Mutex::new(Direct {
    starting: 0,
    pids: None,
});

/// [`DIRECT`]: held only for a moment, never across a spawn.
struct Direct {
    /// Spawns under way: their children may exit before their pid is
    /// known, so the sweep waits for a later call while any is.
    starting: usize,
    pids: Option<HashSet<i32>>,
}

fn direct() -> std::sync::MutexGuard<'static, Direct> {
    DIRECT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
/// Set once this process is a child subreaper.
static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// Makes this process the child subreaper of everything it launches, so a
/// task's escaped descendants are reparented to it (and reaped by it). Only
/// the engine binary calls this: a library user (a test harness) may wait
/// on children of its own that a sweep must not touch.
pub fn become_subreaper() {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if rc == 0 {
        SUBREAPER.store(true, Ordering::SeqCst);
    }
}

/// A fresh tag for one launch: unique per engine process and launch.
pub fn new_tag() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let me = Owner::me();
    format!(
        "{}-{}-{}-{}-{}",
        crate::store::Holder::current().engine_id,
        me.namespace,
        me.pid,
        me.start,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The engine process a tag belongs to: its pid namespace, pid and start
/// time, so another engine on the host can tell whether it is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    namespace: u64,
    pid: u32,
    start: u64,
}

impl Owner {
    fn me() -> Owner {
        static ME: std::sync::OnceLock<Owner> = std::sync::OnceLock::new();
        *ME.get_or_init(|| {
            let pid = std::process::id();
            Owner {
                namespace: pid_namespace().unwrap_or(0),
                pid,
                start: process_start(pid as i32).unwrap_or(0),
            }
        })
    }

    /// `<engine id>-<namespace>-<pid>-<start>-<n>`.
    fn of(tag: &str) -> Option<Owner> {
        let mut parts = tag.split('-').skip(1);
        Some(Owner {
            namespace: parts.next()?.parse().ok()?,
            pid: parts.next()?.parse().ok()?,
            start: parts.next()?.parse().ok()?,
        })
    }

    /// Certainly gone: in this pid namespace (so its pid means the same
    /// here) and no process with its pid and start time exists.
    fn gone(self) -> bool {
        let me = Owner::me();
        me.namespace != 0
            && self.namespace == me.namespace
            && self != me
            && process_start(self.pid as i32) != Some(self.start)
    }
}

impl Owner {
    /// Certainly alive: in this pid namespace, with its pid and start time.
    fn alive_here(self) -> bool {
        let me = Owner::me();
        me.namespace != 0
            && self.namespace == me.namespace
            && process_start(self.pid as i32) == Some(self.start)
    }
}

/// The inode of this process's pid namespace.
fn pid_namespace() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let text = link.to_str()?;
    text.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// Field 22 of /proc/<pid>/stat: when the process started.
fn process_start(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// Stops what engines that died on this host left running: processes
/// carrying the tag of an engine that is gone (a task's command dies with
/// its engine; its escaped descendants would not), and their cgroups,
/// frozen ones included. Called when an engine starts a run.
pub fn sweep_orphans() {
    let me = std::process::id() as i32;
    for (weir, kind) in Containment::host().dirs() {
        for entry in std::fs::read_dir(weir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                if Owner::of(&name).is_some_and(Owner::gone) {
                    Cgroup::at(entry.path(), kind).stop();
                } else if !Owner::of(&name).is_some_and(Owner::alive_here) {
                    // An empty one is removed (rmdir refuses one with
                    // members), but not a live engine's: its launch may
                    // have made it and not yet joined it.
                    let _ = std::fs::remove_dir(entry.path());
                }
            }
        }
    }
    let prefix = format!("{TAG_VAR}=");
    let mut killed = Vec::new();
    for pid in pids().filter(|&p| p != me) {
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let orphan = env
            .split(|b| *b == 0)
            .filter_map(|var| var.strip_prefix(prefix.as_bytes()))
            .filter_map(|tag| std::str::from_utf8(tag).ok())
            .any(|tag| Owner::of(tag).is_some_and(Owner::gone));
        if orphan {
            kill(pid);
            killed.push(pid);
        }
    }
    wait_gone(&killed, Duration::from_secs(2));
    reap();
}

/// Starts `spec`'s command (`spawn.rs`: its own process group, dies with
/// this engine, no copy of the engine) with the tag in its environment, in
/// the tag's cgroup when there is one. The returned `Child` must be passed
/// to [`waited`] once waited for.
pub fn spawn(spec: &super::spawn::Spec<'_>, cgroup: Option<&Cgroup>) -> std::io::Result<Child> {
    let procs = cgroup.and_then(|c| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(c.path.join("cgroup.procs"))
            .ok()
    });
    let spec = super::spawn::Spec {
        cgroup_procs: procs.as_ref(),
        ..*spec
    };
    direct().starting += 1;
    let child = super::spawn::spawn(&spec);
    let mut direct = direct();
    direct.starting -= 1;
    let child = child?;
    direct
        .pids
        .get_or_insert_with(HashSet::new)
        .insert(child.id() as i32);
    drop(direct);
    if let Some(cg) = cgroup {
        // It joined before its exec, or not at all: every descendant
        // inherits the membership.
        cg.contains_all
            .store(child.joined_cgroup(), Ordering::SeqCst);
    }
    Ok(child)
}

/// Runs one of the engine's own short commands (`sbatch`, `squeue`,
/// `scontrol`, `scancel`) to its end and returns what it printed. Its pid is
/// registered like a task's child: the zombie sweep of a subreaper would
/// otherwise reap it behind std's wait, which then fails with ECHILD (a
/// poll of a running Slurm job read as "the controller does not know it").
pub fn output(command: &mut std::process::Command) -> std::io::Result<std::process::Output> {
    use std::process::Stdio;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    direct().starting += 1;
    let child = command.spawn();
    let mut direct = direct();
    direct.starting -= 1;
    let child = child?;
    let pid = child.id();
    direct
        .pids
        .get_or_insert_with(HashSet::new)
        .insert(pid as i32);
    drop(direct);
    let out = child.wait_with_output();
    waited(pid);
    out
}

/// Forgets a child [`spawn`] returned, after its `wait`.
pub fn waited(pid: u32) {
    if let Some(set) = direct().pids.as_mut() {
        set.remove(&(pid as i32));
    }
}

/// A cgroup holding one launch's processes: in the unified (v2) hierarchy,
/// or in the v1 freezer hierarchy.
#[derive(Debug)]
pub struct Cgroup {
    path: PathBuf,
    kind: Kind,
    /// The command joined it, so every descendant is in it.
    contains_all: AtomicBool,
}

/// Which hierarchy a [`Cgroup`] is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Unified: stopped with `cgroup.kill`.
    V2,
    /// The v1 freezer: frozen, killed member by member, thawed.
    V1,
}

/// What this host contains a launch's processes with, in the order tried:
/// a cgroup v2 (killed whole with `cgroup.kill`), a cgroup v1 freezer, and
/// always the process group and the /proc scan for the tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Containment {
    /// `weir` under the engine's own cgroup in the unified hierarchy, made
    /// and with `cgroup.kill`.
    v2: Option<PathBuf>,
    /// `<freezer mount>/weir`, made.
    v1: Option<PathBuf>,
    /// `WEIR_CGROUP` as read.
    setting: Setting,
}

/// `WEIR_CGROUP`: which cgroup hierarchies the engine may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Setting {
    /// Unset or `on`: v2 where writable, else the v1 freezer.
    #[default]
    On,
    /// `v2`: only the unified hierarchy (tests of the v2 path).
    V2,
    /// `v1`: only the v1 freezer.
    V1,
    /// `off`: no cgroups, the tag scan only.
    Off,
}

impl Setting {
    /// The value of `WEIR_CGROUP` (`None`: unset), or why it is refused.
    pub fn parse(value: Option<&std::ffi::OsStr>) -> Result<Setting, String> {
        let Some(value) = value else {
            return Ok(Setting::On);
        };
        match value.to_str() {
            Some("on") | Some("") => Ok(Setting::On),
            Some("v2") => Ok(Setting::V2),
            Some("v1") => Ok(Setting::V1),
            Some("off") => Ok(Setting::Off),
            _ => Err(format!(
                "WEIR_CGROUP={}: expected `on` (the default), `v2`, `v1` or `off`",
                value.to_string_lossy()
            )),
        }
    }
}

impl Containment {
    /// This host's, detected once per engine process, at its first launch
    /// or sweep, from the setting [`use_setting`] chose (`on` when none
    /// did), /proc/self/mountinfo and /proc/self/cgroup.
    pub fn host() -> &'static Containment {
        static HOST: std::sync::OnceLock<Containment> = std::sync::OnceLock::new();
        HOST.get_or_init(|| Containment::detect(*SETTING.get_or_init(|| Setting::On)))
    }

    /// What `setting` gets on this host: the hierarchies it allows that are
    /// mounted and writable, their `weir` directories made.
    pub fn detect(setting: Setting) -> Containment {
        let read = |path| std::fs::read_to_string(path).unwrap_or_default();
        let (v2_own, v1_mount) =
            cgroup_dirs(&read("/proc/self/mountinfo"), &read("/proc/self/cgroup"));
        let v2 = matches!(setting, Setting::On | Setting::V2)
            .then_some(v2_own)
            .flatten()
            .map(|m| m.join("weir"))
            // Writable, and new enough to kill a cgroup whole (5.14).
            .filter(|w| std::fs::create_dir_all(w).is_ok() && w.join("cgroup.kill").exists());
        let v1 = matches!(setting, Setting::On | Setting::V1)
            .then_some(v1_mount)
            .flatten()
            .map(|m| m.join("weir"))
            .filter(|w| std::fs::create_dir_all(w).is_ok());
        Containment { v2, v1, setting }
    }

    /// One line for `weir doctor`: the mechanism a launch gets.
    pub fn describe(&self) -> String {
        let scan = "the process group and a /proc scan for WEIR_PROCESS_TAG";
        let mechanism = match (&self.v2, &self.v1) {
            (Some(dir), _) => format!("cgroup v2 at {} (cgroup.kill), then {scan}", dir.display()),
            (None, Some(dir)) => format!("cgroup v1 freezer at {}, then {scan}", dir.display()),
            (None, None) => scan.to_string(),
        };
        let setting = match self.setting {
            Setting::On => "",
            Setting::V2 => " (WEIR_CGROUP=v2)",
            Setting::V1 => " (WEIR_CGROUP=v1)",
            Setting::Off => " (WEIR_CGROUP=off)",
        };
        format!("{mechanism}{setting}")
    }

    /// The directories that hold launches' cgroups, v2's first.
    fn dirs(&self) -> impl Iterator<Item = (&PathBuf, Kind)> {
        (self.v2.iter().map(|d| (d, Kind::V2))).chain(self.v1.iter().map(|d| (d, Kind::V1)))
    }
}

/// The setting [`Containment::host`] detects with: the process's one
/// containment, since every launch of every run shares the host's `weir`
/// cgroups and the sweep of orphans.
static SETTING: std::sync::OnceLock<Setting> = std::sync::OnceLock::new();

/// Chooses the cgroup hierarchies this process's launches may use (the
/// edge's `WEIR_CGROUP`, `exec::Settings::cgroups`). The first choice,
/// or the first detection, holds for the process: `false` when the setting
/// in effect is another one.
pub fn use_setting(setting: Setting) -> bool {
    *SETTING.get_or_init(|| setting) == setting
}

impl Cgroup {
    /// `<hierarchy>/weir/<tag>` in the first hierarchy where it can be
    /// made (v2, then the v1 freezer); `None` where none can.
    pub fn create(tag: &str) -> Option<Cgroup> {
        Containment::host().dirs().find_map(|(dir, kind)| {
            let path = dir.join(tag);
            std::fs::create_dir(&path).ok()?;
            Some(Cgroup::at(path, kind))
        })
    }

    fn at(path: PathBuf, kind: Kind) -> Cgroup {
        Cgroup {
            path,
            kind,
            contains_all: AtomicBool::new(false),
        }
    }

    /// The existing cgroups of `tag` (one per hierarchy at most).
    fn existing(tag: &str) -> Vec<Cgroup> {
        Containment::host()
            .dirs()
            .map(|(dir, kind)| (dir.join(tag), kind))
            .filter(|(path, _)| path.is_dir())
            .map(|(path, kind)| Cgroup::at(path, kind))
            .collect()
    }

    /// Kills every process in it, then removes it.
    fn stop(&self) {
        match self.kind {
            Kind::V2 => self.stop_v2(),
            Kind::V1 => self.stop_v1(),
        }
    }

    /// `cgroup.kill` SIGKILLs every member at once, and any it forks
    /// meanwhile; `rmdir` succeeds once `cgroup.events` says `populated 0`.
    fn stop_v2(&self) {
        if self.populated() {
            let _ = std::fs::write(self.path.join("cgroup.kill"), "1");
            let deadline = Instant::now() + Duration::from_secs(2);
            while self.populated() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let _ = std::fs::remove_dir(&self.path);
    }

    /// Whether a live process is in it (or its state cannot be read).
    fn populated(&self) -> bool {
        match std::fs::read_to_string(self.path.join("cgroup.events")) {
            Ok(events) => !events.lines().any(|l| l.trim() == "populated 0"),
            Err(_) => self.path.is_dir(),
        }
    }

    /// Freezes, kills and removes every process in it, then the cgroup.
    fn stop_v1(&self) {
        if self.members().is_empty() {
            let _ = std::fs::remove_dir(&self.path);
            return;
        }
        let state = self.path.join("freezer.state");
        // Frozen processes cannot fork; killed while frozen, they die on thaw.
        let frozen = std::fs::write(&state, "FROZEN").is_ok() && {
            let deadline = Instant::now() + Duration::from_secs(1);
            loop {
                match std::fs::read_to_string(&state) {
                    Ok(s) if s.trim() == "FROZEN" => break true,
                    Ok(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    _ => break false,
                }
            }
        };
        for pid in self.members() {
            kill(pid);
        }
        if frozen {
            let _ = std::fs::write(&state, "THAWED");
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let members = self.members();
            if members.is_empty() || Instant::now() >= deadline {
                break;
            }
            members.into_iter().for_each(kill);
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = std::fs::remove_dir(&self.path);
    }

    fn members(&self) -> Vec<i32> {
        std::fs::read_to_string(self.path.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

/// From /proc/self/mountinfo and /proc/self/cgroup: the engine's own
/// cgroup in the unified (cgroup2) hierarchy, as a directory, and the mount
/// point of the v1 freezer hierarchy. Launches' v2 cgroups go under the
/// engine's own, so the limits and accounting of whatever runs the engine
/// (a systemd unit, a container) still cover its tasks.
fn cgroup_dirs(mountinfo: &str, own: &str) -> (Option<PathBuf>, Option<PathBuf>) {
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .filter(|p| p.starts_with('/') && !p.ends_with(" (deleted)"));
    let (mut v2, mut v1) = (None, None);
    for line in mountinfo.lines() {
        // `<id> <parent> <dev> <root> <mount point> <options> [<tags>…] - <type> <source> <super options>`
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split_whitespace().collect();
        let right: Vec<&str> = right.split_whitespace().collect();
        let (Some(root), Some(dir), Some(kind)) = (left.get(3), left.get(4), right.first()) else {
            continue;
        };
        let dir = PathBuf::from(dir.replace("\\040", " "));
        if *kind == "cgroup2" && v2.is_none() {
            // The engine's cgroup below the mounted subtree's root; the
            // mount point itself where it is not below it.
            let below = own.and_then(|own| {
                let rest = own.strip_prefix(root.trim_end_matches('/'))?;
                (rest.is_empty() || rest.starts_with('/')).then_some(rest)
            });
            v2 = Some(dir.join(below.unwrap_or("").trim_start_matches('/')));
        } else if *kind == "cgroup"
            && v1.is_none()
            && right
                .get(2)
                .is_some_and(|o| o.split(',').any(|o| o == "freezer"))
        {
            v1 = Some(dir);
        }
    }
    (v2, v1)
}

fn kill(pid: i32) {
    // SAFETY: kill(2) with a pid; ESRCH (already gone) is fine.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Stops everything launched under `tag`: its cgroup (if `cgroup`), its
/// process group `pgid` (if given) and every process carrying the tag; then
/// reaps the zombies this subreaper inherited.
pub fn stop(tag: &str, cgroup: Option<&Cgroup>, pgid: Option<i32>) {
    if let Some(cg) = cgroup {
        cg.stop();
    }
    if let Some(pgid) = pgid {
        // SAFETY: kill(2) on a process group; ESRCH is fine.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
    // Where the cgroup held the command, it held every descendant: the
    // scan of every process's environment is only the fallback.
    if !cgroup.is_some_and(|c| c.contains_all.load(Ordering::SeqCst)) {
        let killed = kill_tagged(tag);
        wait_gone(&killed, Duration::from_secs(2));
    }
    reap();
}

/// Stops the processes of an attempt another engine launched under `tag`
/// (that engine is gone): the cgroup it made, and every tagged process this
/// host can see.
pub fn stop_orphans(tag: &str) {
    for cgroup in Cgroup::existing(tag) {
        cgroup.stop();
    }
    let killed = kill_tagged(tag);
    wait_gone(&killed, Duration::from_secs(2));
    reap();
}

/// SIGKILLs every process whose environment carries `TAG_VAR=tag`, scanning
/// again until a scan finds none (a process may fork between a scan and its
/// kill); returns the pids killed.
fn kill_tagged(tag: &str) -> Vec<i32> {
    let needle = format!("{TAG_VAR}={tag}");
    let me = std::process::id() as i32;
    let mut killed = Vec::new();
    // A scan can miss a process: one in the middle of an exec has no
    // readable environment, and one forked as the scan passed may not be
    // listed. So a scan that finds none only ends the search when no
    // candidate was unreadable and a second scan, a moment later, agrees.
    let mut quiet_scans = 0;
    for _ in 0..200 {
        let mut found = Vec::new();
        let mut unsure = false;
        for pid in candidates(me) {
            match std::fs::read(format!("/proc/{pid}/environ")) {
                Ok(env) if env.split(|b| *b == 0).any(|var| var == needle.as_bytes()) => {
                    found.push(pid);
                }
                Ok(env) if !env.is_empty() => {}
                // Empty or unreadable: a zombie (done), or a process between
                // fork and exec whose environment cannot be read yet.
                // (Only among our own descendants: every process of the
                // host, kernel threads included, is no signal.)
                _ => {
                    unsure |= SUBREAPER.load(Ordering::SeqCst)
                        && stat(pid).is_some_and(|(s, _)| s != 'Z' && s != 'X');
                }
            }
        }
        if found.is_empty() {
            if unsure {
                quiet_scans = 0;
            } else {
                quiet_scans += 1;
                if quiet_scans == 2 {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        quiet_scans = 0;
        for &pid in &found {
            kill(pid);
        }
        killed.extend(found);
        // A zombie's environ reads empty, so a killed process drops out of
        // the next scan as soon as it is dead.
        wait_gone(&killed, Duration::from_millis(200));
    }
    killed
}

/// The processes that may carry one of this engine's tags. A subreaper's
/// are all its descendants (an escaped process is reparented to it, not to
/// init), found from /proc/<pid>/stat, which is cheap to read; only their
/// environments are read, since reading another process's environment
/// takes its memory map lock and costs milliseconds on a busy host. Without
/// the subreaper (a library user), every process is a candidate.
fn candidates(me: i32) -> Vec<i32> {
    if !SUBREAPER.load(Ordering::SeqCst) {
        return pids().filter(|&pid| pid != me).collect();
    }
    let mut children: std::collections::HashMap<i32, Vec<i32>> = Default::default();
    for pid in pids() {
        if let Some((_, ppid)) = stat(pid) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![me];
    while let Some(parent) = stack.pop() {
        if let Some(kids) = children.remove(&parent) {
            out.extend_from_slice(&kids);
            stack.extend(kids);
        }
    }
    out
}

fn pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
}

/// (state, ppid) from /proc/<pid>/stat.
fn stat(pid: i32) -> Option<(char, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Waits until every pid is a zombie or gone, at most `limit`.
fn wait_gone(pids: &[i32], limit: Duration) {
    let deadline = crate::clock::instant_after(limit);
    while pids
        .iter()
        .any(|&p| stat(p).is_some_and(|(s, _)| s != 'Z' && s != 'X'))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A child of this process that is a zombie (peeked, not reaped).
fn zombie_child() -> Option<i32> {
    // SAFETY: siginfo_t is plain data; waitid with WNOWAIT only reports.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        (libc::waitid(libc::P_ALL, 0, &mut info, flags) == 0 && info.si_pid() != 0)
            .then(|| info.si_pid())
    }
}

/// Reaps the zombies reparented to this subreaper, as the kernel reports
/// them, without reading /proc: children it did not start through
/// [`spawn`] or [`output`] (those are waited for by their own thread). It stops at a
/// zombie that is one of those, and does nothing while a spawn is under
/// way (its child may already be a zombie whose pid is not yet known): a
/// later call, at the next command's stop, reaps what is left.
fn reap() {
    if !SUBREAPER.load(Ordering::SeqCst) {
        return;
    }
    let direct = direct();
    if direct.starting > 0 {
        return;
    }
    while let Some(pid) = zombie_child() {
        if direct.pids.as_ref().is_some_and(|d| d.contains(&pid)) {
            break;
        }
        let mut status = 0;
        // SAFETY: waitpid on one specific zombie child of ours.
        if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } != pid {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_names_its_engine_and_tells_when_it_is_gone() {
        let tag = new_tag();
        let me = Owner::of(&tag).expect("a tag names its owner");
        assert_eq!(me, Owner::me());
        assert!(!me.gone(), "this process is alive");
        assert_ne!(new_tag(), tag, "tags are unique per launch");
        // Same namespace, a start time no live process has: gone.
        let dead = Owner {
            start: me.start + 1,
            ..me
        };
        assert!(dead.gone());
        // Another pid namespace: its pids mean nothing here, never gone.
        let elsewhere = Owner {
            namespace: me.namespace + 1,
            ..dead
        };
        assert!(!elsewhere.gone());
        assert_eq!(Owner::of("garbage"), None);
    }

    #[test]
    fn the_setting_passed_in_limits_the_hierarchies_detected() {
        assert_eq!(
            Containment::detect(Setting::Off).describe(),
            "the process group and a /proc scan for WEIR_PROCESS_TAG (WEIR_CGROUP=off)"
        );
    }

    // Both hierarchies are found in /proc/self/mountinfo (the
    // first of each; a v1 hierarchy without the freezer is not one), the v2
    // directory is the engine's own cgroup below the mounted subtree, and
    // `WEIR_CGROUP` takes only the values it documents
    #[test]
    fn cgroup_mounts_and_the_setting_are_read_as_documented() {
        let mountinfo = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime shared:9 - cgroup cgroup rw,freezer
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 31 0:38 / /other rw,relatime - cgroup2 cgroup2 rw
";
        let own = "4:memory:/x\n0::/\n";
        assert_eq!(
            cgroup_dirs(mountinfo, own),
            (
                Some(PathBuf::from("/sys/fs/cgroup/unified")),
                Some(PathBuf::from("/sys/fs/cgroup/freezer"))
            )
        );
        // A systemd unit's engine: its launches go below its unit.
        let unified = "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let unit = "0::/system.slice/weir.service\n";
        assert_eq!(
            cgroup_dirs(unified, unit),
            (
                Some(PathBuf::from("/sys/fs/cgroup/system.slice/weir.service")),
                None
            )
        );
        // A container that mounts its own subtree: the path below it.
        let subtree = "30 25 0:26 /docker/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup_dirs(subtree, "0::/docker/c1/app\n").0,
            Some(PathBuf::from("/sys/fs/cgroup/app"))
        );
        // Not below the mounted subtree, or no v2 line: the mount point.
        assert_eq!(
            cgroup_dirs(subtree, "0::/docker/c10\n").0,
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        assert_eq!(
            cgroup_dirs(unified, "").0,
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        assert_eq!(cgroup_dirs("garbage\n", own), (None, None));
        let parse = |v: &str| Setting::parse(Some(std::ffi::OsStr::new(v)));
        assert_eq!(Setting::parse(None), Ok(Setting::On));
        assert_eq!(parse("on"), Ok(Setting::On));
        assert_eq!(parse("v2"), Ok(Setting::V2));
        assert_eq!(parse("v1"), Ok(Setting::V1));
        assert_eq!(parse("off"), Ok(Setting::Off));
        assert_eq!(
            parse("yes"),
            Err("WEIR_CGROUP=yes: expected `on` (the default), `v2`, `v1` or `off`".to_string())
        );
    }
}
