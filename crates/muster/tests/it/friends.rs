//! Friends over the REST API, on SQLite and PostgreSQL: what nakama-js cannot show — two players
//! adding each other at the same moment, and an account's deletion taking its edges with it —
//! and the import of a player's Facebook or Steam friends (`FriendStore::import_friends`, and
//! `Friends::import` from server code, with its notifications).
//! (clients/js-acceptance/test/friends.test.mjs covers the routes as a client uses them.)

use crate::support;

use muster::friends::store::friend_state;
use muster::functions::{Call, Functions, RpcError, ServerFunction};
use muster::services::Stores;
use serde_json::{json, Value};
use support::{status_and_json, Backend, Database, TestServer};
use uuid::Uuid;

on_both_backends!(
    crossing_adds_make_friends,
    a_deleted_account_leaves_no_edges,
    import_makes_mutual_friends_once,
    import_accepts_invites_and_skips_blocks,
    import_reset_keeps_only_blocks,
    import_respects_the_edge_bound,
    imported_friends_are_told,
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

/// The friend store of `db` (beside the server on it, as a game's own Rust would be).
async fn open_stores(db: &Database) -> Stores {
    let metrics = std::sync::Arc::new(muster::base::metrics::Metrics::new());
    Stores::open(&db.config(), metrics).await.expect("store")
}

/// `n` new players (device accounts named after `tag`): their tokens and ids.
async fn players(server: &TestServer, tag: &str, n: usize) -> (Vec<String>, Vec<Uuid>) {
    let mut tokens = Vec::with_capacity(n);
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let (token, _) = server.device_session(&format!("device-{tag}-{i}")).await;
        ids.push(user_id(&token).parse().expect("uuid"));
        tokens.push(token);
    }
    (tokens, ids)
}

/// `(other user, state, metadata)` of each of `user`'s edges, as the store lists them.
async fn stored_edges(stores: &Stores, user: Uuid) -> Vec<(Uuid, i32, Value)> {
    let mut edges: Vec<(Uuid, i32, Value)> = stores
        .friends
        .list_friends(user, None, None, 100)
        .await
        .expect("list")
        .into_iter()
        .map(|record| {
            let metadata = serde_json::from_str(&record.metadata).expect("JSON metadata");
            (record.user.id, record.state, metadata)
        })
        .collect();
    edges.sort_by_key(|(id, _, _)| *id);
    edges
}

/// `(other user, state)` of each of `user`'s edges, sorted by the other user.
async fn stored_states(stores: &Stores, user: Uuid) -> Vec<(Uuid, i32)> {
    let edges = stored_edges(stores, user).await;
    edges
        .into_iter()
        .map(|(id, state, _)| (id, state))
        .collect()
}

fn sorted(mut ids: Vec<(Uuid, i32)>) -> Vec<(Uuid, i32)> {
    ids.sort_by_key(|(id, _)| *id);
    ids
}

const NOW_US: i64 = 1_700_000_000_000_000;
const MAX_EDGES: usize = 1000;

async fn import_makes_mutual_friends_once(backend: Backend) {
    use friend_state::FRIEND;
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let stores = open_stores(&db).await;
    let (_, ids) = players(&server, "import-mutual", 3).await;
    let (a, b, c) = (ids[0], ids[1], ids[2]);
    let facebook = json!({ "provider": "facebook" });

    // The user itself, a repeat and an account that does not exist are skipped.
    let made = stores
        .friends
        .import_friends(
            a,
            vec![b, a, c, b, Uuid::new_v4()],
            "facebook",
            false,
            NOW_US,
            MAX_EDGES,
        )
        .await
        .expect("import");
    assert_eq!(made, vec![b, c]);
    assert_eq!(
        stored_edges(&stores, a).await,
        sorted(vec![(b, FRIEND), (c, FRIEND)])
            .into_iter()
            .map(|(id, state)| (id, state, facebook.clone()))
            .collect::<Vec<_>>()
    );
    for friend in [b, c] {
        assert_eq!(
            stored_edges(&stores, friend).await,
            vec![(a, FRIEND, facebook.clone())],
            "both edges are a friend's"
        );
    }
    let listed = stores
        .friends
        .list_friends(b, None, None, 10)
        .await
        .expect("list");
    assert_eq!(
        listed[0].position, NOW_US,
        "a new edge's position is the import's"
    );

    // Again, later and from Steam: no new friends, nothing changed.
    let made = stores
        .friends
        .import_friends(a, vec![b, c], "steam", false, NOW_US + 1_000_000, MAX_EDGES)
        .await
        .expect("import again");
    assert!(made.is_empty(), "{made:?}");
    let again = stores
        .friends
        .list_friends(b, None, None, 10)
        .await
        .expect("list");
    assert_eq!(again, listed);
    assert_eq!(
        stored_edges(&stores, c).await,
        vec![(a, FRIEND, facebook.clone())]
    );
}

