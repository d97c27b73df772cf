//! Which layout a dataset's partitions are in: each at `<dataset>/<p>/`
//! (every dataset until now, and every dataset that is not a Delta table),
//! or, for a Delta table weir created with its state out of VACUUM's
//! reach, each at `<dataset>/_weir/<p>/` ([`layout::TABLE_STATE_DIR`]).
//!
//! The dataset's directory tells, in one listing: `_weir` among its names
//! is the second layout, any other partition directory the first (a
//! table's `_delta_log` is neither). A dataset with none yet is undecided:
//! read as the first layout (there is nothing to read either way) and
//! written in the layout its first writer chooses. A decided layout does
//! not change while weir runs, so each process lists a dataset once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::store::backend::Backend;
use crate::store::error::StoreError;
use crate::store::key::decode_partition;
use crate::store::layout;

/// Where a dataset keeps its partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatasetLayout {
    /// `<dataset>/<partition>/`.
    Plain,
    /// `<dataset>/_weir/<partition>/`, out of any VACUUM's reach.
    TableState,
}

impl DatasetLayout {
    /// The key prefix of `partition` of `dataset` in this layout.
    pub(crate) fn partition_prefix(self, dataset: &str, partition: &str) -> String {
        match self {
            DatasetLayout::Plain => layout::partition_prefix(dataset, partition),
            DatasetLayout::TableState => layout::table_partition_prefix(dataset, partition),
        }
    }

    /// The key under which the partitions' directories are listed.
    pub(crate) fn partitions_key(self, dataset: &str) -> String {
        match self {
            DatasetLayout::Plain => dataset.to_owned(),
            DatasetLayout::TableState => format!("{dataset}/{}", layout::TABLE_STATE_DIR),
        }
    }
}

const DELTA_LOG: &str = "_delta_log";

/// The layout of a dataset too large for one page of an object store's
/// listing, from its first keys (a request of one key each, at most two):
/// a table keeping its partitions under `_weir/` has nothing else at its
/// top but `_delta_log/`, which sorts before it, so the first key outside
/// `_delta_log/` tells.
fn first_keys(backend: &dyn Backend, dataset: &str) -> Result<Option<DatasetLayout>, StoreError> {
    let base = format!("{dataset}/");
    let of = |keys: Vec<String>| {
        keys.first().map(|key| {
            let rest = key.strip_prefix(&base).unwrap_or(key);
            match rest.split_once('/') {
                Some((layout::TABLE_STATE_DIR, _)) => DatasetLayout::TableState,
                _ => DatasetLayout::Plain,
            }
        })
    };
    let (first, _) = backend.list_keys(dataset, "", 1)?;
    let in_log = |keys: &[String]| {
        keys.first()
            .is_some_and(|k| k.starts_with(&format!("{base}{DELTA_LOG}/")))
    };
    if !in_log(&first) {
        return Ok(of(first));
    }
    // `/` sorts just before `0`: the first key after every one in the log.
    let (next, _) = backend.list_keys(dataset, &format!("{DELTA_LOG}0"), 1)?;
    Ok(of(next))
}

/// How long a dataset found with no key at all (a whole view of it, not
/// of its newer part) is taken to have none still, without asking again:
/// as long as a dataset look stands for the looks of its partitions. Its
/// readers read nothing meanwhile (another engine's first partition shows
/// up that much later), its writers choose as they would anyway: a
/// table `_weir/`, the others their top directory, and no writer of one
/// dataset chooses otherwise.
const UNDECIDED_FOR: Duration = Duration::from_secs(2);

/// What this process knows of a dataset's layout.
#[derive(Clone, Copy)]
enum Known {
    Decided(DatasetLayout),
    /// No partition when it was last looked at.
    Empty(Instant),
}

/// The layouts of a warehouse's datasets, shared by every handle of one
/// warehouse.
#[derive(Clone, Default)]
pub(crate) struct Layouts(Arc<Mutex<HashMap<String, Known>>>);

impl Layouts {
    /// The layout this process already knows `dataset` to have, with no
    /// request.
    pub(crate) fn known(&self, dataset: &str) -> Option<DatasetLayout> {
        match self.map().get(dataset) {
            Some(Known::Decided(layout)) => Some(*layout),
            _ => None,
        }
    }

    /// Notes that this process wrote `dataset`'s first keys in `layout`.
    pub(crate) fn decided(&self, dataset: &str, layout: DatasetLayout) {
        self.map()
            .insert(dataset.to_owned(), Known::Decided(layout));
    }

    /// What this process knows of `dataset` with no request: its layout,
    /// or that it had no partition a moment ago (`Some(None)`).
    pub(crate) fn cached(&self, dataset: &str) -> Option<Option<DatasetLayout>> {
        match self.map().get(dataset) {
            Some(Known::Decided(layout)) => Some(Some(*layout)),
            Some(Known::Empty(at)) if at.elapsed() < UNDECIDED_FOR => Some(None),
            _ => None,
        }
    }

