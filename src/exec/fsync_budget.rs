//! The fsync budget of one instance (BENCHMARKS.md, "The fsync budget"):
//! what a publication must make durable, and nothing more.

use std::path::Path;

use super::{run, InstanceResult, RunOptions};
use crate::manifest::Manifest;
use crate::plan::Scope;
use crate::store::fs::counted;

/// A path fsynced under `<warehouse>/rows`, with the partition, token and
/// temp names taken out: `p/log/<tmp>`, `p/data-<t>/out.csv`.
fn label(rows: &Path, path: &Path) -> Option<(String, String)> {
    let rel = path.strip_prefix(rows).ok()?;
    let mut parts = rel.iter().map(|p| p.to_string_lossy().into_owned());
    let Some(partition) = parts.next() else {
        return Some((String::new(), "rows/".into()));
    };
    let mut label = vec!["p".to_string()];
    for part in parts {
        label.push(match part {
            _ if part.starts_with('.') && part.ends_with(".tmp") => "<tmp>".into(),
            _ if part.bytes().all(|b| b.is_ascii_digit()) => "<t>".into(),
            _ if part.starts_with("data-") => "data-<t>".into(),
            _ => part,
        });
    }
    Some((partition, label.join("/")))
}

// One instance of a new partition cost 10 fsyncs at first, each one needed by an invariant,
// and its pool slot none; then 8, as its token's record is not synced (the engine's
// epoch, synced once per run, is what keeps a token lost in a crash from being reused), then 6:
// the published files move to `<p>/data-<t>/`, whose entry the partition dir's fsync makes durable
// together with the skeleton's, which is no longer synced before the token
#[test]
fn one_instance_stays_within_its_fsync_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("budget.toml");
    std::fs::write(
        &path,
        r#"[pipeline]
name = "budget"
code_version = "v1"
warehouse = "warehouse"

[partitions.parts]
kind = "static"
keys = ["a", "b", "c"]

[pools.work]
slots = 2

[tasks.write]
command = ["sh", "-c", "printf 'id,v\n1,a\n2,b\n' > \"$WEIR_OUTPUT_DIR/out.csv\""]
output = { dataset = "rows", format = "csv", grain = ["id"] }
pool = "work"
"#,
    )
    .unwrap();
    let manifest = Manifest::load(&path).unwrap();
    let options = RunOptions {
        scope: Scope::Latest,
        tasks: Vec::new(),
        force: false,
        resume_since: None,
        run_id: None,
        seed: Some(1),
        allow_uncertified: false,
        wait: None,
        settings: Default::default(),
        signed: None,
    };
    let summary = run(&manifest, &options, None).unwrap();
    assert_eq!(summary.instances.len(), 3);
    assert!(summary
        .instances
        .iter()
        .all(|(_, _, r)| matches!(r, InstanceResult::Published)));

    // Pool slots and engine heartbeats are liveness: none of their records
    // is fsynced, however many launches take and release slots; only their
    // directories' entries, once each when first made.
    for liveness in ["_pools", "_engines"] {
        let root = manifest.pipeline.warehouse.join(liveness);
        assert!(root.exists(), "{liveness} was written");
        let synced = counted::under(&root);
        let mut dirs = synced.clone();
        dirs.sort();
        dirs.dedup();
        assert!(
            dirs.iter().all(|p| p.is_dir()) && synced.len() <= 2 * dirs.len(),
            "{liveness} fsynced: {synced:?}"
        );
    }
    // One epoch for the run, made durable once (its record, `_epochs/`,
    // and the warehouse's entry for it), not once per instance or token.
    let epochs = counted::under(&manifest.pipeline.warehouse.join("_epochs"));
    assert!(epochs.len() <= 2, "_epochs fsynced: {epochs:?}");
    let rows = manifest.pipeline.warehouse.join("rows");
    let mut shared = Vec::new();
    let mut per_partition = std::collections::BTreeMap::<String, Vec<String>>::new();
    for synced in counted::under(&rows) {
        match label(&rows, &synced) {
            Some((p, l)) if p.is_empty() => shared.push(l),
            Some((p, l)) => per_partition.entry(p).or_default().push(l),
            None => {}
        }
    }
    // Each new partition's entry in rows/, made durable with its
    // candidate: one fsync of rows/ per new partition at most, fewer when
    // partitions are created together (one fsync covers every entry there
    // at that moment, `store/dirs.rs`), never none.
    assert!(
        (1..=3).contains(&shared.len()) && shared.iter().all(|l| l == "rows/"),
        "rows/ fsynced: {shared:?}"
    );
    let budget = [
        // the candidate, concurrently: its data, the data dir, and the data
        // dir's entry in the partition dir (whose fsync also covers the
        // skeleton: log/, tokens/, attempts/)
        "p",
        "p/data-<t>",
        "p/data-<t>/out.csv",
        // the commit record: its bytes, then its name (the commit point)
        "p/log",
        "p/log/<tmp>",
    ];
    assert_eq!(per_partition.len(), 3, "{per_partition:?}");
    for (partition, mut synced) in per_partition {
        synced.sort();
        let mut expected = budget.to_vec();
        expected.sort();
        assert_eq!(synced, expected, "the fsyncs of partition {partition}");
    }
}
