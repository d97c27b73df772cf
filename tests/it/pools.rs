//! Pools: never more attempts at once than slots, and the slots are used.

use weir::exec::InstanceResult;
use weir::plan::Scope;

use crate::support::manifest::Pipeline;
use crate::support::{max_overlap, run_options};

#[test]
fn pool_limit_holds() {
    let keys: Vec<String> = (1..=12).map(|i| format!("k{i:02}")).collect();
    let sb = Pipeline::new("pools")
        .static_keys("k", &keys)
        .pool("narrow", 3)
        .sh_task("t", "out", r#"pool = "narrow""#)
        .sandbox();
    // intervals.log is in the manifest's directory, outside the warehouse.
    sb.script(
        "t.sh",
        r#"echo "start $(date +%s%N) $WEIR_PARTITION" >> intervals.log
sleep 0.2
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv"
echo "end $(date +%s%N) $WEIR_PARTITION" >> intervals.log
"#,
    );
    let summary = weir::exec::run(
        &sb.manifest(),
        &run_options(Scope::Latest, "pools", false),
        None,
    )
    .unwrap();
    assert_eq!(summary.instances.len(), 12);
    assert!(
        summary
            .instances
            .iter()
            .all(|(_, _, r)| *r == InstanceResult::Published),
        "{:?}",
        summary.instances
    );

    let log = std::fs::read_to_string(sb.path().join("intervals.log")).unwrap();
    let mut intervals = Vec::new();
    for key in &keys {
        let at = |what: &str| -> u128 {
            let found: Vec<u128> = log
                .lines()
                .filter_map(|l| {
                    let mut parts = l.split_whitespace();
                    let (w, t, k) = (parts.next()?, parts.next()?, parts.next()?);
                    (w == what && k == key).then(|| t.parse().expect("date +%s%N"))
                })
                .collect();
            assert_eq!(found.len(), 1, "{what} of {key}:\n{log}");
            found[0]
        };
        let (start, end) = (at("start"), at("end"));
        assert!(start < end, "{key}");
        intervals.push((start, end));
    }
    assert_eq!(
        max_overlap(&intervals),
        3,
        "at most 3 at once, and 3 were reached:\n{log}"
    );
}
