//! Stored notifications under concurrent sends, on SQLite and PostgreSQL: what nakama-js cannot
//! show — sends made at the same moment (which PostgreSQL's writer stores in one statement) keep
//! each user's bound, and a send naming a user who does not exist fails alone.
//! (clients/js-acceptance/test/notifications.test.mjs covers the API as a client uses it.)

use crate::support;

use serde_json::{json, Value};
use support::{status_and_json, Backend, Database, TestServer};

on_both_backends!(
    concurrent_sends_keep_each_users_bound,
    a_send_to_nobody_fails_alone,
);

fn user_id(token: &str) -> String {
    support::claims(token)["uid"]
        .as_str()
        .expect("uid")
        .to_string()
}

async fn send(server: &TestServer, user: &str, n: usize) -> (u16, Value) {
    let body = json!({ "notifications": [{ "user_id": user, "subject": format!("n{n}"),
        "content": { "n": n }, "code": 1, "persistent": true }] });
    status_and_json(
        server
            .http
            .post(server.url("/v2/rpc/notifications_send?http_key=defaulthttpkey&unwrap"))
            .json(&body)
            .send()
            .await
            .expect("send"),
    )
    .await
}

async fn stored(server: &TestServer, token: &str) -> Vec<i64> {
    let (status, list) = server
        .get_with_token("/v2/notification?limit=100", token)
        .await;
    assert_eq!(status, 200, "{list}");
    list["notifications"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|n| {
                    let content: Value =
                        serde_json::from_str(n["content"].as_str().unwrap_or("{}"))
                            .unwrap_or_default();
                    content["n"].as_i64().unwrap_or(-1)
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn concurrent_sends_keep_each_users_bound(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.notifications.max_per_user = 10;
    let server = TestServer::start(config).await;
    let mut users = Vec::new();
    for i in 0..4 {
        let (token, _) = server.device_session(&format!("device-notify-{i}")).await;
        users.push((user_id(&token), token));
    }
    let sends = (0..120).map(|n| {
        let user = users[n % users.len()].0.clone();
        let server = &server;
        async move { send(server, &user, n).await }
    });
    for (status, body) in futures_util::future::join_all(sends).await {
        assert_eq!(status, 200, "{body}");
    }
    for (_, token) in &users {
        let kept = stored(&server, token).await;
        assert_eq!(kept.len(), 10, "each user keeps the bound: {kept:?}");
    }
    // One more to one user, alone: it is kept and the oldest goes.
    let (status, body) = send(&server, &users[0].0, 1000).await;
    assert_eq!(status, 200, "{body}");
    let kept = stored(&server, &users[0].1).await;
    assert_eq!((kept.len(), kept.last()), (10, Some(&1000)), "{kept:?}");
}

async fn a_send_to_nobody_fails_alone(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, _) = server.device_session("device-notify-alone").await;
    let me = user_id(&token);
    let nobody = uuid::Uuid::new_v4().to_string();
    let sends = (0..40).map(|n| {
        let target = if n == 17 { nobody.clone() } else { me.clone() };
        let server = &server;
        async move { (n, send(server, &target, n).await) }
    });
    for (n, (status, body)) in futures_util::future::join_all(sends).await {
        if n == 17 {
            assert_eq!(status, 404, "{body}");
        } else {
            assert_eq!(status, 200, "{n}: {body}");
        }
    }
    let mut kept = stored(&server, &token).await;
    kept.sort_unstable();
    let expected: Vec<i64> = (0..40).filter(|n| *n != 17).collect();
    assert_eq!(kept, expected);
}
