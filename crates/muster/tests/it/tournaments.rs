//! Tournaments over Nakama's REST routes, on SQLite and PostgreSQL, on the manual clock: the
//! listing (categories, window, `can_enter`, size), joining, the window scores are taken in,
//! `join_required`, `max_size` and `max_num_score`, resets with the previous period readable,
//! and bad input refused with nothing changed.

use crate::support;

use std::time::Duration;

use muster::leaderboards::tournament::NewTournament;
use serde_json::{json, Value};
use support::{assert_error, Backend, Database, TestServer};

on_both_backends!(
    a_tournament_takes_scores_only_in_its_window_and_within_its_bounds,
    a_resetting_tournament_opens_a_new_period_each_time,
    tournaments_are_listed_by_category_and_time,
    racing_joins_fill_a_tournament_exactly,
);

async fn start(db: &Database, tournaments: Vec<NewTournament>) -> TestServer {
    let mut config = db.config();
    config.leaderboards.tournaments = tournaments;
    // The tests move the clock by hours: sessions must outlive that.
    config.session.token_expiry_sec = 30 * 24 * 3600;
    TestServer::start(config).await
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

async fn post(server: &TestServer, token: &str, path: &str, body: Value) -> (u16, Value) {
    let response = server
        .http
        .post(server.url(path))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("request");
    support::status_and_json(response).await
}

async fn players(server: &TestServer, tag: &str, n: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in 0..n {
        let (token, _) = server.device_session(&format!("tour-{tag}-{i:06}")).await;
        let uid = support::claims(&token)["uid"]
            .as_str()
            .expect("uid")
            .to_owned();
        out.push((token, uid));
    }
    out
}

fn listed<'a>(list: &'a Value, id: &str) -> Option<&'a Value> {
    list["tournaments"]
        .as_array()?
        .iter()
        .find(|t| t["id"] == id)
}

