//! `weir` commands on an `s3://` warehouse, against moto's S3
//! server (`ci/moto-up.sh`; see s3.rs for when these are ignored). Each
//! engine or command gets its own staging directory, as separate hosts
//! would: nothing may pass between them except through the bucket.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use weir::store::Backend;

use crate::support::s3::{backend, weir_s3, S3};
use crate::support::{copy_tree_without_warehouse, ok, repo, stderr, stdout, weir, Engine};

/// CSV files under a staging directory, outside verify's `_scratch`.
fn data_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|n| n == "_scratch") {
            continue;
        }
        if path.is_dir() {
            out.extend(data_files(&path));
        } else if path.extension().is_some_and(|e| e == "csv") {
            out.push(path);
        }
    }
    out
}

/// (dataset, partition) → (generation, rows, digest) from `status --json`.
fn published(status: &str) -> BTreeMap<(String, String), (u64, u64, String)> {
    let doc: serde_json::Value = serde_json::from_str(status).expect("status --json is JSON");
    doc["partitions"]
        .as_array()
        .expect("a partitions array")
        .iter()
        .map(|p| {
            (
                (
                    p["dataset"].as_str().unwrap().to_owned(),
                    p["partition"].as_str().unwrap().to_owned(),
                ),
                (
                    p["generation"].as_u64().unwrap(),
                    p["rows"].as_u64().unwrap(),
                    p["digest"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect()
}

// The AtlasMart example run on S3 publishes exactly the digests it
// publishes on disk, and every command reads, repairs and cleans the S3
// warehouse the way it does a directory, from any host's staging directory.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn atlasmart_on_s3_matches_disk_and_every_command_works() {
    let Some(s3) = S3::sandbox("atlasmart") else {
        return;
    };
    let S3 { endpoint, url, .. } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pipelines");
    copy_tree_without_warehouse(&repo().join("pipelines"), &dir);
    let days = ["--partition", "2026-09-20", "--partition", "2026-09-21"];
    let host_a = tmp.path().join("host-a");
    let host_b = tmp.path().join("host-b");
    let s3 = |staging: &Path, args: &[&str]| {
        weir_s3(&dir, endpoint, staging, url, args)
            .output()
            .unwrap()
    };

    // On disk, then on S3.
    let local = tmp.path().join("local-wh");
    let local_wh = local.to_str().unwrap();
    let mut run = vec!["--warehouse", local_wh, "run", "atlasmart.toml"];
    run.extend(days);
    ok(&weir().current_dir(&dir).args(&run).output().unwrap());
    let on_disk = published(&ok(&weir()
        .current_dir(&dir)
        .args([
            "--warehouse",
            local_wh,
            "status",
            "atlasmart.toml",
            "--json",
        ])
        .output()
        .unwrap()));
    assert_eq!(on_disk.len(), 6, "{on_disk:?}");
    let mut run = vec!["run", "atlasmart.toml"];
    run.extend(days);
    let out = ok(&s3(&host_a, &run));
    assert!(out.contains("6 published"), "{out}");
    // Read from another host: the same publications, the same digests.
    let on_s3 = published(&ok(&s3(&host_b, &["status", "atlasmart.toml", "--json"])));
    assert_eq!(on_s3, on_disk);
    ok(&s3(&host_b, &["status", "atlasmart.toml", "--check"]));
    // The bucket holds the files; host b's staging held nothing of them.
    let objects = backend(endpoint, url).list_objects("fact_sales").unwrap();
    assert!(
        objects.iter().any(|o| o.key.contains("/data/")),
        "{objects:?}"
    );

    // show downloads and checks the files: the rows of the local warehouse.
    let show = [
        "show",
        "atlasmart.toml",
        "fact_sales",
        "--partition",
        "2026-09-21",
    ];
    let local_rows = ok(&weir()
        .current_dir(&dir)
        .args(["--warehouse", local_wh])
        .args(show)
        .output()
        .unwrap());
    assert_eq!(ok(&s3(&host_b, &show)), local_rows);

    let events = ok(&s3(&host_b, &["events", "atlasmart.toml"]));
    assert_eq!(events.matches("PUBLISHED").count(), 6, "{events}");
    let history = ok(&s3(
        &host_b,
        &[
            "history",
            "atlasmart.toml",
            "fact_sales",
            "--partition",
            "2026-09-21",
        ],
    ));
    assert!(history.contains(&on_disk[&("fact_sales".into(), "2026-09-21".into())].2[..19]));
    let explain = ok(&s3(
        &host_b,
        &[
            "explain",
            "atlasmart.toml",
            "load",
            "--partition",
            "2026-09-21",
        ],
    ));
    assert!(explain.contains("published: generation 1"), "{explain}");
    // verify reruns from the pinned inputs, downloaded on host b.
    let verify = ok(&s3(
        &host_b,
        &[
            "verify",
            "atlasmart.toml",
            "load",
            "--partition",
            "2026-09-21",
        ],
    ));
    assert!(verify.contains("deterministic"), "{verify}");

    // A forced rebuild, a rollback to generation 1, certification.
    let forced = ok(&s3(
        &host_b,
        &[
            "run",
            "atlasmart.toml",
            "--task",
            "load",
            "--partition",
            "2026-09-21",
            "--force",
        ],
    ));
    assert!(forced.contains("1 published"), "{forced}");
    let key = ("fact_sales".to_owned(), "2026-09-21".to_owned());
    let now = published(&ok(&s3(&host_a, &["status", "atlasmart.toml", "--json"])));
    assert_eq!(now[&key].0, 2);
    ok(&s3(
        &host_a,
        &[
            "rollback",
            "atlasmart.toml",
            "fact_sales",
            "--partition",
            "2026-09-21",
            "--to",
            "1",
        ],
    ));
    let after = published(&ok(&s3(&host_a, &["status", "atlasmart.toml", "--json"])));
    assert_eq!(after[&key].0, 3);
    assert_eq!(after[&key].2, on_disk[&key].2);
    let reason = ["--reason", "checked by hand"];
    let mut uncertify = vec![
        "uncertify",
        "atlasmart.toml",
        "fact_sales",
        "--partition",
        "2026-09-21",
    ];
    uncertify.extend(reason);
    ok(&s3(&host_a, &uncertify));
    let status = s3(&host_b, &["status", "atlasmart.toml"]);
    assert!(
        stdout(&status).contains("UNCERTIFIED"),
        "{}",
        stdout(&status)
    );
    let mut certify = uncertify.clone();
    certify[0] = "certify";
    ok(&s3(&host_b, &certify));

    // gc lists attempts by their S3 location and deletes what nothing needs.
    let gc = ok(&s3(
        &host_b,
        &["gc", "atlasmart.toml", "--keep-generations", "1"],
    ));
    assert!(
        gc.contains(&format!("{url}/fact_sales/2026-09-21/attempts/")),
        "{gc}"
    );
    ok(&s3(
        &host_b,
        &["gc", "atlasmart.toml", "--keep-generations", "1", "--apply"],
    ));
    // The rollback held `load`; releasing it reruns nothing (the restored
    // generation is current), and then nothing needs attention.
    let held = s3(&host_b, &["status", "atlasmart.toml", "--check"]);
    assert_eq!(held.status.code(), Some(4), "{}", stderr(&held));
    assert!(stdout(&held).contains("HELD"), "{}", stdout(&held));
    ok(&s3(
        &host_b,
        &[
            "abandon",
            "atlasmart.toml",
            "load",
            "--partition",
            "2026-09-21",
            "--note",
            "looking into it",
        ],
    ));
    let abandoned = ok(&s3(
        &host_a,
        &[
            "explain",
            "atlasmart.toml",
            "load",
            "--partition",
            "2026-09-21",
        ],
    ));
    assert!(abandoned.contains("ABANDONED"), "{abandoned}");
    let retry = ok(&s3(
        &host_a,
        &[
            "retry",
            "atlasmart.toml",
            "load",
            "--partition",
            "2026-09-21",
            "--note",
            "rolled back on purpose",
        ],
    ));
    assert!(!retry.contains("1 published"), "{retry}");
    ok(&s3(&host_b, &["status", "atlasmart.toml", "--check"]));
    assert_eq!(ok(&s3(&host_a, &show)), local_rows);

    // The declared backfill: its cost first, then the run in its own pool;
    // forced, it republishes the same digests.
    let dry = ok(&s3(
        &host_b,
        &[
            "backfill",
            "atlasmart.toml",
            "repair_2026_09_20",
            "--dry-run",
        ],
    ));
    assert!(dry.contains("2026-09-20"), "{dry}");
    ok(&s3(
        &host_b,
        &["backfill", "atlasmart.toml", "repair_2026_09_20", "--force"],
    ));
    let after = published(&ok(&s3(&host_a, &["status", "atlasmart.toml", "--json"])));
    for (key, (generation, rows, digest)) in &on_disk {
        if key.1 == "2026-09-20" {
            assert_eq!(after[key].0, generation + 1, "{key:?}");
            assert_eq!((&after[key].1, &after[key].2), (rows, digest), "{key:?}");
        }
    }

    // Nothing read or published stays behind on either host (verify's
    // scratch is kept on purpose, for inspection).
    for host in [&host_a, &host_b] {
        let left = data_files(host);
        assert!(left.is_empty(), "left in {}: {left:?}", host.display());
    }

    let report = tmp.path().join("report.html");
    ok(&s3(
        &host_b,
        &[
            "report",
            "atlasmart.toml",
            "--out",
            report.to_str().unwrap(),
        ],
    ));
    let html = std::fs::read_to_string(&report).unwrap();
    // The page's templates write `/` as `&#x2f;` (the same text in a browser).
    assert!(
        html.contains(&url.replace('/', "&#x2f;")),
        "the report names the S3 warehouse"
    );
    let plan = ok(&s3(
        &host_b,
        &["plan", "atlasmart.toml", "--partition", "2026-09-21"],
    ));
    assert!(plan.contains("load"), "{plan}");
}

// A published object changed in the bucket behind weir's back is
// drift: readers refuse it (exit 5, naming the file and how it changed), and
// a downstream task is never handed it.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn an_object_changed_in_the_bucket_is_refused() {
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 {
        endpoint,
        bucket,
        url,
    } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("m.toml"),
        r#"
[pipeline]
name = "drift"
code_version = "1"
warehouse = "unused"

[partitions.k]
kind = "static"
keys = ["a"]

[tasks.up]
command = ["sh", "-c", "printf 'id,v\n1,10\n2,20\n' > \"$WEIR_OUTPUT_DIR/up.csv\""]
output = { dataset = "up", grain = ["id"] }

[tasks.down]
command = ["sh", "-c", "cat \"$WEIR_INPUT_UP\"/*.csv > \"$WEIR_OUTPUT_DIR/down.csv\""]
inputs = ["up"]
output = { dataset = "down", grain = ["id"] }
"#,
    )
    .unwrap();
    let staging = dir.join("staging");
    let s3 = |args: &[&str]| {
        weir_s3(dir, endpoint, &staging, url, args)
            .output()
            .unwrap()
    };
    ok(&s3(&["run", "m.toml", "--task", "up"]));
    let store = backend(endpoint, url);
    let data: Vec<String> = store
        .list_objects("up/a")
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .filter(|k| k.contains("/data/"))
        .collect();
    assert_eq!(data.len(), 1, "{data:?}");
    store.put(&data[0], b"id,v\n1,10\n2,99\n").unwrap();

    let show = s3(&["show", "m.toml", "up", "--partition", "a"]);
    assert_eq!(show.status.code(), Some(5), "{}", stderr(&show));
    // Named by its URL.
    let said = stderr(&show);
    assert!(said.contains(&format!("`{url}/up/a/attempts/")), "{said}");
    assert!(said.contains("changed content"), "{said}");
    assert!(stdout(&show).is_empty());
    let down = s3(&["run", "m.toml", "--task", "down"]);
    assert_ne!(down.status.code(), Some(0), "{}", stdout(&down));
    assert!(
        backend(endpoint, url)
            .list("down/a/log")
            .unwrap()
            .is_empty(),
        "down published from a drifted input"
    );
    // A bucket that is not there: commands fail with the server's answer,
    // a plan warns and plans as if nothing were published.
    let gone = format!("s3://no-such-{bucket}/wh");
    let status = weir_s3(dir, endpoint, &staging, &gone, &["status", "m.toml"])
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(5), "{}", stderr(&status));
    assert!(
        stderr(&status).contains("NoSuchBucket"),
        "{}",
        stderr(&status)
    );
    let plan = weir_s3(dir, endpoint, &staging, &gone, &["plan", "m.toml"])
        .output()
        .unwrap();
    assert_eq!(plan.status.code(), Some(0), "{}", stderr(&plan));
    assert!(
        stderr(&plan).contains(&format!("warning: cannot open the warehouse {gone}")),
        "{}",
        stderr(&plan)
    );
}

/// The rows every partition of the chaos pipeline publishes, by key.
fn chaos_manifest(keys: &[String]) -> String {
    format!(
        r#"
[pipeline]
name = "s3chaos"
code_version = "1"
warehouse = "unused"

[partitions.k]
kind = "static"
keys = {keys:?}

[pools.work]
slots = 3

[retry.flaky]
max_attempts = 5
backoff = {{ initial = "10ms", max = "50ms" }}

[tasks.t]
command = ["sh", "t.sh"]
output = {{ dataset = "out", grain = ["id"] }}
pool = "work"
retry = "flaky"
heartbeat = "300ms"
"#
    )
}

// Three engines on one S3 warehouse, each staging on its own
// "host", one SIGSTOPped past its leases and continued, one killed -9 mid-run:
// every partition converges to the digest a lone engine on disk publishes,
// and no generation in any commit log holds anything else (nothing torn,
// nothing stale, nothing doubled).
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn three_engines_on_s3_with_kill9_and_sigstop_converge() {
    let _serial = crate::support::exclusive();
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 { endpoint, url, .. } = &s3;
    let keys: Vec<String> = (0..24).map(|i| format!("p{i:02}")).collect();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("m.toml"), chaos_manifest(&keys)).unwrap();
    // Slow enough that the signals land while commands run; rows are a
    // function of the partition only.
    std::fs::write(
        dir.join("t.sh"),
        "sleep 0.2\np=\"$WEIR_PARTITION\"\n\
         printf 'id,part\\n%s-1,%s\\n%s-2,%s\\n' \"$p\" \"$p\" \"$p\" \"$p\" > \"$WEIR_OUTPUT_DIR/rows.csv\"\n",
    )
    .unwrap();

    // The reference: one engine on disk.
    let reference = dir.join("reference-wh");
    ok(&weir()
        .current_dir(dir)
        .args(["--warehouse", reference.to_str().unwrap(), "run", "m.toml"])
        .output()
        .unwrap());
    let canonical: BTreeMap<String, String> = keys
        .iter()
        .map(|k| {
            let record = weir::store::Warehouse::open(&reference)
                .unwrap()
                .partition("out", k)
                .latest()
                .unwrap()
                .unwrap();
            (k.clone(), record.digest)
        })
        .collect();

    // Each engine starts on partitions of its own and then meets another's
    // (a: p00-p15, b: p08-p23, c: p16-p23): started in one order, the
    // first engine could claim every partition first on an idle machine,
    // leaving the others only waiting behind its tokens.
    let spawn = |name: &str, from: usize, to: usize| {
        let staging = dir.join(format!("host-{name}"));
        let mut args = vec!["run", "m.toml", "--run-id", name];
        for k in &keys[from..to] {
            args.extend(["--partition", k.as_str()]);
        }
        let cmd = weir_s3(dir, endpoint, &staging, url, &args);
        Engine::spawn(cmd, dir, name)
    };
    let a = spawn("a", 0, 16);
    let b = spawn("b", 8, 24);
    let c = spawn("c", 16, 24);
    // Signals by what the engines are doing, not by the clock: on a loaded
    // machine c could start nothing before a fixed delay ran out, leaving
    // nothing to take over. c is killed while its command runs (past the
    // lease guard: its token is the live one), not while it stages an
    // attempt that waits behind another engine's lower token, which leaves
    // nothing to take over either (seen on an idle machine).
    crate::support::poll_until(
        "engine c running a command",
        Duration::from_secs(60),
        || crate::support::descendant_named(c.pid(), "sleep"),
    );
    let killed = c.kill();
    assert!(!killed.success());
    crate::support::poll_until(
        "engine b running a command",
        Duration::from_secs(60),
        || crate::support::descendant_named(b.pid(), "sleep"),
    );
    b.signal(libc::SIGSTOP);
    // b stays stopped well past its leases (3 heartbeats).
    std::thread::sleep(Duration::from_millis(1500));
    b.signal(libc::SIGCONT);
    let a = a.finish(Duration::from_secs(120));
    let b = b.finish(Duration::from_secs(120));
    for (name, out) in [("a", &a), ("b", &b)] {
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "engine {name}: {:?}\n{}",
            out.status,
            stderr(out)
        );
    }
    // A last engine converges what the killed one left.
    ok(
        &weir_s3(dir, endpoint, &dir.join("host-d"), url, &["run", "m.toml"])
            .output()
            .unwrap(),
    );

    let warehouse = weir::store::Warehouse::remote(
        std::sync::Arc::new(backend(endpoint, url)),
        url,
        &dir.join("host-check"),
    )
    .unwrap();
    for k in &keys {
        let store = warehouse.partition("out", k);
        let history = store.history().unwrap();
        assert!(!history.is_empty(), "{k} never published");
        let mut last_token = 0;
        for record in &history {
            assert_eq!(
                &record.digest, &canonical[k],
                "{k} generation {}",
                record.generation
            );
            assert_eq!(record.rows, 2);
            assert!(
                record.token.get() > last_token,
                "{k}: tokens not increasing"
            );
            last_token = record.token.get();
        }
        // What a reader downloads is what was committed.
        let files = store.local_files(history.last().unwrap()).unwrap();
        let (rows, digest) = weir::audit::digest_files(&files, weir::audit::Format::Csv).unwrap();
        assert_eq!((rows, digest.as_str()), (2, canonical[k].as_str()), "{k}");
    }
    // Each run's event chunks read back in order, whoever wrote them.
    let events = ok(&weir_s3(
        dir,
        endpoint,
        &dir.join("host-e"),
        url,
        &["events", "m.toml"],
    )
    .output()
    .unwrap());
    let count = |state: &str| {
        events
            .lines()
            .filter(|l| l.split_whitespace().nth(2) == Some(state))
            .count()
    };
    eprintln!(
        "published {}, taken over {}, waiting {}, stale {}, already {}",
        count("PUBLISHED"),
        count("TAKEN_OVER"),
        count("WAITING"),
        count("REJECTED_STALE"),
        count("ALREADY_PUBLISHED")
    );
    // The killed engine's attempts were taken over, not waited on forever.
    assert!(count("TAKEN_OVER") >= 1, "{events}");
}

