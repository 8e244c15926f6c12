//! Remote workers: `swarm worker --listen` processes driven by `swarm run --workers-at`, against
//! a real Muster on 127.0.0.1. The coordinator and workers are the real binary, each its own
//! process, talking over TCP exactly as across machines (the namespace test in
//! `scripts/netns-swarm.sh` puts them on separate interfaces too).

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use common::Muster;

const TOKEN: &str = "a-test-token-of-some-length";

/// A listening worker process and the address it listens on.
struct Worker {
    child: Child,
    addr: String,
}

impl Worker {
    fn start(extra_env: &[(&str, &str)], once: bool) -> Worker {
        Worker::start_in(None, extra_env, once)
    }

    /// A worker running in `dir` (the test's working directory when `None`).
    fn start_in(dir: Option<&Path>, extra_env: &[(&str, &str)], once: bool) -> Worker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_swarm"));
        if let Some(dir) = dir {
            cmd.current_dir(dir);
        }
        cmd.args(["worker", "--listen", "127.0.0.1:0", "--token", TOKEN]);
        if once {
            cmd.arg("--once");
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start worker");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("stdout"))
            .read_line(&mut line)
            .expect("worker's first line");
        let addr = line
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .trim()
            .to_string();
        Worker { child, addr }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits (bounded) for the process to exit by itself; its exit code.
    fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        wait_exit(&mut self.child, limit)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    // The standard library has no wait with a timeout: a short poll until the exit, bounded.
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status.code().unwrap_or(-1));
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn scenario(dir: &Path, players: u64, ramp_s: u64, hold_s: u64) -> std::path::PathBuf {
    let file = dir.join("remote.toml");
    std::fs::write(
        &file,
        format!(
            r#"name = "remote"
timeout_s = 5
grace_s = 5

[[phases]]
name = "ramp"
duration_s = {ramp_s}
players = {players}

[[phases]]
name = "hold"
duration_s = {hold_s}

[[steps]]
do = "authenticate"

[[steps]]
do = "connect"

[[steps]]
do = "heartbeat"
interval_s = 0.5
"#
        ),
    )
    .expect("write scenario");
    file
}

fn coordinator(muster: &Muster, scenario: &Path, out: &Path, workers: &[&Worker]) -> Command {
    coordinator_showing("never", muster, scenario, out, workers)
}

/// A coordinator with `--progress <progress>`.
fn coordinator_showing(
    progress: &str,
    muster: &Muster,
    scenario: &Path,
    out: &Path,
    workers: &[&Worker],
) -> Command {
    let at: Vec<&str> = workers.iter().map(|w| w.addr.as_str()).collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_swarm"));
    cmd.arg("run")
        .arg(scenario)
        .args(["--target", &muster.url(), "--workers-at", &at.join(",")])
        .args(["--worker-token", TOKEN, "--progress", progress, "--out"])
        .arg(out);
    cmd
}

/// A coordinator whose stderr is read on a thread to its end, passed on to the test's and handed
/// to the test line by line, so a test waits on what the coordinator says.
struct Coordinator {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Coordinator {
    fn start(mut cmd: Command) -> Coordinator {
        let mut child = cmd
            .stderr(Stdio::piped())
            .spawn()
            .expect("start coordinator");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("coordinator: {line}");
                let _ = tx.send(line);
            }
        });
        Coordinator { child, lines }
    }

    /// Waits (at most `limit`) for a line of the coordinator's stderr that `matches`; fails the
    /// test, naming `what`, otherwise.
    fn wait_for(&mut self, what: &str, limit: Duration, matches: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if matches(&line) => return,
                Ok(_) => continue,
                Err(_) => panic!("the coordinator never showed {what} (within {limit:?})"),
            }
        }
    }

    /// Waits for a second of JSON progress (shown only once every live worker has reported it)
    /// for which `matches` holds.
    fn wait_for_progress(&mut self, what: &str, matches: impl Fn(&Value) -> bool) {
        self.wait_for(what, Duration::from_secs(60), |line| {
            serde_json::from_str::<Value>(line).is_ok_and(|progress| matches(&progress))
        });
    }

    fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        wait_exit(&mut self.child, limit)
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a coordinator with JSON progress and returns once the run is under way: a second of
/// progress counts all `players` started.
fn start_under_way(
    muster: &Muster,
    scenario: &Path,
    out: &Path,
    workers: &[&Worker],
    players: u64,
) -> Coordinator {
    let mut run = Coordinator::start(coordinator_showing("json", muster, scenario, out, workers));
    run.wait_for_progress(&format!("all {players} players started"), |p| {
        p["started"]
            .as_u64()
            .is_some_and(|started| started >= players)
    });
    run
}

