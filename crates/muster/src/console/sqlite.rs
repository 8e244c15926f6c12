//! The console's users, sessions and audit log on SQLite.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, Row};

use crate::accounts::sqlite::{user_from, USER_COLUMNS};
use crate::accounts::store::AccountRecord;
use crate::console::store::{AuditRow, ConsoleSessionRow, ConsoleStore, ConsoleUserRow};
use crate::store::sqlite::{db_error, parse_uuid, SqliteStore};
use crate::store::StoreError;

fn user(row: &Row) -> rusqlite::Result<ConsoleUserRow> {
    Ok(ConsoleUserRow {
        username: row.get(0)?,
        password_hash: row.get(1)?,
        role: row.get(2)?,
        create_time_ms: row.get(3)?,
    })
}

fn audit(row: &Row) -> rusqlite::Result<AuditRow> {
    Ok(AuditRow {
        id: row.get(0)?,
        time_ms: row.get(1)?,
        username: row.get(2)?,
        action: row.get(3)?,
        target: row.get(4)?,
        detail: row.get(5)?,
    })
}

#[async_trait]
impl ConsoleStore for SqliteStore {
    async fn put_console_user(&self, row: ConsoleUserRow) -> Result<(), StoreError> {
        self.write("console_user_put", move |conn| {
            conn.execute(
                "INSERT INTO console_users (username, password_hash, role, create_time_ms)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (username) DO UPDATE
                 SET password_hash = excluded.password_hash, role = excluded.role",
                params![
                    row.username,
                    row.password_hash,
                    row.role,
                    row.create_time_ms
                ],
            )
            .map(drop)
            .map_err(db_error)
        })
        .await
    }

    async fn create_console_user(&self, row: ConsoleUserRow) -> Result<(), StoreError> {
        self.write("console_user_create", move |conn| {
            let inserted = conn
                .execute(
                    "INSERT INTO console_users (username, password_hash, role, create_time_ms)
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                    params![
                        row.username,
                        row.password_hash,
                        row.role,
                        row.create_time_ms
                    ],
                )
                .map_err(db_error)?;
            if inserted == 0 {
                return Err(StoreError::UsernameTaken);
            }
            Ok(())
        })
        .await
    }

    async fn console_user(&self, username: &str) -> Result<Option<ConsoleUserRow>, StoreError> {
        let username = username.to_owned();
        self.read("console_user", move |conn| {
            conn.prepare_cached(
                "SELECT username, password_hash, role, create_time_ms
                 FROM console_users WHERE username = ?1",
            )
            .and_then(|mut s| s.query_row([username], user).optional())
            .map_err(db_error)
        })
        .await
    }

    async fn console_users(&self) -> Result<Vec<ConsoleUserRow>, StoreError> {
        self.read("console_users", move |conn| {
            conn.prepare_cached(
                "SELECT username, password_hash, role, create_time_ms
                 FROM console_users ORDER BY username",
            )
            .and_then(|mut s| s.query_map([], user)?.collect())
            .map_err(db_error)
        })
        .await
    }

    async fn delete_console_user(&self, username: &str) -> Result<(), StoreError> {
        let username = username.to_owned();
        self.write("console_user_delete", move |conn| {
            conn.execute(
                "DELETE FROM console_sessions WHERE username = ?1",
                [&username],
            )
            .map_err(db_error)?;
            match conn
                .execute("DELETE FROM console_users WHERE username = ?1", [&username])
                .map_err(db_error)?
            {
                0 => Err(StoreError::NotFound),
                _ => Ok(()),
            }
        })
        .await
    }

