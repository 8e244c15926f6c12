//! The physical reference for leaderboard ranks (bench/leaderboard.sh): the same order-statistic
//! B-tree and owner map that `leaderboards::rank` keeps, with nothing else around it — no HTTP,
//! no database, no lock. On one leaderboard of RECORDS records it times, on one thread:
//! - `update`: a record's new score (the old entry out, the new one in, its rank read), as a
//!   leaderboard write does in memory;
//! - `around`: an owner's rank and the `limit` entries on each side of it, as a listing around
//!   an owner needs.
//!
//! Prints JSON: operations per second of each (the median of RUNS runs).
//!
//! Usage: cargo run --release -p muster --example rank_reference -- [RECORDS] [OPS] [RUNS] [LIMIT]

use std::collections::HashMap;
use std::time::Instant;

use rand::{Rng as _, SeedableRng as _};
use uuid::Uuid;
use wabi_tree::OSBTreeSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    score: i64,
    subscore: i64,
    owner: Uuid,
}

struct Board {
    ordered: OSBTreeSet<Entry>,
    owners: HashMap<Uuid, Entry>,
}

impl Board {
    fn put(&mut self, owner: Uuid, score: i64) -> usize {
        if let Some(old) = self.owners.get(&owner) {
            self.ordered.remove(old);
        }
        let entry = Entry {
            score,
            subscore: 0,
            owner,
        };
        self.ordered.insert(entry);
        self.owners.insert(owner, entry);
        self.ordered.rank_of(&entry).unwrap_or(0)
    }

    /// The owner's rank and how many entries were read around it.
    fn around(&self, owner: &Uuid, limit: usize) -> (usize, usize) {
        let entry = self.owners[owner];
        let rank = self.ordered.rank_of(&entry).unwrap_or(0);
        let above = self.ordered.range(..entry).rev().take(limit).count();
        let below = self.ordered.range(entry..).skip(1).take(limit).count();
        (rank, above + below)
    }
}

fn arg(index: usize, default: usize) -> usize {
    std::env::args()
        .nth(index)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let records = arg(1, 1_000_000);
    let ops = arg(2, 1_000_000);
    let runs = arg(3, 3).max(1);
    let limit = arg(4, 10);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let owners: Vec<Uuid> = (0..records)
        .map(|_| Uuid::from_u128(rng.random()))
        .collect();
    let mut board = Board {
        ordered: OSBTreeSet::new(),
        owners: HashMap::with_capacity(records),
    };
    let loaded = Instant::now();
    for owner in &owners {
        board.put(*owner, rng.random_range(0..1_000_000_000));
    }
    let load_s = loaded.elapsed().as_secs_f64();

    let (mut updates, mut arounds) = (Vec::new(), Vec::new());
    let mut checksum = 0usize;
    for _ in 0..runs {
        let started = Instant::now();
        for _ in 0..ops {
            let owner = owners[rng.random_range(0..records)];
            checksum ^= board.put(owner, rng.random_range(0..1_000_000_000));
        }
        updates.push(ops as f64 / started.elapsed().as_secs_f64());
        let started = Instant::now();
        for _ in 0..ops {
            let owner = owners[rng.random_range(0..records)];
            let (rank, read) = board.around(&owner, limit);
            checksum ^= rank + read;
        }
        arounds.push(ops as f64 / started.elapsed().as_secs_f64());
    }
    println!(
        "{}",
        serde_json::json!({
            "reference": "rank",
            "records": records,
            "opsPerRun": ops,
            "runs": runs,
            "limit": limit,
            "loadS": (load_s * 100.0).round() / 100.0,
            "updatesPerS": median(updates).round(),
            "aroundPerS": median(arounds).round(),
            "checksum": checksum % 1000,
        })
    );
}
