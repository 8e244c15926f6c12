//! Durability of wallet and inventory writes: a concurrent write load against the real `muster`
//! binary, `kill -9` in the middle of it, a restart, and then every acknowledged call must be in
//! the ledger, balances and counts must equal the sum of the ledger's changes, and retrying an
//! acknowledged call must not apply it again. On SQLite and on PostgreSQL.

use crate::support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use support::{free_port, muster_command, Backend, Binary, Database};

on_both_backends!(acknowledged_economy_writes_survive_kill_9);

const USERS: usize = 12;
const WRITERS_PER_USER: usize = 2;

async fn session(http: &reqwest::Client, base: &str, device: &str) -> String {
    let response = http
        .post(format!("{base}/v2/account/authenticate/device?create=true"))
        .basic_auth("defaultkey", Some(""))
        .json(&json!({ "id": device }))
        .send()
        .await
        .expect("authenticate");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("JSON");
    body["token"].as_str().expect("token").to_owned()
}

/// One write of the load: the call's id, payload and the idempotency key identifying it.
fn call(writer: usize, i: usize) -> (&'static str, Value, String) {
    let key = format!("w{writer}-{i}");
    if i % 3 == 2 {
        (
            "inventory_grant",
            json!({"item": format!("gem{}", i % 4), "idempotency_key": key}),
            key,
        )
    } else {
        (
            "wallet_spend",
            json!({"amount": 1 + (i % 5), "idempotency_key": key}),
            key,
        )
    }
}

async fn post_rpc(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    id: &str,
    payload: &Value,
) -> Option<Value> {
    let response = http
        .post(format!("{base}/v2/rpc/{id}"))
        .bearer_auth(token)
        .json(&Value::String(payload.to_string()))
        .send()
        .await
        .ok()?;
    if response.status() != 200 {
        return None;
    }
    let body: Value = response.json().await.ok()?;
    serde_json::from_str(body["payload"].as_str()?).ok()
}

/// The binary on `db`, the built-in functions opted in for players (the load calls them with
/// session tokens).
async fn start(db: &Database) -> Binary {
    let mut command = muster_command(db);
    command.env(
        "MUSTER_RUNTIME__PLAYER_BUILTIN_FUNCTIONS",
        "[wallet_spend, inventory_grant, inventory_consume]",
    );
    // The players spend: they start with the seed economy test's grant.
    command.env("MUSTER_ECONOMY__STARTING_WALLET", "{coins=1000000}");
    command.env(
        "MUSTER_ECONOMY__STARTING_ITEMS",
        r#"[{id="item", kind="default", count=1000000}]"#,
    );
    Binary::run(command, free_port()).await
}

async fn acknowledged_economy_writes_survive_kill_9(backend: Backend) {
    let db = Database::new(backend).await;
    let running = start(&db).await;
    let http = reqwest::Client::new();
    let mut tokens = Vec::new();
    for u in 0..USERS {
        tokens.push(session(&http, &running.base(), &format!("device-durable-{u:04}")).await);
    }

    // Acknowledged calls: (user, key) -> the answer.
    let acknowledged = Arc::new(Mutex::new(BTreeMap::<(usize, String), Value>::new()));
    let writers: Vec<_> = (0..USERS * WRITERS_PER_USER)
        .map(|w| {
            let user = w % USERS;
            let (http, base, token, acknowledged) = (
                http.clone(),
                running.base(),
                tokens[user].clone(),
                acknowledged.clone(),
            );
            tokio::spawn(async move {
                for i in 0..100_000 {
                    let (id, payload, key) = call(w, i);
                    match post_rpc(&http, &base, &token, id, &payload).await {
                        Some(answer) => {
                            acknowledged
                                .lock()
                                .expect("lock")
                                .insert((user, key), answer);
                        }
                        None => return,
                    }
                }
            })
        })
        .collect();
    // Kill as soon as a fair load has been acknowledged (bounded: 20 s).
    for _ in 0..400 {
        if acknowledged.lock().expect("lock").len() >= 1500 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut running = running;
    running.kill9();
    for writer in writers {
        writer.await.expect("writer");
    }
    let acknowledged = acknowledged.lock().expect("lock").clone();
    eprintln!("{} calls acknowledged before the kill", acknowledged.len());
    assert!(
        acknowledged.len() >= 100,
        "only {} calls acknowledged before the kill",
        acknowledged.len()
    );

    let running = start(&db).await;
    for (user, token) in tokens.iter().enumerate() {
        let rows = support::ledger_at(&http, &running.base(), token).await;
        // Every acknowledged call is in the ledger, under the ledger id it was answered with.
        let by_key: BTreeMap<&str, &Value> = rows
            .iter()
            .filter_map(|r| Some((r["idempotency_key"].as_str()?, r)))
            .collect();
        for ((u, key), answer) in
            acknowledged.range((user, String::new())..(user + 1, String::new()))
        {
            assert_eq!(*u, user);
            let row = by_key
                .get(key.as_str())
                .unwrap_or_else(|| panic!("acknowledged call {key} of user {user} lost"));
            assert_eq!(row["id"], answer["ledger_id"], "{key}");
        }
        // Balances and counts are exactly the sum of the ledger's changes (the starting grant
        // included): no write is half there.
        let mut sums: BTreeMap<String, i64> = BTreeMap::new();
        for row in &rows {
            for part in ["wallet", "items"] {
                for (name, delta) in row["changes"][part].as_object().into_iter().flatten() {
                    *sums.entry(format!("{part}.{name}")).or_default() +=
                        delta.as_i64().expect("delta");
                }
            }
        }
        let account: Value = http
            .get(format!("{}/v2/account", running.base()))
            .bearer_auth(token)
            .send()
            .await
            .expect("account")
            .json()
            .await
            .expect("JSON");
        let wallet: BTreeMap<String, i64> =
            serde_json::from_str(account["wallet"].as_str().expect("wallet")).expect("JSON");
        let inventory: Value = http
            .get(format!("{}/v2/economy/inventory", running.base()))
            .bearer_auth(token)
            .send()
            .await
            .expect("inventory")
            .json()
            .await
            .expect("JSON");
        let mut held: BTreeMap<String, i64> = wallet
            .into_iter()
            .map(|(c, a)| (format!("wallet.{c}"), a))
            .collect();
        for item in inventory["items"].as_array().expect("items") {
            held.insert(
                format!("items.{}", item["id"].as_str().expect("id")),
                item["count"].as_i64().expect("count"),
            );
        }
        assert_eq!(held, sums, "user {user}: balances = sum of the ledger");
    }

    // Retrying acknowledged calls after the restart replays them: nothing applies twice.
    let (user, key) = acknowledged.keys().next().expect("one call").clone();
    let writer: usize = key[1..key.find('-').expect("key shape")]
        .parse()
        .expect("writer");
    let i: usize = key[key.find('-').expect("key shape") + 1..]
        .parse()
        .expect("index");
    let (id, payload, _) = call(writer, i);
    let before = support::ledger_at(&http, &running.base(), &tokens[user])
        .await
        .len();
    let replay = post_rpc(&http, &running.base(), &tokens[user], id, &payload)
        .await
        .expect("replayed");
    assert_eq!(replay, acknowledged[&(user, key)]);
    assert_eq!(
        support::ledger_at(&http, &running.base(), &tokens[user])
            .await
            .len(),
        before
    );
    // And the restarted server takes new writes.
    let fresh = post_rpc(
        &http,
        &running.base(),
        &tokens[0],
        "wallet_spend",
        &json!({"amount": 1}),
    )
    .await;
    assert!(fresh.is_some());
}
