//! In-app purchases and subscriptions, on SQLite and PostgreSQL, against stand-ins of the stores
//! that sign and check real data with test keys (`support::stores`): each store validates a
//! purchase and stores it once (a replay — at the same moment, by another user, on another node —
//! is `seen_before`), forged proofs are refused with nothing stored, a store that is down fails
//! only its own validations and quickly, purchases and subscriptions list with cursors, and the
//! stores' notifications update the records and tell the observer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use muster::config::Config;
use muster::purchases::{Handled, NotificationKind, NotificationObserver, Purchases};
use muster_proto::grpc::{StoreProvider, ValidatedPurchase, ValidatedSubscription};
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::support;
use support::stores::{
    self, AppleChain, AppleReceipts, GooglePlay, HuaweiOrders, GOOGLE_CLIENT_EMAIL,
    GOOGLE_SERVICE_ACCOUNT_KEY, HUAWEI_CLIENT_ID, HUAWEI_CLIENT_SECRET, HUAWEI_PUBLIC_KEY,
};
use support::{assert_error, status_and_json, Backend, Database, TestServer};

on_both_backends!(
    apple_receipts_are_verified_and_stored_once,
    apple_signed_transactions_must_chain_to_the_root,
    google_purchases_are_read_back_with_the_service_account,
    huawei_purchases_need_their_signature,
    facebook_instant_payments_need_their_hmac,
    replays_at_the_same_moment_store_one_purchase,
    persist_false_validates_without_storing,
    purchases_are_listed_newest_first_across_pages,
    subscriptions_are_validated_listed_and_got_by_product,
    hostile_input_is_refused_and_nothing_is_stored,
    unconfigured_stores_are_refused_as_nakama_does,
    a_store_that_is_down_fails_only_its_own_validations_quickly,
    notification_endpoints_answer_only_at_their_secret_path,
    an_apple_refund_marks_the_purchase_and_tells_the_observer,
    a_google_renewal_moves_the_expiry_and_tells_the_observer,
    the_calls_answer_over_grpc_as_over_rest,
    the_store_keeps_one_row_per_transaction_on_both_engines,
);

const APPLE_PASSWORD: &str = "apple-shared-secret";
const FACEBOOK_SECRET: &str = "facebook-app-secret";
const APPLE_ENDPOINT: &str = "apple-7f3c9a1e5b2d4f60";
const GOOGLE_ENDPOINT: &str = "google-0d8e6b4a2c9f1357";

/// Every store's stand-in.
struct StandIns {
    chain: AppleChain,
    receipts: AppleReceipts,
    google: GooglePlay,
    huawei: HuaweiOrders,
}

async fn stand_ins() -> StandIns {
    StandIns {
        chain: AppleChain::new(),
        receipts: AppleReceipts::start(APPLE_PASSWORD).await,
        google: GooglePlay::start().await,
        huawei: HuaweiOrders::start().await,
    }
}

/// `db`'s test configuration with every store pointed at its stand-in.
fn configured(db: &Database, s: &StandIns) -> Config {
    let mut config = db.config();
    let iap = &mut config.iap;
    iap.apple.shared_password = APPLE_PASSWORD.into();
    iap.apple.verify_receipt_url = s.receipts.url.clone();
    iap.apple.sandbox_verify_receipt_url = s.receipts.sandbox_url.clone();
    iap.apple.root_certificate = s.chain.root_pem.clone();
    iap.apple.bundle_id = "com.example.game".into();
    iap.apple.notifications_endpoint_id = APPLE_ENDPOINT.into();
    iap.google.client_email = GOOGLE_CLIENT_EMAIL.into();
    iap.google.private_key = GOOGLE_SERVICE_ACCOUNT_KEY.into();
    iap.google.token_url = s.google.token_url.clone();
    iap.google.publisher_url = s.google.url.clone();
    iap.google.package_name = "com.example.game".into();
    iap.google.notifications_endpoint_id = GOOGLE_ENDPOINT.into();
    iap.huawei.public_key = HUAWEI_PUBLIC_KEY.into();
    iap.huawei.client_id = HUAWEI_CLIENT_ID.into();
    iap.huawei.client_secret = HUAWEI_CLIENT_SECRET.into();
    iap.huawei.token_url = format!("{}/token", s.huawei.url);
    iap.huawei.orders_url = format!("{}/orders", s.huawei.url);
    iap.huawei.app_touch_orders_url = format!("{}/orders", s.huawei.url);
    iap.facebook_instant.app_secret = FACEBOOK_SECRET.into();
    config
}

async fn start(backend: Backend) -> (Database, StandIns, TestServer) {
    let db = Database::new(backend).await;
    let s = stand_ins().await;
    let server = TestServer::start(configured(&db, &s)).await;
    (db, s, server)
}

fn user_id(token: &str) -> String {
    support::claims(token)["uid"]
        .as_str()
        .expect("uid")
        .to_owned()
}

fn now_ms() -> i64 {
    muster::base::clock::now_ms()
}

/// An RFC 3339 time of an answer, as Unix milliseconds.
fn ms(value: &Value) -> i64 {
    let text = value.as_str().unwrap_or_else(|| panic!("a time: {value}"));
    chrono::DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .timestamp_millis()
}

async fn post(server: &TestServer, path: &str, token: &str, body: &Value) -> (u16, Value) {
    status_and_json(
        server
            .http
            .post(server.url(path))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .expect("request"),
    )
    .await
}

