//! Stand-ins for the stores' servers, started by the purchase tests on 127.0.0.1, each signing or
//! checking real data with test keys:
//!
//! - [`AppleChain`]: a test root CA, an intermediate and a leaf made with rcgen (ECDSA, Apple's
//!   marker extensions), signing App Store Server API transactions and notifications (ES256 JWS
//!   with the `x5c` chain);
//! - [`AppleReceipts`]: verifyReceipt, production and sandbox (a sandbox receipt sent to
//!   production is answered 21007, as Apple does);
//! - [`GooglePlay`]: the OAuth token endpoint, which checks the service account's RS256
//!   assertion with the account's public key, and the Android Publisher API, which answers only
//!   with a token it issued;
//! - [`HuaweiOrders`] and [`huawei_sign`]: Huawei's signed purchase data and its Order service;
//! - [`facebook_signed_request`]: Facebook Instant payments' HMAC-SHA256 signed requests;
//! - [`silent`]: a server that accepts and never answers (a store that hangs).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use parking_lot::Mutex;
use serde_json::{json, Value};

/// Serves `router` on a free port of 127.0.0.1 for the rest of the test; its base URL.
pub async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a stand-in");
    let addr = listener.local_addr().expect("stand-in address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

/// A server that takes connections and requests and never answers.
pub async fn silent() -> String {
    serve(Router::new().fallback(|| async {
        std::future::pending::<()>().await;
        StatusCode::OK
    }))
    .await
}

fn bearer(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned()
}

fn form(body: &[u8]) -> HashMap<String, String> {
    form_urlencoded::parse(body).into_owned().collect()
}

// ---- Apple ----------------------------------------------------------------------------------

const LEAF_MARKER: &[u64] = &[1, 2, 840, 113635, 100, 6, 11, 1];
const INTERMEDIATE_MARKER: &[u64] = &[1, 2, 840, 113635, 100, 6, 2, 1];

/// A certificate chain standing for Apple's: root → intermediate → leaf, and the leaf's key to
/// sign JWS with.
pub struct AppleChain {
    /// The root, as `[iap.apple] root_certificate` takes it.
    pub root_pem: String,
    x5c: Vec<String>,
    leaf_pkcs8: Vec<u8>,
}

impl AppleChain {
    /// A chain with Apple's marker extensions.
    pub fn new() -> AppleChain {
        AppleChain::build(true)
    }

    /// A chain whose certificates lack Apple's marker extensions.
    pub fn unmarked() -> AppleChain {
        AppleChain::build(false)
    }

    fn build(marked: bool) -> AppleChain {
        use rcgen::{
            BasicConstraints, CertificateParams, CustomExtension, DnType, IsCa, Issuer, KeyPair,
            PKCS_ECDSA_P256_SHA256, PKCS_ECDSA_P384_SHA384,
        };
        let named = |name: &str| {
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
            params.distinguished_name.push(DnType::CommonName, name);
            params
        };
        let marker = |oid: &[u64]| CustomExtension::from_oid_content(oid, vec![0x05, 0x00]);
        let root_key = KeyPair::generate_for(&PKCS_ECDSA_P384_SHA384).expect("root key");
        let mut root = named("Test Root CA - G3");
        root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let root_cert = root.self_signed(&root_key).expect("root certificate");
        let root_issuer = Issuer::new(root, root_key);
        let intermediate_key = KeyPair::generate_for(&PKCS_ECDSA_P384_SHA384).expect("key");
        let mut intermediate = named("Test Worldwide Developer Relations");
        intermediate.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        if marked {
            intermediate
                .custom_extensions
                .push(marker(INTERMEDIATE_MARKER));
        }
        let intermediate_cert = intermediate
            .signed_by(&intermediate_key, &root_issuer)
            .expect("intermediate certificate");
        let intermediate_issuer = Issuer::new(intermediate, intermediate_key);
        let leaf_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("leaf key");
        let mut leaf = named("Test Prod ECC Mac App Store and iTunes Store Receipt Signing");
        if marked {
            leaf.custom_extensions.push(marker(LEAF_MARKER));
        }
        let leaf_cert = leaf
            .signed_by(&leaf_key, &intermediate_issuer)
            .expect("leaf certificate");
        AppleChain {
            root_pem: root_cert.pem(),
            x5c: [&leaf_cert, &intermediate_cert, &root_cert]
                .iter()
                .map(|c| STANDARD.encode(c.der()))
                .collect(),
            leaf_pkcs8: leaf_key.serialize_der(),
        }
    }

    /// `payload` as an ES256 JWS with this chain in its `x5c` header.
    pub fn sign(&self, payload: &Value) -> String {
        let header = json!({ "alg": "ES256", "x5c": self.x5c });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(payload.to_string())
        );
        let rng = ring::rand::SystemRandom::new();
        let key = ring::signature::EcdsaKeyPair::from_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &self.leaf_pkcs8,
            &rng,
        )
        .expect("leaf key");
        let signature = key
            .sign(&rng, signing_input.as_bytes())
            .expect("ES256 signature");
        format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        )
    }
}

