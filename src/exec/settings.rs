//! The engine's settings: what `WEIR_STAGING`, `WEIR_CGROUP`,
//! `WEIR_POOL_TIMEOUT`, `WEIR_FAULT` and `WEIR_CHAOS` say, as typed values.
//!
//! The edge (the command line, which also starts `weir serve`) reads the
//! environment once into a [`Settings`] with [`Settings::read`], refusing a
//! bad value before anything runs, and passes it down: the staging
//! directory to the manifest's loading, the rest in
//! [`super::RunOptions::settings`] and to the operator actions that have
//! fault points. Nothing below the edge reads these variables, so a library
//! user or a test sets them without touching the process environment.

use std::ffi::OsString;
use std::path::PathBuf;

use super::fault::{Chaos, Faults};
use crate::process::tree;
use crate::store::slots::SlotTiming;

/// Why a setting from the environment is refused: which variable, which
/// value, what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// A value outside a fixed set of words.
    #[error("{var}={value}: expected {expected}")]
    NotOneOf {
        /// The variable.
        var: &'static str,
        /// Its value (lossily decoded).
        value: String,
        /// The words accepted, in prose.
        expected: &'static str,
    },
    /// A value that is not a duration.
    #[error("{var}: {error}")]
    Duration {
        /// The variable.
        var: &'static str,
        /// Why its value is not a duration.
        error: crate::manifest::duration::DurationError,
    },
    /// A duration below the shortest that works.
    #[error("{var}: `{value}` is shorter than {min}: {why}")]
    TooShort {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// The shortest accepted, as written in messages.
        min: &'static str,
        /// What a shorter one would break.
        why: &'static str,
    },
}

/// The settings a process runs with; the default is an unset environment.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `WEIR_STAGING`: the directory under which an S3 warehouse stages
    /// attempts and materialised inputs; `None`, the user's cache
    /// (`manifest::staging_dir`).
    pub staging: Option<PathBuf>,
    /// `WEIR_CGROUP`: the cgroup hierarchies launches may use.
    pub cgroups: tree::Setting,
    /// `WEIR_POOL_TIMEOUT`: how often this engine beats in the
    /// warehouse's pools and after how long without a beat an engine loses
    /// its slots.
    pub pool_timing: SlotTiming,
    /// `WEIR_FAULT`: the fault points armed.
    pub faults: Faults,
    /// `WEIR_CHAOS`: injected task failures, if any.
    pub chaos: Option<Chaos>,
}

impl Settings {
    /// The settings `var` gives (at the edge, the process environment:
    /// `|name| std::env::var_os(name)`), or the message refusing the first
    /// bad one (`WEIR_CGROUP=yes: expected …`). A value that is not UTF-8
    /// counts as unset for the settings that read text, as it always did.
    pub fn read(var: impl Fn(&str) -> Option<OsString>) -> Result<Settings, SettingError> {
        let text = |name: &str| var(name).and_then(|v| v.into_string().ok());
        let cgroup = var("WEIR_CGROUP");
        let cgroups =
            tree::Setting::parse(cgroup.as_deref()).map_err(|_| SettingError::NotOneOf {
                var: "WEIR_CGROUP",
                value: cgroup.unwrap_or_default().to_string_lossy().into_owned(),
                expected: "`on` (the default), `v2`, `v1` or `off`",
            })?;
        let pool_timing = match text("WEIR_POOL_TIMEOUT") {
            Some(t) => pool_timing(&t)?,
            None => SlotTiming::default(),
        };
        Ok(Settings {
            staging: var("WEIR_STAGING")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            cgroups,
            pool_timing,
            faults: text("WEIR_FAULT").map_or_else(Faults::default, |t| Faults::parse(&t)),
            chaos: text("WEIR_CHAOS").and_then(|t| Chaos::parse(&t)),
        })
    }
}

