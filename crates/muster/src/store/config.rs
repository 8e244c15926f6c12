//! The `[database]` section: the engines' connections, writers and migrations.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// Most writes committed together in one transaction (group commit), on SQLite and on each
    /// PostgreSQL writer connection.
    pub max_batch: usize,
    /// Writes waiting for a writer before callers wait too (backpressure); per writer connection
    /// on PostgreSQL.
    pub write_queue_size: usize,
    /// SQLite read connections used in parallel.
    pub read_connections: usize,
    /// How much of the SQLite database each read connection maps into memory, in MiB (0: off).
    pub sqlite_reader_mmap_mb: u64,
    /// PostgreSQL connections in the read pool (reads, and the rare writes that are not batched).
    pub pool_size: usize,
    /// PostgreSQL connections dedicated to group-commit writers. Writes are partitioned over
    /// them by key (an account's writes, a channel's messages always take the same one, so they
    /// keep their order). A node holds at most `pool_size + writer_connections` connections.
    pub writer_connections: usize,
    /// Apply pending migrations at start; when false, start refuses an out-of-date schema.
    pub migrate_on_start: bool,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            max_batch: 512,
            write_queue_size: 16 * 1024,
            read_connections: 4,
            sqlite_reader_mmap_mb: 0,
            pool_size: 16,
            writer_connections: 4,
            migrate_on_start: true,
        }
    }
}

/// Where the database is and how the engines use it: the parts of the configuration the store
/// reads (`database_url`, `data_dir` and the `[database]` section).
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// `postgres://...` for PostgreSQL; empty for SQLite in `data_dir`.
    pub url: String,
    pub data_dir: PathBuf,
    pub database: DatabaseConfig,
}
