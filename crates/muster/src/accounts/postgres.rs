//! Accounts, token revocations and the server's secrets on PostgreSQL.
//!
//! Creating an account and revoking tokens are [`Write`]s: the writers commit them in batches
//! with the other write paths. An account is created by one statement ([`FIND_OR_CREATE`]) that
//! finds the credential's account or inserts the new one with its device, starting wallet,
//! inventory and ledger row, so an account never exists without them and two creates of one
//! credential in one batch agree on one account (the second sees the first's rows).
//!
//! An account's credentials after creation (link, unlink), other players' views of it, and its
//! deletion are rare calls: each is its own transaction on the pool, not a batched write; a
//! change locks the account's row first, so two unlinks of one account cannot both pass the
//! "not the last credential" check.

use std::time::Instant;

use async_trait::async_trait;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::accounts::store::{
    AccountRecord, AccountStore, AccountUpdate, Credential, Identity, NewUser, Revocation,
    SocialIds, TokenStore,
};
use crate::economy::store::STARTING_GRANT_REASON;
use crate::store::postgres::writer::{key_of, Write};
use crate::store::postgres::{db_error_ref, prepared, unique_violation, PostgresStore};
use crate::store::StoreError;

/// PostgreSQL's errors as accounts tell them apart: a taken username, and a credential (device,
/// custom id, email) linked to another account; the rest as the engine maps them.
fn account_error(error: &tokio_postgres::Error) -> StoreError {
    match unique_violation(error) {
        Some("users_username_key") => StoreError::UsernameTaken,
        Some(
            "users_email_key"
            | "users_custom_id_key"
            | "user_devices_pkey"
            | "users_facebook_id_key"
            | "users_google_id_key"
            | "users_gamecenter_id_key"
            | "users_steam_id_key"
            | "users_apple_id_key"
            | "users_facebook_instant_game_id_key",
        ) => StoreError::CredentialTaken,
        _ => db_error_ref(error),
    }
}

fn db_error(error: tokio_postgres::Error) -> StoreError {
    account_error(&error)
}

const IDENTITY_COLUMNS: &str = "u.id, u.username, u.disable_time_ms, u.password_hash";

fn identity_sql(credential: &Credential) -> (String, &str) {
    match credential {
        Credential::Device(id) => (
            format!("SELECT {IDENTITY_COLUMNS} FROM user_devices d JOIN users u ON u.id = d.user_id WHERE d.id = $1"),
            id,
        ),
        Credential::Custom(id) => (format!("SELECT {IDENTITY_COLUMNS} FROM users u WHERE u.custom_id = $1"), id),
        Credential::Email(email) => (format!("SELECT {IDENTITY_COLUMNS} FROM users u WHERE u.email = $1"), email),
        Credential::Social(provider, id) => (
            format!("SELECT {IDENTITY_COLUMNS} FROM users u WHERE u.{} = $1", provider.column()),
            id,
        ),
    }
}

fn identity_from(row: &Row) -> Identity {
    Identity {
        user_id: row.get(0),
        username: row.get(1),
        disabled: row.get::<_, Option<i64>>(2).is_some(),
        password_hash: row.get(3),
    }
}

