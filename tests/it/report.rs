//! `weir report`: one self-contained HTML page, checked in a real headless
//! browser (Debian's `chromium`, installed by .ci/run).

use crate::support::{chromium, stderr, stdout, Sandbox};

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

// The report loads in headless Chromium without console errors,
// and its DOM holds a cell per task and partition with its state (published,
// stale, quarantined, held, missing), the hover evidence of a published cell, the
// run's attempts as bars in their pool's lanes and the generation history.
#[test]
fn report_renders_states_as_one_self_contained_page() {
    report_renders_states_in_a_headless_browser_case(false);
}

// The same, then the page loaded in Chromium (ignored by name where it is absent).
#[cfg_attr(
    not(any(weir_has_chromium, weir_ci)),
    ignore = "needs Chromium: `chromium` on the PATH (.ci/run installs it)"
)]
#[test]
fn report_renders_states_in_a_headless_browser() {
    report_renders_states_in_a_headless_browser_case(true);
}

/// The test, in a headless browser too when `in_browser`.
fn report_renders_states_in_a_headless_browser_case(in_browser: bool) {
    let sb = Sandbox::new(MANIFEST);
    sb.script(
        "up.sh",
        // The sleep makes two attempts overlap, so the pool's two lanes are
        // both used however fast the machine launches.
        "if [ \"$WEIR_PARTITION\" = c ]; then echo broken >&2; exit 65; fi\n\
         sleep 0.5\n\
         printf 'id\\n%s\\n' \"$(cat v 2>/dev/null || echo 1)\" > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
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
    // A forced rebuild of up a with other data makes down a stale: it read
    // generation 1 (an identical one would not: early cutoff).
    std::fs::write(sb.path().join("v"), "2\n").unwrap();
    let again = sb.run("RUN-R2", &["--task", "up", "--partition", "a", "--force"]);
    assert!(again.status.success(), "{}", stderr(&again));
    let page = sb.path().join("r.html");
    let made = sb
        .weir(&["report", "m.toml", "--out", "r.html", "--run", "RUN-R1"])
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
    for needle in ["<script", "src=", "@import", "url("] {
        assert!(!html.contains(needle), "{needle} in the page");
    }
    // Links only within the page (a problem to its grid row).
    assert_eq!(
        html.matches("href=").count(),
        html.matches("href=\"#").count()
    );
    assert!(html.contains("<a href=\"#p-c\">c</a>"));

    if !in_browser {
        return;
    }
    let browser = chromium::find().expect("chromium is on the PATH (.ci/run installs it)");
    let shown = chromium::load(browser, &format!("file://{}", page.display()), 0);
    let console = shown.console();
    assert!(console.is_empty(), "console output: {console:?}");
    let dom = &shown.dom;
    let cell = |task: &str, partition: &str, state: &str| {
        format!("data-task=\"{task}\" data-partition=\"{partition}\" data-state=\"{state}\"")
    };
    for (task, partition, state) in [
        ("up", "a", "published"),
        ("up", "b", "published"),
        ("up", "c", "quarantined"),
        ("down", "a", "stale"),
        ("down", "b", "held"),
        ("down", "c", "missing"),
    ] {
        assert!(
            dom.contains(&cell(task, partition, state)),
            "{task} {partition} {state} not in the DOM"
        );
    }
    let up = sb
        .store("up_out", "b")
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
    assert!(
        dom.contains("stale: `up_out` a is at generation 2, this publication read generation 1")
    );
    // Every generation: up_out a has two.
    assert_eq!(dom.matches("<td>up_out</td>").count(), 3);
}

// 730 daily partitions × 10 tasks is one page that weir writes
// and a headless browser lays out in seconds (summarised per task, as a
// grid that large is).
#[test]
fn report_of_730_partitions_by_10_tasks_stays_light() {
    report_of_730_partitions_by_10_tasks_stays_light_case(false);
}

// The same, then the page loaded in Chromium (ignored by name where it is absent).
#[cfg_attr(
    not(any(weir_has_chromium, weir_ci)),
    ignore = "needs Chromium: `chromium` on the PATH (.ci/run installs it)"
)]
#[test]
fn report_of_730_partitions_by_10_tasks_loads_in_a_headless_browser() {
    report_of_730_partitions_by_10_tasks_stays_light_case(true);
}

