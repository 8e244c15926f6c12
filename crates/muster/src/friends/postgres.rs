//! Friends, invites and blocks on PostgreSQL. Each change is one transaction that first locks
//! the two users' rows (in id order, so two players adding each other at once cannot deadlock)
//! and then reads their edges: the second of two crossing adds sees the first's invite and
//! accepts it, as it would one after the other.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::accounts::postgres::user_from;
use crate::friends::store::friend_state::{
    add_action, AddAction, BLOCKED, FRIEND, INVITE_RECEIVED, INVITE_SENT,
};
use crate::friends::store::{plan_import, FriendAdded, FriendRecord, FriendStore, ImportCandidate};
use crate::store::postgres::{db_error, prepared, PostgresStore};
use crate::store::StoreError;

type Tx<'a> = deadpool_postgres::Transaction<'a>;

/// Locks both users' rows; whether `other` exists.
async fn lock_pair(tx: &Tx<'_>, user: Uuid, other: Uuid) -> Result<bool, StoreError> {
    let rows = tx
        .query(
            "SELECT id FROM users WHERE id = ANY($1) ORDER BY id FOR UPDATE",
            &[&vec![user, other]],
        )
        .await
        .map_err(db_error)?;
    Ok(rows.iter().any(|row| row.get::<_, Uuid>(0) == other))
}

async fn state(tx: &Tx<'_>, from: Uuid, to: Uuid) -> Result<Option<i32>, StoreError> {
    Ok(tx
        .query_opt(
            "SELECT state FROM user_edges WHERE source_id = $1 AND destination_id = $2",
            &[&from, &to],
        )
        .await
        .map_err(db_error)?
        .map(|row| row.get(0)))
}

async fn edges(tx: &Tx<'_>, user: Uuid) -> Result<usize, StoreError> {
    let row = tx
        .query_one(
            "SELECT COUNT(*) FROM user_edges WHERE source_id = $1",
            &[&user],
        )
        .await
        .map_err(db_error)?;
    Ok(row.get::<_, i64>(0) as usize)
}

async fn put(
    tx: &Tx<'_>,
    from: Uuid,
    to: Uuid,
    state: i32,
    position: i64,
    now_ms: i64,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO user_edges (source_id, destination_id, state, position, update_time_ms)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (source_id, destination_id) DO UPDATE SET state = $3, update_time_ms = $5",
        &[&from, &to, &state, &position, &now_ms],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

async fn remove(tx: &Tx<'_>, from: Uuid, to: Uuid) -> Result<u64, StoreError> {
    tx.execute(
        "DELETE FROM user_edges WHERE source_id = $1 AND destination_id = $2",
        &[&from, &to],
    )
    .await
    .map_err(db_error)
}

/// Edges between `user` and each of `others` in one direction, by the other user: `user`'s
/// own (`outgoing`) or theirs to `user`; each state and metadata.
async fn edges_among(
    tx: &Tx<'_>,
    user: Uuid,
    others: &[Uuid],
    outgoing: bool,
) -> Result<HashMap<Uuid, (i32, String)>, StoreError> {
    let sql = if outgoing {
        "SELECT destination_id, state, metadata FROM user_edges
         WHERE source_id = $1 AND destination_id = ANY($2)"
    } else {
        "SELECT source_id, state, metadata FROM user_edges
         WHERE destination_id = $1 AND source_id = ANY($2)"
    };
    let rows = tx.query(sql, &[&user, &others]).await.map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|row| (row.get(0), (row.get(1), row.get(2))))
        .collect())
}

fn record_from(row: &Row) -> FriendRecord {
    FriendRecord {
        user: user_from(row),
        state: row.get(11),
        position: row.get(12),
        update_time_ms: row.get(13),
        metadata: row.get(14),
    }
}

#[async_trait]
impl FriendStore for PostgresStore {
    async fn add_friends(
        &self,
        user: Uuid,
        targets: Vec<Uuid>,
        now_us: i64,
        max_edges: usize,
    ) -> Result<Vec<(Uuid, FriendAdded)>, StoreError> {
        let now_ms = now_us / 1000;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let mut done = Vec::new();
        for target in targets {
            if !lock_pair(&tx, user, target).await? {
                continue;
            }
            match add_action(
                state(&tx, user, target).await?,
                state(&tx, target, user).await?,
            ) {
                AddAction::Accept => {
                    put(&tx, user, target, FRIEND, now_us, now_ms).await?;
                    put(&tx, target, user, FRIEND, now_us, now_ms).await?;
                    done.push((target, FriendAdded::Accepted));
                }
                AddAction::Nothing => {}
                AddAction::Invite => {
                    if edges(&tx, target).await? >= max_edges {
                        continue;
                    }
                    if edges(&tx, user).await? >= max_edges {
                        return Err(StoreError::LimitReached);
                    }
                    put(&tx, user, target, INVITE_SENT, now_us, now_ms).await?;
                    put(&tx, target, user, INVITE_RECEIVED, now_us, now_ms).await?;
                    done.push((target, FriendAdded::Invited));
                }
            }
        }
        tx.commit().await.map_err(db_error)?;
        Ok(done)
    }

