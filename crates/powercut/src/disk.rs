//! The disk: mounting the filesystem in this process, cutting its power, and its counters.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fuser::{BackgroundSession, MountOption, SessionACL};

use crate::fs::PowerCutFs;
use crate::shared::Shared;

/// Threads answering the kernel: a slow fsync of one file must not hold up every other
/// request (a database fsyncs its log while its other processes read and write).
const THREADS: usize = 4;

/// How long an unmount waits for the files under the mount to be closed (a killed process's
/// files close as the kernel reaps it) before it detaches the mount lazily instead.
const UNMOUNT_WAIT: Duration = Duration::from_secs(3);

/// What the disk saw since it was mounted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// `write` requests (each held in memory until an fsync).
    pub writes: u64,
    /// Bytes those writes carried.
    pub written_bytes: u64,
    /// `fsync` and `fdatasync` requests on files.
    pub fsyncs: u64,
    /// `fsync` requests on directories (no-ops in this model: directory changes are durable
    /// at once).
    pub dir_fsyncs: u64,
    /// Bytes written to the backing files by fsyncs.
    pub flushed_bytes: u64,
    /// Bytes written and never fsynced that the power cut threw away (0 until [`Disk::cut`]):
    /// per pending page, the span from its first to its last written byte; deleted files'
    /// pages are not counted.
    pub dropped_bytes: u64,
}

/// A mounted power-cut disk: a directory (`mountpoint`) showing a backing directory's files,
/// whose writes stay in memory until they are fsynced.
///
/// [`Disk::cut`] is the power cut: what was not fsynced is gone, and the mount goes with the
/// kernel's page cache for it. Mounting the same backing directory again is the machine
/// coming back. Dropping a disk without cutting it is a clean shutdown: pending writes are
/// flushed, then it is unmounted.
pub struct Disk {
    shared: Arc<Shared>,
    session: Option<BackgroundSession>,
    mountpoint: PathBuf,
    /// The kernel's number for this FUSE connection (the mount's device minor), to abort it.
    connection: u64,
}