/// Samples of `metric` the coordinator's progress has shown so far.
fn streamed(progress: &Value, metric: &str) -> u64 {
    progress["samplesTotal"][metric].as_u64().unwrap_or(0)
}

fn read_report(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("report.json"))
        .expect("JSON report")
}

fn worker_entry<'a>(report: &'a Value, addr: &str) -> &'a Value {
    report["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .find(|w| w["address"] == addr)
        .unwrap_or_else(|| panic!("no worker {addr} in {:#}", report["workers"]))
}

#[test]
fn remote_workers_share_the_run_and_start_together_despite_their_clocks() {
    let muster = Muster::start();
    let dir = tempfile::tempdir().expect("dir");
    let file = scenario(dir.path(), 30, 2, 2);
    // One worker's machine is 3 s ahead, the other's 2 s behind: without the clock handshake
    // they would start 5 s apart.
    let ahead = Worker::start(&[("SWARM_CLOCK_OFFSET_MS", "3000")], false);
    let behind = Worker::start(&[("SWARM_CLOCK_OFFSET_MS", "-2000")], false);
    let out = dir.path().join("out");
    let status = coordinator(&muster, &file, &out, &[&ahead, &behind])
        .status()
        .expect("run coordinator");
    let report = read_report(&out);
    assert_eq!(status.code(), Some(0), "{report:#}");
    assert_eq!(report["status"], "completed");
    assert_eq!(
        (report["players"].as_u64(), report["successful"].as_u64()),
        (Some(30), Some(30))
    );
    assert_eq!(report["failed"], 0, "{}", report["errors"]);

    // Each worker's share is in the breakdown, with its address and measured clock.
    let a = worker_entry(&report, &ahead.addr);
    let b = worker_entry(&report, &behind.addr);
    assert_eq!(
        a["players"].as_u64().unwrap() + b["players"].as_u64().unwrap(),
        30
    );
    assert_eq!(a["successful"], a["players"]);
    assert_eq!(b["successful"], b["players"]);
    let offset_a = a["clockOffsetMs"].as_f64().expect("offset");
    let offset_b = b["clockOffsetMs"].as_f64().expect("offset");
    assert!(
        (offset_a - 3000.0).abs() < 50.0,
        "measured offset {offset_a}"
    );
    assert!(
        (offset_b + 2000.0).abs() < 50.0,
        "measured offset {offset_b}"
    );

    // Both woke for one instant: the skew is milliseconds, not the clocks' 5 s.
    let skew = report["startSkewMs"].as_f64().expect("startSkewMs");
    assert!((0.0..500.0).contains(&skew), "start skew {skew} ms");
    for w in [a, b] {
        let late = w["startLateMs"].as_f64().expect("startLateMs");
        assert!((-50.0..500.0).contains(&late), "woke {late} ms late: {w}");
    }
    assert!(report["coordinatorRssPeakKb"].as_u64().unwrap() > 0);
    // Between runs a worker takes the next coordinator.
    let again = dir.path().join("again");
    let status = coordinator(&muster, &file, &again, &[&ahead])
        .status()
        .expect("run coordinator");
    assert_eq!(status.code(), Some(0), "{:#}", read_report(&again));
}

