//! The in-process server harness: a real Muster server on 127.0.0.1:0, on SQLite or
//! PostgreSQL, driven over real sockets. PostgreSQL tests need `TEST_POSTGRES_URL` (the test
//! command sets it up) and are ignored unless asked for; each test gets a database of its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use muster::base::clock::Clock;
use muster::config::Config;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Runs `$body` (an async fn taking a [`Backend`]) as two tests, one per engine. The PostgreSQL
/// one is ignored unless asked for (`--include-ignored`), as every test that needs a service.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::support::Backend::Sqlite).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[ignore = "needs PostgreSQL (TEST_POSTGRES_URL)"]
            async fn postgres() {
                super::$name($crate::support::Backend::Postgres).await;
            }
        }
    )*};
}

/// The value of `variable`, which names a service a test needs; a test run without it fails
/// here, saying what is missing (such tests are `#[ignore]`d, so only a run that asks for them
/// with `--include-ignored` gets here: `scripts/test` starts every service and does).
fn service(variable: &str, what: &str) -> String {
    match std::env::var(variable) {
        Ok(value) if !value.is_empty() => value,
        _ => panic!(
            "this test needs {what}: set {variable} (scripts/test starts one), or leave it out \
             (it is ignored unless --include-ignored or --ignored)"
        ),
    }
}

/// The PostgreSQL admin URL of `TEST_POSTGRES_URL`.
pub fn postgres_url() -> String {
    service("TEST_POSTGRES_URL", "PostgreSQL")
}

/// The NATS server of `TEST_NATS_URL`.
pub fn nats_url() -> String {
    service("TEST_NATS_URL", "NATS")
}

/// Fails the test unless FUSE can be mounted here (`/dev/fuse` and Debian's fuse3).
pub fn require_fuse() {
    let fusermount = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| dir.join("fusermount3").is_file())
    });
    assert!(
        std::path::Path::new("/dev/fuse").exists() && fusermount,
        "this test needs FUSE: /dev/fuse and fusermount3 (Debian's fuse3; scripts/test installs it)"
    );
}

/// A database of its own for one test: a fresh temp dir, or a fresh PostgreSQL database.
pub struct Database {
    pub dir: tempfile::TempDir,
    pub url: String,
}

impl Database {
    pub async fn new(backend: Backend) -> Database {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = match backend {
            Backend::Sqlite => String::new(),
            Backend::Postgres => {
                let admin = postgres_url();
                let name = format!("muster_test_{}", uuid::Uuid::new_v4().simple());
                let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
                    .await
                    .expect("connect to test PostgreSQL");
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("CREATE DATABASE {name}"))
                    .await
                    .expect("create test database");
                let base = admin
                    .rsplit_once('/')
                    .map_or(admin.as_str(), |(base, _)| base);
                format!("{base}/{name}")
            }
        };
        Database { dir, url }
    }

    /// A test configuration on this database, with per-IP limits off (tests share one IP).
    pub fn config(&self) -> Config {
        let mut config = Config {
            listen: "127.0.0.1:0".into(),
            data_dir: self.dir.path().to_path_buf(),
            database_url: self.url.clone(),
            ..Config::default()
        };
        config.limits.auth_per_ip_per_sec = 0;
        config.limits.connect_per_ip_per_sec = 0;
        config.limits.max_sockets_per_ip = 0;
        // The native TCP transport on an ephemeral port, so tests can run in parallel.
        config.rooms.tcp_listen = "127.0.0.1:0".into();
        config.enet.listen = "127.0.0.1:0".into();
        // The links service too (`TestServer::links_url`).
        config.links.listen = "127.0.0.1:0".into();
        // The console's port, when a test turns it on (console.admin_password).
        config.console.listen = "127.0.0.1:0".into();
        // The gRPC edge too (`TestServer::grpc_addr`).
        config.grpc.listen = "127.0.0.1:0".into();
        config.shutdown_grace_ms = 3000;
        config
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    /// The links service's address, when `links.listen` is set.
    pub links_addr: Option<SocketAddr>,
    /// The gRPC edge's address, when `grpc.listen` is set.
    pub grpc_addr: Option<SocketAddr>,
    /// The console's address, when it is on (`console.admin_password` set; tests give
    /// `console.listen` port 0).
    pub console_addr: Option<SocketAddr>,
    pub http: reqwest::Client,
    /// The server's clock for token expiry: stopped, moved by the test
    /// (`server.clock.advance(…)`) instead of sleeping.
    pub clock: Clock,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

impl TestServer {
    pub async fn start(config: Config) -> TestServer {
        TestServer::start_with(config, muster::functions::Functions::new()).await
    }

    /// A server with a game's own server functions registered.
    pub async fn start_with(config: Config, functions: muster::functions::Functions) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let links = match config.links.listen.as_str() {
            "" => None,
            address => Some(
                tokio::net::TcpListener::bind(address)
                    .await
                    .expect("bind links"),
            ),
        };
        let links_addr = links
            .as_ref()
            .map(|l| l.local_addr().expect("links address"));
        let console = if config.console.enabled() {
            Some(
                tokio::net::TcpListener::bind(config.console.listen.as_str())
                    .await
                    .expect("bind console"),
            )
        } else {
            None
        };
        let console_addr = console
            .as_ref()
            .map(|l| l.local_addr().expect("console address"));
        let grpc = match config.grpc.listen.as_str() {
            "" => None,
            address => Some(
                tokio::net::TcpListener::bind(address)
                    .await
                    .expect("bind gRPC"),
            ),
        };
        let grpc_addr = grpc.as_ref().map(|l| l.local_addr().expect("gRPC address"));
        let (stop, stopped) = oneshot::channel::<()>();
        let game = muster::app::GameLogic {
            functions,
            ..Default::default()
        };
        let clock = Clock::manual();
        let task = tokio::spawn(muster::app::run_on(
            muster::app::Listeners {
                http: listener,
                links,
                console,
                grpc,
            },
            config,
            game,
            clock.clone(),
            async move {
                let _ = stopped.await;
            },
        ));
        let server = TestServer {
            addr,
            links_addr,
            grpc_addr,
            console_addr,
            clock,
            http: reqwest::Client::new(),
            stop: Some(stop),
            task: Some(task),
        };
        let healthy = || async {
            let answer = server.http.get(server.url("/healthcheck")).send().await;
            answer.is_ok_and(|r| r.status().is_success())
        };
        super::eventually("the server to become ready", healthy).await;
        server
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// A URL on the links service.
    pub fn links_url(&self, path: &str) -> String {
        let addr = self.links_addr.expect("links.listen is set");
        format!("http://{addr}{path}")
    }

    /// A URL on the console.
    pub fn console_url(&self, path: &str) -> String {
        let addr = self.console_addr.expect("the console is on");
        format!("http://{addr}{path}")
    }

    pub fn ws_url(&self, query: &str) -> String {
        format!("ws://{}/ws?{}", self.addr, query)
    }

    /// Shuts down gracefully and waits for `run` to return.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown().await
    }

    pub async fn shutdown(&mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("shutdown within 10 s")
                .expect("server task"),
            None => Ok(()),
        }
    }

    /// POSTs to an authenticate endpoint with the default server key.
    pub async fn authenticate(&self, kind: &str, query: &str, body: Value) -> (u16, Value) {
        let response = self
            .http
            .post(self.url(&format!("/v2/account/authenticate/{kind}?{query}")))
            .basic_auth("defaultkey", Some(""))
            .json(&body)
            .send()
            .await
            .expect("request");
        status_and_json(response).await
    }

    /// A device session for `device_id`: (token, refresh_token).
    pub async fn device_session(&self, device_id: &str) -> (String, String) {
        device_session_with(&self.http, &self.url(""), device_id).await
    }

    /// Over the server's one HTTP client, so that its connections are reused (tests that count
    /// connections rely on it).
    pub async fn get_with_token(&self, path: &str, token: &str) -> (u16, Value) {
        get_with_token_with(&self.http, &self.url(""), path, token).await
    }
}

