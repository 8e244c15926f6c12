//! Tournaments: leaderboards with a window, as Nakama runs them.
//!
//! A tournament starts at `start_time` and, without a reset schedule, is open for scores for
//! `duration` seconds (never past `end_time`); with one, each reset opens a new period, open for
//! `duration` seconds of it, and its records expire at the next reset (or at `end_time`).
//! Scores outside the open window are refused; with `join_required` a player must join a
//! period before scoring in it; `max_size` bounds the records of a period and `max_num_score`
//! the submissions of one record. Records, ranks and listings are a leaderboard's.

use std::sync::Arc;

use chrono::DateTime;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{check_submission, Board, Caller, LeaderboardError, Leaderboards, Record};
use crate::leaderboards::store::{
    LeaderboardDef, RecordWrite, TournamentFields, TournamentRefusal, TournamentRules,
};

/// Most tournaments one listing page may hold (Nakama's bound and default).
pub const MAX_LIST_LIMIT: usize = 100;
/// Most attempts one `add_attempts` gives or takes.
pub const MAX_ATTEMPTS_ADDED: u64 = 1_000_000;

/// A tournament to create (also the `[[leaderboards.tournaments]]` of the configuration).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NewTournament {
    pub id: String,
    pub authoritative: bool,
    /// `"desc"` (the default: higher is better) or `"asc"`.
    pub sort_order: String,
    /// `"best"` (the default), `"set"`, `"incr"` or `"decr"`.
    pub operator: String,
    /// A cron expression (UTC); empty: one period from `start_time`.
    pub reset_schedule: String,
    /// A JSON object.
    pub metadata: String,
    pub title: String,
    pub description: String,
    /// 0 to 127.
    pub category: i32,
    /// Unix seconds; 0: when first created.
    pub start_time: i64,
    /// Unix seconds; 0: never ends.
    pub end_time: i64,
    /// Seconds each period is open for scores (at least 1).
    pub duration: i64,
    /// Most records a period may hold; 0: no bound.
    pub max_size: i32,
    /// Most submissions one record may take; 0: no bound.
    pub max_num_score: i32,
    /// Players must join a period before scoring in it.
    pub join_required: bool,
}

impl Default for NewTournament {
    fn default() -> Self {
        let board = super::NewLeaderboard::default();
        NewTournament {
            id: board.id,
            authoritative: board.authoritative,
            sort_order: board.sort_order,
            operator: board.operator,
            reset_schedule: board.reset_schedule,
            metadata: board.metadata,
            title: String::new(),
            description: String::new(),
            category: 0,
            start_time: 0,
            end_time: 0,
            duration: 0,
            max_size: 0,
            max_num_score: 0,
            join_required: false,
        }
    }
}

/// When the current period opened, when it closes for scores, and when its records expire
/// (Unix seconds; 0: never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    pub start_active: i64,
    pub end_active: i64,
    pub expiry: i64,
}

/// A tournament as listed: its definition and its state now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TournamentInfo {
    pub def: LeaderboardDef,
    pub deadlines: Deadlines,
    /// The previous reset (0: none yet).
    pub prev_reset: i64,
    /// Records in the current period.
    pub size: i64,
    /// Open for scores now, and not full.
    pub can_enter: bool,
}

impl Board {
    pub(super) fn next_after(&self, at: i64) -> Option<i64> {
        let schedule = self.schedule.as_ref()?;
        DateTime::from_timestamp(at, 0)
            .and_then(|t| schedule.find_next_occurrence(&t, false).ok())
            .map(|t| t.timestamp())
    }

    pub(super) fn last_before(&self, at: i64) -> Option<i64> {
        let schedule = self.schedule.as_ref()?;
        DateTime::from_timestamp(at, 0)
            .and_then(|t| schedule.find_previous_occurrence(&t, false).ok())
            .map(|t| t.timestamp())
    }

