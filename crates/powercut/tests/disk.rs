//! The power-cut disk mounted for real: what was fsynced survives a cut, what was not is gone,
//! reads before the cut see pending writes, and metadata (truncate, rename, unlink, owners)
//! goes straight to the backing directory. SQLite in WAL mode runs on it.
//!
//! Needs `/dev/fuse` and `fusermount3` (Debian's `fuse3`): the tests are ignored unless asked for
//! (`--include-ignored`, as `scripts/test` runs them), and fail when run without them.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use powercut::Disk;

/// A backing directory and a mountpoint of a test's own.
struct Place {
    _dir: tempfile::TempDir,
    backing: PathBuf,
    mnt: PathBuf,
}

impl Place {
    fn mount(&self) -> Disk {
        Disk::mount(&self.backing, &self.mnt).expect("mount the disk")
    }
}

/// A fresh place; the test fails when FUSE is not available here (these tests are ignored unless
/// asked for, as `scripts/test` does).
fn place() -> Place {
    assert!(
        Path::new("/dev/fuse").exists(),
        "this test needs FUSE: /dev/fuse is missing"
    );
    assert!(
        on_path("fusermount3"),
        "this test needs FUSE: fusermount3 is missing (Debian's fuse3)"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let backing = dir.path().join("backing");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&backing).expect("backing dir");
    std::fs::create_dir(&mnt).expect("mountpoint");
    Place {
        _dir: dir,
        backing,
        mnt,
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

#[test]
#[ignore = "needs FUSE"]
fn fsynced_data_survives_a_cut_and_the_rest_is_gone() {
    let place = place();
    let disk = place.mount();
    let mut file = File::create(place.mnt.join("log")).expect("create");
    file.write_all(b"first, synced").expect("write");
    file.sync_data().expect("fdatasync");
    file.write_all(b"; second, not").expect("write");
    // Reads and stat see the pending write, through the mount; the backing file does not hold
    // it yet.
    assert_eq!(
        std::fs::read(place.mnt.join("log")).expect("read"),
        b"first, synced; second, not"
    );
    assert_eq!(
        std::fs::metadata(place.mnt.join("log"))
            .expect("stat")
            .len(),
        26
    );
    assert_eq!(
        std::fs::read(place.backing.join("log")).expect("read backing"),
        b"first, synced"
    );
    assert_eq!(disk.pending_bytes(), 13);
    drop(file);
    // A file created and written, never synced: its name survives (metadata is durable in
    // this model), its bytes do not.
    std::fs::write(place.mnt.join("unsynced"), b"gone").expect("write");
    let stats = disk.cut().expect("cut");
    assert_eq!(stats.dropped_bytes, 13 + 4, "{stats:?}");
    assert_eq!(stats.fsyncs, 1, "{stats:?}");
    assert_eq!(stats.flushed_bytes, 13, "{stats:?}");

    let _disk = place.mount();
    assert_eq!(
        std::fs::read(place.mnt.join("log")).expect("read"),
        b"first, synced"
    );
    assert_eq!(
        std::fs::read(place.mnt.join("unsynced")).expect("read"),
        b""
    );
}

#[test]
#[ignore = "needs FUSE"]
fn overwrites_in_the_middle_and_o_dsync_writes() {
    let place = place();
    let disk = place.mount();
    let path = place.mnt.join("pages");
    let mut file = File::create(&path).expect("create");
    file.write_all(&vec![b'a'; 10_000]).expect("write");
    file.sync_all().expect("fsync");
    // An overwrite across a page boundary, pending.
    file.seek(SeekFrom::Start(4090)).expect("seek");
    file.write_all(&[b'b'; 20]).expect("write");
    let mut read = Vec::new();
    File::open(&path)
        .expect("open")
        .read_to_end(&mut read)
        .expect("read");
    assert_eq!(
        &read[4085..4115],
        [&[b'a'; 5][..], &[b'b'; 20], &[b'a'; 5]].concat()
    );
    // A descriptor opened with O_DSYNC writes through.
    let mut dsync = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DSYNC)
        .open(&path)
        .expect("open O_DSYNC");
    dsync.seek(SeekFrom::Start(9_000)).expect("seek");
    dsync.write_all(b"durable").expect("write");
    drop((file, dsync));
    disk.cut().expect("cut");

    let _disk = place.mount();
    let after = std::fs::read(&path).expect("read");
    assert_eq!(after.len(), 10_000);
    // The O_DSYNC write synced the file's pending pages with it, the overwrite included
    // (one file's cache is written whole, as fdatasync would).
    assert_eq!(&after[9_000..9_007], b"durable");
    assert_eq!(&after[4090..4110], &[b'b'; 20]);
}

#[test]
#[ignore = "needs FUSE"]
fn truncate_rename_and_unlink_go_straight_to_the_backing_directory() {
    let place = place();
    let disk = place.mount();
    let m = &place.mnt;
    // Truncation: durable at once; pending bytes past the new end are gone, those before stay
    // pending.
    let mut file = File::create(m.join("t")).expect("create");
    file.write_all(&[1u8; 8192]).expect("write");
    file.set_len(100).expect("truncate");
    assert_eq!(std::fs::metadata(m.join("t")).expect("stat").len(), 100);
    assert_eq!(
        std::fs::metadata(place.backing.join("t"))
            .expect("stat")
            .len(),
        100
    );
    assert_eq!(disk.pending_bytes(), 100);
    drop(file);
    // Rename: the name moves at once, the pending data moves with the file.
    std::fs::create_dir(m.join("dir")).expect("mkdir");
    std::fs::write(m.join("dir/a"), b"synced").expect("write");
    File::open(m.join("dir/a"))
        .expect("open")
        .sync_all()
        .expect("fsync");
    OpenOptions::new()
        .append(true)
        .open(m.join("dir/a"))
        .expect("open")
        .write_all(b" pending")
        .expect("append");
    std::fs::rename(m.join("dir"), m.join("moved")).expect("rename dir");
    std::fs::rename(m.join("moved/a"), m.join("moved/b")).expect("rename file");
    assert_eq!(
        std::fs::read(m.join("moved/b")).expect("read"),
        b"synced pending"
    );
    // A rename over an existing file replaces it.
    std::fs::write(m.join("victim"), b"old").expect("write");
    std::fs::rename(m.join("moved/b"), m.join("victim")).expect("rename over");
    assert_eq!(
        std::fs::read(m.join("victim")).expect("read"),
        b"synced pending"
    );
    // Unlink: gone at once; an open descriptor still reads the deleted file, pending bytes and
    // all.
    let mut keep = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.join("deleted"))
        .expect("create");
    keep.write_all(b"still here").expect("write");
    std::fs::remove_file(m.join("deleted")).expect("unlink");
    assert!(!m.join("deleted").exists());
    assert!(!place.backing.join("deleted").exists());
    let mut read = String::new();
    keep.seek(SeekFrom::Start(0)).expect("seek");
    keep.read_to_string(&mut read).expect("read");
    assert_eq!(read, "still here");
    drop(keep);
    // A hard link and a symbolic link.
    std::fs::hard_link(m.join("victim"), m.join("twin")).expect("link");
    std::os::unix::fs::symlink("victim", m.join("pointer")).expect("symlink");
    assert_eq!(
        std::fs::read(m.join("pointer")).expect("read"),
        b"synced pending"
    );
    let stats = disk.cut().expect("cut");
    // The 100 pending bytes of `t` and the 8 appended to `a` (now `victim`).
    assert_eq!(stats.dropped_bytes, 108, "{stats:?}");

    let _disk = place.mount();
    assert_eq!(std::fs::read(m.join("t")).expect("read"), vec![0u8; 100]);
    assert_eq!(std::fs::read(m.join("victim")).expect("read"), b"synced");
    assert_eq!(std::fs::read(m.join("twin")).expect("read"), b"synced");
    assert_eq!(std::fs::read(m.join("pointer")).expect("read"), b"synced");
    assert!(!m.join("moved/b").exists() && m.join("moved").is_dir());
    let mut names: Vec<String> = std::fs::read_dir(m)
        .expect("readdir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["moved", "pointer", "t", "twin", "victim"]);
}

#[test]
#[ignore = "needs FUSE"]
fn a_clean_unmount_flushes_everything() {
    let place = place();
    let disk = place.mount();
    std::fs::write(place.mnt.join("f"), b"kept").expect("write");
    let stats = disk.unmount().expect("unmount");
    assert_eq!(stats.dropped_bytes, 0);
    assert_eq!(
        std::fs::read(place.backing.join("f")).expect("read"),
        b"kept"
    );
}

#[test]
#[ignore = "needs FUSE and root"]
fn owners_and_modes_pass_through() {
    let place = place();
    assert!(is_root(), "this test needs root (chowning to the caller)");
    let disk = place.mount();
    std::fs::set_permissions(
        &place.mnt,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .expect("chmod");
    // A file created by another user is theirs, with the mode they asked for.
    let status = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .args([
            "sh",
            "-c",
            "umask 077 && echo hi > \"$0\"/theirs && mkdir \"$0\"/d",
        ])
        .arg(&place.mnt)
        .status()
        .expect("setpriv");
    assert!(status.success());
    let meta = std::fs::metadata(place.backing.join("theirs")).expect("stat");
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o777),
        (65534, 65534, 0o600)
    );
    let dir = std::fs::metadata(place.mnt.join("d")).expect("stat");
    assert_eq!((dir.uid(), dir.mode() & 0o777), (65534, 0o700));
    // And the kernel enforces them (default_permissions): another user cannot read it.
    let status = std::process::Command::new("setpriv")
        .args(["--reuid=1", "--regid=1", "--clear-groups", "--", "cat"])
        .arg(place.mnt.join("theirs"))
        .stderr(std::process::Stdio::null())
        .status()
        .expect("setpriv");
    assert!(!status.success());
    disk.cut().expect("cut");
}

