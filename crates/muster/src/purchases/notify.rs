//! The stores' notifications, as Nakama handles them: each is checked (the App Store's
//! signature chain; Google's purchase read back from the Publisher API, so a forged push can
//! only make the server read a real purchase), the record it concerns is updated (expiry moved,
//! refund time set) and then the [`NotificationObserver`](super::NotificationObserver) is told.
//!
//! The purchase's user is the one the store names (the App Store's `appAccountToken`, Google's
//! obfuscated account or profile id, when it is a user id), else the stored record's. A
//! notification about nothing known, or about a user who does not exist, is answered as handled
//! ([`Handled::Ignored`]) so the store stops sending it; one that cannot be handled now (the
//! store or the database unreachable; a renewal of a subscription not validated yet) is an
//! error, and the store sends it again later.

use base64::Engine as _;
use muster_proto::grpc::StoreProvider;
use serde::Deserialize;
use uuid::Uuid;

use super::apple::{NotificationData, NotificationPayload, RenewalInfo, TransactionInfo};
use super::google::{DeveloperNotification, PushBody};
use super::store::{PurchaseRecord, SubscriptionRecord};
use super::{
    check_id, environment, google, latest_item, purchase_wire, subscription_wire, Lenient,
    NotificationKind, PurchaseError, Purchases, B64_STD, B64_URL,
};
use crate::store::StoreError;

/// What became of a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// A record changed (and the observer, if any, was told).
    Applied,
    /// Nothing to do: a kind not handled, or nothing known about it.
    Ignored,
}

#[derive(Deserialize)]
struct Signed {
    #[serde(rename = "signedPayload", default)]
    signed_payload: Lenient<String>,
}

/// A store's user reference, when it is a user id.
fn user_of(reference: &str) -> Option<Uuid> {
    Uuid::parse_str(reference.trim()).ok()
}

/// The user a Google purchase names (obfuscated account id, else profile id): `Ok(None)` when
/// it names none, `Err(())` when it names something that is not a user id.
fn google_user(account: &str, profile: &str) -> Result<Option<Uuid>, ()> {
    let named = if !account.is_empty() {
        account
    } else if !profile.is_empty() {
        profile
    } else {
        return Ok(None);
    };
    user_of(named).map(Some).ok_or(())
}

impl Purchases {
    /// An App Store Server Notification v2 (`POST /v2/console/apple/notifications/{id}`): the
    /// request body as received.
    pub async fn apple_notification(&self, body: &[u8]) -> Result<Handled, PurchaseError> {
        let signed: Signed = serde_json::from_slice(body)
            .map_err(|e| PurchaseError::Invalid(format!("Notification body is not JSON: {e}.")))?;
        self.check_proof("signedPayload", &signed.signed_payload)?;
        let payload = self.apple_jws(&signed.signed_payload)?;
        let mut notification: NotificationPayload =
            serde_json::from_slice(&payload).map_err(|e| {
                PurchaseError::Invalid(format!("Notification payload is not JSON: {e}."))
            })?;
        let mut data = notification.data.take().unwrap_or_default();
        if !data.signed_transaction_info.is_empty() {
            let info = self.apple_jws(&data.signed_transaction_info)?;
            data.transaction_info = Some(serde_json::from_slice(&info).map_err(|e| {
                PurchaseError::Invalid(format!("signedTransactionInfo is not JSON: {e}."))
            })?);
        }
        if !data.signed_renewal_info.is_empty() {
            let info = self.apple_jws(&data.signed_renewal_info)?;
            data.renewal_info = Some(serde_json::from_slice(&info).map_err(|e| {
                PurchaseError::Invalid(format!("signedRenewalInfo is not JSON: {e}."))
            })?);
        }
        let bundle = &self.config.apple.bundle_id;
        if !bundle.is_empty() && !data.bundle_id.is_empty() && *data.bundle_id != *bundle {
            tracing::warn!(bundle_id = %data.bundle_id.0, "App Store notification of another app");
            return Ok(Handled::Ignored);
        }
        let body = String::from_utf8_lossy(body).into_owned();
        let kind = notification.notification_type.to_ascii_uppercase();
        tracing::debug!(
            notification_type = %kind,
            subtype = %notification.subtype.0,
            uuid = %notification.notification_uuid.0,
            "App Store notification"
        );
        match kind.as_str() {
            "DID_RENEW" | "SUBSCRIBED" | "DID_CHANGE_RENEWAL_PREF" | "OFFER_REDEEMED" => {
                self.apple_subscribed(&kind, &notification.subtype, &data, &body)
                    .await
            }
            "EXPIRED" | "DID_CHANGE_RENEWAL_STATUS" | "GRACE_PERIOD_EXPIRED" | "REVOKED" => {
                self.apple_expired(&kind, &notification.subtype, &data, &body)
                    .await
            }
            "REFUND" => self.apple_refund(&data, &body).await,
            _ => Ok(Handled::Ignored),
        }
    }

