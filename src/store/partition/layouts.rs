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

/// The decided layouts of a warehouse's datasets, shared by every handle
/// of one warehouse.
#[derive(Clone, Default)]
pub(crate) struct Layouts(Arc<Mutex<HashMap<String, DatasetLayout>>>);

impl Layouts {
    /// The layout this process already knows `dataset` to have, with no
    /// request.
    pub(crate) fn known(&self, dataset: &str) -> Option<DatasetLayout> {
        self.map().get(dataset).copied()
    }

    /// The layout of `dataset`, from one listing of its directory the first
    /// time; `None` while it has no partition.
    pub(crate) fn of(
        &self,
        backend: &dyn Backend,
        dataset: &str,
    ) -> Result<Option<DatasetLayout>, StoreError> {
        if let Some(known) = self.known(dataset) {
            return Ok(Some(known));
        }
        let names = backend.list(dataset)?;
        let decided = if names.iter().any(|n| n == layout::TABLE_STATE_DIR) {
            Some(DatasetLayout::TableState)
        } else if names
            .iter()
            .any(|n| n != "_delta_log" && decode_partition(n).is_some())
        {
            Some(DatasetLayout::Plain)
        } else {
            None
        };
        if let Some(decided) = decided {
            self.map().insert(dataset.to_owned(), decided);
        }
        Ok(decided)
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, DatasetLayout>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
