//! A stand-in for every identity provider, on 127.0.0.1:0: Apple's, Google's and Facebook
//! Limited Login's key sets (JWKS, one test RSA key under each key id served), the Graph API's
//! `/me` and `/me/friends` by access token, Steam's `AuthenticateUserTicket` and
//! `GetFriendList`, and a Game Center certificate (DER). It counts the requests to each path,
//! and can go down (hold every request unanswered until it comes back up).
//!
//! With it come the signers of the proofs its keys match: RS256 JWTs with chosen claims,
//! Instant Games' signed player info, Game Center signatures. `social_config()` points every
//! provider's URL at the stand-in and fills the settings those proofs pass.
//!
//! The keys in `keys/` were made with `openssl genpkey -algorithm RSA -pkeyopt
//! rsa_keygen_bits:2048` for these tests only: they sign nothing outside them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use axum::extract::{Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use hmac::{Hmac, Mac};
use jsonwebtoken::jwk::{Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use muster::accounts::providers::{ProviderProof, SocialConfig};
use parking_lot::Mutex;
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The test key the stand-in's key sets and certificate hold.
const PROVIDER_PEM: &str = include_str!("keys/provider.pem");
/// Another key, which the stand-in knows nothing of: what a forger signs with.
const OTHER_PEM: &str = include_str!("keys/other.pem");

/// The settings `social_config()` fills, which the signers below use.
pub const APPLE_BUNDLE_ID: &str = "com.example.muster";
pub const GOOGLE_CLIENT_ID: &str = "muster-test.apps.googleusercontent.com";
pub const FACEBOOK_APP_ID: &str = "100200300";
pub const INSTANT_APP_SECRET: &str = "instant-games-test-secret";
pub const STEAM_PUBLISHER_KEY: &str = "steam-test-publisher-key";
pub const STEAM_APP_ID: u32 = 480;
/// The key id the stand-in's key sets serve the test key under.
pub const KID: &str = "test-key-1";

pub const APPLE_ISSUER: &str = "https://appleid.apple.com";
pub const GOOGLE_ISSUER: &str = "https://accounts.google.com";
pub const FACEBOOK_ISSUER: &str = "https://www.facebook.com";

/// The stand-in's paths.
pub const APPLE_KEYS: &str = "/apple/auth/keys";
pub const GOOGLE_KEYS: &str = "/google/oauth2/v3/certs";
pub const FACEBOOK_KEYS: &str = "/facebook/.well-known/oauth/openid/jwks/";
pub const GRAPH: &str = "/graph/v22.0";
pub const GRAPH_ME: &str = "/graph/v22.0/me";
pub const GRAPH_FRIENDS: &str = "/graph/v22.0/me/friends";
pub const STEAM: &str = "/steam";
pub const STEAM_AUTHENTICATE: &str = "/steam/ISteamUserAuth/AuthenticateUserTicket/v1/";
pub const STEAM_FRIENDS: &str = "/steam/ISteamUser/GetFriendList/v1/";
pub const GAMECENTER_KEY: &str = "/gamecenter/public-key/gc-test.cer";

/// Friends per `/me/friends` page.
pub const GRAPH_PAGE: usize = 2;

/// Which test key signs a proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestKey {
    /// The key the stand-in serves: proofs signed with it pass.
    Provider,
    /// A key the stand-in does not know: a forged signature.
    Other,
}

struct Keys {
    provider: EncodingKey,
    other: EncodingKey,
    /// The provider key's public half, as a JWK without a key id.
    provider_jwk: Jwk,
    /// PKCS#8 DER of each key, for ring's RSA signer.
    provider_pkcs8: Vec<u8>,
    other_pkcs8: Vec<u8>,
    /// A self-signed certificate of the provider key (DER), made with rcgen.
    certificate: Vec<u8>,
}

fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let provider = EncodingKey::from_rsa_pem(PROVIDER_PEM.as_bytes()).expect("provider key");
        let other = EncodingKey::from_rsa_pem(OTHER_PEM.as_bytes()).expect("other key");
        let provider_jwk = Jwk::from_encoding_key(&provider, Algorithm::RS256).expect("jwk");
        let provider_pair = rcgen::KeyPair::from_pem(PROVIDER_PEM).expect("rcgen key");
        let other_pair = rcgen::KeyPair::from_pem(OTHER_PEM).expect("rcgen key");
        let certificate = rcgen::CertificateParams::new(vec!["gc-test.example".to_string()])
            .expect("certificate params")
            .self_signed(&provider_pair)
            .expect("certificate")
            .der()
            .to_vec();
        Keys {
            provider,
            other,
            provider_jwk,
            provider_pkcs8: provider_pair.serialize_der(),
            other_pkcs8: other_pair.serialize_der(),
            certificate,
        }
    })
}

