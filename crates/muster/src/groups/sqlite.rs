//! Groups on SQLite: every change runs on the writer, so each reads the group as the previous
//! change left it and [`plan`] decides on what is there.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Row};
use uuid::Uuid;

use crate::accounts::sqlite::{user_from, USER_COLUMNS};
use crate::groups::store::{
    plan, state, Actor, Before, Changed, GroupAfter, GroupChanges, GroupFilter, GroupRecord,
    GroupRefusal, GroupStore, GroupUserRecord, MemberChange, Target, UserGroupRecord,
};
use crate::store::sqlite::{parse_uuid, unique_violation, SqliteStore};
use crate::store::StoreError;

/// SQLite's errors as groups tell them apart: a name another group has is refused as in use.
fn db_error(error: rusqlite::Error) -> StoreError {
    match unique_violation(&error) {
        Some("groups.name") => GroupRefusal::NameInUse.into(),
        _ => crate::store::sqlite::db_error(error),
    }
}

const GROUP_COLUMNS: &str = "id, creator_id, name, description, avatar_url, lang_tag, metadata,
    open, edge_count, max_count, create_time_ms, update_time_ms";

fn uuid_at(row: &Row, index: usize) -> rusqlite::Result<Uuid> {
    let text: String = row.get(index)?;
    Uuid::parse_str(&text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// The group of a row that starts with [`GROUP_COLUMNS`].
fn group_from(row: &Row) -> rusqlite::Result<GroupRecord> {
    Ok(GroupRecord {
        id: uuid_at(row, 0)?,
        creator_id: uuid_at(row, 1)?,
        name: row.get(2)?,
        description: row.get(3)?,
        avatar_url: row.get(4)?,
        lang_tag: row.get(5)?,
        metadata: row.get(6)?,
        open: row.get(7)?,
        edge_count: row.get(8)?,
        max_count: row.get(9)?,
        create_time_ms: row.get(10)?,
        update_time_ms: row.get(11)?,
    })
}

fn group(conn: &Connection, id: Uuid) -> Result<Option<GroupRecord>, StoreError> {
    conn.prepare_cached(&format!("SELECT {GROUP_COLUMNS} FROM groups WHERE id = ?1"))
        .and_then(|mut s| s.query_row([id.to_string()], group_from).optional())
        .map_err(db_error)
}

/// [`GroupStore::random_groups`]: ids are stored as their text, which orders as the ids do.
fn random(conn: &Connection, pivot: Uuid, count: usize) -> Result<Vec<GroupRecord>, StoreError> {
    let pivot = pivot.to_string();
    let mut found = Vec::with_capacity(count);
    for sql in [
        format!("SELECT {GROUP_COLUMNS} FROM groups WHERE id > ?1 ORDER BY id LIMIT ?2"),
        format!("SELECT {GROUP_COLUMNS} FROM groups WHERE id <= ?1 ORDER BY id LIMIT ?2"),
    ] {
        let wanted = (count - found.len()) as i64;
        if wanted == 0 {
            break;
        }
        let rows = conn
            .prepare_cached(&sql)
            .and_then(|mut s| {
                s.query_map(params![pivot, wanted], group_from)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(db_error)?;
        found.extend(rows);
    }
    Ok(found)
}

fn member_state(conn: &Connection, id: Uuid, user: Uuid) -> Result<Option<i32>, StoreError> {
    conn.prepare_cached("SELECT state FROM group_members WHERE group_id = ?1 AND user_id = ?2")
        .and_then(|mut s| {
            s.query_row([id.to_string(), user.to_string()], |r| r.get(0))
                .optional()
        })
        .map_err(db_error)
}

/// Groups `user` is in or has asked to join.
fn groups_of(conn: &Connection, user: Uuid) -> Result<usize, StoreError> {
    conn.prepare_cached("SELECT COUNT(*) FROM group_members WHERE user_id = ?1 AND state <= ?2")
        .and_then(|mut s| {
            s.query_row(params![user.to_string(), state::JOIN_REQUEST], |r| {
                r.get::<_, i64>(0)
            })
        })
        .map_err(db_error)
        .map(|n| n as usize)
}

fn members_at_most(conn: &Connection, id: Uuid, at_most: i32) -> Result<Vec<Uuid>, StoreError> {
    let ids = conn
        .prepare_cached("SELECT user_id FROM group_members WHERE group_id = ?1 AND state <= ?2")
        .and_then(|mut s| {
            s.query_map(params![id.to_string(), at_most], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(db_error)?;
    ids.iter().map(|id| parse_uuid(id)).collect()
}

fn user_exists(conn: &Connection, user: Uuid) -> Result<bool, StoreError> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM users WHERE id = ?1)")
        .and_then(|mut s| s.query_row([user.to_string()], |r| r.get(0)))
        .map_err(db_error)
}

fn create(
    conn: &Connection,
    group: GroupRecord,
    max_groups: usize,
) -> Result<GroupRecord, StoreError> {
    if groups_of(conn, group.creator_id)? >= max_groups {
        return Err(GroupRefusal::TooManyGroups.into());
    }
    conn.prepare_cached(
        "INSERT INTO groups (id, creator_id, name, description, avatar_url, lang_tag, metadata,
             open, edge_count, max_count, create_time_ms, update_time_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 1, ?9, ?10, ?10)",
    )
    .and_then(|mut s| {
        s.execute(params![
            group.id.to_string(),
            group.creator_id.to_string(),
            group.name,
            group.description,
            group.avatar_url,
            group.lang_tag,
            group.metadata,
            group.open,
            group.max_count,
            group.create_time_ms
        ])
    })
    .map_err(db_error)?;
    put_member(
        conn,
        group.id,
        group.creator_id,
        state::SUPERADMIN,
        group.create_time_ms * 1000,
        group.create_time_ms,
    )?;
    Ok(GroupRecord {
        edge_count: 1,
        update_time_ms: group.create_time_ms,
        ..group
    })
}

fn put_member(
    conn: &Connection,
    id: Uuid,
    user: Uuid,
    state: i32,
    position: i64,
    now_ms: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO group_members (group_id, user_id, state, position, update_time_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (group_id, user_id)
         DO UPDATE SET state = ?3, position = ?4, update_time_ms = ?5",
    )
    .and_then(|mut s| {
        s.execute(params![
            id.to_string(),
            user.to_string(),
            state,
            position,
            now_ms
        ])
    })
    .map_err(db_error)?;
    Ok(())
}

/// The actor's rank check shared by update and delete: `PermissionDenied` unless server code
/// or a user at `at_most` or above.
fn check_rank(conn: &Connection, id: Uuid, actor: Actor, at_most: i32) -> Result<(), StoreError> {
    if let Actor::User(user) = actor {
        if member_state(conn, id, user)?.is_none_or(|s| s > at_most) {
            return Err(GroupRefusal::PermissionDenied.into());
        }
    }
    Ok(())
}

fn update(
    conn: &Connection,
    id: Uuid,
    actor: Actor,
    changes: GroupChanges,
    now_ms: i64,
) -> Result<(), StoreError> {
    check_rank(conn, id, actor, state::ADMIN)?;
    let changed = conn
        .prepare_cached(
            "UPDATE groups SET name = COALESCE(?2, name),
                 description = COALESCE(?3, description), avatar_url = COALESCE(?4, avatar_url),
                 lang_tag = COALESCE(?5, lang_tag), open = COALESCE(?6, open),
                 metadata = COALESCE(?7, metadata), max_count = COALESCE(?8, max_count),
                 update_time_ms = ?9
             WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![
                id.to_string(),
                changes.name,
                changes.description,
                changes.avatar_url,
                changes.lang_tag,
                changes.open,
                changes.metadata,
                changes.max_count,
                now_ms
            ])
        })
        .map_err(db_error)?;
    if changed == 0 {
        return Err(GroupRefusal::NotFound.into());
    }
    Ok(())
}

fn delete(conn: &Connection, id: Uuid, actor: Actor) -> Result<Vec<Uuid>, StoreError> {
    check_rank(conn, id, actor, state::SUPERADMIN)?;
    let members = members_at_most(conn, id, state::MEMBER)?;
    conn.prepare_cached("DELETE FROM group_members WHERE group_id = ?1")
        .and_then(|mut s| s.execute([id.to_string()]))
        .map_err(db_error)?;
    let deleted = conn
        .prepare_cached("DELETE FROM groups WHERE id = ?1")
        .and_then(|mut s| s.execute([id.to_string()]))
        .map_err(db_error)?;
    if deleted == 0 {
        return Err(GroupRefusal::NotFound.into());
    }
    Ok(members)
}

fn change(
    conn: &Connection,
    id: Uuid,
    actor: Actor,
    change: MemberChange,
    targets: Vec<Uuid>,
    now_us: i64,
    max_groups: usize,
) -> Result<Changed, StoreError> {
    let Some(mut group) = group(conn, id)? else {
        return Err(GroupRefusal::NotFound.into());
    };
    let actor_state = match actor {
        Actor::User(user) => member_state(conn, id, user)?,
        Actor::Server => None,
    };
    let targets = match (change, actor) {
        (MemberChange::Join | MemberChange::Leave, Actor::User(user)) => vec![user],
        _ => targets,
    };
    let mut before = Before {
        open: group.open,
        edge_count: group.edge_count,
        max_count: group.max_count,
        actor_state,
        superadmins: members_at_most(conn, id, state::SUPERADMIN)?.len(),
        targets: Vec::with_capacity(targets.len()),
    };
    for user in targets {
        before.targets.push(Target {
            id: user,
            state: member_state(conn, id, user)?,
            exists: user_exists(conn, user)?,
            groups: groups_of(conn, user)?,
        });
    }
    let plan = plan(change, actor, &before, max_groups)?;
    let now_ms = now_us / 1000;
    for step in &plan.steps {
        match step.to {
            Some(to) => put_member(conn, id, step.user, to, now_us, now_ms)?,
            None => {
                conn.prepare_cached(
                    "DELETE FROM group_members WHERE group_id = ?1 AND user_id = ?2",
                )
                .and_then(|mut s| s.execute([id.to_string(), step.user.to_string()]))
                .map_err(db_error)?;
            }
        }
    }
    if plan.edge_count != group.edge_count {
        conn.prepare_cached("UPDATE groups SET edge_count = ?2, update_time_ms = ?3 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![id.to_string(), plan.edge_count, now_ms]))
            .map_err(db_error)?;
        group.edge_count = plan.edge_count;
        group.update_time_ms = now_ms;
    }
    if group.edge_count == 0 {
        // The last member left: the group goes with its join requests and bans (no empty
        // groups pile up from a create-and-leave loop).
        conn.prepare_cached("DELETE FROM groups WHERE id = ?1")
            .and_then(|mut s| s.execute([id.to_string()]))
            .map_err(db_error)?;
    }
    let admins = if change == MemberChange::Join && !plan.steps.is_empty() && !group.open {
        members_at_most(conn, id, state::ADMIN)?
    } else {
        Vec::new()
    };
    Ok(Changed {
        group,
        steps: plan.steps,
        admins,
    })
}

fn list(
    conn: &Connection,
    filter: GroupFilter,
    after: Option<GroupAfter>,
    limit: usize,
) -> Result<Vec<GroupRecord>, StoreError> {
    let limit = limit as i64;
    let rows = if let Some(name) = filter.name {
        let after = match after {
            Some(GroupAfter::Name(name)) => name,
            _ => String::new(),
        };
        conn.prepare_cached(&format!(
            "SELECT {GROUP_COLUMNS} FROM groups WHERE name LIKE ?1 AND name > ?2
             ORDER BY name LIMIT ?3"
        ))
        .and_then(|mut s| {
            s.query_map(params![name, after, limit], group_from)?
                .collect::<Result<Vec<_>, _>>()
        })
    } else {
        let (size, after_id) = match after {
            Some(GroupAfter::Size(size, id)) => (size as i64, id.to_string()),
            _ => (i64::MAX, String::new()),
        };
        conn.prepare_cached(&format!(
            "SELECT {GROUP_COLUMNS} FROM groups
             WHERE (?1 IS NULL OR lang_tag = ?1) AND (?2 IS NULL OR open = ?2)
               AND (?3 IS NULL OR edge_count <= ?3)
               AND (edge_count < ?4 OR (edge_count = ?4 AND id > ?5))
             ORDER BY edge_count DESC, id LIMIT ?6"
        ))
        .and_then(|mut s| {
            s.query_map(
                params![
                    filter.lang_tag,
                    filter.open,
                    filter.max_members,
                    size,
                    after_id,
                    limit
                ],
                group_from,
            )?
            .collect::<Result<Vec<_>, _>>()
        })
    };
    rows.map_err(db_error)
}

/// The states a listing shows: one asked for, or all but bans.
fn state_range(state: Option<i32>) -> (i32, i32) {
    state.map_or((state::SUPERADMIN, state::JOIN_REQUEST), |s| (s, s))
}

fn after_key(after: Option<(i32, i64, Uuid)>) -> (i32, i64, String) {
    after.map_or((-1, i64::MIN, String::new()), |(s, p, id)| {
        (s, p, id.to_string())
    })
}

static GROUP_USERS_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let columns: Vec<String> = USER_COLUMNS
        .split(',')
        .map(|column| format!("u.{}", column.trim()))
        .collect();
    format!(
        "SELECT {}, m.state, m.position
         FROM group_members m JOIN users u ON u.id = m.user_id
         WHERE m.group_id = ?1 AND m.state BETWEEN ?2 AND ?3
           AND (m.state, m.position, m.user_id) > (?4, ?5, ?6)
         ORDER BY m.state, m.position, m.user_id LIMIT ?7",
        columns.join(", ")
    )
});

static USER_GROUPS_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let columns: Vec<String> = GROUP_COLUMNS
        .split(',')
        .map(|column| format!("g.{}", column.trim()))
        .collect();
    format!(
        "SELECT {}, m.state, m.position
         FROM group_members m JOIN groups g ON g.id = m.group_id
         WHERE m.user_id = ?1 AND m.state BETWEEN ?2 AND ?3
           AND (m.state, m.position, m.group_id) > (?4, ?5, ?6)
         ORDER BY m.state, m.position, m.group_id LIMIT ?7",
        columns.join(", ")
    )
});

