//! Wallets, inventory, the ledger and server functions, over HTTP and the realtime socket, on
//! SQLite and PostgreSQL: the starting grant, concurrency (no overdraw), ledger consistency,
//! idempotent retries, every error path (each checked to change nothing), HTTP-key calls, and a
//! game's own function registered through the trait.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use muster::economy::config::StartingItem;
use muster::economy::Change;
use muster::functions::{Call, Functions, RpcError, ServerFunction};
use serde_json::{json, Value};
use support::{assert_error, Backend, Client, Database, TestServer};
use tokio_tungstenite::tungstenite::Message;

on_both_backends!(
    new_accounts_get_the_starting_grant,
    concurrent_spends_never_overdraw,
    grants_and_spends_balance_with_the_ledger,
    idempotent_retry_applies_once,
    errors_are_clear_and_change_nothing,
    http_key_calls_act_for_a_named_account,
    socket_rpc_answers_and_errors,
    custom_function_changes_several_things_atomically,
    a_failing_write_does_not_fail_the_others,
    players_cannot_call_value_functions_unless_opted_in,
    the_inventory_is_paged,
);

/// A test configuration with a small wallet, so overdraws are easy to reach, and the built-in
/// functions opted in for players (these tests call them with session tokens).
fn config(db: &Database) -> muster::config::Config {
    let mut config = db.config();
    config.economy.starting_wallet = BTreeMap::from([("coins".into(), 1000), ("gems".into(), 50)]);
    config.economy.starting_items = vec![StartingItem {
        id: "item".into(),
        kind: "default".into(),
        count: 1_000_000,
    }];
    config.runtime.player_builtin_functions = config.runtime.builtin_functions.clone();
    config
}

/// `POST /v2/rpc/{id}?http_key=` for the account `user_id`: the status and the parsed result.
async fn rpc_as_server(
    server: &TestServer,
    id: &str,
    mut payload: Value,
    user_id: &str,
) -> (u16, Value) {
    payload["user_id"] = user_id.into();
    let response = server
        .http
        .post(server.url(&format!("/v2/rpc/{id}?http_key=defaulthttpkey")))
        .json(&Value::String(payload.to_string()))
        .send()
        .await
        .expect("request");
    support::status_and_json(response).await
}

/// `POST /v2/rpc/{id}` as nakama-js sends it (the payload as a JSON string); answers the status
/// and, on success, the parsed result payload, else the error body.
async fn rpc(server: &TestServer, token: &str, id: &str, payload: Value) -> (u16, Value) {
    let response = server
        .http
        .post(server.url(&format!("/v2/rpc/{id}")))
        .bearer_auth(token)
        .json(&Value::String(payload.to_string()))
        .send()
        .await
        .expect("request");
    let (status, body) = support::status_and_json(response).await;
    if status == 200 {
        let payload = body["payload"].as_str().expect("payload string").to_owned();
        return (status, serde_json::from_str(&payload).expect("JSON result"));
    }
    (status, body)
}

async fn wallet(server: &TestServer, token: &str) -> BTreeMap<String, i64> {
    let (status, account) = server.get_with_token("/v2/account", token).await;
    assert_eq!(status, 200, "{account}");
    let text = account["wallet"].as_str().expect("wallet is a JSON string");
    serde_json::from_str(text).expect("wallet JSON object")
}

/// Every ledger row of the caller, newest first, read `page` rows at a time.
async fn ledger(server: &TestServer, token: &str, page: usize) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut cursor = String::new();
    loop {
        let (status, body) = server
            .get_with_token(
                &format!("/v2/economy/ledger?limit={page}&cursor={cursor}"),
                token,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let rows = body["entries"].as_array().expect("entries").clone();
        assert!(rows.len() <= page);
        entries.extend(rows);
        match body["cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => return entries,
        }
    }
}

async fn items(server: &TestServer, token: &str) -> BTreeMap<String, i64> {
    let (status, body) = server.get_with_token("/v2/economy/inventory", token).await;
    assert_eq!(status, 200, "{body}");
    body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["id"].as_str().expect("id").to_owned(),
                i["count"].as_i64().expect("count"),
            )
        })
        .collect()
}

async fn connect(server: &TestServer, token: &str) -> Client {
    Client::with_token(&server.addr.to_string(), token).await
}

