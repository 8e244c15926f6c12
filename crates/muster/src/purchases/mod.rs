//! In-app purchases and subscriptions, as Nakama has them: a client sends its store's proof of
//! purchase (an App Store receipt or signed transaction, a Google Play purchase token, Huawei's
//! signed purchase data, a Facebook Instant payment's signed request); the proof is checked with
//! its store (`apple`, `google`, `huawei`, `facebook`) and the purchase stored once.
//!
//! **Once.** A purchase is keyed by its transaction id across the whole database: the first
//! validation stores it for its caller; any later one — a replay, on any node, by anyone —
//! finds it (`seen_before: true`) and changes nothing but its update time. The database decides
//! (see [`store`]), so two nodes validating one receipt at the same moment store it once. A
//! transaction id already stored for another user stays theirs; the caller is answered
//! `seen_before: true`, as Nakama does. Muster grants nothing itself: a studio grants the item in
//! an after hook or a module when `seen_before` is false.
//!
//! **Subscriptions** are keyed by their original transaction id and updated by each
//! validation and store notification (expiry, refund); active = expiry in the future and not
//! refunded, at the time of asking.
//!
//! **Notifications** from the stores (App Store Server Notifications v2, Google Real-time
//! Developer Notifications) update the records (`notify`) and are then told to the
//! [`NotificationObserver`] (a module's hooks), if one is set.
//!
//! Each store's calls go through their own `remote::Remote`: a timeout, a bound on calls in
//! flight, a bound on answers; a store that is down fails its own validations quickly with
//! 503 and nothing else.

pub mod config;
pub(crate) mod postgres;
pub(crate) mod sqlite;
pub mod store;

mod apple;
mod cursor;
mod facebook;
mod google;
mod huawei;
mod notify;
mod remote;

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use muster_proto::grpc::{
    StoreEnvironment, StoreProvider, SubscriptionList, ValidatePurchaseResponse,
    ValidateSubscriptionResponse, ValidatedPurchase, ValidatedSubscription,
};
use muster_proto::wire::Timestamp;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

use crate::base::clock::Clock;
use crate::purchases::config::IapConfig;
use crate::purchases::remote::{Remote, StoreCalls};
use crate::purchases::store::{
    Page, PurchaseRecord, PurchaseStore, StoredPurchase, SubscriptionRecord,
};
use crate::store::StoreError;

pub use apple::APPLE_ROOT_CA_G3_PEM;
pub use notify::Handled;

/// Most purchases or subscriptions one listing page holds (Nakama's bound), and how many when
/// the caller gives no limit.
pub const MAX_LIST_LIMIT: usize = 100;
/// Longest transaction or product id kept (Nakama's columns are 512 characters).
pub const MAX_ID_BYTES: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum PurchaseError {
    /// The store's settings are empty: "Apple IAP is not configured." (Nakama's message).
    #[error("{0} IAP is not configured.")]
    NotConfigured(&'static str),
    /// The request cannot be read: empty, too large, malformed base64, JSON or JWS.
    #[error("{0}")]
    Invalid(String),
    /// The proof reads but does not hold: a forged chain, a bad signature or HMAC, a purchase
    /// its store does not know.
    #[error("{0}")]
    Refused(String),
    /// The proof holds but is not a valid purchase here: cancelled or pending, a subscription
    /// sent as a purchase (Nakama's FAILED_PRECONDITION answers).
    #[error("{0}")]
    Precondition(String),
    #[error("{0}")]
    NotFound(String),
    /// The store cannot be asked now (down, slow, at its bound of calls); retrying later may
    /// pass.
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for PurchaseError {
    fn from(error: StoreError) -> Self {
        PurchaseError::Store(error)
    }
}

/// What a store notification tells (Nakama's `runtime.NotificationType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotificationKind {
    Subscribed,
    Renewed,
    Expired,
    Cancelled,
    Refunded,
}

impl NotificationKind {
    /// Nakama's name for it (`SUBSCRIBED`, …).
    pub fn name(self) -> &'static str {
        match self {
            NotificationKind::Subscribed => "SUBSCRIBED",
            NotificationKind::Renewed => "RENEWED",
            NotificationKind::Expired => "EXPIRED",
            NotificationKind::Cancelled => "CANCELLED",
            NotificationKind::Refunded => "REFUNDED",
        }
    }

    /// Nakama's number for it (1 subscribed … 5 refunded).
    pub fn code(self) -> i32 {
        match self {
            NotificationKind::Subscribed => 1,
            NotificationKind::Renewed => 2,
            NotificationKind::Expired => 3,
            NotificationKind::Cancelled => 4,
            NotificationKind::Refunded => 5,
        }
    }
}

/// Who is told of store notifications once the record they change is stored: a module's
/// `registerPurchaseNotification*` / `registerSubscriptionNotification*` hooks. Called on the
/// notification's request task; an observer that has slow work to do hands it to a task of its
/// own.
pub trait NotificationObserver: Send + Sync {
    /// A purchase changed (a refund). `provider_payload` is the store's own data as JSON: the
    /// App Store's notification `data` with its signed parts decoded (`transactionInfo`,
    /// `renewalInfo`), or the Publisher API's purchase.
    fn purchase_notification(
        &self,
        store: StoreProvider,
        kind: NotificationKind,
        purchase: &ValidatedPurchase,
        provider_payload: &str,
    );

