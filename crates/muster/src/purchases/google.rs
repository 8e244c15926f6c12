//! Google Play: a purchase token is read back from the Android Publisher API with the studio's
//! service account. The service account proves itself with an RS256 JWT assertion (signed with
//! its private key) exchanged at the token URL for an access token, kept until five minutes
//! before it expires and renewed by one call at a time.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use super::remote::Remote;
use super::{Lenient, Millis, PurchaseError};

/// The scope of the Android Publisher API.
pub const PUBLISHER_SCOPE: &str = "https://www.googleapis.com/auth/androidpublisher";

/// How long before its expiry an access token is renewed.
const RENEW_BEFORE_SECS: i64 = 300;

/// Longest package name, product id or purchase token read from a receipt.
pub const MAX_FIELD_BYTES: usize = 512;

/// A purchase as the client's receipt describes it: Unity's wrapper (`{"json": "…"}`) or the
/// Play Billing purchase JSON itself.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Receipt {
    pub order_id: Lenient<String>,
    pub package_name: Lenient<String>,
    pub product_id: Lenient<String>,
    pub purchase_state: Lenient<i64>,
    pub purchase_time: Millis,
    pub purchase_token: Lenient<String>,
}

/// Reads a receipt; an error saying why when it is not one (no package name or token).
pub fn decode_receipt(receipt: &str) -> Result<Receipt, String> {
    let wrapper: serde_json::Value =
        serde_json::from_str(receipt).map_err(|e| format!("receipt is not JSON: {e}"))?;
    let inner: Receipt = match wrapper.get("json").and_then(|j| j.as_str()) {
        Some(json) => {
            serde_json::from_str(json).map_err(|e| format!("receipt's json is not JSON: {e}"))?
        }
        None => {
            serde_json::from_value(wrapper).map_err(|e| format!("receipt is malformed: {e}"))?
        }
    };
    for (name, value) in [
        ("packageName", &inner.package_name.0),
        ("purchaseToken", &inner.purchase_token.0),
    ] {
        if value.is_empty() {
            return Err(format!("receipt is malformed: {name} is missing"));
        }
        if value.len() > MAX_FIELD_BYTES {
            return Err(format!("receipt is malformed: {name} is too long"));
        }
    }
    if inner.product_id.len() > MAX_FIELD_BYTES {
        return Err("receipt is malformed: productId is too long".into());
    }
    Ok(inner)
}

/// `purchases.products` (a one-time product), the fields used.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProductPurchase {
    /// 0 purchased, 1 cancelled, 2 pending.
    pub purchase_state: Lenient<i64>,
    /// Absent in production; 0 test, 1 promo, 2 rewarded.
    pub purchase_type: Option<i64>,
    pub purchase_time_millis: Millis,
    pub order_id: Lenient<String>,
    pub obfuscated_external_account_id: Lenient<String>,
    pub obfuscated_external_profile_id: Lenient<String>,
}

/// `purchases.productsv2` (a one-time product, as voided purchase notifications re-read it).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProductPurchaseV2 {
    pub product_line_item: Vec<LineItem>,
    pub test_purchase_context: Option<serde_json::Value>,
    pub purchase_completion_time: Lenient<String>,
    pub obfuscated_external_account_id: Lenient<String>,
    pub obfuscated_external_profile_id: Lenient<String>,
}

