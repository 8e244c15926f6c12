//! Leaderboards, with Nakama's semantics.
//!
//! - A leaderboard is created by server code ([`Leaderboards::create`]) or by configuration
//!   (`leaderboards.boards`): an id, a sort order (descending: higher is better, or ascending),
//!   an operator (best, set, increment, decrement), an optional reset schedule (a cron
//!   expression), metadata, and whether only server code may write to it (authoritative).
//! - Records are kept per owner and **period**: with a reset schedule, a record's
//!   `expiry_time` is the schedule's next occurrence after the moment it was written, so at each
//!   boundary the leaderboard starts empty and the previous period's records stay readable by
//!   their `expiry_time` (a listing's `expiry`). Without one, every record has expiry 0.
//! - A score submitted is applied by the operator (the leaderboard's, or the one the write
//!   names): best keeps the better score and the better subscore, set replaces, increment adds,
//!   decrement subtracts down to zero. A submission that changes nothing is not counted in
//!   `num_score`.
//! - Every record answered carries its rank (1 is the best), kept in memory per period
//!   (`rank`) in O(log n).
//! - In a cluster every node keeps the ranks of the periods it has read: each node publishes the
//!   records it writes or deletes, and the leaderboards it creates or deletes, on the cluster's
//!   bus (`leaderboards`), and the others apply them, so every node ranks alike.

pub mod config;
pub(crate) mod postgres;
pub(crate) mod sqlite;
pub mod store;

pub(crate) mod cursor;
pub(crate) mod rank;
pub mod schedule;
pub mod tournament;
pub(crate) mod view;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use croner::Cron;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::base::clock::Clock;
use crate::cluster::bus::Bus;
use crate::leaderboards::config::LeaderboardsConfig;
use crate::leaderboards::store::{
    LeaderboardDef, LeaderboardRecordRow, LeaderboardStore, RecordWrite, ScoreOp, TournamentFields,
};
use crate::store::StoreError;
use cursor::Cursor;

/// Most records one listing page may hold (Nakama's bound).
pub const MAX_LIST_LIMIT: usize = 1000;
/// Most records a page around an owner may hold (Nakama's bound).
pub const MAX_AROUND_LIMIT: usize = 100;
/// Most owners one listing may name.
pub const MAX_OWNER_IDS: usize = 100;
/// Longest leaderboard id, in bytes.
pub const MAX_ID_BYTES: usize = 128;

/// Who writes or deletes a record: a player (an authoritative leaderboard refuses them) or the
/// server's own code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Server,
    Player(Uuid),
}

