//! The raw sections of a manifest, as far as they deserialized.

use super::entry::Entry;
use super::raw;

/// The raw sections of a manifest, as far as they deserialized.
#[derive(Default)]
pub(crate) struct Sections {
    pub(crate) pipeline: Option<raw::RawPipeline>,
    pub(crate) partitions: Vec<Entry<raw::RawPartitionScheme>>,
    pub(crate) pools: Vec<Entry<raw::RawPool>>,
    pub(crate) retry: Vec<Entry<raw::RawRetryClass>>,
    pub(crate) datasets: Vec<Entry<raw::RawDataset>>,
    pub(crate) executors: Vec<Entry<raw::RawExecutor>>,
    pub(crate) tasks: Vec<Entry<raw::RawTask>>,
    pub(crate) backfills: Vec<Entry<raw::RawBackfill>>,
    pub(crate) lineage: Option<raw::RawLineage>,
    pub(crate) notify: Vec<Entry<raw::RawNotifyTarget>>,
}
