//! What an instance costs in requests on S3, counted at a proxy in front of
//! moto's S3 server (ignored by name without one, failing under `CI=true`, as in
//! s3.rs). The pipeline is bench/s3.sh's: `up`, and `down` reading it, over a few
//! static partitions, one 2-slot global pool. Every request weir sends is
//! counted, the run's own (events, engine heartbeat, pool slots) included, and
//! divided by the instances.

use std::sync::{Arc, Mutex};

use crate::support::s3::{weir_in, FaultProxy, S3};
use crate::support::{ok, stdout};

/// Requests per published instance at most: 10, the target the S3 request
/// work set itself. 8.6-9.2 measured here on 6 partitions (load average
/// 1-2), after a commit stopped listing the log (it puts the generation
/// after the one its process saw), one listing of each dataset stood for
/// the look before each token and an idle pool slot waited for the
/// downstream on its way (BENCHMARKS.md, S3 requests: "8.2 per published
/// instance, 0.5 per current one"); 11.7-11.8 before those, 13.6-14.7 and
/// 15.0-15.2 with one of the branches `reqpool` and `reqbatch` each,
/// 16.8-17.6 before both; bench/s3.sh: 28 before the S3 request work. The
/// spread is the global pool's (under load more pool slots are given back
/// and taken again).
const PUBLISHED_BUDGET: f64 = 10.0;

/// Requests per already-current instance at most: 1, the target the S3
/// request work set itself. 0.8 measured (9 requests for 12 instances: a
/// listing of each dataset, whose publication markers' summaries prove
/// every instance current; one of each task's markers and of `up`'s
/// certification marks; the engine's heartbeat, its removal and the event
/// chunk; the warehouse's check at open). 3.2-3.7 before, 5.8 before the S3
/// request work.
const CURRENT_BUDGET: f64 = 1.0;

const PARTITIONS: usize = 6;

fn manifest() -> String {
    let keys: Vec<String> = (0..PARTITIONS).map(|i| format!("\"s{i:04}\"")).collect();
    format!(
        r#"[pipeline]
name = "budget"
code_version = "1"
warehouse = "unused"

[partitions.shard]
kind = "static"
keys = [{}]

[pools.work]
slots = 2

[tasks.up]
command = ["sh", "-c", "printf 'id,shard\n1,%s\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/up.csv\""]
output = {{ dataset = "up", format = "csv", grain = ["id"] }}
pool = "work"

[tasks.down]
command = ["sh", "-c", "cat \"$WEIR_INPUT_UP\"/*.csv > \"$WEIR_OUTPUT_DIR/down.csv\""]
inputs = ["up"]
output = {{ dataset = "down", format = "csv", grain = ["id"] }}
pool = "work"
"#,
        keys.join(", ")
    )
}

/// A proxy that forwards every request and keeps its request line
/// (lowercased: `put /bucket/key?query http/1.1`).
fn counting_proxy(endpoint: &str) -> (FaultProxy, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = Arc::clone(&seen);
    let proxy = FaultProxy::start(
        endpoint,
        Arc::new(move |head: &str, _body: &[u8]| {
            let line = head.lines().next().unwrap_or_default().to_owned();
            log.lock().unwrap().push(line);
            None
        }),
    );
    (proxy, seen)
}

/// Whether a request line is a listing of a whole dataset (from its first
/// partition asked about on).
fn dataset_listing(line: &str) -> bool {
    line.starts_with("get ")
        && line.contains("list-type=2")
        && ["up", "down"].iter().any(|d| {
            let prefix = format!("prefix=wh%2f{d}%2f");
            line.contains(&format!("{prefix} ")) || line.contains(&format!("{prefix}&"))
        })
}

/// The request lines `f` matches.
fn matching(lines: &[String], f: impl Fn(&str) -> bool) -> usize {
    lines.iter().filter(|l| f(l)).count()
}

