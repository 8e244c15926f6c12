//! The node table: the ids FUSE knows the files by, and where each file is in the backing
//! directory.
//!
//! A node is one backing file (one device and inode number, so hard links share it) under an id
//! of our own: the backing directory reuses an inode number as soon as a file is deleted, while
//! the kernel may still hold the old id (an open, deleted file), so ids are never reused. A node
//! knows its names as (parent node, name) pairs; its path is found by walking up to the root,
//! so renaming a directory moves everything under it without touching its children.
//!
//! A node outlives the kernel's interest in it while it has pending writes: a file written,
//! closed and forgotten keeps its unsynced pages until an fsync or the power cut, as a page
//! cache would. Its [`FileState`] (the open backing file and the write cache) has a lock of its
//! own, so a slow fsync of one file never holds up the table. Lock order: the table, then a
//! file's state; never the other way round.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::cache::Cache;

/// The kernel's id of the mount's root.
pub const ROOT: u64 = 1;

/// A backing file's identity: (device, inode number).
pub type Identity = (u64, u64);

/// What one file holds while the disk is mounted, behind its own lock.
#[derive(Default)]
pub struct FileState {
    /// The backing file, open while any handle to it is; reads, writes and flushes go through
    /// it (it stays readable after the file is deleted).
    pub backing: Option<File>,
    /// Whether `backing` was opened for writing.
    pub writable: bool,
    /// Open handles.
    pub open: u32,
    /// The file's last name is gone: its pending data goes with its last handle.
    pub deleted: bool,
    /// The writes not yet fsynced.
    pub cache: Cache,
}

struct Node {
    identity: Identity,
    /// (parent id, name): every name the file is known by.
    names: Vec<(u64, OsString)>,
    /// The kernel's references (lookups not yet forgotten).
    lookups: u64,
    state: Arc<Mutex<FileState>>,
}

/// Every node the kernel knows of, or that has pending data, and the open handles.
pub struct Table {
    nodes: HashMap<u64, Node>,
    by_identity: HashMap<Identity, u64>,
    next_id: u64,
    /// Open handle → its node and whether it was opened with `O_SYNC`/`O_DSYNC`.
    handles: HashMap<u64, (u64, bool)>,
    next_handle: u64,
}

impl Table {
    /// A table holding the root, the backing directory of identity `root`.
    pub fn new(root: Identity) -> Table {
        let mut table = Table {
            nodes: HashMap::new(),
            by_identity: HashMap::new(),
            next_id: ROOT + 1,
            handles: HashMap::new(),
            next_handle: 1,
        };
        table.nodes.insert(
            ROOT,
            Node {
                identity: root,
                names: Vec::new(),
                lookups: 1,
                state: Arc::default(),
            },
        );
        table.by_identity.insert(root, ROOT);
        table
    }

    /// Node `id`'s path under `root`; `None` for an unknown node or a deleted file.
    pub fn path(&self, root: &Path, id: u64) -> Option<PathBuf> {
        let mut parts: Vec<&OsStr> = Vec::new();
        let mut at = id;
        // A name cycle cannot happen (directories form a tree); the bound makes sure.
        for _ in 0..4096 {
            if at == ROOT {
                let mut path = root.to_path_buf();
                path.extend(parts.iter().rev());
                return Some(path);
            }
            let (parent, name) = self.nodes.get(&at)?.names.first()?;
            parts.push(name);
            at = *parent;
        }
        None
    }

    /// Records that `name` in `parent` is the backing file `identity` and that the kernel took
    /// a reference to it (a lookup, or the reply to a create); its id and state.
    pub fn remember(
        &mut self,
        identity: Identity,
        parent: u64,
        name: &OsStr,
    ) -> (u64, Arc<Mutex<FileState>>) {
        let next_id = &mut self.next_id;
        let id = *self.by_identity.entry(identity).or_insert_with(|| {
            let id = *next_id;
            *next_id += 1;
            id
        });
        let node = self.nodes.entry(id).or_insert_with(|| Node {
            identity,
            names: Vec::new(),
            lookups: 0,
            state: Arc::default(),
        });
        node.lookups += 1;
        if !node.names.iter().any(|(p, n)| *p == parent && n == name) {
            node.names.push((parent, name.to_owned()));
        }
        (id, node.state.clone())
    }

    /// Node `id`'s state.
    pub fn state(&self, id: u64) -> Option<Arc<Mutex<FileState>>> {
        self.nodes.get(&id).map(|n| n.state.clone())
    }

    /// The node a backing file is known as, if any.
    pub fn find(&self, identity: Identity) -> Option<u64> {
        self.by_identity.get(&identity).copied()
    }

