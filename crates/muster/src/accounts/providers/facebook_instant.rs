//! Facebook Instant Games: the player info the game's client gets from
//! `FBInstant.player.getSignedPlayerInfoAsync()`, `<signature>.<payload>` (both base64url),
//! signed with HMAC-SHA256 of the payload (as sent, encoded) under the app secret. Checked
//! offline; the payload's `player_id` is the player.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

use super::{profile, Provider, ProviderError, ProviderProfile, Providers};

/// Longest signed player info read.
const MAX_SIGNED_INFO_BYTES: usize = 16 * 1024;

pub(super) fn verify(
    providers: &Providers,
    signed_player_info: &str,
) -> Result<ProviderProfile, ProviderError> {
    let provider = Provider::FacebookInstantGame;
    let config = &providers.config.facebook_instant_game;
    if config.app_secret.is_empty() {
        return Err(ProviderError::NotConfigured(provider));
    }
    let now = jsonwebtoken::get_current_timestamp() as i64;
    let player_id = check(
        signed_player_info,
        &config.app_secret,
        now,
        config.max_age_sec,
    )
    .map_err(|why| ProviderError::Refused(provider, why))?;
    profile(provider, player_id, None, None, None)
}

/// The player id of `signed_player_info` if it is signed with `app_secret` (and, with
/// `max_age_sec` above 0, issued within that many seconds of `now`).
pub fn check(
    signed_player_info: &str,
    app_secret: &str,
    now: i64,
    max_age_sec: u64,
) -> Result<String, String> {
    if signed_player_info.len() > MAX_SIGNED_INFO_BYTES {
        return Err(format!(
            "signed player info longer than {MAX_SIGNED_INFO_BYTES} bytes"
        ));
    }
    let Some((signature, payload)) = signed_player_info.split_once('.') else {
        return Err("signed player info is not <signature>.<payload>".into());
    };
    if payload.contains('.') {
        return Err("signed player info is not <signature>.<payload>".into());
    }
    let signature = decode(signature).map_err(|e| format!("signature not base64url: {e}"))?;
    let mut mac = Hmac::<Sha256>::new_from_slice(app_secret.as_bytes())
        .map_err(|e| format!("app secret unusable: {e}"))?;
    mac.update(payload.as_bytes());
    mac.verify_slice(&signature)
        .map_err(|_| "signature does not match the app secret".to_string())?;

    #[derive(Deserialize)]
    struct Payload {
        algorithm: String,
        player_id: String,
        #[serde(default)]
        issued_at: Option<i64>,
    }
    let payload = decode(payload).map_err(|e| format!("payload not base64url: {e}"))?;
    let payload: Payload =
        serde_json::from_slice(&payload).map_err(|e| format!("payload unreadable: {e}"))?;
    if !(payload.algorithm.eq_ignore_ascii_case("HMAC-SHA256") || payload.algorithm == "HS256") {
        return Err(format!("unsupported algorithm {:?}", payload.algorithm));
    }
    if max_age_sec > 0 {
        let issued_at = payload
            .issued_at
            .ok_or_else(|| "payload has no issued_at".to_string())?;
        if now.saturating_sub(issued_at).unsigned_abs() > max_age_sec {
            return Err(format!(
                "issued at {issued_at}, more than {max_age_sec} s from now"
            ));
        }
    }
    Ok(payload.player_id)
}

/// base64url, with or without padding.
fn decode(segment: &str) -> Result<Vec<u8>, base64::DecodeError> {
    URL_SAFE_NO_PAD.decode(segment.trim_end_matches('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Computed independently:
    // printf '%s' "$PAYLOAD" | openssl dgst -sha256 -hmac instant-secret -binary | base64url
    const PAYLOAD: &str = "eyJhbGdvcml0aG0iOiJITUFDLVNIQTI1NiIsImlzc3VlZF9hdCI6MTcwMDAwMDAwMCwicGxheWVyX2lkIjoiMTIzNDU2Nzg5MCIsInJlcXVlc3RfcGF5bG9hZCI6IngifQ";
    const SIGNATURE: &str = "C2AKAEhznP7_Ym3IPbTZ6vsqZk2ntcAg3-fZh_D1SPw";
    const SECRET: &str = "instant-secret";
    const ISSUED_AT: i64 = 1_700_000_000;

    fn signed() -> String {
        format!("{SIGNATURE}.{PAYLOAD}")
    }

    #[test]
    fn a_payload_signed_with_the_app_secret_names_its_player() {
        assert_eq!(
            check(&signed(), SECRET, ISSUED_AT + 5, 0).as_deref(),
            Ok("1234567890")
        );
        // Padded base64url is read too.
        let padded = format!("{SIGNATURE}=.{PAYLOAD}");
        assert_eq!(
            check(&padded, SECRET, ISSUED_AT, 60).as_deref(),
            Ok("1234567890")
        );
    }

    #[test]
    fn another_secret_or_a_changed_payload_is_refused() {
        let error = check(&signed(), "other-secret", ISSUED_AT, 0).unwrap_err();
        assert!(error.contains("does not match"), "{error}");

        let forged = URL_SAFE_NO_PAD
            .encode(br#"{"algorithm":"HMAC-SHA256","issued_at":1700000000,"player_id":"999"}"#);
        let error = check(&format!("{SIGNATURE}.{forged}"), SECRET, ISSUED_AT, 0).unwrap_err();
        assert!(error.contains("does not match"), "{error}");

        for malformed in ["", "no-dot", "a.b.c", "!!!.abc", &format!("{SIGNATURE}.")] {
            assert!(
                check(malformed, SECRET, ISSUED_AT, 0).is_err(),
                "{malformed:?}"
            );
        }
    }

    #[test]
    fn old_signed_info_is_refused_when_an_age_is_set() {
        assert!(check(&signed(), SECRET, ISSUED_AT + 3600, 0).is_ok());
        assert!(check(&signed(), SECRET, ISSUED_AT + 60, 60).is_ok());
        let error = check(&signed(), SECRET, ISSUED_AT + 61, 60).unwrap_err();
        assert!(error.contains("more than 60 s"), "{error}");
    }

    #[test]
    fn only_hmac_sha256_is_accepted() {
        let payload = URL_SAFE_NO_PAD.encode(br#"{"algorithm":"none","player_id":"1"}"#);
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).expect("key");
        mac.update(payload.as_bytes());
        let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        let error = check(&format!("{signature}.{payload}"), SECRET, 0, 0).unwrap_err();
        assert!(error.contains("unsupported algorithm"), "{error}");
    }
}