/// Finds the account of a credential or creates it; see the module documentation. Parameters:
/// `$1` credential kind (`device`, `custom`, `email`, or a provider's column), `$2` the credential, `$3` new id,
/// `$4` username, `$5` password hash, `$6` now (ms), `$7`/`$8` starting currencies and amounts,
/// `$9`..`$11` starting item ids, kinds and counts, `$12` the grant's changes JSON (NULL: no
/// grant), `$13` the grant's ledger reason. One row: the account, and whether it is new.
const FIND_OR_CREATE: &str = "
WITH existing AS (
    SELECT u.id, u.username, u.disable_time_ms, u.password_hash
    FROM user_devices d JOIN users u ON u.id = d.user_id WHERE $1 = 'device' AND d.id = $2
    UNION ALL
    SELECT u.id, u.username, u.disable_time_ms, u.password_hash
    FROM users u WHERE $1 = 'custom' AND u.custom_id = $2
    UNION ALL
    SELECT u.id, u.username, u.disable_time_ms, u.password_hash
    FROM users u WHERE $1 = 'email' AND u.email = $2
    UNION ALL
    SELECT u.id, u.username, u.disable_time_ms, u.password_hash
    FROM users u WHERE $1 = 'facebook_id' AND u.facebook_id = $2
    UNION ALL
    SELECT u.id, u.username, u.disable_time_ms, u.password_hash
    FROM users u WHERE $1 = 'google_id' AND u.google_id = $2
    UNION ALL
    SELECT u.id, u.username, u.disable_time_ms, u.password_hash
    FROM users u WHERE $1 = 'gamecenter_id' AND u.gamecenter_id = $2
    UNION ALL
    SELECT u.id, u.username, u.disable_time_ms, u.password_hash
    FROM users u WHERE $1 = 'steam_id' AND u.steam_id = $2
    UNION ALL
    SELECT u.id, u.username, u.disable_time_ms, u.password_hash
    FROM users u WHERE $1 = 'apple_id' AND u.apple_id = $2
    UNION ALL
    SELECT u.id, u.username, u.disable_time_ms, u.password_hash
    FROM users u WHERE $1 = 'facebook_instant_game_id' AND u.facebook_instant_game_id = $2
),
new_user AS (
    INSERT INTO users (id, username, email, custom_id, password_hash, create_time_ms, update_time_ms,
                       facebook_id, google_id, gamecenter_id, steam_id, apple_id, facebook_instant_game_id)
    SELECT $3, $4, CASE WHEN $1 = 'email' THEN $2 END, CASE WHEN $1 = 'custom' THEN $2 END, $5, $6, $6,
           CASE WHEN $1 = 'facebook_id' THEN $2 END, CASE WHEN $1 = 'google_id' THEN $2 END, CASE WHEN $1 = 'gamecenter_id' THEN $2 END, CASE WHEN $1 = 'steam_id' THEN $2 END, CASE WHEN $1 = 'apple_id' THEN $2 END, CASE WHEN $1 = 'facebook_instant_game_id' THEN $2 END
    WHERE NOT EXISTS (SELECT 1 FROM existing)
    RETURNING id
),
device AS (
    INSERT INTO user_devices (id, user_id) SELECT $2, id FROM new_user WHERE $1 = 'device'
),
wallet AS (
    INSERT INTO wallets (user_id, currency, amount)
    SELECT n.id, c, a FROM new_user n, unnest($7::text[], $8::int8[]) AS t (c, a)
),
items AS (
    INSERT INTO inventory (user_id, item_id, kind, count, properties, update_time_ms)
    SELECT n.id, i, k, c, '{}', $6 FROM new_user n, unnest($9::text[], $10::text[], $11::int8[]) AS t (i, k, c)
),
entry AS (
    INSERT INTO ledger (user_id, changes, balances, reason, metadata, create_time_ms)
    SELECT id, $12, $12, $13, '{}', $6 FROM new_user WHERE $12 IS NOT NULL
)
SELECT id, username, disable_time_ms, password_hash, false FROM existing
UNION ALL
SELECT id, $4, NULL::int8, $5, true FROM new_user";

const FIND_OR_CREATE_TYPES: &[Type] = &[
    Type::TEXT,
    Type::TEXT,
    Type::UUID,
    Type::TEXT,
    Type::TEXT,
    Type::INT8,
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
    Type::TEXT,
    Type::TEXT,
];

/// One [`FIND_OR_CREATE`], with its parameters.
struct FindOrCreate {
    kind: &'static str,
    credential: String,
    user: NewUser,
    currencies: Vec<String>,
    amounts: Vec<i64>,
    item_ids: Vec<String>,
    kinds: Vec<String>,
    counts: Vec<i64>,
    changes: Option<String>,
}

impl FindOrCreate {
    fn new(credential: &Credential, user: NewUser) -> FindOrCreate {
        let (kind, credential) = match credential {
            Credential::Device(id) => ("device", id),
            Credential::Custom(id) => ("custom", id),
            Credential::Email(email) => ("email", email),
            Credential::Social(provider, id) => (provider.column(), id),
        };
        let grant = user.grant.as_ref();
        let wallet = grant.map(|g| g.wallet.as_slice()).unwrap_or_default();
        let items = grant.map(|g| g.items.as_slice()).unwrap_or_default();
        FindOrCreate {
            kind,
            credential: credential.clone(),
            currencies: wallet.iter().map(|(c, _)| c.clone()).collect(),
            amounts: wallet.iter().map(|(_, a)| *a).collect(),
            item_ids: items.iter().map(|i| i.item_id.clone()).collect(),
            kinds: items.iter().map(|i| i.kind.clone()).collect(),
            counts: items.iter().map(|i| i.delta).collect(),
            changes: grant.map(|g| g.changes.clone()),
            user,
        }
    }
}

