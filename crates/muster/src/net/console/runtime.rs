//! The runtime's functions, the JavaScript module's hooks and match handlers, each with its
//! calls and last error, and the API explorer: call any function as a chosen player (or as the
//! server) and see the answer.

use axum::extract::Path;
use axum::Json;
use prometheus::core::Collector;
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::auth::{console, As, Developer, Readonly};
use super::error::domain;
use super::{Answer, ConsoleApiError};
use crate::functions::{CallError, Caller};

/// `GET /api/runtime`: every registered function, its calls by outcome on this node and its
/// last error; the module's hooks and match handlers likewise.
pub async fn functions(As { state, .. }: As<Readonly>) -> Answer {
    // Calls by (function, outcome), read from the metric without creating label sets.
    let mut calls: std::collections::HashMap<String, serde_json::Map<String, Value>> =
        Default::default();
    for family in state.services.metrics.rpc_calls.collect() {
        for metric in family.get_metric() {
            let label = |name: &str| crate::base::metrics::label_of(metric, name);
            calls
                .entry(label("function"))
                .or_default()
                .insert(label("outcome"), metric.get_counter().get_value().into());
        }
    }
    let functions: Vec<Value> = state
        .rpc
        .ids()
        .into_iter()
        .map(|id| {
            let last_error = state
                .rpc
                .last_error(&id)
                .map(|(at, code, message)| json!({"time": at, "code": code, "message": message}));
            json!({
                "id": id,
                "calls": calls.remove(&id).unwrap_or_default(),
                "last_error": last_error,
            })
        })
        .collect();
    Ok(Json(json!({
        "functions": functions,
        "hooks": state.module.as_ref().map(|m| m.hooks_report()).unwrap_or_default(),
        "javascript": state.module.is_some(),
    })))
}

#[derive(Deserialize)]
pub struct CallBody {
    /// The player to call as; empty: the server (as with the HTTP key).
    #[serde(default)]
    user_id: String,
    #[serde(default)]
    payload: String,
}

/// `POST /api/runtime/{id}/call`: the function's answer, or its error.
pub async fn call(
    As {
        state, operator, ..
    }: As<Developer>,
    Path(id): Path<String>,
    Json(body): Json<CallBody>,
) -> Answer {
    let caller = match body.user_id.trim() {
        "" => None,
        text => {
            let user_id = Uuid::parse_str(text)
                .map_err(|_| ConsoleApiError::BadRequest("Not a user id.".into()))?;
            let account = state
                .services
                .accounts
                .account(user_id, false)
                .await
                .map_err(domain)?;
            Some(Caller {
                user_id,
                username: account.user.username,
            })
        }
    };
    let answer = state
        .rpc
        .call(&id, caller.as_ref(), &body.payload, None)
        .await;
    console(&state)?
        .audit(
            &operator,
            "rpc_call",
            &id,
            json!({"user_id": body.user_id, "payload": body.payload, "ok": answer.is_ok()}),
        )
        .await?;
    match answer {
        Ok(payload) => Ok(Json(json!({"payload": payload}))),
        Err(CallError::Failed(error)) => Ok(Json(
            json!({"error": {"code": error.code.name(), "message": error.message}}),
        )),
        Err(other) => Err(domain(other)),
    }
}
