//! The bundled list of city centres with their populations (`data/cities.csv`): seeding places
//! NPC towers and creeps per city in proportion to its population.

use serde::Serialize;

/// One city: its name, centre in degrees and population.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct City {
    pub name: String,
    pub lat: f64,
    pub lon: f64,
    pub population: u64,
}

const CITIES: &str = include_str!("../../data/cities.csv");

/// Every bundled city, in file order.
pub fn bundled() -> Vec<City> {
    CITIES
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|line| {
            let mut f = line.split(',');
            Some(City {
                name: f.next()?.to_string(),
                lat: f.next()?.parse().ok()?,
                lon: f.next()?.parse().ok()?,
                population: f.next()?.parse().ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_bundled_line_parses() {
        let data_lines = super::CITIES
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .count();
        let cities = super::bundled();
        assert_eq!(cities.len(), data_lines);
        assert!(cities.iter().any(|c| c.name == "Helsinki"));
        assert!(cities
            .iter()
            .all(|c| c.population > 0 && c.lat.abs() <= 90.0));
    }
}