/// Now, in Unix seconds.
pub fn now() -> i64 {
    jsonwebtoken::get_current_timestamp() as i64
}

/// An RS256 JWT with `claims`, signed with `key`, naming `kid`.
pub fn jwt(key: TestKey, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_string());
    let key = match key {
        TestKey::Provider => &keys().provider,
        TestKey::Other => &keys().other,
    };
    jsonwebtoken::encode(&header, claims, key).expect("signs")
}

/// Claims of an ID token from `iss` for `aud`, valid for ten minutes.
pub fn id_claims(iss: &str, aud: &str, sub: &str) -> Value {
    json!({"iss": iss, "aud": aud, "sub": sub, "iat": now(), "exp": now() + 600})
}

/// A valid Sign in with Apple identity token for `sub`.
pub fn apple_token(sub: &str, email: Option<&str>) -> String {
    let mut claims = id_claims(APPLE_ISSUER, APPLE_BUNDLE_ID, sub);
    if let Some(email) = email {
        claims["email"] = json!(email);
        claims["email_verified"] = json!("true");
    }
    jwt(TestKey::Provider, KID, &claims)
}

/// A valid Google ID token for `sub`, with a profile.
pub fn google_token(sub: &str, email: &str, name: &str, picture: &str) -> String {
    let mut claims = id_claims(GOOGLE_ISSUER, GOOGLE_CLIENT_ID, sub);
    claims["azp"] = json!(GOOGLE_CLIENT_ID);
    claims["email"] = json!(email);
    claims["email_verified"] = json!(true);
    claims["name"] = json!(name);
    claims["picture"] = json!(picture);
    jwt(TestKey::Provider, KID, &claims)
}

/// A valid Facebook Limited Login token for `sub`, with a profile.
pub fn facebook_limited_login_token(sub: &str, name: &str, email: &str, picture: &str) -> String {
    let mut claims = id_claims(FACEBOOK_ISSUER, FACEBOOK_APP_ID, sub);
    claims["name"] = json!(name);
    claims["email"] = json!(email);
    claims["picture"] = json!(picture);
    claims["nonce"] = json!("n");
    jwt(TestKey::Provider, KID, &claims)
}

/// Instant Games' signed player info for `player_id`, issued at `issued_at`, signed with
/// `secret` (the configured one: [`INSTANT_APP_SECRET`]).
pub fn instant_game_signed_info(player_id: &str, issued_at: i64, secret: &str) -> String {
    let payload = json!({"algorithm": "HMAC-SHA256", "issued_at": issued_at,
                         "player_id": player_id, "request_payload": "muster"});
    let payload = URL_SAFE_NO_PAD.encode(payload.to_string());
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(payload.as_bytes());
    let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    format!("{signature}.{payload}")
}

/// Game Center's signature (base64) over player id, bundle id, timestamp and salt.
pub fn gamecenter_signature(
    key: TestKey,
    player_id: &str,
    bundle_id: &str,
    timestamp: i64,
    salt: &[u8],
) -> String {
    let pkcs8 = match key {
        TestKey::Provider => &keys().provider_pkcs8,
        TestKey::Other => &keys().other_pkcs8,
    };
    let pair = ring::signature::RsaKeyPair::from_pkcs8(pkcs8).expect("ring key");
    let mut message = Vec::new();
    message.extend_from_slice(player_id.as_bytes());
    message.extend_from_slice(bundle_id.as_bytes());
    message.extend_from_slice(&(timestamp as u64).to_be_bytes());
    message.extend_from_slice(salt);
    let mut signature = vec![0; pair.public().modulus_len()];
    pair.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        &message,
        &mut signature,
    )
    .expect("signs");
    STANDARD.encode(signature)
}

#[derive(Default)]
struct Data {
    requests: HashMap<String, usize>,
    /// The key ids the test key is served under.
    kids: Vec<String>,
    graph_users: HashMap<String, Value>,
    graph_friends: HashMap<String, Vec<String>>,
    steam_tickets: HashMap<String, String>,
    steam_friends: HashMap<String, Vec<String>>,
}

struct Shared {
    data: Mutex<Data>,
    /// Requests being held or answered now, and the most at once so far.
    in_flight: Mutex<(usize, usize)>,
    /// false while the stand-in is down.
    up: watch::Sender<bool>,
}

