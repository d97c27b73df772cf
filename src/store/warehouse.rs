//! The warehouse: a root directory of datasets, each a directory of
//! partitions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::store::backend::Backend;
use crate::store::epoch::EpochCell;
use crate::store::error::StoreError;
use crate::store::events::EventStore;
use crate::store::fs::{create_dir_all_durable, FsBackend};
use crate::store::key::{decode_partition, validate_segment};
use crate::store::partition::{DatasetLayout, Layouts, PartitionStore, SeenGenerations};

/// Handle on a warehouse. Cheap to clone; several processes may open the
/// same root at once, since every coordination step is a put-if-absent.
#[derive(Clone)]
pub struct Warehouse {
    backend: Arc<dyn Backend>,
    root: PathBuf,
    /// The object store's URL when the warehouse is not `root` itself.
    remote: Option<String>,
    seen: SeenGenerations,
    epoch: EpochCell,
    /// Each dataset's partition layout, once known (`store::partition`).
    layouts: Layouts,
}

impl std::fmt::Debug for Warehouse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warehouse")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// Where a warehouse is, all the store needs to open one (a manifest's
/// `Pipeline` converts into it, so the store knows no manifest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local directory.
    Dir(PathBuf),
    /// An object store at `url` (`s3://bucket/prefix`); attempts stage in
    /// the local directory `staging`.
    Remote {
        /// The object-store URL.
        url: String,
        /// Where attempts write their files before upload.
        staging: PathBuf,
    },
}

impl Warehouse {
    /// Opens (creating it durably if needed) the warehouse at `root` on the
    /// local filesystem. A relative root is made absolute against the
    /// current directory, so attempt dirs handed to tasks are absolute.
    pub fn open(root: &Path) -> Result<Warehouse, StoreError> {
        let root = std::path::absolute(root).map_err(StoreError::io(root))?;
        create_dir_all_durable(&root).map_err(StoreError::io(&root))?;
        // Kept before the disk fills, so that gc can log on a full one.
        crate::store::full::keep_reserve(&root);
        Ok(Warehouse::with_backend(
            Arc::new(FsBackend::new(&root)),
            root,
        ))
    }

