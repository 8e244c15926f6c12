//! Leaderboards over Nakama's REST routes, on SQLite and PostgreSQL: every operator and both
//! sort orders with their ranks, authoritative boards, boards made by server code, listings with
//! owner records and cursors both ways, records around an owner, resets at the cron boundary
//! (on the manual clock, an hourly schedule) with the previous period still readable, deletes, and bad input
//! refused with nothing changed.

use crate::support;

use std::time::Duration;

use muster::functions::{Call, Functions, RpcError, ServerFunction};
use muster::leaderboards::{Caller, NewLeaderboard, Submission};
use serde_json::{json, Value};
use support::{assert_error, Backend, Database, TestServer};
use uuid::Uuid;

on_both_backends!(
    operators_and_sort_orders_rank_records,
    authoritative_boards_take_only_server_writes,
    listings_page_both_ways_with_owner_records,
    records_around_an_owner,
    a_reset_starts_a_new_period_and_keeps_the_last,
    deleting_a_record_moves_the_others_up,
    bad_input_is_refused_and_changes_nothing,
);

fn board(id: &str, sort_order: &str, operator: &str) -> NewLeaderboard {
    NewLeaderboard {
        id: id.into(),
        sort_order: sort_order.into(),
        operator: operator.into(),
        ..Default::default()
    }
}

/// `lb_admin`: as the server, creates the leaderboard of `create` if given, then writes
/// `score` for `owner` on `write` if given.
struct Admin;

#[async_trait::async_trait]
impl ServerFunction for Admin {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let request: Value = call.json()?;
        let mut created = false;
        if let Some(id) = request["create"].as_str() {
            created = call
                .leaderboards
                .create(NewLeaderboard {
                    id: id.into(),
                    authoritative: request["authoritative"].as_bool().unwrap_or(false),
                    sort_order: request["sort_order"].as_str().unwrap_or("desc").into(),
                    operator: request["operator"].as_str().unwrap_or("best").into(),
                    reset_schedule: String::new(),
                    metadata: String::new(),
                })
                .await?;
        }
        let mut rank = 0;
        if let Some(id) = request["write"].as_str() {
            let owner: Uuid = request["owner"]
                .as_str()
                .and_then(|o| o.parse().ok())
                .ok_or_else(|| RpcError::invalid("owner"))?;
            let submission = Submission {
                owner,
                score: request["score"].as_i64().unwrap_or(0),
                ..Submission::default()
            };
            let record = call
                .leaderboards
                .write(Caller::Server, id, submission)
                .await?;
            rank = record.rank;
        }
        Ok(json!({ "created": created, "rank": rank }).to_string())
    }
}

async fn start(db: &Database, boards: Vec<NewLeaderboard>) -> TestServer {
    let mut config = db.config();
    config.leaderboards.boards = boards;
    let mut functions = Functions::new();
    functions.register("lb_admin", Admin).expect("id");
    TestServer::start_with(config, functions).await
}

async fn admin(server: &TestServer, request: Value) -> (u16, Value) {
    let response = server
        .http
        .post(server.url("/v2/rpc/lb_admin?http_key=defaulthttpkey"))
        .json(&Value::String(request.to_string()))
        .send()
        .await
        .expect("request");
    support::status_and_json(response).await
}

async fn submit(server: &TestServer, token: &str, id: &str, body: Value) -> (u16, Value) {
    let response = server
        .http
        .post(server.url(&format!("/v2/leaderboard/{id}")))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("request");
    support::status_and_json(response).await
}

async fn get(server: &TestServer, token: &str, path: &str) -> (u16, Value) {
    server.get_with_token(path, token).await
}

/// `n` players, each with a session: (token, user id).
async fn players(server: &TestServer, tag: &str, n: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in 0..n {
        let (token, _) = server.device_session(&format!("lb-{tag}-{i:06}")).await;
        let uid = support::claims(&token)["uid"]
            .as_str()
            .expect("uid")
            .to_owned();
        out.push((token, uid));
    }
    out
}

