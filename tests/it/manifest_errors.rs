//! Every kind of manifest error gets an exact diagnostic: file, line,
//! column, the underlined key or value, what is wrong and how to fix it.
//! Each `tests/fixtures/bad/NAME.toml` has its rendered `NAME.stderr`.

use weir::manifest::{Manifest, ManifestErrorKind};

use crate::support::{assert_snapshot, repo, weir_cmd};

/// (fixture, diagnostic code, 1-based line, column) of the first error.
const CASES: &[(&str, &str, usize, usize)] = &[
    ("syntax", "weir::manifest::syntax", 16, 1),
    ("unknown_key", "weir::manifest::unknown_key", 15, 1),
    ("wrong_type", "weir::manifest::wrong_type", 15, 11),
    ("missing_key", "weir::manifest::missing_key", 16, 10),
    ("unknown_dependency", "weir::manifest::unknown_task", 20, 15),
    ("unknown_input", "weir::manifest::unknown_dataset", 19, 11),
    ("unknown_pool", "weir::manifest::unknown_pool", 17, 8),
    (
        "unknown_retry_class",
        "weir::manifest::unknown_retry_class",
        20,
        9,
    ),
    (
        "unknown_partition_scheme",
        "weir::manifest::unknown_partition_scheme",
        17,
        18,
    ),
    ("cycle", "weir::manifest::cycle", 16, 15),
    (
        "duplicate_grain_column",
        "weir::manifest::duplicate_grain_column",
        16,
        64,
    ),
    (
        "gate_unknown_input",
        "weir::manifest::gate_unknown_input",
        21,
        53,
    ),
    ("backfill_reversed", "weir::manifest::bad_range", 20, 6),
    (
        "backfill_outside_scheme",
        "weir::manifest::out_of_range",
        19,
        8,
    ),
    ("bad_duration", "weir::manifest::bad_duration", 17, 11),
    ("bad_date", "weir::manifest::bad_date", 8, 9),
    (
        "remote_warehouse",
        "weir::manifest::remote_warehouse",
        4,
        13,
    ),
    ("zero_slots", "weir::manifest::bad_slots", 15, 9),
    (
        "duplicate_output",
        "weir::manifest::duplicate_output",
        20,
        22,
    ),
    ("unknown_section", "weir::manifest::unknown_section", 6, 2),
    ("many_errors", "weir::manifest::invalid_value", 15, 16),
    // A heartbeat so short that scheduling delays look like a dead engine
    (
        "heartbeat_too_short",
        "weir::manifest::heartbeat_too_short",
        17,
        13,
    ),
    // Timezones, period keys and input overrides
    (
        "unknown_timezone",
        "weir::manifest::unknown_timezone",
        9,
        12,
    ),
    (
        "bad_partition_key",
        "weir::manifest::bad_partition_key",
        8,
        9,
    ),
    ("invalid_shift", "weir::manifest::invalid_shift", 22, 34),
    // A scheduler time limit below the task's timeout
    (
        "time_below_timeout",
        "weir::manifest::time_below_timeout",
        16,
        47,
    ),
    // `exit_codes` keys are codes or Slurm end-state names
    ("exit_code_name", "weir::manifest::bad_exit_code", 14, 45),
    // A pool's launch rate is COUNT/DURATION
    ("bad_rate", "weir::manifest::bad_rate", 16, 8),
    // A Delta table holds Parquet files; a CSV output cannot be one
    (
        "table_needs_parquet",
        "weir::manifest::table_needs_parquet",
        13,
        78,
    ),
    // A duration so long that deadlines computed from it overflow
    (
        "duration_too_long",
        "weir::manifest::duration_too_long",
        17,
        11,
    ),
    // A static key too long for the warehouse's names
    ("key_too_long", "weir::manifest::key_too_long", 8, 15),
    // Kinds that had no test: each fixture makes its kind the first error.
    ("bad_name", "weir::manifest::bad_name", 6, 8),
    ("duplicate_scheme", "weir::manifest::duplicate", 14, 28),
    ("header_name", "weir::manifest::header_name", 13, 13),
    ("missing_code", "weir::manifest::missing_code", 8, 9),
    ("missing_section", "weir::manifest::missing_section", 1, 1),
    ("notify_command", "weir::manifest::notify_command", 12, 11),
    ("notify_name", "weir::manifest::notify_name", 11, 9),
    (
        "retention_needs_table",
        "weir::manifest::retention_needs_table",
        8,
        92,
    ),
    (
        "schema_needs_table",
        "weir::manifest::schema_needs_table",
        8,
        83,
    ),
    ("scheme_mismatch", "weir::manifest::scheme_mismatch", 27, 12),
    ("self_dependency", "weir::manifest::self_dependency", 10, 15),
    ("self_input", "weir::manifest::self_input", 8, 11),
    (
        "unknown_failure_class",
        "weir::manifest::unknown_failure_class",
        10,
        39,
    ),
];

fn fixture(name: &str) -> std::path::PathBuf {
    repo()
        .join("tests/fixtures/bad")
        .join(format!("{name}.toml"))
}

