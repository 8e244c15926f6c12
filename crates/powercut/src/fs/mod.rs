//! The FUSE filesystem: every request of the kernel, answered from the backing directory and
//! the write caches — file data through the caches ([`data`]), metadata straight to the
//! backing directory ([`meta`]).
//!
//! Once the power is cut, every request that would change the disk fails with `EIO`: the
//! writes the kernel still sends while the mount is torn down (dirty pages of shared mappings)
//! never reach the backing directory.
//!
//! Ownership passes through: when the daemon runs as root, whatever a caller creates is
//! chowned to the caller (or to the directory's group under a set-group-ID directory), so a
//! database server running as its own user owns its files as on a real disk; the kernel checks
//! permissions against the attributes this filesystem reports (`default_permissions`).

pub(crate) mod data;
mod meta;

use std::ffi::OsStr;
use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use parking_lot::Mutex;

use self::meta::Change;
use crate::nodes::{FileState, Identity};
use crate::shared::Shared;

/// How long the kernel may trust an entry or attributes. Every change goes through this
/// filesystem, so the kernel's copies never go stale behind its back; the timeout only bounds
/// how long a forgotten mistake could last.
const TTL: Duration = Duration::from_secs(1);

/// The filesystem the kernel talks to; a thin shell over [`Shared`].
pub struct PowerCutFs {
    pub shared: Arc<Shared>,
}

/// The result of one request's work, its error an errno for the kernel.
type Answer<T> = Result<T, Errno>;

fn errno(error: io::Error) -> Errno {
    Errno::from(error)
}

fn nix_errno(error: nix::errno::Errno) -> Errno {
    Errno::from_i32(error as i32)
}

fn identity(meta: &Metadata) -> Identity {
    (meta.dev(), meta.ino())
}

fn time(seconds: i64, nanos: i64) -> SystemTime {
    let nanos = u32::try_from(nanos).unwrap_or(0);
    match u64::try_from(seconds) {
        Ok(s) => UNIX_EPOCH + Duration::new(s, nanos),
        Err(_) => UNIX_EPOCH - Duration::new(seconds.unsigned_abs(), 0) + Duration::new(0, nanos),
    }
}