/// A 12-partition pipeline whose task `t` (pool `p`, 2 slots) logs its own
/// start and end (`date +%s%N`) in `intervals.log` around `sleep $SLEEP`.
fn pool_pipeline(dir: &Path) {
    let keys: Vec<String> = (1..=12).map(|i| format!("k{i:02}")).collect();
    std::fs::write(
        dir.join("m.toml"),
        format!(
            r#"
[pipeline]
name = "s3pools"
code_version = "1"
warehouse = "unused"

[partitions.k]
kind = "static"
keys = {keys:?}

[pools.p]
slots = 2

[tasks.t]
command = ["sh", "t.sh"]
output = {{ dataset = "out", grain = ["id"] }}
pool = "p"
"#
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("t.sh"),
        "echo \"start $(date +%s%N) $WEIR_PARTITION\" >> intervals.log\n\
         sleep \"${SLEEP:-0.3}\"\n\
         printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n\
         echo \"end $(date +%s%N) $WEIR_PARTITION\" >> intervals.log\n",
    )
    .unwrap();
}

/// (partition, start, end) from `intervals.log`; no end for a killed command.
fn intervals(dir: &Path) -> Vec<(String, u128, Option<u128>)> {
    let log = std::fs::read_to_string(dir.join("intervals.log")).unwrap_or_default();
    let mut out: Vec<(String, u128, Option<u128>)> = Vec::new();
    for line in log.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let t: u128 = parts[1].parse().unwrap();
        match parts[0] {
            "start" => out.push((parts[2].to_owned(), t, None)),
            _ => {
                let open = out
                    .iter_mut()
                    .rev()
                    .find(|(k, _, e)| k == parts[2] && e.is_none())
                    .expect("an end after its start");
                open.2 = Some(t);
            }
        }
    }
    out
}

