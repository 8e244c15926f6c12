//! Groups on PostgreSQL. A change of membership is one transaction that locks the group's row
//! first (so changes to one group follow one another, on any node) and then the rows of the
//! users whose bound it checks (in id order); [`plan`] decides on what it read.

use async_trait::async_trait;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::accounts::postgres::user_from;
use crate::groups::store::{
    plan, state, Actor, Before, Changed, GroupAfter, GroupChanges, GroupFilter, GroupRecord,
    GroupRefusal, GroupStore, GroupUserRecord, MemberChange, Target, UserGroupRecord,
};
use crate::store::postgres::{db_error_ref, prepared, unique_violation, PostgresStore};
use crate::store::StoreError;

/// PostgreSQL's errors as groups tell them apart: a name another group has is refused as in use.
fn db_error(error: tokio_postgres::Error) -> StoreError {
    match unique_violation(&error) {
        Some("groups_name_key") => GroupRefusal::NameInUse.into(),
        _ => db_error_ref(&error),
    }
}

type Tx<'a> = deadpool_postgres::Transaction<'a>;

const GROUP_COLUMNS: &str = "g.id, g.creator_id, g.name, g.description, g.avatar_url,
    g.lang_tag, g.metadata, g.open, g.edge_count, g.max_count, g.create_time_ms,
    g.update_time_ms";

/// The group of a row that starts with [`GROUP_COLUMNS`].
fn group_from(row: &Row) -> GroupRecord {
    GroupRecord {
        id: row.get(0),
        creator_id: row.get(1),
        name: row.get(2),
        description: row.get(3),
        avatar_url: row.get(4),
        lang_tag: row.get(5),
        metadata: row.get(6),
        open: row.get(7),
        edge_count: row.get(8),
        max_count: row.get(9),
        create_time_ms: row.get(10),
        update_time_ms: row.get(11),
    }
}

async fn member_state(
    client: &impl deadpool_postgres::GenericClient,
    id: Uuid,
    user: Uuid,
) -> Result<Option<i32>, StoreError> {
    Ok(client
        .query_opt(
            "SELECT state FROM group_members WHERE group_id = $1 AND user_id = $2",
            &[&id, &user],
        )
        .await
        .map_err(db_error)?
        .map(|row| row.get(0)))
}

/// Groups `user` is in or has asked to join.
async fn groups_of(tx: &Tx<'_>, user: Uuid) -> Result<usize, StoreError> {
    let row = tx
        .query_one(
            "SELECT COUNT(*) FROM group_members WHERE user_id = $1 AND state <= $2",
            &[&user, &state::JOIN_REQUEST],
        )
        .await
        .map_err(db_error)?;
    Ok(row.get::<_, i64>(0) as usize)
}