/// Every ledger row of the caller of `token` at `base`, newest first, read page by page.
pub async fn ledger_at(http: &reqwest::Client, base: &str, token: &str) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut cursor = String::new();
    loop {
        let page: Value = http
            .get(format!(
                "{base}/v2/economy/ledger?limit=100&cursor={cursor}"
            ))
            .bearer_auth(token)
            .send()
            .await
            .expect("ledger")
            .json()
            .await
            .expect("ledger JSON");
        rows.extend(page["entries"].as_array().into_iter().flatten().cloned());
        match page["cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => return rows,
        }
    }
}

/// [`TestServer::device_session`] against the server at `base` (`http://host:port`, e.g. a
/// binary a test started).
pub async fn device_session_at(base: &str, device_id: &str) -> (String, String) {
    device_session_with(&reqwest::Client::new(), base, device_id).await
}

async fn device_session_with(
    http: &reqwest::Client,
    base: &str,
    device_id: &str,
) -> (String, String) {
    let response = http
        .post(format!("{base}/v2/account/authenticate/device?create=true"))
        .basic_auth("defaultkey", Some(""))
        .json(&serde_json::json!({ "id": device_id }))
        .send()
        .await
        .expect("request");
    let (status, body) = status_and_json(response).await;
    assert_eq!(status, 200, "{body}");
    (
        body["token"].as_str().expect("token").to_owned(),
        body["refresh_token"]
            .as_str()
            .expect("refresh token")
            .to_owned(),
    )
}

/// [`TestServer::get_with_token`] against the server at `base`.
pub async fn get_with_token_at(base: &str, path: &str, token: &str) -> (u16, Value) {
    get_with_token_with(&reqwest::Client::new(), base, path, token).await
}

async fn get_with_token_with(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    token: &str,
) -> (u16, Value) {
    let response = http
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("request");
    status_and_json(response).await
}

/// The user ids in a list of presences, sorted.
pub fn presence_ids(list: &Value) -> Vec<String> {
    let mut ids: Vec<String> = list
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| p["user_id"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// The user ids of a `matchmaker_matched`'s users, sorted.
pub fn matched_user_ids(matched: &Value) -> Vec<String> {
    let presences: Vec<Value> = matched["users"]
        .as_array()
        .map(|users| users.iter().map(|u| u["presence"].clone()).collect())
        .unwrap_or_default();
    presence_ids(&Value::Array(presences))
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub async fn status_and_json(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, json)
}

/// The claims inside a JWT (no signature check: the server checks those).
pub fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("JWT has a payload");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("base64url");
    serde_json::from_slice(&bytes).expect("JSON claims")
}

/// Asserts a Nakama error body with this status and gRPC code, returning its message.
pub fn assert_error(result: &(u16, Value), status: u16, code: i64) -> String {
    let (got, body) = result;
    assert_eq!(*got, status, "{body}");
    assert_eq!(body["code"].as_i64(), Some(code), "{body}");
    assert_eq!(body["error"], body["message"], "{body}");
    body["message"].as_str().expect("message").to_owned()
}
