//! The App Store's two proofs of purchase and its notifications, read and checked:
//!
//! - an app receipt (base64, StoreKit 1), sent to verifyReceipt with the app's shared secret:
//!   production first, then the sandbox when production answers 21007;
//! - a signed transaction of the App Store Server API (a JWS, StoreKit 2): its `x5c` header's
//!   chain (leaf, intermediate) must lead to the configured root certificate — each signature
//!   checked, each certificate valid now, the intermediate a CA, each carrying Apple's marker
//!   extension for its place — and the leaf's P-256 key must verify the ES256 signature;
//! - an App Store Server Notification v2: a `signedPayload` JWS checked the same way, and the
//!   signed transaction and renewal info inside it too.

use base64::Engine as _;
use serde::Deserialize;
use x509_parser::prelude::*;

use super::{Lenient, B64_STD, B64_URL};

/// Apple Root CA - G3, which signs the App Store's transaction certificates.
pub const APPLE_ROOT_CA_G3_PEM: &str = "-----BEGIN CERTIFICATE-----
MIICQzCCAcmgAwIBAgIILcX8iNLFS5UwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwS
QXBwbGUgUm9vdCBDQSAtIEczMSYwJAYDVQQLDB1BcHBsZSBDZXJ0aWZpY2F0aW9u
IEF1dGhvcml0eTETMBEGA1UECgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcN
MTQwNDMwMTgxOTA2WhcNMzkwNDMwMTgxOTA2WjBnMRswGQYDVQQDDBJBcHBsZSBS
b290IENBIC0gRzMxJjAkBgNVBAsMHUFwcGxlIENlcnRpZmljYXRpb24gQXV0aG9y
aXR5MRMwEQYDVQQKDApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzB2MBAGByqGSM49
AgEGBSuBBAAiA2IABJjpLz1AcqTtkyJygRMc3RCV8cWjTnHcFBbZDuWmBSp3ZHtf
TjjTuxxEtX/1H7YyYl3J6YRbTzBPEVoA/VhYDKX1DyxNB0cTddqXl5dvMVztK517
IDvYuVTZXpmkOlEKMaNCMEAwHQYDVR0OBBYEFLuw3qFYM4iapIqZ3r6966/ayySr
MA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMAoGCCqGSM49BAMDA2gA
MGUCMQCD6cHEFl4aXTQY2e3v9GwOAEZLuN+yRhHFD/3meoyhpmvOwgPUnPWTxnS4
at+qIxUCMG1mihDK1A3UT82NQz60imOlM27jbdoXt2QfyFMm+YhidDkLF1vLUagM
6BgD56KyKA==
-----END CERTIFICATE-----
";

/// The extension marking a certificate that signs App Store receipts and transactions.
pub const LEAF_MARKER_OID: &str = "1.2.840.113635.100.6.11.1";
/// The extension marking Apple's Worldwide Developer Relations intermediate CA.
pub const INTERMEDIATE_MARKER_OID: &str = "1.2.840.113635.100.6.2.1";

/// verifyReceipt's status for a sandbox receipt sent to production.
pub const SANDBOX_RECEIPT_STATUS: i64 = 21007;

/// The DER of the root certificate `setting` names (`[iap.apple] root_certificate`): empty for
/// Apple Root CA - G3, PEM text, or the path of a PEM or DER file.
pub fn load_root(setting: &str) -> Result<Vec<u8>, String> {
    let bytes = if setting.trim().is_empty() {
        APPLE_ROOT_CA_G3_PEM.as_bytes().to_vec()
    } else if setting.trim_start().starts_with("-----BEGIN") {
        setting.as_bytes().to_vec()
    } else {
        std::fs::read(setting).map_err(|e| format!("root_certificate {setting:?}: {e}"))?
    };
    let der = if bytes.trim_ascii_start().starts_with(b"-----BEGIN") {
        let (_, pem) = x509_parser::pem::parse_x509_pem(bytes.trim_ascii_start())
            .map_err(|e| format!("root_certificate is not a PEM certificate: {e}"))?;
        pem.contents
    } else {
        bytes
    };
    X509Certificate::from_der(&der)
        .map_err(|e| format!("root_certificate is not an X.509 certificate: {e}"))?;
    Ok(der)
}

