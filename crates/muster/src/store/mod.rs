//! Persistence behind one trait, [`Store`], with two engines: [`sqlite`] (embedded, the default)
//! and [`postgres`] (production; also CockroachDB). Domain code sees only the trait; the engines
//! enforce in SQL what SQL can enforce (unique usernames, devices, emails) and nothing else.

pub mod console;
pub mod groups;
pub mod ledger;
pub mod links;
pub mod migrations;
pub mod postgres;
pub mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use crate::base::config::Config;
use crate::base::metrics::Metrics;
pub use console::{AuditRow, ConsoleSessionRow, ConsoleStore, ConsoleUserRow};
pub use ledger::{
    Changes, InventoryItem, ItemDelta, LedgerEntry, LedgerOutcome, LedgerWrite, Receipt, Refusal,
    StartingGrant,
};
pub use links::{ClickCount, Fallbacks, LinkRecord};

/// A failed storage operation, as domain code needs to tell them apart.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("username is already in use")]
    UsernameTaken,
    /// A device id, custom id or email that another account has.
    #[error("credential is linked to another account")]
    CredentialTaken,
    /// A link code (or custom slug) that another link has.
    #[error("code is already in use")]
    CodeTaken,
    #[error("not found")]
    NotFound,
    /// A per-user bound would be passed.
    #[error("limit reached")]
    LimitReached,
    #[error("store is closed")]
    Closed,
    /// The database cannot be reached (down, restarting, refusing connections); nothing of the
    /// write was committed. Retrying later may succeed.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Database(String),
    /// A group change refused by its rules (nothing changed).
    #[error(transparent)]
    Group(#[from] groups::GroupRefusal),
}

/// What an account is identified by when authenticating.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Credential {
    Device(String),
    Custom(String),
    Email(String),
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

/// A chat message kept in a channel's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelMessageRecord {
    pub id: Uuid,
    /// Nakama's channel id (`2...room`, `4.userA.userB.`).
    pub channel_id: String,
    /// 0 chat (an update changes the content, not the code).
    pub code: i32,
    pub sender_id: Uuid,
    pub username: String,
    /// A JSON object, as text.
    pub content: String,
    pub create_time_ms: i64,
    pub update_time_ms: i64,
}

/// A stored message and its position in the history (insertion order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRow {
    pub seq: i64,
    pub message: ChannelMessageRecord,
}

/// Which rows of a channel's history to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryQuery {
    pub channel_id: String,
    /// Oldest first when true, newest first when false.
    pub ascending: bool,
    /// Only rows past this position in the reading direction (`seq >` ascending, `seq <`
    /// descending).
    pub from_seq: Option<i64>,
    pub limit: usize,
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

    /// Deletes the account and what it owns (devices, wallet, inventory and ledger, storage
    /// objects, leaderboard records) in one transaction, and records the deletion (see
    /// `disabled_users`); whether it existed.
    async fn delete_account(&self, user_id: Uuid, now_ms: i64) -> Result<bool, StoreError>;
}

/// A notification kept for its user until they delete it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationRecord {
    /// Its place in the store's order (0 until stored); listings follow it.
    pub seq: i64,
    pub id: Uuid,
    pub user_id: Uuid,
    pub subject: String,
    /// A JSON object, as text.
    pub content: String,
    pub code: i32,
    /// `None`: sent by the system.
    pub sender_id: Option<Uuid>,
    pub create_time_ms: i64,
}

/// Stored notifications. Each write is durable when its future resolves.
#[async_trait]
pub trait NotificationStore: Send + Sync {
    /// Stores `records` (any users'); of each user's notifications only the newest
    /// `max_per_user` are kept. `NotFound` when a user does not exist (nothing is stored).
    async fn insert_notifications(
        &self,
        records: Vec<NotificationRecord>,
        max_per_user: usize,
    ) -> Result<(), StoreError>;

    /// `user_id`'s notifications in the order they were stored, those after `after_seq`; at
    /// most `limit`.
    async fn list_notifications(
        &self,
        user_id: Uuid,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<NotificationRecord>, StoreError>;

    /// Deletes those of `ids` that are `user_id`'s; how many.
    async fn delete_notifications(
        &self,
        user_id: Uuid,
        ids: Vec<Uuid>,
    ) -> Result<usize, StoreError>;
}

/// Nakama's friend states: one edge per direction between two users.
pub mod friend_state {
    pub const FRIEND: i32 = 0;
    pub const INVITE_SENT: i32 = 1;
    pub const INVITE_RECEIVED: i32 = 2;
    pub const BLOCKED: i32 = 3;