    /// A subscription changed (subscribed, renewed, expired, cancelled, refunded);
    /// `provider_payload` as for [`NotificationObserver::purchase_notification`] (for Google,
    /// the Publisher API's subscription).
    fn subscription_notification(
        &self,
        store: StoreProvider,
        kind: NotificationKind,
        subscription: &ValidatedSubscription,
        provider_payload: &str,
    );
}

/// A page of purchases (Nakama's `PurchaseList`): newest first; `cursor` reads the next (older)
/// page, `prev_cursor` the previous one; empty fields are left out, as pbjson does.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PurchaseList {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub validated_purchases: Vec<ValidatedPurchase>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cursor: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub prev_cursor: String,
}

/// base64url, padded or not (JWS and signed requests leave the padding out; some clients add
/// it).
pub(crate) const B64_URL: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);
/// Standard base64, padded or not.
pub(crate) const B64_STD: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A field of a store's JSON read as its type, `null` or absent as the type's default.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Lenient<T>(pub T);

impl<T> std::ops::Deref for Lenient<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<'de, T: Deserialize<'de> + Default> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Lenient(
            Option::<T>::deserialize(deserializer)?.unwrap_or_default(),
        ))
    }
}

impl<T: Serialize> Serialize for Lenient<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// Milliseconds (or seconds, as the field says) given as a JSON number or a decimal string;
/// 0 when absent or unreadable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Millis(pub i64);

impl<'de> Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(Millis(match value {
            serde_json::Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .unwrap_or(0),
            serde_json::Value::String(s) => s.trim().parse().unwrap_or(0),
            _ => 0,
        }))
    }
}

/// A time for the wire: Unix milliseconds as a protobuf Timestamp (RFC 3339 in JSON).
pub(crate) fn timestamp(ms: i64) -> Option<Timestamp> {
    Some(Timestamp::from_unix_ms(ms))
}

fn environment(sandbox: bool) -> i32 {
    if sandbox {
        StoreEnvironment::Sandbox as i32
    } else {
        StoreEnvironment::Production as i32
    }
}

fn user_text(user: Option<Uuid>) -> String {
    user.map(|u| u.to_string()).unwrap_or_default()
}

/// A purchase for the wire. `shown_user` is the user the answer names (the caller, for a
/// validation); `stored`: the record came from the store (its create and update times are
/// real).
fn purchase_wire(
    record: &PurchaseRecord,
    shown_user: Option<Uuid>,
    seen_before: bool,
    provider_response: String,
    stored: bool,
) -> ValidatedPurchase {
    ValidatedPurchase {
        user_id: user_text(shown_user),
        product_id: record.product_id.clone(),
        transaction_id: record.transaction_id.clone(),
        store: record.store,
        purchase_time: timestamp(record.purchase_time_ms),
        create_time: if stored {
            timestamp(record.create_time_ms)
        } else {
            None
        },
        update_time: if stored {
            timestamp(record.update_time_ms)
        } else {
            None
        },
        refund_time: timestamp(record.refund_time_ms),
        provider_response,
        environment: record.environment,
        seen_before,
    }
}

/// A purchase as a validation answers it: a refund time never set is left out, as Nakama's
/// validations do (its listings show the epoch).
fn as_validated(mut purchase: ValidatedPurchase) -> ValidatedPurchase {
    if purchase.refund_time.is_some_and(|t| t.unix_ms() == 0) {
        purchase.refund_time = None;
    }
    purchase
}

/// A subscription for the wire, its `active` as of `now_ms`.
fn subscription_wire(
    record: &SubscriptionRecord,
    now_ms: i64,
    stored: bool,
) -> ValidatedSubscription {
    ValidatedSubscription {
        user_id: user_text(record.user_id),
        product_id: record.product_id.clone(),
        original_transaction_id: record.original_transaction_id.clone(),
        store: record.store,
        purchase_time: timestamp(record.purchase_time_ms),
        create_time: if stored {
            timestamp(record.create_time_ms)
        } else {
            None
        },
        update_time: if stored {
            timestamp(record.update_time_ms)
        } else {
            None
        },
        environment: record.environment,
        expiry_time: timestamp(record.expire_time_ms),
        refund_time: timestamp(record.refund_time_ms),
        provider_response: record.raw_response.clone(),
        provider_notification: record.raw_notification.clone(),
        active: record.expire_time_ms > now_ms && record.refund_time_ms == 0,
    }
}

/// Checks a transaction or product id a store gave.
fn check_id(what: &str, id: &str) -> Result<(), PurchaseError> {
    if id.is_empty() {
        return Err(PurchaseError::Invalid(format!(
            "Invalid Receipt. {what} is missing."
        )));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(PurchaseError::Invalid(format!(
            "Invalid Receipt. {what} is longer than {MAX_ID_BYTES} bytes."
        )));
    }
    Ok(())
}

/// The `limit` of a listing: 1–100, 100 when not given (0).
fn list_limit(limit: usize) -> Result<usize, PurchaseError> {
    match limit {
        0 => Ok(MAX_LIST_LIMIT),
        1..=MAX_LIST_LIMIT => Ok(limit),
        _ => Err(PurchaseError::Invalid(
            "Invalid limit - limit must be between 1 and 100.".into(),
        )),
    }
}

/// What a listing's cursors and rows come to: the page's rows newest first, and the positions
/// of its next and previous pages.
struct Paged<T> {
    rows: Vec<T>,
    next: Option<(i64, String)>,
    prev: Option<(i64, String)>,
}