    /// Notes what a listing of `dataset` showed of its layout.
    pub(crate) fn learned(&self, dataset: &str, layout: Option<DatasetLayout>) {
        let known = match layout {
            Some(layout) => Known::Decided(layout),
            None => Known::Empty(Instant::now()),
        };
        self.map().insert(dataset.to_owned(), known);
    }

    /// The layout of `dataset`, from one listing of its directory the first
    /// time; `None` while it has no partition.
    pub(crate) fn of(
        &self,
        backend: &dyn Backend,
        dataset: &str,
    ) -> Result<Option<DatasetLayout>, StoreError> {
        match self.map().get(dataset) {
            Some(Known::Decided(layout)) => return Ok(Some(*layout)),
            Some(Known::Empty(at)) if at.elapsed() < UNDECIDED_FOR => return Ok(None),
            _ => {}
        }
        let decided = match backend.list_first_page(dataset)? {
            Some(names) => {
                if names.iter().any(|n| n == layout::TABLE_STATE_DIR) {
                    Some(DatasetLayout::TableState)
                } else if names
                    .iter()
                    .any(|n| n != DELTA_LOG && decode_partition(n).is_some())
                {
                    Some(DatasetLayout::Plain)
                } else {
                    None
                }
            }
            None => first_keys(backend, dataset)?,
        };
        let known = match decided {
            Some(layout) => Known::Decided(layout),
            None => Known::Empty(Instant::now()),
        };
        self.map().insert(dataset.to_owned(), known);
        Ok(decided)
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Known>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::allocation::TokenOwner;
    use crate::store::{MemoryBackend, Warehouse};

    fn owner() -> TokenOwner {
        TokenOwner {
            run_id: "run".into(),
            task: "task".into(),
            attempt: 1,
        }
    }

    // What a dataset too large for one page shows first tells its layout
    // as its whole listing would.
    #[test]
    fn a_large_datasets_first_keys_tell_its_layout() {
        let cases: [(&[&str], Option<DatasetLayout>); 6] = [
            (&[], None),
            (&["t/_delta_log/00000000000000000000.json"], None),
            (
                &[
                    "t/_delta_log/00000000000000000000.json",
                    "t/_weir/p/tokens/1",
                ],
                Some(DatasetLayout::TableState),
            ),
            (&["t/_weir/p/tokens/1"], Some(DatasetLayout::TableState)),
            (
                &["t/_delta_log/00000000000000000000.json", "t/north/tokens/1"],
                Some(DatasetLayout::Plain),
            ),
            (
                &[
                    "t/2024-01-01/tokens/1",
                    "t/_delta_log/00000000000000000000.json",
                ],
                Some(DatasetLayout::Plain),
            ),
        ];
        for (keys, expected) in cases {
            let backend = MemoryBackend::default();
            for key in keys {
                backend.put(key, b"x").unwrap();
            }
            assert_eq!(first_keys(&backend, "t").unwrap(), expected, "{keys:?}");
        }
    }

    // A table with no partition yet settles on `_weir/`; another process
    // finds it there from the dataset's directory alone, and a dataset
    // whose partitions are at its top keeps them there, table or not.
    #[test]
    fn a_datasets_first_writer_decides_its_layout_and_every_reader_finds_it() {
        let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::default());
        let tmp = tempfile::tempdir().unwrap();
        let wh = Warehouse::with_backend(Arc::clone(&backend), tmp.path().to_path_buf());
        assert_eq!(wh.dataset_layout("t").unwrap(), None);
        assert!(wh.partitions("t").unwrap().is_empty());
        let p = wh.partition("t", "2026-09-20T11:00");
        assert_eq!(p.settle_table_layout().unwrap(), DatasetLayout::TableState);
        let t = p.allocate_token(&owner()).unwrap();
        assert_eq!(
            p.attempt_key(t),
            "t/_weir/2026-09-20T11%3A00/attempts/00000000000000000001"
        );
        assert!(backend
            .get("t/_weir/2026-09-20T11%3A00/tokens/00000000000000000001")
            .unwrap()
            .is_some());

        let other = Warehouse::with_backend(Arc::clone(&backend), tmp.path().to_path_buf());
        assert_eq!(
            other.dataset_layout("t").unwrap(),
            Some(DatasetLayout::TableState)
        );
        assert_eq!(other.partitions("t").unwrap(), ["2026-09-20T11:00"]);
        let q = other.partition("t", "2026-09-20T11:00");
        assert_eq!(q.latest_token().unwrap(), Some(t));
        assert_eq!(q.key_prefix().unwrap(), "t/_weir/2026-09-20T11%3A00");

        // An existing dataset (a table made before, or any other output).
        let plain = wh.partition("d", "a");
        plain.allocate_token(&owner()).unwrap();
        let next = other.partition("d", "b");
        assert_eq!(next.settle_table_layout().unwrap(), DatasetLayout::Plain);
        next.allocate_token(&owner()).unwrap();
        assert_eq!(other.partitions("d").unwrap(), ["a", "b"]);
        assert!(backend
            .get("d/b/tokens/00000000000000000001")
            .unwrap()
            .is_some());
    }
}
