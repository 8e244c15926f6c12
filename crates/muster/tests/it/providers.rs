//! The identity providers' checks (`muster::accounts::providers`) against the stand-in of
//! `support::providers`: each provider's valid proof gives its player, every kind of bad proof
//! is refused, a provider that is down fails only its own logins (timeout, then its breaker
//! answers without a call), key sets are cached and refetched once for a new key id, and
//! missing settings say so.

use std::time::{Duration, Instant};

use muster::accounts::providers::{
    Provider, ProviderError, ProviderProfile, ProviderProof, Providers, SocialConfig,
};
use serde_json::json;

use crate::support::eventually;
use crate::support::providers::*;

fn apple(token: String) -> ProviderProof {
    ProviderProof::Apple { token }
}

fn google(token: String) -> ProviderProof {
    ProviderProof::Google { token }
}

fn facebook(token: &str) -> ProviderProof {
    ProviderProof::Facebook {
        token: token.to_string(),
    }
}

fn steam(ticket: &str) -> ProviderProof {
    ProviderProof::Steam {
        token: ticket.to_string(),
    }
}

fn instant(signed_player_info: String) -> ProviderProof {
    ProviderProof::FacebookInstantGame { signed_player_info }
}

/// Refused by `provider`, for a reason whose words include `because`.
#[track_caller]
fn assert_refused<T: std::fmt::Debug>(
    result: Result<T, ProviderError>,
    provider: Provider,
    because: &str,
) {
    match result {
        Err(ProviderError::Refused(p, why)) if p == provider => {
            assert!(
                why.contains(because),
                "refused for {why:?}, not {because:?}"
            )
        }
        other => panic!("expected {provider:?} refused, got {other:?}"),
    }
}

#[track_caller]
fn assert_unavailable<T: std::fmt::Debug>(result: Result<T, ProviderError>, provider: Provider) {
    match result {
        Err(ProviderError::Unavailable(p, _)) if p == provider => {}
        other => panic!("expected {provider:?} unavailable, got {other:?}"),
    }
}

#[track_caller]
fn assert_not_configured<T: std::fmt::Debug>(result: Result<T, ProviderError>, provider: Provider) {
    match result {
        Err(ProviderError::NotConfigured(p)) if p == provider => {}
        other => panic!("expected {provider:?} not configured, got {other:?}"),
    }
}

#[tokio::test]
async fn apple_identity_tokens_give_the_player_and_keys_are_cached() {
    let standin = ProviderStandIn::start().await;
    let providers = Providers::new(standin.social_config());

    let profile = providers
        .verify(&apple(apple_token(
            "001234.apple",
            Some("p@privaterelay.appleid.com"),
        )))
        .await
        .expect("valid token");
    assert_eq!(
        profile,
        ProviderProfile {
            id: "001234.apple".into(),
            email: Some("p@privaterelay.appleid.com".into()),
            display_name: None,
            avatar_url: None,
        }
    );
    let profile = providers
        .verify(&apple(apple_token("005678.apple", None)))
        .await
        .expect("valid token");
    assert_eq!(profile.id, "005678.apple");
    assert_eq!(profile.email, None);
    assert_eq!(
        standin.requests(APPLE_KEYS),
        1,
        "the key set is fetched once"
    );

    // A forged signature, another app's audience, an expired token, another issuer.
    let forged = jwt(
        TestKey::Other,
        KID,
        &id_claims(APPLE_ISSUER, APPLE_BUNDLE_ID, "x"),
    );
    assert_refused(
        providers.verify(&apple(forged)).await,
        Provider::Apple,
        "InvalidSignature",
    );
    let other_app = jwt(
        TestKey::Provider,
        KID,
        &id_claims(APPLE_ISSUER, "com.other.app", "x"),
    );
    assert_refused(
        providers.verify(&apple(other_app)).await,
        Provider::Apple,
        "InvalidAudience",
    );
    let mut claims = id_claims(APPLE_ISSUER, APPLE_BUNDLE_ID, "x");
    claims["exp"] = json!(now() - 3600);
    let expired = jwt(TestKey::Provider, KID, &claims);
    assert_refused(
        providers.verify(&apple(expired)).await,
        Provider::Apple,
        "ExpiredSignature",
    );
    let other_issuer = jwt(
        TestKey::Provider,
        KID,
        &id_claims("https://evil.example", APPLE_BUNDLE_ID, "x"),
    );
    assert_refused(
        providers.verify(&apple(other_issuer)).await,
        Provider::Apple,
        "InvalidIssuer",
    );
    assert_refused(
        providers.verify(&apple("not-a-jwt".into())).await,
        Provider::Apple,
        "not a JWT",
    );
    assert_eq!(standin.requests(APPLE_KEYS), 1, "refusals need no refetch");
}

