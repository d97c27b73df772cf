//! kill -9 trials: the engine is SIGKILLed at random moments of a small
//! pipeline, restarted, killed again, and finally run uninterrupted. Whatever
//! the moments, the warehouse converges on exactly what one uninterrupted run
//! publishes, each partition published once, readers only ever pointed at
//! committed candidates, and every event log whole but for a torn last line.
//!
//! `WEIR_KILL9_TRIALS` (default 50) sets the number of trials,
//! `WEIR_KILL9_SEED` replays one trial's seed (the kill moments are drawn
//! from it; how far the engine got by then also depends on the machine) and
//! `WEIR_KILL9_KEEP_GOING=1` runs every trial and reports every failing seed.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use weir::events::State;
use weir::store::FencingToken;

use crate::support::{all_events, exclusive, poll_until, stderr, Engine, Sandbox};

const MANIFEST: &str = r#"
[pipeline]
name = "kill9"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["a", "b", "c", "d"]

[tasks.extract]
command = ["sh", "extract.sh"]
output = { dataset = "raw", grain = ["id"] }
heartbeat = "100ms"

[tasks.clean]
command = ["sh", "clean.sh"]
inputs = ["raw"]
output = { dataset = "clean", grain = ["id"] }
heartbeat = "100ms"
"#;

/// Three rows derived from the partition key, in two files.
const EXTRACT: &str = r#"p="$WEIR_PARTITION"
printf 'id,part,v\n%s-1,%s,7\n%s-2,%s,14\n' "$p" "$p" "$p" "$p" > "$WEIR_OUTPUT_DIR/one.csv"
printf 'id,part,v\n%s-3,%s,21\n' "$p" "$p" > "$WEIR_OUTPUT_DIR/two.csv"
"#;

