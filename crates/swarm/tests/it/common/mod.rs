//! A real Muster for swarm's end-to-end tests, started in-process on 127.0.0.1:0.
//!
//! Muster runs on its own runtime on its own thread, so stopping it is exactly what an operator's
//! SIGTERM does (its shutdown future fires) followed by the process going away (the runtime is
//! dropped, with every task and socket it still had).

use std::net::SocketAddr;
use std::time::Duration;

use muster::config::Config;

/// Muster running on a dedicated thread and runtime; stopped when dropped.
pub struct Muster {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _data: tempfile::TempDir,
}

impl Muster {
    /// Muster with the test defaults (see [`Muster::start_with`]).
    pub fn start() -> Muster {
        Muster::start_with(|_| {})
    }

    /// Muster on a fresh SQLite database, with per-IP limits off (every player comes from one or
    /// two source addresses) and the native TCP transport on a free port (tests run in parallel),
    /// after `adjust` has changed what the test needs.
    pub fn start_with(adjust: impl FnOnce(&mut Config)) -> Muster {
        let data = tempfile::tempdir().expect("temp dir");
        let mut config = Config {
            data_dir: data.path().to_path_buf(),
            shutdown_grace_ms: 1_000,
            ..Default::default()
        };
        config.limits.auth_per_ip_per_sec = 0;
        config.limits.connect_per_ip_per_sec = 0;
        config.limits.max_sockets_per_ip = 0;
        config.rooms.tcp_listen = "127.0.0.1:0".into();
        config.enet.listen = "127.0.0.1:0".into();
        config.links.listen = "127.0.0.1:0".into();
        config.grpc.listen = "127.0.0.1:0".into();
        adjust(&mut config);
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("muster runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind 127.0.0.1:0");
                addr_tx
                    .send(listener.local_addr().expect("local addr"))
                    .expect("send addr");
                let shutdown = async move {
                    let _ = stop_rx.await;
                };
                if let Err(e) = muster::app::run(listener, config, shutdown).await {
                    eprintln!("muster stopped with an error: {e:#}");
                }
            });
            // Dropping the runtime ends whatever the server still had running.
            runtime.shutdown_timeout(Duration::from_secs(2));
        });
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("muster did not start listening");
        Muster {
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
            _data: data,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// One sample of Muster's own `/metrics`, named with its labels as the text format writes
    /// it (`muster_accounts_created_total`, `muster_realtime_messages_total{kind="ping"}`); 0
    /// when Muster has not counted any yet.
    pub fn metric(&self, sample: &str) -> u64 {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(self.addr).expect("connect");
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: muster\r\n\r\n")
            .expect("request");
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("metrics");
        let prefix = format!("{sample} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .map_or(0, |v| v.trim().parse::<f64>().expect("a number") as u64)
    }

    /// A room's connection info, as a player sees it (its native ports: `port` for TCP,
    /// `enet.port` for ENet), from a one-player room made for the asking.
    pub fn room_connection_info(&self) -> serde_json::Value {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        runtime.block_on(async {
            let http = reqwest::Client::new();
            let session: serde_json::Value = http
                .post(format!(
                    "{}/v2/account/authenticate/device?create=true",
                    self.url()
                ))
                .basic_auth("defaultkey", Some(""))
                .json(&serde_json::json!({"id": "swarm-connection-info-probe"}))
                .send()
                .await
                .expect("auth")
                .json()
                .await
                .expect("json");
            let token = session["token"].as_str().expect("token");
            let room: serde_json::Value = http
                .post(format!("{}/v2/rooms", self.url()))
                .bearer_auth(token)
                .json(&serde_json::json!({"handler": "arena", "capacity": 1}))
                .send()
                .await
                .expect("room")
                .json()
                .await
                .expect("json");
            http.get(format!(
                "{}/v2/rooms/{}/connection",
                self.url(),
                room["room_id"].as_str().expect("id")
            ))
            .bearer_auth(token)
            .send()
            .await
            .expect("connection")
            .json()
            .await
            .expect("json")
        })
    }

    /// Fires Muster's shutdown future and waits for it to be gone.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().expect("muster thread panicked");
        }
    }
}

impl Drop for Muster {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs the real `swarm` binary on `scenario` text (written to `dir/{name}.toml`, report in
/// `dir/{name}/`) against `target` with `workers` worker processes; returns its exit code and
/// report.
pub fn run_swarm(
    target: &str,
    dir: &std::path::Path,
    name: &str,
    scenario: &str,
    workers: u32,
) -> (i32, serde_json::Value) {
    run_swarm_with(target, dir, name, scenario, workers, &[])
}

/// [`run_swarm`] with more arguments to `swarm run`.
pub fn run_swarm_with(
    target: &str,
    dir: &std::path::Path,
    name: &str,
    scenario: &str,
    workers: u32,
    more: &[&str],
) -> (i32, serde_json::Value) {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, scenario).expect("write scenario");
    let out = dir.join(name);
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_swarm"))
        .current_dir(dir)
        .arg("run")
        .arg(&file)
        .args(["--target", target, "--workers", &workers.to_string()])
        .args(more)
        .args(["--progress", "never", "--out"])
        .arg(&out)
        .status()
        .expect("run swarm");
    let report = serde_json::from_str(
        &std::fs::read_to_string(out.join("report.json")).expect("report.json"),
    )
    .expect("JSON report");
    (status.code().unwrap_or(-1), report)
}

/// Runs swarm on `scenario` text (in `dir`) with one worker against `muster`; the run must
/// succeed with no failed player. Returns its report.
pub fn run_ok(
    muster: &Muster,
    dir: &std::path::Path,
    name: &str,
    scenario: &str,
) -> serde_json::Value {
    let (code, report) = run_swarm(&muster.url(), dir, name, scenario, 1);
    assert_eq!(code, 0, "{name}: {report:#}");
    assert_eq!(report["failed"], 0, "{name}: {}", report["errors"]);
    report
}

/// How many samples a report's metric has (0 when absent).
pub fn count(report: &serde_json::Value, metric: &str) -> u64 {
    report["metrics"][metric]["count"].as_u64().unwrap_or(0)
}

/// Space Ape's match flow at test size: 6 players matchmake in pairs on the socket, close it,
/// join the match with `join` (the `join_match` step's transport keys) and play 1.5 s at 15 Hz.
pub fn space_ape_scenario(name: &str, join: &str) -> String {
    format!(
        r#"
name = "{name}"
[[phases]]
duration_s = 1
players = 6
[[phases]]
duration_s = 3
[[steps]]
do = "authenticate"
[[steps]]
do = "connect"
[[steps]]
do = "matchmake"
count = 2
[[steps]]
do = "disconnect"
[[steps]]
do = "join_match"
{join}
[[steps]]
do = "play"
rate_hz = 15
duration_s = 1.5
"#
    )
}

/// Hathora's room flow at test size: `players` rooms created in 1 s, each with two connections
/// replaying `file`, then `finish_s` seconds for the replays to end.
pub fn rooms_replay_scenario(name: &str, players: u32, finish_s: u32, file: &str) -> String {
    format!(
        r#"name = "{name}"
[[phases]]
duration_s = 1
players = {players}
[[phases]]
duration_s = {finish_s}
[[steps]]
do = "authenticate"
[[steps]]
do = "create_room"
[[steps]]
do = "room_connect"
[[steps]]
do = "replay"
file = "{file}"
"#
    )
}