impl Default for AppleChain {
    fn default() -> Self {
        AppleChain::new()
    }
}

/// A signed transaction's payload (`JWSTransactionDecodedPayload`) of a one-time purchase.
pub fn apple_transaction(transaction_id: &str, product_id: &str, purchase_ms: i64) -> Value {
    json!({
        "transactionId": transaction_id,
        "originalTransactionId": transaction_id,
        "bundleId": "com.example.game",
        "productId": product_id,
        "purchaseDate": purchase_ms,
        "originalPurchaseDate": purchase_ms,
        "quantity": 1,
        "type": "Consumable",
        "inAppOwnershipType": "PURCHASED",
        "signedDate": purchase_ms,
        "environment": "Sandbox",
        "transactionReason": "PURCHASE",
        "storefront": "USA",
    })
}

/// The same for a period of an auto-renewable subscription.
pub fn apple_subscription_transaction(
    transaction_id: &str,
    original_transaction_id: &str,
    product_id: &str,
    purchase_ms: i64,
    expires_ms: i64,
) -> Value {
    let mut payload = apple_transaction(transaction_id, product_id, purchase_ms);
    payload["originalTransactionId"] = json!(original_transaction_id);
    payload["expiresDate"] = json!(expires_ms);
    payload["type"] = json!("Auto-Renewable Subscription");
    payload
}

/// verifyReceipt, production (`{url}/production/verifyReceipt`) and sandbox
/// (`{url}/sandbox/verifyReceipt`), answering the receipts it was given.
pub struct AppleReceipts {
    pub url: String,
    pub sandbox_url: String,
    /// receipt-data → (a sandbox receipt, the answer's `receipt` and `latest_receipt_info`).
    receipts: Arc<Mutex<HashMap<String, (bool, Value)>>>,
    /// Calls to production and to the sandbox.
    pub production_calls: Arc<AtomicUsize>,
    pub sandbox_calls: Arc<AtomicUsize>,
}

#[derive(Clone)]
struct ReceiptState {
    password: String,
    receipts: Arc<Mutex<HashMap<String, (bool, Value)>>>,
    production_calls: Arc<AtomicUsize>,
    sandbox_calls: Arc<AtomicUsize>,
}

impl AppleReceipts {
    pub async fn start(password: &str) -> AppleReceipts {
        let state = ReceiptState {
            password: password.to_owned(),
            receipts: Arc::default(),
            production_calls: Arc::default(),
            sandbox_calls: Arc::default(),
        };
        let router = Router::new()
            .route("/{environment}/verifyReceipt", post(verify_receipt))
            .with_state(state.clone());
        let base = serve(router).await;
        AppleReceipts {
            url: format!("{base}/production/verifyReceipt"),
            sandbox_url: format!("{base}/sandbox/verifyReceipt"),
            receipts: state.receipts,
            production_calls: state.production_calls,
            sandbox_calls: state.sandbox_calls,
        }
    }

    /// Makes `receipt` known: its purchases (`in_app`) and subscription periods
    /// (`latest_receipt_info`), each as verifyReceipt writes them.
    pub fn add(&self, receipt: &str, sandbox: bool, in_app: Vec<Value>, latest: Vec<Value>) {
        let body = json!({
            "receipt": { "bundle_id": "com.example.game", "in_app": in_app },
            "latest_receipt_info": latest,
        });
        self.receipts
            .lock()
            .insert(receipt.to_owned(), (sandbox, body));
    }
}

async fn verify_receipt(
    State(state): State<ReceiptState>,
    Path(environment): Path<String>,
    Json(request): Json<Value>,
) -> Json<Value> {
    let sandbox = environment == "sandbox";
    if sandbox {
        state.sandbox_calls.fetch_add(1, Ordering::SeqCst);
    } else {
        state.production_calls.fetch_add(1, Ordering::SeqCst);
    }
    if request["exclude-old-transactions"] != json!(true) {
        return Json(json!({ "status": 21000 }));
    }
    if request["password"].as_str() != Some(state.password.as_str()) {
        return Json(json!({ "status": 21004 }));
    }
    let receipt = request["receipt-data"].as_str().unwrap_or_default();
    let Some((for_sandbox, body)) = state.receipts.lock().get(receipt).cloned() else {
        return Json(json!({ "status": 21002 }));
    };
    if for_sandbox && !sandbox {
        return Json(json!({ "status": 21007 }));
    }
    let mut answer = body;
    answer["status"] = json!(0);
    answer["environment"] = json!(if sandbox { "Sandbox" } else { "Production" });
    answer["latest_receipt"] = json!(receipt);
    Json(answer)
}

