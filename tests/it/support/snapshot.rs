//! Long exact outputs as snapshot files (insta), beside the test file in
//! `snapshots/`, named `it__<module>__<name>.snap`.
//!
//! A snapshot is the whole output, with only what varies from run to run
//! masked: the sandbox's path (`$SB`, by `Sandbox::check`), times (`[TIME]`),
//! measured durations (`[MS]`, `[DUR]`, `[BUSY]`) and operator run ids
//! (`op-[ID]`).
//!
//! To update after a deliberate change in the output, run the tests with
//! `INSTA_UPDATE=always` (e.g. `INSTA_UPDATE=always cargo test --test it --
//! operator_repair::`), then review `git diff tests/it/snapshots` before committing
//! (`cargo insta review`, if cargo-insta is installed, does the same
//! interactively from the `.snap.new` files a plain run leaves). A missing or
//! different snapshot fails the test; under `CI=true` insta writes nothing.

/// The filters every output snapshot is taken through.
pub(crate) fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_omit_expression(true);
    // RFC 3339 instants, as events, records and JSON carry them.
    s.add_filter(
        r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
        "[TIME]",
    );
    s.add_filter(r#""duration_ms": \d+"#, r#""duration_ms": [MS]"#);
    // Measured durations as `duration::render`/`human` write them ("850ms",
    // "12.3s", "1h 2m"): an attempt's, a plan's estimates and pools' busy share.
    const D: &str = r"\d+(?:\.\d)?(?:ms|h|m|s)(?: \d+(?:m|s))*";
    s.add_filter(&format!(r"(?m) +\d+%  {D}$"), "  [BUSY]  [DUR]");
    s.add_filter(
        &format!(r"(after|estimated wall time|p50|p90:?|queued) {D}"),
        "$1 [DUR]",
    );
    s.add_filter(
        &format!(r"(?m)^(  run \S+ attempt \d+ token \d+: .*), {D}$"),
        "$1, [DUR]",
    );
    s.add_filter(r"\bop-[0-9A-Za-z-]+", "op-[ID]");
    s
}

/// Asserts `text` is the snapshot `name` of the calling test's module,
/// through [`settings`].
macro_rules! assert_output {
    ($name:expr, $text:expr) => {
        $crate::support::snapshot::settings().bind(|| insta::assert_snapshot!($name, $text))
    };
}
pub(crate) use assert_output;
