//! Leaderboards on PostgreSQL. A score is one statement through the group-commit writers: an
//! upsert whose update applies the operator and is skipped when it would change nothing (as
//! Nakama's), answering the record as it is afterwards. One owner's scores take one writer, so
//! they apply in the order they came.

use std::time::Instant;

use async_trait::async_trait;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::leaderboards::store::{
    LeaderboardDef, LeaderboardRecordRow, LeaderboardStore, RecordPosition, RecordWrite,
    RecordsAround, ScoreOp, TournamentFields, TournamentRefusal, TournamentRules,
    EVENT_CLAIMS_KEPT_SECS,
};
use crate::store::postgres::writer::{key_of, Write};
use crate::store::postgres::{db_error, prepared, PostgresStore};
use crate::store::StoreError;

const RECORD_COLUMNS: &str = "leaderboard_id, expiry_time, owner_id, username, score, subscore,
     num_score, max_num_score, metadata, create_time_ms, update_time_ms";

fn record(row: &Row) -> LeaderboardRecordRow {
    record_at(row, 0)
}

/// A record read from `row`'s columns from `first` on, in [`RECORD_COLUMNS`]'s order.
fn record_at(row: &Row, first: usize) -> LeaderboardRecordRow {
    LeaderboardRecordRow {
        leaderboard_id: row.get(first),
        expiry_time: row.get(first + 1),
        owner_id: row.get(first + 2),
        username: row.get(first + 3),
        score: row.get(first + 4),
        subscore: row.get(first + 5),
        num_score: row.get(first + 6),
        max_num_score: row.get(first + 7),
        metadata: row.get(first + 8),
        create_time_ms: row.get(first + 9),
        update_time_ms: row.get(first + 10),
    }
}

/// The operator as the statement's `$8`.
fn op_code(op: ScoreOp) -> i16 {
    match op {
        ScoreOp::Best { ascending: true } => 0,
        ScoreOp::Best { ascending: false } => 1,
        ScoreOp::Set => 2,
        ScoreOp::Increment => 3,
        ScoreOp::Decrement => 4,
    }
}

struct WriteRecord {
    leaderboard_id: String,
    expiry_time: i64,
    owner_id: Uuid,
    username: String,
    score: i64,
    subscore: i64,
    metadata: Option<String>,
    op: i16,
    now_ms: i64,
}

