//! `weir verify` reruns a task exactly as `weir run` launched it (both go
//! through one task-launch module): the same argv, working directory and
//! environment, the manifest's declared `env` included, but for the
//! variables that name the launch or point into its own staging.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::{stderr, stdout, Sandbox};

/// What differs between a run's attempt and verify's rerun, and why:
/// - `WEIR_RUN_ID`: the run's id, or the rerun's own `verify-…` id (its
///   scratch directory is named after it);
/// - `WEIR_ATTEMPT`: 1, 2 … for an attempt; 0 for the rerun, which is none;
/// - `WEIR_TOKEN`: the attempt's fencing token; 0 for the rerun, which
///   allocates none (it publishes nothing);
/// - `WEIR_OUTPUT_DIR`: each launch writes into its own staging
///   (`attempts/<token>/data`, `_scratch/verify-…/data`);
/// - `WEIR_INPUT_RAW`: each launch reads its own private copy of the pinned
///   input, inside that staging;
/// - `WEIR_PROCESS_TAG`: each launch's tag, how weir finds its processes.
const DIFFERS: [&str; 6] = [
    "WEIR_RUN_ID",
    "WEIR_ATTEMPT",
    "WEIR_TOKEN",
    "WEIR_OUTPUT_DIR",
    "WEIR_INPUT_RAW",
    "WEIR_PROCESS_TAG",
];

const MANIFEST: &str = r#"
[pipeline]
name = "same"
code_version = "1"
warehouse = "wh"

[partitions.region]
kind = "static"
keys = ["eu", "us"]

[partitions.shop-id]
kind = "static"
keys = ["s1"]

[datasets.raw]
path = "raw.csv"
watermark = "committed_seq"

[tasks.t]
command = ["sh", "t.sh", "--flag", "two words"]
inputs = ["raw"]
partitioned_by = ["region", "shop-id"]
output = { dataset = "out", format = "csv", grain = ["id"] }
env = { pass = ["PATH", "HOME"], set = { LEVEL = "info", API_KEY = "env:LAUNCH_TEST_KEY", DUMP = "DUMP_PATH" } }
"#;

/// Leaves its argv, working directory and whole environment in
/// `$DUMP.<attempt>` (outside the warehouse: the rerun's scratch is its own).
const TASK: &str = r#"{
  printf 'argv='; printf '%s|' "$0" "$@"; echo
  printf 'cwd=%s\n' "$(pwd -P)"
  env | sort
} > "$DUMP.$WEIR_ATTEMPT"
printf 'id,r,s\n1,%s,%s\n' "$WEIR_PARTITION_REGION" "$WEIR_PARTITION_SHOP_ID" > "$WEIR_OUTPUT_DIR/out.csv"
"#;

/// NAME → value of a dump (argv and cwd included as `argv`, `cwd`).
fn dump(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn without_differences(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter()
        .filter(|(k, _)| !DIFFERS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn verify_reruns_a_task_with_the_argv_cwd_and_environment_run_gave_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dumps = tmp.path().join("env");
    let sb = Sandbox::new(&MANIFEST.replace("DUMP_PATH", &dumps.display().to_string()));
    std::fs::write(sb.path().join("raw.csv"), "id\n1\n").unwrap();
    std::fs::write(sb.path().join("committed_seq"), "206\n").unwrap();
    sb.script("t.sh", TASK);
    // The engine's own variables: only the declared ones reach the task.
    let engine = |args: &[&str]| {
        sb.weir(args)
            .env("LAUNCH_TEST_KEY", "k-1")
            .env("HOME", "/home/launch-test")
            .env("LAUNCH_TEST_NOT_PASSED", "x")
            .output()
            .expect("weir runs")
    };
    let run = engine(&["run", "m.toml", "--run-id", "RUN-L", "--partition", "eu|s1"]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let record = sb.store("out", "eu|s1").latest().unwrap().unwrap();
    let verify = engine(&["verify", "m.toml", "t", "--partition", "eu|s1"]);
    let scratch = stdout(&verify)
        .lines()
        .find_map(|l| l.strip_prefix("scratch: "))
        .unwrap_or_else(|| panic!("no scratch line: {}", stdout(&verify)))
        .to_string();
    assert_eq!(
        (verify.status.code(), stdout(&verify), stderr(&verify)),
        (
            Some(0),
            format!(
                "t eu|s1 generation 1: published {d} (1 rows), rerun {d} (1 rows)\n\
                 scratch: {scratch}\n\
                 deterministic: the rerun from the pinned inputs has the published digest\n",
                d = record.digest
            ),
            String::new()
        )
    );

    let (run, rerun) = (
        dump(&dumps.with_extension("1")),
        dump(&dumps.with_extension("0")),
    );
    // Everything but the launch's identity and staging is the same, the
    // manifest's `env`, every WEIR_PARTITION_<SCHEME> and the input's pinned
    // WEIR_WATERMARK_<NAME> included.
    assert_eq!(without_differences(&rerun), without_differences(&run));
    assert_eq!(
        rerun.keys().collect::<Vec<_>>(),
        run.keys().collect::<Vec<_>>()
    );
    let cwd = std::fs::canonicalize(sb.path()).unwrap();
    for (name, value) in [
        ("argv", "t.sh|--flag|two words|"),
        ("cwd", cwd.to_str().unwrap()),
        ("WEIR_PARTITION", "eu|s1"),
        ("WEIR_PARTITION_REGION", "eu"),
        ("WEIR_PARTITION_SHOP_ID", "s1"),
        ("WEIR_PIPELINE", "same"),
        ("WEIR_TASK", "t"),
        ("WEIR_CODE_VERSION", "1"),
        ("WEIR_WATERMARK_RAW", "206"),
        ("LEVEL", "info"),
        ("API_KEY", "k-1"),
        ("HOME", "/home/launch-test"),
    ] {
        assert_eq!(run.get(name).map(String::as_str), Some(value), "{name}");
    }
    assert!(!run.contains_key("LAUNCH_TEST_NOT_PASSED") && !run.contains_key("LAUNCH_TEST_KEY"));

    // The variables that differ do so only as they must.
    let token = record.token.get().to_string();
    let attempt_dir = sb.store("out", "eu|s1").attempt_dir(record.token);
    let scratch = Path::new(&scratch);
    let differing = |name: &str| (run[name].as_str(), rerun[name].as_str());
    assert_eq!(differing("WEIR_RUN_ID").0, "RUN-L");
    assert_eq!(
        Some(differing("WEIR_RUN_ID").1),
        scratch.file_name().and_then(|n| n.to_str())
    );
    assert!(differing("WEIR_RUN_ID").1.starts_with("verify-"));
    assert_eq!(differing("WEIR_ATTEMPT"), ("1", "0"));
    assert_eq!(differing("WEIR_TOKEN"), (token.as_str(), "0"));
    assert_eq!(
        differing("WEIR_OUTPUT_DIR"),
        (
            attempt_dir.join("data").to_str().unwrap(),
            scratch.join("data").to_str().unwrap()
        )
    );
    assert_eq!(
        differing("WEIR_INPUT_RAW"),
        (
            attempt_dir.join("input-raw/raw.csv").to_str().unwrap(),
            scratch.join("input-raw/raw.csv").to_str().unwrap()
        )
    );
    let (run_tag, rerun_tag) = differing("WEIR_PROCESS_TAG");
    assert!(!run_tag.is_empty() && !rerun_tag.is_empty() && run_tag != rerun_tag);
}
