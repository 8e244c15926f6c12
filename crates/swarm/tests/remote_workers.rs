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

mod common;
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

/// Starts a coordinator with JSON progress and returns once the run is under way: a second of
/// progress (shown only when every worker has reported it) counts all `players` started. The
/// coordinator's stderr is read on a thread to its end, and passed on to the test's.
fn start_under_way(
    muster: &Muster,
    scenario: &Path,
    out: &Path,
    workers: &[&Worker],
    players: u64,
) -> Child {
    let mut child = coordinator_showing("json", muster, scenario, out, workers)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start coordinator");
    let stderr = child.stderr.take().expect("stderr");
    let (all_started, under_way) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            eprintln!("coordinator: {line}");
            let started = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|progress| progress["started"].as_u64());
            if started.is_some_and(|started| started >= players) {
                let _ = all_started.send(());
            }
        }
    });
    if under_way.recv_timeout(Duration::from_secs(30)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the coordinator's progress never showed all {players} players started");
    }
    child
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
    Command::new("kill")
        .args(["-9", &victim.pid().to_string()])
        .status()
        .expect("kill -9");
    let code = wait_exit(&mut run, Duration::from_secs(60)).expect("coordinator finished");
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

    Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status()
        .expect("kill -INT");
    let code = wait_exit(&mut run, Duration::from_secs(30)).expect("coordinator stopped");
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