async fn import_accepts_invites_and_skips_blocks(backend: Backend) {
    use friend_state::{BLOCKED, FRIEND};
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let stores = open_stores(&db).await;
    let (_, ids) = players(&server, "import-invites", 5).await;
    let (a, b, c, d, e) = (ids[0], ids[1], ids[2], ids[3], ids[4]);
    let friends = &stores.friends;
    // a invited b (with metadata on a's edge), c invited a, a blocked d, e blocked a.
    friends
        .add_friends(a, vec![b], NOW_US, MAX_EDGES)
        .await
        .expect("a invites b");
    assert!(friends
        .set_friend_metadata(a, b, r#"{"note":"met in lobby"}"#.into())
        .await
        .expect("metadata"));
    friends
        .add_friends(c, vec![a], NOW_US, MAX_EDGES)
        .await
        .expect("c invites a");
    friends
        .block_friends(a, vec![d], NOW_US, MAX_EDGES)
        .await
        .expect("a blocks d");
    friends
        .block_friends(e, vec![a], NOW_US, MAX_EDGES)
        .await
        .expect("e blocks a");

    let later = NOW_US + 5_000_000;
    let made = friends
        .import_friends(a, vec![b, c, d, e], "steam", false, later, MAX_EDGES)
        .await
        .expect("import");
    assert_eq!(
        made,
        vec![b, c],
        "the invites either way became friendships"
    );

    let edges = stored_edges(&stores, a).await;
    let edge = |id: Uuid| edges.iter().find(|(other, _, _)| *other == id).cloned();
    assert_eq!(
        edge(b),
        Some((
            b,
            FRIEND,
            json!({ "note": "met in lobby", "provider": "steam" })
        )),
        "the provider merged into the invite's metadata"
    );
    assert_eq!(edge(c), Some((c, FRIEND, json!({ "provider": "steam" }))));
    assert_eq!(edge(d), Some((d, BLOCKED, json!({}))), "a's block stays");
    assert_eq!(edge(e), None, "e blocked a: nothing from a to e");
    assert_eq!(
        stored_edges(&stores, b).await,
        vec![(a, FRIEND, json!({ "provider": "steam" }))]
    );
    assert_eq!(stored_states(&stores, c).await, vec![(a, FRIEND)]);
    assert_eq!(stored_states(&stores, d).await, vec![], "d still has none");
    assert_eq!(stored_states(&stores, e).await, vec![(a, BLOCKED)]);

    // An accepted invite keeps its position (when it was made); its update time is the import's.
    let listed = friends.list_friends(a, None, None, 10).await.expect("list");
    let to_b = listed.iter().find(|r| r.user.id == b).expect("a to b");
    assert_eq!(to_b.position, NOW_US);
    assert_eq!(to_b.update_time_ms, later / 1000);

    // Blocks either way stay blocks on another import; no new friends.
    let made = friends
        .import_friends(a, vec![d, e], "steam", false, later, MAX_EDGES)
        .await
        .expect("import blocked");
    assert!(made.is_empty(), "{made:?}");
    assert_eq!(
        friends.friend_state(a, d).await.expect("state"),
        Some(BLOCKED)
    );
    assert_eq!(
        friends.friend_state(e, a).await.expect("state"),
        Some(BLOCKED)
    );
}

async fn import_reset_keeps_only_blocks(backend: Backend) {
    use friend_state::{BLOCKED, FRIEND, INVITE_RECEIVED, INVITE_SENT};
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let stores = open_stores(&db).await;
    let (_, ids) = players(&server, "import-reset", 7).await;
    let (a, b, c, d, e, f, g) = (ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6]);
    let friends = &stores.friends;
    // a and b friends; a invited c; d invited a; a blocked e; f blocked a.
    friends
        .add_friends(a, vec![b, c], NOW_US, MAX_EDGES)
        .await
        .expect("a invites");
    friends
        .add_friends(b, vec![a], NOW_US, MAX_EDGES)
        .await
        .expect("b accepts");
    friends
        .add_friends(d, vec![a], NOW_US, MAX_EDGES)
        .await
        .expect("d invites a");
    friends
        .block_friends(a, vec![e], NOW_US, MAX_EDGES)
        .await
        .expect("a blocks e");
    friends
        .block_friends(f, vec![a], NOW_US, MAX_EDGES)
        .await
        .expect("f blocks a");
    assert_eq!(
        stored_states(&stores, a).await,
        sorted(vec![
            (b, FRIEND),
            (c, INVITE_SENT),
            (d, INVITE_RECEIVED),
            (e, BLOCKED)
        ])
    );

    let made = friends
        .import_friends(a, vec![g], "facebook", true, NOW_US, MAX_EDGES)
        .await
        .expect("import with reset");
    assert_eq!(made, vec![g]);
    assert_eq!(
        stored_states(&stores, a).await,
        sorted(vec![(e, BLOCKED), (g, FRIEND)])
    );
    for other in [b, c, d, e] {
        assert_eq!(
            stored_states(&stores, other).await,
            vec![],
            "no edge left to a"
        );
    }
    assert_eq!(
        stored_states(&stores, f).await,
        vec![(a, BLOCKED)],
        "f's block stays"
    );
    assert_eq!(stored_states(&stores, g).await, vec![(a, FRIEND)]);

    // A reset with no friends to import leaves only the blocks, both ways.
    let made = friends
        .import_friends(a, Vec::new(), "facebook", true, NOW_US, MAX_EDGES)
        .await
        .expect("reset only");
    assert!(made.is_empty(), "{made:?}");
    assert_eq!(stored_states(&stores, a).await, vec![(e, BLOCKED)]);
    assert_eq!(stored_states(&stores, g).await, vec![]);
    assert_eq!(stored_states(&stores, f).await, vec![(a, BLOCKED)]);
}

