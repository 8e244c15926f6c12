//! Logging in and out, and [`Session`]: the extractor every other route takes, which finds the
//! operator from the session cookie and, for a change, checks the CSRF token.

use std::marker::PhantomData;
use std::sync::Arc;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, Method};
use axum::response::{IntoResponse, Response};
use axum::Json;
use cookie::{Cookie, SameSite};
use serde::Deserialize;
use serde_json::json;

use super::ConsoleApiError;
use crate::console::{Console, Operator, Role};
use crate::net::http::extract::ClientIp;
use crate::net::state::AppState;

/// The session cookie's name.
pub const COOKIE: &str = "muster_console";
/// The header a change carries the CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The console service, or a refusal when it is off on this node.
pub fn console(state: &AppState) -> Result<&Arc<Console>, ConsoleApiError> {
    state.services.console.as_ref().ok_or(ConsoleApiError::Off)
}

/// The logged-in operator of a request. A request that is not a `GET` (a change) must also
/// carry the session's CSRF token in `X-CSRF-Token`: a page on another site can make the
/// browser send the cookie, but cannot read the token.
pub struct Session(pub Operator);

/// What every console route takes: the app's state and the logged-in operator, whose role is
/// at least `R` ([`Readonly`], [`Developer`] or [`Admin`]); a lower role is refused before the
/// route runs.
pub struct As<R> {
    pub state: AppState,
    pub operator: Operator,
    role: PhantomData<R>,
}

/// A role a route needs, as a type.
pub trait Needs {
    const ROLE: Role;
}

/// Reads: status, players, data (the lowest role).
pub struct Readonly;
/// Changes to players and data.
pub struct Developer;
/// Console users and the settings.
pub struct Admin;

impl Needs for Readonly {
    const ROLE: Role = Role::Readonly;
}

impl Needs for Developer {
    const ROLE: Role = Role::Developer;
}

impl Needs for Admin {
    const ROLE: Role = Role::Admin;
}

impl<R: Needs> FromRequestParts<AppState> for As<R> {
    type Rejection = ConsoleApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, ConsoleApiError> {
        let Session(operator) = Session::from_request_parts(parts, state).await?;
        operator.require(R::ROLE)?;
        Ok(As {
            state: state.clone(),
            operator,
            role: PhantomData,
        })
    }
}

impl FromRequestParts<AppState> for Session {
    type Rejection = ConsoleApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, ConsoleApiError> {
        let console = console(state)?;
        let token = parts
            .headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(Cookie::split_parse)
            .filter_map(Result::ok)
            .find(|c| c.name() == COOKIE)
            .map(|c| c.value().to_owned())
            .unwrap_or_default();
        let operator = console.operator(&token).await?;
        if parts.method != Method::GET && parts.method != Method::HEAD {
            let presented = parts.headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
            operator.check_csrf(presented)?;
        }
        Ok(Session(operator))
    }
}

#[derive(Deserialize)]
pub struct LoginBody {
    username: String,
    password: String,
}

fn who(operator: &Operator) -> serde_json::Value {
    json!({
        "username": operator.username,
        "role": operator.role,
        "csrf": operator.csrf,
        "expire_time": operator.expire_time_ms / 1000,
    })
}

/// `POST /api/login`: `{username, password}` → the session cookie and `{username, role, csrf,
/// expire_time}`.
pub async fn login(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    Json(body): Json<LoginBody>,
) -> Result<Response, ConsoleApiError> {
    let console = console(&state)?;
    let login = console.login(ip, &body.username, &body.password).await?;
    let config = &state.services.config.console;
    let cookie = Cookie::build((COOKIE, login.token))
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(config.secure_cookie)
        .path("/")
        .max_age(cookie::time::Duration::seconds(
            config.session_expiry_sec.min(i64::MAX as u64) as i64,
        ))
        .build();
    Ok((
        [(header::SET_COOKIE, cookie.to_string())],
        Json(who(&login.operator)),
    )
        .into_response())
}

/// `POST /api/logout`: ends the session and clears the cookie.
pub async fn logout(
    State(state): State<AppState>,
    Session(operator): Session,
) -> Result<Response, ConsoleApiError> {
    console(&state)?.logout(&operator).await?;
    let cleared = Cookie::build((COOKIE, ""))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path("/")
        .max_age(cookie::time::Duration::ZERO)
        .build();
    Ok(([(header::SET_COOKIE, cleared.to_string())], Json(json!({}))).into_response())
}

/// `GET /api/me`: who is logged in, with the CSRF token (the page reads it after a reload).
pub async fn me(Session(operator): Session) -> Json<serde_json::Value> {
    Json(who(&operator))
}
