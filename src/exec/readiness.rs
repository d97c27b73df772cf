//! Readiness: whether an instance's external inputs may be read yet.
//!
//! ```text
//!  external input ── its sensor (`ready`), then its files ──► Ready ──► pin, run
//!                                                        ├─► NotYet ──► WAITING, rechecked with backoff
//!                                                        │              until the run's `--wait` ends
//!                                                        └─► Failed ──► the sensor failed (its stderr
//!                                                                       is the evidence); not retried
//! ```
//!
//! A dataset without `ready` is ready once its file (and its watermark file,
//! if declared) exists. With one, the sensor is asked first: a file that
//! exists (`file`), a watermark that reached the period's end
//! (`watermark_at_least = "period_end"`), or a command (exit 0 ready, 1 not
//! yet, anything else failed). `{partition}` is the key as written.
//!
//! [`check`] reads the world and holds no state: the scheduler (and a
//! daemon's decision machine) calls it whenever it wants to know, and
//! [`next_check`] says when to ask again.

use std::path::Path;
use std::time::{Duration, Instant};

use super::classify::Ending;

use crate::manifest::{ExternalDataset, InputSource, Manifest, Ready, Task};

/// How long a sensor command may run before it counts as failed.
pub const SENSOR_TIMEOUT: Duration = Duration::from_secs(60);

/// The most of a failed sensor's stderr kept as evidence (its end).
const EVIDENCE_BYTES: usize = 4096;

/// The first recheck of a WAITING instance comes after this; each next one
/// after twice as long, up to [`RECHECK_MAX`].
pub const RECHECK_INITIAL: Duration = Duration::from_millis(250);

/// The longest pause between two rechecks.
pub const RECHECK_MAX: Duration = Duration::from_secs(30);

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Every external input may be read.
    Ready,
    /// An input is not there yet: the instance waits (not a failure).
    NotYet(NotReady),
    /// A sensor could not say: the instance fails, with the evidence.
    Failed(SensorFailure),
}

/// An external input that is not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    /// The external dataset.
    pub dataset: String,
    /// Why, in words: "external input `raw` is not ready: raw/…/_SUCCESS
    /// does not exist".
    pub why: String,
}

/// A sensor that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SensorFailure {
    /// The external dataset.
    pub dataset: String,
    /// What went wrong, in words.
    pub why: String,
    /// The command's exit code, when it exited with one.
    pub exit_code: Option<i32>,
    /// The end of its stderr (empty for a sensor that is no command).
    pub stderr: String,
}

/// Checks every external input of `task` at `partition`, in input order;
/// the first one not ready (or failed) decides.
pub fn check(manifest: &Manifest, task: &Task, partition: &str) -> Readiness {
    check_with(manifest, task, partition, true)
}

/// [`check`], asking sensor commands only if `commands` (otherwise a
/// command sensor counts as ready and only the files are checked).
pub fn check_with(manifest: &Manifest, task: &Task, partition: &str, commands: bool) -> Readiness {
    let period_end = task.dims.interval_end(partition);
    let withheld = super::env::withheld(manifest);
    for input in &task.inputs {
        if !matches!(input.source, InputSource::External) {
            continue;
        }
        let Some(dataset) = manifest.datasets.get(&input.dataset) else {
            continue;
        };
        let skipped;
        let dataset = match &dataset.ready {
            Some(Ready::Command(_)) if !commands => {
                skipped = ExternalDataset {
                    ready: None,
                    ..dataset.clone()
                };
                &skipped
            }
            _ => dataset,
        };
        let found = check_dataset(
            &manifest.dir,
            &input.dataset,
            dataset,
            partition,
            period_end,
            &withheld,
        );
        if found != Readiness::Ready {
            return found;
        }
    }
    Readiness::Ready
}

