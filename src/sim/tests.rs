//! The simulator proves serve's promises over seeds: a sweep on every CI
//! run, a longer one by hand, every seed that ever failed kept, and planted
//! bugs it must find.

use super::*;
use crate::manifest::Manifest;

/// A mixed pipeline: minutely clicks, hourly events reading them, a daily
/// rollup reading the hours (one pool of two slots shared by all), a
/// scheduled report, and an hourly task in a pool of its own.
const MIXED: &str = r#"
[pipeline]
name = "mixed"
code_version = "1"
warehouse = "wh"

[pools.main]
slots = 2

[pools.side]
slots = 1

[partitions.minute]
kind = "minutely"
every = 1
start = "2026-09-01T00:00"

[partitions.hour]
kind = "hourly"
start = "2026-09-01T00"

[partitions.day]
kind = "daily"
start = "2026-09-01"

[tasks.clicks]
command = ["true"]
partitioned_by = "minute"
output = { dataset = "clicks", grain = ["id"] }
expected_duration = "20s"
pool = "main"
wait = "10m"

[tasks.events]
command = ["true"]
partitioned_by = "hour"
depends_on = ["clicks"]
output = { dataset = "events", grain = ["id"] }
expected_duration = "5m"
pool = "main"
sla = "2h"

[tasks.rollup]
command = ["true"]
partitioned_by = "day"
depends_on = ["events"]
output = { dataset = "rollup", grain = ["id"] }
expected_duration = "30m"
pool = "main"
sla = "6h"

[tasks.side]
command = ["true"]
partitioned_by = "hour"
output = { dataset = "side", grain = ["id"] }
expected_duration = "10m"
pool = "side"

[tasks.report]
command = ["true"]
schedule = "0 6 * * *"
partitioned_by = []
depends_on = ["rollup"]
output = { dataset = "report", grain = ["id"] }
expected_duration = "1m"
"#;

fn at(text: &str) -> i64 {
    text.parse::<jiff::Timestamp>().unwrap().as_second()
}

fn mixed() -> Model {
    let m = Manifest::parse("mixed.toml", MIXED, std::path::Path::new("/tmp/mixed.toml"))
        .unwrap_or_else(|e| panic!("{e:?}"));
    Model::of(&m)
}

/// Seed `seed`'s world: every fault (kills, crashes on store errors, lost
/// replies, 503s, late inputs, failures, hangs); odd seeds on one engine,
/// even seeds on three that kill each other's claimers two times a day
/// each.
fn config(seed: u64, days: i64) -> Config {
    let from = at("2026-09-02T00:00:30Z");
    let mut c = Config::new(seed, 1, from, from + days * 86_400);
    c.faults = Faults::default_mix();
    if seed % 2 == 0 {
        c.engines = 3;
        c.faults.kill = 2.0;
    }
    c
}

/// Seeds swept until `steps` machine steps were taken: (seeds, steps,
/// the reports that broke an invariant).
fn sweep(model: &Model, first: u64, steps: u64, days: i64) -> (u64, u64, Vec<report::Report>) {
    let (mut seed, mut total, mut broken) = (first, 0, Vec::new());
    while total < steps {
        let r = run(model, &config(seed, days));
        total += r.steps;
        if !r.violations.is_empty() {
            broken.push(r);
        }
        seed += 1;
    }
    (seed - first, total, broken)
}

