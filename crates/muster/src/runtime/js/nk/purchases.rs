//! Purchases and subscriptions from server code, with Nakama's argument orders and answers
//! (camelCase, times in Unix seconds, the store and environment by name):
//! `purchaseValidateApple(userId, receipt, persist?, passwordOverride?)`,
//! `purchaseValidateGoogle(userId, receipt, persist?, clientEmail?, privateKey?)`,
//! `purchaseValidateHuawei(userId, receipt, signature, persist?)`,
//! `purchaseValidateFacebookInstant(userId, signedRequest, persist?)`,
//! `purchaseGetByTransactionId(transactionId)`, `purchasesList(userId?, limit?, cursor?)`,
//! `subscriptionValidateApple(userId, receipt, persist?, passwordOverride?)`,
//! `subscriptionValidateGoogle(userId, receipt, persist?, clientEmail?, privateKey?)`,
//! `subscriptionGetByProductId(userId, productId)`, `subscriptionsList(userId?, limit?,
//! cursor?)`. The overrides of the store's credentials are refused: the configured ones are
//! used.

use muster_js::JsError;
use muster_proto::grpc::{
    StoreEnvironment, StoreProvider, ValidatePurchaseResponse, ValidatedPurchase,
    ValidatedSubscription,
};
use serde_json::{json, Map, Value};

use super::context::{invalid, Args, ServerHost};
use crate::base::rpc::{RpcCode, RpcError};
use crate::purchases::PurchaseError;

pub(super) const NAMES: &[&str] = &[
    "purchaseValidateApple",
    "purchaseValidateGoogle",
    "purchaseValidateHuawei",
    "purchaseValidateFacebookInstant",
    "purchaseGetByTransactionId",
    "purchasesList",
    "subscriptionValidateApple",
    "subscriptionValidateGoogle",
    "subscriptionGetByProductId",
    "subscriptionsList",
];

/// Most purchases or subscriptions one listing answers (Nakama's bound).
const MAX_LIMIT: i64 = 100;

impl From<PurchaseError> for RpcError {
    fn from(error: PurchaseError) -> Self {
        let code = match &error {
            PurchaseError::NotConfigured(_) | PurchaseError::Precondition(_) => {
                RpcCode::FailedPrecondition
            }
            PurchaseError::Invalid(_) | PurchaseError::Refused(_) => RpcCode::InvalidArgument,
            PurchaseError::NotFound(_) => RpcCode::NotFound,
            PurchaseError::Unavailable(_) => RpcCode::Unavailable,
            PurchaseError::Store(crate::store::StoreError::Unavailable(_)) => RpcCode::Unavailable,
            PurchaseError::Store(_) => return RpcError::internal(),
        };
        RpcError::new(code, error.to_string())
    }
}

fn refused(error: PurchaseError) -> JsError {
    super::context::refused(error)
}

fn seconds(time: &Option<muster_proto::wire::Timestamp>) -> Option<i64> {
    time.as_ref().map(|t| t.seconds)
}

fn store_name(store: i32) -> &'static str {
    StoreProvider::try_from(store).map_or("APPLE_APP_STORE", |s| s.as_str_name())
}

fn environment_name(environment: i32) -> &'static str {
    StoreEnvironment::try_from(environment).map_or("UNKNOWN", |e| e.as_str_name())
}

/// A purchase as Nakama's runtime gives it; the times a purchase not stored lacks are left out.
pub(crate) fn purchase(p: &ValidatedPurchase) -> Value {
    let mut out = Map::new();
    out.insert("userId".into(), json!(p.user_id));
    out.insert("productId".into(), json!(p.product_id));
    out.insert("transactionId".into(), json!(p.transaction_id));
    out.insert("store".into(), json!(store_name(p.store)));
    out.insert("providerResponse".into(), json!(p.provider_response));
    out.insert(
        "purchaseTime".into(),
        json!(seconds(&p.purchase_time).unwrap_or(0)),
    );
    for (key, time) in [
        ("createTime", &p.create_time),
        ("updateTime", &p.update_time),
        ("refundTime", &p.refund_time),
    ] {
        if let Some(at) = seconds(time) {
            out.insert(key.into(), json!(at));
        }
    }
    out.insert("environment".into(), json!(environment_name(p.environment)));
    out.insert("seenBefore".into(), json!(p.seen_before));
    Value::Object(out)
}

/// A subscription as Nakama's runtime gives it.
pub(crate) fn subscription(s: &ValidatedSubscription) -> Value {
    let mut out = Map::new();
    out.insert("userId".into(), json!(s.user_id));
    out.insert("productId".into(), json!(s.product_id));
    out.insert(
        "originalTransactionId".into(),
        json!(s.original_transaction_id),
    );
    out.insert("store".into(), json!(store_name(s.store)));
    out.insert(
        "purchaseTime".into(),
        json!(seconds(&s.purchase_time).unwrap_or(0)),
    );
    out.insert(
        "expiryTime".into(),
        json!(seconds(&s.expiry_time).unwrap_or(0)),
    );
    for (key, time) in [
        ("createTime", &s.create_time),
        ("updateTime", &s.update_time),
        ("refundTime", &s.refund_time),
    ] {
        if let Some(at) = seconds(time) {
            out.insert(key.into(), json!(at));
        }
    }
    out.insert("environment".into(), json!(environment_name(s.environment)));
    out.insert("active".into(), json!(s.active));
    out.insert("providerResponse".into(), json!(s.provider_response));
    out.insert(
        "providerNotification".into(),
        json!(s.provider_notification),
    );
    Value::Object(out)
}