/// Checks one external dataset at `partition` (whose period ends at
/// `period_end`, seconds since the epoch, for a time partition). A sensor
/// command without `ready.env` gets the engine's environment minus
/// `withheld` (`env::withheld`).
pub fn check_dataset(
    dir: &Path,
    name: &str,
    dataset: &ExternalDataset,
    partition: &str,
    period_end: Option<i64>,
    withheld: &[String],
) -> Readiness {
    let say = Verdict { name };
    let fill = |template: &str| template.replace("{partition}", partition);
    let sensed = match &dataset.ready {
        None => None,
        Some(Ready::File(template)) => {
            let path = fill(template);
            (!dir.join(&path).exists()).then(|| say.not_yet(&format!("{path} does not exist")))
        }
        Some(Ready::WatermarkAtPeriodEnd) => {
            watermark_short(dir, dataset, partition, period_end, say)
        }
        Some(Ready::Command(words)) => {
            let words: Vec<String> = words.iter().map(|w| fill(w)).collect();
            let sensor = Sensor {
                dir,
                words: &words,
                partition,
                period_end,
                env: dataset.sensor_env.as_ref(),
                withheld,
            };
            command_says(&sensor, say)
        }
    };
    if let Some(not_ready) = sensed {
        return not_ready;
    }
    // The default sensor, and what pinning needs whatever the sensor said:
    // the files themselves, named as `status`, `explain` and `retry` name
    // them (`snapshot::MissingExternal`).
    let files =
        std::iter::once((&dataset.path, false)).chain(dataset.watermark.iter().map(|w| (w, true)));
    for (template, watermark) in files {
        let path = dir.join(fill(template));
        if !path.exists() {
            let missing = crate::inputs::MissingExternal {
                dataset: name.to_string(),
                path,
                watermark,
            };
            return Readiness::NotYet(NotReady {
                dataset: name.to_string(),
                why: missing.to_string(),
            });
        }
    }
    Readiness::Ready
}

/// How a sensor's verdict on external input `name` is worded.
#[derive(Clone, Copy)]
struct Verdict<'a> {
    name: &'a str,
}

impl Verdict<'_> {
    fn not_yet(self, why: &str) -> Readiness {
        Readiness::NotYet(NotReady {
            dataset: self.name.to_string(),
            why: format!("external input `{}` is not ready: {why}", self.name),
        })
    }

    fn failed(self, why: &str, exit_code: Option<i32>, stderr: String) -> Readiness {
        Readiness::Failed(SensorFailure {
            dataset: self.name.to_string(),
            why: format!("the sensor of external input `{}` failed: {why}", self.name),
            exit_code,
            stderr,
        })
    }
}

/// `ready = { watermark_at_least = "period_end" }`: not ready (or failed)
/// unless the dataset's watermark file holds an instant at or past the
/// partition's period end.
fn watermark_short(
    dir: &Path,
    dataset: &ExternalDataset,
    partition: &str,
    period_end: Option<i64>,
    say: Verdict<'_>,
) -> Option<Readiness> {
    let Some(end) = period_end else {
        return Some(say.failed(
            &format!("partition {partition} has no period, so no period end to compare the watermark with"),
            None,
            String::new(),
        ));
    };
    let end_text = instant_text(end);
    // Validation guarantees a declared watermark with this sensor.
    let Some(template) = &dataset.watermark else {
        return Some(say.failed("it declares no watermark", None, String::new()));
    };
    let path = template.replace("{partition}", partition);
    let text = match crate::store::user_file::read_limited(
        &dir.join(&path),
        crate::store::user_file::WATERMARK_LIMIT,
    ) {
        Ok(text) => text.trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some(say.not_yet(&format!(
                "its watermark {path} does not exist (waiting for {end_text})"
            )));
        }
        Err(e) => {
            return Some(say.failed(&format!("cannot read {path}: {e}"), None, String::new()))
        }
    };
    let Ok(at) = text.parse::<jiff::Timestamp>() else {
        return Some(say.failed(
            &format!("its watermark {path} holds `{text}`, not an RFC 3339 instant such as 2026-09-20T13:05:00Z"),
            None,
            String::new(),
        ));
    };
    (at.as_second() < end).then(|| {
        say.not_yet(&format!(
            "its watermark is at {text}, short of the period's end {end_text}"
        ))
    })
}

