//! Nakama's friend routes ([`crate::friends`]): `POST /v2/friend?ids=&usernames=` (add),
//! `DELETE /v2/friend?ids=&usernames=`, `POST /v2/friend/block?ids=&usernames=`, and
//! `GET /v2/friend?limit=&state=&cursor=` (list), `GET /v2/friend/friends?limit=&cursor=`
//! (friends of friends).

use axum::extract::RawQuery;
use axum::Json;
use muster_proto::api::{FriendList, FriendsOfFriendsList};

use super::auth::Player;
use super::error::ApiError;
use super::extract::{parsed, UserRefs};
use super::response::{done, Answer, Done, LargeJson};
use crate::friends::{FriendError, Targets};

impl From<FriendError> for ApiError {
    fn from(error: FriendError) -> Self {
        match error {
            FriendError::Invalid(message) => ApiError::InvalidArgument(message),
            FriendError::TooMany(_) | FriendError::TooFast => {
                ApiError::TooManyRequests(error.to_string())
            }
            FriendError::Store(error) => error.into(),
        }
    }
}

/// `ids` and `usernames`, each repeatable.
fn targets(raw: Option<String>) -> Targets {
    let refs = UserRefs::from_query(raw.as_deref());
    Targets {
        ids: refs.ids,
        usernames: refs.usernames,
    }
}

pub async fn add(Player(caller, services, _): Player, RawQuery(raw): RawQuery) -> Done {
    services
        .friends
        .add(caller.uid, &caller.usn, targets(raw))
        .await?;
    done()
}

pub async fn delete(Player(caller, services, _): Player, RawQuery(raw): RawQuery) -> Done {
    services
        .friends
        .delete(caller.uid, &caller.usn, targets(raw))
        .await?;
    done()
}

pub async fn block(Player(caller, services, _): Player, RawQuery(raw): RawQuery) -> Done {
    services.friends.block(caller.uid, targets(raw)).await?;
    done()
}

/// About the JSON of one friend (an account's public fields and the edge's).
const FRIEND_JSON_BYTES: usize = 320;

pub async fn list(
    Player(caller, _, state): Player,
    RawQuery(raw): RawQuery,
) -> Result<LargeJson<FriendList>, ApiError> {
    let (mut limit, mut friend_state, mut cursor) = (0usize, None, String::new());
    for (name, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match name.as_ref() {
            "limit" => {
                limit = parsed(&value, "Invalid limit - limit must be between 1 and 1000.")?;
            }
            "state" => {
                friend_state = Some(parsed(
                    &value,
                    "Invalid state - state must be between 0 and 3.",
                )?);
            }
            "cursor" => cursor = value.into_owned(),
            _ => {}
        }
    }
    let list = state
        .services
        .friends
        .list(caller.uid, limit, friend_state, &cursor)
        .await?;
    let size = 64 + list.friends.len() * FRIEND_JSON_BYTES;
    Ok(LargeJson(list, size))
}

pub async fn friends_of_friends(
    Player(caller, services, _): Player,
    RawQuery(raw): RawQuery,
) -> Answer<FriendsOfFriendsList> {
    let (mut limit, mut cursor) = (0usize, String::new());
    for (name, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match name.as_ref() {
            "limit" => {
                limit = parsed(&value, "Invalid limit - limit must be between 1 and 100.")?;
            }
            "cursor" => cursor = value.into_owned(),
            _ => {}
        }
    }
    let list = services
        .friends
        .friends_of_friends(caller.uid, limit, &cursor)
        .await?;
    Ok(Json(list))
}
