//! Friends over the REST API, on SQLite and PostgreSQL: what nakama-js cannot show — two players
//! adding each other at the same moment, and an account's deletion taking its edges with it.
//! (clients/js-acceptance/test/friends.test.mjs covers the routes as a client uses them.)

use crate::support;

use serde_json::Value;
use support::{status_and_json, Backend, Database, TestServer};

on_both_backends!(
    crossing_adds_make_friends,
    a_deleted_account_leaves_no_edges,
);

async fn call(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: &str,
) -> (u16, Value) {
    status_and_json(
        server
            .http
            .request(method, server.url(path))
            .bearer_auth(token)
            .send()
            .await
            .expect("send"),
    )
    .await
}

fn user_id(token: &str) -> String {
    support::claims(token)["uid"]
        .as_str()
        .expect("uid")
        .to_string()
}

/// `(other user id, state)` of each of the caller's edges.
async fn edges(server: &TestServer, token: &str) -> Vec<(String, i64)> {
    let (status, list) = server.get_with_token("/v2/friend", token).await;
    assert_eq!(status, 200, "{list}");
    list["friends"]
        .as_array()
        .map(|friends| {
            friends
                .iter()
                .map(|f| {
                    (
                        f["user"]["id"].as_str().unwrap_or("").to_string(),
                        f["state"].as_i64().unwrap_or(-1),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn crossing_adds_make_friends(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    for round in 0..5 {
        let (a, _) = server
            .device_session(&format!("device-cross-a-{round}"))
            .await;
        let (b, _) = server
            .device_session(&format!("device-cross-b-{round}"))
            .await;
        let (ida, idb) = (user_id(&a), user_id(&b));
        let (add_b, add_a) = (
            format!("/v2/friend?ids={idb}"),
            format!("/v2/friend?ids={ida}"),
        );
        // Each adds the other at once: one invites, the other's add then accepts it.
        let (ra, rb) = tokio::join!(
            call(&server, reqwest::Method::POST, &add_b, &a),
            call(&server, reqwest::Method::POST, &add_a, &b),
        );
        assert_eq!((ra.0, rb.0), (200, 200), "round {round}: {ra:?} {rb:?}");
        assert_eq!(
            edges(&server, &a).await,
            vec![(idb.clone(), 0)],
            "round {round}"
        );
        assert_eq!(
            edges(&server, &b).await,
            vec![(ida.clone(), 0)],
            "round {round}"
        );
    }
}

async fn a_deleted_account_leaves_no_edges(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (a, _) = server.device_session("device-edges-a").await;
    let (b, _) = server.device_session("device-edges-b").await;
    let (c, _) = server.device_session("device-edges-c").await;
    let (idb, idc) = (user_id(&b), user_id(&c));
    let added = call(
        &server,
        reqwest::Method::POST,
        &format!("/v2/friend?ids={idb}&ids={idc}"),
        &a,
    )
    .await;
    assert_eq!(added.0, 200, "{added:?}");
    let blocked = call(
        &server,
        reqwest::Method::POST,
        &format!("/v2/friend/block?ids={}", user_id(&a)),
        &c,
    )
    .await;
    assert_eq!(blocked.0, 200, "{blocked:?}");
    assert_eq!(edges(&server, &a).await, vec![(idb.clone(), 1)]);

    let deleted = call(&server, reqwest::Method::DELETE, "/v2/account", &a).await;
    assert_eq!(deleted.0, 200, "{deleted:?}");
    assert_eq!(
        edges(&server, &b).await,
        vec![],
        "b's received invite went with a"
    );
    assert_eq!(
        edges(&server, &c).await,
        vec![],
        "c's block of a went with a"
    );
}
