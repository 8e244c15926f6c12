//! Facebook Instant Games: a payment's `signedRequest` is `<signature>.<payload>`, both
//! base64url; the signature is HMAC-SHA256 of the payload's base64 text with the app secret,
//! compared in constant time.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

use super::{Lenient, B64_URL};

/// A payment's payload, the fields used.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Payment {
    pub algorithm: Lenient<String>,
    pub app_id: Lenient<String>,
    pub payment_id: Lenient<String>,
    pub product_id: Lenient<String>,
    /// Unix seconds.
    pub purchase_time: Lenient<f64>,
    pub purchase_token: Lenient<String>,
}

/// Why a signed request was refused.
#[derive(Debug)]
pub enum SignedRequestError {
    Malformed(String),
    /// The signature does not hold.
    Forged,
}

/// The payment of `signed_request` and its JSON text, once its signature holds.
pub fn verify(
    app_secret: &str,
    signed_request: &str,
) -> Result<(Payment, String), SignedRequestError> {
    let mut parts = signed_request.trim().split('.');
    let (Some(signature), Some(payload), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(SignedRequestError::Malformed(
            "invalid signedRequest format".into(),
        ));
    };
    let signature = B64_URL.decode(signature).map_err(|_| {
        SignedRequestError::Malformed("signedRequest signature is not base64url".into())
    })?;
    let mut mac = Hmac::<Sha256>::new_from_slice(app_secret.as_bytes())
        .map_err(|_| SignedRequestError::Forged)?;
    mac.update(payload.as_bytes());
    mac.verify_slice(&signature)
        .map_err(|_| SignedRequestError::Forged)?;
    let json = B64_URL.decode(payload).map_err(|_| {
        SignedRequestError::Malformed("signedRequest payload is not base64url".into())
    })?;
    let text = String::from_utf8(json)
        .map_err(|_| SignedRequestError::Malformed("signedRequest payload is not UTF-8".into()))?;
    let payment: Payment = serde_json::from_str(&text).map_err(|e| {
        SignedRequestError::Malformed(format!("signedRequest payload is not JSON: {e}"))
    })?;
    if !payment.algorithm.is_empty() && !payment.algorithm.eq_ignore_ascii_case("HMAC-SHA256") {
        return Err(SignedRequestError::Malformed(format!(
            "signedRequest algorithm {:?} is not HMAC-SHA256",
            payment.algorithm.0
        )));
    }
    Ok((payment, text))
}
