//! What stderr is: whether it takes colors, how wide it is, and a
//! diagnostic rendered for it.

use std::io::IsTerminal;

use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme};

/// Prints any diagnostic the way miette renders it, without a backtrace.
pub(crate) fn report(error: &dyn Diagnostic) {
    let theme = if color() {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let mut out = String::new();
    let handler = GraphicalReportHandler::new_themed(theme).with_width(terminal_width());
    if handler.render_report(&mut out, error).is_err() {
        out = format!("error: {error}\n");
    }
    eprint!("{out}");
}

pub(super) fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100)
}

/// Whether stderr gets colors and other escape codes: only on a terminal,
/// and never when `NO_COLOR` is set to anything non-empty (no-color.org).
pub(crate) fn color() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
