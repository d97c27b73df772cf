//! The one voice for diagnostics: everything below the CLI says what it
//! noticed through `tracing` (`warn!`, `error!`, and `debug!`/`trace!` for
//! why weir decided what it did), and this is the one place that decides
//! how it reaches a person. By default a record is the line the library
//! used to print itself (`warning: ...`, `error: ...`, a bare line for
//! `info`), so scripts and tests that read stderr see no difference; `-v`,
//! `-vv` and `WEIR_LOG` (a filter, `weir::store=debug`) show more.
//! `weir serve --log-format json` writes these lines as JSON too, so a log
//! shipper reads both of serve's streams the same way.

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// The environment variable that raises (or lowers) what is shown.
pub(crate) const ENV: &str = "WEIR_LOG";

/// How a diagnostic line is written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// `warning: ...`: what weir printed before it had levels.
    Text,
    /// One JSON object a line: `ts`, `level`, `target`, `message`, fields.
    Json,
}

/// The filter for `verbose` `-v`s, then `env`'s directives: a directive
/// there for a target overrides the default for it, so
/// `WEIR_LOG=weir::store=debug` adds detail and keeps every warning.
pub(crate) fn filter(verbose: u8, env: Option<&str>) -> Result<EnvFilter, String> {
    // Other crates' records (hyper, object_store's retries) stay out
    // unless WEIR_LOG names them: by default stderr is weir's own words.
    let level = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let mut directives = format!("weir={level}");
    if let Some(env) = env.map(str::trim).filter(|e| !e.is_empty()) {
        directives.push(',');
        directives.push_str(env);
    }
    EnvFilter::builder()
        .with_regex(false)
        .parse(&directives)
        .map_err(|e| {
            format!(
                "{ENV}: `{}` is not a filter ({e})\n  help: targets and levels joined by commas, e.g. `{ENV}=weir::store=debug,weir::exec=trace`",
                env.unwrap_or_default()
            )
        })
}

/// Installs the one subscriber for this process (every thread).
pub(crate) fn install(filter: EnvFilter, format: Format) {
    // Err only when a subscriber is already set (a second call in one
    // process, as in-process tests may do): the first one stays.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .event_format(Lines { format })
        .with_writer(std::io::stderr)
        .try_init();
}

/// Writes a record as one line of [`Format`].
struct Lines {
    format: Format,
}

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut out: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        match self.format {
            Format::Text => writeln!(out, "{}", text(*meta.level(), meta.target(), &fields)),
            Format::Json => writeln!(out, "{}", json(*meta.level(), meta.target(), fields)),
        }
    }
}

/// A record's message and its other fields, in the order written.
#[derive(Default)]
struct Fields {
    message: String,
    rest: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // A message is `format_args!`, whose Debug is its text.
        self.put(field, format!("{value:?}"));
    }
}

impl Fields {
    fn put(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.rest.push((field.name(), value));
        }
    }
}

/// The text line: warnings and errors exactly as weir has always printed
/// them; detail (`-v`) names its module, the target `WEIR_LOG` filters on.
fn text(level: Level, target: &str, fields: &Fields) -> String {
    let mut line = match level {
        Level::ERROR => format!("error: {}", fields.message),
        Level::WARN => format!("warning: {}", fields.message),
        Level::INFO => fields.message.clone(),
        Level::DEBUG => format!("debug: {target}: {}", fields.message),
        Level::TRACE => format!("trace: {target}: {}", fields.message),
    };
    for (name, value) in &fields.rest {
        let _ = write!(line, " {name}={value}");
    }
    line
}

/// The JSON line: serve's decision log's `ts`, then the record.
fn json(level: Level, target: &str, fields: Fields) -> String {
    let mut object = serde_json::Map::new();
    let now = crate::serve::instant(crate::clock::now());
    object.insert("ts".into(), now.into());
    object.insert("level".into(), level.as_str().to_lowercase().into());
    object.insert("target".into(), target.into());
    object.insert("message".into(), fields.message.into());
    for (name, value) in fields.rest {
        object.insert(name.into(), value.into());
    }
    serde_json::Value::Object(object).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(message: &str, rest: &[(&'static str, &str)]) -> Fields {
        Fields {
            message: message.into(),
            rest: rest.iter().map(|(n, v)| (*n, v.to_string())).collect(),
        }
    }

    #[test]
    fn warnings_and_errors_read_as_they_always_did() {
        let f = fields("the disk is full", &[]);
        assert_eq!(
            text(Level::WARN, "weir::store", &f),
            "warning: the disk is full"
        );
        assert_eq!(
            text(Level::ERROR, "weir::exec", &f),
            "error: the disk is full"
        );
        assert_eq!(text(Level::INFO, "weir::store", &f), "the disk is full");
        let f = fields("retrying", &[("attempt", "2")]);
        assert_eq!(
            text(Level::DEBUG, "weir::exec::retry", &f),
            "debug: weir::exec::retry: retrying attempt=2"
        );
    }

    #[test]
    fn a_json_line_carries_level_target_and_fields() {
        let line = json(
            Level::WARN,
            "weir::notify",
            fields("late", &[("task", "t")]),
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "warn");
        assert_eq!(v["target"], "weir::notify");
        assert_eq!(v["message"], "late");
        assert_eq!(v["task"], "t");
        assert!(v["ts"].is_string());
    }

    #[test]
    fn a_bad_filter_names_the_variable_and_how_to_write_one() {
        let e = filter(0, Some("weir=loud")).unwrap_err();
        assert!(
            e.starts_with("WEIR_LOG: `weir=loud` is not a filter"),
            "{e}"
        );
        assert!(filter(2, Some("weir::store=debug")).is_ok());
        assert!(filter(0, Some("  ")).is_ok());
    }
}
