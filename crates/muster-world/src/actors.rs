//! Towers and creeps in packed columns (structure of arrays): a creep is about 40 bytes spread
//! over plain vectors, not an object with pointers, and a checkpoint writes each column as one
//! block.
//!
//! Owners are `u32`s: [`NPC_OWNERS`] are the seeded non-player factions, [`PLAYER_OWNERS`]
//! players (numbered per shard); 0 is nobody.

use std::ops::Range;

use crate::geo::Point;

/// Owner ids of the seeded NPC factions (they fight each other and everyone).
pub const NPC_OWNERS: Range<u32> = 1..17;

/// Owner ids of players, in the order they first acted in a shard (see `Shard::owner_of`).
pub const PLAYER_OWNERS: Range<u32> = 1_000..u32::MAX;

/// Towers: claimed buildings. A tower is never removed; its id is its index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Towers {
    pub x: Vec<f32>,
    pub y: Vec<f32>,
    pub owner: Vec<u32>,
    pub building: Vec<u32>,
    pub level: Vec<u8>,
}

impl Towers {
    pub fn len(&self) -> usize {
        self.owner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn pos(&self, id: u32) -> Point {
        Point::new(self.x[id as usize], self.y[id as usize])
    }

    pub(crate) fn push(&mut self, pos: Point, owner: u32, building: u32, level: u8) -> u32 {
        self.x.push(pos.x);
        self.y.push(pos.y);
        self.owner.push(owner);
        self.building.push(building);
        self.level.push(level);
        self.len() as u32 - 1
    }

    pub fn heap_bytes(&self) -> usize {
        (self.x.capacity() + self.y.capacity() + self.owner.capacity() + self.building.capacity())
            * 4
            + self.level.capacity()
    }
}

/// Creeps: each drives a route from its start time at its speed. A dead creep's slot (hp 0)
/// is reused by the next spawn, with its generation bumped, so ids stay small and stable.
#[derive(Debug, Clone, Default)]
pub struct Creeps {
    pub owner: Vec<u32>,
    pub route: Vec<u32>,
    /// When it set off, ms on the world's clock.
    pub start_ms: Vec<u64>,
    /// Metres per second.
    pub speed: Vec<f32>,
    /// Hit points; 0 is a free slot.
    pub hp: Vec<u16>,
    /// Bumped each time the slot is reused.
    pub generation: Vec<u16>,
    // Derived from the above, rebuilt on restore:
    /// The grid cell it is in, and its slot in that cell's list.
    pub(crate) cell: Vec<u32>,
    pub(crate) slot: Vec<u32>,
    /// The route segment it was last on.
    pub(crate) cursor: Vec<u32>,
    pub(crate) free: Vec<u32>,
    pub(crate) alive: usize,
}

impl Creeps {
    /// Slots, alive or free.
    pub fn slots(&self) -> usize {
        self.hp.len()
    }

    /// Creeps alive (a counter).
    pub fn alive(&self) -> usize {
        self.alive
    }

    pub fn is_alive(&self, id: u32) -> bool {
        self.hp.get(id as usize).is_some_and(|&hp| hp > 0)
    }

    /// The id clients see: generation and slot.
    pub fn public_id(&self, id: u32) -> u64 {
        (u64::from(self.generation[id as usize]) << 32) | u64::from(id)
    }

    /// A new creep (its grid place is set by the caller); returns its slot.
    pub(crate) fn spawn(
        &mut self,
        owner: u32,
        route: u32,
        start_ms: u64,
        speed: f32,
        hp: u16,
    ) -> u32 {
        self.alive += 1;
        if let Some(id) = self.free.pop() {
            let i = id as usize;
            self.owner[i] = owner;
            self.route[i] = route;
            self.start_ms[i] = start_ms;
            self.speed[i] = speed;
            self.hp[i] = hp.max(1);
            self.generation[i] = self.generation[i].wrapping_add(1);
            self.cursor[i] = 0;
            return id;
        }
        self.owner.push(owner);
        self.route.push(route);
        self.start_ms.push(start_ms);
        self.speed.push(speed);
        self.hp.push(hp.max(1));
        self.generation.push(0);
        self.cell.push(0);
        self.slot.push(0);
        self.cursor.push(0);
        self.hp.len() as u32 - 1
    }

    /// Frees a creep's slot (its grid entry is the caller's to remove first).
    pub(crate) fn free(&mut self, id: u32) {
        self.hp[id as usize] = 0;
        self.free.push(id);
        self.alive -= 1;
    }

    /// Rebuilds the derived columns after the persisted ones were restored.
    pub(crate) fn rebuild_derived(&mut self) {
        let n = self.hp.len();
        self.cell = vec![0; n];
        self.slot = vec![0; n];
        self.cursor = vec![0; n];
        self.free = (0..n as u32)
            .rev()
            .filter(|&i| self.hp[i as usize] == 0)
            .collect();
        self.alive = n - self.free.len();
    }

    pub fn heap_bytes(&self) -> usize {
        (self.owner.capacity()
            + self.route.capacity()
            + self.speed.capacity()
            + self.cell.capacity()
            + self.slot.capacity()
            + self.cursor.capacity()
            + self.free.capacity())
            * 4
            + self.start_ms.capacity() * 8
            + (self.hp.capacity() + self.generation.capacity()) * 2
    }
}

/// Two sets of creeps hold the same creeps when their persisted columns are equal.
impl PartialEq for Creeps {
    fn eq(&self, other: &Creeps) -> bool {
        self.owner == other.owner
            && self.route == other.route
            && self.start_ms == other.start_ms
            && self.speed == other.speed
            && self.hp == other.hp
            && self.generation == other.generation
    }
}
