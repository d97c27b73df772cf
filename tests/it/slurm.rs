//! The Slurm executor on a real cluster: `ci/slurm-up.sh` starts a
//! single-node Slurm. Where none answers when the tests are built, the tests
//! that need it are reported as ignored, by name (build.rs); with `CI=true`
//! none is ignored and they fail instead, since CI installs one.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use weir::events::State;

use crate::support::{exclusive, poll_until, stderr, stdout, Engine, Sandbox};

/// Whether a Slurm controller answers; panics under CI when none does.
fn slurm() -> bool {
    // One probe per test binary: a dead controller takes sinfo ~10 s to report.
    static UP: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let up = *UP.get_or_init(|| {
        Command::new("sinfo")
            .args(["-h", "-o", "%T"])
            .output()
            .is_ok_and(|o| o.status.success() && !o.stdout.is_empty())
    });
    if !up {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no Slurm reachable under CI=true: ci/slurm-up.sh must have started one"
        );
        eprintln!("skipped: no Slurm (`sinfo` missing or failing; run ci/slurm-up.sh)");
    }
    up
}

/// Job ids in the queue (any state) whose name starts with `prefix`.
fn queued(prefix: &str) -> Vec<String> {
    let out = Command::new("squeue")
        .args(["-h", "-o", "%i %j"])
        .output()
        .expect("squeue runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, name)| name.starts_with(prefix))
        .map(|(id, _)| id.to_string())
        .collect()
}

/// A two-task pipeline over three keys; `{exec}` picks the executor of both
/// and `{dataset}` names the first task's dataset (job names start with it).
fn manifest(exec: &str, dataset: &str, slots: u32, extra: &str) -> String {
    format!(
        r#"
[pipeline]
name = "hpc, a=b 'x' $HOME"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["a", "b", "c", "d"]

[pools.cluster]
slots = {slots}

[retry.quick]
max_attempts = 3
backoff = {{ initial = "10ms", max = "10ms", jitter = "none" }}

[executors.hpc]
kind = "slurm"
args = ["--partition=debug"]

[tasks.extract]
command = ["sh", "extract.sh", "a,b c"]
output = {{ dataset = "{dataset}", grain = ["id"] }}
executor = "{exec}"
pool = "cluster"
retry = "quick"
resources = {{ cpus = 1, memory = "64M" }}
{extra}

[tasks.clean]
command = ["sh", "clean.sh"]
inputs = ["{dataset}"]
output = {{ dataset = "clean", grain = ["id"] }}
executor = "{exec}"
"#
    )
}

/// Rows derived from the key, the argument (with its comma) and the
/// environment contract (`WEIR_PIPELINE` holds a comma, `=`, quotes and
/// `$`), so a value cut at a comma or expanded changes the digest.
const EXTRACT: &str = r#"p="$WEIR_PARTITION"
[ -n "$SLEEP" ] && sleep "$SLEEP"
echo "$WEIR_TOKEN $SLURM_JOB_ID $(date +%s%N)" >> "runs-$p.log"
printf 'id,part,arg,run\n%s-1,%s,"%s","%s"\n' "$p" "$p" "$1" "$WEIR_PIPELINE" > "$WEIR_OUTPUT_DIR/one.csv"
"#;

const CLEAN: &str = r#"out="$WEIR_OUTPUT_DIR/clean.csv"
printf 'id,part\n' > "$out"
for f in "$WEIR_INPUT_RAW"/*.csv "$WEIR_INPUT_RAW_S"/*.csv "$WEIR_INPUT_RAW_P"/*.csv "$WEIR_INPUT_RAW_K"/*.csv "$WEIR_INPUT_RAW_T"/*.csv; do
  [ -f "$f" ] || continue
  tail -n +2 "$f" | cut -d, -f1,2 >> "$out"
done
"#;

fn sandbox(exec: &str, dataset: &str, slots: u32, extra: &str) -> Sandbox {
    let sb = Sandbox::new(&manifest(exec, dataset, slots, extra));
    sb.script("extract.sh", EXTRACT);
    sb.script("clean.sh", CLEAN);
    sb
}

/// Digest per (dataset, partition).
fn digests(sb: &Sandbox, datasets: &[&str]) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for d in datasets {
        for k in ["a", "b", "c", "d"] {
            let latest = sb.store(d, k).latest().unwrap();
            let digest = latest.map_or_else(|| "unpublished".into(), |r| r.digest);
            out.insert(((*d).to_string(), k.to_string()), digest);
        }
    }
    out
}

/// The job ids RUNNING events carry, per partition of `task`.
fn job_ids(sb: &Sandbox, run_id: &str, task: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in sb.events(run_id) {
        if e.state == State::Running && e.task.as_deref() == Some(task) {
            if let Some(id) = e.data.get("job_id").and_then(|v| v.as_str()) {
                out.entry(e.partition.clone().unwrap_or_default())
                    .or_default()
                    .push(id.to_string());
            }
        }
    }
    out
}

// Tasks run as Slurm jobs publish exactly what local runs publish
#[cfg_attr(
    not(any(weir_has_slurm, weir_ci)),
    ignore = "needs Slurm: `sinfo` must answer (ci/slurm-up.sh starts one)"
)]
#[test]
fn slurm_publishes_the_same_digests_as_local() {
    if !slurm() {
        return;
    }
    let local = sandbox("local", "raw", 4, "");
    let out = local.run("local", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hpc = sandbox("hpc", "raw", 4, "");
    let out = hpc.run("hpc", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("8 published"), "{}", stdout(&out));
    let want = digests(&local, &["raw", "clean"]);
    assert!(!want.values().any(|d| d == "unpublished"), "{want:?}");
    assert_eq!(digests(&hpc, &["raw", "clean"]), want);
    // The environment reached the job intact (no cut at the comma, no expansion).
    let bytes = crate::support::Visible::of(&hpc.store("raw", "a")).bytes();
    let text = String::from_utf8_lossy(&bytes.concat()).into_owned();
    assert!(text.contains(r#","a,b c","hpc, a=b 'x' $HOME""#), "{text}");
    // Every attempt was a job, named in RUNNING, the lease and explain.
    let ids = job_ids(&hpc, "hpc", "extract");
    assert_eq!(ids.len(), 4, "{ids:?}");
    let a = &ids["a"][0];
    let dir = hpc
        .store("raw", "a")
        .attempt_dir(weir::store::FencingToken::from_raw(1));
    let lease = weir::store::leases::read_at(&dir).expect("a lease");
    assert_eq!(lease.job_id.as_deref(), Some(a.as_str()));
    assert!(dir.join("job.node").exists());
    let explain = hpc.run_explain("a");
    assert!(explain.contains(&format!("Slurm job {a}")), "{explain}");
    // The local run submitted nothing.
    assert!(job_ids(&local, "local", "extract").is_empty());
}

impl Sandbox {
    fn run_explain(&self, key: &str) -> String {
        let out = self
            .weir(&["explain", "m.toml", "extract", "--partition", key])
            .output()
            .unwrap();
        stdout(&out)
    }
}

// A pool's slots cap the jobs in the cluster's queue
#[cfg_attr(
    not(any(weir_has_slurm, weir_ci)),
    ignore = "needs Slurm: `sinfo` must answer (ci/slurm-up.sh starts one)"
)]
#[test]
fn pool_caps_jobs_in_the_queue() {
    if !slurm() {
        return;
    }
    let sb = sandbox("hpc", "raw_p", 2, "");
    let engine = Engine::spawn(
        {
            let mut c = sb.weir(&["run", "m.toml", "--run-id", "pool", "--task", "extract"]);
            c.env("SLEEP", "1");
            c
        },
        sb.path(),
        "pool",
    );
    let mut most = 0;
    let started = Instant::now();
    let mut engine = engine;
    while !engine.exited() {
        most = most.max(queued("weir-raw_p-").len());
        assert!(started.elapsed() < Duration::from_secs(40), "run too slow");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = engine.finish(Duration::from_secs(1));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        most, 2,
        "at most the pool's 2 slots in the queue, and both used"
    );
    assert_eq!(job_ids(&sb, "pool", "extract").len(), 4);
}

// A job cancelled with scancel, and one past the task's timeout,
// are classified and retried per policy
#[cfg_attr(
    not(any(weir_has_slurm, weir_ci)),
    ignore = "needs Slurm: `sinfo` must answer (ci/slurm-up.sh starts one)"
)]
#[test]
fn scancel_and_timeout_are_classified_and_retried() {
    if !slurm() {
        return;
    }
    // Attempt 1 sleeps; later attempts finish at once.
    let sb = sandbox("hpc", "raw_k", 4, "timeout = \"5s\"");
    sb.script(
        "extract.sh",
        &format!(
            "[ \"$WEIR_ATTEMPT\" = 1 ] && sleep 30\n{}",
            EXTRACT.replace("[ -n \"$SLEEP\" ] && sleep \"$SLEEP\"\n", "")
        ),
    );
    let engine = Engine::spawn(
        sb.weir(&[
            "run",
            "m.toml",
            "--run-id",
            "kill",
            "--task",
            "extract",
            "--partition",
            "a",
        ]),
        sb.path(),
        "kill",
    );
    // Cancel the first job of key a from outside; key a's second attempt
    // must then publish. (The timeout case: see key b below.)
    let mut first = String::new();
    poll_until("a's first job", Duration::from_secs(20), || {
        let events = weir::events::read_log(
            &weir::events::run_dir(&sb.path().join("wh"), "kill").join("events.jsonl"),
        );
        first = events
            .ok()
            .and_then(|(r, _)| {
                r.into_iter().find_map(|e| {
                    (e.state == State::Running)
                        .then(|| e.data.get("job_id")?.as_str().map(str::to_string))
                        .flatten()
                })
            })
            .unwrap_or_default();
        !first.is_empty()
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(Command::new("scancel")
        .arg(&first)
        .status()
        .unwrap()
        .success());
    let out = engine.finish(Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = sb.events("kill");
    let failed = events
        .iter()
        .find(|e| e.state == State::Failed)
        .expect("a FAILED event");
    assert_eq!(
        failed.detail,
        "ended by the scheduler: cancelled",
        "{:#?}",
        events
            .iter()
            .map(|e| (e.state, &e.detail))
            .collect::<Vec<_>>()
    );
    assert!(events.iter().any(|e| e.state == State::Retrying));
    assert!(sb.store("raw_k", "a").latest().unwrap().is_some());

    // Key b: nobody cancels; weir's timeout (5s) scancels the job itself.
    let started = Instant::now();
    let out = sb.run("timeout", &["--task", "extract", "--partition", "b"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = sb.events("timeout");
    let failed = events
        .iter()
        .find(|e| e.state == State::Failed)
        .expect("a FAILED event");
    assert_eq!(failed.detail, "timed out");
    let retry = events
        .iter()
        .find(|e| e.state == State::Retrying)
        .expect("retried");
    assert_eq!(retry.data["class"], "transient");
    assert!(started.elapsed() < Duration::from_secs(25));
    let ids = job_ids(&sb, "timeout", "extract");
    assert_eq!(ids["b"].len(), 2, "{ids:?}");
    // The timed-out job is gone from the queue, not left sleeping.
    assert!(queued("weir-raw_k-").is_empty());
}

/// The engine dies (`signal`) while its jobs run; a restart neither runs a
/// duplicate beside them nor loses their results; nothing stays queued.
fn engine_dies_then_restart(signal: i32, dataset: &str) {
    let _serial = exclusive();
    let sb = sandbox("hpc", dataset, 4, "heartbeat = \"200ms\"");
    let mut first = Engine::spawn(
        {
            let mut c = sb.weir(&["run", "m.toml", "--run-id", "one", "--task", "extract"]);
            c.env("SLEEP", "3");
            c
        },
        sb.path(),
        "one",
    );
    let prefix = format!("weir-{dataset}-");
    poll_until("four jobs", Duration::from_secs(20), || {
        queued(&prefix).len() == 4
    });
    first.signal(signal);
    poll_until("the engine to die", Duration::from_secs(5), || {
        first.exited()
    });
    let orphans: BTreeSet<String> = queued(&prefix).into_iter().collect();
    if signal != libc::SIGKILL {
        // A signal weir can handle (Ctrl-C, SIGTERM): it cancels its jobs
        // before it exits, records them INTERRUPTED, and the next run runs
        // them again from the start.
        assert!(orphans.is_empty(), "jobs left queued: {orphans:?}");
        let events = sb.events("one");
        assert_eq!(
            events
                .iter()
                .filter(|e| e.state == State::Interrupted)
                .count(),
            4
        );
        let out = sb.run("two", &["--task", "extract"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(queued(&prefix).is_empty(), "nothing left in the queue");
        let clean = sandbox("hpc", dataset, 4, "heartbeat = \"200ms\"");
        let out = clean.run("ref", &["--task", "extract"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(digests(&sb, &[dataset]), digests(&clean, &[dataset]));
        return;
    }
    assert_eq!(orphans.len(), 4, "the jobs outlive their engine");
    let out = sb.run("two", &["--task", "extract"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(queued(&prefix).is_empty(), "nothing left in the queue");
    // No new job: each orphan was waited for and its output adopted.
    let events = sb.events("two");
    let adopted: BTreeSet<String> = events
        .iter()
        .filter(|e| e.state == State::Running)
        .filter_map(|e| Some(e.data.get("job_id")?.as_str()?.to_string()))
        .collect();
    assert_eq!(
        adopted, orphans,
        "the restart adopts the orphans' jobs, submits none"
    );
    assert!(events.iter().any(|e| e.state == State::Waiting));
    for k in ["a", "b", "c", "d"] {
        let record = sb.store(dataset, k).latest().unwrap().expect("published");
        assert_eq!(record.run_id, "two");
        // The command ran once per key: one line per job.
        let runs = std::fs::read_to_string(sb.path().join(format!("runs-{k}.log"))).unwrap();
        assert_eq!(runs.lines().count(), 1, "{k}: {runs}");
    }
    // The same bytes as an uninterrupted run.
    let clean = sandbox("hpc", dataset, 4, "heartbeat = \"200ms\"");
    let out = clean.run("ref", &["--task", "extract"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(digests(&sb, &[dataset]), digests(&clean, &[dataset]));
}

// Kill -9 of the engine while jobs run, then a restart
#[cfg_attr(
    not(any(weir_has_slurm, weir_ci)),
    ignore = "needs Slurm: `sinfo` must answer (ci/slurm-up.sh starts one)"
)]
#[test]
fn kill9_then_restart_adopts_running_jobs() {
    if !slurm() {
        return;
    }
    engine_dies_then_restart(libc::SIGKILL, "raw_s");
}

// An interrupted engine (SIGTERM, as Ctrl-C) scancels its jobs before
// it exits, and a restart runs them to the same digests
#[cfg_attr(
    not(any(weir_has_slurm, weir_ci)),
    ignore = "needs Slurm: `sinfo` must answer (ci/slurm-up.sh starts one)"
)]
#[test]
fn interrupted_engine_cancels_its_jobs() {
    if !slurm() {
        return;
    }
    engine_dies_then_restart(libc::SIGTERM, "raw_t");
}

// A job that cannot see its attempt directory fails clearly (held
// for an operator), not as a missing output. Simulated by running the job as
// `nobody`, who cannot enter the sandbox (mode 0700): what a node without
// the shared filesystem sees.
#[cfg_attr(
    not(any(weir_has_slurm, weir_ci)),
    ignore = "needs Slurm: `sinfo` must answer (ci/slurm-up.sh starts one)"
)]
#[test]
fn job_that_cannot_see_staging_fails_clearly() {
    if !slurm() {
        return;
    }
    let sb = Sandbox::new(&manifest("hpc", "raw_n", 4, "").replace(
        "args = [\"--partition=debug\"]",
        "args = [\"--partition=debug\", \"--uid=nobody\"]",
    ));
    sb.script("extract.sh", EXTRACT);
    sb.script("clean.sh", CLEAN);
    let out = sb.run("blind", &["--task", "extract", "--partition", "a"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let events = sb.events("blind");
    let failed = events
        .iter()
        .find(|e| e.state == State::Failed)
        .expect("a FAILED event");
    assert!(
        failed.detail.contains("cannot see the attempt directory")
            && failed.detail.contains("shared with the compute nodes"),
        "{}",
        failed.detail
    );
    assert!(
        events.iter().any(|e| e.state == State::Held),
        "held for an operator"
    );
    assert!(sb.store("raw_n", "a").latest().unwrap().is_none());
}

// `weir plan` shows each task's executor and resources
#[test]
fn plan_shows_executor_and_resources() {
    let sb = sandbox("hpc", "raw_plan", 4, "");
    let out = sb.weir(&["plan", "m.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("executors (where each attempt runs, what it asks for):\n  extract  hpc (slurm)  cpus=1 memory=64M\n  clean    hpc (slurm)  -\n"),
        "{text}"
    );
    let out = sb.weir(&["plan", "m.toml", "--json"]).output().unwrap();
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["tasks"][0]["executor"], "hpc");
    assert_eq!(plan["tasks"][0]["executor_kind"], "slurm");
    assert_eq!(plan["tasks"][0]["resources"]["memory"], "64M");
}

// Slurm end states have defaults (node failure and preemption
// transient, out-of-memory deterministic) that `exit_codes` overrides by name
#[test]
fn end_state_defaults_and_overrides() {
    use weir::exec::classify::{rule, ClusterEnd, Ending};
    use weir::manifest::FailureRule;
    let sb = sandbox("hpc", "raw_c", 4, "");
    let m = sb.manifest();
    let t = &m.tasks["extract"];
    let of = |e: ClusterEnd| rule(t, &Ending::Cluster(e));
    assert_eq!(of(ClusterEnd::NodeFail), FailureRule::Transient);
    assert_eq!(of(ClusterEnd::Preempted), FailureRule::Transient);
    assert_eq!(of(ClusterEnd::OutOfMemory), FailureRule::Deterministic);
    assert_eq!(
        of(ClusterEnd::Cancelled),
        FailureRule::Class("quick".into())
    );
    let sb = sandbox(
        "hpc",
        "raw_c",
        4,
        "exit_codes = { out_of_memory = \"quick\", preempted = \"operator\" }",
    );
    let m = sb.manifest();
    let t = &m.tasks["extract"];
    let of = |e: ClusterEnd| rule(t, &Ending::Cluster(e));
    assert_eq!(
        of(ClusterEnd::OutOfMemory),
        FailureRule::Class("quick".into())
    );
    assert_eq!(of(ClusterEnd::Preempted), FailureRule::Operator);
    assert_eq!(of(ClusterEnd::NodeFail), FailureRule::Transient);
}