#[tokio::test]
async fn google_id_tokens_give_the_player_and_profile() {
    let standin = ProviderStandIn::start().await;
    let providers = Providers::new(standin.social_config());

    let token = google_token(
        "1100220033",
        "ada@example.com",
        "Ada",
        "https://lh3.example/ada.png",
    );
    let profile = providers.verify(&google(token)).await.expect("valid token");
    assert_eq!(
        profile,
        ProviderProfile {
            id: "1100220033".into(),
            email: Some("ada@example.com".into()),
            display_name: Some("Ada".into()),
            avatar_url: Some("https://lh3.example/ada.png".into()),
        }
    );
    // Both of Google's issuer spellings.
    let plain_issuer = jwt(
        TestKey::Provider,
        KID,
        &id_claims("accounts.google.com", GOOGLE_CLIENT_ID, "1100220044"),
    );
    assert_eq!(
        providers
            .verify(&google(plain_issuer))
            .await
            .expect("valid")
            .id,
        "1100220044"
    );

    let other_client = jwt(
        TestKey::Provider,
        KID,
        &id_claims(
            GOOGLE_ISSUER,
            "someone-else.apps.googleusercontent.com",
            "x",
        ),
    );
    assert_refused(
        providers.verify(&google(other_client)).await,
        Provider::Google,
        "InvalidAudience",
    );
    let forged = jwt(
        TestKey::Other,
        KID,
        &id_claims(GOOGLE_ISSUER, GOOGLE_CLIENT_ID, "x"),
    );
    assert_refused(
        providers.verify(&google(forged)).await,
        Provider::Google,
        "InvalidSignature",
    );
    let mut claims = id_claims(GOOGLE_ISSUER, GOOGLE_CLIENT_ID, "x");
    claims["exp"] = json!(now() - 3600);
    assert_refused(
        providers
            .verify(&google(jwt(TestKey::Provider, KID, &claims)))
            .await,
        Provider::Google,
        "ExpiredSignature",
    );
    // An unverified email is not imported.
    let mut claims = id_claims(GOOGLE_ISSUER, GOOGLE_CLIENT_ID, "1100220055");
    claims["email"] = json!("unverified@example.com");
    claims["email_verified"] = json!(false);
    let profile = providers
        .verify(&google(jwt(TestKey::Provider, KID, &claims)))
        .await
        .expect("valid token");
    assert_eq!(profile.email, None);
    assert_eq!(standin.requests(GOOGLE_KEYS), 1);
}

#[tokio::test]
async fn facebook_access_tokens_go_through_the_graph_api() {
    let standin = ProviderStandIn::start().await;
    standin.add_graph_user(
        "EAAB-good-token",
        "10150000001",
        "Fay",
        "fay@example.com",
        "https://graph.example/fay.jpg",
    );
    let providers = Providers::new(standin.social_config());

    let profile = providers
        .verify(&facebook("EAAB-good-token"))
        .await
        .expect("valid token");
    assert_eq!(
        profile,
        ProviderProfile {
            id: "10150000001".into(),
            email: Some("fay@example.com".into()),
            display_name: Some("Fay".into()),
            avatar_url: Some("https://graph.example/fay.jpg".into()),
        }
    );
    assert_refused(
        providers.verify(&facebook("EAAB-unknown")).await,
        Provider::Facebook,
        "Graph API refused",
    );
    assert_refused(
        providers.verify(&facebook("")).await,
        Provider::Facebook,
        "empty",
    );
    assert_eq!(standin.requests(GRAPH_ME), 2, "an empty token is not sent");

    // Plain Graph tokens need no settings, as in Nakama.
    let mut config = SocialConfig::default();
    config.facebook.graph_url = standin.url(GRAPH);
    let unconfigured = Providers::new(config);
    assert_eq!(
        unconfigured
            .verify(&facebook("EAAB-good-token"))
            .await
            .expect("valid token")
            .id,
        "10150000001"
    );
}

