//! `/graphql`: the read gateway (`muster_gateway`) on the API's listener. `GET` serves the
//! query page (self-contained: it loads no asset from anywhere); `POST` runs a query for a
//! player (`Authorization: Bearer <session token>`) or a server (`Authorization: Bearer
//! <gateway.api_key>`), each client IP within `gateway.requests_per_ip_per_sec`. The answer
//! carries where each field came from in its `cacheStatus` extension (`hit`, `miss`,
//! `coalesced`, `stale`, `stale_if_error`).
//!
//! Besides the configured origin fields, the schema has `me`: the caller's own account and
//! wallet, from Muster's data, so one query can join both.

use std::sync::Arc;

use async_graphql::dynamic::{Field, FieldFuture, FieldValue, Object, Scalar, TypeRef};
use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use muster_gateway::page::{query_page, CONTENT_SECURITY_POLICY};
use muster_gateway::schema::{CacheReport, Caller, Gateway};

use super::http::auth::GatewayCaller;
use super::http::error::ApiError;
use super::http::extract::{ApiJson, GatewayRateLimit};
use crate::accounts::Accounts;
use crate::net::state::AppState;

/// The caller's account as `me` shows it.
struct Me {
    id: String,
    username: String,
    display_name: String,
    wallet: Vec<(String, i64)>,
}

/// `me` and the types it returns, resolved by `accounts`.
pub fn backend_fields(accounts: Arc<Accounts>) -> (Vec<Field>, Vec<Object>, Vec<Scalar>) {
    let me = Field::new("me", TypeRef::named("Player"), move |ctx| {
        let accounts = accounts.clone();
        FieldFuture::new(async move {
            let user = ctx
                .data_opt::<Caller>()
                .and_then(|c| c.user.clone())
                .ok_or("me needs a signed-in caller")?;
            let uid = uuid::Uuid::parse_str(&user).map_err(|_| "me needs a signed-in caller")?;
            let account = accounts
                .account(uid, true)
                .await
                .map_err(|e| e.to_string())?;
            let wallet: std::collections::BTreeMap<String, i64> =
                serde_json::from_str(&account.wallet).unwrap_or_default();
            Ok(Some(FieldValue::owned_any(Me {
                id: account.user.id,
                username: account.user.username,
                display_name: account.user.display_name,
                wallet: wallet.into_iter().collect(),
            })))
        })
    })
    .description("The caller's own account and wallet, from Muster's data.");
    let text = |name: &str, read: fn(&Me) -> &str| {
        Field::new(name, TypeRef::named_nn(TypeRef::STRING), move |ctx| {
            FieldFuture::new(async move {
                let me = ctx.parent_value.try_downcast_ref::<Me>()?;
                Ok(Some(FieldValue::value(read(me).to_owned())))
            })
        })
    };
    let player = Object::new("Player")
        .field(text("id", |m| &m.id))
        .field(text("username", |m| &m.username))
        .field(text("displayName", |m| &m.display_name))
        .field(Field::new(
            "wallet",
            TypeRef::named_nn_list_nn("Balance"),
            |ctx| {
                FieldFuture::new(async move {
                    let me = ctx.parent_value.try_downcast_ref::<Me>()?;
                    Ok(Some(FieldValue::list(
                        me.wallet.iter().cloned().map(FieldValue::owned_any),
                    )))
                })
            },
        ));
    let balance = Object::new("Balance")
        .field(Field::new(
            "currency",
            TypeRef::named_nn(TypeRef::STRING),
            |ctx| {
                FieldFuture::new(async move {
                    let (currency, _) = ctx.parent_value.try_downcast_ref::<(String, i64)>()?;
                    Ok(Some(FieldValue::value(currency.clone())))
                })
            },
        ))
        .field(Field::new("amount", TypeRef::named_nn("Long"), |ctx| {
            FieldFuture::new(async move {
                let (_, amount) = ctx.parent_value.try_downcast_ref::<(String, i64)>()?;
                Ok(Some(FieldValue::value(*amount)))
            })
        }));
    let long = Scalar::new("Long").description("A 64-bit integer.");
    (vec![me], vec![player, balance], vec![long])
}

