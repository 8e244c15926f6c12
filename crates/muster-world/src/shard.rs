//! A shard: one region of the world, its towers, creeps and routes, its indexes, and the tick
//! that moves creeps, lets towers attack and pays arrivals.
//!
//! A region is one or more *tiles*: copies of the map at offsets on the world's plane (one real
//! extract replicated to reach a benchmark's scale, or one city per tile). Buildings and road
//! nodes are numbered across the shard's tiles: building `b` is building `b % B` of the map in
//! tile `b / B` (B buildings per map), and the same for road nodes. Routes stay within a tile.
//!
//! A shard is plain data driven by its owner: `tick(now_ms)` takes the time as an argument, so
//! tests drive it with a paused clock and the server with a timer, one task per shard.

use std::sync::Arc;

use fast_paths::PathCalculator;
use serde::{Deserialize, Serialize};

use crate::actors::{Creeps, Towers, NPC_OWNERS, PLAYER_OWNERS};
use crate::geo::{Point, Rect};
use crate::index::grid::{Entry, Grid};
use crate::index::towers::TowerIndex;
use crate::map::RoadMap;
use crate::routes::{RouteStore, NO_CURSOR};
use crate::routing::Router;
use crate::WorldError;

/// No tower stands on the building.
const NO_TOWER: u32 = u32::MAX;

/// How a shard plays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rules {
    /// Ticks per second.
    pub tick_hz: f32,
    /// How often each tower looks for a creep in range and fires, per second (towers take
    /// turns across the ticks of a period).
    pub attack_hz: f32,
    /// Side of the creep grid's cells, metres.
    pub cell_m: f32,
    /// A level-1 tower's range, metres; each level adds a tenth.
    pub range_m: f32,
    /// Damage of one shot of a level-1 tower; each level adds as much again.
    pub damage: u16,
    /// A new creep's hit points.
    pub creep_hp: u16,
    /// What a creep that reaches its target earns its owner per kilometre driven (at least 1).
    pub reward_per_km: u32,
    /// Highest tower level.
    pub max_level: u8,
    /// An NPC creep that arrives or is killed sets off again from the start of its route (the
    /// seeded traffic keeps flowing).
    pub npc_respawn: bool,
    /// What a player pays to claim a building (in the world's currency; 0: free).
    pub claim_cost: u32,
    /// What a player pays to upgrade a tower, per level it reaches (level 2 costs twice this).
    pub upgrade_cost: u32,
    /// What a player pays to send a creep, per kilometre of its route (rounded up; at least 1
    /// unless 0). The default equals `reward_per_km`: a creep that arrives earns its cost back,
    /// one killed on the way loses it, so spawning alone makes nothing.
    pub spawn_cost_per_km: u32,
    /// Towers one player may hold in a shard.
    pub max_towers_per_player: u32,
    /// Creeps of one player on the road at once in a shard.
    pub max_creeps_per_player: u32,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules {
            tick_hz: 10.0,
            attack_hz: 1.0,
            cell_m: 200.0,
            range_m: 60.0,
            damage: 10,
            creep_hp: 100,
            reward_per_km: 10,
            max_level: 10,
            npc_respawn: true,
            claim_cost: 100,
            upgrade_cost: 100,
            spawn_cost_per_km: 10,
            max_towers_per_player: 1000,
            max_creeps_per_player: 1000,
        }
    }
}

