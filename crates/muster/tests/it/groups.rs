//! Groups over the REST API, on SQLite and PostgreSQL: what nakama-js cannot show — players
//! joining a nearly full group at the same moment, groups that lose their last member (by
//! leaving or by the account's deletion) going with it, and server code reaching groups and
//! friends (`Call::groups`, `Call::friends`).
//! (clients/js-acceptance/test/groups.test.mjs covers the routes as a client uses them.)

use crate::support;

use muster::friends::Targets;
use muster::functions::{Call, Functions, RpcError, ServerFunction};
use muster::groups::store::{Actor, GroupChanges, MemberChange};
use serde_json::{json, Value};
use support::{status_and_json, Backend, Database, TestServer};

on_both_backends!(
    joins_at_once_never_pass_max_count,
    a_group_goes_with_its_last_member,
    server_code_makes_a_guild_and_befriends_its_member,
);

/// `guild_setup {"name", "member"}`, called by a player: a group the caller leads, with server
/// metadata, the member added as the server, and a friend invite from the caller to them.
struct GuildSetup;

#[async_trait::async_trait]
impl ServerFunction for GuildSetup {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let caller = call
            .caller
            .ok_or_else(|| RpcError::invalid("players only"))?;
        let request: Value = call.json()?;
        let member = request["member"].as_str().unwrap_or_default().to_string();
        let group = call
            .groups
            .create(
                caller.user_id,
                muster_proto::api::CreateGroupRequest {
                    name: request["name"].as_str().unwrap_or_default().to_string(),
                    open: false,
                    ..Default::default()
                },
            )
            .await?;
        let id: uuid::Uuid = group.id.parse().map_err(|_| RpcError::internal())?;
        call.groups
            .update_as_server(
                id,
                GroupChanges {
                    metadata: Some(r#"{"tier":"gold"}"#.into()),
                    ..Default::default()
                },
            )
            .await?;
        call.groups
            .change_users(
                Actor::Server,
                &group.id,
                MemberChange::Add,
                std::slice::from_ref(&member),
            )
            .await?;
        call.friends
            .add(
                caller.user_id,
                &caller.username,
                Targets {
                    ids: vec![member],
                    usernames: Vec::new(),
                },
            )
            .await?;
        Ok(json!({ "group_id": group.id }).to_string())
    }
}

async fn call(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = server
        .http
        .request(method, server.url(path))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    status_and_json(request.send().await.expect("send")).await
}

async fn create(server: &TestServer, token: &str, name: &str, max_count: i64) -> Value {
    let (status, group) = call(
        server,
        reqwest::Method::POST,
        "/v2/group",
        token,
        Some(json!({"name": name, "open": true, "max_count": max_count})),
    )
    .await;
    assert_eq!(status, 200, "{group}");
    group
}

/// The group named `name`, if it exists.
async fn find(server: &TestServer, token: &str, name: &str) -> Option<Value> {
    let (status, list) = server
        .get_with_token(&format!("/v2/group?name={name}&limit=10"), token)
        .await;
    assert_eq!(status, 200, "{list}");
    list["groups"]
        .as_array()
        .and_then(|groups| groups.iter().find(|g| g["name"] == name).cloned())
}

async fn joins_at_once_never_pass_max_count(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (owner, _) = server.device_session("device-group-owner").await;
    let group = create(&server, &owner, "five-seats", 5).await;
    let id = group["id"].as_str().expect("id").to_string();
    let mut players = Vec::new();
    for i in 0..12 {
        players.push(
            server
                .device_session(&format!("device-group-joiner-{i}"))
                .await
                .0,
        );
    }
    let path = format!("/v2/group/{id}/join");
    let answers = futures_util::future::join_all(
        players
            .iter()
            .map(|token| call(&server, reqwest::Method::POST, &path, token, None)),
    )
    .await;
    let joined = answers.iter().filter(|(status, _)| *status == 200).count();
    assert_eq!(joined, 4, "{answers:?}");
    for (status, body) in answers.iter().filter(|(status, _)| *status != 200) {
        assert_eq!(*status, 400, "{body}");
        assert_eq!(body["message"], "Group is full.", "{body}");
    }
    let found = find(&server, &owner, "five-seats")
        .await
        .expect("the group");
    assert_eq!(found["edge_count"], 5, "{found}");
    let (status, users) = server
        .get_with_token(&format!("/v2/group/{id}/user"), &owner)
        .await;
    assert_eq!(status, 200, "{users}");
    assert_eq!(users["group_users"].as_array().map(Vec::len), Some(5));
}