/// The validated purchases of an answer, checking it is a 200.
fn purchases_of(answer: &(u16, Value)) -> Vec<Value> {
    assert_eq!(answer.0, 200, "{}", answer.1);
    answer.1["validated_purchases"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn seen_before(purchase: &Value) -> bool {
    purchase["seen_before"].as_bool().unwrap_or(false)
}

/// Every purchase of the caller, page after page.
async fn all_purchases(server: &TestServer, token: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor = String::new();
    loop {
        let (status, page) = server
            .get_with_token(
                &format!("/v2/iap/purchase?limit=100&cursor={cursor}"),
                token,
            )
            .await;
        assert_eq!(status, 200, "{page}");
        all.extend(
            page["validated_purchases"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        match page["cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => return all,
        }
    }
}

fn transaction_ids(purchases: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = purchases
        .iter()
        .map(|p| p["transaction_id"].as_str().unwrap_or_default().to_owned())
        .collect();
    ids.sort();
    ids
}

async fn apple_receipts_are_verified_and_stored_once(backend: Backend) {
    let (_db, s, server) = start(backend).await;
    let (me, _) = server.device_session("device-iap-apple-receipt-1").await;
    let (other, _) = server.device_session("device-iap-apple-receipt-2").await;
    let t = now_ms() - 60_000;
    s.receipts.add(
        "receipt-sandbox",
        true,
        vec![
            stores::receipt_item("1000000001", "gems_100", t),
            stores::receipt_item("1000000002", "coins_10", t + 1),
        ],
        vec![
            // The same purchase again, and a subscription period: neither is a new purchase.
            stores::receipt_item("1000000002", "coins_10", t + 1),
            stores::receipt_period("1000000003", "1000000003", "monthly", t, t + 3_600_000),
        ],
    );
    let receipt = json!({ "receipt": "receipt-sandbox" });
    let first = post(&server, "/v2/iap/purchase/apple", &me, &receipt).await;
    let validated = purchases_of(&first);
    assert_eq!(
        transaction_ids(&validated),
        ["1000000001", "1000000002"],
        "{}",
        first.1
    );
    for purchase in &validated {
        assert!(!seen_before(purchase), "{purchase}");
        assert_eq!(purchase["user_id"], json!(user_id(&me)));
        assert_eq!(purchase["environment"], json!("SANDBOX"));
        assert!(purchase["provider_response"]
            .as_str()
            .is_some_and(|r| r.contains("latest_receipt")));
        assert!(purchase["create_time"].is_string(), "{purchase}");
    }
    assert_eq!(ms(&validated[0]["purchase_time"]) / 1000, t / 1000);
    // Production first, then the sandbox on 21007.
    assert_eq!(
        (
            s.receipts
                .production_calls
                .load(std::sync::atomic::Ordering::SeqCst),
            s.receipts
                .sandbox_calls
                .load(std::sync::atomic::Ordering::SeqCst)
        ),
        (1, 1)
    );

    let replay = post(&server, "/v2/iap/purchase/apple", &me, &receipt).await;
    assert!(
        purchases_of(&replay).iter().all(seen_before),
        "{}",
        replay.1
    );
    // Another user replaying the receipt is told it was seen; the purchases stay the first
    // user's.
    let stolen = post(&server, "/v2/iap/purchase/apple", &other, &receipt).await;
    let stolen = purchases_of(&stolen);
    assert!(stolen.iter().all(seen_before), "{stolen:?}");
    assert_eq!(stolen[0]["user_id"], json!(user_id(&other)));
    assert_eq!(all_purchases(&server, &me).await.len(), 2);
    assert!(all_purchases(&server, &other).await.is_empty());

    // A production receipt stays in production.
    s.receipts.add(
        "receipt-production",
        false,
        vec![stores::receipt_item("1000000009", "gems_100", t)],
        vec![],
    );
    let production = post(
        &server,
        "/v2/iap/purchase/apple",
        &me,
        &json!({ "receipt": "receipt-production" }),
    )
    .await;
    assert_eq!(
        purchases_of(&production)[0]["environment"],
        json!("PRODUCTION")
    );

    // Apple's refusals are Nakama's.
    let unknown = post(
        &server,
        "/v2/iap/purchase/apple",
        &me,
        &json!({ "receipt": "receipt-unknown" }),
    )
    .await;
    assert_eq!(
        assert_error(&unknown, 400, 9),
        "Invalid Receipt. Status: 21002"
    );
    s.receipts.add(
        "receipt-subscription",
        false,
        vec![],
        vec![stores::receipt_period(
            "1000000005",
            "1000000005",
            "monthly",
            t,
            t + 3_600_000,
        )],
    );
    let subscription = post(
        &server,
        "/v2/iap/purchase/apple",
        &me,
        &json!({ "receipt": "receipt-subscription" }),
    )
    .await;
    assert_eq!(
        assert_error(&subscription, 400, 9),
        "Subscription Receipt. Use the appropriate function instead."
    );
    assert_eq!(all_purchases(&server, &me).await.len(), 3);
}

async fn apple_signed_transactions_must_chain_to_the_root(backend: Backend) {
    let (_db, s, server) = start(backend).await;
    let (me, _) = server.device_session("device-iap-apple-jws-1").await;
    let t = now_ms() - 1000;
    let jws = s
        .chain
        .sign(&stores::apple_transaction("2000000001", "gems_100", t));
    let body = json!({ "receipt": jws });
    let first = purchases_of(&post(&server, "/v2/iap/purchase/apple", &me, &body).await);
    assert_eq!(first.len(), 1);
    let purchase = &first[0];
    assert_eq!(purchase["transaction_id"], json!("2000000001"));
    assert_eq!(purchase["product_id"], json!("gems_100"));
    assert_eq!(purchase["environment"], json!("SANDBOX"));
    assert_eq!(ms(&purchase["purchase_time"]), t);
    assert!(!seen_before(purchase));
    // The client's own receipt is not answered back.
    assert_eq!(purchase.get("provider_response"), None, "{purchase}");
    let replay = purchases_of(&post(&server, "/v2/iap/purchase/apple", &me, &body).await);
    assert!(seen_before(&replay[0]));

    // Signed by a chain that does not lead to the configured root.
    let forged = AppleChain::new().sign(&stores::apple_transaction("2000000002", "gems_100", t));
    let refused = post(
        &server,
        "/v2/iap/purchase/apple",
        &me,
        &json!({ "receipt": forged }),
    )
    .await;
    let message = assert_error(&refused, 400, 3);
    assert!(
        message.contains("does not lead to the trusted root"),
        "{message}"
    );
    // The right chain, another payload: the signature no longer holds.
    let mut parts: Vec<String> = jws.split('.').map(str::to_owned).collect();
    let other = stores::apple_transaction("2000000003", "gems_1000", t);
    parts[1] = base64_url(&other.to_string());
    let tampered = post(
        &server,
        "/v2/iap/purchase/apple",
        &me,
        &json!({ "receipt": parts.join(".") }),
    )
    .await;
    let message = assert_error(&tampered, 400, 3);
    assert!(message.contains("signature does not verify"), "{message}");
    // A subscription's transaction is not a purchase.
    let period = s.chain.sign(&stores::apple_subscription_transaction(
        "2000000005",
        "2000000005",
        "monthly",
        t,
        t + 3_600_000,
    ));
    let wrong_call = post(
        &server,
        "/v2/iap/purchase/apple",
        &me,
        &json!({ "receipt": period }),
    )
    .await;
    assert_eq!(
        assert_error(&wrong_call, 400, 9),
        "Subscription Receipt. Use the appropriate function instead."
    );
    // Another app's transaction.
    let mut foreign = stores::apple_transaction("2000000006", "gems_100", t);
    foreign["bundleId"] = json!("com.example.other");
    let foreign = post(
        &server,
        "/v2/iap/purchase/apple",
        &me,
        &json!({ "receipt": s.chain.sign(&foreign) }),
    )
    .await;
    assert_error(&foreign, 400, 3);

    assert_eq!(
        transaction_ids(&all_purchases(&server, &me).await),
        ["2000000001"],
        "only the genuine purchase is stored"
    );

    // A chain up to the configured root whose certificates lack Apple's marker extensions is
    // not the App Store's.
    let unmarked = AppleChain::unmarked();
    let db = Database::new(backend).await;
    let mut config = configured(&db, &s);
    config.iap.apple.root_certificate = unmarked.root_pem.clone();
    let other = TestServer::start(config).await;
    let (token, _) = other.device_session("device-iap-apple-jws-2").await;
    let jws = unmarked.sign(&stores::apple_transaction("2000000004", "gems_100", t));
    let refused = post(
        &other,
        "/v2/iap/purchase/apple",
        &token,
        &json!({ "receipt": jws }),
    )
    .await;
    let message = assert_error(&refused, 400, 3);
    assert!(message.contains("marker extensions missing"), "{message}");
}

fn base64_url(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

async fn google_purchases_are_read_back_with_the_service_account(backend: Backend) {
    let (_db, s, server) = start(backend).await;
    let (me, _) = server.device_session("device-iap-google-1").await;
    let t = now_ms() - 5000;
    s.google.add_product("gtok-1", 0, t);
    s.google.add_product("gtok-2", 0, t + 1);
    s.google.add_product("gtok-cancelled", 1, t);
    let receipt = |product: &str, token: &str| json!({ "purchase": stores::google_receipt(product, token, t) });
    let first = purchases_of(
        &post(
            &server,
            "/v2/iap/purchase/google",
            &me,
            &receipt("gems_100", "gtok-1"),
        )
        .await,
    );
    assert_eq!(first[0]["transaction_id"], json!("gtok-1"));
    assert_eq!(first[0]["store"], json!("GOOGLE_PLAY_STORE"));
    assert_eq!(first[0]["environment"], json!("SANDBOX"));
    assert_eq!(ms(&first[0]["purchase_time"]), t);
    assert!(!seen_before(&first[0]));
    let replay = purchases_of(
        &post(
            &server,
            "/v2/iap/purchase/google",
            &me,
            &receipt("gems_100", "gtok-1"),
        )
        .await,
    );
    assert!(seen_before(&replay[0]));
    let second = purchases_of(
        &post(
            &server,
            "/v2/iap/purchase/google",
            &me,
            &receipt("gems_100", "gtok-2"),
        )
        .await,
    );
    assert!(!seen_before(&second[0]));
    // One access token served all three: it is kept until near its expiry.
    assert_eq!(
        (s.google.token_requests(), s.google.refused_assertions()),
        (1, 0)
    );

    let cancelled = post(
        &server,
        "/v2/iap/purchase/google",
        &me,
        &receipt("gems_100", "gtok-cancelled"),
    )
    .await;
    assert_eq!(
        assert_error(&cancelled, 400, 9),
        "Invalid Receipt. State: 1"
    );
    let unknown = post(
        &server,
        "/v2/iap/purchase/google",
        &me,
        &receipt("gems_100", "gtok-unknown"),
    )
    .await;
    let message = assert_error(&unknown, 400, 3);
    assert!(message.contains("does not know this purchase"), "{message}");
    let mut other_app: Value =
        serde_json::from_str(&stores::google_receipt("gems_100", "gtok-1", t)).expect("json");
    other_app["json"] = json!(
        json!({ "packageName": "com.example.other", "productId": "gems_100",
        "purchaseToken": "gtok-1" })
        .to_string()
    );
    let other_app = post(
        &server,
        "/v2/iap/purchase/google",
        &me,
        &json!({ "purchase": other_app.to_string() }),
    )
    .await;
    assert_error(&other_app, 400, 3);
    assert_eq!(
        transaction_ids(&all_purchases(&server, &me).await),
        ["gtok-1", "gtok-2"]
    );

    // A service account whose key is not the one Google knows is refused at the token
    // endpoint (the stand-in checks the assertion's signature): Google is unavailable.
    let db = Database::new(backend).await;
    let mut config = configured(&db, &s);
    config.iap.google.private_key = stores::HUAWEI_PRIVATE_KEY.into();
    let wrong_key = TestServer::start(config).await;
    let (token, _) = wrong_key.device_session("device-iap-google-2").await;
    let refused = post(
        &wrong_key,
        "/v2/iap/purchase/google",
        &token,
        &receipt("gems_100", "gtok-1"),
    )
    .await;
    let message = assert_error(&refused, 503, 14);
    assert!(
        message.starts_with("Google IAP verification is currently unavailable"),
        "{message}"
    );
    assert_eq!(s.google.refused_assertions(), 1);
}

async fn huawei_purchases_need_their_signature(backend: Backend) {
    let (_db, s, server) = start(backend).await;
    let (me, _) = server.device_session("device-iap-huawei-1").await;
    let t = now_ms() - 5000;
    s.huawei.know("htok-1");
    let data = stores::huawei_purchase("htok-1", "gems_100", t);
    let body = json!({ "purchase": data, "signature": stores::huawei_sign(&data) });
    let first = purchases_of(&post(&server, "/v2/iap/purchase/huawei", &me, &body).await);
    assert_eq!(first[0]["transaction_id"], json!("htok-1"));
    assert_eq!(first[0]["store"], json!("HUAWEI_APP_GALLERY"));
    assert_eq!(first[0]["environment"], json!("SANDBOX"));
    assert!(!seen_before(&first[0]));
    let replay = purchases_of(&post(&server, "/v2/iap/purchase/huawei", &me, &body).await);
    assert!(seen_before(&replay[0]));

    // Signed with another key.
    let data = stores::huawei_purchase("htok-2", "gems_100", t);
    s.huawei.know("htok-2");
    let forged = json!({ "purchase": data, "signature": stores::huawei_forge(&data) });
    let verifies = s.huawei.verifies();
    let refused = post(&server, "/v2/iap/purchase/huawei", &me, &forged).await;
    assert_eq!(
        assert_error(&refused, 400, 3),
        "inAppPurchaseData invalid signature"
    );
    assert_eq!(
        s.huawei.verifies(),
        verifies,
        "refused before asking Huawei"
    );
    // Signed data changed after signing.
    let genuine = stores::huawei_sign(&data);
    let altered = data.replace("gems_100", "gems_9999");
    let refused = post(
        &server,
        "/v2/iap/purchase/huawei",
        &me,
        &json!({ "purchase": altered, "signature": genuine }),
    )
    .await;
    assert_error(&refused, 400, 3);
    // Genuinely signed, but the Order service does not know the token.
    let data = stores::huawei_purchase("htok-unknown", "gems_100", t);
    let unknown = post(
        &server,
        "/v2/iap/purchase/huawei",
        &me,
        &json!({ "purchase": data, "signature": stores::huawei_sign(&data) }),
    )
    .await;
    assert_eq!(assert_error(&unknown, 400, 9), "Invalid Receipt. Code: 5");
    assert_eq!(
        transaction_ids(&all_purchases(&server, &me).await),
        ["htok-1"]
    );
}

async fn facebook_instant_payments_need_their_hmac(backend: Backend) {
    let (_db, _s, server) = start(backend).await;
    let (me, _) = server.device_session("device-iap-facebook-1").await;
    let secs = now_ms() / 1000 - 10;
    let payment = stores::facebook_payment("fbtok-1", "gems_100", secs);
    let body =
        json!({ "signed_request": stores::facebook_signed_request(FACEBOOK_SECRET, &payment) });
    let first = purchases_of(&post(&server, "/v2/iap/purchase/facebookinstant", &me, &body).await);
    assert_eq!(first[0]["transaction_id"], json!("fbtok-1"));
    assert_eq!(first[0]["store"], json!("FACEBOOK_INSTANT_STORE"));
    assert_eq!(first[0]["environment"], json!("PRODUCTION"));
    assert_eq!(ms(&first[0]["purchase_time"]), secs * 1000);
    let replay = purchases_of(&post(&server, "/v2/iap/purchase/facebookinstant", &me, &body).await);
    assert!(seen_before(&replay[0]));

    let forged = stores::facebook_signed_request(
        "not-the-app-secret",
        &stores::facebook_payment("fbtok-2", "gems_100", secs),
    );
    let refused = post(
        &server,
        "/v2/iap/purchase/facebookinstant",
        &me,
        &json!({ "signed_request": forged }),
    )
    .await;
    assert_eq!(
        assert_error(&refused, 400, 3),
        "signedRequest verification failed"
    );
    let malformed = post(
        &server,
        "/v2/iap/purchase/facebookinstant",
        &me,
        &json!({ "signed_request": "no-dot-here" }),
    )
    .await;
    assert_error(&malformed, 400, 3);
    assert_eq!(
        transaction_ids(&all_purchases(&server, &me).await),
        ["fbtok-1"]
    );
}

async fn replays_at_the_same_moment_store_one_purchase(backend: Backend) {
    let (_db, _s, server) = start(backend).await;
    let (me, _) = server.device_session("device-iap-race-1").await;
    let (other, _) = server.device_session("device-iap-race-2").await;
    let payment = stores::facebook_payment("fbtok-race", "gems_100", now_ms() / 1000);
    let body =
        json!({ "signed_request": stores::facebook_signed_request(FACEBOOK_SECRET, &payment) });
    let attempts = (0..16).map(|n| {
        let (server, body) = (&server, &body);
        let token = if n % 2 == 0 {
            me.clone()
        } else {
            other.clone()
        };
        async move { post(server, "/v2/iap/purchase/facebookinstant", &token, body).await }
    });
    let answers = futures_util::future::join_all(attempts).await;
    let first_stores: usize = answers
        .iter()
        .map(|answer| {
            purchases_of(answer)
                .iter()
                .filter(|p| !seen_before(p))
                .count()
        })
        .sum();
    assert_eq!(first_stores, 1, "exactly one validation stored it");
    let listed =
        all_purchases(&server, &me).await.len() + all_purchases(&server, &other).await.len();
    assert_eq!(listed, 1);
}

async fn persist_false_validates_without_storing(backend: Backend) {
    let (_db, s, server) = start(backend).await;
    let (me, _) = server.device_session("device-iap-persist-1").await;
    let t = now_ms() - 1000;
    let payment = stores::facebook_payment("fbtok-persist", "gems_100", t / 1000);
    let signed = stores::facebook_signed_request(FACEBOOK_SECRET, &payment);
    let jws = s
        .chain
        .sign(&stores::apple_transaction("2100000001", "gems_100", t));
    for _ in 0..2 {
        let dry = purchases_of(
            &post(
                &server,
                "/v2/iap/purchase/facebookinstant",
                &me,
                &json!({ "signed_request": signed, "persist": false }),
            )
            .await,
        );
        assert!(!seen_before(&dry[0]));
        assert_eq!(dry[0].get("create_time"), None, "{}", dry[0]);
        let dry = purchases_of(
            &post(
                &server,
                "/v2/iap/purchase/apple",
                &me,
                &json!({ "receipt": jws, "persist": false }),
            )
            .await,
        );
        assert!(!seen_before(&dry[0]));
    }
    assert!(all_purchases(&server, &me).await.is_empty());
    let stored = purchases_of(
        &post(
            &server,
            "/v2/iap/purchase/facebookinstant",
            &me,
            &json!({ "signed_request": signed }),
        )
        .await,
    );
    assert!(!seen_before(&stored[0]), "the dry runs stored nothing");
    assert_eq!(all_purchases(&server, &me).await.len(), 1);
}

async fn purchases_are_listed_newest_first_across_pages(backend: Backend) {
    let (_db, _s, server) = start(backend).await;
    let (me, _) = server.device_session("device-iap-list-1").await;
    let (other, _) = server.device_session("device-iap-list-2").await;
    let base = now_ms() / 1000 - 100;
    for n in 0..5 {
        let payment = stores::facebook_payment(&format!("fbtok-list-{n}"), "gems_100", base + n);
        let body =
            json!({ "signed_request": stores::facebook_signed_request(FACEBOOK_SECRET, &payment) });
        purchases_of(&post(&server, "/v2/iap/purchase/facebookinstant", &me, &body).await);
    }
    let page = |cursor: String| {
        let (server, me) = (&server, &me);
        async move {
            let (status, page) = server
                .get_with_token(&format!("/v2/iap/purchase?limit=2&cursor={cursor}"), me)
                .await;
            assert_eq!(status, 200, "{page}");
            page
        }
    };
    let ids = |page: &Value| -> Vec<String> {
        page["validated_purchases"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| p["transaction_id"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let first = page(String::new()).await;
    assert_eq!(ids(&first), ["fbtok-list-4", "fbtok-list-3"]);
    assert_eq!(first.get("prev_cursor"), None);
    let second = page(first["cursor"].as_str().expect("cursor").to_owned()).await;
    assert_eq!(ids(&second), ["fbtok-list-2", "fbtok-list-1"]);
    let third = page(second["cursor"].as_str().expect("cursor").to_owned()).await;
    assert_eq!(ids(&third), ["fbtok-list-0"]);
    assert_eq!(third.get("cursor"), None, "the last page");
    // Back from the third page: the second again.
    let back = page(third["prev_cursor"].as_str().expect("prev").to_owned()).await;
    assert_eq!(ids(&back), ["fbtok-list-2", "fbtok-list-1"]);
    let back = page(back["prev_cursor"].as_str().expect("prev").to_owned()).await;
    assert_eq!(ids(&back), ["fbtok-list-4", "fbtok-list-3"]);

    // A cursor is its listing's: another user's page, garbage, a bad limit are refused.
    let cursor = first["cursor"].as_str().expect("cursor");
    for (path, token) in [
        (format!("/v2/iap/purchase?cursor={cursor}"), &other),
        ("/v2/iap/purchase?cursor=not-a-cursor".to_owned(), &me),
        ("/v2/iap/purchase?limit=101".to_owned(), &me),
        ("/v2/iap/purchase?limit=zero".to_owned(), &me),
    ] {
        let refused = server.get_with_token(&path, token).await;
        assert_error(&refused, 400, 3);
    }
}

async fn subscriptions_are_validated_listed_and_got_by_product(backend: Backend) {
    let (_db, s, server) = start(backend).await;
    let (me, _) = server.device_session("device-iap-subs-1").await;
    let now = now_ms();
    let hour = 3_600_000;
    // An App Store Server API transaction of a subscription.
    let jws = s.chain.sign(&stores::apple_subscription_transaction(
        "3000000002",
        "3000000001",
        "monthly",
        now - 2 * hour,
        now + hour,
    ));
    let (status, answer) = post(
        &server,
        "/v2/iap/subscription/apple",
        &me,
        &json!({ "receipt": jws }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let sub = &answer["validated_subscription"];
    assert_eq!(sub["original_transaction_id"], json!("3000000001"));
    assert_eq!(sub["product_id"], json!("monthly"));
    assert_eq!(sub["active"], json!(true));
    assert_eq!(ms(&sub["expiry_time"]), now + hour);
    assert_eq!(sub["user_id"], json!(user_id(&me)));
    // An app receipt with two periods of one subscription: the later one counts.
    s.receipts.add(
        "receipt-yearly",
        false,
        vec![],
        vec![
            stores::receipt_period(
                "4000000001",
                "4000000001",
                "yearly",
                now - 3 * hour,
                now - hour,
            ),
            stores::receipt_period(
                "4000000002",
                "4000000001",
                "yearly",
                now - hour,
                now + 48 * hour,
            ),
        ],
    );
    let (status, answer) = post(
        &server,
        "/v2/iap/subscription/apple",
        &me,
        &json!({ "receipt": "receipt-yearly" }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        ms(&answer["validated_subscription"]["expiry_time"]),
        now + 48 * hour
    );
    // A Google Play subscription.
    let expiry = chrono::DateTime::from_timestamp_millis(now + hour / 2)
        .expect("time")
        .to_rfc3339();
    s.google
        .set_subscription("gtok-vip", "vip", "2025-01-01T00:00:00Z", &expiry, None);
    let (status, answer) = post(
        &server,
        "/v2/iap/subscription/google",
        &me,
        &json!({ "receipt": stores::google_receipt("vip", "gtok-vip", now - hour) }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let sub = &answer["validated_subscription"];
    assert_eq!(sub["store"], json!("GOOGLE_PLAY_STORE"));
    assert_eq!(sub["environment"], json!("SANDBOX"));
    assert_eq!(
        (sub["active"].clone(), ms(&sub["expiry_time"])),
        (json!(true), now + hour / 2)
    );

    // Got by product.
    let (status, monthly) = server
        .get_with_token("/v2/iap/subscription/monthly", &me)
        .await;
    assert_eq!(
        (status, monthly["active"].clone()),
        (200, json!(true)),
        "{monthly}"
    );
    let missing = server
        .get_with_token("/v2/iap/subscription/weekly", &me)
        .await;
    assert_eq!(assert_error(&missing, 404, 5), "subscription not found");
    // Listed, two by two.
    let (status, first) = post(&server, "/v2/iap/subscription", &me, &json!({ "limit": 2 })).await;
    assert_eq!(status, 200, "{first}");
    let listed = first["validated_subscriptions"]
        .as_array()
        .expect("a page")
        .len();
    let cursor = first["cursor"].as_str().expect("a next page");
    let (status, second) = post(
        &server,
        "/v2/iap/subscription",
        &me,
        &json!({ "limit": 2, "cursor": cursor }),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    let rest = second["validated_subscriptions"]
        .as_array()
        .expect("a page")
        .len();
    assert_eq!((listed, rest, second.get("cursor")), (2, 1, None));
    let refused = post(&server, "/v2/iap/subscription", &me, &json!({ "limit": 0 })).await;
    assert_error(&refused, 400, 3);

    // Two hours on (the server's clock), the monthly has expired; the yearly has not.
    server.clock.advance(Duration::from_millis(2 * hour as u64));
    // (A new session: the first one has expired meanwhile.)
    let (me, _) = server.device_session("device-iap-subs-1").await;
    let (status, monthly) = server
        .get_with_token("/v2/iap/subscription/monthly", &me)
        .await;
    assert_eq!(status, 200, "{monthly}");
    assert_eq!(monthly.get("active"), None, "expired: {monthly}");
    let (status, yearly) = server
        .get_with_token("/v2/iap/subscription/yearly", &me)
        .await;
    assert_eq!(
        (status, yearly["active"].clone()),
        (200, json!(true)),
        "{yearly}"
    );

    // A purchase's transaction is not a subscription.
    let purchase = s
        .chain
        .sign(&stores::apple_transaction("3000000009", "gems_100", now));
    let wrong_call = post(
        &server,
        "/v2/iap/subscription/apple",
        &me,
        &json!({ "receipt": purchase }),
    )
    .await;
    assert_eq!(
        assert_error(&wrong_call, 400, 9),
        "Purchase Receipt. Use the appropriate function instead."
    );
}

async fn hostile_input_is_refused_and_nothing_is_stored(backend: Backend) {
    let (_db, _s, server) = start(backend).await;
    let (me, _) = server.device_session("device-iap-hostile-1").await;
    let huge = "A".repeat(140_000);
    let cases: Vec<(&str, Value)> = vec![
        ("/v2/iap/purchase/apple", json!({ "receipt": "" })),
        ("/v2/iap/purchase/apple", json!({ "receipt": huge })),
        (
            "/v2/iap/purchase/apple",
            json!({ "receipt": "!!!.???.***" }),
        ),
        (
            "/v2/iap/purchase/apple",
            json!({ "receipt": "e30.e30.e30" }),
        ),
        ("/v2/iap/purchase/apple", json!({ "receipt": 42 })),
        ("/v2/iap/purchase/google", json!({ "purchase": "" })),
        (
            "/v2/iap/purchase/google",
            json!({ "purchase": "{not json" }),
        ),
        (
            "/v2/iap/purchase/google",
            json!({ "purchase": "{\"json\": \"[]\"}" }),
        ),
        (
            "/v2/iap/purchase/google",
            json!({ "purchase": json!({ "packageName": "com.example.game", "productId": "a/../b", "purchaseToken": "x".repeat(600) }).to_string() }),
        ),
        (
            "/v2/iap/purchase/huawei",
            json!({ "purchase": "{}", "signature": "" }),
        ),
        (
            "/v2/iap/purchase/huawei",
            json!({ "purchase": "not json", "signature": "c2ln" }),
        ),
        (
            "/v2/iap/purchase/huawei",
            json!({ "purchase": "{}", "signature": "%%%" }),
        ),
        (
            "/v2/iap/purchase/facebookinstant",
            json!({ "signed_request": "" }),
        ),
        (
            "/v2/iap/purchase/facebookinstant",
            json!({ "signed_request": "***.***" }),
        ),
        ("/v2/iap/subscription/apple", json!({ "receipt": "a.b" })),
        (
            "/v2/iap/subscription/google",
            json!({ "receipt": "[1, 2]" }),
        ),
    ];
    for (path, body) in cases {
        let answer = post(&server, path, &me, &body).await;
        assert_eq!(answer.0, 400, "{path} {body:.80}: {}", answer.1);
        let code = answer.1["code"].as_i64();
        assert!(matches!(code, Some(3 | 9)), "{path}: {}", answer.1);
    }
    let empty = post(
        &server,
        "/v2/iap/purchase/apple",
        &me,
        &json!({ "receipt": "" }),
    )
    .await;
    assert_eq!(assert_error(&empty, 400, 3), "Receipt cannot be empty.");
    let not_json = status_and_json(
        server
            .http
            .post(server.url("/v2/iap/purchase/apple"))
            .bearer_auth(&me)
            .body("{\"receipt\":")
            .send()
            .await
            .expect("request"),
    )
    .await;
    assert_error(&not_json, 400, 3);
    let anonymous = status_and_json(
        server
            .http
            .post(server.url("/v2/iap/purchase/apple"))
            .json(&json!({ "receipt": "x" }))
            .send()
            .await
            .expect("request"),
    )
    .await;
    assert_error(&anonymous, 401, 16);
    assert!(all_purchases(&server, &me).await.is_empty());
}

async fn unconfigured_stores_are_refused_as_nakama_does(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (me, _) = server.device_session("device-iap-unconfigured-1").await;
    for (path, body, store) in [
        (
            "/v2/iap/purchase/apple",
            json!({ "receipt": "MIIT..." }),
            "Apple",
        ),
        (
            "/v2/iap/subscription/apple",
            json!({ "receipt": "MIIT..." }),
            "Apple",
        ),
        (
            "/v2/iap/purchase/google",
            json!({ "purchase": "{}" }),
            "Google",
        ),
        (
            "/v2/iap/subscription/google",
            json!({ "receipt": "{}" }),
            "Google",
        ),
        (
            "/v2/iap/purchase/huawei",
            json!({ "purchase": "{}", "signature": "x" }),
            "Huawei",
        ),
        (
            "/v2/iap/purchase/facebookinstant",
            json!({ "signed_request": "a.b" }),
            "Facebook Instant",
        ),
    ] {
        let answer = post(&server, path, &me, &body).await;
        assert_eq!(
            assert_error(&answer, 400, 9),
            format!("{store} IAP is not configured."),
            "{path}"
        );
    }
    // The notification endpoints are not served.
    for path in [
        "/v2/console/apple/notifications/anything",
        "/v2/console/google/notifications/anything",
    ] {
        let answer = post(&server, path, "", &json!({})).await;
        assert_eq!(answer.0, 404, "{path}");
    }
}

async fn a_store_that_is_down_fails_only_its_own_validations_quickly(backend: Backend) {
    let db = Database::new(backend).await;
    let s = stand_ins().await;
    let mut config = configured(&db, &s);
    config.iap.timeout_ms = 500;
    // Nothing listens on Apple's port; Google's server takes requests and never answers.
    config.iap.apple.verify_receipt_url =
        format!("http://127.0.0.1:{}/verifyReceipt", support::free_port());
    config.iap.google.publisher_url = stores::silent().await;
    let server = TestServer::start(config).await;
    let (me, _) = server.device_session("device-iap-down-1").await;
    s.google.add_product("gtok-down", 0, now_ms());

    let started = Instant::now();
    let apple = post(
        &server,
        "/v2/iap/purchase/apple",
        &me,
        &json!({ "receipt": "MIIT" }),
    )
    .await;
    let message = assert_error(&apple, 503, 14);
    assert!(
        message.starts_with("Apple IAP verification is currently unavailable"),
        "{message}"
    );
    let google = post(
        &server,
        "/v2/iap/purchase/google",
        &me,
        &json!({ "purchase": stores::google_receipt("gems_100", "gtok-down", now_ms()) }),
    )
    .await;
    let message = assert_error(&google, 503, 14);
    assert!(message.contains("no answer within 500 ms"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "failed within the timeout, not later: {:?}",
        started.elapsed()
    );
    // The other stores are not affected.
    let jws = s.chain.sign(&stores::apple_transaction(
        "6000000001",
        "gems_100",
        now_ms(),
    ));
    purchases_of(
        &post(
            &server,
            "/v2/iap/purchase/apple",
            &me,
            &json!({ "receipt": jws }),
        )
        .await,
    );
    let payment = stores::facebook_payment("fbtok-down", "gems_100", now_ms() / 1000);
    let body =
        json!({ "signed_request": stores::facebook_signed_request(FACEBOOK_SECRET, &payment) });
    purchases_of(&post(&server, "/v2/iap/purchase/facebookinstant", &me, &body).await);
    assert_eq!(all_purchases(&server, &me).await.len(), 2);
}

/// An App Store Server Notification v2 about `transaction` (signed by `chain`).
fn apple_notification(chain: &AppleChain, kind: &str, subtype: &str, transaction: &Value) -> Value {
    let payload = json!({
        "notificationType": kind,
        "subtype": subtype,
        "notificationUUID": uuid::Uuid::new_v4().to_string(),
        "version": "2.0",
        "signedDate": now_ms(),
        "data": {
            "bundleId": "com.example.game",
            "environment": "Sandbox",
            "signedTransactionInfo": chain.sign(transaction),
        },
    });
    json!({ "signedPayload": chain.sign(&payload) })
}

async fn notification_endpoints_answer_only_at_their_secret_path(backend: Backend) {
    let (_db, s, server) = start(backend).await;
    let t = now_ms();
    let note = apple_notification(
        &s.chain,
        "REFUND",
        "",
        &stores::apple_transaction("7000000001", "gems_100", t),
    );
    for path in [
        "/v2/console/apple/notifications/wrong-id".to_owned(),
        "/v2/console/google/notifications/wrong-id".to_owned(),
        format!("/v2/console/google/notifications/{APPLE_ENDPOINT}"),
    ] {
        let answer = post(&server, &path, "", &note).await;
        assert_eq!(answer.0, 404, "{path}: {}", answer.1);
    }
    let apple = format!("/v2/console/apple/notifications/{APPLE_ENDPOINT}");
    // Nothing known about that transaction: handled, nothing to do.
    assert_eq!(post(&server, &apple, "", &note).await.0, 200);
    // Nakama's older path serves it too.
    let older = format!("/v2/console/apple/subscriptions/{APPLE_ENDPOINT}");
    assert_eq!(post(&server, &older, "", &note).await.0, 200);
    // Malformed, or signed by another chain: refused.
    let forged = apple_notification(
        &AppleChain::new(),
        "REFUND",
        "",
        &stores::apple_transaction("7000000001", "gems_100", t),
    );
    for body in [json!({}), json!({ "signedPayload": "a.b.c" }), forged] {
        let answer = post(&server, &apple, "", &body).await;
        assert_error(&answer, 400, 3);
    }
    let google = format!("/v2/console/google/notifications/{GOOGLE_ENDPOINT}");
    for body in [
        json!({ "message": { "data": "%%% not base64" } }),
        json!({ "message": { "data": "bm90IGpzb24=" } }),
        json!([1, 2, 3]),
    ] {
        let answer = post(&server, &google, "", &body).await;
        assert_error(&answer, 400, 3);
    }
    let test_notification = stores::google_push(&json!({
        "version": "1.0", "packageName": "com.example.game", "eventTimeMillis": "1",
        "testNotification": { "version": "1.0" },
    }));
    assert_eq!(post(&server, &google, "", &test_notification).await.0, 200);
}

/// What an observer was told.
#[derive(Default)]
struct Recorder {
    purchases: Mutex<Vec<(StoreProvider, NotificationKind, ValidatedPurchase, String)>>,
    subscriptions: Mutex<
        Vec<(
            StoreProvider,
            NotificationKind,
            ValidatedSubscription,
            String,
        )>,
    >,
}

impl NotificationObserver for Recorder {
    fn purchase_notification(
        &self,
        store: StoreProvider,
        kind: NotificationKind,
        purchase: &ValidatedPurchase,
        provider_payload: &str,
    ) {
        self.purchases
            .lock()
            .push((store, kind, purchase.clone(), provider_payload.to_owned()));
    }

    fn subscription_notification(
        &self,
        store: StoreProvider,
        kind: NotificationKind,
        subscription: &ValidatedSubscription,
        provider_payload: &str,
    ) {
        self.subscriptions.lock().push((
            store,
            kind,
            subscription.clone(),
            provider_payload.to_owned(),
        ));
    }
}

/// The purchases service on `config`'s database (its server stopped), with a recorder observing
/// its notifications.
async fn service(config: &Config) -> (muster::services::Stores, Purchases, Arc<Recorder>) {
    let metrics = Arc::new(muster::base::metrics::Metrics::new());
    let stores = muster::services::Stores::open(config, metrics)
        .await
        .expect("the database");
    let purchases = Purchases::new(
        &config.iap,
        stores.purchases.clone(),
        muster::base::clock::Clock::system(),
        &prometheus::Registry::new(),
    )
    .expect("the purchases service");
    let recorder = Arc::new(Recorder::default());
    assert!(purchases.observe_notifications(recorder.clone()).is_ok());
    assert!(
        purchases
            .observe_notifications(Arc::new(Recorder::default()))
            .is_err(),
        "set once"
    );
    (stores, purchases, recorder)
}

async fn an_apple_refund_marks_the_purchase_and_tells_the_observer(backend: Backend) {
    let db = Database::new(backend).await;
    let s = stand_ins().await;
    let config = configured(&db, &s);
    let server = TestServer::start(config.clone()).await;
    let (me, _) = server.device_session("device-iap-refund-1").await;
    let t = now_ms() - 60_000;
    for id in ["8000000001", "8000000002"] {
        let jws = s.chain.sign(&stores::apple_transaction(id, "gems_100", t));
        purchases_of(
            &post(
                &server,
                "/v2/iap/purchase/apple",
                &me,
                &json!({ "receipt": jws }),
            )
            .await,
        );
    }
    // Over HTTP: the refund is stored.
    let mut refunded = stores::apple_transaction("8000000001", "gems_100", t);
    refunded["revocationDate"] = json!(t + 30_000);
    refunded["revocationReason"] = json!(0);
    let note = apple_notification(&s.chain, "REFUND", "", &refunded);
    let apple = format!("/v2/console/apple/notifications/{APPLE_ENDPOINT}");
    assert_eq!(post(&server, &apple, "", &note).await.0, 200);
    let listed = all_purchases(&server, &me).await;
    let refund_of = |id: &str| {
        let purchase = listed
            .iter()
            .find(|p| p["transaction_id"] == json!(id))
            .expect("listed");
        ms(&purchase["refund_time"])
    };
    assert_eq!(
        (refund_of("8000000001"), refund_of("8000000002")),
        (t + 30_000, 0)
    );
    server.stop().await.expect("stop");

    // Through the service: the observer is told, after the record changed.
    let (stores_, purchases, recorder) = service(&config).await;
    let mut refunded = stores::apple_transaction("8000000002", "gems_100", t);
    refunded["revocationDate"] = json!(t + 40_000);
    let note = apple_notification(&s.chain, "REFUND", "", &refunded);
    let handled = purchases
        .apple_notification(note.to_string().as_bytes())
        .await
        .expect("handled");
    assert_eq!(handled, Handled::Applied);
    {
        let told = recorder.purchases.lock();
        assert_eq!(told.len(), 1);
        let (store, kind, purchase, payload) = &told[0];
        assert_eq!(
            (*store, *kind),
            (StoreProvider::AppleAppStore, NotificationKind::Refunded)
        );
        assert_eq!(purchase.transaction_id, "8000000002");
        assert_eq!(purchase.user_id, user_id(&me));
        assert_eq!(
            purchase.refund_time.as_ref().map(|t| t.seconds),
            Some((t + 40_000) / 1000)
        );
        let payload: Value = serde_json::from_str(payload).expect("JSON payload");
        assert_eq!(
            payload["transactionInfo"]["transactionId"],
            json!("8000000002")
        );
    }
    let stored = purchases
        .purchase_by_transaction_id("8000000002")
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(
        stored.refund_time.map(|t| t.seconds),
        Some((t + 40_000) / 1000)
    );
    // A refund of a purchase nobody validated, naming no user: nothing to do, nobody told.
    let unknown = apple_notification(
        &s.chain,
        "REFUND",
        "",
        &stores::apple_transaction("8000000099", "gems_100", t),
    );
    let handled = purchases
        .apple_notification(unknown.to_string().as_bytes())
        .await
        .expect("handled");
    assert_eq!(handled, Handled::Ignored);
    // Signed by another chain: refused, nobody told.
    let forged = apple_notification(&AppleChain::new(), "REFUND", "", &refunded);
    assert!(purchases
        .apple_notification(forged.to_string().as_bytes())
        .await
        .is_err());
    assert_eq!(recorder.purchases.lock().len(), 1);
    stores_.close().await;
}

async fn a_google_renewal_moves_the_expiry_and_tells_the_observer(backend: Backend) {
    let db = Database::new(backend).await;
    let s = stand_ins().await;
    let config = configured(&db, &s);
    let server = TestServer::start(config.clone()).await;
    let (me, _) = server.device_session("device-iap-renewal-1").await;
    let now = now_ms();
    let at = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .expect("time")
            .to_rfc3339()
    };
    let day = 86_400_000;
    s.google
        .set_subscription("gtok-renew", "vip", &at(now - day), &at(now + day), None);
    let (status, answer) = post(
        &server,
        "/v2/iap/subscription/google",
        &me,
        &json!({ "receipt": stores::google_receipt("vip", "gtok-renew", now - day) }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    // Renewed for a month: the store's notification moves the expiry.
    s.google.set_subscription(
        "gtok-renew",
        "vip",
        &at(now - day),
        &at(now + 30 * day),
        None,
    );
    let renewal = stores::google_push(&json!({
        "version": "1.0",
        "packageName": "com.example.game",
        "eventTimeMillis": now.to_string(),
        "subscriptionNotification": { "version": "1.0", "notificationType": 2,
            "purchaseToken": "gtok-renew", "subscriptionId": "vip" },
    }));
    let google = format!("/v2/console/google/notifications/{GOOGLE_ENDPOINT}");
    assert_eq!(post(&server, &google, "", &renewal).await.0, 200);
    let (status, sub) = server.get_with_token("/v2/iap/subscription/vip", &me).await;
    assert_eq!(status, 200, "{sub}");
    assert_eq!(ms(&sub["expiry_time"]), now + 30 * day);
    assert!(sub["provider_notification"]
        .as_str()
        .is_some_and(|n| n.contains("messageId")));
    server.stop().await.expect("stop");

    // Through the service: renewed again, and the observer is told.
    let (stores_, purchases, recorder) = service(&config).await;
    s.google.set_subscription(
        "gtok-renew",
        "vip",
        &at(now - day),
        &at(now + 60 * day),
        None,
    );
    let handled = purchases
        .google_notification(renewal.to_string().as_bytes())
        .await
        .expect("handled");
    assert_eq!(handled, Handled::Applied);
    {
        let told = recorder.subscriptions.lock();
        assert_eq!(told.len(), 1);
        let (store, kind, sub, payload) = &told[0];
        assert_eq!(
            (*store, *kind),
            (StoreProvider::GooglePlayStore, NotificationKind::Renewed)
        );
        assert_eq!(sub.user_id, user_id(&me));
        assert_eq!(sub.original_transaction_id, "gtok-renew");
        assert!(sub.active);
        assert_eq!(
            sub.expiry_time.as_ref().map(|t| t.seconds),
            Some((now + 60 * day) / 1000)
        );
        assert!(payload.contains("subscriptionPurchaseV2"), "{payload}");
    }
    let stored = purchases
        .subscription_by_original_transaction_id("gtok-renew")
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(
        stored.expiry_time.map(|t| t.seconds),
        Some((now + 60 * day) / 1000)
    );
    // A voided one-time purchase: re-read through the Publisher API, stored refunded.
    s.google
        .add_product_v2("gtok-voided", "gems_100", &user_id(&me));
    let voided = stores::google_push(&json!({
        "version": "1.0",
        "packageName": "com.example.game",
        "eventTimeMillis": now.to_string(),
        "voidedPurchaseNotification": { "purchaseToken": "gtok-voided", "orderId": "GPA.1",
            "productType": 2, "refundType": 1 },
    }));
    let handled = purchases
        .google_notification(voided.to_string().as_bytes())
        .await
        .expect("handled");
    assert_eq!(handled, Handled::Applied);
    let refunded = purchases
        .purchase_by_transaction_id("gtok-voided")
        .await
        .expect("read")
        .expect("stored");
    assert!(refunded.refund_time.is_some_and(|t| t.seconds > 0));
    assert_eq!(recorder.purchases.lock().len(), 1);
    stores_.close().await;
}

/// Two nodes on one PostgreSQL: a receipt validated on both at once is stored once, and a
/// replay on the other node is `seen_before`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (TEST_POSTGRES_URL)"]
async fn a_replay_on_another_node_is_seen_before() {
    let db = Database::new(Backend::Postgres).await;
    let s = stand_ins().await;
    let a = TestServer::start(configured(&db, &s)).await;
    let b = TestServer::start(configured(&db, &s)).await;
    let (me, _) = a.device_session("device-iap-nodes-1").await;
    let payment = stores::facebook_payment("fbtok-nodes", "gems_100", now_ms() / 1000);
    let body =
        json!({ "signed_request": stores::facebook_signed_request(FACEBOOK_SECRET, &payment) });
    let attempts = (0..12).map(|n| {
        let (node, body, me) = (if n % 2 == 0 { &a } else { &b }, &body, &me);
        async move { post(node, "/v2/iap/purchase/facebookinstant", me, body).await }
    });
    let answers = futures_util::future::join_all(attempts).await;
    let first_stores: usize = answers
        .iter()
        .map(|answer| {
            purchases_of(answer)
                .iter()
                .filter(|p| !seen_before(p))
                .count()
        })
        .sum();
    assert_eq!(first_stores, 1, "one node stored it, once");

    let jws = s.chain.sign(&stores::apple_transaction(
        "9000000001",
        "gems_100",
        now_ms(),
    ));
    let receipt = json!({ "receipt": jws });
    let on_a = purchases_of(&post(&a, "/v2/iap/purchase/apple", &me, &receipt).await);
    assert!(!seen_before(&on_a[0]));
    let on_b = purchases_of(&post(&b, "/v2/iap/purchase/apple", &me, &receipt).await);
    assert!(seen_before(&on_b[0]), "the other node finds it stored");
    assert_eq!(all_purchases(&b, &me).await.len(), 2);
}

/// `message` with the session token `token`.
fn with_token<T>(token: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        tonic::metadata::MetadataValue::try_from(format!("Bearer {token}")).expect("ascii"),
    );
    request
}

/// The same calls over gRPC: transcoded onto the REST routes, answered alike, errors as gRPC
/// statuses.
async fn the_calls_answer_over_grpc_as_over_rest(backend: Backend) {
    use muster_proto::grpc as api;
    use muster_proto::grpc::nakama_client::NakamaClient;

    let (_db, s, server) = start(backend).await;
    let (me, _) = server.device_session("device-iap-grpc-1").await;
    let addr = server.grpc_addr.expect("grpc.listen is set");
    let mut client = NakamaClient::connect(format!("http://{addr}"))
        .await
        .expect("the gRPC edge answers");
    let payment = stores::facebook_payment("fbtok-grpc", "gems_100", now_ms() / 1000);
    let request = api::ValidatePurchaseFacebookInstantRequest {
        signed_request: stores::facebook_signed_request(FACEBOOK_SECRET, &payment),
        persist: None,
    };
    let first = client
        .validate_purchase_facebook_instant(with_token(&me, request.clone()))
        .await
        .expect("validated")
        .into_inner();
    let purchase = &first.validated_purchases[0];
    assert_eq!(
        (purchase.transaction_id.as_str(), purchase.seen_before),
        ("fbtok-grpc", false)
    );
    assert_eq!(purchase.store, StoreProvider::FacebookInstantStore as i32);
    let replay = client
        .validate_purchase_facebook_instant(with_token(&me, request))
        .await
        .expect("validated")
        .into_inner();
    assert!(replay.validated_purchases[0].seen_before);

    let jws = s.chain.sign(&stores::apple_subscription_transaction(
        "9100000002",
        "9100000001",
        "monthly",
        now_ms() - 1000,
        now_ms() + 3_600_000,
    ));
    let subscription = client
        .validate_subscription_apple(with_token(
            &me,
            api::ValidateSubscriptionAppleRequest {
                receipt: jws,
                persist: None,
            },
        ))
        .await
        .expect("validated")
        .into_inner()
        .validated_subscription
        .expect("a subscription");
    assert!(subscription.active);
    let got = client
        .get_subscription(with_token(
            &me,
            api::GetSubscriptionRequest {
                product_id: "monthly".into(),
            },
        ))
        .await
        .expect("got")
        .into_inner();
    assert_eq!(got.original_transaction_id, "9100000001");
    let listed = client
        .list_subscriptions(with_token(
            &me,
            api::ListSubscriptionsRequest {
                limit: Some(pbjson_types::Int32Value { value: 10 }),
                cursor: String::new(),
            },
        ))
        .await
        .expect("listed")
        .into_inner();
    assert_eq!(listed.validated_subscriptions.len(), 1);
    let missing = client
        .get_subscription(with_token(
            &me,
            api::GetSubscriptionRequest {
                product_id: "weekly".into(),
            },
        ))
        .await
        .expect_err("not found");
    assert_eq!(
        (missing.code(), missing.message()),
        (tonic::Code::NotFound, "subscription not found")
    );
    let forged = client
        .validate_purchase_apple(with_token(
            &me,
            api::ValidatePurchaseAppleRequest {
                receipt: AppleChain::new().sign(&stores::apple_transaction(
                    "9100000009",
                    "gems",
                    1,
                )),
                persist: None,
            },
        ))
        .await
        .expect_err("refused");
    assert_eq!(forged.code(), tonic::Code::InvalidArgument);
}

/// The store itself, on each engine: a validation's rows in one upsert (answered in the order
/// given), a replay found with its owner and fields kept, a refund taken, pages both ways.
async fn the_store_keeps_one_row_per_transaction_on_both_engines(backend: Backend) {
    use muster::purchases::store::{Page, PurchaseRecord, SubscriptionRecord};

    let db = Database::new(backend).await;
    let metrics = Arc::new(muster::base::metrics::Metrics::new());
    let stores = muster::services::Stores::open(&db.config(), metrics)
        .await
        .expect("the database");
    let store = stores.purchases.clone();
    let record = |id: &str, time: i64| PurchaseRecord {
        user_id: None,
        store: StoreProvider::GooglePlayStore as i32,
        transaction_id: id.to_owned(),
        product_id: "gems_100".into(),
        purchase_time_ms: time,
        refund_time_ms: 0,
        environment: 2,
        raw_response: format!("{{\"id\": \"{id}\"}}"),
        create_time_ms: 1_000,
        update_time_ms: 1_000,
    };
    let ids = ["tx-c", "tx-a", "tx-e", "tx-b", "tx-d"];
    let first = store
        .upsert_purchases(ids.iter().zip(10..).map(|(id, t)| record(id, t)).collect())
        .await
        .expect("stored");
    let answered: Vec<&str> = first
        .iter()
        .map(|p| p.record.transaction_id.as_str())
        .collect();
    assert_eq!(answered, ids, "answered in the order given");
    assert!(first.iter().all(|p| !p.seen_before));

    // A replay: found, its fields kept but the update time; a refund is taken, and a later
    // store without one keeps it.
    let mut replay = record("tx-a", 99);
    replay.product_id = "gems_9999".into();
    replay.update_time_ms = 2_000;
    replay.refund_time_ms = 1_500;
    let again = store
        .upsert_purchases(vec![replay, record("tx-f", 5)])
        .await
        .expect("stored");
    assert!(again[0].seen_before && !again[1].seen_before);
    let kept = &again[0].record;
    assert_eq!(
        (
            kept.product_id.as_str(),
            kept.purchase_time_ms,
            kept.create_time_ms
        ),
        ("gems_100", 11, 1_000)
    );
    assert_eq!((kept.update_time_ms, kept.refund_time_ms), (2_000, 1_500));
    let later = store
        .upsert_purchases(vec![record("tx-a", 11)])
        .await
        .expect("stored");
    assert_eq!(later[0].record.refund_time_ms, 1_500);
    assert_eq!(
        store
            .purchase("tx-a".into())
            .await
            .expect("read")
            .map(|p| p.refund_time_ms),
        Some(1_500)
    );

    // Pages, newest first, then back.
    let page = |after: Option<(i64, String)>, backward: bool| Page {
        user_id: None,
        after,
        backward,
        limit: 2,
    };
    let ids_of = |rows: Vec<PurchaseRecord>| -> Vec<String> {
        rows.into_iter().map(|r| r.transaction_id).collect()
    };
    let newest = store.list_purchases(page(None, false)).await.expect("page");
    assert_eq!(ids_of(newest), ["tx-d", "tx-b"]);
    let older = store
        .list_purchases(page(Some((13, "tx-b".into())), false))
        .await
        .expect("page");
    assert_eq!(ids_of(older), ["tx-e", "tx-a"]);
    let newer = store
        .list_purchases(page(Some((11, "tx-a".into())), true))
        .await
        .expect("page");
    assert_eq!(ids_of(newer), ["tx-e", "tx-b"], "nearest first");

    // Subscriptions: updated in place, a non-empty notification and a refund taken.
    let subscription = |expire: i64, notification: &str, refund: i64| SubscriptionRecord {
        user_id: None,
        store: StoreProvider::AppleAppStore as i32,
        original_transaction_id: "otx-1".into(),
        product_id: "monthly".into(),
        purchase_time_ms: 100,
        expire_time_ms: expire,
        refund_time_ms: refund,
        environment: 1,
        raw_response: String::new(),
        raw_notification: notification.into(),
        create_time_ms: 1_000,
        update_time_ms: 1_000,
    };
    store
        .upsert_subscriptions(vec![subscription(5_000, "", 0)])
        .await
        .expect("stored");
    store
        .upsert_subscriptions(vec![subscription(9_000, "{\"n\": 1}", 0)])
        .await
        .expect("stored");
    let stored = store
        .upsert_subscriptions(vec![subscription(9_000, "", 7_000)])
        .await
        .expect("stored");
    assert_eq!(
        (
            stored[0].expire_time_ms,
            stored[0].raw_notification.as_str(),
            stored[0].refund_time_ms
        ),
        (9_000, "{\"n\": 1}", 7_000)
    );
    let listed = store
        .list_subscriptions(Page {
            user_id: None,
            after: None,
            backward: false,
            limit: 10,
        })
        .await
        .expect("page");
    assert_eq!(listed.len(), 1);
    stores.close().await;
}

/// A module that validates and lists purchases from server code, and records the App Store's
/// refund notifications it is told of in storage.
const IAP_MODULE: &str = r#"
function InitModule(ctx, logger, nk, initializer) {
  initializer.registerRpc("validate", rpcValidate);
  initializer.registerRpc("listed", rpcListed);
  initializer.registerPurchaseNotificationApple(onAppleNotification);
}

function rpcValidate(ctx, logger, nk, payload) {
  var answer = nk.purchaseValidateApple(ctx.userId, payload);
  var again = nk.purchaseValidateApple(ctx.userId, payload);
  var refused = "";
  try {
    nk.purchaseValidateApple(ctx.userId, payload, true, "an-override");
  } catch (e) {
    refused = e.message;
  }
  return JSON.stringify({ first: answer.validatedPurchases, again: again.validatedPurchases, refused: refused });
}

function rpcListed(ctx, logger, nk, payload) {
  var page = nk.purchasesList(ctx.userId, 10);
  var one = nk.purchaseGetByTransactionId(payload);
  var none = nk.purchaseGetByTransactionId("no-such-transaction");
  return JSON.stringify({ page: page, one: one, none: none });
}

function onAppleNotification(ctx, logger, nk, purchase, providerPayload) {
  nk.storageWrite([{
    collection: "refunds", key: purchase.transactionId, userId: purchase.userId,
    value: { refundTime: purchase.refundTime || 0, mode: ctx.executionMode,
             namesTransaction: providerPayload.indexOf(purchase.transactionId) >= 0 },
    permissionRead: 1, permissionWrite: 0,
  }]);
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_validates_lists_and_hears_of_refunds() {
    let db = Database::new(Backend::Sqlite).await;
    let s = stand_ins().await;
    let mut config = configured(&db, &s);
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("index.js"), IAP_MODULE).expect("module");
    config.runtime.path = dir.path().display().to_string();
    let server = TestServer::start(config).await;
    let (me, _) = server.device_session("device-iap-module-1").await;
    let t = now_ms() - 60_000;
    let jws = s
        .chain
        .sign(&stores::apple_transaction("9100000001", "gems_500", t));

    let call = |id: &'static str, body: String| {
        let (server, me) = (&server, me.clone());
        async move {
            let answer = post(server, &format!("/v2/rpc/{id}"), &me, &json!(body)).await;
            assert_eq!(answer.0, 200, "{id}: {}", answer.1);
            let text = answer.1["payload"].as_str().expect("payload").to_owned();
            serde_json::from_str::<Value>(&text).expect("JSON")
        }
    };
    let validated = call("validate", jws).await;
    let first = &validated["first"][0];
    assert_eq!(first["transactionId"], json!("9100000001"));
    assert_eq!(first["productId"], json!("gems_500"));
    assert_eq!(first["store"], json!("APPLE_APP_STORE"));
    assert_eq!(first["userId"], json!(user_id(&me)));
    assert_eq!(first["purchaseTime"], json!(t / 1000));
    assert_eq!(first["seenBefore"], json!(false));
    assert_eq!(validated["again"][0]["seenBefore"], json!(true));
    assert!(
        validated["refused"]
            .as_str()
            .is_some_and(|m| m.contains("overriding the store's credentials")),
        "{validated}"
    );

    let listed = call("listed", "9100000001".into()).await;
    let page = listed["page"]["validatedPurchases"]
        .as_array()
        .expect("a list");
    assert_eq!(page.len(), 1);
    assert_eq!(listed["page"]["cursor"], Value::Null);
    assert_eq!(listed["one"]["transactionId"], json!("9100000001"));
    assert_eq!(listed["none"], Value::Null);

    // The App Store refunds it: the module's hook hears of it, with the refund time.
    let mut refunded = stores::apple_transaction("9100000001", "gems_500", t);
    refunded["revocationDate"] = json!(t + 30_000);
    refunded["revocationReason"] = json!(0);
    let note = apple_notification(&s.chain, "REFUND", "", &refunded);
    let apple = format!("/v2/console/apple/notifications/{APPLE_ENDPOINT}");
    assert_eq!(post(&server, &apple, "", &note).await.0, 200);
    let read = json!({"object_ids": [{"collection": "refunds", "key": "9100000001", "user_id": user_id(&me)}]});
    let recorded = || async {
        let answer = post(&server, "/v2/storage", &me, &read).await;
        answer.1["objects"]
            .as_array()
            .is_some_and(|o| !o.is_empty())
    };
    support::wait::eventually("the refund hook's record", recorded).await;
    let answer = post(&server, "/v2/storage", &me, &read).await;
    let value: Value =
        serde_json::from_str(answer.1["objects"][0]["value"].as_str().expect("value"))
            .expect("JSON");
    assert_eq!(value["refundTime"], json!((t + 30_000) / 1000));
    assert_eq!(value["mode"], json!("purchase_notification_apple"));
    assert_eq!(value["namesTransaction"], json!(true));
    server.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_players_purchases_and_finds_one_by_transaction() {
    let db = Database::new(Backend::Sqlite).await;
    let s = stand_ins().await;
    let mut config = configured(&db, &s);
    config.console.admin_password = "console-admin-password".into();
    let server = TestServer::start(config).await;
    let (me, _) = server.device_session("device-iap-console-1").await;
    let jws = s.chain.sign(&stores::apple_transaction(
        "9200000001",
        "gems_900",
        now_ms() - 60_000,
    ));
    let body = json!({ "receipt": jws });
    assert_eq!(
        post(&server, "/v2/iap/purchase/apple", &me, &body).await.0,
        200
    );

    let login = server
        .http
        .post(server.console_url("/api/login"))
        .json(&json!({"username": "admin", "password": "console-admin-password"}))
        .send()
        .await
        .expect("login");
    assert!(login.status().is_success());
    let cookie = login.headers()[reqwest::header::SET_COOKIE]
        .to_str()
        .expect("cookie")
        .split(';')
        .next()
        .expect("cookie")
        .to_owned();
    let get = |path: String| {
        let (server, cookie) = (&server, cookie.clone());
        async move {
            status_and_json(
                server
                    .http
                    .get(server.console_url(&path))
                    .header(reqwest::header::COOKIE, cookie)
                    .send()
                    .await
                    .expect("console"),
            )
            .await
        }
    };
    let (status, page) = get(format!("/api/accounts/{}", user_id(&me))).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        page["purchases"]["validated_purchases"][0]["transaction_id"],
        json!("9200000001")
    );
    assert_eq!(
        page["account"]["user"]["id"],
        json!(user_id(&me)),
        "the account page"
    );
    let (status, found) = get("/api/purchases/9200000001".into()).await;
    assert_eq!(status, 200);
    assert_eq!(found["product_id"], json!("gems_900"));
    assert_eq!(found["user_id"], json!(user_id(&me)));
    let (status, _) = get("/api/purchases/no-such-transaction".into()).await;
    assert_eq!(status, 404);
    server.stop().await.expect("stop");
}
