//! Areas of interest: what one client sees of a shard, a box, and the updates that keep it in
//! sync — a snapshot first, then at each update the creeps in view with their positions, the
//! towers that entered the view or changed, and what left.
//!
//! Hysteresis at the box's edge: a creep or tower enters the view only inside the box, and
//! leaves only once it is outside the box grown by `margin` (or dead), so something driving
//! along the edge does not flicker in and out.
//!
//! The view remembers what it last *sent*, so an update that was skipped (the client was slow;
//! its queue keeps only the newest state) loses nothing: the next update is computed against
//! what the client actually has.

use std::collections::{HashMap, HashSet};

use crate::geo::{Point, Rect};
use crate::shard::Shard;
use crate::WorldError;

/// A tower as a client sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TowerView {
    pub id: u32,
    pub pos: Point,
    pub owner: u32,
    pub level: u8,
}

/// A creep as a client sees it (`id`: generation and slot, never reused).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CreepView {
    pub id: u64,
    pub pos: Point,
    pub owner: u32,
}

/// One update for a client.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Update {
    /// The whole view (the first update, and after the box moved), or changes since the last.
    pub snapshot: bool,
    pub tick_no: u64,
    pub now_ms: u64,
    /// Towers that entered the view or changed owner or level.
    pub towers: Vec<TowerView>,
    /// Every creep in view, with its position now.
    pub creeps: Vec<CreepView>,
    /// Creeps and towers that left the view (or died) since the last update.
    pub gone_creeps: Vec<u64>,
    pub gone_towers: Vec<u32>,
}

/// What one client sees.
#[derive(Debug, Clone)]
pub struct View {
    rect: Rect,
    margin: f32,
    snapshot_due: bool,
    creeps: HashSet<u64>,
    towers: HashMap<u32, (u32, u8)>,
}

impl View {
    /// A view of `rect` with `margin` metres of hysteresis; refused when a side is longer than
    /// `max_side` or the box is not a box.
    pub fn new(rect: Rect, margin: f32, max_side: f32) -> Result<View, WorldError> {
        check(&rect, max_side)?;
        Ok(View {
            rect,
            margin: margin.max(0.0),
            snapshot_due: true,
            creeps: HashSet::new(),
            towers: HashMap::new(),
        })
    }

    pub fn rect(&self) -> Rect {
        self.rect
    }

    /// Moves the view (panning): the next update is a snapshot of the new box, with what is no
    /// longer in view listed as gone.
    pub fn move_to(&mut self, rect: Rect, max_side: f32) -> Result<(), WorldError> {
        check(&rect, max_side)?;
        self.rect = rect;
        self.snapshot_due = true;
        Ok(())
    }

    /// The update that brings the client from what it was last sent to the shard as it is now.
    pub fn update(&mut self, shard: &Shard) -> Update {
        let snapshot = std::mem::take(&mut self.snapshot_due);
        let outer = self.rect.grown(self.margin);
        // One walk of both indexes over the box grown by the margin. Creeps: in the box, or
        // known and still within the margin. Towers: those entering (in the box) or changed
        // since sent; the others known are kept while within the margin.
        let mut seen = HashSet::with_capacity(self.creeps.len());
        let mut towers = HashMap::with_capacity(self.towers.len());
        let (mut creep_views, mut tower_views) = (Vec::new(), Vec::new());
        shard.query(
            &outer,
            |t| {
                let pos = shard.towers.pos(t);
                let state = (
                    shard.towers.owner[t as usize],
                    shard.towers.level[t as usize],
                );
                let known = self.towers.get(&t);
                if known.is_none() && !self.rect.contains(pos) {
                    return;
                }
                if snapshot || known != Some(&state) {
                    tower_views.push(TowerView {
                        id: t,
                        pos,
                        owner: state.0,
                        level: state.1,
                    });
                }
                towers.insert(t, state);
            },
            |id, pos| {
                let public = shard.creeps.public_id(id);
                if self.rect.contains(pos) || self.creeps.contains(&public) {
                    seen.insert(public);
                    creep_views.push(CreepView {
                        id: public,
                        pos,
                        owner: shard.creeps.owner[id as usize],
                    });
                }
            },
        );
        let mut gone_creeps: Vec<u64> = self.creeps.difference(&seen).copied().collect();
        let mut gone_towers: Vec<u32> = self
            .towers
            .keys()
            .filter(|t| !towers.contains_key(t))
            .copied()
            .collect();
        gone_creeps.sort_unstable();
        gone_towers.sort_unstable();
        creep_views.sort_unstable_by_key(|c| c.id);
        tower_views.sort_unstable_by_key(|t| t.id);
        self.creeps = seen;
        self.towers = towers;
        Update {
            snapshot,
            tick_no: shard.tick_no,
            now_ms: shard.now_ms,
            towers: tower_views,
            creeps: creep_views,
            gone_creeps,
            gone_towers,
        }
    }
}

fn check(rect: &Rect, max_side: f32) -> Result<(), WorldError> {
    let finite = [rect.min.x, rect.min.y, rect.max.x, rect.max.y]
        .iter()
        .all(|v| v.is_finite());
    // A box with no area is what a request without its corners reads as (every corner 0):
    // refused, rather than served as an empty view at the origin.
    if !finite || rect.width() <= 0.0 || rect.height() <= 0.0 {
        return Err(WorldError::BadBox(
            "its corners must be finite numbers with min < max (min_x, min_y, max_x, max_y)".into(),
        ));
    }
    if rect.width() > max_side || rect.height() > max_side {
        return Err(WorldError::BadBox(format!(
            "{:.0} × {:.0} m is larger than the {max_side:.0} m a side allowed",
            rect.width(),
            rect.height()
        )));
    }
    Ok(())
}
