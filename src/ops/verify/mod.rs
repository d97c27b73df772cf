//! Verification: rerun a published instance from its pinned inputs and
//! compare the result with what was published. Nothing is published, no
//! token is allocated and no record or event is written: the rerun's files
//! stay in a scratch directory, `<warehouse>/_scratch/verify-<time>-<rand>/`,
//! for the operator to inspect (gc never looks under `_`-names).
//!
//! ```text
//!  latest record of the task's output ──► its input_snapshot
//!     upstream input ──► the record of that dataset at the *pinned* generation,
//!                        its token, digest and files checked again
//!     external input ──► the file at the pinned path, its SHA-256 checked again
//!  run the command (same environment as an attempt) ──► scratch/data/
//!  canonical digest of scratch/data ══ record.digest ?  deterministic
//!                                    ≠                 rows only on one side
//! ```
//!
//! Verification needs the same evidence the publication read: an input that
//! changed or disappeared since is an error, not a difference.

mod differences;
mod error;

use differences::differences;
use error::{audit, not_understood, warehouse_failed};
pub use error::{Unproven, VerifyError};

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::audit::{self, Format};
use crate::exec::classify::Ending;
use crate::exec::launch::{self, Contract, ContractInput, Launcher, TaskLaunch};
use crate::inputs::materialize as inputs;
use crate::manifest::Manifest;
use crate::store::{CommitRecord, Depth, DriftKind, Generation, Warehouse};

/// Bytes of the rerun's stderr kept in [`VerifyError::TaskFailed`].
const TAIL_BYTES: usize = 2048;

/// What a verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The task.
    pub task: String,
    /// The partition.
    pub partition: String,
    /// The published generation that was checked.
    pub generation: u64,
    /// The digest in its commit record.
    pub published_digest: String,
    /// The digest of the rerun's files.
    pub rerun_digest: String,
    /// Row counts: (published, rerun).
    pub rows: (u64, u64),
    /// Whether the rerun reproduced the published digest.
    pub deterministic: bool,
    /// Up to five rows present on one side only, e.g.
    /// `only in published: order_id=A-1, line_no=1, qty=2` (preceded by a
    /// `columns differ: …` line when the column sets differ).
    pub differences: Vec<String>,
    /// The scratch directory holding the rerun (`data/`, `stdout.log`,
    /// `stderr.log`); kept for inspection.
    pub scratch: PathBuf,
    /// When the output is a Delta table: `Ok` when the table shows exactly
    /// the visible generation's files of the partition, else how it
    /// differs (or why its log cannot be read).
    pub table: Option<Result<(), String>>,
}

/// Proves the visible generation `record` of `store` is what it says: its
/// token was allocated, every file matches its size and SHA-256, and the
/// files' canonical digest and rows (in `format`) are the record's. Reads
/// every byte (from an object store, one download).
pub fn check_visible(
    store: &crate::store::PartitionStore,
    record: &CommitRecord,
    format: Format,
) -> Result<(), Box<Unproven>> {
    let unreadable = |source: Box<dyn std::error::Error + Send + Sync>| {
        Box::new(Unproven::Unreadable {
            dataset: record.dataset.clone(),
            partition: record.partition.clone(),
            generation: record.generation.get(),
            source,
        })
    };
    match store.token_record(record.token) {
        Ok(Some(_)) => {}
        // A local token record is not synced: a power cut after the commit
        // may take it while the (durable) commit record stays.
        Ok(None) if store.token_lost_in_a_crash(record.token).unwrap_or(false) => {}
        Ok(None) => {
            return Err(Box::new(Unproven::UnallocatedToken {
                dataset: record.dataset.clone(),
                partition: record.partition.clone(),
                generation: record.generation.get(),
                token: record.token.get(),
                key: record.token.key_name(),
            }))
        }
        Err(e) => return Err(unreadable(Box::new(e))),
    }
    let paths = store
        .local_files(record)
        .map_err(|e| unreadable(Box::new(e)))?;
    store
        .check_paths(record, &paths, Depth::Hash)
        .map_err(|d| Box::new(Unproven::Drift(d)))?;
    let (rows, digest) =
        audit::digest_files(&paths, format).map_err(|e| unreadable(Box::new(e)))?;
    if rows != record.rows || digest.as_str() != record.digest {
        return Err(Box::new(Unproven::Digest {
            dataset: record.dataset.clone(),
            partition: record.partition.clone(),
            generation: record.generation.get(),
            recorded: record.digest.clone(),
            recorded_rows: record.rows,
            digest: digest.as_str().to_string(),
            rows,
        }));
    }
    Ok(())
}

