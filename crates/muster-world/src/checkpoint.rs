//! Checkpoints: a shard's persisted state in a compact binary file, written while the shard
//! keeps ticking and replaced atomically.
//!
//! Taking a [`Snapshot`] copies the shard's columns (the only pause: a memory copy, tens of ms
//! for a TDWorld-sized shard); writing it happens elsewhere. The file is written to
//! `<path>.tmp`, synced, renamed over `<path>` and the directory synced, so a crash at any point
//! leaves either the previous checkpoint or the new one, whole. A CRC-32 over the content
//! catches a torn or damaged file on restore.
//!
//! Layout (little-endian): `MUSTERWD`, version `u32` (2: with the players and the last action
//! applied), then fixed fields and arrays, each array
//! a `u64` element count followed by its elements' bytes, then the CRC-32 of everything before
//! it. Derived state (grid, cursors, tower index) is not written; restore rebuilds it.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytemuck::Pod;

use crate::actors::{Creeps, Towers};
use crate::geo::Point;
use crate::map::RoadMap;
use crate::routes::RouteStore;
use crate::shard::{Rules, Shard};
use crate::WorldError;

const MAGIC: &[u8; 8] = b"MUSTERWD";
const VERSION: u32 = 2;

#[cfg(not(target_endian = "little"))]
compile_error!("checkpoints are written little-endian as in memory: a big-endian host needs a byte-swapping writer");

/// A shard's persisted state, copied out of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub shard_id: u32,
    /// The tiles' offsets, flattened `x, y`.
    tiles: Vec<f32>,
    pub tick_no: u64,
    pub now_ms: u64,
    /// The last player action applied.
    pub applied: u64,
    players: Vec<u128>,
    route_starts: Vec<u32>,
    route_points: Vec<f32>,
    /// Each route's end nodes, flattened.
    route_ends: Vec<u32>,
    towers: Towers,
    creep_owner: Vec<u32>,
    creep_route: Vec<u32>,
    creep_start: Vec<u64>,
    creep_speed: Vec<f32>,
    creep_hp: Vec<u16>,
    creep_generation: Vec<u16>,
}

impl Shard {
    /// Copies the persisted state (the shard's only pause for a checkpoint).
    pub fn snapshot(&self) -> Snapshot {
        let mut snapshot = Snapshot::default();
        self.snapshot_into(&mut snapshot);
        snapshot
    }

    /// Copies the persisted state into `into`, reusing its memory: a shard that keeps one
    /// snapshot for its checkpoints pays a plain memory copy each time, not fresh pages (whose
    /// zeroing by the kernel would cost more than the copy).
    pub fn snapshot_into(&self, into: &mut Snapshot) {
        into.shard_id = self.id;
        into.tick_no = self.tick_no;
        into.now_ms = self.now_ms;
        into.applied = self.applied;
        into.players.clone_from(&self.players);
        into.tiles.clear();
        into.tiles
            .extend(self.tiles.iter().flat_map(|p| [p.x, p.y]));
        into.route_starts.clone_from(&self.routes.starts);
        into.route_points.clone_from(&self.routes.points);
        into.route_ends.clear();
        into.route_ends
            .extend(self.routes.ends().into_iter().flat_map(|(a, b)| [a, b]));
        into.towers.clone_from(&self.towers);
        into.creep_owner.clone_from(&self.creeps.owner);
        into.creep_route.clone_from(&self.creeps.route);
        into.creep_start.clone_from(&self.creeps.start_ms);
        into.creep_speed.clone_from(&self.creeps.speed);
        into.creep_hp.clone_from(&self.creeps.hp);
        into.creep_generation.clone_from(&self.creeps.generation);
    }

