//! HTTP routes: Nakama's `/v2` client API, the realtime upgrade at `/ws`, `/metrics` and
//! `/healthcheck`. Handlers parse and answer; the rules live in [`crate::accounts`]. Cross-cutting
//! concerns (latency metrics, body limit, timeout, CORS) are layers here, not code in handlers.

mod account;
pub mod auth;
mod authenticate;
mod channel;
mod economy;
pub mod error;
pub mod extract;
mod friend;
mod group;
mod hooks;
mod iap;
mod leaderboard;
mod match_list;
mod notification;
mod response;
pub mod rooms;
mod rpc;
mod runtime;
mod session;
mod social;
mod storage;
mod tournament;

use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use muster_proto::api::{
    AccountCustom, AccountDevice, AccountEmail, AccountFacebookInstantGame, AccountGameCenter,
    AuthenticateEmailRequest,
};
use tower_http::cors::{AllowHeaders, AllowMethods, AllowOrigin, CorsLayer};
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};

use self::auth::MetricsScraper;
use self::error::ApiError;
use crate::config::LimitsConfig;
use crate::net::calls::{self, Transport};
use crate::net::state::AppState;

pub fn router(state: AppState) -> Router {
    let config = &state.services.config;
    let routes = Router::new()
        .route(
            "/v2/account/authenticate/device",
            post(authenticate::authenticate::<authenticate::Device>),
        )
        .route(
            "/v2/account/authenticate/email",
            post(authenticate::authenticate::<AuthenticateEmailRequest>),
        )
        .route(
            "/v2/account/authenticate/custom",
            post(authenticate::authenticate::<authenticate::Custom>),
        )
        .route(
            "/v2/account/authenticate/apple",
            post(social::authenticate::<social::Apple>),
        )
        .route(
            "/v2/account/authenticate/google",
            post(social::authenticate::<social::Google>),
        )
        .route(
            "/v2/account/authenticate/facebook",
            post(social::authenticate::<social::Facebook>),
        )
        .route(
            "/v2/account/authenticate/facebookinstantgame",
            post(social::authenticate::<AccountFacebookInstantGame>),
        )
        .route(
            "/v2/account/authenticate/steam",
            post(social::authenticate::<social::Steam>),
        )
        .route(
            "/v2/account/authenticate/gamecenter",
            post(social::authenticate::<AccountGameCenter>),
        )
        .route("/v2/account/session/refresh", post(session::refresh))
        .route("/v2/session/logout", post(session::logout))
        .route(
            "/v2/account",
            get(account::get)
                .put(account::update)
                .delete(account::delete),
        )
        .route(
            "/v2/account/link/device",
            post(account::link::<AccountDevice>),
        )
        .route(
            "/v2/account/link/custom",
            post(account::link::<AccountCustom>),
        )
        .route("/v2/account/link/email", post(account::link_email))
        .route(
            "/v2/account/unlink/device",
            post(account::unlink::<AccountDevice>),
        )
        .route(
            "/v2/account/unlink/custom",
            post(account::unlink::<AccountCustom>),
        )
        .route(
            "/v2/account/unlink/email",
            post(account::unlink::<AccountEmail>),
        )
        .route(
            "/v2/account/link/apple",
            post(social::link::<social::Apple>),
        )
        .route(
            "/v2/account/link/google",
            post(social::link::<social::Google>),
        )
        .route("/v2/account/link/facebook", post(social::link_facebook))
        .route(
            "/v2/account/link/facebookinstantgame",
            post(social::link::<AccountFacebookInstantGame>),
        )
        .route("/v2/account/link/steam", post(social::link_steam))
        .route(
            "/v2/account/link/gamecenter",
            post(social::link::<AccountGameCenter>),
        )
        .route(
            "/v2/account/unlink/apple",
            post(social::unlink::<social::Apple>),
        )
        .route(
            "/v2/account/unlink/google",
            post(social::unlink::<social::Google>),
        )
        .route(
            "/v2/account/unlink/facebook",
            post(social::unlink::<social::Facebook>),
        )
        .route(
            "/v2/account/unlink/facebookinstantgame",
            post(social::unlink::<AccountFacebookInstantGame>),
        )
        .route(
            "/v2/account/unlink/steam",
            post(social::unlink::<social::Steam>),
        )
        .route(
            "/v2/account/unlink/gamecenter",
            post(social::unlink::<AccountGameCenter>),
        )
        .route(
            "/v2/friend/facebook",
            post(social::import_friends::<social::Facebook>),
        )
        .route(
            "/v2/friend/steam",
            post(social::import_friends::<social::Steam>),
        )
        .route("/v2/user", get(account::users))
        .route(
            "/v2/friend",
            get(friend::list).post(friend::add).delete(friend::delete),
        )
        .route("/v2/friend/block", post(friend::block))
        .route("/v2/friend/friends", get(friend::friends_of_friends))
        .route("/v2/group", get(group::list).post(group::create))
        .route(
            "/v2/group/{group_id}",
            axum::routing::put(group::update).delete(group::delete),
        )
        .route("/v2/group/{group_id}/join", post(group::join))
        .route("/v2/group/{group_id}/leave", post(group::leave))
        .route("/v2/group/{group_id}/add", post(group::add))
        .route("/v2/group/{group_id}/kick", post(group::kick))
        .route("/v2/group/{group_id}/ban", post(group::ban))
        .route("/v2/group/{group_id}/promote", post(group::promote))
        .route("/v2/group/{group_id}/demote", post(group::demote))
        .route("/v2/group/{group_id}/user", get(group::users))
        .route("/v2/user/{user_id}/group", get(group::of_user))
        .route("/v2/match", get(match_list::list))
        .route(
            "/v2/notification",
            get(notification::list).delete(notification::delete),
        )
        .route("/v2/rooms", post(rooms::create).get(rooms::list))
        .route("/v2/rooms/{id}", get(rooms::get).delete(rooms::destroy))
        .route("/v2/rooms/{id}/connection", get(rooms::connection))
        .route("/v2/rooms/{id}/tickets/verify", post(rooms::verify_ticket))
        .route("/v2/channel/{channel_id}", get(channel::list_messages))
        .route("/v2/rpc/{id}", get(rpc::call).post(rpc::call))
        .route("/v2/runtime/reload", post(runtime::reload))
        .route(
            "/v2/storage",
            axum::routing::put(storage::write).post(storage::read),
        )
        .route("/v2/storage/delete", axum::routing::put(storage::delete))
        .route("/v2/storage/{collection}", get(storage::list))
        .route("/v2/storage/{collection}/{user_id}", get(storage::list))
        .route(
            "/v2/leaderboard/{leaderboard_id}",
            get(leaderboard::list_records)
                .post(leaderboard::write)
                .delete(leaderboard::delete),
        )
        .route(
            "/v2/leaderboard/{leaderboard_id}/owner/{owner_id}",
            get(leaderboard::around_owner),
        )
        .route("/v2/tournament", get(tournament::list))
        .route(
            "/v2/tournament/{tournament_id}",
            get(tournament::list_records)
                .put(tournament::write)
                .post(tournament::write),
        )
        .route(
            "/v2/tournament/{tournament_id}/join",
            post(tournament::join),
        )
        .route(
            "/v2/tournament/{tournament_id}/owner/{owner_id}",
            get(tournament::around_owner),
        )
        .route("/v2/economy/wallet", get(economy::wallet))
        .route("/v2/economy/inventory", get(economy::inventory))
        .route("/v2/economy/ledger", get(economy::ledger))
        .route("/v2/iap/purchase", get(iap::purchases))
        .route("/v2/iap/purchase/apple", post(iap::purchase_apple))
        .route("/v2/iap/purchase/google", post(iap::purchase_google))
        .route("/v2/iap/purchase/huawei", post(iap::purchase_huawei))
        .route(
            "/v2/iap/purchase/facebookinstant",
            post(iap::purchase_facebook_instant),
        )
        .route("/v2/iap/subscription", post(iap::subscriptions))
        .route("/v2/iap/subscription/apple", post(iap::subscription_apple))
        .route(
            "/v2/iap/subscription/google",
            post(iap::subscription_google),
        )
        .route("/v2/iap/subscription/{product_id}", get(iap::subscription))
        .route(
            "/v2/console/apple/notifications/{id}",
            post(iap::apple_notification),
        )
        .route(
            "/v2/console/apple/subscriptions/{id}",
            post(iap::apple_notification),
        )
        .route(
            "/v2/console/google/notifications/{id}",
            post(iap::google_notification),
        )
        .route(
            "/v2/console/google/subscriptions/{id}",
            post(iap::google_notification),
        )
        .route("/ws", get(crate::net::ws_upgrade::upgrade))
        .route(
            "/graphql",
            get(crate::net::graphql::page).post(crate::net::graphql::query),
        )
        .route("/metrics", get(metrics))
        .route("/healthcheck", get(healthcheck))
        // A module's before and after hooks, where it has some (MatchedPath names the call).
        .route_layer(middleware::from_fn_with_state(state.clone(), hooks::run))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    edge_layers(routes, &config.limits, config.limits.max_request_size_bytes)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            record_latency,
        ))
        .with_state(state)
}

