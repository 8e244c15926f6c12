//! Group commit on every write path, on SQLite and PostgreSQL: concurrent account creates in
//! shared batches (a taken username fails alone, its neighbours commit; one device, one
//! account), one account's writes applied in the order they came with several PostgreSQL writer
//! connections, revocations, profile changes and link creates acknowledged under load surviving
//! kill -9, and (PostgreSQL only) the database restarted in the middle of the load.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::future::join_all;
use serde_json::{json, Value};
use support::{
    claims, eventually, metric, muster_command, Backend, Binary, Database, PrivatePostgres,
    TestServer,
};

use muster::accounts::store::{Credential, NewUser};
use muster::base::metrics::Metrics;
use muster::economy::store::{Changes, LedgerOutcome, LedgerWrite};

on_both_backends!(
    concurrent_creates_in_shared_batches,
    one_accounts_writes_keep_their_order,
    revocations_profiles_and_link_creates_survive_kill_9,
);

/// Two nodes on one PostgreSQL under a burst of concurrent creates and reads: each node holds at
/// most `pool_size + writer_connections` connections, whatever the load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL"]
async fn connections_stay_bounded_per_node() {
    let admin = support::postgres_url();
    let db = Database::new(Backend::Postgres).await;
    let name = db.url.rsplit('/').next().expect("database name").to_owned();
    let mut config = db.config();
    config.database.pool_size = 3;
    config.database.writer_connections = 2;
    let nodes = [
        TestServer::start(config.clone()).await,
        TestServer::start(config).await,
    ];
    let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .expect("admin connection");
    tokio::spawn(connection);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        tokio::spawn(async move {
            let mut most = 0i64;
            // Bounded: at most 60 s of samples.
            for _ in 0..6000 {
                let row = client
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1",
                        &[&name],
                    )
                    .await
                    .expect("count connections");
                most = most.max(row.get(0));
                if done.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            most
        })
    };
    let nodes = &nodes;
    let burst = (0..400).map(|i| async move {
        let node = &nodes[i % 2];
        let (status, body) = authenticate(node, &format!("bounded-{i:05}"), None).await;
        assert_eq!(status, 200, "{body}");
        let token = body["token"].as_str().expect("token").to_owned();
        let (status, account) = node.get_with_token("/v2/account", &token).await;
        assert_eq!(status, 200, "{account}");
    });
    join_all(burst).await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let most = sampler.await.expect("sampler");
    assert!(most > 0, "no connection seen");
    assert!(
        most <= 2 * (3 + 2),
        "{most} connections for two nodes of 3 + 2"
    );
}