// A run that publishes every instance, then the same run
// with every instance current, each within its budget of requests per
// instance; and the requests found redundant are gone: no commit
// log checkpoint is read for a short log, no upload is read back (each data
// file is read once, by `down`), and `up`'s record is read by no GET at all
// in the first run (its committer and its reader keep it).
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn requests_per_published_and_current_instance_stay_within_budget() {
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 { endpoint, url, .. } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("m.toml"), manifest()).unwrap();
    let (proxy, seen) = counting_proxy(endpoint);
    let instances = (2 * PARTITIONS) as f64;

    let first = weir_in(dir, &proxy.endpoint, url, &["run", "m.toml"])
        .output()
        .unwrap();
    ok(&first);
    assert!(
        stdout(&first).contains(&format!("{} published", 2 * PARTITIONS)),
        "{}",
        stdout(&first)
    );
    let published: Vec<String> = std::mem::take(&mut *seen.lock().unwrap());
    let per_published = published.len() as f64 / instances;
    let by_method = |lines: &[String]| {
        let mut m = std::collections::BTreeMap::<String, usize>::new();
        for l in lines {
            *m.entry(l.split(' ').next().unwrap_or_default().to_owned())
                .or_default() += 1;
        }
        m
    };
    eprintln!(
        "published: {per_published:.1} requests per instance {:?}",
        by_method(&published)
    );
    if std::env::var_os("WEIR_BUDGET_DUMP").is_some() {
        eprintln!("{}", published.join("\n"));
    }
    assert!(
        per_published <= PUBLISHED_BUDGET,
        "{per_published:.1} requests per published instance, budget {PUBLISHED_BUDGET}:\n{}",
        published.join("\n")
    );
    assert_eq!(
        matching(&published, |l| l.contains("log-checkpoint")),
        0,
        "a short log's checkpoint is never read"
    );
    // No listing of a partition's commit log: one listing of each dataset
    // stands for the look before each token (`up`'s six instances start
    // together; `down`'s, one by one as `up`'s end, take the listing its
    // first one took, at most 2 s old); a commit puts the generation after
    // the one its process saw (put-if-absent of dense generations is the
    // compare-and-swap); `down` pins `up` by the commit this process just
    // made. Before: 2 per partition with the dataset looks, 4 with the
    // commit's own listing, 5 and 7 before that.
    assert_eq!(
        matching(&published, |l| l.starts_with("get ")
            && l.contains("list-type=2")
            && l.contains("%2flog%2f")),
        0,
        "{}",
        published.join("\n")
    );
    // And a listing of one key of each dataset the look found nothing
    // in from its first partition on: a dataset with no key at all has no
    // layout yet (a Delta table's first writer puts its partitions under
    // `_weir/`), one with older partitions keeps theirs.
    assert_eq!(
        matching(&published, dataset_listing),
        4,
        "{}",
        published.join("\n")
    );
    assert_eq!(
        matching(&published, |l| l.starts_with("get ")
            && l.contains("/data/")),
        PARTITIONS,
        "each data file is read once, by `down`; no upload is read back:\n{}",
        published.join("\n")
    );
    assert_eq!(
        matching(&published, |l| l.starts_with("get ")
            && l.contains("/up/")
            && l.contains("/log/")),
        0,
        "`up`'s records are kept by the process that wrote them"
    );
    // A published attempt uploads no audit report and no first lease (its
    // token record carries it); its commands run shorter than a heartbeat,
    // so no lease is renewed either.
    assert_eq!(
        matching(&published, |l| l.contains("candidate.json")
            || l.contains("lease.json")),
        0,
        "{}",
        published.join("\n")
    );
    // A kept pool slot goes on without a listing while the engine beats:
    // slots are listed when taken from the warehouse (before and after the
    // take's put; a release is a put alone), not at every launch on a
    // kept slot (one listing per launch, 12 here, before): about one
    // listing per slot record written (takes and releases pair up), and
    // a few more when a take looks at a slot held already.
    let slot_listings = matching(&published, |l| {
        l.contains("%2fslots%2f") && l.contains("list-type=2")
    });
    let slot_records = matching(&published, |l| {
        l.starts_with("put ") && l.contains("/slots/")
    });
    assert!(
        slot_listings < slot_records + PARTITIONS,
        "{slot_listings} listings of pool slots, {slot_records} slot records written:\n{}",
        published.join("\n")
    );

    let again = weir_in(dir, &proxy.endpoint, url, &["run", "m.toml"])
        .output()
        .unwrap();
    ok(&again);
    assert!(
        stdout(&again).contains(&format!("{} already published", 2 * PARTITIONS)),
        "{}",
        stdout(&again)
    );
    let current: Vec<String> = std::mem::take(&mut *seen.lock().unwrap());
    let per_current = current.len() as f64 / instances;
    eprintln!(
        "current: {per_current:.1} requests per instance {:?}",
        by_method(&current)
    );
    if std::env::var_os("WEIR_BUDGET_DUMP").is_some() {
        eprintln!("{}", current.join("\n"));
    }
    assert!(
        per_current <= CURRENT_BUDGET,
        "{per_current:.1} requests per current instance, budget {CURRENT_BUDGET}:\n{}",
        current.join("\n")
    );
    // `up`'s six instances start in the run's first pass: one listing of
    // their markers, no read of any. `down`'s start in the passes that
    // follow, as `up`'s are found current: no command ran since the first
    // of them listed `down`'s markers and `up`'s certification marks, so
    // that one listing stands for every later pass (one per pass before).
    for dir in [
        "_instances%2fup%2f",
        "_instances%2fdown%2f",
        "_certs%2fup%2f",
    ] {
        assert_eq!(
            matching(&current, |l| l.contains(&format!("prefix=wh%2f{dir}"))),
            1,
            "{dir}:\n{}",
            current.join("\n")
        );
    }
    assert_eq!(
        matching(&current, |l| l.contains("/_instances/up/")),
        0,
        "{}",
        current.join("\n")
    );
    // No log is listed or read: one listing of each dataset shows every
    // partition's newest generation and its publication marker, whose
    // summary proves the instance current (`up`'s, and `down`'s pinning
    // `up` by `up`'s) with no record read (5 listings per partition and a
    // GET of each record, before).
    assert_eq!(
        matching(&current, |l| l.contains("%2flog%2f") || l.contains("/log/")),
        0,
        "{}",
        current.join("\n")
    );
    assert_eq!(
        matching(&current, dataset_listing),
        2,
        "{}",
        current.join("\n")
    );
    assert_eq!(matching(&current, |l| l.contains("log-checkpoint")), 0);
}

