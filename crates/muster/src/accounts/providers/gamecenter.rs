//! Game Center: the identity verification signature from
//! `fetchItems(forIdentityVerificationSignature:)` is RSA-SHA256 (PKCS#1 v1.5) over
//! player id ‖ bundle id ‖ timestamp (big-endian u64) ‖ salt (base64-decoded), checked with the
//! key of the certificate at `public_key_url`. That URL comes from the client, so it is fetched
//! only over HTTPS from Apple's hosts (`gamecenter.key_url_hosts`), and the certificate is
//! cached. Past Nakama, a timestamp too far from now and a bundle id that is not the game's
//! are refused.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use parking_lot::Mutex;
use url::{Host, Url};
use x509_parser::oid_registry::OID_PKCS1_RSAENCRYPTION;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::{profile, Provider, ProviderError, ProviderProfile, Providers, SocialConfig};

const PROVIDER: Provider = Provider::GameCenter;

/// Certificates (by URL) kept at most.
const MAX_CACHED_KEYS: usize = 16;
/// Longest player id, bundle id, salt and signature read.
const MAX_ID_CHARS: usize = 256;
const MAX_SALT_CHARS: usize = 1024;
const MAX_SIGNATURE_CHARS: usize = 4096;
/// A timestamp above this is in milliseconds (as Apple gives it), not seconds.
const MILLISECONDS_ABOVE: i64 = 100_000_000_000;

/// What Game Center's client sends.
pub struct Proof<'a> {
    pub player_id: &'a str,
    pub bundle_id: &'a str,
    pub timestamp: i64,
    pub salt: &'a str,
    pub signature: &'a str,
    pub public_key_url: &'a str,
}

/// The public keys of the certificates fetched, by URL.
pub struct KeyCache {
    ttl: Duration,
    keys: Mutex<HashMap<String, CachedKey>>,
    /// Held while a certificate is fetched, so logins arriving together fetch it once.
    fetch: tokio::sync::Mutex<()>,
}

#[derive(Clone)]
struct CachedKey {
    /// The certificate's RSA public key (PKCS#1 DER, as ring reads it).
    key: Arc<Vec<u8>>,
    /// Unix seconds the certificate expires at.
    not_after: i64,
    fetched_at: Instant,
}

impl KeyCache {
    pub fn new(config: &SocialConfig) -> KeyCache {
        KeyCache {
            ttl: Duration::from_secs(config.keys_cache_sec),
            keys: Mutex::new(HashMap::new()),
            fetch: tokio::sync::Mutex::new(()),
        }
    }

    fn cached(&self, url: &str, now: Instant, now_unix: i64) -> Option<Arc<Vec<u8>>> {
        let keys = self.keys.lock();
        let cached = keys.get(url)?;
        let fresh = now.saturating_duration_since(cached.fetched_at) < self.ttl
            && now_unix <= cached.not_after;
        fresh.then(|| Arc::clone(&cached.key))
    }

    fn store(&self, url: &str, key: CachedKey) {
        let mut keys = self.keys.lock();
        if keys.len() >= MAX_CACHED_KEYS && !keys.contains_key(url) {
            let oldest = keys
                .iter()
                .min_by_key(|(_, cached)| cached.fetched_at)
                .map(|(url, _)| url.clone());
            if let Some(oldest) = oldest {
                keys.remove(&oldest);
            }
        }
        keys.insert(url.to_owned(), key);
    }

    async fn key(
        &self,
        providers: &Providers,
        url: Url,
        now_unix: i64,
    ) -> Result<Arc<Vec<u8>>, ProviderError> {
        let name = url.as_str().to_owned();
        if let Some(key) = self.cached(&name, Instant::now(), now_unix) {
            return Ok(key);
        }
        let _fetching = self.fetch.lock().await;
        if let Some(key) = self.cached(&name, Instant::now(), now_unix) {
            return Ok(key);
        }
        let reply = providers.http.get(&providers.gates.gamecenter, url).await?;
        if !reply.is_ok() {
            // The URL is the client's: no certificate there is a bad proof.
            return Err(ProviderError::Refused(
                PROVIDER,
                format!("no certificate at the public key URL ({})", reply.status),
            ));
        }
        let (key, not_after) = parse_certificate(&reply.body, now_unix)
            .map_err(|why| ProviderError::Refused(PROVIDER, why))?;
        let key = Arc::new(key);
        self.store(
            &name,
            CachedKey {
                key: Arc::clone(&key),
                not_after,
                fetched_at: Instant::now(),
            },
        );
        Ok(key)
    }
}