    async fn create_console_session(
        &self,
        row: ConsoleSessionRow,
        keep: u32,
    ) -> Result<(), StoreError> {
        self.write("console_session_create", move |conn| {
            conn.execute(
                "DELETE FROM console_sessions WHERE expire_time_ms < ?1",
                [row.create_time_ms],
            )
            .map_err(db_error)?;
            conn.execute(
                "INSERT INTO console_sessions
                     (token_hash, username, csrf, create_time_ms, expire_time_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    row.token_hash,
                    row.username,
                    row.csrf,
                    row.create_time_ms,
                    row.expire_time_ms
                ],
            )
            .map_err(db_error)?;
            conn.execute(
                "DELETE FROM console_sessions WHERE username = ?1 AND token_hash NOT IN (
                     SELECT token_hash FROM console_sessions WHERE username = ?1
                     ORDER BY create_time_ms DESC, token_hash DESC LIMIT ?2)",
                params![row.username, i64::from(keep)],
            )
            .map(drop)
            .map_err(db_error)
        })
        .await
    }

    async fn console_session(
        &self,
        token_hash: &str,
        now_ms: i64,
    ) -> Result<Option<(ConsoleSessionRow, String)>, StoreError> {
        let token_hash = token_hash.to_owned();
        self.read("console_session", move |conn| {
            conn.prepare_cached(
                "SELECT s.token_hash, s.username, s.csrf, s.create_time_ms, s.expire_time_ms,
                        u.role
                 FROM console_sessions s JOIN console_users u ON u.username = s.username
                 WHERE s.token_hash = ?1 AND s.expire_time_ms > ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![token_hash, now_ms], |row| {
                    Ok((
                        ConsoleSessionRow {
                            token_hash: row.get(0)?,
                            username: row.get(1)?,
                            csrf: row.get(2)?,
                            create_time_ms: row.get(3)?,
                            expire_time_ms: row.get(4)?,
                        },
                        row.get(5)?,
                    ))
                })
                .optional()
            })
            .map_err(db_error)
        })
        .await
    }

    async fn delete_console_session(&self, token_hash: &str) -> Result<bool, StoreError> {
        let token_hash = token_hash.to_owned();
        self.write("console_session_delete", move |conn| {
            conn.execute(
                "DELETE FROM console_sessions WHERE token_hash = ?1",
                [token_hash],
            )
            .map(|n| n > 0)
            .map_err(db_error)
        })
        .await
    }

    async fn search_accounts(
        &self,
        text: &str,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<AccountRecord>, StoreError> {
        let text = text.to_owned();
        self.read("console_account_search", move |conn| {
            let limit = limit as i64;
            let rows: Vec<(String, AccountRecord)> = if text.is_empty() {
                conn.prepare_cached(&format!(
                    "SELECT {USER_COLUMNS} FROM users WHERE username > ?1
                     ORDER BY username LIMIT ?2"
                ))
                .and_then(|mut s| {
                    s.query_map(params![after.unwrap_or_default(), limit], user_from)?
                        .collect()
                })
            } else {
                // SQLite's lower() folds ASCII only; the prefix is folded the same way.
                let low = text.to_ascii_lowercase();
                let high = format!("{low}\u{10FFFF}");
                conn.prepare_cached(&format!(
                    "SELECT {USER_COLUMNS} FROM users WHERE id IN (
                         SELECT id FROM users WHERE id = ?1 OR email = ?1 OR custom_id = ?1
                         UNION SELECT user_id FROM user_devices WHERE id = ?1
                         UNION SELECT id FROM (SELECT id FROM users
                             WHERE lower(username) >= ?2 AND lower(username) < ?3 LIMIT ?4)
                         UNION SELECT id FROM (SELECT id FROM users
                             WHERE lower(display_name) >= ?2 AND lower(display_name) < ?3
                             LIMIT ?4))
                     ORDER BY username LIMIT ?4"
                ))
                .and_then(|mut s| {
                    s.query_map(params![text, low, high, limit], user_from)?
                        .collect()
                })
            }
            .map_err(db_error)?;
            rows.into_iter()
                .map(|(id, mut record)| {
                    record.id = parse_uuid(&id)?;
                    Ok(record)
                })
                .collect()
        })
        .await
    }

    async fn append_audit(&self, entry: AuditRow) -> Result<i64, StoreError> {
        self.write("console_audit_append", move |conn| {
            conn.prepare_cached(
                "INSERT INTO console_audit (time_ms, username, action, target, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![
                        entry.time_ms,
                        entry.username,
                        entry.action,
                        entry.target,
                        entry.detail
                    ],
                    |row| row.get(0),
                )
            })
            .map_err(db_error)
        })
        .await
    }

    async fn audit_entries(
        &self,
        before_id: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRow>, StoreError> {
        self.read("console_audit", move |conn| {
            conn.prepare_cached(
                "SELECT id, time_ms, username, action, target, detail FROM console_audit
                 WHERE id < ?1 ORDER BY id DESC LIMIT ?2",
            )
            .and_then(|mut s| {
                s.query_map(params![before_id.unwrap_or(i64::MAX), limit as i64], audit)?
                    .collect()
            })
            .map_err(db_error)
        })
        .await
    }
}