/// One timing out after `text` (a duration such as `30s`).
fn pool_timing(text: &str) -> Result<SlotTiming, SettingError> {
    const VAR: &str = "WEIR_POOL_TIMEOUT";
    let timeout = crate::manifest::duration::parse(text)
        .map_err(|error| SettingError::Duration { var: VAR, error })?;
    SlotTiming::with_timeout(timeout).ok_or_else(|| SettingError::TooShort {
        var: VAR,
        value: text.to_string(),
        min: "500ms",
        why: "scheduling delays would look like dead engines",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{run, InstanceResult, RunOptions};
    use crate::manifest::Manifest;
    use std::time::Duration;

    fn read(pairs: &[(&str, &str)]) -> Result<Settings, SettingError> {
        Settings::read(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn settings_are_read_from_the_lookup_given_and_bad_values_refused() {
        let unset = read(&[]).unwrap();
        assert_eq!(unset.staging, None);
        assert_eq!(unset.cgroups, tree::Setting::On);
        assert_eq!(unset.pool_timing, SlotTiming::default());
        assert!(unset.chaos.is_none());
        let set = read(&[
            ("WEIR_STAGING", "/s"),
            ("WEIR_CGROUP", "off"),
            ("WEIR_POOL_TIMEOUT", "2s"),
            ("WEIR_CHAOS", "seed=1,transient=1"),
            ("WEIR_FAULT", "after_commit@t:fail"),
        ])
        .unwrap();
        assert_eq!(set.staging, Some(PathBuf::from("/s")));
        assert_eq!(set.cgroups, tree::Setting::Off);
        assert_eq!(set.pool_timing.timeout, Duration::from_secs(2));
        assert_eq!(set.chaos.map(|c| c.exit_code("t", "p", 1)), Some(Some(75)));
        assert!(set
            .faults
            .hit(super::super::fault::Point::AfterCommit, "t", "p")
            .is_err());
        assert_eq!(read(&[("WEIR_STAGING", "")]).unwrap().staging, None);
        let cgroup = read(&[("WEIR_CGROUP", "yes")]).unwrap_err();
        assert!(
            matches!(&cgroup, SettingError::NotOneOf { var: "WEIR_CGROUP", value, .. } if value == "yes"),
            "{cgroup:?}"
        );
        assert_eq!(
            cgroup.to_string(),
            "WEIR_CGROUP=yes: expected `on` (the default), `v2`, `v1` or `off`"
        );
        let short = read(&[("WEIR_POOL_TIMEOUT", "100ms")]).unwrap_err();
        assert!(
            matches!(&short, SettingError::TooShort { var: "WEIR_POOL_TIMEOUT", value, .. } if value == "100ms"),
            "{short:?}"
        );
        assert_eq!(
            short.to_string(),
            "WEIR_POOL_TIMEOUT: `100ms` is shorter than 500ms: scheduling delays would look like dead engines"
        );
        assert_eq!(
            read(&[("WEIR_POOL_TIMEOUT", "30x")]).unwrap_err(),
            SettingError::Duration {
                var: "WEIR_POOL_TIMEOUT",
                error: crate::manifest::duration::DurationError::UnknownUnit { unit: "x".into() }
            }
        );
    }

    /// What each instance of `keys` of a one-task pipeline ends as, run
    /// with `settings`.
    fn run_with(settings: Settings) -> Vec<(String, InstanceResult)> {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("m.toml");
        std::fs::write(
            &path,
            r#"[pipeline]
name = "settings"
code_version = "v1"
warehouse = "warehouse"

[partitions.parts]
kind = "static"
keys = ["a", "b"]

[tasks.write]
command = ["sh", "-c", "printf 'id\n1\n' > \"$WEIR_OUTPUT_DIR/out.csv\""]
output = { dataset = "rows", format = "csv", grain = ["id"] }
partitioned_by = "parts"
"#,
        )
        .unwrap();
        let manifest = Manifest::load(&path).unwrap_or_else(|e| panic!("{:?}", e.errors));
        let options = RunOptions {
            scope: crate::plan::Scope::Latest,
            tasks: Vec::new(),
            force: false,
            resume_since: None,
            run_id: None,
            seed: Some(1),
            allow_uncertified: false,
            wait: None,
            settings,
            signed: None,
        };
        let mut out: Vec<_> = run(&manifest, &options, None)
            .unwrap()
            .instances
            .into_iter()
            .map(|(_, p, r)| (p, r))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    #[test]
    fn a_fault_passed_in_the_settings_fires_without_the_environment() {
        let settings = Settings {
            faults: Faults::parse("before_commit@write/a:fail"),
            ..Settings::default()
        };
        let ends = run_with(settings);
        assert!(
            matches!(&ends[0], (p, InstanceResult::EngineFailed(w)) if p == "a" && w.contains("injected failure at BeforeCommit")),
            "{ends:?}"
        );
        assert_eq!(ends[1], ("b".to_string(), InstanceResult::Published));
    }

    #[test]
    fn chaos_passed_in_the_settings_fails_the_attempts_it_draws() {
        let settings = Settings {
            chaos: Chaos::parse("seed=1,deterministic=1"),
            ..Settings::default()
        };
        let quarantined = InstanceResult::Quarantined("deterministic failure: exit code 65".into());
        assert_eq!(
            run_with(settings),
            [("a".into(), quarantined.clone()), ("b".into(), quarantined)]
        );
    }
}
