//! The one HTML path: every page weir writes (the report, `weir plan
//! --html`, the console's pages) is a minijinja template whose name ends in
//! `.html`, so every `{{ value }}` is HTML-escaped on output. Task names,
//! partition keys, run ids, stderr and gate messages are text anyone may
//! have written; no code builds markup around them by hand.
//!
//! The Rust side computes a page's model (lanes, bars, percentages, grid
//! cells) as serde structs; a template only lays it out. The console adds
//! its own templates to [`environment`] and includes the report's fragments
//! (`report/gantt.html`, `report/lanes.html`) by name.

use std::sync::OnceLock;

use minijinja::Environment;
use serde::Serialize;

/// The report's stylesheet, also served by the console.
pub(crate) const STYLE: &str = include_str!("templates/style.css");

/// The report's templates, by the names pages include them with.
const TEMPLATES: [(&str, &str); 9] = [
    ("report/style.css", STYLE),
    ("report/page.html", include_str!("templates/page.html")),
    (
        "report/problems.html",
        include_str!("templates/problems.html"),
    ),
    ("report/grid.html", include_str!("templates/grid.html")),
    ("report/gantt.html", include_str!("templates/gantt.html")),
    ("report/lanes.html", include_str!("templates/lanes.html")),
    (
        "report/history.html",
        include_str!("templates/history.html"),
    ),
    ("report/slo.html", include_str!("templates/slo.html")),
    ("report/plan.html", include_str!("templates/plan.html")),
];

/// A template environment holding the report's templates, escaping every
/// value of a `*.html` template (minijinja's default, by name).
pub(crate) fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    for (name, source) in TEMPLATES {
        env.add_template(name, source)
            .expect("the report's templates are valid (tests render each)");
    }
    env
}

/// Renders the report's template `name` with `model` as its context.
pub(crate) fn render(name: &str, model: &impl Serialize) -> Result<String, minijinja::Error> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    let mut page = ENV
        .get_or_init(environment)
        .get_template(name)?
        .render(minijinja::Value::from(minijinja::value::Serde(model)))?;
    // minijinja drops a template's last newline; a file ends with one.
    page.push('\n');
    Ok(page)
}

/// A lane of `report/lanes.html`: a pool slot of a run or a plan, a task's
/// span, or a pool's busy slots.
#[derive(Debug, Serialize)]
pub(crate) struct Lane {
    /// Its CSS classes (`lane`, `lane util`).
    pub(crate) class: &'static str,
    /// What it is a lane of: its `data-` attribute (`pool`, `task`).
    pub(crate) attr: &'static str,
    /// That attribute's value.
    pub(crate) key: String,
    /// The text in front of the track.
    pub(crate) label: String,
    /// Its bars, in order.
    pub(crate) bars: Vec<Bar>,
}

impl Lane {
    /// The `n`th (0-based) lane of `pool`: one per slot its bars need.
    pub(crate) fn of_pool(pool: &str, n: usize, bars: Vec<Bar>) -> Lane {
        Lane {
            class: "lane",
            attr: "pool",
            key: pool.to_owned(),
            label: format!("{pool} {}", n + 1),
            bars,
        }
    }
}

/// A bar on a lane's track.
#[derive(Debug, Serialize)]
pub(crate) struct Bar {
    /// Its outcome or kind as a CSS class (`success`, `planned`, …).
    pub(crate) class: &'static str,
    /// Its position on the track, from numbers only ([`place`]).
    pub(crate) style: String,
    /// Its hover text.
    pub(crate) title: Option<String>,
}

/// A bar's inline style: `left` and `width` in percent of the track, and
/// for a utilisation column its `height` from the bottom.
pub(crate) fn place(left: f64, width: f64, height: Option<f64>) -> String {
    match height {
        None => format!("left:{left:.3}%;width:{width:.3}%"),
        Some(h) => format!("left:{left:.3}%;width:{width:.3}%;top:auto;bottom:0;height:{h:.1}%"),
    }
}