pub(super) async fn verify(
    providers: &Providers,
    proof: Proof<'_>,
) -> Result<ProviderProfile, ProviderError> {
    let config = &providers.config.gamecenter;
    let refused = |why: String| ProviderError::Refused(PROVIDER, why);
    if proof.player_id.is_empty() || proof.player_id.len() > MAX_ID_CHARS {
        return Err(refused("player id empty or too long".into()));
    }
    if proof.bundle_id.len() > MAX_ID_CHARS {
        return Err(refused("bundle id too long".into()));
    }
    if !config.bundle_ids.is_empty() && !config.bundle_ids.iter().any(|b| b == proof.bundle_id) {
        return Err(refused(format!(
            "bundle id {:?} is not one of gamecenter.bundle_ids",
            proof.bundle_id
        )));
    }
    let now = jsonwebtoken::get_current_timestamp() as i64;
    check_timestamp(proof.timestamp, now, config.max_age_sec).map_err(refused)?;
    let url = allowed_key_url(proof.public_key_url, &config.key_url_hosts).map_err(refused)?;
    if proof.salt.len() > MAX_SALT_CHARS || proof.signature.len() > MAX_SIGNATURE_CHARS {
        return Err(refused("salt or signature too long".into()));
    }
    let salt = STANDARD
        .decode(proof.salt)
        .map_err(|e| refused(format!("salt not base64: {e}")))?;
    let signature = STANDARD
        .decode(proof.signature)
        .map_err(|e| refused(format!("signature not base64: {e}")))?;

    let key = providers.gamecenter_keys.key(providers, url, now).await?;
    let payload = signed_payload(proof.player_id, proof.bundle_id, proof.timestamp, &salt);
    ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        key.as_slice(),
    )
    .verify(&payload, &signature)
    .map_err(|_| refused("signature does not match the certificate".into()))?;
    profile(PROVIDER, proof.player_id.to_owned(), None, None, None)
}

/// What Game Center signs: player id ‖ bundle id ‖ timestamp (big-endian u64) ‖ salt.
pub fn signed_payload(player_id: &str, bundle_id: &str, timestamp: i64, salt: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(player_id.len() + bundle_id.len() + 8 + salt.len());
    payload.extend_from_slice(player_id.as_bytes());
    payload.extend_from_slice(bundle_id.as_bytes());
    // As Nakama: the client's value, as an unsigned 64-bit number.
    payload.extend_from_slice(&(timestamp as u64).to_be_bytes());
    payload.extend_from_slice(salt);
    payload
}

/// Refuses a timestamp (seconds, or milliseconds as Apple gives it) further than `max_age_sec`
/// from `now` (Unix seconds); 0 accepts any.
pub fn check_timestamp(timestamp: i64, now: i64, max_age_sec: u64) -> Result<(), String> {
    if max_age_sec == 0 {
        return Ok(());
    }
    let seconds = if timestamp.unsigned_abs() > MILLISECONDS_ABOVE as u64 {
        timestamp / 1000
    } else {
        timestamp
    };
    if now.saturating_sub(seconds).unsigned_abs() > max_age_sec {
        return Err(format!(
            "signature timestamp {seconds} is more than {max_age_sec} s from now"
        ));
    }
    Ok(())
}

/// The public key URL if it may be fetched: HTTPS (or plain HTTP to a listed loopback
/// address), a host in `hosts` or under one of them, no credentials, a path, no query.
pub fn allowed_key_url(raw: &str, hosts: &[String]) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("public key URL unreadable: {e}"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("public key URL carries credentials".into());
    }
    if url.path().is_empty() || url.path() == "/" {
        return Err("public key URL has no path".into());
    }
    // Apple's URLs have none; refusing them keeps one certificate from filling the cache under
    // many names.
    if url.query().is_some() || url.fragment().is_some() {
        return Err("public key URL has a query or a fragment".into());
    }
    let host = url
        .host()
        .ok_or_else(|| "public key URL has no host".to_string())?;
    let loopback = match &host {
        Host::Domain(domain) => domain.eq_ignore_ascii_case("localhost"),
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => ip.is_loopback(),
    };
    let listed = hosts.iter().any(|allowed| {
        let allowed = allowed
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.');
        match &host {
            Host::Domain(domain) => {
                let domain = domain.to_ascii_lowercase();
                let allowed = allowed.to_ascii_lowercase();
                !allowed.is_empty()
                    && (domain == allowed || domain.ends_with(&format!(".{allowed}")))
            }
            Host::Ipv4(ip) => allowed.parse::<IpAddr>() == Ok(IpAddr::V4(*ip)),
            Host::Ipv6(ip) => allowed.parse::<IpAddr>() == Ok(IpAddr::V6(*ip)),
        }
    });
    if !listed {
        return Err(format!(
            "public key URL host {host} is not in gamecenter.key_url_hosts"
        ));
    }
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        scheme => Err(format!("public key URL scheme {scheme} is not https")),
    }
}