    async fn delete_friends(
        &self,
        user: Uuid,
        targets: Vec<Uuid>,
    ) -> Result<Vec<Uuid>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let mut told = Vec::new();
        for target in targets {
            lock_pair(&tx, user, target).await?;
            let mine = remove(&tx, user, target).await?;
            let theirs = if state(&tx, target, user).await? == Some(BLOCKED) {
                0
            } else {
                remove(&tx, target, user).await?
            };
            if mine > 0 && theirs > 0 {
                told.push(target);
            }
        }
        tx.commit().await.map_err(db_error)?;
        Ok(told)
    }

    async fn block_friends(
        &self,
        user: Uuid,
        targets: Vec<Uuid>,
        now_us: i64,
        max_edges: usize,
    ) -> Result<(), StoreError> {
        let now_ms = now_us / 1000;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        for target in targets {
            if !lock_pair(&tx, user, target).await? {
                continue;
            }
            if state(&tx, user, target).await?.is_none() && edges(&tx, user).await? >= max_edges {
                return Err(StoreError::LimitReached);
            }
            put(&tx, user, target, BLOCKED, now_us, now_ms).await?;
            if state(&tx, target, user).await? != Some(BLOCKED) {
                remove(&tx, target, user).await?;
            }
        }
        tx.commit().await.map_err(db_error)
    }

    async fn list_friends(
        &self,
        user: Uuid,
        state: Option<i32>,
        after: Option<(i32, i64, Uuid)>,
        limit: usize,
    ) -> Result<Vec<FriendRecord>, StoreError> {
        let client = self.client().await?;
        let (after_state, after_position, after_id) = after.unwrap_or((-1, i64::MIN, Uuid::nil()));
        let statement = prepared(
            &client,
            "SELECT u.id, u.username, u.display_name, u.avatar_url, u.lang_tag, u.location,
                    u.timezone, u.metadata, u.disable_time_ms, u.create_time_ms, u.update_time_ms,
                    e.state, e.position, e.update_time_ms, e.metadata
             FROM user_edges e JOIN users u ON u.id = e.destination_id
             WHERE e.source_id = $1 AND ($2::int4 IS NULL OR e.state = $2)
               AND (e.state, e.position, e.destination_id) > ($3, $4, $5)
             ORDER BY e.state, e.position, e.destination_id LIMIT $6",
        )
        .await?;
        let rows = client
            .query(
                &statement,
                &[
                    &user,
                    &state,
                    &after_state,
                    &after_position,
                    &after_id,
                    &(limit as i64),
                ],
            )
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(record_from).collect())
    }

    async fn friends_of_friends(
        &self,
        user: Uuid,
        after: Option<(Uuid, Uuid)>,
        limit: usize,
    ) -> Result<Vec<(Uuid, Uuid)>, StoreError> {
        let client = self.client().await?;
        let (referrer, friend) = after.unwrap_or((Uuid::nil(), Uuid::nil()));
        let statement = prepared(
            &client,
            "SELECT f.destination_id, ff.destination_id
             FROM user_edges f
             JOIN user_edges ff ON ff.source_id = f.destination_id AND ff.state = 0
             WHERE f.source_id = $1 AND f.state = 0 AND ff.destination_id <> $1
               AND ff.destination_id NOT IN
                   (SELECT destination_id FROM user_edges WHERE source_id = $1 AND state = 0)
               AND (f.destination_id, ff.destination_id) > ($2, $3)
             ORDER BY f.destination_id, ff.destination_id LIMIT $4",
        )
        .await?;
        let rows = client
            .query(&statement, &[&user, &referrer, &friend, &(limit as i64)])
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    async fn friends_among(
        &self,
        user: Uuid,
        others: Vec<Uuid>,
    ) -> Result<Vec<FriendRecord>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "SELECT u.id, u.username, u.display_name, u.avatar_url, u.lang_tag, u.location,
                    u.timezone, u.metadata, u.disable_time_ms, u.create_time_ms, u.update_time_ms,
                    e.state, e.position, e.update_time_ms, e.metadata
             FROM user_edges e JOIN users u ON u.id = e.destination_id
             WHERE e.source_id = $1 AND e.destination_id = ANY($2)",
        )
        .await?;
        let rows = client
            .query(&statement, &[&user, &others])
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(record_from).collect())
    }

    async fn set_friend_metadata(
        &self,
        user: Uuid,
        other: Uuid,
        metadata: String,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "UPDATE user_edges SET metadata = $3 WHERE source_id = $1 AND destination_id = $2",
        )
        .await?;
        let changed = client
            .execute(&statement, &[&user, &other, &metadata])
            .await
            .map_err(db_error)?;
        Ok(changed > 0)
    }

    async fn friend_state(&self, user: Uuid, other: Uuid) -> Result<Option<i32>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "SELECT state FROM user_edges WHERE source_id = $1 AND destination_id = $2",
        )
        .await?;
        Ok(client
            .query_opt(&statement, &[&user, &other])
            .await
            .map_err(db_error)?
            .map(|row| row.get(0)))
    }

    async fn import_friends(
        &self,
        user: Uuid,
        friends: Vec<Uuid>,
        provider: &'static str,
        reset: bool,
        now_us: i64,
        max_edges: usize,
    ) -> Result<Vec<Uuid>, StoreError> {
        let now_ms = now_us / 1000;
        let mut seen = HashSet::with_capacity(friends.len());
        let friends: Vec<Uuid> = friends
            .into_iter()
            .filter(|friend| *friend != user && seen.insert(*friend))
            .collect();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // The user's row and every friend's, at once in id order (as `lock_pair`, so that no
        // other change between the user and any of them, or to a friend's edges, runs
        // meanwhile); those found exist.
        let mut ids = friends.clone();
        ids.push(user);
        let existing: HashSet<Uuid> = tx
            .query(
                "SELECT id FROM users WHERE id = ANY($1) ORDER BY id FOR UPDATE",
                &[&ids],
            )
            .await
            .map_err(db_error)?
            .iter()
            .map(|row| row.get(0))
            .collect();
        if reset {
            for sql in [
                "DELETE FROM user_edges WHERE source_id = $1 AND state <> 3",
                "DELETE FROM user_edges WHERE destination_id = $1 AND state <> 3",
            ] {
                tx.execute(sql, &[&user]).await.map_err(db_error)?;
            }
        }
        let friends: Vec<Uuid> = friends
            .into_iter()
            .filter(|friend| existing.contains(friend))
            .collect();
        let mut mine = edges_among(&tx, user, &friends, true).await?;
        let mut theirs = edges_among(&tx, user, &friends, false).await?;
        let counts: HashMap<Uuid, i64> = tx
            .query(
                "SELECT source_id, COUNT(*) FROM user_edges WHERE source_id = ANY($1)
                 GROUP BY source_id",
                &[&friends],
            )
            .await
            .map_err(db_error)?
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
        let candidates = friends
            .iter()
            .map(|friend| ImportCandidate {
                friend: *friend,
                mine: mine.remove(friend),
                theirs: theirs.remove(friend),
                friend_edges: counts.get(friend).copied().unwrap_or(0) as usize,
            })
            .collect();
        let plan = plan_import(
            user,
            edges(&tx, user).await?,
            candidates,
            provider,
            max_edges,
        );
        if !plan.edges.is_empty() {
            let from: Vec<Uuid> = plan.edges.iter().map(|edge| edge.from).collect();
            let to: Vec<Uuid> = plan.edges.iter().map(|edge| edge.to).collect();
            let metadata: Vec<&str> = plan.edges.iter().map(|e| e.metadata.as_str()).collect();
            tx.execute(
                "INSERT INTO user_edges (source_id, destination_id, state, position, update_time_ms,
                                         metadata)
                 SELECT e.source_id, e.destination_id, $3::int4, $4::int8, $5::int8, e.metadata
                 FROM UNNEST($1::uuid[], $2::uuid[], $6::text[])
                      AS e(source_id, destination_id, metadata)
                 ON CONFLICT (source_id, destination_id) DO UPDATE
                 SET state = EXCLUDED.state, update_time_ms = EXCLUDED.update_time_ms,
                     metadata = EXCLUDED.metadata",
                &[&from, &to, &FRIEND, &now_us, &now_ms, &metadata],
            )
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(plan.friends)
    }
}
