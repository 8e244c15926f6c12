//! An account's credentials after creation (link, unlink), other players' views of it, and its
//! deletion, on SQLite. Each function runs on a connection the caller chose: the writer for
//! changes (inside its group-commit transaction), a reader for lookups.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use uuid::Uuid;

use crate::accounts::store::{
    AccountRecord, AccountStore, AccountUpdate, Credential, Identity, NewUser, Revocation,
    SocialIds, TokenStore,
};
use crate::economy::sqlite as sqlite_economy;

use crate::store::sqlite::{parse_uuid, unique_violation, SqliteStore};
use crate::store::StoreError;

/// SQLite's errors as accounts tell them apart: a taken username, and a credential (device, custom
/// id, email) linked to another account; the rest as the engine maps them.
fn db_error(error: rusqlite::Error) -> StoreError {
    match unique_violation(&error) {
        Some("users.username") => StoreError::UsernameTaken,
        Some(
            "users.email"
            | "users.custom_id"
            | "user_devices.id"
            | "users.facebook_id"
            | "users.google_id"
            | "users.gamecenter_id"
            | "users.steam_id"
            | "users.apple_id"
            | "users.facebook_instant_game_id",
        ) => StoreError::CredentialTaken,
        _ => crate::store::sqlite::db_error(error),
    }
}

/// Whether the account exists; the writer's first check, so that a missing account is
/// `NotFound` rather than "nothing changed".
fn exists(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM users WHERE id = ?1)")
        .and_then(|mut s| s.query_row([id], |r| r.get(0)))
        .map_err(db_error)
}

pub(crate) fn link(
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
        Credential::Social(provider, social_id) => {
            let column = provider.column();
            conn.prepare_cached(&format!(
                "UPDATE users SET {column} = ?2, update_time_ms = ?3 WHERE id = ?1"
            ))
            .and_then(|mut s| s.execute(params![id, social_id, now_ms]))
            .map_err(db_error)?;
        }
    }
    Ok(())
}

/// How many credentials the account has: its devices, a custom id, an email, its ids at the
/// identity providers.
fn credentials(conn: &Connection, id: &str) -> Result<i64, StoreError> {
    conn.prepare_cached(
        "SELECT (SELECT COUNT(*) FROM user_devices WHERE user_id = ?1)
              + (custom_id IS NOT NULL) + (email IS NOT NULL)
              + (facebook_id IS NOT NULL) + (google_id IS NOT NULL) + (gamecenter_id IS NOT NULL)
              + (steam_id IS NOT NULL) + (apple_id IS NOT NULL)
              + (facebook_instant_game_id IS NOT NULL)
         FROM users WHERE id = ?1",
    )
    .and_then(|mut s| s.query_row([id], |r| r.get::<_, i64>(0)).optional())
    .map_err(db_error)
    .map(Option::unwrap_or_default)
}