/// Calls server function `id` over the socket and returns the envelope answering it.
async fn socket_rpc(client: &mut Client, id: &str, payload: &str) -> Value {
    client
        .call("rpc", json!({ "id": id, "payload": payload }))
        .await
}

async fn new_accounts_get_the_starting_grant(backend: Backend) {
    let db = Database::new(backend).await;
    // Nakama's 2M-CCU test's 1,000,000 coins and 1,000,000 items.
    let mut seeded = db.config();
    seeded.economy.starting_wallet = BTreeMap::from([("coins".into(), 1_000_000)]);
    seeded.economy.starting_items = vec![StartingItem {
        id: "item".into(),
        kind: "default".into(),
        count: 1_000_000,
    }];
    let server = TestServer::start(seeded).await;
    let (token, _) = server.device_session("device-grant-0001").await;
    let (_, account) = server.get_with_token("/v2/account", &token).await;
    assert_eq!(account["wallet"], r#"{"coins":1000000}"#, "{account}");
    let (_, inventory) = server.get_with_token("/v2/economy/inventory", &token).await;
    let stacks = inventory["items"].as_array().expect("items");
    assert_eq!(
        stacks.len(),
        1,
        "one stacked row, not a million: {inventory}"
    );
    assert_eq!(stacks[0]["id"], "item");
    assert_eq!(stacks[0]["kind"], "default");
    assert_eq!(stacks[0]["count"], 1_000_000);
    assert_eq!(stacks[0]["properties"], json!({}));
    let rows = ledger(&server, &token, 10).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["reason"], "starting_grant");
    assert_eq!(
        rows[0]["changes"],
        json!({"wallet": {"coins": 1_000_000}, "items": {"item": 1_000_000}})
    );
    // Signing in again grants nothing more.
    let (again, _) = server.device_session("device-grant-0001").await;
    assert_eq!(wallet(&server, &again).await["coins"], 1_000_000);
    assert_eq!(ledger(&server, &again, 10).await.len(), 1);
    // By default, as Nakama, an account starts with an empty wallet and nothing in the ledger.
    server.stop().await.expect("stop");
    let server = TestServer::start(db.config()).await;
    let (token, _) = server.device_session("device-grant-0002").await;
    let (_, account) = server.get_with_token("/v2/account", &token).await;
    assert_eq!(account["wallet"], "{}");
    assert!(ledger(&server, &token, 10).await.is_empty());
}

async fn concurrent_spends_never_overdraw(backend: Backend) {
    let db = Database::new(backend).await;
    let server = Arc::new(TestServer::start(config(&db)).await);
    let (token, _) = server.device_session("device-spend-0001").await;
    // 1,000 coins; 40 HTTP calls and 24 socket calls of 30 coins each, all at once: exactly 33
    // fit, whatever the interleaving.
    let mut calls = Vec::new();
    for i in 0..40 {
        let (server, token) = (server.clone(), token.clone());
        calls.push(tokio::spawn(async move {
            let (status, body) = rpc(&server, &token, "wallet_spend", json!({"amount": 30})).await;
            match status {
                200 => Ok(body["wallet"]["coins"].as_i64().expect("balance")),
                _ => {
                    assert_error(&(status, body.clone()), 400, 9);
                    Err(i)
                }
            }
        }));
    }
    for s in 0..4 {
        let (server, token) = (server.clone(), token.clone());
        calls.push(tokio::spawn(async move {
            let mut socket = connect(&server, &token).await.socket;
            let sends = (0..6).map(|k| {
                let cid = format!("{s}-{k}");
                json!({"cid": cid, "rpc": {"id": "wallet_spend", "payload": "{\"amount\":30}"}})
            });
            for envelope in sends {
                socket
                    .send(Message::text(envelope.to_string()))
                    .await
                    .expect("send");
            }
            let (mut ok, mut refused) = (0, 0);
            while ok + refused < 6 {
                let Some(Ok(Message::Text(text))) = socket.next().await else {
                    continue;
                };
                let reply: Value = serde_json::from_str(text.as_str()).expect("JSON");
                if reply.get("rpc").is_some() {
                    ok += 1;
                } else {
                    assert_eq!(reply["error"]["code"], 7, "{reply}");
                    assert_eq!(reply["error"]["context"]["grpc_code"], "9", "{reply}");
                    refused += 1;
                }
            }
            Ok(ok)
        }));
    }
    let mut applied = 0;
    for call in calls.drain(..40) {
        if call.await.expect("task").is_ok() {
            applied += 1;
        }
    }
    for call in calls {
        applied += call.await.expect("task").expect("socket task");
    }
    assert_eq!(applied, 33, "33 spends of 30 fit in 1,000");
    let balances = wallet(&server, &token).await;
    assert_eq!(balances["coins"], 10);
    let rows = ledger(&server, &token, 100).await;
    let spends = rows
        .iter()
        .filter(|r| r["reason"] == "wallet_spend")
        .count();
    assert_eq!(spends, 33, "one ledger row per applied spend");
}