/// The providers' stand-in. Stops when dropped.
pub struct ProviderStandIn {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for ProviderStandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ProviderStandIn {
    pub async fn start() -> ProviderStandIn {
        let shared = Arc::new(Shared {
            data: Mutex::new(Data {
                kids: vec![KID.to_string()],
                ..Data::default()
            }),
            in_flight: Mutex::new((0, 0)),
            up: watch::channel(true).0,
        });
        let router = Router::new()
            .route(APPLE_KEYS, get(key_set))
            .route(GOOGLE_KEYS, get(key_set))
            .route(FACEBOOK_KEYS, get(key_set))
            .route(GRAPH_ME, get(graph_me))
            .route(GRAPH_FRIENDS, get(graph_friends))
            .route(STEAM_AUTHENTICATE, get(steam_authenticate))
            .route(STEAM_FRIENDS, get(steam_friends))
            .route(GAMECENTER_KEY, get(gamecenter_key))
            .layer(middleware::from_fn_with_state(
                Arc::clone(&shared),
                gatekeeper,
            ))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let addr = listener.local_addr().expect("address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        ProviderStandIn { addr, shared, task }
    }

    /// `http://127.0.0.1:port` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Settings pointing every provider at this stand-in, filled so that the proofs made by
    /// this module pass (short timeouts, the default breaker).
    pub fn social_config(&self) -> SocialConfig {
        let mut config = SocialConfig {
            timeout_ms: 2000,
            ..SocialConfig::default()
        };
        config.apple.bundle_ids = vec![APPLE_BUNDLE_ID.to_string()];
        config.apple.keys_url = self.url(APPLE_KEYS);
        config.google.client_ids = vec![GOOGLE_CLIENT_ID.to_string()];
        config.google.keys_url = self.url(GOOGLE_KEYS);
        config.facebook.graph_url = self.url(GRAPH);
        config.facebook.app_id = FACEBOOK_APP_ID.to_string();
        config.facebook.limited_login_keys_url = self.url(FACEBOOK_KEYS);
        config.facebook_instant_game.app_secret = INSTANT_APP_SECRET.to_string();
        config.steam.publisher_key = STEAM_PUBLISHER_KEY.to_string();
        config.steam.app_id = STEAM_APP_ID;
        config.steam.api_url = self.url(STEAM);
        config.gamecenter.bundle_ids = vec![APPLE_BUNDLE_ID.to_string()];
        config.gamecenter.key_url_hosts = vec!["127.0.0.1".to_string()];
        config
    }

    /// Requests received on `path` (a constant of this module), answered or not.
    pub fn requests(&self, path: &str) -> usize {
        self.shared
            .data
            .lock()
            .requests
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    /// The most requests this stand-in has held or answered at once.
    pub fn max_concurrent(&self) -> usize {
        self.shared.in_flight.lock().1
    }

    /// Down: every request is held unanswered until [`up`](Self::up).
    pub fn down(&self) {
        self.shared.up.send_replace(false);
    }

    pub fn up(&self) {
        self.shared.up.send_replace(true);
    }

    /// Also serves the test key under `kid` (a key rotation).
    pub fn add_kid(&self, kid: &str) {
        self.shared.data.lock().kids.push(kid.to_string());
    }

    /// The Graph API answers `/me` for `token` with this profile.
    pub fn add_graph_user(&self, token: &str, id: &str, name: &str, email: &str, picture: &str) {
        self.shared.data.lock().graph_users.insert(
            token.to_string(),
            json!({"id": id, "name": name, "email": email,
                   "picture": {"data": {"height": 50, "width": 50, "is_silhouette": false, "url": picture}}}),
        );
    }

    /// The Graph API answers `/me/friends` for `token` with these ids, [`GRAPH_PAGE`] a page.
    pub fn set_graph_friends(&self, token: &str, ids: &[&str]) {
        self.shared.data.lock().graph_friends.insert(
            token.to_string(),
            ids.iter().map(|id| id.to_string()).collect(),
        );
    }

    /// Steam accepts `ticket` as `steam_id`'s.
    pub fn add_steam_ticket(&self, ticket: &str, steam_id: &str) {
        self.shared
            .data
            .lock()
            .steam_tickets
            .insert(ticket.to_string(), steam_id.to_string());
    }

    /// Steam lists these friends for `steam_id` (any other id's list is private).
    pub fn set_steam_friends(&self, steam_id: &str, ids: &[&str]) {
        self.shared.data.lock().steam_friends.insert(
            steam_id.to_string(),
            ids.iter().map(|id| id.to_string()).collect(),
        );
    }

    /// A Game Center proof for `player_id` signed with `key` now, naming this stand-in's
    /// certificate.
    pub fn gamecenter_proof(&self, key: TestKey, player_id: &str) -> ProviderProof {
        let timestamp = now() * 1000;
        let salt = rand::random::<[u8; 16]>();
        ProviderProof::GameCenter {
            player_id: player_id.to_string(),
            bundle_id: APPLE_BUNDLE_ID.to_string(),
            timestamp_seconds: timestamp,
            salt: STANDARD.encode(salt),
            signature: gamecenter_signature(key, player_id, APPLE_BUNDLE_ID, timestamp, &salt),
            public_key_url: self.url(GAMECENTER_KEY),
        }
    }
}

/// Counts every request, and holds it while the stand-in is down.
async fn gatekeeper(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    *shared
        .data
        .lock()
        .requests
        .entry(request.uri().path().to_string())
        .or_default() += 1;
    let _in_flight = InFlight::enter(&shared);
    let mut up = shared.up.subscribe();
    let _ = up.wait_for(|up| *up).await;
    next.run(request).await
}

/// One request in the stand-in's hands, until answered or dropped with its connection.
struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn enter(shared: &'a Shared) -> InFlight<'a> {
        let mut in_flight = shared.in_flight.lock();
        in_flight.0 += 1;
        in_flight.1 = in_flight.1.max(in_flight.0);
        InFlight(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.lock().0 -= 1;
    }
}

async fn key_set(State(shared): State<Arc<Shared>>) -> Json<JwkSet> {
    let kids = shared.data.lock().kids.clone();
    let keys = kids
        .into_iter()
        .map(|kid| {
            let mut jwk = keys().provider_jwk.clone();
            jwk.common.key_id = Some(kid);
            jwk.common.public_key_use = Some(PublicKeyUse::Signature);
            jwk
        })
        .collect();
    Json(JwkSet { keys })
}

fn graph_refusal() -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(
            json!({"error": {"message": "Invalid OAuth access token - Cannot parse access token",
                              "type": "OAuthException", "code": 190}}),
        ),
    )
        .into_response()
}

async fn graph_me(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let token = query.get("access_token").cloned().unwrap_or_default();
    match shared.data.lock().graph_users.get(&token) {
        Some(user) => Json(user.clone()).into_response(),
        None => graph_refusal(),
    }
}

async fn graph_friends(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let token = query.get("access_token").cloned().unwrap_or_default();
    let Some(friends) = shared.data.lock().graph_friends.get(&token).cloned() else {
        return graph_refusal();
    };
    let start: usize = query
        .get("after")
        .and_then(|after| after.parse().ok())
        .unwrap_or(0);
    let page: Vec<Value> = friends
        .iter()
        .skip(start)
        .take(GRAPH_PAGE)
        .map(|id| json!({"id": id, "name": format!("Friend {id}")}))
        .collect();
    let end = start + page.len();
    let mut paging = json!({"cursors": {"before": start.to_string(), "after": end.to_string()}});
    if end < friends.len() {
        paging["next"] = json!(format!("https://graph.example/me/friends?after={end}"));
    }
    Json(json!({"data": page, "paging": paging, "summary": {"total_count": friends.len()}}))
        .into_response()
}

fn steam_key_refused() -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/html")],
        "<html><body>Forbidden</body></html>",
    )
        .into_response()
}