/// One input as a commit record's `input_snapshot` holds it (see
/// [`crate::inputs::PinnedInput`]).
#[derive(Debug, Deserialize)]
struct StoredInput {
    name: String,
    kind: String,
    #[serde(default)]
    task: Option<String>,
    #[serde(default)]
    generation: Option<u64>,
    #[serde(default)]
    token: Option<u64>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    watermark: Option<String>,
    /// The upstream partition, when not the task's own.
    #[serde(default)]
    partition: Option<String>,
    /// Each upstream partition of an input mapped to several.
    #[serde(default)]
    partitions: Vec<StoredPartition>,
    digest: String,
}

/// One upstream partition of an input mapped to several.
#[derive(Debug, Deserialize)]
struct StoredPartition {
    partition: String,
    generation: u64,
    token: u64,
    digest: String,
}

#[derive(Debug, Deserialize)]
struct StoredSnapshot {
    inputs: Vec<StoredInput>,
}

/// An input pinned again for the rerun.
struct Repinned {
    name: String,
    location: PathBuf,
    watermark: Option<String>,
}

impl<'a> From<&'a Repinned> for ContractInput<'a> {
    fn from(input: &'a Repinned) -> Self {
        ContractInput {
            name: &input.name,
            location: &input.location,
            watermark: input.watermark.as_deref(),
        }
    }
}

/// Reruns `task` at `partition` from the inputs its published generation
/// pinned, in a scratch directory, and compares the rerun's canonical digest
/// with the published one. Publishes nothing.
pub fn verify(
    manifest: &Manifest,
    warehouse: &Warehouse,
    task: &str,
    partition: &str,
) -> Result<VerifyReport, VerifyError> {
    let spec = manifest
        .tasks
        .get(task)
        .ok_or_else(|| VerifyError::UnknownTask {
            task: task.to_string(),
            help: crate::manifest::unknown_task_help(manifest, task),
        })?;
    let store = warehouse.partition(&spec.output.dataset, partition);
    records_whole(spec, partition, &store)?;
    let record = store
        .latest()
        .map_err(warehouse_failed("cannot read the commit log"))?
        .ok_or_else(|| VerifyError::NothingPublished {
            task: task.to_string(),
            dataset: spec.output.dataset.clone(),
            partition: partition.to_string(),
        })?;
    let snapshot: StoredSnapshot =
        serde_json::from_value(record.input_snapshot.clone()).map_err(|e| {
            warehouse_failed(format!(
                "the input_snapshot of `{}` {partition} generation {} cannot be read",
                spec.output.dataset, record.generation
            ))(e)
        })?;
    // What is published must still be what was committed before it is
    // compared with anything.
    check_visible(&store, &record, spec.output.format)?;
    let table = table_agreement(spec, partition, &store, &record);
    let (run_id, scratch) = scratch_dir(warehouse.root())?;
    let inputs = snapshot
        .inputs
        .iter()
        .map(|input| repin(manifest, warehouse, partition, input, &scratch))
        .collect::<Result<Vec<_>, _>>()?;

    let data = scratch.join("data");
    // What `run` gives an attempt, from the same builder; only the
    // launcher (no attempt, no token, the record's code_version) and the
    // scratch paths are verify's own.
    let contract = Contract {
        launcher: Launcher::Rerun {
            id: &run_id,
            code_version: &record.code_version,
        },
        partition,
        output_dir: &data,
        inputs: inputs.iter().map(ContractInput::from).collect(),
    };
    let command = TaskLaunch::new(manifest, spec, &contract, launch::program(spec))?;
    let ending = launch::run(&command.command(&scratch, crate::process::tree::new_tag()));
    // As after an attempt: no secret value stays in the logs.
    let _ = command.redact_logs(&scratch);
    if ending != Ending::Success {
        return Err(VerifyError::TaskFailed {
            ending: ending.describe(),
            stderr_tail: launch::tail(&scratch.join("stderr.log"), TAIL_BYTES),
        });
    }

    let format = spec.output.format;
    let rerun_files = audit::candidate_files(&data, format).map_err(audit("rerun"))?;
    let (rerun_rows, rerun_digest) =
        audit::digest_files(&rerun_files, format).map_err(audit("rerun"))?;
    let rerun_digest = rerun_digest.as_str().to_string();
    let deterministic = rerun_digest == record.digest;
    let differences = if deterministic {
        Vec::new()
    } else {
        differences(
            &store
                .local_files(&record)
                .map_err(warehouse_failed("cannot read the published files"))?,
            &rerun_files,
            format,
            &spec.output.grain,
        )?
    };
    Ok(VerifyReport {
        task: task.to_string(),
        partition: partition.to_string(),
        generation: record.generation.get(),
        published_digest: record.digest.clone(),
        rerun_digest,
        rows: (record.rows, rerun_rows),
        deterministic,
        differences,
        scratch,
        table,
    })
}

