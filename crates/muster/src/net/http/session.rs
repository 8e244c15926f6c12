//! `POST /v2/account/session/refresh` (server key) and `POST /v2/session/logout` (session token).

use axum::extract::State;
use axum::Json;
use muster_proto::api::{Session, SessionLogoutRequest, SessionRefreshRequest};

use super::auth::{Player, ServerKey};
use super::extract::{ApiJson, AuthRateLimit};
use super::response::{Answer, Done};
use crate::net::state::AppState;

pub async fn refresh(
    _: AuthRateLimit,
    _: ServerKey,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<SessionRefreshRequest>,
) -> Answer<Session> {
    Ok(Json(
        state
            .services
            .accounts
            .refresh(&body.token, body.vars)
            .await?,
    ))
}

pub async fn logout(
    Player(caller, services, _): Player,
    ApiJson(body): ApiJson<SessionLogoutRequest>,
) -> Done {
    services
        .accounts
        .logout(&caller, &body.token, &body.refresh_token)
        .await?;
    Ok(Json(serde_json::json!({})))
}
