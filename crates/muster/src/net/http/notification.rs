//! `GET /v2/notification?limit=&cacheable_cursor=` and `DELETE /v2/notification?ids=&ids=`: the
//! caller's stored notifications ([`crate::notifications`]).

use axum::extract::RawQuery;
use axum::Json;
use muster_proto::api::NotificationList;

use super::auth::Player;
use super::error::ApiError;
use super::extract::{parsed, repeated};
use super::response::{Answer, Done};
use crate::notifications::NotificationError;

impl From<NotificationError> for ApiError {
    fn from(error: NotificationError) -> Self {
        match error {
            NotificationError::Invalid(message) => ApiError::InvalidArgument(message),
            NotificationError::UserNotFound => ApiError::NotFound(error.to_string()),
            NotificationError::Store(error) => error.into(),
        }
    }
}

pub async fn list(
    Player(caller, services, _): Player,
    RawQuery(raw): RawQuery,
) -> Answer<NotificationList> {
    let (mut limit, mut cursor) = (0usize, String::new());
    for (name, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match name.as_ref() {
            "limit" => {
                limit = parsed(&value, "Invalid limit - limit must be between 1 and 100.")?;
            }
            "cacheable_cursor" | "cacheableCursor" => cursor = value.into_owned(),
            _ => {}
        }
    }
    let list = services
        .notifications
        .list(caller.uid, limit, &cursor)
        .await?;
    Ok(Json(list))
}

pub async fn delete(Player(caller, services, _): Player, RawQuery(raw): RawQuery) -> Done {
    let ids = repeated(raw.as_deref(), "ids");
    services.notifications.delete(caller.uid, &ids).await?;
    Ok(Json(serde_json::json!({})))
}