/// Why a leaderboard call did nothing. Messages are Nakama's and shown to clients.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LeaderboardError {
    #[error("{0}")]
    Invalid(String),
    #[error("Leaderboard not found.")]
    NotFound,
    #[error("{0}")]
    Authoritative(&'static str),
    /// Not found, in the words of the call (a tournament's).
    #[error("{0}")]
    Missing(&'static str),
    /// Refused in the state the tournament or the record is in.
    #[error("{0}")]
    Precondition(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Sort orders, as Nakama numbers them.
pub const ASCENDING: i16 = 0;
pub const DESCENDING: i16 = 1;

/// Operators, as stored.
pub const BEST: i16 = 0;
pub const SET: i16 = 1;
pub const INCREMENT: i16 = 2;
pub const DECREMENT: i16 = 3;

/// A score submitted for `owner`: `operator` 0 uses the board's own, 1 best, 2 set,
/// 3 increment, 4 decrement override it; `metadata` (a JSON object) replaces the record's when
/// given.
#[derive(Debug, Clone, Default)]
pub struct Submission {
    pub owner: Uuid,
    pub username: String,
    pub score: i64,
    pub subscore: i64,
    pub metadata: Option<String>,
    pub operator: i32,
}

/// Which page of a period's records: at most `limit` (the default when absent), after the
/// `cursor` of the previous page, of the period ending at `expiry` (0: the current one).
#[derive(Debug, Clone, Default)]
pub struct PageAsk {
    pub limit: Option<usize>,
    pub cursor: Option<String>,
    pub expiry: i64,
}

/// A leaderboard to create (also the `[[leaderboards.boards]]` of the configuration: created at
/// start if it does not exist, an existing one left as it is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NewLeaderboard {
    pub id: String,
    /// Only server code may write records.
    pub authoritative: bool,
    /// `"desc"` (the default: higher is better) or `"asc"`.
    pub sort_order: String,
    /// `"best"` (the default), `"set"`, `"incr"` or `"decr"`.
    pub operator: String,
    /// A cron expression (minute hour day-of-month month day-of-week, UTC); empty: never resets.
    pub reset_schedule: String,
    /// A JSON object.
    pub metadata: String,
}

impl Default for NewLeaderboard {
    fn default() -> Self {
        NewLeaderboard {
            id: String::new(),
            authoritative: false,
            sort_order: "desc".into(),
            operator: "best".into(),
            reset_schedule: String::new(),
            metadata: "{}".into(),
        }
    }
}

/// A record with its rank in its period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub row: LeaderboardRecordRow,
    /// 1 is the best; 0 if it has none (deleted meanwhile).
    pub rank: i64,
}

/// A leaderboard (not a tournament) and its resets around a moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderboardInfo {
    pub def: LeaderboardDef,
    /// The last reset (0: none, or no schedule).
    pub prev_reset: i64,
    /// The next one (0: no schedule).
    pub next_reset: i64,
}

/// A page of records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordList {
    pub records: Vec<Record>,
    /// The records of the owners a listing named, wherever they rank.
    pub owner_records: Vec<Record>,
    pub next_cursor: Option<String>,
    pub prev_cursor: Option<String>,
    /// How many records the period holds.
    pub rank_count: i64,
}

/// A leaderboard as kept in memory: its definition and its parsed schedule.
struct Board {
    def: LeaderboardDef,
    schedule: Option<Cron>,
}

impl Board {
    fn descending(&self) -> bool {
        self.def.sort_order == DESCENDING
    }

    fn is_tournament(&self) -> bool {
        self.def.tournament.duration > 0
    }

    /// The end of the period that holds the Unix second `at`, when its records expire (0:
    /// never): the schedule's next occurrence, or a tournament's next reset or end.
    fn period_end(&self, at: i64) -> i64 {
        if self.is_tournament() {
            return self.deadlines(at).expiry;
        }
        self.expiry_after(at)
    }

    /// The schedule's next occurrence after the Unix second `at` (0: no schedule).
    fn expiry_after(&self, at: i64) -> i64 {
        self.next_after(at).unwrap_or(0)
    }

    fn op(&self, operator_override: i32) -> ScoreOp {
        let operator = match operator_override {
            1 => BEST,
            2 => SET,
            3 => INCREMENT,
            4 => DECREMENT,
            _ => self.def.operator,
        };
        match operator {
            SET => ScoreOp::Set,
            INCREMENT => ScoreOp::Increment,
            DECREMENT => ScoreOp::Decrement,
            _ => ScoreOp::Best {
                ascending: !self.descending(),
            },
        }
    }
}

/// A cron expression as Nakama accepts one (5 fields), parsed.
fn parse_schedule(text: &str) -> Result<Option<Cron>, LeaderboardError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    text.parse::<Cron>()
        .map(Some)
        .map_err(|e| LeaderboardError::Invalid(format!("Invalid reset schedule {text:?}: {e}.")))
}

/// A sort order as configured: `"desc"` (the default) or `"asc"`.
fn parse_sort_order(text: &str) -> Result<i16, LeaderboardError> {
    match text {
        "" | "desc" => Ok(DESCENDING),
        "asc" => Ok(ASCENDING),
        other => Err(LeaderboardError::Invalid(format!(
            "Invalid sort order {other:?}: use \"asc\" or \"desc\"."
        ))),
    }
}