impl Write for WriteRecord {
    type Output = LeaderboardRecordRow;
    const PATH: &'static str = "leaderboard_record_write";
    const SQL: &'static str = "
WITH up AS (
    INSERT INTO leaderboard_records AS r (leaderboard_id, expiry_time, owner_id, username, score,
        subscore, num_score, max_num_score, metadata, create_time_ms, update_time_ms)
    VALUES ($1, $2, $3, $4, CASE WHEN $8 = 4 THEN 0 ELSE $5 END,
        CASE WHEN $8 = 4 THEN 0 ELSE $6 END, 1, 0, COALESCE($7, '{}'), $9, $9)
    ON CONFLICT (leaderboard_id, expiry_time, owner_id) DO UPDATE SET
        score = CASE $8 WHEN 0 THEN LEAST(r.score, $5) WHEN 1 THEN GREATEST(r.score, $5)
            WHEN 2 THEN $5 WHEN 3 THEN r.score + $5 ELSE GREATEST(r.score - $5, 0) END,
        subscore = CASE $8 WHEN 0 THEN LEAST(r.subscore, $6) WHEN 1 THEN GREATEST(r.subscore, $6)
            WHEN 2 THEN $6 WHEN 3 THEN r.subscore + $6 ELSE GREATEST(r.subscore - $6, 0) END,
        num_score = r.num_score + 1,
        username = CASE WHEN $4 = '' THEN r.username ELSE $4 END,
        metadata = COALESCE($7, r.metadata),
        update_time_ms = $9
    WHERE (CASE $8 WHEN 0 THEN LEAST(r.score, $5) WHEN 1 THEN GREATEST(r.score, $5)
            WHEN 2 THEN $5 WHEN 3 THEN r.score + $5 ELSE GREATEST(r.score - $5, 0) END,
           CASE $8 WHEN 0 THEN LEAST(r.subscore, $6) WHEN 1 THEN GREATEST(r.subscore, $6)
            WHEN 2 THEN $6 WHEN 3 THEN r.subscore + $6 ELSE GREATEST(r.subscore - $6, 0) END)
        IS DISTINCT FROM (r.score, r.subscore)
    RETURNING leaderboard_id, expiry_time, owner_id, username, score, subscore, num_score,
        max_num_score, metadata, create_time_ms, update_time_ms
)
SELECT * FROM up
UNION ALL
SELECT leaderboard_id, expiry_time, owner_id, username, score, subscore, num_score,
    max_num_score, metadata, create_time_ms, update_time_ms
FROM leaderboard_records
WHERE leaderboard_id = $1 AND expiry_time = $2 AND owner_id = $3
  AND NOT EXISTS (SELECT 1 FROM up)";
    const TYPES: &'static [Type] = &[
        Type::TEXT,
        Type::INT8,
        Type::UUID,
        Type::TEXT,
        Type::INT8,
        Type::INT8,
        Type::TEXT,
        Type::INT2,
        Type::INT8,
    ];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.leaderboard_id,
            &self.expiry_time,
            &self.owner_id,
            &self.username,
            &self.score,
            &self.subscore,
            &self.metadata,
            &self.op,
            &self.now_ms,
        ]
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<Self::Output, StoreError> {
        rows.first()
            .map(record)
            .ok_or_else(|| StoreError::Database("a leaderboard write returned no record".into()))
    }
}

/// A refusal code of the tournament statements as the refusal.
fn refusal(code: i16) -> Option<TournamentRefusal> {
    match code {
        1 => Some(TournamentRefusal::Full),
        2 => Some(TournamentRefusal::MaxNumScore),
        3 => Some(TournamentRefusal::NotJoined),
        _ => None,
    }
}

struct WriteTournamentRecord {
    record: WriteRecord,
    max_size: i32,
    join_required: bool,
    max_num_score: i32,
}

