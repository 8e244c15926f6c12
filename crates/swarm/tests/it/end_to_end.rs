//! End to end: the real `swarm` binary, with 2 worker processes, against a real Muster started
//! in-process on 127.0.0.1:0.
//!
//! Muster runs on its own runtime on its own thread, so "stopping Muster" is exactly what an
//! operator's SIGTERM does (its shutdown future fires) followed by the process going away (the
//! runtime is dropped, with every task and socket it still had).

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use common::Muster;

fn smoke_scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/smoke.toml")
}

fn start_swarm(target: &str, out: &Path) -> Child {
    start_swarm_with(&smoke_scenario(), target, out)
}

fn start_swarm_with(scenario: &Path, target: &str, out: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_swarm"))
        .arg("run")
        .arg(scenario)
        .args([
            "--target",
            target,
            "--workers",
            "2",
            "--progress",
            "json",
            "--out",
        ])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start swarm")
}

/// Waits for the swarm process to exit (bounded), returning its exit code.
fn wait_exit(child: &mut Child, limit: Duration) -> i32 {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("swarm did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn read_report(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("report.json")).expect("report.json written");
    assert!(out.join("report.html").exists(), "report.html written");
    serde_json::from_str(&text).expect("report is JSON")
}

fn errors_total(report: &Value) -> u64 {
    report["errors"]
        .as_object()
        .expect("errors map")
        .values()
        .map(|v| v.as_u64().expect("count"))
        .sum()
}

#[test]
fn smoke_scenario_with_two_workers_counts_every_player_and_no_failure() {
    let muster = Muster::start();
    let out = tempfile::tempdir().expect("out dir");
    let mut swarm = start_swarm(&muster.url(), out.path());
    let stderr = BufReader::new(swarm.stderr.take().expect("stderr"));
    let progress: Vec<String> = stderr.lines().map_while(Result::ok).collect();
    let code = wait_exit(&mut swarm, Duration::from_secs(120));
    let report = read_report(out.path());

    assert_eq!(
        code, 0,
        "exit code; report: {report:#}\nstderr: {progress:#?}"
    );
    assert_eq!(report["status"], "completed");
    assert_eq!(report["players"], 40);
    assert_eq!(report["successful"], 40, "{report:#}");
    assert_eq!(report["failed"], 0, "{report:#}");
    assert_eq!(report["skipped"], 0);
    assert_eq!(errors_total(&report), 0, "{}", report["errors"]);
    assert_eq!(report["metrics"]["auth"]["count"], 40);
    assert_eq!(report["metrics"]["connect"]["count"], 40);
    // 40 players ping every 0.5 s for at least 3 s: at least 6 pings each.
    let pings = report["metrics"]["ping"]["count"]
        .as_u64()
        .expect("ping count");
    assert!(pings >= 40 * 6, "only {pings} pings");
    for key in [
        "min",
        "max",
        "percentile80",
        "percentile90",
        "percentile99",
        "percentile99point9",
        "percentile99point99",
    ] {
        assert!(report["metrics"]["ping"][key].is_number(), "{key}");
    }
    assert_eq!(report["peakCcu"], 40);
    assert_eq!(report["counters"]["connects"], 40);
    assert_eq!(report["counters"]["disconnects"], 40);
    // Both workers reported, from their own source addresses, with half the players each.
    let workers = report["workers"].as_array().expect("workers");
    assert_eq!(workers.len(), 2);
    for w in workers {
        assert_eq!(w["reported"], true);
        assert_eq!(w["players"], 20);
    }
    assert_ne!(workers[0]["sourceIp"], workers[1]["sourceIp"]);
    // The time series covers the run and was streamed live (JSON progress lines on stderr).
    assert!(report["timeseries"].as_array().expect("timeseries").len() >= 6);
    assert!(
        progress.iter().filter(|l| l.starts_with('{')).count() >= 5,
        "{progress:#?}"
    );
}

#[test]
fn stopping_muster_mid_run_is_counted_as_failures() {
    let mut muster = Muster::start();
    let out = tempfile::tempdir().expect("out dir");
    let mut swarm = start_swarm(&muster.url(), out.path());
    let mut lines = BufReader::new(swarm.stderr.take().expect("stderr")).lines();

    // Wait (on the live progress, not on a clock) until some players are connected.
    let mut connected = 0;
    for line in lines.by_ref().map_while(Result::ok) {
        if let Ok(p) = serde_json::from_str::<Value>(&line) {
            connected = p["ccu"].as_u64().unwrap_or(0);
            if connected >= 10 {
                break;
            }
        }
    }
    assert!(connected >= 10, "players never connected");
    muster.stop();
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).count());
    let code = wait_exit(&mut swarm, Duration::from_secs(120));
    let _ = drain.join();
    let report = read_report(out.path());
    eprintln!("failures after the stop: {}", report["errors"]);

    assert_eq!(code, 3, "failures make a non-zero exit; report: {report:#}");
    // Every player is accounted for, and the ones the stop hit are failures, by kind.
    assert_eq!(report["players"], 40);
    let successful = report["successful"].as_u64().expect("successful");
    let failed = report["failed"].as_u64().expect("failed");
    assert_eq!(successful + failed, 40, "{report:#}");
    assert!(failed >= 10, "connected players were cut off: {report:#}");
    assert_eq!(
        errors_total(&report),
        failed,
        "one failure kind per failed player"
    );
    let kinds: Vec<&String> = report["errors"]
        .as_object()
        .expect("errors")
        .keys()
        .collect();
    assert!(
        kinds
            .iter()
            .any(|k| k.starts_with("ws_") || k.starts_with("ping_")),
        "open sockets were cut: {kinds:?}"
    );
    assert!(
        kinds.iter().any(|k| k.starts_with("http_")),
        "players arriving after the stop could not authenticate: {kinds:?}"
    );
    let errors_over_time: u64 = report["timeseries"]
        .as_array()
        .expect("timeseries")
        .iter()
        .map(|row| row["errors"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        errors_over_time, failed,
        "the time series shows the failures too"
    );
}

