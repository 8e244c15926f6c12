//! A clustered world's shard leases and their terms on PostgreSQL. A take, a renewal and a
//! release are each one transaction touching the lease row and its term together, so the terms
//! always say who held a shard when.

use async_trait::async_trait;
use deadpool_postgres::Pool;

use crate::store::postgres::{db_error, pool_error};
use crate::store::StoreError;
use crate::world::store::{ShardLease, ShardTerm, WorldLeaseStore};

/// The database's clock in Unix ms: lease expiries use it, never a node's.
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

pub struct PgWorldLeases {
    pool: Pool,
}

/// A clustered world's shard leases in `engine`'s database.
pub(crate) fn leases(
    engine: &crate::store::postgres::PostgresStore,
) -> std::sync::Arc<dyn crate::world::store::WorldLeaseStore> {
    std::sync::Arc::new(PgWorldLeases {
        pool: engine.pool.clone(),
    })
}

impl PgWorldLeases {
    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }
}

#[async_trait]
impl WorldLeaseStore for PgWorldLeases {
    async fn take_shard(
        &self,
        shard: i32,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let row = tx
            .query_opt(
                &format!(
                    "INSERT INTO world_shard_leases (shard, holder, epoch, expires_at_ms)
                     VALUES ($1, $2, 1, {NOW_MS} + $3)
                     ON CONFLICT (shard) DO UPDATE
                        SET holder = EXCLUDED.holder, epoch = world_shard_leases.epoch + 1,
                            expires_at_ms = EXCLUDED.expires_at_ms
                        WHERE world_shard_leases.expires_at_ms < {NOW_MS}
                     RETURNING epoch, expires_at_ms"
                ),
                &[&shard, &holder, &ttl_ms],
            )
            .await
            .map_err(db_error)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let (epoch, expires): (i64, i64) = (row.get(0), row.get(1));
        tx.execute(
            &format!(
                "INSERT INTO world_shard_terms (shard, epoch, holder, started_ms, expires_at_ms)
                 VALUES ($1, $2, $3, {NOW_MS}, $4)"
            ),
            &[&shard, &epoch, &holder, &expires],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(Some(epoch))
    }

    async fn renew_shard(
        &self,
        shard: i32,
        holder: &str,
        epoch: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let row = tx
            .query_opt(
                &format!(
                    "UPDATE world_shard_leases SET expires_at_ms = {NOW_MS} + $4
                     WHERE shard = $1 AND holder = $2 AND epoch = $3
                       AND expires_at_ms >= {NOW_MS}
                     RETURNING expires_at_ms"
                ),
                &[&shard, &holder, &epoch, &ttl_ms],
            )
            .await
            .map_err(db_error)?;
        let Some(row) = row else {
            return Ok(false);
        };
        let expires: i64 = row.get(0);
        tx.execute(
            "UPDATE world_shard_terms SET expires_at_ms = $3 WHERE shard = $1 AND epoch = $2",
            &[&shard, &epoch, &expires],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(true)
    }

    async fn release_shard(&self, shard: i32, holder: &str, epoch: i64) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let released = tx
            .execute(
                &format!(
                    "UPDATE world_shard_leases SET expires_at_ms = 0
                     WHERE shard = $1 AND holder = $2 AND epoch = $3
                       AND expires_at_ms >= {NOW_MS}"
                ),
                &[&shard, &holder, &epoch],
            )
            .await
            .map_err(db_error)?;
        if released == 1 {
            tx.execute(
                &format!(
                    "UPDATE world_shard_terms SET ended_ms = {NOW_MS}
                     WHERE shard = $1 AND epoch = $2"
                ),
                &[&shard, &epoch],
            )
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(())
    }

    async fn shard_leases(&self) -> Result<Vec<ShardLease>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT shard, holder, epoch, expires_at_ms >= {NOW_MS}
                     FROM world_shard_leases ORDER BY shard"
                ),
                &[],
            )
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|r| ShardLease {
                shard: r.get(0),
                holder: r.get(1),
                epoch: r.get(2),
                held: r.get(3),
            })
            .collect())
    }

    async fn shard_terms(&self, shard: i32) -> Result<Vec<ShardTerm>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT shard, epoch, holder, started_ms, expires_at_ms, ended_ms
                 FROM world_shard_terms WHERE shard = $1 ORDER BY epoch",
                &[&shard],
            )
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|r| ShardTerm {
                shard: r.get(0),
                epoch: r.get(1),
                holder: r.get(2),
                started_ms: r.get(3),
                expires_at_ms: r.get(4),
                ended_ms: r.get(5),
            })
            .collect())
    }

    async fn world_volume(&self, id: &str) -> Result<String, StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO world_volume (id) VALUES ($1) ON CONFLICT (one) DO NOTHING",
                &[&id],
            )
            .await
            .map_err(db_error)?;
        let row = client
            .query_one("SELECT id FROM world_volume", &[])
            .await
            .map_err(db_error)?;
        Ok(row.get(0))
    }
}
