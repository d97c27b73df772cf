//! Impact and repair: what one fixed hour touches, as read by the commit
//! records; selection that follows the mappings; early cutoff of identical
//! republishes; uncertify --cascade and repair; an accepted gap.
//!
//! One pipeline throughout: hourly clicks, a daily rollup (which also reads
//! the shared unpartitioned `dim`), a weekly rollup of days, a monthly
//! rollup of weeks, and a trailing 7-day window over days.

use std::collections::BTreeSet;
use std::process::Output;

use weir::events::State;

use crate::support::{ok, stderr, stdout, Sandbox, Visible};

const MANIFEST: &str = r#"
[pipeline]
name = "clicks"
code_version = "1"
warehouse = "wh"

[pools.default]
slots = 4

[pools.repairs]
slots = 2

[partitions.hour]
kind = "hourly"
start = "2026-11-01T00"
end = "2026-12-31T23"

[partitions.day]
kind = "daily"
start = "2026-11-01"
end = "2026-12-31"

[partitions.week]
kind = "weekly"
start = "2026-11-02"
end = "2026-12-27"

[partitions.month]
kind = "monthly"
start = "2026-11"
end = "2026-11"

[backfills.late_15th]
from = "2026-11-15"
to = "2026-11-15"
pool = "repairs"
tasks = ["hourly"]
reason = "the 15th's clicks arrived late"

[tasks.dim]
command = ["sh", "dim.sh"]
partitioned_by = []
output = { dataset = "dim", grain = ["site"] }

[tasks.hourly]
command = ["sh", "hourly.sh"]
partitioned_by = "hour"
inputs = ["dim"]
output = { dataset = "hourly", grain = ["hour"] }

[tasks.daily]
command = ["sh", "roll.sh", "hourly"]
partitioned_by = "day"
inputs = ["hourly", "dim"]
output = { dataset = "daily", grain = ["hour"] }

[tasks.weekly]
command = ["sh", "roll.sh", "daily"]
partitioned_by = "week"
inputs = ["daily"]
output = { dataset = "weekly", grain = ["hour"] }

[tasks.monthly]
command = ["sh", "roll.sh", "weekly"]
partitioned_by = "month"
inputs = ["weekly"]
output = { dataset = "monthly", grain = ["hour"] }

[tasks.trailing]
command = ["sh", "roll.sh", "daily"]
partitioned_by = "day"
inputs = [{ dataset = "daily", window = [-6, 0] }]
output = { dataset = "trailing", grain = ["hour"] }
"#;

/// The hour an operator fixes.
const HOUR: &str = "2026-11-15T10";

/// (dataset or task, partition) pairs.
type Instances = BTreeSet<(String, String)>;

/// What reads [`HOUR`], transitively: its day, its week (W46, Monday 9 to
/// Sunday 15 November), the month W46 starts in, and the seven trailing
/// windows that hold the 15th.
fn blast_radius() -> BTreeSet<(String, String)> {
    let mut set: BTreeSet<(String, String)> = [
        ("daily", "2026-11-15"),
        ("weekly", "2026-W46"),
        ("monthly", "2026-11"),
    ]
    .iter()
    .map(|(d, p)| (d.to_string(), p.to_string()))
    .collect();
    for d in 15..=21 {
        set.insert(("trailing".into(), format!("2026-11-{d:02}")));
    }
    set
}

/// The pipeline with November built (see [`build`]), copied from one
/// build shared by the tests of this module: 950 instances each would
/// take most of a minute per test on two cores.
fn built() -> Sandbox {
    static TEMPLATE: std::sync::OnceLock<Sandbox> = std::sync::OnceLock::new();
    let template = TEMPLATE.get_or_init(build);
    let sb = Sandbox::new(MANIFEST);
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", template.path().display()))
        .arg(sb.path())
        .status()
        .expect("cp runs");
    assert!(copied.success());
    sb
}

