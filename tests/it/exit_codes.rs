//! Every command's error paths, with the exit code decided once from the
//! error's kind, asserted with stdout and stderr together; and reads that
//! fail for another reason than "absent" (ENOTDIR, EACCES) are engine
//! failures naming the path, never "nothing there".

use crate::support::{stderr, Sandbox};

/// `a` copies `feed_{partition}.csv`, `b` copies `a`'s output, over k1, k2.
fn pipeline() -> Sandbox {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "codes"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["k1", "k2"]

[datasets.feed]
path = "feed_{partition}.csv"

[tasks.a]
command = ["sh", "-c", "cp \"$WEIR_INPUT_FEED\" \"$WEIR_OUTPUT_DIR/out.csv\""]
inputs = ["feed"]
output = { dataset = "a_out", grain = ["id"] }

[tasks.b]
command = ["sh", "-c", "cat \"$WEIR_INPUT_A_OUT\"/*.csv > \"$WEIR_OUTPUT_DIR/out.csv\""]
inputs = ["a_out"]
output = { dataset = "b_out", grain = ["id"] }

[pools.p]
slots = 1

[backfills.all]
pool = "p"
from = "k1"
to = "k2"
reason = "test"
"#,
    );
    for k in ["k1", "k2"] {
        std::fs::write(sb.path().join(format!("feed_{k}.csv")), "id,v\n1,a\n2,b\n").unwrap();
    }
    sb
}