    /// What adding a friend does, given the adder's edge to the target (`mine`) and the
    /// target's to the adder (`theirs`): both engines decide alike.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum AddAction {
        /// The target invited the adder: both become friends.
        Accept,
        /// No edge either way: an invite (if the target exists and has room).
        Invite,
        /// Already friends or invited, or blocked either way.
        Nothing,
    }

    pub fn add_action(mine: Option<i32>, theirs: Option<i32>) -> AddAction {
        match (mine, theirs) {
            (Some(INVITE_RECEIVED), Some(INVITE_SENT)) => AddAction::Accept,
            (None, None) | (None, Some(FRIEND | INVITE_SENT | INVITE_RECEIVED)) => {
                AddAction::Invite
            }
            _ => AddAction::Nothing,
        }
    }
}

/// One of a user's edges, with the other user's account.
#[derive(Debug, Clone, PartialEq)]
pub struct FriendRecord {
    pub user: AccountRecord,
    pub state: i32,
    /// The listing's order within a state: when the edge was made (microseconds).
    pub position: i64,
    pub update_time_ms: i64,
    pub metadata: String,
}

/// What an add did for one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FriendAdded {
    /// An invite sent (the target has one received).
    Invited,
    /// The target's invite accepted: both are friends now.
    Accepted,
}

/// Friends, invites and blocks. Each write is durable when its future resolves.
#[async_trait]
pub trait FriendStore: Send + Sync {
    /// `user` adds each of `targets`, as Nakama: accepts a target's invite, or sends one; a
    /// target `user` blocked, one that blocked `user`, one already a friend or invited, one that
    /// does not exist, and one whose edges number `max_edges` already are skipped. Answers what
    /// happened to each target that changed. `LimitReached` when `user`'s own edges would pass
    /// `max_edges` (nothing changes).
    async fn add_friends(
        &self,
        user: Uuid,
        targets: Vec<Uuid>,
        now_us: i64,
        max_edges: usize,
    ) -> Result<Vec<(Uuid, FriendAdded)>, StoreError>;

    /// Removes `user`'s edges to `targets` and theirs to `user` (unless they blocked `user`):
    /// unfriends, cancels or rejects invites, unblocks. Answers the targets whose edge to
    /// `user` went too (a friendship or an invite ended for them).
    async fn delete_friends(&self, user: Uuid, targets: Vec<Uuid>)
        -> Result<Vec<Uuid>, StoreError>;

    /// `user` blocks each of `targets` (that exist): its edge becomes blocked, theirs to `user`
    /// goes (unless they blocked `user` too). `LimitReached` past `max_edges`.
    async fn block_friends(
        &self,
        user: Uuid,
        targets: Vec<Uuid>,
        now_us: i64,
        max_edges: usize,
    ) -> Result<(), StoreError>;

    /// `user`'s edges in state order then position, those of `state` only when given, after
    /// `(state, position, other user)` when given; at most `limit`.
    async fn list_friends(
        &self,
        user: Uuid,
        state: Option<i32>,
        after: Option<(i32, i64, Uuid)>,
        limit: usize,
    ) -> Result<Vec<FriendRecord>, StoreError>;

    /// Friends of `user`'s friends who are not `user` or already `user`'s friends, as
    /// `(referrer, user)` in that order, after `after` when given; at most `limit`.
    async fn friends_of_friends(
        &self,
        user: Uuid,
        after: Option<(Uuid, Uuid)>,
        limit: usize,
    ) -> Result<Vec<(Uuid, Uuid)>, StoreError>;

