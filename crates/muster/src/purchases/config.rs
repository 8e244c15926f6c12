//! The `[iap]` section: in-app purchase and subscription validation (`crate::purchases`), one
//! table per store. A store whose credentials are empty is not configured: its validations are
//! refused with Nakama's "… IAP is not configured." Every URL defaults to the real store; tests
//! point them at stand-ins.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IapConfig {
    /// Longest one call to a store may take, in milliseconds: waiting for a free place, connecting,
    /// asking and reading the answer. Past it the validation is refused as unavailable (503).
    pub timeout_ms: u64,
    /// Calls to one store in flight at once from this node; a validation past it waits for a
    /// place (within `timeout_ms`), so a slow store holds at most this many requests.
    pub max_calls_per_store: usize,
    /// Longest receipt, purchase, signature or signed request a client may send, in bytes.
    pub max_receipt_bytes: usize,
    pub apple: AppleIapConfig,
    pub google: GoogleIapConfig,
    pub huawei: HuaweiIapConfig,
    pub facebook_instant: FacebookInstantIapConfig,
}

impl Default for IapConfig {
    fn default() -> Self {
        IapConfig {
            timeout_ms: 10_000,
            max_calls_per_store: 64,
            max_receipt_bytes: 131_072,
            apple: AppleIapConfig::default(),
            google: GoogleIapConfig::default(),
            huawei: HuaweiIapConfig::default(),
            facebook_instant: FacebookInstantIapConfig::default(),
        }
    }
}

/// The App Store: app receipts through verifyReceipt, and the App Store Server API's signed
/// transactions and notifications.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AppleIapConfig {
    /// The app's shared secret (App Store Connect), sent with app receipts to verifyReceipt.
    /// Empty: app receipts are refused ("Apple IAP is not configured."); signed transactions
    /// need no secret.
    pub shared_password: String,
    /// Where app receipts are verified first (production).
    pub verify_receipt_url: String,
    /// Where a receipt is verified again when production answers status 21007 (a sandbox
    /// receipt).
    pub sandbox_verify_receipt_url: String,
    /// The root certificate signed transactions and notifications must chain up to: a PEM text,
    /// or the path of a PEM or DER file. Empty: Apple Root CA - G3, built in.
    pub root_certificate: String,
    /// The app's bundle id; when set, transactions and receipts of other apps are refused.
    pub bundle_id: String,
    /// The secret last part of the App Store Server Notifications URL
    /// (`/v2/console/apple/notifications/{id}`). Empty: the endpoint is not served.
    pub notifications_endpoint_id: String,
}

/// Apple's production and sandbox verifyReceipt.
pub const APPLE_VERIFY_RECEIPT_URL: &str = "https://buy.itunes.apple.com/verifyReceipt";
pub const APPLE_SANDBOX_VERIFY_RECEIPT_URL: &str = "https://sandbox.itunes.apple.com/verifyReceipt";

impl Default for AppleIapConfig {
    fn default() -> Self {
        AppleIapConfig {
            shared_password: String::new(),
            verify_receipt_url: APPLE_VERIFY_RECEIPT_URL.into(),
            sandbox_verify_receipt_url: APPLE_SANDBOX_VERIFY_RECEIPT_URL.into(),
            root_certificate: String::new(),
            bundle_id: String::new(),
            notifications_endpoint_id: String::new(),
        }
    }
}

/// Google Play: purchase tokens read back through the Android Publisher API with a service
/// account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GoogleIapConfig {
    /// The service account's email (`client_email` of its JSON key).
    pub client_email: String,
    /// The service account's private key (`private_key` of its JSON key): the PEM text (`\n`
    /// escapes are read as line breaks), or the path of a PEM file.
    pub private_key: String,
    /// Where the service account's signed assertion is exchanged for an access token.
    pub token_url: String,
    /// The Android Publisher API's base URL.
    pub publisher_url: String,
    /// The app's package name; when set, purchases of other packages are refused.
    pub package_name: String,
    /// The secret last part of the Real-time Developer Notifications push URL
    /// (`/v2/console/google/notifications/{id}`). Empty: the endpoint is not served.
    pub notifications_endpoint_id: String,
}

