//! Nakama's client API over gRPC (`grpc.listen`), driven by a client generated from the same
//! service definition (`muster_proto::grpc`, itself checked against Nakama's protos): every
//! family of calls answers as the REST API does for the same request (compared field by field,
//! the gRPC answer written in protobuf's JSON mapping), authentication and errors are Nakama's
//! (codes as gRPC statuses), an unserved call answers UNIMPLEMENTED naming it, and the edge's
//! limits hold (an oversized message, a client that sends too slowly).

use std::time::Duration;

use base64::Engine as _;
use muster::functions::{Call, Functions, RpcError, ServerFunction};
use muster::leaderboards::NewLeaderboard;
use muster_proto::grpc as api;
use muster_proto::grpc::nakama_client::NakamaClient;
use pbjson_types::Empty;
use serde_json::{json, Value};
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Request};

use crate::support::{self, Backend, Database, TestServer};

on_both_backends!(
    every_family_answers_as_rest_does,
    authentication_and_errors_are_nakamas,
    limits_hold_for_grpc_clients,
);

/// Echoes its payload with the caller's id (none for the HTTP key).
struct Echo;

#[async_trait::async_trait]
impl ServerFunction for Echo {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let caller = call
            .caller
            .map(|c| c.user_id.to_string())
            .unwrap_or_default();
        Ok(json!({"payload": call.payload, "caller": caller}).to_string())
    }
}

async fn server(backend: Backend) -> (Database, TestServer) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.leaderboards.boards.push(NewLeaderboard {
        id: "grpc-board".into(),
        sort_order: "desc".into(),
        operator: "best".into(),
        ..Default::default()
    });
    let mut functions = Functions::new();
    functions.register("echo", Echo).expect("an id");
    let server = TestServer::start_with(config, functions).await;
    (db, server)
}

async fn client(server: &TestServer) -> NakamaClient<Channel> {
    let addr = server.grpc_addr.expect("grpc.listen is set");
    NakamaClient::connect(format!("http://{addr}"))
        .await
        .expect("the gRPC edge answers")
}

/// `message` with `authorization: <value>`.
fn with_auth<T>(message: T, value: &str) -> Request<T> {
    let mut request = Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        MetadataValue::try_from(value).expect("ascii"),
    );
    request
}

fn server_key() -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("defaultkey:")
    )
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn as_json<T: serde::Serialize>(message: &T) -> Value {
    serde_json::to_value(message).expect("serializes")
}

/// The REST answer of `method path` with `body`, as `token`.
async fn rest(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> Value {
    let mut request = server
        .http
        .request(method, server.url(path))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let (status, answer) =
        support::status_and_json(request.send().await.expect("REST answers")).await;
    assert_eq!(status, 200, "{path}: {answer}");
    answer
}

/// `grpc` (an answer in protobuf's JSON mapping) and `rest` are the same, but for the keys
/// in `moving` (times that differ between two reads).
fn same(what: &str, grpc: Value, rest: Value, moving: &[&str]) {
    fn strip(value: Value, moving: &[&str]) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .filter(|(k, _)| !moving.contains(&k.as_str()))
                    .map(|(k, v)| (k, strip(v, moving)))
                    .collect(),
            ),
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|v| strip(v, moving)).collect())
            }
            // protobuf's JSON mapping allows either way of writing UTC.
            Value::String(text) => Value::String(match text.strip_suffix("+00:00") {
                Some(utc) => format!("{utc}Z"),
                None => text,
            }),
            other => other,
        }
    }
    assert_eq!(strip(grpc, moving), strip(rest, moving), "{what}");
}

