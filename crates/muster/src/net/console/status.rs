//! The status history and the audit log.

use axum::extract::Query;
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::auth::{console, As, Readonly};
use super::{Answer, ConsoleApiError};
use crate::console::history::{Resolution, WindowQuery};
use crate::net::state::AppState;

#[derive(Deserialize)]
pub struct HistoryQuery {
    /// `second` (an hour at 1 s, the default) or `minute` (a week at 1 min).
    resolution: Option<String>,
    /// Only points after this Unix second (a page that polls asks for what is new).
    #[serde(default)]
    after: i64,
    /// Kept points merged into one answered point (1 to 3600; default 1).
    every: Option<i64>,
    /// How far back, in seconds (default: all that is kept).
    span: Option<i64>,
}

/// `GET /api/status`: this node's series, with the node's name.
pub async fn history(As { state, .. }: As<Readonly>, Query(query): Query<HistoryQuery>) -> Answer {
    let resolution = match query.resolution.as_deref() {
        None | Some("second") => Resolution::Second,
        Some("minute") => Resolution::Minute,
        Some(other) => {
            return Err(ConsoleApiError::BadRequest(format!(
                "resolution is second or minute, not {other:?}"
            )))
        }
    };
    let every = query.every.unwrap_or(1);
    if !(1..=3600).contains(&every) || query.span.is_some_and(|s| s < 1) {
        return Err(ConsoleApiError::BadRequest(
            "every is 1 to 3600, and span at least 1.".into(),
        ));
    }
    let window = WindowQuery {
        resolution,
        after: query.after,
        every,
        span: query.span,
    };
    let nodes = console(&state)?
        .cluster_status(&node_name(&state), window)
        .await;
    Ok(Json(json!({ "nodes": nodes })))
}

/// This node's name in a cluster, `local` alone.
pub fn node_name(state: &AppState) -> String {
    match &state.services.cluster {
        Some(cluster) => cluster.bus.node().to_owned(),
        None => "local".into(),
    }
}

/// `GET /api/cluster`: this node, the live nodes it knows of and the latest departures.
pub async fn cluster(As { state, .. }: As<Readonly>) -> Answer {
    let console = console(&state)?;
    let known = match &console.cluster {
        Some(cluster) => cluster.nodes.report(),
        None => json!({"peers": [], "departures": []}),
    };
    Ok(Json(json!({
        "node": node_name(&state),
        "clustered": state.services.cluster.is_some(),
        "peers": known["peers"],
        "departures": known["departures"],
        "sockets": state.services.registry.sockets(),
        "version": env!("CARGO_PKG_VERSION"),
    })))
}

#[derive(Deserialize)]
pub struct AuditQuery {
    before: Option<i64>,
    limit: Option<usize>,
}

/// `GET /api/audit`: a page of the audit log, newest first; `next` is the `before` of the next
/// page (absent at the end).
pub async fn audit(As { state, .. }: As<Readonly>, Query(query): Query<AuditQuery>) -> Answer {
    let limit = query.limit.unwrap_or(50);
    let rows = console(&state)?.audit_log(query.before, limit).await?;
    let next = (rows.len() >= limit.clamp(1, crate::console::MAX_AUDIT_PAGE))
        .then(|| rows.last().map(|r| r.id))
        .flatten();
    let entries: Vec<_> = rows
        .into_iter()
        .map(|r| {
            json!({
                "id": r.id,
                "time": r.time_ms,
                "username": r.username,
                "action": r.action,
                "target": r.target,
                "detail": serde_json::from_str::<serde_json::Value>(&r.detail)
                    .unwrap_or(serde_json::Value::String(r.detail)),
            })
        })
        .collect();
    Ok(Json(json!({"entries": entries, "next": next})))
}
