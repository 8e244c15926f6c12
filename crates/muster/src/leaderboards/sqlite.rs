//! Leaderboards on SQLite. A score is applied by the group-commit writer (the only writer), which
//! reads the owner's record, applies the operator and writes it back inside the write's own
//! savepoint, so concurrent scores of one record all count.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Row};
use uuid::Uuid;

use crate::leaderboards::store::{
    LeaderboardDef, LeaderboardRecordRow, LeaderboardStore, RecordPosition, RecordWrite,
    RecordsAround, ScoreOp, TournamentFields, TournamentRefusal, TournamentRules,
    EVENT_CLAIMS_KEPT_SECS,
};
use crate::store::sqlite::{db_error, parse_uuid, SqliteStore};
use crate::store::StoreError;

const RECORD_COLUMNS: &str = "leaderboard_id, expiry_time, owner_id, username, score, subscore,
     num_score, max_num_score, metadata, create_time_ms, update_time_ms";

fn record(row: &Row) -> rusqlite::Result<(LeaderboardRecordRow, String)> {
    let owner: String = row.get(2)?;
    Ok((
        LeaderboardRecordRow {
            leaderboard_id: row.get(0)?,
            expiry_time: row.get(1)?,
            owner_id: Uuid::nil(),
            username: row.get(3)?,
            score: row.get(4)?,
            subscore: row.get(5)?,
            num_score: row.get(6)?,
            max_num_score: row.get(7)?,
            metadata: row.get(8)?,
            create_time_ms: row.get(9)?,
            update_time_ms: row.get(10)?,
        },
        owner,
    ))
}

fn records(
    rows: Vec<(LeaderboardRecordRow, String)>,
) -> Result<Vec<LeaderboardRecordRow>, StoreError> {
    rows.into_iter()
        .map(|(mut row, owner)| {
            row.owner_id = parse_uuid(&owner)?;
            Ok(row)
        })
        .collect()
}

/// Up to `limit` records of the period in ascending order after `position` (from the start
/// without one), or in descending order before it when `descending`.
fn list(
    conn: &Connection,
    leaderboard_id: &str,
    expiry_time: i64,
    position: Option<&RecordPosition>,
    descending: bool,
    limit: usize,
) -> Result<Vec<LeaderboardRecordRow>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let order = if descending { "DESC" } else { "ASC" };
    let rows = match position {
        None => conn
            .prepare_cached(&format!(
                "SELECT {RECORD_COLUMNS} FROM leaderboard_records
                 WHERE leaderboard_id = ?1 AND expiry_time = ?2
                 ORDER BY score {order}, subscore {order}, owner_id {order} LIMIT ?3"
            ))
            .and_then(|mut s| {
                s.query_map(params![leaderboard_id, expiry_time, limit], record)?
                    .collect::<Result<Vec<_>, _>>()
            }),
        Some(at) => {
            let cmp = if descending { "<" } else { ">" };
            conn.prepare_cached(&format!(
                "SELECT {RECORD_COLUMNS} FROM leaderboard_records
                 WHERE leaderboard_id = ?1 AND expiry_time = ?2
                   AND (score, subscore, owner_id) {cmp} (?4, ?5, ?6)
                 ORDER BY score {order}, subscore {order}, owner_id {order} LIMIT ?3"
            ))
            .and_then(|mut s| {
                s.query_map(
                    params![
                        leaderboard_id,
                        expiry_time,
                        limit,
                        at.score,
                        at.subscore,
                        at.owner_id.to_string()
                    ],
                    record,
                )?
                .collect::<Result<Vec<_>, _>>()
            })
        }
    }
    .map_err(db_error)?;
    records(rows)
}

fn current(
    conn: &Connection,
    leaderboard_id: &str,
    expiry_time: i64,
    owner: &str,
) -> Result<Option<LeaderboardRecordRow>, StoreError> {
    let found = conn
        .prepare_cached(&format!(
            "SELECT {RECORD_COLUMNS} FROM leaderboard_records
             WHERE leaderboard_id = ?1 AND expiry_time = ?2 AND owner_id = ?3"
        ))
        .and_then(|mut s| {
            s.query_row(params![leaderboard_id, expiry_time, owner], record)
                .optional()
        })
        .map_err(db_error)?;
    Ok(records(found.into_iter().collect())?.pop())
}

/// The score and subscore after applying `op` to `old` (absent: a new record).
pub(crate) fn apply(op: ScoreOp, old: Option<(i64, i64)>, score: i64, subscore: i64) -> (i64, i64) {
    match (op, old) {
        (ScoreOp::Decrement, None) => (0, 0),
        (_, None) | (ScoreOp::Set, Some(_)) => (score, subscore),
        (ScoreOp::Best { ascending: true }, Some((s, ss))) => (s.min(score), ss.min(subscore)),
        (ScoreOp::Best { ascending: false }, Some((s, ss))) => (s.max(score), ss.max(subscore)),
        (ScoreOp::Increment, Some((s, ss))) => {
            (s.saturating_add(score), ss.saturating_add(subscore))
        }
        (ScoreOp::Decrement, Some((s, ss))) => (
            s.saturating_sub(score).max(0),
            ss.saturating_sub(subscore).max(0),
        ),
    }
}

