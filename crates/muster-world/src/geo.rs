//! Where things are: a map's local plane in metres (x east, y north) from an origin in degrees,
//! and the boxes queries and areas of interest are made of.
//!
//! An equirectangular projection around the origin: within a city (tens of km) its error is a
//! fraction of a percent, and f32 metres keep centimetres over 100 km, at half the bytes of
//! f64 degrees (TDWorld's first saving).

use serde::{Deserialize, Serialize};

/// Metres per degree of latitude.
const M_PER_DEG_LAT: f64 = 110_540.0;
/// Metres per degree of longitude at the equator.
const M_PER_DEG_LON: f64 = 111_320.0;

/// A point on the plane, in metres.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Point {
    pub x: f32,
    pub y: f32,
}

impl Point {
    pub const fn new(x: f32, y: f32) -> Point {
        Point { x, y }
    }

    pub fn distance(self, other: Point) -> f32 {
        self.distance2(other).sqrt()
    }

    pub fn distance2(self, other: Point) -> f32 {
        let (dx, dy) = (self.x - other.x, self.y - other.y);
        dx * dx + dy * dy
    }
}

/// An axis-aligned box on the plane, `min` to `max` inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rect {
    pub min: Point,
    pub max: Point,
}

impl Rect {
    /// The box with these two corners, in any order.
    pub fn from_corners(a: Point, b: Point) -> Rect {
        Rect {
            min: Point::new(a.x.min(b.x), a.y.min(b.y)),
            max: Point::new(a.x.max(b.x), a.y.max(b.y)),
        }
    }

    pub fn contains(&self, p: Point) -> bool {
        p.x >= self.min.x && p.x <= self.max.x && p.y >= self.min.y && p.y <= self.max.y
    }

    pub fn width(&self) -> f32 {
        self.max.x - self.min.x
    }

    pub fn height(&self) -> f32 {
        self.max.y - self.min.y
    }

    /// The box grown by `by` metres on every side.
    pub fn grown(&self, by: f32) -> Rect {
        Rect {
            min: Point::new(self.min.x - by, self.min.y - by),
            max: Point::new(self.max.x + by, self.max.y + by),
        }
    }

    /// The smallest box holding both.
    pub fn union(&self, other: &Rect) -> Rect {
        Rect {
            min: Point::new(self.min.x.min(other.min.x), self.min.y.min(other.min.y)),
            max: Point::new(self.max.x.max(other.max.x), self.max.y.max(other.max.y)),
        }
    }
}

/// The projection between degrees and a map's plane.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    pub origin_lat: f64,
    pub origin_lon: f64,
}

impl Projection {
    pub fn new(origin_lat: f64, origin_lon: f64) -> Projection {
        Projection {
            origin_lat,
            origin_lon,
        }
    }

    fn m_per_deg_lon(&self) -> f64 {
        M_PER_DEG_LON * self.origin_lat.to_radians().cos()
    }

    /// Degrees to the plane.
    pub fn to_plane(&self, lat: f64, lon: f64) -> Point {
        Point::new(
            ((lon - self.origin_lon) * self.m_per_deg_lon()) as f32,
            ((lat - self.origin_lat) * M_PER_DEG_LAT) as f32,
        )
    }

    /// The plane to degrees, `(lat, lon)`.
    pub fn to_degrees(&self, p: Point) -> (f64, f64) {
        (
            self.origin_lat + f64::from(p.y) / M_PER_DEG_LAT,
            self.origin_lon + f64::from(p.x) / self.m_per_deg_lon(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projection_round_trips_and_measures_metres() {
        let helsinki = Projection::new(60.17, 24.94);
        let p = helsinki.to_plane(60.18, 24.96);
        let (lat, lon) = helsinki.to_degrees(p);
        assert!((lat - 60.18).abs() < 1e-6 && (lon - 24.96).abs() < 1e-6);
        // 0.01° of latitude is about 1.1 km.
        assert!((p.y - 1105.4).abs() < 1.0, "{p:?}");
        // 0.02° of longitude at 60.17° N: 0.02 × 111,320 m × cos 60.17° ≈ 1,107.5 m.
        assert!((p.x - 1107.5).abs() < 1.0, "{p:?}");
    }
}