/// What every HTTP router of the server (the API's, the links service's) wraps its routes in:
/// the body size limit, the body and whole-request timeouts, and CORS for any origin (the
/// credentials are bearer tokens and keys, never cookies, so another origin gains nothing).
pub fn edge_layers(
    routes: Router<AppState>,
    limits: &LimitsConfig,
    body_limit: usize,
) -> Router<AppState> {
    let cors = CorsLayer::new()
        .allow_origin(AllowOrigin::mirror_request())
        .allow_methods(AllowMethods::mirror_request())
        .allow_headers(AllowHeaders::mirror_request())
        .max_age(Duration::from_secs(3600));
    routes
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(RequestBodyTimeoutLayer::new(Duration::from_millis(
            limits.body_read_timeout_ms,
        )))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_millis(limits.request_timeout_ms),
        ))
        .layer(cors)
}

/// Observes every request's latency by route template (not raw path, so labels stay bounded),
/// and names each request: its `x-request-id` (the client's or proxy's when it sent a short,
/// printable one, else a new one) is answered back and, at `debug`, logged with the request.
async fn record_latency(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let request_id = request_id(&request);
    let method = request.method().clone();
    let transport = request
        .extensions()
        .get::<Transport>()
        .copied()
        .unwrap_or(Transport::Rest);
    let mut response = next.run(request).await;
    let status = response.status();
    let elapsed = started.elapsed();
    let metrics = &state.services.metrics;
    metrics
        .http_requests
        .with_label_values(&[route.as_str(), status.as_str()])
        .observe(elapsed.as_secs_f64());
    let call = calls::by_route(&method, &route).map(|call| call.name);
    if let Some(call) = call {
        let code = calls::code_of_status(status);
        metrics
            .api_calls
            .with_label_values(&[call, transport.label(), calls::code_name(code)])
            .observe(elapsed.as_secs_f64());
    }
    tracing::debug!(
        request_id = %request_id.to_str().unwrap_or_default(),
        %method,
        route,
        call = call.unwrap_or_default(),
        transport = transport.label(),
        status = status.as_u16(),
        micros = elapsed.as_micros() as u64,
        "request"
    );
    response.headers_mut().insert(REQUEST_ID, request_id);
    response
}

