//! The durability floor of one write-audit-publish instance: the
//! filesystem work weir's invariants require, and nothing else, around the
//! same `sh -c` command that the benchmark's baseline runs under `xargs -P2`.
//!
//! usage: durable_floor ROOT KEYS_FILE SLOTS CMD [CMD...]
//!
//! For every key (one static partition each), on a pool of worker threads with
//! at most SLOTS commands running at once, each CMD in turn (a chain: stage
//! k reads stage k-1's publication of the same key, as W2's tasks do), with
//! exactly the steps of BENCHMARKS.md's fsync budget, in the same order and
//! with the same inodes:
//!
//! 1. `ROOT/d<k>/<key>/{tokens,attempts,log}` made, then `<key>/` and `d<k>/`
//!    fsynced (the partition's skeleton, durable once);
//! 2. the token: a temp file written and fsynced, linked as `tokens/1`, the
//!    temp name removed, `tokens/` fsynced (the fence);
//! 3. `attempts/1/data/` made (no fsync: step 6 covers it); from stage 1 on,
//!    the upstream's commit record read and its file copied to
//!    `attempts/1/inputs/in/out.csv`, hashed while copying and checked;
//! 4. in a slot: `sh -c CMD sh DATA_DIR [INPUT_DIR]`, waited for;
//! 5. the audit's minimum: every byte of `data/out.csv` read and SHA-256'd;
//! 6. `out.csv`, `data/`, `attempts/1/`, `attempts/` fsynced;
//! 7. the commit record written to a temp file and fsynced, linked as
//!    `log/1.json`, the temp name removed, `log/` fsynced (the commit point);
//!    the input copy removed.
//!
//! No events, leases, logs of the command, gates beyond a digest, or
//! scheduling: what weir costs above this is weir's own. It prints the
//! instances it published; it exits 1 if any step failed.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use sha2::{Digest, Sha256};

/// Worker threads per slot: instances before and after their command overlap
/// the slots' commands, as weir's do.
const WORKERS_PER_SLOT: usize = 4;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: durable_floor ROOT KEYS_FILE SLOTS CMD [CMD...]");
        std::process::exit(2);
    }
    let root = PathBuf::from(&args[1]);
    let keys: Vec<String> = fs::read_to_string(&args[2])
        .expect("KEYS_FILE is readable")
        .lines()
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .collect();
    let slots: usize = args[3].parse().expect("SLOTS is a number");
    let stages = &args[4..];
    for k in 0..stages.len() {
        fs::create_dir_all(root.join(format!("d{k}"))).expect("ROOT can be made");
    }
    sync_dir(&root).expect("ROOT is fsynced");

    let next = AtomicUsize::new(0);
    let published = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let pool = Semaphore::new(slots);
    std::thread::scope(|s| {
        for _ in 0..slots * WORKERS_PER_SLOT {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(key) = keys.get(i) else { break };
                for (k, cmd) in stages.iter().enumerate() {
                    if let Err(e) = instance(&root, k, key, cmd, &pool) {
                        eprintln!("stage {k} {key}: {e}");
                        failed.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    published.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    println!("{} published", published.into_inner());
    std::process::exit(i32::from(failed.into_inner() > 0));
}

fn instance(root: &Path, k: usize, key: &str, cmd: &str, pool: &Semaphore) -> std::io::Result<()> {
    let dataset = root.join(format!("d{k}"));
    let p = dataset.join(key);
    fs::create_dir(&p)?;
    for dir in ["tokens", "attempts", "log"] {
        fs::create_dir(p.join(dir))?;
    }
    sync_dir(&p)?;
    sync_dir(&dataset)?;
    put_if_absent(
        &p.join("tokens"),
        "00000000000000000001",
        br#"{"run":"floor"}"#,
    )?;
    let attempt = p.join("attempts/00000000000000000001");
    let data = attempt.join("data");
    fs::create_dir(&attempt)?;
    fs::create_dir(&data)?;
    let inputs = attempt.join("inputs");
    let input = if k > 0 {
        Some(copy_input(
            &root.join(format!("d{}/{key}", k - 1)),
            &inputs.join("in"),
        )?)
    } else {
        None
    };

    let status = {
        let _slot = pool.acquire();
        Command::new("sh")
            .args(["-c", cmd, "sh"])
            .arg(&data)
            .args(&input)
            .stdin(Stdio::null())
            .status()?
    };
    if !status.success() {
        return Err(std::io::Error::other(format!(
            "command ended with {status}"
        )));
    }

    let out = data.join("out.csv");
    let mut bytes = Vec::new();
    File::open(&out)?.read_to_end(&mut bytes)?;
    let digest = Sha256::digest(&bytes);
    File::open(&out)?.sync_all()?;
    sync_dir(&data)?;
    sync_dir(&attempt)?;
    sync_dir(&p.join("attempts"))?;
    let record = format!(
        r#"{{"generation":1,"token":1,"files":[{{"name":"out.csv","size":{},"sha256":"{:x}"}}]}}"#,
        bytes.len(),
        digest
    );
    put_if_absent(
        &p.join("log"),
        "00000000000000000001.json",
        record.as_bytes(),
    )?;
    if input.is_some() {
        fs::remove_dir_all(&inputs)?;
    }
    Ok(())
}

/// A private copy of the upstream publication's file, checked against the
/// SHA-256 its commit record holds while it is copied.
fn copy_input(upstream: &Path, dest: &Path) -> std::io::Result<PathBuf> {
    let record = fs::read_to_string(upstream.join("log/00000000000000000001.json"))?;
    let pinned = record
        .split("\"sha256\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .ok_or_else(|| std::io::Error::other("no sha256 in the upstream record"))?
        .to_string();
    fs::create_dir_all(dest)?;
    let bytes = fs::read(upstream.join("attempts/00000000000000000001/data/out.csv"))?;
    let copy = dest.join("out.csv");
    fs::write(&copy, &bytes)?;
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o444))?;
    if format!("{:x}", Sha256::digest(&bytes)) != pinned {
        return Err(std::io::Error::other("the upstream file drifted"));
    }
    Ok(dest.to_path_buf())
}

/// The store's primitive on a POSIX filesystem: a temp file, fsynced, linked
/// into place (fails if the name exists), the temp name removed, the
/// directory fsynced.
fn put_if_absent(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::hard_link(&tmp, dir.join(name))?;
    fs::remove_file(&tmp)?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// SLOTS permits for the commands.
struct Semaphore {
    free: Mutex<usize>,
    freed: Condvar,
}

struct Permit<'a>(&'a Semaphore);

impl Semaphore {
    fn new(n: usize) -> Self {
        Semaphore {
            free: Mutex::new(n),
            freed: Condvar::new(),
        }
    }

    fn acquire(&self) -> Permit<'_> {
        let mut free = self.free.lock().expect("no thread panics holding it");
        while *free == 0 {
            free = self.freed.wait(free).expect("no thread panics holding it");
        }
        *free -= 1;
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().expect("no thread panics holding it") += 1;
        self.0.freed.notify_one();
    }
}
