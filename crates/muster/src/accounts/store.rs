//! Accounts in the store: what authentication reads and writes, the trait each engine
//! implements ([`AccountStore`]), and session-token revocations ([`TokenStore`]).

use async_trait::async_trait;
use uuid::Uuid;

use std::sync::Arc;

use crate::accounts::providers::Provider;
use crate::economy::store::StartingGrant;
use crate::store::StoreError;

/// What an account is identified by when authenticating.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Credential {
    Device(String),
    Custom(String),
    Email(String),
    /// The player's id at an identity provider (checked by the provider before it gets here).
    Social(Provider, String),
}

/// An account's ids at the identity providers (Nakama's `User` shows them to everyone).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SocialIds {
    pub facebook_id: Option<String>,
    pub google_id: Option<String>,
    pub gamecenter_id: Option<String>,
    pub steam_id: Option<String>,
    pub apple_id: Option<String>,
    pub facebook_instant_game_id: Option<String>,
}

impl SocialIds {
    /// From the values of the columns `facebook_id, google_id, gamecenter_id, steam_id,
    /// apple_id, facebook_instant_game_id`, in that order.
    pub fn from_values(mut values: impl Iterator<Item = Option<String>>) -> SocialIds {
        let mut next = || values.next().flatten();
        SocialIds {
            facebook_id: next(),
            google_id: next(),
            gamecenter_id: next(),
            steam_id: next(),
            apple_id: next(),
            facebook_instant_game_id: next(),
        }
    }
}

/// The part of an account authentication needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user_id: Uuid,
    pub username: String,
    pub disabled: bool,
    /// The argon2 hash, for email accounts only.
    pub password_hash: Option<String>,
}

/// A new account, created by `find_or_create`.
#[derive(Debug, Clone)]
pub struct NewUser {
    pub id: Uuid,
    pub username: String,
    pub password_hash: Option<String>,
    /// Unix milliseconds.
    pub now_ms: i64,
    /// Given to the account in the transaction that creates it, when set.
    pub grant: Option<Arc<StartingGrant>>,
}

/// A whole account, as `GET /v2/account` shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccountRecord {
    pub id: Uuid,
    pub username: String,
    pub display_name: String,
    pub avatar_url: String,
    pub lang_tag: String,
    pub location: String,
    pub timezone: String,
    pub metadata: String,
    pub email: Option<String>,
    pub custom_id: Option<String>,
    pub devices: Vec<String>,
    /// Ids at the identity providers (filled by `account` and `users`, not by listings of
    /// friends or group members).
    pub social: SocialIds,
    /// Balances by currency, sorted by currency.
    pub wallet: Vec<(String, i64)>,
    pub disable_time_ms: Option<i64>,
    pub create_time_ms: i64,
    pub update_time_ms: i64,
}

/// Fields to change on an account; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccountUpdate {
    pub username: Option<String>,
    pub display_name: Option<String>,
    pub avatar_url: Option<String>,
    pub lang_tag: Option<String>,
    pub location: Option<String>,
    pub timezone: Option<String>,
    pub metadata: Option<String>,
}

impl AccountUpdate {
    pub fn is_empty(&self) -> bool {
        *self == AccountUpdate::default()
    }
}

/// A revoked token id and when the token would have expired anyway (unix seconds); after that
/// the revocation can be forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revocation {
    pub token_id: Uuid,
    pub expires_at: i64,
}

/// Accounts: identities, creation (with the starting grant), profiles.
/// Each write is durable when its future resolves.
#[async_trait]
pub trait AccountStore: Send + Sync {
    /// The account linked to `credential`, if any.
    async fn find_identity(&self, credential: &Credential) -> Result<Option<Identity>, StoreError>;

    /// The account linked to `credential`, created from `new_user` when there is none.
    /// Returns the identity and whether this call created it. Fails with `UsernameTaken` when
    /// `new_user.username` belongs to another account.
    async fn find_or_create(
        &self,
        credential: &Credential,
        new_user: NewUser,
    ) -> Result<(Identity, bool), StoreError>;

    async fn account(&self, user_id: Uuid) -> Result<Option<AccountRecord>, StoreError>;