#[tokio::test]
async fn facebook_limited_login_tokens_are_checked_against_facebooks_keys() {
    let standin = ProviderStandIn::start().await;
    let providers = Providers::new(standin.social_config());

    let token = facebook_limited_login_token(
        "10150000002",
        "Lim",
        "lim@example.com",
        "https://graph.example/lim.jpg",
    );
    let profile = providers
        .verify(&facebook(&token))
        .await
        .expect("valid token");
    assert_eq!(
        profile,
        ProviderProfile {
            id: "10150000002".into(),
            email: Some("lim@example.com".into()),
            display_name: Some("Lim".into()),
            avatar_url: Some("https://graph.example/lim.jpg".into()),
        }
    );
    assert_eq!(standin.requests(FACEBOOK_KEYS), 1);
    assert_eq!(
        standin.requests(GRAPH_ME),
        0,
        "a JWT never goes to the Graph API"
    );

    let other_app = jwt(
        TestKey::Provider,
        KID,
        &id_claims(FACEBOOK_ISSUER, "999999", "10150000002"),
    );
    assert_refused(
        providers.verify(&facebook(&other_app)).await,
        Provider::Facebook,
        "InvalidAudience",
    );
    let forged = jwt(
        TestKey::Other,
        KID,
        &id_claims(FACEBOOK_ISSUER, FACEBOOK_APP_ID, "10150000002"),
    );
    assert_refused(
        providers.verify(&facebook(&forged)).await,
        Provider::Facebook,
        "InvalidSignature",
    );
    let mut claims = id_claims(FACEBOOK_ISSUER, FACEBOOK_APP_ID, "10150000002");
    claims["exp"] = json!(now() - 3600);
    assert_refused(
        providers
            .verify(&facebook(&jwt(TestKey::Provider, KID, &claims)))
            .await,
        Provider::Facebook,
        "ExpiredSignature",
    );
    assert_eq!(standin.requests(GRAPH_ME), 0);
}

#[tokio::test]
async fn instant_games_signed_player_info_is_checked_with_the_app_secret() {
    let standin = ProviderStandIn::start().await;
    let providers = Providers::new(standin.social_config());

    let signed = instant_game_signed_info("7001", now(), INSTANT_APP_SECRET);
    let profile = providers.verify(&instant(signed)).await.expect("valid");
    assert_eq!(profile.id, "7001");

    let forged = instant_game_signed_info("7001", now(), "not-the-app-secret");
    assert_refused(
        providers.verify(&instant(forged)).await,
        Provider::FacebookInstantGame,
        "does not match",
    );
    assert_refused(
        providers.verify(&instant("garbage".into())).await,
        Provider::FacebookInstantGame,
        "not <signature>.<payload>",
    );

    // With an age set, old signed info is refused.
    let mut config = standin.social_config();
    config.facebook_instant_game.max_age_sec = 600;
    let strict = Providers::new(config);
    let old = instant_game_signed_info("7001", now() - 3600, INSTANT_APP_SECRET);
    assert_refused(
        strict.verify(&instant(old)).await,
        Provider::FacebookInstantGame,
        "more than 600 s",
    );
    let fresh = instant_game_signed_info("7001", now() - 60, INSTANT_APP_SECRET);
    assert_eq!(
        strict.verify(&instant(fresh)).await.expect("valid").id,
        "7001"
    );
}

#[tokio::test]
async fn steam_tickets_go_through_steams_web_api() {
    let standin = ProviderStandIn::start().await;
    standin.add_steam_ticket("14000000abcdef", "76561197960287930");
    let providers = Providers::new(standin.social_config());

    let profile = providers
        .verify(&steam("14000000abcdef"))
        .await
        .expect("valid ticket");
    assert_eq!(
        profile,
        ProviderProfile {
            id: "76561197960287930".into(),
            ..ProviderProfile::default()
        }
    );
    assert_refused(
        providers.verify(&steam("14000000ffff")).await,
        Provider::Steam,
        "Invalid ticket",
    );
    assert_refused(
        providers.verify(&steam("not hex!")).await,
        Provider::Steam,
        "not hex",
    );
    assert_eq!(
        standin.requests(STEAM_AUTHENTICATE),
        2,
        "a ticket that is not hex is not sent"
    );

    // A wrong publisher key is the server's fault, not the player's.
    let mut config = standin.social_config();
    config.steam.publisher_key = "wrong-key".into();
    let misconfigured = Providers::new(config);
    assert_unavailable(
        misconfigured.verify(&steam("14000000abcdef")).await,
        Provider::Steam,
    );
}