/// One transaction of a receipt, as verifyReceipt writes it (times in ms, as strings).
pub fn receipt_item(transaction_id: &str, product_id: &str, purchase_ms: i64) -> Value {
    json!({
        "quantity": "1",
        "product_id": product_id,
        "transaction_id": transaction_id,
        "original_transaction_id": transaction_id,
        "purchase_date_ms": purchase_ms.to_string(),
        "original_purchase_date_ms": purchase_ms.to_string(),
        "is_trial_period": "false",
    })
}

/// A subscription period of a receipt.
pub fn receipt_period(
    transaction_id: &str,
    original_transaction_id: &str,
    product_id: &str,
    purchase_ms: i64,
    expires_ms: i64,
) -> Value {
    let mut item = receipt_item(transaction_id, product_id, purchase_ms);
    item["original_transaction_id"] = json!(original_transaction_id);
    item["expires_date_ms"] = json!(expires_ms.to_string());
    item
}

// ---- Google -----------------------------------------------------------------------------------

/// The service account the tests configure.
pub const GOOGLE_CLIENT_EMAIL: &str = "purchases@muster-test.iam.gserviceaccount.com";

/// The OAuth token endpoint (`{url}/token`) and the Android Publisher API (`{url}/…`) of one
/// service account.
pub struct GooglePlay {
    pub url: String,
    pub token_url: String,
    state: GoogleState,
}

#[derive(Clone)]
struct GoogleState {
    token_url: Arc<Mutex<String>>,
    issued: Arc<Mutex<Vec<String>>>,
    /// purchase token → `purchases.products` answer.
    products: Arc<Mutex<HashMap<String, Value>>>,
    /// purchase token → `purchases.subscriptionsv2` answer.
    subscriptions: Arc<Mutex<HashMap<String, Value>>>,
    /// purchase token → `purchases.productsv2` answer.
    products_v2: Arc<Mutex<HashMap<String, Value>>>,
    token_requests: Arc<AtomicUsize>,
    refused_assertions: Arc<AtomicUsize>,
}

impl GooglePlay {
    pub async fn start() -> GooglePlay {
        let state = GoogleState {
            token_url: Arc::default(),
            issued: Arc::default(),
            products: Arc::default(),
            subscriptions: Arc::default(),
            products_v2: Arc::default(),
            token_requests: Arc::default(),
            refused_assertions: Arc::default(),
        };
        let prefix = "/androidpublisher/v3/applications/{package}/purchases";
        let router = Router::new()
            .route("/token", post(google_token))
            .route(
                &format!("{prefix}/products/{{product}}/tokens/{{token}}"),
                get(google_product),
            )
            .route(
                &format!("{prefix}/subscriptionsv2/tokens/{{token}}"),
                get(google_subscription),
            )
            .route(
                &format!("{prefix}/productsv2/tokens/{{token}}"),
                get(google_product_v2),
            )
            .with_state(state.clone());
        let url = serve(router).await;
        let token_url = format!("{url}/token");
        *state.token_url.lock() = token_url.clone();
        GooglePlay {
            url,
            token_url,
            state,
        }
    }

    /// A one-time product bought with `token` (`purchaseState` 0 purchased, 1 cancelled).
    pub fn add_product(&self, token: &str, purchase_state: i64, purchase_ms: i64) {
        self.state.products.lock().insert(
            token.to_owned(),
            json!({
                "kind": "androidpublisher#productPurchase",
                "purchaseTimeMillis": purchase_ms.to_string(),
                "purchaseState": purchase_state,
                "consumptionState": 0,
                "orderId": format!("GPA.{token}"),
                "purchaseType": 0,
                "acknowledgementState": 1,
                "regionCode": "FI",
            }),
        );
    }