#[async_trait]
impl GroupStore for SqliteStore {
    async fn create_group(
        &self,
        group: GroupRecord,
        max_groups: usize,
    ) -> Result<GroupRecord, StoreError> {
        self.write("group_create", move |conn| create(conn, group, max_groups))
            .await
    }

    async fn update_group(
        &self,
        id: Uuid,
        actor: Actor,
        changes: GroupChanges,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.write("group_update", move |conn| {
            update(conn, id, actor, changes, now_ms)
        })
        .await
    }

    async fn delete_group(&self, id: Uuid, actor: Actor) -> Result<Vec<Uuid>, StoreError> {
        self.write("group_delete", move |conn| delete(conn, id, actor))
            .await
    }

    async fn change_members(
        &self,
        id: Uuid,
        actor: Actor,
        member_change: MemberChange,
        targets: Vec<Uuid>,
        now_us: i64,
        max_groups: usize,
    ) -> Result<Changed, StoreError> {
        self.write("group_members_change", move |conn| {
            change(conn, id, actor, member_change, targets, now_us, max_groups)
        })
        .await
    }

    async fn group(&self, id: Uuid) -> Result<Option<GroupRecord>, StoreError> {
        self.read("group_get", move |conn| group(conn, id)).await
    }

    async fn random_groups(
        &self,
        pivot: Uuid,
        count: usize,
    ) -> Result<Vec<GroupRecord>, StoreError> {
        self.read("group_random", move |conn| random(conn, pivot, count))
            .await
    }