async fn a_group_goes_with_its_last_member(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (a, _) = server.device_session("device-group-last-a").await;
    let (b, _) = server.device_session("device-group-last-b").await;

    // Created and left at once: nothing is left behind.
    let lone = create(&server, &a, "lonely", 0).await;
    assert_eq!(lone["max_count"], 100, "the default max_count: {lone}");
    let path = format!("/v2/group/{}/leave", lone["id"].as_str().expect("id"));
    let (status, body) = call(&server, reqwest::Method::POST, &path, &a, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(find(&server, &a, "lonely").await.is_none());

    // Two members: the one who is not superadmin deletes their account, then the other.
    let pair = create(&server, &a, "pair", 0).await;
    let id = pair["id"].as_str().expect("id").to_string();
    let (status, body) = call(
        &server,
        reqwest::Method::POST,
        &format!("/v2/group/{id}/join"),
        &b,
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        find(&server, &a, "pair").await.expect("pair")["edge_count"],
        2
    );
    // The last superadmin may not leave members behind.
    let (status, body) = call(
        &server,
        reqwest::Method::POST,
        &format!("/v2/group/{id}/leave"),
        &a,
        None,
    )
    .await;
    assert_eq!((status, body["code"].as_i64()), (400, Some(3)), "{body}");
    let (status, body) = call(&server, reqwest::Method::DELETE, "/v2/account", &b, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        find(&server, &a, "pair").await.expect("pair")["edge_count"],
        1
    );
    let (status, body) = call(&server, reqwest::Method::DELETE, "/v2/account", &a, None).await;
    assert_eq!(status, 200, "{body}");
    let (c, _) = server.device_session("device-group-last-c").await;
    assert!(find(&server, &c, "pair").await.is_none());
}

async fn server_code_makes_a_guild_and_befriends_its_member(backend: Backend) {
    let db = Database::new(backend).await;
    let mut functions = Functions::new();
    functions.register("guild_setup", GuildSetup).expect("id");
    let server = TestServer::start_with(db.config(), functions).await;
    let (leader, _) = server.device_session("device-guild-leader").await;
    let (member, _) = server.device_session("device-guild-member").await;
    let member_id = support::claims(&member)["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    let payload = json!({ "name": "gold guild", "member": member_id }).to_string();
    let (status, answer) = call(
        &server,
        reqwest::Method::POST,
        "/v2/rpc/guild_setup",
        &leader,
        Some(Value::String(payload)),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let group = find(&server, &member, "gold guild")
        .await
        .expect("the guild");
    assert_eq!(group["metadata"], r#"{"tier":"gold"}"#);
    assert_eq!(
        group["edge_count"], 2,
        "the leader and the member added by the server"
    );
    let (status, friends) = server.get_with_token("/v2/friend", &member).await;
    assert_eq!(status, 200, "{friends}");
    assert_eq!(
        friends["friends"][0]["state"], 2,
        "an invite from the leader: {friends}"
    );
    // A bad request from the player is the function's error, not a crash.
    let payload = json!({ "name": "", "member": member_id }).to_string();
    let (status, answer) = call(
        &server,
        reqwest::Method::POST,
        "/v2/rpc/guild_setup",
        &leader,
        Some(Value::String(payload)),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
}