/// A GraphQL request over HTTP (the usual JSON body); anything else is refused with its reason.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GraphqlBody {
    query: String,
    #[serde(default)]
    operation_name: Option<String>,
    #[serde(default)]
    variables: serde_json::Value,
    /// Sent by some clients; nothing to do with it here.
    #[serde(default, rename = "extensions")]
    _extensions: serde_json::Value,
}

/// `GET /graphql`: the query page (queries from it still need a token). It holds its style and
/// script inline and loads nothing, so it works offline; the Content-Security-Policy holds the
/// browser to that (no asset from anywhere, requests to this origin only).
pub async fn page() -> Response {
    (
        [
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Html(query_page("/graphql")),
    )
        .into_response()
}

/// `POST /graphql`.
pub async fn query(
    State(state): State<AppState>,
    _: GatewayRateLimit,
    caller: GatewayCaller,
    ApiJson(body): ApiJson<GraphqlBody>,
) -> Result<Response, ApiError> {
    let caller = match caller {
        GatewayCaller::Player(claims) => Caller {
            user: Some(claims.uid.to_string()),
        },
        GatewayCaller::Server => Caller { user: None },
    };
    let mut request = async_graphql::Request::new(body.query)
        .variables(async_graphql::Variables::from_json(body.variables));
    if let Some(name) = body.operation_name {
        request = request.operation_name(name);
    }
    let report = CacheReport::default();
    let mut response = state
        .gateway
        .schema
        .execute(request.data(caller).data(report.clone()))
        .await;
    let statuses: async_graphql::indexmap::IndexMap<async_graphql::Name, async_graphql::Value> =
        report
            .0
            .lock()
            .iter()
            .map(|(field, status)| {
                (
                    async_graphql::Name::new(field),
                    async_graphql::Value::from(status.as_str()),
                )
            })
            .collect();
    response
        .extensions
        .insert("cacheStatus".into(), async_graphql::Value::Object(statuses));
    Ok(Json(response).into_response())
}

/// Copies the gateway's counts (kept in atomics by the cache and the origins) into the metrics,
/// before `/metrics` renders them.
pub fn sync_metrics(state: &AppState) {
    use crate::base::metrics::Metrics;
    use std::sync::atomic::Ordering::Relaxed;
    let m = &state.services.metrics;
    let stats = state.gateway.cache.stats();
    for (status, total) in [
        ("hit", &stats.hits),
        ("miss", &stats.misses),
        ("coalesced", &stats.coalesced),
        ("stale", &stats.stale),
        ("stale_if_error", &stats.stale_if_error),
    ] {
        Metrics::catch_up(
            &m.gateway_lookups.with_label_values(&[status]),
            total.load(Relaxed),
        );
    }
    for (kind, total) in [
        ("started", &stats.fetches),
        ("early", &stats.early_refreshes),
        ("failed", &stats.fetch_errors),
    ] {
        Metrics::catch_up(
            &m.gateway_fetches.with_label_values(&[kind]),
            total.load(Relaxed),
        );
    }
    for (name, origin) in &state.gateway.origins {
        let calls = origin.stats.calls.load(Relaxed);
        let errors = origin.stats.errors.load(Relaxed);
        let calls_metric = &m.gateway_origin_calls;
        Metrics::catch_up(
            &calls_metric.with_label_values(&[name, "ok"]),
            calls - errors.min(calls),
        );
        Metrics::catch_up(&calls_metric.with_label_values(&[name, "error"]), errors);
        m.gateway_origin_in_flight
            .with_label_values(&[name])
            .set(origin.stats.in_flight.load(Relaxed) as i64);
    }
    m.gateway_cache_bytes
        .set(i64::try_from(state.gateway.cache.bytes()).unwrap_or(i64::MAX));
}

/// Builds the gateway for `config` with Muster's own fields.
pub fn build(
    config: &muster_gateway::config::GatewayConfig,
    accounts: Arc<Accounts>,
) -> anyhow::Result<Gateway> {
    let (fields, types, scalars) = backend_fields(accounts);
    Gateway::build_with(
        config,
        muster_gateway::origin_client(),
        fields,
        types,
        scalars,
    )
    .map_err(|e| anyhow::anyhow!(e))
}
