//! What a task can reach (`env`, the store's credentials), secret values
//! redacted, one environment for run, verify and executors, lineage URL
//! credentials, control characters in explain, invalid UTF-8 in `show
//! --json`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use weir::events::State;

use crate::support::http::{self, Reply};
use crate::support::{ok, stderr, stdout, Sandbox};

const SECRET_ENV: &str = "tok-7f3a9c-engine-secret";
const SECRET_FILE: &str = "pw-41d2e8-file-secret";

/// Variables a shell adds on its own.
const SHELL_VARS: [&str; 4] = ["PWD", "OLDPWD", "SHLVL", "_"];

/// NAME → value of an `env` dump.
fn dump(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn names(env: &BTreeMap<String, String>) -> BTreeSet<&str> {
    env.keys()
        .map(String::as_str)
        .filter(|k| !SHELL_VARS.contains(k))
        .collect()
}

/// Every file under `dir`, with its bytes.
fn files(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                out.push((p, bytes));
            }
        }
    }
    out
}

#[track_caller]
fn assert_no_secret(what: &str, text: &str) {
    for secret in [SECRET_ENV, SECRET_FILE] {
        assert!(!text.contains(secret), "{what} holds a secret:\n{text}");
    }
}

fn env_manifest(env: &str, dump: &Path) -> String {
    format!(
        r#"
[pipeline]
name = "least"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["good", "bad"]

[tasks.t]
command = ["sh", "t.sh"]
output = {{ dataset = "out", format = "csv", grain = ["id"] }}
exit_codes = {{ 1 = "deterministic" }}
{env}
"#,
        env = env.replace("DUMP_PATH", &dump.display().to_string())
    )
}

const TASK: &str = r#"env > "$DUMP.$WEIR_PARTITION"
echo "token=$TOKEN db=$DB" >&2
echo "stdout token=$TOKEN" 
if [ "$WEIR_PARTITION" = bad ]; then echo "failing with $TOKEN and $DB" >&2; exit 1; fi
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv"
"#;