impl Rules {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.tick_hz > 0.0 && self.tick_hz <= 100.0) {
            return Err("tick_hz must be above 0 and at most 100".into());
        }
        if !(self.attack_hz > 0.0 && self.attack_hz <= self.tick_hz) {
            return Err("attack_hz must be above 0 and at most tick_hz".into());
        }
        if !(self.cell_m >= 10.0 && self.range_m > 0.0 && self.range_m <= 10_000.0) {
            return Err("cell_m must be at least 10 and range_m between 0 and 10000".into());
        }
        if self.creep_hp == 0 || self.max_level == 0 {
            return Err("creep_hp and max_level must be at least 1".into());
        }
        if self.max_towers_per_player == 0 || self.max_creeps_per_player == 0 {
            return Err(
                "max_towers_per_player and max_creeps_per_player must be at least 1".into(),
            );
        }
        Ok(())
    }

    pub fn range_of(&self, level: u8) -> f32 {
        self.range_m * (1.0 + 0.1 * f32::from(level.saturating_sub(1)))
    }

    fn damage_of(&self, level: u8) -> u16 {
        self.damage.saturating_mul(u16::from(level.max(1)))
    }

    /// Ticks between two shots of one tower.
    fn attack_every(&self) -> u64 {
        ((self.tick_hz / self.attack_hz).round() as u64).max(1)
    }
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TickReport {
    /// Creeps moved, and those that crossed into another cell.
    pub moved: u64,
    pub crossed: u64,
    /// Towers that looked for a target, shots fired, creeps killed.
    pub queries: u64,
    pub shots: u64,
    pub kills: u64,
    /// Creeps that reached their target.
    pub arrivals: Vec<Arrival>,
}

/// A creep that reached its target, and what it earns its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    pub owner: u32,
    pub reward: u32,
    /// The creep's public id and when it set off: together, this arrival's identity (a payment
    /// keyed on it is made once, even if a restore replays the drive).
    pub creep: u64,
    pub start_ms: u64,
}

/// A player's towers and creeps on the road in a shard.
#[derive(Debug, Clone, Default)]
struct Holdings {
    towers: Vec<u32>,
    creeps: u32,
}

/// One region of the world.
pub struct Shard {
    pub id: u32,
    pub map: Arc<RoadMap>,
    /// Where each copy of the map lies on the world's plane.
    pub tiles: Vec<Point>,
    pub rules: Rules,
    pub routes: RouteStore,
    pub towers: Towers,
    pub creeps: Creeps,
    /// The tower standing on each building of the map, or [`NO_TOWER`].
    building_tower: Vec<u32>,
    grid: Grid,
    tower_index: TowerIndex,
    pub tick_no: u64,
    pub now_ms: u64,
    /// The players who own something here, by owner id (`PLAYER_OWNERS.start + index`); ids
    /// are the world user's (Muster's user ids).
    pub players: Vec<u128>,
    player_owner: std::collections::HashMap<u128, u32>,
    /// What each player owner holds: the bound on what one player's requests can grow.
    holdings: std::collections::HashMap<u32, Holdings>,
    /// The last player action applied (its sequence number in the world user's action log).
    pub applied: u64,
}

impl Shard {
    /// The owner id of player `id`, given one on first use.
    pub fn owner_of(&mut self, id: u128) -> u32 {
        if let Some(&owner) = self.player_owner.get(&id) {
            return owner;
        }
        let owner = PLAYER_OWNERS.start + self.players.len() as u32;
        self.players.push(id);
        self.player_owner.insert(id, owner);
        owner
    }

    /// Player `id`'s owner id, if they have one yet (nothing is given).
    pub fn known_owner(&self, id: u128) -> Option<u32> {
        self.player_owner.get(&id).copied()
    }

    /// The towers player owner `owner` holds.
    pub fn towers_of(&self, owner: u32) -> &[u32] {
        self.holdings.get(&owner).map_or(&[], |h| &h.towers)
    }

    /// The creeps player owner `owner` has on the road.
    pub fn creeps_of(&self, owner: u32) -> u32 {
        self.holdings.get(&owner).map_or(0, |h| h.creeps)
    }

    /// Whether route `route` leaves from the road node of one of `owner`'s towers (the only
    /// routes a player may send creeps along).
    pub fn route_leaves_from(&self, route: u32, owner: u32) -> bool {
        let Some(first) = self.routes.first_node(route) else {
            return false;
        };
        self.towers_of(owner)
            .iter()
            .any(|&t| self.building_node(self.towers.building[t as usize]) == Some(first))
    }

    /// The player an owner id stands for (`None`: an NPC or nobody).
    pub fn player_of(&self, owner: u32) -> Option<u128> {
        let i = owner.checked_sub(PLAYER_OWNERS.start)?;
        self.players.get(i as usize).copied()
    }