/// What a case expects on stderr.
enum Err {
    /// Exactly this text (`$SB` stands for the sandbox's path).
    Is(String),
    /// This text somewhere (miette diagnostics, whose frames are tested
    /// elsewhere).
    Has(&'static str),
}

#[track_caller]
fn check(sb: &Sandbox, args: &[&str], code: i32, out: &str, err: Err) {
    let ran = sb.cmd(args).assert().code(code).stdout(out);
    match err {
        Err::Is(text) => ran.stderr(&text),
        Err::Has(text) => ran.stderr_contains(&[text]),
    };
}

fn os(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

// The exit code is decided once, from the error's kind, for every
// command's usage (2), refusal (3), nothing-published (1) and engine (5) errors.
#[test]
fn every_command_decides_its_exit_code_from_the_error() {
    let sb = pipeline();
    let o = sb.run("r1", &["--partition", "k1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::write(sb.path().join("bad.toml"), "[pipeline]\nname = 1\n").unwrap();
    let unknown =
        || Err::Is("error: unknown task `nosuch`\n  help: declared tasks: `a`, `b`\n".into());
    // A key outside the scheme is refused before anything is read or logged.
    let not_a_key = || {
        Err::Is("error: partition `k9` is not in the partition scheme of task `a`\n  help: partitions are `k`: `k1`, `k2`; a task of several dimensions takes keys joined by `|`\n".into())
    };
    let cases: Vec<(Vec<&str>, i32, &str, Err)> = vec![
        // Usage and manifest: 2.
        (vec!["validate", "m.toml", "bad.toml"], 2,
            "ok: m.toml (pipeline `codes`, code_version 1: 2 tasks, 1 partition scheme, 2 pools, 1 backfill)\n",
            Err::Has("error: `bad.toml` is not a valid manifest: 2 errors\n")),
        (vec!["plan", "m.toml", "--task", "nosuch"], 2, "", Err::Has("× unknown task `nosuch`\n  help: declared tasks: `a`, `b`\n")),
        (vec!["run", "m.toml", "--task", "nosuch"], 2, "", Err::Has("× unknown task `nosuch`\n  help: declared tasks: `a`, `b`\n")),
        (vec!["backfill", "m.toml", "nosuch"], 2, "", Err::Has("× unknown backfill `nosuch`\n  help: declared backfills: `all`\n")),
        (vec!["show", "m.toml", "nosuch", "--partition", "k1"], 2, "",
            Err::Is("error: no task of `codes` publishes dataset `nosuch`\n  help: published datasets: `a_out`, `b_out`\n".into())),
        (vec!["history", "m.toml", "a", "--partition", "k1"], 2, "",
            Err::Is("error: no task of `codes` publishes dataset `a`\n  help: `a` is a task; it publishes dataset `a_out`\n".into())),
        (vec!["show", "m.toml", "a_out", "--partition", "k1", "--generation", "9"], 2, "",
            Err::Is("error: `a_out` k1 has no generation 9 (it has 1 to 1)\n  help: `weir history` lists them\n".into())),
        (vec!["retry", "m.toml", "nosuch", "--partition", "k1", "--note", "n"], 2, "", unknown()),
        (vec!["abandon", "m.toml", "a", "--partition", "k9", "--note", "n"], 2, "", not_a_key()),
        (vec!["explain", "m.toml", "a", "--partition", "k9"], 2, "", not_a_key()),
        (vec!["verify", "m.toml", "a", "--partition", "k9"], 2, "", not_a_key()),
        (vec!["show", "m.toml", "a_out", "--partition", "k9"], 2, "", not_a_key()),
        (vec!["history", "m.toml", "a_out", "--partition", "k9"], 2, "", not_a_key()),
        (vec!["rollback", "m.toml", "a_out", "--partition", "k9"], 2, "", not_a_key()),
        (vec!["certify", "m.toml", "a_out", "--partition", "k9", "--reason", "r"], 2, "", not_a_key()),
        (vec!["uncertify", "m.toml", "a_out", "--partition", "k9", "--generation", "1", "--reason", "r"], 2, "", not_a_key()),
        (vec!["explain", "m.toml", "nosuch", "--partition", "k1"], 2, "", unknown()),
        // `weir events` filters are checked like show's and explain's.
        (vec!["events", "m.toml", "--task", "nosuch"], 2, "", unknown()),
        (vec!["events", "m.toml", "--task", "a", "--partition", "k9"], 2, "", not_a_key()),
        (vec!["events", "m.toml", "--partition", "2030-01-01"], 2, "",
            Err::Is("error: partition `2030-01-01` is not in the partition scheme of any task\n  help: partitions are `k`: `k1`, `k2`; a task of several dimensions takes keys joined by `|`\n".into())),
        (vec!["verify", "m.toml", "nosuch", "--partition", "k1"], 2, "", Err::Has("× unknown task `nosuch`\n  help: declared tasks: `a`, `b`\n")),
        (vec!["gc", "m.toml", "--older-than", "yesterday"], 2, "", Err::Is("error: --older-than: `yesterday` is not a duration\n  help: write a duration such as \"48h\" or \"7d\"\n".into())),
        (vec!["events", "m.toml", "--run", "nope"], 2, "", Err::Is("error: no run `nope` in ./wh/_runs\n  help: `weir events m.toml` prints every run's events with its run id\n".into())),
        (vec!["report", "m.toml", "--run", "nope"], 2, "", Err::Is("error: no run `nope` in the warehouse\n".into())),
        // Nothing published: 1.
        (vec!["show", "m.toml", "a_out", "--partition", "k2"], 1, "",
            Err::Is("error: `a_out` has no published generation for partition k2\n".into())),
        (vec!["verify", "m.toml", "a", "--partition", "k2"], 1, "",
            Err::Has("task `a` has no published generation of `a_out` for partition k2")),
        // Refused: 3.
        (vec!["retry", "m.toml", "a", "--partition", "k1", "--note", "n"], 3, "",
            Err::Is("error: refused: a k1 is neither held nor quarantined; `weir retry` acts only on a HELD or QUARANTINED or ABANDONED or ACCEPTED instance\n  help: `weir status` lists them; `weir run m.toml --task a --partition k1 --force` reruns a published one\n".into())),
        (vec!["certify", "m.toml", "a_out", "--partition", "k2", "--reason", "r"], 3, "",
            Err::Is("error: `a_out` has no published generation for partition k2\n".into())),
        // A generation that does not exist is a bad
        // argument (2) everywhere, as in `show` (it was 3 here).
        (vec!["uncertify", "m.toml", "a_out", "--partition", "k1", "--generation", "9", "--reason", "r"], 2, "",
            Err::Is("error: `a_out` k1 has no generation 9 (it has 1 to 1)\n  help: `weir history` lists them\n".into())),
        (vec!["certify", "m.toml", "a_out", "--partition", "k1", "--generation", "99", "--reason", "r"], 2, "",
            Err::Is("error: `a_out` k1 has no generation 99 (it has 1 to 1)\n  help: `weir history` lists them\n".into())),
        (vec!["rollback", "m.toml", "a_out", "--partition", "k1", "--to", "9"], 2, "",
            Err::Has("× cannot roll back to generation 9: it does not exist")),
        (vec!["rollback", "m.toml", "a_out", "--partition", "k1", "--to", "9"], 2, "",
            Err::Has("help: `weir history` lists generations; pass `--to` one older")),
        (vec!["rollback", "m.toml", "a_out", "--partition", "k1"], 3, "", Err::Has("× cannot roll back to generation 1: it is the only generation: there is\n  │ nothing older to roll back to\n")),
        // The engine's own failure: 5, with the OS's cause.
        (vec!["plan", "m.toml", "--html", "m.toml/plan.html"], 5, "",
            Err::Is(format!("error: cannot write `m.toml/plan.html`: {}\n", os(libc::ENOTDIR)))),
    ];
    for (args, code, out, err) in cases {
        check(&sb, &args, code, out, err);
    }

    // The warehouse is a regular file: every command that opens it exits 5
    // saying so (status, gc, report, events, history are in operator_repair.rs).
    let wh = sb.path().join("wh");
    std::fs::rename(&wh, sb.path().join("wh.d")).unwrap();
    std::fs::write(&wh, "").unwrap();
    let cases: [&[&str]; 10] = [
        &["run", "m.toml"],
        &["backfill", "m.toml", "all"],
        &["show", "m.toml", "a_out", "--partition", "k1"],
        &["explain", "m.toml", "a", "--partition", "k1"],
        &["retry", "m.toml", "a", "--partition", "k1", "--note", "n"],
        &["abandon", "m.toml", "a", "--partition", "k1", "--note", "n"],
        &[
            "certify",
            "m.toml",
            "a_out",
            "--partition",
            "k1",
            "--reason",
            "r",
        ],
        &[
            "uncertify",
            "m.toml",
            "a_out",
            "--partition",
            "k1",
            "--reason",
            "r",
        ],
        &["rollback", "m.toml", "a_out", "--partition", "k1"],
        &["verify", "m.toml", "a", "--partition", "k1"],
    ];
    for args in cases {
        let open = if args[0] == "run" || args[0] == "backfill" {
            "cannot open the warehouse: "
        } else {
            ""
        };
        check(
            &sb,
            args,
            5,
            "",
            Err::Is(format!(
                "error: {open}i/o error on $SB/wh: {}\n",
                os(libc::ENOTDIR)
            )),
        );
    }
}

// A partition whose `log` is a regular file read as "nothing
// published" (status exited 0), and an `attempts` that is a regular file made
// gc report 0 candidates; both are the engine's failure, naming the path.
#[test]
fn a_file_where_a_directory_belongs_is_not_absence() {
    let sb = pipeline();
    let o = sb.run("r1", &["--partition", "k1", "--task", "a"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let part = sb.path().join("wh/a_out/k1");
    let notdir = os(libc::ENOTDIR);

    std::fs::rename(part.join("log"), part.join("log.d")).unwrap();
    std::fs::write(part.join("log"), "").unwrap();
    sb.cmd(&["status", "m.toml"])
        .assert()
        .code(5)
        .stdout(
            "missing: a_out: 1 expected partition without a publication: k2\n\
             missing: b_out: 2 expected partitions without a publication: k1, k2\n",
        )
        .stderr(&format!("error: a_out k1: cannot read its commit log: i/o error on $SB/wh/a_out/k1/log: {notdir}\n"));
    for args in [
        &["history", "m.toml", "a_out", "--partition", "k1"][..],
        &["show", "m.toml", "a_out", "--partition", "k1"][..],
    ] {
        check(
            &sb,
            args,
            5,
            "",
            Err::Is(format!(
                "error: i/o error on $SB/wh/a_out/k1/log: {notdir}\n"
            )),
        );
    }
    // verify keeps the cause too (it was flattened to a string).
    sb.cmd(&["verify", "m.toml", "a", "--partition", "k1"])
        .assert()
        .code(5)
        .stdout("")
        .stderr("weir::verify::warehouse\n\n  × cannot read the commit log\n  ├─▶ i/o error on $SB/wh/a_out/k1/log\n  ╰─▶ Not a directory (os error 20)\n  help: check that the warehouse is readable and writable (the rerun is\n        written under `_scratch/`)\n");
    std::fs::remove_file(part.join("log")).unwrap();
    std::fs::rename(part.join("log.d"), part.join("log")).unwrap();

    std::fs::rename(part.join("attempts"), part.join("attempts.d")).unwrap();
    std::fs::write(part.join("attempts"), "").unwrap();
    check(
        &sb,
        &["gc", "m.toml"],
        5,
        "",
        Err::Is(format!(
            "error: i/o error on $SB/wh/a_out/k1/attempts: {notdir}\n"
        )),
    );
    std::fs::remove_file(part.join("attempts")).unwrap();
    std::fs::rename(part.join("attempts.d"), part.join("attempts")).unwrap();

    // The latest run's event log cannot be read: the report says so
    // instead of drawing that run with no attempts.
    let runs = sb.path().join("wh/_runs");
    std::fs::create_dir_all(runs.join("r9/events.jsonl")).unwrap();
    check(
        &sb,
        &["report", "m.toml", "--out", "r.html"],
        5,
        "",
        Err::Is(format!(
            "error: cannot read the warehouse: i/o error on $SB/wh/_runs/r9/events.jsonl: {}\n",
            os(libc::EISDIR)
        )),
    );
    std::fs::remove_dir_all(runs.join("r9")).unwrap();
    std::fs::write(sb.path().join("wh/_runs.tmp"), "").unwrap();
    std::fs::rename(&runs, sb.path().join("wh/runs.d")).unwrap();
    std::fs::rename(sb.path().join("wh/_runs.tmp"), &runs).unwrap();
    check(
        &sb,
        &["report", "m.toml", "--out", "r.html"],
        5,
        "",
        Err::Is(format!(
            "error: cannot read the warehouse: i/o error on $SB/wh/_runs: {notdir}\n"
        )),
    );
    std::fs::remove_file(&runs).unwrap();
    std::fs::rename(sb.path().join("wh/runs.d"), &runs).unwrap();

    // Operator markers: one that cannot be read (here a directory: EISDIR),
    // or a directory of them that cannot be listed, fails status, and the
    // run fails the instance as the engine's (exit 5) before running it;
    // one that is not valid JSON holds its instance (when in doubt, wait
    // for a person), naming why.
    let marks = sb.path().join("wh/_instances");
    std::fs::create_dir_all(marks.join("a")).unwrap();
    std::fs::write(marks.join("b"), "").unwrap();
    check(
        &sb,
        &["status", "m.toml"],
        5,
        "",
        Err::Is(format!(
            "error: i/o error on $SB/wh/_instances/b: {notdir}\n"
        )),
    );
    // One engine failure, not "1 engine failures".
    sb.cmd(&["run", "m.toml", "--run-id", "r2", "--partition", "k1", "--task", "b", "--force"])
        .assert()
        .code(5)
        .stdout(&format!(
            "run r2: 1 task instance: 1 engine failure; 0 retries\n  \
             ENGINE      b k1: cannot read the instance's marker: i/o error on $SB/wh/_instances/b/k1.json: {notdir}\n\
             events: $SB/wh/_runs/r2/events.jsonl\n"
        ))
        .stderr(&format!(
            "b k1: ENGINE_FAILED cannot read the instance's marker: i/o error on $SB/wh/_instances/b/k1.json: {notdir}; not the task's failure: no retry spent, no marker; the run exits 5\n"
        ));
    std::fs::remove_file(marks.join("b")).unwrap();
    std::fs::create_dir(marks.join("a/k1.json")).unwrap();
    check(
        &sb,
        &["status", "m.toml"],
        5,
        "",
        Err::Is(format!(
            "error: i/o error on $SB/wh/_instances/a/k1.json: {}\n",
            os(libc::EISDIR)
        )),
    );
    std::fs::remove_dir(marks.join("a/k1.json")).unwrap();
    std::fs::write(marks.join("a/k1.json"), "{").unwrap();
    sb.cmd(&["status", "m.toml", "--check"])
        .assert()
        .code(4)
        .stdout("dataset  partition  gen  token  rows  code_version  published_at              digest\na_out    k1           1      1     2  1             [..]  sha256:d98be1f46a82…\n\na_out: 1 partition built by code_version 1\nmissing: a_out: 1 expected partition without a publication: k2\nmissing: b_out: 2 expected partitions without a publication: k1, k2\nHELD        a k1: unreadable instance marker `_instances/a/k1.json`: EOF while parsing an object at line 1 column 1\n")
        .stderr("check failed: 1 instance needs attention\n");
}

// `explain` read a commit log that is a regular file, an
// upstream's unreadable log and a marker that is a directory as absence
// ("nothing to do", exit 0) where status, show and history exit 5; and a
// marker that is not valid JSON was not mentioned.
#[test]
fn explain_does_not_take_unreadable_state_for_absence() {
    let sb = pipeline();
    let o = sb.run("r1", &["--partition", "k1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let part = sb.path().join("wh/a_out/k1");
    let notdir = os(libc::ENOTDIR);
    std::fs::rename(part.join("log"), part.join("log.d")).unwrap();
    std::fs::write(part.join("log"), "").unwrap();
    for task in ["a", "b"] {
        check(
            &sb,
            &["explain", "m.toml", task, "--partition", "k1"],
            5,
            "",
            Err::Is(format!(
                "error: i/o error on $SB/wh/a_out/k1/log: {notdir}\n"
            )),
        );
    }
    std::fs::remove_file(part.join("log")).unwrap();
    std::fs::rename(part.join("log.d"), part.join("log")).unwrap();

    let marks = sb.path().join("wh/_instances/a");
    std::fs::create_dir_all(marks.join("k1.json")).unwrap();
    check(
        &sb,
        &["explain", "m.toml", "a", "--partition", "k1"],
        5,
        "",
        Err::Is(format!(
            "error: i/o error on $SB/wh/_instances/a/k1.json: {}\n",
            os(libc::EISDIR)
        )),
    );
    std::fs::remove_dir(marks.join("k1.json")).unwrap();
    std::fs::write(marks.join("k1.json"), "{").unwrap();
    sb.cmd(&["explain", "m.toml", "a", "--partition", "k1"])
        .assert()
        .success()
        .stdout("a k1 (dataset `a_out`)\n\npublished: generation 1 (token 1, run r1, attempt 1), 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3, code_version 1\nstate: HELD: unreadable instance marker `_instances/a/k1.json`: EOF while parsing an object at line 1 column 1\n\nattempts:\n  run r1 attempt 1 token 1: PUBLISHED, [..]\n    started [..]\n    generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n\ninput snapshot (of the published generation 1):\n  feed (external): sha256:b5dccbd508bffd775a0ead9a1d4f398ecdb581e3ad27281047d0119b89c09a7d\n\nupstream:\n  none\n\nrecommended: decide: unreadable instance marker `_instances/a/k1.json`: EOF while parsing an object at line 1 column 1; fix or remove the marker, then `weir retry m.toml a --partition k1 --note \"...\"`\n")
        .stderr("");
    let x = sb
        .cmd(&["explain", "m.toml", "a", "--partition", "k1", "--json"])
        .assert()
        .success()
        .stdout_json();
    assert_eq!(x["action"], "decide");
}

// `--run-id` names a directory under `_runs/`: `../../x`
// wrote an event log outside the warehouse, `..` broke gc, and an empty
// id, `a/b` or a newline were accepted. Refused (exit 2) before anything is
// written, saying what is allowed.
#[test]
fn run_ids_are_validated() {
    let sb = pipeline();
    let long = "r".repeat(129);
    for id in ["../../x", "..", "", "a/b", "a\nb", ".hidden", long.as_str()] {
        for args in [
            vec!["run", "m.toml", "--run-id", id],
            vec!["backfill", "m.toml", "all", "--run-id", id],
        ] {
            check(
                &sb,
                &args,
                2,
                "",
                Err::Is(format!(
                    "error: run id {id:?} is not allowed: a run id is 1 to 128 letters, digits, `.`, `_` and `-`, not starting with `.`\n"
                )),
            );
        }
    }
    assert!(!sb.path().join("x").exists());
    assert!(!sb.path().join("wh/_runs").exists());
    // Nor is a path outside `_runs/` read as a run's log.
    std::fs::create_dir_all(sb.path().join("elsewhere")).unwrap();
    std::fs::write(sb.path().join("elsewhere/events.jsonl"), "").unwrap();
    for args in [
        &["events", "m.toml", "--run", "../../elsewhere"][..],
        &["report", "m.toml", "--run", "../../elsewhere"][..],
    ] {
        check(
            &sb,
            args,
            2,
            "",
            Err::Is("error: run id \"../../elsewhere\" is not allowed: a run id is 1 to 128 letters, digits, `.`, `_` and `-`, not starting with `.`\n".into()),
        );
    }
    let o = sb.run(&"r".repeat(128), &["--partition", "k1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = sb.run("r-1.2_b", &["--partition", "k2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

// `weir gc` printed `keep … cannot be read` and exited 0
// when a commit log could not be read. It still keeps everything under it,
// but exits 5 naming the partition, dry run or --apply.
#[test]
fn gc_exits_5_on_an_unreadable_commit_log() {
    let sb = pipeline();
    let o = sb.run("r1", &["--partition", "k1", "--task", "a"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let part = sb.path().join("wh/a_out/k1");
    std::fs::rename(part.join("log"), part.join("log.d")).unwrap();
    std::fs::write(part.join("log"), "").unwrap();
    let why = format!(
        "error: a_out k1: cannot read its commit log, so gc kept everything under it: i/o error on $SB/wh/a_out/k1/log: {}\n",
        os(libc::ENOTDIR)
    );
    for (args, outcome) in [
        (
            &["gc", "m.toml", "--older-than", "0s"][..],
            "dry run: 0 candidate directories (0 B) would be deleted, 1 kept; rerun with --apply to delete\n",
        ),
        (
            &["gc", "m.toml", "--older-than", "0s", "--apply"][..],
            "deleted 0 candidate directories, 1 kept\n",
        ),
    ] {
        sb.cmd(args)
            .assert()
            .code(5)
            .stdout(&format!(
                "keep         $SB/wh/a_out/k1/attempts/00000000000000000001 ([..]): the partition's commit log cannot be read (i/o error on $SB/wh/a_out/k1/log: {})\n{outcome}",
                os(libc::ENOTDIR)
            ))
            .stderr(&why);
    }
    assert_eq!(
        sb.entries("a_out", "k1", "attempts").len(),
        1,
        "nothing deleted"
    );
}