    /// The state of `user`'s edge to `other`, if any.
    async fn friend_state(&self, user: Uuid, other: Uuid) -> Result<Option<i32>, StoreError>;
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

/// Server secrets generated once and shared by every node on the database.
/// Each write is durable when its future resolves.
#[async_trait]
pub trait SecretStore: Send + Sync {
    /// The secret named `name`, set to `candidate` if it did not exist yet. Every node sharing
    /// the database reads the same value.
    async fn secret(&self, name: &str, candidate: String) -> Result<String, StoreError>;
}

/// Chat: persisted channel messages and their history.
/// Each write is durable when its future resolves.
#[async_trait]
pub trait ChatStore: Send + Sync {
    /// Stores a chat message; durable when the future resolves. Concurrent calls are written
    /// together (one transaction for many messages).
    async fn insert_channel_message(&self, message: ChannelMessageRecord)
        -> Result<(), StoreError>;

    /// Replaces the content of message `id` in `channel_id` if `sender` sent it; returns its
    /// creation time. `NotFound` when there is no such message of that sender.
    async fn update_channel_message(
        &self,
        id: Uuid,
        sender: Uuid,
        channel_id: &str,
        content: String,
        now_ms: i64,
    ) -> Result<i64, StoreError>;

    /// Deletes message `id` in `channel_id` if `sender` sent it; returns its creation time.
    /// `NotFound` when there is no such message of that sender.
    async fn delete_channel_message(
        &self,
        id: Uuid,
        sender: Uuid,
        channel_id: &str,
    ) -> Result<i64, StoreError>;

    /// Reads a slice of a channel's history.
    async fn channel_messages(&self, query: HistoryQuery) -> Result<Vec<HistoryRow>, StoreError>;

    /// Up to `limit` messages `sender` sent, in any channel, newest first, before `before_seq`.
    async fn sender_messages(
        &self,
        sender: Uuid,
        before_seq: Option<i64>,
        limit: usize,
    ) -> Result<Vec<HistoryRow>, StoreError>;
}

/// The economy: atomic ledgered changes, balances, items, the ledger.
/// Each write is durable when its future resolves.
#[async_trait]
pub trait EconomyStore: Send + Sync {
    /// Applies `write` all or nothing, with its ledger row, durably; see [`ledger`] for the
    /// rules. `NotFound` when the account does not exist.
    async fn apply_ledger(&self, write: LedgerWrite) -> Result<LedgerOutcome, StoreError>;

    /// The account's balances, sorted by currency.
    async fn wallet(&self, user_id: Uuid) -> Result<Vec<(String, i64)>, StoreError>;

    /// Up to `limit` of the account's item stacks with a count above zero, sorted by item id,
    /// after item `after` if given.
    async fn inventory(
        &self,
        user_id: Uuid,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<InventoryItem>, StoreError>;

    /// Up to `limit` of the account's ledger rows, newest first, older than `before` if given.
    async fn ledger(
        &self,
        user_id: Uuid,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<LedgerEntry>, StoreError>;
}

/// A storage object's identity: collection, key and owner (the nil id: the system).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StorageKey {
    pub collection: String,
    pub key: String,
    pub owner: Uuid,
}

/// A stored object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageRecord {
    pub id: StorageKey,
    pub value: String,
    pub version: String,
    pub read: i16,
    pub write: i16,
    pub create_time_ms: i64,
    pub update_time_ms: i64,
}

/// What a write expects to find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Anything (last write wins).
    Any,
    /// Nothing: the object must not exist yet.
    Absent,
    /// The object at this version.
    Version(String),
}

/// One object of a storage write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageWrite {
    pub id: StorageKey,
    pub value: String,
    /// The version the value will have.
    pub version: String,
    pub read: i16,
    pub write: i16,
    pub expected: Expected,
}

/// One object of a storage delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageDelete {
    pub id: StorageKey,
    /// Delete only at this version.
    pub version: Option<String>,
}

/// Why a storage write or delete changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageRefusal {
    /// An object was not at the version expected (or existed where none was expected).
    Version,
    /// An object's write permission does not let the caller change it.
    Permission,
    /// A delete found no object to delete (as asked: missing, other version or not writable).
    NotDeleted,
    /// The write would give its owner more objects than the limit.
    TooManyObjects,
}

/// When a written object was created and last updated (Unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageTimes {
    pub create_time_ms: i64,
    pub update_time_ms: i64,
}

/// Which objects a listing reads: one collection, one owner's or everyone's, from a read
/// permission up, after a position, in (read, key, owner) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageListing {
    pub collection: String,
    pub owner: Option<Uuid>,
    pub min_read: i16,
    /// Where the previous page ended: (read, key, owner).
    pub after: Option<(i16, String, Uuid)>,
    pub limit: usize,
}

