//! Whether a Delta table that shows other files than weir's visible
//! generation still shows its rows: another engine's compaction (delta-rs
//! `optimize.compact()`, Spark's `OPTIMIZE`) or rewrite replaces files
//! without changing a row, and that is agreement, not drift.
//!
//! Only a table whose log committed the visible generation is asked: one
//! still at an older generation lags behind weir (a lost commit), even
//! when the rows happen to be equal. The rows the table shows for the
//! partition are read from its files and
//! their canonical digest (the audit's: row order and file split do not
//! count) compared with the record's. What was checked is cached on this
//! host ([`crate::store::PartitionStore::cache_path`]) by the record's
//! digest and the exact files (path and size), so a `status --check` reads
//! a compacted partition once.

use sha2::{Digest as _, Sha256};

use crate::audit::{self, Format};
use crate::store::delta::TableView;
use crate::store::{CommitRecord, PartitionStore};

/// What the table shows of a partition whose files are not the record's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    /// The same rows in other files: a note for the operator.
    SameRows(String),
    /// Other rows, or none: drift, in words.
    Drift(String),
}

/// How the table's files of `record`'s partition compare with the record:
/// `None` when they are its files, else [`Shown`]. `disagreement` is what
/// [`TableView::disagreement`] said.
pub fn compare(
    store: &PartitionStore,
    view: &TableView,
    format: Format,
    (columns, values): (&[String], &[String]),
    record: &CommitRecord,
) -> Option<Shown> {
    let disagreement = view.disagreement(columns, values, record)?;
    let files = view.shown_files(columns, values);
    // Only files changed after weir's commit of this very generation are
    // another writer's maintenance; a table still at an older generation
    // lags, whatever its rows.
    if files.is_empty()
        || view.synced_generation(&record.partition) != Some(record.generation.get())
    {
        return Some(Shown::Drift(disagreement));
    }
    let mut key = Sha256::new();
    key.update(format!(
        "{}\0{}\0{}\0",
        record.dataset, record.partition, record.digest
    ));
    for (path, size) in &files {
        key.update(format!("{path}\0{size}\0"));
    }
    let cache = store.cache_path(&format!("delta-rows/{:x}", key.finalize()));
    let same = match std::fs::read_to_string(&cache).ok().as_deref() {
        Some("same") => Ok(true),
        Some("other") => Ok(false),
        _ => digest_of(store, &files, format).map(|digest| {
            let same = digest == record.digest;
            if let Some(dir) = cache.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = std::fs::write(&cache, if same { "same" } else { "other" });
            same
        }),
    };
    let n = files.len();
    let files_word = if n == 1 { "file" } else { "files" };
    Some(match same {
        Ok(true) => Shown::SameRows(format!(
            "the Delta table shows generation {}'s rows in {n} other {files_word} (another engine's compaction or rewrite): agreement",
            record.generation.get()
        )),
        Ok(false) => Shown::Drift(format!(
            "{disagreement}, and the rows of those files are not generation {}'s",
            record.generation.get()
        )),
        Err(why) => Shown::Drift(format!(
            "{disagreement}, and their rows cannot be read: {why}"
        )),
    })
}

/// The canonical digest of the rows of the table's `files`.
fn digest_of(
    store: &PartitionStore,
    files: &[(String, u64)],
    format: Format,
) -> Result<String, String> {
    let relative: Vec<String> = files.iter().map(|(p, _)| p.clone()).collect();
    let local = store
        .local_dataset_files(&relative)
        .map_err(|e| crate::store::chain(&e))?;
    let (_, digest) = audit::digest_files(&local, format).map_err(|e| e.to_string())?;
    Ok(digest.as_str().to_owned())
}