/// For a Delta table output: records another engine's VACUUM deleted
/// while the table still shows their publications are missing (an engine
/// error naming them), not an unpublished instance.
fn records_whole(
    spec: &crate::manifest::Task,
    partition: &str,
    store: &crate::store::PartitionStore,
) -> Result<(), VerifyError> {
    if crate::store::delta::columns_of(spec, partition).is_none() {
        return Ok(());
    }
    let missing = crate::store::delta::missing_records(store)
        .map_err(warehouse_failed("cannot read the Delta log"))?;
    match missing {
        None => Ok(()),
        Some(what) => Err(warehouse_failed("cannot read the commit log")(what)),
    }
}

/// When the output is a Delta table: whether the table shows exactly the
/// published files of `record`, or what it shows instead.
fn table_agreement(
    spec: &crate::manifest::Task,
    partition: &str,
    store: &crate::store::PartitionStore,
    record: &CommitRecord,
) -> Option<Result<(), String>> {
    use crate::ops::table_rows::{compare, Shown};
    crate::store::delta::columns_of(spec, partition).map(|(columns, values)| {
        match crate::store::delta::TableView::read(store) {
            // Another engine's compaction shows the same rows: agreement.
            Ok(view) => match compare(
                store,
                &view,
                spec.output.format,
                (&columns, &values),
                record,
            ) {
                None | Some(Shown::SameRows(_)) => Ok(()),
                Some(Shown::Drift(detail)) => Err(detail),
            },
            Err(e) => Err(format!(
                "its Delta log cannot be read: {}",
                crate::store::chain(&e)
            )),
        }
    })
}