// Two engines on one S3 warehouse, each on its own "host", never
// run more than the pool's 2 commands at once (measured from the commands'
// own clocks); one killed -9 while holding both slots leaks neither: the
// other gets them back once the dead engine's heartbeat has stopped moving.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn s3_pool_slots_hold_across_engines_and_survive_kill9() {
    let _serial = crate::support::exclusive();
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 { endpoint, url, .. } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    pool_pipeline(dir);
    let engine = |name: &str, keys: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["run", "m.toml", "--run-id", name];
        for k in keys {
            args.extend(["--partition", k]);
        }
        let mut cmd = weir_s3(dir, endpoint, &dir.join(format!("host-{name}")), url, &args);
        cmd.envs(env.iter().copied());
        Engine::spawn(cmd, dir, name)
    };
    let a = engine("a", &["k01", "k02", "k03", "k04", "k05"], &[]);
    let b = engine("b", &["k06", "k07", "k08", "k09", "k10"], &[]);
    ok(&a.finish(Duration::from_secs(120)));
    ok(&b.finish(Duration::from_secs(120)));
    let done: Vec<(u128, u128)> = intervals(dir)
        .into_iter()
        .map(|(_, s, e)| (s, e.expect("every command ended")))
        .collect();
    assert_eq!(done.len(), 10);
    assert_eq!(crate::support::max_overlap(&done), 2, "{done:?}");

    // c takes both slots with long commands and is killed -9.
    let timeout = ("WEIR_POOL_TIMEOUT", "2s");
    let c = engine("c", &["k11", "k12"], &[("SLEEP", "60"), timeout]);
    crate::support::poll_until("c's two commands", Duration::from_secs(60), || {
        intervals(dir).len() == 12
    });
    assert!(!c.kill().success());
    let killed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    // d gets both slots back: at once here, where c's pid is seen gone; on
    // another host once c's heartbeat has not moved for the 2 s timeout.
    let d = engine("d", &["k11", "k12"], &[("SLEEP", "0.1"), timeout]);
    ok(&d.finish(Duration::from_secs(60)));
    let runs = intervals(dir);
    let after: Vec<_> = runs.iter().filter(|(_, s, _)| *s > killed).collect();
    assert_eq!(after.len(), 2, "{runs:?}");
    assert!(after.iter().all(|(_, _, e)| e.is_some()), "{runs:?}");
    let warehouse = weir::store::Warehouse::remote(
        std::sync::Arc::new(backend(endpoint, url)),
        url,
        &dir.join("host-check"),
    )
    .unwrap();
    for i in 1..=12 {
        let key = format!("k{i:02}");
        let latest = warehouse.partition("out", &key).latest().unwrap();
        assert!(latest.is_some(), "{key} not published");
    }
}