    /// The window of the period that holds the Unix second `now` (Nakama's
    /// `calculateTournamentDeadlines`).
    pub(super) fn deadlines(&self, now: i64) -> Deadlines {
        let t = &self.def.tournament;
        let (start, end, duration) = (t.start_time, t.end_time, t.duration);
        if self.schedule.is_none() {
            let mut end_active = start + duration;
            if end > 0 && end_active > end {
                end_active = end;
            }
            return Deadlines {
                start_active: start,
                end_active,
                expiry: end,
            };
        }
        let mut start_active = if now < start {
            self.next_after(start).unwrap_or(start)
        } else if self.next_after(now - 1) == Some(now) {
            now
        } else {
            self.last_before(now).unwrap_or(start)
        };
        let mut expiry = self.next_after(start_active).unwrap_or(0);
        let mut end_active = (start_active + duration).min(expiry);
        if start > end_active {
            // Started after this period's window closed: the next period is the first.
            start_active = self.next_after(start).unwrap_or(start);
            expiry = self.next_after(start_active).unwrap_or(0);
            end_active = (start_active + duration).min(expiry);
        } else if start > start_active {
            start_active = start;
        }
        if end > 0 && expiry > end {
            expiry = end;
            end_active = end_active.min(expiry);
        }
        Deadlines {
            start_active,
            end_active,
            expiry,
        }
    }

    fn rules(&self) -> TournamentRules {
        let t = &self.def.tournament;
        TournamentRules {
            max_size: t.max_size,
            max_num_score: t.max_num_score,
            join_required: t.join_required,
        }
    }
}

/// The record a join creates: no score, no submission yet.
fn joined_row(
    id: &str,
    expiry_time: i64,
    owner: Uuid,
) -> crate::leaderboards::store::LeaderboardRecordRow {
    crate::leaderboards::store::LeaderboardRecordRow {
        leaderboard_id: id.to_string(),
        expiry_time,
        owner_id: owner,
        username: String::new(),
        score: 0,
        subscore: 0,
        num_score: 0,
        max_num_score: 0,
        metadata: "{}".into(),
        create_time_ms: 0,
        update_time_ms: 0,
    }
}

fn refused(refusal: TournamentRefusal, joining: bool) -> LeaderboardError {
    match (refusal, joining) {
        (TournamentRefusal::Full, true) => LeaderboardError::Invalid(
            "Tournament cannot be joined as it has reached its max size.".into(),
        ),
        (TournamentRefusal::Full, false) => {
            LeaderboardError::Precondition("Tournament has reached max size.")
        }
        (TournamentRefusal::MaxNumScore, _) => {
            LeaderboardError::Precondition("Reached allowed max number of score attempts.")
        }
        (TournamentRefusal::NotJoined, _) => {
            LeaderboardError::Precondition("Must join tournament before attempting to write value.")
        }
    }
}

impl Leaderboards {
    fn tournament(&self, id: &str) -> Result<Arc<Board>, LeaderboardError> {
        if id.is_empty() {
            return Err(LeaderboardError::Invalid(
                "Tournament ID must be provided.".into(),
            ));
        }
        match self.board(id) {
            Ok(board) if board.is_tournament() => Ok(board),
            Ok(_) | Err(LeaderboardError::NotFound) | Err(LeaderboardError::Invalid(_)) => {
                Err(LeaderboardError::Missing("Tournament not found."))
            }
            Err(other) => Err(other),
        }
    }

