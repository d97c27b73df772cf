//! The warehouse: a root directory of datasets, each a directory of
//! partitions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::store::backend::{Backend, FsBackend};
use crate::store::error::StoreError;
use crate::store::fs::create_dir_all_durable;
use crate::store::key::{decode_partition, validate_segment};
use crate::store::partition::PartitionStore;

/// Handle on a warehouse. Cheap to clone; several processes may open the
/// same root at once, since every coordination step is a put-if-absent.
#[derive(Clone)]
pub struct Warehouse {
    backend: Arc<dyn Backend>,
    root: PathBuf,
}

impl std::fmt::Debug for Warehouse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warehouse")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Warehouse {
    /// Opens (creating it durably if needed) the warehouse at `root` on the
    /// local filesystem. A relative root is made absolute against the
    /// current directory, so attempt dirs handed to tasks are absolute.
    pub fn open(root: &Path) -> Result<Warehouse, StoreError> {
        let root = std::path::absolute(root).map_err(StoreError::io(root))?;
        create_dir_all_durable(&root).map_err(StoreError::io(&root))?;
        Ok(Warehouse::with_backend(
            Arc::new(FsBackend::new(&root)),
            root,
        ))
    }

    /// A warehouse over any backend; `root` is where attempt dirs live
    /// locally (tasks write real files).
    pub fn with_backend(backend: Arc<dyn Backend>, root: PathBuf) -> Warehouse {
        Warehouse { backend, root }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The local directory of a dataset's partitions (a location to show;
    /// the name is not checked).
    pub fn dataset_dir(&self, dataset: &str) -> PathBuf {
        self.root.join(dataset)
    }

    /// The storage backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// A handle on one partition; names are checked when it is used.
    pub fn partition(&self, dataset: &str, partition: &str) -> PartitionStore {
        PartitionStore::new(
            Arc::clone(&self.backend),
            self.root.clone(),
            dataset,
            partition,
        )
    }

    /// Dataset names, sorted; names starting with `_` are reserved for the
    /// engine (`_runs`, `_leases`, ...) and skipped.
    pub fn datasets(&self) -> Result<Vec<String>, StoreError> {
        let mut names = self.backend.list("")?;
        names.retain(|n| !n.starts_with('_'));
        Ok(names)
    }

    /// Partition keys of `dataset` (decoded from their directory names;
    /// names no key encodes to are skipped), sorted by directory name;
    /// empty if it has none.
    pub fn partitions(&self, dataset: &str) -> Result<Vec<String>, StoreError> {
        validate_segment(dataset)?;
        Ok(self
            .backend
            .list(dataset)?
            .iter()
            .filter_map(|name| decode_partition(name))
            .collect())
    }
}