/// The pipeline with November built: the month (and every hour, day and
/// week it needs) and the trailing windows from the 8th (the first whose
/// seven days exist) to the 6th of December.
fn build() -> Sandbox {
    let sb = Sandbox::new(MANIFEST);
    sb.script(
        "dim.sh",
        r#"printf 'site,name\n1,%s\n' "$(cat dimname 2>/dev/null || echo main)" > "$WEIR_OUTPUT_DIR/dim.csv""#,
    );
    // An hour's clicks are 1 unless fix/<hour> says otherwise (a repair);
    // a missing lost/<hour> file fails it for good.
    sb.script(
        "hourly.sh",
        r#"if [ -e "lost/$WEIR_PARTITION" ]; then echo "source lost" >&2; exit 3; fi
n=$(cat "fix/$WEIR_PARTITION" 2>/dev/null || echo 1)
printf 'hour,clicks\n%s,%s\n' "$WEIR_PARTITION" "$n" > "$WEIR_OUTPUT_DIR/h.csv"
"#,
    );
    // Every row of every mapped upstream partition that is there.
    sb.script(
        "roll.sh",
        r#"up=$(echo "$1" | tr a-z A-Z)
eval dir=\$WEIR_INPUT_$up
printf 'hour,clicks\n' > "$WEIR_OUTPUT_DIR/out.csv"
for k in $(tr -d '[]"' < "$dir/_keys.json" | tr ',' ' '); do
  for f in "$dir/$k/"*.csv; do [ -e "$f" ] && tail -n +2 "$f" >> "$WEIR_OUTPUT_DIR/out.csv"; done
done
"#,
    );
    ok(&sb.w(&[
        "run",
        "m.toml",
        "--run-id",
        "build-month",
        "--task",
        "monthly",
        "--partition",
        "2026-11",
    ]));
    ok(&sb.w(&[
        "run",
        "m.toml",
        "--run-id",
        "build-trailing",
        "--task",
        "trailing",
        "--from",
        "2026-11-08",
        "--to",
        "2026-12-06",
    ]));
    sb
}

impl Sandbox {
    /// `weir ARGS…` on 20 December 2026 (November and its weeks complete).
    fn w(&self, args: &[&str]) -> Output {
        self.weir(args)
            .env("WEIR_TODAY", "2026-12-20")
            .output()
            .expect("weir runs")
    }

    /// The visible generation of a partition.
    fn generation(&self, dataset: &str, partition: &str) -> u64 {
        Visible::of(&self.store(dataset, partition))
            .record
            .generation
            .get()
    }

    /// Every (dataset, partition) whose latest generation is not 1.
    fn rebuilt(&self) -> BTreeSet<(String, String)> {
        let wh = self.warehouse();
        let mut out = BTreeSet::new();
        for dataset in wh.datasets().unwrap() {
            for partition in wh.partitions(&dataset).unwrap() {
                if self.generation(&dataset, &partition) != 1 {
                    out.insert((dataset.clone(), partition));
                }
            }
        }
        out
    }

    /// The (task, partition) of every instance a run launched.
    fn launched(&self, run_id: &str) -> BTreeSet<(String, String)> {
        self.events(run_id)
            .iter()
            .filter(|e| e.state == State::Running)
            .map(|e| (e.task.clone().unwrap(), e.partition.clone().unwrap()))
            .collect()
    }
}

fn pairs(list: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    list.iter()
        .map(|(d, p)| (d.to_string(), p.to_string()))
        .collect()
}

