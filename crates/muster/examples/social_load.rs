//! The load behind `bench/social.sh`: one JSON line per run, against a running Muster.
//!
//! - `store URL HTTP_KEY SECONDS CONCURRENCY [PER_CALL]`: that many callers, each sending
//!   PER_CALL (1) stored notifications per call (`notifications_send` with the HTTP key), each to
//!   one of 1,000 accounts it creates first, for SECONDS; answers notifications/s and the calls'
//!   latency percentiles.
//! - `friends URL REQUESTS`: one account with 1,000 friends (made through the API: one add of
//!   1,000 ids, then 1,000 acceptances), then REQUESTS listings of all of them, one at a time,
//!   each timed until its whole answer has arrived (this process parses it afterwards).
//! - `latency SEND_URL RECEIVE_URL HTTP_KEY COUNT`: a socket on RECEIVE_URL's node, COUNT
//!   notifications sent one at a time through SEND_URL's node; from the send to the socket's
//!   receipt (not stored: the route alone, then stored: write and route).
//! - `status URLS FOLLOWERS UPDATES`: one user online on the first of the comma-separated URLs,
//!   FOLLOWERS sockets following it spread over all of them; UPDATES status updates one at a
//!   time, each timed from its send to every follower's receipt (per delivery, and until the
//!   last follower had it).
//! - `match_list URL ADMIN_KEY MATCHES REQUESTS`: MATCHES labelled rooms (`arena`, label
//!   `{"mode":"ranked"|"casual","level":0..49}`, 1 tick/s) created with the rooms admin key,
//!   then REQUESTS listings with a label query, one at a time.

use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{json, Value};

type Error = Box<dyn std::error::Error + Send + Sync>;