    /// The kernel dropped `n` references to node `id`. A node nobody refers to, with nothing
    /// open and nothing pending, is let go (a busy state is left for a later forget).
    pub fn forget(&mut self, id: u64, n: u64) {
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups > 0 || id == ROOT {
            return;
        }
        let idle = node
            .state
            .try_lock()
            .is_some_and(|s| s.open == 0 && (s.cache.is_empty() || s.deleted));
        if idle {
            let identity = node.identity;
            self.nodes.remove(&id);
            if self.by_identity.get(&identity) == Some(&id) {
                self.by_identity.remove(&identity);
            }
        }
    }

    /// `name` in `parent` (the backing file `identity`) is gone. When it was the file's last
    /// name, the identity is let go (the backing directory may reuse the inode number) and
    /// the file's state is returned for the caller to mark deleted.
    pub fn unlinked(
        &mut self,
        identity: Identity,
        parent: u64,
        name: &OsStr,
        last: bool,
    ) -> Option<Arc<Mutex<FileState>>> {
        let id = self.find(identity)?;
        let node = self.nodes.get_mut(&id)?;
        node.names.retain(|(p, n)| !(*p == parent && n == name));
        if !last {
            return None;
        }
        node.names.clear();
        self.by_identity.remove(&identity);
        Some(node.state.clone())
    }

    /// The file `identity` moved from `from` to `to` (each a parent id and a name).
    pub fn renamed(&mut self, identity: Identity, from: (u64, &OsStr), to: (u64, &OsStr)) {
        let Some(node) = self.find(identity).and_then(|id| self.nodes.get_mut(&id)) else {
            return;
        };
        node.names
            .retain(|(p, n)| !((*p == from.0 && n == from.1) || (*p == to.0 && n == to.1)));
        node.names.insert(0, (to.0, to.1.to_owned()));
    }

    /// A new open handle to node `id`.
    pub fn open_handle(&mut self, id: u64, sync: bool) -> u64 {
        let fh = self.next_handle;
        self.next_handle += 1;
        self.handles.insert(fh, (id, sync));
        fh
    }

    /// Whether handle `fh` writes through (`O_SYNC`/`O_DSYNC`).
    pub fn is_sync(&self, fh: u64) -> bool {
        self.handles.get(&fh).is_some_and(|&(_, sync)| sync)
    }

    /// Forgets handle `fh`.
    pub fn close_handle(&mut self, fh: u64) {
        self.handles.remove(&fh);
    }

    /// Every node's id and state (for a cut or a clean unmount).
    pub fn all(&self) -> Vec<(u64, Arc<Mutex<FileState>>)> {
        self.nodes
            .iter()
            .map(|(&id, n)| (id, n.state.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_renamed_directories_and_ids_are_never_reused() {
        let mut table = Table::new((1, 100));
        let (dir, _) = table.remember((1, 101), ROOT, OsStr::new("a"));
        let (file, _) = table.remember((1, 102), dir, OsStr::new("f"));
        let root = Path::new("/backing");
        assert_eq!(table.path(root, file), Some(PathBuf::from("/backing/a/f")));
        table.renamed((1, 101), (ROOT, OsStr::new("a")), (ROOT, OsStr::new("b")));
        assert_eq!(table.path(root, file), Some(PathBuf::from("/backing/b/f")));
        // A second name (a hard link) survives the first's removal.
        table.remember((1, 102), ROOT, OsStr::new("g"));
        assert!(table
            .unlinked((1, 102), dir, OsStr::new("f"), false)
            .is_none());
        assert_eq!(table.path(root, file), Some(PathBuf::from("/backing/g")));
        // The last name gone: the inode number may come back as another file, another id.
        assert!(table
            .unlinked((1, 102), ROOT, OsStr::new("g"), true)
            .is_some());
        assert_eq!(table.path(root, file), None);
        let (again, _) = table.remember((1, 102), ROOT, OsStr::new("h"));
        assert_ne!(again, file);
    }

    #[test]
    fn a_forgotten_node_with_pending_data_stays() {
        let mut table = Table::new((1, 100));
        let (id, state) = table.remember((1, 101), ROOT, OsStr::new("f"));
        let dir = tempfile::tempdir().expect("dir");
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .expect("open");
        state.lock().cache.write(&file, 0, b"x").expect("write");
        table.forget(id, 1);
        assert_eq!(table.find((1, 101)), Some(id));
        state.lock().cache.drop_all();
        table.remember((1, 101), ROOT, OsStr::new("f"));
        table.forget(id, 1);
        assert_eq!(table.find((1, 101)), None);
    }
}
