//! Hathora's room flow against rooms run by a studio's own game server (docs/fleet.md): swarm
//! creates process rooms on a real Muster whose fleet runs `clients/fleet-server/relay.py` (a Python
//! server written against the Agones SDK's REST API), asks each room's host and port, opens two
//! TCP connections that join with their tickets, and replays a recorded game through the
//! server's relay.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{count, run_swarm, Muster};
use muster::rooms::fleet::config::ServerConfig;
use swarm::scenario::replay::{Record, Replay};

/// The `muster` binary beside this test's (cargo builds it for Muster's own tests): Muster runs
/// here as a library, so its fleet needs the binary's `fleet-exec` to start game servers.
fn muster_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let muster = dir.join("muster");
    assert!(
        muster.is_file(),
        "{} is missing: run `cargo build -p muster` (or the whole workspace's tests) first",
        muster.display()
    );
    muster
}

fn relay_py() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../clients/fleet-server/relay.py")
        .display()
        .to_string()
}

/// Muster whose fleet runs one game server kind `name`: `python3 args`, a pool of `buffer`, at
/// most 20, on ports from `ports`; `health_timeout_ms` when not the default.
fn muster_running(
    name: &str,
    args: Vec<String>,
    ports: &str,
    buffer: usize,
    health_timeout_ms: Option<u64>,
) -> Muster {
    Muster::start_with(|config| {
        config.fleet.launcher = muster_binary().display().to_string();
        config.fleet.port_range = ports.into();
        let defaults = ServerConfig::default();
        config.fleet.servers.insert(
            name.into(),
            ServerConfig {
                command: "python3".into(),
                args,
                buffer,
                max: 20,
                health_timeout_ms: health_timeout_ms.unwrap_or(defaults.health_timeout_ms),
                ..defaults
            },
        );
    })
}

/// A recorded two-player game: `per_conn` messages each, 50 ms apart, interleaved.
fn write_replay(path: &Path, per_conn: u32) -> usize {
    let records: Vec<Record> = (0..per_conn * 2)
        .map(|i| Record {
            at: Duration::from_millis(25 * u64::from(i)),
            conn: i % 2,
            op: 1,
            data: vec![i as u8, 7, 7],
        })
        .collect();
    let replay = Replay {
        connections: 2,
        records,
    };
    replay.write(path).expect("write replay");
    replay.records.len()
}

#[test]
fn rooms_of_a_line_based_game_server_replay_through_its_relay() {
    let relay = vec![relay_py(), "--port".into(), "{port}".into()];
    let muster = muster_running("relay", relay, "46000-46999", 2, None);
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("game.jsonl");
    let lines = write_replay(&file, 10);
    let scenario = format!(
        r#"name = "process-rooms"
[[phases]]
duration_s = 2
players = 6
[[phases]]
duration_s = 8
[[steps]]
do = "authenticate"
[[steps]]
do = "create_room"
handler = "relay"
[[steps]]
do = "room_connect"
protocol = "lines"
[[steps]]
do = "replay"
file = "{}"
"#,
        file.display()
    );
    let (code, report) = run_swarm(&muster.url(), dir.path(), "process-rooms", &scenario, 1);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["failed"], 0, "{}", report["errors"]);
    assert_eq!(count(&report, "room_create"), 6);
    assert_eq!(count(&report, "room_lookup"), 12);
    assert_eq!(count(&report, "join"), 12);
    // Every line one connection sent arrived at the other, through the game server.
    assert_eq!(count(&report, "relay") as usize, 6 * lines);
    // Measured from the intended send, on one clock: never zero, never negative.
    let fastest = report["metrics"]["relay"]["min"].as_f64().unwrap_or(0.0);
    assert!(fastest > 0.0, "{report:#}");
}

/// A game server that marks itself Ready and then refuses every player with `DENIED`.
const REFUSING_SERVER: &str = r#"
import os, socket, sys, urllib.request
port = int(sys.argv[1])
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(16)
sdk = "http://127.0.0.1:%s/ready" % os.environ["AGONES_SDK_HTTP_PORT"]
urllib.request.urlopen(urllib.request.Request(sdk, data=b"{}", method="POST"), timeout=5)
while True:
    conn, _ = listener.accept()
    conn.makefile("rb").readline()
    conn.sendall(b"DENIED not today\n")
    conn.close()
"#;

#[test]
fn a_refused_join_is_counted_as_game_denied() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("refuse.py");
    std::fs::write(&script, REFUSING_SERVER).expect("write script");
    // It never sends health pings: health is not checked (0).
    let args = vec![script.display().to_string(), "{port}".into()];
    let muster = muster_running("refuse", args, "47000-47999", 1, Some(0));
    let scenario = r#"name = "denied"
[[phases]]
duration_s = 1
players = 2
[[phases]]
duration_s = 5
[[steps]]
do = "authenticate"
[[steps]]
do = "create_room"
handler = "refuse"
[[steps]]
do = "room_connect"
protocol = "lines"
"#;
    let (_, report) = run_swarm(&muster.url(), dir.path(), "denied", scenario, 1);
    assert_eq!(report["failed"], 2, "{report:#}");
    assert_eq!(report["errors"]["game_denied"], 2, "{report:#}");
}