fn score(record: &Value) -> i64 {
    record["score"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("score as a string")
}

fn rank(record: &Value) -> i64 {
    record["rank"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// (owner, score, rank) of a listing's records.
fn ranked(list: &Value, key: &str) -> Vec<(String, i64, i64)> {
    list[key]
        .as_array()
        .map(|records| {
            records
                .iter()
                .map(|r| {
                    (
                        r["owner_id"].as_str().unwrap_or_default().to_owned(),
                        score(r),
                        rank(r),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn operators_and_sort_orders_rank_records(backend: Backend) {
    let db = Database::new(backend).await;
    let server = start(
        &db,
        vec![
            board("high", "desc", "best"),
            board("fast", "asc", "best"),
            board("last", "desc", "set"),
            board("total", "desc", "incr"),
            board("lives", "desc", "decr"),
        ],
    )
    .await;
    let p = players(&server, "ops", 3).await;

    // Best, descending: higher is better; a worse score changes nothing (num_score stays).
    for ((token, _), s) in p.iter().zip([50, 70, 60]) {
        let (status, body) = submit(&server, token, "high", json!({"score": s})).await;
        assert_eq!(status, 200, "{body}");
    }
    let (_, worse) = submit(&server, &p[1].0, "high", json!({"score": "10"})).await;
    assert_eq!(
        (score(&worse), rank(&worse), worse["num_score"].as_i64()),
        (70, 1, Some(1))
    );
    let (_, better) = submit(
        &server,
        &p[0].0,
        "high",
        json!({"score": 90, "metadata": "{\"map\":\"ice\"}"}),
    )
    .await;
    assert_eq!(
        (score(&better), rank(&better), better["num_score"].as_i64()),
        (90, 1, Some(2))
    );
    assert_eq!(better["metadata"], "{\"map\":\"ice\"}");
    assert_eq!(better["leaderboard_id"], "high");
    assert!(
        better["username"].as_str().is_some_and(|u| !u.is_empty()),
        "{better}"
    );
    assert!(
        better.get("expiry_time").is_none(),
        "never resets: {better}"
    );
    let (status, list) = get(&server, &p[0].0, "/v2/leaderboard/high?limit=10").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(
        ranked(&list, "records"),
        vec![
            (p[0].1.clone(), 90, 1),
            (p[1].1.clone(), 70, 2),
            (p[2].1.clone(), 60, 3)
        ]
    );
    assert_eq!(list["rank_count"], "3");

    // Best, ascending: lower is better (a lap time).
    for ((token, _), s) in p.iter().zip([31, 29, 30]) {
        submit(&server, token, "fast", json!({"score": s})).await;
    }
    let (_, slower) = submit(&server, &p[1].0, "fast", json!({"score": 40})).await;
    assert_eq!((score(&slower), rank(&slower)), (29, 1));
    let (_, list) = get(&server, &p[0].0, "/v2/leaderboard/fast?limit=10").await;
    assert_eq!(
        ranked(&list, "records"),
        vec![
            (p[1].1.clone(), 29, 1),
            (p[2].1.clone(), 30, 2),
            (p[0].1.clone(), 31, 3)
        ]
    );

    // Set replaces, increment adds, decrement subtracts down to zero.
    submit(&server, &p[0].0, "last", json!({"score": 80})).await;
    let (_, set) = submit(&server, &p[0].0, "last", json!({"score": 20})).await;
    assert_eq!(score(&set), 20);
    submit(&server, &p[0].0, "total", json!({"score": 5})).await;
    let (_, total) = submit(
        &server,
        &p[0].0,
        "total",
        json!({"score": 7, "subscore": 2}),
    )
    .await;
    assert_eq!((score(&total), total["subscore"].as_str()), (12, Some("2")));
    let (_, first) = submit(&server, &p[0].0, "lives", json!({"score": 3})).await;
    assert_eq!(
        score(&first),
        0,
        "a new record decremented starts at zero: {first}"
    );
    submit(&server, &p[1].0, "total", json!({"score": 3})).await;
    // An operator named by the write overrides the board's: set 10 on "total", then decrement.
    let (_, over) = submit(
        &server,
        &p[1].0,
        "total",
        json!({"score": 10, "operator": "SET"}),
    )
    .await;
    assert_eq!(score(&over), 10);
    let (_, down) = submit(
        &server,
        &p[1].0,
        "total",
        json!({"score": 25, "operator": 4}),
    )
    .await;
    assert_eq!(score(&down), 0);
}

async fn authoritative_boards_take_only_server_writes(backend: Backend) {
    let db = Database::new(backend).await;
    let server = start(
        &db,
        vec![NewLeaderboard {
            authoritative: true,
            ..board("ranked", "desc", "best")
        }],
    )
    .await;
    let p = players(&server, "auth", 1).await;
    let refused = submit(&server, &p[0].0, "ranked", json!({"score": 1000})).await;
    assert_eq!(
        assert_error(&refused, 403, 7),
        "Leaderboard only allows authoritative score submissions."
    );
    let response = server
        .http
        .delete(server.url("/v2/leaderboard/ranked"))
        .bearer_auth(&p[0].0)
        .send()
        .await
        .expect("request");
    let refused = support::status_and_json(response).await;
    assert_error(&refused, 403, 7);
    // The server writes; the player reads their record.
    let (status, body) = admin(
        &server,
        json!({"write": "ranked", "owner": p[0].1, "score": 42}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (_, list) = get(
        &server,
        &p[0].0,
        &format!("/v2/leaderboard/ranked?owner_ids={}", p[0].1),
    )
    .await;
    assert_eq!(
        ranked(&list, "owner_records"),
        vec![(p[0].1.clone(), 42, 1)]
    );

    // A board made by server code, once; the second create changes nothing.
    let (_, made) = admin(&server, json!({"create": "season", "sort_order": "asc"})).await;
    assert_eq!(made["payload"], "{\"created\":true,\"rank\":0}");
    let (_, again) = admin(&server, json!({"create": "season", "sort_order": "desc"})).await;
    assert_eq!(again["payload"], "{\"created\":false,\"rank\":0}");
    submit(&server, &p[0].0, "season", json!({"score": 5})).await;
    let (_, lower) = submit(&server, &p[0].0, "season", json!({"score": 3})).await;
    assert_eq!(score(&lower), 3, "still ascending");
    let (status, _) = admin(&server, json!({"create": "bad", "operator": "double"})).await;
    assert_eq!(status, 400);
}

async fn listings_page_both_ways_with_owner_records(backend: Backend) {
    let db = Database::new(backend).await;
    let server = start(&db, vec![board("pages", "desc", "best")]).await;
    let p = players(&server, "pages", 7).await;
    for (i, (token, _)) in p.iter().enumerate() {
        submit(
            &server,
            token,
            "pages",
            json!({"score": 100 - i as i64 * 10}),
        )
        .await;
    }
    let viewer = &p[0].0;
    // Forward in pages of three: ranks 1-3, 4-6, 7.
    let (_, first) = get(&server, viewer, "/v2/leaderboard/pages?limit=3").await;
    assert_eq!(
        ranked(&first, "records")
            .iter()
            .map(|r| r.2)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(first.get("prev_cursor").is_none(), "{first}");
    let next = first["next_cursor"].as_str().expect("next");
    let (_, second) = get(
        &server,
        viewer,
        &format!("/v2/leaderboard/pages?limit=3&cursor={next}"),
    )
    .await;
    assert_eq!(
        ranked(&second, "records")
            .iter()
            .map(|r| r.2)
            .collect::<Vec<_>>(),
        [4, 5, 6]
    );
    let next = second["next_cursor"].as_str().expect("next");
    let (_, third) = get(
        &server,
        viewer,
        &format!("/v2/leaderboard/pages?limit=3&cursor={next}"),
    )
    .await;
    assert_eq!(
        ranked(&third, "records")
            .iter()
            .map(|r| r.2)
            .collect::<Vec<_>>(),
        [7]
    );
    assert!(third.get("next_cursor").is_none(), "{third}");
    // Back from the third page: ranks 4-6 again, then 1-3.
    let prev = third["prev_cursor"].as_str().expect("prev");
    let (_, back) = get(
        &server,
        viewer,
        &format!("/v2/leaderboard/pages?limit=3&cursor={prev}"),
    )
    .await;
    assert_eq!(ranked(&back, "records"), ranked(&second, "records"));
    let prev = back["prev_cursor"].as_str().expect("prev");
    let (_, top) = get(
        &server,
        viewer,
        &format!("/v2/leaderboard/pages?limit=3&cursor={prev}"),
    )
    .await;
    assert_eq!(ranked(&top, "records"), ranked(&first, "records"));
    assert!(top.get("prev_cursor").is_none(), "{top}");

    // Owner records come whatever the page, with their ranks.
    let path = format!(
        "/v2/leaderboard/pages?limit=1&owner_ids={}&owner_ids={}",
        p[6].1, p[3].1
    );
    let (_, owners) = get(&server, viewer, &path).await;
    let mut found = ranked(&owners, "owner_records");
    found.sort_by_key(|r| r.2);
    assert_eq!(
        found,
        vec![(p[3].1.clone(), 70, 4), (p[6].1.clone(), 40, 7)]
    );
    assert_eq!(owners["rank_count"], "7");

    // A cursor of another board, a forged one, or garbage: refused.
    let (status, _) = admin(&server, json!({"create": "other"})).await;
    assert_eq!(status, 200);
    let other = format!(
        "/v2/leaderboard/other?limit=3&cursor={}",
        first["next_cursor"].as_str().unwrap_or_default()
    );
    assert_eq!(
        assert_error(&get(&server, viewer, &other).await, 400, 3),
        "Cursor is invalid or expired."
    );
    assert_error(
        &get(&server, viewer, "/v2/leaderboard/pages?cursor=bm9wZQ").await,
        400,
        3,
    );
    for limit in ["0", "1001", "x"] {
        let path = format!("/v2/leaderboard/pages?limit={limit}");
        assert_error(&get(&server, viewer, &path).await, 400, 3);
    }
    let unknown = get(&server, viewer, "/v2/leaderboard/nope").await;
    assert_eq!(assert_error(&unknown, 404, 5), "Leaderboard not found.");
    assert_error(
        &get(&server, viewer, "/v2/leaderboard/pages?owner_ids=nope").await,
        400,
        3,
    );
}

async fn records_around_an_owner(backend: Backend) {
    let db = Database::new(backend).await;
    let server = start(
        &db,
        vec![
            board("around", "desc", "best"),
            board("laps", "asc", "best"),
        ],
    )
    .await;
    let p = players(&server, "around", 9).await;
    for (i, (token, _)) in p.iter().enumerate() {
        submit(&server, token, "around", json!({"score": 1000 - i as i64})).await;
        submit(&server, token, "laps", json!({"score": 100 + i as i64})).await;
    }
    let viewer = &p[0].0;
    let around =
        |owner: &str, limit: usize| format!("/v2/leaderboard/around/owner/{owner}?limit={limit}");
    let (status, mid) = get(&server, viewer, &around(&p[4].1, 3)).await;
    assert_eq!(status, 200, "{mid}");
    assert_eq!(
        ranked(&mid, "records")
            .iter()
            .map(|r| r.2)
            .collect::<Vec<_>>(),
        [4, 5, 6]
    );
    let (_, top) = get(&server, viewer, &around(&p[0].1, 3)).await;
    assert_eq!(
        ranked(&top, "records")
            .iter()
            .map(|r| r.2)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let (_, bottom) = get(&server, viewer, &around(&p[8].1, 4)).await;
    assert_eq!(
        ranked(&bottom, "records")
            .iter()
            .map(|r| r.2)
            .collect::<Vec<_>>(),
        [6, 7, 8, 9]
    );
    // On an ascending board the lowest score ranks first, and the window follows.
    let (_, laps) = get(
        &server,
        viewer,
        &format!("/v2/leaderboard/laps/owner/{}?limit=5", p[1].1),
    )
    .await;
    assert_eq!(
        ranked(&laps, "records")
            .iter()
            .map(|r| r.2)
            .collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    // Its cursors page on from there.
    let next = mid["next_cursor"].as_str().expect("next");
    let (_, after) = get(
        &server,
        viewer,
        &format!(
            "/v2/leaderboard/around/owner/{}?limit=3&cursor={next}",
            p[4].1
        ),
    )
    .await;
    assert_eq!(
        ranked(&after, "records")
            .iter()
            .map(|r| r.2)
            .collect::<Vec<_>>(),
        [7, 8, 9]
    );
    // No record: an empty page. Bad owner or limit: refused.
    let (_, stranger) = players(&server, "around-none", 1).await.remove(0);
    let (status, none) = get(&server, viewer, &around(&stranger, 3)).await;
    assert_eq!(status, 200);
    assert!(none.get("records").is_none(), "{none}");
    assert_eq!(
        assert_error(&get(&server, viewer, &around("nope", 3)).await, 400, 3),
        "Invalid owner ID provided."
    );
    assert_error(&get(&server, viewer, &around(&p[0].1, 101)).await, 400, 3);
}

async fn a_reset_starts_a_new_period_and_keeps_the_last(backend: Backend) {
    let db = Database::new(backend).await;
    let server = start(
        &db,
        vec![NewLeaderboard {
            reset_schedule: "0 * * * *".into(),
            ..board("daily", "desc", "incr")
        }],
    )
    .await;
    let p = players(&server, "daily", 2).await;
    let (_, mine) = submit(&server, &p[0].0, "daily", json!({"score": 5})).await;
    submit(&server, &p[0].0, "daily", json!({"score": 5})).await;
    submit(&server, &p[1].0, "daily", json!({"score": 3})).await;
    let expiry = mine["expiry_time"]
        .as_str()
        .expect("a period's end")
        .to_owned();
    let end = time::OffsetDateTime::parse(&expiry, &time::format_description::well_known::Rfc3339)
        .expect("RFC 3339");
    assert_eq!(
        (end.minute(), end.second()),
        (0, 0),
        "on the hour: {expiry}"
    );
    let (_, today) = get(&server, &p[0].0, "/v2/leaderboard/daily?limit=10").await;
    assert_eq!(
        ranked(&today, "records"),
        vec![(p[0].1.clone(), 10, 1), (p[1].1.clone(), 3, 2)]
    );

    // Past the hour: a new, empty period; writing starts a new record.
    server.clock.advance(Duration::from_secs(3600));
    let (_, tomorrow) = get(&server, &p[0].0, "/v2/leaderboard/daily?limit=10").await;
    assert!(tomorrow.get("records").is_none(), "{tomorrow}");
    let (_, fresh) = submit(&server, &p[1].0, "daily", json!({"score": 1})).await;
    assert_eq!(
        (score(&fresh), rank(&fresh), fresh["num_score"].as_i64()),
        (1, 1, Some(1))
    );
    assert_ne!(fresh["expiry_time"], expiry.as_str());
    // The last period stays readable by its expiry.
    let path = format!(
        "/v2/leaderboard/daily?limit=10&expiry={}",
        end.unix_timestamp()
    );
    let (_, yesterday) = get(&server, &p[0].0, &path).await;
    assert_eq!(ranked(&yesterday, "records"), ranked(&today, "records"));
}

async fn deleting_a_record_moves_the_others_up(backend: Backend) {
    let db = Database::new(backend).await;
    let server = start(&db, vec![board("del", "desc", "best")]).await;
    let p = players(&server, "del", 3).await;
    for ((token, _), s) in p.iter().zip([30, 20, 10]) {
        submit(&server, token, "del", json!({"score": s})).await;
    }
    let response = server
        .http
        .delete(server.url("/v2/leaderboard/del"))
        .bearer_auth(&p[0].0)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status().as_u16(), 200);
    let (_, list) = get(&server, &p[1].0, "/v2/leaderboard/del?limit=10").await;
    assert_eq!(
        ranked(&list, "records"),
        vec![(p[1].1.clone(), 20, 1), (p[2].1.clone(), 10, 2)]
    );
    assert_eq!(list["rank_count"], "2");
}

async fn bad_input_is_refused_and_changes_nothing(backend: Backend) {
    let db = Database::new(backend).await;
    let server = start(&db, vec![board("strict", "desc", "best")]).await;
    let p = players(&server, "bad", 1).await;
    let token = &p[0].0;
    let cases = [
        (json!({"score": 1, "metadata": "[1]"}), 400),
        (json!({"score": 1, "metadata": "{"}), 400),
        (json!({"score": "many"}), 400),
        (json!({"score": 1, "operator": 9}), 400),
        (json!({"score": 1, "operator": "TRIPLE"}), 400),
    ];
    for (body, status) in cases {
        let (got, answer) = submit(&server, token, "strict", body.clone()).await;
        assert_eq!(got, status, "{body}: {answer}");
    }
    let unknown = submit(&server, token, "missing", json!({"score": 1})).await;
    assert_eq!(assert_error(&unknown, 404, 5), "Leaderboard not found.");
    let (_, list) = get(&server, token, "/v2/leaderboard/strict?limit=10").await;
    assert!(list.get("records").is_none(), "{list}");
    let anonymous = server
        .http
        .get(server.url("/v2/leaderboard/strict"))
        .send()
        .await
        .expect("request");
    assert_eq!(anonymous.status().as_u16(), 401);
}