/// 20 players in 4 rooms of 5, split over 2 workers (player `i` is on worker `i % 2`, so every
/// room has members in both processes): they join, wait until everyone has joined, chat for 2 s,
/// and wait for the last deliveries before leaving.
const CHAT_SCENARIO: &str = r#"
name = "chat-e2e"
timeout_s = 5
grace_s = 5

[[phases]]
duration_s = 1
players = 20

[[phases]]
duration_s = 7

[[steps]]
do = "authenticate"

[[steps]]
do = "connect"

[[steps]]
do = "chat_join"
channels = 4
group_size = 5
room_prefix = "e2e"

[[steps]]
do = "wait"
duration_s = 1.5

[[steps]]
do = "chat"
send_interval_s = [0.1, 0.3]
message_bytes = [10, 100]
duration_s = 2

[[steps]]
do = "wait"
duration_s = 2
"#;

#[test]
fn chat_steps_fan_out_across_workers_and_measure_delivery() {
    let muster = Muster::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = dir.path().join("chat.toml");
    std::fs::write(&scenario, CHAT_SCENARIO).expect("write scenario");
    let out = dir.path().join("out");
    let mut swarm = start_swarm_with(&scenario, &muster.url(), &out);
    let stderr = BufReader::new(swarm.stderr.take().expect("stderr"));
    let progress: Vec<String> = stderr.lines().map_while(Result::ok).collect();
    let code = wait_exit(&mut swarm, Duration::from_secs(120));
    let report = read_report(&out);

    assert_eq!(
        code, 0,
        "exit code; report: {report:#}\nstderr: {progress:#?}"
    );
    assert_eq!(report["successful"], 20, "{report:#}");
    assert_eq!(errors_total(&report), 0, "{}", report["errors"]);
    let metrics = &report["metrics"];
    assert_eq!(metrics["chat_join"]["count"], 20);

    let counters = &report["counters"];
    let count = |key: &str| counters[key].as_u64().unwrap_or_else(|| panic!("{key}"));
    let (sent, acked, delivered) = (
        count("chatSent"),
        count("chatAcked"),
        count("chatDelivered"),
    );
    // Each player sends every 0.1-0.3 s for 2 s: at least 6 messages each.
    assert!(sent >= 20 * 6, "only {sent} messages sent");
    assert_eq!(acked, sent, "every message acknowledged to its sender");
    assert_eq!(metrics["chat_ack"]["count"].as_u64(), Some(sent));
    // Every message reaches its sender and other members, but never more than the 5 members of
    // its room: the players really were spread over rooms of 5.
    assert!(
        delivered > sent,
        "no member received another's message: {counters}"
    );
    assert!(
        delivered <= 5 * sent,
        "{delivered} deliveries for {sent} messages in rooms of 5"
    );
    // Every delivery carried a timestamp that was found and turned into a latency. The sender's
    // wall-clock time crosses processes: a misread timestamp would give a nonsense latency (hours
    // or years), not one below the 5 s timeout.
    let delivery = &metrics["chat_delivery"];
    assert_eq!(delivery["count"].as_u64(), Some(delivered));
    let max = delivery["max"].as_f64().expect("max");
    assert!(max < 5_000.0, "delivery latency max {max} ms");
    assert!(
        delivery["percentile50"].as_f64().expect("p50")
            <= delivery["percentile99"].as_f64().expect("p99")
    );
    // The time series shows the messages as they went.
    let rows = report["timeseries"].as_array().expect("timeseries");
    let sent_over_time: u64 = rows
        .iter()
        .map(|r| r["chatSent"].as_u64().unwrap_or(0))
        .sum();
    let delivered_over_time: u64 = rows
        .iter()
        .map(|r| r["chatDelivered"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(sent_over_time, sent);
    assert_eq!(delivered_over_time, delivered);
}

/// `muster_accounts_created_total` from a Muster's `/metrics`.
fn accounts_created(muster: &Muster) -> u64 {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(muster.addr).expect("connect");
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: muster\r\n\r\n")
        .expect("request");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("metrics");
    text.lines()
        .find_map(|l| l.strip_prefix("muster_accounts_created_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

#[test]
fn several_targets_spread_the_workers_over_the_servers() {
    let first = Muster::start();
    let second = Muster::start();
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("out");
    let status = Command::new(env!("CARGO_BIN_EXE_swarm"))
        .arg("run")
        .arg(smoke_scenario())
        .args(["--target", &format!("{},{}", first.url(), second.url())])
        .args(["--workers", "2", "--progress", "never", "--out"])
        .arg(&out)
        .status()
        .expect("run swarm");
    let report = read_report(&out);
    assert_eq!(status.code(), Some(0), "{report:#}");
    assert_eq!(report["successful"], 40);
    // Worker 0 played against the first server, worker 1 against the second: 20 accounts each.
    assert_eq!(
        (accounts_created(&first), accounts_created(&second)),
        (20, 20)
    );
}
