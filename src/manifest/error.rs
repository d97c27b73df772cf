//! Manifest diagnostics: where (file and span) kept apart from what (code,
//! message, help), rendered by miette with the offending key underlined.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode,
};

/// One problem in a manifest.
#[derive(Debug, Clone)]
pub struct ManifestError {
    src: Option<NamedSource<Arc<str>>>,
    /// Stable identifier, e.g. `weir::manifest::unknown_pool`.
    pub code: &'static str,
    /// What is wrong: lowercase, identifiers in backticks.
    pub message: String,
    /// The primary span and its label.
    pub primary: Option<(Range<usize>, String)>,
    /// Further spans worth pointing at (each end of a cycle, a first declaration).
    pub secondary: Vec<(Range<usize>, String)>,
    /// How to fix it.
    pub help: Option<String>,
    /// A warning: the manifest is valid, but probably not what was meant.
    warning: bool,
}

impl ManifestError {
    /// A problem with no location in the source (an unreadable file).
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        ManifestError {
            src: None,
            code,
            message: message.into(),
            primary: None,
            secondary: Vec::new(),
            help: None,
            warning: false,
        }
    }

    /// Makes it a warning: printed (by `validate`, `plan`, `run` and
    /// `backfill`), never a reason to refuse the manifest.
    pub fn warning(mut self) -> Self {
        self.warning = true;
        self
    }

    /// Whether it is a warning.
    pub fn is_warning(&self) -> bool {
        self.warning
    }

    /// Points at `span` with `label`.
    pub fn at(mut self, span: Range<usize>, label: impl Into<String>) -> Self {
        self.primary = Some((span, label.into()));
        self
    }

    /// Points also at `span`.
    pub fn also(mut self, span: Range<usize>, label: impl Into<String>) -> Self {
        self.secondary.push((span, label.into()));
        self
    }

    /// Says how to fix it.
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub(crate) fn with_source(mut self, src: NamedSource<Arc<str>>) -> Self {
        self.src = Some(src);
        self
    }

    /// 1-based line and column of the primary span, for tests and JSON output.
    pub fn line_col(&self) -> Option<(usize, usize)> {
        let (span, _) = self.primary.as_ref()?;
        let text = self.src.as_ref()?.inner();
        let before = &text[..span.start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Some((line, col))
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ManifestError {}

impl Diagnostic for ManifestError {
    fn severity(&self) -> Option<miette::Severity> {
        Some(if self.warning {
            miette::Severity::Warning
        } else {
            miette::Severity::Error
        })
    }

    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.code))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.primary.as_ref()?;
        self.src.as_ref().map(|s| s as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let (span, label) = self.primary.as_ref()?;
        let primary = LabeledSpan::new_primary_with_span(Some(label.clone()), span.clone());
        let rest = self
            .secondary
            .iter()
            .map(|(s, l)| LabeledSpan::new_with_span(Some(l.clone()), s.clone()));
        Some(Box::new(std::iter::once(primary).chain(rest)))
    }
}

/// Every problem found in one manifest, in source order.
#[derive(Debug, Clone)]
pub struct ManifestErrors {
    /// The file, as the user named it.
    pub file: String,
    /// The problems.
    pub errors: Vec<ManifestError>,
}

impl fmt::Display for ManifestErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(
            f,
            "`{}` is not a valid manifest: {n} {}",
            self.file,
            if n == 1 { "error" } else { "errors" }
        )
    }
}

impl std::error::Error for ManifestErrors {}

impl ManifestErrors {
    /// Renders every error as miette does, then a one-line summary. `color`
    /// is for terminals; tests use the plain unicode theme at width 80.
    pub fn render(&self, color: bool, width: usize) -> String {
        let mut out = render_each(&self.errors, color, width);
        out.push_str(&format!("error: {self}\n"));
        out
    }
}

/// Renders warnings as miette does (each marked as a warning), without a
/// summary line: the manifest they belong to is valid.
pub fn render_warnings(warnings: &[ManifestError], color: bool, width: usize) -> String {
    render_each(warnings, color, width)
}

/// Each diagnostic rendered as miette does, one after another.
fn render_each(diagnostics: &[ManifestError], color: bool, width: usize) -> String {
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(width)
        .with_links(false);
    let mut out = String::new();
    for diagnostic in diagnostics {
        // Writing into a String cannot fail.
        let _ = handler.render_report(&mut out, diagnostic);
        out.push('\n');
    }
    out
}

/// Rewrites serde's and toml's wording into ours: no "variant", no "field",
/// no "invalid type".
pub(crate) fn humanize_serde(message: &str) -> (String, Option<String>) {
    let message = message.trim().trim_end_matches('.');
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (name, expected) = split_expected(rest);
        let help = expected.map(|e| format!("valid keys here: {e}"));
        return (format!("unknown key {name}"), help);
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (name, expected) = split_expected(rest);
        let help = expected.map(|e| format!("expected {e}"));
        return (format!("unknown value {name}"), help);
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        return (format!("missing required key {rest}"), None);
    }
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            let expected = expected
                .replace("a sequence", "an array")
                .replace("a map", "a table")
                .replace("struct ", "table ")
                .replace("i64", "an integer")
                .replace("f64", "a number");
            let found = found.replace("sequence", "array").replace("map", "table");
            return (
                format!("wrong type: expected {expected}, found {found}"),
                None,
            );
        }
    }
    if let Some(rest) = message.strip_prefix("invalid value: ") {
        return (format!("invalid value: {rest}"), None);
    }
    (message.to_string(), None)
}

fn split_expected(rest: &str) -> (&str, Option<String>) {
    match rest.split_once(", expected ") {
        Some((name, expected)) => {
            let expected = expected.trim_start_matches("one of ").to_string();
            (name, Some(expected))
        }
        None => match rest.split_once(", there are no fields") {
            Some((name, _)) => (name, Some("none".into())),
            None => (rest, None),
        },
    }
}