    /// An empty shard of `map` copied at each of `tiles` (at least one).
    pub fn new(id: u32, map: Arc<RoadMap>, tiles: Vec<Point>, rules: Rules) -> Shard {
        let tiles = if tiles.is_empty() {
            vec![Point::default()]
        } else {
            tiles
        };
        let area = area_of(&map, &tiles);
        Shard {
            id,
            building_tower: vec![NO_TOWER; map.buildings.len() * tiles.len()],
            grid: Grid::new(area, rules.cell_m),
            tower_index: TowerIndex::new(area, rules.cell_m),
            map,
            tiles,
            rules,
            routes: RouteStore::new(),
            towers: Towers::default(),
            creeps: Creeps::default(),
            tick_no: 0,
            now_ms: 0,
            players: Vec::new(),
            player_owner: std::collections::HashMap::new(),
            holdings: std::collections::HashMap::new(),
            applied: 0,
        }
    }

    /// `count` tiles side by side in rows, a kilometre apart.
    pub fn tile_layout(map: &RoadMap, count: usize) -> Vec<Point> {
        let cols = (count as f64).sqrt().ceil().max(1.0) as usize;
        let (w, h) = (map.bounds.width() + 1000.0, map.bounds.height() + 1000.0);
        (0..count)
            .map(|i| Point::new((i % cols) as f32 * w, (i / cols) as f32 * h))
            .collect()
    }

    /// The shard's area on the world's plane.
    pub fn area(&self) -> Rect {
        area_of(&self.map, &self.tiles)
    }

    /// Buildings across the shard's tiles.
    pub fn building_count(&self) -> u32 {
        (self.map.buildings.len() * self.tiles.len()) as u32
    }

    /// Where building `b` stands on the world's plane.
    pub fn building_pos(&self, b: u32) -> Option<Point> {
        let per = self.map.buildings.len();
        if per == 0 {
            return None;
        }
        let (tile, local) = (b as usize / per, b as usize % per);
        let offset = self.tiles.get(tile)?;
        let p = self.map.buildings[local].pos;
        Some(Point::new(p.x + offset.x, p.y + offset.y))
    }

    /// The road node (numbered across tiles) that building `b`'s creeps leave from.
    fn building_node(&self, b: u32) -> Option<u32> {
        let per = self.map.buildings.len();
        let tile = b as usize / per.max(1);
        (tile < self.tiles.len()).then(|| {
            let local = self.map.buildings[b as usize % per].road_node;
            (tile * self.map.nodes.len()) as u32 + local
        })
    }

    /// The tile tower `t` stands in.
    pub fn tile_of_tower(&self, t: u32) -> Option<usize> {
        let b = *self.towers.building.get(t as usize)?;
        Some(b as usize / self.map.buildings.len().max(1))
    }

    /// The tower on building `b`, if any.
    pub fn tower_on(&self, b: u32) -> Option<u32> {
        self.building_tower
            .get(b as usize)
            .copied()
            .filter(|&t| t != NO_TOWER)
    }

    /// `owner` claims building `b` as a level-1 tower.
    pub fn claim(&mut self, b: u32, owner: u32) -> Result<u32, WorldError> {
        let pos = self.building_pos(b).ok_or(WorldError::UnknownBuilding(b))?;
        if let Some(t) = self.tower_on(b) {
            return Err(WorldError::AlreadyClaimed {
                building: b,
                owner: self.towers.owner[t as usize],
            });
        }
        if PLAYER_OWNERS.contains(&owner)
            && self.towers_of(owner).len() >= self.rules.max_towers_per_player as usize
        {
            return Err(WorldError::TooManyTowers(self.rules.max_towers_per_player));
        }
        let t = self.towers.push(pos, owner, b, 1);
        self.building_tower[b as usize] = t;
        self.tower_index.insert(pos, t);
        if PLAYER_OWNERS.contains(&owner) {
            self.holdings.entry(owner).or_default().towers.push(t);
        }
        Ok(t)
    }

