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
    ListSubscriptionsRequest, SubscriptionList, ValidatePurchaseAppleRequest,
    ValidatePurchaseFacebookInstantRequest, ValidatePurchaseGoogleRequest,
    ValidatePurchaseHuaweiRequest, ValidatePurchaseResponse, ValidateSubscriptionAppleRequest,
    ValidateSubscriptionGoogleRequest, ValidateSubscriptionResponse, ValidatedSubscription,
};

use super::auth::{constant_time_eq, Player};
use super::error::ApiError;
use super::extract::{body_error, parsed, ApiJson, AuthRateLimit};
use super::response::Answer;
use crate::net::state::AppState;
use crate::purchases::{Handled, PurchaseList};

/// `persist` as sent; Nakama stores unless told not to.
fn persist(value: Option<pbjson_types::BoolValue>) -> bool {
    value.is_none_or(|v| v.value)
}

pub async fn purchase_apple(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ValidatePurchaseAppleRequest>,
) -> Answer<ValidatePurchaseResponse> {
    let answer = services
        .purchases
        .validate_apple(caller.uid, &request.receipt, persist(request.persist))
        .await?;
    Ok(Json(answer))
}

pub async fn purchase_google(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ValidatePurchaseGoogleRequest>,
) -> Answer<ValidatePurchaseResponse> {
    let answer = services
        .purchases
        .validate_google(caller.uid, &request.purchase, persist(request.persist))
        .await?;
    Ok(Json(answer))
}

pub async fn purchase_huawei(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ValidatePurchaseHuaweiRequest>,
) -> Answer<ValidatePurchaseResponse> {
    let answer = services
        .purchases
        .validate_huawei(
            caller.uid,
            &request.purchase,
            &request.signature,
            persist(request.persist),
        )
        .await?;
    Ok(Json(answer))
}

pub async fn purchase_facebook_instant(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ValidatePurchaseFacebookInstantRequest>,
) -> Answer<ValidatePurchaseResponse> {
    let answer = services
        .purchases
        .validate_facebook_instant(
            caller.uid,
            &request.signed_request,
            persist(request.persist),
        )
        .await?;
    Ok(Json(answer))
}

pub async fn subscription_apple(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ValidateSubscriptionAppleRequest>,
) -> Answer<ValidateSubscriptionResponse> {
    let answer = services
        .purchases
        .validate_subscription_apple(caller.uid, &request.receipt, persist(request.persist))
        .await?;
    Ok(Json(answer))
}

pub async fn subscription_google(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ValidateSubscriptionGoogleRequest>,
) -> Answer<ValidateSubscriptionResponse> {
    let answer = services
        .purchases
        .validate_subscription_google(caller.uid, &request.receipt, persist(request.persist))
        .await?;
    Ok(Json(answer))
}

pub async fn subscription(
    Player(caller, services, _): Player,
    Path(product_id): Path<String>,
) -> Answer<ValidatedSubscription> {
    let answer = services
        .purchases
        .subscription_by_product_id(caller.uid, &product_id)
        .await?;
    Ok(Json(answer))
}

pub async fn subscriptions(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ListSubscriptionsRequest>,
) -> Answer<SubscriptionList> {
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
    Ok(Json(answer))
}

pub async fn purchases(
    Player(caller, services, _): Player,
    RawQuery(raw): RawQuery,
) -> Answer<PurchaseList> {
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
    Ok(Json(answer))
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