impl Write for FindOrCreate {
    type Output = (Identity, bool);
    const PATH: &'static str = "find_or_create";
    const SQL: &'static str = FIND_OR_CREATE;
    const TYPES: &'static [Type] = FIND_OR_CREATE_TYPES;

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.kind,
            &self.credential,
            &self.user.id,
            &self.user.username,
            &self.user.password_hash,
            &self.user.now_ms,
            &self.currencies,
            &self.amounts,
            &self.item_ids,
            &self.kinds,
            &self.counts,
            &self.changes,
            &STARTING_GRANT_REASON,
        ]
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<(Identity, bool), StoreError> {
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Database("find_or_create returned no row".into()))?;
        Ok((identity_from(row), row.get(4)))
    }

    fn error(&self, error: &tokio_postgres::Error) -> StoreError {
        account_error(error)
    }

    /// A taken username stays taken: running it alone again would not help.
    fn retryable(&self, error: &tokio_postgres::Error) -> bool {
        let username = error.as_db_error().is_some_and(|db| {
            db.code() == &SqlState::UNIQUE_VIOLATION
                && db.constraint() == Some("users_username_key")
        });
        !username && crate::store::postgres::writer::is_retryable(error)
    }
}

/// Revocations, inserted together; one already there is left as it is, and the rows returned
/// are the ones this write recorded (the unique key decides between concurrent writers).
struct Revoke {
    token_ids: Vec<Uuid>,
    expires_at: Vec<i64>,
}

impl Write for Revoke {
    type Output = usize;
    const PATH: &'static str = "revoke";
    const SQL: &'static str = "INSERT INTO revoked_tokens (token_id, expires_at, created_ms)
        SELECT t, e, (extract(epoch FROM clock_timestamp()) * 1000)::bigint
        FROM unnest($1::uuid[], $2::int8[]) AS r(t, e) ORDER BY 1
        ON CONFLICT DO NOTHING RETURNING token_id";
    const TYPES: &'static [Type] = &[Type::UUID_ARRAY, Type::INT8_ARRAY];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![&self.token_ids, &self.expires_at]
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<usize, StoreError> {
        Ok(rows.len())
    }
}

async fn find_identity(
    client: &impl deadpool_postgres::GenericClient,
    credential: &Credential,
) -> Result<Option<Identity>, StoreError> {
    let (sql, key) = identity_sql(credential);
    let statement = prepared(client, &sql).await?;
    let row = client
        .query_opt(&statement, &[&key])
        .await
        .map_err(db_error)?;
    Ok(row.as_ref().map(identity_from))
}