    /// The subscription's user: the notification's app account token, else the stored
    /// subscription's owner.
    async fn apple_subscriber(
        &self,
        token: &str,
        original_transaction_id: &str,
    ) -> Result<Option<Uuid>, PurchaseError> {
        if let Some(user) = user_of(token) {
            return Ok(Some(user));
        }
        let stored = self
            .store
            .subscription(original_transaction_id.to_owned())
            .await?;
        Ok(stored.and_then(|s| s.user_id))
    }

    /// A subscription billed: subscribed, renewed, changed plan, redeemed an offer.
    async fn apple_subscribed(
        &self,
        kind: &str,
        subtype: &str,
        data: &NotificationData,
        body: &str,
    ) -> Result<Handled, PurchaseError> {
        let Some(info) = &data.transaction_info else {
            return Err(PurchaseError::Invalid(format!(
                "A {kind} notification needs signedTransactionInfo."
            )));
        };
        check_id("originalTransactionId", &info.original_transaction_id)?;
        let Some(user) = self
            .apple_subscriber(&info.app_account_token, &info.original_transaction_id)
            .await?
        else {
            // Not validated yet: the App Store sends it again later, as Nakama has it.
            return Err(PurchaseError::Unavailable(
                "The subscription is not known yet; send the notification again later.".into(),
            ));
        };
        let mut product = info.product_id.0.clone();
        if matches!(subtype, "UPGRADE" | "DOWNGRADE") {
            if let Some(renewal) = data
                .renewal_info
                .as_ref()
                .filter(|r| !r.auto_renew_product_id.is_empty())
            {
                product = renewal.auto_renew_product_id.0.clone();
            }
        }
        let record = self.apple_subscription(Some(user), info, product, body);
        let kind = if kind == "DID_RENEW" {
            NotificationKind::Renewed
        } else {
            NotificationKind::Subscribed
        };
        self.apply_subscription(
            record,
            StoreProvider::AppleAppStore,
            Some(kind),
            &payload(data),
        )
        .await
    }