/// PostgreSQL stopped as by a crash in the middle of a load of account creates, then started
/// again: callers get a clear "unavailable" answer meanwhile, nothing acknowledged is lost, and the
/// server recovers by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL"]
async fn postgres_restarted_mid_load() {
    support::postgres_url();
    let postgres = PrivatePostgres::start().expect("PostgreSQL's binaries are installed");
    let mut config = Database::new(Backend::Sqlite).await.config();
    config.database_url = postgres.url();
    let server = Arc::new(TestServer::start(config).await);
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let refusals = Arc::new(Mutex::new(Vec::<(u16, Value)>::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut loads = Vec::new();
    for w in 0..4 {
        let (server, acknowledged, refusals, stop) = (
            server.clone(),
            acknowledged.clone(),
            refusals.clone(),
            stop.clone(),
        );
        loads.push(tokio::spawn(async move {
            // Bounded: at most 20,000 requests per loader, and it stops when told.
            for i in 0..20_000 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                let device = format!("restart-{w}-{i:06}");
                match authenticate(&server, &device, None).await {
                    (200, _) => acknowledged.lock().expect("lock").push(device),
                    refused => {
                        refusals.lock().expect("lock").push(refused);
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    }
                }
            }
        }));
    }
    eventually("200 acknowledged accounts", || async {
        acknowledged.lock().expect("lock").len() >= 200
    })
    .await;
    postgres.stop_immediate();
    eventually("callers told the database is unavailable", || async {
        refusals.lock().expect("lock").len() >= 20
    })
    .await;
    let before_restart = acknowledged.lock().expect("lock").len();
    postgres.start_again();
    eventually("accounts acknowledged again after the restart", || async {
        acknowledged.lock().expect("lock").len() >= before_restart + 200
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for load in loads {
        load.await.expect("load");
    }

    for (status, body) in refusals.lock().expect("lock").iter() {
        assert_eq!(*status, 503, "{body}");
        assert_eq!(body["code"], 14, "{body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap_or("")
                .contains("database is unavailable"),
            "{body}"
        );
    }
    let acknowledged = acknowledged.lock().expect("lock").clone();
    let mut lost = Vec::new();
    for device in &acknowledged {
        let (status, _) = server
            .authenticate("device", "create=false", json!({ "id": device }))
            .await;
        if status != 200 {
            lost.push(device.clone());
        }
    }
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged accounts lost across the restart: {:?}",
        lost.len(),
        acknowledged.len(),
        &lost[..lost.len().min(5)]
    );
}

async fn authenticate(server: &TestServer, device: &str, username: Option<&str>) -> (u16, Value) {
    let query = match username {
        Some(name) => format!("create=true&username={name}"),
        None => "create=true".to_owned(),
    };
    server
        .authenticate("device", &query, json!({ "id": device }))
        .await
}

async fn concurrent_creates_in_shared_batches(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let server = &server;
    // 40 new players with names of their own, 10 that all want one name, and 10 requests for
    // one device: all at once, so they share group commits.
    let own = (0..40).map(|i| async move {
        authenticate(
            server,
            &format!("own-device-{i:04}"),
            Some(&format!("own-{i}")),
        )
        .await
    });
    let clashing = (0..10).map(|i| async move {
        authenticate(server, &format!("clash-device-{i:04}"), Some("wanted-name")).await
    });
    let same_device =
        (0..10).map(|_| async move { authenticate(server, "one-device-for-all", None).await });
    let (own, clashing, same_device) =
        futures_util::join!(join_all(own), join_all(clashing), join_all(same_device));

    for (i, (status, body)) in own.iter().enumerate() {
        assert_eq!(*status, 200, "player {i} with a name of its own: {body}");
        assert_eq!(
            claims(body["token"].as_str().expect("token"))["usn"],
            format!("own-{i}")
        );
    }
    let won: Vec<_> = clashing.iter().filter(|(s, _)| *s == 200).collect();
    assert_eq!(
        won.len(),
        1,
        "exactly one create gets the name: {clashing:?}"
    );
    for (status, body) in clashing.iter().filter(|(s, _)| *s != 200) {
        assert_eq!(*status, 409, "{body}");
        assert_eq!(body["code"], 6, "{body}");
        assert!(
            body["message"].as_str().unwrap_or("").contains("Username"),
            "{body}"
        );
    }
    let ids: std::collections::HashSet<String> = same_device
        .iter()
        .map(|(status, body)| {
            assert_eq!(*status, 200, "{body}");
            claims(body["token"].as_str().expect("token"))["uid"]
                .as_str()
                .expect("uid")
                .to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 1, "one device, one account: {ids:?}");
    let created: Vec<bool> = same_device
        .iter()
        .map(|(_, body)| body["created"].as_bool().unwrap_or(false))
        .collect();
    assert_eq!(created.iter().filter(|c| **c).count(), 1, "{created:?}");

    // 40 + 1 + 1 accounts, no more.
    assert_eq!(metric(server, "muster_accounts_created_total").await, 42.0);
    if backend == Backend::Postgres {
        // Every clashing create failed inside a group commit and was run on its own.
        assert!(metric(server, "muster_db_writes_run_alone_total").await >= 9.0);
    }
}

async fn one_accounts_writes_keep_their_order(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.database.writer_connections = 4;
    let stores = muster::services::Stores::open(&config, Arc::new(Metrics::new()))
        .await
        .expect("open store");
    let mut accounts = Vec::new();
    for i in 0..8 {
        let user = NewUser {
            id: uuid::Uuid::new_v4(),
            username: format!("ordered-{i}"),
            password_hash: None,
            now_ms: 1,
            grant: None,
        };
        let (identity, created) = stores
            .accounts
            .find_or_create(&Credential::Device(format!("ordered-device-{i}")), user)
            .await
            .expect("create");
        assert!(created);
        accounts.push(identity.user_id);
    }
    // 8 accounts × 60 writes, all queued at once: account by account they interleave, and each
    // account's writes are queued in step order (each is polled once, which queues it, before
    // the next is made), then all are awaited together.
    let steps = 60;
    let mut writes = Vec::new();
    for step in 0..steps {
        for &user_id in &accounts {
            let changes = Changes {
                wallet: [("coins".to_owned(), 1)].into(),
                ..Changes::default()
            };
            let write = LedgerWrite {
                user_id,
                wallet: vec![("coins".to_owned(), 1)],
                items: vec![],
                reason: format!("step-{step}"),
                metadata: "{}".into(),
                idempotency_key: None,
                changes: changes.to_json(),
                now_ms: 2,
            };
            let store = stores.economy.clone();
            // Unconstrained: tokio's cooperative budget would make a send past the task's
            // budget wait (and queue later) although the queue has room.
            let mut write = Box::pin(tokio::task::unconstrained(async move {
                (user_id, step, store.apply_ledger(write).await)
            }));
            let _ = futures_util::poll!(&mut write);
            writes.push(write);
        }
    }
    let outcomes = join_all(writes).await;
    let mut last_id: HashMap<uuid::Uuid, i64> = HashMap::new();
    let mut by_account: Vec<_> = outcomes.into_iter().collect();
    by_account.sort_by_key(|(user, step, _)| (*user, *step));
    for (user, step, outcome) in by_account {
        let Ok(LedgerOutcome::Applied(receipt)) = outcome else {
            panic!("step {step} of {user}: {outcome:?}");
        };
        // The balance a step leaves is its place in the order: applied in the order queued.
        assert_eq!(
            receipt.balances.wallet["coins"],
            step as i64 + 1,
            "{user} step {step}"
        );
        if let Some(previous) = last_id.insert(user, receipt.ledger_id) {
            assert!(
                receipt.ledger_id > previous,
                "{user} step {step}: ledger ids out of order"
            );
        }
    }
    let ledger = stores
        .economy
        .ledger(accounts[0], None, 1000)
        .await
        .expect("ledger");
    assert_eq!(ledger.len(), steps);
    assert_eq!(
        ledger[0].reason,
        format!("step-{}", steps - 1),
        "newest first"
    );
    stores.close().await;
}

const LINKS_KEY: &str = "links-api-key-for-the-crash-test";

async fn revocations_profiles_and_link_creates_survive_kill_9(backend: Backend) {
    let db = Database::new(backend).await;
    let links_port = support::free_port();
    let start = || {
        let mut command = muster_command(&db);
        command
            .env("MUSTER_LINKS__LISTEN", format!("127.0.0.1:{links_port}"))
            .env("MUSTER_GRPC__LISTEN", "")
            .env("MUSTER_LINKS__API_KEY", LINKS_KEY);
        command
    };
    let port = support::free_port();
    let mut binary = Binary::run(start(), port).await;
    let base = binary.base();
    let links = format!("http://127.0.0.1:{links_port}");
    let http = reqwest::Client::new();

    // Each acknowledged step: a logged-out session (its token), a renamed account (token and
    // the new name) and a created link (its code and URL).
    let logged_out = Arc::new(Mutex::new(Vec::<String>::new()));
    let renamed = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let created = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let mut loads = Vec::new();
    for w in 0..4 {
        let (http, base, links) = (http.clone(), base.clone(), links.clone());
        let (logged_out, renamed, created) = (logged_out.clone(), renamed.clone(), created.clone());
        loads.push(tokio::spawn(async move {
            for i in 0..100_000 {
                let Some(token) = session(&http, &base, &format!("crash-{w}-{i:06}")).await else {
                    return;
                };
                let name = format!("renamed-{w}-{i}");
                let renamed_ok = http
                    .put(format!("{base}/v2/account"))
                    .bearer_auth(&token)
                    .json(&json!({ "username": name }))
                    .send()
                    .await
                    .is_ok_and(|r| r.status() == 200);
                if !renamed_ok {
                    return;
                }
                renamed.lock().expect("lock").push((token.clone(), name));
                let url = format!("https://game.example.com/crash/{w}/{i}");
                let link = http
                    .post(format!("{links}/"))
                    .bearer_auth(LINKS_KEY)
                    .json(&json!({ "url": url }))
                    .send()
                    .await;
                let Ok(link) = link else { return };
                if link.status() != 201 {
                    return;
                }
                let Ok(body) = link.json::<Value>().await else {
                    return;
                };
                let code = body["code"].as_str().expect("code").to_owned();
                created.lock().expect("lock").push((code, url));
                let Some(other) = session(&http, &base, &format!("crash-out-{w}-{i:06}")).await
                else {
                    return;
                };
                let out = http
                    .post(format!("{base}/v2/session/logout"))
                    .bearer_auth(&other)
                    .json(&json!({}))
                    .send()
                    .await;
                match out {
                    Ok(r) if r.status() == 200 => logged_out.lock().expect("lock").push(other),
                    _ => return,
                }
            }
        }));
    }
    eventually("100 acknowledged logouts", || async {
        logged_out.lock().expect("lock").len() >= 100
    })
    .await;
    binary.kill9();
    for load in loads {
        load.await.expect("load");
    }

    let binary = Binary::run(start(), port).await;
    let base = binary.base();
    let logged_out = logged_out.lock().expect("lock").clone();
    for token in &logged_out {
        let status = http
            .get(format!("{base}/v2/account"))
            .bearer_auth(token)
            .send()
            .await
            .expect("account")
            .status();
        assert_eq!(
            status, 401,
            "a token logged out before the kill works again"
        );
    }
    let renamed = renamed.lock().expect("lock").clone();
    for (token, name) in &renamed {
        let account: Value = http
            .get(format!("{base}/v2/account"))
            .bearer_auth(token)
            .send()
            .await
            .expect("account")
            .json()
            .await
            .expect("JSON");
        assert_eq!(account["user"]["username"], name.as_str(), "{account}");
    }
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let created = created.lock().expect("lock").clone();
    for (code, url) in &created {
        let visit = no_redirects
            .get(format!("{links}/{code}"))
            .send()
            .await
            .expect("visit");
        assert_eq!(visit.status(), 308, "link {code} lost");
        assert_eq!(visit.headers()["location"], url.as_str());
    }
}

async fn session(http: &reqwest::Client, base: &str, device: &str) -> Option<String> {
    let response = http
        .post(format!("{base}/v2/account/authenticate/device?create=true"))
        .basic_auth("defaultkey", Some(""))
        .json(&json!({ "id": device }))
        .send()
        .await
        .ok()?;
    if response.status() != 200 {
        return None;
    }
    let body: Value = response.json().await.ok()?;
    Some(body["token"].as_str()?.to_owned())
}