/// The environment variable that makes [`sqlite_writer`] write to this database: the test
/// binary runs itself as the writer, so that the writer can be killed as a server is.
const SQLITE_CHILD: &str = "POWERCUT_TEST_SQLITE_DB";

/// In a child process only: commits 200 rows with `synchronous=FULL`, then 100 more with
/// `synchronous=OFF` (committed, never synced), says so and waits to be killed.
#[test]
fn sqlite_writer() {
    let Some(db) = std::env::var_os(SQLITE_CHILD) else {
        return;
    };
    let conn = rusqlite::Connection::open(&db).expect("open");
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .expect("WAL");
    assert_eq!(mode, "wal");
    conn.execute_batch("PRAGMA synchronous=FULL; CREATE TABLE t (n INTEGER)")
        .expect("schema");
    // A second connection shares the -shm index, mapped shared through the mount.
    let reader = rusqlite::Connection::open(&db).expect("open reader");
    for n in 0..200 {
        conn.execute("INSERT INTO t VALUES (?1)", [n])
            .expect("insert");
    }
    let seen: i64 = reader
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .expect("count");
    assert_eq!(seen, 200);
    conn.execute_batch("PRAGMA synchronous=OFF")
        .expect("pragma");
    for n in 200..300 {
        conn.execute("INSERT INTO t VALUES (?1)", [n])
            .expect("insert");
    }
    println!("writer ready");
    // Killed here, connections open: closing the last one would checkpoint and sync.
    let _ = std::io::stdin().read(&mut [0u8; 1]);
}

