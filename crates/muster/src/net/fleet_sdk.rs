//! The Agones SDK's REST API, served by Muster for each game server on 127.0.0.1 at the port
//! the process finds in `AGONES_SDK_HTTP_PORT` — so a server built against the Agones SDK runs
//! under Muster unchanged. JSON as Agones' gateway writes it (int64 as strings).
//!
//! Lifecycle: `POST /ready`, `/health`, `/allocate`, `/reserve {seconds}`, `/shutdown`;
//! configuration: `GET /gameserver`, `GET /watch/gameserver` (a stream of `{"result": …}`
//! lines); metadata: `PUT /metadata/label`, `/metadata/annotation` (`{key, value}`); player
//! tracking: `POST /alpha/player/connect|disconnect {playerID}`, `GET /alpha/player/count`,
//! `GET|PUT /alpha/player/capacity`, `GET /alpha/player/connected[/{playerID}]`.
//! Muster's own: `POST /muster/ticket {ticket}` redeems a player's room ticket (single use)
//! and answers who the player is.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::rooms::fleet::process::{GameServer, Phase, Stop};
use crate::rooms::fleet::Fleet;

#[derive(Clone)]
struct Sdk {
    server: Arc<GameServer>,
    fleet: Arc<Fleet>,
}

/// The edge's SDK server: each game server's SDK on its own loopback port.
pub struct AgonesSdk;

impl crate::rooms::fleet::SdkServer for AgonesSdk {
    fn serve(&self, listener: tokio::net::TcpListener, server: Arc<GameServer>, fleet: Arc<Fleet>) {
        let app = router(server.clone(), fleet);
        tokio::spawn(async move {
            let ended = server.exited.clone();
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { ended.cancelled().await })
                .await;
        });
    }
}

/// The SDK's routes for `server`.
fn router(server: Arc<GameServer>, fleet: Arc<Fleet>) -> Router {
    Router::new()
        .route("/ready", post(ready))
        .route("/health", post(health))
        .route("/allocate", post(allocate))
        .route("/reserve", post(reserve))
        .route("/shutdown", post(shutdown))
        .route("/gameserver", get(gameserver))
        .route("/watch/gameserver", get(watch))
        .route("/metadata/label", put(label))
        .route("/metadata/annotation", put(annotation))
        .route("/alpha/player/connect", post(player_connect))
        .route("/alpha/player/disconnect", post(player_disconnect))
        .route("/alpha/player/count", get(player_count))
        .route("/alpha/player/capacity", get(capacity).put(set_capacity))
        .route("/alpha/player/connected", get(connected_list))
        .route("/alpha/player/connected/{player}", get(is_connected))
        .route("/muster/ticket", post(ticket))
        .with_state(Sdk { server, fleet })
}

fn empty() -> Json<Value> {
    Json(json!({}))
}

fn refused(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "code": 9, "message": message }))).into_response()
}

/// Ready: a started (or reserved) process may now be allocated; an allocated one that calls it
/// again is done with its room and goes back to the pool (Agones' GameServer reuse).
async fn ready(State(sdk): State<Sdk>) -> Response {
    let (changed, released) = sdk.server.update(|s| match s.phase {
        Phase::Scheduled | Phase::Reserved => {
            s.phase = Phase::Ready;
            s.last_health = Instant::now();
            (true, None)
        }
        Phase::Allocated => {
            s.phase = Phase::Ready;
            s.last_health = Instant::now();
            s.players.clear();
            s.player_capacity = 0;
            (true, s.room.take())
        }
        _ => (false, None),
    });
    match (changed, released) {
        (true, Some(room)) => sdk.fleet.room_released(&sdk.server, &room),
        (true, None) => sdk.fleet.server_ready(&sdk.server),
        _ => {}
    }
    empty().into_response()
}

async fn health(State(sdk): State<Sdk>) -> Json<Value> {
    sdk.server.update(|s| s.last_health = Instant::now());
    empty()
}