#[test]
fn a_worker_killed_mid_run_is_reported_lost_and_the_run_goes_on() {
    let muster = Muster::start();
    let dir = tempfile::tempdir().expect("dir");
    let file = scenario(dir.path(), 20, 1, 6);
    let survivor = Worker::start(&[], false);
    let mut victim = Worker::start(&[], false);
    let out = dir.path().join("out");
    let started = Instant::now();
    // Killed mid-run: once every player of both workers has started.
    let mut run = start_under_way(&muster, &file, &out, &[&survivor, &victim], 20);
    let killed_after = started.elapsed();
    signal(victim.pid(), "-KILL");
    let code = run
        .wait_exit(Duration::from_secs(60))
        .expect("coordinator finished");
    let elapsed = started.elapsed();
    let _ = victim.wait_exit(Duration::from_secs(5));
    let report = read_report(&out);
    assert_eq!(code, 3, "{report:#}");
    assert_eq!(report["status"], "failed");
    // The run went on to the end of its schedule (7 s) after the loss.
    assert!(
        elapsed >= Duration::from_secs(7),
        "ended after {elapsed:?}, the worker killed after {killed_after:?}"
    );

    let lost = worker_entry(&report, &victim.addr);
    let kept = worker_entry(&report, &survivor.addr);
    assert_eq!(lost["reported"], false);
    assert!(
        lost["lost"].as_str().is_some_and(|r| !r.is_empty()),
        "{lost}"
    );
    assert_eq!(lost["failed"], lost["players"]);
    assert_eq!(kept["reported"], true);
    assert_eq!(kept["failed"], 0);
    assert_eq!(kept["successful"], kept["players"]);
    assert_eq!(report["errors"]["worker_lost"], lost["players"]);
    assert_eq!(report["players"], 20);
    assert_eq!(
        report["successful"].as_u64().unwrap() + report["failed"].as_u64().unwrap(),
        20
    );
    // What it streamed before it died is in the report, and the figures add up.
    assert_eq!(lost["status"], "lost");
    assert_eq!(report["partialWorkers"], serde_json::json!([lost["index"]]));
    assert_eq!(lost["counts"]["auth"], lost["players"], "{lost}");
    assert_eq!(lost["peakCcu"], lost["players"], "{lost}");
    assert!(lost["rssPeakKb"].as_u64().unwrap() > 0, "{lost}");
    for metric in ["auth", "connect", "ping"] {
        let counts = counts_three_ways(&report, &out, metric);
        assert!(
            counts.iter().all(|n| *n == counts[0]),
            "{metric}: {counts:?}"
        );
    }
}

/// Sends a signal (`-KILL`, `-STOP`, `-CONT`, `-INT`) to a process this test started.
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill {signal} {pid}");
}

/// `swarm window` over the whole run of a report.
fn whole_run_window(out: &Path) -> Value {
    let window = Command::new(env!("CARGO_BIN_EXE_swarm"))
        .arg("window")
        .arg(out.join("report.json"))
        .args(["--from-s", "0", "--to-s", "100000"])
        .output()
        .expect("swarm window");
    assert!(window.status.success(), "{window:?}");
    serde_json::from_slice(&window.stdout).expect("window JSON")
}

