//! The match and room flows over Muster's ENet transport (reliable UDP), end to end: the real
//! `swarm` binary against a real Muster started in-process. Space Ape's flow (matchmake, join
//! over ENet, play at 15 Hz, RTT and client-interval) and Hathora's (create a room, look up its
//! connection info, two ENet players at its `enet` endpoint, play).

use std::path::Path;

use serde_json::Value;

mod common;
use common::{run_swarm, Muster};

fn run(muster: &Muster, dir: &Path, name: &str, scenario: &str) -> Value {
    let (code, report) = run_swarm(&muster.url(), dir, name, scenario, 1);
    assert_eq!(code, 0, "{name}: {report:#}");
    assert_eq!(report["failed"], 0, "{name}: {}", report["errors"]);
    report
}

fn count(report: &Value, metric: &str) -> u64 {
    report["metrics"][metric]["count"].as_u64().unwrap_or(0)
}

#[test]
fn space_ape_and_hathora_flows_over_enet() {
    let muster = Muster::start_with(|config| {
        config.matchmaker.match_handler = "arena".into();
        config.matchmaker.interval_ms = 100;
    });
    let port = muster.room_connection_info()["enet"]["port"]
        .as_u64()
        .expect("ENet port");
    let dir = tempfile::tempdir().expect("dir");

    let matched = run(
        &muster,
        dir.path(),
        "enet-match",
        &format!(
            r#"
name = "match-enet"
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
transport = "enet"
enet_port = {port}
[[steps]]
do = "play"
rate_hz = 15
duration_s = 1.5
"#
        ),
    );
    assert_eq!(count(&matched, "join"), 6);
    // 6 players × 1.5 s × 15 Hz = 135 inputs, each echoed once (the last may be in flight).
    let rtts = count(&matched, "RTT");
    assert!((120..=135).contains(&rtts), "RTT samples: {rtts}");
    let interval_p80 = matched["metrics"]["client-interval"]["percentile80"]
        .as_f64()
        .expect("p80");
    assert!(
        (50.0..100.0).contains(&interval_p80),
        "15 Hz sends: {interval_p80} ms"
    );

    let rooms = run(
        &muster,
        dir.path(),
        "enet-rooms",
        r#"
name = "rooms-enet"
[[phases]]
duration_s = 1
players = 3
[[phases]]
duration_s = 3
[[steps]]
do = "authenticate"
[[steps]]
do = "create_room"
capacity = 2
[[steps]]
do = "room_connect"
connections = 2
transport = "enet"
[[steps]]
do = "play"
rate_hz = 15
duration_s = 1
"#,
    );
    assert_eq!(count(&rooms, "room_create"), 3);
    assert_eq!(count(&rooms, "join"), 6);
    assert!(count(&rooms, "RTT") >= 70, "{}", rooms["metrics"]["RTT"]);
}