/// Pins `input` again exactly as the snapshot did, or says why it cannot.
fn repin(
    manifest: &Manifest,
    warehouse: &Warehouse,
    partition: &str,
    input: &StoredInput,
    scratch: &Path,
) -> Result<Repinned, VerifyError> {
    let copies = inputs::input_dir(scratch, &input.name);
    // A pinned file that is gone is missing; one that changed is changed.
    let copy_failed = |e: inputs::MaterializeError| match e {
        inputs::MaterializeError::Drift(d) => match d.kind {
            DriftKind::Vanished => input_missing(input, d.to_string()),
            _ => input_changed(input, d.to_string()),
        },
        e => warehouse_failed("cannot check the published files")(e),
    };
    match input.kind.as_str() {
        "external" => repin_external(manifest, input, &copies),
        "upstream" if !input.partitions.is_empty() => {
            let mut pinned = Vec::with_capacity(input.partitions.len());
            for p in &input.partitions {
                repin_generation(
                    manifest,
                    warehouse,
                    input,
                    &p.partition,
                    p.generation,
                    Some(p.token),
                    &p.digest,
                )?;
                pinned.push(crate::inputs::PinnedPartition {
                    partition: p.partition.clone(),
                    generation: p.generation,
                    token: p.token,
                    digest: p.digest.clone(),
                });
            }
            // Private copies, a directory per key, as the attempt had them.
            crate::inputs::stage_partitions(warehouse, &input.name, (&pinned, None), &copies)
                .map_err(copy_failed)?;
            Ok(Repinned {
                name: input.name.clone(),
                location: copies,
                watermark: None,
            })
        }
        "upstream" => {
            let generation = input.generation.ok_or_else(|| {
                not_understood(format!(
                    "pinned upstream input `{}` has no generation",
                    input.name
                ))
            })?;
            let key = input.partition.as_deref().unwrap_or(partition);
            let record = repin_generation(
                manifest,
                warehouse,
                input,
                key,
                generation,
                input.token,
                &input.digest,
            )?;
            // The rerun reads private copies, checked against the record's sums.
            inputs::materialize_generation(
                &warehouse.partition(&input.name, key),
                &record,
                &copies,
            )
            .map_err(copy_failed)?;
            let location = copies;
            Ok(Repinned {
                name: input.name.clone(),
                location,
                watermark: None,
            })
        }
        other => Err(not_understood(format!(
            "pinned input `{}` has unknown kind `{other}`",
            input.name
        ))),
    }
}

/// `input` cannot be read as it was pinned.
fn input_missing(input: &StoredInput, why: String) -> VerifyError {
    VerifyError::InputMissing {
        input: input.name.clone(),
        why,
    }
}

/// `input` is no longer what was pinned: it is `now`.
fn input_changed(input: &StoredInput, now: String) -> VerifyError {
    VerifyError::InputChanged {
        input: input.name.clone(),
        pinned: input.digest.clone(),
        now,
    }
}

/// A pinned external input, copied privately for the rerun and hashed
/// while it was copied: missing if it cannot be read, changed if its
/// digest moved.
fn repin_external(
    manifest: &Manifest,
    input: &StoredInput,
    copies: &Path,
) -> Result<Repinned, VerifyError> {
    let relative = input.path.as_deref().ok_or_else(|| {
        not_understood(format!(
            "pinned external input `{}` has no path",
            input.name
        ))
    })?;
    let live = manifest.dir.join(relative);
    let location = match inputs::materialize_external(&live, &input.digest, copies, &input.name) {
        Ok(copy) => copy,
        Err(inputs::MaterializeError::Moved { now, .. }) => return Err(input_changed(input, now)),
        Err(inputs::MaterializeError::Io { path, source }) if path == live => {
            return Err(input_missing(
                input,
                format!("cannot read {}: {source}", live.display()),
            ))
        }
        Err(e) => return Err(warehouse_failed("cannot read a pinned input")(e)),
    };
    Ok(Repinned {
        name: input.name.clone(),
        location,
        watermark: input.watermark.clone(),
    })
}

/// The record of upstream generation `generation` of `input` at
/// `partition`, checked against the pinned token and digest.
fn repin_generation(
    manifest: &Manifest,
    warehouse: &Warehouse,
    input: &StoredInput,
    partition: &str,
    generation: u64,
    token: Option<u64>,
    digest: &str,
) -> Result<CommitRecord, VerifyError> {
    let missing = |why: String| VerifyError::InputMissing {
        input: input.name.clone(),
        why,
    };
    let changed = |now: String| VerifyError::InputChanged {
        input: input.name.clone(),
        pinned: digest.to_string(),
        now,
    };
    let store = warehouse.partition(&input.name, partition);
    let record = store
        .record(Generation::from_raw(generation))
        .map_err(warehouse_failed("cannot read an upstream commit log"))?
        .ok_or_else(|| {
            missing(format!(
                "partition {partition} has no generation {generation}"
            ))
        })?;
    if token.is_some_and(|t| t != record.token.get()) || record.digest != digest {
        return Err(changed(format!(
            "generation {generation} holds token {} and {}",
            record.token, record.digest
        )));
    }
    let files = store
        .local_files(&record)
        .map_err(warehouse_failed("cannot read an upstream generation"))?;
    if let Some(gone) = files.iter().find(|f| !f.is_file()) {
        return Err(missing(format!(
            "generation {generation}'s file {} is gone",
            gone.display()
        )));
    }
    // Records never change, but files can be edited by hand: the
    // rows must still have the pinned canonical digest.
    let format = input
        .task
        .as_deref()
        .and_then(|t| manifest.tasks.get(t))
        .or_else(|| manifest.producer(&input.name))
        .map(|t| t.output.format);
    if let Some(format) = format {
        let now = match audit::digest_files(&files, format) {
            Ok((_, digest)) => digest.as_str().to_string(),
            Err(e) => format!("unreadable ({e})"),
        };
        if now != digest {
            return Err(changed(now));
        }
    }
    Ok(record)
}