fn percentiles(mut samples: Vec<Duration>) -> Value {
    samples.sort_unstable();
    let at = |q: f64| {
        let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len().max(1)) - 1;
        samples.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    json!({ "count": samples.len(), "p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99), "max_ms": at(1.0) })
}

async fn account(
    http: &reqwest::Client,
    url: &str,
    device: &str,
) -> Result<(String, String), Error> {
    let answer: Value = http
        .post(format!("{url}/v2/account/authenticate/device?create=true"))
        .basic_auth("defaultkey", Some(""))
        .json(&json!({ "id": device }))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let token = answer["token"].as_str().ok_or("no token")?.to_string();
    let account: Value = http
        .get(format!("{url}/v2/account"))
        .bearer_auth(&token)
        .send()
        .await?
        .json()
        .await?;
    let id = account["user"]["id"].as_str().ok_or("no id")?.to_string();
    Ok((token, id))
}

async fn accounts(
    http: &reqwest::Client,
    url: &str,
    prefix: &str,
    n: usize,
) -> Result<Vec<(String, String)>, Error> {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let made = futures_util::stream::iter(0..n)
        .map(|i| {
            let device = format!("{prefix}-{run}-{i:05}");
            async move { account(http, url, &device).await }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    made.into_iter().collect()
}

fn send_body(user: &str, persistent: bool) -> Value {
    send_many(&[user], persistent)
}

/// One notification to each of `users`, in one call.
fn send_many(users: &[&str], persistent: bool) -> Value {
    let notifications: Vec<Value> = users
        .iter()
        .map(|user| json!({ "user_id": user, "subject": "bench", "content": { "n": 1 }, "code": 1, "persistent": persistent }))
        .collect();
    json!({ "notifications": notifications })
}

async fn send(http: &reqwest::Client, url: &str, key: &str, body: &Value) -> Result<(), Error> {
    http.post(format!(
        "{url}/v2/rpc/notifications_send?http_key={key}&unwrap"
    ))
    .json(body)
    .send()
    .await?
    .error_for_status()?;
    Ok(())
}

async fn store(
    url: &str,
    key: &str,
    seconds: u64,
    concurrency: usize,
    per_call: usize,
) -> Result<Value, Error> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()?;
    let users: Vec<String> = accounts(&http, url, "store", 1000)
        .await?
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    let end = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let callers = (0..concurrency).map(|c| {
        let (http, users) = (http.clone(), users.clone());
        async move {
            let mut samples = Vec::new();
            let mut failed = 0u64;
            let mut i = c;
            while Instant::now() < end {
                let to: Vec<&str> = (0..per_call)
                    .map(|k| users[(i + k) % users.len()].as_str())
                    .collect();
                let body = send_many(&to, true);
                let t0 = Instant::now();
                match send(&http, url, key, &body).await {
                    Ok(()) => samples.push(t0.elapsed()),
                    Err(_) => failed += 1,
                }
                i += concurrency;
            }
            (samples, failed)
        }
    });
    let results = futures_util::future::join_all(callers).await;
    let elapsed = started.elapsed().as_secs_f64();
    let failed: u64 = results.iter().map(|(_, f)| f).sum();
    let samples: Vec<Duration> = results.into_iter().flat_map(|(s, _)| s).collect();
    let rate = (samples.len() * per_call) as f64 / elapsed;
    Ok(
        json!({ "mode": "store", "concurrency": concurrency, "per_call": per_call, "seconds": elapsed, "stored_per_sec": rate.round(), "failed": failed, "latency": percentiles(samples) }),
    )
}

async fn friends(url: &str, requests: usize) -> Result<Value, Error> {
    let http = reqwest::Client::new();
    let owner = accounts(&http, url, "owner", 1).await?.remove(0);
    let others = accounts(&http, url, "friend", 1000).await?;
    let ids: Vec<String> = others.iter().map(|(_, id)| format!("ids={id}")).collect();
    http.post(format!("{url}/v2/friend?{}", ids.join("&")))
        .bearer_auth(&owner.0)
        .send()
        .await?
        .error_for_status()?;
    futures_util::stream::iter(others.iter())
        .map(|(token, _)| {
            let http = &http;
            let owner_id = &owner.1;
            async move {
                http.post(format!("{url}/v2/friend?ids={owner_id}"))
                    .bearer_auth(token)
                    .send()
                    .await
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    let mut samples = Vec::with_capacity(requests);
    let mut listed = 0;
    for _ in 0..requests {
        // Timed until the whole answer has arrived; this process's parse of it comes after.
        let t0 = Instant::now();
        let body = http
            .get(format!("{url}/v2/friend?limit=1000"))
            .bearer_auth(&owner.0)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        samples.push(t0.elapsed());
        let list: Value = serde_json::from_slice(&body)?;
        listed = list["friends"].as_array().map_or(0, Vec::len);
    }
    if listed != 1000 {
        return Err(format!("listed {listed} friends, not 1000").into());
    }
    Ok(json!({ "mode": "friends", "friends": listed, "latency": percentiles(samples) }))
}

async fn latency(
    send_url: &str,
    receive_url: &str,
    key: &str,
    count: usize,
) -> Result<Value, Error> {
    let http = reqwest::Client::new();
    let (token, user) = accounts(&http, receive_url, "receiver", 1).await?.remove(0);
    let ws_url = format!("{}/ws?token={token}", receive_url.replacen("http", "ws", 1));
    let (mut socket, _) = tokio_tungstenite::connect_async(ws_url).await?;
    // One ping's answer: the socket is registered before the first send.
    socket
        .send(json!({ "cid": "1", "ping": {} }).to_string().into())
        .await?;
    while let Some(message) = socket.next().await {
        if message?.to_text().unwrap_or("").contains("pong") {
            break;
        }
    }
    let mut result = json!({ "mode": "latency", "count": count });
    for persistent in [false, true] {
        let mut samples = Vec::with_capacity(count);
        for _ in 0..count {
            let body = send_body(&user, persistent);
            let t0 = Instant::now();
            send(&http, send_url, key, &body).await?;
            loop {
                let message = tokio::time::timeout(Duration::from_secs(5), socket.next())
                    .await?
                    .ok_or("socket closed")??;
                if message
                    .to_text()
                    .unwrap_or("")
                    .contains("\"notifications\"")
                {
                    break;
                }
            }
            samples.push(t0.elapsed());
        }
        result[if persistent {
            "stored"
        } else {
            "realtime_only"
        }] = percentiles(samples);
    }
    Ok(result)
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A socket of `token`'s on `url`, answered once (so it is registered).
async fn socket(url: &str, token: &str, online: bool) -> Result<Socket, Error> {
    let ws_url = format!(
        "{}/ws?token={token}&status={online}",
        url.replacen("http", "ws", 1)
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(ws_url).await?;
    request(&mut socket, json!({ "cid": "1", "ping": {} }), "pong").await?;
    Ok(socket)
}

/// Sends `envelope` and waits for the answer carrying `key`.
async fn request(socket: &mut Socket, envelope: Value, key: &str) -> Result<Value, Error> {
    socket.send(envelope.to_string().into()).await?;
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await?
            .ok_or("socket closed")??;
        let value: Value = serde_json::from_str(message.to_text().unwrap_or("{}"))?;
        if value.get("error").is_some() {
            return Err(format!("refused: {value}").into());
        }
        if value.get(key).is_some() {
            return Ok(value);
        }
    }
}

async fn status(urls: &str, followers: usize, updates: usize) -> Result<Value, Error> {
    let urls: Vec<&str> = urls.split(',').collect();
    let http = reqwest::Client::new();
    let (token, publisher) = accounts(&http, urls[0], "publisher", 1).await?.remove(0);
    let mut publisher_socket = socket(urls[0], &token, true).await?;
    let (receipts, mut received) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let mut tasks = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        let share = followers / urls.len() + usize::from(i < followers % urls.len());
        for (follower_token, _) in accounts(&http, url, "follower", share).await? {
            let mut follower = socket(url, &follower_token, false).await?;
            let follow = json!({ "cid": "2", "status_follow": { "user_ids": [publisher] } });
            request(&mut follower, follow, "status").await?;
            let receipts = receipts.clone();
            tasks.push(tokio::spawn(async move {
                while let Some(Ok(message)) = follower.next().await {
                    let at = Instant::now();
                    let Ok(value) = serde_json::from_str::<Value>(message.to_text().unwrap_or(""))
                    else {
                        continue;
                    };
                    let joins = &value["status_presence_event"]["joins"];
                    for join in joins.as_array().into_iter().flatten() {
                        let status = join["status"].as_str().unwrap_or("");
                        if let Some(n) = status.strip_prefix('s').and_then(|n| n.parse().ok()) {
                            let _ = receipts.send((n, at));
                        }
                    }
                }
            }));
        }
    }
    let mut deliveries = Vec::with_capacity(followers * updates);
    let mut all = Vec::with_capacity(updates);
    for n in 0..updates {
        let t0 = Instant::now();
        let update = json!({ "status_update": { "status": format!("s{n}") } });
        publisher_socket.send(update.to_string().into()).await?;
        let mut got = 0;
        while got < followers {
            let (which, at) = tokio::time::timeout(Duration::from_secs(10), received.recv())
                .await?
                .ok_or("followers gone")?;
            if which == n {
                got += 1;
                deliveries.push(at - t0);
            }
        }
        all.push(t0.elapsed());
    }
    for task in tasks {
        task.abort();
    }
    Ok(json!({
        "mode": "status",
        "nodes": urls.len(),
        "followers": followers,
        "updates": updates,
        "delivery": percentiles(deliveries),
        "all_followers": percentiles(all),
    }))
}

async fn match_list(
    url: &str,
    admin_key: &str,
    matches: usize,
    requests: usize,
) -> Result<Value, Error> {
    let http = reqwest::Client::new();
    let made = futures_util::stream::iter(0..matches)
        .map(|i| {
            let http = &http;
            let mode = if i % 2 == 0 { "ranked" } else { "casual" };
            let label = json!({ "mode": mode, "level": i % 50 }).to_string();
            let body = json!({ "handler": "arena", "capacity": 4,
                "params": { "label": label, "tick_rate_hz": "1" } });
            async move {
                http.post(format!("{url}/v2/rooms"))
                    .basic_auth(admin_key, Some(""))
                    .json(&body)
                    .send()
                    .await?
                    .error_for_status()?;
                Ok::<_, Error>(())
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    made.into_iter().collect::<Result<Vec<_>, _>>()?;
    let (token, _) = accounts(&http, url, "lister", 1).await?.remove(0);
    let query = "+label.mode:ranked +label.level:>=40";
    let mut samples = Vec::with_capacity(requests);
    let mut listed = 0;
    for _ in 0..requests {
        let t0 = Instant::now();
        let list: Value = http
            .get(format!("{url}/v2/match"))
            .query(&[
                ("limit", "100"),
                ("authoritative", "true"),
                ("query", query),
            ])
            .bearer_auth(&token)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        samples.push(t0.elapsed());
        listed = list["matches"].as_array().map_or(0, Vec::len);
    }
    Ok(
        json!({ "mode": "match_list", "matches": matches, "query": query, "listed": listed,
        "latency": percentiles(samples) }),
    )
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| {
        args.get(i)
            .cloned()
            .ok_or_else(|| format!("missing argument {i}; see the file's documentation"))
    };
    let result = match args.first().map(String::as_str) {
        Some("store") => {
            let per_call = args.get(5).map_or(Ok(1), |n| n.parse())?;
            store(
                &arg(1)?,
                &arg(2)?,
                arg(3)?.parse()?,
                arg(4)?.parse()?,
                per_call,
            )
            .await?
        }
        Some("friends") => friends(&arg(1)?, arg(2)?.parse()?).await?,
        Some("latency") => latency(&arg(1)?, &arg(2)?, &arg(3)?, arg(4)?.parse()?).await?,
        Some("status") => status(&arg(1)?, arg(2)?.parse()?, arg(3)?.parse()?).await?,
        Some("match_list") => {
            match_list(&arg(1)?, &arg(2)?, arg(3)?.parse()?, arg(4)?.parse()?).await?
        }
        _ => {
            return Err(
                "usage: social_load store|friends|latency|status|match_list … (see the file's \
                 documentation)"
                    .into(),
            )
        }
    };
    println!("{result}");
    Ok(())
}
