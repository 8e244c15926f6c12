//! The load behind `bench/sign-in.sh`: Apple or Google sign-ins against a Muster it starts,
//! with a local stand-in for the provider's key set (JWKS) — the keys are fetched once and
//! cached, so what is measured is the server's own work per login. One JSON line:
//! sign-ins/s, their latency percentiles, the server's CPU per sign-in (from
//! `/proc/PID/stat`), and the bare RS256 signature check's CPU in this process for scale.
//!
//! `sign_in_load MUSTER_BIN PROVIDER SECONDS CONCURRENCY [PLAYERS]`, PROVIDER `apple` or
//! `google`; PLAYERS (1,000) accounts are created first, then signed in to again and again.

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::{json, Value};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The test key of the integration suite's stand-in (tests only; it signs nothing real).
const KEY_PEM: &str = include_str!("../tests/it/support/keys/provider.pem");
const KID: &str = "bench-key";
const AUDIENCE: &str = "com.example.bench";

fn percentiles(mut samples: Vec<Duration>) -> Value {
    samples.sort_unstable();
    let at = |q: f64| {
        let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len().max(1)) - 1;
        samples.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    json!({ "count": samples.len(), "p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99) })
}

/// The key set the stand-in serves: the public half of [`KEY_PEM`].
fn jwks() -> Result<Value, Error> {
    use base64::Engine as _;
    use rsa::pkcs8::DecodePrivateKey as _;
    use rsa::traits::PublicKeyParts as _;
    let key = rsa::RsaPrivateKey::from_pkcs8_pem(KEY_PEM)?;
    let b64 = |bytes: Vec<u8>| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    Ok(json!({"keys": [{
        "kty": "RSA", "kid": KID, "alg": "RS256", "use": "sig",
        "n": b64(key.n().to_bytes_be()), "e": b64(key.e().to_bytes_be()),
    }]}))
}

fn token(issuer: &str, sub: &str) -> Result<String, Error> {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(KID.into());
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({"iss": issuer, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 3600,
                        "email": format!("{sub}@bench.example.com"), "email_verified": true});
    Ok(jsonwebtoken::encode(
        &header,
        &claims,
        &EncodingKey::from_rsa_pem(KEY_PEM.as_bytes())?,
    )?)
}

/// The CPU time (user + system) the process has used, from `/proc/PID/stat`.
fn cpu_time(pid: u32) -> Result<Duration, Error> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after_name = stat.rsplit_once(')').ok_or("bad stat")?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    // In clock ticks: USER_HZ, 100 a second on Linux.
    Ok(Duration::from_millis(ticks * 10))
}

fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let [_, bin, provider, seconds, concurrency, rest @ ..] = args.as_slice() else {
        return Err(
            "usage: sign_in_load MUSTER_BIN apple|google SECONDS CONCURRENCY [PLAYERS]".into(),
        );
    };
    let seconds: u64 = seconds.parse()?;
    let concurrency: usize = concurrency.parse()?;
    let players: usize = rest.first().map(|p| p.parse()).transpose()?.unwrap_or(1000);
    let (issuer, section) = match provider.as_str() {
        "apple" => ("https://appleid.apple.com", "APPLE"),
        "google" => ("https://accounts.google.com", "GOOGLE"),
        _ => return Err("PROVIDER is apple or google".into()),
    };

    // The provider's key set.
    let keys = jwks()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let keys_url = format!("http://{}/keys", listener.local_addr()?);
    let app = axum::Router::new().route(
        "/keys",
        axum::routing::get(move || {
            let keys = keys.clone();
            async move { axum::Json(keys) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The server.
    let data = tempfile::tempdir()?;
    let port = free_port()?;
    let audience_key = if section == "APPLE" {
        "BUNDLE_IDS"
    } else {
        "CLIENT_IDS"
    };
    let mut child = tokio::process::Command::new(bin)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--log", "warn"])
        .arg("--data-dir")
        .arg(data.path())
        .env("MUSTER_LIMITS__AUTH_PER_IP_PER_SEC", "0")
        .env("MUSTER_ROOMS__TCP_LISTEN", "127.0.0.1:0")
        .env("MUSTER_ENET__LISTEN", "127.0.0.1:0")
        .env("MUSTER_LINKS__LISTEN", "127.0.0.1:0")
        .env("MUSTER_GRPC__LISTEN", "127.0.0.1:0")
        .env(format!("MUSTER_SOCIAL__{section}__KEYS_URL"), &keys_url)
        .env(
            format!("MUSTER_SOCIAL__{section}__{audience_key}"),
            format!("[\"{AUDIENCE}\"]"),
        )
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().ok_or("muster exited")?;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let started = Instant::now();
    while http
        .get(format!("{base}/healthcheck"))
        .send()
        .await
        .is_err()
    {
        if started.elapsed() > Duration::from_secs(30) {
            return Err("muster did not start".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let tokens: Arc<Vec<String>> = Arc::new(
        (0..players)
            .map(|i| token(issuer, &format!("bench-player-{i}")))
            .collect::<Result<_, _>>()?,
    );
    let url = Arc::new(format!("{base}/v2/account/authenticate/{provider}"));
    let sign_in = |http: reqwest::Client, url: Arc<String>, token: String| async move {
        let answer = http
            .post(url.as_str())
            .basic_auth("defaultkey", Some(""))
            .json(&json!({ "token": token }))
            .send()
            .await?;
        if !answer.status().is_success() {
            return Err::<(), Error>(format!("sign-in answered {}", answer.status()).into());
        }
        Ok(())
    };
    // Every player's account first (and the keys fetched and cached).
    for token in tokens.iter() {
        sign_in(http.clone(), url.clone(), token.clone()).await?;
    }

    let cpu_before = cpu_time(pid)?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..concurrency {
        let (http, url, tokens, stop) = (http.clone(), url.clone(), tokens.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut i = w;
            while !stop.load(Ordering::Relaxed) {
                let at = Instant::now();
                sign_in(http.clone(), url.clone(), tokens[i % tokens.len()].clone()).await?;
                samples.push(at.elapsed());
                i += concurrency;
            }
            Ok::<_, Error>(samples)
        }));
    }
    let measured = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut samples = Vec::new();
    for worker in workers {
        samples.extend(worker.await??);
    }
    let elapsed = measured.elapsed();
    let cpu = cpu_time(pid)?.saturating_sub(cpu_before);
    let _ = child.start_kill();

    // The bare signature check, for scale: the same token, key and claims, in this process.
    let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(jwks()?["keys"][0].clone())?;
    let key = DecodingKey::from_jwk(&jwk)?;
    let mut validation = Validation::new(Algorithm::RS256);
    validation.set_audience(&[AUDIENCE]);
    validation.set_issuer(&[issuer]);
    let sample = tokens[0].clone();
    let rounds = 2000;
    let at = Instant::now();
    for _ in 0..rounds {
        jsonwebtoken::decode::<Value>(&sample, &key, &validation)?;
    }
    let bare_us = at.elapsed().as_secs_f64() * 1e6 / rounds as f64;

    let count = samples.len();
    let per_login_us = cpu.as_secs_f64() * 1e6 / count.max(1) as f64;
    println!(
        "{}",
        json!({
            "provider": provider, "concurrency": concurrency, "seconds": elapsed.as_secs_f64(),
            "sign_ins": count, "sign_ins_per_s": count as f64 / elapsed.as_secs_f64(),
            "latency": percentiles(samples),
            "server_cpu_us_per_sign_in": per_login_us,
            "bare_rs256_verify_us": bare_us,
            "ratio_to_bare_verify": per_login_us / bare_us,
        })
    );
    Ok(())
}