// A publication marker's summary tells an instance
// current only on an exact match of its reads, code version and code
// fingerprint; anything else is decided from the record, as before. A
// changed `up` command republishes `up`, and `down`, whose reads are the
// same rows (early cutoff), is told current from its record; a new code
// version republishes everything; then every instance is current again
// with no record read.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn a_summary_tells_only_an_exact_match_current() {
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 { endpoint, url, .. } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (proxy, seen) = counting_proxy(endpoint);
    let run = |manifest: &str, says: &str| {
        std::fs::write(dir.join("m.toml"), manifest).unwrap();
        let out = weir_in(dir, &proxy.endpoint, url, &["run", "m.toml"])
            .output()
            .unwrap();
        ok(&out);
        assert!(stdout(&out).contains(says), "{says}:\n{}", stdout(&out));
        std::mem::take(&mut *seen.lock().unwrap())
    };
    let record_reads = |lines: &[String], dataset: &str| {
        matching(lines, |l| {
            l.starts_with("get ") && l.contains(&format!("/{dataset}/")) && l.contains("/log/")
        })
    };
    let n = PARTITIONS;
    run(&manifest(), &format!("{} published", 2 * n));
    let changed_up = manifest().replace(
        "> \\\"$WEIR_OUTPUT_DIR/up.csv\\\"\"]",
        "> \\\"$WEIR_OUTPUT_DIR/up.csv\\\" # v2\"]",
    );
    assert_ne!(changed_up, manifest());
    let lines = run(
        &changed_up,
        &format!("{n} published, {n} already published"),
    );
    assert_eq!(record_reads(&lines, "up"), n, "{}", lines.join("\n"));
    assert_eq!(record_reads(&lines, "down"), n, "{}", lines.join("\n"));
    let new_code = changed_up.replace("code_version = \"1\"", "code_version = \"2\"");
    run(&new_code, &format!("{} published", 2 * n));
    let lines = run(&new_code, &format!("{} already published", 2 * n));
    assert_eq!(
        record_reads(&lines, "up") + record_reads(&lines, "down"),
        0,
        "{}",
        lines.join("\n")
    );
}