#[test]
#[ignore = "needs FUSE"]
fn sqlite_in_wal_mode_keeps_what_it_committed_and_loses_what_it_did_not_sync() {
    if std::env::var_os(SQLITE_CHILD).is_some() {
        return;
    }
    let place = place();
    let db = place.mnt.join("game.db");
    let disk = place.mount();
    let mut writer = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "sqlite_writer",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SQLITE_CHILD, &db)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run the writer");
    let stdout = writer.stdout.take().expect("stdout");
    let (said, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
        // libtest prints the test's name on the same line first.
        if lines
            .map_while(Result::ok)
            .any(|line| line.ends_with("writer ready"))
        {
            let _ = said.send(());
        }
    });
    let ready = ready
        .recv_timeout(std::time::Duration::from_secs(60))
        .is_ok();
    writer.kill().expect("SIGKILL");
    writer.wait().expect("reaped");
    assert!(ready, "the writer failed before it was ready");
    let stats = disk.cut().expect("cut");
    assert!(stats.dropped_bytes > 0, "{stats:?}");
    assert!(stats.fsyncs >= 200, "{stats:?}");

    let _disk = place.mount();
    let conn = rusqlite::Connection::open(&db).expect("open after the cut");
    let (count, max): (i64, i64) = conn
        .query_row("SELECT count(*), max(n) FROM t", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("count");
    assert_eq!((count, max), (200, 199));
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity");
    assert_eq!(check, "ok");
}