    /// Claims many buildings at once and bulk-loads the tower index (seeding, restoring).
    pub(crate) fn claim_bulk(&mut self, claims: impl Iterator<Item = (u32, u32, u8)>) {
        for (b, owner, level) in claims {
            if self.tower_on(b).is_some() {
                continue;
            }
            let Some(pos) = self.building_pos(b) else {
                continue;
            };
            let t = self.towers.push(pos, owner, b, level);
            self.building_tower[b as usize] = t;
        }
        self.reindex_towers();
    }

    fn reindex_towers(&mut self) {
        self.tower_index = TowerIndex::build(
            self.area(),
            self.rules.cell_m,
            (0..self.towers.len() as u32).map(|t| (self.towers.pos(t), t)),
        );
    }

    /// `owner` raises its tower `t` one level; returns the new level.
    pub fn upgrade(&mut self, t: u32, owner: u32) -> Result<u8, WorldError> {
        let i = t as usize;
        if i >= self.towers.len() {
            return Err(WorldError::UnknownTower(t));
        }
        if self.towers.owner[i] != owner {
            return Err(WorldError::NotYours(t));
        }
        if self.towers.level[i] >= self.rules.max_level {
            return Err(WorldError::MaxLevel(self.rules.max_level));
        }
        self.towers.level[i] += 1;
        Ok(self.towers.level[i])
    }

    /// The road nodes (numbered across tiles) a route between towers `from` and `to` joins.
    pub fn route_ends(&self, from: u32, to: u32) -> Result<(u32, u32), WorldError> {
        let node = |t: u32| {
            let b = *self
                .towers
                .building
                .get(t as usize)
                .ok_or(WorldError::UnknownTower(t))?;
            self.building_node(b).ok_or(WorldError::UnknownBuilding(b))
        };
        let (a, b) = (node(from)?, node(to)?);
        let per = self.map.nodes.len() as u32;
        if a == b {
            return Err(WorldError::SameRoad);
        }
        if a / per != b / per {
            // Tiles are copies of the map side by side, with no road between them.
            return Err(WorldError::NoRoute);
        }
        Ok((a, b))
    }

    /// Which tile a pair of ends lies in, and the ends as the map numbers them.
    fn local_ends(&self, ends: (u32, u32)) -> (usize, u32, u32) {
        let per = self.map.nodes.len() as u32;
        ((ends.0 / per) as usize, ends.0 % per, ends.1 % per)
    }

    /// Stores the route `nodes` (the map's numbering, from the router) joining `ends` (from
    /// [`Shard::route_ends`]) and returns its id.
    pub fn add_route(&mut self, ends: (u32, u32), nodes: &[u32]) -> Result<u32, WorldError> {
        let (tile, a, b) = self.local_ends(ends);
        let valid = nodes.len() >= 2
            && tile < self.tiles.len()
            && nodes[0] == a
            && nodes[nodes.len() - 1] == b
            && nodes.iter().all(|&n| (n as usize) < self.map.nodes.len());
        if !valid {
            return Err(WorldError::NoRoute);
        }
        Ok(self.routes.add(&self.map, nodes, self.tiles[tile], ends))
    }

    /// What a route between towers `from` and `to` needs: `None` when it is stored, else the
    /// map's road nodes to route between (for a router elsewhere, e.g. a routing queue).
    pub fn route_needed(&self, from: u32, to: u32) -> Result<Option<(u32, u32)>, WorldError> {
        let ends = self.route_ends(from, to)?;
        if self.routes.find(ends.0, ends.1).is_some() {
            return Ok(None);
        }
        let (_, a, b) = self.local_ends(ends);
        Ok(Some((a, b)))
    }

    /// Stores the route `nodes` (the map's numbering) computed for towers `from` and `to`.
    pub fn add_route_between(
        &mut self,
        from: u32,
        to: u32,
        nodes: &[u32],
    ) -> Result<u32, WorldError> {
        let ends = self.route_ends(from, to)?;
        if let Some(r) = self.routes.find(ends.0, ends.1) {
            return Ok(r);
        }
        self.add_route(ends, nodes)
    }