    /// A subscription ended or will not renew.
    async fn apple_expired(
        &self,
        kind: &str,
        subtype: &str,
        data: &NotificationData,
        body: &str,
    ) -> Result<Handled, PurchaseError> {
        let Some(renewal) = &data.renewal_info else {
            return Err(PurchaseError::Invalid(format!(
                "A {kind} notification needs signedRenewalInfo."
            )));
        };
        check_id("originalTransactionId", &renewal.original_transaction_id)?;
        let Some(user) = self
            .apple_subscriber(&renewal.app_account_token, &renewal.original_transaction_id)
            .await?
        else {
            return Ok(Handled::Ignored);
        };
        let record = self.apple_renewal(user, renewal, body);
        let kind = match (kind, subtype) {
            ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED") => {
                Some(NotificationKind::Cancelled)
            }
            // Auto-renewal turned back on: the record is updated, nothing is told.
            ("DID_CHANGE_RENEWAL_STATUS", _) => None,
            _ => Some(NotificationKind::Expired),
        };
        self.apply_subscription(record, StoreProvider::AppleAppStore, kind, &payload(data))
            .await
    }

    /// A refunded purchase or subscription.
    async fn apple_refund(
        &self,
        data: &NotificationData,
        body: &str,
    ) -> Result<Handled, PurchaseError> {
        let Some(info) = &data.transaction_info else {
            return Err(PurchaseError::Invalid(
                "A REFUND notification needs signedTransactionInfo.".into(),
            ));
        };
        let refunded_at = if *info.revocation_date > 0 {
            *info.revocation_date
        } else {
            self.now_ms()
        };
        if *info.expires_date != 0 {
            check_id("originalTransactionId", &info.original_transaction_id)?;
            let Some(user) = self
                .apple_subscriber(&info.app_account_token, &info.original_transaction_id)
                .await?
            else {
                return Ok(Handled::Ignored);
            };
            let mut record =
                self.apple_subscription(Some(user), info, info.product_id.0.clone(), body);
            record.refund_time_ms = refunded_at;
            return self
                .apply_subscription(
                    record,
                    StoreProvider::AppleAppStore,
                    Some(NotificationKind::Refunded),
                    &payload(data),
                )
                .await;
        }
        check_id("transactionId", &info.transaction_id)?;
        check_id("productId", &info.product_id)?;
        let user = match user_of(&info.app_account_token) {
            Some(user) => Some(user),
            None => self
                .store
                .purchase(info.transaction_id.0.clone())
                .await?
                .and_then(|p| p.user_id),
        };
        if user.is_none() {
            return Ok(Handled::Ignored);
        }
        let mut record = self.purchase_record(
            user,
            StoreProvider::AppleAppStore,
            (info.transaction_id.0.clone(), info.product_id.0.clone()),
            *info.purchase_date,
            *info.environment == "Sandbox",
            body.to_owned(),
        );
        record.refund_time_ms = refunded_at;
        self.apply_refund(record, StoreProvider::AppleAppStore, body, &payload(data))
            .await
    }

    /// A subscription record from a signed transaction.
    fn apple_subscription(
        &self,
        user: Option<Uuid>,
        info: &TransactionInfo,
        product_id: String,
        body: &str,
    ) -> SubscriptionRecord {
        let now = self.now_ms();
        SubscriptionRecord {
            user_id: user,
            store: StoreProvider::AppleAppStore as i32,
            original_transaction_id: info.original_transaction_id.0.clone(),
            product_id,
            purchase_time_ms: *info.original_purchase_date,
            expire_time_ms: *info.expires_date,
            refund_time_ms: *info.revocation_date,
            environment: environment(*info.environment == "Sandbox"),
            raw_response: String::new(),
            raw_notification: body.to_owned(),
            create_time_ms: now,
            update_time_ms: now,
        }
    }

    /// A subscription record from a renewal info: its expiry is the renewal date, or the end
    /// of its grace period when later.
    fn apple_renewal(&self, user: Uuid, renewal: &RenewalInfo, body: &str) -> SubscriptionRecord {
        let now = self.now_ms();
        SubscriptionRecord {
            user_id: Some(user),
            store: StoreProvider::AppleAppStore as i32,
            original_transaction_id: renewal.original_transaction_id.0.clone(),
            product_id: renewal.product_id.0.clone(),
            purchase_time_ms: 0,
            expire_time_ms: (*renewal.renewal_date).max(*renewal.grace_period_expires_date),
            refund_time_ms: 0,
            environment: environment(*renewal.environment == "Sandbox"),
            raw_response: String::new(),
            raw_notification: body.to_owned(),
            create_time_ms: now,
            update_time_ms: now,
        }
    }

    /// Stores a subscription a notification changed, then tells the observer (`kind`); a user
    /// who does not exist makes it ignored.
    async fn apply_subscription(
        &self,
        record: SubscriptionRecord,
        store: StoreProvider,
        kind: Option<NotificationKind>,
        provider_payload: &str,
    ) -> Result<Handled, PurchaseError> {
        let stored = match self.store.upsert_subscriptions(vec![record]).await {
            Ok(stored) => stored,
            Err(StoreError::NotFound) => return Ok(Handled::Ignored),
            Err(error) => return Err(error.into()),
        };
        if let (Some(kind), Some(subscription), Some(observer)) =
            (kind, stored.first(), self.observer.get())
        {
            let wire = subscription_wire(subscription, self.now_ms(), true);
            observer.subscription_notification(store, kind, &wire, provider_payload);
        }
        Ok(Handled::Applied)
    }

    /// Stores a refunded purchase, then tells the observer.
    async fn apply_refund(
        &self,
        record: PurchaseRecord,
        store: StoreProvider,
        body: &str,
        provider_payload: &str,
    ) -> Result<Handled, PurchaseError> {
        let stored = match self.store.upsert_purchases(vec![record]).await {
            Ok(stored) => stored,
            Err(StoreError::NotFound) => return Ok(Handled::Ignored),
            Err(error) => return Err(error.into()),
        };
        if let (Some(purchase), Some(observer)) = (stored.first(), self.observer.get()) {
            let wire = purchase_wire(
                &purchase.record,
                purchase.record.user_id,
                purchase.seen_before,
                body.to_owned(),
                true,
            );
            observer.purchase_notification(
                store,
                NotificationKind::Refunded,
                &wire,
                provider_payload,
            );
        }
        Ok(Handled::Applied)
    }

    /// A Google Real-time Developer Notification, as Pub/Sub pushes it
    /// (`POST /v2/console/google/notifications/{id}`): the request body as received.
    pub async fn google_notification(&self, body: &[u8]) -> Result<Handled, PurchaseError> {
        self.google()?;
        let push: PushBody = serde_json::from_slice(body)
            .map_err(|e| PurchaseError::Invalid(format!("Notification body is not JSON: {e}.")))?;
        self.check_proof("message.data", &push.message.data)?;
        let data = B64_STD
            .decode(push.message.data.trim())
            .or_else(|_| B64_URL.decode(push.message.data.trim()))
            .map_err(|_| PurchaseError::Invalid("message.data is not base64.".into()))?;
        let notification: DeveloperNotification = serde_json::from_slice(&data).map_err(|e| {
            PurchaseError::Invalid(format!(
                "message.data is not a developer notification: {e}."
            ))
        })?;
        let package = notification.package_name.0.clone();
        let expected = &self.config.google.package_name;
        if package.is_empty() || (!expected.is_empty() && package != *expected) {
            return Ok(Handled::Ignored);
        }
        let body = String::from_utf8_lossy(body).into_owned();
        if let Some(event) = &notification.subscription_notification {
            let kind = match *event.notification_type {
                4 => NotificationKind::Subscribed,
                2 => NotificationKind::Renewed,
                13 => NotificationKind::Expired,
                3 => NotificationKind::Cancelled,
                _ => return Ok(Handled::Ignored),
            };
            check_id("purchaseToken", &event.purchase_token)?;
            return self
                .google_subscription_changed(&package, &event.purchase_token, kind, 0, &body)
                .await;
        }
        if let Some(voided) = &notification.voided_purchase_notification {
            check_id("purchaseToken", &voided.purchase_token)?;
            let now = self.now_ms();
            if *voided.product_type == 1 {
                return self
                    .google_subscription_changed(
                        &package,
                        &voided.purchase_token,
                        NotificationKind::Refunded,
                        now,
                        &body,
                    )
                    .await;
            }
            return self
                .google_voided_purchase(&package, &voided.purchase_token, &data, &body)
                .await;
        }
        Ok(Handled::Ignored)
    }

    /// A subscription a notification names, read back and stored (`refund_time_ms` non-zero:
    /// refunded then).
    async fn google_subscription_changed(
        &self,
        package: &str,
        token: &str,
        kind: NotificationKind,
        refund_time_ms: i64,
        body: &str,
    ) -> Result<Handled, PurchaseError> {
        let (subscription, api_raw) = self.google_subscription(package, token).await?;
        let original = if subscription.linked_purchase_token.is_empty() {
            token.to_owned()
        } else {
            subscription.linked_purchase_token.0.clone()
        };
        check_id("linkedPurchaseToken", &original)?;
        let ids = subscription
            .external_account_identifiers
            .clone()
            .unwrap_or_default();
        let user = match google_user(
            &ids.obfuscated_external_account_id,
            &ids.obfuscated_external_profile_id,
        ) {
            Ok(Some(user)) => Some(user),
            Ok(None) => self
                .store
                .subscription(original.clone())
                .await?
                .and_then(|s| s.user_id),
            Err(()) => return Ok(Handled::Ignored),
        };
        let (Some(user), Some(item)) = (user, latest_item(&subscription)) else {
            return Ok(Handled::Ignored);
        };
        let now = self.now_ms();
        let record = SubscriptionRecord {
            user_id: Some(user),
            store: StoreProvider::GooglePlayStore as i32,
            original_transaction_id: original,
            product_id: item.product_id.0.clone(),
            purchase_time_ms: google::rfc3339_ms(&subscription.start_time),
            expire_time_ms: google::rfc3339_ms(&item.expiry_time),
            refund_time_ms,
            environment: environment(subscription.test_purchase.is_some()),
            raw_response: String::new(),
            raw_notification: body.to_owned(),
            create_time_ms: now,
            update_time_ms: now,
        };
        self.apply_subscription(record, StoreProvider::GooglePlayStore, Some(kind), &api_raw)
            .await
    }

    /// A one-time purchase voided (refunded): the stored one, else as the Publisher API tells.
    async fn google_voided_purchase(
        &self,
        package: &str,
        token: &str,
        notification: &[u8],
        body: &str,
    ) -> Result<Handled, PurchaseError> {
        let now = self.now_ms();
        let (record, provider_payload) = match self.store.purchase(token.to_owned()).await? {
            Some(stored) if stored.user_id.is_some() => {
                let record = PurchaseRecord {
                    refund_time_ms: now,
                    update_time_ms: now,
                    ..stored
                };
                (record, String::from_utf8_lossy(notification).into_owned())
            }
            _ => {
                let publisher = self.google()?;
                let answer = publisher
                    .get(
                        package,
                        &["productsv2", "tokens", token],
                        self.clock.now_secs(),
                    )
                    .await?;
                if answer.status != 200 {
                    return Err(self.google_refusal(answer.status));
                }
                let purchase: google::ProductPurchaseV2 = serde_json::from_slice(&answer.body)
                    .map_err(|_| publisher.remote.unavailable("unreadable answer"))?;
                let user = match google_user(
                    &purchase.obfuscated_external_account_id,
                    &purchase.obfuscated_external_profile_id,
                ) {
                    Ok(Some(user)) => user,
                    _ => return Ok(Handled::Ignored),
                };
                let product = purchase
                    .product_line_item
                    .first()
                    .map(|item| item.product_id.0.clone())
                    .unwrap_or_default();
                check_id("productId", &product)?;
                let mut record = self.purchase_record(
                    Some(user),
                    StoreProvider::GooglePlayStore,
                    (token.to_owned(), product),
                    google::rfc3339_ms(&purchase.purchase_completion_time),
                    purchase.test_purchase_context.is_some(),
                    answer.text(),
                );
                record.refund_time_ms = now;
                (record, answer.text())
            }
        };
        self.apply_refund(
            record,
            StoreProvider::GooglePlayStore,
            body,
            &provider_payload,
        )
        .await
    }
}

/// The App Store notification's data with its signed parts decoded, as the observer gets it.
fn payload(data: &NotificationData) -> String {
    serde_json::to_string(data).unwrap_or_default()
}