impl Default for GoogleIapConfig {
    fn default() -> Self {
        GoogleIapConfig {
            client_email: String::new(),
            private_key: String::new(),
            token_url: "https://oauth2.googleapis.com/token".into(),
            publisher_url: "https://androidpublisher.googleapis.com".into(),
            package_name: String::new(),
            notifications_endpoint_id: String::new(),
        }
    }
}

/// Huawei AppGallery: the purchase data's signature, and the Order service's verify call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HuaweiIapConfig {
    /// The app's IAP public key (AppGallery Connect, In-App Purchases): base64 of its DER, or
    /// PEM. Empty: Huawei purchases are refused ("Huawei IAP is not configured.").
    pub public_key: String,
    /// The app's OAuth client id and secret. When both are set, a purchase whose signature
    /// holds is also verified with the Order service; empty: the signature alone decides.
    pub client_id: String,
    pub client_secret: String,
    /// Where the client id and secret are exchanged for an access token.
    pub token_url: String,
    /// The Order service's base URL, and the one for purchases made in AppTouch
    /// (`accountFlag` 1).
    pub orders_url: String,
    pub app_touch_orders_url: String,
}

impl Default for HuaweiIapConfig {
    fn default() -> Self {
        HuaweiIapConfig {
            public_key: String::new(),
            client_id: String::new(),
            client_secret: String::new(),
            token_url: "https://oauth-login.cloud.huawei.com/oauth2/v3/token".into(),
            orders_url: "https://orders-dre.iap.hicloud.com".into(),
            app_touch_orders_url: "https://orders-at-dre.iap.dbankcloud.com".into(),
        }
    }
}

/// Facebook Instant Games: payments' signed requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FacebookInstantIapConfig {
    /// The app secret signing payments (HMAC-SHA256). Empty: Facebook Instant purchases are
    /// refused ("Facebook Instant IAP is not configured.").
    pub app_secret: String,
}

impl IapConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=600_000).contains(&self.timeout_ms) {
            return Err("iap.timeout_ms must be 1-600000".into());
        }
        if !(1..=100_000).contains(&self.max_calls_per_store) {
            return Err("iap.max_calls_per_store must be 1-100000".into());
        }
        if self.max_receipt_bytes < 1024 {
            return Err("iap.max_receipt_bytes must be at least 1024".into());
        }
        for (name, id) in [
            ("apple", &self.apple.notifications_endpoint_id),
            ("google", &self.google.notifications_endpoint_id),
        ] {
            let path_safe = id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~'));
            if !path_safe || id.len() > 256 {
                return Err(format!(
                    "iap.{name}.notifications_endpoint_id must be at most 256 letters, digits, '-', '_', '.' or '~'"
                ));
            }
        }
        for (name, url) in [
            ("apple.verify_receipt_url", &self.apple.verify_receipt_url),
            (
                "apple.sandbox_verify_receipt_url",
                &self.apple.sandbox_verify_receipt_url,
            ),
            ("google.token_url", &self.google.token_url),
            ("google.publisher_url", &self.google.publisher_url),
            ("huawei.token_url", &self.huawei.token_url),
            ("huawei.orders_url", &self.huawei.orders_url),
            (
                "huawei.app_touch_orders_url",
                &self.huawei.app_touch_orders_url,
            ),
        ] {
            match url::Url::parse(url) {
                Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
                _ => return Err(format!("iap.{name} must be an http(s) URL, got {url:?}")),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_settings_are_named() {
        assert_eq!(IapConfig::default().validate(), Ok(()));
        let mut config = IapConfig::default();
        config.apple.notifications_endpoint_id = "a/b".into();
        let error = config.validate().unwrap_err();
        assert!(
            error.contains("iap.apple.notifications_endpoint_id"),
            "{error}"
        );
        let mut config = IapConfig::default();
        config.google.publisher_url = "ftp://example.com".into();
        let error = config.validate().unwrap_err();
        assert!(error.contains("iap.google.publisher_url"), "{error}");
        for calls in [0, 1_000_000] {
            let config = IapConfig {
                max_calls_per_store: calls,
                ..IapConfig::default()
            };
            assert!(config
                .validate()
                .unwrap_err()
                .contains("max_calls_per_store"));
        }
    }
}