#[tokio::test]
async fn gamecenter_signatures_are_checked_with_apples_certificate() {
    let standin = ProviderStandIn::start().await;
    let providers = Providers::new(standin.social_config());

    let profile = providers
        .verify(&standin.gamecenter_proof(TestKey::Provider, "G:1234567"))
        .await
        .expect("valid signature");
    assert_eq!(profile.id, "G:1234567");
    providers
        .verify(&standin.gamecenter_proof(TestKey::Provider, "T:987"))
        .await
        .expect("valid signature");
    assert_eq!(
        standin.requests(GAMECENTER_KEY),
        1,
        "the certificate is cached"
    );

    assert_refused(
        providers
            .verify(&standin.gamecenter_proof(TestKey::Other, "G:1234567"))
            .await,
        Provider::GameCenter,
        "does not match",
    );

    let proof = |change: &dyn Fn(&mut ProviderProof)| {
        let mut proof = standin.gamecenter_proof(TestKey::Provider, "G:1234567");
        change(&mut proof);
        proof
    };
    // Signed for another player than the one claimed.
    let other_player = proof(&|p| {
        if let ProviderProof::GameCenter { player_id, .. } = p {
            *player_id = "G:666".into();
        }
    });
    assert_refused(
        providers.verify(&other_player).await,
        Provider::GameCenter,
        "does not match",
    );
    // Key URLs off the allowed hosts, or not https, are never fetched.
    for url in [
        "https://evil.example/public-key/gc-prod-10.cer".to_string(),
        standin
            .url(GAMECENTER_KEY)
            .replace("127.0.0.1", "localhost"),
        standin.url(GAMECENTER_KEY).replace("http://", "ftp://"),
    ] {
        let off_hosts = proof(&|p| {
            if let ProviderProof::GameCenter { public_key_url, .. } = p {
                public_key_url.clone_from(&url);
            }
        });
        assert_refused(
            providers.verify(&off_hosts).await,
            Provider::GameCenter,
            "public key URL",
        );
    }
    let mut apple_only = standin.social_config();
    apple_only.gamecenter.key_url_hosts = vec!["apple.com".into()];
    assert_refused(
        Providers::new(apple_only)
            .verify(&standin.gamecenter_proof(TestKey::Provider, "G:1234567"))
            .await,
        Provider::GameCenter,
        "key_url_hosts",
    );
    // Another game's bundle id (even correctly signed), and an old signature.
    let bundle = "com.other.game";
    let salt = [7u8; 8];
    let timestamp = now() * 1000;
    let other_game = ProviderProof::GameCenter {
        player_id: "G:1234567".into(),
        bundle_id: bundle.into(),
        timestamp_seconds: timestamp,
        salt: base64_std(&salt),
        signature: gamecenter_signature(TestKey::Provider, "G:1234567", bundle, timestamp, &salt),
        public_key_url: standin.url(GAMECENTER_KEY),
    };
    assert_refused(
        providers.verify(&other_game).await,
        Provider::GameCenter,
        "bundle id",
    );
    let old_timestamp = (now() - 7200) * 1000;
    let old = ProviderProof::GameCenter {
        player_id: "G:1234567".into(),
        bundle_id: APPLE_BUNDLE_ID.into(),
        timestamp_seconds: old_timestamp,
        salt: base64_std(&salt),
        signature: gamecenter_signature(
            TestKey::Provider,
            "G:1234567",
            APPLE_BUNDLE_ID,
            old_timestamp,
            &salt,
        ),
        public_key_url: standin.url(GAMECENTER_KEY),
    };
    assert_refused(
        providers.verify(&old).await,
        Provider::GameCenter,
        "timestamp",
    );
    assert_eq!(standin.requests(GAMECENTER_KEY), 1);
}