// An identical republish leaves its readers current (no
// STALE, nothing rerun); a changed one makes them STALE and reruns them
#[test]
fn an_identical_republish_is_cut_off_early() {
    let sb = built();
    ok(&sb.w(&[
        "run",
        "m.toml",
        "--run-id",
        "same",
        "--task",
        "hourly",
        "--partition",
        HOUR,
        "--force",
    ]));
    assert_eq!(sb.generation("hourly", HOUR), 2);
    let status = ok(&sb.w(&["status", "m.toml"]));
    assert!(!status.contains("STALE"), "{status}");
    let again = sb.w(&[
        "run",
        "m.toml",
        "--run-id",
        "after-same",
        "--task",
        "daily",
        "--task",
        "trailing",
        "--partition",
        "2026-11-15",
    ]);
    ok(&again);
    assert!(sb.launched("after-same").is_empty(), "{}", stdout(&again));
    assert_eq!(sb.rebuilt(), pairs(&[("hourly", HOUR)]));

    std::fs::create_dir(sb.path().join("fix")).unwrap();
    std::fs::write(sb.path().join("fix").join(HOUR), "5\n").unwrap();
    ok(&sb.w(&[
        "run",
        "m.toml",
        "--run-id",
        "changed",
        "--task",
        "hourly",
        "--partition",
        HOUR,
        "--force",
    ]));
    let status = ok(&sb.w(&["status", "m.toml"]));
    assert!(
        status.contains("STALE       daily 2026-11-15: `hourly` 2026-11-15T10 is at generation 3, this publication read generation 1"),
        "{status}"
    );
    assert_eq!(
        status.matches("STALE").count(),
        1,
        "only the day reads the hour: {status}"
    );
    ok(&sb.w(&[
        "run",
        "m.toml",
        "--run-id",
        "after-changed",
        "--task",
        "daily",
        "--partition",
        "2026-11-15",
    ]));
    assert_eq!(
        sb.launched("after-changed"),
        pairs(&[("daily", "2026-11-15")])
    );
    let day = Visible::of(&sb.store("daily", "2026-11-15"));
    assert!(day.rows().contains(&vec![HOUR.to_owned(), "5".to_owned()]));

    // A code edit that changes nothing in the output stops at the first
    // task whose output is identical: the hour reruns, nothing after it.
    let text = std::fs::read_to_string(sb.path().join("m.toml")).unwrap();
    let text = text.replace(
        r#"command = ["sh", "hourly.sh"]"#,
        r#"command = ["sh", "hourly.sh", "v2"]"#,
    );
    std::fs::write(sb.path().join("m.toml"), text).unwrap();
    // (Away from the 15th, whose readers are not current any more.)
    let other = "2026-11-25T03";
    ok(&sb.w(&[
        "run",
        "m.toml",
        "--run-id",
        "code",
        "--task",
        "hourly+",
        "--partition",
        other,
    ]));
    assert_eq!(sb.launched("code"), pairs(&[("hourly", other)]));
    assert_eq!(sb.generation("hourly", other), 2);
    assert_eq!(sb.generation("daily", "2026-11-25"), 1);
}

/// The partitions of each task in `weir plan --json`, and why each one a
/// `NAME+` followed is there.
fn planned(doc: &serde_json::Value) -> (Instances, Vec<(String, String, String)>) {
    let mut keys = BTreeSet::new();
    let mut why = Vec::new();
    for t in doc["tasks"].as_array().unwrap() {
        let task = t["name"].as_str().unwrap();
        for k in t["partitions"].as_array().unwrap() {
            keys.insert((task.to_owned(), k.as_str().unwrap().to_owned()));
        }
        for (k, reason) in t["followed"].as_object().unwrap() {
            why.push((
                task.to_owned(),
                k.clone(),
                reason.as_str().unwrap().to_owned(),
            ));
        }
    }
    (keys, why)
}

/// [`blast_radius`] with the hour itself, as (task, partition): each task
/// here publishes the dataset of its name.
fn hour_and_radius() -> BTreeSet<(String, String)> {
    let mut set = blast_radius();
    set.insert(("hourly".into(), HOUR.into()));
    set
}

