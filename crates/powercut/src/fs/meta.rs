//! Metadata: straight to the backing directory. Creating, deleting, renaming and linking
//! files, directories and links, truncating, and changing modes, owners and times survive a cut
//! whether or not anything was fsynced (the model's limit: a missing directory fsync goes
//! unseen).

use std::ffi::OsStr;
use std::fs::{Metadata, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::UNIX_EPOCH;

use fuser::{Errno, FileAttr, FileType, RenameFlags, Request, TimeOrNow};

use super::{attr, errno, identity, nix_errno, Answer, PowerCutFs};
use crate::shared::DirItem;

/// What a `setattr` asks to change.
pub struct Change {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeOrNow>,
    pub mtime: Option<TimeOrNow>,
}

impl PowerCutFs {
    /// Gives a new file, directory or link at `path` to the caller `req` (when the daemon may):
    /// the caller's user, and the directory's group under a set-group-ID directory.
    fn give_to_caller(&self, req: &Request, parent: &Path, path: &Path) -> Answer<()> {
        if !self.shared.as_root {
            return Ok(());
        }
        let dir = std::fs::metadata(parent).map_err(errno)?;
        let gid = if dir.mode() & libc::S_ISGID != 0 {
            dir.gid()
        } else {
            req.gid()
        };
        std::os::unix::fs::lchown(path, Some(req.uid()), Some(gid)).map_err(errno)
    }

    /// `name` in `parent` is being removed (by unlink, rmdir or a rename over it): when that
    /// was the file's last name, its pending data goes with its last open handle.
    fn removing(&self, parent: u64, name: &OsStr, meta: &Metadata) {
        let last = meta.is_dir() || meta.nlink() <= 1;
        let state = self
            .shared
            .table
            .lock()
            .unlinked(identity(meta), parent, name, last);
        if let Some(state) = state {
            let mut state = state.lock();
            state.deleted = true;
            if state.open == 0 {
                state.cache.drop_all();
            }
        }
    }

    pub(super) fn do_create(
        &self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> Answer<(FileAttr, u64)> {
        self.shared.powered()?;
        let dir = self.path(parent)?;
        let path = dir.join(name);
        let perm = mode & !umask & 0o7777;
        let mut options = OpenOptions::new();
        options.read(true).write(true).mode(perm);
        if flags & libc::O_EXCL != 0 {
            options.create_new(true);
        } else {
            options.create(true).truncate(flags & libc::O_TRUNC != 0);
        }
        let file = options.open(&path).map_err(errno)?;
        // The daemon's own umask must not narrow the caller's mode.
        file.set_permissions(std::fs::Permissions::from_mode(perm))
            .map_err(errno)?;
        self.give_to_caller(req, &dir, &path)?;
        let meta = file.metadata().map_err(errno)?;
        let (id, state) = self
            .shared
            .table
            .lock()
            .remember(identity(&meta), parent, name);
        let fh = self
            .shared
            .table
            .lock()
            .open_handle(id, flags & (libc::O_SYNC | libc::O_DSYNC) != 0);
        let mut state = state.lock();
        if flags & libc::O_TRUNC != 0 {
            state.cache.truncate(0);
        }
        state.open += 1;
        state.backing = Some(file);
        state.writable = true;
        let len = (!state.cache.is_empty()).then(|| state.cache.len(meta.len()));
        Ok((attr(id, &meta, len), fh))
    }

    pub(super) fn do_setattr(&self, id: u64, change: Change) -> Answer<FileAttr> {
        let Change {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        } = change;
        self.shared.powered()?;
        let path = self.path(id).ok();
        let state = self.state(id)?;
        if let Some(size) = size {
            let mut state = state.lock();
            match (&path, &state.backing) {
                (_, Some(file)) if state.writable => file.set_len(size).map_err(errno)?,
                (Some(path), _) => {
                    nix::unistd::truncate(path, i64::try_from(size).map_err(|_| Errno::EFBIG)?)
                        .map_err(nix_errno)?
                }
                _ => return Err(Errno::ENOENT),
            }
            state.cache.truncate(size);
        }
        let Some(path) = path else {
            // A deleted file, open: only its length can still change.
            return self.attributes(id);
        };
        let is_link = std::fs::symlink_metadata(&path)
            .map_err(errno)?
            .file_type()
            .is_symlink();
        if let (Some(mode), false) = (mode, is_link) {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777))
                .map_err(errno)?;
        }
        if uid.is_some() || gid.is_some() {
            std::os::unix::fs::lchown(&path, uid, gid).map_err(errno)?;
        }
        if atime.is_some() || mtime.is_some() {
            let spec = |t: Option<TimeOrNow>| match t {
                None => nix::sys::time::TimeSpec::UTIME_OMIT,
                Some(TimeOrNow::Now) => nix::sys::time::TimeSpec::UTIME_NOW,
                Some(TimeOrNow::SpecificTime(t)) => match t.duration_since(UNIX_EPOCH) {
                    Ok(d) => nix::sys::time::TimeSpec::from_duration(d),
                    Err(_) => nix::sys::time::TimeSpec::new(0, 0),
                },
            };
            nix::sys::stat::utimensat(
                nix::fcntl::AT_FDCWD,
                &path,
                &spec(atime),
                &spec(mtime),
                nix::sys::stat::UtimensatFlags::NoFollowSymlink,
            )
            .map_err(nix_errno)?;
        }
        self.attributes(id)
    }

    pub(super) fn do_rename(
        &self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: RenameFlags,
    ) -> Answer<()> {
        self.shared.powered()?;
        let from = self.child(parent, name)?;
        let to = self.child(newparent, newname)?;
        let moved = std::fs::symlink_metadata(&from).map_err(errno)?;
        let replaced = std::fs::symlink_metadata(&to).ok();
        if flags.is_empty() {
            std::fs::rename(&from, &to).map_err(errno)?;
        } else {
            let flags = nix::fcntl::RenameFlags::from_bits(flags.bits()).ok_or(Errno::EINVAL)?;
            nix::fcntl::renameat2(
                nix::fcntl::AT_FDCWD,
                &from,
                nix::fcntl::AT_FDCWD,
                &to,
                flags,
            )
            .map_err(nix_errno)?;
        }
        let exchange = flags.contains(RenameFlags::RENAME_EXCHANGE);
        match replaced {
            // Two names of one file: rename does nothing.
            Some(other) if identity(&other) == identity(&moved) => {}
            Some(other) if exchange => {
                let mut table = self.shared.table.lock();
                table.renamed(identity(&moved), (parent, name), (newparent, newname));
                table.renamed(identity(&other), (newparent, newname), (parent, name));
            }
            Some(other) => {
                self.removing(newparent, newname, &other);
                let mut table = self.shared.table.lock();
                table.renamed(identity(&moved), (parent, name), (newparent, newname));
            }
            None => {
                let mut table = self.shared.table.lock();
                table.renamed(identity(&moved), (parent, name), (newparent, newname));
            }
        }
        Ok(())
    }

    pub(super) fn do_remove(&self, parent: u64, name: &OsStr, dir: bool) -> Answer<()> {
        self.shared.powered()?;
        let path = self.child(parent, name)?;
        let meta = std::fs::symlink_metadata(&path).map_err(errno)?;
        if dir {
            std::fs::remove_dir(&path).map_err(errno)?;
        } else {
            std::fs::remove_file(&path).map_err(errno)?;
        }
        self.removing(parent, name, &meta);
        Ok(())
    }

    pub(super) fn do_mkdir(
        &self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
    ) -> Answer<FileAttr> {
        self.shared.powered()?;
        let dir = self.path(parent)?;
        let path = dir.join(name);
        let mut perm = mode & !umask & 0o7777;
        // Under a set-group-ID directory, new directories inherit the bit.
        if std::fs::metadata(&dir).map_err(errno)?.mode() & libc::S_ISGID != 0 {
            perm |= libc::S_ISGID;
        }
        std::fs::DirBuilder::new()
            .mode(perm)
            .create(&path)
            .map_err(errno)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(perm)).map_err(errno)?;
        self.give_to_caller(req, &dir, &path)?;
        self.entry(parent, name)
    }

    pub(super) fn do_mknod(
        &self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
    ) -> Answer<FileAttr> {
        self.shared.powered()?;
        let dir = self.path(parent)?;
        let path = dir.join(name);
        let perm = mode & !umask & 0o7777;
        let kind = nix::sys::stat::SFlag::from_bits_truncate(mode & libc::S_IFMT);
        nix::sys::stat::mknod(
            &path,
            kind,
            nix::sys::stat::Mode::from_bits_truncate(perm),
            u64::from(rdev),
        )
        .map_err(nix_errno)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(perm)).map_err(errno)?;
        self.give_to_caller(req, &dir, &path)?;
        self.entry(parent, name)
    }

    pub(super) fn do_symlink(
        &self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        target: &Path,
    ) -> Answer<FileAttr> {
        self.shared.powered()?;
        let dir = self.path(parent)?;
        let path = dir.join(name);
        std::os::unix::fs::symlink(target, &path).map_err(errno)?;
        self.give_to_caller(req, &dir, &path)?;
        self.entry(parent, name)
    }

    pub(super) fn do_link(&self, id: u64, newparent: u64, newname: &OsStr) -> Answer<FileAttr> {
        self.shared.powered()?;
        let from = self.path(id)?;
        let to = self.child(newparent, newname)?;
        std::fs::hard_link(&from, &to).map_err(errno)?;
        self.entry(newparent, newname)
    }

    /// Reads the whole directory at `opendir`, so that `readdir`'s offsets stay right while
    /// the caller deletes what it lists (as database servers do). Inode numbers are the ids
    /// of the files the kernel knows, as `stat` shows them, and the backing ones otherwise.
    pub(super) fn do_opendir(&self, id: u64) -> Answer<u64> {
        let path = self.path(id)?;
        let meta = std::fs::metadata(&path).map_err(errno)?;
        let up = std::fs::metadata(path.join("..")).map_or(meta.ino(), |m| m.ino());
        let mut found = vec![
            (meta.ino(), FileType::Directory, ".".into()),
            (up, FileType::Directory, "..".into()),
        ];
        for entry in std::fs::read_dir(&path).map_err(errno)? {
            let entry = entry.map_err(errno)?;
            let kind = entry
                .file_type()
                .ok()
                .and_then(FileType::from_std)
                .unwrap_or(FileType::RegularFile);
            found.push((
                std::os::unix::fs::DirEntryExt::ino(&entry),
                kind,
                entry.file_name(),
            ));
        }
        let items = {
            let table = self.shared.table.lock();
            found
                .into_iter()
                .map(|(ino, kind, name)| DirItem {
                    ino: table.find((meta.dev(), ino)).unwrap_or(ino),
                    kind,
                    name,
                })
                .collect()
        };
        let fh = self.shared.next_dir.fetch_add(1, Ordering::Relaxed);
        self.shared.dirs.lock().insert(fh, items);
        Ok(fh)
    }
}