fn put(conn: &Connection, next: &LeaderboardRecordRow) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO leaderboard_records (leaderboard_id, expiry_time, owner_id, username, score,
             subscore, num_score, max_num_score, metadata, create_time_ms, update_time_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT (leaderboard_id, expiry_time, owner_id) DO UPDATE SET
             username = excluded.username, score = excluded.score, subscore = excluded.subscore,
             num_score = excluded.num_score, metadata = excluded.metadata,
             update_time_ms = excluded.update_time_ms",
    )
    .and_then(|mut s| {
        s.execute(params![
            next.leaderboard_id,
            next.expiry_time,
            next.owner_id.to_string(),
            next.username,
            next.score,
            next.subscore,
            next.num_score,
            next.max_num_score,
            next.metadata,
            next.create_time_ms,
            next.update_time_ms
        ])
    })
    .map(|_| ())
    .map_err(db_error)
}

/// Whether `w`'s period holds `max_size` records already (never, without a bound).
fn is_full(conn: &Connection, w: &RecordWrite, rules: TournamentRules) -> Result<bool, StoreError> {
    if rules.max_size <= 0 {
        return Ok(false);
    }
    let size: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM leaderboard_records WHERE leaderboard_id = ?1 AND expiry_time = ?2",
        )
        .and_then(|mut s| s.query_row(params![w.leaderboard_id, w.expiry_time], |r| r.get(0)))
        .map_err(db_error)?;
    Ok(size >= i64::from(rules.max_size))
}

/// A new record of `w`'s period, before any score.
fn fresh(w: &RecordWrite, max_num_score: i32) -> LeaderboardRecordRow {
    LeaderboardRecordRow {
        leaderboard_id: w.leaderboard_id.clone(),
        expiry_time: w.expiry_time,
        owner_id: w.owner_id,
        username: w.username.clone(),
        score: 0,
        subscore: 0,
        num_score: 0,
        max_num_score,
        metadata: "{}".into(),
        create_time_ms: w.now_ms,
        update_time_ms: w.now_ms,
    }
}

fn write_tournament_record(
    conn: &Connection,
    w: &RecordWrite,
    rules: TournamentRules,
) -> Result<Result<LeaderboardRecordRow, TournamentRefusal>, StoreError> {
    let old = current(
        conn,
        &w.leaderboard_id,
        w.expiry_time,
        &w.owner_id.to_string(),
    )?;
    let base = match old {
        Some(old) => {
            if old.max_num_score > 0 && old.num_score >= old.max_num_score {
                return Ok(Err(TournamentRefusal::MaxNumScore));
            }
            old
        }
        None if rules.join_required => return Ok(Err(TournamentRefusal::NotJoined)),
        None => {
            if is_full(conn, w, rules)? {
                return Ok(Err(TournamentRefusal::Full));
            }
            fresh(w, rules.max_num_score)
        }
    };
    // A joined record (no submission yet) takes the first score as a new one.
    let previous = (base.num_score > 0).then_some((base.score, base.subscore));
    let (score, subscore) = apply(w.op, previous, w.score, w.subscore);
    let next = LeaderboardRecordRow {
        score,
        subscore,
        num_score: base.num_score.saturating_add(1),
        username: if w.username.is_empty() {
            base.username.clone()
        } else {
            w.username.clone()
        },
        metadata: w.metadata.clone().unwrap_or(base.metadata.clone()),
        update_time_ms: w.now_ms,
        ..base
    };
    put(conn, &next)?;
    Ok(Ok(next))
}

fn join_tournament(
    conn: &Connection,
    w: &RecordWrite,
    rules: TournamentRules,
) -> Result<Result<bool, TournamentRefusal>, StoreError> {
    if current(
        conn,
        &w.leaderboard_id,
        w.expiry_time,
        &w.owner_id.to_string(),
    )?
    .is_some()
    {
        return Ok(Ok(false));
    }
    if is_full(conn, w, rules)? {
        return Ok(Err(TournamentRefusal::Full));
    }
    put(conn, &fresh(w, rules.max_num_score))?;
    Ok(Ok(true))
}