    /// The shard a snapshot holds, on `map` with `rules`, its derived state rebuilt.
    pub fn restore(
        snapshot: Snapshot,
        map: Arc<RoadMap>,
        rules: Rules,
    ) -> Result<Shard, WorldError> {
        let s = snapshot;
        let routes = s.route_starts.len().saturating_sub(1);
        let sane = !s.route_starts.is_empty()
            && s.route_ends.len() == 2 * routes
            && s.route_starts.windows(2).all(|w| w[0] < w[1])
            && s.route_starts
                .last()
                .is_some_and(|&e| e as usize * 3 == s.route_points.len())
            && !s.tiles.is_empty()
            && s.tiles.len().is_multiple_of(2)
            && s.towers
                .building
                .iter()
                .all(|&b| (b as usize) < map.buildings.len() * s.tiles.len() / 2)
            && s.creep_route
                .iter()
                .zip(&s.creep_hp)
                .all(|(&r, &hp)| hp == 0 || (r as usize) < routes)
            && s.route_ends
                .iter()
                .all(|&n| (n as usize) < map.nodes.len() * s.tiles.len() / 2);
        if !sane {
            return Err(WorldError::Checkpoint(
                "the checkpoint does not fit this map (routes, towers or creeps out of range)"
                    .into(),
            ));
        }
        let ends: Vec<(u32, u32)> = s.route_ends.chunks(2).map(|c| (c[0], c[1])).collect();
        let tiles = s.tiles.chunks(2).map(|c| Point::new(c[0], c[1])).collect();
        let mut shard = Shard::new(s.shard_id, map, tiles, rules);
        shard.tick_no = s.tick_no;
        shard.now_ms = s.now_ms;
        shard.applied = s.applied;
        shard.players = s.players;
        shard.routes = RouteStore::from_parts(s.route_starts, s.route_points, &ends);
        shard.towers = s.towers;
        shard.creeps = Creeps {
            owner: s.creep_owner,
            route: s.creep_route,
            start_ms: s.creep_start,
            speed: s.creep_speed,
            hp: s.creep_hp,
            generation: s.creep_generation,
            ..Default::default()
        };
        shard.rebuild();
        Ok(shard)
    }
}

/// A writer that keeps a CRC-32 of what passes through.
struct Hashing<W> {
    inner: W,
    crc: crc32fast::Hasher,
    bytes: u64,
}

impl<W: Write> Hashing<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc.update(bytes);
        self.bytes += bytes.len() as u64;
        self.inner.write_all(bytes)
    }

    fn array<T: Pod>(&mut self, items: &[T]) -> std::io::Result<()> {
        self.put(&(items.len() as u64).to_le_bytes())?;
        self.put(bytemuck::cast_slice(items))
    }
}

struct Checked<R> {
    inner: R,
    crc: crc32fast::Hasher,
}

impl<R: Read> Checked<R> {
    fn take(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.read_exact(buf)?;
        self.crc.update(buf);
        Ok(())
    }