const REQUEST_ID: header::HeaderName = header::HeaderName::from_static("x-request-id");

/// The request's id: the one it came with when short and printable, else a new random one.
fn request_id(request: &Request) -> header::HeaderValue {
    request
        .headers()
        .get(&REQUEST_ID)
        .filter(|v| {
            (1..=64).contains(&v.len()) && v.as_bytes().iter().all(|b| b.is_ascii_graphic())
        })
        .cloned()
        .unwrap_or_else(|| {
            let id = format!("{:016x}", rand::random::<u64>());
            header::HeaderValue::from_str(&id).unwrap_or(header::HeaderValue::from_static("-"))
        })
}

async fn metrics(_: MetricsScraper, State(state): State<AppState>) -> Response {
    crate::net::graphql::sync_metrics(&state);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.services.metrics.render(),
    )
        .into_response()
}

async fn healthcheck() -> Json<serde_json::Value> {
    Json(serde_json::json!({}))
}

async fn not_found() -> ApiError {
    ApiError::NotFound("Not found.".into())
}

async fn method_not_allowed() -> Response {
    let body = muster_proto::api::ErrorBody {
        error: "Method not allowed.".into(),
        message: "Method not allowed.".into(),
        code: muster_proto::api::code::INVALID_ARGUMENT,
    };
    (StatusCode::METHOD_NOT_ALLOWED, Json(body)).into_response()
}
