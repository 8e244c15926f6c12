//! Storage objects over Nakama's REST routes, on SQLite and PostgreSQL: versions as Nakama
//! computes them, conditional writes, all-or-nothing batches, read and write permissions in
//! reads, listings and deletes, paging with cursors that cannot be forged into reading more,
//! system objects written by server code, and every bad input refused with nothing changed.

use crate::support;

use muster::functions::{Call, Functions, RpcError, ServerFunction};
use muster::storage::{Caller, WriteObject};
use serde_json::{json, Value};
use support::{assert_error, Backend, Database, TestServer};

on_both_backends!(
    objects_are_written_read_listed_and_deleted,
    conditional_writes_and_batches_are_all_or_nothing,
    permissions_decide_who_reads_writes_and_deletes,
    listings_page_through_what_the_caller_may_read,
    bad_input_is_refused_and_changes_nothing,
    a_player_owns_a_bounded_number_of_objects,
    server_code_writes_system_objects,
    racing_conditional_writes_let_exactly_one_through,
);

/// The MD5 of the text in hex, as Nakama's version (computed by Python's hashlib, not by the
/// server's code, so that the test checks it).
fn md5_hex(text: &str) -> String {
    let output = std::process::Command::new("python3")
        .args([
            "-c",
            "import hashlib,sys; print(hashlib.md5(sys.argv[1].encode()).hexdigest())",
            text,
        ])
        .output()
        .expect("python3");
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

async fn call(
    server: &TestServer,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = server
        .http
        .request(method, server.url(path))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    support::status_and_json(request.send().await.expect("request")).await
}

async fn write(server: &TestServer, token: &str, objects: Value) -> (u16, Value) {
    call(
        server,
        token,
        reqwest::Method::PUT,
        "/v2/storage",
        Some(json!({ "objects": objects })),
    )
    .await
}

async fn read(server: &TestServer, token: &str, ids: Value) -> (u16, Value) {
    call(
        server,
        token,
        reqwest::Method::POST,
        "/v2/storage",
        Some(json!({ "object_ids": ids })),
    )
    .await
}

async fn delete(server: &TestServer, token: &str, ids: Value) -> (u16, Value) {
    call(
        server,
        token,
        reqwest::Method::PUT,
        "/v2/storage/delete",
        Some(json!({ "object_ids": ids })),
    )
    .await
}

async fn list(server: &TestServer, token: &str, path_and_query: &str) -> (u16, Value) {
    call(server, token, reqwest::Method::GET, path_and_query, None).await
}

/// The objects of a read or a listing as (key, user_id, value), sorted.
fn objects(body: &Value) -> Vec<(String, String, String)> {
    let mut found: Vec<(String, String, String)> = body["objects"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|o| {
                    (
                        o["key"].as_str().unwrap_or_default().to_owned(),
                        o["user_id"].as_str().unwrap_or_default().to_owned(),
                        o["value"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

fn uid(token: &str) -> String {
    support::claims(token)["uid"]
        .as_str()
        .expect("uid")
        .to_owned()
}

async fn objects_are_written_read_listed_and_deleted(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (alice, _) = server.device_session("storage-alice-0001").await;
    let (bob, _) = server.device_session("storage-bob-00001").await;
    let alice_id = uid(&alice);

    let save = r#"{"level": 3, "hp": 97}"#;
    let settings = r#"{"music":false}"#;
    let (status, acks) = write(
        &server,
        &alice,
        json!([
            {"collection": "saves", "key": "slot1", "value": save, "permission_read": 2},
            {"collection": "saves", "key": "settings", "value": settings}
        ]),
    )
    .await;
    assert_eq!(status, 200, "{acks}");
    let acks = acks["acks"].as_array().expect("acks").clone();
    assert_eq!(acks.len(), 2);
    assert_eq!(acks[0]["key"], "slot1");
    assert_eq!(acks[0]["version"], md5_hex(save).as_str());
    assert_eq!(acks[1]["version"], md5_hex(settings).as_str());
    assert_eq!(acks[0]["user_id"], alice_id.as_str());
    assert!(acks[0]["create_time"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));

    // The owner reads both, with their permissions (read 1 is the default; write 1 too).
    let ids = json!([
        {"collection": "saves", "key": "slot1", "user_id": alice_id},
        {"collection": "saves", "key": "settings", "user_id": alice_id},
        {"collection": "saves", "key": "missing", "user_id": alice_id}
    ]);
    let (status, body) = read(&server, &alice, ids.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        objects(&body),
        vec![
            ("settings".into(), alice_id.clone(), settings.into()),
            ("slot1".into(), alice_id.clone(), save.into()),
        ]
    );
    let slot = body["objects"]
        .as_array()
        .and_then(|l| l.iter().find(|o| o["key"] == "slot1"))
        .expect("slot1")
        .clone();
    assert_eq!(slot["permission_read"], 2, "{slot}");
    assert_eq!(slot["permission_write"], 1, "{slot}");
    assert_eq!(slot["collection"], "saves");
    // Another player reads only the public one.
    let (status, body) = read(&server, &bob, ids.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        objects(&body),
        vec![("slot1".into(), alice_id.clone(), save.into())]
    );

    // Listing: the owner's own (both), someone else's (the public one), the collection's
    // public objects (the public one).
    let (status, body) = list(
        &server,
        &alice,
        &format!("/v2/storage/saves?user_id={alice_id}&limit=10"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(objects(&body).len(), 2, "{body}");
    assert!(body.get("cursor").is_none(), "{body}");
    let (status, body) = list(
        &server,
        &bob,
        &format!("/v2/storage/saves/{alice_id}?limit=10"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        objects(&body),
        vec![("slot1".into(), alice_id.clone(), save.into())]
    );
    let (status, body) = list(&server, &bob, "/v2/storage/saves?limit=10").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        objects(&body),
        vec![("slot1".into(), alice_id.clone(), save.into())]
    );

    // An overwrite keeps the creation time and changes the version.
    let newer = r#"{"level": 4}"#;
    let (status, body) = write(
        &server,
        &alice,
        json!([{"collection": "saves", "key": "slot1", "value": newer, "permission_read": 2}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["acks"][0]["version"], md5_hex(newer).as_str());
    assert_eq!(body["acks"][0]["create_time"], acks[0]["create_time"]);

    // Bob cannot delete Alice's object (a delete names no owner: it is his own, not there).
    let (status, body) = delete(
        &server,
        &bob,
        json!([{"collection": "saves", "key": "slot1"}]),
    )
    .await;
    let message = assert_error(&(status, body), 400, 3);
    assert_eq!(
        message,
        "Storage delete rejected - not found, version check failed, or permission denied."
    );
    // Alice deletes both; they are gone.
    let (status, body) = delete(
        &server,
        &alice,
        json!([{"collection": "saves", "key": "slot1"}, {"collection": "saves", "key": "settings"}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = read(&server, &alice, ids).await;
    assert_eq!(status, 200, "{body}");
    assert!(objects(&body).is_empty(), "{body}");
}

async fn conditional_writes_and_batches_are_all_or_nothing(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, _) = server.device_session("storage-cond-0001").await;
    let me = uid(&token);
    let id = json!([{"collection": "c", "key": "k", "user_id": me}]);
    let current = |server: &TestServer, token: String| {
        let id = id.clone();
        let server_url = server.url("/v2/storage");
        let http = server.http.clone();
        async move {
            let response = http
                .post(server_url)
                .bearer_auth(token)
                .json(&json!({ "object_ids": id }))
                .send()
                .await
                .expect("request");
            let (_, body) = support::status_and_json(response).await;
            objects(&body).first().map(|o| o.2.clone())
        }
    };

    // "*": only if absent.
    let (status, body) = write(
        &server,
        &token,
        json!([{"collection": "c", "key": "k", "value": "{\"v\":1}", "version": "*"}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let v1 = body["acks"][0]["version"]
        .as_str()
        .expect("version")
        .to_owned();
    let refused = write(
        &server,
        &token,
        json!([{"collection": "c", "key": "k", "value": "{\"v\":2}", "version": "*"}]),
    )
    .await;
    assert_eq!(
        assert_error(&refused, 400, 3),
        "Storage write rejected - version check failed."
    );
    assert_eq!(
        current(&server, token.clone()).await.as_deref(),
        Some("{\"v\":1}")
    );

    // A version: only if unchanged.
    let (status, body) = write(
        &server,
        &token,
        json!([{"collection": "c", "key": "k", "value": "{\"v\":2}", "version": v1}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let stale = write(
        &server,
        &token,
        json!([{"collection": "c", "key": "k", "value": "{\"v\":3}", "version": v1}]),
    )
    .await;
    assert_error(&stale, 400, 3);
    assert_eq!(
        current(&server, token.clone()).await.as_deref(),
        Some("{\"v\":2}")
    );
    // A version of an object that does not exist: refused.
    let missing = write(
        &server,
        &token,
        json!([{"collection": "c", "key": "other", "value": "{}", "version": v1}]),
    )
    .await;
    assert_error(&missing, 400, 3);

    // A batch whose second object is refused writes neither.
    let batch = write(
        &server,
        &token,
        json!([
            {"collection": "c", "key": "fresh", "value": "{\"new\":true}"},
            {"collection": "c", "key": "k", "value": "{\"v\":9}", "version": v1}
        ]),
    )
    .await;
    assert_error(&batch, 400, 3);
    assert_eq!(
        current(&server, token.clone()).await.as_deref(),
        Some("{\"v\":2}")
    );
    let (_, body) = read(
        &server,
        &token,
        json!([{"collection": "c", "key": "fresh", "user_id": me}]),
    )
    .await;
    assert!(objects(&body).is_empty(), "{body}");

    // A delete at a stale version is refused; at the current one it deletes.
    let v2 = md5_hex("{\"v\":2}");
    let refused = delete(
        &server,
        &token,
        json!([{"collection": "c", "key": "k", "version": v1}]),
    )
    .await;
    assert_error(&refused, 400, 3);
    let (status, body) = delete(
        &server,
        &token,
        json!([{"collection": "c", "key": "k", "version": v2}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(current(&server, token.clone()).await, None);
}

/// `storage_put`: writes, as the server, the objects of its payload (`owner` may be a user id
/// or absent for the system) — how a game's own code reaches storage.
struct StoragePut;

#[async_trait::async_trait]
impl ServerFunction for StoragePut {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let objects: Vec<Value> = call.json()?;
        let objects = objects
            .into_iter()
            .map(|o| WriteObject {
                collection: o["collection"].as_str().unwrap_or_default().into(),
                key: o["key"].as_str().unwrap_or_default().into(),
                owner: o["owner"].as_str().and_then(|s| s.parse().ok()),
                value: o["value"].as_str().unwrap_or_default().into(),
                version: String::new(),
                read: o["read"].as_i64().map(|v| v as i32),
                write: o["write"].as_i64().map(|v| v as i32),
            })
            .collect();
        let acks = call.storage.write(Caller::Server, objects).await?;
        Ok(json!({ "written": acks.len() }).to_string())
    }
}

async fn start_with_put(db: &Database) -> TestServer {
    let mut functions = Functions::new();
    functions.register("storage_put", StoragePut).expect("id");
    TestServer::start_with(db.config(), functions).await
}

async fn put_as_server(server: &TestServer, objects: Value) -> (u16, Value) {
    let response = server
        .http
        .post(server.url("/v2/rpc/storage_put?http_key=defaulthttpkey"))
        .json(&Value::String(objects.to_string()))
        .send()
        .await
        .expect("request");
    support::status_and_json(response).await
}

async fn permissions_decide_who_reads_writes_and_deletes(backend: Backend) {
    let db = Database::new(backend).await;
    let server = start_with_put(&db).await;
    let (token, _) = server.device_session("storage-perm-0001").await;
    let me = uid(&token);
    // The server gives the player a hidden object (read 0) and a locked one (write 0).
    let (status, body) = put_as_server(
        &server,
        json!([
            {"collection": "state", "key": "hidden", "owner": me, "value": "{\"cheat\":1}", "read": 0, "write": 0},
            {"collection": "state", "key": "locked", "owner": me, "value": "{\"rank\":5}", "read": 1, "write": 0}
        ]),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let ids = json!([
        {"collection": "state", "key": "hidden", "user_id": me},
        {"collection": "state", "key": "locked", "user_id": me}
    ]);
    let (_, body) = read(&server, &token, ids.clone()).await;
    assert_eq!(
        objects(&body),
        vec![("locked".into(), me.clone(), "{\"rank\":5}".into())],
        "a read-0 object is the server's only"
    );
    let (_, body) = list(
        &server,
        &token,
        &format!("/v2/storage/state?user_id={me}&limit=10"),
    )
    .await;
    assert_eq!(objects(&body).len(), 1, "{body}");
    let locked = body["objects"][0].clone();
    assert!(
        locked.get("permission_write").is_none(),
        "write 0 is left out: {locked}"
    );

    // Writing over either is refused, whatever the version asked; nothing changes.
    for version in ["", "*"] {
        let refused = write(
            &server,
            &token,
            json!([{"collection": "state", "key": "locked", "value": "{\"rank\":1}", "version": version}]),
        )
        .await;
        let message = assert_error(&refused, 400, 3);
        assert!(message.starts_with("Storage write rejected"), "{message}");
    }
    let refused = write(
        &server,
        &token,
        json!([{"collection": "state", "key": "hidden", "value": "{\"cheat\":0}"}]),
    )
    .await;
    assert_eq!(
        assert_error(&refused, 400, 3),
        "Storage write rejected - permission denied."
    );
    let refused = delete(
        &server,
        &token,
        json!([{"collection": "state", "key": "locked"}]),
    )
    .await;
    assert_error(&refused, 400, 3);
    let (_, body) = put_as_server(&server, json!([])).await;
    assert_eq!(body["payload"], "{\"written\":0}");
    let (_, body) = list(
        &server,
        &token,
        &format!("/v2/storage/state?user_id={me}&limit=10"),
    )
    .await;
    assert_eq!(
        objects(&body),
        vec![("locked".into(), me.clone(), "{\"rank\":5}".into())]
    );
}

async fn listings_page_through_what_the_caller_may_read(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let mut players = Vec::new();
    for i in 0..3 {
        let (token, _) = server.device_session(&format!("storage-page-{i:04}")).await;
        // Each writes three public objects and one private one.
        let (status, body) = write(
            &server,
            &token,
            json!([
                {"collection": "levels", "key": format!("a{i}"), "value": "{}", "permission_read": 2},
                {"collection": "levels", "key": format!("b{i}"), "value": "{}", "permission_read": 2},
                {"collection": "levels", "key": format!("c{i}"), "value": "{}", "permission_read": 2},
                {"collection": "levels", "key": format!("private{i}"), "value": "{}"}
            ]),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        players.push(token);
    }
    let viewer = &players[0];

    // The public objects of the collection, three a page: nine, each once, no private one.
    let mut seen = Vec::new();
    let mut cursor = String::new();
    let mut first_cursor = String::new();
    for page in 0.. {
        assert!(page < 10, "the listing never ended");
        let (status, body) = list(
            &server,
            viewer,
            &format!("/v2/storage/levels?limit=3&cursor={cursor}"),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let found = objects(&body);
        assert!(found.len() <= 3, "{body}");
        seen.extend(found.into_iter().map(|o| (o.0, o.1)));
        match body["cursor"].as_str() {
            Some(next) => {
                if first_cursor.is_empty() {
                    first_cursor = next.to_owned();
                }
                cursor = next.to_owned();
            }
            None => break,
        }
    }
    seen.sort();
    let before = seen.len();
    seen.dedup();
    assert_eq!(before, seen.len(), "an object came twice: {seen:?}");
    assert_eq!(seen.len(), 9, "{seen:?}");
    assert!(seen.iter().all(|(key, _)| !key.starts_with("private")));

    // Without a limit, one object a page (Nakama's default).
    let (_, body) = list(&server, viewer, "/v2/storage/levels").await;
    assert_eq!(objects(&body).len(), 1, "{body}");
    assert!(body["cursor"].as_str().is_some(), "{body}");

    // A public listing's cursor used on the viewer's own listing (which shows private objects
    // too) is refused, as are garbage and a hand-made one.
    let me = uid(viewer);
    let mine = format!("/v2/storage/levels?user_id={me}&limit=3&cursor={first_cursor}");
    assert_eq!(
        assert_error(&list(&server, viewer, &mine).await, 400, 3),
        "Malformed cursor was used."
    );
    use base64::Engine as _;
    let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
        json!({"c": "levels", "o": null, "m": 0, "r": 0, "k": "", "u": "00000000-0000-0000-0000-000000000000"})
            .to_string(),
    );
    for bad in ["garbage!", "e30", forged.as_str()] {
        let path = format!("/v2/storage/levels?limit=3&cursor={bad}");
        assert_error(&list(&server, viewer, &path).await, 400, 3);
    }
    // A position forged inside the right listing still reads only public objects.
    let inside = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
        json!({"c": "levels", "o": null, "m": 2, "r": 0, "k": "", "u": "00000000-0000-0000-0000-000000000000"})
            .to_string(),
    );
    let (status, body) = list(
        &server,
        viewer,
        &format!("/v2/storage/levels?limit=100&cursor={inside}"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(objects(&body).len(), 9, "{body}");

    // One's own listing holds the private object too; another's does not.
    let (_, body) = list(
        &server,
        viewer,
        &format!("/v2/storage/levels?user_id={me}&limit=100"),
    )
    .await;
    assert_eq!(objects(&body).len(), 4, "{body}");
    let (_, body) = list(
        &server,
        &players[1],
        &format!("/v2/storage/levels/{me}?limit=100"),
    )
    .await;
    assert_eq!(objects(&body).len(), 3, "{body}");

    for limit in ["0", "101", "-1", "x"] {
        let path = format!("/v2/storage/levels?limit={limit}");
        assert_error(&list(&server, viewer, &path).await, 400, 3);
    }
}

async fn bad_input_is_refused_and_changes_nothing(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.storage.max_value_bytes = 1024;
    config.storage.max_objects_per_request = 5;
    let server = TestServer::start(config).await;
    let (token, _) = server.device_session("storage-bad-00001").await;
    let me = uid(&token);

    let cases = [
        (
            json!([{"collection": "", "key": "k", "value": "{}"}]),
            "must be set",
        ),
        (
            json!([{"collection": "c", "key": "", "value": "{}"}]),
            "must be set",
        ),
        (
            json!([{"collection": "c", "key": "k", "value": "[1,2]"}]),
            "JSON object",
        ),
        (
            json!([{"collection": "c", "key": "k", "value": "{\"open\": "}]),
            "JSON object",
        ),
        (
            json!([{"collection": "c", "key": "k", "value": ""}]),
            "JSON object",
        ),
        (
            json!([{"collection": "c", "key": "k", "value": "{}", "permission_read": 3}]),
            "read permission",
        ),
        (
            json!([{"collection": "c", "key": "k", "value": "{}", "permission_write": 2}]),
            "write permission",
        ),
        (
            json!([{"collection": "c", "key": "k", "value": "{}", "permission_write": -1}]),
            "write permission",
        ),
        (
            json!([{"collection": "c", "key": "x".repeat(129), "value": "{}"}]),
            "at most 128",
        ),
        (
            json!([{"collection": "c", "key": "k", "value": format!("{{\"pad\":\"{}\"}}", "x".repeat(1100))}]),
            "too large",
        ),
        (
            json!([{"collection": "c", "key": "k", "value": "{}"}, {"collection": "c", "key": "k", "value": "{}"}]),
            "Duplicate",
        ),
        (
            json!((0..6)
                .map(|i| json!({"collection": "c", "key": format!("k{i}"), "value": "{}"}))
                .collect::<Vec<_>>()),
            "at most 5",
        ),
    ];
    for (objects_in, expected) in cases {
        let refused = write(&server, &token, objects_in.clone()).await;
        let message = assert_error(&refused, 400, 3);
        assert!(message.contains(expected), "{objects_in}: {message}");
    }
    // Malformed bodies.
    for body in ["{", "{\"objects\": 7}", "{\"objects\": [{\"key\": 5}]}"] {
        let response = server
            .http
            .put(server.url("/v2/storage"))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        let (status, answer) = support::status_and_json(response).await;
        assert_eq!(status, 400, "{body}: {answer}");
    }
    // Reads with a bad user id or no key, and without a session.
    let refused = read(
        &server,
        &token,
        json!([{"collection": "c", "key": "k", "user_id": "nope"}]),
    )
    .await;
    assert_eq!(
        assert_error(&refused, 400, 3),
        "Invalid user ID - must be UUID."
    );
    let refused = read(&server, &token, json!([{"collection": "c", "user_id": me}])).await;
    assert_error(&refused, 400, 3);
    let refused = list(&server, &token, "/v2/storage/c?user_id=nope").await;
    assert_error(&refused, 400, 3);
    let anonymous = server
        .http
        .get(server.url("/v2/storage/c"))
        .send()
        .await
        .expect("request");
    assert_eq!(anonymous.status().as_u16(), 401);
    let forged = list(&server, "not.a.token", "/v2/storage/c").await;
    assert_eq!(forged.0, 401, "{}", forged.1);

    // Nothing was written by any of it.
    let (_, body) = list(
        &server,
        &token,
        &format!("/v2/storage/c?user_id={me}&limit=100"),
    )
    .await;
    assert!(objects(&body).is_empty(), "{body}");
}

async fn a_player_owns_a_bounded_number_of_objects(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.storage.max_objects_per_user = 3;
    let mut functions = Functions::new();
    functions.register("storage_put", StoragePut).expect("id");
    let server = TestServer::start_with(config, functions).await;
    let (token, _) = server.device_session("storage-quota-001").await;
    let me = uid(&token);
    let (status, body) = write(
        &server,
        &token,
        json!([
            {"collection": "a", "key": "1", "value": "{}"},
            {"collection": "b", "key": "2", "value": "{}"}
        ]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // Two more would make four: refused, neither written.
    let refused = write(
        &server,
        &token,
        json!([
            {"collection": "a", "key": "3", "value": "{}"},
            {"collection": "a", "key": "4", "value": "{}"}
        ]),
    )
    .await;
    let message = assert_error(&refused, 429, 8);
    assert!(message.contains("at most 3"), "{message}");
    // One more fits, and overwriting what exists never counts.
    let (status, body) = write(
        &server,
        &token,
        json!([{"collection": "a", "key": "3", "value": "{}"}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = write(
        &server,
        &token,
        json!([{"collection": "a", "key": "1", "value": "{\"again\":1}"}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_error(
        &write(
            &server,
            &token,
            json!([{"collection": "z", "key": "9", "value": "{}"}]),
        )
        .await,
        429,
        8,
    );
    // The server is not bound by it.
    let (status, body) = put_as_server(
        &server,
        json!([{"collection": "z", "key": "granted", "owner": me, "value": "{}"}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // Deleting one frees its place.
    let (status, body) = delete(&server, &token, json!([{"collection": "a", "key": "3"}])).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = delete(
        &server,
        &token,
        json!([{"collection": "z", "key": "granted"}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = write(
        &server,
        &token,
        json!([{"collection": "z", "key": "9", "value": "{}"}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

async fn server_code_writes_system_objects(backend: Backend) {
    let db = Database::new(backend).await;
    let server = start_with_put(&db).await;
    let (token, _) = server.device_session("storage-system-01").await;
    let config = r#"{"event":"double_xp"}"#;
    let (status, body) = put_as_server(
        &server,
        json!([
            {"collection": "config", "key": "live", "value": config, "read": 2, "write": 0},
            {"collection": "config", "key": "secret", "value": "{\"salt\":\"x\"}", "read": 0, "write": 0}
        ]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // A system object is read with no user id, and shows none.
    let (status, body) = read(
        &server,
        &token,
        json!([{"collection": "config", "key": "live"}, {"collection": "config", "key": "secret"}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        objects(&body),
        vec![("live".into(), String::new(), config.into())]
    );
    assert!(body["objects"][0].get("user_id").is_none(), "{body}");
    // Listed among the collection's public objects; a player cannot overwrite it (their write
    // goes to their own object of the same key, not the system's).
    let (_, body) = list(&server, &token, "/v2/storage/config?limit=10").await;
    assert_eq!(
        objects(&body),
        vec![("live".into(), String::new(), config.into())]
    );
    let (status, _) = write(
        &server,
        &token,
        json!([{"collection": "config", "key": "live", "value": "{\"event\":\"none\"}"}]),
    )
    .await;
    assert_eq!(status, 200);
    let (_, body) = read(
        &server,
        &token,
        json!([{"collection": "config", "key": "live"}]),
    )
    .await;
    assert_eq!(
        objects(&body),
        vec![("live".into(), String::new(), config.into())]
    );
    // A bad object from server code is refused like a player's.
    let (status, body) = put_as_server(
        &server,
        json!([{"collection": "config", "key": "bad", "value": "not json"}]),
    )
    .await;
    assert_eq!(status, 400, "{body}");
}

async fn racing_conditional_writes_let_exactly_one_through(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, _) = server.device_session("storage-race-0001").await;
    let (status, body) = write(
        &server,
        &token,
        json!([{"collection": "race", "key": "k", "value": "{\"n\":0}"}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let base = body["acks"][0]["version"]
        .as_str()
        .expect("version")
        .to_owned();
    // Sixteen writers each create "fresh" ("*") and advance "k" from the version they read.
    let racers = (0..16).map(|i| {
        let (server, token, base) = (&server, token.clone(), base.clone());
        async move {
            let created = write(
                server,
                &token,
                json!([{"collection": "race", "key": "fresh", "value": format!("{{\"by\":{i}}}"), "version": "*"}]),
            )
            .await;
            let advanced = write(
                server,
                &token,
                json!([{"collection": "race", "key": "k", "value": format!("{{\"n\":{}}}", i + 1), "version": base}]),
            )
            .await;
            (created, advanced)
        }
    });
    let results = futures_util::future::join_all(racers).await;
    for (what, pick) in [("created", 0), ("advanced", 1)] {
        let outcomes: Vec<&(u16, Value)> = results
            .iter()
            .map(|r| if pick == 0 { &r.0 } else { &r.1 })
            .collect();
        let won = outcomes.iter().filter(|(status, _)| *status == 200).count();
        assert_eq!(won, 1, "{what}: {outcomes:?}");
        for (status, body) in outcomes.iter().filter(|(status, _)| *status != 200) {
            assert_error(&(*status, (*body).clone()), 400, 3);
        }
    }
}
