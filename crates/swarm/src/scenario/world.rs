//! The `world` step as the scenario file writes it: a player pans a viewport over a shard of
//! Muster's persistent world, claims buildings now and then, and receives the world's updates
//! (`steps::world` runs it).

use super::Seconds;

/// A `world` step, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct WorldStep {
    pub shard: u32,
    /// Where viewports start: around `center` (plane metres), within `spread_m`.
    pub center: (f32, f32),
    pub spread_m: f32,
    /// The viewport's side, metres.
    pub box_m: f32,
    /// The viewport moves by up to `pan_m` in a random direction every `pan_every_s`.
    pub pan_every_s: Seconds,
    pub pan_m: f32,
    /// A claim of a random building in `[0, buildings)` every `claim_every_s` (0: none).
    pub claim_every_s: Seconds,
    pub buildings: u32,
    pub duration_s: Seconds,
    pub timeout_s: Option<Seconds>,
}

/// The keys as read from the file, before validation (filled in by `parse.rs`).
#[derive(Debug, Default)]
pub struct RawWorldStep {
    pub shard: Option<u32>,
    pub center: Option<Vec<f64>>,
    pub spread_m: Option<f64>,
    pub box_m: Option<f64>,
    pub pan_every_s: Option<Seconds>,
    pub pan_m: Option<f64>,
    pub claim_every_s: Option<Seconds>,
    pub buildings: Option<u32>,
    pub duration_s: Option<Seconds>,
    pub timeout_s: Option<Seconds>,
}

impl RawWorldStep {
    pub fn build(self) -> Result<WorldStep, String> {
        let center = match self.center.as_deref() {
            None => (0.0, 0.0),
            Some([x, y]) if x.is_finite() && y.is_finite() => (*x as f32, *y as f32),
            Some(_) => return Err("`center` is two numbers, [x, y] in metres".into()),
        };
        let metres = |v: Option<f64>, default: f64, key: &str, min: f64| {
            let v = v.unwrap_or(default);
            if v.is_finite() && v >= min && v <= 100_000.0 {
                Ok(v as f32)
            } else {
                Err(format!("`{key}` must be between {min} and 100000 metres"))
            }
        };
        let buildings = self.buildings.unwrap_or(433);
        if buildings == 0 {
            return Err("`buildings` must be at least 1".into());
        }
        Ok(WorldStep {
            shard: self.shard.unwrap_or(0),
            center,
            spread_m: metres(self.spread_m, 500.0, "spread_m", 0.0)?,
            box_m: metres(self.box_m, 600.0, "box_m", 10.0)?,
            pan_every_s: self.pan_every_s.unwrap_or(Seconds(5.0)),
            pan_m: metres(self.pan_m, 150.0, "pan_m", 0.0)?,
            claim_every_s: self.claim_every_s.unwrap_or(Seconds(0.0)),
            buildings,
            duration_s: self.duration_s.ok_or("needs `duration_s`")?,
            timeout_s: self.timeout_s,
        })
    }
}