async fn allocate(State(sdk): State<Sdk>) -> Response {
    // Self-allocation: the server takes itself out of the warm pool.
    let allowed = sdk.server.update(|s| match s.phase {
        Phase::Ready | Phase::Reserved | Phase::Allocated => {
            s.phase = Phase::Allocated;
            true
        }
        _ => false,
    });
    if allowed {
        sdk.fleet.refill(&sdk.server.handler);
        empty().into_response()
    } else {
        refused(StatusCode::BAD_REQUEST, "not ready: cannot allocate")
    }
}

#[derive(Deserialize)]
struct Reserve {
    #[serde(default, deserialize_with = "int64")]
    seconds: i64,
}

async fn reserve(State(sdk): State<Sdk>, Json(body): Json<Reserve>) -> Response {
    if !(0..=86_400).contains(&body.seconds) {
        return refused(StatusCode::BAD_REQUEST, "seconds must be 0..86400");
    }
    let until =
        (body.seconds > 0).then(|| Instant::now() + Duration::from_secs(body.seconds as u64));
    let allowed = sdk.server.update(|s| match s.phase {
        Phase::Ready | Phase::Scheduled | Phase::Reserved => {
            s.phase = Phase::Reserved;
            s.reserved_until = until;
            true
        }
        _ => false,
    });
    if allowed {
        sdk.fleet.refill(&sdk.server.handler);
        if let Some(until) = until {
            let server = sdk.server.clone();
            let fleet = sdk.fleet.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(until).await;
                let back = server.update(|s| {
                    let due = s.phase == Phase::Reserved && s.reserved_until == Some(until);
                    if due {
                        s.phase = Phase::Ready;
                    }
                    due
                });
                if back {
                    fleet.server_ready(&server);
                }
            });
        }
        empty().into_response()
    } else {
        refused(StatusCode::BAD_REQUEST, "cannot reserve in this state")
    }
}

async fn shutdown(State(sdk): State<Sdk>) -> Json<Value> {
    sdk.server
        .stop(Stop::Asked, "the game server asked to shut down");
    empty()
}

/// The GameServer as Agones' REST gateway shows it.
pub fn gameserver_json(server: &GameServer) -> Value {
    let state = server.state();
    let mut annotations = state.annotations.clone();
    if let Some(room) = &state.room {
        annotations.insert("muster.dev/room-id".into(), room.room_id.clone());
        annotations.insert("muster.dev/capacity".into(), room.capacity.to_string());
        for (k, v) in &room.params {
            annotations.insert(format!("muster.dev/param.{k}"), v.clone());
        }
    }
    json!({
        "object_meta": {
            "name": format!("{}-{}", server.handler, &server.id.simple().to_string()[..8]),
            "namespace": "muster",
            "uid": server.id.to_string(),
            "creation_timestamp": (server.created_at_ms / 1000).to_string(),
            "labels": state.labels,
            "annotations": annotations,
        },
        "spec": {
            "health": { "disabled": false },
        },
        "status": {
            "state": state.phase.name(),
            "address": "127.0.0.1",
            "ports": [{ "name": "default", "port": server.port }],
            "players": {
                "count": state.players.len().to_string(),
                "capacity": state.player_capacity.to_string(),
                "ids": state.players.iter().collect::<Vec<_>>(),
            },
        },
    })
}

async fn gameserver(State(sdk): State<Sdk>) -> Json<Value> {
    Json(gameserver_json(&sdk.server))
}