async fn members_at_most(tx: &Tx<'_>, id: Uuid, at_most: i32) -> Result<Vec<Uuid>, StoreError> {
    let rows = tx
        .query(
            "SELECT user_id FROM group_members WHERE group_id = $1 AND state <= $2",
            &[&id, &at_most],
        )
        .await
        .map_err(db_error)?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

async fn put_member(
    tx: &Tx<'_>,
    id: Uuid,
    user: Uuid,
    state: i32,
    position: i64,
    now_ms: i64,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO group_members (group_id, user_id, state, position, update_time_ms)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (group_id, user_id)
         DO UPDATE SET state = $3, position = $4, update_time_ms = $5",
        &[&id, &user, &state, &position, &now_ms],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Locks the group's row: `NotFound` when there is none.
async fn lock_group(tx: &Tx<'_>, id: Uuid) -> Result<GroupRecord, StoreError> {
    let row = tx
        .query_opt(
            &format!("SELECT {GROUP_COLUMNS} FROM groups g WHERE g.id = $1 FOR UPDATE"),
            &[&id],
        )
        .await
        .map_err(db_error)?
        .ok_or(GroupRefusal::NotFound)?;
    Ok(group_from(&row))
}

/// `PermissionDenied` unless server code or a user at `at_most` or above.
async fn check_rank(tx: &Tx<'_>, id: Uuid, actor: Actor, at_most: i32) -> Result<(), StoreError> {
    if let Actor::User(user) = actor {
        if member_state(tx, id, user)
            .await?
            .is_none_or(|s| s > at_most)
        {
            return Err(GroupRefusal::PermissionDenied.into());
        }
    }
    Ok(())
}

#[async_trait]
impl GroupStore for PostgresStore {
    async fn create_group(
        &self,
        group: GroupRecord,
        max_groups: usize,
    ) -> Result<GroupRecord, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // The creator's row, so that two creations at once cannot both pass the bound.
        tx.execute(
            "SELECT 1 FROM users WHERE id = $1 FOR UPDATE",
            &[&group.creator_id],
        )
        .await
        .map_err(db_error)?;
        if groups_of(&tx, group.creator_id).await? >= max_groups {
            return Err(GroupRefusal::TooManyGroups.into());
        }
        tx.execute(
            "INSERT INTO groups (id, creator_id, name, description, avatar_url, lang_tag,
                 metadata, open, edge_count, max_count, create_time_ms, update_time_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9, $10, $10)",
            &[
                &group.id,
                &group.creator_id,
                &group.name,
                &group.description,
                &group.avatar_url,
                &group.lang_tag,
                &group.metadata,
                &group.open,
                &group.max_count,
                &group.create_time_ms,
            ],
        )
        .await
        .map_err(db_error)?;
        put_member(
            &tx,
            group.id,
            group.creator_id,
            state::SUPERADMIN,
            group.create_time_ms * 1000,
            group.create_time_ms,
        )
        .await?;
        tx.commit().await.map_err(db_error)?;
        Ok(GroupRecord {
            edge_count: 1,
            update_time_ms: group.create_time_ms,
            ..group
        })
    }

    async fn update_group(
        &self,
        id: Uuid,
        actor: Actor,
        changes: GroupChanges,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        lock_group(&tx, id).await?;
        check_rank(&tx, id, actor, state::ADMIN).await?;
        tx.execute(
            "UPDATE groups SET name = COALESCE($2, name),
                 description = COALESCE($3, description), avatar_url = COALESCE($4, avatar_url),
                 lang_tag = COALESCE($5, lang_tag), open = COALESCE($6, open),
                 metadata = COALESCE($7, metadata), max_count = COALESCE($8, max_count),
                 update_time_ms = $9
             WHERE id = $1",
            &[
                &id,
                &changes.name,
                &changes.description,
                &changes.avatar_url,
                &changes.lang_tag,
                &changes.open,
                &changes.metadata,
                &changes.max_count,
                &now_ms,
            ],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn delete_group(&self, id: Uuid, actor: Actor) -> Result<Vec<Uuid>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        lock_group(&tx, id).await?;
        check_rank(&tx, id, actor, state::SUPERADMIN).await?;
        let members = members_at_most(&tx, id, state::MEMBER).await?;
        tx.execute("DELETE FROM group_members WHERE group_id = $1", &[&id])
            .await
            .map_err(db_error)?;
        tx.execute("DELETE FROM groups WHERE id = $1", &[&id])
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(members)
    }

    async fn change_members(
        &self,
        id: Uuid,
        actor: Actor,
        change: MemberChange,
        targets: Vec<Uuid>,
        now_us: i64,
        max_groups: usize,
    ) -> Result<Changed, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let mut group = lock_group(&tx, id).await?;
        let actor_state = match actor {
            Actor::User(user) => member_state(&tx, id, user).await?,
            Actor::Server => None,
        };
        let mut targets = match (change, actor) {
            (MemberChange::Join | MemberChange::Leave, Actor::User(user)) => vec![user],
            _ => targets,
        };
        // Users whose bound is checked are locked in id order (no deadlock between two
        // changes naming the same users).
        targets.sort_unstable();
        targets.dedup();
        let existing: Vec<Uuid> = tx
            .query(
                "SELECT id FROM users WHERE id = ANY($1) ORDER BY id FOR UPDATE",
                &[&targets],
            )
            .await
            .map_err(db_error)?
            .iter()
            .map(|row| row.get(0))
            .collect();
        let mut before = Before {
            open: group.open,
            edge_count: group.edge_count,
            max_count: group.max_count,
            actor_state,
            superadmins: members_at_most(&tx, id, state::SUPERADMIN).await?.len(),
            targets: Vec::with_capacity(targets.len()),
        };
        for user in targets {
            before.targets.push(Target {
                id: user,
                state: member_state(&tx, id, user).await?,
                exists: existing.contains(&user),
                groups: groups_of(&tx, user).await?,
            });
        }
        let plan = plan(change, actor, &before, max_groups)?;
        let now_ms = now_us / 1000;
        for step in &plan.steps {
            match step.to {
                Some(to) => put_member(&tx, id, step.user, to, now_us, now_ms).await?,
                None => {
                    tx.execute(
                        "DELETE FROM group_members WHERE group_id = $1 AND user_id = $2",
                        &[&id, &step.user],
                    )
                    .await
                    .map_err(db_error)?;
                }
            }
        }
        if plan.edge_count != group.edge_count {
            tx.execute(
                "UPDATE groups SET edge_count = $2, update_time_ms = $3 WHERE id = $1",
                &[&id, &plan.edge_count, &now_ms],
            )
            .await
            .map_err(db_error)?;
            group.edge_count = plan.edge_count;
            group.update_time_ms = now_ms;
        }
        if group.edge_count == 0 {
            // The last member left: the group goes with its join requests and bans (no empty
            // groups pile up from a create-and-leave loop).
            tx.execute("DELETE FROM groups WHERE id = $1", &[&id])
                .await
                .map_err(db_error)?;
        }
        let admins = if change == MemberChange::Join && !plan.steps.is_empty() && !group.open {
            members_at_most(&tx, id, state::ADMIN).await?
        } else {
            Vec::new()
        };
        tx.commit().await.map_err(db_error)?;
        Ok(Changed {
            group,
            steps: plan.steps,
            admins,
        })
    }

    async fn group(&self, id: Uuid) -> Result<Option<GroupRecord>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            &format!("SELECT {GROUP_COLUMNS} FROM groups g WHERE g.id = $1"),
        )
        .await?;
        Ok(client
            .query_opt(&statement, &[&id])
            .await
            .map_err(db_error)?
            .as_ref()
            .map(group_from))
    }

    async fn random_groups(
        &self,
        pivot: Uuid,
        count: usize,
    ) -> Result<Vec<GroupRecord>, StoreError> {
        let client = self.client().await?;
        let mut found = Vec::with_capacity(count);
        for sql in [
            format!("SELECT {GROUP_COLUMNS} FROM groups g WHERE g.id > $1 ORDER BY g.id LIMIT $2"),
            format!("SELECT {GROUP_COLUMNS} FROM groups g WHERE g.id <= $1 ORDER BY g.id LIMIT $2"),
        ] {
            let wanted = (count - found.len()) as i64;
            if wanted == 0 {
                break;
            }
            let statement = prepared(&client, &sql).await?;
            let rows = client
                .query(&statement, &[&pivot, &wanted])
                .await
                .map_err(db_error)?;
            found.extend(rows.iter().map(group_from));
        }
        Ok(found)
    }

    async fn list_groups(
        &self,
        filter: GroupFilter,
        after: Option<GroupAfter>,
        limit: usize,
    ) -> Result<Vec<GroupRecord>, StoreError> {
        let client = self.client().await?;
        let limit = limit as i64;
        let rows = if let Some(name) = filter.name {
            let after = match after {
                Some(GroupAfter::Name(name)) => name,
                _ => String::new(),
            };
            let statement = prepared(
                &client,
                &format!(
                    "SELECT {GROUP_COLUMNS} FROM groups g WHERE g.name ILIKE $1 AND g.name > $2
                     ORDER BY g.name LIMIT $3"
                ),
            )
            .await?;
            client.query(&statement, &[&name, &after, &limit]).await
        } else {
            let (size, after_id) = match after {
                Some(GroupAfter::Size(size, id)) => (size, id),
                _ => (i32::MAX, Uuid::nil()),
            };
            let statement = prepared(
                &client,
                &format!(
                    "SELECT {GROUP_COLUMNS} FROM groups g
                     WHERE ($1::text IS NULL OR g.lang_tag = $1)
                       AND ($2::bool IS NULL OR g.open = $2)
                       AND ($3::int4 IS NULL OR g.edge_count <= $3)
                       AND (g.edge_count < $4 OR (g.edge_count = $4 AND g.id > $5))
                     ORDER BY g.edge_count DESC, g.id LIMIT $6"
                ),
            )
            .await?;
            client
                .query(
                    &statement,
                    &[
                        &filter.lang_tag,
                        &filter.open,
                        &filter.max_members,
                        &size,
                        &after_id,
                        &limit,
                    ],
                )
                .await
        };
        Ok(rows.map_err(db_error)?.iter().map(group_from).collect())
    }

    async fn group_users(
        &self,
        id: Uuid,
        state: Option<i32>,
        after: Option<(i32, i64, Uuid)>,
        limit: usize,
    ) -> Result<Vec<GroupUserRecord>, StoreError> {
        let client = self.client().await?;
        let (low, high) = state.map_or((state::SUPERADMIN, state::JOIN_REQUEST), |s| (s, s));
        let (s, p, u) = after.unwrap_or((-1, i64::MIN, Uuid::nil()));
        let statement = prepared(
            &client,
            "SELECT u.id, u.username, u.display_name, u.avatar_url, u.lang_tag, u.location,
                    u.timezone, u.metadata, u.disable_time_ms, u.create_time_ms, u.update_time_ms,
                    m.state, m.position
             FROM group_members m JOIN users u ON u.id = m.user_id
             WHERE m.group_id = $1 AND m.state BETWEEN $2 AND $3
               AND (m.state, m.position, m.user_id) > ($4, $5, $6)
             ORDER BY m.state, m.position, m.user_id LIMIT $7",
        )
        .await?;
        let rows = client
            .query(&statement, &[&id, &low, &high, &s, &p, &u, &(limit as i64)])
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|row| GroupUserRecord {
                user: user_from(row),
                state: row.get(11),
                position: row.get(12),
            })
            .collect())
    }

    async fn user_groups(
        &self,
        user: Uuid,
        state: Option<i32>,
        after: Option<(i32, i64, Uuid)>,
        limit: usize,
    ) -> Result<Vec<UserGroupRecord>, StoreError> {
        let client = self.client().await?;
        let (low, high) = state.map_or((state::SUPERADMIN, state::JOIN_REQUEST), |s| (s, s));
        let (s, p, g) = after.unwrap_or((-1, i64::MIN, Uuid::nil()));
        let statement = prepared(
            &client,
            &format!(
                "SELECT {GROUP_COLUMNS}, m.state, m.position
                 FROM group_members m JOIN groups g ON g.id = m.group_id
                 WHERE m.user_id = $1 AND m.state BETWEEN $2 AND $3
                   AND (m.state, m.position, m.group_id) > ($4, $5, $6)
                 ORDER BY m.state, m.position, m.group_id LIMIT $7"
            ),
        )
        .await?;
        let rows = client
            .query(
                &statement,
                &[&user, &low, &high, &s, &p, &g, &(limit as i64)],
            )
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|row| UserGroupRecord {
                group: group_from(row),
                state: row.get(12),
                position: row.get(13),
            })
            .collect())
    }

    async fn member_state(&self, id: Uuid, user: Uuid) -> Result<Option<i32>, StoreError> {
        let client = self.client().await?;
        member_state(&client, id, user).await
    }
}
