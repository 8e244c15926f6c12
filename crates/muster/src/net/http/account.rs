//! The caller's own account — `GET`, `PUT` and `DELETE /v2/account`, credentials linked and
//! unlinked (`POST /v2/account/link/{device,custom,email}`, `/unlink/…`) — and other players'
//! public view of accounts, `GET /v2/user?ids=&usernames=` (repeatable, as Nakama's gateway reads
//! a repeated field).

use axum::extract::{RawQuery, State};
use axum::Json;
use muster_proto::api::{
    Account, AccountCustom, AccountDevice, AccountEmail, UpdateAccountRequest, Users,
};

use super::auth::Player;
use super::error::ApiError;
use super::extract::{ApiJson, AuthRateLimit, UserRefs};
use crate::accounts::Login;
use crate::net::state::AppState;

fn empty() -> Json<serde_json::Value> {
    Json(serde_json::json!({}))
}

pub async fn get(
    Player(caller): Player,
    State(state): State<AppState>,
) -> Result<Json<Account>, ApiError> {
    let online = state.services.router.is_online(caller.uid);
    Ok(Json(
        state.services.accounts.account(caller.uid, online).await?,
    ))
}

pub async fn update(
    Player(caller): Player,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<UpdateAccountRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    state.services.accounts.update(caller.uid, body).await?;
    Ok(empty())
}

/// Deletes the account and what it owns; its ranks leave every leaderboard on every node.
pub async fn delete(
    Player(caller): Player,
    State(state): State<AppState>,
) -> Result<Json<serde_json::Value>, ApiError> {
    state.services.accounts.delete(caller.uid).await?;
    state.services.leaderboards.forget_owner(caller.uid).await;
    Ok(empty())
}

pub async fn users(
    Player(_): Player,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Users>, ApiError> {
    // `facebook_ids` is ignored: Muster has no Facebook logins, so no account has one.
    let refs = UserRefs::from_query(raw.as_deref());
    let router = state.services.router.clone();
    let users = state
        .services
        .accounts
        .users(&refs.ids, refs.usernames, |id| router.is_online(id))
        .await?;
    Ok(Json(Users { users }))
}

pub async fn link_device(
    Player(caller): Player,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<AccountDevice>,
) -> Result<Json<serde_json::Value>, ApiError> {
    state
        .services
        .accounts
        .link(caller.uid, Login::Device(body.id))
        .await?;
    Ok(empty())
}

pub async fn link_custom(
    Player(caller): Player,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<AccountCustom>,
) -> Result<Json<serde_json::Value>, ApiError> {
    state
        .services
        .accounts
        .link(caller.uid, Login::Custom(body.id))
        .await?;
    Ok(empty())
}

/// Rate-limited like authentication: hashing the password is slow on purpose.
pub async fn link_email(
    _: AuthRateLimit,
    Player(caller): Player,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<AccountEmail>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let login = Login::Email {
        email: body.email,
        password: body.password,
    };
    state.services.accounts.link(caller.uid, login).await?;
    Ok(empty())
}

pub async fn unlink_device(
    Player(caller): Player,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<AccountDevice>,
) -> Result<Json<serde_json::Value>, ApiError> {
    state
        .services
        .accounts
        .unlink(caller.uid, Login::Device(body.id))
        .await?;
    Ok(empty())
}

pub async fn unlink_custom(
    Player(caller): Player,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<AccountCustom>,
) -> Result<Json<serde_json::Value>, ApiError> {
    state
        .services
        .accounts
        .unlink(caller.uid, Login::Custom(body.id))
        .await?;
    Ok(empty())
}

pub async fn unlink_email(
    Player(caller): Player,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<AccountEmail>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let login = Login::Email {
        email: body.email,
        password: body.password,
    };
    state.services.accounts.unlink(caller.uid, login).await?;
    Ok(empty())
}
