//! Every command a manifest declares (a task, a sensor `ready = { command }`,
//! a notify `command` target) goes through one launcher and one
//! environment policy: none inherits weir's secrets (the console token,
//! what the manifest reads secrets from, an S3 store's credentials), none
//! inherits a descriptor the engine inherited, a background child holding
//! a command's stderr keeps nobody waiting, and a hung sensor is stopped
//! when serve is.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::{process_state, stderr, stdout, Sandbox};

const CONSOLE_TOKEN: &str = "console-tok-5e1f";
const HOOK_TOKEN: &str = "hook-tok-77aa";
const STORE_SECRET: &str = "store-secret-9c3d";

/// A task reading an external input behind a sensor command, and two
/// notify command targets: `plain` (no `env`) and `declared` (an `env`).
/// Each command dumps its environment to `env.<who>` in the sandbox.
fn manifest(notify_url: &str) -> String {
    format!(
        r#"
[pipeline]
name = "cmds"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["a"]

[datasets.raw]
path = "raw.csv"
ready = {{ command = ["sh", "sensor.sh"] }}

[tasks.t]
command = ["sh", "t.sh"]
inputs = ["raw"]
partitioned_by = "k"
output = {{ dataset = "out", format = "csv", grain = ["id"] }}

[notify.plain]
command = ["sh", "notify.sh", "plain"]
on = ["published"]

[notify.declared]
command = ["sh", "notify.sh", "declared"]
on = ["published"]
env = {{ pass = ["PATH"], set = {{ KEY = "env:HOOK_TOKEN" }} }}

[notify.hook]
url = "{notify_url}"
on = ["published"]
headers = {{ Authorization = "env:HOOK_TOKEN" }}
"#
    )
}

fn sandbox() -> Sandbox {
    // Nothing listens there: the hook's deliveries fail at once.
    let sb = Sandbox::new(&manifest("http://127.0.0.1:9/hook"));
    std::fs::write(sb.path().join("raw.csv"), "id\n1\n").unwrap();
    sb.script("sensor.sh", "env > env.sensor\nexit 0\n");
    sb.script(
        "t.sh",
        "env > env.task\ncp \"$WEIR_INPUT_RAW\" \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb.script("notify.sh", "env > \"env.$1\"\ncat > /dev/null\n");
    sb
}

/// NAME → value of `env.<who>`.
fn dump(sb: &Sandbox, who: &str) -> BTreeMap<String, String> {
    let path = sb.path().join(format!("env.{who}"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The four commands' environments hold none of weir's secrets; those
/// without `env` still inherit the engine's other variables, the one with
/// `env` gets exactly what it declares.
#[track_caller]
fn assert_no_weir_secret(sb: &Sandbox, s3: bool) {
    for who in ["task", "sensor", "plain", "declared"] {
        let env = dump(sb, who);
        for name in [
            "WEIR_CONSOLE_TOKEN",
            "HOOK_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
        ] {
            assert!(!env.contains_key(name), "{who} sees {name}: {env:?}");
        }
        for (name, value) in &env {
            for secret in [CONSOLE_TOKEN, STORE_SECRET] {
                assert!(!value.contains(secret), "{who} sees a secret in {name}");
            }
            if name != "KEY" {
                assert!(
                    !value.contains(HOOK_TOKEN),
                    "{who} sees the hook's token in {name}"
                );
            }
        }
        let inherits = who != "declared";
        assert_eq!(
            env.get("ENGINE_ONLY").map(String::as_str),
            inherits.then_some("engine"),
            "{who}: {env:?}"
        );
        if s3 && inherits {
            assert_eq!(env.get("AWS_REGION").map(String::as_str), Some("us-east-1"));
        }
    }
    assert_eq!(dump(sb, "declared")["KEY"], HOOK_TOKEN);
    assert_eq!(dump(sb, "sensor")["WEIR_DATASET"], "raw");
    assert!(dump(sb, "plain").contains_key("WEIR_IDEMPOTENCY_KEY"));
}

fn with_secrets(mut cmd: std::process::Command) -> std::process::Command {
    cmd.env("WEIR_CONSOLE_TOKEN", CONSOLE_TOKEN)
        .env("HOOK_TOKEN", HOOK_TOKEN)
        .env("ENGINE_ONLY", "engine");
    for proxy in ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
        cmd.env_remove(proxy);
    }
    cmd
}

// A task, a sensor command and notify commands without `env` inherit the
// engine's environment but none of weir's secrets: not the console's
// token, not a variable a notify header reads its secret from.
#[test]
fn no_command_inherits_the_console_token_or_a_header_secret() {
    let sb = sandbox();
    let out = with_secrets(sb.weir(&["run", "m.toml", "--run-id", "r1"]))
        .env("AWS_SECRET_ACCESS_KEY", STORE_SECRET)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("1 published"), "{}", stdout(&out));
    for who in ["task", "sensor", "plain"] {
        // A local warehouse has no store credentials to withhold.
        assert_eq!(
            dump(&sb, who)
                .get("AWS_SECRET_ACCESS_KEY")
                .map(String::as_str),
            Some(STORE_SECRET),
            "{who}"
        );
    }
    for who in ["task", "sensor", "plain", "declared"] {
        let env = dump(&sb, who);
        assert!(!env.contains_key("WEIR_CONSOLE_TOKEN"), "{who}: {env:?}");
        assert!(!env.contains_key("HOOK_TOKEN"), "{who}: {env:?}");
        let inherits = who != "declared";
        assert_eq!(env.contains_key("ENGINE_ONLY"), inherits, "{who}: {env:?}");
    }
    assert_eq!(dump(&sb, "declared")["KEY"], HOOK_TOKEN);
}

// On an S3 warehouse, none of them gets the store's credentials either.
#[cfg(feature = "s3")]
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn no_command_of_an_s3_warehouse_sees_the_store_credentials() {
    let Some(s3) = crate::support::s3::S3::sandbox("cmds") else {
        return;
    };
    let sb = sandbox();
    let cmd = s3.weir(
        sb.path(),
        &sb.path().join("staging"),
        &["run", "m.toml", "--run-id", "r1"],
    );
    let out = with_secrets(cmd)
        .env("AWS_SECRET_ACCESS_KEY", STORE_SECRET)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("1 published"), "{}", stdout(&out));
    assert_no_weir_secret(&sb, true);
}