/// A metric's count read four ways from one report: the whole-run figure, the sum of the
/// per-second series, the sum of the workers' shares and `swarm window` over the whole run.
fn counts_three_ways(report: &Value, out: &Path, metric: &str) -> [u64; 4] {
    let whole = report["metrics"][metric]["count"].as_u64().unwrap_or(0);
    let by_second = report["timeseries"]
        .as_array()
        .expect("timeseries")
        .iter()
        .map(|row| row["counts"][metric].as_u64().unwrap_or(0))
        .sum();
    let by_worker = report["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .map(|w| w["counts"][metric].as_u64().unwrap_or(0))
        .sum();
    let window = whole_run_window(out)["metrics"][metric]["count"]
        .as_u64()
        .unwrap_or(0);
    [whole, by_second, by_worker, window]
}

/// Pings each player of [`quiet_scenario`] sends.
const PINGS_EACH: u64 = 3;

/// Players that authenticate, connect, ping [`PINGS_EACH`] times (every 0.5 s for 2 s) and then
/// hold their socket quietly to the run's end: once their pings are streamed a worker sends the
/// server nothing more, so the server's counts are final while the run goes on.
fn quiet_scenario(dir: &Path, players: u64, hold_s: u64) -> std::path::PathBuf {
    let file = dir.join("quiet.toml");
    std::fs::write(
        &file,
        format!(
            r#"name = "quiet"
timeout_s = 5
grace_s = 5

[[phases]]
name = "ramp"
duration_s = 1
players = {players}

[[phases]]
name = "hold"
duration_s = {hold_s}

[[steps]]
do = "authenticate"

[[steps]]
do = "connect"

[[steps]]
do = "heartbeat"
interval_s = 0.5
duration_s = 2

[[steps]]
do = "wait"
duration_s = 600
"#
        ),
    )
    .expect("write scenario");
    file
}

/// Waits until the coordinator's progress shows every player's authentication and pings: all
/// of them streamed by both workers.
fn wait_all_streamed(run: &mut Coordinator, players: u64) {
    run.wait_for_progress("every authentication and ping streamed", |p| {
        streamed(p, "auth") >= players && streamed(p, "ping") >= players * PINGS_EACH
    });
}

/// The report of a [`quiet_scenario`] run of `players` over two workers, one of which (at
/// `gone`) was given up on with `status` after all its samples were streamed: every whole-run
/// figure holds them, and agrees with the time series, with the workers' shares, with
/// `swarm window` and with Muster's own counts.
fn assert_report_holds_what_was_streamed(
    muster: &Muster,
    out: &Path,
    gone: &str,
    status: &str,
    players: u64,
) -> Value {
    let report = read_report(out);
    assert_eq!(report["status"], "failed", "{report:#}");
    let lost = worker_entry(&report, gone);
    let lost_players = lost["players"].as_u64().expect("players");
    assert_eq!(lost["status"], status, "{lost}");
    assert_eq!(lost["reported"], false, "{lost}");
    assert_eq!(report["partialWorkers"], serde_json::json!([lost["index"]]));
    // What it streamed: every one of its players authenticated, connected and pinged, and it
    // held all their sockets at once.
    assert_eq!(
        lost["counts"]["auth"].as_u64(),
        Some(lost_players),
        "{lost}"
    );
    assert_eq!(
        lost["counts"]["connect"].as_u64(),
        Some(lost_players),
        "{lost}"
    );
    assert_eq!(
        lost["counts"]["ping"].as_u64(),
        Some(lost_players * PINGS_EACH),
        "{lost}"
    );
    assert_eq!(lost["peakCcu"].as_u64(), Some(lost_players), "{lost}");
    for key in ["rssBaselineKb", "rssPeakKb", "streamedS"] {
        assert!(lost[key].as_u64().unwrap_or(0) > 0, "{key}: {lost}");
    }
    for w in report["workers"].as_array().expect("workers") {
        if w["address"] != gone {
            assert_eq!(w["status"], "finished", "{w}");
            assert_eq!(w["failed"], 0, "{w}");
        }
    }

    // Each count four ways from the report, and once from the server.
    let server = [
        ("auth", muster.metric("muster_accounts_created_total")),
        (
            "ping",
            muster.metric(r#"muster_realtime_messages_total{kind="ping"}"#),
        ),
        ("connect", players),
    ];
    let expected = [players, players * PINGS_EACH, players];
    for ((metric, at_server), expected) in server.into_iter().zip(expected) {
        let [whole, by_second, by_worker, window] = counts_three_ways(&report, out, metric);
        assert_eq!(
            (whole, by_second, by_worker, window, at_server),
            (expected, expected, expected, expected, expected),
            "{metric}: whole run, by second, by worker, swarm window, at the server"
        );
    }
    // Counters likewise: the sum of the seconds.
    let rows = report["timeseries"].as_array().expect("timeseries");
    for (counter, row_key) in [
        ("connects", "connects"),
        ("sends", "sends"),
        ("arrivals", "arrivals"),
    ] {
        let by_second: u64 = rows.iter().map(|r| r[row_key].as_u64().unwrap_or(0)).sum();
        assert_eq!(
            report["counters"][counter].as_u64(),
            Some(by_second),
            "{counter}"
        );
    }
    assert_eq!(report["counters"]["connects"].as_u64(), Some(players));
    // Its players count as failed, once each; none had failed before it was lost.
    assert_eq!(
        report["failed"].as_u64(),
        Some(lost_players),
        "{}",
        report["errors"]
    );
    assert_eq!(report["errors"]["worker_lost"].as_u64(), Some(lost_players));
    assert_eq!(report["counters"]["errors"].as_u64(), Some(lost_players));
    assert_eq!(report["players"].as_u64(), Some(players));
    report
}

#[test]
fn a_worker_killed_mid_run_keeps_every_sample_it_streamed_in_the_report() {
    let muster = Muster::start();
    let dir = tempfile::tempdir().expect("dir");
    let file = quiet_scenario(dir.path(), 40, 8);
    let survivor = Worker::start(&[], false);
    let mut victim = Worker::start(&[], false);
    let out = dir.path().join("out");
    let mut run = Coordinator::start(coordinator_showing(
        "json",
        &muster,
        &file,
        &out,
        &[&survivor, &victim],
    ));
    wait_all_streamed(&mut run, 40);
    signal(victim.pid(), "-KILL");
    let code = run
        .wait_exit(Duration::from_secs(60))
        .expect("coordinator finished");
    let _ = victim.wait_exit(Duration::from_secs(5));
    assert_eq!(code, 3);
    let report = assert_report_holds_what_was_streamed(&muster, &out, &victim.addr, "lost", 40);
    let lost = worker_entry(&report, &victim.addr);
    assert!(
        lost["lost"]
            .as_str()
            .is_some_and(|why| why.contains("connection ended")),
        "{lost}"
    );
}

#[test]
fn a_stalled_worker_keeps_what_it_streamed_and_nothing_after() {
    let muster = Muster::start();
    let dir = tempfile::tempdir().expect("dir");
    let file = quiet_scenario(dir.path(), 40, 8);
    let mut survivor = Worker::start(&[], true);
    let mut victim = Worker::start(&[], true);
    let out = dir.path().join("out");
    let mut cmd = coordinator_showing("json", &muster, &file, &out, &[&survivor, &victim]);
    cmd.args(["--worker-silence-s", "4"]);
    let mut run = Coordinator::start(cmd);
    wait_all_streamed(&mut run, 40);
    // Stopped, not dead: its connection stays open and says nothing.
    signal(victim.pid(), "-STOP");
    let gave_up = format!("worker {} stalled", victim.addr);
    run.wait_for(
        "the stalled worker given up on",
        Duration::from_secs(60),
        |line| line.contains(&gave_up),
    );
    // Resumed, it finds the coordinator gone: it closes its players and, with --once, exits.
    signal(victim.pid(), "-CONT");
    let code = run
        .wait_exit(Duration::from_secs(60))
        .expect("coordinator finished");
    assert_eq!(code, 3);
    assert_eq!(victim.wait_exit(Duration::from_secs(30)), Some(0));
    assert_eq!(survivor.wait_exit(Duration::from_secs(10)), Some(0));
    let report = assert_report_holds_what_was_streamed(&muster, &out, &victim.addr, "stalled", 40);
    let lost = worker_entry(&report, &victim.addr);
    assert!(
        lost["lost"]
            .as_str()
            .is_some_and(|why| why.contains("silent")),
        "{lost}"
    );
}

#[test]
fn interrupting_the_coordinator_stops_every_worker_cleanly() {
    let muster = Muster::start();
    let dir = tempfile::tempdir().expect("dir");
    let file = scenario(dir.path(), 20, 1, 60);
    let mut first = Worker::start(&[], true);
    let mut second = Worker::start(&[], true);
    let out = dir.path().join("out");
    // Mid-run: every player started (and the coordinator, showing progress, is in its run
    // loop, where it handles the interrupt).
    let mut run = start_under_way(&muster, &file, &out, &[&first, &second], 20);

    // A second coordinator holding the token is told the worker is busy.
    let busy = coordinator(&muster, &file, &dir.path().join("busy"), &[&first])
        .stderr(Stdio::piped())
        .output()
        .expect("second coordinator");
    assert_eq!(busy.status.code(), Some(1));
    let said = String::from_utf8_lossy(&busy.stderr);
    assert!(said.contains("busy"), "{said}");

    signal(run.child.id(), "-INT");
    let code = run
        .wait_exit(Duration::from_secs(30))
        .expect("coordinator stopped");
    let report = read_report(&out);
    assert_eq!(code, 3, "{report:#}");
    assert_eq!(report["status"], "aborted");
    for w in report["workers"].as_array().expect("workers") {
        assert_eq!(w["reported"], true, "{w}");
    }
    // Every player that started closed cleanly; none failed.
    assert_eq!(report["failed"], 0, "{}", report["errors"]);
    // --once: each worker exits by itself once its run is over.
    assert_eq!(first.wait_exit(Duration::from_secs(10)), Some(0));
    assert_eq!(second.wait_exit(Duration::from_secs(10)), Some(0));
}

#[test]
fn a_coordinator_without_the_right_token_is_refused_and_changes_nothing() {
    let muster = Muster::start();
    let dir = tempfile::tempdir().expect("dir");
    let file = scenario(dir.path(), 4, 1, 1);
    let mut worker = Worker::start(&[], true);
    let out = dir.path().join("out");
    let refused = Command::new(env!("CARGO_BIN_EXE_swarm"))
        .arg("run")
        .arg(&file)
        .args(["--target", &muster.url(), "--workers-at", &worker.addr])
        .args(["--worker-token", "not-the-token-at-all-no", "--out"])
        .arg(&out)
        .stderr(Stdio::piped())
        .output()
        .expect("coordinator");
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("wrong or missing worker token"), "{said}");
    assert!(
        !said.contains("not-the-token"),
        "the token was echoed: {said}"
    );
    assert!(!out.join("report.json").exists());

    // Hostile bytes instead of a hello: refused, and the worker still serves.
    let mut raw = std::net::TcpStream::connect(&worker.addr).expect("connect");
    std::io::Write::write_all(&mut raw, &[0xff; 8192]).expect("write");
    let mut answer = String::new();
    let _ = raw.read_to_string(&mut answer);
    assert!(answer.contains("refused"), "{answer}");

    let good = dir.path().join("good");
    let status = coordinator(&muster, &file, &good, &[&worker])
        .status()
        .expect("coordinator");
    assert_eq!(status.code(), Some(0), "{:#}", read_report(&good));
    assert_eq!(worker.wait_exit(Duration::from_secs(10)), Some(0));

    // A worker will not listen with a token short enough to guess.
    let short = Command::new(env!("CARGO_BIN_EXE_swarm"))
        .args(["worker", "--listen", "127.0.0.1:0", "--token", "short"])
        .output()
        .expect("worker");
    assert_eq!(short.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&short.stderr).contains("at least 16"));
}

