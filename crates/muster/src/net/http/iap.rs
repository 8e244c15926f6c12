//! In-app purchases and subscriptions over Nakama's REST routes, for the caller's session
//! (rules in [`crate::purchases`]):
//!
//! - `POST /v2/iap/purchase/{apple,google,huawei,facebookinstant}` validate a purchase
//!   (`ValidatePurchase*Request` → `ValidatePurchaseResponse`);
//! - `POST /v2/iap/subscription/{apple,google}` validate a subscription
//!   (`ValidateSubscription*Request` → `ValidateSubscriptionResponse`);
//! - `GET /v2/iap/subscription/{product_id}` (`ValidatedSubscription`) and
//!   `POST /v2/iap/subscription` (`ListSubscriptionsRequest` → `SubscriptionList`);
//! - `GET /v2/iap/purchase?limit=&cursor=` lists the caller's purchases
//!   (`{validated_purchases, cursor, prev_cursor}`, Nakama's `PurchaseList`);
//!
//! and the stores' notification callbacks, with no session — the secret id in the path is the
//! credential, compared in constant time, and a route whose id is not configured is not found:
//! `POST /v2/console/apple/notifications/{id}` (App Store Server Notifications v2) and
//! `POST /v2/console/google/notifications/{id}` (Real-time Developer Notifications by Pub/Sub
//! push), also under Nakama's older `…/subscriptions/{id}`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::Json;
use muster_proto::grpc::{
    ListSubscriptionsRequest, ValidatePurchaseAppleRequest, ValidatePurchaseFacebookInstantRequest,
    ValidatePurchaseGoogleRequest, ValidatePurchaseHuaweiRequest, ValidateSubscriptionAppleRequest,
    ValidateSubscriptionGoogleRequest,
};

use super::auth::{constant_time_eq, Player};
use super::error::ApiError;
use super::extract::{body_error, parsed, ApiJson, AuthRateLimit};
use super::response::Answer;
use crate::net::state::AppState;
use serde_json::Value;

use crate::purchases::Handled;

/// An answer as Nakama's gateway (protojson) writes it: pbjson writes a time's UTC offset as
/// `+00:00` where protojson writes `Z`, with the same fraction digits (0, 3, 6 or 9).
fn protojson(answer: &impl serde::Serialize) -> Answer<Value> {
    let mut value = serde_json::to_value(answer).map_err(|error| {
        tracing::error!(%error, "an answer did not serialize");
        ApiError::Internal
    })?;
    rewrite_times(&mut value, false);
    Ok(Json(value))
}

/// A purchase validation's answer: as [`protojson`], and a purchase never refunded has no
/// `refund_time` (Nakama's validations leave it out; its listings show the epoch).
fn validated(answer: &impl serde::Serialize) -> Answer<Value> {
    let Json(mut value) = protojson(answer)?;
    rewrite_times(&mut value, true);
    Ok(Json(value))
}