/// The kernel's view of node `id`, the backing file of `meta`: its attributes, its length grown
/// by pending writes. FUSE shows the node id as the inode number (fuser sends one field for
/// both), unique for the mount's life as a real inode number is for a file's.
fn attr(id: u64, meta: &Metadata, cache_len: Option<u64>) -> FileAttr {
    FileAttr {
        ino: INodeNo(id),
        size: cache_len.unwrap_or(meta.len()),
        blocks: meta.blocks(),
        atime: time(meta.atime(), meta.atime_nsec()),
        mtime: time(meta.mtime(), meta.mtime_nsec()),
        ctime: time(meta.ctime(), meta.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind: FileType::from_std(meta.file_type()).unwrap_or(FileType::RegularFile),
        perm: (meta.mode() & 0o7777) as u16,
        nlink: u32::try_from(meta.nlink()).unwrap_or(u32::MAX),
        uid: meta.uid(),
        gid: meta.gid(),
        rdev: u32::try_from(meta.rdev()).unwrap_or(0),
        blksize: u32::try_from(meta.blksize()).unwrap_or(4096),
        flags: 0,
    }
}

impl PowerCutFs {
    fn path(&self, id: u64) -> Answer<PathBuf> {
        self.shared
            .table
            .lock()
            .path(&self.shared.root, id)
            .ok_or(Errno::ENOENT)
    }

    fn child(&self, parent: u64, name: &OsStr) -> Answer<PathBuf> {
        Ok(self.path(parent)?.join(name))
    }

    fn state(&self, id: u64) -> Answer<Arc<Mutex<FileState>>> {
        self.shared.table.lock().state(id).ok_or(Errno::ENOENT)
    }

    /// The kernel's view of `name` in `parent`, now a reference it holds.
    fn entry(&self, parent: u64, name: &OsStr) -> Answer<FileAttr> {
        let path = self.child(parent, name)?;
        let meta = std::fs::symlink_metadata(&path).map_err(errno)?;
        let (id, state) = self
            .shared
            .table
            .lock()
            .remember(identity(&meta), parent, name);
        let state = state.lock();
        let len = (!state.cache.is_empty()).then(|| state.cache.len(meta.len()));
        Ok(attr(id, &meta, len))
    }

    /// Node `id`'s attributes: by path, or through its open file once it has no name.
    fn attributes(&self, id: u64) -> Answer<FileAttr> {
        let state = self.state(id)?;
        let path = self.shared.table.lock().path(&self.shared.root, id);
        let state = state.lock();
        let meta = match (&path, &state.backing) {
            (Some(path), _) => std::fs::symlink_metadata(path),
            (None, Some(file)) => file.metadata(),
            (None, None) => return Err(Errno::ENOENT),
        }
        .map_err(errno)?;
        let len = (!state.cache.is_empty()).then(|| state.cache.len(meta.len()));
        Ok(attr(id, &meta, len))
    }
}

/// Ids are never reused, so every generation is 0.
fn reply_entry(reply: ReplyEntry, answer: Answer<FileAttr>) {
    match answer {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(reply: ReplyEmpty, answer: Answer<()>) {
    match answer {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for PowerCutFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        reply_entry(reply, self.entry(parent.0, name));
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.shared.table.lock().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attributes(ino.0) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let change = Change {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        match self.do_setattr(ino.0, change) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self
            .path(ino.0)
            .and_then(|p| std::fs::read_link(p).map_err(errno))
        {
            Ok(target) => reply.data(std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str())),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        reply_entry(reply, self.do_mknod(req, parent.0, name, mode, umask, rdev));
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        reply_entry(reply, self.do_mkdir(req, parent.0, name, mode, umask));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.do_remove(parent.0, name, false));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.do_remove(parent.0, name, true));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        reply_entry(reply, self.do_symlink(req, parent.0, link_name, target));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        reply_empty(
            reply,
            self.do_rename(parent.0, name, newparent.0, newname, flags),
        );
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply_entry(reply, self.do_link(ino.0, newparent.0, newname));
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.do_open(ino.0, flags) {
            // Keep the kernel's cached pages across opens: every change goes through here.
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.do_read(ino.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Ok(written) = u32::try_from(data.len()) else {
            return reply.error(Errno::EINVAL);
        };
        match self.do_write(ino.0, fh.0, offset, data) {
            Ok(()) => reply.written(written),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close() is not a sync: nothing to do.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.do_release(ino.0, fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.do_fsync(ino.0, datasync));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.do_opendir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let dirs = self.shared.dirs.lock();
        let Some(items) = dirs.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, item) in items.iter().enumerate().skip(skip) {
            if reply.add(INodeNo(item.ino), i as u64 + 1, item.kind, &item.name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.shared.dirs.lock().remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Directory changes are on the backing directory already (the model's limit).
        self.shared
            .counters
            .dir_fsyncs
            .fetch_add(1, Ordering::Relaxed);
        reply_empty(reply, self.shared.powered());
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match nix::sys::statvfs::statvfs(&self.shared.root) {
            Ok(s) => reply.statfs(
                s.blocks(),
                s.blocks_free(),
                s.blocks_available(),
                s.files(),
                s.files_free(),
                u32::try_from(s.block_size()).unwrap_or(4096),
                u32::try_from(s.name_max()).unwrap_or(255),
                u32::try_from(s.fragment_size()).unwrap_or(4096),
            ),
            Err(e) => reply.error(nix_errno(e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.do_create(req, parent.0, name, mode, umask, flags) {
            Ok((attr, fh)) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(fh),
                FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(e),
        }
    }
}