/// The GameServer now, then again at every change, one `{"result": GameServer}` line each,
/// until the process exits.
async fn watch(State(sdk): State<Sdk>) -> Response {
    let start = (sdk.server.watch(), sdk.server.clone(), true);
    let lines = futures_util::stream::unfold(start, |(mut changes, server, first)| async move {
        if !first {
            tokio::select! {
                changed = changes.changed() => changed.ok()?,
                () = server.exited.cancelled() => return None,
            }
        }
        let mut line = json!({ "result": gameserver_json(&server) }).to_string();
        line.push('\n');
        Some((
            Ok::<_, std::convert::Infallible>(line),
            (changes, server, false),
        ))
    });
    Response::builder()
        .header("content-type", "application/json")
        .body(axum::body::Body::from_stream(lines))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

#[derive(Deserialize)]
struct KeyValue {
    key: String,
    value: String,
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 63
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

async fn label(State(sdk): State<Sdk>, Json(kv): Json<KeyValue>) -> Response {
    set_metadata(&sdk, kv, true)
}

async fn annotation(State(sdk): State<Sdk>, Json(kv): Json<KeyValue>) -> Response {
    set_metadata(&sdk, kv, false)
}

fn set_metadata(sdk: &Sdk, kv: KeyValue, label: bool) -> Response {
    if !valid_key(&kv.key) || kv.value.len() > 4096 {
        return refused(
            StatusCode::BAD_REQUEST,
            "key: 1-63 letters, digits, '-', '_' or '.'; value: at most 4096 bytes",
        );
    }
    sdk.server.update(|s| {
        let map = if label {
            &mut s.labels
        } else {
            &mut s.annotations
        };
        if map.len() < 64 || map.contains_key(&kv.key) {
            map.insert(kv.key, kv.value);
        }
    });
    empty().into_response()
}

#[derive(Deserialize)]
struct Player {
    #[serde(rename = "playerID")]
    player_id: String,
}

async fn player_connect(State(sdk): State<Sdk>, Json(p): Json<Player>) -> Response {
    if p.player_id.is_empty() || p.player_id.len() > 256 {
        return refused(StatusCode::BAD_REQUEST, "playerID: 1-256 bytes");
    }
    let result = sdk.server.update(|s| {
        if s.players.contains(&p.player_id) {
            Ok(false)
        } else if s.player_capacity > 0 && s.players.len() as i64 >= s.player_capacity {
            Err(())
        } else {
            s.players.insert(p.player_id);
            Ok(true)
        }
    });
    match result {
        Ok(added) => Json(json!({ "bool": added })).into_response(),
        Err(()) => refused(StatusCode::BAD_REQUEST, "players are at capacity"),
    }
}

async fn player_disconnect(State(sdk): State<Sdk>, Json(p): Json<Player>) -> Json<Value> {
    let removed = sdk.server.update(|s| s.players.remove(&p.player_id));
    Json(json!({ "bool": removed }))
}

async fn player_count(State(sdk): State<Sdk>) -> Json<Value> {
    Json(json!({ "count": sdk.server.state().players.len().to_string() }))
}

async fn capacity(State(sdk): State<Sdk>) -> Json<Value> {
    Json(json!({ "count": sdk.server.state().player_capacity.to_string() }))
}

#[derive(Deserialize)]
struct Count {
    #[serde(deserialize_with = "int64")]
    count: i64,
}

async fn set_capacity(State(sdk): State<Sdk>, Json(c): Json<Count>) -> Response {
    if c.count < 0 {
        return refused(StatusCode::BAD_REQUEST, "count must not be negative");
    }
    sdk.server.update(|s| s.player_capacity = c.count);
    empty().into_response()
}

async fn connected_list(State(sdk): State<Sdk>) -> Json<Value> {
    Json(json!({ "list": sdk.server.state().players }))
}

async fn is_connected(State(sdk): State<Sdk>, Path(player): Path<String>) -> Json<Value> {
    Json(json!({ "bool": sdk.server.state().players.contains(&player) }))
}

#[derive(Deserialize)]
struct Ticket {
    ticket: String,
}

/// Redeems a player's ticket for this server's room: who the player is, once.
async fn ticket(State(sdk): State<Sdk>, Json(t): Json<Ticket>) -> Response {
    match sdk.fleet.redeem_ticket(&sdk.server, &t.ticket) {
        Ok(claims) => Json(json!({
            "user_id": claims.uid.to_string(),
            "username": claims.usn,
            "room_id": sdk.server.state().room.map(|r| r.room_id),
        }))
        .into_response(),
        Err(message) => refused(StatusCode::FORBIDDEN, &message),
    }
}

/// An int64 as Agones' gateway sends it: a string, or a number.
fn int64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Number(i64),
    }
    match Either::deserialize(d)? {
        Either::Number(n) => Ok(n),
        Either::Text(t) => t.parse().map_err(serde::de::Error::custom),
    }
}
