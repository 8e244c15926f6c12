//! Friends, invites and blocks on SQLite: every change runs on the writer, so each add, delete
//! or block sees the edges as the previous one left them (no race between two players adding
//! each other at once: one invites, the other accepts).

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use uuid::Uuid;

use crate::accounts::sqlite::{user_from, USER_COLUMNS};
use crate::accounts::store::AccountRecord;
use crate::friends::store::friend_state::{
    add_action, AddAction, BLOCKED, FRIEND, INVITE_RECEIVED, INVITE_SENT,
};
use crate::friends::store::{plan_import, FriendAdded, FriendRecord, FriendStore, ImportCandidate};
use crate::store::sqlite::{db_error, parse_uuid, SqliteStore};
use crate::store::StoreError;

fn state(conn: &Connection, from: &str, to: &str) -> Result<Option<i32>, StoreError> {
    conn.prepare_cached("SELECT state FROM user_edges WHERE source_id = ?1 AND destination_id = ?2")
        .and_then(|mut s| s.query_row([from, to], |r| r.get(0)).optional())
        .map_err(db_error)
}

fn edges(conn: &Connection, user: &str) -> Result<usize, StoreError> {
    conn.prepare_cached("SELECT COUNT(*) FROM user_edges WHERE source_id = ?1")
        .and_then(|mut s| s.query_row([user], |r| r.get::<_, i64>(0)))
        .map_err(db_error)
        .map(|n| n as usize)
}

fn exists(conn: &Connection, user: &str) -> Result<bool, StoreError> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM users WHERE id = ?1)")
        .and_then(|mut s| s.query_row([user], |r| r.get(0)))
        .map_err(db_error)
}

fn put(
    conn: &Connection,
    from: &str,
    to: &str,
    state: i32,
    position: i64,
    now_ms: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO user_edges (source_id, destination_id, state, position, update_time_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (source_id, destination_id) DO UPDATE SET state = ?3, update_time_ms = ?5",
    )
    .and_then(|mut s| s.execute(params![from, to, state, position, now_ms]))
    .map_err(db_error)?;
    Ok(())
}

fn remove(conn: &Connection, from: &str, to: &str) -> Result<usize, StoreError> {
    conn.prepare_cached("DELETE FROM user_edges WHERE source_id = ?1 AND destination_id = ?2")
        .and_then(|mut s| s.execute([from, to]))
        .map_err(db_error)
}

fn add(
    conn: &Connection,
    user: Uuid,
    targets: &[Uuid],
    now_us: i64,
    max_edges: usize,
) -> Result<Vec<(Uuid, FriendAdded)>, StoreError> {
    let me = user.to_string();
    let now_ms = now_us / 1000;
    let mut mine = edges(conn, &me)?;
    let mut done = Vec::new();
    for target in targets {
        let other = target.to_string();
        match add_action(state(conn, &me, &other)?, state(conn, &other, &me)?) {
            AddAction::Accept => {
                put(conn, &me, &other, FRIEND, now_us, now_ms)?;
                put(conn, &other, &me, FRIEND, now_us, now_ms)?;
                done.push((*target, FriendAdded::Accepted));
            }
            AddAction::Nothing => {}
            AddAction::Invite => {
                if !exists(conn, &other)? || edges(conn, &other)? >= max_edges {
                    continue;
                }
                if mine >= max_edges {
                    return Err(StoreError::LimitReached);
                }
                put(conn, &me, &other, INVITE_SENT, now_us, now_ms)?;
                put(conn, &other, &me, INVITE_RECEIVED, now_us, now_ms)?;
                mine += 1;
                done.push((*target, FriendAdded::Invited));
            }
        }
    }
    Ok(done)
}

fn delete(conn: &Connection, user: Uuid, targets: &[Uuid]) -> Result<Vec<Uuid>, StoreError> {
    let me = user.to_string();
    let mut told = Vec::new();
    for target in targets {
        let other = target.to_string();
        let mine = remove(conn, &me, &other)?;
        let theirs = if state(conn, &other, &me)? == Some(BLOCKED) {
            0
        } else {
            remove(conn, &other, &me)?
        };
        if mine > 0 && theirs > 0 {
            told.push(*target);
        }
    }
    Ok(told)
}

fn block(
    conn: &Connection,
    user: Uuid,
    targets: &[Uuid],
    now_us: i64,
    max_edges: usize,
) -> Result<(), StoreError> {
    let me = user.to_string();
    let now_ms = now_us / 1000;
    let mut mine = edges(conn, &me)?;
    for target in targets {
        let other = target.to_string();
        let had = state(conn, &me, &other)?;
        if had.is_none() {
            if !exists(conn, &other)? {
                continue;
            }
            if mine >= max_edges {
                return Err(StoreError::LimitReached);
            }
            mine += 1;
        }
        put(conn, &me, &other, BLOCKED, now_us, now_ms)?;
        if state(conn, &other, &me)? != Some(BLOCKED) {
            remove(conn, &other, &me)?;
        }
    }
    Ok(())
}

