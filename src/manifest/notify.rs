//! `[notify.NAME]` targets (docs/guides/notifications.md) and the HTTP endpoint
//! shape they share with `[lineage] url`: a URL and headers whose values
//! may be `env:`/`file:` secrets, read only when something is sent.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::suggest::unknown_help;
use super::task_env::EnvValue;
use super::validator::Validator;
use super::ManifestError;
use super::ManifestErrorKind;

/// `[notify.NAME]`: where notifications go and which ones.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawNotifyTarget {
    /// An `http://` or `https://` endpoint the notification's JSON is POSTed to.
    pub url: Option<String>,
    /// A command (program and arguments, run in the manifest's directory)
    /// that reads the notification's JSON on stdin; exit 0 = delivered.
    pub command: Option<Vec<String>>,
    /// HTTP headers of a `url` target: a literal value, `"env:NAME"` or
    /// `"file:PATH"` (secrets, never written into events, records or reports).
    #[serde(default)]
    pub headers: IndexMap<String, String>,
    /// Which facts: `failed`, `quarantined`, `held`, `late`, `missed`,
    /// `published`, `recovered`.
    #[schemars(extend("items" = { "enum": ["failed", "quarantined", "held", "late", "missed", "published", "recovered"] }))]
    pub on: Vec<String>,
    /// Only these tasks (default: every task).
    pub tasks: Option<Vec<String>>,
    /// The environment of a `command` target, as a task's `env`: exactly
    /// its `pass` names of the engine's environment and its `set` values
    /// (`env:`/`file:` references are secrets). Without it, the engine's
    /// environment minus weir's secrets.
    pub env: Option<super::task_env::RawTaskEnv>,
}

/// What a notification announces; one per fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyKind {
    /// The engine could not do its own work for an instance (ENGINE_FAILED);
    /// as `on` it also asks for `quarantined` and `held`: every final
    /// failure of an instance in a run, never a failed attempt that is retried.
    Failed,
    /// A failure decided QUARANTINED.
    Quarantined,
    /// A failure decided HELD for an operator.
    Held,
    /// An instance past its SLA and not published (LATE).
    Late,
    /// A due partition skipped after downtime (MISSED).
    Missed,
    /// A new generation is published.
    Published,
    /// An instance whose failure was announced publishes again.
    Recovered,
}

impl NotifyKind {
    /// Every kind, in the order of docs/guides/notifications.md.
    pub const ALL: [NotifyKind; 7] = [
        NotifyKind::Failed,
        NotifyKind::Quarantined,
        NotifyKind::Held,
        NotifyKind::Late,
        NotifyKind::Missed,
        NotifyKind::Published,
        NotifyKind::Recovered,
    ];

    /// The name in `on` and in the notification's `event`.
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyKind::Failed => "failed",
            NotifyKind::Quarantined => "quarantined",
            NotifyKind::Held => "held",
            NotifyKind::Late => "late",
            NotifyKind::Missed => "missed",
            NotifyKind::Published => "published",
            NotifyKind::Recovered => "recovered",
        }
    }

    /// A final failure of an instance: the alarms `recovered` answers.
    pub fn is_alarm(self) -> bool {
        matches!(
            self,
            NotifyKind::Failed | NotifyKind::Quarantined | NotifyKind::Held
        )
    }
}

/// An HTTP endpoint weir POSTs JSON to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpEndpoint {
    /// `http://` or `https://`.
    pub url: String,
    /// Header names and values; `env:`/`file:` values are read when sending.
    pub headers: Vec<(String, EnvValue)>,
}

/// Where a target's notifications go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifySink {
    /// POSTed as JSON.
    Http(HttpEndpoint),
    /// A program and its arguments; the JSON on stdin.
    Command(Vec<String>),
}

/// A validated `[notify.NAME]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyTarget {
    /// Its name: where its deliveries are recorded in the warehouse.
    pub name: String,
    /// Where.
    pub sink: NotifySink,
    /// Which facts.
    pub on: Vec<NotifyKind>,
    /// Only these tasks; `None` = all.
    pub tasks: Option<Vec<String>>,
    /// A `command` target's declared environment; `None`: the engine's,
    /// minus weir's secrets (`exec/env.rs`).
    pub env: Option<super::task_env::EnvSpec>,
}

impl NotifyTarget {
    /// Whether a fact of `kind` about `task` goes to this target.
    pub fn wants(&self, kind: NotifyKind, task: &str) -> bool {
        let asked = self.on.contains(&kind)
            || (self.on.contains(&NotifyKind::Failed)
                && matches!(kind, NotifyKind::Quarantined | NotifyKind::Held));
        asked
            && self
                .tasks
                .as_ref()
                .is_none_or(|t| t.iter().any(|t| t == task))
    }
}