impl Write for WriteTournamentRecord {
    type Output = Result<LeaderboardRecordRow, TournamentRefusal>;
    const PATH: &'static str = "tournament_record_write";
    // A new record first claims its place in the period (`tournament_sizes`), whose conditional
    // update waits for and sees every racing claim; the record is written only with a claim.
    const SQL: &'static str = "
WITH old AS (
    SELECT r.num_score, r.max_num_score FROM leaderboard_records r
    WHERE r.leaderboard_id = $1 AND r.expiry_time = $2 AND r.owner_id = $3 FOR UPDATE OF r
), claimed AS (
    INSERT INTO tournament_sizes AS s (leaderboard_id, expiry_time, size)
    SELECT $1, $2, 1 WHERE $10 > 0 AND NOT $11 AND NOT EXISTS (SELECT 1 FROM old)
    ON CONFLICT (leaderboard_id, expiry_time) DO UPDATE SET size = s.size + 1
    WHERE s.size < $10
    RETURNING 1
), verdict AS (
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM old WHERE max_num_score > 0 AND num_score >= max_num_score)
            THEN 2
        WHEN NOT EXISTS (SELECT 1 FROM old) AND $11 THEN 3
        WHEN NOT EXISTS (SELECT 1 FROM old) AND $10 > 0 AND NOT EXISTS (SELECT 1 FROM claimed)
            THEN 1
        ELSE 0 END AS v
), up AS (
    INSERT INTO leaderboard_records AS r (leaderboard_id, expiry_time, owner_id, username, score,
        subscore, num_score, max_num_score, metadata, create_time_ms, update_time_ms)
    SELECT $1, $2, $3, $4, CASE WHEN $8 = 4 THEN 0 ELSE $5 END,
        CASE WHEN $8 = 4 THEN 0 ELSE $6 END, 1, $12, COALESCE($7, '{}'), $9, $9
    FROM verdict WHERE v = 0
    ON CONFLICT (leaderboard_id, expiry_time, owner_id) DO UPDATE SET
        score = CASE WHEN r.num_score = 0 THEN (CASE WHEN $8 = 4 THEN 0 ELSE $5 END)
            ELSE CASE $8 WHEN 0 THEN LEAST(r.score, $5) WHEN 1 THEN GREATEST(r.score, $5)
                WHEN 2 THEN $5 WHEN 3 THEN r.score + $5 ELSE GREATEST(r.score - $5, 0) END END,
        subscore = CASE WHEN r.num_score = 0 THEN (CASE WHEN $8 = 4 THEN 0 ELSE $6 END)
            ELSE CASE $8 WHEN 0 THEN LEAST(r.subscore, $6) WHEN 1 THEN GREATEST(r.subscore, $6)
                WHEN 2 THEN $6 WHEN 3 THEN r.subscore + $6 ELSE GREATEST(r.subscore - $6, 0) END END,
        num_score = r.num_score + 1,
        username = CASE WHEN $4 = '' THEN r.username ELSE $4 END,
        metadata = COALESCE($7, r.metadata),
        update_time_ms = $9
    RETURNING leaderboard_id, expiry_time, owner_id, username, score, subscore, num_score,
        max_num_score, metadata, create_time_ms, update_time_ms
)
SELECT verdict.v::int2, up.* FROM verdict LEFT JOIN up ON TRUE";
    const TYPES: &'static [Type] = &[
        Type::TEXT,
        Type::INT8,
        Type::UUID,
        Type::TEXT,
        Type::INT8,
        Type::INT8,
        Type::TEXT,
        Type::INT2,
        Type::INT8,
        Type::INT4,
        Type::BOOL,
        Type::INT4,
    ];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let mut params = self.record.params();
        params.push(&self.max_size);
        params.push(&self.join_required);
        params.push(&self.max_num_score);
        params
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<Self::Output, StoreError> {
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Database("a tournament write returned no row".into()))?;
        if let Some(refused) = refusal(row.get(0)) {
            return Ok(Err(refused));
        }
        Ok(Ok(record_at(row, 1)))
    }
}

struct JoinTournament {
    leaderboard_id: String,
    expiry_time: i64,
    owner_id: Uuid,
    username: String,
    now_ms: i64,
    max_size: i32,
    max_num_score: i32,
}

impl Write for JoinTournament {
    type Output = Result<bool, TournamentRefusal>;
    const PATH: &'static str = "tournament_join";
    // As a write's first score: the place is claimed before the record is created.
    const SQL: &'static str = "
WITH old AS (
    SELECT 1 FROM leaderboard_records r
    WHERE r.leaderboard_id = $1 AND r.expiry_time = $2 AND r.owner_id = $3
), claimed AS (
    INSERT INTO tournament_sizes AS s (leaderboard_id, expiry_time, size)
    SELECT $1, $2, 1 WHERE $6 > 0 AND NOT EXISTS (SELECT 1 FROM old)
    ON CONFLICT (leaderboard_id, expiry_time) DO UPDATE SET size = s.size + 1
    WHERE s.size < $6
    RETURNING 1
), verdict AS (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM old) THEN -1
        WHEN $6 > 0 AND NOT EXISTS (SELECT 1 FROM claimed) THEN 1 ELSE 0 END AS v
), joined AS (
    INSERT INTO leaderboard_records (leaderboard_id, expiry_time, owner_id, username, score,
        subscore, num_score, max_num_score, metadata, create_time_ms, update_time_ms)
    SELECT $1, $2, $3, $4, 0, 0, 0, $7, '{}', $5, $5 FROM verdict WHERE v = 0
    ON CONFLICT (leaderboard_id, expiry_time, owner_id) DO NOTHING
    RETURNING 1
)
SELECT verdict.v::int2, (SELECT count(*) FROM joined) FROM verdict";
    const TYPES: &'static [Type] = &[
        Type::TEXT,
        Type::INT8,
        Type::UUID,
        Type::TEXT,
        Type::INT8,
        Type::INT4,
        Type::INT4,
    ];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.leaderboard_id,
            &self.expiry_time,
            &self.owner_id,
            &self.username,
            &self.now_ms,
            &self.max_size,
            &self.max_num_score,
        ]
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<Self::Output, StoreError> {
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Database("a tournament join returned no row".into()))?;
        if let Some(refused) = refusal(row.get(0)) {
            return Ok(Err(refused));
        }
        Ok(Ok(row.get::<_, i64>(1) > 0))
    }
}

