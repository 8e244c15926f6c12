//! An account's credentials after creation (link, unlink), other players' views of it, and its
//! deletion, on SQLite. Each function runs on a connection the caller chose: the writer for
//! changes (inside its group-commit transaction), a reader for lookups.

use rusqlite::{params, Connection, OptionalExtension};
use uuid::Uuid;

use super::{db_error, parse_uuid};
use crate::store::{AccountRecord, Credential, StoreError};

/// Whether the account exists; the writer's first check, so that a missing account is
/// `NotFound` rather than "nothing changed".
fn exists(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM users WHERE id = ?1)")
        .and_then(|mut s| s.query_row([id], |r| r.get(0)))
        .map_err(db_error)
}

pub(super) fn link(
    conn: &Connection,
    user_id: Uuid,
    credential: &Credential,
    password_hash: Option<&str>,
    now_ms: i64,
) -> Result<(), StoreError> {
    let id = user_id.to_string();
    if !exists(conn, &id)? {
        return Err(StoreError::NotFound);
    }
    match credential {
        Credential::Device(device) => {
            let owner: Option<String> = conn
                .prepare_cached("SELECT user_id FROM user_devices WHERE id = ?1")
                .and_then(|mut s| s.query_row([device], |r| r.get(0)).optional())
                .map_err(db_error)?;
            match owner {
                Some(owner) if owner == id => {}
                Some(_) => return Err(StoreError::CredentialTaken),
                None => {
                    conn.prepare_cached("INSERT INTO user_devices (id, user_id) VALUES (?1, ?2)")
                        .and_then(|mut s| s.execute(params![device, id]))
                        .map_err(db_error)?;
                }
            }
            conn.prepare_cached("UPDATE users SET update_time_ms = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, now_ms]))
                .map_err(db_error)?;
        }
        Credential::Custom(custom) => {
            conn.prepare_cached(
                "UPDATE users SET custom_id = ?2, update_time_ms = ?3 WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![id, custom, now_ms]))
            .map_err(db_error)?;
        }
        Credential::Email(email) => {
            conn.prepare_cached(
                "UPDATE users SET email = ?2, password_hash = ?3, update_time_ms = ?4 WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![id, email, password_hash, now_ms]))
            .map_err(db_error)?;
        }
    }
    Ok(())
}

/// How many credentials the account has: its devices, a custom id, an email.
fn credentials(conn: &Connection, id: &str) -> Result<i64, StoreError> {
    conn.prepare_cached(
        "SELECT (SELECT COUNT(*) FROM user_devices WHERE user_id = ?1)
              + (custom_id IS NOT NULL) + (email IS NOT NULL)
         FROM users WHERE id = ?1",
    )
    .and_then(|mut s| s.query_row([id], |r| r.get::<_, i64>(0)).optional())
    .map_err(db_error)
    .map(Option::unwrap_or_default)
}

pub(super) fn unlink(
    conn: &Connection,
    user_id: Uuid,
    credential: &Credential,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let id = user_id.to_string();
    if credentials(conn, &id)? < 2 {
        return Ok(false);
    }
    let changed = match credential {
        Credential::Device(device) => conn
            .prepare_cached("DELETE FROM user_devices WHERE id = ?1 AND user_id = ?2")
            .and_then(|mut s| s.execute(params![device, id])),
        Credential::Custom(custom) => conn
            .prepare_cached(
                "UPDATE users SET custom_id = NULL, update_time_ms = ?3
                 WHERE id = ?1 AND custom_id IS NOT NULL AND (?2 = '' OR custom_id = ?2)",
            )
            .and_then(|mut s| s.execute(params![id, custom, now_ms])),
        Credential::Email(email) => conn
            .prepare_cached(
                "UPDATE users SET email = NULL, password_hash = NULL, update_time_ms = ?3
                 WHERE id = ?1 AND email IS NOT NULL AND (?2 = '' OR email = ?2)",
            )
            .and_then(|mut s| s.execute(params![id, email, now_ms])),
    }
    .map_err(db_error)?;
    if changed > 0 && matches!(credential, Credential::Device(_)) {
        conn.prepare_cached("UPDATE users SET update_time_ms = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![id, now_ms]))
            .map_err(db_error)?;
    }
    Ok(changed > 0)
}

/// An account's public columns, in the order [`user_from`] reads them (a query may add columns
/// after them, or name the table: `u.` + each).
pub(super) const USER_COLUMNS: &str = "id, username, display_name, avatar_url, lang_tag, location,
    timezone, metadata, disable_time_ms, create_time_ms, update_time_ms";

/// The account of a row that starts with [`USER_COLUMNS`], and its id as stored.
pub(super) fn user_from(row: &rusqlite::Row) -> rusqlite::Result<(String, AccountRecord)> {
    Ok((
        row.get(0)?,
        AccountRecord {
            username: row.get(1)?,
            display_name: row.get(2)?,
            avatar_url: row.get(3)?,
            lang_tag: row.get(4)?,
            location: row.get(5)?,
            timezone: row.get(6)?,
            metadata: row.get(7)?,
            disable_time_ms: row.get(8)?,
            create_time_ms: row.get(9)?,
            update_time_ms: row.get(10)?,
            ..AccountRecord::default()
        },
    ))
}

pub(super) fn users(
    conn: &Connection,
    ids: &[Uuid],
    usernames: &[String],
) -> Result<Vec<AccountRecord>, StoreError> {
    let mut found: Vec<AccountRecord> = Vec::with_capacity(ids.len() + usernames.len());
    let mut seen = std::collections::HashSet::new();
    let by_id = format!("SELECT {USER_COLUMNS} FROM users WHERE id = ?1");
    let by_name = format!("SELECT {USER_COLUMNS} FROM users WHERE username = ?1");
    let lookups = ids.iter().map(|id| (by_id.as_str(), id.to_string())).chain(
        usernames
            .iter()
            .map(|name| (by_name.as_str(), name.clone())),
    );
    for (sql, key) in lookups {
        let row = conn
            .prepare_cached(sql)
            .and_then(|mut s| s.query_row([&key], user_from).optional())
            .map_err(db_error)?;
        if let Some((id, mut record)) = row {
            record.id = parse_uuid(&id)?;
            if seen.insert(record.id) {
                found.push(record);
            }
        }
    }
    Ok(found)
}

pub(super) fn delete_account(
    conn: &Connection,
    user_id: Uuid,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let id = user_id.to_string();
    // The groups the account was a member of count one member fewer (and go when it was their
    // last member); its memberships go with it (ON DELETE CASCADE).
    conn.prepare_cached(
        "UPDATE groups SET edge_count = edge_count - 1 WHERE id IN
             (SELECT group_id FROM group_members WHERE user_id = ?1 AND state <= 2)",
    )
    .and_then(|mut s| s.execute([&id]))
    .map_err(db_error)?;
    conn.prepare_cached("DELETE FROM groups WHERE edge_count <= 0")
        .and_then(|mut s| s.execute([]))
        .map_err(db_error)?;
    // Devices and the economy's rows go with the account (foreign keys, ON DELETE CASCADE).
    let deleted = conn
        .prepare_cached("DELETE FROM users WHERE id = ?1")
        .and_then(|mut s| s.execute([&id]))
        .map_err(db_error)?;
    if deleted == 0 {
        return Ok(false);
    }
    for sql in [
        "DELETE FROM storage WHERE user_id = ?1",
        "DELETE FROM leaderboard_records WHERE owner_id = ?1",
    ] {
        conn.prepare_cached(sql)
            .and_then(|mut s| s.execute([&id]))
            .map_err(db_error)?;
    }
    conn.prepare_cached(
        "INSERT OR REPLACE INTO deleted_users (user_id, delete_time_ms) VALUES (?1, ?2)",
    )
    .and_then(|mut s| s.execute(params![id, now_ms]))
    .map_err(db_error)?;
    Ok(true)
}

pub(super) fn disabled_users(
    conn: &Connection,
    deleted_since_ms: i64,
) -> Result<Vec<Uuid>, StoreError> {
    let ids = conn
        .prepare_cached(
            "SELECT id FROM users WHERE disable_time_ms IS NOT NULL
             UNION SELECT user_id FROM deleted_users WHERE delete_time_ms >= ?1",
        )
        .and_then(|mut s| {
            s.query_map([deleted_since_ms], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(db_error)?;
    ids.iter().map(|id| parse_uuid(id)).collect()
}