/// `from`'s edge to `to`: its state and metadata.
fn edge(conn: &Connection, from: &str, to: &str) -> Result<Option<(i32, String)>, StoreError> {
    conn.prepare_cached(
        "SELECT state, metadata FROM user_edges WHERE source_id = ?1 AND destination_id = ?2",
    )
    .and_then(|mut s| {
        s.query_row([from, to], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
    })
    .map_err(db_error)
}

fn import(
    conn: &Connection,
    user: Uuid,
    friends: &[Uuid],
    provider: &str,
    reset: bool,
    now_us: i64,
    max_edges: usize,
) -> Result<Vec<Uuid>, StoreError> {
    let me = user.to_string();
    let now_ms = now_us / 1000;
    if reset {
        for sql in [
            "DELETE FROM user_edges WHERE source_id = ?1 AND state <> 3",
            "DELETE FROM user_edges WHERE destination_id = ?1 AND state <> 3",
        ] {
            conn.prepare_cached(sql)
                .and_then(|mut s| s.execute([&me]))
                .map_err(db_error)?;
        }
    }
    let mut candidates = Vec::with_capacity(friends.len());
    let mut seen = std::collections::HashSet::with_capacity(friends.len());
    for friend in friends {
        let other = friend.to_string();
        if *friend == user || !seen.insert(*friend) || !exists(conn, &other)? {
            continue;
        }
        candidates.push(ImportCandidate {
            friend: *friend,
            mine: edge(conn, &me, &other)?,
            theirs: edge(conn, &other, &me)?,
            friend_edges: edges(conn, &other)?,
        });
    }
    let plan = plan_import(user, edges(conn, &me)?, candidates, provider, max_edges);
    let mut upsert = conn
        .prepare_cached(
            "INSERT INTO user_edges (source_id, destination_id, state, position, update_time_ms,
                                     metadata)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (source_id, destination_id) DO UPDATE
             SET state = ?3, update_time_ms = ?5, metadata = ?6",
        )
        .map_err(db_error)?;
    for edge in &plan.edges {
        upsert
            .execute(params![
                edge.from.to_string(),
                edge.to.to_string(),
                FRIEND,
                now_us,
                now_ms,
                edge.metadata
            ])
            .map_err(db_error)?;
    }
    Ok(plan.friends)
}

fn list(
    conn: &Connection,
    user: Uuid,
    state_filter: Option<i32>,
    after: Option<(i32, i64, Uuid)>,
    limit: usize,
) -> Result<Vec<FriendRecord>, StoreError> {
    let (after_state, after_position, after_id) = after
        .map_or((-1, i64::MIN, String::new()), |(s, p, id)| {
            (s, p, id.to_string())
        });
    let mut statement = conn.prepare_cached(&LIST_SQL).map_err(db_error)?;
    let rows = statement
        .query_map(
            params![
                user.to_string(),
                state_filter,
                after_state,
                after_position,
                after_id,
                limit as i64
            ],
            edge_row,
        )
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(db_error)?;
    rows.into_iter().map(edge_record).collect()
}

/// A row of [`LIST_SQL`]'s columns, as read.
type EdgeRow = ((String, AccountRecord), i32, i64, i64, String);

fn edge_row(r: &rusqlite::Row) -> rusqlite::Result<EdgeRow> {
    Ok((
        user_from(r)?,
        r.get::<_, i32>(11)?,
        r.get::<_, i64>(12)?,
        r.get::<_, i64>(13)?,
        r.get::<_, String>(14)?,
    ))
}

fn edge_record(
    ((id, mut user), state, position, update_time_ms, metadata): EdgeRow,
) -> Result<FriendRecord, StoreError> {
    user.id = parse_uuid(&id)?;
    Ok(FriendRecord {
        user,
        state,
        position,
        update_time_ms,
        metadata,
    })
}

/// `user`'s edges to those of `others` it has one to.
fn among(conn: &Connection, user: Uuid, others: &[Uuid]) -> Result<Vec<FriendRecord>, StoreError> {
    let mut statement = conn.prepare_cached(&AMONG_SQL).map_err(db_error)?;
    let user = user.to_string();
    let mut found = Vec::new();
    for other in others {
        let row = statement
            .query_row(params![user, other.to_string()], edge_row)
            .optional()
            .map_err(db_error)?;
        if let Some(row) = row {
            found.push(edge_record(row)?);
        }
    }
    Ok(found)
}

