//! A cluster's matchmaker tickets and its lease on PostgreSQL. Few statements and no batching:
//! a ticket is added, removed or matched once, and a pass runs once a `matchmaker.interval_ms`.
//! The pass is fenced by the lease row, locked (`FOR UPDATE`) for the whole transaction: a node
//! taking the lease over waits for a pass in flight to end, and a node that lost the lease
//! changes nothing.

use async_trait::async_trait;
use deadpool_postgres::Pool;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::matches::store::{MatchmakerStore, PickGroups, StoredTicket, TicketAdded};
use crate::store::postgres::{db_error, pool_error};
use crate::store::StoreError;

/// The database's clock in Unix ms: lease expiries use it, never a node's.
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

pub struct PgMatchmaker {
    pool: Pool,
}

/// The cluster's matchmaker tickets and lease in `engine`'s database.
pub(crate) fn matchmaker(
    engine: &crate::store::postgres::PostgresStore,
) -> std::sync::Arc<dyn crate::matches::store::MatchmakerStore> {
    std::sync::Arc::new(PgMatchmaker {
        pool: engine.pool.clone(),
    })
}

fn ticket(row: &Row) -> StoredTicket {
    StoredTicket {
        id: row.get(0),
        session_id: row.get(1),
        node: row.get(2),
        incarnation: row.get(3),
        created_ms: row.get(4),
        body: row.get(5),
        user_id: row.get(6),
    }
}

impl PgMatchmaker {
    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }
}

#[async_trait]
impl MatchmakerStore for PgMatchmaker {
    async fn add_ticket(
        &self,
        ticket: StoredTicket,
        max_per_session: i64,
        max_per_user: i64,
    ) -> Result<TicketAdded, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // One user's adds queue behind each other (whatever node they come through), so each
        // counts what the previous one added.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7))",
            &[&ticket.user_id.to_string()],
        )
        .await
        .map_err(db_error)?;
        let row = tx
            .query_one(
                "SELECT (SELECT count(*) FROM matchmaker_tickets WHERE session_id = $1),
                        (SELECT count(*) FROM matchmaker_tickets WHERE user_id = $2)",
                &[&ticket.session_id, &ticket.user_id],
            )
            .await
            .map_err(db_error)?;
        let (session, user): (i64, i64) = (row.get(0), row.get(1));
        if session >= max_per_session {
            return Ok(TicketAdded::SessionFull);
        }
        if user >= max_per_user {
            return Ok(TicketAdded::UserFull);
        }
        tx.execute(
            "INSERT INTO matchmaker_tickets
                 (id, session_id, user_id, node, incarnation, created_ms, body)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &ticket.id,
                &ticket.session_id,
                &ticket.user_id,
                &ticket.node,
                &ticket.incarnation,
                &ticket.created_ms,
                &ticket.body,
            ],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(TicketAdded::Added)
    }

    async fn remove_ticket(&self, session: Uuid, ticket: Uuid) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let removed = client
            .execute(
                "DELETE FROM matchmaker_tickets WHERE id = $1 AND session_id = $2",
                &[&ticket, &session],
            )
            .await
            .map_err(db_error)?;
        Ok(removed == 1)
    }

    async fn remove_session_tickets(&self, session: Uuid) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM matchmaker_tickets WHERE session_id = $1",
                &[&session],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn remove_node_tickets(
        &self,
        node: &str,
        keep_incarnation: i64,
    ) -> Result<u64, StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM matchmaker_tickets WHERE node = $1 AND incarnation <> $2",
                &[&node, &keep_incarnation],
            )
            .await
            .map_err(db_error)
    }

    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                &format!(
                    "INSERT INTO cluster_leases (name, holder, epoch, expires_at_ms)
                     VALUES ($1, $2, 1, {NOW_MS} + $3)
                     ON CONFLICT (name) DO UPDATE
                        SET holder = EXCLUDED.holder, epoch = cluster_leases.epoch + 1,
                            expires_at_ms = EXCLUDED.expires_at_ms
                        WHERE cluster_leases.expires_at_ms < {NOW_MS}
                           OR cluster_leases.holder = EXCLUDED.holder
                     RETURNING epoch"
                ),
                &[&name, &holder, &ttl_ms],
            )
            .await
            .map_err(db_error)?;
        Ok(row.map(|r| r.get(0)))
    }

    async fn take_groups(
        &self,
        name: &str,
        holder: &str,
        epoch: i64,
        ttl_ms: i64,
        pick: &PickGroups<'_>,
    ) -> Result<Option<Vec<Vec<StoredTicket>>>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let held = tx
            .query_opt(
                &format!(
                    "UPDATE cluster_leases SET expires_at_ms = {NOW_MS} + $4
                     WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at_ms >= {NOW_MS}
                     RETURNING epoch"
                ),
                &[&name, &holder, &epoch, &ttl_ms],
            )
            .await
            .map_err(db_error)?;
        if held.is_none() {
            return Ok(None);
        }
        let rows = tx
            .query(
                "SELECT id, session_id, node, incarnation, created_ms, body, user_id
                 FROM matchmaker_tickets ORDER BY created_ms, id",
                &[],
            )
            .await
            .map_err(db_error)?;
        let groups = pick(rows.iter().map(ticket).collect());
        let taken: Vec<Uuid> = groups.iter().flatten().map(|t| t.id).collect();
        if !taken.is_empty() {
            tx.execute(
                "DELETE FROM matchmaker_tickets WHERE id = ANY($1)",
                &[&taken],
            )
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(Some(groups))
    }
}
