//! Plans a person can sign: estimates taken from the warehouse's history,
//! a plan file the run honours or refuses, and backfills that can be
//! paused and resumed from any terminal. Everything goes through the binary.

use weir::events::State;

use crate::support::{stderr, stdout, Sandbox};

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