/// The test, in a headless browser too when `in_browser`.
fn report_of_730_partitions_by_10_tasks_stays_light_case(in_browser: bool) {
    let mut manifest = String::from(
        "[pipeline]\nname = \"big\"\ncode_version = \"1\"\nwarehouse = \"wh\"\n\n\
         [partitions.daily]\nkind = \"daily\"\nstart = \"2024-01-01\"\nend = \"2025-12-30\"\n",
    );
    for t in 0..10 {
        manifest.push_str(&format!(
            "\n[tasks.t{t}]\ncommand = [\"true\"]\noutput = {{ dataset = \"d{t}\", grain = [\"id\"] }}\n"
        ));
    }
    let sb = Sandbox::new(&manifest);
    let started = std::time::Instant::now();
    let made = sb
        .weir(&["report", "m.toml", "--out", "big.html"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let html = std::fs::read_to_string(sb.path().join("big.html")).unwrap();
    // Beyond a few hundred partitions the grid is a summary per task
    // (problems first): 730 missing cells per task, no row drawn.
    assert_eq!(
        html.matches("<td class=\"count\" data-state=\"missing\">730</td>")
            .count(),
        10
    );
    assert_eq!(html.matches("<tr id=\"p-").count(), 0);
    assert!(html.len() < 3 << 20, "{} bytes", html.len());
    let written = started.elapsed();
    assert!(written < std::time::Duration::from_secs(10), "{written:?}");

    if !in_browser {
        return;
    }
    let browser = chromium::find().expect("chromium is on the PATH (.ci/run installs it)");
    let started = std::time::Instant::now();
    let big = format!("file://{}", sb.path().join("big.html").display());
    let shown = chromium::load(browser, &big, 0);
    assert_eq!(
        shown
            .dom
            .matches("<td class=\"count\" data-state=\"missing\">730</td>")
            .count(),
        10
    );
    let loaded = started.elapsed();
    assert!(loaded < std::time::Duration::from_secs(30), "{loaded:?}");
    eprintln!("730 x 10 report: written in {written:?}, loaded by chromium in {loaded:?}");
}

// `weir plan --html` draws the simulated schedule of a backfill:
// every task as a row, every instance as a bar in its pool's slot lanes
// (small plans) or the pool's busy slots over time (large ones).
#[test]
fn plan_html_shows_the_simulated_schedule() {
    plan_html_shows_the_simulated_schedule_case(false);
}

// The same, then the pages loaded in Chromium (ignored by name where it is absent).
#[cfg_attr(
    not(any(weir_has_chromium, weir_ci)),
    ignore = "needs Chromium: `chromium` on the PATH (.ci/run installs it)"
)]
#[test]
fn plan_html_schedules_load_in_a_headless_browser() {
    plan_html_shows_the_simulated_schedule_case(true);
}

/// The test, in a headless browser too when `in_browser`.
fn plan_html_shows_the_simulated_schedule_case(in_browser: bool) {
    let mut manifest = String::from(
        "[pipeline]\nname = \"big\"\ncode_version = \"1\"\nwarehouse = \"wh\"\n\n\
         [partitions.daily]\nkind = \"daily\"\nstart = \"2024-01-01\"\nend = \"2025-12-30\"\n\n\
         [pools.bf]\nslots = 2\n\n\
         [backfills.week]\nfrom = \"2024-01-01\"\nto = \"2024-01-07\"\npool = \"bf\"\nreason = \"r\"\n\n\
         [backfills.all]\nfrom = \"2024-01-01\"\nto = \"2025-12-30\"\npool = \"bf\"\nreason = \"r\"\n",
    );
    for t in 0..10 {
        let inputs = if t == 0 {
            String::new()
        } else {
            format!("inputs = [\"d{}\"]\n", t - 1)
        };
        manifest.push_str(&format!(
            "\n[tasks.t{t}]\ncommand = [\"true\"]\n{inputs}output = {{ dataset = \"d{t}\", grain = [\"id\"] }}\nexpected_duration = \"1m\"\n"
        ));
    }
    let sb = Sandbox::new(&manifest);
    for (backfill, page) in [("week", "week.html"), ("all", "all.html")] {
        let out = sb
            .weir(&["plan", "m.toml", "--backfill", backfill, "--html", page])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let week = std::fs::read_to_string(sb.path().join("week.html")).unwrap();
    // 70 instances of 1 minute on 2 slots: 35 minutes.
    assert!(
        week.contains("70 instances · estimated wall time 35m"),
        "{week}"
    );
    assert_eq!(week.matches("class=\"bar planned\"").count(), 70);
    assert_eq!(week.matches("class=\"lane\" data-pool=\"bf\"").count(), 2);
    assert_eq!(week.matches("class=\"lane\" data-task=").count(), 10);
    let all = std::fs::read_to_string(sb.path().join("all.html")).unwrap();
    assert!(all.contains("7300 instances"));
    assert_eq!(
        all.matches("class=\"lane util\" data-pool=\"bf\"").count(),
        1
    );
    assert!(all.len() < 200_000, "{} bytes", all.len());

    if !in_browser {
        return;
    }
    let browser = chromium::find().expect("chromium is on the PATH (.ci/run installs it)");
    for page in ["week.html", "all.html"] {
        let url = format!("file://{}", sb.path().join(page).display());
        let shown = chromium::load(browser, &url, 0);
        assert!(!shown.log.contains("CONSOLE"), "{}", shown.log);
        assert!(shown.dom.contains("class=\"lane\" data-task=\"t9\""));
    }
}