#[async_trait]
impl AccountStore for PostgresStore {
    async fn find_identity(&self, credential: &Credential) -> Result<Option<Identity>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let result = find_identity(&client, credential).await;
        self.metrics.observe_db("find_identity", started.elapsed());
        result
    }

    async fn find_or_create(
        &self,
        credential: &Credential,
        new_user: NewUser,
    ) -> Result<(Identity, bool), StoreError> {
        // No read first: the statement finds the account or creates it, one round trip and one
        // statement for PostgreSQL either way (a read first would double its work per new
        // account). One credential always takes one writer: two creates of it run in order.
        self.writers
            .write(key_of(credential), FindOrCreate::new(credential, new_user))
            .await
    }

    async fn account(&self, user_id: Uuid) -> Result<Option<AccountRecord>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let row = client
            .query_opt(
                &prepared(&client, "SELECT username, display_name, avatar_url, lang_tag, location, timezone, metadata,
                        email, custom_id, disable_time_ms, create_time_ms, update_time_ms,
                        facebook_id, google_id, gamecenter_id, steam_id, apple_id, facebook_instant_game_id
                 FROM users WHERE id = $1").await?,
                &[&user_id],
            )
            .await
            .map_err(db_error)?;
        let Some(r) = row else { return Ok(None) };
        let devices = client
            .query(
                &prepared(
                    &client,
                    "SELECT id FROM user_devices WHERE user_id = $1 ORDER BY id",
                )
                .await?,
                &[&user_id],
            )
            .await
            .map_err(db_error)?
            .iter()
            .map(|d| d.get(0))
            .collect();
        let wallet = crate::economy::postgres::wallet(&client, user_id).await?;
        self.metrics.observe_db("account", started.elapsed());
        Ok(Some(AccountRecord {
            id: user_id,
            username: r.get(0),
            display_name: r.get(1),
            avatar_url: r.get(2),
            lang_tag: r.get(3),
            location: r.get(4),
            timezone: r.get(5),
            metadata: r.get(6),
            email: r.get(7),
            custom_id: r.get(8),
            devices,
            social: SocialIds::from_values((12..18).map(|i| r.get::<_, Option<String>>(i))),
            wallet,
            disable_time_ms: r.get(9),
            create_time_ms: r.get(10),
            update_time_ms: r.get(11),
        }))
    }

    async fn update_account(
        &self,
        user_id: Uuid,
        update: AccountUpdate,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let write = UpdateAccount {
            user_id,
            update,
            now_ms,
        };
        match self.writers.write(key_of(user_id), write).await? {
            true => Ok(()),
            false => Err(StoreError::NotFound),
        }
    }

    async fn set_disabled(
        &self,
        user_ids: Vec<Uuid>,
        disable_time_ms: Option<i64>,
    ) -> Result<Vec<Uuid>, StoreError> {
        // Rare (a moderator's call): one statement on the read pool, not the writers.
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "UPDATE users SET disable_time_ms = $2 WHERE id = ANY($1) RETURNING id",
        )
        .await?;
        let rows = client
            .query(&statement, &[&user_ids, &disable_time_ms])
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    async fn disabled_users(&self, deleted_since_ms: i64) -> Result<Vec<Uuid>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "SELECT id FROM users WHERE disable_time_ms IS NOT NULL
             UNION SELECT user_id FROM deleted_users WHERE delete_time_ms >= $1",
        )
        .await?;
        let rows = client
            .query(&statement, &[&deleted_since_ms])
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    async fn link(
        &self,
        user_id: Uuid,
        credential: Credential,
        password_hash: Option<String>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.link_credential(user_id, credential, password_hash, now_ms)
            .await
    }

    async fn unlink(
        &self,
        user_id: Uuid,
        credential: Credential,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        self.unlink_credential(user_id, credential, now_ms).await
    }

    async fn users_by_social(
        &self,
        provider: crate::accounts::providers::Provider,
        ids: Vec<String>,
    ) -> Result<Vec<Uuid>, StoreError> {
        let client = self.client().await?;
        let sql = format!("SELECT id FROM users WHERE {} = ANY($1)", provider.column());
        let rows = client
            .query(&prepared(&client, &sql).await?, &[&ids])
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    async fn users(
        &self,
        ids: Vec<Uuid>,
        usernames: Vec<String>,
    ) -> Result<Vec<AccountRecord>, StoreError> {
        self.users_by(ids, usernames).await
    }

    async fn random_users(
        &self,
        pivot: Uuid,
        count: usize,
    ) -> Result<Vec<AccountRecord>, StoreError> {
        let client = self.client().await?;
        let mut found = Vec::with_capacity(count);
        for sql in [
            "SELECT id, username, display_name, avatar_url, lang_tag, location, timezone,
                    metadata, disable_time_ms, create_time_ms, update_time_ms
             FROM users WHERE id > $1 AND id <> $2 ORDER BY id LIMIT $3",
            "SELECT id, username, display_name, avatar_url, lang_tag, location, timezone,
                    metadata, disable_time_ms, create_time_ms, update_time_ms
             FROM users WHERE id <= $1 AND id <> $2 ORDER BY id LIMIT $3",
        ] {
            let wanted = (count - found.len()) as i64;
            if wanted == 0 {
                break;
            }
            let statement = prepared(&client, sql).await?;
            let rows = client
                .query(&statement, &[&pivot, &Uuid::nil(), &wanted])
                .await
                .map_err(db_error)?;
            found.extend(rows.iter().map(user_from));
        }
        Ok(found)
    }

    async fn user_ids_after(
        &self,
        after: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Uuid>, StoreError> {
        let client = self.client().await?;
        // The nil id (the system user's) orders first: after it is every other account.
        let after = after.unwrap_or_else(Uuid::nil);
        let statement = prepared(
            &client,
            "SELECT id FROM users WHERE id > $1 ORDER BY id LIMIT $2",
        )
        .await?;
        let rows = client
            .query(&statement, &[&after, &(limit as i64)])
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|row| row.get::<_, Uuid>(0)).collect())
    }

    async fn delete_account(&self, user_id: Uuid, now_ms: i64) -> Result<bool, StoreError> {
        self.delete_user(user_id, now_ms).await
    }
}

/// A profile change; NULL fields are left as they are.
struct UpdateAccount {
    user_id: Uuid,
    update: AccountUpdate,
    now_ms: i64,
}