/// A sensor command to run.
struct Sensor<'a> {
    dir: &'a Path,
    words: &'a [String],
    partition: &'a str,
    period_end: Option<i64>,
    env: Option<&'a crate::manifest::EnvSpec>,
    withheld: &'a [String],
}

/// `ready = { command = [...] }`: exit 0 ready, 1 not yet, anything else
/// failed (with its stderr as evidence). A sensor stopped because weir was
/// asked to stop says nothing: not yet.
fn command_says(sensor: &Sensor<'_>, say: Verdict<'_>) -> Option<Readiness> {
    let shown = sensor.words.join(" ");
    match run_sensor(sensor, say.name) {
        Sensed::Ready => None,
        Sensed::NotYet => Some(say.not_yet(&format!("`{shown}` exited with 1"))),
        Sensed::Stopped(sig) => Some(say.not_yet(&format!(
            "`{shown}` was stopped: weir received {}",
            sig.name()
        ))),
        Sensed::Failed {
            why,
            exit_code,
            stderr,
        } => {
            let evidence = stderr.trim_end();
            let why = if evidence.is_empty() {
                format!("`{shown}` {why}")
            } else {
                format!("`{shown}` {why}: {evidence}")
            };
            Some(say.failed(&why, exit_code, stderr))
        }
    }
}

/// RFC 3339 in UTC, seconds.
fn instant_text(secs: i64) -> String {
    jiff::Timestamp::from_second(secs).map_or_else(|_| secs.to_string(), |t| t.to_string())
}

enum Sensed {
    Ready,
    NotYet,
    Stopped(super::interrupt::Signal),
    Failed {
        why: String,
        exit_code: Option<i32>,
        stderr: String,
    },
}