/// Storage objects. Each write is durable when its future resolves; a batch is all or nothing.
#[async_trait]
pub trait StorageStore: Send + Sync {
    /// Writes every object of `writes` or none: refused (nothing changed) when one is not as
    /// expected, or, unless `authoritative`, is not writable by its owner (write 1), or when
    /// the objects it creates would give their owner more than `owner_limit` (the objects of
    /// one call have one owner when a limit is given).
    async fn write_objects(
        &self,
        writes: Vec<StorageWrite>,
        authoritative: bool,
        owner_limit: Option<u64>,
    ) -> Result<Result<Vec<StorageTimes>, StorageRefusal>, StoreError>;

    /// The objects of `ids` that exist (in no particular order).
    async fn read_objects(&self, ids: Vec<StorageKey>) -> Result<Vec<StorageRecord>, StoreError>;

    /// A page of objects; see [`StorageListing`].
    async fn list_objects(&self, listing: StorageListing)
        -> Result<Vec<StorageRecord>, StoreError>;

    /// Up to `limit` of `owner`'s objects in every collection, in (collection, key) order after
    /// `after` (an operator's view of a player; a player's objects are bounded by
    /// `storage.max_objects_per_user`).
    async fn owner_objects(
        &self,
        owner: Uuid,
        after: Option<(String, String)>,
        limit: usize,
    ) -> Result<Vec<StorageRecord>, StoreError>;

    /// Deletes every object of `deletes` or none: refused when one is missing, at another
    /// version than given, or (unless `authoritative`) not writable; an authoritative delete
    /// without a version of a missing object is no refusal.
    async fn delete_objects(
        &self,
        deletes: Vec<StorageDelete>,
        authoritative: bool,
    ) -> Result<Result<(), StorageRefusal>, StoreError>;
}

/// A leaderboard's definition, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderboardDef {
    pub id: String,
    /// Only server code may write records.
    pub authoritative: bool,
    /// 0 ascending (lower is better), 1 descending.
    pub sort_order: i16,
    /// 0 best, 1 set, 2 increment, 3 decrement.
    pub operator: i16,
    /// A cron expression; empty: never resets.
    pub reset_schedule: String,
    pub metadata: String,
    pub create_time_ms: i64,
    /// A tournament's own settings (all zero for a plain leaderboard).
    pub tournament: TournamentFields,
}

/// How long a claimed leaderboard event is remembered (30 days).
pub const EVENT_CLAIMS_KEPT_SECS: i64 = 30 * 24 * 3600;

/// What makes a leaderboard a tournament.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TournamentFields {
    pub title: String,
    pub description: String,
    pub category: i32,
    /// Seconds each period is open for scores; 0: not a tournament.
    pub duration: i64,
    /// Unix seconds; `end_time` 0: no end.
    pub start_time: i64,
    pub end_time: i64,
    /// Most records a period may hold; 0: no bound.
    pub max_size: i32,
    /// Most submissions one record may take; 0: no bound.
    pub max_num_score: i32,
    pub join_required: bool,
}

/// The bounds a tournament write or join is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TournamentRules {
    pub max_size: i32,
    pub max_num_score: i32,
    pub join_required: bool,
}

/// Why a tournament write or join changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TournamentRefusal {
    /// The period holds `max_size` records already.
    Full,
    /// The record has taken `max_num_score` submissions.
    MaxNumScore,
    /// Joining is required and the owner has not joined.
    NotJoined,
}

/// One leaderboard record, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderboardRecordRow {
    pub leaderboard_id: String,
    /// The Unix second its period ends; 0: never.
    pub expiry_time: i64,
    pub owner_id: Uuid,
    pub username: String,
    pub score: i64,
    pub subscore: i64,
    pub num_score: i32,
    pub max_num_score: i32,
    pub metadata: String,
    pub create_time_ms: i64,
    pub update_time_ms: i64,
}

/// How a submitted score changes a record: the operator and, for `best`, which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreOp {
    /// Keep the better of the old and the new (lower when `ascending`), score and subscore each.
    Best {
        ascending: bool,
    },
    Set,
    Increment,
    /// Subtract, never below zero.
    Decrement,
}

