//! Huawei AppGallery: the purchase data (`InAppPurchaseData`, JSON) is signed by Huawei with the
//! app's IAP key (SHA256withRSA, PKCS#1 v1.5); its signature is checked with the configured
//! public key. With the app's OAuth client configured, the purchase token is also verified with
//! the Order service, as Nakama does.

use base64::Engine as _;
use rsa::pkcs1v15::{Signature, VerifyingKey};
use rsa::pkcs8::DecodePublicKey;
use rsa::signature::Verifier;
use rsa::RsaPublicKey;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use tokio::sync::Mutex;

use super::remote::{Answer, Remote};
use super::{Lenient, Millis, PurchaseError, B64_STD};

/// The purchase data's fields used.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PurchaseData {
    pub order_id: Lenient<String>,
    pub package_name: Lenient<String>,
    pub product_id: Lenient<String>,
    pub purchase_time: Millis,
    pub purchase_token: Lenient<String>,
    /// 1: bought in AppTouch (its own Order service).
    pub account_flag: Lenient<i64>,
    /// Absent in production; 0 in the sandbox.
    pub purchase_type: Option<i64>,
    /// 0 purchased, 1 cancelled, 2 refunded; absent in older data.
    pub purchase_state: Option<i64>,
}

/// The Order service's answer to a verify.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VerifyAnswer {
    pub response_code: Lenient<String>,
    pub response_message: Lenient<String>,
}

/// The key a `public_key` setting names: PEM, or base64 of the DER (as AppGallery Connect
/// shows it).
pub fn load_public_key(setting: &str) -> Result<RsaPublicKey, String> {
    let text = setting.trim();
    if text.starts_with("-----BEGIN") {
        return RsaPublicKey::from_public_key_pem(text)
            .map_err(|e| format!("public_key is not an RSA public key: {e}"));
    }
    let der = B64_STD
        .decode(text)
        .map_err(|_| "public_key is neither PEM nor base64".to_string())?;
    RsaPublicKey::from_public_key_der(&der)
        .map_err(|e| format!("public_key is not an RSA public key: {e}"))
}

/// Whether `signature` (base64) is `key`'s SHA256withRSA signature of `data`.
pub fn signature_holds(key: &RsaPublicKey, data: &str, signature: &str) -> bool {
    let Ok(bytes) = B64_STD.decode(signature.trim()) else {
        return false;
    };
    let Ok(signature) = Signature::try_from(bytes.as_slice()) else {
        return false;
    };
    VerifyingKey::<Sha256>::new(key.clone())
        .verify(data.as_bytes(), &signature)
        .is_ok()
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: i64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VerifyRequest<'a> {
    purchase_token: &'a str,
    product_id: &'a str,
}

struct Cached {
    token: String,
    renew_at: i64,
}

/// The Order service as the app's OAuth client reaches it.
pub struct Orders {
    pub remote: Remote,
    client_id: String,
    client_secret: String,
    token_url: String,
    orders_url: String,
    app_touch_orders_url: String,
    token: Mutex<Option<Cached>>,
}

impl Orders {
    pub fn new(remote: Remote, config: &super::config::HuaweiIapConfig) -> Orders {
        Orders {
            remote,
            client_id: config.client_id.clone(),
            client_secret: config.client_secret.clone(),
            token_url: config.token_url.clone(),
            orders_url: config.orders_url.trim_end_matches('/').to_owned(),
            app_touch_orders_url: config.app_touch_orders_url.trim_end_matches('/').to_owned(),
            token: Mutex::new(None),
        }
    }

    async fn access_token(&self, now_secs: i64) -> Result<String, PurchaseError> {
        let mut cached = self.token.lock().await;
        if let Some(token) = cached.as_ref().filter(|t| now_secs < t.renew_at) {
            return Ok(token.token.clone());
        }
        let request = self.remote.http().post(&self.token_url).form(&[
            ("grant_type", "client_credentials"),
            ("client_id", self.client_id.as_str()),
            ("client_secret", self.client_secret.as_str()),
        ]);
        let answer = self.remote.send(request).await?;
        if answer.status != 200 {
            tracing::warn!(status = answer.status, body = %answer.text(), "Huawei refused the app's client");
            return Err(self.remote.unavailable(&format!(
                "the token endpoint refused the app's client: HTTP {}",
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
            renew_at: now_secs + (lifetime - 300).max(0),
        });
        Ok(token.access_token)
    }

    /// Verifies the purchase token with the Order service; its answer.
    pub async fn verify(
        &self,
        data: &PurchaseData,
        now_secs: i64,
    ) -> Result<Answer, PurchaseError> {
        let token = self.access_token(now_secs).await?;
        let base = if data.account_flag.0 == 1 {
            &self.app_touch_orders_url
        } else {
            &self.orders_url
        };
        let request = self
            .remote
            .http()
            .post(format!("{base}/applications/purchases/tokens/verify"))
            .bearer_auth(token)
            .json(&VerifyRequest {
                purchase_token: &data.purchase_token,
                product_id: &data.product_id,
            });
        let answer = self.remote.send(request).await?;
        match answer.status {
            200 => Ok(answer),
            401 => {
                self.token.lock().await.take();
                Err(self
                    .remote
                    .unavailable("the Order service refused the access token"))
            }
            status => Err(self.remote.unavailable(&format!("HTTP {status}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = "-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu4+clmOJ3gSpsVXxO4qv
mhHBDk2HW/Ysaf9DLLOb0psPWT8GWoCaFw4/Sy/VrJAokoOY4+qtWdA3XK5TaiJq
K70qozwDcGzABw4lDy5IV5mqblU6rxiKjv3Q/pPEq8TZaxDlUnCxQTgr1hiKewma
Lzw5Bcr6OvY3bHhemUCfSHC1QmXFwWzCCYmht5EqKneCEi52Bzrv/aizv3l9njW5
p0sfuA7Be6twNi67NHjFlGqfhf1vbNHt9w1GKCl659xGyTCuSdiFtb9HvJxDImJH
PfXiQif4CcuYnlJmbSk7YufXAPvarP5nBzw+cVd3U9qNgz93E+fxXWx+Fu6CT3tl
6wIDAQAB
-----END PUBLIC KEY-----";

    #[test]
    fn a_public_key_reads_as_pem_or_as_appgallery_shows_it() {
        let from_pem = load_public_key(PEM).expect("PEM");
        let base64: String = PEM.lines().filter(|l| !l.starts_with("-----")).collect();
        assert_eq!(load_public_key(&base64).expect("base64 DER"), from_pem);
        assert!(load_public_key("not a key").is_err());
        assert!(!signature_holds(&from_pem, "{}", "not base64"));
        assert!(!signature_holds(&from_pem, "{}", "c2lnbmF0dXJl"));
    }
}
