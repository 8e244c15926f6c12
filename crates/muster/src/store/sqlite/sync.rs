//! Makes the writer's group commits durable off its path.
//!
//! The writer commits with `synchronous=NORMAL`: COMMIT writes the batch's WAL frames and
//! returns without an fsync. It hands the batch's callers to this thread, which fdatasyncs the
//! WAL file and only then answers them. Meanwhile the writer is already running the next batch,
//! so the fsync (a few hundred microseconds that the writer used to sit out for every batch)
//! overlaps useful work, and one fsync covers every batch committed while the previous one ran.
//!
//! An answered write is exactly as durable as with `synchronous=FULL`: fdatasync on any
//! descriptor of the WAL file flushes every frame written before it, and SQLite itself syncs the
//! WAL before a checkpoint copies frames into the database file. What differs is visibility:
//! other connections can read a batch for the fraction of a millisecond between its COMMIT and
//! its fsync (a power cut in that window loses writes a reader saw but no writer was told of).

use std::fs::File;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::store::StoreError;

/// Called with the outcome of the batch's COMMIT, once it is durable (or failed).
pub type Completion = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// Committed batches waiting for their fsync before the writer blocks: the writer runs at most
/// this far ahead of the disk.
const MAX_UNSYNCED_BATCHES: usize = 64;

/// One committed (or failed) batch and its callers.
struct Committed {
    outcome: Result<(), StoreError>,
    completions: Vec<Completion>,
}

pub struct WalSyncer {
    batches: SyncSender<Committed>,
    thread: JoinHandle<()>,
}

impl WalSyncer {
    /// Starts the thread for the database at `db_path`. Its WAL, `<db_path>-wal`, exists while
    /// any connection is open, and the writer's stays open longer than this thread runs, so
    /// SQLite neither deletes nor replaces the file this descriptor syncs.
    pub fn start(db_path: &Path) -> std::io::Result<WalSyncer> {
        let mut wal_path = db_path.as_os_str().to_owned();
        wal_path.push("-wal");
        let wal = File::open(wal_path)?;
        let (batches, queue) = sync_channel(MAX_UNSYNCED_BATCHES);
        let thread = std::thread::Builder::new()
            .name("muster-sqlite-sync".into())
            .spawn(move || sync_loop(wal, queue))?;
        Ok(WalSyncer { batches, thread })
    }

    /// Hands over a batch the writer has just committed (or failed to): its callers are
    /// answered once the WAL is on disk.
    pub fn committed(&self, outcome: Result<(), StoreError>, completions: Vec<Completion>) {
        let batch = Committed {
            outcome,
            completions,
        };
        if let Err(unsent) = self.batches.send(batch) {
            // The thread is gone (it only ends when this sender is dropped): never leave a
            // caller waiting.
            let batch = unsent.0;
            for completion in batch.completions {
                completion(Err(StoreError::Closed));
            }
        }
    }

    /// Answers every batch handed over so far, then stops the thread.
    pub fn finish(self) {
        drop(self.batches);
        let _ = self.thread.join();
    }
}

fn sync_loop(wal: File, queue: Receiver<Committed>) {
    let mut waiting: Vec<Committed> = Vec::new();
    // After a failed fsync the kernel may have dropped the dirty pages it could not write, so
    // no later fsync proves that earlier frames are on disk: from then on nothing is
    // acknowledged (as PostgreSQL does), and the server must be restarted to recover from the WAL.
    let mut synced: Result<(), StoreError> = Ok(());
    while let Ok(first) = queue.recv() {
        waiting.push(first);
        waiting.extend(queue.try_iter());
        if synced.is_ok() && waiting.iter().any(|batch| batch.outcome.is_ok()) {
            if let Err(error) = wal.sync_data() {
                tracing::error!(%error, "fsync of the WAL failed; no write is acknowledged until the server restarts");
                synced = Err(StoreError::Database(format!(
                    "the write-ahead log could not be made durable ({error}); restart the server"
                )));
            }
        }
        for batch in waiting.drain(..) {
            let outcome = batch.outcome.and(synced.clone());
            for completion in batch.completions {
                completion(outcome.clone());
            }
        }
    }
}