// A descriptor the engine inherited from whoever started it (a wrapper's
// `exec 7<file`) is open in no command weir starts.
#[test]
fn a_descriptor_the_engine_inherited_is_open_in_no_command() {
    let sb = sandbox();
    let probe = "if [ -e /proc/$$/fd/7 ]; then echo open; else echo closed; fi";
    sb.script("sensor.sh", &format!("{probe} > fd.sensor\nexit 0\n"));
    sb.script(
        "t.sh",
        &format!("{probe} > fd.task\ncp \"$WEIR_INPUT_RAW\" \"$WEIR_OUTPUT_DIR/out.csv\"\n"),
    );
    sb.script(
        "notify.sh",
        &format!("{probe} > \"fd.$1\"\ncat > /dev/null\n"),
    );
    std::fs::write(sb.path().join("held"), "the wrapper's file\n").unwrap();
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            "exec 7<held; [ -e /proc/$$/fd/7 ] || exit 99; exec \"$0\" run m.toml --run-id r1",
        ])
        .arg(env!("CARGO_BIN_EXE_weir"))
        .current_dir(sb.path())
        .env("HOOK_TOKEN", HOOK_TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for who in ["sensor", "task", "plain", "declared"] {
        let seen = std::fs::read_to_string(sb.path().join(format!("fd.{who}")))
            .unwrap_or_else(|e| panic!("fd.{who}: {e}; {}", stderr(&out)));
        assert_eq!(seen, "closed\n", "{who} has the engine's descriptor 7");
    }
}

/// Whether `pid` is still a live process (a zombie is not).
fn alive(pid: u32) -> bool {
    process_state(pid).is_some_and(|s| s != 'Z')
}

fn pid_in(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

// A notify command that fails and leaves a background child holding its
// stderr open is judged by its own exit: the run does not wait for the
// child (which would outlive the run's 10 s wait for its sender), and the
// child is stopped with the command.
#[test]
fn a_notify_commands_child_holding_stderr_keeps_nobody_waiting() {
    let sb = sandbox();
    sb.script(
        "notify.sh",
        "sleep 120 & echo $! > \"child.$1\"\necho 'no route to pager' >&2\nexit 3\n",
    );
    let started = Instant::now();
    let out = with_secrets(sb.weir(&["run", "m.toml", "--run-id", "r1"]))
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "notification not delivered to `declared`: `sh` exit status: 3: no route to pager"
        ) || stderr(&out).contains(
            "1 notification not delivered to `declared`: `sh` exit status: 3: no route to pager"
        ),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("still sending"), "{}", stderr(&out));
    assert!(took < Duration::from_secs(30), "the run took {took:?}");
    for who in ["plain", "declared"] {
        let child = pid_in(&sb.path().join(format!("child.{who}")));
        assert!(
            !alive(child),
            "{who}'s background child {child} outlived it"
        );
    }
}