/// A header name HTTP accepts (RFC 9110 token).
fn header_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A target name: the one path segment its records live under.
fn target_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Why a URL cannot be sent to by this build, if it cannot.
pub(super) fn url_problem(url: &str) -> Option<&'static str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    match rest {
        None => Some("not an http:// or https:// URL"),
        Some(host) if host.is_empty() || host.starts_with('/') => Some("names no host"),
        Some(_) if !cfg!(feature = "http") => {
            Some("this weir was built without the `http` feature")
        }
        Some(_) => None,
    }
}

impl Validator<'_, '_, '_, '_> {
    /// `headers = { ... }` at `at` (a path to the table).
    pub(super) fn headers(
        &mut self,
        at: &[&str],
        raw: &IndexMap<String, String>,
    ) -> Vec<(String, EnvValue)> {
        let mut headers = Vec::new();
        let owner = at.join(".");
        for (name, text) in raw {
            let mut path = at.to_vec();
            path.push(name);
            if !header_name_ok(name) {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::HeaderName,
                        format!("`{name}` in `{owner}` is not an HTTP header name"),
                    )
                    .at(self.key(&path), "not a header name")
                    .help("use letters, digits and `-`, e.g. `Authorization` or `X-Api-Key`"),
                );
                continue;
            }
            match super::task_env::parse_value(text) {
                Ok(value) => headers.push((name.clone(), value)),
                Err(why) => self.err(
                    ManifestError::new(
                        ManifestErrorKind::HeaderReference,
                        format!("`{owner}.{name}`: {why}"),
                    )
                    .at(self.value(&path), "bad reference")
                    .help("write `\"env:NAME\"` for the engine's variable NAME, `\"file:/run/secrets/x\"` for a file's content, or a literal value"),
                ),
            }
        }
        headers
    }

    /// Every `[notify.NAME]`; `tasks` are the declared task names.
    pub(super) fn notify(
        &mut self,
        entries: &[super::Entry<RawNotifyTarget>],
        tasks: &[String],
    ) -> IndexMap<String, NotifyTarget> {
        let mut targets = IndexMap::new();
        for entry in entries {
            let name = entry.name.as_str();
            if !target_name_ok(name) {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::NotifyName,
                        format!("`{name}` is not a notification target name"),
                    )
                    .at(self.key(&["notify", name]), "bad name")
                    .help("use 1 to 64 letters, digits, `_` and `-`, e.g. `[notify.oncall]`"),
                );
                continue;
            }
            let Some(raw) = &entry.raw else { continue };
            if let Some(target) = self.notify_target(name, raw, tasks) {
                targets.insert(name.to_owned(), target);
            }
        }
        targets
    }

    fn notify_target(
        &mut self,
        name: &str,
        raw: &RawNotifyTarget,
        tasks: &[String],
    ) -> Option<NotifyTarget> {
        let errors = self.errors.len();
        let sink = self.notify_sink(name, raw)?;
        let on = self.notify_on(name, raw);
        self.check_notify_tasks(name, raw, tasks);
        let env = self.notify_env(name, raw);
        (self.errors.len() == errors).then(|| NotifyTarget {
            name: name.to_owned(),
            sink,
            on,
            tasks: raw.tasks.clone(),
            env,
        })
    }

    /// The environment of a `command` target (`env`), which a `url`
    /// target does not take.
    fn notify_env(
        &mut self,
        name: &str,
        raw: &RawNotifyTarget,
    ) -> Option<super::task_env::EnvSpec> {
        let env = raw.env.as_ref()?;
        if raw.command.is_none() {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::NotifyHeaders,
                    format!("`notify.{name}.env` is for a `command` target, not a `url`"),
                )
                .at(self.key(&["notify", name, "env"]), "no command runs here")
                .help("a `url` target sends `headers`; remove `env`"),
            );
            return None;
        }
        let owner = format!("notify target `{name}`");
        self.env_spec(&owner, &["notify", name, "env"], Some(env))
    }

    /// Where a notification goes: a URL with its headers, or a command.
    fn notify_sink(&mut self, name: &str, raw: &RawNotifyTarget) -> Option<NotifySink> {
        Some(match (&raw.url, &raw.command) {
            (Some(url), None) => {
                if let Some(why) = url_problem(url) {
                    self.err(
                        ManifestError::new(
                            ManifestErrorKind::NotifyUrl,
                            format!("`notify.{name}.url`: {why}"),
                        )
                        .at(self.value(&["notify", name, "url"]), why)
                        .help("e.g. `url = \"https://hooks.example.com/weir\"`, or `command = [\"sh\", \"notify.sh\"]`"),
                    );
                }
                let headers = self.headers(&["notify", name, "headers"], &raw.headers);
                NotifySink::Http(HttpEndpoint {
                    url: url.clone(),
                    headers,
                })
            }
            (None, Some(command)) => {
                if command.first().is_none_or(|p| p.trim().is_empty()) {
                    self.err(
                        ManifestError::new(
                            ManifestErrorKind::NotifyCommand,
                            format!("`notify.{name}.command` names no program"),
                        )
                        .at(self.value(&["notify", name, "command"]), "empty")
                        .help("e.g. `command = [\"sh\", \"notify.sh\"]`: the notification's JSON is on its stdin"),
                    );
                }
                if !raw.headers.is_empty() {
                    self.err(
                        ManifestError::new(
                            ManifestErrorKind::NotifyHeaders,
                            format!(
                                "`notify.{name}.headers` are for a `url` target, not a `command`"
                            ),
                        )
                        .at(self.key(&["notify", name, "headers"]), "not sent anywhere")
                        .help("a command reads its secrets itself; remove `headers`"),
                    );
                }
                NotifySink::Command(command.clone())
            }
            _ => {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::NotifySink,
                        format!("`[notify.{name}]` needs exactly one of `url` and `command`"),
                    )
                    .at(self.key(&["notify", name]), "here")
                    .help("`url = \"https://hooks.example.com/weir\"` or `command = [\"sh\", \"notify.sh\"]`"),
                );
                return None;
            }
        })
    }

    /// The facts a target is sent, each once.
    fn notify_on(&mut self, name: &str, raw: &RawNotifyTarget) -> Vec<NotifyKind> {
        let known: Vec<&str> = NotifyKind::ALL.iter().map(|k| k.as_str()).collect();
        let mut on = Vec::new();
        for (i, text) in raw.on.iter().enumerate() {
            let idx = i.to_string();
            match NotifyKind::ALL.iter().find(|k| k.as_str() == text) {
                Some(kind) if !on.contains(kind) => on.push(*kind),
                Some(_) => {}
                None => self.err(
                    ManifestError::new(
                        ManifestErrorKind::NotifyOn,
                        format!("`notify.{name}.on` names unknown fact `{text}`"),
                    )
                    .at(self.value(&["notify", name, "on", &idx]), "unknown")
                    .help(unknown_help("fact", text, known.iter().copied())),
                ),
            }
        }
        if raw.on.is_empty() {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::NotifyOn,
                    format!("`notify.{name}.on` is empty: nothing would be sent"),
                )
                .at(self.value(&["notify", name, "on"]), "empty")
                .help(format!("name at least one of {}", super::ticked(&known))),
            );
        }
        on
    }

    /// The tasks a target selects exist.
    fn check_notify_tasks(&mut self, name: &str, raw: &RawNotifyTarget, tasks: &[String]) {
        if let Some(selected) = &raw.tasks {
            for (i, task) in selected.iter().enumerate() {
                if !tasks.contains(task) {
                    let idx = i.to_string();
                    self.err(
                        ManifestError::new(
                            ManifestErrorKind::UnknownTask,
                            format!("`notify.{name}.tasks` names unknown task `{task}`"),
                        )
                        .at(self.value(&["notify", name, "tasks", &idx]), "unknown task")
                        .help(unknown_help(
                            "task",
                            task,
                            tasks.iter().map(String::as_str),
                        )),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_asks_for_every_final_failure_and_tasks_filter() {
        let target = NotifyTarget {
            name: "t".into(),
            sink: NotifySink::Command(vec!["true".into()]),
            on: vec![NotifyKind::Failed],
            tasks: Some(vec!["load".into()]),
            env: None,
        };
        assert!(target.wants(NotifyKind::Quarantined, "load"));
        assert!(target.wants(NotifyKind::Held, "load"));
        assert!(target.wants(NotifyKind::Failed, "load"));
        assert!(!target.wants(NotifyKind::Published, "load"));
        assert!(!target.wants(NotifyKind::Recovered, "load"));
        assert!(!target.wants(NotifyKind::Held, "extract"));
        assert!(header_name_ok("X-Api-Key") && !header_name_ok("Bad Header"));
        assert!(target_name_ok("on-call_1") && !target_name_ok("a/b"));
    }
}
