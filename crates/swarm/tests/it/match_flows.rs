//! The match and room flows end to end: the real `swarm` binary against a real Muster started
//! in-process — Space Ape's (matchmake, join over TCP or WebSocket, play at a fixed rate, RTT and
//! client-interval) and Hathora's (create a room, look up its connection info, two TCP players,
//! record a game, replay it).

use crate::common;
use common::{count, rooms_replay_scenario, run_ok, space_ape_scenario, Muster};

#[test]
fn space_ape_and_hathora_flows() {
    let muster = Muster::start_with(|config| {
        config.matchmaker.match_handler = "arena".into();
        config.matchmaker.interval_ms = 100;
    });
    let port = muster.room_connection_info()["port"]
        .as_u64()
        .expect("TCP port");
    let dir = tempfile::tempdir().expect("dir");

    // Space Ape over TCP, inputs aligned to the server's ticks.
    let tcp = run_ok(
        &muster,
        dir.path(),
        "tcp",
        &space_ape_scenario(
            "match-tcp",
            &format!("transport = \"tcp\"\ntcp_port = {port}"),
        ),
    );
    assert_eq!(count(&tcp, "matchmake"), 6);
    assert_eq!(count(&tcp, "join"), 6);
    // 6 players × 1.5 s × 15 Hz = 135 inputs, each echoed once (the last may be in flight).
    let rtts = count(&tcp, "RTT");
    assert!((120..=135).contains(&rtts), "RTT samples: {rtts}");
    assert!(count(&tcp, "client-interval") >= 100);
    let interval_p80 = tcp["metrics"]["client-interval"]["percentile80"]
        .as_f64()
        .expect("p80");
    assert!(
        (50.0..100.0).contains(&interval_p80),
        "15 Hz sends: {interval_p80} ms"
    );

    // Space Ape over the WebSocket (JSON), free-running sends.
    let ws = run_ok(
        &muster,
        dir.path(),
        "ws",
        r#"
name = "match-ws"
[[phases]]
duration_s = 1
players = 4
[[phases]]
duration_s = 3
[[steps]]
do = "authenticate"
[[steps]]
do = "connect"
[[steps]]
do = "matchmake"
[[steps]]
do = "join_match"
[[steps]]
do = "play"
rate_hz = 10
duration_s = 1
align = "free"
"#,
    );
    assert!(count(&ws, "RTT") >= 30, "{}", ws["metrics"]);

    // Hathora: a room, two TCP players, the game recorded...
    let record = dir.path().join("game.jsonl");
    let rooms = run_ok(
        &muster,
        dir.path(),
        "record",
        &format!(
            r#"
name = "rooms-record"
[[phases]]
duration_s = 2.5
players = 1
[[steps]]
do = "authenticate"
[[steps]]
do = "create_room"
[[steps]]
do = "room_connect"
connections = 2
[[steps]]
do = "play"
rate_hz = 20
duration_s = 1
align = "free"
record = "{}"
"#,
            record.display()
        ),
    );
    assert_eq!(count(&rooms, "room_create"), 1);
    assert_eq!(count(&rooms, "room_lookup"), 2);
    let replay = swarm::scenario::replay::Replay::load(&record).expect("recorded");
    assert_eq!(replay.connections, 2);
    assert!(
        replay.records.len() >= 30,
        "{} records",
        replay.records.len()
    );
    assert!(replay.records.iter().any(|r| r.conn == 1));
    // ...then replayed by 3 new rooms.
    let replayed = run_ok(
        &muster,
        dir.path(),
        "replay",
        &rooms_replay_scenario("rooms-replay", 3, 2, &record.display().to_string()),
    );
    assert_eq!(count(&replayed, "room_create"), 3);
    assert_eq!(count(&replayed, "RTT") as usize, 3 * replay.records.len());
}