fn rewrite_times(value: &mut Value, drop_unrefunded: bool) {
    match value {
        Value::Object(map) => {
            if drop_unrefunded
                && map.get("refund_time").and_then(Value::as_str) == Some("1970-01-01T00:00:00Z")
            {
                map.remove("refund_time");
            }
            for (key, field) in map.iter_mut() {
                match field {
                    Value::String(text) if key.ends_with("_time") => {
                        if let Some(utc) = text.strip_suffix("+00:00") {
                            *text = format!("{utc}Z");
                        }
                    }
                    _ => rewrite_times(field, drop_unrefunded),
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| rewrite_times(item, drop_unrefunded)),
        _ => {}
    }
}

/// `persist` as sent; Nakama stores unless told not to.
fn persist(value: Option<pbjson_types::BoolValue>) -> bool {
    value.is_none_or(|v| v.value)
}

pub async fn purchase_apple(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ValidatePurchaseAppleRequest>,
) -> Answer<Value> {
    let answer = services
        .purchases
        .validate_apple(caller.uid, &request.receipt, persist(request.persist))
        .await?;
    validated(&answer)
}

pub async fn purchase_google(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ValidatePurchaseGoogleRequest>,
) -> Answer<Value> {
    let answer = services
        .purchases
        .validate_google(caller.uid, &request.purchase, persist(request.persist))
        .await?;
    validated(&answer)
}

pub async fn purchase_huawei(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ValidatePurchaseHuaweiRequest>,
) -> Answer<Value> {
    let answer = services
        .purchases
        .validate_huawei(
            caller.uid,
            &request.purchase,
            &request.signature,
            persist(request.persist),
        )
        .await?;
    validated(&answer)
}

pub async fn purchase_facebook_instant(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ValidatePurchaseFacebookInstantRequest>,
) -> Answer<Value> {
    let answer = services
        .purchases
        .validate_facebook_instant(
            caller.uid,
            &request.signed_request,
            persist(request.persist),
        )
        .await?;
    validated(&answer)
}

pub async fn subscription_apple(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ValidateSubscriptionAppleRequest>,
) -> Answer<Value> {
    let answer = services
        .purchases
        .validate_subscription_apple(caller.uid, &request.receipt, persist(request.persist))
        .await?;
    protojson(&answer)
}

pub async fn subscription_google(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ValidateSubscriptionGoogleRequest>,
) -> Answer<Value> {
    let answer = services
        .purchases
        .validate_subscription_google(caller.uid, &request.receipt, persist(request.persist))
        .await?;
    protojson(&answer)
}

pub async fn subscription(
    Player(caller, services, _): Player,
    Path(product_id): Path<String>,
) -> Answer<Value> {
    let answer = services
        .purchases
        .subscription_by_product_id(caller.uid, &product_id)
        .await?;
    protojson(&answer)
}

pub async fn subscriptions(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ListSubscriptionsRequest>,
) -> Answer<Value> {
    let limit = match request.limit {
        None => 0,
        Some(limit) if (1..=100).contains(&limit.value) => limit.value as usize,
        Some(_) => {
            return Err(ApiError::InvalidArgument(
                "Invalid limit - limit must be between 1 and 100.".into(),
            ))
        }
    };
    let answer = services
        .purchases
        .list_subscriptions(Some(caller.uid), limit, &request.cursor)
        .await?;
    protojson(&answer)
}

pub async fn purchases(
    Player(caller, services, _): Player,
    RawQuery(raw): RawQuery,
) -> Answer<Value> {
    let (mut limit, mut cursor) = (0usize, String::new());
    for (name, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match name.as_ref() {
            "limit" => {
                limit = parsed(&value, "Invalid limit - limit must be between 1 and 100.")?;
                if limit == 0 {
                    return Err(ApiError::InvalidArgument(
                        "Invalid limit - limit must be between 1 and 100.".into(),
                    ));
                }
            }
            "cursor" => cursor = value.into_owned(),
            _ => {}
        }
    }
    let answer = services
        .purchases
        .list_purchases(Some(caller.uid), limit, &cursor)
        .await?;
    protojson(&answer)
}

/// Whether `id` is the configured endpoint id (none configured: never).
fn endpoint_is(configured: Option<&str>, id: &str) -> bool {
    configured.is_some_and(|configured| constant_time_eq(configured.as_bytes(), id.as_bytes()))
}

/// What a handled notification is answered: 200 and no body, as Nakama answers the stores.
fn handled(outcome: Handled) -> StatusCode {
    if outcome == Handled::Ignored {
        tracing::debug!("store notification ignored");
    }
    StatusCode::OK
}

pub async fn apple_notification(
    _: AuthRateLimit,
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let purchases = &state.services.purchases;
    if !endpoint_is(purchases.apple_notifications_endpoint(), &id) {
        return Err(ApiError::NotFound("Not found.".into()));
    }
    let body = body.map_err(body_error)?;
    let outcome = purchases
        .apple_notification(&body)
        .await
        .inspect_err(|error| {
            tracing::warn!(%error, "App Store notification not handled");
        })?;
    Ok(handled(outcome))
}

pub async fn google_notification(
    _: AuthRateLimit,
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let purchases = &state.services.purchases;
    if !endpoint_is(purchases.google_notifications_endpoint(), &id) {
        return Err(ApiError::NotFound("Not found.".into()));
    }
    let body = body.map_err(body_error)?;
    let outcome = purchases
        .google_notification(&body)
        .await
        .inspect_err(|error| {
            tracing::warn!(%error, "Google Play notification not handled");
        })?;
    Ok(handled(outcome))
}