/// An operator as configured: `"best"` (the default), `"set"`, `"incr"` or `"decr"`.
fn parse_operator(text: &str) -> Result<i16, LeaderboardError> {
    match text {
        "" | "best" => Ok(BEST),
        "set" => Ok(SET),
        "incr" => Ok(INCREMENT),
        "decr" => Ok(DECREMENT),
        other => Err(LeaderboardError::Invalid(format!(
            "Invalid operator {other:?}: use \"best\", \"set\", \"incr\" or \"decr\"."
        ))),
    }
}

/// A leaderboard's metadata: a JSON object, `{}` when empty.
fn parse_metadata(text: String) -> Result<String, LeaderboardError> {
    if text.is_empty() {
        Ok("{}".to_string())
    } else if is_json_object(&text) {
        Ok(text)
    } else {
        Err(LeaderboardError::Invalid(
            "Metadata value must be a JSON object.".into(),
        ))
    }
}

fn is_json_object(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.is_object())
}

/// A submission's metadata (a JSON object when given) and operator override (0 to 4), as Nakama
/// checks them.
fn check_submission(metadata: Option<&str>, operator: i32) -> Result<(), LeaderboardError> {
    if metadata.is_some_and(|m| !is_json_object(m)) {
        return Err(LeaderboardError::Invalid(
            "Metadata value must be JSON, if provided.".into(),
        ));
    }
    if !(0..=4).contains(&operator) {
        return Err(LeaderboardError::Invalid("Invalid operator value.".into()));
    }
    Ok(())
}

fn check_id(id: &str) -> Result<(), LeaderboardError> {
    if id.is_empty() || id.len() > MAX_ID_BYTES {
        return Err(LeaderboardError::Invalid("Invalid leaderboard ID.".into()));
    }
    Ok(())
}

pub struct Leaderboards {
    store: Arc<dyn LeaderboardStore>,
    clock: Clock,
    boards: RwLock<HashMap<String, Arc<Board>>>,
    ranks: rank::Ranks,
    /// The cluster's bus, when this node is part of one.
    bus: Option<Bus>,
    /// Woken whenever the leaderboards change (the scheduler looks again).
    changed: Arc<tokio::sync::Notify>,
}

/// The bus topic of the changes nodes tell each other about.
const TOPIC: &str = "leaderboards";

/// A change another node must know of to rank alike.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Change {
    /// A record as the database answered it after a write.
    Record {
        node: String,
        id: String,
        expiry: i64,
        owner: Uuid,
        score: i64,
        subscore: i64,
        num_score: i32,
    },
    /// A record deleted.
    Removed {
        node: String,
        id: String,
        expiry: i64,
        owner: Uuid,
    },
    /// A leaderboard created or deleted: read the definitions again.
    Boards { node: String },
    /// An account deleted: its records are gone from every board and period.
    OwnerGone { node: String, owner: Uuid },
}

impl crate::cluster::protocol::Message for Change {
    const KIND: &'static str = "leaderboards.change";
}

impl Leaderboards {
    /// Loads every leaderboard, after creating those `config` names that do not exist yet.
    pub async fn start(
        store: Arc<dyn LeaderboardStore>,
        config: &LeaderboardsConfig,
        clock: Clock,
        bus: Option<Bus>,
    ) -> Result<Arc<Leaderboards>, LeaderboardError> {
        let leaderboards = Arc::new(Leaderboards {
            store,
            clock,
            boards: RwLock::new(HashMap::new()),
            ranks: rank::Ranks::default(),
            bus,
            changed: Arc::default(),
        });
        for spec in &config.boards {
            leaderboards.create(spec.clone()).await?;
        }
        for spec in &config.tournaments {
            leaderboards.create_tournament(spec.clone()).await?;
        }
        leaderboards.reload_boards().await?;
        if let Some(bus) = &leaderboards.bus {
            let mut changes = bus
                .subscribe(TOPIC)
                .await
                .map_err(|e| StoreError::Unavailable(format!("cluster bus: {e}")))?;
            let weak = Arc::downgrade(&leaderboards);
            tokio::spawn(async move {
                use futures_util::StreamExt as _;
                while let Some(message) = changes.next().await {
                    let Some(leaderboards) = weak.upgrade() else {
                        return;
                    };
                    match crate::cluster::protocol::decode::<Change>(&message.payload) {
                        Ok(change) => leaderboards.apply(change).await,
                        Err(e) => tracing::warn!("leaderboards: a change that does not parse: {e}"),
                    }
                }
            });
        }
        Ok(leaderboards)
    }

