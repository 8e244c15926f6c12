//! The console's HTTP edge, on its own listener (`console.listen`): the page and its script
//! (compiled into the binary; nothing from a CDN), and a JSON API under `/api/`.
//!
//! | route | who | what |
//! |---|---|---|
//! | `GET /`, `/console.js`, `/console.css` | anyone | the single page and its assets |
//! | `POST /api/login` | anyone (login limits) | a session cookie and the CSRF token |
//! | `POST /api/logout`, `GET /api/me` | a session | end it; who is logged in |
//! | `GET /api/status` | readonly | the status history (`?resolution=second\|minute&after=`) |
//! | `GET /api/cluster` | readonly | this node, the live nodes it knows, the latest departures |
//! | `GET /api/config` | admin | the configuration in force, secrets redacted |
//! | `GET /api/audit` | readonly | the audit log, newest first (`?before=&limit=`) |
//! | `GET`, `POST /api/users`, `DELETE /api/users/{name}` | admin | console users |
//! | `GET /api/accounts`, `/api/accounts/{id}`, `…/ledger`, `…/storage`, `…/messages` | readonly | search players; an account with its sockets (and their status), wallet, ledger, inventory, storage objects, chat messages, friends, groups, notifications |
//! | `GET /api/storage`, `/api/storage/object` | readonly | a collection's objects (values shortened), one object |
//! | `POST /api/storage/object` | developer | write an object over the version read (a stale one is refused) |
//! | `GET /api/leaderboards`, `/api/leaderboards/{id}/records` | readonly | boards with their definitions; a board's records in rank order |
//! | `POST /api/leaderboards/{id}/metadata` | developer | replace a board's metadata (a JSON object) |
//! | `DELETE /api/leaderboards/{id}/records/{owner}` | developer | delete a record of the current period |
//! | `GET /api/chat/messages`, `/api/groups`, `/api/groups/{id}/users` | readonly | a channel's stored messages; groups; a group's members |
//! | `GET /api/parties` | readonly | this node's parties: members, leader, label, join requests |
//! | `GET /api/autoscaler` | readonly | the autoscaler's latest decisions with their reasons (from `console.autoscaler_url`) |
//! | `POST /api/accounts/{id}/notify` | developer | a notification from the system to a player |
//! | `GET /api/links/{code}`, `DELETE /api/links/{code}` | readonly, developer | an invite link with its clicks per day; disable it |
//! | `GET /api/matches` | readonly | the cluster's matches (labels, sizes), this node's rooms |
//! | `GET /api/rooms/{id}/log` | readonly | a process room's game server output (its last `fleet.*.log_bytes`) |
//! | `GET /api/matches/{id}` | readonly | a match's presences, and an authoritative match's tick and state (from its node) |
//! | `POST /api/matches/{id}/signal`, `…/kick` | developer | signal an authoritative match; remove a player from a match (on its node) |
//! | `GET /api/runtime` | readonly | the functions, the module's hooks and match handlers, their calls and last errors |
//! | `POST /api/runtime/{id}/call` | developer | call a function as a player or the server |
//! | `POST /api/accounts/{id}/wallet`, `…/metadata`, `…/ban`, `…/unban`, `…/sessions/end`; `GET …/export`; `DELETE /api/accounts/{id}` | developer | change a player (audited) |
//!
//! Every `/api/` route but the login needs a session (the `muster_console` cookie: HttpOnly,
//! SameSite=Strict), and every change also the session's CSRF token in `X-CSRF-Token`. Every
//! change is written to the audit log. Every request counts against the client IP's
//! `console.requests_per_ip_per_sec`. The page builds its HTML with `textContent`, never from
//! strings, so a player's `<script>` username shows as text.

mod assets;
mod auth;
mod autoscaler;
mod boards;
mod data;
mod error;
mod links;
mod matches;
mod player_data;
mod players;
mod runtime;
mod settings;
mod social;
mod status;
mod users;

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};

