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
//! writer, between two group commits, runs a `RESTART` checkpoint, which copies the few frames
//! the last passive pass missed and starts the WAL over. Asking the writer rather than doing it
//! here matters: a `RESTART` from this thread must win the write lock from a writer that holds it
//! almost all the time, and SQLite's busy handler polls with sleeps, so it starved for seconds and
//! then stalled the writer in turn (measured: 2-4 s stalls at 20,000 writes/s).
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

/// WAL frames (pages) past which a `RESTART` checkpoint rewinds the log: 64 MiB of 4 KiB pages.
pub const RESTART_FRAMES: i64 = 16 * 1024;

/// Whether the writer should rewind the WAL at its next chance; while it is set, the
/// checkpointer leaves the WAL alone so the two never wait for each other.
#[derive(Default)]
pub struct Rewind {
    wanted: AtomicBool,
}

impl Rewind {
    /// Called by the writer between transactions: rewinds the WAL if asked to.
    pub fn if_wanted(&self, conn: &Connection) {
        if !self.wanted.load(Ordering::Acquire) {
            return;
        }
        if let Err(error) = checkpoint(conn, "RESTART") {
            tracing::warn!(%error, "WAL restart checkpoint failed");
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
            Ok(frames) if frames > RESTART_FRAMES => rewind.wanted.store(true, Ordering::Release),
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "passive WAL checkpoint failed"),
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