// With `env`, a task sees exactly its `pass` names, its `set` values
// (secrets read by reference) and weir's `WEIR_*`; the secret values are
// redacted from its logs, the FAILED event, explain and status.
#[test]
fn env_gives_exactly_what_it_declares_and_secrets_are_redacted() {
    let tmp = tempfile::tempdir().unwrap();
    let dump_path = tmp.path().join("env");
    let sb = Sandbox::new(&env_manifest(
        r#"env = { pass = ["PATH", "NOT_IN_ENGINE"], set = { LEVEL = "info", TOKEN = "env:WEIR_TEST_API_TOKEN", DB = "file:db.secret", DUMP = "DUMP_PATH" } }

[lineage]
file = "lineage.jsonl""#,
        &dump_path,
    ));
    sb.script("t.sh", TASK);
    std::fs::write(sb.path().join("db.secret"), format!("{SECRET_FILE}\n")).unwrap();
    let out = sb
        .weir(&["run", "m.toml", "--run-id", "RUN-E"])
        .env("WEIR_TEST_API_TOKEN", SECRET_ENV)
        .env("ENGINE_ONLY", "must-not-leak")
        .env("HOME", "/home/engine")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_no_secret("run's stdout", &stdout(&out));
    assert_no_secret("run's stderr", &stderr(&out));

    let seen = dump(&tmp.path().join("env.good"));
    let expected: BTreeSet<&str> = [
        "PATH",
        "LEVEL",
        "TOKEN",
        "DB",
        "DUMP",
        "WEIR_RUN_ID",
        "WEIR_PIPELINE",
        "WEIR_TASK",
        "WEIR_PARTITION",
        "WEIR_PARTITION_K",
        "WEIR_ATTEMPT",
        "WEIR_TOKEN",
        "WEIR_OUTPUT_DIR",
        "WEIR_CODE_VERSION",
        "WEIR_PROCESS_TAG",
    ]
    .into();
    assert_eq!(names(&seen), expected, "{seen:?}");
    assert_eq!(seen["LEVEL"], "info");
    assert_eq!(seen["TOKEN"], SECRET_ENV, "the task gets the secret itself");
    assert_eq!(seen["DB"], SECRET_FILE, "without the file's final newline");
    assert_eq!(seen["PATH"], std::env::var("PATH").unwrap());

    // Published where it succeeded; the failure's evidence is redacted.
    assert_eq!(
        sb.store("out", "good")
            .latest()
            .unwrap()
            .unwrap()
            .generation
            .get(),
        1
    );
    let events = sb.events("RUN-E");
    let failed = events
        .iter()
        .find(|e| e.state == State::Failed && e.partition.as_deref() == Some("bad"))
        .expect("a FAILED event for bad");
    let tail = failed.data["stderr_tail"].as_str().unwrap();
    assert_eq!(
        tail,
        "token=[redacted] db=[redacted]\nfailing with [redacted] and [redacted]"
    );
    for (path, bytes) in files(&sb.path().join("wh")) {
        assert_no_secret(
            &path.display().to_string(),
            &String::from_utf8_lossy(&bytes),
        );
    }
    let explain = ok(&sb.weir_out(&["explain", "m.toml", "t", "--partition", "bad"]));
    assert!(
        explain.contains("      | failing with [redacted] and [redacted]"),
        "{explain}"
    );
    assert_no_secret("explain", &explain);
    let json = ok(&sb.weir_out(&["explain", "m.toml", "t", "--partition", "bad", "--json"]));
    assert_no_secret("explain --json", &json);
    let status = sb.weir_out(&["status", "m.toml"]);
    assert_no_secret("status", &stdout(&status));
    let events = ok(&sb.weir_out(&["events", "m.toml", "--json"]));
    assert_no_secret("events", &events);
    let lineage = std::fs::read_to_string(sb.path().join("lineage.jsonl")).unwrap();
    assert!(
        lineage.contains(r#""stackTrace":"token=[redacted] db=[redacted]\nfailing with [redacted] and [redacted]""#),
        "{lineage}"
    );
    assert_no_secret("lineage events", &lineage);
}

// A reference that cannot be read fails the attempt before its command runs
// (held: an operator must provide it), and `verify` refuses the same way.
#[test]
fn an_unreadable_secret_fails_before_the_task_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let dump_path = tmp.path().join("env");
    for (set, why) in [
        (
            r#"TOKEN = "env:WEIR_TEST_UNSET_TOKEN""#,
            "`env.set.TOKEN` of task `t` reads `WEIR_TEST_UNSET_TOKEN` from weir's environment, which is not set".to_string(),
        ),
        (
            r#"TOKEN = "file:missing.secret""#,
            "`env.set.TOKEN` of task `t` reads `{dir}/missing.secret`, which cannot be read: No such file or directory (os error 2)".to_string(),
        ),
    ] {
        let sb = Sandbox::new(&env_manifest(
            &format!(r#"env = {{ pass = ["PATH"], set = {{ {set}, DUMP = "DUMP_PATH" }} }}"#),
            &dump_path,
        ));
        sb.script("t.sh", TASK);
        let why = why.replace("{dir}", &sb.path().display().to_string());
        let out = sb.run("RUN-U", &["--partition", "good"]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(!tmp.path().join("env.good").exists(), "the command ran");
        let events = sb.events("RUN-U");
        let failed = events.iter().find(|e| e.state == State::Failed).unwrap();
        assert_eq!(failed.detail, format!("cannot build the environment: {why}"));
        assert!(
            events.iter().any(|e| e.state == State::Held),
            "{:?}",
            events.iter().map(|e| e.state).collect::<Vec<_>>()
        );
    }
}

// A bad `env` is a
// manifest error at its key or value, every one of them reported.
#[test]
fn bad_env_forms_are_located_manifest_errors() {
    let sb = Sandbox::new(MANIFEST_BAD_ENV);
    let out = sb.weir_out(&["validate", "m.toml"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert_eq!(stderr(&out), STDERR_BAD_ENV);
}

const MANIFEST_BAD_ENV: &str = r#"[pipeline]
name = "least"
code_version = "1"
warehouse = "wh"

[tasks.t]
command = ["sh", "t.sh"]
output = { dataset = "out", format = "csv", grain = ["id"] }
partitioned_by = []
env = { pass = ["HOME", "BAD-NAME"], set = { WEIR_TOKEN = "1", T = "env:", F = "file:", OK = "env:A B" } }
"#;

const STDERR_BAD_ENV: &str = r#"weir::manifest::env_name

  × `BAD-NAME` in `env` of task `t` is not an environment variable name
    ╭─[m.toml:10:25]
  9 │ partitioned_by = []
 10 │ env = { pass = ["HOME", "BAD-NAME"], set = { WEIR_TOKEN = "1", T = "env:", F = "file:", OK = "env:A B" } }
    ·                         ─────┬────
    ·                              ╰── not passed
    ╰────
  help: use letters, digits and `_`, not starting with a digit, e.g.
        `API_TOKEN`

weir::manifest::env_name

  × task `t` declares `WEIR_TOKEN` in `env`, but `WEIR_*` variables are weir's
    ╭─[m.toml:10:46]
  9 │ partitioned_by = []
 10 │ env = { pass = ["HOME", "BAD-NAME"], set = { WEIR_TOKEN = "1", T = "env:", F = "file:", OK = "env:A B" } }
    ·                                              ─────┬────
    ·                                                   ╰── not set
    ╰────
  help: weir sets its own `WEIR_*` variables for every task; choose another
        name

weir::manifest::env_reference

  × `env.set.T` of task `t`: `env:` names no variable
    ╭─[m.toml:10:68]
  9 │ partitioned_by = []
 10 │ env = { pass = ["HOME", "BAD-NAME"], set = { WEIR_TOKEN = "1", T = "env:", F = "file:", OK = "env:A B" } }
    ·                                                                    ───┬──
    ·                                                                       ╰── bad reference
    ╰────
  help: write `"env:NAME"` for the engine's variable NAME, `"file:/run/
        secrets/x"` for a file's content, or a literal value

weir::manifest::env_reference

  × `env.set.F` of task `t`: `file:` names no file
    ╭─[m.toml:10:80]
  9 │ partitioned_by = []
 10 │ env = { pass = ["HOME", "BAD-NAME"], set = { WEIR_TOKEN = "1", T = "env:", F = "file:", OK = "env:A B" } }
    ·                                                                                ───┬───
    ·                                                                                   ╰── bad reference
    ╰────
  help: write `"env:NAME"` for the engine's variable NAME, `"file:/run/
        secrets/x"` for a file's content, or a literal value

weir::manifest::env_reference

  × `env.set.OK` of task `t`: `A B` is not a variable name
    ╭─[m.toml:10:94]
  9 │ partitioned_by = []
 10 │ env = { pass = ["HOME", "BAD-NAME"], set = { WEIR_TOKEN = "1", T = "env:", F = "file:", OK = "env:A B" } }
    ·                                                                                              ────┬────
    ·                                                                                                  ╰── bad reference
    ╰────
  help: write `"env:NAME"` for the engine's variable NAME, `"file:/run/
        secrets/x"` for a file's content, or a literal value

error: `m.toml` is not a valid manifest: 5 errors
"#;

// `verify` reruns a task with the environment `run` gave it (it lacked
// `WEIR_PARTITION_<SCHEME>`), apart from what identifies the attempt.
#[test]
fn verify_environment_equals_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "same"
code_version = "1"
warehouse = "wh"

[partitions.region]
kind = "static"
keys = ["eu", "us"]

[partitions.shop]
kind = "static"
keys = ["s1"]

[datasets.raw]
path = "raw.csv"

[tasks.t]
command = ["sh", "t.sh"]
inputs = ["raw"]
partitioned_by = ["region", "shop"]
output = { dataset = "out", format = "csv", grain = ["id"] }
"#,
    );
    std::fs::write(sb.path().join("raw.csv"), "id\n1\n").unwrap();
    // No `env`: the engine's environment, as both commands get it here.
    sb.script(
        "t.sh",
        &format!(
            "env > '{}'.$WEIR_ATTEMPT\nprintf 'id,r\\n1,%s\\n' \"$WEIR_PARTITION_REGION\" > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
            tmp.path().join("env").display()
        ),
    );
    ok(&sb.run("RUN-V", &["--partition", "eu|s1"]));
    let verify = sb.weir_out(&["verify", "m.toml", "t", "--partition", "eu|s1"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
    let differs = [
        "WEIR_RUN_ID",
        "WEIR_ATTEMPT",
        "WEIR_TOKEN",
        "WEIR_OUTPUT_DIR",
        "WEIR_INPUT_RAW",
        "WEIR_PROCESS_TAG",
    ];
    let comparable = |path: &str| -> BTreeMap<String, String> {
        dump(&tmp.path().join(path))
            .into_iter()
            .filter(|(k, _)| !differs.contains(&k.as_str()) && !SHELL_VARS.contains(&k.as_str()))
            .collect()
    };
    let run = comparable("env.1");
    let rerun = comparable("env.0");
    assert_eq!(
        run.get("WEIR_PARTITION_REGION").map(String::as_str),
        Some("eu")
    );
    assert_eq!(
        run.get("WEIR_PARTITION_SHOP").map(String::as_str),
        Some("s1")
    );
    assert_eq!(rerun, run);
    let all = dump(&tmp.path().join("env.0"));
    for name in differs.iter().filter(|n| **n != "WEIR_PROCESS_TAG") {
        assert!(all.contains_key(*name), "verify lacks {name}: {all:?}");
    }
}

// A task's stderr cannot clear the operator's terminal or draw a fake
// success line through `weir explain`, with NO_COLOR and piped.
#[test]
fn explain_escapes_control_characters() {
    let sb = Sandbox::new(&env_manifest("", Path::new("/unused")));
    sb.script(
        "t.sh",
        "printf 'real error\\n\\033[2J\\033[H\\033[32m\\342\\234\\224 all published\\033[0m\\rx\\n' >&2\nexit 1\n",
    );
    let out = sb.run("RUN-X", &["--partition", "bad"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let explain = sb
        .weir(&["explain", "m.toml", "t", "--partition", "bad"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = ok(&explain);
    assert!(
        text.contains(
            "    stderr (tail):\n      | real error\n      | \\x1b[2J\\x1b[H\\x1b[32m\u{2714} all published\\x1b[0m\\x0dx\n"
        ),
        "{text}"
    );
    assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text:?}");
    let events = ok(&sb.weir_out(&["events", "m.toml"]));
    assert!(!events.contains('\u{1b}'), "{events:?}");
}

// `show --json` marks a value that is not UTF-8 instead of replacing it
// with U+FFFD.
#[test]
fn show_json_marks_invalid_utf8() {
    let sb = Sandbox::new(&env_manifest("", Path::new("/unused")));
    sb.script(
        "t.sh",
        "printf 'id,name\\n1,caf\\351\\n2,ok\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    ok(&sb.run("RUN-S", &["--partition", "good"]));
    let out = ok(&sb.weir_out(&["show", "m.toml", "out", "--partition", "good", "--json"]));
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc["rows"],
        serde_json::json!([["1", { "invalid_utf8": "636166e9" }], ["2", "ok"]]),
        "{out}"
    );
    assert!(!out.contains('\u{fffd}'), "{out}");
}

// Credentials in a
// `[lineage] url` are sent as HTTP Basic authentication and never written to
// stderr, the event log or `status`.
#[test]
fn lineage_url_credentials_are_used_and_redacted() {
    // A collector that answers 503 to every request.
    let collector = http::Receiver::start(|_| Reply::Status(503));
    let port = collector.addr.rsplit(':').next().unwrap().to_owned();
    let sb = Sandbox::new(&format!(
        "{}\n[lineage]\nurl = \"http://alice:s3cr%40t@127.0.0.1:{port}/api/v1/lineage?api_key=k3yvalue&v=2\"\n",
        env_manifest("", Path::new("/unused"))
    ));
    sb.script(
        "t.sh",
        "printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    let out = sb.run("RUN-L", &["--partition", "good"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let redacted = format!("http://***@127.0.0.1:{port}/api/v1/lineage?api_key=***&v=***");
    let err = stderr(&out);
    assert!(
        err.contains(&format!("not delivered to {redacted} (")),
        "{err}"
    );
    let status = sb.weir_out(&["status", "m.toml"]);
    assert!(stdout(&status).contains(&redacted), "{}", stdout(&status));
    let status_json = sb.weir_out(&["status", "m.toml", "--json"]);
    let events = ok(&sb.weir_out(&["events", "m.toml", "--json"]));
    assert!(events.contains("LINEAGE_UNDELIVERED"), "{events}");
    let mut stored = String::new();
    for (_, bytes) in files(&sb.path().join("wh")) {
        stored.push_str(&String::from_utf8_lossy(&bytes));
    }
    for (what, text) in [
        ("stderr", err),
        ("status", stdout(&status)),
        ("status --json", stdout(&status_json)),
        ("events", events),
        ("the warehouse", stored),
    ] {
        for secret in ["s3cr", "alice", "k3yvalue"] {
            assert!(!text.contains(secret), "{what} holds `{secret}`:\n{text}");
        }
    }
    // The collector got the credentials, as Basic authentication and the
    // query as written; its Host header has no userinfo.
    let heads: Vec<String> = collector
        .requests()
        .iter()
        .map(|r| format!("{}\r\n{}", r.line, r.head))
        .collect();
    assert!(!heads.is_empty());
    for head in heads.iter() {
        assert!(
            head.starts_with("POST /api/v1/lineage?api_key=k3yvalue&v=2 HTTP/1.1\r\n"),
            "{head}"
        );
        // Header names are case-insensitive (reqwest sends them lowercase).
        let header = |name: &str| {
            head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
            })
        };
        // base64("alice:s3cr@t")
        assert_eq!(
            header("Authorization").as_deref(),
            Some("Basic YWxpY2U6czNjckB0"),
            "{head}"
        );
        assert_eq!(header("Host"), Some(format!("127.0.0.1:{port}")), "{head}");
    }
}

// On an S3 warehouse a task without `env` gets the engine's environment minus
// the store's credentials (region and endpoint stay); with `env` only what it
// declares.
#[cfg(feature = "s3")]
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn a_task_of_an_s3_warehouse_never_sees_the_store_credentials() {
    let Some(crate::support::s3::S3 {
        endpoint, bucket, ..
    }) = crate::support::s3::S3::sandbox("")
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dump_path = tmp.path().join("env");
    for (env, task) in [
        ("", "plain"),
        (
            r#"env = { pass = ["PATH", "AWS_REGION"], set = { DUMP = "DUMP_PATH" } }"#,
            "declared",
        ),
    ] {
        let manifest =
            env_manifest(env, &dump_path).replace("[tasks.t]", &format!("[tasks.{task}]"));
        let sb = Sandbox::new(&manifest);
        sb.script(
            "t.sh",
            &format!(
                "env > \"{}.{task}\"\nprintf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
                dump_path.display()
            ),
        );
        let url = format!("s3://{bucket}/{task}");
        let staging = tmp.path().join(format!("staging-{task}"));
        let args = ["run", "m.toml", "--partition", "good"];
        let out = crate::support::s3::weir_s3(sb.path(), &endpoint, &staging, &url, &args)
            .env("AWS_SECRET_ACCESS_KEY", "weir-test-secret-key")
            .env("AWS_SESSION_TOKEN", "weir-test-session")
            .env("ENGINE_ONLY", "engine")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(stdout(&out).contains("1 published"), "{}", stdout(&out));
        let seen = dump(&tmp.path().join(format!("env.{task}")));
        for credential in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
        ] {
            assert!(
                !seen.contains_key(credential),
                "{task} sees {credential}: {seen:?}"
            );
        }
        assert_eq!(
            seen.get("AWS_REGION").map(String::as_str),
            Some("us-east-1")
        );
        match task {
            "plain" => {
                assert_eq!(seen.get("ENGINE_ONLY").map(String::as_str), Some("engine"));
                assert_eq!(
                    seen.get("AWS_ENDPOINT").map(String::as_str),
                    Some(endpoint.as_str())
                );
            }
            _ => {
                assert!(!seen.contains_key("ENGINE_ONLY"), "{seen:?}");
                assert!(!seen.contains_key("AWS_ENDPOINT"), "{seen:?}");
            }
        }
    }
}

/// A stand-in for Slurm's commands in `bin`: `sbatch` runs the job script at
/// once, with its own environment (what `--export=ALL` hands a job), its pid
/// the job id, and `scontrol` reports the job COMPLETED or FAILED with the
/// script's status.
fn fake_slurm(bin: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(bin).unwrap();
    let state = bin.join("job.status");
    let sbatch = format!(
        r#"#!/bin/sh
for a in "$@"; do
  case "$a" in
    --output=*) out="${{a#--output=}}" ;;
    --error=*) err="${{a#--error=}}" ;;
  esac
  script="$a"
done
/bin/sh "$script" > "$out" 2> "$err"
echo $? > '{state}'.$$
echo $$
"#,
        state = state.display()
    );
    let scontrol = format!(
        r#"#!/bin/sh
for id in "$@"; do :; done
code=$(cat '{state}'.$id)
if [ "$code" = 0 ]; then s=COMPLETED; else s=FAILED; fi
echo "JobId=$id JobName=x JobState=$s Reason=None ExitCode=$code:0 RunTime=00:00:01 BatchHost=fake"
"#,
        state = state.display()
    );
    for (name, text) in [
        ("sbatch", sbatch),
        ("scontrol", scontrol),
        ("scancel", "#!/bin/sh\n".into()),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

// A Slurm job gets the environment a local task gets (sbatch ran with the
// engine's whole environment), and its `job.env` in the attempt directory
// holds no secret.
#[test]
fn a_slurm_job_gets_the_tasks_environment_and_no_secret_on_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    fake_slurm(&bin);
    let dump_path = tmp.path().join("env");
    let manifest = env_manifest(
        r#"executor = "hpc"
env = { pass = ["PATH"], set = { TOKEN = "env:WEIR_TEST_API_TOKEN", DB = "file:db.secret", DUMP = "DUMP_PATH" } }

[executors.hpc]
kind = "slurm""#,
        &dump_path,
    );
    let sb = Sandbox::new(&manifest);
    sb.script("t.sh", TASK);
    std::fs::write(sb.path().join("db.secret"), SECRET_FILE).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = sb
        .weir(&["run", "m.toml", "--run-id", "RUN-SL"])
        .env("PATH", &path)
        .env("WEIR_TEST_API_TOKEN", SECRET_ENV)
        .env("ENGINE_ONLY", "must-not-leak")
        .env("AWS_SECRET_ACCESS_KEY", "engine-key")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let seen = dump(&tmp.path().join("env.good"));
    let extra: BTreeSet<&str> = names(&seen)
        .into_iter()
        .filter(|k| !k.starts_with("WEIR_"))
        .collect();
    assert_eq!(extra, ["DB", "DUMP", "PATH", "TOKEN"].into(), "{seen:?}");
    assert_eq!(seen["TOKEN"], SECRET_ENV);
    assert_eq!(seen["DB"], SECRET_FILE);
    assert_eq!(seen["PATH"], path);
    assert_eq!(seen["WEIR_PARTITION_K"], "good");
    assert_eq!(
        sb.store("out", "good")
            .latest()
            .unwrap()
            .unwrap()
            .generation
            .get(),
        1
    );
    let events = sb.events("RUN-SL");
    let failed = events
        .iter()
        .find(|e| e.state == State::Failed)
        .unwrap_or_else(|| panic!("no FAILED: {events:#?}"));
    assert_eq!(
        failed.data["stderr_tail"].as_str().unwrap(),
        "token=[redacted] db=[redacted]\nfailing with [redacted] and [redacted]"
    );
    let stored = files(&sb.path().join("wh"));
    assert!(stored.iter().any(|(p, _)| p.ends_with("job.env")));
    for (path, bytes) in stored {
        assert_no_secret(
            &path.display().to_string(),
            &String::from_utf8_lossy(&bytes),
        );
    }
}

// `verify` builds the rerun's environment as `run` does, so a secret that can
// no longer be read refuses the verification before the task runs.
#[test]
fn verify_refuses_an_unreadable_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let dump_path = tmp.path().join("env");
    let sb = Sandbox::new(&env_manifest(
        r#"env = { set = { DB = "file:db.secret", DUMP = "DUMP_PATH" } }"#,
        &dump_path,
    ));
    sb.script(
        "t.sh",
        "touch \"$DUMP.ran\"\nprintf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    std::fs::write(sb.path().join("db.secret"), SECRET_FILE).unwrap();
    ok(&sb.run("RUN-VS", &["--partition", "good"]));
    ok(&sb.weir_out(&["verify", "m.toml", "t", "--partition", "good"]));
    let ran = tmp.path().join("env.ran");
    std::fs::remove_file(&ran).expect("the task ran under run and verify");
    std::fs::remove_file(sb.path().join("db.secret")).unwrap();
    // Wide enough that the path is not wrapped.
    let out = sb
        .weir(&["verify", "m.toml", "t", "--partition", "good"])
        .env("COLUMNS", "400")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert!(!ran.exists(), "the rerun started");
    assert_eq!(
        stderr(&out),
        format!(
            "weir::verify::environment

  × cannot build the rerun's environment
  ╰─▶ `env.set.DB` of task `t` reads `{}/db.secret`, which cannot be read: No such file or directory (os error 2)
  help: verification runs the task with the environment `run` gives it: make the referenced variable or file readable by this weir
",
            sb.path().display()
        )
    );
}

// An engine killed while the command ran never redacted its logs;
// `explain`, reading the attempt's stderr.log as evidence, redacts the
// secrets it can read itself.
#[test]
fn explain_redacts_the_logs_of_a_killed_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let sb = Sandbox::new(&env_manifest(
        r#"env = { pass = ["PATH"], set = { DB = "file:db.secret" } }"#,
        &tmp.path().join("unused"),
    ));
    std::fs::write(sb.path().join("db.secret"), SECRET_FILE).unwrap();
    let marker = tmp.path().join("started");
    sb.script(
        "t.sh",
        &format!(
            "echo \"connecting with $DB\" >&2\ntouch '{}'\nsleep 30\n",
            marker.display()
        ),
    );
    let engine = crate::support::Engine::spawn(
        sb.weir(&["run", "m.toml", "--run-id", "RUN-K", "--partition", "good"]),
        tmp.path(),
        "engine",
    );
    crate::support::poll_until(
        "the task started",
        std::time::Duration::from_secs(20),
        || marker.exists(),
    );
    engine.kill();
    let explain = ok(&sb.weir_out(&["explain", "m.toml", "t", "--partition", "good"]));
    assert!(
        explain.contains("      | connecting with [redacted]\n"),
        "{explain}"
    );
    assert_no_secret("explain", &explain);
}

// An engine killed -9 after its task printed a secret never redacted the
// task's stderr.log; the engine that takes the attempt over does, so no file
// under the warehouse keeps the secret.
#[test]
fn a_taken_over_attempts_stderr_is_redacted() {
    let tmp = tempfile::tempdir().unwrap();
    let sb = Sandbox::new(&env_manifest(
        r#"env = { pass = ["PATH"], set = { DB = "file:db.secret" } }"#,
        &tmp.path().join("unused"),
    ));
    std::fs::write(sb.path().join("db.secret"), SECRET_FILE).unwrap();
    let marker = tmp.path().join("started");
    sb.script(
        "t.sh",
        &format!(
            "echo \"connecting with $DB\" >&2\ntouch '{}'\nsleep 30\n",
            marker.display()
        ),
    );
    let engine = crate::support::Engine::spawn(
        sb.weir(&["run", "m.toml", "--run-id", "RUN-K", "--partition", "good"]),
        tmp.path(),
        "engine",
    );
    crate::support::poll_until(
        "the task started",
        std::time::Duration::from_secs(20),
        || marker.exists(),
    );
    engine.kill();
    let logs = || -> Vec<(std::path::PathBuf, String)> {
        files(&sb.path().join("wh"))
            .into_iter()
            .filter(|(p, _)| p.ends_with("stderr.log"))
            .map(|(p, b)| (p, String::from_utf8_lossy(&b).into_owned()))
            .collect()
    };
    assert!(
        logs().iter().any(|(_, text)| text.contains(SECRET_FILE)),
        "the killed attempt's stderr.log holds the secret before the takeover: {:?}",
        logs()
    );
    sb.script(
        "t.sh",
        "printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    let out = sb.weir_out(&["run", "m.toml", "--run-id", "RUN-2", "--partition", "good"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        sb.events("RUN-2")
            .iter()
            .filter(|e| e.state == State::TakenOver)
            .count(),
        1
    );
    let logs = logs();
    assert!(
        logs.iter()
            .any(|(_, text)| text.contains("connecting with [redacted]")),
        "{logs:?}"
    );
    for (path, text) in &logs {
        assert_no_secret(&path.display().to_string(), text);
    }
    for (path, bytes) in files(&sb.path().join("wh")) {
        assert_no_secret(
            &path.display().to_string(),
            &String::from_utf8_lossy(&bytes),
        );
    }
}

// A local task runs as the engine's user, so it could read the engine's own
// environment (the store's credentials) through /proc/<engine pid>/environ;
// the engine is not dumpable, which makes that file its alone. Run as an
// unprivileged user (root reads any process's environment).
#[test]
fn a_task_cannot_read_the_engines_environment_through_proc() {
    use std::os::unix::fs::PermissionsExt;
    if !Path::new("/usr/bin/setpriv").exists() || process_uid() != 0 {
        eprintln!("skipped: needs root and setpriv to run the engine as nobody");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let seen = tmp.path().join("seen");
    let sb = Sandbox::new(&env_manifest("", Path::new("/unused")));
    std::fs::set_permissions(sb.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    sb.script(
        "t.sh",
        &format!(
            "cat /proc/$PPID/environ > '{seen}' 2>&1; echo \"exit $?\" >> '{seen}'\nprintf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
            seen = seen.display()
        ),
    );
    std::fs::set_permissions(
        sb.path().join("m.toml"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::fs::set_permissions(
        sb.path().join("t.sh"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let out = std::process::Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_weir"))
        .args(["run", "m.toml", "--partition", "good"])
        .current_dir(sb.path())
        .env("AWS_SECRET_ACCESS_KEY", SECRET_ENV)
        .env("HOME", tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&seen).unwrap();
    assert!(
        !text.contains(SECRET_ENV),
        "the task read the engine's environment"
    );
    assert!(
        text.contains("Permission denied") && text.ends_with("exit 1\n"),
        "{text}"
    );
}

fn process_uid() -> u32 {
    // SAFETY: getuid(2) cannot fail and touches no memory.
    unsafe { libc::getuid() }
}
