//! Nakama's group routes ([`crate::groups`]): `POST`/`GET /v2/group` (create, list),
//! `PUT`/`DELETE /v2/group/{group_id}`, `POST /v2/group/{group_id}/{join,leave}`,
//! `POST /v2/group/{group_id}/{add,kick,ban,promote,demote}?user_ids=`,
//! `GET /v2/group/{group_id}/user` and `GET /v2/user/{user_id}/group`.

use axum::extract::{Path, RawQuery};
use axum::Json;
use muster_proto::api::{
    CreateGroupRequest, Group, GroupList, GroupUserList, UpdateGroupRequest, UserGroupList,
};

use super::auth::Player;
use super::error::ApiError;
use super::extract::{parsed, repeated, ApiJson};
use super::response::{done, Answer, Done};
use crate::groups::store::{Actor, GroupRefusal, MemberChange};
use crate::groups::{GroupError, GroupQuery};
use crate::net::state::AppState;

impl From<GroupError> for ApiError {
    fn from(error: GroupError) -> Self {
        match error {
            GroupError::Invalid(message) => ApiError::InvalidArgument(message),
            GroupError::NotFound(message) => ApiError::NotFound(message),
            GroupError::TooFast => ApiError::TooManyRequests(error.to_string()),
            GroupError::Refused(refusal) => {
                let message = refusal.to_string();
                match refusal {
                    GroupRefusal::NotFound | GroupRefusal::PermissionDenied => {
                        ApiError::NotFound(message)
                    }
                    GroupRefusal::Full
                    | GroupRefusal::LastSuperadmin
                    | GroupRefusal::UserNotFound => ApiError::InvalidArgument(message),
                    GroupRefusal::NameInUse => ApiError::AlreadyExists(message),
                    GroupRefusal::Banned => ApiError::PermissionDenied(message),
                    GroupRefusal::TooManyGroups => ApiError::TooManyRequests(message),
                }
            }
            GroupError::Store(error) => error.into(),
        }
    }
}

pub async fn create(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<CreateGroupRequest>,
) -> Answer<Group> {
    Ok(Json(services.groups.create(caller.uid, request).await?))
}

pub async fn update(
    Player(caller, services, _): Player,
    Path(group_id): Path<String>,
    ApiJson(request): ApiJson<UpdateGroupRequest>,
) -> Done {
    services
        .groups
        .update(Actor::User(caller.uid), &group_id, request)
        .await?;
    done()
}

pub async fn delete(Player(caller, services, _): Player, Path(group_id): Path<String>) -> Done {
    services
        .groups
        .delete(Actor::User(caller.uid), &group_id)
        .await?;
    done()
}

pub async fn join(Player(caller, services, _): Player, Path(group_id): Path<String>) -> Done {
    services
        .groups
        .join(caller.uid, &caller.usn, &group_id)
        .await?;
    done()
}

pub async fn leave(Player(caller, services, _): Player, Path(group_id): Path<String>) -> Done {
    services.groups.leave(caller.uid, &group_id).await?;
    done()
}

async fn change_users(
    caller: uuid::Uuid,
    state: AppState,
    group_id: String,
    raw: Option<String>,
    change: MemberChange,
) -> Done {
    let user_ids = repeated(raw.as_deref(), "user_ids");
    state
        .services
        .groups
        .change_users(Actor::User(caller), &group_id, change, &user_ids)
        .await?;
    done()
}

macro_rules! member_route {
    ($name:ident, $change:expr) => {
        pub async fn $name(
            Player(caller, _, state): Player,
            Path(group_id): Path<String>,
            RawQuery(raw): RawQuery,
        ) -> Done {
            change_users(caller.uid, state, group_id, raw, $change).await
        }
    };
}

member_route!(add, MemberChange::Add);
member_route!(kick, MemberChange::Kick);
member_route!(ban, MemberChange::Ban);
member_route!(promote, MemberChange::Promote);
member_route!(demote, MemberChange::Demote);

pub async fn list(Player(_, services, _): Player, RawQuery(raw): RawQuery) -> Answer<GroupList> {
    let mut query = GroupQuery::default();
    for (name, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match name.as_ref() {
            "name" if !value.is_empty() => query.name = Some(value.into_owned()),
            "cursor" => query.cursor = value.into_owned(),
            "limit" => {
                query.limit = Some(parsed(
                    &value,
                    "Invalid limit - limit must be between 1 and 100.",
                )?)
            }
            "lang_tag" if !value.is_empty() => query.lang_tag = Some(value.into_owned()),
            "members" => query.members = Some(parsed(&value, "Invalid members count.")?),
            "open" => query.open = Some(parsed(&value, "Invalid open - true or false.")?),
            _ => {}
        }
    }
    Ok(Json(services.groups.list(query).await?))
}

/// `limit`, `state` and `cursor` of a membership listing.
fn membership_query(raw: Option<String>) -> Result<(Option<usize>, Option<i32>, String), ApiError> {
    let (mut limit, mut member_state, mut cursor) = (None, None, String::new());
    for (name, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match name.as_ref() {
            "limit" => {
                limit = Some(parsed(
                    &value,
                    "Invalid limit - limit must be between 1 and 100.",
                )?)
            }
            "state" => {
                member_state = Some(parsed(
                    &value,
                    "Invalid state - state must be between 0 and 4.",
                )?)
            }
            "cursor" => cursor = value.into_owned(),
            _ => {}
        }
    }
    Ok((limit, member_state, cursor))
}

pub async fn users(
    Player(_, services, _): Player,
    Path(group_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Answer<GroupUserList> {
    let (limit, member_state, cursor) = membership_query(raw)?;
    let list = services
        .groups
        .users(&group_id, limit, member_state, &cursor)
        .await?;
    Ok(Json(list))
}

pub async fn of_user(
    Player(_, services, _): Player,
    Path(user_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Answer<UserGroupList> {
    let (limit, member_state, cursor) = membership_query(raw)?;
    let list = services
        .groups
        .of_user(&user_id, limit, member_state, &cursor)
        .await?;
    Ok(Json(list))
}
