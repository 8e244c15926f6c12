//! Console users: listed, added and deleted by admins; each change audited.

use axum::extract::Path;
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::auth::{console, Admin, As};
use super::Answer;
use crate::console::{ConsoleError, Role};

/// `GET /api/users`: every console user (names, roles, creation times; never hashes).
pub async fn list(As { state, .. }: As<Admin>) -> Answer {
    let users: Vec<_> = console(&state)?
        .users()
        .await?
        .into_iter()
        .map(|u| json!({"username": u.username, "role": u.role, "create_time": u.create_time_ms / 1000}))
        .collect();
    Ok(Json(json!({ "users": users })))
}

#[derive(Deserialize)]
pub struct NewUser {
    username: String,
    password: String,
    role: String,
}

/// `POST /api/users`: `{username, password, role}`.
pub async fn create(
    As {
        state, operator, ..
    }: As<Admin>,
    Json(body): Json<NewUser>,
) -> Answer {
    let role = Role::parse(&body.role)
        .ok_or_else(|| ConsoleError::Invalid("role is admin, developer or readonly".into()))?;
    let console = console(&state)?;
    console
        .add_user(&body.username, &body.password, role)
        .await?;
    console
        .audit(
            &operator,
            "console_user_create",
            &body.username,
            json!({"role": role}),
        )
        .await?;
    Ok(Json(json!({"username": body.username, "role": role})))
}

/// `DELETE /api/users/{username}`: the user and their sessions.
pub async fn remove(
    As {
        state, operator, ..
    }: As<Admin>,
    Path(username): Path<String>,
) -> Answer {
    let console = console(&state)?;
    console
        .delete_user(&state.services.config.console, &username)
        .await?;
    console
        .audit(&operator, "console_user_delete", &username, json!({}))
        .await?;
    Ok(Json(json!({})))
}
