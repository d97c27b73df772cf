//! Which directories of a local warehouse this process created, and which
//! of their entries it has made durable (`FsBackend`'s cache): what a
//! durable write still has to fsync on its way up to one it knows.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Directories this process made or made durable.
#[derive(Default)]
pub(crate) struct Dirs {
    /// Directories whose entries, from the root down, this process has made
    /// durable. Seeing a directory exist is not enough: a racing process
    /// may have just created it and not yet fsynced its parent, and a key
    /// put into it would vanish with it in a crash. So the first durable
    /// use of each directory fsyncs its parent once; later puts skip that.
    pub(crate) durable: HashSet<PathBuf>,
    /// Directories this process made (or found) without making their
    /// entries durable (a partition's skeleton, [`DurableDirectories::prepare_dirs`](crate::store::backend::DurableDirectories::prepare_dirs)),
    /// by parent: volatile puts may go into them; the first durable put, or
    /// [`DurableDirectories::make_durable`](crate::store::backend::DurableDirectories::make_durable) of something below, fsyncs their parent
    /// and moves every one of its children here into `durable`.
    pub(crate) made: HashMap<PathBuf, HashSet<PathBuf>>,
}

impl Dirs {
    pub(crate) fn made(&self, dir: &Path) -> bool {
        dir.parent()
            .and_then(|p| self.made.get(p))
            .is_some_and(|c| c.contains(dir))
    }

    /// The made children of `parent`, whose entries its next fsync makes
    /// durable: taken before that fsync, settled after it.
    pub(crate) fn made_under(&self, parent: &Path) -> Vec<PathBuf> {
        self.made
            .get(parent)
            .map(|c| c.iter().cloned().collect())
            .unwrap_or_default()
    }

    pub(crate) fn settle(&mut self, dirs: Vec<PathBuf>) {
        for dir in dirs {
            if let Some(parent) = dir.parent() {
                if let Some(children) = self.made.get_mut(parent) {
                    children.remove(&dir);
                    if children.is_empty() {
                        self.made.remove(parent);
                    }
                }
            }
            self.durable.insert(dir);
        }
    }

    /// What to fsync so that `paths` (files or directories under `root`)
    /// are durable with their names: each path, and every directory entry
    /// up to the nearest ancestor whose own entry is durable (or `root`);
    /// and the made directories those fsyncs make durable, to
    /// [`Dirs::settle`] once they succeed.
    pub(crate) fn to_sync(&self, root: &Path, paths: Vec<PathBuf>) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let mut sync = BTreeSet::new();
        for mut node in paths {
            sync.insert(node.clone());
            while let Some(parent) = node.parent().filter(|_| node != root) {
                sync.insert(parent.to_path_buf());
                if parent == root || self.durable.contains(parent) {
                    break;
                }
                node = parent.to_path_buf();
            }
        }
        let settled = sync.iter().flat_map(|p| self.made_under(p)).collect();
        (sync.into_iter().collect(), settled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_goes_up_to_a_durable_entry_and_settles_what_it_covers() {
        let root = Path::new("/w");
        let mut dirs = Dirs::default();
        for (parent, child) in [("/w", "/w/d"), ("/w/d", "/w/d/p"), ("/w/d/p", "/w/d/p/log")] {
            dirs.made
                .entry(PathBuf::from(parent))
                .or_default()
                .insert(PathBuf::from(child));
        }
        let (sync, settled) = dirs.to_sync(root, vec![PathBuf::from("/w/d/p/data-1/f")]);
        let shown: Vec<&str> = sync.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            shown,
            ["/w", "/w/d", "/w/d/p", "/w/d/p/data-1", "/w/d/p/data-1/f"]
        );
        dirs.settle(settled);
        assert!(dirs.made.is_empty());
        // The next one stops at the partition, now durable.
        let (sync, settled) = dirs.to_sync(root, vec![PathBuf::from("/w/d/p/data-2/f")]);
        let shown: Vec<&str> = sync.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(shown, ["/w/d/p", "/w/d/p/data-2", "/w/d/p/data-2/f"]);
        assert!(settled.is_empty());
    }
}