/// Why a JWS was refused.
#[derive(Debug)]
pub enum JwsError {
    /// It does not read as a JWS with an `x5c` chain (base64, JSON, certificates).
    Malformed(String),
    /// It reads, but its chain or signature does not hold.
    Refused(String),
}

#[derive(Deserialize)]
struct JwsHeader {
    alg: String,
    #[serde(default)]
    x5c: Vec<String>,
}

/// Most certificates read from an `x5c` header, and the longest one.
const MAX_CHAIN: usize = 4;
const MAX_CERTIFICATE_BYTES: usize = 8192;

/// The payload (JSON bytes) of `jws` once its chain leads to `root_der` and its signature holds
/// at `now_secs`.
pub fn verify_jws(jws: &str, root_der: &[u8], now_secs: i64) -> Result<Vec<u8>, JwsError> {
    let malformed = |what: &str| JwsError::Malformed(what.to_owned());
    let mut parts = jws.trim().split('.');
    let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed("not a JWS (three dot-separated parts)"));
    };
    let header = B64_URL
        .decode(header_b64)
        .map_err(|_| malformed("JWS header is not base64url"))?;
    let header: JwsHeader = serde_json::from_slice(&header)
        .map_err(|e| JwsError::Malformed(format!("JWS header is not JSON: {e}")))?;
    if header.alg != "ES256" {
        return Err(JwsError::Refused(format!(
            "JWS algorithm {:?} is not ES256",
            header.alg
        )));
    }
    if header.x5c.len() < 3 || header.x5c.len() > MAX_CHAIN {
        return Err(malformed(
            "JWS header's x5c must hold the leaf, intermediate and root certificates",
        ));
    }
    let mut chain = Vec::with_capacity(2);
    for encoded in header.x5c.iter().take(2) {
        if encoded.len() > MAX_CERTIFICATE_BYTES * 2 {
            return Err(malformed("x5c certificate too large"));
        }
        chain.push(
            B64_STD
                .decode(encoded)
                .map_err(|_| malformed("x5c certificate is not base64"))?,
        );
    }
    let payload = B64_URL
        .decode(payload_b64)
        .map_err(|_| malformed("JWS payload is not base64url"))?;
    let signature = B64_URL
        .decode(signature_b64)
        .map_err(|_| malformed("JWS signature is not base64url"))?;
    let (_, leaf) =
        X509Certificate::from_der(&chain[0]).map_err(|_| malformed("x5c leaf is not X.509"))?;
    let (_, intermediate) = X509Certificate::from_der(&chain[1])
        .map_err(|_| malformed("x5c intermediate is not X.509"))?;
    let (_, root) = X509Certificate::from_der(root_der)
        .map_err(|_| JwsError::Refused("the configured root certificate does not read".into()))?;
    let refused = |why: &str| JwsError::Refused(why.to_owned());
    intermediate
        .verify_signature(Some(root.public_key()))
        .map_err(|_| refused("certificate chain does not lead to the trusted root certificate"))?;
    leaf.verify_signature(Some(intermediate.public_key()))
        .map_err(|_| refused("leaf certificate is not signed by the intermediate"))?;
    let now = ASN1Time::from_timestamp(now_secs).map_err(|_| refused("clock out of range"))?;
    if !leaf.validity().is_valid_at(now) || !intermediate.validity().is_valid_at(now) {
        return Err(refused(
            "a certificate of the chain is expired or not yet valid",
        ));
    }
    let is_ca = intermediate
        .basic_constraints()
        .ok()
        .flatten()
        .is_some_and(|bc| bc.value.ca);
    if !is_ca {
        return Err(refused("intermediate certificate is not a CA"));
    }
    let marked = |cert: &X509Certificate<'_>, oid: &str| {
        cert.extensions()
            .iter()
            .any(|e| e.oid.to_id_string() == oid)
    };
    if !marked(&leaf, LEAF_MARKER_OID) || !marked(&intermediate, INTERMEDIATE_MARKER_OID) {
        return Err(refused(
            "certificates are not the App Store's (marker extensions missing)",
        ));
    }
    if signature.len() != 64 {
        return Err(refused("JWS signature is not a P-256 signature"));
    }
    let key = ring::signature::UnparsedPublicKey::new(
        &ring::signature::ECDSA_P256_SHA256_FIXED,
        &leaf.public_key().subject_public_key.data,
    );
    let signed = &jws.trim()[..header_b64.len() + 1 + payload_b64.len()];
    key.verify(signed.as_bytes(), &signature)
        .map_err(|_| refused("JWS signature does not verify"))?;
    Ok(payload)
}

