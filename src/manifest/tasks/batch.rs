//! `batch = { max_partitions = N }` of a task: how many consecutive
//! partitions one attempt's command may run for.

use super::raw::RawTask;
use crate::manifest::model::Dims;
use crate::manifest::validator::Validator;
use crate::manifest::{ManifestError, ManifestErrorKind};

impl Validator<'_, '_, '_, '_> {
    /// The batch size, if declared and valid: at least 1, on a task with a
    /// time scheme (consecutive needs an order), and not with
    /// `depends_on_past` (each member would wait for the one before it in
    /// the same command).
    pub(super) fn batch(&mut self, name: &str, raw: &RawTask, dims: &Dims) -> Option<u32> {
        let batch = raw.batch.as_ref()?;
        let at = ["tasks", name, "batch", "max_partitions"];
        let n = batch.max_partitions;
        let Some(n) = u32::try_from(n).ok().filter(|n| *n >= 1) else {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::InvalidValue,
                    format!("`batch.max_partitions` {n} of task `{name}` is not a positive count"),
                )
                .at(self.value(&at), "must be 1 or more")
                .help("the most partitions one command runs for, e.g. `batch = { max_partitions = 7 }`"),
            );
            return None;
        };
        if dims.time_dim().is_none() {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::InvalidValue,
                    format!("task `{name}` sets `batch` without a time scheme"),
                )
                .at(self.key(&["tasks", name, "batch"]), "needs consecutive partitions")
                .help("a batch runs consecutive partitions of a time scheme (daily, weekly …); remove `batch` or partition the task by time"),
            );
            return None;
        }
        if raw.depends_on_past {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::InvalidValue,
                    format!("task `{name}` sets both `batch` and `depends_on_past`"),
                )
                .at(self.key(&["tasks", name, "batch"]), "one command for several partitions")
                .help("with `depends_on_past` each partition waits for the one before it to publish, so none can share a command; remove one of them"),
            );
            return None;
        }
        Some(n)
    }
}