    /// Opens the warehouse at `location` to read it: a local warehouse
    /// directory that does not exist is not created (a read-only command
    /// must leave no trace, least of all for a mistyped `--warehouse`) and
    /// reads as empty; one whose parent directory does not exist either is
    /// an error naming that parent. An object store is opened as by
    /// [`Warehouse::open_for`].
    pub fn open_to_read(location: impl Into<Location>) -> Result<Warehouse, StoreError> {
        let location = location.into();
        let given = match &location {
            Location::Remote { .. } => return Warehouse::open_for(location),
            Location::Dir(dir) => dir,
        };
        let root = std::path::absolute(given).map_err(StoreError::io(given))?;
        match std::fs::symlink_metadata(&root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(parent) = root.parent() {
                    std::fs::metadata(parent).map_err(StoreError::io(parent))?;
                }
                Ok(Warehouse::with_backend(
                    Arc::new(FsBackend::new(&root)),
                    root,
                ))
            }
            _ => Warehouse::open(&root),
        }
    }

    /// A warehouse over any backend; `root` is where attempt dirs live
    /// locally (tasks write real files).
    pub fn with_backend(backend: Arc<dyn Backend>, root: PathBuf) -> Warehouse {
        Warehouse {
            backend,
            root,
            remote: None,
            seen: SeenGenerations::default(),
            epoch: EpochCell::default(),
            layouts: Layouts::default(),
        }
    }

    /// A warehouse in object storage at `url`, staging attempts in the
    /// local directory `staging`: candidates are uploaded after their audit
    /// and published files are downloaded (and checked) to be read.
    pub fn remote(
        backend: Arc<dyn Backend>,
        url: &str,
        staging: &Path,
    ) -> Result<Warehouse, StoreError> {
        let staging = std::path::absolute(staging).map_err(StoreError::io(staging))?;
        std::fs::create_dir_all(&staging).map_err(StoreError::io(&staging))?;
        Ok(Warehouse {
            backend,
            root: staging,
            remote: Some(url.to_owned()),
            seen: SeenGenerations::default(),
            epoch: EpochCell::default(),
            layouts: Layouts::default(),
        })
    }

    /// Opens (creating it if needed) the warehouse at `location`: a
    /// directory, or an `s3://` URL (configured from the `AWS_*`
    /// environment) staging in a local directory.
    pub fn open_for(location: impl Into<Location>) -> Result<Warehouse, StoreError> {
        let (url, staging) = match location.into() {
            Location::Dir(dir) => return Warehouse::open(&dir),
            Location::Remote { url, staging } => (url, staging),
        };
        #[cfg(feature = "s3")]
        {
            let backend = shared_s3(&url).map_err(|e| {
                // Without credentials object_store falls back to the EC2
                // metadata service, whose refusal names neither.
                let configured = [
                    "AWS_ACCESS_KEY_ID",
                    "AWS_WEB_IDENTITY_TOKEN_FILE",
                    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                ]
                .iter()
                .any(|var| std::env::var_os(var).is_some());
                match e {
                    StoreError::Remote { key, source } if !configured => StoreError::Remote {
                        key,
                        source: format!(
                            "no AWS credentials in the environment (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run with a role): {}",
                            crate::store::chain(source.as_ref())
                        )
                        .into(),
                    },
                    other => other,
                }
            })?;
            Warehouse::remote(backend, &url, &staging)
        }
        #[cfg(not(feature = "s3"))]
        {
            // Staging is for uploads this build cannot make.
            let _ = staging;
            Err(StoreError::Remote {
                key: url,
                source: "this weir was built without the `s3` feature".into(),
            })
        }
    }

    /// The local directory: the warehouse itself, or the staging directory
    /// of a remote one.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs `apply` (gc's log and deletions) with a local warehouse's
    /// reserve given back to the filesystem, then kept again: on a full
    /// disk the log's first lines fit in it, and every deletion logged
    /// frees more than its line took, so gc still logs before it deletes.
    /// An object store's log is not on this disk: nothing to give back.
    pub fn with_reserve_released<T>(&self, apply: impl FnOnce() -> T) -> T {
        let local = self.remote.is_none();
        if local {
            crate::store::full::release_reserve(&self.root);
        }
        let done = apply();
        if local && !crate::store::full::keep_reserve(&self.root) {
            tracing::warn!(
                "gc could not set aside {} KiB again in {} (the disk is still full): a later gc on a full disk may not be able to log",
                crate::store::full::RESERVE_BYTES >> 10,
                self.root.display()
            );
        }
        done
    }

    /// Where a run's event log is, for people, from its writer's
    /// [`origin`](crate::store::events::EventWriter::origin): on a local
    /// disk that is its file; in object storage, the URL of its chunks.
    pub fn event_log_location(&self, origin: &Path) -> PathBuf {
        match &self.remote {
            None => origin.to_path_buf(),
            Some(url) => PathBuf::from(format!(
                "{}/{}",
                url.trim_end_matches('/'),
                origin.display()
            )),
        }
    }

    /// Where the warehouse is, for messages: its URL or its directory.
    pub fn location(&self) -> String {
        self.remote
            .clone()
            .unwrap_or_else(|| self.root.display().to_string())
    }

    /// The run event logs: a file per run in a local warehouse, ordered
    /// chunks in object storage.
    pub fn events(&self) -> EventStore {
        match self.remote {
            None => EventStore::dir(&self.root),
            Some(_) => EventStore::objects(Arc::clone(&self.backend)),
        }
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
            self.remote.clone(),
            self.seen.clone(),
            self.epoch.clone(),
            self.layouts.clone(),
            dataset,
            partition,
        )
    }

    /// Looks at the commit logs of `partitions` of `dataset` in one
    /// listing of the dataset, of at most `max_keys` keys (a thousand a
    /// request), where that is cheaper than a listing per partition: in an
    /// object store, for a look taken for many instances at once. Returns
    /// how many partitions it covered; the others are looked at one by one
    /// as before. Each covered partition's look stands for a listing of its
    /// own log, sent at the same moment (`PartitionStore::look_within`).
    pub fn look_dataset(
        &self,
        dataset: &str,
        partitions: &[&str],
        max_keys: usize,
    ) -> Result<usize, StoreError> {
        if self.remote.is_none() {
            return Ok(0);
        }
        validate_segment(dataset)?;
        let layout = match self.layouts.cached(dataset) {
            Some(Some(layout)) => layout,
            Some(None) => return Ok(0),
            None => {
                // The look's own listing tells the layout, with no request
                // of its own, unless it shows a table's `_weir/`.
                let (covered, learned) = crate::store::partition::look_and_learn(
                    self.backend.as_ref(),
                    &self.seen,
                    dataset,
                    partitions,
                    max_keys,
                )?;
                match learned {
                    Some(Some(DatasetLayout::TableState)) => {
                        self.layouts
                            .learned(dataset, Some(DatasetLayout::TableState));
                        DatasetLayout::TableState
                    }
                    Some(layout) => {
                        self.layouts.learned(dataset, layout);
                        return Ok(covered);
                    }
                    None => return Ok(covered),
                }
            }
        };
        crate::store::partition::look_dataset(
            self.backend.as_ref(),
            &self.seen,
            &layout.partitions_key(dataset),
            partitions,
            max_keys,
        )
    }

    /// Where `dataset` keeps its partitions (one listing of it the first
    /// time in this process); `None` while it has none.
    pub fn dataset_layout(&self, dataset: &str) -> Result<Option<DatasetLayout>, StoreError> {
        validate_segment(dataset)?;
        self.layouts.of(self.backend.as_ref(), dataset)
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
        let Some(layout) = self.dataset_layout(dataset)? else {
            return Ok(Vec::new());
        };
        Ok(self
            .backend
            .list(&layout.partitions_key(dataset))?
            .iter()
            .filter_map(|name| decode_partition(name))
            .collect())
    }
}

/// The one S3 backend of this process for `url` under the current `AWS_*`
/// environment: its client and its runtime are made once and shared by
/// every warehouse opened on it (serve's lanes, the console's pages), not
/// made again for each.
#[cfg(feature = "s3")]
fn shared_s3(url: &str) -> Result<Arc<crate::store::s3::S3Backend>, StoreError> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Key = (String, Vec<(String, String)>);
    static OPEN: OnceLock<Mutex<HashMap<Key, Arc<crate::store::s3::S3Backend>>>> = OnceLock::new();
    let mut aws: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("AWS_"))
        .collect();
    aws.sort();
    let key = (url.to_owned(), aws);
    let mut open = OPEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(backend) = open.get(&key) {
        return Ok(Arc::clone(backend));
    }
    let backend = Arc::new(crate::store::s3::S3Backend::open(url)?);
    open.insert(key, Arc::clone(&backend));
    Ok(backend)
}