async fn grants_and_spends_balance_with_the_ledger(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(config(&db)).await;
    let (token, _) = server.device_session("device-ledger-0001").await;
    let calls = [
        ("wallet_spend", json!({"amount": 7})),
        (
            "inventory_grant",
            json!({"item": "sword", "kind": "weapon", "properties": {"level": 2}}),
        ),
        ("wallet_spend", json!({"currency": "gems", "amount": 5})),
        ("inventory_grant", json!({"item": "potion", "count": 5})),
        ("inventory_consume", json!({"item": "potion", "count": 2})),
        ("wallet_spend", json!({"amounts": {"coins": 3, "gems": 1}})),
        (
            "inventory_consume",
            json!({"item": "item", "count": 999_999}),
        ),
        ("inventory_grant", json!({"item": "sword", "count": 2})),
        (
            "wallet_spend",
            json!({"amount": 90, "metadata": {"shop": "north"}}),
        ),
    ];
    for (id, payload) in &calls {
        let (status, body) = rpc(&server, &token, id, payload.clone()).await;
        assert_eq!(status, 200, "{id} {payload}: {body}");
        assert!(body["ledger_id"].is_string(), "{body}");
    }
    let balances = wallet(&server, &token).await;
    assert_eq!(
        balances,
        BTreeMap::from([("coins".into(), 900), ("gems".into(), 44)])
    );
    let held = items(&server, &token).await;
    assert_eq!(
        held,
        BTreeMap::from([
            ("item".into(), 1),
            ("potion".into(), 3),
            ("sword".into(), 3)
        ])
    );
    let (_, inventory) = server.get_with_token("/v2/economy/inventory", &token).await;
    let sword = inventory["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["id"] == "sword")
        .expect("sword")
        .clone();
    assert_eq!(sword["kind"], "weapon");
    assert_eq!(
        sword["properties"],
        json!({"level": 2}),
        "kept by a grant without properties"
    );

    // Paged three rows at a time, the ledger sums to exactly the balances.
    let rows = ledger(&server, &token, 3).await;
    assert_eq!(rows.len(), calls.len() + 1, "every call and the grant");
    let ids: Vec<i64> = rows
        .iter()
        .map(|r| r["id"].as_str().expect("id").parse().expect("number"))
        .collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    let mut wallet_sum: BTreeMap<String, i64> = BTreeMap::new();
    let mut item_sum: BTreeMap<String, i64> = BTreeMap::new();
    for row in &rows {
        for (currency, delta) in row["changes"]["wallet"].as_object().into_iter().flatten() {
            *wallet_sum.entry(currency.clone()).or_default() += delta.as_i64().expect("int");
        }
        for (item, delta) in row["changes"]["items"].as_object().into_iter().flatten() {
            *item_sum.entry(item.clone()).or_default() += delta.as_i64().expect("int");
        }
    }
    assert_eq!(wallet_sum, balances);
    assert_eq!(item_sum, held);
    // Each row records what the balances became and the caller's metadata.
    assert_eq!(rows[0]["balances"], json!({"wallet": {"coins": 900}}));
    assert_eq!(rows[0]["metadata"], json!({"shop": "north"}));
    assert_eq!(rows[0]["reason"], "wallet_spend");
    assert!(rows[0]["create_time"].is_string());
}

async fn idempotent_retry_applies_once(backend: Backend) {
    let db = Database::new(backend).await;
    let server = Arc::new(TestServer::start(config(&db)).await);
    let (token, _) = server.device_session("device-idem-0001").await;
    let spend = json!({"amount": 100, "idempotency_key": "order-1"});
    let first = rpc(&server, &token, "wallet_spend", spend.clone()).await;
    assert_eq!(first.0, 200, "{}", first.1);
    let retry = rpc(&server, &token, "wallet_spend", spend.clone()).await;
    assert_eq!(retry, first, "the retry gets the first answer");
    assert_eq!(wallet(&server, &token).await["coins"], 900, "applied once");

    // The same key for a different change is refused and changes nothing.
    let other = rpc(
        &server,
        &token,
        "wallet_spend",
        json!({"amount": 5, "idempotency_key": "order-1"}),
    )
    .await;
    assert!(assert_error(&other, 409, 6).contains("Idempotency key"));
    // Keys are per account: another user may use the same one.
    let (token_b, _) = server.device_session("device-idem-0002").await;
    let theirs = rpc(&server, &token_b, "wallet_spend", spend.clone()).await;
    assert_eq!(theirs.0, 200);
    assert_eq!(wallet(&server, &token_b).await["coins"], 900);

    // Twenty concurrent retries of one new call, over HTTP and the socket: applied once, and
    // every caller gets the same ledger id.
    let burst = json!({"amount": 10, "idempotency_key": "order-2"});
    let mut calls = Vec::new();
    for _ in 0..10 {
        let (server, token, burst) = (server.clone(), token.clone(), burst.clone());
        calls.push(tokio::spawn(async move {
            let (status, body) = rpc(&server, &token, "wallet_spend", burst).await;
            assert_eq!(status, 200, "{body}");
            body["ledger_id"].as_str().expect("ledger id").to_owned()
        }));
    }
    for _ in 0..10 {
        let (server, token, burst) = (server.clone(), token.clone(), burst.clone());
        calls.push(tokio::spawn(async move {
            let mut socket = connect(&server, &token).await;
            let reply = socket_rpc(&mut socket, "wallet_spend", &burst.to_string()).await;
            let payload = reply["rpc"]["payload"].as_str().expect("payload");
            let body: Value = serde_json::from_str(payload).expect("JSON");
            body["ledger_id"].as_str().expect("ledger id").to_owned()
        }));
    }
    let mut ids = Vec::new();
    for call in calls {
        ids.push(call.await.expect("task"));
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "one ledger row for all retries: {ids:?}");
    assert_eq!(wallet(&server, &token).await["coins"], 890);
    let rows = ledger(&server, &token, 100).await;
    assert_eq!(rows.len(), 3, "grant + order-1 + order-2");
    assert_eq!(rows[0]["idempotency_key"], "order-2");
}

async fn errors_are_clear_and_change_nothing(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(config(&db)).await;
    let (token, _) = server.device_session("device-errors-01").await;
    let before = (
        wallet(&server, &token).await,
        items(&server, &token).await,
        ledger(&server, &token, 100).await.len(),
    );

    // Unknown function.
    let unknown = rpc(&server, &token, "no_such_function", json!({})).await;
    assert!(assert_error(&unknown, 404, 5).contains("not found"));
    // Malformed payloads, wrong types, unknown keys.
    let bad = [
        json!({}),
        json!({"amount": "ten"}),
        json!({"amount": 1.5}),
        json!({"amount": 10, "amont": 10}),
        json!({"amount": 10, "amounts": {"coins": 1}}),
        json!({"amounts": {}}),
        json!({"amount": 10, "currency": "co ins"}),
        json!({"amount": 10, "metadata": [1, 2]}),
        json!([1, 2, 3]),
    ];
    for payload in bad {
        let result = rpc(&server, &token, "wallet_spend", payload.clone()).await;
        assert_error(&result, 400, 3);
    }
    let not_json = server
        .http
        .post(server.url("/v2/rpc/wallet_spend"))
        .bearer_auth(&token)
        .json(&Value::String("{amount: 10".into()))
        .send()
        .await
        .expect("request");
    let not_json = support::status_and_json(not_json).await;
    assert!(assert_error(&not_json, 400, 3).contains("Bad payload"));
    // The body must be the payload as a JSON string, unless ?unwrap.
    let raw_object = server
        .http
        .post(server.url("/v2/rpc/wallet_spend"))
        .bearer_auth(&token)
        .json(&json!({"amount": 10}))
        .send()
        .await
        .expect("request");
    let raw_object = support::status_and_json(raw_object).await;
    assert!(assert_error(&raw_object, 400, 3).contains("JSON string"));
    // Negative and zero amounts and counts.
    for (id, payload) in [
        ("wallet_spend", json!({"amount": -10})),
        ("wallet_spend", json!({"amount": 0})),
        ("wallet_spend", json!({"amounts": {"coins": -1}})),
        ("inventory_grant", json!({"item": "sword", "count": -1})),
        ("inventory_consume", json!({"item": "item", "count": 0})),
        ("inventory_grant", json!({"item": ""})),
        ("inventory_grant", json!({"count": 1})),
    ] {
        let result = rpc(&server, &token, id, payload.clone()).await;
        let message = assert_error(&result, 400, 3);
        assert!(!message.is_empty(), "{id} {payload}");
    }
    // Overdraws: one currency, several (all or nothing), items.
    let overdraw = rpc(&server, &token, "wallet_spend", json!({"amount": 1001})).await;
    assert_eq!(
        assert_error(&overdraw, 400, 9),
        "Insufficient coins: balance 1000, needed 1001."
    );
    let partial = rpc(
        &server,
        &token,
        "wallet_spend",
        json!({"amounts": {"coins": 10, "gems": 51}}),
    )
    .await;
    assert!(assert_error(&partial, 400, 9).contains("gems"));
    let no_such_item = rpc(
        &server,
        &token,
        "inventory_consume",
        json!({"item": "sword"}),
    )
    .await;
    assert!(assert_error(&no_such_item, 400, 9).contains("sword"));
    let too_many = rpc(
        &server,
        &token,
        "inventory_consume",
        json!({"item": "item", "count": 1_000_001}),
    )
    .await;
    assert!(assert_error(&too_many, 400, 9).contains("have 1000000"));
    let overflow = rpc(
        &server,
        &token,
        "inventory_grant",
        json!({"item": "item", "count": i64::MAX}),
    )
    .await;
    assert!(assert_error(&overflow, 400, 9).contains("2^63-1"));
    // A user may not act for another account; a bad token or no token is refused.
    let other = rpc(
        &server,
        &token,
        "wallet_spend",
        json!({"amount": 1, "user_id": uuid::Uuid::new_v4()}),
    )
    .await;
    assert!(assert_error(&other, 400, 3).contains("user_id"));
    let no_auth = server
        .http
        .post(server.url("/v2/rpc/wallet_spend"))
        .json(&Value::String("{\"amount\":1}".into()))
        .send()
        .await
        .expect("request");
    assert_error(&support::status_and_json(no_auth).await, 401, 16);
    let bad_token = rpc(&server, "not-a-token", "wallet_spend", json!({"amount": 1})).await;
    assert_error(&bad_token, 401, 16);
    // Bad ledger paging.
    for query in ["limit=0", "limit=101", "cursor=abc", "limit=x"] {
        let result = server
            .get_with_token(&format!("/v2/economy/ledger?{query}"), &token)
            .await;
        assert_error(&result, 400, 3);
    }

    let after = (
        wallet(&server, &token).await,
        items(&server, &token).await,
        ledger(&server, &token, 100).await.len(),
    );
    assert_eq!(after, before, "no error changed anything");
    // Failures are counted per function and code.
    let (_, metrics) = {
        let r = server
            .http
            .get(server.url("/metrics"))
            .send()
            .await
            .expect("metrics");
        (r.status(), r.text().await.expect("text"))
    };
    assert!(
        metrics.contains(
            r#"muster_rpc_calls_total{function="wallet_spend",outcome="failed_precondition"} 2"#
        ),
        "{metrics}"
    );
    assert!(metrics.contains(r#"muster_economy_writes_total{outcome="refused"} 5"#));
}

async fn http_key_calls_act_for_a_named_account(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(config(&db)).await;
    let (token, _) = server.device_session("device-server-01").await;
    let user_id = support::claims(&token)["uid"]
        .as_str()
        .expect("uid")
        .to_owned();
    let payload = json!({"item": "gift", "count": 2, "user_id": user_id}).to_string();

    // POST with ?http_key= and the payload as a JSON string.
    let response = server
        .http
        .post(server.url("/v2/rpc/Inventory_Grant?http_key=defaulthttpkey"))
        .json(&Value::String(payload.clone()))
        .send()
        .await
        .expect("request");
    let (status, body) = support::status_and_json(response).await;
    assert_eq!(status, 200, "{body}");
    let result: Value =
        serde_json::from_str(body["payload"].as_str().expect("payload")).expect("JSON");
    assert_eq!(result["items"]["gift"], 2);

    // GET with ?payload= (what nakama-js's rpcHttpKey sends), HTTP Basic with the key, and
    // ?unwrap with a raw body.
    let response = server
        .http
        .get(server.url("/v2/rpc/inventory_grant"))
        .query(&[
            ("payload", payload.as_str()),
            ("http_key", "defaulthttpkey"),
        ])
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let response = server
        .http
        .post(server.url("/v2/rpc/inventory_grant?unwrap"))
        .basic_auth("defaulthttpkey", Some(""))
        .header("content-type", "application/json")
        .body(payload.clone())
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "application/json",
        "unwrap answers in the request's content type"
    );
    let raw: Value = response.json().await.expect("raw JSON result");
    assert_eq!(raw["items"]["gift"], 6);
    assert_eq!(items(&server, &token).await["gift"], 6);

    // A wrong key, and a key call that names no account.
    let wrong = server
        .http
        .post(server.url("/v2/rpc/inventory_grant?http_key=nope"))
        .json(&Value::String(payload.clone()))
        .send()
        .await
        .expect("request");
    assert!(assert_error(&support::status_and_json(wrong).await, 401, 16).contains("HTTP key"));
    let wrong_basic = server
        .http
        .post(server.url("/v2/rpc/inventory_grant"))
        .basic_auth("defaultkey", Some(""))
        .json(&Value::String(payload))
        .send()
        .await
        .expect("request");
    assert_error(&support::status_and_json(wrong_basic).await, 401, 16);
    let nobody = server
        .http
        .post(server.url("/v2/rpc/inventory_grant?http_key=defaulthttpkey"))
        .json(&Value::String(json!({"item": "gift"}).to_string()))
        .send()
        .await
        .expect("request");
    assert!(assert_error(&support::status_and_json(nobody).await, 400, 3).contains("user_id"));
    let ghost = server
        .http
        .post(server.url("/v2/rpc/inventory_grant?http_key=defaulthttpkey"))
        .json(&Value::String(
            json!({"item": "gift", "user_id": uuid::Uuid::new_v4()}).to_string(),
        ))
        .send()
        .await
        .expect("request");
    assert!(assert_error(&support::status_and_json(ghost).await, 404, 5).contains("Account"));
    assert_eq!(items(&server, &token).await["gift"], 6, "unchanged");
}

async fn socket_rpc_answers_and_errors(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(config(&db)).await;
    let (token, _) = server.device_session("device-socket-01").await;
    let mut socket = connect(&server, &token).await;

    let ok = socket_rpc(&mut socket, "wallet_spend", r#"{"amount":25}"#).await;
    assert_eq!(ok["rpc"]["id"], "wallet_spend", "{ok}");
    let result: Value =
        serde_json::from_str(ok["rpc"]["payload"].as_str().expect("payload")).expect("JSON");
    assert_eq!(result["wallet"]["coins"], 975);

    let cases = [
        ("no_such_function", "{}", 6),
        ("", "{}", 3),
        ("wallet_spend", "{not json", 3),
        ("wallet_spend", r#"{"amount":-5}"#, 3),
        ("wallet_spend", r#"{"amount":5000}"#, 7),
    ];
    for (id, payload, code) in cases {
        let reply = socket_rpc(&mut socket, id, payload).await;
        assert_eq!(reply["error"]["code"], code, "{id} {payload}: {reply}");
        assert!(reply["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    // The socket stays usable, and nothing but the first call changed the wallet.
    let again = socket_rpc(&mut socket, "WALLET_SPEND", r#"{"amount":5}"#).await;
    assert!(
        again.get("rpc").is_some(),
        "ids are case-insensitive: {again}"
    );
    assert_eq!(wallet(&server, &token).await["coins"], 970);
    assert_eq!(ledger(&server, &token, 100).await.len(), 3);
}

/// A game's own function: trades coins and an item for gems, all or nothing.
struct Trade;

#[derive(serde::Deserialize)]
struct TradeRequest {
    coins: i64,
    item: String,
}

#[async_trait::async_trait]
impl ServerFunction for Trade {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let request: TradeRequest = call.json()?;
        let user = call.user(None)?;
        let change = Change::new(user, "trade")
            .spend("coins", request.coins)
            .consume_item(&request.item, 1)
            .grant("gems", 10);
        let receipt = call.economy.apply(change).await?;
        Ok(json!({ "wallet": receipt.wallet, "items": receipt.items }).to_string())
    }
}

async fn custom_function_changes_several_things_atomically(backend: Backend) {
    let db = Database::new(backend).await;
    let mut functions = Functions::new();
    functions.register("Trade", Trade).expect("valid id");
    assert!(functions.register("has space", Trade).is_err());
    let server = TestServer::start_with(config(&db), functions).await;
    let (token, _) = server.device_session("device-trade-001").await;
    rpc(
        &server,
        &token,
        "inventory_grant",
        json!({"item": "gem_shard"}),
    )
    .await;

    let (status, traded) = rpc(
        &server,
        &token,
        "trade",
        json!({"coins": 100, "item": "gem_shard"}),
    )
    .await;
    assert_eq!(status, 200, "{traded}");
    assert_eq!(
        traded,
        json!({"wallet": {"coins": 900, "gems": 60}, "items": {"gem_shard": 0}})
    );
    // No shard left: the whole trade is refused, coins and gems untouched.
    let refused = rpc(
        &server,
        &token,
        "trade",
        json!({"coins": 100, "item": "gem_shard"}),
    )
    .await;
    assert!(assert_error(&refused, 400, 9).contains("gem_shard"));
    let balances = wallet(&server, &token).await;
    assert_eq!(
        balances,
        BTreeMap::from([("coins".into(), 900), ("gems".into(), 60)])
    );
    // A stack at zero is no longer listed.
    assert!(!items(&server, &token).await.contains_key("gem_shard"));
    let bad = rpc(&server, &token, "trade", json!({"coins": "many"})).await;
    assert_error(&bad, 400, 3);
    // Built-ins are still there.
    let (status, _) = rpc(&server, &token, "wallet_spend", json!({"amount": 1})).await;
    assert_eq!(status, 200);
}

/// Writes that fail in the database (here: for an account that does not exist) sent together
/// with good ones: each fails alone, the others in the same group commit still apply.
async fn a_failing_write_does_not_fail_the_others(backend: Backend) {
    let db = Database::new(backend).await;
    let server = Arc::new(TestServer::start(config(&db)).await);
    let (token, _) = server.device_session("device-batch-0001").await;
    let mut calls = Vec::new();
    for i in 0..60 {
        let (server, token) = (server.clone(), token.clone());
        calls.push(tokio::spawn(async move {
            if i % 3 == 0 {
                let ghost = json!({"item": "gift", "user_id": uuid::Uuid::new_v4()});
                let response = server
                    .http
                    .post(server.url("/v2/rpc/inventory_grant?http_key=defaulthttpkey"))
                    .json(&Value::String(ghost.to_string()))
                    .send()
                    .await
                    .expect("request");
                let result = support::status_and_json(response).await;
                assert_error(&result, 404, 5);
                false
            } else {
                let (status, body) =
                    rpc(&server, &token, "wallet_spend", json!({"amount": 1})).await;
                assert_eq!(status, 200, "{body}");
                true
            }
        }));
    }
    let mut applied = 0;
    for call in calls {
        if call.await.expect("task") {
            applied += 1;
        }
    }
    assert_eq!(applied, 40);
    assert_eq!(wallet(&server, &token).await["coins"], 960);
    assert_eq!(ledger(&server, &token, 100).await.len(), 41);
}

async fn players_cannot_call_value_functions_unless_opted_in(backend: Backend) {
    let db = Database::new(backend).await;
    // The defaults: every built-in registered, none of them open to players (and a starting
    // grant, to spend from).
    let mut config = db.config();
    config.economy.starting_wallet = BTreeMap::from([("coins".into(), 1_000_000)]);
    config.economy.starting_items = vec![StartingItem {
        id: "item".into(),
        kind: "default".into(),
        count: 1_000_000,
    }];
    let server = TestServer::start(config).await;
    let (token, _) = server.device_session("device-mint-0001").await;
    let user_id = support::claims(&token)["uid"]
        .as_str()
        .expect("uid")
        .to_owned();
    let before_wallet = wallet(&server, &token).await;
    let before_items = items(&server, &token).await;
    for (id, payload) in [
        (
            "inventory_grant",
            json!({"item": "legendary", "count": 1_000_000_000}),
        ),
        ("wallet_spend", json!({"amount": 1})),
        ("inventory_consume", json!({"item": "item", "count": 1})),
    ] {
        let message = assert_error(&rpc(&server, &token, id, payload.clone()).await, 403, 7);
        assert!(message.contains("only by the server"), "{message}");
        // Over the socket too: the function's failure with its gRPC code.
        let mut client = connect(&server, &token).await;
        let answer = socket_rpc(&mut client, id, &payload.to_string()).await;
        assert_eq!(answer["error"]["code"], 7, "{answer}");
        assert_eq!(answer["error"]["context"]["grpc_code"], "7", "{answer}");
    }
    assert_eq!(wallet(&server, &token).await, before_wallet);
    assert_eq!(items(&server, &token).await, before_items);
    assert_eq!(
        ledger(&server, &token, 10).await.len(),
        1,
        "only the starting grant"
    );
    // The server (HTTP key) still may.
    let (status, body) = rpc_as_server(
        &server,
        "inventory_grant",
        json!({"item": "gift"}),
        &user_id,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(items(&server, &token).await["gift"], 1);
    server.stop().await.expect("stop");

    // A studio opts one function in for players; the others stay closed.
    let mut config = db.config();
    config.runtime.player_builtin_functions = vec!["wallet_spend".into()];
    let server = TestServer::start(config).await;
    let (token, _) = server.device_session("device-mint-0001").await;
    let (status, body) = rpc(&server, &token, "wallet_spend", json!({"amount": 1})).await;
    assert_eq!(status, 200, "{body}");
    assert_error(
        &rpc(
            &server,
            &token,
            "inventory_grant",
            json!({"item": "legendary"}),
        )
        .await,
        403,
        7,
    );
    // A player-callable function must also be registered.
    let mut bad = db.config();
    bad.runtime.builtin_functions = vec!["wallet_spend".into()];
    bad.runtime.player_builtin_functions = vec!["inventory_grant".into()];
    let error = bad.validate().expect_err("refused");
    assert!(error.contains("player_builtin_functions"), "{error}");
}

async fn the_inventory_is_paged(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(config(&db)).await;
    let (token, _) = server.device_session("device-pages-0001").await;
    let (other, _) = server.device_session("device-pages-0002").await;
    let user_id = support::claims(&token)["uid"]
        .as_str()
        .expect("uid")
        .to_owned();
    // Twelve stacks (with the starting "item"), in an order that is not their sort order.
    for i in [7, 3, 10, 0, 9, 1, 4, 8, 2, 6, 5] {
        let item = format!("gem{i:02}");
        let (status, body) =
            rpc_as_server(&server, "inventory_grant", json!({"item": item}), &user_id).await;
        assert_eq!(status, 200, "{body}");
    }
    let mut seen = Vec::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        let (status, body) = server
            .get_with_token(
                &format!("/v2/economy/inventory?limit=5&cursor={cursor}"),
                &token,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let page = body["items"].as_array().expect("items");
        assert!(page.len() <= 5, "{body}");
        seen.extend(
            page.iter()
                .map(|i| i["id"].as_str().expect("id").to_owned()),
        );
        pages += 1;
        match body["cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => break,
        }
    }
    let mut expected: Vec<String> = (0..11).map(|i| format!("gem{i:02}")).collect();
    expected.push("item".into());
    assert_eq!(seen, expected);
    assert_eq!(pages, 3);
    // The default page holds everything here; the largest page is 100.
    let (_, all) = server.get_with_token("/v2/economy/inventory", &token).await;
    assert_eq!(all["items"].as_array().expect("items").len(), 12);
    assert!(all.get("cursor").is_none(), "{all}");
    for query in [
        "limit=0",
        "limit=101",
        "cursor=%25%25not-base64",
        "limit=abc",
    ] {
        let (status, body) = server
            .get_with_token(&format!("/v2/economy/inventory?{query}"), &token)
            .await;
        assert_eq!(status, 400, "{query}: {body}");
    }
    // Another player's cursor reads only their own stacks.
    let (status, body) = server
        .get_with_token(
            &format!("/v2/economy/inventory?limit=5&cursor={cursor}"),
            &other,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let ids: Vec<&str> = body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["id"].as_str().expect("id"))
        .collect();
    assert!(ids.iter().all(|id| *id == "item"), "{body}");
}
