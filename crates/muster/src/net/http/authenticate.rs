//! `POST /v2/account/authenticate/{device,email,custom}`: the server key, a rate limit per IP,
//! then [`crate::accounts::Accounts::authenticate`].

use axum::extract::State;
use axum::Json;
use muster_proto::api::{AuthenticateEmailRequest, AuthenticateIdRequest, Session};
use serde::Deserialize;

use super::auth::ServerKey;
use super::extract::{ApiJson, ApiQuery, AuthRateLimit};
use super::response::Answer;
use crate::accounts::Login;
use crate::net::state::AppState;

/// `?create=true|false&username=...`; `create` defaults to true, as in Nakama.
#[derive(Deserialize)]
pub struct AuthQuery {
    create: Option<bool>,
    username: Option<String>,
}

impl AuthQuery {
    fn create(&self) -> bool {
        self.create.unwrap_or(true)
    }

    fn username(self) -> Option<String> {
        self.username.filter(|u| !u.is_empty())
    }
}

pub async fn device(
    _: AuthRateLimit,
    _: ServerKey,
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<AuthQuery>,
    ApiJson(body): ApiJson<AuthenticateIdRequest>,
) -> Answer<Session> {
    let create = query.create();
    let session = state
        .services
        .accounts
        .authenticate(Login::Device(body.id), create, query.username(), body.vars)
        .await?;
    Ok(Json(session))
}

pub async fn custom(
    _: AuthRateLimit,
    _: ServerKey,
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<AuthQuery>,
    ApiJson(body): ApiJson<AuthenticateIdRequest>,
) -> Answer<Session> {
    let create = query.create();
    let session = state
        .services
        .accounts
        .authenticate(Login::Custom(body.id), create, query.username(), body.vars)
        .await?;
    Ok(Json(session))
}

pub async fn email(
    _: AuthRateLimit,
    _: ServerKey,
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<AuthQuery>,
    ApiJson(body): ApiJson<AuthenticateEmailRequest>,
) -> Answer<Session> {
    let create = query.create();
    let login = Login::Email {
        email: body.email,
        password: body.password,
    };
    let session = state
        .services
        .accounts
        .authenticate(login, create, query.username(), body.vars)
        .await?;
    Ok(Json(session))
}