    /// The subscription of `token` (its `purchases.subscriptionsv2` answer), replacing any.
    pub fn set_subscription(
        &self,
        token: &str,
        product_id: &str,
        start: &str,
        expiry: &str,
        account: Option<&str>,
    ) {
        let mut answer = json!({
            "kind": "androidpublisher#subscriptionPurchaseV2",
            "startTime": start,
            "regionCode": "FI",
            "subscriptionState": "SUBSCRIPTION_STATE_ACTIVE",
            "latestOrderId": format!("GPA.{token}"),
            "acknowledgementState": "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED",
            "testPurchase": {},
            "lineItems": [{ "productId": product_id, "expiryTime": expiry,
                "autoRenewingPlan": { "autoRenewEnabled": true } }],
        });
        if let Some(account) = account {
            answer["externalAccountIdentifiers"] =
                json!({ "obfuscatedExternalAccountId": account });
        }
        self.state
            .subscriptions
            .lock()
            .insert(token.to_owned(), answer);
    }

    /// A one-time product as `purchases.productsv2` answers it.
    pub fn add_product_v2(&self, token: &str, product_id: &str, account: &str) {
        self.state.products_v2.lock().insert(
            token.to_owned(),
            json!({
                "productLineItem": [{ "productId": product_id }],
                "purchaseStateContext": { "purchaseState": "PURCHASED" },
                "orderId": format!("GPA.{token}"),
                "obfuscatedExternalAccountId": account,
                "purchaseCompletionTime": "2025-03-01T12:00:00.250Z",
            }),
        );
    }

    /// Access tokens issued, and assertions refused.
    pub fn token_requests(&self) -> usize {
        self.state.token_requests.load(Ordering::SeqCst)
    }

    pub fn refused_assertions(&self) -> usize {
        self.state.refused_assertions.load(Ordering::SeqCst)
    }
}

/// Checks the service account's assertion (RS256 with its key; issuer, audience and scope) and
/// answers an access token, as Google's token endpoint does.
async fn google_token(State(state): State<GoogleState>, body: Bytes) -> (StatusCode, Json<Value>) {
    state.token_requests.fetch_add(1, Ordering::SeqCst);
    let fields = form(&body);
    let refused = |why: &str| {
        state.refused_assertions.fetch_add(1, Ordering::SeqCst);
        (
            StatusCode::BAD_REQUEST,
            Json(json!({ "error": "invalid_grant", "error_description": why })),
        )
    };
    if fields.get("grant_type").map(String::as_str)
        != Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
    {
        return refused("grant_type");
    }
    let Some(assertion) = fields.get("assertion") else {
        return refused("no assertion");
    };
    let key = jsonwebtoken::DecodingKey::from_rsa_pem(GOOGLE_SERVICE_ACCOUNT_PUBLIC_KEY.as_bytes())
        .expect("the service account's public key");
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    let token_url = state.token_url.lock().clone();
    validation.set_audience(&[token_url.as_str()]);
    validation.set_issuer(&[GOOGLE_CLIENT_EMAIL]);
    let Ok(claims) = jsonwebtoken::decode::<Value>(assertion, &key, &validation) else {
        return refused("invalid JWT signature or claims");
    };
    if claims.claims["scope"] != json!("https://www.googleapis.com/auth/androidpublisher") {
        return refused("scope");
    }
    let token = format!("ya29.test-{}", uuid::Uuid::new_v4().simple());
    state.issued.lock().push(token.clone());
    (
        StatusCode::OK,
        Json(json!({ "access_token": token, "expires_in": 3599, "token_type": "Bearer" })),
    )
}

fn google_answer(
    state: &GoogleState,
    headers: &HeaderMap,
    found: Option<Value>,
) -> (StatusCode, Json<Value>) {
    if !state.issued.lock().contains(&bearer(headers)) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({ "error": { "code": 401, "message": "Invalid Credentials" } })),
        );
    }
    match found {
        Some(answer) => (StatusCode::OK, Json(answer)),
        None => (
            StatusCode::NOT_FOUND,
            Json(
                json!({ "error": { "code": 404, "message": "The purchase token was not found." } }),
            ),
        ),
    }
}