/// Reads one page through `fetch` (a store listing) from `cursor`: one row more than the limit
/// tells whether there is more that way.
async fn paged<T, F, Fut>(
    listing: char,
    user: Option<Uuid>,
    limit: usize,
    cursor: &str,
    key: fn(&T) -> (i64, String),
    fetch: F,
) -> Result<Paged<T>, PurchaseError>
where
    F: FnOnce(Page) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<T>, StoreError>>,
{
    let limit = list_limit(limit)?;
    let from = if cursor.is_empty() {
        None
    } else {
        Some(
            cursor::decode(cursor, listing, user)
                .ok_or_else(|| PurchaseError::Invalid("Invalid cursor.".into()))?,
        )
    };
    let backward = from.as_ref().is_some_and(|p| p.b);
    let page = Page {
        user_id: user,
        after: from.as_ref().map(|p| (p.t, p.i.clone())),
        backward,
        limit: limit + 1,
    };
    let mut rows = fetch(page).await?;
    let more = rows.len() > limit;
    rows.truncate(limit);
    if backward {
        rows.reverse();
    }
    let (first, last) = (rows.first().map(key), rows.last().map(key));
    let (next, prev) = if backward {
        // Read towards newer rows: what follows is the row the cursor came from.
        (last, if more { first } else { None })
    } else {
        (
            if more { last } else { None },
            first.filter(|_| from.is_some()),
        )
    };
    Ok(Paged { rows, next, prev })
}

fn cursor_of(listing: char, user: Option<Uuid>, at: Option<(i64, String)>, back: bool) -> String {
    at.map(|(t, i)| {
        cursor::encode(&cursor::Position {
            l: listing,
            u: user_text(user),
            t,
            i,
            b: back,
        })
    })
    .unwrap_or_default()
}

/// The purchases and subscriptions service; see the module documentation.
pub struct Purchases {
    config: IapConfig,
    store: Arc<dyn PurchaseStore>,
    clock: Clock,
    /// The DER of the root certificate App Store signatures chain up to.
    apple_root: Vec<u8>,
    apple: Remote,
    /// Set when `[iap.google]` has a service account.
    google: Option<google::Publisher>,
    /// Set when `[iap.huawei] public_key` is.
    huawei_key: Option<rsa::RsaPublicKey>,
    /// Set when `[iap.huawei]` has an OAuth client too.
    huawei_orders: Option<huawei::Orders>,
    observer: OnceLock<Arc<dyn NotificationObserver>>,
}