#[test]
fn every_error_kind_has_its_code_and_location() {
    for (name, code, line, col) in CASES {
        let path = fixture(name);
        let errors = Manifest::load(&path).expect_err(name);
        let first = &errors.errors[0];
        assert_eq!(first.code, *code, "{name}: code");
        assert_eq!(
            first.line_col(),
            Some((*line, *col)),
            "{name}: location of `{}`",
            first.message
        );
    }
}

/// Every kind of manifest error is asserted by some test under tests/it: a
/// kind added without one fails here, by name.
#[test]
fn every_error_kind_is_asserted_by_a_test() {
    let mut tests = String::new();
    for entry in std::fs::read_dir(repo().join("tests/it")).expect("tests/it") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            tests.push_str(&std::fs::read_to_string(&path).expect("a test file"));
        }
    }
    // A code counts where it ends: `duplicate` is not `duplicate_output`.
    let named = |code: &str| {
        tests.match_indices(code).any(|(at, _)| {
            tests[at + code.len()..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_ascii_lowercase() || c == '_'))
        })
    };
    let untested: Vec<&str> = ManifestErrorKind::ALL
        .iter()
        .map(|kind| kind.code())
        .filter(|code| !named(code))
        .collect();
    assert!(untested.is_empty(), "no test asserts {untested:?}");
}

/// A manifest that cannot be read has no line to point at: its diagnostic
/// names the file.
#[test]
fn an_unreadable_manifest_has_its_code_and_no_location() {
    let errors = Manifest::load(&fixture("no_such_manifest")).expect_err("no such file");
    let first = &errors.errors[0];
    assert_eq!(first.code, "weir::manifest::unreadable");
    assert_eq!(first.kind, ManifestErrorKind::Unreadable);
    assert_eq!(first.line_col(), None);
}

#[test]
fn diagnostics_render_exactly() {
    for (name, _, _, _) in CASES {
        let text = weir_cmd(&["validate", &format!("{name}.toml")])
            .current_dir(repo().join("tests/fixtures/bad"))
            .assert()
            .code(2)
            .stdout("")
            .stderr_text();
        assert!(
            !text.contains("panicked") && !text.contains("RUST_BACKTRACE"),
            "{name}: {text}"
        );
        assert_snapshot(
            &repo().join(format!("tests/fixtures/bad/{name}.stderr")),
            &text,
        );
    }
}

#[test]
fn every_independent_error_is_reported() {
    let errors = Manifest::load(&fixture("many_errors")).unwrap_err();
    let codes: Vec<&str> = errors.errors.iter().map(|e| e.code).collect();
    assert_eq!(
        codes,
        [
            "weir::manifest::invalid_value", // max_attempts = 0
            "weir::manifest::unknown_pool",  // bakfill
            "weir::manifest::bad_duration",  // heartbeat = "soon"
            "weir::manifest::invalid_value", // format = "parquet"
            "weir::manifest::unknown_gate",  // row_cout
        ]
    );
}

#[test]
fn misspelt_names_get_a_suggestion() {
    let cases = [
        ("unknown_dependency", "did you mean `extract`?"),
        ("unknown_input", "did you mean `raw_orders`?"),
        ("unknown_pool", "did you mean `current`?"),
        ("unknown_section", "did you mean `partitions`?"),
    ];
    for (name, help) in cases {
        let errors = Manifest::load(&fixture(name)).unwrap_err();
        assert_eq!(errors.errors[0].help.as_deref(), Some(help), "{name}");
    }
}

#[test]
fn a_cycle_names_every_task_in_order() {
    let errors = Manifest::load(&fixture("cycle")).unwrap_err();
    assert_eq!(errors.errors.len(), 1);
    assert_eq!(
        errors.errors[0].message,
        "dependency cycle: `extract` -> `load` -> `transform` -> `extract`"
    );
    assert_eq!(
        errors.errors[0].secondary.len(),
        2,
        "each depends_on entry is labelled"
    );
}

#[test]
fn a_missing_file_is_a_diagnostic_not_a_panic() {
    weir_cmd(&["validate", "no/such/manifest.toml"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(
            "weir::manifest::unreadable

  × cannot read `no/such/manifest.toml`: No such file or directory (os error
  │ 2)
  help: check the path; manifests are TOML files such as `pipelines/
        atlasmart.toml`

error: `no/such/manifest.toml` is not a valid manifest: 1 error
",
        );
}

mod never_panics {
    //! Whatever the bytes, validation returns a value: proptest over random
    //! text and over mutations of a real manifest.
    use proptest::prelude::*;
    use std::path::Path;
    use weir::manifest::Manifest;

    fn atlasmart() -> String {
        std::fs::read_to_string(crate::support::repo().join("pipelines/atlasmart.toml")).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

        #[test]
        fn random_text(src in "\\PC{0,400}") {
            let _ = Manifest::parse("random.toml", &src, Path::new("random.toml"));
        }

        #[test]
        fn mutated_manifest(cut in 0usize..4000, len in 0usize..40, insert in "[\\[\\]{}=\",.a-z0-9 \n#'-]{0,12}") {
            let mut src = atlasmart();
            let start = floor_char(&src, cut.min(src.len()));
            let end = floor_char(&src, (start + len).min(src.len()));
            src.replace_range(start..end, &insert);
            let _ = Manifest::parse("mutated.toml", &src, Path::new("pipelines/mutated.toml"));
        }
    }

    fn floor_char(s: &str, mut i: usize) -> usize {
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}