fn write_record(conn: &Connection, w: &RecordWrite) -> Result<LeaderboardRecordRow, StoreError> {
    let old = current(
        conn,
        &w.leaderboard_id,
        w.expiry_time,
        &w.owner_id.to_string(),
    )?;
    let (score, subscore) = apply(
        w.op,
        old.as_ref().map(|r| (r.score, r.subscore)),
        w.score,
        w.subscore,
    );
    let next = match old {
        Some(old) => {
            // As Nakama: a submission that changes neither score nor subscore changes nothing.
            if (score, subscore) == (old.score, old.subscore) {
                return Ok(old);
            }
            LeaderboardRecordRow {
                score,
                subscore,
                num_score: old.num_score.saturating_add(1),
                username: if w.username.is_empty() {
                    old.username.clone()
                } else {
                    w.username.clone()
                },
                metadata: w.metadata.clone().unwrap_or(old.metadata.clone()),
                update_time_ms: w.now_ms,
                ..old
            }
        }
        None => LeaderboardRecordRow {
            leaderboard_id: w.leaderboard_id.clone(),
            expiry_time: w.expiry_time,
            owner_id: w.owner_id,
            username: w.username.clone(),
            score,
            subscore,
            num_score: 1,
            max_num_score: 0,
            metadata: w.metadata.clone().unwrap_or_else(|| "{}".into()),
            create_time_ms: w.now_ms,
            update_time_ms: w.now_ms,
        },
    };
    put(conn, &next)?;
    Ok(next)
}

const DEF_COLUMNS: &str = "id, authoritative, sort_order, operator, reset_schedule, metadata,
     create_time_ms, title, description, category, duration, start_time, end_time, max_size,
     max_num_score, join_required";

fn def(row: &Row) -> rusqlite::Result<LeaderboardDef> {
    Ok(LeaderboardDef {
        id: row.get(0)?,
        authoritative: row.get::<_, i64>(1)? != 0,
        sort_order: row.get(2)?,
        operator: row.get(3)?,
        reset_schedule: row.get(4)?,
        metadata: row.get(5)?,
        create_time_ms: row.get(6)?,
        tournament: TournamentFields {
            title: row.get(7)?,
            description: row.get(8)?,
            category: row.get(9)?,
            duration: row.get(10)?,
            start_time: row.get(11)?,
            end_time: row.get(12)?,
            max_size: row.get(13)?,
            max_num_score: row.get(14)?,
            join_required: row.get::<_, i64>(15)? != 0,
        },
    })
}

#[async_trait]
impl LeaderboardStore for SqliteStore {
    async fn claim_event(
        &self,
        leaderboard_id: String,
        kind: i16,
        at: i64,
        node: String,
    ) -> Result<bool, StoreError> {
        self.write("leaderboard_event_claim", move |conn| {
            conn.execute(
                "DELETE FROM leaderboard_events WHERE leaderboard_id = ?1 AND kind = ?2 AND at < ?3",
                params![leaderboard_id, kind, at - EVENT_CLAIMS_KEPT_SECS],
            )
            .and_then(|_| {
                conn.execute(
                    "INSERT INTO leaderboard_events (leaderboard_id, kind, at, node)
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                    params![leaderboard_id, kind, at, node],
                )
            })
            .map(|n| n == 1)
            .map_err(db_error)
        })
        .await
    }

    async fn create_leaderboard(&self, def: LeaderboardDef) -> Result<bool, StoreError> {
        self.write("leaderboard_create", move |conn| {
            let t = &def.tournament;
            conn.prepare_cached(&format!(
                "INSERT INTO leaderboards ({DEF_COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
                 ON CONFLICT (id) DO NOTHING"
            ))
            .and_then(|mut s| {
                s.execute(params![
                    def.id,
                    def.authoritative,
                    def.sort_order,
                    def.operator,
                    def.reset_schedule,
                    def.metadata,
                    def.create_time_ms,
                    t.title,
                    t.description,
                    t.category,
                    t.duration,
                    t.start_time,
                    t.end_time,
                    t.max_size,
                    t.max_num_score,
                    t.join_required
                ])
            })
            .map(|n| n == 1)
            .map_err(db_error)
        })
        .await
    }

    async fn leaderboards(&self) -> Result<Vec<LeaderboardDef>, StoreError> {
        self.read("leaderboard_list", |conn| {
            conn.prepare_cached(&format!("SELECT {DEF_COLUMNS} FROM leaderboards"))
                .and_then(|mut s| s.query_map([], def)?.collect::<Result<Vec<_>, _>>())
                .map_err(db_error)
        })
        .await
    }

    async fn delete_leaderboard(&self, id: String) -> Result<(), StoreError> {
        self.write("leaderboard_delete", move |conn| {
            conn.execute(
                "DELETE FROM leaderboard_records WHERE leaderboard_id = ?1",
                params![id],
            )
            .and_then(|_| conn.execute("DELETE FROM leaderboards WHERE id = ?1", params![id]))
            .map(|_| ())
            .map_err(db_error)
        })
        .await
    }