#[test]
fn a_remote_worker_replays_the_file_the_coordinator_ships_it() {
    let muster = Muster::start();
    // The coordinator's folder has the scenario and its replay (the bundled game's first 2 s);
    // the worker runs in an empty folder, where the scenario's relative path names nothing.
    let here = tempfile::tempdir().expect("dir");
    let elsewhere = tempfile::tempdir().expect("dir");
    let bundled = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/replays/arena-2p-60s.jsonl"),
    )
    .expect("bundled replay");
    let short: Vec<&str> = bundled
        .lines()
        .take_while(|l| !l.contains("\"t_ms\":2000"))
        .collect();
    std::fs::create_dir(here.path().join("replays")).expect("mkdir");
    std::fs::write(here.path().join("replays/short.jsonl"), short.join("\n")).expect("write");
    std::fs::write(
        here.path().join("rooms.toml"),
        common::rooms_replay_scenario("rooms-remote", 2, 3, "replays/short.jsonl"),
    )
    .expect("write scenario");
    let mut worker = Worker::start_in(Some(elsewhere.path()), &[], true);
    let status = Command::new(env!("CARGO_BIN_EXE_swarm"))
        .current_dir(here.path())
        .args(["run", "rooms.toml", "--target", &muster.url()])
        .args(["--workers-at", &worker.addr, "--worker-token", TOKEN])
        .args(["--progress", "never", "--out", "out"])
        .status()
        .expect("coordinator");
    let report = read_report(&here.path().join("out"));
    assert_eq!(status.code(), Some(0), "{report:#}");
    assert_eq!(report["failed"], 0, "{}", report["errors"]);
    let sent = (short.len() - 1) as u64; // every record but the header, in each of 2 rooms
    assert_eq!(report["metrics"]["RTT"]["count"].as_u64(), Some(2 * sent));
    assert_eq!(worker.wait_exit(Duration::from_secs(10)), Some(0));
}