// `--task 'hourly+' --partition H` selects the hour and
// every partition that reads it through a mapping, named with why; an
// identical forced republish launches nothing else, a changed one rebuilds
// exactly those
#[test]
fn selection_follows_the_mappings() {
    let sb = built();
    let out = sb.w(&[
        "plan",
        "m.toml",
        "--task",
        "hourly+",
        "--partition",
        HOUR,
        "--json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (keys, why) = planned(&doc);
    assert_eq!(keys, hour_and_radius());
    let why: BTreeSet<(String, String, String)> = why.into_iter().collect();
    let mut expected: BTreeSet<(String, String, String)> = [
        ("daily", "2026-11-15", "reads `hourly` 2026-11-15T10"),
        ("weekly", "2026-W46", "reads `daily` 2026-11-15"),
        ("monthly", "2026-11", "reads `weekly` 2026-W46"),
    ]
    .iter()
    .map(|(t, k, w)| (t.to_string(), k.to_string(), w.to_string()))
    .collect();
    for d in 15..=21 {
        expected.insert((
            "trailing".into(),
            format!("2026-11-{d:02}"),
            "reads `daily` 2026-11-15".into(),
        ));
    }
    assert_eq!(why, expected);
    let table = ok(&sb.w(&["plan", "m.toml", "--task", "hourly+", "--partition", HOUR]));
    assert!(
        table.contains(
            "followed: downstream partitions that read a selected one (`NAME+`), and why:\n  \
             daily 2026-11-15: reads `hourly` 2026-11-15T10\n  \
             weekly 2026-W46: reads `daily` 2026-11-15\n  \
             monthly 2026-11: reads `weekly` 2026-W46\n  \
             trailing 2026-11-15: reads `daily` 2026-11-15\n"
        ),
        "{table}"
    );

    // A backfill follows the mappings from its hours too, in its pool.
    let dry = ok(&sb.w(&[
        "backfill",
        "m.toml",
        "late_15th",
        "--task",
        "hourly+",
        "--dry-run",
    ]));
    assert!(
        dry.contains("repairs      2         34  "),
        "24 hours, their day, week and month, 7 windows:\n{dry}"
    );
    assert!(
        dry.contains("  trailing 2026-11-21: reads `daily` 2026-11-15\n"),
        "{dry}"
    );
    let plain = ok(&sb.w(&["backfill", "m.toml", "late_15th", "--dry-run"]));
    assert!(plain.contains("repairs      2         24  "), "{plain}");

    // Identical: the hour is forced, what reads it is current.
    let same = sb.w(&[
        "run",
        "m.toml",
        "--run-id",
        "same",
        "--task",
        "hourly+",
        "--partition",
        HOUR,
        "--force",
    ]);
    ok(&same);
    assert_eq!(sb.launched("same"), pairs(&[("hourly", HOUR)]));
    assert!(
        stdout(&same).contains("run same: 11 task instances: 1 published, 10 already published"),
        "{}",
        stdout(&same)
    );

    // Changed: exactly the hour and what reads it, and nothing else.
    std::fs::create_dir(sb.path().join("fix")).unwrap();
    std::fs::write(sb.path().join("fix").join(HOUR), "5\n").unwrap();
    ok(&sb.w(&[
        "run",
        "m.toml",
        "--run-id",
        "changed",
        "--task",
        "hourly+",
        "--partition",
        HOUR,
        "--force",
    ]));
    assert_eq!(sb.launched("changed"), hour_and_radius());
    assert_eq!(sb.rebuilt(), hour_and_radius());
    for (dataset, partition) in blast_radius() {
        let rows = Visible::of(&sb.store(&dataset, &partition)).rows();
        assert!(
            rows.contains(&vec![HOUR.to_owned(), "5".to_owned()]),
            "{dataset} {partition}"
        );
    }
    let status = ok(&sb.w(&["status", "m.toml"]));
    assert!(!status.contains("STALE"), "{status}");
}

// `weir retry` of a held hour releases it and reruns the
// partitions that read it, through the mappings
#[test]
fn retry_reruns_the_mapped_downstream() {
    let sb = built();
    // New code for the hours, and the fixed hour's source is down (exit 78: held).
    let text = std::fs::read_to_string(sb.path().join("m.toml")).unwrap();
    let text = text.replace(
        r#"command = ["sh", "hourly.sh"]"#,
        r#"command = ["sh", "hourly.sh", "v2"]"#,
    );
    std::fs::write(sb.path().join("m.toml"), text).unwrap();
    sb.script(
        "hourly.sh",
        r#"if [ -e "down/$WEIR_PARTITION" ]; then echo "source down" >&2; exit 78; fi
n=$(cat "fix/$WEIR_PARTITION" 2>/dev/null || echo 1)
printf 'hour,clicks\n%s,%s\n' "$WEIR_PARTITION" "$n" > "$WEIR_OUTPUT_DIR/h.csv"
"#,
    );
    for dir in ["down", "fix"] {
        std::fs::create_dir(sb.path().join(dir)).unwrap();
    }
    std::fs::write(sb.path().join("down").join(HOUR), "").unwrap();
    std::fs::write(sb.path().join("fix").join(HOUR), "7\n").unwrap();
    let held = sb.w(&[
        "run",
        "m.toml",
        "--run-id",
        "held",
        "--task",
        "hourly+",
        "--partition",
        HOUR,
    ]);
    assert_eq!(held.status.code(), Some(1), "{}", stderr(&held));
    assert_eq!(sb.launched("held"), pairs(&[("hourly", HOUR)]));
    assert!(sb.rebuilt().is_empty());

    std::fs::remove_file(sb.path().join("down").join(HOUR)).unwrap();
    let retry = sb.w(&[
        "retry",
        "m.toml",
        "hourly",
        "--partition",
        HOUR,
        "--note",
        "source back",
    ]);
    ok(&retry);
    assert!(
        stdout(&retry).starts_with(&format!(
            "released hourly {HOUR}; running it and the downstream partitions that read it\n"
        )),
        "{}",
        stdout(&retry)
    );
    let run = crate::support::printed_run_id(&retry);
    assert_eq!(sb.launched(&run), hour_and_radius());
    assert_eq!(sb.rebuilt(), hour_and_radius());
    let month = Visible::of(&sb.store("monthly", "2026-11")).rows();
    assert!(month.contains(&vec![HOUR.to_owned(), "7".to_owned()]));
}

/// The (dataset, partition) pairs of an impact's `built_from` (each at
/// generation `generation` and in `state`, asserted) and of `would_read`.
fn impact_json(sb: &Sandbox, dataset: &str, partition: &str) -> serde_json::Value {
    let out = sb.w(&[
        "impact",
        "m.toml",
        dataset,
        "--partition",
        partition,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn listed(doc: &serde_json::Value, field: &str) -> Instances {
    doc[field]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["dataset"].as_str().unwrap().to_owned(),
                b["partition"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

// The impact of one hour is exactly its day, week, month
// and the seven windows, as the commit records say they were read (a
// mapping changed since does not change it), apart from what would read it
// next; the shared unpartitioned dimension brings in no other hour
#[test]
fn impact_lists_what_was_built_from_a_generation() {
    let sb = built();
    let doc = impact_json(&sb, "hourly", HOUR);
    assert_eq!(doc["root"]["generation"], 1);
    assert_eq!(listed(&doc, "built_from"), blast_radius());
    assert_eq!(listed(&doc, "would_read"), blast_radius());
    for b in doc["built_from"].as_array().unwrap() {
        assert_eq!(b["generation"], 1, "{b}");
        assert_eq!(b["state"], "CURRENT", "{b}");
    }
    let monthly = doc["built_from"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["dataset"] == "monthly")
        .unwrap();
    assert_eq!(
        monthly["read"],
        serde_json::json!([{"dataset": "weekly", "partition": "2026-W46", "generation": 1}])
    );
    let text = ok(&sb.w(&["impact", "m.toml", "hourly", "--partition", HOUR]));
    let digest = Visible::of(&sb.store("hourly", HOUR)).record.digest;
    assert!(
        text.starts_with(&format!(
            "impact of hourly {HOUR} generation 1 ({})\n\n\
             built from it, as their commit records say they read it: 10 publications\n  \
             CURRENT     daily     2026-11-15  generation 1  read hourly {HOUR} g1\n  \
             CURRENT     weekly    2026-W46    generation 1  read daily 2026-11-15 g1\n  \
             CURRENT     monthly   2026-11     generation 1  read weekly 2026-W46 g1\n  \
             CURRENT     trailing  2026-11-15  generation 1  read daily 2026-11-15 g1\n",
            &digest[..19]
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "would read it on their next build, through the manifest's mappings: 10 partitions\n  \
             daily 2026-11-15 ← `hourly` 2026-11-15T10\n  \
             weekly 2026-W46 ← `daily` 2026-11-15\n"
        ),
        "{text}"
    );

    // As read, not as mapped today: a three-day window now.
    let manifest = std::fs::read_to_string(sb.path().join("m.toml")).unwrap();
    std::fs::write(
        sb.path().join("m.toml"),
        manifest.replace("window = [-6, 0]", "window = [-2, 0]"),
    )
    .unwrap();
    let doc = impact_json(&sb, "hourly", HOUR);
    assert_eq!(listed(&doc, "built_from"), blast_radius());
    let would = listed(&doc, "would_read");
    assert!(would.contains(&("trailing".to_owned(), "2026-11-17".to_owned())));
    assert!(!would.contains(&("trailing".to_owned(), "2026-11-18".to_owned())));
    assert_eq!(would.len(), 3 + 3);

    // A republished hour: the old generation's readers, by state.
    std::fs::write(sb.path().join("m.toml"), manifest).unwrap();
    std::fs::create_dir(sb.path().join("fix")).unwrap();
    std::fs::write(sb.path().join("fix").join(HOUR), "5\n").unwrap();
    ok(&sb.w(&[
        "run",
        "m.toml",
        "--task",
        "hourly",
        "--partition",
        HOUR,
        "--force",
    ]));
    ok(&sb.w(&[
        "run",
        "m.toml",
        "--task",
        "daily",
        "--partition",
        "2026-11-15",
    ]));
    let doc = impact_json(&sb, "hourly", HOUR);
    assert_eq!(doc["root"]["generation"], 2);
    assert_eq!(
        listed(&doc, "built_from"),
        pairs(&[("daily", "2026-11-15")])
    );
    let old = sb.w(&[
        "impact",
        "m.toml",
        "hourly",
        "--partition",
        HOUR,
        "--generation",
        "1",
        "--json",
    ]);
    let old: serde_json::Value = serde_json::from_slice(&old.stdout).unwrap();
    let states: BTreeSet<(String, String)> = old["built_from"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                format!(
                    "{} {}",
                    b["dataset"].as_str().unwrap(),
                    b["partition"].as_str().unwrap()
                ),
                b["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(states.contains(&("daily 2026-11-15".to_owned(), "SUPERSEDED".to_owned())));
    assert!(states.contains(&("weekly 2026-W46".to_owned(), "STALE".to_owned())));
    assert_eq!(states.len(), 10);

    // The shared dimension's impact is every publication that read it.
    let doc = impact_json(&sb, "dim", "all");
    let hours = listed(&doc, "built_from")
        .iter()
        .filter(|(d, _)| d == "hourly")
        .count();
    assert_eq!(hours, 840);

    let missing = sb.w(&[
        "impact",
        "m.toml",
        "hourly",
        "--partition",
        HOUR,
        "--generation",
        "9",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert_eq!(
        stderr(&missing),
        format!("error: `hourly` {HOUR} has no generation 9 (it has 1 to 2)\n  help: `weir history` lists them\n")
    );
}

// `weir uncertify --cascade` marks the generation and all it
// built, in one durable operator event; repair plans (dry run: nothing
// written) and then rebuilds exactly that set, in the backfill pool
#[test]
fn uncertify_cascade_then_repair_rebuilds_exactly_the_set() {
    let sb = built();
    let out = sb.w(&[
        "uncertify",
        "m.toml",
        "hourly",
        "--partition",
        HOUR,
        "--cascade",
        "--reason",
        "bad feed",
    ]);
    let text = ok(&out);
    assert!(
        text.starts_with(&format!(
            "uncertified hourly {HOUR} generation 1 and the 10 publications built from it:\n  \
             daily 2026-11-15 generation 1\n  weekly 2026-W46 generation 1\n"
        )),
        "{text}"
    );
    let events: Vec<_> = sb
        .all_runs_events()
        .into_iter()
        .filter(|e| e.state == State::Uncertified)
        .collect();
    assert_eq!(events.len(), 1);
    let listed_in_event: Instances = events[0].data["cascade"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["dataset"].as_str().unwrap().to_owned(),
                i["partition"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut everything = blast_radius();
    everything.insert(("hourly".into(), HOUR.into()));
    assert_eq!(listed_in_event, everything);
    let doc = impact_json(&sb, "hourly", HOUR);
    for b in doc["built_from"].as_array().unwrap() {
        assert_eq!(b["state"], "UNCERTIFIED", "{b}");
    }
    // A reader of an uncertified publication refuses it.
    let refused = sb.w(&[
        "run",
        "m.toml",
        "--task",
        "weekly",
        "--partition",
        "2026-W46",
        "--force",
    ]);
    assert_eq!(refused.status.code(), Some(1), "{}", stdout(&refused));

    let dry = sb.w(&[
        "repair",
        "m.toml",
        "hourly",
        "--partition",
        HOUR,
        "--reason",
        "feed fixed",
        "--dry-run",
    ]);
    let plan = ok(&dry);
    assert!(
        plan.starts_with(&format!(
            "plan for `clicks` (code_version 1)\nrepair of `hourly` {HOUR} generation 1: 11 task instances\nreason: feed fixed\n"
        )),
        "{plan}"
    );
    assert!(plan.contains("repairs      2         11  "), "{plan}");
    assert!(sb.rebuilt().is_empty(), "a dry run writes nothing");

    std::fs::create_dir(sb.path().join("fix")).unwrap();
    std::fs::write(sb.path().join("fix").join(HOUR), "9\n").unwrap();
    let repaired = sb.w(&[
        "repair",
        "m.toml",
        "hourly",
        "--partition",
        HOUR,
        "--reason",
        "feed fixed",
        "--run-id",
        "repair-1",
    ]);
    ok(&repaired);
    assert_eq!(sb.launched("repair-1"), hour_and_radius());
    assert_eq!(sb.rebuilt(), hour_and_radius());
    for (dataset, partition) in hour_and_radius() {
        assert_eq!(
            sb.generation(&dataset, &partition),
            2,
            "{dataset} {partition}"
        );
    }
    let month = Visible::of(&sb.store("monthly", "2026-11")).rows();
    assert!(month.contains(&vec![HOUR.to_owned(), "9".to_owned()]));
    let started = sb
        .events("repair-1")
        .into_iter()
        .find(|e| e.state == State::RunStarted)
        .unwrap();
    assert_eq!(
        started.data["backfill"]["name"],
        format!("repair of `hourly` {HOUR} generation 1")
    );
    let status = ok(&sb.w(&["status", "m.toml"]));
    assert!(!status.contains("STALE"), "{status}");
    // Nothing is left to repair from generation 1.
    let again = ok(&sb.w(&[
        "repair",
        "m.toml",
        "hourly",
        "--partition",
        HOUR,
        "--generation",
        "1",
        "--reason",
        "again",
    ]));
    assert_eq!(
        again,
        format!("nothing to repair: hourly {HOUR} generation 1 is no longer visible and nothing visible was built from it\n")
    );
}

// An accepted gap lets a fan-in proceed without it, is
// recorded in the reader's commit record, shows in status, and `weir
// retry` undoes it
#[test]
fn accept_lets_a_fan_in_proceed_and_is_recorded() {
    let sb = built();
    let lost = "2026-12-10T05";
    std::fs::create_dir(sb.path().join("lost")).unwrap();
    std::fs::write(sb.path().join("lost").join(lost), "").unwrap();
    sb.script(
        "hourly.sh",
        r#"if [ -e "lost/$WEIR_PARTITION" ]; then echo "source lost" >&2; exit 65; fi
printf 'hour,clicks\n%s,1\n' "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/h.csv"
"#,
    );
    let first = sb.w(&[
        "run",
        "m.toml",
        "--run-id",
        "first",
        "--task",
        "daily",
        "--partition",
        "2026-12-10",
    ]);
    assert_eq!(first.status.code(), Some(1), "{}", stdout(&first));
    assert!(sb.records("daily", "2026-12-10").is_empty());

    let out = sb.w(&[
        "accept",
        "m.toml",
        "hourly",
        "--partition",
        lost,
        "--note",
        "feed lost for good",
    ]);
    assert_eq!(
        ok(&out),
        format!("accepted hourly {lost} as missing: it is not built, and what reads it among other partitions runs without it, until `weir retry`\n")
    );
    let accepted: Vec<_> = sb
        .all_runs_events()
        .into_iter()
        .filter(|e| e.state == State::Accepted)
        .collect();
    assert_eq!(accepted.len(), 1);
    assert_eq!(accepted[0].data["note"], "feed lost for good");
    let again = sb.w(&[
        "accept",
        "m.toml",
        "hourly",
        "--partition",
        lost,
        "--note",
        "twice",
    ]);
    assert_eq!(again.status.code(), Some(3));
    let published = sb.w(&[
        "accept",
        "m.toml",
        "hourly",
        "--partition",
        HOUR,
        "--note",
        "no",
    ]);
    assert_eq!(published.status.code(), Some(3));
    assert!(
        stderr(&published).contains("is published (generation 1)"),
        "{}",
        stderr(&published)
    );

    let plan = ok(&sb.w(&[
        "plan",
        "m.toml",
        "--task",
        "daily",
        "--partition",
        "2026-12-10",
    ]));
    // The 23 other hours were published by the first run; the gap is not
    // added as upstream work.
    assert!(!plan.contains("hourly"), "{plan}");
    ok(&sb.w(&[
        "run",
        "m.toml",
        "--run-id",
        "second",
        "--task",
        "daily",
        "--partition",
        "2026-12-10",
    ]));
    let launched = sb.launched("second");
    assert!(!launched.contains(&("hourly".to_owned(), lost.to_owned())));
    assert!(launched.contains(&("daily".to_owned(), "2026-12-10".to_owned())));
    let day = Visible::of(&sb.store("daily", "2026-12-10"));
    assert_eq!(day.rows().len(), 23);
    let input = &day.record.input_snapshot["inputs"][0];
    assert_eq!(input["name"], "hourly");
    assert_eq!(input["accepted_missing"], serde_json::json!([lost]));
    assert_eq!(input["partitions"].as_array().unwrap().len(), 23);
    let status = ok(&sb.w(&["status", "m.toml", "--all"]));
    assert!(
        status.contains(&format!(
            "ACCEPTED    hourly {lost}: accepted as missing by an operator: feed lost for good (not run until `weir retry m.toml hourly --partition {lost} --note …`)"
        )),
        "{status}"
    );

    // The source is found after all: retry undoes the decision and the day
    // is rebuilt with it.
    std::fs::remove_file(sb.path().join("lost").join(lost)).unwrap();
    ok(&sb.w(&[
        "retry",
        "m.toml",
        "hourly",
        "--partition",
        lost,
        "--note",
        "found a copy",
    ]));
    let day = Visible::of(&sb.store("daily", "2026-12-10"));
    assert_eq!(day.record.generation.get(), 2);
    assert_eq!(day.rows().len(), 24);
    assert!(day.record.input_snapshot["inputs"][0]
        .get("accepted_missing")
        .is_none());
}

// An instance that reads only the accepted partition (an
// identity mapping) stays blocked; a fan-in over it runs
#[test]
fn an_identity_reader_of_an_accepted_gap_stays_blocked() {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "gap"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["k1", "k2"]

[tasks.a]
command = ["sh", "a.sh"]
partitioned_by = "k"
output = { dataset = "a_out", grain = ["id"] }

[tasks.b]
command = ["sh", "-c", "cp \"$WEIR_INPUT_A_OUT\"/*.csv \"$WEIR_OUTPUT_DIR/\""]
partitioned_by = "k"
inputs = ["a_out"]
output = { dataset = "b_out", grain = ["id"] }

[tasks.c]
command = ["sh", "-c", "printf 'id\\n' > \"$WEIR_OUTPUT_DIR/c.csv\"; for k in $(tr -d '[]\"' < \"$WEIR_INPUT_A_OUT/_keys.json\" | tr ',' ' '); do tail -n +2 \"$WEIR_INPUT_A_OUT/$k/a.csv\" >> \"$WEIR_OUTPUT_DIR/c.csv\"; done"]
partitioned_by = []
inputs = ["a_out"]
output = { dataset = "c_out", grain = ["id"] }
"#,
    );
    sb.script(
        "a.sh",
        r#"if [ "$WEIR_PARTITION" = k1 ]; then exit 65; fi
printf 'id\n%s\n' "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/a.csv"
"#,
    );
    let first = sb.run(
        "r1",
        &[
            "--partition",
            "k1",
            "--partition",
            "k2",
            "--partition",
            "all",
        ],
    );
    assert_eq!(first.status.code(), Some(1));
    ok(&sb.weir_out(&[
        "accept",
        "m.toml",
        "a",
        "--partition",
        "k1",
        "--note",
        "k1 is gone",
    ]));
    let second = sb.run(
        "r2",
        &[
            "--partition",
            "k1",
            "--partition",
            "k2",
            "--partition",
            "all",
        ],
    );
    assert_eq!(second.status.code(), Some(1), "{}", stdout(&second));
    let text = stdout(&second);
    assert!(
        text.contains("b k1"),
        "the identity reader is still blocked:\n{text}"
    );
    let c = Visible::of(&sb.store("c_out", "all"));
    assert_eq!(c.rows(), vec![vec!["k2".to_owned()]]);
    assert_eq!(
        c.record.input_snapshot["inputs"][0]["accepted_missing"],
        serde_json::json!(["k1"])
    );
    assert!(sb.records("b_out", "k1").is_empty());
    let states = crate::support::states(&sb.events("r2"), "a", "k1");
    assert_eq!(states, vec![State::Queued, State::Accepted]);
}