fn write_record_of(write: RecordWrite) -> WriteRecord {
    WriteRecord {
        leaderboard_id: write.leaderboard_id,
        expiry_time: write.expiry_time,
        owner_id: write.owner_id,
        username: write.username,
        score: write.score,
        subscore: write.subscore,
        metadata: write.metadata,
        op: op_code(write.op),
        now_ms: write.now_ms,
    }
}

const DEF_COLUMNS: &str = "id, authoritative, sort_order, operator, reset_schedule, metadata,
     create_time_ms, title, description, category, duration, start_time, end_time, max_size,
     max_num_score, join_required";

#[async_trait]
impl LeaderboardStore for PostgresStore {
    async fn write_tournament_record(
        &self,
        write: RecordWrite,
        rules: TournamentRules,
    ) -> Result<Result<LeaderboardRecordRow, TournamentRefusal>, StoreError> {
        let key = key_of(write.owner_id);
        self.writers
            .write(
                key,
                WriteTournamentRecord {
                    record: write_record_of(write),
                    max_size: rules.max_size,
                    join_required: rules.join_required,
                    max_num_score: rules.max_num_score,
                },
            )
            .await
    }

    async fn join_tournament(
        &self,
        write: RecordWrite,
        rules: TournamentRules,
    ) -> Result<Result<bool, TournamentRefusal>, StoreError> {
        let key = key_of(write.owner_id);
        self.writers
            .write(
                key,
                JoinTournament {
                    leaderboard_id: write.leaderboard_id,
                    expiry_time: write.expiry_time,
                    owner_id: write.owner_id,
                    username: write.username,
                    now_ms: write.now_ms,
                    max_size: rules.max_size,
                    max_num_score: rules.max_num_score,
                },
            )
            .await
    }

    async fn claim_event(
        &self,
        leaderboard_id: String,
        kind: i16,
        at: i64,
        node: String,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute(
            "DELETE FROM leaderboard_events WHERE leaderboard_id = $1 AND kind = $2 AND at < $3",
            &[&leaderboard_id, &kind, &(at - EVENT_CLAIMS_KEPT_SECS)],
        )
        .await
        .map_err(db_error)?;
        let claimed = tx
            .execute(
                "INSERT INTO leaderboard_events (leaderboard_id, kind, at, node)
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                &[&leaderboard_id, &kind, &at, &node],
            )
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(claimed == 1)
    }

