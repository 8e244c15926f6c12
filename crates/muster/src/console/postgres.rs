//! The console's users, sessions and audit log on PostgreSQL: few and rare writes, each its own
//! statement on a pooled connection (no batching needed).

use async_trait::async_trait;
use tokio_postgres::Row;

use crate::accounts::postgres::user_from;
use crate::accounts::store::AccountRecord;
use crate::console::store::{AuditRow, ConsoleSessionRow, ConsoleStore, ConsoleUserRow};
use crate::store::postgres::{db_error, prepared, PostgresStore};
use crate::store::StoreError;

const USER_COLUMNS: &str = "id, username, display_name, avatar_url, lang_tag, location, \
                            timezone, metadata, disable_time_ms, create_time_ms, update_time_ms";

fn user(row: &Row) -> ConsoleUserRow {
    ConsoleUserRow {
        username: row.get(0),
        password_hash: row.get(1),
        role: row.get(2),
        create_time_ms: row.get(3),
    }
}

fn audit(row: &Row) -> AuditRow {
    AuditRow {
        id: row.get(0),
        time_ms: row.get(1),
        username: row.get(2),
        action: row.get(3),
        target: row.get(4),
        detail: row.get(5),
    }
}

#[async_trait]
impl ConsoleStore for PostgresStore {
    async fn put_console_user(&self, row: ConsoleUserRow) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO console_users (username, password_hash, role, create_time_ms)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (username) DO UPDATE
                 SET password_hash = excluded.password_hash, role = excluded.role",
                &[
                    &row.username,
                    &row.password_hash,
                    &row.role,
                    &row.create_time_ms,
                ],
            )
            .await
            .map(drop)
            .map_err(db_error)
    }

    async fn create_console_user(&self, row: ConsoleUserRow) -> Result<(), StoreError> {
        let client = self.client().await?;
        let inserted = client
            .execute(
                "INSERT INTO console_users (username, password_hash, role, create_time_ms)
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                &[
                    &row.username,
                    &row.password_hash,
                    &row.role,
                    &row.create_time_ms,
                ],
            )
            .await
            .map_err(db_error)?;
        if inserted == 0 {
            return Err(StoreError::UsernameTaken);
        }
        Ok(())
    }

    async fn console_user(&self, username: &str) -> Result<Option<ConsoleUserRow>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "SELECT username, password_hash, role, create_time_ms
             FROM console_users WHERE username = $1",
        )
        .await?;
        Ok(client
            .query_opt(&statement, &[&username])
            .await
            .map_err(db_error)?
            .map(|row| user(&row)))
    }

    async fn console_users(&self) -> Result<Vec<ConsoleUserRow>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT username, password_hash, role, create_time_ms
                 FROM console_users ORDER BY username",
                &[],
            )
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(user).collect())
    }

    async fn delete_console_user(&self, username: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        // The sessions go with the user (ON DELETE CASCADE).
        match client
            .execute(
                "DELETE FROM console_users WHERE username = $1",
                &[&username],
            )
            .await
            .map_err(db_error)?
        {
            0 => Err(StoreError::NotFound),
            _ => Ok(()),
        }
    }

    async fn create_console_session(
        &self,
        row: ConsoleSessionRow,
        keep: u32,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute(
            "DELETE FROM console_sessions WHERE expire_time_ms < $1",
            &[&row.create_time_ms],
        )
        .await
        .map_err(db_error)?;
        tx.execute(
            "INSERT INTO console_sessions
                 (token_hash, username, csrf, create_time_ms, expire_time_ms)
             VALUES ($1, $2, $3, $4, $5)",
            &[
                &row.token_hash,
                &row.username,
                &row.csrf,
                &row.create_time_ms,
                &row.expire_time_ms,
            ],
        )
        .await
        .map_err(db_error)?;
        tx.execute(
            "DELETE FROM console_sessions WHERE username = $1 AND token_hash NOT IN (
                 SELECT token_hash FROM console_sessions WHERE username = $1
                 ORDER BY create_time_ms DESC, token_hash DESC LIMIT $2)",
            &[&row.username, &i64::from(keep)],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn console_session(
        &self,
        token_hash: &str,
        now_ms: i64,
    ) -> Result<Option<(ConsoleSessionRow, String)>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "SELECT s.token_hash, s.username, s.csrf, s.create_time_ms, s.expire_time_ms, u.role
             FROM console_sessions s JOIN console_users u ON u.username = s.username
             WHERE s.token_hash = $1 AND s.expire_time_ms > $2",
        )
        .await?;
        Ok(client
            .query_opt(&statement, &[&token_hash, &now_ms])
            .await
            .map_err(db_error)?
            .map(|row| {
                (
                    ConsoleSessionRow {
                        token_hash: row.get(0),
                        username: row.get(1),
                        csrf: row.get(2),
                        create_time_ms: row.get(3),
                        expire_time_ms: row.get(4),
                    },
                    row.get(5),
                )
            }))
    }

    async fn delete_console_session(&self, token_hash: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM console_sessions WHERE token_hash = $1",
                &[&token_hash],
            )
            .await
            .map(|n| n > 0)
            .map_err(db_error)
    }

    async fn search_accounts(
        &self,
        text: &str,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<AccountRecord>, StoreError> {
        let client = self.client().await?;
        let limit = limit as i64;
        let rows = if text.is_empty() {
            let statement = prepared(
                &client,
                &format!(
                    "SELECT {USER_COLUMNS} FROM users WHERE username > $1
                     ORDER BY username LIMIT $2"
                ),
            )
            .await?;
            client
                .query(&statement, &[&after.unwrap_or_default(), &limit])
                .await
        } else {
            let id = uuid::Uuid::parse_str(text).ok();
            let low = text.to_lowercase();
            let high = format!("{low}\u{10FFFF}");
            let statement = prepared(
                &client,
                &format!(
                    r#"SELECT {USER_COLUMNS} FROM users WHERE id IN (
                         SELECT id FROM users WHERE id = $1 OR email = $2 OR custom_id = $2
                         UNION SELECT user_id FROM user_devices WHERE id = $2
                         UNION (SELECT id FROM users WHERE lower(username) COLLATE "C" >= $3
                                AND lower(username) COLLATE "C" < $4 LIMIT $5)
                         UNION (SELECT id FROM users WHERE lower(display_name) COLLATE "C" >= $3
                                AND lower(display_name) COLLATE "C" < $4 LIMIT $5))
                     ORDER BY username LIMIT $5"#
                ),
            )
            .await?;
            client
                .query(&statement, &[&id, &text, &low, &high, &limit])
                .await
        }
        .map_err(db_error)?;
        Ok(rows.iter().map(user_from).collect())
    }

    async fn append_audit(&self, entry: AuditRow) -> Result<i64, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "INSERT INTO console_audit (time_ms, username, action, target, detail)
                 VALUES ($1, $2, $3, $4, $5) RETURNING id",
                &[
                    &entry.time_ms,
                    &entry.username,
                    &entry.action,
                    &entry.target,
                    &entry.detail,
                ],
            )
            .await
            .map_err(db_error)?;
        Ok(row.get(0))
    }

    async fn audit_entries(
        &self,
        before_id: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRow>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "SELECT id, time_ms, username, action, target, detail FROM console_audit
             WHERE id < $1 ORDER BY id DESC LIMIT $2",
        )
        .await?;
        let rows = client
            .query(
                &statement,
                &[&before_id.unwrap_or(i64::MAX), &(limit as i64)],
            )
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(audit).collect())
    }
}