pub(crate) fn unlink(
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
        Credential::Social(provider, social_id) => {
            let column = provider.column();
            conn.prepare_cached(&format!(
                "UPDATE users SET {column} = NULL, update_time_ms = ?3
                 WHERE id = ?1 AND {column} IS NOT NULL AND (?2 = '' OR {column} = ?2)"
            ))
            .and_then(|mut s| s.execute(params![id, social_id, now_ms]))
        }
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
pub(crate) const USER_COLUMNS: &str = "id, username, display_name, avatar_url, lang_tag, location,
    timezone, metadata, disable_time_ms, create_time_ms, update_time_ms";

/// The account of a row that starts with [`USER_COLUMNS`], and its id as stored.
pub(crate) fn user_from(row: &rusqlite::Row) -> rusqlite::Result<(String, AccountRecord)> {
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

pub(crate) fn users(
    conn: &Connection,
    ids: &[Uuid],
    usernames: &[String],
) -> Result<Vec<AccountRecord>, StoreError> {
    let mut found: Vec<AccountRecord> = Vec::with_capacity(ids.len() + usernames.len());
    let mut seen = std::collections::HashSet::new();
    // The public columns, then the ids at the identity providers (shown to everyone).
    let by_id = format!("SELECT {USER_COLUMNS}, {SOCIAL_COLUMNS} FROM users WHERE id = ?1");
    let by_name = format!("SELECT {USER_COLUMNS}, {SOCIAL_COLUMNS} FROM users WHERE username = ?1");
    let read = |row: &rusqlite::Row| {
        let (id, mut record) = user_from(row)?;
        record.social = SocialIds::from_values(
            (11..17).map(|i| row.get::<_, Option<String>>(i).ok().flatten()),
        );
        Ok((id, record))
    };
    let lookups = ids.iter().map(|id| (by_id.as_str(), id.to_string())).chain(
        usernames
            .iter()
            .map(|name| (by_name.as_str(), name.clone())),
    );
    for (sql, key) in lookups {
        let row = conn
            .prepare_cached(sql)
            .and_then(|mut s| s.query_row([&key], read).optional())
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

/// [`AccountStore::random_users`]: ids are stored as their text, which orders as the ids do.
fn random_users(
    conn: &Connection,
    pivot: Uuid,
    count: usize,
) -> Result<Vec<AccountRecord>, StoreError> {
    let system = Uuid::nil().to_string();
    let pivot = pivot.to_string();
    let mut found = Vec::with_capacity(count);
    for sql in [
        format!("SELECT {USER_COLUMNS} FROM users WHERE id > ?1 AND id <> ?2 ORDER BY id LIMIT ?3"),
        format!(
            "SELECT {USER_COLUMNS} FROM users WHERE id <= ?1 AND id <> ?2 ORDER BY id LIMIT ?3"
        ),
    ] {
        let wanted = (count - found.len()) as i64;
        if wanted == 0 {
            break;
        }
        let rows = conn
            .prepare_cached(&sql)
            .and_then(|mut s| {
                s.query_map(params![pivot, system, wanted], user_from)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(db_error)?;
        for (id, mut record) in rows {
            record.id = parse_uuid(&id)?;
            found.push(record);
        }
    }
    Ok(found)
}

/// [`AccountStore::user_ids_after`]: ids are stored as their text, which orders as the ids do
/// (the system user's, the nil id, first of all).
fn user_ids_after(
    conn: &Connection,
    after: Option<Uuid>,
    limit: usize,
) -> Result<Vec<Uuid>, StoreError> {
    let after = after.unwrap_or_else(Uuid::nil).to_string();
    let ids = conn
        .prepare_cached("SELECT id FROM users WHERE id > ?1 ORDER BY id LIMIT ?2")
        .and_then(|mut s| {
            s.query_map(params![after, limit as i64], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(db_error)?;
    ids.iter().map(|id| parse_uuid(id)).collect()
}

pub(crate) fn delete_account(
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

pub(crate) fn disabled_users(
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

/// An account's ids at the identity providers, in [`SocialIds::from_values`]'s order.
const SOCIAL_COLUMNS: &str =
    "facebook_id, google_id, gamecenter_id, steam_id, apple_id, facebook_instant_game_id";

const IDENTITY_COLUMNS: &str = "u.id, u.username, u.disable_time_ms, u.password_hash";

fn find_identity(
    conn: &Connection,
    credential: &Credential,
) -> Result<Option<Identity>, StoreError> {
    let (sql, key) = match credential {
        Credential::Device(id) => (
            format!("SELECT {IDENTITY_COLUMNS} FROM user_devices d JOIN users u ON u.id = d.user_id WHERE d.id = ?1"),
            id,
        ),
        Credential::Custom(id) => (format!("SELECT {IDENTITY_COLUMNS} FROM users u WHERE u.custom_id = ?1"), id),
        Credential::Email(email) => (format!("SELECT {IDENTITY_COLUMNS} FROM users u WHERE u.email = ?1"), email),
        Credential::Social(provider, id) => (
            format!("SELECT {IDENTITY_COLUMNS} FROM users u WHERE u.{} = ?1", provider.column()),
            id,
        ),
    };
    let mut statement = conn.prepare_cached(&sql).map_err(db_error)?;
    statement
        .query_row([key], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, Option<i64>>(2)?,
                row.get::<_, Option<String>>(3)?,
            ))
        })
        .optional()
        .map_err(db_error)?
        .map(|(id, username, disabled, password_hash)| {
            Ok(Identity {
                user_id: parse_uuid(&id)?,
                username,
                disabled: disabled.is_some(),
                password_hash,
            })
        })
        .transpose()
}

#[async_trait]
impl AccountStore for SqliteStore {
    async fn find_identity(&self, credential: &Credential) -> Result<Option<Identity>, StoreError> {
        let credential = credential.clone();
        self.read("find_identity", move |conn| {
            find_identity(conn, &credential)
        })
        .await
    }

    async fn find_or_create(
        &self,
        credential: &Credential,
        new_user: NewUser,
    ) -> Result<(Identity, bool), StoreError> {
        let credential = credential.clone();
        self.write("find_or_create", move |conn| {
            if let Some(found) = find_identity(conn, &credential)? {
                return Ok((found, false));
            }
            let (email, custom_id) = match &credential {
                Credential::Email(email) => (Some(email.as_str()), None),
                Credential::Custom(id) => (None, Some(id.as_str())),
                Credential::Device(_) | Credential::Social(..) => (None, None),
            };
            let id = new_user.id.to_string();
            conn.prepare_cached(
                "INSERT INTO users (id, username, email, custom_id, password_hash, create_time_ms, update_time_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
            )
            .and_then(|mut s| {
                s.execute(params![id, new_user.username, email, custom_id, new_user.password_hash, new_user.now_ms])
            })
            .map_err(db_error)?;
            if let Credential::Device(device_id) = &credential {
                conn.prepare_cached("INSERT INTO user_devices (id, user_id) VALUES (?1, ?2)")
                    .and_then(|mut s| s.execute(params![device_id, id]))
                    .map_err(db_error)?;
            }
            if let Credential::Social(provider, social_id) = &credential {
                let column = provider.column();
                conn.prepare_cached(&format!("UPDATE users SET {column} = ?2 WHERE id = ?1"))
                    .and_then(|mut s| s.execute(params![id, social_id]))
                    .map_err(db_error)?;
            }
            // The starting wallet and inventory, in the same savepoint as the account: an
            // account never exists without them.
            if let Some(grant) = &new_user.grant {
                sqlite_economy::grant(conn, new_user.id, grant, new_user.now_ms)?;
            }
            Ok((
                Identity {
                    user_id: new_user.id,
                    username: new_user.username,
                    disabled: false,
                    password_hash: new_user.password_hash,
                },
                true,
            ))
        })
        .await
    }

    async fn account(&self, user_id: Uuid) -> Result<Option<AccountRecord>, StoreError> {
        self.read("account", move |conn| {
            let id = user_id.to_string();
            let record = conn
                .prepare_cached(
                    "SELECT username, display_name, avatar_url, lang_tag, location, timezone, metadata,
                            email, custom_id, disable_time_ms, create_time_ms, update_time_ms,
                            facebook_id, google_id, gamecenter_id, steam_id, apple_id, facebook_instant_game_id
                     FROM users WHERE id = ?1",
                )
                .and_then(|mut s| {
                    s.query_row([&id], |r| {
                        Ok(AccountRecord {
                            id: user_id,
                            username: r.get(0)?,
                            display_name: r.get(1)?,
                            avatar_url: r.get(2)?,
                            lang_tag: r.get(3)?,
                            location: r.get(4)?,
                            timezone: r.get(5)?,
                            metadata: r.get(6)?,
                            email: r.get(7)?,
                            custom_id: r.get(8)?,
                            devices: Vec::new(),
                            social: SocialIds::from_values(
                                (12..18).map(|i| r.get::<_, Option<String>>(i).ok().flatten()),
                            ),
                            wallet: Vec::new(),
                            disable_time_ms: r.get(9)?,
                            create_time_ms: r.get(10)?,
                            update_time_ms: r.get(11)?,
                        })
                    })
                    .optional()
                })
                .map_err(db_error)?;
            let Some(mut record) = record else { return Ok(None) };
            let mut devices = conn
                .prepare_cached("SELECT id FROM user_devices WHERE user_id = ?1 ORDER BY id")
                .map_err(db_error)?;
            record.devices = devices
                .query_map([&id], |r| r.get(0))
                .and_then(|rows| rows.collect::<Result<Vec<String>, _>>())
                .map_err(db_error)?;
            record.wallet = sqlite_economy::wallet(conn, user_id)?;
            Ok(Some(record))
        })
        .await
    }

    async fn update_account(
        &self,
        user_id: Uuid,
        update: AccountUpdate,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.write("update_account", move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE users SET
                        username = COALESCE(?2, username),
                        display_name = COALESCE(?3, display_name),
                        avatar_url = COALESCE(?4, avatar_url),
                        lang_tag = COALESCE(?5, lang_tag),
                        location = COALESCE(?6, location),
                        timezone = COALESCE(?7, timezone),
                        metadata = COALESCE(?8, metadata),
                        update_time_ms = ?9
                     WHERE id = ?1",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        user_id.to_string(),
                        update.username,
                        update.display_name,
                        update.avatar_url,
                        update.lang_tag,
                        update.location,
                        update.timezone,
                        update.metadata,
                        now_ms
                    ])
                })
                .map_err(db_error)?;
            if changed == 0 {
                return Err(StoreError::NotFound);
            }
            Ok(())
        })
        .await
    }

    async fn set_disabled(
        &self,
        user_ids: Vec<Uuid>,
        disable_time_ms: Option<i64>,
    ) -> Result<Vec<Uuid>, StoreError> {
        self.write("set_disabled", move |conn| {
            let mut update = conn
                .prepare_cached("UPDATE users SET disable_time_ms = ?2 WHERE id = ?1")
                .map_err(db_error)?;
            let mut found = Vec::with_capacity(user_ids.len());
            for id in user_ids {
                if update
                    .execute(params![id.to_string(), disable_time_ms])
                    .map_err(db_error)?
                    > 0
                {
                    found.push(id);
                }
            }
            Ok(found)
        })
        .await
    }

    async fn disabled_users(&self, deleted_since_ms: i64) -> Result<Vec<Uuid>, StoreError> {
        self.read("disabled_users", move |conn| {
            disabled_users(conn, deleted_since_ms)
        })
        .await
    }

    async fn link(
        &self,
        user_id: Uuid,
        credential: Credential,
        password_hash: Option<String>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.write("link", move |conn| {
            link(conn, user_id, &credential, password_hash.as_deref(), now_ms)
        })
        .await
    }

    async fn unlink(
        &self,
        user_id: Uuid,
        credential: Credential,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        self.write("unlink", move |conn| {
            unlink(conn, user_id, &credential, now_ms)
        })
        .await
    }

    async fn users_by_social(
        &self,
        provider: crate::accounts::providers::Provider,
        ids: Vec<String>,
    ) -> Result<Vec<Uuid>, StoreError> {
        self.read("users_by_social", move |conn| {
            let ids =
                serde_json::to_string(&ids).map_err(|e| StoreError::Database(e.to_string()))?;
            let sql = format!(
                "SELECT id FROM users WHERE {} IN (SELECT value FROM json_each(?1))",
                provider.column()
            );
            let found: Vec<String> = conn
                .prepare_cached(&sql)
                .and_then(|mut s| {
                    s.query_map([ids], |r| r.get(0))?
                        .collect::<Result<Vec<String>, _>>()
                })
                .map_err(db_error)?;
            found.iter().map(|id| parse_uuid(id)).collect()
        })
        .await
    }

    async fn users(
        &self,
        ids: Vec<Uuid>,
        usernames: Vec<String>,
    ) -> Result<Vec<AccountRecord>, StoreError> {
        self.read("users", move |conn| users(conn, &ids, &usernames))
            .await
    }

    async fn random_users(
        &self,
        pivot: Uuid,
        count: usize,
    ) -> Result<Vec<AccountRecord>, StoreError> {
        self.read("random_users", move |conn| random_users(conn, pivot, count))
            .await
    }

    async fn user_ids_after(
        &self,
        after: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Uuid>, StoreError> {
        self.read("user_ids_after", move |conn| {
            user_ids_after(conn, after, limit)
        })
        .await
    }

    async fn delete_account(&self, user_id: Uuid, now_ms: i64) -> Result<bool, StoreError> {
        self.write("delete_account", move |conn| {
            delete_account(conn, user_id, now_ms)
        })
        .await
    }
}

#[async_trait]
impl TokenStore for SqliteStore {
    async fn revoke(&self, revocations: Vec<Revocation>) -> Result<usize, StoreError> {
        self.write("revoke", move |conn| {
            let mut insert = conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO revoked_tokens (token_id, expires_at, created_ms)
                     VALUES (?1, ?2, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
                )
                .map_err(db_error)?;
            let mut recorded = 0;
            for r in &revocations {
                recorded += insert
                    .execute(params![r.token_id.to_string(), r.expires_at])
                    .map_err(db_error)?;
            }
            Ok(recorded)
        })
        .await
    }

    async fn is_revoked(&self, token_id: Uuid) -> Result<bool, StoreError> {
        self.read("is_revoked", move |conn| {
            conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM revoked_tokens WHERE token_id = ?1)")
                .and_then(|mut s| s.query_row(params![token_id.to_string()], |r| r.get(0)))
                .map_err(db_error)
        })
        .await
    }

    async fn revocations_since(
        &self,
        since_ms: i64,
        now: i64,
    ) -> Result<(Vec<(Revocation, i64)>, i64), StoreError> {
        self.read("revocations_since", move |conn| {
            let clock: i64 = conn
                .query_row(
                    "SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
                    [],
                    |r| r.get(0),
                )
                .map_err(db_error)?;
            let mut select = conn
                .prepare_cached(
                    "SELECT token_id, expires_at, created_ms FROM revoked_tokens
                     WHERE created_ms >= ?1 AND expires_at > ?2",
                )
                .map_err(db_error)?;
            let rows = select
                .query_map([since_ms, now], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                    ))
                })
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(db_error)?;
            let revocations = rows
                .into_iter()
                .map(|(id, expires_at, created_ms)| {
                    let token_id = parse_uuid(&id)?;
                    Ok((
                        Revocation {
                            token_id,
                            expires_at,
                        },
                        created_ms,
                    ))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok((revocations, clock))
        })
        .await
    }

    async fn prune_revocations(&self, now: i64) -> Result<(), StoreError> {
        self.write("prune_revocations", move |conn| {
            conn.execute("DELETE FROM revoked_tokens WHERE expires_at <= ?1", [now])
                .map_err(db_error)?;
            Ok(())
        })
        .await
    }
}
