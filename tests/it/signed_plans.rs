//! Plans a person can sign: estimates taken from the warehouse's history,
//! a plan file the run honours or refuses, and backfills that can be
//! paused and resumed from any terminal. Everything goes through the binary.

use std::time::Duration;

use weir::events::State;

use crate::support::{poll_until, stderr, stdout, Engine, Sandbox};

const RERUN: &str = "help: review a new plan (`weir plan … --out FILE`)";

/// Two daily tasks, `a` (sleeps `a` seconds) then `b` (sleeps `b`), in a
/// backfill pool of two slots; external input `raw/<day>.csv` feeds `a`.
fn sleepers(a: &str, b: &str) -> Sandbox {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "signed"
code_version = "1"
warehouse = "wh"

[partitions.daily]
kind = "daily"
start = "2026-01-01"

[pools.backfill]
slots = 2

[datasets.raw]
path = "raw/{partition}.csv"
format = "csv"

[tasks.a]
command = ["sh", "a.sh"]
code = ["a.sh"]
inputs = ["raw"]
output = { dataset = "a_out", grain = ["id"] }

[tasks.b]
command = ["sh", "b.sh"]
depends_on = ["a"]
output = { dataset = "b_out", grain = ["id"] }

[backfills.first]
from = "2026-01-01"
to = "2026-01-02"
pool = "backfill"
reason = "history"

[backfills.second]
from = "2026-01-03"
to = "2026-01-06"
pool = "backfill"
reason = "the one a person signs"
"#,
    );
    let body = |sleep: &str| {
        format!(
            "sleep {sleep}\nprintf 'id,day\\n1,%s\\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/out.csv\"\n"
        )
    };
    sb.script("a.sh", &body(a));
    sb.script("b.sh", &body(b));
    std::fs::create_dir(sb.path().join("raw")).unwrap();
    for day in 1..=6 {
        std::fs::write(
            sb.path().join(format!("raw/2026-01-0{day}.csv")),
            format!("id,v\n{day},1\n"),
        )
        .unwrap();
    }
    sb
}

/// Milliseconds from RUN_STARTED to RUN_FINISHED in a run's log.
fn measured_wall_ms(sb: &Sandbox, run: &str) -> i64 {
    let events = sb.events(run);
    let at = |state: State| {
        let ts = &events.iter().find(|e| e.state == state).expect("logged").ts;
        ts.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    };
    at(State::RunFinished) - at(State::RunStarted)
}

