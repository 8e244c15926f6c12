//! A disk whose power a test can cut: a FUSE passthrough filesystem over a backing directory
//! that holds every write in memory until it is fsynced, as a disk with a volatile write
//! cache does (the idea of Jepsen's LazyFS, in Rust on `fuser`).
//!
//! `kill -9` of a server proves little about durability: the kernel's page cache survives the
//! process, so a write the server never synced is still read back after the restart. On a
//! [`Disk`] such a write is gone after [`Disk::cut`]:
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use std::io::Write;
//! let (backing, mnt) = (std::path::Path::new("/tmp/b"), std::path::Path::new("/tmp/m"));
//! let disk = powercut::Disk::mount(backing, mnt)?;
//! let mut file = std::fs::File::create(mnt.join("log"))?;
//! file.write_all(b"synced")?;
//! file.sync_data()?;
//! file.write_all(b" and not")?;
//! drop(file);
//! let stats = disk.cut()?; // the power cut: 8 bytes dropped
//! assert_eq!(stats.dropped_bytes, 8);
//! let _disk = powercut::Disk::mount(backing, mnt)?; // the machine comes back
//! assert_eq!(std::fs::read(mnt.join("log"))?, b"synced");
//! # Ok(())
//! # }
//! ```
//!
//! # The model
//!
//! - File data: a `write` is held in memory, page by page, per file; reads and
//!   `stat` see it. `fsync` or `fdatasync` of a file writes that file's pending pages to the
//!   backing file and syncs it; a write through a descriptor opened with `O_SYNC` or
//!   `O_DSYNC` does the same at once. Closing a file syncs nothing.
//! - Metadata: creating, deleting, renaming and linking files, directories, symbolic links
//!   and device nodes, truncating, and changing modes, owners and times go straight to the
//!   backing directory and survive a cut. `fsync` of a directory is therefore a no-op (it is
//!   counted). **This is the model's limit**: a program that forgets to fsync a directory
//!   after creating or renaming a file in it is not caught, nor is one that relies on a
//!   rename being ordered after the data it renames (a real file system may reorder them).
//!   Nor are torn writes modelled: a write is kept or dropped whole, page by page.
//! - The power cut ([`Disk::cut`]): every pending write is dropped, every later request that
//!   would change the disk fails with `EIO`, and the mount is torn down, so the kernel's page
//!   cache of it goes too. Mounting the backing directory again is the restart.
//!
//! # What runs on it
//!
//! - SQLite in WAL mode: its `-shm` index is mapped shared (`mmap`), which FUSE supports when
//!   files are not opened in direct-I/O mode (they are not here): the kernel sends the dirty
//!   pages of the mapping as writes, which are pending like any other. The index is not
//!   durable data — SQLite rebuilds it from the WAL when it finds it stale after a crash —
//!   so losing it at a cut is what a real power cut does. Byte-range locks (`fcntl`) are left
//!   to the kernel, which keeps them locally for a filesystem that does not implement them:
//!   right for processes of one machine.
//! - PostgreSQL (`initdb`, `fsync=on`, recovery after a cut): files are created and owned as
//!   the caller (the daemon, root, chowns them), modes pass through, and the mount allows
//!   other users, so a server running as `postgres` finds its data directory as it left it.
//!
//! # Requirements
//!
//! Linux with `/dev/fuse`. As root the disk mounts with `mount(2)` directly; otherwise through
//! `fusermount3` (Debian's `fuse3`), which needs `user_allow_other` in `/etc/fuse.conf` for
//! `allow_other`.

mod cache;
mod disk;
mod fs;
mod nodes;
mod shared;

pub use disk::{Disk, Stats};