    /// Reads every definition from the database.
    async fn reload_boards(&self) -> Result<(), LeaderboardError> {
        let defs = self.store.leaderboards().await?;
        let mut boards = HashMap::with_capacity(defs.len());
        for def in defs {
            let schedule = parse_schedule(&def.reset_schedule)?;
            boards.insert(def.id.clone(), Arc::new(Board { def, schedule }));
        }
        let gone: Vec<String> = self
            .read_boards()
            .keys()
            .filter(|id| !boards.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            self.ranks.forget(&id);
        }
        self.change_boards(|all| *all = boards);
        Ok(())
    }

    fn node(&self) -> &str {
        self.bus.as_ref().map_or("", |b| b.node())
    }

    /// Tells the other nodes (nothing without a cluster).
    async fn tell(&self, change: Change) {
        if let Some(bus) = &self.bus {
            bus.send(TOPIC, &change).await;
        }
    }

    /// Applies another node's change (this node's own were applied when made).
    async fn apply(&self, change: Change) {
        let result = match change {
            Change::Record { node, .. }
            | Change::Removed { node, .. }
            | Change::Boards { node }
            | Change::OwnerGone { node, .. }
                if node == self.node() =>
            {
                Ok(())
            }
            Change::Boards { .. } => self.reload_boards().await,
            Change::OwnerGone { owner, .. } => {
                self.ranks.remove_everywhere(&owner).await;
                Ok(())
            }
            Change::Record {
                id,
                expiry,
                owner,
                score,
                subscore,
                num_score,
                ..
            } => self
                .ranks
                .if_loaded(&id, expiry, |ranks| {
                    ranks.put(owner, score, subscore, num_score, false);
                })
                .await
                .map_err(LeaderboardError::from),
            Change::Removed {
                id, expiry, owner, ..
            } => self
                .ranks
                .if_loaded(&id, expiry, |ranks| ranks.remove(&owner))
                .await
                .map_err(LeaderboardError::from),
        };
        if let Err(e) = result {
            tracing::warn!("leaderboards: applying another node's change failed: {e}");
        }
    }

