//! Certification marks on generations. A publication passed its gates and is
//! certified by default; `weir uncertify` marks a generation as suspect (a
//! consumer found a problem the gates missed), `weir certify` vouches for it
//! again. Downstream tasks refuse an uncertified input unless their run is
//! given `--allow-uncertified`.
//!
//! `_certs/<dataset>/<partition>/<generation>.json` in the warehouse's
//! backend, replaced whole; the CERTIFIED / UNCERTIFIED events keep the
//! history.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::store::backend::put_replacing;
use crate::store::error::StoreError;
use crate::store::key::validate_segment;
use crate::store::Warehouse;

/// The latest word on one generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Certification {
    /// The generation.
    pub generation: u64,
    /// Certified or not.
    pub certified: bool,
    /// Why.
    pub reason: String,
    /// When.
    pub at: String,
}

fn key(dataset: &str, partition: &str, generation: u64) -> Result<String, StoreError> {
    validate_segment(dataset)?;
    Ok(format!(
        "_certs/{dataset}/{}/{generation}.json",
        crate::store::encode_partition(partition)
    ))
}

/// The mark of a generation, if any was ever made. A mark that cannot be
/// read (EACCES, ENOTDIR, a torn object, an unreachable store) counts as
/// uncertified, naming why: when in doubt, downstream tasks wait for a
/// person.
pub fn read(
    warehouse: &Warehouse,
    dataset: &str,
    partition: &str,
    generation: u64,
) -> Option<Certification> {
    let unreadable = |why: String| Certification {
        generation,
        certified: false,
        reason: format!("unreadable certification mark: {why}"),
        at: String::new(),
    };
    let bytes = match key(dataset, partition, generation).and_then(|k| warehouse.backend().get(&k))
    {
        Ok(bytes) => bytes?,
        Err(e) => return Some(unreadable(crate::store::chain(&e))),
    };
    Some(serde_json::from_slice(&bytes).unwrap_or_else(|e| unreadable(e.to_string())))
}

/// Which partitions of some datasets had any certification mark when
/// they were listed, one listing per dataset: what a scheduler reads once
/// for the instances it starts together, instead of one read per input.
/// Marks exist only where an operator certified or uncertified, so a
/// listing is short whatever the number of partitions.
#[derive(Debug, Default)]
pub struct Listed(HashMap<String, Arc<HashSet<String>>>);

impl Listed {
    /// The partitions of `dataset` that have any mark, in one listing;
    /// `None` if it fails (each mark is then read one by one, as without
    /// a listing).
    pub fn take(warehouse: &Warehouse, dataset: &str) -> Option<Arc<HashSet<String>>> {
        validate_segment(dataset).ok()?;
        let listed = warehouse.backend().list(&format!("_certs/{dataset}"));
        Some(Arc::new(listed.ok()?.into_iter().collect()))
    }

    /// Adds `dataset`'s listing.
    pub fn insert(&mut self, dataset: &str, names: Arc<HashSet<String>>) {
        self.0.insert(dataset.to_owned(), names);
    }

    /// Whether the listing showed no mark on any generation of
    /// `dataset`'s `partition`: certified, by default, with no read.
    pub fn none_for(&self, dataset: &str, partition: &str) -> bool {
        self.0
            .get(dataset)
            .is_some_and(|names| !names.contains(&crate::store::encode_partition(partition)))
    }
}

/// Whether a generation may be read by downstream tasks: yes unless uncertified.
pub fn is_certified(
    warehouse: &Warehouse,
    dataset: &str,
    partition: &str,
    generation: u64,
) -> bool {
    read(warehouse, dataset, partition, generation).is_none_or(|c| c.certified)
}

/// Records a mark durably, replacing the previous one.
pub fn write(
    warehouse: &Warehouse,
    dataset: &str,
    partition: &str,
    mark: &Certification,
) -> Result<(), StoreError> {
    let key = key(dataset, partition, mark.generation)?;
    let bytes = serde_json::to_vec_pretty(mark).map_err(|e| StoreError::Corrupt {
        key: key.clone(),
        message: format!("cannot encode certification: {e}"),
    })?;
    put_replacing(warehouse.backend().as_ref(), &key, &bytes)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::{Backend, MemoryBackend};

    // Certifications are a typed store over the backend, replaced
    // whole: the latest word on a generation wins.
    #[test]
    fn certifications_go_through_the_backend() {
        let backend = Arc::new(MemoryBackend::new());
        let wh = Warehouse::with_backend(backend.clone(), std::env::temp_dir().join("unused"));
        assert!(is_certified(&wh, "sales", "2026-09-20", 3));
        let word = |certified: bool, reason: &str| Certification {
            generation: 3,
            certified,
            reason: reason.into(),
            at: "2026-12-01T00:00:00Z".into(),
        };
        write(&wh, "sales", "2026-09-20", &word(false, "totals off")).unwrap();
        assert!(!is_certified(&wh, "sales", "2026-09-20", 3));
        assert!(is_certified(&wh, "sales", "2026-09-20", 2));
        write(&wh, "sales", "2026-09-20", &word(true, "checked")).unwrap();
        assert_eq!(
            read(&wh, "sales", "2026-09-20", 3),
            Some(word(true, "checked"))
        );
        let keys: Vec<String> = backend
            .list_objects("")
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(keys, vec!["_certs/sales/2026-09-20/3.json"]);
        assert!(write(&wh, "..", "p", &word(true, "x")).is_err());
    }
}
