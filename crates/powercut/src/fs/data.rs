//! File data: through the write caches. A `write` is held in memory, a `read` sees it, and an
//! `fsync` (or a write through an `O_SYNC`/`O_DSYNC` handle) writes the file's pending pages to
//! the backing file and syncs it.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;

use fuser::{OpenAccMode, OpenFlags};

use super::{errno, Answer, PowerCutFs};
use crate::cache::Cache;
use crate::nodes::FileState;
use crate::shared::Counters;

/// The state's backing file — opened from `path` when no handle holds it open, for writing
/// when `write` — and its cache, borrowed together.
pub(crate) fn open_file<'a>(
    state: &'a mut FileState,
    path: Option<&Path>,
    write: bool,
) -> io::Result<(&'a File, &'a mut Cache)> {
    if state.backing.is_none() || (write && !state.writable) {
        let path = path.ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        let (file, writable) = open_backing(path, write)?;
        state.backing = Some(file);
        state.writable = writable;
    }
    let FileState { backing, cache, .. } = state;
    match backing {
        Some(file) => Ok((file, cache)),
        None => Err(io::Error::from_raw_os_error(libc::EBADF)),
    }
}

/// Opens a backing file for reading and writing — whatever the caller asked, since a later
/// fsync through a read-only descriptor must still write the pending pages (the kernel has
/// already checked the caller's permissions) — or, when that is refused and `write` is not
/// needed, for reading only. Never with `O_APPEND`: the kernel gives every write's offset.
fn open_backing(path: &Path, write: bool) -> io::Result<(File, bool)> {
    match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => Ok((file, true)),
        Err(_) if !write => Ok((File::open(path)?, false)),
        Err(e) => Err(e),
    }
}

/// Writes `cache` to `file` and syncs it (data only when `!all`), counting the bytes.
pub(crate) fn flush(
    cache: &mut Cache,
    file: &File,
    counters: &Counters,
    all: bool,
) -> io::Result<()> {
    let written = cache.flush(file)?;
    if all {
        file.sync_all()?;
    } else {
        file.sync_data()?;
    }
    counters.flushed_bytes.fetch_add(written, Ordering::Relaxed);
    Ok(())
}

impl PowerCutFs {
    pub(super) fn do_open(&self, id: u64, flags: OpenFlags) -> Answer<u64> {
        let path = self.path(id).ok();
        let state = self.state(id)?;
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY;
        {
            let mut state = state.lock();
            open_file(&mut state, path.as_deref(), write).map_err(errno)?;
            state.open += 1;
        }
        let sync = flags.0 & (libc::O_SYNC | libc::O_DSYNC) != 0;
        Ok(self.shared.table.lock().open_handle(id, sync))
    }

    pub(super) fn do_read(&self, id: u64, offset: u64, size: u32) -> Answer<Vec<u8>> {
        let path = self.path(id).ok();
        let state = self.state(id)?;
        let mut state = state.lock();
        let (file, cache) = open_file(&mut state, path.as_deref(), false).map_err(errno)?;
        cache.read(file, offset, size).map_err(errno)
    }

    pub(super) fn do_write(&self, id: u64, fh: u64, offset: u64, data: &[u8]) -> Answer<()> {
        let path = self.path(id).ok();
        let sync = self.shared.table.lock().is_sync(fh);
        let state = self.state(id)?;
        let mut state = state.lock();
        // Checked under the file's lock: a cut drops this file's pages under the same lock,
        // so no write lands after it.
        self.shared.powered()?;
        self.shared.roomy()?;
        let (file, cache) = open_file(&mut state, path.as_deref(), true).map_err(errno)?;
        cache.write(file, offset, data).map_err(errno)?;
        let counters = &self.shared.counters;
        counters.writes.fetch_add(1, Ordering::Relaxed);
        counters
            .written_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        if sync {
            flush(cache, file, counters, false).map_err(errno)?;
        }
        Ok(())
    }

    pub(super) fn do_fsync(&self, id: u64, datasync: bool) -> Answer<()> {
        self.shared.counters.fsyncs.fetch_add(1, Ordering::Relaxed);
        let path = self.path(id).ok();
        let state = self.state(id)?;
        let mut state = state.lock();
        self.shared.powered()?;
        if state.cache.is_empty() {
            // Nothing pending; the backing file may still hold a direct truncation.
            if let Some(file) = &state.backing {
                return file.sync_all().map_err(errno);
            }
            return Ok(());
        }
        // Pending data and no room for it: the sync fails, the data stays pending.
        self.shared.roomy()?;
        let (file, cache) = open_file(&mut state, path.as_deref(), true).map_err(errno)?;
        flush(cache, file, &self.shared.counters, !datasync).map_err(errno)
    }

    pub(super) fn do_release(&self, id: u64, fh: u64) {
        self.shared.table.lock().close_handle(fh);
        if let Ok(state) = self.state(id) {
            let mut state = state.lock();
            state.open = state.open.saturating_sub(1);
            if state.open == 0 {
                state.backing = None;
                if state.deleted {
                    state.cache.drop_all();
                }
            }
        }
    }
}