async fn every_family_answers_as_rest_does(backend: Backend) {
    let (_db, server) = server(backend).await;
    let mut grpc = client(&server).await;

    // Authentication: device, email and custom, each creating its account.
    let device = grpc
        .authenticate_device(with_auth(
            api::AuthenticateDeviceRequest {
                account: Some(api::AccountDevice {
                    id: "grpc-device-000001".into(),
                    ..Default::default()
                }),
                create: Some(true.into()),
                username: "grpc_ana".into(),
            },
            &server_key(),
        ))
        .await
        .expect("a device session")
        .into_inner();
    assert!(device.created, "the first sign-in creates the account");
    let email = grpc
        .authenticate_email(with_auth(
            api::AuthenticateEmailRequest {
                account: Some(api::AccountEmail {
                    email: "grpc@example.com".into(),
                    password: "a long password".into(),
                    ..Default::default()
                }),
                create: Some(true.into()),
                username: "grpc_bo".into(),
            },
            &server_key(),
        ))
        .await
        .expect("an email session")
        .into_inner();
    let custom = grpc
        .authenticate_custom(with_auth(
            api::AuthenticateCustomRequest {
                account: Some(api::AccountCustom {
                    id: "grpc-custom-id".into(),
                    ..Default::default()
                }),
                create: Some(true.into()),
                username: String::new(),
            },
            &server_key(),
        ))
        .await
        .expect("a custom session")
        .into_inner();
    assert!(custom.created);
    let ana = device.token.clone();
    let bo = email.token.clone();
    let bo_id = support::claims(&bo)["uid"]
        .as_str()
        .expect("uid")
        .to_owned();

    // The account: updated over gRPC, read back the same over both.
    grpc.update_account(with_auth(
        api::UpdateAccountRequest {
            display_name: Some(String::from("Ana").into()),
            lang_tag: Some(String::from("fi").into()),
            ..Default::default()
        },
        &bearer(&ana),
    ))
    .await
    .expect("updated");
    let account = grpc
        .get_account(with_auth(Empty {}, &bearer(&ana)))
        .await
        .expect("the account")
        .into_inner();
    assert_eq!(
        account.user.as_ref().map(|u| u.display_name.as_str()),
        Some("Ana")
    );
    let rest_account = rest(&server, reqwest::Method::GET, "/v2/account", &ana, None).await;
    same("GetAccount", as_json(&account), rest_account, &[]);
    let users = grpc
        .get_users(with_auth(
            api::GetUsersRequest {
                ids: vec![bo_id.clone()],
                ..Default::default()
            },
            &bearer(&ana),
        ))
        .await
        .expect("users")
        .into_inner();
    let rest_users = rest(
        &server,
        reqwest::Method::GET,
        &format!("/v2/user?ids={bo_id}"),
        &ana,
        None,
    )
    .await;
    same("GetUsers", as_json(&users), rest_users, &[]);

    // Storage: write, read, list, delete.
    let acks = grpc
        .write_storage_objects(with_auth(
            api::WriteStorageObjectsRequest {
                objects: vec![api::WriteStorageObject {
                    collection: "saves".into(),
                    key: "slot1".into(),
                    value: r#"{"level":3}"#.into(),
                    permission_read: Some(2.into()),
                    permission_write: Some(1.into()),
                    version: String::new(),
                }],
            },
            &bearer(&ana),
        ))
        .await
        .expect("written")
        .into_inner();
    assert_eq!(acks.acks.len(), 1);
    let ana_id = acks.acks[0].user_id.clone();
    let read = grpc
        .read_storage_objects(with_auth(
            api::ReadStorageObjectsRequest {
                object_ids: vec![api::ReadStorageObjectId {
                    collection: "saves".into(),
                    key: "slot1".into(),
                    user_id: ana_id.clone(),
                }],
            },
            &bearer(&bo),
        ))
        .await
        .expect("read")
        .into_inner();
    assert_eq!(read.objects.len(), 1, "public read");
    let rest_read = rest(
        &server,
        reqwest::Method::POST,
        "/v2/storage",
        &bo,
        Some(json!({"object_ids": [{"collection": "saves", "key": "slot1", "user_id": ana_id}]})),
    )
    .await;
    same("ReadStorageObjects", as_json(&read), rest_read, &[]);
    let listed = grpc
        .list_storage_objects(with_auth(
            api::ListStorageObjectsRequest {
                collection: "saves".into(),
                user_id: ana_id.clone(),
                limit: Some(10.into()),
                cursor: String::new(),
            },
            &bearer(&ana),
        ))
        .await
        .expect("listed")
        .into_inner();
    let rest_listed = rest(
        &server,
        reqwest::Method::GET,
        &format!("/v2/storage/saves/{ana_id}?limit=10"),
        &ana,
        None,
    )
    .await;
    same("ListStorageObjects", as_json(&listed), rest_listed, &[]);
    grpc.delete_storage_objects(with_auth(
        api::DeleteStorageObjectsRequest {
            object_ids: vec![api::DeleteStorageObjectId {
                collection: "saves".into(),
                key: "slot1".into(),
                version: String::new(),
            }],
        },
        &bearer(&ana),
    ))
    .await
    .expect("deleted");
    let after = rest(
        &server,
        reqwest::Method::GET,
        &format!("/v2/storage/saves/{ana_id}?limit=10"),
        &ana,
        None,
    )
    .await;
    assert_eq!(
        after["objects"].as_array().map_or(0, Vec::len),
        0,
        "{after}"
    );

    // Leaderboards: write, list, around an owner.
    let record = grpc
        .write_leaderboard_record(with_auth(
            api::WriteLeaderboardRecordRequest {
                leaderboard_id: "grpc-board".into(),
                record: Some(
                    api::write_leaderboard_record_request::LeaderboardRecordWrite {
                        score: 42,
                        subscore: 7,
                        metadata: r#"{"k":1}"#.into(),
                        operator: 0,
                    },
                ),
            },
            &bearer(&ana),
        ))
        .await
        .expect("a record")
        .into_inner();
    assert_eq!((record.score, record.rank), (42, 1));
    grpc.write_leaderboard_record(with_auth(
        api::WriteLeaderboardRecordRequest {
            leaderboard_id: "grpc-board".into(),
            record: Some(
                api::write_leaderboard_record_request::LeaderboardRecordWrite {
                    score: 50,
                    ..Default::default()
                },
            ),
        },
        &bearer(&bo),
    ))
    .await
    .expect("a second record");
    let records = grpc
        .list_leaderboard_records(with_auth(
            api::ListLeaderboardRecordsRequest {
                leaderboard_id: "grpc-board".into(),
                owner_ids: vec![ana_id.clone()],
                limit: Some(10.into()),
                ..Default::default()
            },
            &bearer(&ana),
        ))
        .await
        .expect("records")
        .into_inner();
    assert_eq!(records.records.len(), 2);
    assert_eq!(records.owner_records.len(), 1);
    let rest_records = rest(
        &server,
        reqwest::Method::GET,
        &format!("/v2/leaderboard/grpc-board?owner_ids={ana_id}&limit=10"),
        &ana,
        None,
    )
    .await;
    same(
        "ListLeaderboardRecords",
        as_json(&records),
        rest_records,
        &[],
    );
    let around = grpc
        .list_leaderboard_records_around_owner(with_auth(
            api::ListLeaderboardRecordsAroundOwnerRequest {
                leaderboard_id: "grpc-board".into(),
                owner_id: ana_id.clone(),
                limit: Some(3.into()),
                ..Default::default()
            },
            &bearer(&ana),
        ))
        .await
        .expect("around")
        .into_inner();
    let rest_around = rest(
        &server,
        reqwest::Method::GET,
        &format!("/v2/leaderboard/grpc-board/owner/{ana_id}?limit=3"),
        &ana,
        None,
    )
    .await;
    same(
        "ListLeaderboardRecordsAroundOwner",
        as_json(&around),
        rest_around,
        &[],
    );

    // Friends: an invite over gRPC, accepted over gRPC, listed the same on both.
    grpc.add_friends(with_auth(
        api::AddFriendsRequest {
            ids: vec![bo_id.clone()],
            ..Default::default()
        },
        &bearer(&ana),
    ))
    .await
    .expect("invited");
    grpc.add_friends(with_auth(
        api::AddFriendsRequest {
            ids: vec![ana_id.clone()],
            ..Default::default()
        },
        &bearer(&bo),
    ))
    .await
    .expect("accepted");
    let friends = grpc
        .list_friends(with_auth(api::ListFriendsRequest::default(), &bearer(&ana)))
        .await
        .expect("friends")
        .into_inner();
    assert_eq!(friends.friends.len(), 1);
    assert_eq!(
        friends.friends[0].state.as_ref().map(|s| s.value),
        Some(0),
        "mutual friends"
    );
    let rest_friends = rest(&server, reqwest::Method::GET, "/v2/friend", &ana, None).await;
    same("ListFriends", as_json(&friends), rest_friends, &[]);

    // Groups: created and joined over gRPC, listed the same on both.
    let group = grpc
        .create_group(with_auth(
            api::CreateGroupRequest {
                name: "grpc guild".into(),
                open: true,
                max_count: 10,
                ..Default::default()
            },
            &bearer(&ana),
        ))
        .await
        .expect("a group")
        .into_inner();
    grpc.join_group(with_auth(
        api::JoinGroupRequest {
            group_id: group.id.clone(),
        },
        &bearer(&bo),
    ))
    .await
    .expect("joined");
    let members = grpc
        .list_group_users(with_auth(
            api::ListGroupUsersRequest {
                group_id: group.id.clone(),
                ..Default::default()
            },
            &bearer(&ana),
        ))
        .await
        .expect("members")
        .into_inner();
    assert_eq!(members.group_users.len(), 2);
    let rest_members = rest(
        &server,
        reqwest::Method::GET,
        &format!("/v2/group/{}/user", group.id),
        &ana,
        None,
    )
    .await;
    same("ListGroupUsers", as_json(&members), rest_members, &[]);

    // Notifications: the friend invite's, listed the same on both.
    let notifications = grpc
        .list_notifications(with_auth(
            api::ListNotificationsRequest {
                limit: Some(10.into()),
                ..Default::default()
            },
            &bearer(&bo),
        ))
        .await
        .expect("notifications")
        .into_inner();
    assert!(
        !notifications.notifications.is_empty(),
        "the invite's notification"
    );
    let rest_notifications = rest(
        &server,
        reqwest::Method::GET,
        "/v2/notification?limit=10",
        &bo,
        None,
    )
    .await;
    same(
        "ListNotifications",
        as_json(&notifications),
        rest_notifications,
        &["cacheable_cursor"],
    );

    // RPC: with a session, then server to server with the HTTP key.
    let answer = grpc
        .rpc_func(with_auth(
            api::Rpc {
                id: "echo".into(),
                payload: r#"{"x":1}"#.into(),
                http_key: String::new(),
            },
            &bearer(&ana),
        ))
        .await
        .expect("an answer")
        .into_inner();
    let echoed: Value = serde_json::from_str(&answer.payload).expect("JSON");
    assert_eq!(echoed, json!({"payload": r#"{"x":1}"#, "caller": ana_id}));
    let keyed = grpc
        .rpc_func(Request::new(api::Rpc {
            id: "echo".into(),
            payload: "server".into(),
            http_key: "defaulthttpkey".into(),
        }))
        .await
        .expect("an answer with the HTTP key")
        .into_inner();
    let echoed: Value = serde_json::from_str(&keyed.payload).expect("JSON");
    assert_eq!(echoed, json!({"payload": "server", "caller": ""}));

    // The calls counted as gRPC calls.
    let counted = support::metric(
        &server,
        r#"muster_api_call_duration_seconds_count{call="WriteStorageObjects",code="OK",transport="grpc"}"#,
    )
    .await;
    assert_eq!(counted, 1.0);
    // And the session refresh and logout.
    let refreshed = grpc
        .session_refresh(with_auth(
            api::SessionRefreshRequest {
                token: device.refresh_token.clone(),
                ..Default::default()
            },
            &server_key(),
        ))
        .await
        .expect("refreshed")
        .into_inner();
    assert!(!refreshed.token.is_empty());
    grpc.session_logout(with_auth(
        api::SessionLogoutRequest {
            token: refreshed.token.clone(),
            refresh_token: refreshed.refresh_token.clone(),
        },
        &bearer(&refreshed.token),
    ))
    .await
    .expect("logged out");
    let gone = grpc
        .get_account(with_auth(Empty {}, &bearer(&refreshed.token)))
        .await
        .expect_err("a logged-out token");
    assert_eq!(gone.code(), Code::Unauthenticated);
}

async fn authentication_and_errors_are_nakamas(backend: Backend) {
    let (_db, server) = server(backend).await;
    let mut grpc = client(&server).await;
    let device = |id: &str| api::AuthenticateDeviceRequest {
        account: Some(api::AccountDevice {
            id: id.into(),
            ..Default::default()
        }),
        create: Some(true.into()),
        username: String::new(),
    };
    // No server key, a wrong one.
    let missing = grpc
        .authenticate_device(Request::new(device("grpc-device-000002")))
        .await
        .expect_err("no server key");
    assert_eq!(missing.code(), Code::Unauthenticated, "{missing:?}");
    let wrong = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("wrongkey:")
    );
    let refused = grpc
        .authenticate_device(with_auth(device("grpc-device-000002"), &wrong))
        .await
        .expect_err("a wrong server key");
    assert_eq!(refused.code(), Code::Unauthenticated);
    // A device id too short: Nakama's message and code.
    let short = grpc
        .authenticate_device(with_auth(device("short"), &server_key()))
        .await
        .expect_err("too short");
    assert_eq!(short.code(), Code::InvalidArgument);
    assert!(short.message().contains("Device ID"), "{}", short.message());
    // A bad token, a missing one.
    let bad = grpc
        .get_account(with_auth(Empty {}, "Bearer not-a-token"))
        .await
        .expect_err("a bad token");
    assert_eq!(bad.code(), Code::Unauthenticated);
    let none = grpc
        .get_account(Request::new(Empty {}))
        .await
        .expect_err("no token");
    assert_eq!(none.code(), Code::Unauthenticated);
    // Nakama's NOT_FOUND for an unknown leaderboard, the same message as over REST.
    let session = grpc
        .authenticate_device(with_auth(device("grpc-device-000003"), &server_key()))
        .await
        .expect("a session")
        .into_inner();
    let unknown = grpc
        .list_leaderboard_records(with_auth(
            api::ListLeaderboardRecordsRequest {
                leaderboard_id: "no-such-board".into(),
                ..Default::default()
            },
            &bearer(&session.token),
        ))
        .await
        .expect_err("no such board");
    let (status, body) = server
        .get_with_token("/v2/leaderboard/no-such-board", &session.token)
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(unknown.code(), Code::NotFound);
    assert_eq!(
        unknown.message(),
        body["message"].as_str().unwrap_or_default()
    );
    // A path field left empty.
    let empty = grpc
        .join_group(with_auth(
            api::JoinGroupRequest::default(),
            &bearer(&session.token),
        ))
        .await
        .expect_err("no group id");
    assert_eq!(empty.code(), Code::InvalidArgument);
    // A call Nakama has and Muster does not serve: UNIMPLEMENTED, naming it.
    let mut raw = tonic::client::Grpc::new(
        Channel::from_shared(format!("http://{}", server.grpc_addr.expect("gRPC")))
            .expect("a URI")
            .connect()
            .await
            .expect("connects"),
    );
    raw.ready().await.expect("ready");
    let unserved: Result<tonic::Response<Empty>, tonic::Status> = raw
        .unary(
            with_auth(Empty {}, &bearer(&session.token)),
            "/nakama.api.Nakama/ValidatePurchaseSamsung"
                .parse()
                .expect("a path"),
            tonic_prost::ProstCodec::default(),
        )
        .await;
    let unserved = unserved.expect_err("not served");
    assert_eq!(unserved.code(), Code::Unimplemented);
    assert!(
        unserved.message().contains("ValidatePurchaseSamsung"),
        "{}",
        unserved.message()
    );
    // Health.
    let mut health = tonic_health::pb::health_client::HealthClient::new(raw_channel(&server).await);
    let serving = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "nakama.api.Nakama".into(),
        })
        .await
        .expect("health answers")
        .into_inner();
    assert_eq!(
        serving.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
}

async fn raw_channel(server: &TestServer) -> Channel {
    Channel::from_shared(format!("http://{}", server.grpc_addr.expect("gRPC")))
        .expect("a URI")
        .connect()
        .await
        .expect("connects")
}

async fn limits_hold_for_grpc_clients(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.limits.max_request_size_bytes = 4096;
    config.limits.request_timeout_ms = 1_000;
    let server = TestServer::start(config).await;
    let mut grpc = client(&server).await;
    let session = grpc
        .authenticate_custom(with_auth(
            api::AuthenticateCustomRequest {
                account: Some(api::AccountCustom {
                    id: "grpc-limits".into(),
                    ..Default::default()
                }),
                create: Some(true.into()),
                username: String::new(),
            },
            &server_key(),
        ))
        .await
        .expect("a session")
        .into_inner();
    // A message over limits.max_request_size_bytes is refused before it is read into a call.
    let oversized = grpc
        .write_storage_objects(with_auth(
            api::WriteStorageObjectsRequest {
                objects: vec![api::WriteStorageObject {
                    collection: "big".into(),
                    key: "k".into(),
                    value: format!(r#"{{"v":"{}"}}"#, "x".repeat(8192)),
                    ..Default::default()
                }],
            },
            &bearer(&session.token),
        ))
        .await
        .expect_err("too large");
    assert_eq!(oversized.code(), Code::ResourceExhausted, "{oversized:?}");
    let listed = server
        .get_with_token("/v2/storage/big", &session.token)
        .await;
    assert_eq!(
        listed.1["objects"].as_array().map_or(0, Vec::len),
        0,
        "nothing written"
    );
    // A client that sends its message too slowly is cut off at limits.request_timeout_ms.
    let addr = server.grpc_addr.expect("gRPC");
    let started = std::time::Instant::now();
    let slow = slow_call(addr, &session.token).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the slow call ended after {:?}",
        started.elapsed()
    );
    assert!(
        matches!(slow.as_deref(), Some("1") | Some("4")),
        "a slow client's call is cancelled or past its deadline: grpc-status {slow:?}"
    );
}

/// A `GetAccount` whose message's bytes never arrive (the stream stays open): the server's
/// answer's `grpc-status`, or `None` when it closed the stream without one.
async fn slow_call(addr: std::net::SocketAddr, token: &str) -> Option<String> {
    use http_body_util::BodyExt as _;
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("an HTTP/2 connection");
    tokio::spawn(connection);
    // A body whose bytes never come (its sender is held, not used, until the call ends).
    let (_body_sender, frames) = tokio::sync::mpsc::channel::<
        Result<http_body::Frame<bytes::Bytes>, std::convert::Infallible>,
    >(1);
    let body = http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(frames));
    let request = http::Request::post("/nakama.api.Nakama/GetAccount")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {token}"))
        .body(body)
        .expect("a request");
    let response = sender
        .send_request(request)
        .await
        .expect("an answer's head");
    if let Some(status) = response.headers().get("grpc-status") {
        return status.to_str().ok().map(str::to_owned);
    }
    let collected = response.into_body().collect().await.ok()?;
    collected
        .trailers()
        .and_then(|t| t.get("grpc-status"))
        .and_then(|s| s.to_str().ok())
        .map(str::to_owned)
}
