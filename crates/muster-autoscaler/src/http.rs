//! The autoscaler's own HTTP endpoint, beside KEDA's gRPC service:
//!
//! | route | who | what |
//! |---|---|---|
//! | `GET /metrics` | anyone (scrape it over a private network) | `muster_autoscaler_desired_replicas` (for an HPA through the Prometheus adapter), `_source_up`, `_decisions_total` |
//! | `GET /decisions` | anyone (over a private network, as `/metrics`) | the latest decisions, newest first: when, the demand read, the rule, why, the replicas before and after; and when demand could not be read |
//! | `GET /events` | anyone with `--api-token` | the calendar of scheduled events |
//! | `POST /events` | `Authorization: Bearer <--api-token>` | adds an event (the calendar file's fields, as JSON); 400 with the reason when it is not valid |
//!
//! Without `--api-token` the events API answers 403: nothing changes the calendar but the file.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tokio::sync::{mpsc, oneshot, watch};

use crate::calendar::Event;
use crate::keda::Desired;

/// What the run loop tells the endpoint, and how the endpoint reaches the run loop.
#[derive(Clone)]
pub struct Shared {
    pub desired: watch::Receiver<Desired>,
    pub events: watch::Receiver<Vec<Event>>,
    pub source_up: Arc<AtomicBool>,
    pub decisions: Arc<AtomicU64>,
    pub add_event: mpsc::Sender<(Event, oneshot::Sender<Result<(), String>>)>,
    pub api_token: Option<String>,
    /// The latest decisions, oldest first ([`RECENT_DECISIONS`] at most).
    pub recent: Arc<std::sync::Mutex<VecDeque<Record>>>,
}

/// Decisions `GET /decisions` keeps.
pub const RECENT_DECISIONS: usize = 200;

/// What the run loop did and why, as `GET /decisions` shows it (and the log prints it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// Unix seconds.
    pub at: u64,
    /// `decision` (the replicas changed, or would have in a dry run), `source_down` (demand could
    /// not be read: the last decision holds) or `source_up` (readable again).
    pub kind: String,
    pub demand: Option<f64>,
    pub rule: Option<String>,
    pub why: String,
    pub from_replicas: u64,
    pub to_replicas: u64,
    pub dry_run: bool,
}

impl Record {
    /// A change in whether demand can be read (`source_down`, `source_up`): no decision, the
    /// replicas held at `replicas`.
    pub fn source(at: u64, kind: &str, why: String, replicas: u64, dry_run: bool) -> Record {
        Record {
            at,
            kind: kind.to_owned(),
            demand: None,
            rule: None,
            why,
            from_replicas: replicas,
            to_replicas: replicas,
            dry_run,
        }
    }
}

impl Shared {
    /// Keeps `record`, dropping the oldest past [`RECENT_DECISIONS`].
    pub fn remember(recent: &std::sync::Mutex<VecDeque<Record>>, record: Record) {
        let mut recent = recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if recent.len() == RECENT_DECISIONS {
            recent.pop_front();
        }
        recent.push_back(record);
    }
}

pub fn router(shared: Shared) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/decisions", get(decisions))
        .route("/events", get(list_events).post(add_event))
        .with_state(shared)
}

async fn metrics(State(shared): State<Shared>) -> Response {
    let text = format!(
        "# HELP muster_autoscaler_desired_replicas Replicas the policy wants now.\n\
         # TYPE muster_autoscaler_desired_replicas gauge\n\
         muster_autoscaler_desired_replicas {}\n\
         # HELP muster_autoscaler_source_up Whether every demand source answered the last read.\n\
         # TYPE muster_autoscaler_source_up gauge\n\
         muster_autoscaler_source_up {}\n\
         # HELP muster_autoscaler_decisions_total Changes of the desired replicas.\n\
         # TYPE muster_autoscaler_decisions_total counter\n\
         muster_autoscaler_decisions_total {}\n",
        shared.desired.borrow().replicas,
        u8::from(shared.source_up.load(Ordering::Relaxed)),
        shared.decisions.load(Ordering::Relaxed),
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn decisions(State(shared): State<Shared>) -> Response {
    let recent: Vec<Record> = shared
        .recent
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .rev()
        .cloned()
        .collect();
    Json(serde_json::json!({
        "replicas": shared.desired.borrow().replicas,
        "source_up": shared.source_up.load(Ordering::Relaxed),
        "decisions": recent,
    }))
    .into_response()
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

/// `Ok` when the request carries the API token, else the status and reason to answer.
fn authorized(shared: &Shared, headers: &HeaderMap) -> Result<(), (StatusCode, &'static str)> {
    let Some(token) = &shared.api_token else {
        return Err((
            StatusCode::FORBIDDEN,
            "the events API is off; start the autoscaler with --api-token",
        ));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Compared in constant time.
    let same = given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if same {
        Ok(())
    } else {
        Err((
            StatusCode::UNAUTHORIZED,
            "Authorization: Bearer <api token> required",
        ))
    }
}

async fn list_events(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    if let Err((status, why)) = authorized(&shared, &headers) {
        return error(status, why);
    }
    let events = shared.events.borrow().clone();
    Json(events).into_response()
}

async fn add_event(
    State(shared): State<Shared>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err((status, why)) = authorized(&shared, &headers) {
        return error(status, why);
    }
    let event: Event = match serde_json::from_slice(&body) {
        Ok(event) => event,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("not an event: {e}")),
    };
    let (answer, answered) = oneshot::channel();
    if shared.add_event.send((event, answer)).await.is_err() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the autoscaler is stopping",
        );
    }
    match answered.await {
        Ok(Ok(())) => StatusCode::CREATED.into_response(),
        Ok(Err(problem)) => error(StatusCode::BAD_REQUEST, problem),
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the autoscaler is stopping",
        ),
    }
}
