//! A clustered world's shard leases and their terms in a shared database ([`WorldLeaseStore`]).

use async_trait::async_trait;

use crate::store::StoreError;

/// A shard's lease as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLease {
    pub shard: i32,
    pub holder: String,
    pub epoch: i64,
    /// Whether it is held now (not expired, not released), by the database's clock.
    pub held: bool,
}

/// One term of a shard: `holder` ran it at `epoch` from `started_ms` until its release
/// (`ended_ms`) or, without one, its lease's last expiry (the database's clock, Unix ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardTerm {
    pub shard: i32,
    pub epoch: i64,
    pub holder: String,
    pub started_ms: i64,
    pub expires_at_ms: i64,
    pub ended_ms: Option<i64>,
}

/// The leases saying which node runs each shard of a clustered world, and their terms.
#[async_trait]
pub trait WorldLeaseStore: Send + Sync {
    /// Takes shard `shard`'s lease for `holder` for `ttl_ms` if it is free (never held,
    /// expired or released); its new epoch, or `None` when it is held.
    async fn take_shard(
        &self,
        shard: i32,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Option<i64>, StoreError>;

    /// Extends `holder`'s lease of `shard` at `epoch` by `ttl_ms` from now; false when it was
    /// lost (expired or taken): the holder must stop at once.
    async fn renew_shard(
        &self,
        shard: i32,
        holder: &str,
        epoch: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Gives the lease up (its term ends now): another node may take the shard at once.
    async fn release_shard(&self, shard: i32, holder: &str, epoch: i64) -> Result<(), StoreError>;

    /// Every shard's lease.
    async fn shard_leases(&self) -> Result<Vec<ShardLease>, StoreError>;

    /// Shard `shard`'s terms, oldest first.
    async fn shard_terms(&self, shard: i32) -> Result<Vec<ShardTerm>, StoreError>;

    /// The world's volume id: `id` when none is recorded yet (then it is recorded), else the
    /// one recorded.
    async fn world_volume(&self, id: &str) -> Result<String, StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] =
    &[crate::migration!(20, "world_leases", "0020_world_leases")];