fn base64_std(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn an_unknown_key_id_refetches_the_key_set_once() {
    let standin = ProviderStandIn::start().await;
    let providers = Providers::new(standin.social_config());
    let token_with_kid = |kid: &str| {
        jwt(
            TestKey::Provider,
            kid,
            &id_claims(APPLE_ISSUER, APPLE_BUNDLE_ID, "001.rotation"),
        )
    };

    providers
        .verify(&apple(token_with_kid(KID)))
        .await
        .expect("valid token");
    providers
        .verify(&apple(token_with_kid(KID)))
        .await
        .expect("valid token");
    assert_eq!(standin.requests(APPLE_KEYS), 1, "cached between logins");

    // Apple rotates its keys: a token naming the new key refetches the set.
    standin.add_kid("rotated-key");
    providers
        .verify(&apple(token_with_kid("rotated-key")))
        .await
        .expect("the new key is found");
    assert_eq!(standin.requests(APPLE_KEYS), 2);

    // A flood of made-up key ids costs no further fetch.
    for i in 0..20 {
        assert_refused(
            providers
                .verify(&apple(token_with_kid(&format!("bogus-{i}"))))
                .await,
            Provider::Apple,
            "key id",
        );
    }
    assert_eq!(standin.requests(APPLE_KEYS), 2);
    // The known keys still work.
    providers
        .verify(&apple(token_with_kid(KID)))
        .await
        .expect("valid token");
    assert_eq!(standin.requests(APPLE_KEYS), 2);

    // An unknown id right after a plain fetch refetches once too.
    providers
        .verify(&google(google_token(
            "1",
            "a@example.com",
            "A",
            "https://p.example/a",
        )))
        .await
        .expect("valid token");
    let bogus = |kid: &str| {
        google(jwt(
            TestKey::Provider,
            kid,
            &id_claims(GOOGLE_ISSUER, GOOGLE_CLIENT_ID, "1"),
        ))
    };
    assert_refused(
        providers.verify(&bogus("bogus-a")).await,
        Provider::Google,
        "key id",
    );
    assert_refused(
        providers.verify(&bogus("bogus-b")).await,
        Provider::Google,
        "key id",
    );
    assert_eq!(standin.requests(GOOGLE_KEYS), 2);
}

#[tokio::test]
async fn a_provider_down_fails_its_logins_within_the_timeout_then_its_breaker_answers_at_once() {
    let standin = ProviderStandIn::start().await;
    standin.add_steam_ticket("14000000abcdef", "76561197960287930");
    let timeout = Duration::from_millis(400);
    let mut config = standin.social_config();
    config.timeout_ms = timeout.as_millis() as u64;
    config.breaker_failures = 2;
    config.breaker_open_ms = 500;
    let providers = Providers::new(config);

    standin.down();
    for attempt in 1..=2 {
        let started = Instant::now();
        assert_unavailable(
            providers.verify(&steam("14000000abcdef")).await,
            Provider::Steam,
        );
        let took = started.elapsed();
        assert!(
            took >= timeout,
            "attempt {attempt} waited for the timeout: {took:?}"
        );
        assert!(
            took < timeout + Duration::from_secs(2),
            "attempt {attempt} gave up at the timeout: {took:?}"
        );
    }
    assert_eq!(standin.requests(STEAM_AUTHENTICATE), 2);

    // The breaker is open: an answer at once, without a request.
    let started = Instant::now();
    let result = providers.verify(&steam("14000000abcdef")).await;
    assert!(started.elapsed() < timeout, "{:?}", started.elapsed());
    match &result {
        Err(ProviderError::Unavailable(Provider::Steam, why)) => {
            assert!(why.contains("breaker"), "{why}")
        }
        other => panic!("expected the breaker's answer, got {other:?}"),
    }
    assert_eq!(standin.requests(STEAM_AUTHENTICATE), 2);
    assert_unavailable(
        providers.steam_friends("76561197960287930").await,
        Provider::Steam,
    );
    assert_eq!(standin.requests(STEAM_FRIENDS), 0);

    // Other providers are not affected: Instant Games needs no call at all.
    let signed = instant_game_signed_info("7001", now(), INSTANT_APP_SECRET);
    assert_eq!(
        providers.verify(&instant(signed)).await.expect("valid").id,
        "7001"
    );

    // Back up: once the breaker lets its probe through, logins work again. Until then every
    // call is answered by the breaker, so Steam sees exactly one more request.
    standin.up();
    eventually("the breaker's probe succeeds", || async {
        providers.verify(&steam("14000000abcdef")).await.is_ok()
    })
    .await;
    assert_eq!(standin.requests(STEAM_AUTHENTICATE), 3);
    providers
        .verify(&steam("14000000abcdef"))
        .await
        .expect("closed again");
    assert_eq!(standin.requests(STEAM_AUTHENTICATE), 4);
}

#[tokio::test]
async fn calls_in_flight_to_one_provider_are_bounded() {
    let standin = ProviderStandIn::start().await;
    for i in 0..4 {
        standin.add_graph_user(&format!("token-{i}"), &format!("{i}"), "F", "", "");
    }
    let mut config = standin.social_config();
    config.timeout_ms = 10_000;
    config.max_in_flight = 2;
    let providers = Providers::new(config);

    // Held by the stand-in: two calls reach it, the other two wait for a slot.
    standin.down();
    let calls: Vec<_> = (0..4)
        .map(|i| {
            let providers = providers.clone();
            tokio::spawn(async move { providers.verify(&facebook(&format!("token-{i}"))).await })
        })
        .collect();
    eventually("two calls in flight", || async {
        standin.requests(GRAPH_ME) == 2
    })
    .await;
    standin.up();
    for call in futures_util::future::join_all(calls).await {
        call.expect("joins")
            .expect("answered once the provider is back");
    }
    assert_eq!(standin.requests(GRAPH_ME), 4);
    assert_eq!(
        standin.max_concurrent(),
        2,
        "never more than max_in_flight at once"
    );
}

#[tokio::test]
async fn a_provider_without_its_settings_is_not_configured() {
    let standin = ProviderStandIn::start().await;
    standin.add_steam_ticket("14000000abcdef", "76561197960287930");
    let mut config = SocialConfig::default();
    // Every URL points at the stand-in, so only the missing settings can refuse.
    let full = standin.social_config();
    config.apple.keys_url = full.apple.keys_url;
    config.google.keys_url = full.google.keys_url;
    config.facebook.graph_url = full.facebook.graph_url;
    config.facebook.limited_login_keys_url = full.facebook.limited_login_keys_url;
    config.steam.api_url = full.steam.api_url;
    let providers = Providers::new(config.clone());

    assert_not_configured(
        providers.verify(&apple(apple_token("001", None))).await,
        Provider::Apple,
    );
    assert_not_configured(
        providers
            .verify(&google(google_token(
                "1",
                "a@example.com",
                "A",
                "https://p.example/a",
            )))
            .await,
        Provider::Google,
    );
    let limited_login = facebook_limited_login_token("1", "L", "l@example.com", "https://p/l");
    assert_not_configured(
        providers.verify(&facebook(&limited_login)).await,
        Provider::Facebook,
    );
    assert_not_configured(
        providers
            .verify(&instant(instant_game_signed_info(
                "7001",
                now(),
                INSTANT_APP_SECRET,
            )))
            .await,
        Provider::FacebookInstantGame,
    );
    assert_not_configured(
        providers.verify(&steam("14000000abcdef")).await,
        Provider::Steam,
    );
    assert_not_configured(
        providers.steam_friends("76561197960287930").await,
        Provider::Steam,
    );
    // A publisher key without an app id is not enough.
    config.steam.publisher_key = STEAM_PUBLISHER_KEY.into();
    assert_not_configured(
        Providers::new(config)
            .verify(&steam("14000000abcdef"))
            .await,
        Provider::Steam,
    );
    for path in [
        APPLE_KEYS,
        GOOGLE_KEYS,
        FACEBOOK_KEYS,
        STEAM_AUTHENTICATE,
        STEAM_FRIENDS,
    ] {
        assert_eq!(
            standin.requests(path),
            0,
            "{path}: no call without settings"
        );
    }
}

#[tokio::test]
async fn facebook_and_steam_friends_are_listed() {
    let standin = ProviderStandIn::start().await;
    standin.set_graph_friends("EAAB-friendly", &["11", "12", "13", "14", "15"]);
    standin.set_steam_friends(
        "76561197960287930",
        &["76561197960287931", "76561197960287932"],
    );
    let providers = Providers::new(standin.social_config());

    let friends = providers
        .facebook_friends("EAAB-friendly")
        .await
        .expect("friends");
    assert_eq!(friends, ["11", "12", "13", "14", "15"]);
    assert_eq!(standin.requests(GRAPH_FRIENDS), 3, "pages of {GRAPH_PAGE}");
    assert_refused(
        providers.facebook_friends("EAAB-unknown").await,
        Provider::Facebook,
        "Graph API refused",
    );

    let mut config = standin.social_config();
    config.facebook.max_friend_pages = 2;
    let bounded = Providers::new(config);
    assert_eq!(
        bounded
            .facebook_friends("EAAB-friendly")
            .await
            .expect("friends"),
        ["11", "12", "13", "14"],
        "cut at max_friend_pages"
    );

    let friends = providers
        .steam_friends("76561197960287930")
        .await
        .expect("friends");
    assert_eq!(friends, ["76561197960287931", "76561197960287932"]);
    assert_refused(
        providers.steam_friends("76561197960287999").await,
        Provider::Steam,
        "private",
    );
    assert_refused(
        providers.steam_friends("not-an-id").await,
        Provider::Steam,
        "not a Steam id",
    );
}
