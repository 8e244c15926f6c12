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

/// What an authentication route signs in with: the body Nakama's route takes, as a login and
/// the session's variables.
pub trait Authenticates: serde::de::DeserializeOwned + Send {
    fn login(self) -> (Login, std::collections::HashMap<String, String>);
}

/// `/v2/account/authenticate/device`'s body.
#[derive(Deserialize)]
#[serde(transparent)]
pub struct Device(AuthenticateIdRequest);

/// `/v2/account/authenticate/custom`'s body.
#[derive(Deserialize)]
#[serde(transparent)]
pub struct Custom(AuthenticateIdRequest);

impl Authenticates for Device {
    fn login(self) -> (Login, std::collections::HashMap<String, String>) {
        (Login::Device(self.0.id), self.0.vars)
    }
}

impl Authenticates for Custom {
    fn login(self) -> (Login, std::collections::HashMap<String, String>) {
        (Login::Custom(self.0.id), self.0.vars)
    }
}

impl Authenticates for AuthenticateEmailRequest {
    fn login(self) -> (Login, std::collections::HashMap<String, String>) {
        let login = Login::Email {
            email: self.email,
            password: self.password,
        };
        (login, self.vars)
    }
}

/// `POST /v2/account/authenticate/{device,custom,email}`.
pub async fn authenticate<A: Authenticates>(
    _: AuthRateLimit,
    _: ServerKey,
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<AuthQuery>,
    ApiJson(body): ApiJson<A>,
) -> Answer<Session> {
    let (login, vars) = body.login();
    let accounts = &state.services.accounts;
    let session = accounts.authenticate(login, query.create(), query.username(), vars);
    Ok(Json(session.await?))
}