/// Creates `<warehouse>/_scratch/verify-<time>-<rand>/data` and returns the
/// id and the scratch dir (the parent of `data`).
fn scratch_dir(root: &Path) -> Result<(String, PathBuf), VerifyError> {
    let parent = root.join("_scratch");
    std::fs::create_dir_all(&parent).map_err(warehouse_failed(format!(
        "cannot create {}",
        parent.display()
    )))?;
    loop {
        let id = crate::exec::new_run_id().replacen("run-", "verify-", 1);
        let dir = parent.join(&id);
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                let data = dir.join("data");
                std::fs::create_dir(&data).map_err(warehouse_failed(format!(
                    "cannot create {}",
                    data.display()
                )))?;
                return Ok((id, dir));
            }
            // Same second, same random suffix: draw again.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(warehouse_failed(format!("cannot create {}", dir.display()))(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs as snapshot;
    use crate::store::{CommitKind, NewCommit, TokenOwner};

    const MANIFEST: &str = r#"
[pipeline]
name = "v"
code_version = "7"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["p"]

[datasets.raw]
path = "raw_{partition}.csv"
format = "csv"

[tasks.copy]
command = ["sh", "copy.sh"]
inputs = ["raw"]
output = { dataset = "copied", grain = ["id"] }

[tasks.derive]
command = ["sh", "derive.sh"]
inputs = ["copied"]
output = { dataset = "derived", grain = ["id"] }

[tasks.stamp]
command = ["sh", "stamp.sh"]
output = { dataset = "stamped", grain = ["id"] }

[tasks.count]
command = ["sh", "count.sh"]
output = { dataset = "counted", grain = ["id"] }

[tasks.flaky]
command = ["sh", "flaky.sh"]
output = { dataset = "flaked", grain = ["id"] }
"#;

    /// Copies the raw rows, stamped with the partition and code_version;
    /// leaves its `WEIR_*` environment beside its output directory.
    const COPY: &str = r#"set -e
env | grep '^WEIR_' | sort > "$WEIR_OUTPUT_DIR/../env.txt"
out="$WEIR_OUTPUT_DIR/out.csv"
printf 'id,v,part,code\n' > "$out"
tail -n +2 "$WEIR_INPUT_RAW" | while IFS=, read -r id v; do
  printf '%s,%s,%s,%s\n' "$id" "$v" "$WEIR_PARTITION" "$WEIR_CODE_VERSION" >> "$out"
done
"#;

    const DERIVE: &str = r#"set -e
cat "$WEIR_INPUT_COPIED"/*.csv > "$WEIR_OUTPUT_DIR/out.csv"
"#;

    const STAMP: &str = r#"printf 'id,t\n1,%s\n' "$(date +%s%N)" > "$WEIR_OUTPUT_DIR/out.csv"
"#;

    const COUNT: &str = r#"n=$(cat counter 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > counter
printf 'id,n\n1,%s\n2,fixed\n' "$n" > "$WEIR_OUTPUT_DIR/out.csv"
"#;

    const FLAKY: &str = r#"if [ -f ran-once ]; then echo "boom: second run" >&2; exit 3; fi
touch ran-once
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv"
"#;

    struct Sandbox {
        dir: tempfile::TempDir,
        manifest: Manifest,
        warehouse: Warehouse,
    }

    fn sandbox() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        std::fs::write(&path, MANIFEST).unwrap();
        for (name, body) in [
            ("copy.sh", COPY),
            ("derive.sh", DERIVE),
            ("stamp.sh", STAMP),
            ("count.sh", COUNT),
            ("flaky.sh", FLAKY),
        ] {
            std::fs::write(dir.path().join(name), body).unwrap();
        }
        std::fs::write(dir.path().join("raw_p.csv"), "id,v\n1,a\n2,b\n").unwrap();
        let manifest = Manifest::load(&path).unwrap_or_else(|e| panic!("{:?}", e.errors));
        let warehouse = Warehouse::open(&dir.path().join("wh")).unwrap();
        Sandbox {
            dir,
            manifest,
            warehouse,
        }
    }

    /// Publishes `task` at partition `p` the way an attempt does: pin, run
    /// in the attempt dir, digest, fenced commit.
    fn publish(sb: &Sandbox, task: &str) -> CommitRecord {
        let spec = &sb.manifest.tasks[task];
        let snap = snapshot::pin(&sb.manifest, &sb.warehouse, spec, "p", false, 0).unwrap();
        let store = sb.warehouse.partition(&spec.output.dataset, "p");
        let owner = TokenOwner {
            run_id: "run-test".into(),
            task: task.into(),
            attempt: 1,
        };
        let token = store.allocate_token(&owner).unwrap();
        let dir = store.prepare_attempt(token).unwrap();
        let data = dir.join("data");
        let contract = Contract {
            launcher: Launcher::Attempt {
                run_id: "run-test",
                attempt: 1,
                token: token.get(),
            },
            partition: "p",
            output_dir: &data,
            inputs: snap
                .inputs
                .iter()
                .map(|i| ContractInput {
                    name: &i.name,
                    location: &i.location,
                    watermark: None,
                })
                .collect(),
        };
        let command = TaskLaunch::new(&sb.manifest, spec, &contract, None).unwrap();
        let ending = launch::run(&command.command(&dir, crate::process::tree::new_tag()));
        assert_eq!(ending, Ending::Success);
        let files = audit::data_files(&data, spec.output.format).unwrap();
        let (rows, digest) = audit::digest_files(&files, spec.output.format).unwrap();
        store
            .commit(NewCommit {
                token,
                dataset: spec.output.dataset.clone(),
                partition: "p".into(),
                kind: CommitKind::Publish,
                run_id: "run-test".into(),
                task: task.into(),
                attempt: 1,
                attempt_dir: store.attempt_key(token),
                data_dir: None,
                files: files
                    .iter()
                    .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
                    .collect(),
                file_sums: files
                    .iter()
                    .map(|f| {
                        let name = f.file_name().unwrap().to_string_lossy().into_owned();
                        crate::store::FileSum::of(f, &name).unwrap()
                    })
                    .collect(),
                rows,
                digest: digest.as_str().to_string(),
                input_snapshot: snap.to_json(),
                input_snapshot_digest: snap.digest(),
                code_version: "7".into(),
                code_fingerprint: None,
            })
            .unwrap()
    }

    /// Every file under the warehouse except the scratch area.
    fn warehouse_files(sb: &Sandbox) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.ends_with("_scratch") {
                    continue;
                }
                if path.is_dir() {
                    walk(&path, out);
                }
                out.push(path);
            }
        }
        let mut out = Vec::new();
        walk(sb.warehouse.root(), &mut out);
        out.sort();
        out
    }

    #[test]
    fn a_deterministic_task_verifies_equal_and_publishes_nothing() {
        let sb = sandbox();
        let rec = publish(&sb, "copy");
        let before = warehouse_files(&sb);
        let report = verify(&sb.manifest, &sb.warehouse, "copy", "p").unwrap();
        assert!(report.deterministic, "{report:?}");
        assert_eq!(report.task, "copy");
        assert_eq!(report.partition, "p");
        assert_eq!(report.generation, 1);
        assert_eq!(report.published_digest, rec.digest);
        assert_eq!(report.rerun_digest, rec.digest);
        assert_eq!(report.rows, (2, 2));
        assert!(report.differences.is_empty());
        // No token, no record, no event: only the scratch dir is new.
        assert_eq!(warehouse_files(&sb), before);
        let scratch = &report.scratch;
        assert!(scratch.starts_with(sb.warehouse.root().join("_scratch")));
        let name = scratch.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("verify-"), "{name}");
        let rows = std::fs::read_to_string(scratch.join("data/out.csv")).unwrap();
        assert_eq!(rows, "id,v,part,code\n1,a,p,7\n2,b,p,7\n");
        // The attempt's environment contract, with attempt and token 0.
        let env = std::fs::read_to_string(scratch.join("env.txt")).unwrap();
        // A private copy of the pinned bytes, not the live file.
        let raw = scratch.join("input-raw/raw_p.csv");
        for line in [
            "WEIR_ATTEMPT=0".to_string(),
            "WEIR_TOKEN=0".to_string(),
            "WEIR_CODE_VERSION=7".to_string(),
            "WEIR_PARTITION=p".to_string(),
            "WEIR_PIPELINE=v".to_string(),
            "WEIR_TASK=copy".to_string(),
            format!("WEIR_RUN_ID={name}"),
            format!("WEIR_OUTPUT_DIR={}", scratch.join("data").display()),
            format!("WEIR_INPUT_RAW={}", raw.display()),
        ] {
            assert!(env.lines().any(|l| l == line), "{line} not in\n{env}");
        }
        assert!(scratch.join("stderr.log").is_file());
        // A second verification gets its own scratch dir.
        let again = verify(&sb.manifest, &sb.warehouse, "copy", "p").unwrap();
        assert!(again.deterministic);
        assert_ne!(again.scratch, report.scratch);
    }

    #[test]
    fn a_clock_reading_task_is_not_deterministic() {
        let sb = sandbox();
        let rec = publish(&sb, "stamp");
        let report = verify(&sb.manifest, &sb.warehouse, "stamp", "p").unwrap();
        assert!(!report.deterministic);
        assert_eq!(report.published_digest, rec.digest);
        assert_ne!(report.rerun_digest, rec.digest);
        assert_eq!(report.rows, (1, 1));
        assert_eq!(report.differences.len(), 2, "{:?}", report.differences);
        assert!(report.differences[0].starts_with("only in published: id=1, t="));
        assert!(report.differences[1].starts_with("only in rerun: id=1, t="));
    }

    #[test]
    fn a_counter_reading_task_lists_the_rows_that_differ() {
        let sb = sandbox();
        publish(&sb, "count");
        let report = verify(&sb.manifest, &sb.warehouse, "count", "p").unwrap();
        assert!(!report.deterministic);
        assert_eq!(
            report.differences,
            vec!["only in published: id=1, n=1", "only in rerun: id=1, n=2"]
        );
    }

    #[test]
    fn differences_align_columns_and_stop_at_five() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a.csv");
        let b = tmp.path().join("b.csv");
        let mut left = String::from("qty,order_id,line_no\n");
        let mut right = String::from("line_no,order_id,qty,extra\n");
        for i in 0..10 {
            left.push_str(&format!("{i},A-{i},1\n"));
            right.push_str(&format!("1,A-{i},{},\n", if i < 2 { i } else { i + 100 }));
        }
        std::fs::write(&a, left).unwrap();
        std::fs::write(&b, right).unwrap();
        let grain = vec!["order_id".to_string(), "line_no".to_string()];
        let out = differences(&[a], &[b], Format::Csv, &grain).unwrap();
        assert_eq!(out.len(), 6, "{out:?}");
        assert_eq!(
            out[0],
            "columns differ: published (line_no, order_id, qty), rerun (extra, line_no, order_id, qty)"
        );
        assert_eq!(
            out[1],
            "only in published: order_id=A-2, line_no=1, extra=null, qty=2"
        );
        assert_eq!(
            out[2],
            "only in rerun: order_id=A-2, line_no=1, extra=null, qty=102"
        );
        assert!(out[5].starts_with("only in published: order_id=A-4"));
    }

    #[test]
    fn an_external_input_modified_after_publication_is_refused() {
        let sb = sandbox();
        let rec = publish(&sb, "copy");
        let pinned = rec.input_snapshot["inputs"][0]["digest"]
            .as_str()
            .unwrap()
            .to_string();
        std::fs::write(sb.dir.path().join("raw_p.csv"), "id,v\n1,a\n2,CHANGED\n").unwrap();
        match verify(&sb.manifest, &sb.warehouse, "copy", "p") {
            Err(VerifyError::InputChanged {
                input,
                pinned: p,
                now,
            }) => {
                assert_eq!(input, "raw");
                assert_eq!(p, pinned);
                assert!(now.starts_with("sha256:") && now != pinned, "{now}");
            }
            other => panic!("expected InputChanged, got {other:?}"),
        }
        std::fs::remove_file(sb.dir.path().join("raw_p.csv")).unwrap();
        assert!(matches!(
            verify(&sb.manifest, &sb.warehouse, "copy", "p"),
            Err(VerifyError::InputMissing { input, .. }) if input == "raw"
        ));
    }

    #[test]
    fn an_upstream_input_is_read_at_its_pinned_generation() {
        let sb = sandbox();
        let first = publish(&sb, "copy");
        publish(&sb, "derive");
        // The upstream moves on after `derive` was published.
        std::fs::write(sb.dir.path().join("raw_p.csv"), "id,v\n9,z\n").unwrap();
        let second = publish(&sb, "copy");
        assert_ne!(first.digest, second.digest);
        let report = verify(&sb.manifest, &sb.warehouse, "derive", "p").unwrap();
        assert!(report.deterministic, "{report:?}");
        assert_eq!(report.rows, (2, 2));

        // Its files edited by hand: not the evidence that was pinned.
        let store = sb.warehouse.partition("copied", "p");
        let file = store.visible_files(&first).remove(0);
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text.replace(",a,", ",A,")).unwrap();
        assert!(matches!(
            verify(&sb.manifest, &sb.warehouse, "derive", "p"),
            Err(VerifyError::InputChanged { input, .. }) if input == "copied"
        ));

        // Its files garbage-collected: gone.
        store.remove_attempt(first.token).unwrap();
        assert!(matches!(
            verify(&sb.manifest, &sb.warehouse, "derive", "p"),
            Err(VerifyError::InputMissing { input, .. }) if input == "copied"
        ));
    }

    #[test]
    fn refusals_name_the_problem() {
        let sb = sandbox();
        assert!(matches!(
            verify(&sb.manifest, &sb.warehouse, "copy", "p"),
            Err(VerifyError::NothingPublished { dataset, partition, .. })
                if dataset == "copied" && partition == "p"
        ));
        match verify(&sb.manifest, &sb.warehouse, "cpy", "p") {
            Err(VerifyError::UnknownTask { task, help }) => {
                assert_eq!(task, "cpy");
                assert!(help.contains("copy"), "{help}");
            }
            other => panic!("expected UnknownTask, got {other:?}"),
        }
        publish(&sb, "flaky");
        match verify(&sb.manifest, &sb.warehouse, "flaky", "p") {
            Err(VerifyError::TaskFailed {
                ending,
                stderr_tail,
            }) => {
                assert_eq!(ending, "exit code 3");
                assert_eq!(stderr_tail, "boom: second run");
            }
            other => panic!("expected TaskFailed, got {other:?}"),
        }
        let err = VerifyError::InputChanged {
            input: "raw".into(),
            pinned: "sha256:aa".into(),
            now: "sha256:bb".into(),
        };
        assert_eq!(
            err.to_string(),
            "input `raw` changed since it was pinned: pinned sha256:aa, now sha256:bb"
        );
    }
}