    async fn list_groups(
        &self,
        filter: GroupFilter,
        after: Option<GroupAfter>,
        limit: usize,
    ) -> Result<Vec<GroupRecord>, StoreError> {
        self.read("group_list", move |conn| list(conn, filter, after, limit))
            .await
    }

    async fn group_users(
        &self,
        id: Uuid,
        state: Option<i32>,
        after: Option<(i32, i64, Uuid)>,
        limit: usize,
    ) -> Result<Vec<GroupUserRecord>, StoreError> {
        self.read("group_user_list", move |conn| {
            let (low, high) = state_range(state);
            let (s, p, u) = after_key(after);
            let rows = conn
                .prepare_cached(&GROUP_USERS_SQL)
                .and_then(|mut st| {
                    st.query_map(
                        params![id.to_string(), low, high, s, p, u, limit as i64],
                        |r| Ok((user_from(r)?, r.get::<_, i32>(11)?, r.get::<_, i64>(12)?)),
                    )?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(db_error)?;
            rows.into_iter()
                .map(|((id, mut user), state, position)| {
                    user.id = parse_uuid(&id)?;
                    Ok(GroupUserRecord {
                        user,
                        state,
                        position,
                    })
                })
                .collect()
        })
        .await
    }

    async fn user_groups(
        &self,
        user: Uuid,
        state: Option<i32>,
        after: Option<(i32, i64, Uuid)>,
        limit: usize,
    ) -> Result<Vec<UserGroupRecord>, StoreError> {
        self.read("user_group_list", move |conn| {
            let (low, high) = state_range(state);
            let (s, p, g) = after_key(after);
            conn.prepare_cached(&USER_GROUPS_SQL)
                .and_then(|mut st| {
                    st.query_map(
                        params![user.to_string(), low, high, s, p, g, limit as i64],
                        |r| {
                            Ok(UserGroupRecord {
                                group: group_from(r)?,
                                state: r.get(12)?,
                                position: r.get(13)?,
                            })
                        },
                    )?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(db_error)
        })
        .await
    }

    async fn member_state(&self, id: Uuid, user: Uuid) -> Result<Option<i32>, StoreError> {
        self.read("group_member_state", move |conn| {
            member_state(conn, id, user)
        })
        .await
    }
}