    fn u32(&mut self) -> std::io::Result<u32> {
        let mut b = [0u8; 4];
        self.take(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        self.take(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// An array, read straight into its vector's memory; `limit` bounds its length by what
    /// the file can hold, so a damaged count cannot ask for terabytes.
    fn array<T: Pod + Default>(&mut self, limit: u64) -> std::io::Result<Vec<T>> {
        let n = self.u64()?;
        if n.saturating_mul(std::mem::size_of::<T>() as u64) > limit {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "an array longer than the file",
            ));
        }
        let mut items = vec![T::default(); n as usize];
        self.take(bytemuck::cast_slice_mut(&mut items))?;
        Ok(items)
    }
}

impl Snapshot {
    /// Writes the snapshot to `path` atomically; returns the bytes written.
    pub fn write(&self, path: &Path) -> Result<u64, WorldError> {
        let io = |e: std::io::Error| WorldError::Checkpoint(format!("{}: {e}", path.display()));
        let tmp = tmp_path(path);
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io)?;
        let mut w = Hashing {
            inner: BufWriter::with_capacity(1 << 20, file),
            crc: crc32fast::Hasher::new(),
            bytes: 0,
        };
        w.put(MAGIC).map_err(io)?;
        w.put(&VERSION.to_le_bytes()).map_err(io)?;
        w.put(&self.shard_id.to_le_bytes()).map_err(io)?;
        w.put(&self.tick_no.to_le_bytes()).map_err(io)?;
        w.put(&self.now_ms.to_le_bytes()).map_err(io)?;
        w.put(&self.applied.to_le_bytes()).map_err(io)?;
        w.array(&self.players).map_err(io)?;
        w.array(&self.tiles).map_err(io)?;
        w.array(&self.route_starts).map_err(io)?;
        w.array(&self.route_points).map_err(io)?;
        w.array(&self.route_ends).map_err(io)?;
        w.array(&self.towers.x).map_err(io)?;
        w.array(&self.towers.y).map_err(io)?;
        w.array(&self.towers.owner).map_err(io)?;
        w.array(&self.towers.building).map_err(io)?;
        w.array(&self.towers.level).map_err(io)?;
        w.array(&self.creep_owner).map_err(io)?;
        w.array(&self.creep_route).map_err(io)?;
        w.array(&self.creep_start).map_err(io)?;
        w.array(&self.creep_speed).map_err(io)?;
        w.array(&self.creep_hp).map_err(io)?;
        w.array(&self.creep_generation).map_err(io)?;
        let crc = w.crc.clone().finalize();
        let total = w.bytes + 4;
        let mut inner = w.inner;
        inner.write_all(&crc.to_le_bytes()).map_err(io)?;
        let file = inner.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        drop(file);
        std::fs::rename(&tmp, path).map_err(io)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        }
        Ok(total)
    }

    /// Reads a snapshot written by [`Snapshot::write`], checking its format and checksum.
    pub fn read(path: &Path) -> Result<Snapshot, WorldError> {
        let bad = |why: String| WorldError::Checkpoint(format!("{}: {why}", path.display()));
        let file = File::open(path).map_err(|e| bad(e.to_string()))?;
        let size = file.metadata().map_err(|e| bad(e.to_string()))?.len();
        let mut r = Checked {
            inner: BufReader::with_capacity(1 << 20, file),
            crc: crc32fast::Hasher::new(),
        };
        let io = |e: std::io::Error| bad(format!("truncated or damaged ({e})"));
        let mut magic = [0u8; 8];
        r.take(&mut magic).map_err(io)?;
        if &magic != MAGIC {
            return Err(bad("not a Muster world checkpoint".into()));
        }
        let version = r.u32().map_err(io)?;
        if version != VERSION {
            return Err(bad(format!(
                "checkpoint version {version}, this build reads {VERSION}"
            )));
        }
        let shard_id = r.u32().map_err(io)?;
        let tick_no = r.u64().map_err(io)?;
        let now_ms = r.u64().map_err(io)?;
        let applied = r.u64().map_err(io)?;
        let players = r.array(size).map_err(io)?;
        let snapshot = Snapshot {
            shard_id,
            tick_no,
            now_ms,
            applied,
            players,
            tiles: r.array(size).map_err(io)?,
            route_starts: r.array(size).map_err(io)?,
            route_points: r.array(size).map_err(io)?,
            route_ends: r.array(size).map_err(io)?,
            towers: Towers {
                x: r.array(size).map_err(io)?,
                y: r.array(size).map_err(io)?,
                owner: r.array(size).map_err(io)?,
                building: r.array(size).map_err(io)?,
                level: r.array(size).map_err(io)?,
            },
            creep_owner: r.array(size).map_err(io)?,
            creep_route: r.array(size).map_err(io)?,
            creep_start: r.array(size).map_err(io)?,
            creep_speed: r.array(size).map_err(io)?,
            creep_hp: r.array(size).map_err(io)?,
            creep_generation: r.array(size).map_err(io)?,
        };
        let computed = r.crc.clone().finalize();
        let mut stored = [0u8; 4];
        r.inner.read_exact(&mut stored).map_err(io)?;
        if u32::from_le_bytes(stored) != computed {
            return Err(bad("checksum mismatch: the file is damaged".into()));
        }
        let n = snapshot.towers.owner.len();
        let m = snapshot.creep_owner.len();
        let columns_agree = [
            snapshot.towers.x.len(),
            snapshot.towers.y.len(),
            snapshot.towers.building.len(),
            snapshot.towers.level.len(),
        ]
        .iter()
        .all(|&l| l == n)
            && [
                snapshot.creep_route.len(),
                snapshot.creep_start.len(),
                snapshot.creep_speed.len(),
                snapshot.creep_hp.len(),
                snapshot.creep_generation.len(),
            ]
            .iter()
            .all(|&l| l == m);
        if !columns_agree {
            return Err(bad("columns of different lengths".into()));
        }
        Ok(snapshot)
    }

    /// Tiles, towers, live creeps and routes it holds.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        (
            self.tiles.len() / 2,
            self.towers.len(),
            self.creep_hp.iter().filter(|&&hp| hp > 0).count(),
            self.route_starts.len().saturating_sub(1),
        )
    }
}

/// Where a checkpoint is written before it replaces `path`.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}