/// A sandbox whose hourly task reads an input behind a sensor that hangs
/// (`sensor.pid` holds its pid), and `weir serve` on it at 11:30, its
/// stdout lines collected.
fn serve_with_a_hung_sensor() -> (
    Sandbox,
    std::process::Child,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    u32,
) {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "hung"
code_version = "1"
warehouse = "wh"

[partitions.hour]
kind = "hourly"
start = "2026-09-20T00"

[datasets.raw]
path = "raw.csv"
ready = { command = ["sh", "sensor.sh"] }

[tasks.h]
command = ["sh", "h.sh"]
inputs = ["raw"]
partitioned_by = "hour"
output = { dataset = "hours", grain = ["id"] }
"#,
    );
    std::fs::write(sb.path().join("raw.csv"), "id\n1\n").unwrap();
    sb.script("sensor.sh", "echo $$ > sensor.pid\nexec sleep 300\n");
    sb.script(
        "h.sh",
        "cp \"$WEIR_INPUT_RAW\" \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    let mut serve = sb
        .weir(&["serve", "m.toml"])
        .env("WEIR_NOW", "2026-09-20T11:30:00Z")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = std::sync::Arc::clone(&lines);
    let out = serve.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    let pid_file = sb.path().join("sensor.pid");
    crate::support::poll_until("the sensor started", Duration::from_secs(60), || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let sensor = pid_in(&pid_file);
    assert!(alive(sensor));
    (sb, serve, lines, sensor)
}

// serve asked to stop (SIGTERM) while a sensor command hangs: the sensor is
// killed and serve exits at once, recording no sensor failure.
#[test]
fn a_hung_sensor_is_killed_when_serve_gets_sigterm() {
    let (_sb, mut serve, lines, sensor) = serve_with_a_hung_sensor();
    // SAFETY: kill(2) of the serve this test started.
    assert_eq!(unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) }, 0);
    let asked = Instant::now();
    let status = loop {
        if let Some(s) = serve.try_wait().unwrap() {
            break s;
        }
        if asked.elapsed() > Duration::from_secs(10) {
            let _ = serve.kill();
            let _ = serve.wait();
            panic!(
                "serve did not stop within 10 s of SIGTERM while its sensor hung:\n{}",
                lines.lock().unwrap().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Nothing was running but the sensor: a clean stop.
    assert_eq!(
        status.code(),
        Some(0),
        "{}",
        lines.lock().unwrap().join("\n")
    );
    assert!(!alive(sensor), "the sensor {sensor} outlived serve");
    std::thread::sleep(Duration::from_millis(100));
    let lines = lines.lock().unwrap().join("\n");
    assert!(lines.contains("STOP on SIGTERM"), "{lines}");
    assert!(!lines.contains("failed"), "{lines}");
}

// serve killed -9 while a sensor command hangs: the sensor dies with it.
#[test]
fn a_hung_sensor_dies_with_a_killed_serve() {
    let (_sb, mut serve, _lines, sensor) = serve_with_a_hung_sensor();
    serve.kill().unwrap();
    serve.wait().unwrap();
    crate::support::poll_until(
        "the sensor died with serve",
        Duration::from_secs(10),
        || !alive(sensor),
    );
}

// `env` of a sensor or a notify target is checked as a task's, and only a
// command takes one.
#[test]
fn sensor_and_notify_env_are_validated() {
    for (from, to, code, text) in [
        (
            r#"ready = { command = ["sh", "sensor.sh"] }"#,
            r#"ready = { file = "raw.ok", env = { pass = ["PATH"] } }"#,
            "weir::manifest::bad_ready",
            "`ready.env` of dataset `raw` is for a `command` sensor",
        ),
        (
            r#"ready = { command = ["sh", "sensor.sh"] }"#,
            r#"ready = { command = ["sh", "sensor.sh"], env = { set = { WEIR_X = "1" } } }"#,
            "weir::manifest::env_name",
            "the sensor of dataset `raw` declares `WEIR_X` in `env`",
        ),
        (
            r#"set = { KEY = "env:HOOK_TOKEN" }"#,
            r#"set = { KEY = "env:" }"#,
            "weir::manifest::env_reference",
            "`env.set.KEY` of notify target `declared`: `env:` names no variable",
        ),
        (
            r#"headers = { Authorization = "env:HOOK_TOKEN" }"#,
            r#"headers = { Authorization = "env:HOOK_TOKEN" }
env = { pass = ["PATH"] }"#,
            "weir::manifest::notify_headers",
            "`notify.hook.env` is for a `command` target, not a `url`",
        ),
    ] {
        let text_in = manifest("http://127.0.0.1:9/hook");
        assert!(text_in.contains(from), "{from}");
        let sb = Sandbox::new(&text_in.replace(from, to));
        let out = sb.weir(&["validate", "m.toml"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{to}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(code) && err.contains(text), "{to}:\n{err}");
    }
}