    /// The route between towers `from` and `to`, computed now with `router` if not stored.
    pub fn connect(
        &mut self,
        router: &Router,
        calc: &mut PathCalculator,
        from: u32,
        to: u32,
    ) -> Result<u32, WorldError> {
        let ends = self.route_ends(from, to)?;
        if let Some(r) = self.routes.find(ends.0, ends.1) {
            return Ok(r);
        }
        let (_, a, b) = self.local_ends(ends);
        let nodes = router.route(calc, a, b).ok_or(WorldError::NoRoute)?;
        self.add_route(ends, &nodes)
    }

    /// A creep of `owner` setting off along `route` at `start_ms` at `speed` m/s.
    pub fn spawn(
        &mut self,
        owner: u32,
        route: u32,
        start_ms: u64,
        speed: f32,
    ) -> Result<u32, WorldError> {
        if route as usize >= self.routes.len() {
            return Err(WorldError::UnknownRoute(route));
        }
        if !(speed.is_finite() && speed > 0.0 && speed <= 100.0) {
            return Err(WorldError::BadSpeed);
        }
        if PLAYER_OWNERS.contains(&owner) {
            if self.creeps_of(owner) >= self.rules.max_creeps_per_player {
                return Err(WorldError::TooManyCreeps(self.rules.max_creeps_per_player));
            }
            self.holdings.entry(owner).or_default().creeps += 1;
        }
        let id = self
            .creeps
            .spawn(owner, route, start_ms, speed, self.rules.creep_hp);
        let i = id as usize;
        let driven = self.driven(i, self.now_ms);
        let pos = self
            .routes
            .position(route, driven, &mut self.creeps.cursor[i])
            .unwrap_or_else(|| self.routes.start_of(route));
        self.place(id, pos);
        Ok(id)
    }

    fn place(&mut self, id: u32, pos: Point) {
        let owner = self.creeps.owner[id as usize];
        let (cell, slot) = self.grid.insert(Entry { id, owner, pos });
        self.creeps.cell[id as usize] = cell;
        self.creeps.slot[id as usize] = slot;
    }

    fn unplace(&mut self, id: u32) {
        let i = id as usize;
        if let Some(moved) = self.grid.remove(self.creeps.cell[i], self.creeps.slot[i]) {
            self.creeps.slot[moved as usize] = self.creeps.slot[i];
        }
    }

    /// How far creep `id` has driven at `now_ms`, metres.
    fn driven(&self, id: usize, now_ms: u64) -> f32 {
        let ms = now_ms.saturating_sub(self.creeps.start_ms[id]);
        self.creeps.speed[id] * (ms as f32 / 1000.0)
    }

    /// Where creep `id` is at the shard's current time (`None`: dead or arrived).
    pub fn creep_pos(&self, id: u32) -> Option<Point> {
        let i = id as usize;
        if !self.creeps.is_alive(id) {
            return None;
        }
        let mut cursor = self.creeps.cursor[i];
        self.routes.position(
            self.creeps.route[i],
            self.driven(i, self.now_ms),
            &mut cursor,
        )
    }

