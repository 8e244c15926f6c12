//! The console's rows in the store: its users, their login sessions and the audit log of every
//! change made through it, and the trait each engine implements (see `crate::console` for the
//! rules).

use async_trait::async_trait;

use crate::accounts::store::AccountRecord;
use crate::store::StoreError;

/// A console user, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleUserRow {
    pub username: String,
    /// Argon2id, in the PHC string format.
    pub password_hash: String,
    /// `admin`, `developer` or `readonly`.
    pub role: String,
    pub create_time_ms: i64,
}

/// A console login. Only the SHA-256 of its token is kept, so a copy of the database lets no
/// one in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSessionRow {
    /// Hex SHA-256 of the cookie's token.
    pub token_hash: String,
    pub username: String,
    /// What every change must carry in `X-CSRF-Token`.
    pub csrf: String,
    pub create_time_ms: i64,
    pub expire_time_ms: i64,
}

/// One change made through the console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    /// Increasing; what the log pages by. 0 in a row to append (the store numbers it).
    pub id: i64,
    pub time_ms: i64,
    /// The console user who made it.
    pub username: String,
    /// What was done: `wallet_update`, `user_create`, `storage_write`, ….
    pub action: String,
    /// What it was done to: a user id, `collection/key/owner`, a console username, ….
    pub target: String,
    /// The request's details, as JSON.
    pub detail: String,
}

/// Console users, sessions and the audit log. Each write is durable when its future resolves.
#[async_trait]
pub trait ConsoleStore: Send + Sync {
    /// Creates `user`, or replaces the password hash and role of the user with its name.
    async fn put_console_user(&self, user: ConsoleUserRow) -> Result<(), StoreError>;

    /// Creates `user`; `UsernameTaken` when the name is in use.
    async fn create_console_user(&self, user: ConsoleUserRow) -> Result<(), StoreError>;

    /// The user named `username`.
    async fn console_user(&self, username: &str) -> Result<Option<ConsoleUserRow>, StoreError>;

    /// Every console user, by name.
    async fn console_users(&self) -> Result<Vec<ConsoleUserRow>, StoreError>;

    /// Deletes a user and their sessions; `NotFound` when there is none.
    async fn delete_console_user(&self, username: &str) -> Result<(), StoreError>;

    /// Stores a new session, deletes the sessions that expired before it was made, and keeps at
    /// most `keep` of its user's sessions (the newest: the oldest end).
    async fn create_console_session(
        &self,
        session: ConsoleSessionRow,
        keep: u32,
    ) -> Result<(), StoreError>;

    /// The session with this token hash, unexpired at `now_ms`, with its user's role now.
    async fn console_session(
        &self,
        token_hash: &str,
        now_ms: i64,
    ) -> Result<Option<(ConsoleSessionRow, String)>, StoreError>;

    /// Ends a session (a logout); whether there was one.
    async fn delete_console_session(&self, token_hash: &str) -> Result<bool, StoreError>;

    /// Appends `entry` to the audit log; its id.
    async fn append_audit(&self, entry: AuditRow) -> Result<i64, StoreError>;

    /// Accounts an operator looks for (without devices or wallet), by username, at most
    /// `limit`: with `text` empty, every account after the username `after`; otherwise those
    /// whose id, device id, email or custom id is `text`, or whose username or display name
    /// starts with it in any case.
    async fn search_accounts(
        &self,
        text: &str,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<AccountRecord>, StoreError>;

    /// Up to `limit` entries, newest first, older than `before_id` when it is set.
    async fn audit_entries(
        &self,
        before_id: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRow>, StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] = &[
    crate::migration!(18, "console", "0018_console"),
    crate::migration!(19, "player_views", "0019_player_views"),
];