impl Purchases {
    /// The service over `store`, with the stores `config` sets up; a setting that does not
    /// read (a key, a certificate, a URL) is an error naming it. `registry` takes the
    /// service's metrics.
    pub fn new(
        config: &IapConfig,
        store: Arc<dyn PurchaseStore>,
        clock: Clock,
        registry: &prometheus::Registry,
    ) -> Result<Purchases, String> {
        config.validate()?;
        let timeout = Duration::from_millis(config.timeout_ms);
        let http = remote::client(timeout).map_err(|e| format!("iap: HTTP client: {e}"))?;
        let calls = StoreCalls::register(registry);
        let remote = |name: &'static str| {
            Remote::new(
                name,
                http.clone(),
                config.max_calls_per_store,
                timeout,
                calls.clone(),
            )
        };
        let apple_root = apple::load_root(&config.apple.root_certificate)
            .map_err(|e| format!("iap.apple.{e}"))?;
        let g = &config.google;
        let google = if g.client_email.is_empty() || g.private_key.is_empty() {
            None
        } else {
            let key =
                google::load_private_key(&g.private_key).map_err(|e| format!("iap.google.{e}"))?;
            Some(google::Publisher::new(
                remote("Google"),
                &g.client_email,
                key,
                &g.token_url,
                &g.publisher_url,
            ))
        };
        let h = &config.huawei;
        let huawei_key = if h.public_key.trim().is_empty() {
            None
        } else {
            Some(huawei::load_public_key(&h.public_key).map_err(|e| format!("iap.huawei.{e}"))?)
        };
        let huawei_orders = (!h.client_id.is_empty() && !h.client_secret.is_empty())
            .then(|| huawei::Orders::new(remote("Huawei"), h));
        Ok(Purchases {
            config: config.clone(),
            store,
            clock,
            apple_root,
            apple: remote("Apple"),
            google,
            huawei_key,
            huawei_orders,
            observer: OnceLock::new(),
        })
    }

    /// Sets who is told of store notifications (once; a second observer is refused and handed
    /// back).
    pub fn observe_notifications(
        &self,
        observer: Arc<dyn NotificationObserver>,
    ) -> Result<(), Arc<dyn NotificationObserver>> {
        self.observer.set(observer)
    }

    /// The secret id of the App Store notifications URL, when it is served.
    pub fn apple_notifications_endpoint(&self) -> Option<&str> {
        Some(self.config.apple.notifications_endpoint_id.as_str()).filter(|id| !id.is_empty())
    }

    /// The secret id of the Google notifications URL, when it is served.
    pub fn google_notifications_endpoint(&self) -> Option<&str> {
        Some(self.config.google.notifications_endpoint_id.as_str()).filter(|id| !id.is_empty())
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Refuses an empty or too large proof; `what` names it as Nakama does ("Receipt").
    fn check_proof(&self, what: &str, proof: &str) -> Result<(), PurchaseError> {
        if proof.is_empty() {
            return Err(PurchaseError::Invalid(format!("{what} cannot be empty.")));
        }
        if proof.len() > self.config.max_receipt_bytes {
            return Err(PurchaseError::Invalid(format!(
                "{what} is too large (at most {} bytes).",
                self.config.max_receipt_bytes
            )));
        }
        Ok(())
    }

    /// Stores `purchases` for `user` (or, `persist` false, only answers them) and answers them
    /// as Nakama does: the caller as their user, `seen_before` from the store.
    async fn answer_purchases(
        &self,
        user: Uuid,
        purchases: Vec<PurchaseRecord>,
        provider_response: impl Fn(&PurchaseRecord) -> String,
        persist: bool,
    ) -> Result<ValidatePurchaseResponse, PurchaseError> {
        if !persist {
            let validated_purchases = purchases
                .iter()
                .map(|p| purchase_wire(p, Some(user), false, provider_response(p), false))
                .map(as_validated)
                .collect();
            return Ok(ValidatePurchaseResponse {
                validated_purchases,
            });
        }
        let stored = self.store.upsert_purchases(purchases).await?;
        let validated_purchases = stored
            .iter()
            .map(
                |StoredPurchase {
                     record,
                     seen_before,
                 }| {
                    purchase_wire(
                        record,
                        Some(user),
                        *seen_before,
                        provider_response(record),
                        true,
                    )
                },
            )
            .map(as_validated)
            .collect();
        Ok(ValidatePurchaseResponse {
            validated_purchases,
        })
    }

    /// A new purchase record for `user`, now: `ids` its transaction and product ids.
    fn purchase_record(
        &self,
        user: Option<Uuid>,
        store: StoreProvider,
        (transaction_id, product_id): (String, String),
        purchase_time_ms: i64,
        sandbox: bool,
        raw_response: String,
    ) -> PurchaseRecord {
        let now = self.now_ms();
        PurchaseRecord {
            user_id: user,
            store: store as i32,
            transaction_id,
            product_id,
            purchase_time_ms,
            refund_time_ms: 0,
            environment: environment(sandbox),
            raw_response,
            create_time_ms: now,
            update_time_ms: now,
        }
    }

    // ---- Apple -------------------------------------------------------------------------

    /// Verifies an App Store JWS (a signed transaction, a notification) against the root; its
    /// payload.
    fn apple_jws(&self, jws: &str) -> Result<Vec<u8>, PurchaseError> {
        apple::verify_jws(jws, &self.apple_root, self.clock.now_secs()).map_err(|e| match e {
            apple::JwsError::Malformed(why) => {
                PurchaseError::Invalid(format!("Invalid Receipt. Malformed signed data: {why}."))
            }
            apple::JwsError::Refused(why) => {
                PurchaseError::Refused(format!("Invalid Receipt. Signature refused: {why}."))
            }
        })
    }

    /// A signed transaction's payload, once its signature holds and it is this app's.
    fn apple_transaction(&self, jws: &str) -> Result<apple::TransactionInfo, PurchaseError> {
        let payload = self.apple_jws(jws)?;
        let info: apple::TransactionInfo = serde_json::from_slice(&payload).map_err(|e| {
            PurchaseError::Invalid(format!("Invalid Receipt. Transaction is not JSON: {e}."))
        })?;
        self.check_bundle(&info.bundle_id)?;
        Ok(info)
    }

    fn check_bundle(&self, bundle_id: &str) -> Result<(), PurchaseError> {
        let expected = &self.config.apple.bundle_id;
        if !expected.is_empty() && bundle_id != expected {
            return Err(PurchaseError::Refused(format!(
                "Invalid Receipt. It is for the bundle {bundle_id:?}, not this app's."
            )));
        }
        Ok(())
    }

    /// An app receipt through verifyReceipt: production, then the sandbox on 21007. The
    /// answer (status 0) and its text.
    async fn verify_receipt(
        &self,
        receipt: &str,
    ) -> Result<(apple::VerifyReceiptAnswer, String), PurchaseError> {
        let password = &self.config.apple.shared_password;
        if password.is_empty() {
            return Err(PurchaseError::NotConfigured("Apple"));
        }
        let body = serde_json::json!({
            "receipt-data": receipt,
            "password": password,
            "exclude-old-transactions": true,
        });
        let mut url = &self.config.apple.verify_receipt_url;
        let mut answered = None;
        for _ in 0..2 {
            let request = self.apple.http().post(url).json(&body);
            let answer = self.apple.send(request).await?;
            if answer.status != 200 {
                tracing::warn!(status = answer.status, "verifyReceipt answered an error");
                return Err(self.apple.unavailable(&format!("HTTP {}", answer.status)));
            }
            let parsed: apple::VerifyReceiptAnswer = serde_json::from_slice(&answer.body)
                .map_err(|_| self.apple.unavailable("unreadable answer"))?;
            if *parsed.status == apple::SANDBOX_RECEIPT_STATUS && answered.is_none() {
                url = &self.config.apple.sandbox_verify_receipt_url;
                answered = Some(());
                continue;
            }
            if *parsed.status != 0 {
                if *parsed.is_retryable {
                    return Err(PurchaseError::Unavailable(
                        "Apple IAP verification is currently unavailable. Try again later.".into(),
                    ));
                }
                return Err(PurchaseError::Precondition(format!(
                    "Invalid Receipt. Status: {}",
                    *parsed.status
                )));
            }
            if let Some(receipt) = &parsed.receipt {
                self.check_bundle(&receipt.bundle_id)?;
            }
            return Ok((parsed, answer.text()));
        }
        Err(self.apple.unavailable("the sandbox answered 21007"))
    }

    /// `POST /v2/iap/purchase/apple`: an App Store receipt or signed transaction, for `user`.
    pub async fn validate_apple(
        &self,
        user: Uuid,
        receipt: &str,
        persist: bool,
    ) -> Result<ValidatePurchaseResponse, PurchaseError> {
        self.check_proof("Receipt", receipt)?;
        if receipt.split('.').count() == 3 {
            let info = self.apple_transaction(receipt)?;
            if *info.expires_date != 0 {
                return Err(PurchaseError::Precondition(
                    "Subscription Receipt. Use the appropriate function instead.".into(),
                ));
            }
            check_id("transactionId", &info.transaction_id)?;
            check_id("productId", &info.product_id)?;
            let mut record = self.purchase_record(
                Some(user),
                StoreProvider::AppleAppStore,
                (info.transaction_id.0.clone(), info.product_id.0.clone()),
                *info.purchase_date,
                *info.environment == "Sandbox",
                serde_json::json!({ "jws": receipt }).to_string(),
            );
            record.refund_time_ms = *info.revocation_date;
            // No provider response for a signed transaction: it is the client's own receipt.
            return self
                .answer_purchases(user, vec![record], |_| String::new(), persist)
                .await;
        }
        let (answer, raw) = self.verify_receipt(receipt).await?;
        let sandbox = *answer.environment == "Sandbox";
        let in_app = answer
            .receipt
            .as_ref()
            .and_then(|r| r.in_app.as_deref())
            .unwrap_or_default();
        let latest = answer.latest_receipt_info.as_deref().unwrap_or_default();
        let mut seen = HashSet::new();
        let mut purchases = Vec::new();
        for item in in_app.iter().chain(latest) {
            if !item.expires_date_ms.is_empty() || !seen.insert(item.transaction_id.0.clone()) {
                continue;
            }
            check_id("transaction_id", &item.transaction_id)?;
            check_id("product_id", &item.product_id)?;
            let mut record = self.purchase_record(
                Some(user),
                StoreProvider::AppleAppStore,
                (item.transaction_id.0.clone(), item.product_id.0.clone()),
                apple::millis(&item.purchase_date_ms),
                sandbox,
                raw.clone(),
            );
            record.refund_time_ms = apple::millis(&item.cancellation_date_ms);
            purchases.push(record);
        }
        if purchases.is_empty() && in_app.len() + latest.len() > 0 {
            return Err(PurchaseError::Precondition(
                "Subscription Receipt. Use the appropriate function instead.".into(),
            ));
        }
        if purchases.is_empty() {
            return Ok(ValidatePurchaseResponse::default());
        }
        self.answer_purchases(user, purchases, |_| raw.clone(), persist)
            .await
    }

    /// `POST /v2/iap/subscription/apple`: an App Store receipt or signed transaction of a
    /// subscription, for `user`. The answer is the subscription expiring last.
    pub async fn validate_subscription_apple(
        &self,
        user: Uuid,
        receipt: &str,
        persist: bool,
    ) -> Result<ValidateSubscriptionResponse, PurchaseError> {
        self.check_proof("Receipt", receipt)?;
        let now = self.now_ms();
        let (subscriptions, answer_raw) = if receipt.split('.').count() == 3 {
            let info = self.apple_transaction(receipt)?;
            if *info.expires_date == 0 {
                return Err(PurchaseError::Precondition(
                    "Purchase Receipt. Use the appropriate function instead.".into(),
                ));
            }
            check_id("originalTransactionId", &info.original_transaction_id)?;
            check_id("productId", &info.product_id)?;
            let record = SubscriptionRecord {
                user_id: Some(user),
                store: StoreProvider::AppleAppStore as i32,
                original_transaction_id: info.original_transaction_id.0.clone(),
                product_id: info.product_id.0.clone(),
                purchase_time_ms: *info.original_purchase_date,
                expire_time_ms: *info.expires_date,
                refund_time_ms: *info.revocation_date,
                environment: environment(*info.environment == "Sandbox"),
                raw_response: serde_json::json!({ "jws": receipt }).to_string(),
                raw_notification: String::new(),
                create_time_ms: now,
                update_time_ms: now,
            };
            (vec![record], false)
        } else {
            let (answer, raw) = self.verify_receipt(receipt).await?;
            let sandbox = *answer.environment == "Sandbox";
            let mut records: Vec<SubscriptionRecord> = Vec::new();
            for item in answer.latest_receipt_info.as_deref().unwrap_or_default() {
                if item.expires_date_ms.is_empty() {
                    continue;
                }
                check_id("original_transaction_id", &item.original_transaction_id)?;
                check_id("product_id", &item.product_id)?;
                let expire = apple::millis(&item.expires_date_ms);
                // One record per original transaction: its latest period.
                if let Some(known) = records
                    .iter_mut()
                    .find(|r| r.original_transaction_id == *item.original_transaction_id)
                {
                    if expire > known.expire_time_ms {
                        known.expire_time_ms = expire;
                        known.product_id = item.product_id.0.clone();
                    }
                    continue;
                }
                records.push(SubscriptionRecord {
                    user_id: Some(user),
                    store: StoreProvider::AppleAppStore as i32,
                    original_transaction_id: item.original_transaction_id.0.clone(),
                    product_id: item.product_id.0.clone(),
                    purchase_time_ms: apple::millis(&item.original_purchase_date_ms),
                    expire_time_ms: expire,
                    refund_time_ms: apple::millis(&item.cancellation_date_ms),
                    environment: environment(sandbox),
                    raw_response: raw.clone(),
                    raw_notification: String::new(),
                    create_time_ms: now,
                    update_time_ms: now,
                });
            }
            if records.is_empty() {
                return Err(PurchaseError::Precondition(
                    "Purchase Receipt. Use the appropriate function instead.".into(),
                ));
            }
            records.sort_by_key(|r| std::cmp::Reverse(r.expire_time_ms));
            (records, true)
        };
        self.answer_subscription(subscriptions, answer_raw, persist)
            .await
    }

    /// Stores `subscriptions` (or, `persist` false, only answers them) and answers the first.
    /// `with_response`: the answer carries the store's response (not for a client's own JWS).
    async fn answer_subscription(
        &self,
        subscriptions: Vec<SubscriptionRecord>,
        with_response: bool,
        persist: bool,
    ) -> Result<ValidateSubscriptionResponse, PurchaseError> {
        let now = self.now_ms();
        let first = if persist {
            self.store
                .upsert_subscriptions(subscriptions)
                .await?
                .into_iter()
                .next()
                .map(|s| subscription_wire(&s, now, true))
        } else {
            subscriptions
                .first()
                .map(|s| subscription_wire(s, now, false))
        };
        Ok(ValidateSubscriptionResponse {
            validated_subscription: first.map(|mut s| {
                if !with_response {
                    s.provider_response.clear();
                }
                s
            }),
        })
    }

    // ---- Google ------------------------------------------------------------------------

    fn google(&self) -> Result<&google::Publisher, PurchaseError> {
        self.google
            .as_ref()
            .ok_or(PurchaseError::NotConfigured("Google"))
    }

    /// A receipt read, its package checked.
    fn google_receipt(&self, receipt: &str) -> Result<google::Receipt, PurchaseError> {
        let receipt = google::decode_receipt(receipt)
            .map_err(|why| PurchaseError::Invalid(format!("Invalid Receipt. The {why}.")))?;
        let expected = &self.config.google.package_name;
        if !expected.is_empty() && *receipt.package_name != *expected {
            return Err(PurchaseError::Refused(format!(
                "Invalid Receipt. It is for the package {:?}, not this app's.",
                receipt.package_name.0
            )));
        }
        Ok(receipt)
    }

    /// What a Publisher API answer other than 200 means.
    fn google_refusal(&self, status: u16) -> PurchaseError {
        match status {
            400 | 404 | 410 => PurchaseError::Refused(format!(
                "Invalid Receipt. Google Play does not know this purchase (HTTP {status})."
            )),
            401 | 403 => {
                tracing::warn!(status, "the Publisher API refused the service account");
                self.google
                    .as_ref()
                    .map(|g| {
                        g.remote.unavailable(&format!(
                            "the Publisher API refused the service account: HTTP {status}"
                        ))
                    })
                    .unwrap_or(PurchaseError::NotConfigured("Google"))
            }
            _ => PurchaseError::Unavailable(format!(
                "Google IAP verification is currently unavailable (HTTP {status}). Try again later."
            )),
        }
    }

    /// `POST /v2/iap/purchase/google`: a Google Play purchase (its receipt JSON), for `user`.
    pub async fn validate_google(
        &self,
        user: Uuid,
        purchase: &str,
        persist: bool,
    ) -> Result<ValidatePurchaseResponse, PurchaseError> {
        let publisher = self.google()?;
        self.check_proof("Purchase", purchase)?;
        let receipt = self.google_receipt(purchase)?;
        check_id("productId", &receipt.product_id)?;
        let answer = publisher
            .get(
                &receipt.package_name,
                &[
                    "products",
                    &receipt.product_id,
                    "tokens",
                    &receipt.purchase_token,
                ],
                self.clock.now_secs(),
            )
            .await?;
        if answer.status != 200 {
            return Err(self.google_refusal(answer.status));
        }
        let product: google::ProductPurchase = serde_json::from_slice(&answer.body)
            .map_err(|_| publisher.remote.unavailable("unreadable answer"))?;
        for state in [*product.purchase_state, *receipt.purchase_state] {
            if state != 0 {
                // Cancelled or pending purchases are not accepted.
                return Err(PurchaseError::Precondition(format!(
                    "Invalid Receipt. State: {state}"
                )));
            }
        }
        let purchase_time = if product.purchase_time_millis.0 > 0 {
            product.purchase_time_millis.0
        } else {
            receipt.purchase_time.0
        };
        let raw = answer.text();
        let record = self.purchase_record(
            Some(user),
            StoreProvider::GooglePlayStore,
            (
                receipt.purchase_token.0.clone(),
                receipt.product_id.0.clone(),
            ),
            purchase_time,
            product.purchase_type == Some(0),
            raw.clone(),
        );
        self.answer_purchases(user, vec![record], |_| raw.clone(), persist)
            .await
    }

    /// `POST /v2/iap/subscription/google`: a Google Play subscription (its receipt JSON), for
    /// `user`.
    pub async fn validate_subscription_google(
        &self,
        user: Uuid,
        receipt: &str,
        persist: bool,
    ) -> Result<ValidateSubscriptionResponse, PurchaseError> {
        self.google()?;
        self.check_proof("Receipt", receipt)?;
        let receipt = self.google_receipt(receipt)?;
        let (subscription, raw) = self
            .google_subscription(&receipt.package_name, &receipt.purchase_token)
            .await?;
        let Some(item) = latest_item(&subscription) else {
            return Err(PurchaseError::Refused(
                "Invalid Receipt. Google Play answered a subscription without line items.".into(),
            ));
        };
        let now = self.now_ms();
        let product = if receipt.product_id.is_empty() {
            item.product_id.0.clone()
        } else {
            receipt.product_id.0.clone()
        };
        check_id("productId", &product)?;
        let original = if subscription.linked_purchase_token.is_empty() {
            receipt.purchase_token.0.clone()
        } else {
            subscription.linked_purchase_token.0.clone()
        };
        check_id("linkedPurchaseToken", &original)?;
        let record = SubscriptionRecord {
            user_id: Some(user),
            store: StoreProvider::GooglePlayStore as i32,
            original_transaction_id: original,
            product_id: product,
            purchase_time_ms: if receipt.purchase_time.0 > 0 {
                receipt.purchase_time.0
            } else {
                google::rfc3339_ms(&subscription.start_time)
            },
            expire_time_ms: google::rfc3339_ms(&item.expiry_time),
            refund_time_ms: 0,
            environment: environment(subscription.test_purchase.is_some()),
            raw_response: raw,
            raw_notification: String::new(),
            create_time_ms: now,
            update_time_ms: now,
        };
        self.answer_subscription(vec![record], true, persist).await
    }

    /// `purchases.subscriptionsv2` of `token`: the subscription and the answer's text.
    async fn google_subscription(
        &self,
        package: &str,
        token: &str,
    ) -> Result<(google::SubscriptionPurchaseV2, String), PurchaseError> {
        let publisher = self.google()?;
        let answer = publisher
            .get(
                package,
                &["subscriptionsv2", "tokens", token],
                self.clock.now_secs(),
            )
            .await?;
        if answer.status != 200 {
            return Err(self.google_refusal(answer.status));
        }
        let subscription = serde_json::from_slice(&answer.body)
            .map_err(|_| publisher.remote.unavailable("unreadable answer"))?;
        Ok((subscription, answer.text()))
    }

    // ---- Huawei ------------------------------------------------------------------------

    /// `POST /v2/iap/purchase/huawei`: Huawei's purchase data and its signature, for `user`.
    pub async fn validate_huawei(
        &self,
        user: Uuid,
        purchase: &str,
        signature: &str,
        persist: bool,
    ) -> Result<ValidatePurchaseResponse, PurchaseError> {
        let key = self
            .huawei_key
            .as_ref()
            .ok_or(PurchaseError::NotConfigured("Huawei"))?;
        self.check_proof("Purchase", purchase)?;
        self.check_proof("Signature", signature)?;
        let data: huawei::PurchaseData = serde_json::from_str(purchase).map_err(|e| {
            PurchaseError::Invalid(format!("Invalid Receipt. Purchase data is not JSON: {e}."))
        })?;
        if !huawei::signature_holds(key, purchase, signature) {
            return Err(PurchaseError::Refused(
                "inAppPurchaseData invalid signature".into(),
            ));
        }
        check_id("purchaseToken", &data.purchase_token)?;
        check_id("productId", &data.product_id)?;
        if let Some(state) = data.purchase_state.filter(|s| *s != 0) {
            return Err(PurchaseError::Precondition(format!(
                "Invalid Receipt. State: {state}"
            )));
        }
        let raw = match &self.huawei_orders {
            Some(orders) => {
                let answer = orders.verify(&data, self.clock.now_secs()).await?;
                let verified: huawei::VerifyAnswer = serde_json::from_slice(&answer.body)
                    .map_err(|_| orders.remote.unavailable("unreadable answer"))?;
                if *verified.response_code != "0" {
                    return Err(PurchaseError::Precondition(format!(
                        "Invalid Receipt. Code: {}",
                        verified.response_code.0
                    )));
                }
                answer.text()
            }
            None => purchase.to_owned(),
        };
        let record = self.purchase_record(
            Some(user),
            StoreProvider::HuaweiAppGallery,
            (data.purchase_token.0.clone(), data.product_id.0.clone()),
            data.purchase_time.0,
            data.purchase_type == Some(0),
            raw.clone(),
        );
        self.answer_purchases(user, vec![record], |_| raw.clone(), persist)
            .await
    }

    // ---- Facebook Instant --------------------------------------------------------------

    /// `POST /v2/iap/purchase/facebookinstant`: a payment's signed request, for `user`.
    pub async fn validate_facebook_instant(
        &self,
        user: Uuid,
        signed_request: &str,
        persist: bool,
    ) -> Result<ValidatePurchaseResponse, PurchaseError> {
        let secret = &self.config.facebook_instant.app_secret;
        if secret.is_empty() {
            return Err(PurchaseError::NotConfigured("Facebook Instant"));
        }
        self.check_proof("SignedRequest", signed_request)?;
        let (payment, text) = facebook::verify(secret, signed_request).map_err(|e| match e {
            facebook::SignedRequestError::Malformed(why) => {
                PurchaseError::Invalid(format!("Invalid Receipt. {why}."))
            }
            facebook::SignedRequestError::Forged => {
                PurchaseError::Refused("signedRequest verification failed".into())
            }
        })?;
        check_id("purchase_token", &payment.purchase_token)?;
        check_id("product_id", &payment.product_id)?;
        let record = self.purchase_record(
            Some(user),
            StoreProvider::FacebookInstantStore,
            (
                payment.purchase_token.0.clone(),
                payment.product_id.0.clone(),
            ),
            (*payment.purchase_time * 1000.0) as i64,
            false,
            text.clone(),
        );
        self.answer_purchases(user, vec![record], |_| text.clone(), persist)
            .await
    }

    // ---- Reading back ------------------------------------------------------------------

    /// The stored purchase of `transaction_id`, whoever's it is (server code, the console).
    pub async fn purchase_by_transaction_id(
        &self,
        transaction_id: &str,
    ) -> Result<Option<ValidatedPurchase>, PurchaseError> {
        if transaction_id.is_empty() || transaction_id.len() > MAX_ID_BYTES {
            return Ok(None);
        }
        let record = self.store.purchase(transaction_id.to_owned()).await?;
        Ok(record.map(|r| {
            let raw = r.raw_response.clone();
            purchase_wire(&r, r.user_id, false, raw, true)
        }))
    }

    /// A page of purchases, newest first: `user`'s, or every user's (`None`, server code).
    /// `limit` 1–100 (100 when 0); `cursor` a `cursor` or `prev_cursor` of an earlier page of
    /// the same listing.
    pub async fn list_purchases(
        &self,
        user: Option<Uuid>,
        limit: usize,
        cursor: &str,
    ) -> Result<PurchaseList, PurchaseError> {
        let page = paged(
            'p',
            user,
            limit,
            cursor,
            |r: &PurchaseRecord| (r.purchase_time_ms, r.transaction_id.clone()),
            |page| self.store.list_purchases(page),
        )
        .await?;
        Ok(PurchaseList {
            validated_purchases: page
                .rows
                .iter()
                .map(|r| purchase_wire(r, r.user_id, false, r.raw_response.clone(), true))
                .collect(),
            cursor: cursor_of('p', user, page.next, false),
            prev_cursor: cursor_of('p', user, page.prev, true),
        })
    }

    /// `user`'s subscription to `product_id` (the one expiring last): `GET
    /// /v2/iap/subscription/{product_id}`.
    pub async fn subscription_by_product_id(
        &self,
        user: Uuid,
        product_id: &str,
    ) -> Result<ValidatedSubscription, PurchaseError> {
        let not_found = || PurchaseError::NotFound("subscription not found".into());
        if product_id.is_empty() || product_id.len() > MAX_ID_BYTES {
            return Err(not_found());
        }
        let record = self
            .store
            .subscription_by_product(user, product_id.to_owned())
            .await?
            .ok_or_else(not_found)?;
        Ok(subscription_wire(&record, self.now_ms(), true))
    }

    /// The stored subscription of `original_transaction_id`, whoever's it is.
    pub async fn subscription_by_original_transaction_id(
        &self,
        original_transaction_id: &str,
    ) -> Result<Option<ValidatedSubscription>, PurchaseError> {
        if original_transaction_id.is_empty() || original_transaction_id.len() > MAX_ID_BYTES {
            return Ok(None);
        }
        let record = self
            .store
            .subscription(original_transaction_id.to_owned())
            .await?;
        Ok(record.map(|r| subscription_wire(&r, self.now_ms(), true)))
    }

    /// A page of subscriptions, newest purchase first: `user`'s, or every user's (`None`).
    /// `limit` and `cursor` as for [`Purchases::list_purchases`].
    pub async fn list_subscriptions(
        &self,
        user: Option<Uuid>,
        limit: usize,
        cursor: &str,
    ) -> Result<SubscriptionList, PurchaseError> {
        let page = paged(
            's',
            user,
            limit,
            cursor,
            |r: &SubscriptionRecord| (r.purchase_time_ms, r.original_transaction_id.clone()),
            |page| self.store.list_subscriptions(page),
        )
        .await?;
        let now = self.now_ms();
        Ok(SubscriptionList {
            validated_subscriptions: page
                .rows
                .iter()
                .map(|r| subscription_wire(r, now, true))
                .collect(),
            cursor: cursor_of('s', user, page.next, false),
            prev_cursor: cursor_of('s', user, page.prev, true),
        })
    }
}