/// One score submitted to a leaderboard's period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordWrite {
    pub leaderboard_id: String,
    pub expiry_time: i64,
    pub owner_id: Uuid,
    pub username: String,
    pub score: i64,
    pub subscore: i64,
    /// Replaces the record's metadata when given.
    pub metadata: Option<String>,
    pub op: ScoreOp,
    pub now_ms: i64,
}

/// A page position in a period: after (or before) this record, in ascending
/// (score, subscore, owner) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPosition {
    pub score: i64,
    pub subscore: i64,
    pub owner_id: Uuid,
}

/// An owner's record and its neighbours in ascending (score, subscore, owner) order, each side
/// nearest first.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordsAround {
    pub mine: LeaderboardRecordRow,
    /// Records after the owner's, nearest first.
    pub after: Vec<LeaderboardRecordRow>,
    /// Records before the owner's, nearest first.
    pub before: Vec<LeaderboardRecordRow>,
}

/// Leaderboards and their records. Each write is durable when its future resolves.
#[async_trait]
pub trait LeaderboardStore: Send + Sync {
    /// Stores `def` unless a leaderboard of its id exists; whether it was created.
    async fn create_leaderboard(&self, def: LeaderboardDef) -> Result<bool, StoreError>;

    /// Claims the event `kind` of `leaderboard_id` due at the Unix second `at` for `node`:
    /// true for the first claim (durably recorded), false once claimed. Prunes that
    /// leaderboard's claims of the kind older than [`EVENT_CLAIMS_KEPT_SECS`].
    async fn claim_event(
        &self,
        leaderboard_id: String,
        kind: i16,
        at: i64,
        node: String,
    ) -> Result<bool, StoreError>;

    /// Every leaderboard's definition.
    async fn leaderboards(&self) -> Result<Vec<LeaderboardDef>, StoreError>;

    /// Removes a leaderboard and all its records.
    async fn delete_leaderboard(&self, id: String) -> Result<(), StoreError>;

    /// Replaces a leaderboard's (or tournament's) metadata; whether it exists.
    async fn set_leaderboard_metadata(
        &self,
        id: String,
        metadata: String,
    ) -> Result<bool, StoreError>;

    /// Applies a score to the owner's record of the period (created if absent) and answers the
    /// record as it is afterwards; `num_score` counts the submissions that changed it.
    async fn write_record(&self, write: RecordWrite) -> Result<LeaderboardRecordRow, StoreError>;

    /// Deletes the owner's record of the period; whether there was one.
    async fn delete_record(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        owner_id: Uuid,
    ) -> Result<bool, StoreError>;

    /// Up to `limit` records of the period in ascending (score, subscore, owner) order after
    /// `after`, or in descending order before it when `descending`.
    async fn list_records(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        position: Option<RecordPosition>,
        descending: bool,
        limit: usize,
    ) -> Result<Vec<LeaderboardRecordRow>, StoreError>;

    /// The owner's record of the period and up to `limit` records on each side of it, read
    /// together (one read, one round trip); `None` when the owner has none.
    async fn records_around(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        owner_id: Uuid,
        limit: usize,
    ) -> Result<Option<RecordsAround>, StoreError>;

    /// The records of the period owned by `owners` (in no particular order).
    async fn records_of(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        owners: Vec<Uuid>,
    ) -> Result<Vec<LeaderboardRecordRow>, StoreError>;

    /// A tournament submission: as [`LeaderboardStore::write_record`], but every submission
    /// counts in `num_score`, and it is refused past `max_num_score`, and for a new record when
    /// joining is required or the period holds `max_size` records.
    async fn write_tournament_record(
        &self,
        write: RecordWrite,
        rules: TournamentRules,
    ) -> Result<Result<LeaderboardRecordRow, TournamentRefusal>, StoreError>;

    /// Joins the owner to a tournament's period: an empty record (score 0, `num_score` 0);
    /// whether they were new (joining twice changes nothing), or refused when it is full.
    async fn join_tournament(
        &self,
        write: RecordWrite,
        rules: TournamentRules,
    ) -> Result<Result<bool, TournamentRefusal>, StoreError>;