use super::http::extract::ClientIp;
use crate::net::state::AppState;
pub use error::ConsoleApiError;

/// What a console route answers: JSON, or the console's refusal.
pub type Answer = Result<axum::Json<serde_json::Value>, ConsoleApiError>;

/// Largest request body the console takes (a storage object's value is the largest thing sent).
const BODY_LIMIT: usize = 1 << 20;

pub fn router(state: AppState) -> Router {
    let limits = &state.services.config.limits;
    let routes = Router::new()
        .route("/", get(assets::index))
        .route("/console.js", get(assets::script))
        .route("/console.css", get(assets::style))
        .route("/api/login", post(auth::login))
        .route("/api/logout", post(auth::logout))
        .route("/api/me", get(auth::me))
        .route("/api/status", get(status::history))
        .route("/api/audit", get(status::audit))
        .route("/api/cluster", get(status::cluster))
        .route("/api/config", get(settings::config))
        .route("/api/users", get(users::list).post(users::create))
        .route("/api/users/{username}", delete(users::remove))
        .route("/api/accounts", get(players::search))
        .route(
            "/api/accounts/{id}",
            get(players::account).delete(players::delete),
        )
        .route("/api/accounts/{id}/ledger", get(players::ledger))
        .route("/api/accounts/{id}/storage", get(player_data::storage))
        .route("/api/accounts/{id}/messages", get(player_data::messages))
        .route("/api/accounts/{id}/export", get(players::export))
        .route("/api/accounts/{id}/wallet", post(players::wallet))
        .route("/api/accounts/{id}/metadata", post(players::metadata))
        .route(
            "/api/accounts/{id}/sessions/end",
            post(players::end_sessions),
        )
        .route("/api/accounts/{id}/{action}", post(players::ban))
        .route("/api/purchases/{transaction_id}", get(players::purchase))
        .route("/api/storage", get(data::list))
        .route("/api/storage/object", get(data::read).post(data::write))
        .route("/api/leaderboards", get(boards::list))
        .route("/api/leaderboards/{id}/records", get(boards::records))
        .route(
            "/api/leaderboards/{id}/metadata",
            post(boards::set_metadata),
        )
        .route(
            "/api/leaderboards/{id}/records/{owner}",
            delete(boards::delete_record),
        )
        .route("/api/chat/messages", get(social::messages))
        .route("/api/groups", get(social::groups))
        .route("/api/groups/{id}/users", get(social::group_users))
        .route("/api/parties", get(social::parties))
        .route("/api/autoscaler", get(autoscaler::decisions))
        .route("/api/accounts/{id}/notify", post(social::notify))
        .route(
            "/api/links/{code}",
            get(links::stats).delete(links::disable),
        )
        .route("/api/matches", get(matches::list))
        .route("/api/matches/{id}", get(matches::inspect))
        .route("/api/matches/{id}/signal", post(matches::signal))
        .route("/api/matches/{id}/kick", post(matches::kick))
        .route("/api/rooms/{id}/log", get(matches::room_log))
        .route("/api/runtime", get(runtime::functions))
        .route("/api/runtime/{id}/call", post(runtime::call))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(RequestBodyTimeoutLayer::new(Duration::from_millis(
            limits.body_read_timeout_ms,
        )))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_millis(limits.request_timeout_ms),
        ));
    routes
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// The per-IP request limit, and the headers every answer carries: no framing, no sniffing,
/// no referrer, no caching of API answers.
async fn guard(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    request: Request,
    next: Next,
) -> Response {
    let mut response = if state.console_limit.allow(ip) {
        next.run(request).await
    } else {
        state
            .services
            .metrics
            .rate_limited
            .with_label_values(&["console"])
            .inc();
        ConsoleApiError::TooManyRequests.into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

async fn not_found() -> Response {
    ConsoleApiError::NotFound.into_response()
}
