//! The match and room flows over Muster's ENet transport (reliable UDP), end to end: the real
//! `swarm` binary against a real Muster started in-process. Space Ape's flow (matchmake, join
//! over ENet, play at 15 Hz, RTT and client-interval) and Hathora's (create a room, look up its
//! connection info, two ENet players at its `enet` endpoint, play).

use crate::common;
use common::{count, run_ok, space_ape_scenario, Muster};

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

    let matched = run_ok(
        &muster,
        dir.path(),
        "enet-match",
        &space_ape_scenario(
            "match-enet",
            &format!("transport = \"enet\"\nenet_port = {port}"),
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

    let rooms = run_ok(
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