    /// Applies `update`; `NotFound` when the account is gone, `UsernameTaken` on a clash.
    async fn update_account(
        &self,
        user_id: Uuid,
        update: AccountUpdate,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// Bans (`disable_time_ms` set) or unbans (`None`) the accounts of `user_ids`; answers the
    /// ids that exist (the others are ignored).
    async fn set_disabled(
        &self,
        user_ids: Vec<Uuid>,
        disable_time_ms: Option<i64>,
    ) -> Result<Vec<Uuid>, StoreError>;

    /// Every banned account's id, and every account deleted at or after `deleted_since_ms`
    /// (whose tokens may still be alive).
    async fn disabled_users(&self, deleted_since_ms: i64) -> Result<Vec<Uuid>, StoreError>;

    /// Links `credential` to the account (an email with `password_hash`): a device is added to
    /// its devices, a custom id or email replaces the one it had. `CredentialTaken` when
    /// another account has it, `NotFound` when the account is gone. Linking what the account
    /// already has changes nothing but its update time.
    async fn link(
        &self,
        user_id: Uuid,
        credential: Credential,
        password_hash: Option<String>,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// The accounts whose id at `provider` is one of `ids` (at most a few thousand ids).
    async fn users_by_social(
        &self,
        provider: Provider,
        ids: Vec<String>,
    ) -> Result<Vec<Uuid>, StoreError>;

    /// Unlinks `credential` from the account, unless it is the account's last one; whether it
    /// did (false: not linked to this account, or the last). For a custom id or email, an empty
    /// value means whichever the account has.
    async fn unlink(
        &self,
        user_id: Uuid,
        credential: Credential,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// The accounts of `ids` and `usernames`, each at most once, in no particular order
    /// (without devices or wallet); names and ids that match nothing are left out.
    async fn users(
        &self,
        ids: Vec<Uuid>,
        usernames: Vec<String>,
    ) -> Result<Vec<AccountRecord>, StoreError>;

    /// Up to `count` accounts from a random place (Nakama's `usersGetRandom`): those whose id
    /// follows `pivot`, then from the first id when they are fewer; the system user left out.
    async fn random_users(
        &self,
        pivot: Uuid,
        count: usize,
    ) -> Result<Vec<AccountRecord>, StoreError>;

    /// Up to `limit` user ids that follow `after` (from the first when `None`), in the order of
    /// the ids; the system user left out. A walk of every account, a page at a time.
    async fn user_ids_after(
        &self,
        after: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Uuid>, StoreError>;

    /// Deletes the account and what it owns (devices, wallet, inventory and ledger, storage
    /// objects, leaderboard records) in one transaction, and records the deletion (see
    /// `disabled_users`); whether it existed.
    async fn delete_account(&self, user_id: Uuid, now_ms: i64) -> Result<bool, StoreError>;
}

/// Session tokens: revocations that every node honours.
/// Each write is durable when its future resolves.
#[async_trait]
pub trait TokenStore: Send + Sync {
    /// Records `revocations`; one already recorded is left as it is. Answers how many this call
    /// recorded: one conditional write decides, so of two calls revoking the same token (on any
    /// nodes, at once) exactly one counts it. That is what makes a refresh token single use.
    async fn revoke(&self, revocations: Vec<Revocation>) -> Result<usize, StoreError>;

    /// The revocations recorded at or after `since_ms` (the store's clock, Unix ms) that are
    /// still in force at `now` (Unix seconds), each with when it was recorded, and the store's
    /// clock at the time of reading.
    async fn revocations_since(
        &self,
        since_ms: i64,
        now: i64,
    ) -> Result<(Vec<(Revocation, i64)>, i64), StoreError>;

    /// Whether `token_id` has been revoked (and its revocation not yet pruned).
    async fn is_revoked(&self, token_id: Uuid) -> Result<bool, StoreError>;

    /// Deletes the revocations whose tokens have expired by `now` (Unix seconds).
    async fn prune_revocations(&self, now: i64) -> Result<(), StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] = &[
    crate::migration!(1, "accounts", "0001_accounts"),
    crate::migration!(7, "revocation_changes", "0007_revocation_changes"),
    crate::migration!(12, "banned_users", "0012_banned_users"),
    crate::migration!(13, "deleted_users", "0013_deleted_users"),
    crate::migration!(21, "social_ids", "0021_social_ids"),
];
