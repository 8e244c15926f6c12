//! What the filesystem and the [`crate::Disk`] that mounted it share: the node table, the
//! open directory listings, the counters, and whether the power is cut.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use fuser::{Errno, FileType};
use parking_lot::Mutex;

use crate::fs::data::{flush, open_file};
use crate::nodes::{FileState, Identity, Table};

/// What the filesystem and the [`crate::Disk`] that mounted it share.
pub struct Shared {
    /// The backing directory (canonical).
    pub root: PathBuf,
    pub table: Mutex<Table>,
    /// Open directory handles: the entries read at `opendir`.
    pub dirs: Mutex<std::collections::HashMap<u64, Vec<DirItem>>>,
    pub next_dir: AtomicU64,
    /// The power is cut: nothing reaches the backing directory any more.
    cut: AtomicBool,
    /// The disk is full: writes, and fsyncs with data to write, fail with `ENOSPC`.
    full: AtomicBool,
    pub counters: Counters,
    /// The daemon runs as root, so it can give what it creates to the caller.
    pub as_root: bool,
}

/// Running totals, read by [`crate::Disk::stats`].
#[derive(Default)]
pub struct Counters {
    pub writes: AtomicU64,
    pub written_bytes: AtomicU64,
    pub fsyncs: AtomicU64,
    pub dir_fsyncs: AtomicU64,
    pub flushed_bytes: AtomicU64,
    pub dropped_bytes: AtomicU64,
}

/// One entry of a directory listing.
pub struct DirItem {
    pub ino: u64,
    pub kind: FileType,
    pub name: std::ffi::OsString,
}

impl Shared {
    /// The state of a disk over `root`, whose identity is `identity`.
    pub fn new(root: PathBuf, identity: Identity) -> Shared {
        Shared {
            root,
            table: Mutex::new(Table::new(identity)),
            dirs: Mutex::default(),
            next_dir: AtomicU64::new(1),
            cut: AtomicBool::new(false),
            full: AtomicBool::new(false),
            counters: Counters::default(),
            as_root: nix::unistd::geteuid().is_root(),
        }
    }

    /// Cuts the power: from now on nothing reaches the backing directory, and every pending
    /// write is dropped (counted in `dropped_bytes`, deleted files' aside).
    pub fn cut(&self) {
        if self.cut.swap(true, Ordering::SeqCst) {
            return;
        }
        let states = self.table.lock().all();
        for (_, state) in states {
            let mut state = state.lock();
            let lost = state.cache.drop_all();
            if !state.deleted {
                self.counters
                    .dropped_bytes
                    .fetch_add(lost, Ordering::Relaxed);
            }
        }
    }

    /// Writes every file's pending data to the backing directory and syncs it, as a clean
    /// shutdown does.
    pub fn flush_all(&self) -> io::Result<()> {
        let files: Vec<(Option<PathBuf>, Arc<Mutex<FileState>>)> = {
            let table = self.table.lock();
            table
                .all()
                .into_iter()
                .map(|(id, state)| (table.path(&self.root, id), state))
                .collect()
        };
        for (path, state) in files {
            let mut state = state.lock();
            if state.cache.is_empty() || state.deleted || self.is_cut() {
                continue;
            }
            let (file, cache) = open_file(&mut state, path.as_deref(), true)?;
            flush(cache, file, &self.counters, true)?;
        }
        Ok(())
    }

    fn is_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }

    /// Fills the disk (`true`) or frees it: see [`crate::Disk::set_full`].
    pub fn set_full(&self, full: bool) {
        self.full.store(full, Ordering::SeqCst);
    }

    /// `Err(ENOSPC)` while the disk is full: data cannot be written.
    pub fn roomy(&self) -> Result<(), Errno> {
        if self.full.load(Ordering::SeqCst) {
            Err(Errno::ENOSPC)
        } else {
            Ok(())
        }
    }

    /// `Err(EIO)` once the power is cut: what would change the disk cannot.
    pub fn powered(&self) -> Result<(), Errno> {
        if self.is_cut() {
            Err(Errno::EIO)
        } else {
            Ok(())
        }
    }
}
