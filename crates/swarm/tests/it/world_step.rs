//! swarm's `world` step against a real Muster running a world of Helsinki: players
//! pan viewports and claim buildings; the report counts snapshots, updates and their bytes, and
//! Muster counts the claims it applied.

use crate::common;

use std::path::PathBuf;

use common::{count, run_swarm, Muster};

fn helsinki_pbf() -> PathBuf {
    muster_world::testdata::helsinki_extract()
}

fn metric(muster: &Muster, name: &str) -> f64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let text = runtime.block_on(async {
        reqwest::get(format!("{}/metrics", muster.url()))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text")
    });
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// The report of 20 players panning and claiming for 4 s on a socket of `format`.
fn run_players(muster: &Muster, centre: (f32, f32), format: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("dir");
    let scenario = format!(
        r#"name = "world"
[[phases]]
duration_s = 2
players = 20
[[phases]]
duration_s = 6
[[steps]]
do = "authenticate"
[[steps]]
do = "connect"
format = "{format}"
[[steps]]
do = "world"
duration_s = 4
center = [{}, {}]
spread_m = 300
box_m = 800
pan_every_s = 1
claim_every_s = 1
"#,
        centre.0, centre.1
    );
    let (code, report) = run_swarm(&muster.url(), dir.path(), "world", &scenario, 1);
    assert_eq!(code, 0, "{format}: {report:#}");
    assert_eq!(report["failed"], 0, "{format}: {}", report["errors"]);
    // Four subscribes (the first and three pans) per player, each answered with a snapshot.
    assert!(count(&report, "world_subscribe") >= 20 * 3, "{report:#}");
    // Updates pushed at 5 per second, with their latency from the tick.
    assert!(count(&report, "world_update") >= 20 * 5, "{report:#}");
    let counters = &report["counters"];
    assert!(
        counters["worldStates"].as_u64() > Some(20 * 8),
        "{counters}"
    );
    assert!(
        counters["worldBytes"].as_u64() > counters["worldStates"].as_u64(),
        "{counters}"
    );
    report
}

fn bytes_per_state(report: &serde_json::Value) -> f64 {
    let counters = &report["counters"];
    counters["worldBytes"].as_f64().unwrap_or(0.0) / counters["worldStates"].as_f64().unwrap_or(1.0)
}

#[test]
fn players_pan_claim_and_receive_the_worlds_updates_in_json_and_protobuf() {
    let pbf = helsinki_pbf();
    let map = muster_world::map::osm::import(&pbf).expect("map");
    let centre = (
        (map.bounds.min.x + map.bounds.max.x) / 2.0,
        (map.bounds.min.y + map.bounds.max.y) / 2.0,
    );
    // A server each: a player's buildings are drawn from its index, so a second run's claims
    // would all find them taken.
    let start = || {
        Muster::start_with(|config| {
            config.world.map = pbf.display().to_string();
            // Claims cost coins: the players start with some (the default wallet is empty).
            config.economy.starting_wallet = [("coins".to_owned(), 1_000_000)].into();
            config.world.seed_towers_per_shard = 150;
        })
    };
    let muster = start();
    let json = run_players(&muster, centre, "json");
    // Some claims landed (others found the building taken).
    assert!(metric(&muster, "muster_world_actions_total") >= 1.0);
    drop(muster);
    // The same on protobuf sockets: binary states, claims as protobuf rpcs, and the views
    // several times smaller than in JSON.
    let muster = start();
    let protobuf = run_players(&muster, centre, "protobuf");
    assert!(metric(&muster, "muster_world_actions_total") >= 1.0);
    assert!(
        bytes_per_state(&protobuf) * 2.0 < bytes_per_state(&json),
        "protobuf {} B a state, JSON {}",
        bytes_per_state(&protobuf),
        bytes_per_state(&json)
    );
}
