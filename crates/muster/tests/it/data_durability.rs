//! Durability of storage objects and leaderboard records: a concurrent write load against the
//! real `muster` binary, `kill -9` in the middle of it, a restart, and then every acknowledged
//! storage write must be there with its value and version, and each player's leaderboard score
//! (increments of one) must count every acknowledged submission and no more than were sent. On
//! SQLite and on PostgreSQL.

use crate::support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use support::{free_port, muster_command, Backend, Binary, Database};

on_both_backends!(acknowledged_storage_and_leaderboard_writes_survive_kill_9);

const USERS: usize = 8;

async fn start(db: &Database) -> Binary {
    let mut command = muster_command(db);
    command.env(
        "MUSTER_LEADERBOARDS__BOARDS",
        r#"[{id="clicks", operator="incr"}]"#,
    );
    Binary::run(command, free_port()).await
}

/// What each player's writers did: storage keys acknowledged (with their versions), and
/// leaderboard submissions acknowledged and sent.
#[derive(Default)]
struct Tally {
    objects: BTreeMap<String, String>,
    scores_acked: u64,
    scores_sent: u64,
}

async fn acknowledged_storage_and_leaderboard_writes_survive_kill_9(backend: Backend) {
    let db = Database::new(backend).await;
    let running = start(&db).await;
    let http = reqwest::Client::new();
    let mut tokens = Vec::new();
    for u in 0..USERS {
        let (token, _) =
            support::device_session_at(&running.base(), &format!("device-data-{u:04}")).await;
        tokens.push(token);
    }
    let tallies: Arc<Vec<Mutex<Tally>>> =
        Arc::new((0..USERS).map(|_| Mutex::new(Tally::default())).collect());
    // Ticks at each acknowledged write: the kill waits on it, not on a timer.
    let (ticks, mut acknowledged) = tokio::sync::watch::channel(0usize);
    let ticks = Arc::new(ticks);
    let writers: Vec<_> = (0..USERS * 2)
        .map(|w| {
            let user = w % USERS;
            let (http, base, token, tallies, ticks) = (
                http.clone(),
                running.base(),
                tokens[user].clone(),
                tallies.clone(),
                ticks.clone(),
            );
            tokio::spawn(async move {
                for i in 0..100_000 {
                    let sent = if w < USERS {
                        // Storage: a new object each time.
                        let key = format!("w{w}-{i}");
                        let value = json!({ "i": i, "w": w }).to_string();
                        let response = http
                            .put(format!("{base}/v2/storage"))
                            .bearer_auth(&token)
                            .json(&json!({"objects": [{"collection": "saves", "key": key, "value": value}]}))
                            .send()
                            .await;
                        match response {
                            Ok(r) if r.status() == 200 => {
                                let body: Value = r.json().await.unwrap_or_default();
                                let version =
                                    body["acks"][0]["version"].as_str().unwrap_or_default();
                                tallies[user]
                                    .lock()
                                    .expect("lock")
                                    .objects
                                    .insert(key, version.to_owned());
                                true
                            }
                            _ => false,
                        }
                    } else {
                        tallies[user].lock().expect("lock").scores_sent += 1;
                        let response = http
                            .post(format!("{base}/v2/leaderboard/clicks"))
                            .bearer_auth(&token)
                            .json(&json!({"score": 1}))
                            .send()
                            .await;
                        match response {
                            Ok(r) if r.status() == 200 => {
                                tallies[user].lock().expect("lock").scores_acked += 1;
                                true
                            }
                            _ => false,
                        }
                    };
                    if !sent {
                        return;
                    }
                    ticks.send_modify(|n| *n += 1);
                }
            })
        })
        .collect();
    // Kill once a fair load has been acknowledged (bounded: 20 s).
    let acked = |tallies: &Vec<Mutex<Tally>>| -> usize {
        tallies
            .iter()
            .map(|t| {
                let t = t.lock().expect("lock");
                t.objects.len() + t.scores_acked as usize
            })
            .sum()
    };
    let _ = tokio::time::timeout(
        Duration::from_secs(20),
        acknowledged.wait_for(|n| *n >= 1500),
    )
    .await;
    let mut running = running;
    running.kill9();
    for writer in writers {
        writer.await.expect("writer");
    }
    let total = acked(&tallies);
    eprintln!("{total} writes acknowledged before the kill");
    assert!(
        total >= 100,
        "only {total} writes acknowledged before the kill"
    );

    let running = start(&db).await;
    for (user, token) in tokens.iter().enumerate() {
        let (objects, scores_acked, scores_sent) = {
            let tally = tallies[user].lock().expect("lock");
            (tally.objects.clone(), tally.scores_acked, tally.scores_sent)
        };
        // Every acknowledged object, read back in pages of 100, with the version it was
        // acknowledged with.
        let uid = support::claims(token)["uid"]
            .as_str()
            .expect("uid")
            .to_owned();
        let mut stored = BTreeMap::new();
        let mut cursor = String::new();
        for _ in 0..10_000 {
            let (status, page) = support::get_with_token_at(
                &running.base(),
                &format!("/v2/storage/saves?user_id={uid}&limit=100&cursor={cursor}"),
                token,
            )
            .await;
            assert_eq!(status, 200, "{page}");
            for object in page["objects"].as_array().into_iter().flatten() {
                stored.insert(
                    object["key"].as_str().unwrap_or_default().to_owned(),
                    object["version"].as_str().unwrap_or_default().to_owned(),
                );
            }
            match page["cursor"].as_str() {
                Some(next) => cursor = next.to_owned(),
                None => break,
            }
        }
        for (key, version) in &objects {
            assert_eq!(
                stored.get(key),
                Some(version),
                "acknowledged object {key} of user {user}"
            );
        }
        // The score counts every acknowledged submission, and none that was never sent.
        let (status, list) = support::get_with_token_at(
            &running.base(),
            &format!("/v2/leaderboard/clicks?owner_ids={uid}"),
            token,
        )
        .await;
        assert_eq!(status, 200, "{list}");
        let score: u64 = list["owner_records"][0]["score"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        assert!(
            (scores_acked..=scores_sent).contains(&score),
            "user {user}: score {score}, acknowledged {}, sent {}",
            scores_acked,
            scores_sent
        );
    }
}
