//! One HTML path: the report, `weir plan --html` and the console render
//! through the same auto-escaping templates, so text anyone may write (a
//! code_version, stderr, a value a gate refused, a task or partition named
//! in a run's event log) reaches a page as text, never as markup. And a rule
//! on the source: no page builds markup by hand again.

use crate::layers::{code_lines, root, rust_files};
use crate::support::{chromium, stderr, Sandbox};

/// Markup that would run or break out of an attribute, an entity that
/// must stay literal, and a quote.
const HOSTILE: &str = "<script>alert(1)</script>\"><img src=x onerror=alert(2)>&amp;'q";

/// What [`HOSTILE`] is on a page once escaped.
const ESCAPED: &str = "&lt;script&gt;alert(1)&lt;&#x2f;script&gt;&quot;&gt;&lt;img src=x onerror=alert(2)&gt;&amp;amp;&#x27;q";

/// Asserts `page` holds `HOSTILE` only escaped, at least `at_least` times.
#[track_caller]
fn only_escaped(page: &str, at_least: usize, what: &str) {
    for raw in [
        "<script>alert",
        "<img src=x",
        "\"><img",
        "&amp;'q",
        "alert(2)>&",
    ] {
        assert!(!page.contains(raw), "{what}: raw `{raw}` in\n{page}");
    }
    let found = page.matches(ESCAPED).count();
    assert!(
        found >= at_least,
        "{what}: {found} escaped copies, expected at least {at_least}, in\n{page}"
    );
}

/// A run whose code_version, stderr and refused gate value are `hostile`,
/// and whose event log names a hostile task and partition (an event log is
/// a file anyone with the warehouse can append to).
fn hostile_pipeline(hostile: &str) -> Sandbox {
    let manifest = format!(
        r#"
[pipeline]
name = "esc"
code_version = "{code}"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["a", "b", "c"]

[tasks.up]
command = ["sh", "up.sh"]
output = {{ dataset = "up_out", format = "csv", grain = ["id"] }}

[tasks.down]
command = ["sh", "down.sh"]
inputs = ["up_out"]
output = {{ dataset = "down_out", format = "csv", grain = ["id"] }}
gates = [{{ check = "accepted_values", column = "status", values = ["ok"] }}]
"#,
        code = hostile.replace('\\', "\\\\").replace('"', "\\\"")
    );
    let sb = Sandbox::new(&manifest);
    sb.script(
        "up.sh",
        &format!(
            "if [ \"$WEIR_PARTITION\" = c ]; then cat >&2 <<'EOF'\n{hostile}\nEOF\nexit 65; fi\n\
             printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n"
        ),
    );
    let csv_value = hostile.replace('"', "\"\"");
    sb.script(
        "down.sh",
        &format!(
            "if [ \"$WEIR_PARTITION\" = b ]; then cat > \"$WEIR_OUTPUT_DIR/out.csv\" <<'EOF'\nid,status\n1,\"{csv_value}\"\nEOF\n\
             else printf 'id,status\\n1,ok\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"; fi\n"
        ),
    );
    let out = sb.run("RUN-E1", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // The hostile task and partition: an attempt that ran and failed.
    let log = sb.path().join("wh/_runs/RUN-E1/events.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for state in ["RUNNING", "FAILED"] {
        let model = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|r| r["state"] == state && r["task"] == "up")
            .unwrap_or_else(|| panic!("no {state} of up in\n{text}"));
        let mut record = model.clone();
        record["task"] = hostile.into();
        record["partition"] = hostile.into();
        lines.insert(lines.len() - 1, record.to_string());
    }
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    sb
}