/// Runs a sensor command through the one launcher (`command.rs`: its own
/// process tree, stopped at [`SENSOR_TIMEOUT`] or on SIGINT/SIGTERM, stderr
/// bounded) in `dir` with `WEIR_DATASET`, `WEIR_PARTITION` and (for a time
/// partition) `WEIR_PERIOD_END` set, stdin and stdout closed.
fn run_sensor(sensor: &Sensor<'_>, name: &str) -> Sensed {
    let fail = |why: String| Sensed::Failed {
        why,
        exit_code: None,
        stderr: String::new(),
    };
    if sensor.words.is_empty() {
        return fail("has no program".into());
    }
    let mut weir = vec![
        ("WEIR_DATASET".to_string(), name.to_string()),
        ("WEIR_PARTITION".to_string(), sensor.partition.to_string()),
    ];
    if let Some(end) = sensor.period_end {
        weir.push(("WEIR_PERIOD_END".to_string(), instant_text(end)));
    }
    let owner = format!("the sensor of dataset `{name}`");
    let env = match super::env::for_command(sensor.dir, sensor.withheld, sensor.env, &owner, weir) {
        Ok(env) => env,
        Err(e) => return fail(format!("cannot build its environment: {e}")),
    };
    let (ending, captured) = super::command::run_captured(&super::command::Captive {
        argv: sensor.words,
        cwd: sensor.dir,
        env: &env,
        stdin: &[],
        timeout: SENSOR_TIMEOUT,
    });
    let stderr = || {
        let text = env.secrets().redact(&captured.text());
        let start = text.len().saturating_sub(EVIDENCE_BYTES);
        let start = (start..=text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(text.len());
        text[start..].to_string()
    };
    match ending {
        Ending::Success => Sensed::Ready,
        Ending::Exit(1) => Sensed::NotYet,
        Ending::Exit(code) => Sensed::Failed {
            why: format!("exited with {code}"),
            exit_code: Some(code),
            stderr: stderr(),
        },
        Ending::Timeout => fail(format!(
            "did not exit within {}",
            crate::manifest::duration::human(SENSOR_TIMEOUT)
        )),
        Ending::Interrupted(sig) => Sensed::Stopped(sig),
        Ending::SpawnFailed(why) => {
            // The launcher names the program; the message names the words.
            let why = why.split_once("`: ").map_or(why.as_str(), |(_, w)| w);
            fail(format!("cannot start: {why}"))
        }
        other => Sensed::Failed {
            why: super::command::describe(&other),
            exit_code: None,
            stderr: stderr(),
        },
    }
}

/// The SLA deadline (seconds since the epoch) of `task` at `partition`:
/// its period's end plus the task's `sla`; `None` without either.
pub fn sla_deadline(task: &Task, partition: &str) -> Option<i64> {
    let sla = task.sla?;
    Some(
        task.dims
            .interval_end(partition)?
            .saturating_add(i64::try_from(sla.as_secs()).unwrap_or(i64::MAX)),
    )
}

/// The SLA deadline of `task` at `partition` (RFC 3339) when it passed
/// before `now` (seconds): what the run, status and the report call LATE.
pub fn late_since(task: &Task, partition: &str, now: i64) -> Option<String> {
    let deadline = sla_deadline(task, partition)?;
    (now > deadline).then(|| {
        jiff::Timestamp::from_second(deadline)
            .map_or_else(|_| deadline.to_string(), |t| t.to_string())
    })
}

/// The pause before recheck number `checks + 1` of a WAITING instance
/// (`checks` made so far, at least 1): [`RECHECK_INITIAL`], doubling, at
/// most [`RECHECK_MAX`].
pub fn recheck_after(checks: u32) -> Duration {
    crate::clock::doubling(RECHECK_INITIAL, RECHECK_MAX, checks.saturating_sub(1))
}

/// When to check a WAITING instance again, after `checks` checks found it
/// not ready: the backoff's next instant, brought forward to `deadline` (a
/// last look as the wait ends); `None` when there is no deadline (the run
/// does not wait) or it has passed: the instance stays WAITING.
pub fn next_check(checks: u32, now: Instant, deadline: Option<Instant>) -> Option<Instant> {
    let deadline = deadline?;
    (now < deadline).then(|| (now + recheck_after(checks)).min(deadline))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Format;

    fn dataset(ready: Option<Ready>, watermark: bool) -> ExternalDataset {
        ExternalDataset {
            path: "raw/{partition}.csv".into(),
            format: Format::Csv,
            watermark: watermark.then(|| "raw/{partition}.wm".into()),
            ready,
            sensor_env: None,
        }
    }

    fn at(text: &str) -> i64 {
        text.parse::<jiff::Timestamp>().unwrap().as_second()
    }

    fn why(r: &Readiness) -> &str {
        match r {
            Readiness::Ready => "ready",
            Readiness::NotYet(n) => &n.why,
            Readiness::Failed(f) => &f.why,
        }
    }

    // Each sensor says ready, not yet or failed
    #[test]
    fn sensors_say_ready_not_yet_or_failed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("raw")).unwrap();
        let key = "2026-09-20T13:05";
        let end = Some(at("2026-09-20T17:10:00Z"));
        let check = |ds: &ExternalDataset| check_dataset(d, "raw", ds, key, end, &[]);
        // Default: the data file.
        let plain = dataset(None, false);
        assert_eq!(
            why(&check(&plain)),
            format!(
                "external input `raw` ({}/raw/2026-09-20T13:05.csv) does not exist",
                d.display()
            )
        );
        std::fs::write(d.join("raw/2026-09-20T13:05.csv"), "a\n1\n").unwrap();
        assert_eq!(check(&plain), Readiness::Ready);
        // A marker file, then the data file too.
        let marker = dataset(Some(Ready::File("raw/{partition}/_SUCCESS".into())), false);
        assert_eq!(
            why(&check(&marker)),
            "external input `raw` is not ready: raw/2026-09-20T13:05/_SUCCESS does not exist"
        );
        std::fs::create_dir(d.join("raw/2026-09-20T13:05")).unwrap();
        std::fs::write(d.join("raw/2026-09-20T13:05/_SUCCESS"), "").unwrap();
        assert_eq!(check(&marker), Readiness::Ready);
        // The watermark against the period's end.
        let wm = dataset(Some(Ready::WatermarkAtPeriodEnd), true);
        assert_eq!(
            why(&check(&wm)),
            "external input `raw` is not ready: its watermark raw/2026-09-20T13:05.wm does not exist (waiting for 2026-09-20T17:10:00Z)"
        );
        std::fs::write(d.join("raw/2026-09-20T13:05.wm"), "2026-09-20T17:09:59Z\n").unwrap();
        assert_eq!(
            why(&check(&wm)),
            "external input `raw` is not ready: its watermark is at 2026-09-20T17:09:59Z, short of the period's end 2026-09-20T17:10:00Z"
        );
        std::fs::write(
            d.join("raw/2026-09-20T13:05.wm"),
            "2026-09-20T13:10:00-04:00",
        )
        .unwrap();
        assert_eq!(check(&wm), Readiness::Ready);
        std::fs::write(d.join("raw/2026-09-20T13:05.wm"), "seq 42").unwrap();
        assert_eq!(
            why(&check(&wm)),
            "the sensor of external input `raw` failed: its watermark raw/2026-09-20T13:05.wm holds `seq 42`, not an RFC 3339 instant such as 2026-09-20T13:05:00Z"
        );
        assert!(matches!(
            check_dataset(d, "raw", &wm, "eu", None, &[]),
            Readiness::Failed(_)
        ));
        // A command: 0, 1, anything else; its words and environment carry
        // the key and the period's end.
        std::fs::write(
            d.join("check.sh"),
            "[ \"$1\" = \"$WEIR_PARTITION\" ] || exit 3\n[ \"$WEIR_PERIOD_END\" = 2026-09-20T17:10:00Z ] || exit 4\nexit $(cat code)\n",
        )
        .unwrap();
        let cmd = dataset(
            Some(Ready::Command(vec![
                "sh".into(),
                "check.sh".into(),
                "{partition}".into(),
            ])),
            false,
        );
        std::fs::write(d.join("code"), "0").unwrap();
        assert_eq!(check(&cmd), Readiness::Ready);
        std::fs::write(d.join("code"), "1").unwrap();
        assert_eq!(
            why(&check(&cmd)),
            "external input `raw` is not ready: `sh check.sh 2026-09-20T13:05` exited with 1"
        );
        std::fs::write(
            d.join("check.sh"),
            "echo 'feed API: 503 Service Unavailable' >&2\nexit 2\n",
        )
        .unwrap();
        let Readiness::Failed(f) = check(&cmd) else {
            panic!("exit 2 is a sensor failure")
        };
        assert_eq!(f.exit_code, Some(2));
        assert_eq!(f.stderr, "feed API: 503 Service Unavailable\n");
        assert_eq!(
            f.why,
            "the sensor of external input `raw` failed: `sh check.sh 2026-09-20T13:05` exited with 2: feed API: 503 Service Unavailable"
        );
        // A sensor that leaves a process behind holding its stderr is judged
        // by its own exit, without waiting for that process.
        std::fs::write(d.join("check.sh"), "sleep 3 &\nexit 1\n").unwrap();
        let started = Instant::now();
        assert!(matches!(check(&cmd), Readiness::NotYet(_)));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let missing = dataset(Some(Ready::Command(vec!["/no/such/sensor".into()])), false);
        assert!(why(&check(&missing)).contains("`/no/such/sensor` cannot start: "));
    }

    // Rechecks back off, and the wait's end is the last look
    #[test]
    fn rechecks_back_off_until_the_deadline() {
        let ms = Duration::from_millis;
        let delays: Vec<Duration> = (1..=10).map(recheck_after).collect();
        assert_eq!(
            delays[..5],
            [ms(250), ms(500), ms(1000), ms(2000), ms(4000)]
        );
        assert_eq!(delays[9], RECHECK_MAX);
        assert_eq!(recheck_after(u32::MAX), RECHECK_MAX);
        let now = Instant::now();
        assert_eq!(next_check(1, now, None), None, "no --wait: no recheck");
        assert_eq!(
            next_check(1, now, Some(now + ms(10_000))),
            Some(now + ms(250))
        );
        assert_eq!(
            next_check(6, now, Some(now + ms(3_000))),
            Some(now + ms(3_000))
        );
        assert_eq!(next_check(1, now, Some(now)), None, "the wait is over");
    }
}