    /// Every (owner, score, subscore, num_score) of the period: what ranks are built from.
    async fn period_scores(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
    ) -> Result<Vec<(Uuid, i64, i64, i32)>, StoreError>;
}

/// Invite links and their clicks.
/// Each write is durable when its future resolves.
#[async_trait]
pub trait LinkStore: Send + Sync {
    /// Stores `link`. When it is reusable and its owner already has a reusable link to the same
    /// URL, returns that link instead, and `false`; concurrent calls for one URL agree on one
    /// link. `CodeTaken` when another link has the code.
    async fn create_link(&self, link: LinkRecord) -> Result<(LinkRecord, bool), StoreError>;

    /// The link with this code, disabled or not.
    async fn link(&self, code: &str) -> Result<Option<LinkRecord>, StoreError>;

    /// Counts one visit on `day` of a link with a visit limit, only if it is enabled and under
    /// its limit: the visits counted now, or `None` when it may not be visited.
    async fn take_visit(&self, code: &str, day: i32) -> Result<Option<i64>, StoreError>;

    /// Adds clicks to the links' per-day counts, in one transaction.
    async fn add_clicks(&self, clicks: Vec<ClickCount>) -> Result<(), StoreError>;

    /// A link's clicks on each of `days` that had any (day, count), oldest first.
    async fn link_clicks(&self, code: &str, days: Vec<i32>) -> Result<Vec<(i32, i64)>, StoreError>;

    /// Disables a link for good (it answers 410 from then on); `NotFound` when there is none.
    async fn disable_link(&self, code: &str, now_ms: i64) -> Result<(), StoreError>;
}

/// A matchmaker ticket as a cluster keeps it ([`MatchmakerStore`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTicket {
    pub id: Uuid,
    pub session_id: Uuid,
    /// The player's user id, for the limit per user.
    pub user_id: Uuid,
    /// The node its session is on, and that node's run.
    pub node: String,
    pub incarnation: i64,
    pub created_ms: i64,
    /// The ticket itself, as JSON (the matchmaker's to read).
    pub body: String,
}

/// What [`MatchmakerStore::add_ticket`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketAdded {
    Added,
    /// The session holds its most tickets already.
    SessionFull,
    /// The user holds their most tickets already.
    UserFull,
}

/// Picks the groups of a pass from every waiting ticket (oldest first).
pub type PickGroups<'a> = dyn Fn(Vec<StoredTicket>) -> Vec<Vec<StoredTicket>> + Send + Sync + 'a;

/// The tickets of a cluster's one matchmaker, and the lease saying which node runs its passes.
/// Each write is durable when its future resolves.
#[async_trait]
pub trait MatchmakerStore: Send + Sync {
    /// Stores `ticket` unless its session has `max_per_session` tickets already, or its user
    /// `max_per_user` (counted under a lock per user, so that nodes adding at once agree).
    async fn add_ticket(
        &self,
        ticket: StoredTicket,
        max_per_session: i64,
        max_per_user: i64,
    ) -> Result<TicketAdded, StoreError>;

    /// Removes ticket `ticket` of session `session`; false when there was none.
    async fn remove_ticket(&self, session: Uuid, ticket: Uuid) -> Result<bool, StoreError>;

    /// Removes every ticket of `session`.
    async fn remove_session_tickets(&self, session: Uuid) -> Result<(), StoreError>;

    /// Removes the tickets of `node` from runs other than `keep_incarnation` (0: of every run);
    /// how many.
    async fn remove_node_tickets(
        &self,
        node: &str,
        keep_incarnation: i64,
    ) -> Result<u64, StoreError>;

    /// Takes lease `name` for `holder` for `ttl_ms` if it is free, expired or already
    /// `holder`'s (a new run of it); the new epoch, or `None` when another holds it.
    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Option<i64>, StoreError>;

    /// One pass, fenced: if `holder` still holds lease `name` at `epoch`, extends it by `ttl_ms`,
    /// gives `pick` every ticket and deletes the tickets of the groups it returns, all in one
    /// transaction; the groups, or `None` when the lease was lost (nothing changed).
    async fn take_groups(
        &self,
        name: &str,
        holder: &str,
        epoch: i64,
        ttl_ms: i64,
        pick: &PickGroups<'_>,
    ) -> Result<Option<Vec<Vec<StoredTicket>>>, StoreError>;
}

