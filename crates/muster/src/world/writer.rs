//! A shard's checkpoint writer.

use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use muster_world::checkpoint::Snapshot;

use super::fence::Fence;
use super::metrics::WorldMetrics;

/// A shard's checkpoint writer: a thread that writes the snapshot it is given and gives it
/// back for reuse (one write in flight at a time: the shard has one snapshot).
pub(super) struct Writer {
    to_write: Option<mpsc::Sender<Snapshot>>,
    written: mpsc::Receiver<(Snapshot, Result<u64, String>, Duration)>,
    thread: Option<std::thread::JoinHandle<()>>,
    metrics: Arc<WorldMetrics>,
    /// The shard's label in metrics.
    shard: String,
}

impl Writer {
    /// A writer of `path`; a snapshot handed to it once `fence` no longer holds is not written
    /// (another node may run the shard by then).
    pub(super) fn start(
        path: PathBuf,
        shard: u32,
        metrics: Arc<WorldMetrics>,
        fence: Arc<Fence>,
    ) -> Writer {
        // The checkpoint a restart restored from was written when its file was.
        let written_at = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        if let Some(at) = written_at {
            metrics
                .last_checkpoint
                .with_label_values(&[&shard.to_string()])
                .set(at.as_secs() as i64);
        }
        let (to_write, inbox) = mpsc::channel::<Snapshot>();
        let (done, written) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("world-writer-{shard}"))
            .spawn(move || {
                for snapshot in inbox {
                    let started = Instant::now();
                    let result = if fence.holds() {
                        snapshot.write(&path).map_err(|e| e.to_string())
                    } else {
                        Err("the shard's lease ended: another node may run it".into())
                    };
                    if done.send((snapshot, result, started.elapsed())).is_err() {
                        return;
                    }
                }
            })
            .expect("spawn a world checkpoint writer");
        Writer {
            to_write: Some(to_write),
            written,
            thread: Some(thread),
            metrics,
            shard: shard.to_string(),
        }
    }

    pub(super) fn write(&self, snapshot: Snapshot) {
        if let Some(tx) = &self.to_write {
            let _ = tx.send(snapshot);
        }
    }

    /// The snapshot back, and whether it was written, if its write has finished (no waiting).
    pub(super) fn poll(&self) -> Option<(Snapshot, bool)> {
        self.written.try_recv().ok().map(|r| self.record(r))
    }

    /// Waits for the write in flight and gives its snapshot back, and whether it was written.
    pub(super) fn wait(&self) -> Option<(Snapshot, bool)> {
        self.written.recv().ok().map(|r| self.record(r))
    }

    fn record(
        &self,
        (snapshot, result, took): (Snapshot, Result<u64, String>, Duration),
    ) -> (Snapshot, bool) {
        let ok = match result {
            Ok(bytes) => {
                self.metrics.checkpoint_bytes.set(bytes as i64);
                self.metrics.checkpoint_seconds.observe(took.as_secs_f64());
                self.metrics.checkpoints.with_label_values(&["ok"]).inc();
                self.metrics
                    .last_checkpoint
                    .with_label_values(&[&self.shard])
                    .set(crate::base::clock::now_secs());
                true
            }
            Err(why) => {
                tracing::error!(%why, "world: checkpoint failed; the previous one is intact");
                self.metrics
                    .checkpoints
                    .with_label_values(&["failed"])
                    .inc();
                false
            }
        };
        (snapshot, ok)
    }

    /// Stops the thread once what was sent is written.
    pub(super) fn finish(mut self) {
        self.to_write.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