/// `purchases.subscriptionsv2`, the fields used.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionPurchaseV2 {
    pub line_items: Vec<LineItem>,
    pub start_time: Lenient<String>,
    pub subscription_state: Lenient<String>,
    pub linked_purchase_token: Lenient<String>,
    pub test_purchase: Option<serde_json::Value>,
    pub external_account_identifiers: Option<ExternalAccountIdentifiers>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LineItem {
    pub product_id: Lenient<String>,
    /// RFC 3339.
    pub expiry_time: Lenient<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExternalAccountIdentifiers {
    pub obfuscated_external_account_id: Lenient<String>,
    pub obfuscated_external_profile_id: Lenient<String>,
}

/// A Real-time Developer Notification (`DeveloperNotification`), the parts used.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeveloperNotification {
    pub package_name: Lenient<String>,
    pub subscription_notification: Option<SubscriptionNotification>,
    pub one_time_product_notification: Option<serde_json::Value>,
    pub voided_purchase_notification: Option<VoidedPurchaseNotification>,
    pub test_notification: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionNotification {
    pub notification_type: Lenient<i64>,
    pub purchase_token: Lenient<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VoidedPurchaseNotification {
    pub purchase_token: Lenient<String>,
    pub order_id: Lenient<String>,
    /// 1 subscription, 2 one-time product.
    pub product_type: Lenient<i64>,
}

/// A Pub/Sub push (`{"message": {"data": base64, …}, "subscription": …}`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PushBody {
    pub message: PushMessage,
    pub subscription: Lenient<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PushMessage {
    pub data: Lenient<String>,
    #[serde(rename = "messageId", alias = "message_id")]
    pub message_id: Lenient<String>,
}

#[derive(Serialize)]
struct Assertion<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: i64,
    exp: i64,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: i64,
}

struct Cached {
    token: String,
    /// Unix seconds after which it is renewed.
    renew_at: i64,
}

/// The Android Publisher API as the service account reaches it.
pub struct Publisher {
    pub remote: Remote,
    client_email: String,
    key: EncodingKey,
    token_url: String,
    publisher_url: String,
    token: Mutex<Option<Cached>>,
}

/// The PEM a `private_key` setting names: the text (with `\n` escapes read as line breaks, as
/// a JSON key file holds it), or a file's.
pub fn load_private_key(setting: &str) -> Result<EncodingKey, String> {
    let pem = if setting.contains("-----BEGIN") {
        setting.replace("\\n", "\n")
    } else {
        std::fs::read_to_string(setting).map_err(|e| format!("private_key {setting:?}: {e}"))?
    };
    EncodingKey::from_rsa_pem(pem.as_bytes())
        .map_err(|e| format!("private_key is not an RSA private key in PEM: {e}"))
}

impl Publisher {
    pub fn new(
        remote: Remote,
        client_email: &str,
        key: EncodingKey,
        token_url: &str,
        publisher_url: &str,
    ) -> Publisher {
        Publisher {
            remote,
            client_email: client_email.to_owned(),
            key,
            token_url: token_url.to_owned(),
            publisher_url: publisher_url.trim_end_matches('/').to_owned(),
            token: Mutex::new(None),
        }
    }

    /// An access token for the Publisher API: the cached one while it is fresh, else a new one
    /// (one caller asks; the others wait for it).
    async fn access_token(&self, now_secs: i64) -> Result<String, PurchaseError> {
        let mut cached = self.token.lock().await;
        if let Some(token) = cached.as_ref().filter(|t| now_secs < t.renew_at) {
            return Ok(token.token.clone());
        }
        let claims = Assertion {
            iss: &self.client_email,
            scope: PUBLISHER_SCOPE,
            aud: &self.token_url,
            iat: now_secs,
            exp: now_secs + 3600,
        };
        let assertion = jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &self.key)
            .map_err(|error| {
                tracing::error!(%error, "signing the Google service account's assertion");
                self.remote
                    .unavailable("cannot sign the service account's assertion")
            })?;
        let request = self.remote.http().post(&self.token_url).form(&[
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            ("assertion", assertion.as_str()),
        ]);
        let answer = self.remote.send(request).await?;
        if answer.status != 200 {
            tracing::warn!(
                status = answer.status,
                body = %answer.text(),
                "Google refused the service account's assertion"
            );
            return Err(self.remote.unavailable(&format!(
                "the token endpoint refused the service account: HTTP {}",
                answer.status
            )));
        }
        let token: TokenAnswer = serde_json::from_slice(&answer.body)
            .map_err(|_| self.remote.unavailable("unreadable token answer"))?;
        let lifetime = if token.expires_in > 0 {
            token.expires_in
        } else {
            3600
        };
        *cached = Some(Cached {
            token: token.access_token.clone(),
            renew_at: now_secs + (lifetime - RENEW_BEFORE_SECS).max(0),
        });
        Ok(token.access_token)
    }

    /// GETs a Publisher API resource under `applications/{package}/purchases/`; the answer's
    /// status and body (a 401 renews the token once).
    pub async fn get(
        &self,
        package: &str,
        path: &[&str],
        now_secs: i64,
    ) -> Result<super::remote::Answer, PurchaseError> {
        let mut url = url::Url::parse(&self.publisher_url)
            .map_err(|_| self.remote.unavailable("publisher_url is not a URL"))?;
        {
            let mut segments = url
                .path_segments_mut()
                .map_err(|_| self.remote.unavailable("publisher_url is not a base URL"))?;
            segments.pop_if_empty();
            segments.extend([
                "androidpublisher",
                "v3",
                "applications",
                package,
                "purchases",
            ]);
            segments.extend(path);
        }
        for attempt in 0..2 {
            let token = self.access_token(now_secs).await?;
            let request = self
                .remote
                .http()
                .get(url.clone())
                .bearer_auth(token)
                .header("accept", "application/json");
            let answer = self.remote.send(request).await?;
            if answer.status == 401 && attempt == 0 {
                self.token.lock().await.take();
                continue;
            }
            return Ok(answer);
        }
        Err(self
            .remote
            .unavailable("the Publisher API refused the access token"))
    }
}

/// A Google RFC 3339 time as Unix milliseconds; 0 when absent or unreadable.
pub fn rfc3339_ms(text: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.timestamp_millis())
        .unwrap_or(0)
}