    async fn set_leaderboard_metadata(
        &self,
        id: String,
        metadata: String,
    ) -> Result<bool, StoreError> {
        self.write("leaderboard_metadata", move |conn| {
            conn.execute(
                "UPDATE leaderboards SET metadata = ?2 WHERE id = ?1",
                params![id, metadata],
            )
            .map(|changed| changed > 0)
            .map_err(db_error)
        })
        .await
    }

    async fn write_record(&self, write: RecordWrite) -> Result<LeaderboardRecordRow, StoreError> {
        self.write("leaderboard_record_write", move |conn| {
            write_record(conn, &write)
        })
        .await
    }

    async fn write_tournament_record(
        &self,
        write: RecordWrite,
        rules: TournamentRules,
    ) -> Result<Result<LeaderboardRecordRow, TournamentRefusal>, StoreError> {
        self.write("tournament_record_write", move |conn| {
            write_tournament_record(conn, &write, rules)
        })
        .await
    }

    async fn join_tournament(
        &self,
        write: RecordWrite,
        rules: TournamentRules,
    ) -> Result<Result<bool, TournamentRefusal>, StoreError> {
        self.write("tournament_join", move |conn| {
            join_tournament(conn, &write, rules)
        })
        .await
    }

    async fn delete_record(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        owner_id: Uuid,
    ) -> Result<bool, StoreError> {
        self.write("leaderboard_record_delete", move |conn| {
            conn.prepare_cached(
                "DELETE FROM leaderboard_records
                 WHERE leaderboard_id = ?1 AND expiry_time = ?2 AND owner_id = ?3",
            )
            .and_then(|mut s| s.execute(params![leaderboard_id, expiry_time, owner_id.to_string()]))
            .map(|n| n > 0)
            .map_err(db_error)
        })
        .await
    }

    async fn add_attempts(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        owner_id: Uuid,
        count: i32,
    ) -> Result<bool, StoreError> {
        self.write("tournament_add_attempts", move |conn| {
            conn.prepare_cached(
                "UPDATE leaderboard_records SET max_num_score = min(2147483647, max(1, max_num_score + ?4))
                 WHERE leaderboard_id = ?1 AND expiry_time = ?2 AND owner_id = ?3
                   AND max_num_score > 0",
            )
            .and_then(|mut s| {
                s.execute(params![
                    leaderboard_id,
                    expiry_time,
                    owner_id.to_string(),
                    count
                ])
            })
            .map(|n| n > 0)
            .map_err(db_error)
        })
        .await
    }

    async fn list_records(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        position: Option<RecordPosition>,
        descending: bool,
        limit: usize,
    ) -> Result<Vec<LeaderboardRecordRow>, StoreError> {
        self.read("leaderboard_record_list", move |conn| {
            list(
                conn,
                &leaderboard_id,
                expiry_time,
                position.as_ref(),
                descending,
                limit,
            )
        })
        .await
    }

    async fn records_around(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        owner_id: Uuid,
        limit: usize,
    ) -> Result<Option<RecordsAround>, StoreError> {
        self.read("leaderboard_record_around", move |conn| {
            let Some(mine) = current(conn, &leaderboard_id, expiry_time, &owner_id.to_string())?
            else {
                return Ok(None);
            };
            let at = RecordPosition {
                score: mine.score,
                subscore: mine.subscore,
                owner_id,
            };
            let after = list(conn, &leaderboard_id, expiry_time, Some(&at), false, limit)?;
            let before = list(conn, &leaderboard_id, expiry_time, Some(&at), true, limit)?;
            Ok(Some(RecordsAround {
                mine,
                after,
                before,
            }))
        })
        .await
    }

    async fn records_of(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        owners: Vec<Uuid>,
    ) -> Result<Vec<LeaderboardRecordRow>, StoreError> {
        self.read("leaderboard_record_read", move |conn| {
            let mut found = Vec::with_capacity(owners.len());
            for owner in owners {
                found.extend(current(
                    conn,
                    &leaderboard_id,
                    expiry_time,
                    &owner.to_string(),
                )?);
            }
            Ok(found)
        })
        .await
    }

    async fn period_scores(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
    ) -> Result<Vec<(Uuid, i64, i64, i32)>, StoreError> {
        self.read("leaderboard_rank_load", move |conn| {
            let rows = conn
                .prepare_cached(
                    "SELECT owner_id, score, subscore, num_score FROM leaderboard_records
                     WHERE leaderboard_id = ?1 AND expiry_time = ?2",
                )
                .and_then(|mut s| {
                    s.query_map(params![leaderboard_id, expiry_time], |r| {
                        Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                    })?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(db_error)?;
            rows.into_iter()
                .map(|(owner, score, subscore, num)| {
                    Ok((parse_uuid(&owner)?, score, subscore, num))
                })
                .collect()
        })
        .await
    }
}