impl Write for UpdateAccount {
    type Output = bool;
    const PATH: &'static str = "update_account";
    const SQL: &'static str = "UPDATE users SET
            username = COALESCE($2, username),
            display_name = COALESCE($3, display_name),
            avatar_url = COALESCE($4, avatar_url),
            lang_tag = COALESCE($5, lang_tag),
            location = COALESCE($6, location),
            timezone = COALESCE($7, timezone),
            metadata = COALESCE($8, metadata),
            update_time_ms = $9
         WHERE id = $1
         RETURNING 1";
    const TYPES: &'static [Type] = &[
        Type::UUID,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::INT8,
    ];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let u = &self.update;
        vec![
            &self.user_id,
            &u.username,
            &u.display_name,
            &u.avatar_url,
            &u.lang_tag,
            &u.location,
            &u.timezone,
            &u.metadata,
            &self.now_ms,
        ]
    }

    /// Whether the account was there (a missing one is not an error of the batch).
    fn outcome(&self, rows: Vec<Row>) -> Result<bool, StoreError> {
        Ok(!rows.is_empty())
    }

    fn error(&self, error: &tokio_postgres::Error) -> StoreError {
        account_error(error)
    }

    fn retryable(&self, error: &tokio_postgres::Error) -> bool {
        // A taken username (the only unique column changed here) stays taken.
        error.code() != Some(&SqlState::UNIQUE_VIOLATION)
            && crate::store::postgres::writer::is_retryable(error)
    }
}

#[async_trait]
impl TokenStore for PostgresStore {
    async fn revoke(&self, revocations: Vec<Revocation>) -> Result<usize, StoreError> {
        let Some(first) = revocations.first() else {
            return Ok(0);
        };
        let key = key_of(first.token_id);
        let write = Revoke {
            token_ids: revocations.iter().map(|r| r.token_id).collect(),
            expires_at: revocations.iter().map(|r| r.expires_at).collect(),
        };
        self.writers.write(key, write).await
    }

    async fn is_revoked(&self, token_id: Uuid) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "SELECT EXISTS (SELECT 1 FROM revoked_tokens WHERE token_id = $1)",
        )
        .await?;
        client
            .query_one(&statement, &[&token_id])
            .await
            .map(|row| row.get(0))
            .map_err(db_error)
    }

    async fn revocations_since(
        &self,
        since_ms: i64,
        now: i64,
    ) -> Result<(Vec<(Revocation, i64)>, i64), StoreError> {
        let client = self.client().await?;
        // The clock is read before the rows: a row committed after this read is found by the
        // next look, which starts before this clock (see TokenService::reload_revocations).
        let clock: i64 = client
            .query_one(
                "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
                &[],
            )
            .await
            .map_err(db_error)?
            .get(0);
        let rows = client
            .query(
                "SELECT token_id, expires_at, created_ms FROM revoked_tokens
                 WHERE created_ms >= $1 AND expires_at > $2",
                &[&since_ms, &now],
            )
            .await
            .map_err(db_error)?;
        let revocations = rows
            .iter()
            .map(|r| {
                let revocation = Revocation {
                    token_id: r.get(0),
                    expires_at: r.get(1),
                };
                (revocation, r.get(2))
            })
            .collect();
        Ok((revocations, clock))
    }

    async fn prune_revocations(&self, now: i64) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute("DELETE FROM revoked_tokens WHERE expires_at <= $1", &[&now])
            .await
            .map_err(db_error)?;
        Ok(())
    }
}

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
            Credential::Social(provider, social_id) => {
                let column = provider.column();
                tx.execute(
                    &format!("UPDATE users SET {column} = $2, update_time_ms = $3 WHERE id = $1"),
                    &[&user_id, social_id, &now_ms],
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
                      + (facebook_id IS NOT NULL)::int + (google_id IS NOT NULL)::int
                      + (gamecenter_id IS NOT NULL)::int + (steam_id IS NOT NULL)::int
                      + (apple_id IS NOT NULL)::int + (facebook_instant_game_id IS NOT NULL)::int
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
            Credential::Social(provider, social_id) => {
                let column = provider.column();
                tx.execute(
                    &format!(
                        "UPDATE users SET {column} = NULL, update_time_ms = $3
                         WHERE id = $1 AND {column} IS NOT NULL AND ($2 = '' OR {column} = $2)"
                    ),
                    &[&user_id, social_id, &now_ms],
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
        // The public columns, then the ids at the identity providers (shown to everyone).
        let statement = prepared(
            &client,
            "SELECT id, username, display_name, avatar_url, lang_tag, location, timezone,
                    metadata, disable_time_ms, create_time_ms, update_time_ms,
                    facebook_id, google_id, gamecenter_id, steam_id, apple_id, facebook_instant_game_id
             FROM users WHERE id = ANY($1) OR username = ANY($2)",
        )
        .await?;
        let rows = client
            .query(&statement, &[&ids, &usernames])
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|row| AccountRecord {
                social: SocialIds::from_values((11..17).map(|i| row.get::<_, Option<String>>(i))),
                ..user_from(row)
            })
            .collect())
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
pub(crate) fn user_from(row: &Row) -> AccountRecord {
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