// What a failed attempt leaves as evidence reaches the bucket:
// its stderr (a command that failed) and its audit report (a gate that
// failed), so any host can read them; nothing is published.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn failed_attempts_leave_their_evidence_in_the_bucket() {
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 { endpoint, url, .. } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("m.toml"),
        r#"
[pipeline]
name = "evidence"
code_version = "1"
warehouse = "unused"

[partitions.k]
kind = "static"
keys = ["a"]

[tasks.crash]
command = ["sh", "-c", "echo 'boom: the source is gone' >&2; exit 65"]
output = { dataset = "crashed", grain = ["id"] }

[tasks.dup]
command = ["sh", "-c", "printf 'id\n1\n1\n' > \"$WEIR_OUTPUT_DIR/d.csv\""]
output = { dataset = "dups", grain = ["id"] }
"#,
    )
    .unwrap();
    let out = weir_s3(dir, endpoint, &dir.join("host-a"), url, &["run", "m.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let store = backend(endpoint, url);
    let key =
        |dataset: &str, name: &str| format!("{dataset}/a/attempts/00000000000000000001/{name}");
    let stderr_log = store
        .get(&key("crashed", "stderr.log"))
        .unwrap()
        .expect("uploaded");
    assert!(String::from_utf8_lossy(&stderr_log).contains("boom: the source is gone"));
    let report = store
        .get(&key("dups", "candidate.json"))
        .unwrap()
        .expect("uploaded");
    let report: serde_json::Value = serde_json::from_slice(&report).unwrap();
    assert_eq!(report["passed"], false, "{report}");
    for dataset in ["crashed", "dups"] {
        assert!(store.list(&format!("{dataset}/a/log")).unwrap().is_empty());
    }
}

// `--warehouse` takes a directory (relative to the current one)
// or an s3:// URL, on any command; any other URL is a usage error, never a
// directory named `gs:`.
#[test]
fn the_warehouse_flag_takes_a_directory_or_an_s3_url() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("m.toml"),
        "[pipeline]\nname = \"flag\"\ncode_version = \"1\"\nwarehouse = \"wh\"\n\n\
         [tasks.t]\ncommand = [\"sh\", \"-c\", \"printf 'id\\\\n1\\\\n' > \\\"$WEIR_OUTPUT_DIR/t.csv\\\"\"]\n\
         output = { dataset = \"out\", grain = [\"id\"] }\npartitioned_by = []\n",
    )
    .unwrap();
    for bad in ["gs://bucket/wh", "s3://", ""] {
        let out = weir()
            .current_dir(dir)
            .args(["status", "m.toml", "--warehouse", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains("--warehouse:"), "{}", stderr(&out));
    }
    ok(&weir()
        .current_dir(dir)
        .args(["--warehouse", "elsewhere", "run", "m.toml"])
        .output()
        .unwrap());
    assert!(dir.join("elsewhere/out").is_dir());
    assert!(
        !dir.join("wh").exists(),
        "the manifest's warehouse was used"
    );
}
