//! Folds SQLite's write-ahead log into the database file off the writer's path.
//!
//! By default SQLite checkpoints inside the commit that pushes the WAL past 1,000 pages: the
//! committing thread copies those pages into the database file and fsyncs it before it returns.
//! With one writer thread serving every caller, that stalls every write queued behind it
//! (measured: under 10,000 wallet writes/s that happened ~20 times a second, and p95 latency was
//! 50 ms). So the writer turns automatic checkpoints off and this thread does them instead, on
//! its own connection: `PASSIVE` checkpoints, which copy what they can without ever blocking the
//! writer, every [`PERIOD`]. Under constant writes the WAL never stops growing, because SQLite
//! only rewinds it when a write begins at a moment everything has been copied. So past
//! [`RESTART_FRAMES`] frames this thread asks the writer (through [`Rewind`]) to rewind it: the
//! writer, between two group commits, runs a `PASSIVE` checkpoint itself, which copies the few
//! frames appended since this thread's pass; with no writer running meanwhile, that leaves
//! everything copied, so SQLite starts the WAL over at the writer's next transaction (unless a
//! reader still holds an old snapshot; then a later request tries again). Two designs that
//! stalled the writer were measured and dropped: a `RESTART` checkpoint from this thread must win
//! the write lock from a writer that holds it almost all the time, and SQLite's busy handler
//! polls with sleeps, so it starved for seconds and then stalled the writer in turn (2-4 s stalls
//! at 20,000 writes/s); a `RESTART` run by the writer waits for readers through that same busy
//! handler, and stalled every write 30-40 ms twice a second at 20,000 writes/s (p95 35 ms). A
//! `PASSIVE` checkpoint never waits.
//!
//! Durability does not depend on checkpoints: a commit is durable once its WAL frames are
//! fsynced (`synchronous=FULL`); a crash before a checkpoint replays the WAL at the next open.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use rusqlite::Connection;

/// How often the WAL is folded into the database file.
pub const PERIOD: Duration = Duration::from_millis(250);

/// WAL frames (pages) past which the writer is asked to rewind the log: 256 MiB of 4 KiB pages.
/// Each rewind stalls the writer for its pass (a few ms), so it should be rare: at 20,000
/// writes/s the WAL grows ~100 MiB/s, so this rewinds every ~2.5 s. The WAL file keeps this size
/// on disk while the server runs (it is reused, not truncated) and is truncated at shutdown.
pub const RESTART_FRAMES: i64 = 64 * 1024;

/// New frames since the previous pass below which the checkpointer stops catching up and asks
/// the writer to rewind: ~2 MiB, a pass of a few ms.
const CAUGHT_UP_FRAMES: i64 = 512;

/// Whether the writer should rewind the WAL at its next chance; while it is set, the
/// checkpointer leaves the WAL alone so the two never wait for each other.
#[derive(Default)]
pub struct Rewind {
    wanted: AtomicBool,
}

impl Rewind {
    /// Called by the writer between transactions: if asked to, copies what is left of the WAL
    /// so the next transaction rewinds it.
    pub fn if_wanted(&self, conn: &Connection) {
        if !self.wanted.load(Ordering::Acquire) {
            return;
        }
        // With this connection the only writer, a passive pass copies every frame, and the
        // next transaction then starts the WAL over.
        if let Err(error) = checkpoint(conn, "PASSIVE") {
            tracing::warn!(%error, "WAL rewind checkpoint failed");
        }
        self.wanted.store(false, Ordering::Release);
    }
}

/// Runs until `stop` is dropped (or sends), checkpointing `path` every [`PERIOD`].
pub fn run(
    path: PathBuf,
    stop: Receiver<()>,
    rewind: &Rewind,
    open: fn(&std::path::Path) -> rusqlite::Result<Connection>,
) {
    let conn = match open(&path) {
        Ok(conn) => conn,
        Err(error) => {
            tracing::error!(%error, "checkpointer cannot open the database; the WAL will grow until restart");
            return;
        }
    };
    loop {
        match stop.recv_timeout(PERIOD) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        if rewind.wanted.load(Ordering::Acquire) {
            continue;
        }
        match checkpoint(&conn, "PASSIVE") {
            Ok(frames) if frames > RESTART_FRAMES => {
                catch_up(&conn, frames);
                rewind.wanted.store(true, Ordering::Release);
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "passive WAL checkpoint failed"),
        }
    }
}

/// Passes again, right away, until a pass finds at most [`CAUGHT_UP_FRAMES`] new frames (or
/// after a few passes), so that the writer's own pass, which every write waits for, has little
/// left to copy and fsync.
fn catch_up(conn: &Connection, mut frames: i64) {
    for _ in 0..4 {
        match checkpoint(conn, "PASSIVE") {
            Ok(now) if now - frames > CAUGHT_UP_FRAMES => frames = now,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(%error, "passive WAL checkpoint failed");
                return;
            }
        }
    }
}

/// Runs one checkpoint; returns the WAL's length in frames before it.
fn checkpoint(conn: &Connection, mode: &str) -> rusqlite::Result<i64> {
    let started = std::time::Instant::now();
    let (busy, frames, copied) =
        conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
            ))
        })?;
    tracing::debug!(
        mode,
        busy,
        frames,
        copied,
        ms = started.elapsed().as_millis() as u64,
        "checkpoint"
    );
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &std::path::Path) -> Connection {
        let conn = Connection::open(path).expect("open");
        conn.pragma_update(None, "journal_mode", "WAL")
            .expect("wal");
        conn
    }

    /// Appends `rows` rows of 1 KiB in one transaction.
    fn write(conn: &Connection, rows: usize) {
        conn.execute_batch("BEGIN").expect("begin");
        for _ in 0..rows {
            conn.execute("INSERT INTO t (v) VALUES (randomblob(1024))", [])
                .expect("insert");
        }
        conn.execute_batch("COMMIT").expect("commit");
    }

    fn file_len(path: &std::path::Path) -> u64 {
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
    }

    #[test]
    fn the_writer_folds_the_wal_back_only_when_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db.sqlite3");
        let writer = open(&path);
        writer
            .pragma_update(None, "wal_autocheckpoint", 0)
            .expect("autocheckpoint off");
        writer
            .execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
            .expect("create");
        write(&writer, 400);
        // With automatic checkpoints off, the rows are only in the WAL.
        assert!(file_len(&path) < 64 * 1024, "{}", file_len(&path));

        // Not asked: the writer leaves the WAL alone.
        let rewind = Rewind::default();
        rewind.if_wanted(&writer);
        assert!(file_len(&path) < 64 * 1024, "{}", file_len(&path));

        // Asked, between transactions: everything is copied into the database file, and the
        // request is cleared.
        rewind.wanted.store(true, Ordering::Release);
        rewind.if_wanted(&writer);
        assert!(
            !rewind.wanted.load(Ordering::Acquire),
            "the request is cleared"
        );
        assert!(file_len(&path) > 400 * 1024, "{}", file_len(&path));
        // ...and the WAL starts over at the next write.
        write(&writer, 1);
        let reader = open(&path);
        let frames = checkpoint(&reader, "PASSIVE").expect("passive");
        assert!(frames < 20, "the WAL was rewound: {frames} frames");
        let rows: i64 = reader
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .expect("count");
        assert_eq!(rows, 401, "no write is lost by checkpoints");
    }
}
