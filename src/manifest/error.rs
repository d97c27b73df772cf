//! Manifest diagnostics: where (file and span) kept apart from what (code,
//! message, help), rendered by miette with the offending key underlined.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode,
};

/// The kinds of manifest problem. Each has a stable code, the text users,
/// scripts and `weir validate --json` see: a kind is named once here, so a
/// code cannot be misspelt where a problem is reported.
macro_rules! kinds {
    ($($kind:ident => $code:literal,)*) => {
        /// What kind of problem a [`ManifestError`] is; see [`ManifestErrorKind::code`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ManifestErrorKind {
            $(
                #[doc = concat!("`", $code, "`")]
                $kind,
            )*
        }

        impl ManifestErrorKind {
            /// Every kind, in the order declared.
            pub const ALL: &'static [ManifestErrorKind] = &[$(ManifestErrorKind::$kind,)*];

            /// The stable code, e.g. `weir::manifest::unknown_pool`.
            pub fn code(self) -> &'static str {
                match self {
                    $(ManifestErrorKind::$kind => $code,)*
                }
            }
        }
    };
}

kinds! {
    BadDate => "weir::manifest::bad_date",
    BadDuration => "weir::manifest::bad_duration",
    BadEvery => "weir::manifest::bad_every",
    BadExitCode => "weir::manifest::bad_exit_code",
    BadName => "weir::manifest::bad_name",
    BadPartitionKey => "weir::manifest::bad_partition_key",
    BadRange => "weir::manifest::bad_range",
    BadRate => "weir::manifest::bad_rate",
    BadReady => "weir::manifest::bad_ready",
    BadSchedule => "weir::manifest::bad_schedule",
    BadSlots => "weir::manifest::bad_slots",
    CrossTimezoneMapping => "weir::manifest::cross_timezone_mapping",
    Cycle => "weir::manifest::cycle",
    Duplicate => "weir::manifest::duplicate",
    DuplicateGrainColumn => "weir::manifest::duplicate_grain_column",
    DuplicateOutput => "weir::manifest::duplicate_output",
    DurationTooLong => "weir::manifest::duration_too_long",
    EmptyValue => "weir::manifest::empty_value",
    EnvName => "weir::manifest::env_name",
    EnvReference => "weir::manifest::env_reference",
    FractionalOffsetChange => "weir::manifest::fractional_offset_change",
    GateUnknownInput => "weir::manifest::gate_unknown_input",
    HeaderName => "weir::manifest::header_name",
    HeaderReference => "weir::manifest::header_reference",
    HeartbeatTooShort => "weir::manifest::heartbeat_too_short",
    InvalidShift => "weir::manifest::invalid_shift",
    InvalidValue => "weir::manifest::invalid_value",
    KeyTooLong => "weir::manifest::key_too_long",
    LineageSink => "weir::manifest::lineage_sink",
    LineageUrl => "weir::manifest::lineage_url",
    MissingCode => "weir::manifest::missing_code",
    MissingKey => "weir::manifest::missing_key",
    MissingSection => "weir::manifest::missing_section",
    NameTooLong => "weir::manifest::name_too_long",
    NotifyCommand => "weir::manifest::notify_command",
    NotifyHeaders => "weir::manifest::notify_headers",
    NotifyName => "weir::manifest::notify_name",
    NotifyOn => "weir::manifest::notify_on",
    NotifySink => "weir::manifest::notify_sink",
    NotifyUrl => "weir::manifest::notify_url",
    OutOfRange => "weir::manifest::out_of_range",
    RemoteWarehouse => "weir::manifest::remote_warehouse",
    RetentionNeedsTable => "weir::manifest::retention_needs_table",
    ScheduleOnTimeScheme => "weir::manifest::schedule_on_time_scheme",
    SchemaNeedsTable => "weir::manifest::schema_needs_table",
    SchemeMismatch => "weir::manifest::scheme_mismatch",
    SelfDependency => "weir::manifest::self_dependency",
    SelfInput => "weir::manifest::self_input",
    Syntax => "weir::manifest::syntax",
    TableNeedsParquet => "weir::manifest::table_needs_parquet",
    TimeBelowTimeout => "weir::manifest::time_below_timeout",
    UnexpectedKey => "weir::manifest::unexpected_key",
    UnknownDataset => "weir::manifest::unknown_dataset",
    UnknownFailureClass => "weir::manifest::unknown_failure_class",
    UnknownGate => "weir::manifest::unknown_gate",
    UnknownKey => "weir::manifest::unknown_key",
    UnknownPartitionScheme => "weir::manifest::unknown_partition_scheme",
    UnknownPool => "weir::manifest::unknown_pool",
    UnknownRetryClass => "weir::manifest::unknown_retry_class",
    UnknownSection => "weir::manifest::unknown_section",
    UnknownTask => "weir::manifest::unknown_task",
    UnknownTimezone => "weir::manifest::unknown_timezone",
    Unreadable => "weir::manifest::unreadable",
    WrongType => "weir::manifest::wrong_type",
}

impl fmt::Display for ManifestErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// One problem in a manifest.
#[derive(Debug, Clone)]
pub struct ManifestError {
    src: Option<NamedSource<Arc<str>>>,
    /// What kind of problem it is.
    pub kind: ManifestErrorKind,
    /// The kind's stable code (`kind.code()`), kept as text for callers
    /// that compare or print it.
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
    pub fn new(kind: ManifestErrorKind, message: impl Into<String>) -> Self {
        ManifestError {
            src: None,
            kind,
            code: kind.code(),
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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::ManifestErrorKind;

    /// A code names one kind: two kinds sharing a code could not be told
    /// apart by a script reading `weir validate --json`.
    #[test]
    fn each_kind_has_its_own_code_in_the_manifest_namespace() {
        let codes: HashSet<&str> = ManifestErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes.len(), ManifestErrorKind::ALL.len());
        for kind in ManifestErrorKind::ALL {
            let name = kind.code().strip_prefix("weir::manifest::");
            assert!(
                name.is_some_and(
                    |n| !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                ),
                "{kind:?}: {}",
                kind.code()
            );
            assert_eq!(kind.to_string(), kind.code());
        }
    }
}