#[test]
fn an_estimate_from_history_is_within_a_fifth_of_the_next_backfills_wall_time() {
    let sb = sleepers("1", "2");
    let out = sb.weir_out(&["backfill", "m.toml", "first", "--run-id", "history"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let plan = sb.weir_out(&["plan", "m.toml", "--backfill", "second", "--json"]);
    assert_eq!(plan.status.code(), Some(0), "{}", stderr(&plan));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&plan)).unwrap();
    for task in doc["tasks"].as_array().unwrap() {
        assert_eq!(task["cost"]["source"], "history", "{task}");
        assert_eq!(task["cost"]["attempts"], 2, "{task}");
    }
    assert_eq!(doc["total"]["counts"]["will_run"], 8, "{doc}");
    let estimate = doc["total"]["estimated_wall_ms"].as_i64().unwrap();
    let p90 = doc["total"]["estimated_wall_p90_ms"].as_i64().unwrap();
    assert!(p90 >= estimate, "{doc}");
    let out = sb.weir_out(&["backfill", "m.toml", "second", "--run-id", "measured"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let measured = measured_wall_ms(&sb, "measured");
    assert!(
        (estimate - measured).abs() * 5 <= measured,
        "estimated {estimate} ms, took {measured} ms"
    );
}

/// `weir plan m.toml --backfill second --out plan.json`, checked.
fn sign(sb: &Sandbox) {
    let out = sb.weir_out(&[
        "plan",
        "m.toml",
        "--backfill",
        "second",
        "--out",
        "plan.json",
    ]);
    sb.check(&out).code(0).stdout("plan for `signed` (code_version 1)\n...\n").stderr(
        "wrote the plan to plan.json: `weir backfill m.toml second --plan plan.json` runs exactly it, or refuses if the world it assumed changed\n",
    );
}

/// Nothing ran: no partition of the plan is published.
fn nothing_published(sb: &Sandbox) {
    for day in 3..=6 {
        let key = format!("2026-01-0{day}");
        assert!(sb.store("a_out", &key).latest().unwrap().is_none(), "{key}");
        assert!(sb.store("b_out", &key).latest().unwrap().is_none(), "{key}");
    }
}

#[test]
fn a_signed_plan_runs_exactly_its_instances_and_shows_its_estimate_beside_what_it_took() {
    let sb = sleepers("0", "0");
    sign(&sb);
    let out = sb.weir_out(&[
        "backfill",
        "m.toml",
        "second",
        "--plan",
        "plan.json",
        "--run-id",
        "signed",
    ]);
    sb.check(&out)
        .code(0)
        .stdout("run signed: 8 task instances: 8 published; 0 retries\nevents: [..]\nplan: estimated [..] (p90 [..]), took [..]\n")
        .stderr_contains(&["a 2026-01-03 attempt 1 token 1: PUBLISHED generation 1"]);
    let mut ran: Vec<(String, String)> = sb
        .events("signed")
        .into_iter()
        .filter(|e| e.state == State::Published)
        .map(|e| (e.task.unwrap(), e.partition.unwrap()))
        .collect();
    ran.sort();
    let mut planned = Vec::new();
    for task in ["a", "b"] {
        for day in 3..=6 {
            planned.push((task.to_owned(), format!("2026-01-0{day}")));
        }
    }
    assert_eq!(ran, planned);
    let out = sb.weir_out(&["slo", "m.toml"]);
    sb.check(&out)
        .code(0)
        .stdout("...\nsigned plans (estimate beside what the run took):\n  signed (plan.json): estimated [..] (p90 [..]), took [..]\n")
        .stderr("");
    let out = sb.weir_out(&["report", "m.toml", "--out", "report.html"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let html = std::fs::read_to_string(sb.path().join("report.html")).unwrap();
    assert!(
        html.contains("<table id=\"slo-plans\">")
            && html.contains("<td>signed</td><td>plan.json</td>"),
        "the report shows the signed plan's estimate"
    );
}

#[test]
fn a_signed_plan_refuses_after_an_input_file_changes_naming_it() {
    let sb = sleepers("0", "0");
    sign(&sb);
    std::fs::write(sb.path().join("raw/2026-01-04.csv"), "id,v\n4,2\n").unwrap();
    let out = sb.weir_out(&["backfill", "m.toml", "second", "--plan", "plan.json"]);
    sb.check(&out).code(3).stdout("").stderr_contains(&[
        "error: the plan `plan.json` no longer holds; nothing was started:\n  - a 2026-01-04: input `raw` file raw/2026-01-04.csv changed: was sha256:",
        RERUN,
    ]);
    assert_eq!(
        stderr(&out).matches("\n  - ").count(),
        1,
        "{}",
        stderr(&out)
    );
    nothing_published(&sb);
}

#[test]
fn a_signed_plan_refuses_after_a_code_change_naming_it() {
    let sb = sleepers("0", "0");
    sign(&sb);
    std::fs::write(sb.path().join("a.sh"), "exit 1\n").unwrap();
    let out = sb.weir_out(&["backfill", "m.toml", "second", "--plan", "plan.json"]);
    sb.check(&out).code(3).stdout("").stderr_contains(&[
        "error: the plan `plan.json` no longer holds; nothing was started:\n  - task `a`: code changed: fingerprint was sha256:",
        RERUN,
    ]);
    assert_eq!(
        stderr(&out).matches("\n  - ").count(),
        1,
        "{}",
        stderr(&out)
    );
    nothing_published(&sb);
}

#[test]
fn a_signed_plan_refuses_a_partition_published_meanwhile_and_a_changed_manifest() {
    let sb = sleepers("0", "0");
    sign(&sb);
    let out = sb.weir_out(&["run", "m.toml", "--task", "a", "--partition", "2026-01-05"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let manifest = std::fs::read_to_string(sb.path().join("m.toml")).unwrap();
    std::fs::write(
        sb.path().join("m.toml"),
        manifest.replace("code_version = \"1\"", "code_version = \"2\""),
    )
    .unwrap();
    let out = sb.weir_out(&["run", "m.toml", "--plan", "plan.json"]);
    sb.check(&out).code(3).stdout("").stderr_contains(&[
        "\n  - manifest changed: m.toml was sha256:",
        "\n  - code changed: code_version was 1, is 2\n",
        "\n  - a 2026-01-05: partition published meanwhile: its output was none, is generation 1\n",
    ]);
}

#[test]
fn a_plan_for_another_pipeline_or_backfill_is_refused() {
    let sb = sleepers("0", "0");
    sign(&sb);
    let out = sb.weir_out(&["backfill", "m.toml", "first", "--plan", "plan.json"]);
    sb.check(&out)
        .code(3)
        .stdout("")
        .stderr_contains(&["  - the plan is not one of backfill `first`"]);
    let manifest = std::fs::read_to_string(sb.path().join("m.toml")).unwrap();
    std::fs::write(
        sb.path().join("m.toml"),
        manifest.replace("name = \"signed\"", "name = \"other\""),
    )
    .unwrap();
    let out = sb.weir_out(&["backfill", "m.toml", "second", "--plan", "plan.json"]);
    sb.check(&out).code(3).stdout("").stderr(
        "error: the plan `plan.json` no longer holds; nothing was started:\n  - the plan is for pipeline `signed`, the manifest declares `other`\n  help: review a new plan (`weir plan … --out FILE`)\n",
    );
    std::fs::write(sb.path().join("plan.json"), "{}").unwrap();
    let out = sb.weir_out(&["backfill", "m.toml", "second", "--plan", "plan.json"]);
    sb.check(&out).code(2).stdout("").stderr(
        "error: `plan.json` is not a plan file of this weir (format 1)\n  help: `weir plan MANIFEST … --out FILE` writes one\n",
    );
    nothing_published(&sb);
}

/// RUNNING events in run `run`'s log so far, with their times (ms).
fn running_at(sb: &Sandbox, run: &str) -> Vec<i64> {
    let path = weir::events::run_dir(&sb.path().join("wh"), run).join("events.jsonl");
    let Ok((records, _)) = weir::events::read_log(&path) else {
        return Vec::new();
    };
    records
        .iter()
        .filter(|e| e.state == State::Running)
        .map(|e| e.ts.parse::<jiff::Timestamp>().unwrap().as_millisecond())
        .collect()
}

/// Each of the second backfill's 8 instances published exactly once over
/// every run of the sandbox.
fn every_partition_published_once(sb: &Sandbox) {
    let mut published: Vec<(String, String)> = sb
        .all_runs_events()
        .into_iter()
        .filter(|e| e.state == State::Published)
        .map(|e| (e.task.unwrap(), e.partition.unwrap()))
        .collect();
    published.sort();
    let mut expected = Vec::new();
    for task in ["a", "b"] {
        for day in 3..=6 {
            expected.push((task.to_owned(), format!("2026-01-0{day}")));
        }
    }
    assert_eq!(published, expected);
}

#[test]
fn a_paused_backfill_admits_nothing_within_a_second_and_resume_completes_it_once() {
    let sb = sleepers("2", "1");
    let engine = Engine::spawn(
        sb.weir(&["backfill", "m.toml", "second", "--run-id", "p"]),
        sb.path(),
        "engine",
    );
    poll_until("the first attempts", Duration::from_secs(20), || {
        running_at(&sb, "p").len() == 2
    });
    let out = sb.weir_out(&["backfill", "m.toml", "second", "--pause"]);
    let paused = jiff::Timestamp::now().as_millisecond();
    sb.check(&out).code(0).stdout(
        "backfill `second` paused: wherever it runs, it admits nothing new and waits; running attempts finish\n  `weir backfill m.toml second --resume` continues it\n",
    ).stderr("");
    // Two slots' attempts of 2 s finish; nothing starts in their place
    // (nor waits for a slot, ready to start when one frees).
    std::thread::sleep(Duration::from_millis(3000));
    let running = running_at(&sb, "p");
    assert_eq!(running.len(), 2, "{running:?}");
    assert!(
        running.iter().all(|at| *at <= paused + 1000),
        "an attempt started more than a second after the pause: {running:?} (paused at {paused})"
    );
    let out = sb.weir_out(&["status", "m.toml"]);
    sb.check(&out).code(0).stdout(
        "...\nbackfill `second`: run p: 2/8 done, 0 running, ETA [..]\nbackfill `second`: PAUSED since [..] (pid [..] on [..]): it admits nothing new; `weir backfill m.toml second --resume` continues it\n",
    ).stderr("");
    let out = sb.weir_out(&["backfill", "m.toml", "second", "--resume"]);
    sb.check(&out)
        .code(0)
        .stdout("backfill `second` resumed (paused since [..]): it admits work again\n")
        .stderr("");
    let out = engine.finish(Duration::from_secs(60));
    sb.check(&out)
        .code(0)
        .stdout("run p: 8 task instances: 8 published; 0 retries\nevents: [..]\n")
        .stderr_contains(&["b 2026-01-06 attempt 1 token 1: PUBLISHED"]);
    every_partition_published_once(&sb);
    let out = sb.weir_out(&["backfill", "m.toml", "second", "--resume"]);
    sb.check(&out)
        .code(0)
        .stdout("backfill `second` is not paused: nothing to resume\n")
        .stderr("");
    let out = sb.weir_out(&["backfill", "m.toml", "secnod", "--pause"]);
    sb.check(&out)
        .code(2)
        .stdout("")
        .stderr("error: no backfill `secnod` in m.toml\n  help: declared: `first`, `second`\n");
    // Finished and no longer steered: status names no backfill.
    let out = sb.weir_out(&["status", "m.toml"]);
    assert!(
        !stdout(&out).contains("backfill `second`"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_cancelled_backfill_stops_as_an_interrupt_would_and_a_later_run_finishes_it() {
    let sb = sleepers("1", "1");
    let engine = Engine::spawn(
        sb.weir(&["backfill", "m.toml", "second", "--run-id", "c"]),
        sb.path(),
        "engine",
    );
    poll_until("the first attempts", Duration::from_secs(20), || {
        running_at(&sb, "c").len() == 2
    });
    let out = sb.weir_out(&["backfill", "m.toml", "second", "--cancel"]);
    sb.check(&out).code(0).stdout(
        "backfill `second` cancelled: wherever it runs, it stops as an interrupt would (exit 143)\n  `weir backfill m.toml second` resumes it later\n",
    ).stderr("");
    let out = engine.finish(Duration::from_secs(20));
    sb.check(&out)
        .code(143)
        .stdout("run c: 8 task instances: 8 interrupted; 0 retries\n...\n")
        .stderr_contains(&["weir: interrupted by SIGTERM: 8 task instances left undone; run the same command again to resume"]);
    let out = sb.weir_out(&["backfill", "m.toml", "second", "--run-id", "c2"]);
    sb.check(&out)
        .code(0)
        .stdout("run c2: 8 task instances: 8 published; 0 retries\nevents: [..]\n")
        .stderr_contains(&["b 2026-01-06 attempt 1"]);
    every_partition_published_once(&sb);
}

#[test]
fn progress_and_an_eta_appear_in_status_while_a_backfill_runs() {
    let sb = sleepers("1", "1");
    let engine = Engine::spawn(
        sb.weir(&["backfill", "m.toml", "second", "--run-id", "g"]),
        sb.path(),
        "engine",
    );
    poll_until("a published partition", Duration::from_secs(20), || {
        let path = weir::events::run_dir(&sb.path().join("wh"), "g").join("events.jsonl");
        std::fs::read_to_string(path).is_ok_and(|t| t.contains("\"PUBLISHED\""))
    });
    let out = sb.weir_out(&["status", "m.toml", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let run = &doc["backfills"][0]["run"];
    assert_eq!(doc["backfills"][0]["name"], "second", "{doc}");
    assert_eq!(run["run_id"], "g", "{doc}");
    assert_eq!(run["total"], 8, "{doc}");
    assert!(run["done"].as_u64().unwrap() >= 1, "{doc}");
    assert!(run["eta_ms"].as_u64().is_some(), "{doc}");
    let out = sb.weir_out(&["status", "m.toml"]);
    sb.check(&out)
        .code(0)
        .stdout("...\nbackfill `second`: run g: [..]/8 done, [..] running, ETA [..]\n")
        .stderr("");
    let out = engine.finish(Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_pause_and_a_resume_are_operator_events_naming_who_and_when() {
    let sb = sleepers("1", "1");
    let out = sb.weir_out(&["backfill", "m.toml", "second", "--pause"]);
    sb.check(&out)
        .code(0)
        .stdout("backfill `second` paused: [..]\n[..]\n")
        .stderr("");
    let out = sb.weir_out(&["backfill", "m.toml", "second", "--resume"]);
    sb.check(&out)
        .code(0)
        .stdout("backfill `second` resumed (paused since [..]): it admits work again\n")
        .stderr("");
    // Each is in an operator log of its own: in time order.
    let mut events: Vec<weir::events::EventRecord> = sb
        .all_runs_events()
        .into_iter()
        .filter(|e| matches!(e.state, State::BackfillPaused | State::BackfillResumed))
        .collect();
    events.sort_by(|a, b| a.ts.cmp(&b.ts));
    assert_eq!(events.len(), 2, "{events:?}");
    let (paused, resumed) = (&events[0], &events[1]);
    assert_eq!(paused.state, State::BackfillPaused);
    assert!(paused.run_id.starts_with("op-"), "{paused:?}");
    assert_eq!(paused.data["backfill"], "second");
    assert!(
        paused.data["pid"].as_u64().is_some_and(|p| p > 0),
        "{paused:?}"
    );
    assert!(paused.data["host"].as_str().is_some_and(|h| !h.is_empty()));
    assert!(
        paused
            .detail
            .starts_with("backfill `second` paused by pid "),
        "{paused:?}"
    );
    assert_eq!(resumed.state, State::BackfillResumed);
    assert_eq!(resumed.data["paused_by"], paused.data["by"]);
    // `weir events` lists them.
    let out = sb.weir_out(&["events", "m.toml"]);
    let text = stdout(&out);
    assert!(
        text.contains("BACKFILL_PAUSED") && text.contains("BACKFILL_RESUMED"),
        "{text}"
    );
}