async fn import_respects_the_edge_bound(backend: Backend) {
    use friend_state::{FRIEND, INVITE_SENT};
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let stores = open_stores(&db).await;
    let (_, ids) = players(&server, "import-bound", 7).await;
    let (a, b, c, d, f, x, y) = (ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6]);
    let friends = &stores.friends;
    const MAX: usize = 2;
    // a has one edge (an invite to b); f has two, its bound.
    friends
        .add_friends(a, vec![b], NOW_US, MAX)
        .await
        .expect("a invites b");
    friends
        .add_friends(f, vec![x, y], NOW_US, MAX)
        .await
        .expect("f invites x and y");

    // b's invite is accepted (no new edge); f has no room; c takes a's last; d is past it.
    let made = friends
        .import_friends(a, vec![b, f, c, d], "steam", false, NOW_US, MAX)
        .await
        .expect("import, not an error");
    assert_eq!(made, vec![b, c]);
    assert_eq!(
        stored_states(&stores, a).await,
        sorted(vec![(b, FRIEND), (c, FRIEND)])
    );
    assert_eq!(stored_states(&stores, d).await, vec![]);
    assert_eq!(
        stored_states(&stores, f).await,
        sorted(vec![(x, INVITE_SENT), (y, INVITE_SENT)])
    );

    // With a reset the bound counts what is left: a's friends go, d fits, f is still full.
    let made = friends
        .import_friends(a, vec![f, d], "steam", true, NOW_US, MAX)
        .await
        .expect("import with reset");
    assert_eq!(made, vec![d]);
    assert_eq!(stored_states(&stores, a).await, vec![(d, FRIEND)]);
}

/// `import_friends {"provider", "ids", "reset"}`, called by a player: `Friends::import` of the
/// caller's friends at the provider (whom a real caller would find by their provider ids).
struct ImportFriends;