impl Disk {
    /// Mounts a disk over `backing` at `mountpoint` (both existing directories), served by
    /// threads of this process.
    ///
    /// The mount allows other users (`allow_other`: a database server running as its own user
    /// must reach its files) and lets the kernel check permissions against the files' modes
    /// and owners (`default_permissions`), which pass through from the backing directory.
    /// Mounting needs `/dev/fuse`, and root or `fusermount3`.
    pub fn mount(backing: &Path, mountpoint: &Path) -> io::Result<Disk> {
        let root = backing.canonicalize()?;
        let mountpoint = mountpoint.canonicalize()?;
        let meta = std::fs::metadata(&root)?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a directory", root.display()),
            ));
        }
        let shared = Arc::new(Shared::new(root, (meta.dev(), meta.ino())));
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            MountOption::FSName("powercut".into()),
            MountOption::Subtype("powercut".into()),
            MountOption::DefaultPermissions,
        ];
        config.acl = SessionACL::All;
        config.n_threads = Some(THREADS);
        config.clone_fd = true;
        let filesystem = PowerCutFs {
            shared: shared.clone(),
        };
        let session = fuser::spawn_mount(filesystem, &mountpoint, &config)?;
        let mut disk = Disk {
            shared,
            session: Some(session),
            mountpoint,
            connection: 0,
        };
        // The mount's device (asked of the mount itself) numbers the connection.
        disk.connection = nix::sys::stat::minor(std::fs::metadata(&disk.mountpoint)?.dev());
        Ok(disk)
    }

    /// Where the disk is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Fills the disk (`true`), as a disk out of space: every `write` fails with `ENOSPC`, and
    /// so does an fsync of a file with pending data (the data stays pending); reads,
    /// truncation, deletion and other metadata changes still work. `false` frees it again.
    /// For testing what a program does when its writes fail.
    pub fn set_full(&self, full: bool) {
        self.shared.set_full(full);
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        let c = &self.shared.counters;
        Stats {
            writes: c.writes.load(Ordering::Relaxed),
            written_bytes: c.written_bytes.load(Ordering::Relaxed),
            fsyncs: c.fsyncs.load(Ordering::Relaxed),
            dir_fsyncs: c.dir_fsyncs.load(Ordering::Relaxed),
            flushed_bytes: c.flushed_bytes.load(Ordering::Relaxed),
            dropped_bytes: c.dropped_bytes.load(Ordering::Relaxed),
        }
    }

    /// Bytes written and not yet fsynced, what a cut now would drop.
    pub fn pending_bytes(&self) -> u64 {
        let states = self.shared.table.lock().all();
        states
            .into_iter()
            .map(|(_, s)| {
                let s = s.lock();
                if s.deleted {
                    0
                } else {
                    s.cache.pending_bytes()
                }
            })
            .sum()
    }

    /// Cuts the power: every write not fsynced is dropped, nothing more reaches the backing
    /// directory, and the disk is unmounted, with the kernel's cached pages of it. The
    /// processes using the mount should be gone first (killed: the point is that they had no
    /// chance to sync). When files are still open after a few seconds, the FUSE connection is
    /// aborted (every later request on them fails; needs the `fusectl` filesystem at
    /// `/sys/fs/fuse/connections`, as systemd mounts it) and the mount detached; the next
    /// mount at the same place is a fresh one.
    pub fn cut(mut self) -> io::Result<Stats> {
        self.shared.cut();
        self.unmount_now()?;
        Ok(self.stats())
    }

    /// A clean shutdown: every pending write is written and synced, then the disk is unmounted.
    pub fn unmount(mut self) -> io::Result<Stats> {
        self.shared.flush_all()?;
        self.unmount_now()?;
        Ok(self.stats())
    }

    /// Unmounts, or detaches the mount when its files stay open, and lets the filesystem's
    /// threads finish (at once, or when the last file of a detached mount closes).
    fn unmount_now(&mut self) -> io::Result<()> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        let deadline = Instant::now() + UNMOUNT_WAIT;
        loop {
            match nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::empty()) {
                // The kernel let go of the connection: the threads end, the session with them.
                // Their last read of the device may see the connection ended as aborted
                // (ECONNABORTED) rather than gone (ENODEV), depending on the moment: both are
                // the end of an unmounted filesystem.
                Ok(()) => {
                    return match session.join() {
                        Err(e)
                            if e.raw_os_error() == Some(nix::errno::Errno::ECONNABORTED as i32) =>
                        {
                            Ok(())
                        }
                        other => other,
                    }
                }
                // Files still open under the mount: their processes may be being reaped.
                // (Polled: the kernel offers nothing to wait on.)
                Err(nix::errno::Errno::EBUSY) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(nix::errno::Errno::EBUSY) => {
                    // Still open: fail every request on the connection from now on, so that
                    // nothing waits on the daemon again (a process exiting with a dirty shared
                    // mapping of a file here would wait for ever on its write-back once this
                    // process's threads are gone), then detach the mount.
                    let abort = Path::new("/sys/fs/fuse/connections")
                        .join(self.connection.to_string())
                        .join("abort");
                    let _ = std::fs::write(abort, b"1");
                    nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::MNT_DETACH)
                        .map_err(io::Error::from)?;
                    drop(session);
                    return Ok(());
                }
                // Not root: the setuid helper unmounts (lazily, whatever is open).
                Err(nix::errno::Errno::EPERM) => {
                    let status = Command::new("fusermount3")
                        .arg("-u")
                        .arg("-z")
                        .arg(&self.mountpoint)
                        .status()?;
                    if !status.success() {
                        return Err(io::Error::other(format!(
                            "fusermount3 -u {} failed",
                            self.mountpoint.display()
                        )));
                    }
                    drop(session);
                    return Ok(());
                }
                Err(e) => {
                    return Err(io::Error::other(format!(
                        "unmounting {}: {e}",
                        self.mountpoint.display()
                    )))
                }
            }
        }
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        if self.session.is_some() {
            let _ = self.shared.flush_all();
            let _ = self.unmount_now();
        }
    }
}
