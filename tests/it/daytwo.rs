//! Day two: the operator's repair path (rollback propagates, precise
//! selection, retry of one instance), clean interrupts and Unix manners,
//! through the binary with exit code, stdout and stderr asserted together.

use weir::events::State;

use crate::support::{states, stderr, stdout, Sandbox, Visible};

/// `m.toml` over static `keys`: `a` copies `feed_{partition}.csv` (or writes
/// wrong rows while `flag` exists), `b` copies `a`'s output, `c` copies `b`'s.
fn chain(keys: &[&str]) -> Sandbox {
    let sb = Sandbox::new(&format!(
        r#"
[pipeline]
name = "daytwo"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = {keys:?}

[datasets.feed]
path = "feed_{{partition}}.csv"

[tasks.a]
command = ["sh", "a.sh"]
inputs = ["feed"]
output = {{ dataset = "a_out", grain = ["id"] }}

[tasks.b]
command = ["sh", "copy.sh", "A_OUT"]
inputs = ["a_out"]
output = {{ dataset = "b_out", grain = ["id"] }}

[tasks.c]
command = ["sh", "copy.sh", "B_OUT"]
inputs = ["b_out"]
output = {{ dataset = "c_out", grain = ["id"] }}
"#
    ));
    sb.script(
        "a.sh",
        r#"if [ -f flag ]; then printf 'id,v\n1,wrong\n' > "$WEIR_OUTPUT_DIR/out.csv"
else cp "$WEIR_INPUT_FEED" "$WEIR_OUTPUT_DIR/out.csv"; fi
"#,
    );
    sb.script(
        "copy.sh",
        r#"eval "src=\$WEIR_INPUT_$1"; cat "$src"/*.csv > "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    for k in keys {
        std::fs::write(sb.path().join(format!("feed_{k}.csv")), "id,v\n1,a\n2,b\n").unwrap();
    }
    sb
}

#[track_caller]
fn assert_exit(out: &std::process::Output, expected: i32) {
    assert_eq!(
        out.status.code(),
        Some(expected),
        "stdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

fn rows(sb: &Sandbox, dataset: &str, partition: &str) -> String {
    let out = sb.weir_out(&["show", "m.toml", dataset, "--partition", partition]);
    assert_exit(&out, 0);
    assert_eq!(stderr(&out), "");
    stdout(&out)
}

// issue 12: a rolled-back upstream is HELD (not rebuilt) and its published
// generation is consumed downstream: downstream rebuilds from it.
#[test]
fn issue_12_rollback_is_consumed_downstream() {
    let sb = chain(&["k1"]);
    assert_exit(&sb.run("r1", &[]), 0);
    std::fs::write(sb.path().join("flag"), "").unwrap();
    assert_exit(&sb.run("r2", &["--force", "--task", "a"]), 0);
    assert_exit(&sb.run("r2b", &[]), 0);
    assert_eq!(rows(&sb, "c_out", "k1"), "id,v\n1,wrong\n");

    let out = sb.weir_out(&["rollback", "m.toml", "a_out", "--partition", "k1"]);
    assert_exit(&out, 0);
    let rolled = Visible::of(&sb.store("a_out", "k1"));
    assert_eq!(rolled.record.generation.get(), 3);

    // `--task b`: the held upstream is not rebuilt, its rolled-back
    // generation is read.
    let out = sb.run("r3", &["--task", "b"]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains("run r3: 2 task instances: 1 published, 1 held; 0 retries"),
        "{text}"
    );
    assert!(
        text.contains("HELD        a k1: HELD since run op-"),
        "{text}"
    );
    let r3 = sb.events("r3");
    assert_eq!(states(&r3, "a", "k1"), [State::Queued, State::Held]);
    assert_eq!(states(&r3, "b", "k1").last(), Some(&State::Published));
    assert_eq!(rows(&sb, "b_out", "k1"), "id,v\n1,a\n2,b\n");
    assert_eq!(
        sb.store("a_out", "k1").history().unwrap().len(),
        3,
        "a not rebuilt"
    );

    // The whole pipeline: c rebuilds from b's new generation; b is current.
    let out = sb.run("r4", &[]);
    assert_exit(&out, 1);
    let r4 = sb.events("r4");
    assert_eq!(states(&r4, "a", "k1"), [State::Queued, State::Held]);
    assert_eq!(
        states(&r4, "b", "k1").last(),
        Some(&State::AlreadyPublished)
    );
    assert_eq!(states(&r4, "c", "k1").last(), Some(&State::Published));
    assert_eq!(rows(&sb, "c_out", "k1"), "id,v\n1,a\n2,b\n");
    assert!(!stdout(&out).contains("SKIPPED"), "{}", stdout(&out));
}