/// The RSA public key of a certificate (DER, or PEM) valid at `now` (Unix seconds), and when it
/// expires.
pub fn parse_certificate(body: &[u8], now: i64) -> Result<(Vec<u8>, i64), String> {
    let pem;
    let der = if body.starts_with(b"-----BEGIN") {
        pem = x509_parser::pem::parse_x509_pem(body)
            .map_err(|e| format!("certificate PEM unreadable: {e}"))?
            .1;
        &pem.contents[..]
    } else {
        body
    };
    let (_, certificate) =
        X509Certificate::from_der(der).map_err(|e| format!("certificate unreadable: {e}"))?;
    let validity = certificate.validity();
    let (not_before, not_after) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    if now < not_before || now > not_after {
        return Err("certificate not valid now".into());
    }
    let key = certificate.public_key();
    if key.algorithm.algorithm != OID_PKCS1_RSAENCRYPTION {
        return Err("certificate's key is not RSA".into());
    }
    Ok((key.subject_public_key.data.to_vec(), not_after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_payload_is_player_bundle_big_endian_timestamp_and_salt() {
        let payload = signed_payload("G:1", "com.x", 0x0102_0304_0506_0708, &[0xAA, 0xBB]);
        let mut expected = b"G:1com.x".to_vec();
        expected.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 0xAA, 0xBB]);
        assert_eq!(payload, expected);
        // Apple's millisecond timestamp, as sent.
        let payload = signed_payload("", "", 1_700_000_000_123, &[]);
        assert_eq!(payload, 1_700_000_000_123u64.to_be_bytes());
    }

    #[test]
    fn timestamps_too_far_from_now_are_refused_in_seconds_or_milliseconds() {
        let now = 1_700_000_000;
        assert!(check_timestamp(now - 3600, now, 3600).is_ok());
        assert!(check_timestamp(now - 3601, now, 3600).is_err());
        assert!(check_timestamp(now + 3601, now, 3600).is_err());
        assert!(check_timestamp((now - 10) * 1000, now, 3600).is_ok());
        assert!(check_timestamp((now - 7200) * 1000, now, 3600).is_err());
        assert!(check_timestamp(0, now, 0).is_ok());
    }

    #[test]
    fn key_urls_must_be_https_on_the_listed_hosts() {
        let apple = vec!["apple.com".to_string()];
        for good in [
            "https://static.gc.apple.com/public-key/gc-prod-10.cer",
            "https://sandbox.gc.apple.com/public-key/gc-sb-2.cer",
            "https://APPLE.com/key.cer",
        ] {
            assert!(allowed_key_url(good, &apple).is_ok(), "{good}");
        }
        for bad in [
            "http://static.gc.apple.com/public-key/gc-prod-10.cer",
            "https://static.gc.apple.com.evil.example/key.cer",
            "https://evilapple.com/key.cer",
            "https://static.gc.apple.com/",
            "https://user:pw@static.gc.apple.com/key.cer",
            "https://127.0.0.1/key.cer",
            "https://static.gc.apple.com/public-key/gc-prod-10.cer?v=1",
            "https://static.gc.apple.com/public-key/gc-prod-10.cer#x",
            "file:///etc/passwd",
            "not a url",
        ] {
            assert!(allowed_key_url(bad, &apple).is_err(), "{bad}");
        }
        let local = vec!["127.0.0.1".to_string(), "::1".to_string()];
        assert!(allowed_key_url("http://127.0.0.1:8080/key.cer", &local).is_ok());
        assert!(allowed_key_url("http://[::1]:8080/key.cer", &local).is_ok());
        assert!(allowed_key_url("http://127.0.0.2/key.cer", &local).is_err());
        // Plain HTTP only to a loopback address, even when the host is listed.
        let lan = vec!["10.0.0.5".to_string()];
        assert!(allowed_key_url("http://10.0.0.5/key.cer", &lan).is_err());
        assert!(allowed_key_url("https://10.0.0.5/key.cer", &lan).is_ok());
    }

    #[test]
    fn certificates_must_parse_hold_an_rsa_key_and_be_valid_now() {
        assert!(parse_certificate(b"garbage", 0).is_err());
        assert!(parse_certificate(b"-----BEGIN CERTIFICATE-----\nAAAA\n", 0).is_err());

        // rcgen makes ECDSA keys: read (DER and PEM alike), then refused for not being RSA.
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(vec!["gc.example".into()]).expect("params");
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2030, 1, 1);
        let certificate = params.self_signed(&key).expect("certificate");
        let in_2025 = 1_750_000_000;
        for body in [certificate.der().to_vec(), certificate.pem().into_bytes()] {
            let error = parse_certificate(&body, in_2025).unwrap_err();
            assert!(error.contains("not RSA"), "{error}");
        }
        let in_2031 = 1_930_000_000;
        let error = parse_certificate(certificate.der(), in_2031).unwrap_err();
        assert!(error.contains("not valid now"), "{error}");
    }
}