fn scores(list: &Value) -> Vec<(String, i64, i64)> {
    list["records"]
        .as_array()
        .map(|records| {
            records
                .iter()
                .map(|r| {
                    (
                        r["owner_id"].as_str().unwrap_or_default().to_owned(),
                        r["score"]
                            .as_str()
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(0),
                        r["rank"].as_str().and_then(|s| s.parse().ok()).unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn a_tournament_takes_scores_only_in_its_window_and_within_its_bounds(backend: Backend) {
    let db = Database::new(backend).await;
    let start_time = now_secs() + 3600;
    let server = start(
        &db,
        vec![NewTournament {
            id: "cup".into(),
            title: "The Cup".into(),
            category: 3,
            start_time,
            duration: 600,
            max_size: 2,
            max_num_score: 2,
            join_required: true,
            ..Default::default()
        }],
    )
    .await;
    let p = players(&server, "cup", 3).await;

    // Listed before it starts, closed for now.
    let (status, list) = server.get_with_token("/v2/tournament", &p[0].0).await;
    assert_eq!(status, 200, "{list}");
    let cup = listed(&list, "cup").expect("listed").clone();
    assert_eq!(cup["title"], "The Cup");
    assert_eq!(cup["category"], 3);
    assert!(cup.get("can_enter").is_none(), "not open yet: {cup}");
    assert_eq!(cup["start_active"], start_time);
    assert_eq!(cup["end_active"], start_time + 600);
    assert_eq!(cup["max_size"], 2);
    assert_eq!(cup["join_required"], true);

    // Joining is open until the window closes; scoring only inside it.
    for (token, _) in &p[..2] {
        let (status, body) = post(&server, token, "/v2/tournament/cup/join", json!({})).await;
        assert_eq!(status, 200, "{body}");
    }
    let early = post(&server, &p[0].0, "/v2/tournament/cup", json!({"score": 5})).await;
    assert_eq!(
        assert_error(&early, 400, 9),
        "Tournament is not active and cannot accept new scores."
    );
    let full = post(&server, &p[2].0, "/v2/tournament/cup/join", json!({})).await;
    assert_eq!(
        assert_error(&full, 400, 3),
        "Tournament cannot be joined as it has reached its max size."
    );

    server.clock.advance(Duration::from_secs(3600 + 60));
    let (_, list) = server.get_with_token("/v2/tournament", &p[0].0).await;
    assert_eq!(listed(&list, "cup").expect("listed")["size"], 2);
    let unjoined = post(&server, &p[2].0, "/v2/tournament/cup", json!({"score": 50})).await;
    assert_eq!(
        assert_error(&unjoined, 400, 9),
        "Must join tournament before attempting to write value."
    );
    let (status, first) = post(&server, &p[0].0, "/v2/tournament/cup", json!({"score": 10})).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["num_score"], 1);
    assert_eq!(first["max_num_score"], 2);
    let (_, second) = post(&server, &p[0].0, "/v2/tournament/cup", json!({"score": 7})).await;
    assert_eq!(
        (second["score"].as_str(), second["num_score"].as_i64()),
        (Some("10"), Some(2))
    );
    let third = post(&server, &p[0].0, "/v2/tournament/cup", json!({"score": 99})).await;
    assert_eq!(
        assert_error(&third, 400, 9),
        "Reached allowed max number of score attempts."
    );
    post(&server, &p[1].0, "/v2/tournament/cup", json!({"score": 30})).await;
    let (status, records) = server
        .get_with_token("/v2/tournament/cup?limit=10", &p[2].0)
        .await;
    assert_eq!(status, 200, "{records}");
    assert_eq!(
        scores(&records),
        vec![(p[1].1.clone(), 30, 1), (p[0].1.clone(), 10, 2)]
    );
    let (_, around) = server
        .get_with_token(
            &format!("/v2/tournament/cup/owner/{}?limit=1", p[0].1),
            &p[2].0,
        )
        .await;
    assert_eq!(scores(&around), vec![(p[0].1.clone(), 10, 2)]);

    // After the window: closed again.
    server.clock.advance(Duration::from_secs(600));
    let late = post(&server, &p[1].0, "/v2/tournament/cup", json!({"score": 31})).await;
    assert_error(&late, 400, 9);
    let unknown = post(&server, &p[1].0, "/v2/tournament/nope", json!({"score": 1})).await;
    assert_eq!(assert_error(&unknown, 404, 5), "Tournament not found.");
    let bad = post(
        &server,
        &p[1].0,
        "/v2/tournament/cup",
        json!({"score": 1, "metadata": "[]"}),
    )
    .await;
    assert_error(&bad, 400, 3);
}

async fn a_resetting_tournament_opens_a_new_period_each_time(backend: Backend) {
    let db = Database::new(backend).await;
    let server = start(
        &db,
        vec![NewTournament {
            id: "hourly".into(),
            reset_schedule: "0 * * * *".into(),
            duration: 1800,
            operator: "incr".into(),
            ..Default::default()
        }],
    )
    .await;
    let p = players(&server, "hourly", 1).await;
    // To a minute past the next hour: inside the first half-hour, open.
    let now = server.clock.now_secs();
    let into_hour = now.rem_euclid(3600);
    server
        .clock
        .advance(Duration::from_secs((3600 - into_hour + 60) as u64));
    let (status, first) = post(
        &server,
        &p[0].0,
        "/v2/tournament/hourly",
        json!({"score": 4}),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    post(
        &server,
        &p[0].0,
        "/v2/tournament/hourly",
        json!({"score": 4}),
    )
    .await;
    let expiry = first["expiry_time"].as_str().expect("expiry").to_owned();
    // Half an hour in: closed until the next reset.
    server.clock.advance(Duration::from_secs(1800));
    let closed = post(
        &server,
        &p[0].0,
        "/v2/tournament/hourly",
        json!({"score": 1}),
    )
    .await;
    assert_error(&closed, 400, 9);
    // The next hour: a new period, empty; the last one readable by its expiry.
    server.clock.advance(Duration::from_secs(1800));
    let (_, now_list) = server
        .get_with_token("/v2/tournament/hourly?limit=10", &p[0].0)
        .await;
    assert!(scores(&now_list).is_empty(), "{now_list}");
    let (status, fresh) = post(
        &server,
        &p[0].0,
        "/v2/tournament/hourly",
        json!({"score": 1}),
    )
    .await;
    assert_eq!(status, 200, "{fresh}");
    assert_eq!(fresh["score"], "1");
    assert_ne!(fresh["expiry_time"], expiry.as_str());
    let end = time::OffsetDateTime::parse(&expiry, &time::format_description::well_known::Rfc3339)
        .expect("RFC 3339")
        .unix_timestamp();
    let (_, last) = server
        .get_with_token(
            &format!("/v2/tournament/hourly?limit=10&expiry={end}"),
            &p[0].0,
        )
        .await;
    assert_eq!(scores(&last), vec![(p[0].1.clone(), 8, 1)]);
}

async fn tournaments_are_listed_by_category_and_time(backend: Backend) {
    let db = Database::new(backend).await;
    let now = now_secs();
    let spec = |id: &str, category: i32, end_time: i64| NewTournament {
        id: id.into(),
        category,
        start_time: now - 60,
        end_time,
        duration: 300,
        ..Default::default()
    };
    let server = start(
        &db,
        vec![
            spec("a", 1, 0),
            spec("b", 2, now + 3600),
            spec("c", 2, 0),
            spec("d", 9, now + 7200),
        ],
    )
    .await;
    let p = players(&server, "list", 1).await;
    let ids = |list: &Value| -> Vec<String> {
        list["tournaments"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["id"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (_, all) = server.get_with_token("/v2/tournament", &p[0].0).await;
    assert_eq!(ids(&all), ["a", "b", "c", "d"]);
    assert_eq!(listed(&all, "a").expect("a")["can_enter"], true);
    let (_, two) = server
        .get_with_token("/v2/tournament?category_start=2&category_end=2", &p[0].0)
        .await;
    assert_eq!(ids(&two), ["b", "c"]);
    let (_, endless) = server
        .get_with_token("/v2/tournament?end_time=0", &p[0].0)
        .await;
    assert_eq!(ids(&endless), ["a", "c"]);
    // Pages of two.
    let (_, page) = server
        .get_with_token("/v2/tournament?limit=2", &p[0].0)
        .await;
    assert_eq!(ids(&page), ["a", "b"]);
    let cursor = page["cursor"].as_str().expect("cursor");
    let (_, rest) = server
        .get_with_token(&format!("/v2/tournament?limit=2&cursor={cursor}"), &p[0].0)
        .await;
    assert_eq!(ids(&rest), ["c", "d"]);
    assert!(rest.get("cursor").is_none(), "{rest}");
    // After "b" ends, it is no longer listed by default.
    server.clock.advance(Duration::from_secs(3700));
    let (_, later) = server.get_with_token("/v2/tournament", &p[0].0).await;
    assert_eq!(ids(&later), ["a", "c", "d"]);
    for bad in [
        "category_end=128",
        "category_start=5&category_end=2",
        "limit=0",
        "limit=101",
        "cursor=nope!",
    ] {
        let answer = server
            .get_with_token(&format!("/v2/tournament?{bad}"), &p[0].0)
            .await;
        assert_error(&answer, 400, 3);
    }
}

async fn racing_joins_fill_a_tournament_exactly(backend: Backend) {
    let db = Database::new(backend).await;
    let server = start(
        &db,
        vec![NewTournament {
            id: "small".into(),
            duration: 3600,
            max_size: 3,
            join_required: true,
            ..Default::default()
        }],
    )
    .await;
    let p = players(&server, "race", 10).await;
    let joins = p.iter().map(|(token, _)| {
        let server = &server;
        async move { post(server, token, "/v2/tournament/small/join", json!({})).await }
    });
    let answers = futures_util::future::join_all(joins).await;
    let joined = answers.iter().filter(|(status, _)| *status == 200).count();
    assert_eq!(joined, 3, "{answers:?}");
    for refused in answers.iter().filter(|(status, _)| *status != 200) {
        assert_error(refused, 400, 3);
    }
    let (_, list) = server.get_with_token("/v2/tournament", &p[0].0).await;
    assert_eq!(listed(&list, "small").expect("listed")["size"], 3);
}
