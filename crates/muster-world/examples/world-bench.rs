//! Run with `cargo run --release -p muster-world --example world-bench -- PBF [key=value…]`
//! (bench/world.sh does): seeds one or more shards of the given extract's map (tiled until
//! each shard has buildings enough), then measures memory, ticks, checkpoints and restores, and
//! prints one JSON object.
//!
//! Keys: `towers` (263278) and `creeps` (527314) in all, `shards` (1), `tick_hz` (10),
//! `attack_hz` (1), `ticks` (300), `checkpoints` (5), `dir` (a temp dir: where checkpoints go),
//! `drop_caches` (0: 1 reads checkpoints back cold, after dropping the page cache; needs root).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use muster_world::checkpoint::Snapshot;
use muster_world::routing::Router;
use muster_world::seed::{seed, SeedPlan};
use muster_world::shard::{Rules, Shard};
use rand::SeedableRng;

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

fn ms(since: Instant) -> f64 {
    (since.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

fn main() {
    let mut args = std::env::args().skip(1);
    let pbf = PathBuf::from(args.next().expect("usage: world-bench PBF [key=value…]"));
    let kv: HashMap<String, String> = args
        .filter_map(|a| {
            a.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let get = |k: &str, d: f64| kv.get(k).and_then(|v| v.parse().ok()).unwrap_or(d);
    let towers = get("towers", 263_278.0) as usize;
    let creeps = get("creeps", 527_314.0) as usize;
    let shards = get("shards", 1.0).max(1.0) as usize;
    let ticks = get("ticks", 300.0) as usize;
    let checkpoints = get("checkpoints", 5.0) as usize;
    let drop_caches = get("drop_caches", 0.0) > 0.0;
    let rules = Rules {
        tick_hz: get("tick_hz", 10.0) as f32,
        attack_hz: get("attack_hz", 1.0) as f32,
        ..Rules::default()
    };
    let tmp = tempfile_dir(kv.get("dir"));

    let rss_start = rss_kb();
    let started = Instant::now();
    let map = Arc::new(muster_world::map::osm::import(&pbf).expect("import"));
    let import_ms = ms(started);
    let started = Instant::now();
    let router = Router::prepare(&map);
    let prepare_ms = ms(started);
    let rss_map = rss_kb();

    // Tiles per shard: towers take at most half of a shard's buildings.
    let per_shard = towers.div_ceil(shards);
    let tiles = (2 * per_shard).div_ceil(map.buildings.len().max(1)).max(1);
    let started = Instant::now();
    let mut world: Vec<Shard> = Vec::new();
    let mut seeded = Vec::new();
    let now = 1_000_000u64;
    for s in 0..shards {
        let layout = Shard::tile_layout(&map, tiles);
        let mut shard = Shard::new(s as u32, map.clone(), layout, rules.clone());
        let city = &muster_world::map::cities::bundled()[s % 50];
        let mut plan = SeedPlan::for_city(&shard, city, 1.0);
        plan.towers = per_shard;
        plan.creeps = creeps.div_ceil(shards);
        plan.connections = per_shard.div_ceil(8);
        let mut rng = rand::rngs::StdRng::seed_from_u64(s as u64);
        seeded.push(seed(&mut shard, &router, &plan, now, &mut rng));
        world.push(shard);
    }
    let seed_ms = ms(started);
    let rss_world = rss_kb();
    let heap: usize = world.iter().map(Shard::heap_bytes).sum();

    // Ticks: every shard ticks on its own thread (two cores: two at a time).
    let period_ms = 1000.0 / f64::from(rules.tick_hz);
    let mut durations = Vec::with_capacity(ticks);
    let mut late = 0;
    let mut totals = (0u64, 0u64, 0u64, 0u64, 0u64);
    for t in 1..=ticks as u64 {
        let at = now + (t as f64 * period_ms) as u64;
        let started = Instant::now();
        let reports: Vec<_> = std::thread::scope(|scope| {
            let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
            let chunk = world.len().div_ceil(workers);
            let handles: Vec<_> = world
                .chunks_mut(chunk)
                .map(|part| {
                    scope.spawn(move || part.iter_mut().map(|s| s.tick(at)).collect::<Vec<_>>())
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("tick thread"))
                .collect()
        });
        let took = ms(started);
        if took > period_ms {
            late += 1;
        }
        durations.push(took);
        for r in reports {
            totals.0 += r.moved;
            totals.1 += r.crossed;
            totals.2 += r.queries;
            totals.3 += r.shots;
            totals.4 += r.arrivals.len() as u64;
        }
    }
    durations.sort_by(f64::total_cmp);

    // Checkpoints: the pause (the copy) and the write, per shard; then restores.
    let mut pause = Vec::new();
    let mut write = Vec::new();
    let mut bytes = 0u64;
    let mut read = Vec::new();
    let mut restore: Vec<f64> = Vec::new();
    let mut floor: Vec<f64> = Vec::new();
    let mut snapshots: Vec<Snapshot> = world.iter().map(|_| Snapshot::default()).collect();
    for _ in 0..checkpoints {
        let mut round_bytes = 0;
        let started_all = Instant::now();
        // Each shard copies itself into the snapshot it keeps (warm memory after the first
        // checkpoint), on its own thread as each shard's task would in the server.
        let pauses: Vec<f64> = std::thread::scope(|scope| {
            let handles: Vec<_> = world
                .iter()
                .zip(snapshots.iter_mut())
                .map(|(shard, snap)| {
                    scope.spawn(move || {
                        let started = Instant::now();
                        shard.snapshot_into(snap);
                        ms(started)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("copy"))
                .collect()
        });
        let paused = pauses.iter().copied().fold(0.0, f64::max);
        let copy_ms = ms(started_all);
        let started = Instant::now();
        std::thread::scope(|scope| {
            let handles: Vec<_> = snapshots
                .iter()
                .map(|snap| {
                    let path = tmp.join(format!("shard-{}.world", snap.shard_id));
                    scope.spawn(move || snap.write(&path).expect("write"))
                })
                .collect();
            for h in handles {
                round_bytes += h.join().expect("writer");
            }
        });
        write.push(ms(started) + copy_ms);
        pause.push(paused);
        bytes = round_bytes;
        if drop_caches {
            let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
        }
        // Each shard read and rebuilt on its own thread.
        let started = Instant::now();
        let timed: Vec<(f64, Shard)> = std::thread::scope(|scope| {
            let handles: Vec<_> = world
                .iter()
                .map(|s| {
                    let (path, map, rules) = (
                        tmp.join(format!("shard-{}.world", s.id)),
                        map.clone(),
                        rules.clone(),
                    );
                    scope.spawn(move || {
                        let started = Instant::now();
                        let snap = Snapshot::read(&path).expect("read");
                        let read_ms = ms(started);
                        (read_ms, Shard::restore(snap, map, rules).expect("restore"))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("restore"))
                .collect()
        });
        restore.push(ms(started));
        read.push(timed.iter().map(|t| t.0).fold(0.0, f64::max));
        let restored: Vec<Shard> = timed.into_iter().map(|t| t.1).collect();
        assert_eq!(restored.len(), world.len());
        // The floor any restore that rebuilds its derived state in memory stands on, measured
        // the same way: each shard's file read into fresh memory and checksummed, then as many
        // fresh bytes written as the restored shard holds beyond the file, a thread a shard.
        let started = Instant::now();
        std::thread::scope(|scope| {
            for s in &restored {
                let path = tmp.join(format!("shard-{}.world", s.id));
                let derived = s.heap_bytes();
                scope.spawn(move || {
                    let file = std::fs::read(&path).expect("read");
                    std::hint::black_box(crc32fast::hash(&file));
                    let rest = derived.saturating_sub(file.len());
                    std::hint::black_box(vec![1u8; rest]);
                });
            }
        });
        floor.push(ms(started));
        assert!(restored
            .iter()
            .zip(&world)
            .all(|(a, b)| a.creeps == b.creeps && a.towers == b.towers));
    }
    let checkpoint_ms = median(write.clone());
    let restore_ms = median(restore.clone());
    let gb = |b: u64, ms: f64| {
        if ms > 0.0 {
            (b as f64 / 1e9) / (ms / 1e3)
        } else {
            0.0
        }
    };
    let json = format!(
        concat!(
            "{{\"bench\":\"world\",\"shards\":{},\"tilesPerShard\":{},\"buildingsPerTile\":{},",
            "\"mapWidthM\":{:.0},\"mapHeightM\":{:.0},\"roadNodes\":{},\"towers\":{},\"creeps\":{},\"routes\":{},\"unroutable\":{},",
            "\"importMs\":{},\"preparedMs\":{},\"seedMs\":{},",
            "\"rssStartKb\":{},\"rssMapKb\":{},\"rssWorldKb\":{},\"worldRssMb\":{:.1},\"worldHeapMb\":{:.1},",
            "\"tickHz\":{},\"attackHz\":{},\"ticks\":{},\"tickMs\":{{\"p50\":{},\"p99\":{},\"max\":{}}},\"lateTicks\":{},",
            "\"perTick\":{{\"moved\":{},\"crossed\":{},\"towerQueries\":{},\"shots\":{},\"arrivals\":{}}},",
            "\"checkpointBytes\":{},\"checkpointPauseMsMedian\":{},\"checkpointMsMedian\":{},\"checkpointGBps\":{:.2},",
            "\"restoreReadMsMedian\":{},\"restoreMsMedian\":{},\"restoreGBps\":{:.2},\"coldRestore\":{},",
            "\"restoreFloorMsMedian\":{},\"restoreFloorGBps\":{:.2}}}"
        ),
        shards,
        tiles,
        map.buildings.len(),
        map.bounds.width(),
        map.bounds.height(),
        map.nodes.len(),
        world.iter().map(|s| s.towers.len()).sum::<usize>(),
        world.iter().map(|s| s.creeps.alive()).sum::<usize>(),
        world.iter().map(|s| s.routes.len()).sum::<usize>(),
        seeded.iter().map(|r| r.unroutable).sum::<usize>(),
        import_ms,
        prepare_ms,
        seed_ms,
        rss_start,
        rss_map,
        rss_world,
        (rss_world.saturating_sub(rss_map)) as f64 / 1024.0,
        heap as f64 / 1048576.0,
        rules.tick_hz,
        rules.attack_hz,
        ticks,
        percentile(&durations, 0.5),
        percentile(&durations, 0.99),
        durations.last().copied().unwrap_or(0.0),
        late,
        totals.0 / ticks.max(1) as u64,
        totals.1 / ticks.max(1) as u64,
        totals.2 / ticks.max(1) as u64,
        totals.3 / ticks.max(1) as u64,
        totals.4 / ticks.max(1) as u64,
        bytes,
        median(pause),
        checkpoint_ms,
        gb(bytes, checkpoint_ms),
        median(read),
        restore_ms,
        gb(bytes, restore_ms),
        drop_caches,
        median(floor.clone()),
        gb(bytes, median(floor)),
    );
    println!("{json}");
}

fn tempfile_dir(given: Option<&String>) -> PathBuf {
    match given {
        Some(d) => {
            std::fs::create_dir_all(d).expect("dir");
            PathBuf::from(d)
        }
        None => {
            let d = std::env::temp_dir().join(format!("world-bench-{}", std::process::id()));
            std::fs::create_dir_all(&d).expect("dir");
            d
        }
    }
}