async fn google_product(
    State(state): State<GoogleState>,
    Path((package, _product, token)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> (StatusCode, Json<Value>) {
    let found = (package == "com.example.game")
        .then(|| state.products.lock().get(&token).cloned())
        .flatten();
    google_answer(&state, &headers, found)
}

async fn google_subscription(
    State(state): State<GoogleState>,
    Path((package, token)): Path<(String, String)>,
    headers: HeaderMap,
) -> (StatusCode, Json<Value>) {
    let found = (package == "com.example.game")
        .then(|| state.subscriptions.lock().get(&token).cloned())
        .flatten();
    google_answer(&state, &headers, found)
}

async fn google_product_v2(
    State(state): State<GoogleState>,
    Path((package, token)): Path<(String, String)>,
    headers: HeaderMap,
) -> (StatusCode, Json<Value>) {
    let found = (package == "com.example.game")
        .then(|| state.products_v2.lock().get(&token).cloned())
        .flatten();
    google_answer(&state, &headers, found)
}

/// A Play Billing purchase as a client sends it: Unity's wrapper around the purchase JSON.
pub fn google_receipt(product_id: &str, token: &str, purchase_ms: i64) -> String {
    let purchase = json!({
        "orderId": format!("GPA.{token}"),
        "packageName": "com.example.game",
        "productId": product_id,
        "purchaseTime": purchase_ms,
        "purchaseState": 0,
        "purchaseToken": token,
        "acknowledged": false,
    });
    json!({ "json": purchase.to_string(), "signature": "unused", "skuDetails": "{}" }).to_string()
}

/// A Real-time Developer Notification as Pub/Sub pushes it.
pub fn google_push(notification: &Value) -> Value {
    json!({
        "message": {
            "data": STANDARD.encode(notification.to_string()),
            "messageId": "136969346945",
            "attributes": {},
        },
        "subscription": "projects/muster-test/subscriptions/play",
    })
}

// ---- Huawei -----------------------------------------------------------------------------------

/// `data` signed with Huawei's test key (SHA256withRSA), base64.
pub fn huawei_sign(data: &str) -> String {
    sign_with(HUAWEI_PRIVATE_KEY, data)
}

/// `data` signed with another key than Huawei's.
pub fn huawei_forge(data: &str) -> String {
    sign_with(GOOGLE_SERVICE_ACCOUNT_KEY, data)
}

fn sign_with(pem: &str, data: &str) -> String {
    use rsa::pkcs8::DecodePrivateKey;
    use rsa::signature::{SignatureEncoding, Signer};
    let key = rsa::RsaPrivateKey::from_pkcs8_pem(pem).expect("test key");
    let signer = rsa::pkcs1v15::SigningKey::<sha2::Sha256>::new(key);
    STANDARD.encode(signer.sign(data.as_bytes()).to_bytes())
}

/// Huawei's purchase data (`InAppPurchaseData`) of a consumable.
pub fn huawei_purchase(token: &str, product_id: &str, purchase_ms: i64) -> String {
    json!({
        "autoRenewing": false,
        "orderId": format!("2025{token}"),
        "packageName": "com.example.game",
        "applicationId": 101_010_101,
        "kind": 0,
        "productId": product_id,
        "productName": "Gems",
        "purchaseTime": purchase_ms,
        "purchaseTimeMillis": purchase_ms,
        "purchaseState": 0,
        "developerPayload": "",
        "purchaseToken": token,
        "consumptionState": 0,
        "confirmed": 0,
        "purchaseType": 0,
        "currency": "EUR",
        "price": 99,
        "country": "FI",
        "payOrderId": "sandbox",
        "accountFlag": 0,
    })
    .to_string()
}

/// Huawei's OAuth token endpoint (`{url}/token`) and Order service (`{url}/orders/…`), knowing
/// the purchase tokens it is given.
pub struct HuaweiOrders {
    pub url: String,
    known: Arc<Mutex<Vec<String>>>,
    verifies: Arc<AtomicUsize>,
}

#[derive(Clone)]
struct HuaweiState {
    issued: Arc<Mutex<Vec<String>>>,
    known: Arc<Mutex<Vec<String>>>,
    verifies: Arc<AtomicUsize>,
}

pub const HUAWEI_CLIENT_ID: &str = "101010101";
pub const HUAWEI_CLIENT_SECRET: &str = "huawei-client-secret";

impl HuaweiOrders {
    pub async fn start() -> HuaweiOrders {
        let state = HuaweiState {
            issued: Arc::default(),
            known: Arc::default(),
            verifies: Arc::default(),
        };
        let router = Router::new()
            .route("/token", post(huawei_token))
            .route(
                "/orders/applications/purchases/tokens/verify",
                post(huawei_verify),
            )
            .with_state(state.clone());
        HuaweiOrders {
            url: serve(router).await,
            known: state.known,
            verifies: state.verifies,
        }
    }

    pub fn know(&self, token: &str) {
        self.known.lock().push(token.to_owned());
    }

    /// Verify calls the Order service answered.
    pub fn verifies(&self) -> usize {
        self.verifies.load(Ordering::SeqCst)
    }
}

async fn huawei_token(State(state): State<HuaweiState>, body: Bytes) -> (StatusCode, Json<Value>) {
    let fields = form(&body);
    let good = fields.get("grant_type").map(String::as_str) == Some("client_credentials")
        && fields.get("client_id").map(String::as_str) == Some(HUAWEI_CLIENT_ID)
        && fields.get("client_secret").map(String::as_str) == Some(HUAWEI_CLIENT_SECRET);
    if !good {
        return (StatusCode::UNAUTHORIZED, Json(json!({ "error": 1101 })));
    }
    let token = format!("huawei-{}", uuid::Uuid::new_v4().simple());
    state.issued.lock().push(token.clone());
    (
        StatusCode::OK,
        Json(json!({ "access_token": token, "expires_in": 3600, "token_type": "Bearer" })),
    )
}

async fn huawei_verify(
    State(state): State<HuaweiState>,
    headers: HeaderMap,
    Json(request): Json<Value>,
) -> (StatusCode, Json<Value>) {
    state.verifies.fetch_add(1, Ordering::SeqCst);
    if !state.issued.lock().contains(&bearer(&headers)) {
        return (StatusCode::UNAUTHORIZED, Json(json!({})));
    }
    let token = request["purchaseToken"].as_str().unwrap_or_default();
    if !state.known.lock().iter().any(|t| t == token) {
        return (
            StatusCode::OK,
            Json(json!({ "responseCode": "5", "responseMessage": "invalid purchaseToken" })),
        );
    }
    let data = huawei_purchase(token, request["productId"].as_str().unwrap_or_default(), 0);
    (
        StatusCode::OK,
        Json(json!({
            "responseCode": "0",
            "purchaseTokenData": data,
            "dataSignature": huawei_sign(&data),
            "signatureAlgorithm": "SHA256WithRSA",
        })),
    )
}

// ---- Facebook Instant -------------------------------------------------------------------------

/// A payment's signed request: base64url HMAC-SHA256 of the base64url payload, with `secret`.
pub fn facebook_signed_request(secret: &str, payment: &Value) -> String {
    use hmac::Mac;
    let payload = URL_SAFE_NO_PAD.encode(payment.to_string());
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(payload.as_bytes());
    format!(
        "{}.{payload}",
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    )
}

/// A Facebook Instant payment.
pub fn facebook_payment(token: &str, product_id: &str, purchase_secs: i64) -> Value {
    json!({
        "algorithm": "HMAC-SHA256",
        "app_id": "1234567890",
        "is_consumed": false,
        "issued_at": purchase_secs,
        "payment_id": format!("pay-{token}"),
        "product_id": product_id,
        "purchase_price": { "amount": "0.99", "currency": "EUR" },
        "purchase_time": purchase_secs,
        "purchase_token": token,
        "payment_action_type": "charge",
    })
}

// ---- Test keys --------------------------------------------------------------------------------

/// The test service account's private key (PKCS#8 PEM), as `[iap.google] private_key`.
pub const GOOGLE_SERVICE_ACCOUNT_KEY: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQCnagQGrxq0GKUj\n\
kqD4JFkoCBilS+ln8CwvWq1xf7uSmUNe7lzDqYOUxvwEIXWxU8xkyWVWPfv2IcBj\n\
1iMVktDWScTEP7djYBDVhJ0mkFW4NaeMnyE4g1MtE7e6KXLPYxo8YDnjHErBaH3t\n\
3TQi+kE5rn9z9zAS+PSGjk8B4Ddw1C2yksds7tx8FIajRulPfSu3FyAJ6b5DORX3\n\
qbr1BsJYJaO5rJqjA6oZC4qTld77wHSHyI970PemjzT6ep8ZO8Xn9pQod7rTGPTl\n\
fyrKqWb5koo7ceZfmRUbT9jv9rv27iHarEb7Rt7YN6ukAsLqpFyJmFSp4izdSRb5\n\
o7oiBv0xAgMBAAECggEAAbTk4RzlsLUj8Sf5wEXTQINNSFls10coFXx/Ek41yeG0\n\
7DG8XC9CcjYRaXOziNunP1Yb6cQ8fmQWML5aVwo12vVfY4vDEWja4GkCFsZNEBFr\n\
SZWcB6uJDHIsGDemHg3vKB3oASlvlqdQyf0MXsM+fnl0VFOOV9HWC6LFlJSQpB5g\n\
DEs3A9VLCKGbBvgbEhVj6yvvb0htXx+ji35yk+wj3xnQGdktJ1glTj59MMdi0Sdx\n\
OMmWt9OziYL6WkevkYqfJsXwh2nRuSR+hvHlPoJp+x4CuN+YJB6QmaUcVaaqEWeA\n\
l//LRFhBhOj8DFvjbcAsXiUHjikk2F+CMWObJ57K8QKBgQDUq7pr1H8z4lvknrC+\n\
e64GjgIz4riC9KpZJQXdacClIuKPWfZ5d2d8WQo70Bh9qSvwDZ8gcqRti49AFTvd\n\
Ta/Q4ytAfG/9wwIhxqt4fslrfqGp/afdqaATdr9dIEVfWLRHdDt83b5s+eiPt2fA\n\
CbWBvcLLDTfe/iSq4tAnIEgwaQKBgQDJhdWWz6gR4LeEtR7SVbExJKrNmzDaZ79/\n\
TXQ6IhoH6av+wgUhALTOBxnTHZKskj/RL5voibtUBtAcQ8gPNRLL5gI66sVtT51a\n\
iTj6BT6JgKDJrYa3K4gjUJDf6gFdGkmQgjNgt9IBNkfYMThTlO1nfsHi8vchcpCt\n\
x+dCc3nNiQKBgQChJi9wneh1bEStjAHplNZdaSYKIvYlZTffrMow6H1tpG2Aqm61\n\
w+DKvL2gbSLhtVrx36CAed5Wk7XMnUprev6Kjlir2J8T7ryi02QDPi9qIN5nbSnS\n\
MUJ2/TgsXNO0WAbjThP1niE5enTa0eLwBWtgEGaWbkGz22f1hUCtJS0OYQKBgHtr\n\
TNFNIii40IwlBNhahOeNBlJfrj7EdWJ4xCrqQbkA4kZm+w8oSJM5hBZosTChbRYn\n\
KzvyRlkCxyfYV0kA/x8DIfCFYh49OSh+i/eLiK5bqZ16edvqfDjsmZ2YyfcEJ3Oq\n\
Wd7tFV+Kp9t+4XlG51KQLhxZIwNID9VubXKkGD/JAoGBALgfSPAKHEnjAs1r7l6F\n\
CydFHPOKcAY8Cww3vRM6YfLIuFgs4omXWaAd5zR7FdMV4f0gvfvkbnXWAEH/kmvy\n\
CyAufcNvqKxC45p+pQlKH+R8tFlZ+VV0SqmtcTzk7I5Q1XmjFUjrd0KTfWAC7Zgz\n\
BWW/6M4u7BveOys7hb11IY6S\n\
-----END PRIVATE KEY-----\n\
";

/// Its public key, which the token endpoint stand-in checks assertions with.
pub const GOOGLE_SERVICE_ACCOUNT_PUBLIC_KEY: &str = "\
-----BEGIN PUBLIC KEY-----\n\
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAp2oEBq8atBilI5Kg+CRZ\n\
KAgYpUvpZ/AsL1qtcX+7kplDXu5cw6mDlMb8BCF1sVPMZMllVj379iHAY9YjFZLQ\n\
1knExD+3Y2AQ1YSdJpBVuDWnjJ8hOINTLRO3uilyz2MaPGA54xxKwWh97d00IvpB\n\
Oa5/c/cwEvj0ho5PAeA3cNQtspLHbO7cfBSGo0bpT30rtxcgCem+QzkV96m69QbC\n\
WCWjuayaowOqGQuKk5Xe+8B0h8iPe9D3po80+nqfGTvF5/aUKHe60xj05X8qyqlm\n\
+ZKKO3HmX5kVG0/Y7/a79u4h2qxG+0be2DerpALC6qRciZhUqeIs3UkW+aO6Igb9\n\
MQIDAQAB\n\
-----END PUBLIC KEY-----\n\
";

/// Huawei's test signing key (PKCS#8 PEM).
pub const HUAWEI_PRIVATE_KEY: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIIEuwIBADANBgkqhkiG9w0BAQEFAASCBKUwggShAgEAAoIBAQC7j5yWY4neBKmx\n\
VfE7iq+aEcEOTYdb9ixp/0Mss5vSmw9ZPwZagJoXDj9LL9WskCiSg5jj6q1Z0Ddc\n\
rlNqImorvSqjPANwbMAHDiUPLkhXmapuVTqvGIqO/dD+k8SrxNlrEOVScLFBOCvW\n\
GIp7CZovPDkFyvo69jdseF6ZQJ9IcLVCZcXBbMIJiaG3kSoqd4ISLnYHOu/9qLO/\n\
eX2eNbmnSx+4DsF7q3A2Lrs0eMWUap+F/W9s0e33DUYoKXrn3EbJMK5J2IW1v0e8\n\
nEMiYkc99eJCJ/gJy5ieUmZtKTti59cA+9qs/mcHPD5xV3dT2o2DP3cT5/FdbH4W\n\
7oJPe2XrAgMBAAECgf8FqnMQfler1Lx+wQjMw6gBzEM75xunIvvOFcXPk+Gprjim\n\
V2MvFG8sy6fIe4dON7dGT14Kt7bJIed5KYaw4Ugxo6dhz39cKlM8SbmhqrMvabkz\n\
viwpyJQAipk9F33qfzsBEgofpp0rn3WzioG1egw/YQnPZ0E47SYUy2vuAgW8svLt\n\
uWfCTot41sgW4YMvjFY/+ZzcdQwcIqIlQp4QCEVEtXrSfXzGp9R5aeay63/L7ZeE\n\
d72uFcCk2T5sIlA1BYMQXwAOErNJwvh11ZyxpEB8KCwO2HXZrejbGX0T+QDYxES8\n\
BypWR5KOCyGxKp4pI+ntshvrEvIhEGghMrR6fiECgYEA89x/xz8rEgYP8fHEagpT\n\
MICZAnkB4dBLyP/KjQBwcDAP9rIJjddztn03Zd26Oy7NY0iSUnIQ8AM1GQDRLfmO\n\
XdnE+PHC+xSNsTWbl7C//wnI95cehxYOsq1Df32TjWbL9iZBRULiR3OFuaCM5plm\n\
x/a8fPIRPr0Jmz0KLbD5UdUCgYEAxOWuzWh51jsvFXRIRr888rw45R2P8pN03QnT\n\
ecp4DMC84ETO0FjdC34kSMjODSkf0wIQ54lYMNuIB34ldppkc1jPGf+XBUtH698d\n\
K5v+jwwo0eYJ7/xa6ks84Q6pDnIRcV4n1F2WSpMvPh8zEO6ZB6+Bu+AxRC1Mu1VR\n\
hwzt+L8CgYBUL95JCeyzlzYv/5ggR5o6l1q7eM0GiSNwq6XgkbM/d8g7EXGs7yF6\n\
cbYLS8W8IsczLF2fatOgGGtfS2HrrkjQ65pNmyEGDy1vbSNe9d0Cjf08RIZ8ekfu\n\
tVQlElQ7L67gNoq3/4QgyKf00pFyFqleBTdDJ0p+z0Ievq7h4UPhVQKBgFbglWmS\n\
4LdzM8o+namBti3QeTY2/g3lnFnvfP0vJhtSa8R09+AcZaQti2sGF0zdSWp8beML\n\
yfr80p+jvHoBk7MFi5QIH6W5Wsmrj55vXTnW/qfm3ZmjeqYIfps7McLq9+FSzzY3\n\
+Rl8qgq6D3k4HhOzEAZK3NIdPs8lzSxOuy3XAoGBAOpcPF8STiTKdFsdgBX4Rn/3\n\
XA8FAHeFETEw6dQLHSjUqmyvNeTR/9XZMvrPa9e9J0sH245ICwmKJLZcvRCz2Ybu\n\
yvR8aBj0VS+igiblGjmQ0IjBGUHArfrOklntb57xE35ruawoiIkvYSNWD12JIyB4\n\
DElvTT/MKWC/6adgpmhD\n\
-----END PRIVATE KEY-----\n\
";

/// Its public key, as `[iap.huawei] public_key`.
pub const HUAWEI_PUBLIC_KEY: &str = "\
-----BEGIN PUBLIC KEY-----\n\
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu4+clmOJ3gSpsVXxO4qv\n\
mhHBDk2HW/Ysaf9DLLOb0psPWT8GWoCaFw4/Sy/VrJAokoOY4+qtWdA3XK5TaiJq\n\
K70qozwDcGzABw4lDy5IV5mqblU6rxiKjv3Q/pPEq8TZaxDlUnCxQTgr1hiKewma\n\
Lzw5Bcr6OvY3bHhemUCfSHC1QmXFwWzCCYmht5EqKneCEi52Bzrv/aizv3l9njW5\n\
p0sfuA7Be6twNi67NHjFlGqfhf1vbNHt9w1GKCl659xGyTCuSdiFtb9HvJxDImJH\n\
PfXiQif4CcuYnlJmbSk7YufXAPvarP5nBzw+cVd3U9qNgz93E+fxXWx+Fu6CT3tl\n\
6wIDAQAB\n\
-----END PUBLIC KEY-----\n\
";