/// A shard's lease as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLease {
    pub shard: i32,
    pub holder: String,
    pub epoch: i64,
    /// Whether it is held now (not expired, not released), by the database's clock.
    pub held: bool,
}

/// One term of a shard: `holder` ran it at `epoch` from `started_ms` until its release
/// (`ended_ms`) or, without one, its lease's last expiry (the database's clock, Unix ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardTerm {
    pub shard: i32,
    pub epoch: i64,
    pub holder: String,
    pub started_ms: i64,
    pub expires_at_ms: i64,
    pub ended_ms: Option<i64>,
}

/// The leases saying which node runs each shard of a clustered world, and their terms.
#[async_trait]
pub trait WorldLeaseStore: Send + Sync {
    /// Takes shard `shard`'s lease for `holder` for `ttl_ms` if it is free (never held,
    /// expired or released); its new epoch, or `None` when it is held.
    async fn take_shard(
        &self,
        shard: i32,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Option<i64>, StoreError>;

    /// Extends `holder`'s lease of `shard` at `epoch` by `ttl_ms` from now; false when it was
    /// lost (expired or taken): the holder must stop at once.
    async fn renew_shard(
        &self,
        shard: i32,
        holder: &str,
        epoch: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Gives the lease up (its term ends now): another node may take the shard at once.
    async fn release_shard(&self, shard: i32, holder: &str, epoch: i64) -> Result<(), StoreError>;

    /// Every shard's lease.
    async fn shard_leases(&self) -> Result<Vec<ShardLease>, StoreError>;

    /// Shard `shard`'s terms, oldest first.
    async fn shard_terms(&self, shard: i32) -> Result<Vec<ShardTerm>, StoreError>;

    /// The world's volume id: `id` when none is recorded yet (then it is recorded), else the
    /// one recorded.
    async fn world_volume(&self, id: &str) -> Result<String, StoreError>;
}

/// Every storage operation the server performs, one trait per domain: a service holds only
/// the part it uses (chat an `Arc<dyn ChatStore>`, the economy an `Arc<dyn EconomyStore>`, …).
#[async_trait]
pub trait Store:
    AccountStore
    + TokenStore
    + SecretStore
    + ChatStore
    + EconomyStore
    + LinkStore
    + StorageStore
    + LeaderboardStore
    + NotificationStore
    + FriendStore
    + groups::GroupStore
    + ConsoleStore
    + 'static
{
    /// Finishes pending writes and releases the database.
    async fn close(&self);

    /// The tickets and lease of a cluster's matchmaker, when this engine can be shared by
    /// several nodes (PostgreSQL; not SQLite, one node's file).
    fn shared_matchmaker(&self) -> Option<Arc<dyn MatchmakerStore>> {
        None
    }

    /// The shard leases of a clustered world, when this engine can be shared by several nodes
    /// (PostgreSQL).
    fn world_leases(&self) -> Option<Arc<dyn WorldLeaseStore>> {
        None
    }
}

/// Opens the engine `config` names, checking (and, if allowed, migrating) its schema.
pub async fn open(config: &Config, metrics: Arc<Metrics>) -> anyhow::Result<Arc<dyn Store>> {
    if config.database_url.is_empty() {
        let store = sqlite::SqliteStore::open(config, metrics).await?;
        Ok(Arc::new(store))
    } else {
        let store = postgres::PostgresStore::open(config, metrics).await?;
        Ok(Arc::new(store))
    }
}

/// A consistent copy of the SQLite database at `to`, taken while the server runs (the `muster
/// backup` command); on PostgreSQL, `pg_dump` or the database's own backups do this.
pub async fn backup(config: &Config, to: &std::path::Path) -> anyhow::Result<u64> {
    if !config.database_url.is_empty() {
        anyhow::bail!(
            "muster backup copies the embedded SQLite database; on PostgreSQL use pg_dump or its \
             continuous archiving (docs/deploy.md)"
        );
    }
    sqlite::backup(config, to).await
}

/// Applies pending migrations and returns (applied now, schema version).
pub async fn migrate(config: &Config) -> anyhow::Result<(usize, i64)> {
    if config.database_url.is_empty() {
        sqlite::migrate(config).await
    } else {
        postgres::migrate(config).await
    }
}
