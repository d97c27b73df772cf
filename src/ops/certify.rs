//! Certification marks on generations. A publication passed its gates and is
//! certified by default; `weir uncertify` marks a generation as suspect (a
//! consumer found a problem the gates missed), `weir certify` vouches for it
//! again. Downstream tasks refuse an uncertified input unless their run is
//! given `--allow-uncertified`.
//!
//! `<warehouse>/_certs/<dataset>/<partition>/<generation>.json`, written
//! durably; the CERTIFIED / UNCERTIFIED events keep the history.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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

fn path(warehouse: &Path, dataset: &str, partition: &str, generation: u64) -> PathBuf {
    warehouse
        .join("_certs")
        .join(dataset)
        .join(crate::store::encode_partition(partition))
        .join(format!("{generation}.json"))
}

/// The mark of a generation, if any was ever made. A mark that cannot be
/// read (EACCES, ENOTDIR, a torn file) counts as uncertified, naming why:
/// when in doubt, downstream tasks wait for a person.
pub fn read(
    warehouse: &Path,
    dataset: &str,
    partition: &str,
    generation: u64,
) -> Option<Certification> {
    let path = path(warehouse, dataset, partition, generation);
    let unreadable = |why: String| Certification {
        generation,
        certified: false,
        reason: format!("unreadable certification mark `{}`: {why}", path.display()),
        at: String::new(),
    };
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(unreadable(e.to_string())),
    };
    Some(serde_json::from_slice(&bytes).unwrap_or_else(|e| unreadable(e.to_string())))
}

/// Whether a generation may be read by downstream tasks: yes unless uncertified.
pub fn is_certified(warehouse: &Path, dataset: &str, partition: &str, generation: u64) -> bool {
    read(warehouse, dataset, partition, generation).is_none_or(|c| c.certified)
}

/// Records a mark durably.
pub fn write(
    warehouse: &Path,
    dataset: &str,
    partition: &str,
    mark: &Certification,
) -> std::io::Result<()> {
    let p = path(warehouse, dataset, partition, mark.generation);
    if let Some(dir) = p.parent() {
        crate::store::fs::create_dir_all_durable(dir)?;
    }
    let bytes = serde_json::to_vec_pretty(mark).map_err(std::io::Error::other)?;
    crate::store::fs::write_durable(&p, &bytes)
}
