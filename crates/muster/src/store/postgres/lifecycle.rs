//! An account's credentials after creation (link, unlink), other players' views of it, and its
//! deletion, on PostgreSQL. These are rare calls: each is its own transaction on the pool, not a
//! batched write; a change locks the account's row first, so two unlinks of one account cannot
//! both pass the "not the last credential" check.

use tokio_postgres::Row;
use uuid::Uuid;

use super::{db_error, prepared, PostgresStore};
use crate::store::{AccountRecord, Credential, StoreError};

/// Locks the account's row for the rest of `tx`; `NotFound` when there is none.
async fn lock_account(tx: &deadpool_postgres::Transaction<'_>, id: Uuid) -> Result<(), StoreError> {
    let found = tx
        .query_opt("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", &[&id])
        .await
        .map_err(db_error)?;
    found.map(drop).ok_or(StoreError::NotFound)
}

impl PostgresStore {
    pub(super) async fn link_credential(
        &self,
        user_id: Uuid,
        credential: Credential,
        password_hash: Option<String>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        lock_account(&tx, user_id).await?;
        match &credential {
            Credential::Device(device) => {
                let owner = tx
                    .query_opt("SELECT user_id FROM user_devices WHERE id = $1", &[device])
                    .await
                    .map_err(db_error)?
                    .map(|row| row.get::<_, Uuid>(0));
                match owner {
                    Some(owner) if owner == user_id => {}
                    Some(_) => return Err(StoreError::CredentialTaken),
                    None => {
                        tx.execute(
                            "INSERT INTO user_devices (id, user_id) VALUES ($1, $2)",
                            &[device, &user_id],
                        )
                        .await
                        .map_err(db_error)?;
                    }
                }
                tx.execute(
                    "UPDATE users SET update_time_ms = $2 WHERE id = $1",
                    &[&user_id, &now_ms],
                )
                .await
                .map_err(db_error)?;
            }
            Credential::Custom(custom) => {
                tx.execute(
                    "UPDATE users SET custom_id = $2, update_time_ms = $3 WHERE id = $1",
                    &[&user_id, custom, &now_ms],
                )
                .await
                .map_err(db_error)?;
            }
            Credential::Email(email) => {
                tx.execute(
                    "UPDATE users SET email = $2, password_hash = $3, update_time_ms = $4 WHERE id = $1",
                    &[&user_id, email, &password_hash, &now_ms],
                )
                .await
                .map_err(db_error)?;
            }
        }
        tx.commit().await.map_err(db_error)
    }

    pub(super) async fn unlink_credential(
        &self,
        user_id: Uuid,
        credential: Credential,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // The lock first, then the count in a statement of its own: it sees what a concurrent
        // unlink of the same account committed while this one waited for the lock.
        match lock_account(&tx, user_id).await {
            Err(StoreError::NotFound) => return Ok(false),
            other => other?,
        }
        let count = tx
            .query_opt(
                "SELECT (SELECT COUNT(*) FROM user_devices WHERE user_id = $1)
                      + (custom_id IS NOT NULL)::int + (email IS NOT NULL)::int
                 FROM users WHERE id = $1",
                &[&user_id],
            )
            .await
            .map_err(db_error)?
            .map_or(0, |row| row.get::<_, i64>(0));
        if count < 2 {
            return Ok(false);
        }
        let changed = match &credential {
            Credential::Device(device) => {
                tx.execute(
                    "DELETE FROM user_devices WHERE id = $1 AND user_id = $2",
                    &[device, &user_id],
                )
                .await
            }
            Credential::Custom(custom) => {
                tx.execute(
                    "UPDATE users SET custom_id = NULL, update_time_ms = $3
                     WHERE id = $1 AND custom_id IS NOT NULL AND ($2 = '' OR custom_id = $2)",
                    &[&user_id, custom, &now_ms],
                )
                .await
            }
            Credential::Email(email) => {
                tx.execute(
                    "UPDATE users SET email = NULL, password_hash = NULL, update_time_ms = $3
                     WHERE id = $1 AND email IS NOT NULL AND ($2 = '' OR email = $2)",
                    &[&user_id, email, &now_ms],
                )
                .await
            }
        }
        .map_err(db_error)?;
        if changed > 0 && matches!(credential, Credential::Device(_)) {
            tx.execute(
                "UPDATE users SET update_time_ms = $2 WHERE id = $1",
                &[&user_id, &now_ms],
            )
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(changed > 0)
    }

    pub(super) async fn users_by(
        &self,
        ids: Vec<Uuid>,
        usernames: Vec<String>,
    ) -> Result<Vec<AccountRecord>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "SELECT id, username, display_name, avatar_url, lang_tag, location, timezone,
                    metadata, disable_time_ms, create_time_ms, update_time_ms
             FROM users WHERE id = ANY($1) OR username = ANY($2)",
        )
        .await?;
        let rows = client
            .query(&statement, &[&ids, &usernames])
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(user_from).collect())
    }

    pub(super) async fn delete_user(&self, user_id: Uuid, now_ms: i64) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // The groups the account was a member of count one member fewer (and go when it was
        // their last member); its memberships go with it (ON DELETE CASCADE).
        tx.execute(
            "UPDATE groups SET edge_count = edge_count - 1 WHERE id IN
                 (SELECT group_id FROM group_members WHERE user_id = $1 AND state <= 2)",
            &[&user_id],
        )
        .await
        .map_err(db_error)?;
        tx.execute("DELETE FROM groups WHERE edge_count <= 0", &[])
            .await
            .map_err(db_error)?;
        // Devices and the economy's rows go with the account (foreign keys, ON DELETE CASCADE).
        if tx
            .execute("DELETE FROM users WHERE id = $1", &[&user_id])
            .await
            .map_err(db_error)?
            == 0
        {
            return Ok(false);
        }
        for sql in [
            "DELETE FROM storage WHERE user_id = $1",
            "DELETE FROM leaderboard_records WHERE owner_id = $1",
        ] {
            tx.execute(sql, &[&user_id]).await.map_err(db_error)?;
        }
        tx.execute(
            "INSERT INTO deleted_users (user_id, delete_time_ms) VALUES ($1, $2)
             ON CONFLICT (user_id) DO UPDATE SET delete_time_ms = EXCLUDED.delete_time_ms",
            &[&user_id, &now_ms],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(true)
    }
}

/// The account of a row whose first columns are an account's public ones, in this order: id,
/// username, display_name, avatar_url, lang_tag, location, timezone, metadata, disable_time_ms,
/// create_time_ms, update_time_ms.
pub(super) fn user_from(row: &Row) -> AccountRecord {
    AccountRecord {
        id: row.get(0),
        username: row.get(1),
        display_name: row.get(2),
        avatar_url: row.get(3),
        lang_tag: row.get(4),
        location: row.get(5),
        timezone: row.get(6),
        metadata: row.get(7),
        disable_time_ms: row.get(8),
        create_time_ms: row.get(9),
        update_time_ms: row.get(10),
        ..AccountRecord::default()
    }
}