/// The line item of a Google subscription that expires last.
fn latest_item(subscription: &google::SubscriptionPurchaseV2) -> Option<&google::LineItem> {
    subscription
        .line_items
        .iter()
        .max_by_key(|item| google::rfc3339_ms(&item.expiry_time))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_keep_milliseconds_before_and_after_the_epoch() {
        let t = timestamp(1_700_000_000_123).expect("some");
        assert_eq!((t.seconds, t.nanos), (1_700_000_000, 123_000_000));
        let t = timestamp(-1).expect("some");
        assert_eq!((t.seconds, t.nanos), (-1, 999_000_000));
    }

    #[test]
    fn lenient_fields_read_null_and_absent_as_defaults() {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Shape {
            a: Lenient<String>,
            b: Lenient<i64>,
            c: Millis,
            d: Millis,
        }
        let shape: Shape =
            serde_json::from_str(r#"{"a": null, "c": "1607721533824", "d": 12.5}"#).expect("reads");
        assert_eq!((shape.a.0.as_str(), shape.b.0), ("", 0));
        assert_eq!((shape.c.0, shape.d.0), (1_607_721_533_824, 12));
    }

    #[test]
    fn limits_are_one_to_a_hundred_and_a_hundred_by_default() {
        assert_eq!(list_limit(0).ok(), Some(100));
        assert_eq!(list_limit(7).ok(), Some(7));
        assert!(list_limit(101).is_err());
    }
}