    /// Changes the leaderboards with `change`, then tells the scheduler to look again (after
    /// the change, so that it cannot look before and sleep past the new board's events).
    fn change_boards<T>(&self, change: impl FnOnce(&mut HashMap<String, Arc<Board>>) -> T) -> T {
        let done = change(
            &mut self
                .boards
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        self.changed.notify_one();
        done
    }

    fn read_boards(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Board>>> {
        self.boards
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn board(&self, id: &str) -> Result<Arc<Board>, LeaderboardError> {
        check_id(id)?;
        self.read_boards()
            .get(id)
            .cloned()
            .ok_or(LeaderboardError::NotFound)
    }

    /// Creates a leaderboard unless one of its id exists (then nothing changes, as in Nakama);
    /// whether it was created.
    pub async fn create(&self, new: NewLeaderboard) -> Result<bool, LeaderboardError> {
        let (def, schedule) = self.checked_def(new, TournamentFields::default())?;
        self.insert_board(def, schedule).await
    }

    /// What a leaderboard and a tournament share, checked: its id, sort order, operator,
    /// schedule and metadata; `tournament` makes it a tournament.
    fn checked_def(
        &self,
        new: NewLeaderboard,
        tournament: TournamentFields,
    ) -> Result<(LeaderboardDef, Option<Cron>), LeaderboardError> {
        check_id(&new.id)?;
        let def = LeaderboardDef {
            sort_order: parse_sort_order(&new.sort_order)?,
            operator: parse_operator(&new.operator)?,
            metadata: parse_metadata(new.metadata)?,
            reset_schedule: new.reset_schedule.trim().to_string(),
            id: new.id,
            authoritative: new.authoritative,
            create_time_ms: self.clock.now_ms(),
            tournament,
        };
        Ok((def, parse_schedule(&new.reset_schedule)?))
    }

    /// Stores a new leaderboard or tournament and tells the other nodes; whether it was new.
    async fn insert_board(
        &self,
        def: LeaderboardDef,
        schedule: Option<Cron>,
    ) -> Result<bool, LeaderboardError> {
        let created = self.store.create_leaderboard(def.clone()).await?;
        if created {
            self.change_boards(|all| all.insert(def.id.clone(), Arc::new(Board { def, schedule })));
            self.tell(Change::Boards {
                node: self.node().to_string(),
            })
            .await;
        }
        Ok(created)
    }

    /// Ranks a record as the database answered it, on this node and, told over the bus, on
    /// the others.
    async fn ranked(
        &self,
        board: &Board,
        row: LeaderboardRecordRow,
    ) -> Result<Record, LeaderboardError> {
        let descending = board.descending();
        let rank = self
            .ranks
            .with(
                self.store.as_ref(),
                &row.leaderboard_id,
                row.expiry_time,
                |ranks| {
                    ranks.put(
                        row.owner_id,
                        row.score,
                        row.subscore,
                        row.num_score,
                        descending,
                    )
                },
            )
            .await?;
        self.tell(Change::Record {
            node: self.node().to_string(),
            id: row.leaderboard_id.clone(),
            expiry: row.expiry_time,
            owner: row.owner_id,
            score: row.score,
            subscore: row.subscore,
            num_score: row.num_score,
        })
        .await;
        Ok(Record { row, rank })
    }

    /// Deletes a leaderboard and every record of it.
    pub async fn delete(&self, id: &str) -> Result<(), LeaderboardError> {
        self.board(id)?;
        self.store.delete_leaderboard(id.to_string()).await?;
        self.change_boards(|all| all.remove(id));
        self.ranks.forget(id);
        self.tell(Change::Boards {
            node: self.node().to_string(),
        })
        .await;
        Ok(())
    }

    /// Replaces the metadata of leaderboard or tournament `id` (a JSON object; empty is `{}`),
    /// on this node and, told over the bus, on the others.
    pub async fn set_metadata(&self, id: &str, metadata: String) -> Result<(), LeaderboardError> {
        let board = self.board(id)?;
        let metadata = parse_metadata(metadata)?;
        if !self
            .store
            .set_leaderboard_metadata(id.to_owned(), metadata.clone())
            .await?
        {
            return Err(LeaderboardError::NotFound);
        }
        let mut def = board.def.clone();
        def.metadata = metadata;
        let changed = Arc::new(Board {
            def,
            schedule: board.schedule.clone(),
        });
        self.change_boards(|all| all.insert(id.to_owned(), changed));
        self.tell(Change::Boards {
            node: self.node().to_string(),
        })
        .await;
        Ok(())
    }

    /// The leaderboard `id` (not a tournament) with its resets around now, if it exists.
    pub fn leaderboard_info(&self, id: &str) -> Option<LeaderboardInfo> {
        let board = self.board(id).ok().filter(|b| !b.is_tournament())?;
        let now = self.clock.now_secs();
        Some(LeaderboardInfo {
            def: board.def.clone(),
            prev_reset: board.last_before(now + 1).unwrap_or(0),
            next_reset: board.next_after(now).unwrap_or(0),
        })
    }

    /// The ids of every leaderboard, sorted.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.read_boards().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Submits a score to the current period (see [`Submission`]).
    pub async fn write(
        &self,
        caller: Caller,
        id: &str,
        submission: Submission,
    ) -> Result<Record, LeaderboardError> {
        let board = self.board(id)?;
        if board.is_tournament() {
            // A tournament's scores go through its own route, which holds its window and bounds.
            return Err(LeaderboardError::NotFound);
        }
        if board.def.authoritative && caller != Caller::Server {
            return Err(LeaderboardError::Authoritative(
                "Leaderboard only allows authoritative score submissions.",
            ));
        }
        check_submission(submission.metadata.as_deref(), submission.operator)?;
        let expiry_time = board.period_end(self.clock.now_secs());
        let row = self
            .store
            .write_record(RecordWrite {
                leaderboard_id: id.to_string(),
                expiry_time,
                owner_id: submission.owner,
                username: submission.username,
                score: submission.score,
                subscore: submission.subscore,
                metadata: submission.metadata,
                op: board.op(submission.operator),
                now_ms: self.clock.now_ms(),
            })
            .await?;
        self.ranked(&board, row).await
    }

    /// Deletes `owner`'s record of the current period (nothing to delete is no error).
    pub async fn delete_record(
        &self,
        caller: Caller,
        id: &str,
        owner: Uuid,
    ) -> Result<(), LeaderboardError> {
        let board = self.board(id)?;
        if board.def.authoritative && caller != Caller::Server {
            return Err(LeaderboardError::Authoritative(
                "Leaderboard only allows authoritative score deletions.",
            ));
        }
        let expiry_time = board.period_end(self.clock.now_secs());
        self.store
            .delete_record(id.to_string(), expiry_time, owner)
            .await?;
        self.ranks
            .with(self.store.as_ref(), id, expiry_time, |ranks| {
                ranks.remove(&owner)
            })
            .await?;
        self.tell(Change::Removed {
            node: self.node().to_string(),
            id: id.to_string(),
            expiry: expiry_time,
            owner,
        })
        .await;
        Ok(())
    }

    /// Forgets the ranks of an account whose records the store deleted with it, on every node.
    pub async fn forget_owner(&self, owner: Uuid) {
        self.ranks.remove_everywhere(&owner).await;
        self.tell(Change::OwnerGone {
            node: self.node().to_string(),
            owner,
        })
        .await;
    }

    /// The period a listing reads: the one ending at `expiry` when given (Nakama's override),
    /// else the current one.
    fn period(&self, board: &Board, expiry: i64) -> i64 {
        if expiry != 0 {
            expiry
        } else {
            board.period_end(self.clock.now_secs())
        }
    }

    /// A page of records in rank order, and the records of `owners` wherever they rank.
    pub async fn list(
        &self,
        id: &str,
        owners: Vec<Uuid>,
        page: PageAsk,
    ) -> Result<RecordList, LeaderboardError> {
        let PageAsk {
            limit,
            cursor,
            expiry,
        } = page;
        let cursor = cursor.as_deref();
        let board = self.board(id)?;
        let limit = limit.unwrap_or(1);
        if !(1..=MAX_LIST_LIMIT).contains(&limit) {
            return Err(LeaderboardError::Invalid(format!(
                "Invalid limit - limit must be between 1 and {MAX_LIST_LIMIT}."
            )));
        }
        if owners.len() > MAX_OWNER_IDS {
            return Err(LeaderboardError::Invalid(format!(
                "Too many owner IDs - at most {MAX_OWNER_IDS}."
            )));
        }
        let expiry_time = self.period(&board, expiry);
        let cursor = self.cursor(id, expiry_time, cursor)?;
        let descending = board.descending();
        let (rows, more_after, more_before) = match &cursor {
            None => {
                let mut rows = self
                    .store
                    .list_records(id.to_string(), expiry_time, None, descending, limit + 1)
                    .await?;
                let more = rows.len() > limit;
                rows.truncate(limit);
                (rows, more, false)
            }
            Some(at) if at.next => {
                let mut rows = self
                    .store
                    .list_records(
                        id.to_string(),
                        expiry_time,
                        Some(at.position()),
                        descending,
                        limit + 1,
                    )
                    .await?;
                let more = rows.len() > limit;
                rows.truncate(limit);
                (rows, more, true)
            }
            Some(at) => {
                let mut rows = self
                    .store
                    .list_records(
                        id.to_string(),
                        expiry_time,
                        Some(at.position()),
                        !descending,
                        limit + 1,
                    )
                    .await?;
                let more = rows.len() > limit;
                rows.truncate(limit);
                rows.reverse();
                (rows, true, more)
            }
        };
        let owner_rows = if owners.is_empty() {
            Vec::new()
        } else {
            self.store
                .records_of(id.to_string(), expiry_time, owners)
                .await?
        };
        self.page(
            &board,
            expiry_time,
            rows,
            owner_rows,
            more_after,
            more_before,
        )
        .await
    }

    /// A page of up to `limit` records around `owner`'s, theirs included; empty when they have
    /// none in the period. With a cursor, the page it names.
    pub async fn around_owner(
        &self,
        id: &str,
        owner: Uuid,
        page: PageAsk,
    ) -> Result<RecordList, LeaderboardError> {
        let board = self.board(id)?;
        let PageAsk {
            limit,
            cursor,
            expiry,
        } = page;
        let limit = limit.unwrap_or(1);
        if !(1..=MAX_AROUND_LIMIT).contains(&limit) {
            return Err(LeaderboardError::Invalid(format!(
                "Invalid limit - limit must be between 1 and {MAX_AROUND_LIMIT}."
            )));
        }
        if cursor.as_deref().is_some_and(|c| !c.is_empty()) {
            let page = PageAsk {
                limit: Some(limit),
                cursor,
                expiry,
            };
            return self.list(id, Vec::new(), page).await;
        }
        let expiry_time = self.period(&board, expiry);
        let Some(around) = self
            .store
            .records_around(id.to_string(), expiry_time, owner, limit)
            .await?
        else {
            return Ok(RecordList::default());
        };
        let mine = around.mine;
        // Up to `limit` on each side, then a window of `limit` with the owner as near the middle
        // as the records allow.
        let (mut better, worse) = if board.descending() {
            (around.after, around.before)
        } else {
            (around.before, around.after)
        };
        better.reverse();
        let mut above = better.len().min((limit - 1) / 2);
        let below = worse.len().min(limit - 1 - above);
        above = better.len().min(limit - 1 - below);
        let more_before = better.len() > above;
        let more_after = worse.len() > below;
        let mut rows: Vec<LeaderboardRecordRow> = better.split_off(better.len() - above);
        rows.push(mine);
        rows.extend(worse.into_iter().take(below));
        self.page(
            &board,
            expiry_time,
            rows,
            Vec::new(),
            more_after,
            more_before,
        )
        .await
    }

    /// The leaderboards (not tournaments) by id, at most `limit` (1–100) after the `cursor`
    /// of the previous page; the cursor of the next page when there is one.
    pub fn list_boards(
        &self,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<(Vec<LeaderboardInfo>, Option<String>), LeaderboardError> {
        if !(1..=MAX_AROUND_LIMIT).contains(&limit) {
            return Err(LeaderboardError::Invalid(format!(
                "Invalid limit - limit must be between 1 and {MAX_AROUND_LIMIT}."
            )));
        }
        let after: Option<String> = match cursor.filter(|c| !c.is_empty()) {
            None => None,
            Some(text) => Some(crate::base::cursor::decode(text).ok_or_else(|| {
                LeaderboardError::Invalid("expects cursor to be valid when provided".into())
            })?),
        };
        let mut ids: Vec<String> = self
            .read_boards()
            .iter()
            .filter(|(id, board)| {
                !board.is_tournament() && after.as_ref().is_none_or(|after| *id > after)
            })
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        let more = ids.len() > limit;
        ids.truncate(limit);
        let found: Vec<LeaderboardInfo> = ids
            .iter()
            .filter_map(|id| self.leaderboard_info(id))
            .collect();
        let next = match ids.last() {
            Some(last) if more => Some(crate::base::cursor::encode(last)),
            _ => None,
        };
        Ok((found, next))
    }

    /// The cursor that lists the period (the current one, or the one ending at `expiry`) from
    /// `rank` on (1 is the best): empty for rank 1, else one after the record ranked just
    /// above it (Nakama's `leaderboardRecordsListCursorFromRank`).
    pub async fn cursor_from_rank(
        &self,
        id: &str,
        rank: i64,
        expiry: i64,
    ) -> Result<String, LeaderboardError> {
        let board = self.board(id)?;
        if rank < 1 {
            return Err(LeaderboardError::Invalid(
                "invalid rank - must be > 1".into(),
            ));
        }
        if expiry < 0 {
            return Err(LeaderboardError::Invalid("invalid expiry".into()));
        }
        let expiry_time = self.period(&board, expiry);
        if rank == 1 {
            return Ok(String::new());
        }
        let descending = board.descending();
        let above = self
            .ranks
            .with(self.store.as_ref(), id, expiry_time, |ranks| {
                ranks.at_rank(rank - 1, descending)
            })
            .await?;
        let (owner, score, subscore) = above.ok_or_else(|| {
            LeaderboardError::Invalid(format!("No record ranked {} in this period.", rank - 1))
        })?;
        Ok(Cursor {
            id: id.to_string(),
            expiry: expiry_time,
            next: true,
            score,
            subscore,
            owner,
        }
        .encode())
    }

    fn cursor(
        &self,
        id: &str,
        expiry_time: i64,
        text: Option<&str>,
    ) -> Result<Option<Cursor>, LeaderboardError> {
        match text.filter(|c| !c.is_empty()) {
            None => Ok(None),
            Some(text) => Cursor::decode(text, id, expiry_time)
                .map(Some)
                .ok_or_else(|| LeaderboardError::Invalid("Cursor is invalid or expired.".into())),
        }
    }

    /// Ranks the rows and makes the page's cursors.
    async fn page(
        &self,
        board: &Board,
        expiry_time: i64,
        rows: Vec<LeaderboardRecordRow>,
        owner_rows: Vec<LeaderboardRecordRow>,
        more_after: bool,
        more_before: bool,
    ) -> Result<RecordList, LeaderboardError> {
        let id = board.def.id.as_str();
        let descending = board.descending();
        let edge = |row: &LeaderboardRecordRow, next: bool| {
            Cursor {
                id: id.to_string(),
                expiry: expiry_time,
                next,
                score: row.score,
                subscore: row.subscore,
                owner: row.owner_id,
            }
            .encode()
        };
        let next_cursor = rows.last().filter(|_| more_after).map(|r| edge(r, true));
        let prev_cursor = rows.first().filter(|_| more_before).map(|r| edge(r, false));
        let (records, owner_records, rank_count) = self
            .ranks
            .with(self.store.as_ref(), id, expiry_time, |ranks| {
                let rank = |row: LeaderboardRecordRow| Record {
                    rank: ranks.rank(&row.owner_id, descending),
                    row,
                };
                let records: Vec<Record> = rows.into_iter().map(rank).collect();
                let owner_records: Vec<Record> = owner_rows.into_iter().map(rank).collect();
                (records, owner_records, ranks.count())
            })
            .await?;
        Ok(RecordList {
            records,
            owner_records,
            next_cursor,
            prev_cursor,
            rank_count,
        })
    }
}