/// A page of a user's edges: the other user's [`USER_COLUMNS`] (of the joined `users u`), then
/// the edge's state, position, update time and metadata.
static LIST_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let columns: Vec<String> = USER_COLUMNS
        .split(',')
        .map(|column| format!("u.{}", column.trim()))
        .collect();
    format!(
        "SELECT {}, e.state, e.position, e.update_time_ms, e.metadata
         FROM user_edges e JOIN users u ON u.id = e.destination_id
         WHERE e.source_id = ?1 AND (?2 IS NULL OR e.state = ?2)
           AND (e.state, e.position, e.destination_id) > (?3, ?4, ?5)
         ORDER BY e.state, e.position, e.destination_id LIMIT ?6",
        columns.join(", ")
    )
});

/// One of a user's edges, in [`LIST_SQL`]'s columns: `?1` the user, `?2` the other.
static AMONG_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let columns: Vec<String> = USER_COLUMNS
        .split(',')
        .map(|column| format!("u.{}", column.trim()))
        .collect();
    format!(
        "SELECT {}, e.state, e.position, e.update_time_ms, e.metadata
         FROM user_edges e JOIN users u ON u.id = e.destination_id
         WHERE e.source_id = ?1 AND e.destination_id = ?2",
        columns.join(", ")
    )
});

#[async_trait]
impl FriendStore for SqliteStore {
    async fn add_friends(
        &self,
        user: Uuid,
        targets: Vec<Uuid>,
        now_us: i64,
        max_edges: usize,
    ) -> Result<Vec<(Uuid, FriendAdded)>, StoreError> {
        self.write("friend_add", move |conn| {
            add(conn, user, &targets, now_us, max_edges)
        })
        .await
    }

    async fn delete_friends(
        &self,
        user: Uuid,
        targets: Vec<Uuid>,
    ) -> Result<Vec<Uuid>, StoreError> {
        self.write("friend_delete", move |conn| delete(conn, user, &targets))
            .await
    }

    async fn block_friends(
        &self,
        user: Uuid,
        targets: Vec<Uuid>,
        now_us: i64,
        max_edges: usize,
    ) -> Result<(), StoreError> {
        self.write("friend_block", move |conn| {
            block(conn, user, &targets, now_us, max_edges)
        })
        .await
    }

    async fn list_friends(
        &self,
        user: Uuid,
        state: Option<i32>,
        after: Option<(i32, i64, Uuid)>,
        limit: usize,
    ) -> Result<Vec<FriendRecord>, StoreError> {
        self.read("friend_list", move |conn| {
            list(conn, user, state, after, limit)
        })
        .await
    }

    async fn friends_of_friends(
        &self,
        user: Uuid,
        after: Option<(Uuid, Uuid)>,
        limit: usize,
    ) -> Result<Vec<(Uuid, Uuid)>, StoreError> {
        self.read("friend_of_friend_list", move |conn| {
            let (referrer, friend) = after.map_or((String::new(), String::new()), |(r, f)| {
                (r.to_string(), f.to_string())
            });
            let rows = conn
                .prepare_cached(
                    "SELECT f.destination_id, ff.destination_id
             FROM user_edges f
             JOIN user_edges ff ON ff.source_id = f.destination_id AND ff.state = 0
             WHERE f.source_id = ?1 AND f.state = 0 AND ff.destination_id <> ?1
               AND ff.destination_id NOT IN
                   (SELECT destination_id FROM user_edges WHERE source_id = ?1 AND state = 0)
               AND (f.destination_id, ff.destination_id) > (?2, ?3)
             ORDER BY f.destination_id, ff.destination_id LIMIT ?4",
                )
                .and_then(|mut s| {
                    s.query_map(
                        params![user.to_string(), referrer, friend, limit as i64],
                        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
                    )?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(db_error)?;
            rows.iter()
                .map(|(r, f)| Ok((parse_uuid(r)?, parse_uuid(f)?)))
                .collect()
        })
        .await
    }

    async fn friends_among(
        &self,
        user: Uuid,
        others: Vec<Uuid>,
    ) -> Result<Vec<FriendRecord>, StoreError> {
        self.read("friend_among", move |conn| among(conn, user, &others))
            .await
    }

    async fn set_friend_metadata(
        &self,
        user: Uuid,
        other: Uuid,
        metadata: String,
    ) -> Result<bool, StoreError> {
        self.write("friend_metadata", move |conn| {
            conn.prepare_cached(
                "UPDATE user_edges SET metadata = ?3 WHERE source_id = ?1 AND destination_id = ?2",
            )
            .and_then(|mut s| s.execute(params![user.to_string(), other.to_string(), metadata]))
            .map(|changed| changed > 0)
            .map_err(db_error)
        })
        .await
    }

    async fn friend_state(&self, user: Uuid, other: Uuid) -> Result<Option<i32>, StoreError> {
        self.read("friend_state", move |conn| {
            state(conn, &user.to_string(), &other.to_string())
        })
        .await
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
        self.write("friend_import", move |conn| {
            import(conn, user, &friends, provider, reset, now_us, max_edges)
        })
        .await
    }
}