fn purchases(answer: &ValidatePurchaseResponse) -> Value {
    let list: Vec<Value> = answer.validated_purchases.iter().map(purchase).collect();
    json!({ "validatedPurchases": list })
}

/// `persist` at `i`: true unless false is given.
fn persist(args: &Args, i: usize) -> bool {
    args.bool(i).unwrap_or(true)
}

/// Refuses the credentials overrides (from `from` on): Muster validates with the configured
/// store credentials only.
fn no_overrides(name: &str, args: &Args, from: usize, to: usize) -> Result<(), JsError> {
    if (from..=to).any(|i| !args.get(i).is_null()) {
        return Err(invalid(format!(
            "nk.{name}: overriding the store's credentials is not supported by Muster; set them in [iap]"
        )));
    }
    Ok(())
}

/// `userId?, limit?, cursor?` of the listings.
fn listing(args: &Args) -> Result<(Option<uuid::Uuid>, usize, String), JsError> {
    let user = match args.get(0) {
        Value::Null => None,
        _ => Some(args.user(0, "userId")?),
    };
    let limit = match args.int(1, "limit")? {
        None => MAX_LIMIT,
        Some(limit) if (1..=MAX_LIMIT).contains(&limit) => limit,
        Some(_) => return Err(invalid(format!("limit must be 1-{MAX_LIMIT}"))),
    };
    Ok((user, limit as usize, args.opt_string(2).unwrap_or_default()))
}

/// A page's cursors: null when there is none, as Nakama's runtime answers.
fn cursor(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        json!(text)
    }
}

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let purchases_service = &host.services.purchases;
    match name {
        // (userId, receipt, persist?, the credentials' overrides?) for both stores and kinds.
        "purchaseValidateApple"
        | "subscriptionValidateApple"
        | "purchaseValidateGoogle"
        | "subscriptionValidateGoogle" => {
            let user = args.user(0, "userId")?;
            let receipt = args.string(1, "receipt")?;
            let apple = name.ends_with("Apple");
            no_overrides(name, args, 3, if apple { 3 } else { 4 })?;
            let keep = persist(args, 2);
            if name.starts_with("purchase") {
                let answer = if apple {
                    host.wait(purchases_service.validate_apple(user, &receipt, keep))?
                } else {
                    host.wait(purchases_service.validate_google(user, &receipt, keep))?
                };
                return Ok(purchases(&answer.map_err(refused)?));
            }
            let answer = if apple {
                host.wait(purchases_service.validate_subscription_apple(user, &receipt, keep))?
            } else {
                host.wait(purchases_service.validate_subscription_google(user, &receipt, keep))?
            };
            let answer = answer.map_err(refused)?;
            Ok(json!({ "validatedSubscription":
                answer.validated_subscription.as_ref().map(subscription) }))
        }
        "purchaseValidateHuawei" => {
            let user = args.user(0, "userId")?;
            let receipt = args.string(1, "receipt")?;
            let signature = args.string(2, "signature")?;
            let answer = host
                .wait(purchases_service.validate_huawei(
                    user,
                    &receipt,
                    &signature,
                    persist(args, 3),
                ))?
                .map_err(refused)?;
            Ok(purchases(&answer))
        }
        "purchaseValidateFacebookInstant" => {
            let user = args.user(0, "userId")?;
            let signed = args.string(1, "signedRequest")?;
            let answer = host
                .wait(purchases_service.validate_facebook_instant(user, &signed, persist(args, 2)))?
                .map_err(refused)?;
            Ok(purchases(&answer))
        }
        "purchaseGetByTransactionId" => {
            let id = args.string(0, "transactionId")?;
            let found = host
                .wait(purchases_service.purchase_by_transaction_id(&id))?
                .map_err(refused)?;
            Ok(found.as_ref().map_or(Value::Null, purchase))
        }
        "purchasesList" => {
            let (user, limit, after) = listing(args)?;
            let page = host
                .wait(purchases_service.list_purchases(user, limit, &after))?
                .map_err(refused)?;
            let list: Vec<Value> = page.validated_purchases.iter().map(purchase).collect();
            Ok(
                json!({ "validatedPurchases": list, "cursor": cursor(&page.cursor),
                       "prevCursor": cursor(&page.prev_cursor) }),
            )
        }
        "subscriptionGetByProductId" => {
            let user = args.user(0, "userId")?;
            let product = args.string(1, "productId")?;
            let found = host
                .wait(purchases_service.subscription_by_product_id(user, &product))?
                .map_err(refused)?;
            Ok(subscription(&found))
        }
        "subscriptionsList" => {
            let (user, limit, after) = listing(args)?;
            let page = host
                .wait(purchases_service.list_subscriptions(user, limit, &after))?
                .map_err(refused)?;
            let list: Vec<Value> = page
                .validated_subscriptions
                .iter()
                .map(subscription)
                .collect();
            Ok(
                json!({ "validatedSubscriptions": list, "cursor": cursor(&page.cursor),
                       "prevCursor": cursor(&page.prev_cursor) }),
            )
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}