    /// Advances the shard to `now_ms`: moves every creep (pays and removes those that
    /// arrived), then lets this tick's share of towers fire.
    pub fn tick(&mut self, now_ms: u64) -> TickReport {
        self.now_ms = now_ms.max(self.now_ms);
        self.tick_no += 1;
        let mut report = TickReport::default();
        for id in 0..self.creeps.slots() {
            if self.creeps.hp[id] == 0 {
                continue;
            }
            report.moved += 1;
            let driven = self.driven(id, self.now_ms);
            let route = self.creeps.route[id];
            match self
                .routes
                .position(route, driven, &mut self.creeps.cursor[id])
            {
                Some(pos) => {
                    let cell = self.grid.cell_of(pos);
                    if cell == self.creeps.cell[id] {
                        self.grid.update(cell, self.creeps.slot[id], pos);
                    } else {
                        report.crossed += 1;
                        self.unplace(id as u32);
                        self.place(id as u32, pos);
                    }
                }
                None => {
                    let km = self.routes.length(route) / 1000.0;
                    let reward = ((km * self.rules.reward_per_km as f32) as u32).max(1);
                    report.arrivals.push(Arrival {
                        owner: self.creeps.owner[id],
                        reward,
                        creep: self.creeps.public_id(id as u32),
                        start_ms: self.creeps.start_ms[id],
                    });
                    self.retire(id as u32);
                }
            }
        }
        let every = self.rules.attack_every();
        let first = (self.tick_no % every) as usize;
        for t in (first..self.towers.len()).step_by(every as usize) {
            report.queries += 1;
            let (pos, owner, level) = (
                self.towers.pos(t as u32),
                self.towers.owner[t],
                self.towers.level[t],
            );
            let range = self.rules.range_of(level);
            let Some(target) = self.find_enemy(pos, range, owner) else {
                continue;
            };
            report.shots += 1;
            let hp = &mut self.creeps.hp[target as usize];
            let damage = self.rules.damage_of(level);
            if *hp > damage {
                *hp -= damage;
            } else {
                report.kills += 1;
                self.retire(target);
            }
        }
        report
    }

    /// Ends a creep that arrived or was killed: an NPC's sets off again (with
    /// [`Rules::npc_respawn`]), anyone else's slot is freed.
    fn retire(&mut self, id: u32) {
        self.unplace(id);
        let i = id as usize;
        if self.rules.npc_respawn && NPC_OWNERS.contains(&self.creeps.owner[i]) {
            self.creeps.hp[i] = self.rules.creep_hp;
            self.creeps.start_ms[i] = self.now_ms;
            self.creeps.cursor[i] = 0;
            self.creeps.generation[i] = self.creeps.generation[i].wrapping_add(1);
            let start = self.routes.start_of(self.creeps.route[i]);
            self.place(id, start);
        } else {
            let owner = self.creeps.owner[i];
            if let Some(held) = self.holdings.get_mut(&owner) {
                held.creeps = held.creeps.saturating_sub(1);
            }
            self.creeps.free(id);
        }
    }

    /// The nearest creep not of `owner` within `range` of `pos` (ties: the lowest id), so the
    /// choice does not depend on the order of the grid's lists: a restored shard plays exactly
    /// as the live one would have.
    fn find_enemy(&self, pos: Point, range: f32, owner: u32) -> Option<u32> {
        let rect = Rect::from_corners(
            Point::new(pos.x - range, pos.y - range),
            Point::new(pos.x + range, pos.y + range),
        );
        let r2 = range * range;
        let mut best: Option<(f32, u32)> = None;
        self.grid.candidates(&rect, |e| {
            if e.owner == owner {
                return;
            }
            let d2 = e.pos.distance2(pos);
            if d2 <= r2 && best.is_none_or(|b| (d2, e.id) < b) {
                best = Some((d2, e.id));
            }
        });
        best.map(|(_, id)| id)
    }

    /// Everything inside `rect`: towers (ids) and live creeps (ids, with their positions as of
    /// the last tick).
    pub fn query(
        &self,
        rect: &Rect,
        mut tower: impl FnMut(u32),
        mut creep: impl FnMut(u32, Point),
    ) {
        self.tower_index.in_rect(rect, &mut tower);
        self.grid.candidates(rect, |e| {
            if rect.contains(e.pos) {
                creep(e.id, e.pos);
            }
        });
    }

    /// Towers within `radius` of `p`.
    pub fn towers_within(&self, p: Point, radius: f32, f: impl FnMut(u32)) {
        self.tower_index.within(p, radius, f);
    }