/// A signed transaction's payload (`JWSTransactionDecodedPayload`), the fields used.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TransactionInfo {
    pub app_account_token: Lenient<String>,
    pub bundle_id: Lenient<String>,
    pub environment: Lenient<String>,
    pub expires_date: Lenient<i64>,
    pub original_purchase_date: Lenient<i64>,
    pub original_transaction_id: Lenient<String>,
    pub product_id: Lenient<String>,
    pub purchase_date: Lenient<i64>,
    pub revocation_date: Lenient<i64>,
    pub transaction_id: Lenient<String>,
    #[serde(rename = "type")]
    pub kind: Lenient<String>,
}

/// A signed renewal info's payload (`JWSRenewalInfoDecodedPayload`), the fields used.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RenewalInfo {
    pub app_account_token: Lenient<String>,
    pub auto_renew_product_id: Lenient<String>,
    pub environment: Lenient<String>,
    pub grace_period_expires_date: Lenient<i64>,
    pub original_transaction_id: Lenient<String>,
    pub product_id: Lenient<String>,
    pub renewal_date: Lenient<i64>,
}

/// A notification's payload (`responseBodyV2DecodedPayload`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NotificationPayload {
    pub notification_type: Lenient<String>,
    pub subtype: Lenient<String>,
    pub notification_uuid: Lenient<String>,
    pub data: Option<NotificationData>,
}

/// A notification's `data`; the signed parts are read into `transaction_info` and
/// `renewal_info` once verified.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NotificationData {
    pub bundle_id: Lenient<String>,
    pub environment: Lenient<String>,
    pub signed_transaction_info: Lenient<String>,
    pub signed_renewal_info: Lenient<String>,
    pub transaction_info: Option<TransactionInfo>,
    pub renewal_info: Option<RenewalInfo>,
}

/// An app receipt's verifyReceipt answer, the fields used.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct VerifyReceiptAnswer {
    pub status: Lenient<i64>,
    pub environment: Lenient<String>,
    #[serde(rename = "is-retryable")]
    pub is_retryable: Lenient<bool>,
    pub receipt: Option<AppReceipt>,
    pub latest_receipt_info: Option<Vec<InApp>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct AppReceipt {
    pub bundle_id: Lenient<String>,
    pub in_app: Option<Vec<InApp>>,
}

/// One transaction of an app receipt (times are milliseconds, as decimal strings).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct InApp {
    pub transaction_id: Lenient<String>,
    pub original_transaction_id: Lenient<String>,
    pub product_id: Lenient<String>,
    pub purchase_date_ms: Lenient<String>,
    pub original_purchase_date_ms: Lenient<String>,
    pub expires_date_ms: Lenient<String>,
    pub cancellation_date_ms: Lenient<String>,
}

/// A receipt's decimal milliseconds; 0 when absent or not a number.
pub fn millis(text: &str) -> i64 {
    text.trim().parse().unwrap_or(0)
}
