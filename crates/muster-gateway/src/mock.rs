//! A mock origin for tests and benches, like the WireMock of the published AppSync
//! cache-stampede experiment: it answers every `GET` after a configurable delay, fails a
//! configurable share of them, and counts what it receives (`GET /_stats`: calls in total, by path,
//! and the most in flight at once).
//!
//! Answers: `/malformed/...` is not JSON; `/slow/...` waits ten times the delay;
//! `/busy/{seconds}` is a 429 with `Retry-After: {seconds}` (the segment verbatim) the first time
//! it is asked, then answers as usual; `/zeros/{n}` is `{"items": [0, 0, …]}` with n zeros (at
//! most a million): small as text, large once parsed; anything else is
//! `{"path": ..., "served": n, "items": [{"id", "name", "price"}, ...]}` with three items named
//! after the path's last segment.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use parking_lot::Mutex;
use serde_json::json;

use crate::config::{FieldConfig, GatewayConfig, OriginConfig, TypeConfig};

/// How the mock behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MockSettings {
    pub delay: Duration,
    /// Share of requests answered 500 (0.0 to 1.0).
    pub error_rate: f64,
}

/// What the mock has received.
#[derive(Debug, Default)]
pub struct MockStats {
    pub calls: AtomicU64,
    pub in_flight: AtomicUsize,
    pub most_in_flight: AtomicUsize,
    pub by_path: Mutex<HashMap<String, u64>>,
}

impl MockStats {
    pub fn calls_to(&self, path: &str) -> u64 {
        self.by_path.lock().get(path).copied().unwrap_or(0)
    }
}

struct Mock {
    settings: Mutex<MockSettings>,
    stats: Arc<MockStats>,
}

/// A running mock origin.
pub struct MockOrigin {
    pub addr: SocketAddr,
    pub stats: Arc<MockStats>,
    mock: Arc<Mock>,
}

impl MockOrigin {
    /// Serves on `listen` (e.g. `127.0.0.1:0`) until the runtime ends.
    pub async fn start(listen: &str, settings: MockSettings) -> std::io::Result<MockOrigin> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let stats = Arc::new(MockStats::default());
        let mock = Arc::new(Mock {
            settings: Mutex::new(settings),
            stats: stats.clone(),
        });
        let app = Router::new()
            .route("/_stats", get(stats_page))
            .fallback(get(answer))
            .with_state(mock.clone());
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                eprintln!("mock origin stopped: {error}");
            }
        });
        Ok(MockOrigin { addr, stats, mock })
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A gateway configuration reading this mock: origin `shop`, type `Item { id, name, price }`,
    /// and the query field `items(category)` (its `/items/{category}` answer's `items`), with
    /// the field defaults. What tests and examples start from.
    pub fn items_config(&self) -> GatewayConfig {
        GatewayConfig {
            origins: vec![OriginConfig {
                name: "shop".into(),
                base_url: self.base_url(),
                ..OriginConfig::default()
            }],
            types: vec![TypeConfig {
                name: "Item".into(),
                fields: BTreeMap::from([
                    ("id".into(), "ID".into()),
                    ("name".into(), "String".into()),
                    ("price".into(), "Int".into()),
                ]),
            }],
            fields: vec![FieldConfig {
                name: "items".into(),
                origin: "shop".into(),
                path: "/items/{category}".into(),
                arguments: vec!["category".into()],
                returns: "[Item]".into(),
                select: "/items".into(),
                ..FieldConfig::default()
            }],
            ..GatewayConfig::default()
        }
    }

    /// Changes the delay and error rate from now on.
    pub fn set(&self, settings: MockSettings) {
        *self.mock.settings.lock() = settings;
    }
}

async fn stats_page(State(mock): State<Arc<Mock>>) -> Json<serde_json::Value> {
    let stats = &mock.stats;
    Json(json!({
        "calls": stats.calls.load(Ordering::Relaxed),
        "mostInFlight": stats.most_in_flight.load(Ordering::Relaxed),
        "byPath": *stats.by_path.lock(),
    }))
}

async fn answer(State(mock): State<Arc<Mock>>, uri: Uri) -> Response {
    let path = uri.path().to_owned();
    let stats = &mock.stats;
    let served = stats.calls.fetch_add(1, Ordering::Relaxed) + 1;
    let served_here = {
        let mut by_path = stats.by_path.lock();
        let count = by_path.entry(path.clone()).or_default();
        *count += 1;
        *count
    };
    let now = stats.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
    stats.most_in_flight.fetch_max(now, Ordering::Relaxed);
    let settings = *mock.settings.lock();
    let delay = match path.starts_with("/slow/") {
        true => settings.delay * 10,
        false => settings.delay,
    };
    tokio::time::sleep(delay).await;
    stats.in_flight.fetch_sub(1, Ordering::Relaxed);
    if settings.error_rate > 0.0 && rand::random::<f64>() < settings.error_rate {
        return (StatusCode::INTERNAL_SERVER_ERROR, "mock failure").into_response();
    }
    if path.starts_with("/malformed/") {
        return ([("content-type", "application/json")], "{\"items\": [").into_response();
    }
    if let Some(seconds) = path.strip_prefix("/busy/") {
        if served_here == 1 {
            let retry_after = [("retry-after", seconds.to_owned())];
            return (StatusCode::TOO_MANY_REQUESTS, retry_after, "slow down").into_response();
        }
    }
    if let Some(n) = path.strip_prefix("/zeros/") {
        return match n.parse::<usize>() {
            Ok(n) if n <= 1_000_000 => {
                let mut body = String::with_capacity(13 + 2 * n);
                body.push_str("{\"items\": [");
                for i in 0..n {
                    body.push_str(if i == 0 { "0" } else { ",0" });
                }
                body.push_str("]}");
                ([("content-type", "application/json")], body).into_response()
            }
            _ => (StatusCode::NOT_FOUND, "zeros: 0 to 1000000").into_response(),
        };
    }
    let name = path.rsplit('/').next().unwrap_or_default().to_owned();
    Json(json!({
        "path": path,
        "served": served,
        "items": (1..=3).map(|i| json!({
            "id": format!("{name}-{i}"),
            "name": format!("{name} #{i}"),
            "price": i * 100,
        })).collect::<Vec<_>>(),
    }))
    .into_response()
}