    async fn create_leaderboard(&self, def: LeaderboardDef) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            &format!(
                "INSERT INTO leaderboards ({DEF_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
                 ON CONFLICT (id) DO NOTHING"
            ),
        )
        .await?;
        let t = &def.tournament;
        let created = client
            .execute(
                &statement,
                &[
                    &def.id,
                    &def.authoritative,
                    &def.sort_order,
                    &def.operator,
                    &def.reset_schedule,
                    &def.metadata,
                    &def.create_time_ms,
                    &t.title,
                    &t.description,
                    &t.category,
                    &t.duration,
                    &t.start_time,
                    &t.end_time,
                    &t.max_size,
                    &t.max_num_score,
                    &t.join_required,
                ],
            )
            .await
            .map_err(db_error)?;
        Ok(created == 1)
    }

    async fn leaderboards(&self) -> Result<Vec<LeaderboardDef>, StoreError> {
        let client = self.client().await?;
        let statement =
            prepared(&client, &format!("SELECT {DEF_COLUMNS} FROM leaderboards")).await?;
        let rows = client.query(&statement, &[]).await.map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|r| LeaderboardDef {
                id: r.get(0),
                authoritative: r.get(1),
                sort_order: r.get(2),
                operator: r.get(3),
                reset_schedule: r.get(4),
                metadata: r.get(5),
                create_time_ms: r.get(6),
                tournament: TournamentFields {
                    title: r.get(7),
                    description: r.get(8),
                    category: r.get(9),
                    duration: r.get(10),
                    start_time: r.get(11),
                    end_time: r.get(12),
                    max_size: r.get(13),
                    max_num_score: r.get(14),
                    join_required: r.get(15),
                },
            })
            .collect())
    }

    async fn delete_leaderboard(&self, id: String) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute(
            "DELETE FROM leaderboard_records WHERE leaderboard_id = $1",
            &[&id],
        )
        .await
        .map_err(db_error)?;
        tx.execute("DELETE FROM leaderboards WHERE id = $1", &[&id])
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn set_leaderboard_metadata(
        &self,
        id: String,
        metadata: String,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE leaderboards SET metadata = $2 WHERE id = $1",
                &[&id, &metadata],
            )
            .await
            .map(|changed| changed > 0)
            .map_err(db_error)
    }

    async fn write_record(&self, write: RecordWrite) -> Result<LeaderboardRecordRow, StoreError> {
        let key = key_of(write.owner_id);
        self.writers.write(key, write_record_of(write)).await
    }

    async fn delete_record(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        owner_id: Uuid,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "DELETE FROM leaderboard_records
             WHERE leaderboard_id = $1 AND expiry_time = $2 AND owner_id = $3",
        )
        .await?;
        let deleted = client
            .execute(&statement, &[&leaderboard_id, &expiry_time, &owner_id])
            .await
            .map_err(db_error)?;
        Ok(deleted > 0)
    }

    async fn add_attempts(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        owner_id: Uuid,
        count: i32,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "UPDATE leaderboard_records
             SET max_num_score = LEAST(2147483647, GREATEST(1, max_num_score::int8 + $4::int8))::int4
             WHERE leaderboard_id = $1 AND expiry_time = $2 AND owner_id = $3
               AND max_num_score > 0",
        )
        .await?;
        let changed = client
            .execute(
                &statement,
                &[&leaderboard_id, &expiry_time, &owner_id, &i64::from(count)],
            )
            .await
            .map_err(db_error)?;
        Ok(changed > 0)
    }

    async fn list_records(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        position: Option<RecordPosition>,
        descending: bool,
        limit: usize,
    ) -> Result<Vec<LeaderboardRecordRow>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let order = if descending { "DESC" } else { "ASC" };
        let rows = match position {
            None => {
                let statement = prepared(
                    &client,
                    &format!(
                        "SELECT {RECORD_COLUMNS} FROM leaderboard_records
                         WHERE leaderboard_id = $1 AND expiry_time = $2
                         ORDER BY score {order}, subscore {order}, owner_id {order} LIMIT $3"
                    ),
                )
                .await?;
                client
                    .query(&statement, &[&leaderboard_id, &expiry_time, &limit])
                    .await
            }
            Some(at) => {
                let cmp = if descending { "<" } else { ">" };
                let statement = prepared(
                    &client,
                    &format!(
                        "SELECT {RECORD_COLUMNS} FROM leaderboard_records
                         WHERE leaderboard_id = $1 AND expiry_time = $2
                           AND (score, subscore, owner_id) {cmp} ($4, $5, $6)
                         ORDER BY score {order}, subscore {order}, owner_id {order} LIMIT $3"
                    ),
                )
                .await?;
                client
                    .query(
                        &statement,
                        &[
                            &leaderboard_id,
                            &expiry_time,
                            &limit,
                            &at.score,
                            &at.subscore,
                            &at.owner_id,
                        ],
                    )
                    .await
            }
        }
        .map_err(db_error)?;
        self.metrics
            .observe_db("leaderboard_record_list", started.elapsed());
        Ok(rows.iter().map(record).collect())
    }

    async fn records_around(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        owner_id: Uuid,
        limit: usize,
    ) -> Result<Option<RecordsAround>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // One round trip: the owner's record (part 0), the records after it (1) and before it
        // (2), each side nearest first once sorted below.
        let statement = prepared(
            &client,
            &format!(
                // Each side a lateral subquery, so that its row comparison with the owner's
                // record is an index condition (as a plain join it is a filter over the period).
                "WITH me AS (
                    SELECT {RECORD_COLUMNS} FROM leaderboard_records
                    WHERE leaderboard_id = $1 AND expiry_time = $2 AND owner_id = $3
                 )
                 SELECT {RECORD_COLUMNS}, 0::int2 FROM me
                 UNION ALL
                 SELECT r.*, 1::int2 FROM me CROSS JOIN LATERAL (
                    SELECT {RECORD_COLUMNS} FROM leaderboard_records x
                    WHERE x.leaderboard_id = $1 AND x.expiry_time = $2
                      AND (x.score, x.subscore, x.owner_id) > (me.score, me.subscore, me.owner_id)
                    ORDER BY x.score, x.subscore, x.owner_id LIMIT $4) r
                 UNION ALL
                 SELECT r.*, 2::int2 FROM me CROSS JOIN LATERAL (
                    SELECT {RECORD_COLUMNS} FROM leaderboard_records x
                    WHERE x.leaderboard_id = $1 AND x.expiry_time = $2
                      AND (x.score, x.subscore, x.owner_id) < (me.score, me.subscore, me.owner_id)
                    ORDER BY x.score DESC, x.subscore DESC, x.owner_id DESC LIMIT $4) r"
            ),
        )
        .await?;
        let rows = client
            .query(
                &statement,
                &[&leaderboard_id, &expiry_time, &owner_id, &limit],
            )
            .await
            .map_err(db_error)?;
        self.metrics
            .observe_db("leaderboard_record_around", started.elapsed());
        let (mut mine, mut after, mut before) = (None, Vec::new(), Vec::new());
        for row in &rows {
            match row.get::<_, i16>(11) {
                0 => mine = Some(record(row)),
                1 => after.push(record(row)),
                _ => before.push(record(row)),
            }
        }
        let key = |r: &LeaderboardRecordRow| (r.score, r.subscore, r.owner_id);
        after.sort_by_key(key);
        before.sort_by_key(|r| std::cmp::Reverse(key(r)));
        Ok(mine.map(|mine| RecordsAround {
            mine,
            after,
            before,
        }))
    }

    async fn records_of(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
        owners: Vec<Uuid>,
    ) -> Result<Vec<LeaderboardRecordRow>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            &format!(
                "SELECT {RECORD_COLUMNS} FROM leaderboard_records
                 WHERE leaderboard_id = $1 AND expiry_time = $2 AND owner_id = ANY($3)"
            ),
        )
        .await?;
        let rows = client
            .query(&statement, &[&leaderboard_id, &expiry_time, &owners])
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(record).collect())
    }

    async fn period_scores(
        &self,
        leaderboard_id: String,
        expiry_time: i64,
    ) -> Result<Vec<(Uuid, i64, i64, i32)>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "SELECT owner_id, score, subscore, num_score FROM leaderboard_records
             WHERE leaderboard_id = $1 AND expiry_time = $2",
        )
        .await?;
        let rows = client
            .query(&statement, &[&leaderboard_id, &expiry_time])
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect())
    }
}