#[async_trait::async_trait]
impl ServerFunction for ImportFriends {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let caller = call
            .caller
            .ok_or_else(|| RpcError::invalid("players only"))?;
        let request: Value = call.json()?;
        let provider = match request["provider"].as_str() {
            Some("steam") => "steam",
            _ => "facebook",
        };
        let ids = request["ids"]
            .as_array()
            .map(|ids| {
                ids.iter()
                    .filter_map(|id| id.as_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        let reset = request["reset"].as_bool().unwrap_or(false);
        call.friends
            .import(caller.user_id, &caller.username, provider, ids, reset)
            .await?;
        Ok(String::new())
    }
}

async fn rpc(server: &TestServer, id: &str, token: &str, payload: Value) -> (u16, Value) {
    status_and_json(
        server
            .http
            .post(server.url(&format!("/v2/rpc/{id}")))
            .bearer_auth(token)
            .json(&Value::String(payload.to_string()))
            .send()
            .await
            .expect("send"),
    )
    .await
}

/// `(code, subject, content, sender)` of each notification stored for the caller.
async fn notifications(server: &TestServer, token: &str) -> Vec<(i64, String, Value, String)> {
    let (status, list) = server
        .get_with_token("/v2/notification?limit=100", token)
        .await;
    assert_eq!(status, 200, "{list}");
    list["notifications"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|n| {
                    (
                        n["code"].as_i64().unwrap_or(0),
                        n["subject"].as_str().unwrap_or("").to_string(),
                        serde_json::from_str(n["content"].as_str().unwrap_or("null"))
                            .unwrap_or_default(),
                        n["sender_id"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn imported_friends_are_told(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.friends.max_per_user = 2;
    let mut functions = Functions::new();
    functions
        .register("import_friends", ImportFriends)
        .expect("id");
    let server = TestServer::start_with(config, functions).await;
    let (tokens, ids) = players(&server, "import-told", 4).await;
    let (a, b, c, d) = (ids[0], ids[1], ids[2], ids[3]);
    let username = support::claims(&tokens[0])["usn"]
        .as_str()
        .expect("usn")
        .to_string();
    // c already has a friend (d) and an invite: at friends.max_per_user.
    let steam = json!({ "provider": "steam", "ids": [d.to_string()] });
    let (status, body) = rpc(&server, "import_friends", &tokens[2], steam).await;
    assert_eq!(status, 200, "{body}");
    let invite = call(
        &server,
        reqwest::Method::POST,
        &format!("/v2/friend?ids={b}"),
        &tokens[2],
    )
    .await;
    assert_eq!(invite.0, 200, "{invite:?}");
    assert_eq!(
        notifications(&server, &tokens[3]).await.len(),
        1,
        "d was told"
    );

    // a imports b, c (full) and itself, twice: b is told once.
    let payload = json!({ "ids": [b.to_string(), c.to_string(), a.to_string(), b.to_string()] });
    for _ in 0..2 {
        let (status, body) = rpc(&server, "import_friends", &tokens[0], payload.clone()).await;
        assert_eq!(status, 200, "{body}");
    }
    let told = notifications(&server, &tokens[1]).await;
    let join: Vec<_> = told
        .iter()
        .filter(|(code, ..)| *code == -6)
        .cloned()
        .collect();
    assert_eq!(
        join,
        vec![(
            -6,
            "Your friend has just joined the game".to_string(),
            json!({ "username": username }),
            a.to_string()
        )]
    );
    assert_eq!(
        edges(&server, &tokens[0]).await,
        vec![(b.to_string(), 0)],
        "c had no room for a"
    );
    let (status, listed) = server.get_with_token("/v2/friend", &tokens[1]).await;
    assert_eq!(status, 200, "{listed}");
    let states: Vec<(String, i64, String)> = listed["friends"]
        .as_array()
        .map(|friends| {
            friends
                .iter()
                .map(|f| {
                    (
                        f["user"]["id"].as_str().unwrap_or("").to_string(),
                        f["state"].as_i64().unwrap_or(-1),
                        f["metadata"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(
        states.contains(&(a.to_string(), 0, r#"{"provider":"facebook"}"#.to_string())),
        "{listed}"
    );
    assert!(
        notifications(&server, &tokens[2]).await.is_empty(),
        "c was skipped: not told"
    );

    // More ids than one import takes is the caller's error.
    let many: Vec<String> = (0..=muster::friends::MAX_IMPORT)
        .map(|_| Uuid::new_v4().to_string())
        .collect();
    let (status, body) = rpc(
        &server,
        "import_friends",
        &tokens[0],
        json!({ "ids": many }),
    )
    .await;
    assert_eq!(status, 400, "{body}");
}
