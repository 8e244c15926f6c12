//! The load behind `bench/social.sh`: one JSON line per run, against a running Muster.
//!
//! - `store URL HTTP_KEY SECONDS CONCURRENCY`: that many callers, each sending one stored
//!   notification per call (`notifications_send` with the HTTP key) to one of 1,000 accounts it
//!   creates first, for SECONDS; answers calls/s and the latency percentiles.
//! - `friends URL REQUESTS`: one account with 1,000 friends (made through the API: one add of
//!   1,000 ids, then 1,000 acceptances), then REQUESTS listings of all of them, one at a time.
//! - `latency SEND_URL RECEIVE_URL HTTP_KEY COUNT`: a socket on RECEIVE_URL's node, COUNT
//!   notifications sent one at a time through SEND_URL's node; from the send to the socket's
//!   receipt (not stored: the route alone, then stored: write and route).

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
    json!({ "notifications": [{ "user_id": user, "subject": "bench", "content": { "n": 1 }, "code": 1, "persistent": persistent }] })
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

async fn store(url: &str, key: &str, seconds: u64, concurrency: usize) -> Result<Value, Error> {
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
                let body = send_body(&users[i % users.len()], true);
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
    let rate = samples.len() as f64 / elapsed;
    Ok(
        json!({ "mode": "store", "concurrency": concurrency, "seconds": elapsed, "stored_per_sec": rate.round(), "failed": failed, "latency": percentiles(samples) }),
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
        let t0 = Instant::now();
        let list: Value = http
            .get(format!("{url}/v2/friend?limit=1000"))
            .bearer_auth(&owner.0)
            .send()
            .await?
            .json()
            .await?;
        samples.push(t0.elapsed());
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

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| {
        args.get(i)
            .cloned()
            .ok_or_else(|| format!("missing argument {i}; see the file's documentation"))
    };
    let result = match args.first().map(String::as_str) {
        Some("store") => store(&arg(1)?, &arg(2)?, arg(3)?.parse()?, arg(4)?.parse()?).await?,
        Some("friends") => friends(&arg(1)?, arg(2)?.parse()?).await?,
        Some("latency") => latency(&arg(1)?, &arg(2)?, &arg(3)?, arg(4)?.parse()?).await?,
        _ => {
            return Err(
                "usage: social_load store|friends|latency … (see the file's documentation)".into(),
            )
        }
    };
    println!("{result}");
    Ok(())
}