/// The upstream rows with `v` doubled and a new column.
const CLEAN: &str = r#"out="$WEIR_OUTPUT_DIR/clean.csv"
printf 'id,part,v,ok\n' > "$out"
for f in "$WEIR_INPUT_RAW"/*.csv; do
  tail -n +2 "$f" | while IFS=, read -r id part v; do
    printf '%s,%s,%s,yes\n' "$id" "$part" "$((v * 2))" >> "$out"
  done
done
"#;

const KEYS: [&str; 4] = ["a", "b", "c", "d"];
const DATASETS: [(&str, &str, u64); 2] = [("extract", "raw", 3), ("clean", "clean", 3)];

fn sandbox() -> Sandbox {
    let sb = Sandbox::new(MANIFEST);
    sb.script("extract.sh", EXTRACT);
    sb.script("clean.sh", CLEAN);
    sb
}

fn run(sb: &Sandbox, run_id: &str) -> Engine {
    Engine::spawn(
        sb.weir(&["run", "m.toml", "--run-id", run_id]),
        sb.path(),
        run_id,
    )
}

/// Digest per (dataset, partition) of an uninterrupted run, and its duration.
fn reference() -> (BTreeMap<(String, String), String>, Duration) {
    let sb = sandbox();
    let started = Instant::now();
    let out = run(&sb, "reference").finish(Duration::from_secs(60));
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut digests = BTreeMap::new();
    for (_, dataset, rows) in DATASETS {
        for key in KEYS {
            let record = sb.store(dataset, key).latest().unwrap().unwrap();
            assert_eq!(record.rows, rows);
            digests.insert((dataset.to_owned(), key.to_owned()), record.digest);
        }
    }
    (digests, took)
}

/// One trial: `kills` runs (drawn from the range) SIGKILLed after a random
/// delay each, then one uninterrupted run; `Err` says which invariant broke.
fn trial(
    seed: u64,
    kills: std::ops::RangeInclusive<u32>,
    reference: &BTreeMap<(String, String), String>,
    window: Duration,
    tally: &mut Tally,
) -> Result<(), String> {
    let sb = sandbox();
    let mut rng = fastrand::Rng::with_seed(seed);
    let kills = rng.u32(kills);
    let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
    for k in 0..kills {
        let run_id = format!("killed-{k}");
        let mut engine = run(&sb, &run_id);
        let deadline = Instant::now() + Duration::from_millis(rng.u64(0..=window_ms));
        while Instant::now() < deadline && !engine.exited() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let status = engine.kill();
        // Killed, or it got to the end first: either way a whole run or none.
        if status.signal() != Some(libc::SIGKILL) && status.code() != Some(0) {
            return Err(format!("killed run {k} ended with {status:?}"));
        }
        tally.count(&sb, &run_id);
    }
    let out = run(&sb, "final")
        .finish_within(Duration::from_secs(30))
        .map_err(|_| format!("the uninterrupted run hung: {}", stuck(&sb)))?;
    if out.status.code() != Some(0) {
        return Err(format!(
            "the uninterrupted run exited {:?}: {}{}",
            out.status,
            crate::support::stdout(&out),
            stderr(&out)
        ));
    }

    let wh = sb.path().join("wh");
    let events = all_events(&wh)?;
    for (task, dataset, rows) in DATASETS {
        for key in KEYS {
            let at = format!("{dataset}/{key}");
            let store = sb.store(dataset, key);
            let history = store.history().map_err(|e| format!("{at}: {e}"))?;
            if history.windows(2).any(|w| w[0].token >= w[1].token) {
                return Err(format!("{at}: tokens do not increase: {history:?}"));
            }
            // Published once: a restart finds the generation and leaves it.
            if history.len() != 1 {
                return Err(format!("{at}: {} generations", history.len()));
            }
            let record = &history[0];
            let expected = &reference[&(dataset.to_owned(), key.to_owned())];
            if &record.digest != expected || record.rows != rows {
                return Err(format!(
                    "{at}: published {} ({} rows), an uninterrupted run publishes {expected}",
                    record.digest, record.rows
                ));
            }
            // Readers follow the record into its own committed attempt's
            // published data dir.
            let committed = store.published_dir(record.token);
            if record.attempt_dir != store.attempt_key(record.token) {
                return Err(format!("{at}: record names {}", record.attempt_dir));
            }
            let files = store.visible_files(record);
            if let Some(stray) = files.iter().find(|f| !f.starts_with(&committed)) {
                return Err(format!(
                    "{at}: visible file {} outside {}",
                    stray.display(),
                    committed.display()
                ));
            }
            let (n, digest) = weir::audit::digest_files(&files, weir::audit::Format::Csv)
                .map_err(|e| format!("{at}: visible files unreadable: {e}"))?;
            if (n, digest.as_str()) != (rows, expected.as_str()) {
                return Err(format!(
                    "{at}: visible files digest to {} ({n} rows)",
                    digest.as_str()
                ));
            }
            let evidence = store.attempt_dir(record.token).join("candidate.json");
            let candidate: serde_json::Value = std::fs::read(evidence)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .ok_or_else(|| format!("{at}: no candidate.json in the committed attempt dir"))?;
            if candidate["passed"] != true
                || candidate["token"] != record.token.get()
                || candidate["digest"] != expected.as_str()
            {
                return Err(format!("{at}: committed candidate {candidate}"));
            }
            // At most one PUBLISHED, and only for the committed token.
            let published: Vec<_> = events
                .iter()
                .filter(|e| {
                    e.state == State::Published
                        && e.task.as_deref() == Some(task)
                        && e.partition.as_deref() == Some(key)
                })
                .collect();
            if published.len() > 1
                || published
                    .iter()
                    .any(|e| e.token != Some(record.token.get()))
            {
                return Err(format!("{at}: PUBLISHED events {published:?}"));
            }
            // Tokens only grow: none was handed out twice.
            let tokens = sb.entries(dataset, key, "tokens");
            let parsed: Vec<u64> = tokens
                .iter()
                .filter_map(|t| FencingToken::parse_key_name(t).map(FencingToken::get))
                .collect();
            if parsed.len() != tokens.len()
                || parsed != (1..=parsed.len() as u64).collect::<Vec<_>>()
            {
                return Err(format!("{at}: tokens {tokens:?}"));
            }
        }
    }
    let finished = events
        .iter()
        .filter(|e| e.run_id == "final" && e.state == State::RunFinished)
        .count();
    if finished != 1 {
        return Err(format!("the final run has {finished} RUN_FINISHED events"));
    }
    let status = sb.weir(&["status", "m.toml", "--json"]).output().unwrap();
    if status.status.code() != Some(0)
        || serde_json::from_slice::<serde_json::Value>(&status.stdout).is_err()
    {
        return Err(format!(
            "weir status --json exited {:?}: {}",
            status.status,
            stderr(&status)
        ));
    }
    Ok(())
}

/// What a hung run was doing: per partition, its tokens, takeover claims
/// and the hung run's UNKNOWN events.
fn stuck(sb: &Sandbox) -> String {
    let events = all_events(&sb.path().join("wh")).unwrap_or_default();
    let mut lines = Vec::new();
    for (task, dataset, _) in DATASETS {
        for key in KEYS {
            let unknown = events
                .iter()
                .filter(|e| {
                    e.run_id == "final"
                        && e.state == State::Unknown
                        && e.task.as_deref() == Some(task)
                        && e.partition.as_deref() == Some(key)
                })
                .count();
            let claims = sb.entries(dataset, key, "claims");
            let claimants: Vec<String> = claims
                .iter()
                .map(|c| {
                    let path = sb
                        .path()
                        .join("wh")
                        .join(dataset)
                        .join(key)
                        .join("claims")
                        .join(c);
                    std::fs::read_to_string(path).unwrap_or_default()
                })
                .collect();
            lines.push(format!(
                "{dataset}/{key}: tokens {:?}, claims {claimants:?}, {unknown} UNKNOWN events in the final run",
                sb.entries(dataset, key, "tokens")
            ));
        }
    }
    lines.join("; ")
}

/// Where the killed runs were when they died, judged by their event logs.
#[derive(Debug, Default)]
struct Tally {
    /// No event written.
    before_any_event: u32,
    /// Started, nothing committed yet.
    before_first_publish: u32,
    /// Some instances published, not all.
    mid_run: u32,
    /// A commit record durable without its PUBLISHED event.
    unacknowledged_commit: u32,
    /// Finished before the kill.
    finished: u32,
}

impl Tally {
    fn count(&mut self, sb: &Sandbox, run_id: &str) {
        let log = weir::events::run_dir(&sb.path().join("wh"), run_id).join("events.jsonl");
        let records = weir::events::read_log(&log).map_or_else(|_| Vec::new(), |(r, _)| r);
        let published = records
            .iter()
            .filter(|e| e.state == State::Published)
            .count();
        if records.is_empty() {
            self.before_any_event += 1;
        } else if records.iter().any(|e| e.state == State::RunFinished) {
            self.finished += 1;
        } else if published == 0 {
            self.before_first_publish += 1;
        } else {
            self.mid_run += 1;
        }
        let commits = DATASETS
            .iter()
            .flat_map(|(_, dataset, _)| KEYS.iter().map(move |k| sb.store(dataset, k)))
            .filter_map(|store| store.latest().ok().flatten())
            .filter(|r| r.run_id == run_id)
            .count();
        if commits > published {
            self.unacknowledged_commit += 1;
        }
    }
}

/// Runs the trials (`WEIR_KILL9_TRIALS`, default 50, or the one trial of
/// `WEIR_KILL9_SEED`), each killing `kills` runs; panics with the seeds of the
/// failing trials (all of them with `WEIR_KILL9_KEEP_GOING=1`).
fn trials(name: &str, kills: std::ops::RangeInclusive<u32>, base_seed: u64) {
    let _serial = exclusive();
    let trials: u64 = std::env::var("WEIR_KILL9_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let seeds: Vec<u64> = match std::env::var("WEIR_KILL9_SEED") {
        Ok(seed) => vec![seed.parse().expect("WEIR_KILL9_SEED is a u64")],
        Err(_) => (0..trials).map(|i| base_seed + i).collect(),
    };
    let started = Instant::now();
    let (reference, took) = reference();
    // Kill anywhere from before the engine starts to a little past its
    // natural end.
    let window = took + took / 4;
    let keep_going = std::env::var_os("WEIR_KILL9_KEEP_GOING").is_some();
    let mut failures = Vec::new();
    let mut tally = Tally::default();
    for seed in &seeds {
        if let Err(why) = trial(*seed, kills.clone(), &reference, window, &mut tally) {
            let failure = format!("{name}: trial WEIR_KILL9_SEED={seed} failed: {why}");
            eprintln!("{failure}");
            failures.push(failure);
            if !keep_going {
                break;
            }
        }
    }
    eprintln!(
        "{name}: {} trials in {:.1?} (an uninterrupted run takes {took:.1?}); killed runs: {tally:?}",
        seeds.len(),
        started.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One to three kills in a row, each at a random moment (a restart may be
/// killed in the middle of taking over its predecessor's attempts), then an
/// uninterrupted run.
#[test]
fn kill9_trials() {
    trials("kill9_trials", 1..=3, 0x6b69_6c6c_3900_0000);
}

/// The state a killed restart can leave in `kill9_trials`, made
/// deterministically: engine A is killed during its attempt (token 1, lease
/// unfinished); engine B noticed, claimed the takeover of token 1 and was
/// killed before allocating token 2. Engine C must take over at once, as it
/// would had B never existed, not wait for B's never-coming attempt.
#[test]
fn takeover_claimed_by_a_killed_engine_does_not_block_a_restart() {
    let _serial = exclusive();
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "claim"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["k"]

[tasks.t]
command = ["sh", "t.sh"]
output = { dataset = "out", grain = ["id"] }
heartbeat = "100ms"
timeout = "8s"
"#,
    );
    sb.script(
        "t.sh",
        "printf 'id,token\\n1,%s\\n' \"$WEIR_TOKEN\" > \"$WEIR_OUTPUT_DIR/out.csv\"\nsleep 0.3\n",
    );
    let store = sb.store("out", "k");
    let first = FencingToken::from_raw(1);
    let a = Engine::spawn(sb.weir(&["run", "m.toml", "--run-id", "A"]), sb.path(), "A");
    poll_until("A's lease", Duration::from_secs(30), || {
        store.attempt_dir(first).join("lease.json").is_file()
    });
    a.kill();
    let claimed = store
        .claim_takeover(
            first,
            &weir::store::TokenOwner {
                run_id: "B".into(),
                task: "t".into(),
                attempt: 1,
            },
        )
        .unwrap();
    assert!(claimed);

    let started = Instant::now();
    let out = Engine::spawn(sb.weir(&["run", "m.toml", "--run-id", "C"]), sb.path(), "C")
        .finish(Duration::from_secs(60));
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = sb.events("C");
    let unknown = events.iter().filter(|e| e.state == State::Unknown).count();
    assert!(
        took < Duration::from_secs(4),
        "C took {took:?} (the task's timeout is 8 s; {unknown} UNKNOWN events)"
    );
    assert!(unknown <= 1, "{unknown} UNKNOWN events");
    let visible = crate::support::Visible::of(&store);
    assert_eq!(
        (visible.record.token.get(), visible.record.run_id.as_str()),
        (2, "C")
    );
}
