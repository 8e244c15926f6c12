//! The world's commands that run with the server stopped: `muster world seed`, `checkpoint`
//! and `stats`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use muster_world::checkpoint::Snapshot;
use muster_world::shard::Shard;
use serde::Serialize;

use super::actions::Action;
use super::log::Record;
use super::{
    checkpoint_dir, checkpoint_path, load_or_seed, log, seed_city, seeded, Ground, Loaded,
};
use crate::world::config::WorldConfig;

/// What the commands report of a shard: its counts.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShardStats {
    shard: u32,
    tiles: usize,
    towers: usize,
    creeps: usize,
    routes: usize,
    tick_no: u64,
    now_ms: u64,
}

impl ShardStats {
    fn of(shard: &Shard) -> ShardStats {
        ShardStats {
            shard: shard.id,
            tiles: shard.tiles.len(),
            towers: shard.towers.len(),
            creeps: shard.creeps.alive(),
            routes: shard.routes.len(),
            tick_no: shard.tick_no,
            now_ms: shard.now_ms,
        }
    }
}

/// What the commands start from: the prepared map and the checkpoint directory.
fn offline(config: &WorldConfig, data_dir: &Path) -> anyhow::Result<(Ground, PathBuf)> {
    anyhow::ensure!(config.enabled(), "world.map is not set: there is no world");
    let ground = Ground::prepare(config)?;
    let dir = checkpoint_dir(config, data_dir);
    std::fs::create_dir_all(&dir)?;
    Ok((ground, dir))
}

/// `muster world seed`: seeds every shard per the configuration and writes its checkpoint,
/// without serving; refuses to replace existing checkpoints unless `force` (which also deletes
/// the replaced world's action log: its actions belong to the old world).
pub fn seed_offline(
    config: &WorldConfig,
    data_dir: &Path,
    force: bool,
) -> anyhow::Result<serde_json::Value> {
    let started = Instant::now();
    let (ground, dir) = offline(config, data_dir)?;
    let mut shards = Vec::new();
    for i in 0..config.shards {
        let path = checkpoint_path(&dir, i);
        anyhow::ensure!(
            force || !path.exists(),
            "{} exists: the world is already seeded (--force replaces it)",
            path.display()
        );
        // Written over any previous checkpoint in one atomic rename.
        let shard = seeded(config, &ground, i);
        let bytes = shard.snapshot().write(&path)?;
        log::remove_all(&dir, i)?;
        let mut stats = serde_json::to_value(ShardStats::of(&shard))?;
        stats["checkpointBytes"] = bytes.into();
        stats["city"] = seed_city(i).name.into();
        shards.push(stats);
    }
    Ok(serde_json::json!({
        "checkpointDir": dir,
        "roadNodes": ground.map.nodes.len(),
        "buildingsPerTile": ground.map.buildings.len(),
        "shards": shards,
        "ms": started.elapsed().as_millis() as u64,
    }))
}

/// `muster world checkpoint`: with the server stopped, folds each shard's action log into a
/// new checkpoint (restore, replay, write) and deletes the log segments it covers.
pub fn checkpoint_offline(
    config: &WorldConfig,
    data_dir: &Path,
) -> anyhow::Result<serde_json::Value> {
    let started = Instant::now();
    let (ground, dir) = offline(config, data_dir)?;
    let mut shards = Vec::new();
    for i in 0..config.shards {
        let Loaded {
            shard,
            restored,
            mut log,
            replayed,
            credits,
        } = load_or_seed(config, &ground, &dir, i)?;
        let bytes = shard.snapshot().write(&checkpoint_path(&dir, i))?;
        let boundary = log.rotate()?;
        // The credits the log holds may not be paid yet (paying needs the server): they stay
        // owed, in the new segment, before the ones the checkpoint covers are deleted.
        let owed: Vec<Record> = credits
            .into_iter()
            .map(|credit| Record {
                seq: log.next_seq(),
                t: shard.now_ms,
                user: credit.user,
                action: Action::Credit(credit),
            })
            .collect();
        log.append(&owed).map_err(|e| anyhow::anyhow!("{e}"))?;
        log.forget_before(boundary);
        let mut stats = serde_json::to_value(ShardStats::of(&shard))?;
        stats["restored"] = restored.into();
        stats["actionsReplayed"] = replayed.into();
        stats["checkpointBytes"] = bytes.into();
        shards.push(stats);
    }
    Ok(serde_json::json!({
        "checkpointDir": dir,
        "shards": shards,
        "ms": started.elapsed().as_millis() as u64,
    }))
}

/// `muster world stats`: what each shard's checkpoint holds (read and checked, not restored).
pub fn stats_offline(config: &WorldConfig, data_dir: &Path) -> anyhow::Result<serde_json::Value> {
    let dir = checkpoint_dir(config, data_dir);
    let mut shards = Vec::new();
    for i in 0..config.shards {
        let path = checkpoint_path(&dir, i);
        if !path.exists() {
            shards.push(serde_json::json!({"shard": i, "checkpoint": null}));
            continue;
        }
        let bytes = std::fs::metadata(&path)?.len();
        let snapshot = Snapshot::read(&path)?;
        let (tiles, towers, creeps, routes) = snapshot.counts();
        shards.push(serde_json::json!({
            "shard": i, "checkpoint": path, "checkpointBytes": bytes, "tiles": tiles,
            "towers": towers, "creeps": creeps, "routes": routes,
            "tickNo": snapshot.tick_no, "nowMs": snapshot.now_ms,
        }));
    }
    Ok(serde_json::json!({ "checkpointDir": dir, "shards": shards }))
}
