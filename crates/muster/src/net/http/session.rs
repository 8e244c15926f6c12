//! `POST /v2/account/session/refresh` (server key) and `POST /v2/session/logout` (session token).

use axum::extract::State;
use axum::Json;
use muster_proto::api::{Session, SessionLogoutRequest, SessionRefreshRequest};

use super::auth::{Player, ServerKey};
use super::error::ApiError;
use super::extract::{ApiJson, AuthRateLimit};
use crate::net::state::AppState;

pub async fn refresh(
    _: AuthRateLimit,
    _: ServerKey,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<SessionRefreshRequest>,
) -> Result<Json<Session>, ApiError> {
    Ok(Json(
        state
            .services
            .accounts
            .refresh(&body.token, body.vars)
            .await?,
    ))
}

pub async fn logout(
    Player(caller): Player,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<SessionLogoutRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    state
        .services
        .accounts
        .logout(&caller, &body.token, &body.refresh_token)
        .await?;
    Ok(Json(serde_json::json!({})))
}