    /// The tournament `id` as it is now, if it exists.
    pub async fn tournament_info(
        &self,
        id: &str,
    ) -> Result<Option<TournamentInfo>, LeaderboardError> {
        match self.tournament(id) {
            Ok(board) => Ok(Some(self.info(&board, self.clock.now_secs()).await?)),
            Err(LeaderboardError::Missing(_)) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// Refuses an id that names no tournament (as the tournament routes answer it).
    pub fn tournament_exists(&self, id: &str) -> Result<(), LeaderboardError> {
        self.tournament(id).map(|_| ())
    }

    /// Creates a tournament unless one of its id exists; whether it was created.
    pub async fn create_tournament(&self, new: NewTournament) -> Result<bool, LeaderboardError> {
        if new.duration <= 0 {
            return Err(LeaderboardError::Invalid(
                "Tournament duration must be greater than zero.".into(),
            ));
        }
        if !(0..128).contains(&new.category) {
            return Err(LeaderboardError::Invalid(
                "Tournament category must be 0-127.".into(),
            ));
        }
        let start_time = if new.start_time == 0 {
            self.clock.now_secs()
        } else {
            new.start_time
        };
        if new.end_time != 0 && new.end_time <= start_time {
            return Err(LeaderboardError::Invalid(
                "Tournament end time must be greater than start time.".into(),
            ));
        }
        if new.max_size < 0 || new.max_num_score < 0 {
            return Err(LeaderboardError::Invalid(
                "Tournament max size and max number of scores must be 0 or more.".into(),
            ));
        }
        let fields = TournamentFields {
            title: new.title,
            description: new.description,
            category: new.category,
            duration: new.duration,
            start_time,
            end_time: new.end_time,
            max_size: new.max_size,
            max_num_score: new.max_num_score,
            join_required: new.join_required,
        };
        let board = super::NewLeaderboard {
            id: new.id,
            authoritative: new.authoritative,
            sort_order: new.sort_order,
            operator: new.operator,
            reset_schedule: new.reset_schedule,
            metadata: new.metadata,
        };
        let (def, schedule) = self.checked_def(board, fields)?;
        self.insert_board(def, schedule).await
    }

    /// Joins `owner` to the tournament's current period (a no-op when joining is not required
    /// or they have joined already).
    pub async fn join_tournament(
        &self,
        id: &str,
        owner: Uuid,
        username: &str,
    ) -> Result<(), LeaderboardError> {
        let board = self.tournament(id)?;
        if !board.def.tournament.join_required {
            return Ok(());
        }
        let now = self.clock.now_secs();
        let deadlines = board.deadlines(now);
        if deadlines.end_active <= now {
            return Err(LeaderboardError::Invalid(
                "Tournament is not active and cannot accept new joins.".into(),
            ));
        }
        let joined = self
            .store
            .join_tournament(
                RecordWrite {
                    leaderboard_id: id.to_string(),
                    expiry_time: deadlines.expiry,
                    owner_id: owner,
                    username: username.to_string(),
                    score: 0,
                    subscore: 0,
                    metadata: None,
                    op: board.op(0),
                    now_ms: self.clock.now_ms(),
                },
                board.rules(),
            )
            .await?
            .map_err(|refusal| refused(refusal, true))?;
        if joined {
            self.ranked(&board, joined_row(id, deadlines.expiry, owner))
                .await?;
        }
        Ok(())
    }

    /// Submits a score to the tournament's open period (see [`super::Submission`]).
    pub async fn write_tournament(
        &self,
        caller: Caller,
        id: &str,
        submission: super::Submission,
    ) -> Result<Record, LeaderboardError> {
        let board = self.tournament(id)?;
        check_submission(submission.metadata.as_deref(), submission.operator)?;
        let now = self.clock.now_secs();
        let end = board.def.tournament.end_time;
        if end > 0 && end <= now {
            return Err(LeaderboardError::Missing(
                "Tournament not found or has ended.",
            ));
        }
        if board.def.authoritative && caller != Caller::Server {
            return Err(LeaderboardError::Authoritative(
                "Tournament only allows authoritative score submissions.",
            ));
        }
        let deadlines = board.deadlines(now);
        if deadlines.start_active > now || deadlines.end_active <= now {
            return Err(LeaderboardError::Precondition(
                "Tournament is not active and cannot accept new scores.",
            ));
        }
        let row = self
            .store
            .write_tournament_record(
                RecordWrite {
                    leaderboard_id: id.to_string(),
                    expiry_time: deadlines.expiry,
                    owner_id: submission.owner,
                    username: submission.username,
                    score: submission.score,
                    subscore: submission.subscore,
                    metadata: submission.metadata,
                    op: board.op(submission.operator),
                    now_ms: self.clock.now_ms(),
                },
                board.rules(),
            )
            .await?
            .map_err(|refusal| refused(refusal, false))?;
        self.ranked(&board, row).await
    }

    /// A page of the tournament's records (of the current period, or the one ending at
    /// `expiry`).
    pub async fn list_tournament_records(
        &self,
        id: &str,
        owners: Vec<Uuid>,
        page: super::PageAsk,
    ) -> Result<super::RecordList, LeaderboardError> {
        let board = self.tournament(id)?;
        if page
            .limit
            .is_some_and(|l| !(1..=super::MAX_AROUND_LIMIT).contains(&l))
        {
            return Err(LeaderboardError::Invalid(
                "Invalid limit - limit must be between 1 and 100.".into(),
            ));
        }
        let now = self.clock.now_secs();
        let end = board.def.tournament.end_time;
        if page.expiry == 0 && end > 0 && end <= now {
            return Err(LeaderboardError::Missing("Tournament has ended."));
        }
        self.list(id, owners, page).await
    }

    /// A page of up to `limit` (1–100) of the tournament's records around `owner`'s (as
    /// [`Leaderboards::around_owner`]), of the current period or the one ending at `expiry`.
    pub async fn tournament_around_owner(
        &self,
        id: &str,
        owner: Uuid,
        page: super::PageAsk,
    ) -> Result<super::RecordList, LeaderboardError> {
        let board = self.tournament(id)?;
        if page.expiry < 0 {
            return Err(LeaderboardError::Invalid(
                "expiry should be time since epoch in seconds and has to be a positive integer"
                    .into(),
            ));
        }
        let now = self.clock.now_secs();
        let end = board.def.tournament.end_time;
        if page.expiry == 0 && end > 0 && end <= now {
            return Err(LeaderboardError::Missing("Tournament has ended."));
        }
        self.around_owner(id, owner, page).await
    }

    /// Gives `owner` `count` more attempts (fewer when negative) in the tournament's current
    /// period: their record's `max_num_score` moves by `count` (kept within 1..=i32::MAX) when
    /// it has a bound; no record, or no bound, changes nothing (as in Nakama). Refused outside
    /// the tournament's active window.
    pub async fn add_attempts(
        &self,
        id: &str,
        owner: Uuid,
        count: i64,
    ) -> Result<(), LeaderboardError> {
        let board = self.tournament(id)?;
        if count == 0 || count.unsigned_abs() > MAX_ATTEMPTS_ADDED {
            return Err(LeaderboardError::Invalid(format!(
                "expects an attempt count number != 0, at most {MAX_ATTEMPTS_ADDED} either way"
            )));
        }
        let now = self.clock.now_secs();
        let deadlines = board.deadlines(now);
        if deadlines.end_active <= now {
            return Err(LeaderboardError::Precondition(
                "Tournament is not active: attempts cannot be added.",
            ));
        }
        self.store
            .add_attempts(id.to_string(), deadlines.expiry, owner, count as i32)
            .await?;
        Ok(())
    }

    /// Tournaments in `category_start..=category_end` by start time, the ones that started at or
    /// after `start_time` (when given), filtered by `end_time` as Nakama does: absent, those not
    /// ended; 0, those without an end; otherwise those ending by it.
    pub async fn list_tournaments(
        &self,
        category_start: i32,
        category_end: i32,
        start_time: Option<i64>,
        end_time: Option<i64>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<(Vec<TournamentInfo>, Option<String>), LeaderboardError> {
        if !(0..128).contains(&category_end) {
            return Err(LeaderboardError::Invalid(
                "Tournament category end must be >=0 and <128.".into(),
            ));
        }
        if category_end < category_start {
            return Err(LeaderboardError::Invalid(
                "Tournament category end must be greater than category start.".into(),
            ));
        }
        if let (Some(end), start) = (end_time, start_time.unwrap_or(-1)) {
            if end != 0 && end < start {
                return Err(LeaderboardError::Invalid(
                    "Tournament end time must be greater than start time.".into(),
                ));
            }
        }
        if !(1..=MAX_LIST_LIMIT).contains(&limit) {
            return Err(LeaderboardError::Invalid(
                "Limit must be between 1 and 100.".into(),
            ));
        }
        let after = match cursor.filter(|c| !c.is_empty()) {
            None => None,
            Some(text) => Some(decode_list_cursor(text).ok_or_else(|| {
                LeaderboardError::Invalid("Cursor is invalid or expired.".into())
            })?),
        };
        let now = self.clock.now_secs();
        let mut boards: Vec<Arc<Board>> = self
            .read_boards()
            .values()
            .filter(|b| b.is_tournament())
            .cloned()
            .collect();
        boards.sort_by(|a, b| {
            (a.def.tournament.start_time, &a.def.id).cmp(&(b.def.tournament.start_time, &b.def.id))
        });
        let mut chosen = Vec::new();
        let mut next = None;
        for board in boards {
            let t = &board.def.tournament;
            let key = (t.start_time, board.def.id.clone());
            if after.as_ref().is_some_and(|a| key <= *a) {
                continue;
            }
            let in_category = (category_start..=category_end).contains(&t.category);
            let started_after = start_time.is_none_or(|s| t.start_time >= s);
            let ends = match end_time {
                None => t.end_time == 0 || t.end_time >= now,
                Some(0) => t.end_time == 0,
                Some(by) => t.end_time != 0 && t.end_time <= by,
            };
            if !(in_category && started_after && ends) {
                continue;
            }
            if chosen.len() == limit {
                next = chosen.last().map(|last: &Arc<Board>| {
                    encode_list_cursor(last.def.tournament.start_time, &last.def.id)
                });
                break;
            }
            chosen.push(board);
        }
        let mut infos = Vec::with_capacity(chosen.len());
        for board in chosen {
            infos.push(self.info(&board, now).await?);
        }
        Ok((infos, next))
    }

    pub(super) async fn info(
        &self,
        board: &Board,
        now: i64,
    ) -> Result<TournamentInfo, LeaderboardError> {
        let deadlines = board.deadlines(now);
        let size = self
            .ranks
            .with(
                self.store.as_ref(),
                &board.def.id,
                deadlines.expiry,
                |ranks| ranks.count(),
            )
            .await?;
        let t = &board.def.tournament;
        let open = deadlines.start_active <= now && now < deadlines.end_active;
        let room = t.max_size == 0 || size < i64::from(t.max_size);
        let prev_reset = if t.start_time > now {
            0
        } else {
            board.last_before(now).unwrap_or(0)
        };
        Ok(TournamentInfo {
            def: board.def.clone(),
            deadlines,
            prev_reset,
            size,
            can_enter: open && room,
        })
    }
}

fn encode_list_cursor(start_time: i64, id: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&(start_time, id)).unwrap_or_default())
}

fn decode_list_cursor(text: &str) -> Option<(i64, String)> {
    use base64::Engine as _;
    if text.len() > 1024 {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leaderboards::{parse_schedule, BEST, DESCENDING};

    fn board(schedule: &str, start: i64, end: i64, duration: i64) -> Board {
        Board {
            def: LeaderboardDef {
                id: "t".into(),
                authoritative: false,
                sort_order: DESCENDING,
                operator: BEST,
                reset_schedule: schedule.into(),
                metadata: "{}".into(),
                create_time_ms: 0,
                tournament: TournamentFields {
                    duration,
                    start_time: start,
                    end_time: end,
                    ..Default::default()
                },
            },
            schedule: parse_schedule(schedule).expect("schedule"),
        }
    }

    /// 2026-01-05 00:00:00 UTC (a Monday), and hours after it.
    const DAY: i64 = 1_767_571_200;
    const HOUR: i64 = 3600;

    #[test]
    fn windows_are_nakamas() {
        // One period from the start, capped by the end.
        let once = board("", DAY, DAY + 2 * HOUR, 3 * HOUR);
        assert_eq!(
            once.deadlines(DAY + HOUR),
            Deadlines {
                start_active: DAY,
                end_active: DAY + 2 * HOUR,
                expiry: DAY + 2 * HOUR
            }
        );
        // Daily at noon, open an hour: at 15:00 the window was 12:00-13:00, records expire at
        // the next noon; exactly at noon a new one opens.
        let noon = board("0 12 * * *", DAY, 0, HOUR);
        let today = Deadlines {
            start_active: DAY + 12 * HOUR,
            end_active: DAY + 13 * HOUR,
            expiry: DAY + 36 * HOUR,
        };
        assert_eq!(noon.deadlines(DAY + 15 * HOUR), today);
        assert_eq!(noon.deadlines(DAY + 12 * HOUR), today);
        assert_eq!(
            noon.deadlines(DAY + 36 * HOUR).start_active,
            DAY + 36 * HOUR
        );
        // Before its start: the first reset after it.
        let later = board("0 12 * * *", DAY + 2 * 24 * HOUR, 0, HOUR);
        assert_eq!(later.deadlines(DAY).start_active, DAY + 60 * HOUR);
        // Started after the day's window closed: the next day's window is the first.
        let late_start = board("0 12 * * *", DAY + 14 * HOUR, 0, HOUR);
        assert_eq!(
            late_start.deadlines(DAY + 15 * HOUR),
            Deadlines {
                start_active: DAY + 36 * HOUR,
                end_active: DAY + 37 * HOUR,
                expiry: DAY + 60 * HOUR
            }
        );
        // The end caps the expiry and the window.
        let ending = board("0 12 * * *", DAY, DAY + 12 * HOUR + 1800, HOUR);
        let d = ending.deadlines(DAY + 12 * HOUR + 60);
        assert_eq!(
            (d.end_active, d.expiry),
            (DAY + 12 * HOUR + 1800, DAY + 12 * HOUR + 1800)
        );
    }
}