    /// Rebuilds what is derived from the persisted state: the grid, the cursors, the free
    /// list, the building → tower map and the tower index (after a restore).
    pub(crate) fn rebuild(&mut self) {
        self.creeps.rebuild_derived();
        self.place_creeps();
        self.player_owner = self
            .players
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, PLAYER_OWNERS.start + i as u32))
            .collect();
        self.building_tower = vec![NO_TOWER; self.building_count() as usize];
        for (t, &b) in self.towers.building.iter().enumerate() {
            if let Some(slot) = self.building_tower.get_mut(b as usize) {
                *slot = t as u32;
            }
        }
        self.holdings.clear();
        for (t, &owner) in self.towers.owner.iter().enumerate() {
            if PLAYER_OWNERS.contains(&owner) {
                self.holdings
                    .entry(owner)
                    .or_default()
                    .towers
                    .push(t as u32);
            }
        }
        for id in (0..self.creeps.slots() as u32).filter(|&id| self.creeps.is_alive(id)) {
            let owner = self.creeps.owner[id as usize];
            if PLAYER_OWNERS.contains(&owner) {
                self.holdings.entry(owner).or_default().creeps += 1;
            }
        }
        self.reindex_towers();
    }

    /// Puts every live creep where it is at the shard's time, in a fresh grid, setting its
    /// cursor, cell and slot.
    ///
    /// A position is a search over its route's points; visiting the creeps route by route
    /// keeps those points in cache, where id order would miss it at every step of every search
    /// (most of a restore's time at 10 M creeps). So the creeps are first sorted by route (a
    /// counting sort, carrying the distance each has driven, so the creeps' columns are read
    /// once, in order); then each is placed, its position kept in that order and its cell
    /// counted; then every cell is sized once and filled in the same order. A cell's order does
    /// not matter: a tower's target is chosen by distance, then id.
    fn place_creeps(&mut self) {
        let slots = self.creeps.slots();
        let live = |id: usize| self.creeps.is_alive(id as u32);
        let mut bounds = vec![0u32; self.routes.len() + 1];
        for id in (0..slots).filter(|&id| live(id)) {
            bounds[self.creeps.route[id] as usize + 1] += 1;
        }
        for r in 1..bounds.len() {
            bounds[r] += bounds[r - 1];
        }
        let mut next = bounds.clone();
        let mut by_route = vec![(0u32, 0f32); self.creeps.alive()];
        for id in (0..slots).filter(|&id| live(id)) {
            let at = &mut next[self.creeps.route[id] as usize];
            by_route[*at as usize] = (id as u32, self.driven(id, self.now_ms));
            *at += 1;
        }
        self.grid = Grid::new(self.area(), self.rules.cell_m);
        let mut counts = vec![0u32; self.grid.cell_count()];
        let mut placed = Vec::with_capacity(by_route.len());
        for (route, span) in bounds.windows(2).enumerate() {
            let route = route as u32;
            for &(id, driven) in &by_route[span[0] as usize..span[1] as usize] {
                let i = id as usize;
                let mut cursor = NO_CURSOR;
                let pos = self
                    .routes
                    .position(route, driven, &mut cursor)
                    .unwrap_or_else(|| self.routes.start_of(route));
                let cell = self.grid.cell_of(pos);
                self.creeps.cursor[i] = cursor;
                self.creeps.cell[i] = cell;
                counts[cell as usize] += 1;
                placed.push(pos);
            }
        }
        self.grid.reserve_counted(&counts);
        for (&(id, _), &pos) in by_route.iter().zip(&placed) {
            let i = id as usize;
            let entry = Entry {
                id,
                owner: self.creeps.owner[i],
                pos,
            };
            self.creeps.slot[i] = self.grid.insert_into(self.creeps.cell[i], entry);
        }
    }

    /// Bytes the shard's own state holds (not the shared map).
    pub fn heap_bytes(&self) -> usize {
        self.routes.heap_bytes()
            + self.towers.heap_bytes()
            + self.creeps.heap_bytes()
            + self.grid.heap_bytes()
            + self.tower_index.heap_bytes()
            + self.building_tower.capacity() * 4
    }
}

/// The box holding every tile's copy of the map.
fn area_of(map: &RoadMap, tiles: &[Point]) -> Rect {
    let shifted = |by: &Point| Rect {
        min: Point::new(map.bounds.min.x + by.x, map.bounds.min.y + by.y),
        max: Point::new(map.bounds.max.x + by.x, map.bounds.max.y + by.y),
    };
    tiles
        .iter()
        .map(shifted)
        .reduce(|a, b| a.union(&b))
        .unwrap_or(map.bounds)
}