// The report: the code_version (header, history, hover), the stderr
// tail and the gate's refused value (what needs a person) and the hostile
// task and partition in the run's Gantt chart are all text.
#[test]
fn hostile_text_reaches_the_report_only_escaped() {
    let sb = hostile_pipeline(HOSTILE);
    let made = sb
        .weir(&["report", "m.toml", "--out", "r.html", "--run", "RUN-E1"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let html = std::fs::read_to_string(sb.path().join("r.html")).unwrap();
    only_escaped(&html, 5, "report");
    // Where each lands: the header, the evidence, a Gantt bar's title.
    assert!(html.contains(&format!("<p class=\"meta\">code_version {ESCAPED} · ")));
    assert!(html.contains(&format!("<pre>{ESCAPED}</pre>")), "{html}");
    assert!(
        html.contains("values outside the set: &quot;&lt;script&gt;alert(1)&lt;&#x2f;script&gt;")
    );
    assert!(
        html.contains(&format!(
            "title=\"{ESCAPED} {ESCAPED} attempt 1 · failed · "
        )),
        "{html}"
    );
}

// The same report in a browser: no element was made of the hostile text
// (no script, no image), and nothing wrote to the console.
#[cfg_attr(
    not(any(weir_has_chromium, weir_ci)),
    ignore = "needs Chromium: `chromium` on the PATH (.ci/run installs it)"
)]
#[test]
fn hostile_text_makes_no_element_in_a_headless_browser() {
    // Markup that marks the page if it runs (an alert would block the
    // headless browser instead of failing the test).
    let sb = hostile_pipeline(
        "<script>document.body.setAttribute('data-pwned','1')</script>\"><img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">&amp;'q",
    );
    let made = sb
        .weir(&["report", "m.toml", "--out", "r.html", "--run", "RUN-E1"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let Some(browser) = chromium::or_skip() else {
        return;
    };
    let url = format!("file://{}", sb.path().join("r.html").display());
    let shown = chromium::load(browser, &url, 0);
    assert!(shown.console().is_empty(), "{:?}", shown.console());
    for element in ["<script", "<img", "data-pwned=\""] {
        assert!(!shown.dom.contains(element), "{element} in\n{}", shown.dom);
    }
    assert!(shown.dom.contains("<h2>Run RUN-E1</h2>"), "{}", shown.dom);
}

// The console's pages (what needs a person, the grid, the instance, the
// run with the report's Gantt chart) render the same hostile text as text.
#[cfg(feature = "console")]
#[test]
fn hostile_text_reaches_the_console_only_escaped() {
    let sb = hostile_pipeline(HOSTILE);
    let manifest = weir::manifest::Manifest::load(&sb.path().join("m.toml")).unwrap();
    let console = weir::console::serve("127.0.0.1:0".parse().unwrap(), vec![manifest], None)
        .expect("the console binds");
    let addr = console.local_addr().to_string();
    let get = |path: &str| crate::support::http::get(&addr, path, &[]);
    let gate = "values outside the set: &quot;&lt;script&gt;alert(1)&lt;&#x2f;script&gt;";
    for (path, at_least, also) in [
        ("/", 2, ESCAPED),
        ("/grid", 1, ESCAPED),
        ("/instance?task=up&partition=c", 1, ESCAPED),
        ("/instance?task=down&partition=b", 0, gate),
        ("/runs/RUN-E1", 3, ESCAPED),
    ] {
        let page = get(path);
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        only_escaped(&page.body, at_least, path);
        assert!(
            page.body.contains(also),
            "{path}: no {also} in\n{}",
            page.body
        );
    }
    let run = get("/runs/RUN-E1").body;
    assert!(
        run.contains(&format!(
            "title=\"{ESCAPED} {ESCAPED} attempt 1 · failed · "
        )),
        "{run}"
    );
}

/// Where the rule looks: every page's Rust side.
const PAGES: [&str; 2] = ["src/report", "src/console"];

// Markup is laid out by templates only: no string literal in the report's
// or the console's code opens a tag (as a `format!` or `push_str` of
// markup would), no escape function is defined there, and no template
// turns escaping off or marks a value safe.
#[test]
fn no_page_builds_markup_by_hand() {
    let mut problems = Vec::new();
    for dir in PAGES {
        let mut files = Vec::new();
        rust_files(&root().join(dir), &mut files);
        files.sort();
        for file in &files {
            let name = file.strip_prefix(root()).unwrap().display().to_string();
            let text = std::fs::read_to_string(file).unwrap();
            for (line, code) in code_lines(&text) {
                if let Some(why) = hand_built(&code) {
                    problems.push(format!("{name}:{line}: {why}: {}", code.trim()));
                }
            }
        }
        for template in std::fs::read_dir(root().join(dir).join("templates")).unwrap() {
            let path = template.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            for unsafe_use in ["|safe", "| safe", "autoescape"] {
                if text.contains(unsafe_use) {
                    problems.push(format!(
                        "{}: `{unsafe_use}` inserts a value unescaped",
                        path.display()
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Why a line of code builds markup or escapes by hand, if it does.
fn hand_built(code: &str) -> Option<&'static str> {
    let words = ["fn esc(", "fn escape", "fn html_escape", "fn escape_html"];
    if words.iter().any(|w| code.contains(w)) {
        return Some("an escape function (a template escapes every value)");
    }
    if ["&amp;", "&lt;", "&quot;", "from_safe_string"]
        .iter()
        .any(|w| code.contains(w))
    {
        return Some("escaping by hand (a template escapes every value)");
    }
    string_literals(code)
        .iter()
        .any(|s| opens_tag(s))
        .then_some("markup in a string literal (lay it out in a template under templates/)")
}

/// The contents of the `"…"` literals on a line (escapes kept as written),
/// and of one left open at its end.
fn string_literals(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.chars().peekable();
    let mut current: Option<String> = None;
    while let Some(c) = chars.next() {
        match (&mut current, c) {
            (None, '\'') => {
                // A char literal such as '"' is not a string's start.
                let quoted: String = chars.clone().take(3).collect();
                if quoted.starts_with("\"'") || quoted.starts_with("\\\"'") {
                    chars.nth(quoted.find('\'').unwrap_or(0));
                }
            }
            (None, '"') => current = Some(String::new()),
            (Some(s), '\\') => {
                s.push('\\');
                if let Some(n) = chars.next() {
                    s.push(n);
                }
            }
            (Some(_), '"') => out.push(current.take().unwrap_or_default()),
            (Some(s), c) => s.push(c),
            (None, _) => {}
        }
    }
    // A literal continued on the next line (`\` at the end) counts too.
    out.extend(current);
    out
}

/// Whether `text` opens or closes an HTML tag (`<p`, `</td`, `<!DOCTYPE`).
fn opens_tag(text: &str) -> bool {
    text.match_indices('<').any(|(i, _)| {
        text[i + 1..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '/' || c == '!')
    })
}

// The rule catches the hand-built markup it replaced, and not generics
// or comparisons.
#[test]
fn the_markup_rule_sees_what_it_forbids() {
    for bad in [
        r#"let _ = write!(html, "<td>{}</td>", x);"#,
        r#"html.push_str("</tbody></table>\n");"#,
        r#"format!("<!DOCTYPE html>")"#,
        r#"        "<!DOCTYPE html>\n<html lang=\"en\"><head>\"#,
        "pub(crate) fn esc(text: &str) -> String {",
        r#"'&' => out.push_str("&amp;"),"#,
        "gantt => Value::from_safe_string(x),",
    ] {
        assert!(hand_built(bad).is_some(), "not caught: {bad}");
    }
    assert!(hand_built(r#"let v: Vec<String> = vec!["a < b".into()];"#).is_none());
    assert!(hand_built(r#"format!("{} < {}", a, b)"#).is_none());
    assert!(hand_built("fn lanes(bars: &[Bar]) -> BTreeMap<&str, Vec<Vec<&Bar>>> {").is_none());
}
