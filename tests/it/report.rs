//! `weir report`: one self-contained HTML page, checked in a real headless
//! browser (Debian's `chromium`, installed by .ci/run).

use std::process::Command;

use crate::support::{stderr, stdout, Sandbox};

const MANIFEST: &str = r#"
[pipeline]
name = "rep"
code_version = "3"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["a", "b", "c"]

[pools.small]
slots = 2

[tasks.up]
command = ["sh", "up.sh"]
output = { dataset = "up_out", format = "csv", grain = ["id"] }
pool = "small"

[tasks.down]
command = ["sh", "down.sh"]
inputs = ["up_out"]
output = { dataset = "down_out", format = "csv", grain = ["id"] }
pool = "small"
"#;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|name| {
        Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

// issue 15: the report loads in headless Chromium without console errors,
// and its DOM holds a cell per task and partition with its state (published,
// quarantined, held, missing), the hover evidence of a published cell, the
// run's attempts as bars in their pool's lanes and the generation history.
#[test]
fn issue_15_report_renders_states_in_a_headless_browser() {
    let sb = Sandbox::new(MANIFEST);
    sb.script(
        "up.sh",
        "if [ \"$WEIR_PARTITION\" = c ]; then echo broken >&2; exit 65; fi\n\
         printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb.script(
        "down.sh",
        "if [ \"$WEIR_PARTITION\" = b ]; then exit 78; fi\n\
         cp \"$WEIR_INPUT_UP_OUT\"/*.csv \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    let out = sb.run("RUN-R1", &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let page = sb.path().join("r.html");
    let made = sb
        .weir(&["report", "m.toml", "--out", "r.html"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let missing_run = sb
        .weir(&["report", "m.toml", "--run", "NOPE"])
        .output()
        .unwrap();
    assert_eq!(missing_run.status.code(), Some(2));
    assert!(stderr(&missing_run).contains("no run `NOPE`"));

    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing fetched.
    for needle in ["<script", "src=", "href=", "@import", "url("] {
        assert!(!html.contains(needle), "{needle} in the page");
    }

    let Some(browser) = chromium() else {
        eprintln!("skipped: chromium is not installed (CI installs it)");
        return;
    };
    let url = format!("file://{}", page.display());
    let shown = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            &url,
        ])
        .output()
        .expect("chromium runs");
    assert!(shown.status.success(), "{}", stderr(&shown));
    let dom = stdout(&shown);
    let log = stderr(&shown);
    let console: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console.is_empty(), "console output: {console:?}");
    let cell = |task: &str, partition: &str, state: &str| {
        format!("data-task=\"{task}\" data-partition=\"{partition}\" data-state=\"{state}\"")
    };
    for (task, partition, state) in [
        ("up", "a", "published"),
        ("up", "b", "published"),
        ("up", "c", "quarantined"),
        ("down", "a", "published"),
        ("down", "b", "held"),
        ("down", "c", "missing"),
    ] {
        assert!(
            dom.contains(&cell(task, partition, state)),
            "{task} {partition} {state} not in the DOM"
        );
    }
    let up = sb
        .store("up_out", "a")
        .latest()
        .unwrap()
        .expect("published");
    assert!(
        dom.contains(&format!(
            "generation 1 · 1 rows&#10;code_version 3&#10;{}",
            up.digest
        )) || dom.contains(&format!(
            "generation 1 · 1 rows\ncode_version 3\n{}",
            up.digest
        ))
    );
    assert_eq!(dom.matches("class=\"lane\" data-pool=\"small\"").count(), 2);
    assert_eq!(dom.matches("class=\"bar success\"").count(), 3);
    assert_eq!(dom.matches("class=\"bar failed\"").count(), 2);
    assert!(dom.contains("<h2>Run RUN-R1</h2>"));
    assert_eq!(dom.matches("<td>up_out</td>").count(), 2);
}