async fn steam_authenticate(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if query.get("key").map(String::as_str) != Some(STEAM_PUBLISHER_KEY) {
        return steam_key_refused();
    }
    if query.get("appid") != Some(&STEAM_APP_ID.to_string()) {
        return Json(
            json!({"response": {"error": {"errorcode": 3, "errordesc": "Invalid parameter"}}}),
        )
        .into_response();
    }
    let ticket = query.get("ticket").cloned().unwrap_or_default();
    match shared.data.lock().steam_tickets.get(&ticket) {
        Some(steam_id) => Json(json!({"response": {"params": {
            "result": "OK", "steamid": steam_id, "ownersteamid": steam_id,
            "vacbanned": false, "publisherbanned": false}}}))
        .into_response(),
        None => {
            Json(json!({"response": {"error": {"errorcode": 101, "errordesc": "Invalid ticket"}}}))
                .into_response()
        }
    }
}

async fn steam_friends(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if query.get("key").map(String::as_str) != Some(STEAM_PUBLISHER_KEY) {
        return steam_key_refused();
    }
    let steam_id = query.get("steamid").cloned().unwrap_or_default();
    match shared.data.lock().steam_friends.get(&steam_id) {
        Some(friends) => {
            let friends: Vec<Value> = friends
                .iter()
                .map(|id| json!({"steamid": id, "relationship": "friend", "friend_since": 1_600_000_000}))
                .collect();
            Json(json!({"friendslist": {"friends": friends}})).into_response()
        }
        None => (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, "text/html")],
            "<html><body>Unauthorized</body></html>",
        )
            .into_response(),
    }
}

async fn gamecenter_key() -> Response {
    (
        [(header::CONTENT_TYPE, "application/pkix-cert")],
        keys().certificate.clone(),
    )
        .into_response()
}
