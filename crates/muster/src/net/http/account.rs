//! `GET /v2/account` and `PUT /v2/account`, for the caller's own account.

use axum::extract::State;
use axum::Json;
use muster_proto::api::{Account, UpdateAccountRequest};

use super::auth::Player;
use super::error::ApiError;
use super::extract::ApiJson;
use crate::net::state::AppState;

pub async fn get(
    Player(caller): Player,
    State(state): State<AppState>,
) -> Result<Json<Account>, ApiError> {
    let online = state.router.is_online(caller.uid);
    Ok(Json(state.accounts.account(caller.uid, online).await?))
}

pub async fn update(
    Player(caller): Player,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<UpdateAccountRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    state.accounts.update(caller.uid, body).await?;
    Ok(Json(serde_json::json!({})))
}
