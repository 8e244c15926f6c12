//! Leaderboards and tournaments in the store: definitions, records, claimed events
//! ([`LeaderboardStore`]).

use async_trait::async_trait;
use uuid::Uuid;

use crate::store::StoreError;

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

    /// Adds `count` (negative: takes) to the `max_num_score` of the owner's record of the
    /// period, when it has one with a bound (`max_num_score` > 0: 0 is no bound, and stays
    /// one); the bound stays within 1..=i32::MAX. Whether a record changed.
    async fn add_attempts(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        owner_id: Uuid,
        count: i32,
    ) -> Result<bool, StoreError>;

    /// Every (owner, score, subscore, num_score) of the period: what ranks are built from.
    async fn period_scores(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
    ) -> Result<Vec<(Uuid, i64, i64, i32)>, StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] = &[
    crate::migration!(10, "leaderboards", "0010_leaderboards"),
    crate::migration!(11, "tournaments", "0011_tournaments"),
    crate::migration!(17, "leaderboard_events", "0017_leaderboard_events"),
];