fn explain(broken: &[report::Report]) -> String {
    broken
        .iter()
        .map(|r| format!("seed {}: {:#?}", r.seed, r.violations))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn seeds_swept_on_every_run_break_no_invariant() {
    let (seeds, steps, broken) = sweep(&mixed(), 1, 1_000_000, 3);
    println!("simulation sweep: {seeds} seeds, {steps} steps");
    assert!(broken.is_empty(), "{}", explain(&broken));
}

#[test]
#[ignore = "a longer sweep, by hand: cargo test --release --lib -- --ignored simulation"]
fn simulation_long_sweep() {
    let first = std::env::var("WEIR_SIM_FIRST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000);
    let (seeds, steps, broken) = sweep(&mixed(), first, 50_000_000, 30);
    println!("simulation sweep: {seeds} seeds from {first}, {steps} steps");
    assert!(broken.is_empty(), "{}", explain(&broken));
}

/// Seeds (two days each) that once broke an invariant, one engine with
/// every fault: 1, 3, 5 and 7 lost a period whose claim met a 503 or a
/// lost reply (a claim now asks again and knows its own); 5 again when the
/// read after a taken claim met a 503 (reads are asked again too); 1 again
/// recorded a period MISSED as down after its attempts ran out while serve
/// was up (a held instance is handled, not missed).
const FAILED_SEEDS: &[u64] = &[1, 3, 5, 7];

#[test]
fn every_seed_that_ever_failed_holds_now() {
    for seed in FAILED_SEEDS {
        let r = run(&mixed(), &config(*seed, 2));
        assert!(r.violations.is_empty(), "seed {seed}: {:#?}", r.violations);
    }
}

/// Seeds 1 to 4 (two days, three engines, kills only) once lost a
/// period: engine B found A's claim, B's progress passed it, A was
/// killed, and A's restart counted from that progress (an instance
/// claimed elsewhere is now watched until it is settled). Then, with
/// store faults, a restart recorded a period MISSED as down that an engine
/// up then ran late (only a claim's holder records MISSED now).
#[test]
fn three_engines_with_kills_never_lose_a_claimed_period() {
    for seed in 1..=4 {
        let r = three(seed, "kill=2");
        assert!(r.violations.is_empty(), "seed {seed}: {:#?}", r.violations);
    }
}

/// Three engines, two days, seed `seed` with `faults`.
fn three(seed: u64, faults: &str) -> report::Report {
    let mut c = config(seed, 2);
    c.engines = 3;
    c.faults = Faults::parse(faults).unwrap();
    run(&mixed(), &c)
}

#[test]
fn a_restart_never_records_missed_what_an_engine_up_then_runs_late() {
    // Seed 26 recorded a minute MISSED as down on a restart while an
    // engine that was up waited for its late input, then ran it.
    let r = three(26, "late=0.05,fail=0.05,hang=0.005,kill=2");
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
}

#[test]
fn a_missed_record_whose_recorder_crashed_is_still_announced() {
    // Seed 9: the recorder's write landed, its reply was lost, it crashed;
    // the engines watching the instance settled it without announcing it.
    let r = three(
        9,
        "lost=0.002,unavailable=0.005,kill=2,late=0.05,fail=0.05,hang=0.005",
    );
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
}

#[test]
fn a_month_on_three_engines_with_faults_holds_every_invariant() {
    // Without kills or store faults (the sweep has them): a month of
    // watches of each other's claims would cost this test minutes.
    let mut c = config(8, 30);
    c.faults = Faults::parse("late=0.05,fail=0.05,hang=0.005").unwrap();
    let r = run(&mixed(), &c);
    println!("a month on three engines: {} steps", r.steps);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert_eq!(r.engines, 3);
    let clicks = &r.tasks[0];
    assert!(clicks.published > 30 * 1300, "{clicks:?}");
    assert!(clicks.missed_waited > 0 && clicks.retries > 0, "{clicks:?}");
}

#[test]
fn the_same_seed_gives_the_same_report_bit_for_bit() {
    for seed in [41, 42] {
        let a = serde_json::to_string(&run(&mixed(), &config(seed, 2))).unwrap();
        let b = serde_json::to_string(&run(&mixed(), &config(seed, 2))).unwrap();
        assert_eq!(a, b, "seed {seed}");
    }
    let a = serde_json::to_string(&run(&mixed(), &config(41, 2))).unwrap();
    let c = serde_json::to_string(&run(&mixed(), &config(43, 2))).unwrap();
    assert_ne!(a, c, "another seed, another world");
}

/// The first seed (from 1) whose run breaks `invariant` with `plant`, within
/// `bound` seeds of `days` days.
fn finds(plant: Plant, invariant: &str, seeds: &[u64], days: i64) -> u64 {
    for seed in seeds {
        let mut c = config(*seed, days);
        c.plant = Some(plant);
        let r = run(&mixed(), &c);
        if r.violations.iter().any(|v| v.invariant == invariant) {
            return *seed;
        }
    }
    panic!("{plant:?} not found by {invariant} within seeds {seeds:?}");
}

#[test]
fn a_fence_that_accepts_an_equal_token_is_found() {
    // Lost replies of commits make the publisher commit again with its
    // token: one engine with every fault.
    finds(Plant::FenceEqual, "tokens-only-grow", &[1, 3, 5], 1);
}

#[test]
fn a_claim_taken_twice_is_found() {
    finds(Plant::DoubleClaim, "one-live-claimer", &[2, 4], 1);
}

#[test]
fn a_catch_up_after_downtime_is_found() {
    finds(Plant::CatchUp, "no-catch-up", &[1, 3, 5], 1);
}

#[test]
fn a_pool_over_admitted_by_one_is_found() {
    finds(Plant::OverAdmit, "pool-slots", &[1, 2], 1);
}

#[test]
fn a_dropped_notification_is_found() {
    finds(
        Plant::DropNotification,
        "notified-once-per-fact",
        &[1, 2],
        1,
    );
}

#[test]
fn faults_parse_and_bad_ones_say_why() {
    assert_eq!(Faults::parse("none").unwrap(), Faults::default());
    let f = Faults::parse("lost=0.01, kill=2").unwrap();
    assert_eq!((f.lost, f.kill), (0.01, 2.0));
    let e = Faults::parse("lost=2").unwrap_err();
    assert_eq!(
        e,
        super::world::FaultsError::ShareAboveOne {
            part: "lost=2".into()
        }
    );
    assert!(e.to_string().contains("at most 1"), "{e}");
    let e = Faults::parse("flood=0.1").unwrap_err();
    assert!(e.to_string().contains("unknown fault kind `flood`"), "{e}");
    let e = Faults::parse("lost").unwrap_err();
    assert!(e.to_string().contains("kind=rate"), "{e}");
    assert!(matches!(
        Faults::parse("lost=-1"),
        Err(super::world::FaultsError::BadRate { .. })
    ));
    let f = Faults::parse("latency=0.1,short_list=0.2").unwrap();
    assert_eq!((f.latency, f.short_list), (0.1, 0.2));
    let e = Faults::parse("short_list=1.5").unwrap_err();
    assert!(e.to_string().contains("at most 1"), "{e}");
}

#[test]
fn slow_requests_and_listings_cut_at_a_page_break_no_invariant() {
    let from = at("2026-09-02T00:00:30Z");
    let mut c = Config::new(6, 3, from, from + 86_400);
    c.faults = Faults::parse("latency=0.05,short_list=0.3,kill=2,lost=0.002").unwrap();
    let r = run(&mixed(), &c);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert!(
        r.faults.get("latency").is_some_and(|n| *n > 100),
        "{:?}",
        r.faults
    );
    assert!(
        r.faults.get("short_list").is_some_and(|n| *n > 100),
        "{:?}",
        r.faults
    );
    // Slow requests make what follows them later: another world.
    let mut quick = c.clone();
    quick.faults.latency = 0.0;
    assert_ne!(run(&mixed(), &quick).steps, r.steps);
}

/// An hourly task with a one-hour sla in pool `main` of one slot, and
/// perhaps a daily task of two hours in the same pool.
fn capacity(with_daily: bool) -> Model {
    let mut source = r#"
[pipeline]
name = "capacity"
code_version = "1"
warehouse = "wh"

[pools.main]
slots = 1

[partitions.hour]
kind = "hourly"
start = "2026-09-01T00"

[partitions.day]
kind = "daily"
start = "2026-09-01"

[tasks.hourly]
command = ["true"]
partitioned_by = "hour"
output = { dataset = "hourly", grain = ["id"] }
expected_duration = "20m"
pool = "main"
sla = "1h"
"#
    .to_owned();
    if with_daily {
        source.push_str(
            r#"
[tasks.daily]
command = ["true"]
partitioned_by = "day"
output = { dataset = "daily", grain = ["id"] }
expected_duration = "2h"
timeout = "6h"
pool = "main"
"#,
        );
    }
    let m = Manifest::parse("c.toml", &source, std::path::Path::new("/tmp/c.toml"))
        .unwrap_or_else(|e| panic!("{e:?}"));
    Model::of(&m)
}

#[test]
fn a_two_hour_daily_task_in_the_pool_shows_what_it_costs_the_hourly_sla() {
    let from = at("2026-09-02T00:00:30Z");
    let c = Config::new(3, 1, from, from + 7 * 86_400);
    let alone = run(&capacity(false), &c);
    let shared = run(&capacity(true), &c);
    assert!(alone.violations.is_empty() && shared.violations.is_empty());
    let share = |r: &report::Report| r.tasks[0].within_sla.unwrap();
    assert_eq!(share(&alone), 1.0, "{:?}", alone.tasks[0]);
    // Every day the two hours of `daily` hold the one slot: the hours due
    // meanwhile queue behind it and some miss their hour.
    assert!(share(&shared) < 0.99, "{:?}", shared.tasks[0]);
    assert!(shared.tasks[0].late > 0, "{:?}", shared.tasks[0]);
    let main = |r: &report::Report| r.pools.iter().find(|p| p.pool == "main").unwrap().clone();
    assert!(
        main(&shared).wait_p95 > main(&alone).wait_p95,
        "{:?}",
        main(&shared)
    );
}

// Seed 8 left a MISSED unannounced with both store faults on three engines
// before a dataset's first listing learned its layout (it passes since, as
// do seeds 1 to 16; the cause was not pinned down, so the seed is kept).
#[test]
fn slow_requests_and_short_listings_on_three_engines_announce_every_missed() {
    let mut c = config(8, 3);
    c.faults.latency = 0.01;
    c.faults.short_list = 0.05;
    let r = run(&mixed(), &c);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
}
